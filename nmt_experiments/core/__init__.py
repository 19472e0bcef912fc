"""The core that the replication and every study share; it imports no study. Where results live and
how they are read (``results``), their provenance (``provenance``), the rules a claim is judged by
(``claims``) and the judge (``judge``), Figure 3's measures (``alignment``), the paper's tables and
figures from a results directory (``tables``, ``figures``), Markdown and CSV tables (``markdown``),
plots (``plots``), studies' runs in processes of their own (``workers``), every committed BLEU scored
again (``rescore``: ``python -m nmt_experiments.core.rescore``), and the study machinery that
several studies use: an arm trained and scored (``arms``) and the settings that make a recipe
(``recipe``)."""
