"""One module per paper; each declares ``ORDER`` and ``PAGES`` (see :mod:`analysis.page`)."""
