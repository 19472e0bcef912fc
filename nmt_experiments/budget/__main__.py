"""``python -m nmt_experiments.budget``: the budget study (:func:`nmt_experiments.budget.study.main`)."""

import sys

from .study import main

sys.exit(main())
