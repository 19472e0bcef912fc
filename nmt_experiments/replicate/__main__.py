"""``python -m nmt_experiments.replicate``: a profile replicated, its claims, README.md's summary
(:func:`nmt_experiments.replicate.replication.main`)."""

import sys

from .replication import main

sys.exit(main())
