"""nmt_lib: the models, data pipeline, training recipe and evaluation of Bahdanau, Cho & Bengio (2014),
"Neural Machine Translation by Jointly Learning to Align and Translate", in PyTorch.

The folders show the layers. ``paper``: the paper's model (Figure 1), its equations in plain
PyTorch (``gru``, ``encoder``, ``attention``, ``decoder``, ``model``, and ``steps``, the decoding step
a search drives). ``models``: the models before and after it, each with its own encoding, state and
step, used the same way. ``fast``: the same functions computed faster. ``data``: WMT'14 (``corpus``,
``readers``, ``download``, ``text``, ``vocab``, the prepared data, the toy corpus ``fixtures``).
``config``: typed settings and profiles. The modules beside them are the machinery: ``backend``
(the backend of a run by name), ``recipe`` (the plain backend and the training recipe), ``train``
(with ``trainer``, the update, and ``train_loop``, the session's loop), ``gradients``,
``search``, ``evaluate``, ``bleu``, ``unk``, ``checkpoint``, ``publish``, ``runtime`` (device and
precision), ``io``. The replication and its studies are the package ``nmt_experiments``, which this
one never imports. Importing the package changes nothing in the process.
"""

__version__ = "0.1.0"
