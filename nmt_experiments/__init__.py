"""nmt_experiments: the replication of the paper and the studies beside it, built on :mod:`nmt_lib`,
which never imports it. ``replicate`` trains and evaluates a profile's runs and writes its results
with their provenance; ``results`` says where they live (and reads the paper's own tables,
``results/paper/``); ``tables``, ``claims`` and ``plots`` make the book's tables, verdicts and figures
from them; ``budget`` (the recipe for a CPU budget), ``recipes`` (each family's recipe on dev) and
``comparison`` (the models before and after the paper) are the studies; ``explorer`` and
``translator`` are the book's interactive pages."""
