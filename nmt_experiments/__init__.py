"""nmt_experiments: the replication of the paper and the studies beside it, built on :mod:`nmt_lib`,
which never imports it. ``replicate`` trains and evaluates a profile's runs and writes its results
with their provenance (``provenance``); ``results`` says where they live (and reads the paper's own
tables, ``results/paper/``); ``tables``, ``plots`` and ``markdown`` make the book's tables and
figures from them, ``readme`` the README's summary; ``claims`` holds the rules a claim is judged by
and the judge, ``paper_claims`` the paper's claims judged, ``alignment`` Figure 3's measures; the
studies are ``budget`` (the recipe for a CPU budget; what its runs show: ``budget_report``),
``recipes`` (each family's recipe on dev: ``recipe_sweep``, and the comparison's profiles),
``comparison`` (the models before and after the paper; beside their papers' training:
``footing``) and the ``pilot`` (``pilot_extrapolation``, ``pilot_report``); ``diagrams`` (drawn on
``canvas``) are the book's pictures of the models, ``explorer`` and ``translator`` its interactive
pages; ``labs`` holds the labs' checks, toy tasks and student notebooks."""
