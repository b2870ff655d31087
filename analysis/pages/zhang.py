"""Staleness-aware async SGD (Zhang, Gupta, Lian, Liu) — paper numbers beside ours."""

from __future__ import annotations

from analysis.core import Page

ORDER = 1

PAGES = [
    Page("staleness-aware ASGD", "Figs 1–4", reason="not yet available: no sweep yet"),
]
