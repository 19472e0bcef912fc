"""``python -m nmt_experiments.comparison``: the comparison's tables
(:func:`nmt_experiments.comparison.report.main`)."""

import sys

from .report import main

sys.exit(main())
