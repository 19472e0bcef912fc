"""The paper's replication, with its longer-trained profile lite-long: ``python -m
nmt_experiments.replicate`` (``replication``) trains and evaluates a profile's runs and writes their
results with their provenance, judges the paper's claims (``paper_claims``), writes README.md's
results summary (``readme``), looks ``<unk>`` up in a dictionary (``lexicon``) and reads lite-long's
runs (``lite_long``); ``python -m nmt_experiments.replicate.rerun`` checks that a committed run's
first updates train again to the same numbers (``rerun``)."""
