"""Accumulated gradient normalization (Hermans et al.) — paper numbers beside ours."""

from __future__ import annotations

from analysis.core import Page

ORDER = 3

PAGES = [
    Page("AGN", "Table 1, Fig 7", reason="not yet available: sweeps exist (sweeps/agn_*.py), no report page yet"),
]
