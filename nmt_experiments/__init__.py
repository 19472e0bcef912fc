"""nmt_experiments: the replication of the paper and the studies beside it, built on :mod:`nmt_lib`,
which never imports it. One package per study, on a shared core, and the book's pages apart:

- ``core``: what every study shares (results and their provenance, the claims' rules and judge,
  the paper's tables and figures, Markdown, plots, workers, rescoring, arms and recipes);
- ``replicate``: the paper's replication, with lite-long (``python -m nmt_experiments.replicate``);
- ``budget``: the recipe for a CPU budget (``python -m nmt_experiments.budget``);
- ``pilot``: what passing the learning floor costs (``python -m nmt_experiments.pilot``);
- ``comparison``: the models before and after the paper, on WMT'14 and Multi30k
  (``python -m nmt_experiments.comparison``);
- ``pages``: the book's pictures of the models, its interactive pages and its labs.

A study imports the core and nothing of another study; the core and the pages import no study
(``tests/test_layers.py``)."""
