"""nmt_lib: the models, data pipeline, training recipe and evaluation of Bahdanau, Cho & Bengio (2014),
"Neural Machine Translation by Jointly Learning to Align and Translate", in PyTorch.

One concept per module: ``gru``, ``encoder``, ``attention``, ``decoder``, ``model`` (Figure 1 of the
paper); ``corpus``, ``text``, ``vocab``, ``data`` (WMT'14); ``train``, ``search``, ``bleu``,
``evaluate``; ``config`` for the typed settings.
"""

__version__ = "0.1.0"
