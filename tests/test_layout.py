"""The import layout: no circle, and the engines and ps/ keep to their side.

Every module under ``src/psbench`` is read with :mod:`ast` — module-level imports, imports inside
functions (they run later, but a circle through them is still a circle), and the modules a package
names for :func:`psbench.lazy.lazy` — and an edge goes to the most specific module imported
(``from psbench.ps import local`` → ``psbench.ps.local``; ``from psbench.ps import Schedule`` →
``psbench.ps``). Imports under ``if TYPE_CHECKING:`` never run and are not edges of :data:`GRAPH` (a circle through
them is harmless), but a type named is still a dependency: :data:`TYPED` holds them too, and the lines between
packages and floors are drawn on it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted((SRC / "psbench").rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = _modules()


def _target(name: str) -> str | None:
    """The most specific module of ``name`` (``psbench.a.b.Name`` → ``psbench.a.b``)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _type_checking_only(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def imports(module: str, typing: bool = False) -> set[str]:
    """The psbench modules ``module`` imports, at any level of its code (``typing``: under ``TYPE_CHECKING`` too)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking_only(node) and not typing:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, one level up per extra dot
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            found.update(f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names)
        elif isinstance(node, ast.Dict):  # lazy(__name__, {"Name": "psbench.pkg.module"})
            found.update(
                v.value
                for v in node.values
                if isinstance(v, ast.Constant) and isinstance(v.value, str) and v.value in MODULES
            )
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    targets = {_target(n) for n in found if n == "psbench" or n.startswith("psbench.")}
    return {t for t in targets if t is not None and t != module}


GRAPH = {m: imports(m) for m in MODULES}
TYPED = {m: imports(m, typing=True) for m in MODULES}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def test_the_reader_sees_module_function_level_and_lazy_imports():
    assert "psbench.ps.schedule" in GRAPH["psbench.strategy.executor"]  # module level
    assert "psbench.distributed.launcher" in GRAPH["psbench.train"]  # inside run()
    assert "psbench.optimizer.build" in GRAPH["psbench.optimizer"]  # lazy(__name__, {...})
    assert "psbench.ps.protocols" in GRAPH["psbench.ps.local"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circle():
    assert _cycles(GRAPH) == []


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


FORBIDDEN = [  # (importer, imported): the dist engine and the simulator's executor never meet; ps/ is theirs
    ("psbench.strategy", "psbench.distributed"),
    ("psbench.distributed", "psbench.strategy"),
    ("psbench.distributed", "psbench.train"),
    ("psbench.ps", "psbench.strategy"),
    ("psbench.ps", "psbench.distributed"),
    ("psbench.ps", "psbench.train"),
    ("psbench.ps", "psbench.assemble"),
    ("psbench.cluster", "psbench.ps"),  # the cost model is below the simulator that runs it
    ("psbench.cluster", "psbench.calibration"),
    ("psbench.ps", "psbench.calibration"),
    ("psbench.strategy", "psbench.assemble"),  # the engines take a RunSetup (psbench.run_setup), not its builder
    ("psbench.distributed", "psbench.assemble"),
    ("psbench.strategy", "psbench.validate"),
    ("psbench.distributed", "psbench.validate"),
    ("psbench.run_setup", "psbench.strategy"),  # the run's types are below the engines
    ("psbench.run_setup", "psbench.distributed"),
]


@pytest.mark.parametrize(("importer", "imported"), FORBIDDEN, ids=[f"{a}->{b}" for a, b in FORBIDDEN])
def test_no_import_across_the_line(importer, imported):
    bad = sorted(f"{m} -> {t}" for m, ts in TYPED.items() if _inside(m, importer) for t in ts if _inside(t, imported))
    assert bad == []


def room(module: str) -> str:
    """The room a module is in: its top-level package or module (``psbench.strategy``, ``psbench.assemble``); a
    package's ``options.py`` is a room of its own — the group's torch-free declaration that
    :mod:`psbench.validate` reads before anything is built, below the package's code."""
    parts = module.split(".")
    return module if parts[-1] == "options" else ".".join(parts[:2])


def rooms(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The arrows between rooms of different packages (a package and its own declaration may use each other;
    ``psbench`` itself, the lazy front door, is left out: it names what is above it)."""
    out: dict[str, set[str]] = {}
    for m, ts in graph.items():
        for t in ts:
            if room(m).split(".")[:2] != room(t).split(".")[:2] and "psbench" not in (m, t):
                out.setdefault(room(m), set()).add(room(t))
    return out


def floors(graph: dict[str, set[str]]) -> dict[str, int]:
    """Each room's floor: 0 for a room that imports none, else one above the highest room it imports."""
    out: dict[str, int] = {}

    def floor(r: str) -> int:
        if r not in out:
            out[r] = -1  # on the way: a circle would recurse here
            out[r] = 1 + max((floor(t) for t in graph.get(r, ())), default=-1)
        return out[r]

    for r in {*graph, *(t for ts in graph.values() for t in ts)}:
        floor(r)
    return out


def test_no_arrow_back_up_between_rooms():
    """Between rooms no circle, types included: every arrow goes down a floor, so the engines' rooms are below the
    assembly and the API's factory above the run's types (the run's types, ``psbench.run_setup``, and the
    declarations are below both engines)."""
    graph = rooms(TYPED)
    assert _cycles(graph) == []
    f = floors(graph)
    assert all(f[a] > f[b] for a, ts in graph.items() for b in ts)
    for engine in ("psbench.strategy", "psbench.distributed"):
        assert f["psbench.run_setup"] < f[engine] < f["psbench.assemble"] < f["psbench.train"]
    assert f["psbench.run_setup"] < f["psbench.api"]


#: the engines and every package they run: they take a psbench.assemble.RunSetup, never the composed config
RUN_PACKAGES = (
    "strategy",
    "distributed",
    "ps",
    "cluster",
    "models",
    "data",
    "compression",
    "lr",
    "optimizer",
    "calibration",
)
GROUPS = (
    "model",
    "dataset",
    "protocol",
    "lr_policy",
    "optimizer",
    "compression",
    "topology",
    "hardware",
    "engine",
    "trainer",
    "logger",
    "paths",
    "resources",
)


@pytest.mark.parametrize("package", RUN_PACKAGES)
def test_the_config_stops_at_assembly(package):
    """No module of the engines or what they run imports OmegaConf or reads a composed config's groups
    (``cfg.trainer``, ``cfg["protocol"]``): the config goes as far as ``psbench.assemble.build_run`` (and the
    torch-free ``options.py`` declarations, which check a resolved mapping before any run is built)."""
    reads = re.compile(r"\bcfg(?:\.|\[[\"'])(" + "|".join(GROUPS) + r")\b")
    bad = []
    for path in sorted((SRC / "psbench" / package).rglob("*.py")):
        text = path.read_text()
        if path.name != "options.py" and reads.search(text):
            bad.append(f"{path.relative_to(SRC)}: {reads.search(text).group(0)}")
        if re.search(r"^\s*(from omegaconf|import omegaconf)|DictConfig|OmegaConf", text, re.M):
            bad.append(f"{path.relative_to(SRC)}: omegaconf")
    assert bad == []


def test_the_layout_page_has_one_line_per_module():
    """docs/reference/layout.md: every module of src/psbench on its own line, under its package, and nothing else."""
    text = (SRC.parent / "docs" / "reference" / "layout.md").read_text()
    block = text[text.index("```text\n") + len("```text\n") :]
    block = block[: block.index("```")]
    lines = block.splitlines()
    assert lines[0] == "src/psbench/"
    listed, package = [], None
    for line in lines[1:]:
        name = line.split()[0] if line.strip() else ""
        if line.startswith("    "):
            listed.append(f"{package}/{name}")
        elif line.startswith("  "):
            package = name.rstrip("/") if name.endswith("/") else None
            if package is None:
                listed.append(name)
        else:
            break
    files = sorted(
        str(p.relative_to(SRC / "psbench"))
        for p in (SRC / "psbench").rglob("*.py")
        if p.name != "__init__.py" and "conf" not in p.parts
    )
    assert sorted(listed) == files
