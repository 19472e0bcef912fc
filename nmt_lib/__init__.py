"""nmt_lib: the models, data pipeline, training recipe and evaluation of Bahdanau, Cho & Bengio (2014),
"Neural Machine Translation by Jointly Learning to Align and Translate", in PyTorch.

One concept per module. The paper's model (Figure 1), its equations in plain PyTorch: ``gru``,
``encoder``, ``attention``, ``decoder``, ``model``, and ``steps`` (the decoding step a search
drives). The same functions computed faster: ``fast`` (:func:`nmt_lib.fast.accelerate`). WMT'14:
``corpus``, ``text``, ``vocab``, ``data``. Training and evaluation: ``train``, ``search``, ``bleu``,
``evaluate``, ``runtime`` (device and precision). The paper's numbers and what the replication
makes of its runs: ``paper``, ``results``, ``tables``, ``claims``, ``replicate``. ``config`` for the
typed settings and the profiles. Importing the package changes nothing in the process.
"""

__version__ = "0.1.0"
