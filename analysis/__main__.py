"""``python -m analysis``: build the report (see :mod:`analysis`)."""

import sys

from analysis.report import main

sys.exit(main())
