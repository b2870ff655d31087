"""MkDocs hooks (``mkdocs.yml``: ``hooks:``): the parts of the site generated from the code at build time.

* A page line ``<!-- psbench:NAME -->`` is replaced by :data:`GENERATED` ``[NAME]()``: the config reference from
  the ``psbench.schema`` declarations (:func:`config_reference`), ``summary.json``'s keys from
  :class:`psbench.summary.RunSummary` (:func:`summary_reference`), the Optuna sweeper's keys
  (:func:`sweeper_reference`), the presets (:func:`presets_reference`), the commands' ``--help``
  (:func:`cli_reference`) and the paper entry points (``sweeps/entries.yaml``: :func:`paper_entries`). An unknown
  NAME fails the build.
* The protocols' timelines (:func:`psbench.ps.timeline.concept_pictures`) are drawn once per build and served
  as ``assets/generated/timeline_<protocol>.png``; nothing is written into ``docs/``.
* Docstrings use Sphinx roles (``:class:`Trace```): the API pages show them as code.

Everything here is deterministic (sorted declarations, PNGs without metadata, ``--help`` at a fixed width), so
two builds of one commit give the same pages.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
CONF = REPO / "src" / "psbench" / "conf"
MARKER = re.compile(r"^<!-- psbench:([\w-]+) -->$", re.M)
#: where the generated pictures are served, relative to docs/
PICTURES = "assets/generated"


# ------------------------------------------------------------------------------------------- YAML comments
@dataclasses.dataclass(frozen=True)
class Notes:
    """An option file's leading comment (what the option is) and, per key path, its raw value and comment."""

    header: str
    values: Mapping[str, str]
    comments: Mapping[str, str]


def _split_comment(rest: str) -> tuple[str, str]:
    m = re.search(r"(^|\s)#\s?", rest)
    return (rest[: m.start()].strip(), rest[m.end() :].strip()) if m else (rest.strip(), "")


@cache
def yaml_notes(path: Path) -> Notes:
    """Read ``path`` line by line: a key's comment is its inline ``# …`` (continued on comment lines whose ``#``
    stands in the same column), else the comment lines right above it. The comment lines above a file's first
    key ``name`` (or ``defaults``) are the file's header."""
    header: list[str] = []
    values: dict[str, str] = {}
    comments: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    pending: list[str] = []
    last: tuple[str, int] | None = None  # the last key with an inline comment, and the comment's column
    first = True
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if not stripped:
            pending, last = [], None
            continue
        if stripped.startswith("#"):
            text = stripped.lstrip("#").strip()
            if last is not None and line.index("#") == last[1]:
                comments[last[0]] += " " + text
            else:
                pending.append(text)
                last = None
            continue
        m = re.match(r"^(\s*)([\w-]+):(\s.*|)$", line)
        if m is None:  # a list item or a continuation
            last = None
            continue
        indent, key = len(m[1]), m[2]
        value, comment = _split_comment(m[3])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        keypath = ".".join([k for _, k in stack] + [key])
        stack.append((indent, key))
        if first and key in ("name", "defaults"):
            header, pending = pending, []
        first = False
        values[keypath] = value
        if comment or pending:
            comments[keypath] = comment or " ".join(pending)
        last = (keypath, m.start(3) + m[3].index("#")) if comment else None
        pending = []
    return Notes(" ".join(header), values, comments)


# ------------------------------------------------------------------------------------------- Markdown
def cell(text: Any) -> str:
    """``text`` safe inside a Markdown table cell (no pipes, no HTML tags, no emphasis, no braces: attr_list would
    take a trailing ``{a: b}`` for attributes and drop it)."""
    s = str(text)
    for a, b in (
        ("&", "&amp;"),
        ("<", "&lt;"),
        (">", "&gt;"),
        ("|", "\\|"),
        ("*", "\\*"),
        ("_", "\\_"),
        ("{", "&#123;"),
        ("}", "&#125;"),
    ):
        s = s.replace(a, b)
    return s.replace("\n", " ")


def code(text: Any) -> str:
    s = str(text).replace("|", "\\|")
    return f"`` {s} ``" if "`" in s else f"`{s}`"


def table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


# ------------------------------------------------------------------------------------------- config reference
def flat_keys(keys: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted path, :class:`psbench.schema.Key`) of every leaf of an option's declared keys."""
    from psbench.schema import Key

    for k, v in keys.items():
        if isinstance(v, Key):
            yield prefix + k, v
        else:
            yield from flat_keys(v, f"{prefix}{k}.")


def declared() -> dict[str, dict[str, Any]]:
    """What ``psbench.schema`` declares: ``{"": TOP keys, group: {key path: {option: Key}}}``."""
    from psbench.validate import GROUPS, TOP

    out: dict[str, dict[str, Any]] = {"": {k: {"": v} for k, v in TOP.items()}}
    for group, spec in GROUPS.items():
        keys: dict[str, dict[str, Any]] = {}
        for option, option_keys in spec.options.items():
            for path, key in flat_keys(option_keys):
                keys.setdefault(path, {})[option] = key
        out[group] = keys
    return out


def default_options() -> dict[str, str]:
    """The option ``conf/config.yaml``'s defaults list picks for each group."""
    top = yaml.safe_load((CONF / "config.yaml").read_text())
    return {k: v for d in top["defaults"] if isinstance(d, dict) for k, v in d.items()}


def _default(group: str, option: str, path: str) -> str:
    notes = yaml_notes(CONF / group / f"{option}.yaml")
    return code(notes.values[path]) if notes.values.get(path) else f"not in the file: `+{group}.{path}=…`"


def _by_option(values: dict[str, str], options: list[str]) -> str:
    """One value when the options agree, else one line per value naming its options (``the others`` for the most
    common value when it is shared by more than three)."""
    groups: dict[str, list[str]] = {}
    for o, v in values.items():
        groups.setdefault(v, []).append(o)
    if len(groups) == 1:
        return next(iter(groups))
    common = max(groups, key=lambda v: len(groups[v]))
    lines = [f"{', '.join(os_)}: {v}" for v, os_ in groups.items() if v != common or len(groups[v]) <= 3]
    return "<br>".join(lines + ([f"the others: {common}"] if len(groups[common]) > 3 else []))


def _which(has: list[str], options: list[str]) -> str:
    """The options that have a key: ``all``, ``all but a, b`` or ``a, b``."""
    if len(has) == len(options):
        return "all"
    missing = [o for o in options if o not in has]
    if len(has) > 3 and len(missing) <= 2:
        return "all but " + ", ".join(missing)
    return ", ".join(has)


def _meaning(group: str, has: list[str], path: str) -> str:
    """The key's comment in its options' files: the one most of them give (the longest of a tie)."""
    found = [c for o in has if (c := yaml_notes(CONF / group / f"{o}.yaml").comments.get(path))]
    return max(found, key=lambda c: (found.count(c), len(c))) if found else ""


def first_sentence(text: str) -> str:
    """Up to the first full stop that ends a sentence: outside parentheses, not after "et al", "e.g", "vs", …"""
    for m in re.finditer(r"\.(\s|$)", text):
        head = text[: m.start()]
        if head.count("(") == head.count(")") and not re.search(r"(\bal|e\.g|i\.e|\bvs|\bcf|\b[A-Z])$", head):
            return head + "."
    return text


def config_reference() -> str:
    """Every config group, option and key that ``psbench.schema`` declares, with what is allowed (the Key's
    words), the default (the option files) and the meaning (their comments)."""
    from psbench.validate import GROUPS

    decl = declared()
    chosen = default_options()
    top = yaml_notes(CONF / "config.yaml")
    rows = [
        [
            code(k),
            cell(by[""].allowed),
            code(top.values[k]) if top.values.get(k) else "null",
            cell(top.comments.get(k, "")),
        ]
        for k, by in decl[""].items()
    ]
    out = [
        "## Top level",
        "",
        "The keys of `conf/config.yaml` itself: `learners=30`, `seed=1`, …",
        "",
        table(["key", "allowed", "default", "meaning"], rows),
    ]
    for group, spec in GROUPS.items():
        options = list(spec.options)
        out += ["", f"## `{group}`", ""]
        lines = []
        for o in options:
            header = yaml_notes(CONF / group / f"{o}.yaml").header
            mark = " (default)" if chosen.get(group) == o else ""
            lines.append(f"- `{group}={o}`{mark}" + (f": {cell(first_sentence(header))}" if header else ""))
        out += [*lines, ""]
        if not decl[group]:
            out.append("No keys besides the option's name.")
            continue
        rows = []
        for path, by in decl[group].items():
            has = [o for o in options if o in by]
            allowed = _by_option({o: cell(by[o].allowed) for o in has}, has)
            default = _by_option({o: _default(group, o, path) for o in has}, has)
            meaning = _meaning(group, has, path)
            rows.append([code(f"{group}.{path}"), _which(has, options), allowed, default, cell(meaning)])
        out.append(table(["key", "options", "allowed", "default", "meaning"], rows))
    return "\n".join(out) + "\n"


def listed_keys(markdown: str) -> dict[str, frozenset[str]]:
    """The keys a generated config reference lists: ``{key path: options}`` (``all`` expanded; top-level keys
    with no options). What the reference test compares with :func:`declared`."""
    from psbench.validate import GROUPS

    out = {}
    for m in re.finditer(r"^\| `([\w.]+)` \| ([^|]*?) \|", markdown, re.M):
        path, which = m[1], m[2].strip()
        group = path.split(".")[0]
        if group in GROUPS and "." in path:
            options = list(GROUPS[group].options)
            if which.startswith("all but "):
                options = [o for o in options if o not in which.removeprefix("all but ").split(", ")]
            elif which != "all":
                options = which.split(", ")
            out[path] = frozenset(options)
        else:
            out[path] = frozenset()
    return out


# ------------------------------------------------------------------------------------------- summary.json
def field_comments(path: Path, cls: str) -> Iterator[tuple[str, str, str]]:
    """(section, field, comment) of a dataclass's fields in declaration order: the ``#:`` comment on a field's
    line, and the ``# ---- section`` comment above a run of fields."""
    source = path.read_text().splitlines()
    node = next(n for n in ast.parse("\n".join(source)).body if isinstance(n, ast.ClassDef) and n.name == cls)
    section = ""
    prev_end = node.body[0].end_lineno or node.lineno
    for stmt in node.body:
        if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
            prev_end = stmt.end_lineno or prev_end
            continue
        for line in source[prev_end : stmt.lineno - 1]:
            m = re.match(r"\s*# -+ (.*)", line)
            if m:
                section = m[1]
        line = source[stmt.lineno - 1]
        _, _, comment = line.partition("#:")
        yield section, stmt.target.id, comment.strip()
        prev_end = stmt.end_lineno or stmt.lineno


def summary_reference() -> str:
    """``summary.json``'s keys, grouped as :class:`psbench.summary.RunSummary` declares them."""
    from psbench.summary import FIELDS

    rows, out, section = [], [], None
    for sec, name, comment in field_comments(REPO / "src" / "psbench" / "summary.py", "RunSummary"):
        if sec != section:
            if rows:
                out += [table(["key", "meaning"], rows), ""]
                rows = []
            out += [f"### {sec[0].upper()}{sec[1:]}", ""]
            section = sec
        rows.append([code(name), cell(comment)])
    out.append(table(["key", "meaning"], rows))
    text = "\n".join(out) + "\n"
    listed = re.findall(r"^\| `(\w+)` \|", text, re.M)
    assert listed == list(FIELDS), "summary.py's fields and their comments disagree"
    return text


# ------------------------------------------------------------------------------------------- the sweeper
def _yaml_literal(text: str) -> str:
    """A Python default as it reads in YAML (``None`` → ``null``, ``False`` → ``false``, ``"tpe"`` → ``tpe``)."""
    try:
        value = ast.literal_eval(text)
    except ValueError:
        return text
    return yaml.safe_dump(value, default_flow_style=True, width=1000).removesuffix("\n...\n").strip()


def sweeper_reference() -> str:
    """The keys of ``hydra/sweeper=psbench_optuna`` (``hydra.sweeper.*``) from its structured config: a comment
    block above fields describes each field up to the next comment or blank line."""
    path = REPO / "src" / "hydra_plugins" / "psbench_optuna_sweeper" / "config.py"
    source = path.read_text().splitlines()
    tree = ast.parse("\n".join(source))
    rows = []
    for cls, prefix in (("PsbenchOptunaSweeperConf", "hydra.sweeper."), ("SamplerConf", "hydra.sweeper.sampler.")):
        node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
        above = first_sentence(ast.get_docstring(node) or "")  # the class's words describe its first field
        fresh = False
        body = node.body[1:] if ast.get_docstring(node) else node.body
        for i in range(body[0].lineno - 1, node.end_lineno or node.lineno):
            line = source[i].strip()
            if line.startswith("#"):
                above = (above + " " if fresh else "") + line.lstrip("#").strip()
                fresh = True
                continue
            fresh = False
            if not line:
                above = ""
            m = re.match(r"(\w+): ([^=]+?) = (.*)$", line)
            if m and not m[1].startswith("_") and m[1] != "sampler":
                value, inline = _split_comment(m[3])
                rows.append([code(prefix + m[1]), code(m[2]), code(_yaml_literal(value)), cell(inline or above)])
    return table(["key", "type", "default", "meaning"], rows) + "\n"


# ------------------------------------------------------------------------------------------- presets
def presets_reference() -> str:
    """Every ``experiment=`` preset and ``hparams_search=`` space, with the first line of its comment."""
    out = []
    for group in ("experiment", "hparams_search"):
        rows = []
        for path in sorted((CONF / group).rglob("*.yaml")):
            name = path.relative_to(CONF / group).with_suffix("").as_posix()
            lines = []
            for ln in path.read_text().splitlines():
                if not ln.startswith("#"):
                    if lines:
                        break
                    continue
                if not ln.startswith("# @package"):
                    lines.append(ln.lstrip("#").strip())
            rows.append([code(f"{group}={name}"), cell(first_sentence(" ".join(lines)))])
        out += [f"### `{group}`", "", table(["option", "what"], rows), ""]
    return "\n".join(out)


# ------------------------------------------------------------------------------------------- --help
#: the commands whose ``--help`` the CLI page shows
COMMANDS = [
    ("psbench", ["-m", "psbench"]),
    ("python -m analysis", ["-m", "analysis"]),
    ("python -m sweeps", ["-m", "sweeps"]),
    ("python -m psbench.ps.timeline", ["-m", "psbench.ps.timeline"]),
    ("python -m psbench.tracking.temporal_efficiency", ["-m", "psbench.tracking.temporal_efficiency"]),
    ("python -m psbench.compression.perf_model", ["-m", "psbench.compression.perf_model"]),
    ("python -m psbench.data.cifar_jpeg", ["-m", "psbench.data.cifar_jpeg"]),
]


_running: list[tuple[str, subprocess.Popen]] | None = None


def start_commands() -> list[tuple[str, subprocess.Popen]]:
    """Start every command's ``--help`` (once per build: :func:`on_files` starts them early, so that they run while
    the pictures are drawn), from the repository at a fixed width."""
    global _running
    if _running is None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PSBENCH_", "HYDRA_"))}
        env.update(COLUMNS="100", PYTHONHASHSEED="0")
        _running = [
            (
                name,
                subprocess.Popen(
                    [sys.executable, *args, "--help"],
                    cwd=REPO,
                    env=env,
                    text=True,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    stdin=subprocess.DEVNULL,
                ),
            )
            for name, args in COMMANDS
        ]
    return _running


def cli_reference() -> str:
    """Each command's ``--help`` as it prints it."""
    global _running
    procs, _running = start_commands(), None
    out = []
    for name, proc in procs:
        stdout, stderr = proc.communicate(timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(f"{name} --help failed ({proc.returncode}): {stderr[-2000:]}")
        anchor = re.sub(r"\W+", "-", name).strip("-")
        out += [f"## `{name}` {{ #{anchor} }}", "", "```text", stdout.rstrip(), "```", ""]
    return "\n".join(out)


# ------------------------------------------------------------------------------------------- paper entries
def paper_entries() -> str:
    """The entry table of docs/papers from ``sweeps/entries.yaml`` (:func:`sweeps.entries.table_md`)."""
    if str(REPO) not in sys.path:  # sweeps/ is a top-level folder of the repository, not installed
        sys.path.insert(0, str(REPO))
    from sweeps.entries import table_md

    return table_md()


GENERATED = {
    "paper-entries": paper_entries,
    "config-reference": config_reference,
    "summary-reference": summary_reference,
    "sweeper-reference": sweeper_reference,
    "presets-reference": presets_reference,
    "cli-reference": cli_reference,
}


# ------------------------------------------------------------------------------------------- the pictures
def concept_pngs() -> dict[str, bytes]:
    """``{file name: PNG}`` of :func:`psbench.ps.timeline.concept_pictures` (deterministic bytes)."""
    from psbench.ps.timeline import concept_pictures

    with tempfile.TemporaryDirectory() as tmp:
        return {p.name: p.read_bytes() for p in concept_pictures(tmp)}


# ------------------------------------------------------------------------------------------- MkDocs events
def on_config(config):
    """Pages dated by the last commit, not by the build (the sitemap's dates), unless SOURCE_DATE_EPOCH is set."""
    if "SOURCE_DATE_EPOCH" not in os.environ:
        git = subprocess.run(["git", "log", "-1", "--format=%ct"], cwd=REPO, capture_output=True, text=True)
        if git.returncode == 0 and git.stdout.strip().isdigit():
            os.environ["SOURCE_DATE_EPOCH"] = git.stdout.strip()
    return config


def on_files(files, config):
    from mkdocs.structure.files import File

    start_commands()
    for name, png in concept_pngs().items():
        files.append(File.generated(config, f"{PICTURES}/{name}", content=png))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    def generate(m: re.Match) -> str:
        if m[1] not in GENERATED:
            raise ValueError(
                f"{page.file.src_uri}: unknown generated block <!-- psbench:{m[1]} -->; known: " + ", ".join(GENERATED)
            )
        return GENERATED[m[1]]()

    return MARKER.sub(generate, markdown)


ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):(<code>)~?(?:[\w.]*\.)?([\w]+</code>)")


def on_page_content(html: str, page, config, files) -> str:
    """A Sphinx role left in a rendered docstring (``:class:<code>~a.Trace</code>``) becomes ``<code>Trace</code>``."""
    return ROLE.sub(r"\1\2", html)
