"""``python -m nmt_experiments.pilot``: the pilot (:func:`nmt_experiments.pilot.study.main`)."""

import sys

from .study import main

sys.exit(main())
