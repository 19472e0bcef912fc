"""The comparison of the models before and after the paper, on WMT'14 and on Multi30k.
``python -m nmt_experiments.comparison.recipes`` sweeps each family's recipe on dev (``recipe_sweep``)
and writes the study's profiles; ``python -m nmt_experiments.comparison`` (``report``) writes its
tables from the runs (``runs``) and its claims (``verdicts``); ``footing`` sets what the models were
trained with beside what their papers had; ``python -m nmt_experiments.comparison.multi30k`` judges
the claims on each Multi30k test set."""
