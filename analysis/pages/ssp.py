"""SSP for DNNs — paper numbers beside ours."""

from __future__ import annotations

from analysis.core import Page

ORDER = 4

PAGES = [
    Page("SSP", "Figs 2–5",
         reason="not yet available: no sweep yet (TIMIT / ImageNet-63K would be synthetic stand-ins)"),
]
