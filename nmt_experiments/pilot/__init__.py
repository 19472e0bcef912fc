"""The pilot: what passing the learning floor costs RNNencdec-50. ``python -m nmt_experiments.pilot``
(``study``) trains and scores the arms in segments; ``fits`` and ``extrapolation`` extrapolate their
curves to the floor and price the plan; ``report`` writes ``summary.md``, the book's numbers and the
figure."""
