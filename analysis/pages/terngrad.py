"""TernGrad (Wen et al.) — paper numbers beside ours."""

from __future__ import annotations

from analysis.core import Page

ORDER = 2

PAGES = [
    Page("TernGrad", "Tables 1–3, Figs 3 and 5", reason="not yet available: compression is issue 4 (open)"),
]
