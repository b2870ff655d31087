"""The paper entry points as data: ``sweeps/entries.yaml`` read into :class:`Entry` records (:data:`ENTRIES`, in the
file's order, which is ``run_all``'s), each of which makes its ``psbench -m`` command (:meth:`Entry.command`).

The file's comment says what an entry holds. Nothing here runs anything: :mod:`sweeps.__main__` runs one entry,
:mod:`sweeps.run_all` every one, and the docs build the entry table from :func:`table_md`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sweeps._runner import LOCAL_PARALLEL, SERIAL, command, parallel, scale_of

FILE = Path(__file__).resolve().parent / "entries.yaml"
#: the run_all scales an entry runs at when its ``run_all`` says nothing: those it has
DEFAULT = object()


@dataclass(frozen=True)
class Entry:
    """One paper entry point (see ``sweeps/entries.yaml``)."""

    name: str
    what: str
    #: ``experiment=<preset>``, or one per scale ("" for a ``module`` entry)
    preset: str | Mapping[str, str]
    #: scale -> the psbench overrides of that scale, verbatim (the study's identity)
    scales: Mapping[str, tuple[str, ...]]
    resources: str | None = None
    serial: bool = False
    #: (the run_all scales that run it, the scale it runs); None: run_all's own scale, when the entry has it
    run_all: tuple[tuple[str, ...], str] | None = None
    prepare: str | None = None
    #: a module and its arguments to run instead of a psbench study (``{root}``: the store's dir)
    module: tuple[str, ...] = ()
    cost: Mapping[str, str] = field(default_factory=dict)
    note: str = ""

    def scale_and_rest(self, argv: Sequence[str]) -> tuple[str, list[str]]:
        """``(scale, the other arguments)`` of ``argv`` (``scale=<s>``, default ``ci``); an unknown scale is a
        ``ValueError`` whose text is the one line to print."""
        return scale_of(self.name, [a for a in argv if a != SERIAL], self.scales)

    def command(self, argv: Sequence[str], root: Path | None = None) -> tuple[str, list[str]]:
        """``(scale, command)`` of ``python -m sweeps <name> <argv>``: the ``psbench -m`` study of the scale's
        overrides (``hydra.sweeper.study_name=<name>_<scale>``, ``++tags.scale``, ``resources``), its trials in
        parallel on this machine at the :data:`sweeps._runner.LOCAL_PARALLEL` scales unless the entry is ``serial``
        or ``--serial`` asks, the user's overrides last; for a ``module`` entry that module's command in ``root``."""
        scale, rest = self.scale_and_rest(argv)
        if self.module:
            where = str(root or store_root())
            return scale, [sys.executable, "-m", *(a.replace("{root}", where) for a in self.module)]
        serial = self.serial or SERIAL in argv
        local = [] if serial or scale not in LOCAL_PARALLEL else parallel(rest)
        preset = self.preset if isinstance(self.preset, str) else self.preset[scale]
        return scale, command(self.name, preset, self.scales[scale], scale, [*local, *rest], self.resources)


def store_root() -> Path:
    """The store's dir: ``$PSBENCH_ROOT``, else the current dir."""
    return Path(os.environ.get("PSBENCH_ROOT") or os.getcwd())


def _overrides(raw: Mapping, name: str, scale: str, value: object) -> tuple[str, ...]:
    """A scale's overrides: a list, or ``<entry>.<scale>`` (that entry's, resolved once)."""
    if isinstance(value, str):
        other, _, at = value.partition(".")
        return _overrides(raw, other, at, raw[other]["scales"][at])
    if not isinstance(value, list) or not all(isinstance(o, str) for o in value):
        raise ValueError(f"sweeps/entries.yaml: {name}.scales.{scale} must be a list of overrides or <entry>.<scale>")
    return tuple(value)


def load(path: Path = FILE) -> dict[str, Entry]:
    """The entries of ``path`` by name, in the file's order; a key the file does not know is a ``ValueError``."""
    import yaml

    raw = yaml.safe_load(path.read_text())
    known = {f.name for f in Entry.__dataclass_fields__.values()} - {"name", "module", "run_all"}
    out = {}
    for name, e in raw.items():
        unknown = set(e) - known - {"command", "run_all"}
        if unknown:
            raise ValueError(f"sweeps/entries.yaml: {name}: unknown keys {sorted(unknown)}")
        ra = e.get("run_all")
        out[name] = Entry(
            name=name,
            what=e.get("what", ""),
            preset=e.get("preset", ""),
            scales={s: _overrides(raw, name, s, v) for s, v in e["scales"].items()},
            resources=e.get("resources"),
            serial=bool(e.get("serial", False)),
            run_all=None if ra is None else (tuple(ra["with"]), ra["scale"]),
            prepare=e.get("prepare"),
            module=tuple(e.get("command") or ()),
            cost=dict(e.get("cost") or {}),
            note=e.get("note", ""),
        )
    return out


#: every entry, in the file's order (run_all's)
ENTRIES: dict[str, Entry] = load()


def get(name: str) -> Entry:
    """The entry ``name``; ``KeyError`` whose text is the one line to print."""
    if name not in ENTRIES:
        raise KeyError(f"sweeps: error: no entry {name!r}: one of {', '.join(ENTRIES)}")
    return ENTRIES[name]


# --------------------------------------------------------------------------- prepare steps
#: the JPEG q75 counterparts of cifar10_subset's images, relative to the store's dir (the cost preset's
#: ``dataset.path``)
JPEG_MATCHED = Path("cache") / "cifar10_subset_jpeg_q75.npz"


def cifar_jpeg_match(root: Path) -> int:
    """Write ``<root>/`` :data:`JPEG_MATCHED` (the JPEG q75 counterparts of cifar10_subset's images, which
    ``experiment=reference/cifar_jpeg_cost`` reads) with the match tool unless it exists; its exit code."""
    out = root / JPEG_MATCHED
    if out.is_file():
        return 0
    from psbench.data import cifar_jpeg

    argv = ["match-subset", "--out", str(out), "--root-dir", str(root)]
    print("+ python -m psbench.data.cifar_jpeg", " ".join(argv), flush=True)
    return cifar_jpeg.main(argv)


#: the ``prepare`` steps an entry may name
PREPARE: dict[str, Callable[[Path], int]] = {"cifar_jpeg_match": cifar_jpeg_match}


# --------------------------------------------------------------------------- the docs table
def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def table_md(entries: Mapping[str, Entry] | None = None) -> str:
    """The entry table of docs/papers/index.md: the command, what it runs, its measured wall times."""
    rows = [
        "| entry point | what | `ci` wall time here | `full` wall time here |",
        "|---|---|---|---|",
    ]
    for e in (entries or ENTRIES).values():
        scale = (
            e.run_all[1]
            if e.run_all and e.run_all[1] in e.scales
            else "ci"
            if "ci" in e.scales
            else next(iter(e.scales))
        )
        rows.append(
            f"| `python -m sweeps {e.name} scale={scale}` | {_cell(e.what)} | {_cell(e.cost.get('ci', '—'))} | "
            f"{_cell(e.cost.get('full', '—'))} |"
        )
    return "\n".join(rows) + "\n"
