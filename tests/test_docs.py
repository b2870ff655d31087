"""Docs that cannot lie: every ``psbench`` command in ``docs/`` and the README composes, the generated reference
pages list exactly what the code declares, the README's picture is what the code draws, and a broken link fails
the strict site build.

A command is a line of a ```` ```bash ```` block (``\\`` continues it) whose words start with ``psbench`` or
``python -m psbench``; ```` ```text ```` blocks are shown, except a ``$ psbench …`` line of one: a command shown
failing, which must fail with the very error line shown under it. Before it is composed:

* ``$VAR`` takes the value an ``export VAR=…`` of the same block gives it, else the word ``VAR``;
* a ``<placeholder>`` standing alone (``psbench <same overrides> …``) and a bare ``…`` are dropped (they stand for
  the reader's other overrides); a ``<placeholder>`` inside a value (``resume=<run dir>``) becomes an existing
  scratch directory, and a ``…`` inside a value the letter ``x``;
* ``-m`` expands Hydra's sweeps (``a,b``, ``choice``, ``range``; an ``interval``'s two ends) so that every value of
  every sweep is composed at least once; without ``-m`` a sweep is refused, as Hydra refuses it;
* ``--config-dir`` adds that directory (relative to the repository) to the search path, as Hydra's flag does.

Each is then composed with Hydra's compose API in-process (psbench's search path, launcher configs and resolvers)
and every key is checked against its declaration (:func:`psbench.validate.validate_keys`: unknown keys, types,
ranges); what only a run can tell (data files, the store, the machine) is not. Any other flag, a missing config dir
or a composition error fails the test.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
README = REPO / "README.md"


def _hooks():
    spec = importlib.util.spec_from_file_location("psbench_docs", DOCS / "hooks" / "psbench_docs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as MkDocs loads it (its dataclass looks its module up)
    spec.loader.exec_module(module)
    return module


hooks = _hooks()


def _pages() -> list[Path]:
    return [README, *sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.parts)]


# ------------------------------------------------------------------------------------------------- the commands
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")


def fenced_blocks(path: Path):
    """(language, first line number, lines) of every fenced block of a Markdown file."""
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m:
            start, lang, body = i + 1, m[2], []
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            yield lang, start + 1, body
        i += 1


def _is_psbench(words: list[str]) -> bool:
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):  # VAR=value psbench …
        words = words[1:]
    return bool(words) and (
        words[0] == "psbench"
        or (
            re.fullmatch(r"python(3(\.\d+)?)?", words[0]) is not None
            and words[1:3] in (["-m", "psbench"], ["-m", "psbench.cli"])
        )
    )


def commands_of(path: Path) -> list[tuple[str, str, dict[str, str]]]:
    """(where, command line, the block's exports) of every psbench command in the bash blocks of ``path``."""
    out = []
    for lang, start, body in fenced_blocks(path):
        if lang != "bash":
            continue
        env: dict[str, str] = {}
        logical, first = "", None
        for n, line in enumerate(body, start):
            first = n if not logical else first
            if line.rstrip().endswith("\\"):
                logical += line.rstrip()[:-1] + " "
                continue
            logical += line
            m = re.match(r"^\s*export\s+([A-Za-z_]\w*)=(\S+)", logical)
            if m:
                env[m[1]] = m[2]
            for part in re.split(r"\s*(?:&&|\|\||;)\s*", logical):
                try:
                    words = shlex.split(part, comments=True)
                except ValueError:
                    words = []
                if _is_psbench(words):
                    out.append((f"{path.relative_to(REPO)}:{first}", part.strip(), dict(env)))
            logical = ""
    return out


def all_commands() -> list[tuple[str, str, dict[str, str]]]:
    return [c for page in _pages() for c in commands_of(page)]


def test_the_command_finder_finds_the_commands_of_every_page():
    """The parser itself: the README's install command, its five examples and its five own-model commands, a
    multi-line command, exports."""
    readme = [c for where, c, _ in commands_of(README)]
    assert len(readme) == 11 and readme[0].endswith("psbench")
    assert "psbench -m hparams_search=rudra_pareto" in readme
    cluster = commands_of(DOCS / "how-to" / "cluster.md")
    [(_, line, env)] = [c for c in cluster if "rudra_pareto" in c[1]]
    assert "logger.tracking_uri=$MLFLOW" in line and env["MLFLOW"] == "http://mlflow.example.org:5000"
    assert len(all_commands()) >= 40


def test_no_psbench_command_hides_in_an_unlabelled_block():
    """A block is ``bash`` (checked) or ``text`` (shown): a psbench command in any other block would be neither."""
    hidden = [
        f"{page.relative_to(REPO)}:{start}"
        for page in _pages()
        for lang, start, body in fenced_blocks(page)
        if lang not in ("bash", "text", "python") and any(re.match(r"\s*psbench\s", ln) for ln in body)
    ]
    assert hidden == []


def _substitute(line: str, env: dict[str, str], scratch: Path) -> list[str]:
    line = re.sub(r"\$\{?([A-Za-z_]\w*)\}?", lambda m: env.get(m[1], m[1]), line)
    line = re.sub(r"(?<!\S)<[^<>\n]*>(?!\S)", " ", line)  # a placeholder standing alone
    line = re.sub(r"<[^<>\n]*>", str(scratch), line)  # a placeholder inside a value
    words = [w for w in shlex.split(line, comments=True) if w not in ("…", "...")]
    return [w.replace("…", "x") for w in words]


def _split(words: list[str]) -> tuple[list[str], bool, str | None]:
    """(overrides, multirun, config dir) of a psbench command's words; an unknown flag raises."""
    words = words[words.index("psbench") + 1 :] if "psbench" in words else words[words.index("-m") + 2 :]
    overrides, multirun, config_dir = [], False, None
    it = iter(words)
    for w in it:
        if w in ("-m", "--multirun"):
            multirun = True
        elif w in ("--config-dir", "-cd"):
            config_dir = next(it)
        elif w in ("--cfg", "-c"):
            assert next(it) in ("job", "hydra", "all"), f"--cfg takes job, hydra or all: {words}"
        elif w in ("--help", "-h", "--hydra-help", "--info"):
            pass
        elif w.startswith("-"):
            raise AssertionError(f"a flag the docs test does not know: {w}")
        else:
            overrides.append(w)
    return overrides, multirun, config_dir


def _jobs(overrides: list[str], multirun: bool) -> list[list[str]]:
    """The override lists to compose: one, or (with ``-m``) enough of the sweep's jobs that every value of every
    sweep is composed once."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import IntervalSweep

    parsed = OverridesParser.create().parse_overrides(overrides)
    sweeps: list[list[str]] = []
    for text, o in zip(overrides, parsed, strict=True):
        if multirun and o.is_sweep_override():
            lhs = text.split("=", 1)[0]
            if isinstance(o.value(), IntervalSweep):
                iv = o.value()
                values = [str(iv.start), str(iv.end)] if "int" not in text else [str(int(iv.start)), str(int(iv.end))]
            else:
                values = list(o.sweep_string_iterator())
            sweeps.append([f"{lhs}={v}" for v in values])
        else:
            sweeps.append([text])
    n = max(len(s) for s in sweeps) if sweeps else 1
    return [[s[i % len(s)] for s in sweeps] for i in range(n)]


def compose(overrides: list[str], config_dir: str | None, scratch: Path):
    """Compose psbench's config as the psbench command would (``--config-dir`` included), without running it."""
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path
    from hydra.core.config_search_path import SearchPathQuery
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode
    from omegaconf import open_dict

    from psbench.cli import CONF_DIR, check_launcher

    check_launcher(overrides)
    search_path = create_config_search_path(str(CONF_DIR))
    if config_dir is not None:
        path = (REPO / config_dir).resolve()
        assert path.is_dir(), f"--config-dir {config_dir}: no such directory in the repository"
        search_path.prepend(provider="command-line", path=f"file://{path}", anchor=SearchPathQuery(provider="schema"))
    GlobalHydra.instance().clear()
    Hydra.create_main_hydra2(task_name="psbench", config_search_path=search_path)
    try:
        base = [f"paths.root_dir={scratch}", f"paths.output_dir={scratch / 'run'}"]
        cfg = GlobalHydra.instance().hydra.compose_config(
            "config", base + overrides, run_mode=RunMode.RUN, with_log_configuration=False
        )
    finally:
        GlobalHydra.instance().clear()
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg


@pytest.mark.parametrize(
    "where,line,env",
    all_commands(),
    ids=lambda v: v if isinstance(v, str) and re.match(r"^[\w./-]+\.md:\d+$", v) else "",
)
def test_every_psbench_command_in_the_docs_composes(where, line, env, tmp_path):
    from psbench.validate import validate_keys

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    overrides, multirun, config_dir = _split(_substitute(line, env, scratch))
    for job in _jobs(overrides, multirun):
        cfg = compose(job, config_dir, scratch)
        validate_keys(cfg)


def test_a_renamed_key_or_a_bad_value_in_a_docs_command_fails_the_check(tmp_path):
    """The check above would catch a command that no longer composes, a key out of range, a sweep without -m."""
    from psbench.errors import ConfigError
    from psbench.validate import validate_keys

    with pytest.raises(Exception, match=r"protocol\.nn|Could not override"):
        compose(["protocol=softsync", "protocol.nn=4"], None, tmp_path)
    with pytest.raises(ConfigError, match="learners=0"):
        validate_keys(compose(["learners=0"], None, tmp_path))
    with pytest.raises(Exception, match=r"Ambiguous value|sweep"):
        compose(_jobs(["learners=2,4"], multirun=False)[0], None, tmp_path)
    with pytest.raises(AssertionError, match="no such directory"):
        compose([], "no/such/conf", tmp_path)
    assert _jobs(["learners=2,4", "protocol=hardsync,async,ssp", "seed=1"], multirun=True) == [
        ["learners=2", "protocol=hardsync", "seed=1"],
        ["learners=4", "protocol=async", "seed=1"],
        ["learners=2", "protocol=ssp", "seed=1"],
    ]


# ------------------------------------------------------------------------------------------------- the reference
def test_the_config_reference_lists_every_declared_key_and_nothing_else():
    """Every key psbench.schema declares, under the options that declare it; no key it does not declare."""
    page = (DOCS / "reference" / "config.md").read_text()
    assert "<!-- psbench:config-reference -->" in page.splitlines()
    listed = hooks.listed_keys(hooks.config_reference())
    declared = {}
    for group, keys in hooks.declared().items():
        for path, by_option in keys.items():
            declared[f"{group}.{path}" if group else path] = frozenset(o for o in by_option if o)
    assert listed == declared


def test_the_config_reference_shows_each_options_default_and_comment():
    text = hooks.config_reference()
    row = next(r for r in text.splitlines() if r.startswith("| `protocol.n` |"))
    assert "| softsync |" in row and "| `1` |" in row and "splitting parameter" in row
    row = next(r for r in text.splitlines() if r.startswith("| `hardware.jitter_cv` |"))
    assert "p775_cluster: `0.1226`" in row and "laptop, p775: `0.05`" in row


def test_the_summary_reference_lists_every_field_with_its_comment():
    """summary.json's keys, in RunSummary's order, each with the comment of its field (a field without one fails)."""
    from psbench.summary import FIELDS

    page = (DOCS / "reference" / "summary.md").read_text()
    assert "<!-- psbench:summary-reference -->" in page.splitlines()
    text = hooks.summary_reference()
    rows = re.findall(r"^\| `(\w+)` \| (.*) \|$", text, re.M)
    assert [name for name, _ in rows] == list(FIELDS)
    assert [name for name, meaning in rows if not meaning.strip()] == []


def test_the_sweeper_reference_lists_every_key_of_its_config():
    import dataclasses

    from hydra_plugins.psbench_optuna_sweeper.config import PsbenchOptunaSweeperConf, SamplerConf

    keys = [
        f"hydra.sweeper.{f.name}"
        for f in dataclasses.fields(PsbenchOptunaSweeperConf)
        if not f.name.startswith("_") and f.name != "sampler"
    ]
    keys += [f"hydra.sweeper.sampler.{f.name}" for f in dataclasses.fields(SamplerConf)]
    rows = re.findall(r"^\| `([\w.]+)` \| .* \| (.*) \|$", hooks.sweeper_reference(), re.M)
    assert [k for k, _ in rows] == keys
    assert [k for k, meaning in rows if not meaning.strip()] == []


def test_the_generated_blocks_are_known_and_an_unknown_one_fails_the_build():
    markers = {m for page in _pages() for m in hooks.MARKER.findall(page.read_text())}
    assert markers == set(hooks.GENERATED)

    class Page:
        class file:
            src_uri = "x.md"

    with pytest.raises(ValueError, match="unknown generated block"):
        hooks.on_page_markdown("<!-- psbench:no-such-block -->\n", Page, None, None)


def test_sphinx_roles_in_docstrings_render_as_code():
    html = "see :class:<code>~psbench.ps.trace.Trace</code> and :func:<code>build_run</code>"
    assert hooks.on_page_content(html, None, None, None) == "see <code>Trace</code> and <code>build_run</code>"


# ------------------------------------------------------------------------------------------------- the README
def test_the_readme_is_short_and_starts_with_the_two_quick_start_commands():
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    sections = re.findall(r"^## (.*)$", text, re.M)
    assert sections[0] == "Quick start"
    quick = text[text.index("\n## Quick start\n") :]
    quick = quick[: quick.index("\n## ", 1)]
    assert len(re.findall(r"^```bash$", quick, re.M)) == 2


def test_the_readme_picture_is_what_the_code_draws_now():
    """docs/assets/timeline_softsync.png (shown on GitHub without building the site) equals a fresh drawing, pixel
    for pixel. Redraw it with: python -m psbench.ps.timeline --out /tmp/t && cp /tmp/t/timeline_softsync.png
    docs/assets/"""
    import numpy as np
    from PIL import Image

    assert "(docs/assets/timeline_softsync.png)" in README.read_text()
    fresh = hooks.concept_pngs()["timeline_softsync.png"]
    committed = DOCS / "assets" / "timeline_softsync.png"
    import io

    a = np.asarray(Image.open(committed).convert("RGBA"))
    b = np.asarray(Image.open(io.BytesIO(fresh)).convert("RGBA"))
    assert a.shape == b.shape and np.array_equal(a, b), "the README's picture is stale: redraw it (see docstring)"


# ------------------------------------------------------------------------------------------------- the build
def test_the_strict_build_fails_on_a_broken_link_and_on_nothing_else(tmp_path):
    """The site built from a copy of docs/ with one broken link: mkdocs build --strict exits non-zero, and its one
    warning is that link (so the rest of the site, generated pages included, builds clean)."""
    import shutil

    import yaml

    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs, ignore=shutil.ignore_patterns("__pycache__"))
    page = docs / "concepts" / "protocols.md"
    page.write_text(page.read_text() + "\nSee [the missing page](no-such-page.md).\n")
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    config.update(docs_dir=str(docs), site_dir=str(tmp_path / "site"), hooks=[str(DOCS / "hooks" / "psbench_docs.py")])
    config["plugins"][1]["mkdocstrings"]["handlers"]["python"]["paths"] = [str(REPO / "src")]
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config, allow_unicode=True))
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    res = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(tmp_path / "mkdocs.yml")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    out = res.stdout + res.stderr
    assert res.returncode != 0, out[-3000:]
    warnings = [ln for ln in out.splitlines() if ln.startswith("WARNING")]
    assert len(warnings) == 1 and "no-such-page.md" in warnings[0], out[-3000:]
    assert "Aborted with 1 warnings in strict mode" in out, out[-3000:]


def transcripts() -> list[tuple[str, str, str]]:
    """(where, command, the error line shown under it) of every ``$ psbench …`` of a ``text`` block: a command shown
    failing, with what psbench prints."""
    out = []
    for page in _pages():
        for lang, start, body in fenced_blocks(page):
            for i, ln in enumerate(body):
                if lang == "text" and ln.startswith("$ psbench ") and i + 1 < len(body):
                    out.append((f"{page.relative_to(REPO)}:{start + i}", ln[2:], body[i + 1]))
    return out


@pytest.mark.parametrize("where,line,shown", transcripts())
def test_a_shown_error_is_the_error_psbench_prints(where, line, shown, tmp_path):
    """A command the docs show failing fails with the very line shown (the real checks, as the CLI runs them)."""
    from psbench import console
    from psbench.errors import ConfigError, DataError
    from psbench.validate import validate

    overrides, multirun, config_dir = _split(_substitute(line, {}, tmp_path))
    assert not multirun
    with pytest.raises((ConfigError, DataError)) as err:
        validate(compose(overrides, config_dir, tmp_path))
    assert f"psbench: error: {console.error_message(err.value)}" == shown


def test_the_docs_show_a_failing_command():
    assert [where for where, _, _ in transcripts()] == ["docs/concepts/checks.md:7"]


def test_a_yaml_shown_from_a_file_of_the_repository_says_what_the_file_says():
    """A ```` ```yaml ```` block whose first line names a file (``# examples/…/resnet20.yaml``) shows some of its keys:
    each with the file's value."""
    import yaml

    shown = 0
    for page in _pages():
        for lang, start, body in fenced_blocks(page):
            m = re.match(r"^# ([\w./-]+\.yaml)$", body[0]) if lang == "yaml" and body else None
            if m:
                path = REPO / m[1]
                assert path.is_file(), f"{page.relative_to(REPO)}:{start}: no file {m[1]}"
                block, file = yaml.safe_load("\n".join(body)), yaml.safe_load(path.read_text())
                assert {k: file.get(k) for k in block} == block, f"{page.relative_to(REPO)}:{start}"
                shown += 1
    assert shown >= 1
