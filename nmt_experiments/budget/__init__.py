"""The budget study: which recipe, model size, batch size and shortlist learn most per CPU-minute.
``python -m nmt_experiments.budget`` (``study``) trains, scores and extends the arms; ``report``
reads what they show (curves, the arms' table, the noise floor, the findings) and writes the
study's files."""
