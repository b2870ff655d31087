"""The view the sweeps tests take of a paper entry (``sweeps/entries.yaml``): ``SCALES`` (scale -> its overrides, a list
a test may swap), ``NAME``, ``PRESET`` and the note as ``__doc__`` — what each entry script's module held before the
entries became data."""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sweeps.entries import get


@cache
def entry(name: str) -> SimpleNamespace:
    e = get(name)
    return SimpleNamespace(
        NAME=name, PRESET=e.preset, SCALES={s: list(v) for s, v in e.scales.items()}, __doc__=e.note, entry=e
    )
