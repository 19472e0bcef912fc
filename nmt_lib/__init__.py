"""nmt_lib: the models, data pipeline, training recipe and evaluation of Bahdanau, Cho & Bengio (2014),
"Neural Machine Translation by Jointly Learning to Align and Translate", in PyTorch.

One concept per module: ``gru``, ``encoder``, ``attention``, ``decoder``, ``model`` (Figure 1 of the
paper); ``corpus``, ``text``, ``vocab``, ``data`` (WMT'14); ``train``, ``search``, ``bleu``,
``evaluate``; ``config`` for the typed settings.
"""

__version__ = "0.1.0"

import os

# bf16 matmuls on CPUs run in oneDNN, which builds (JIT-compiles) a kernel for every new shape, 2-100
# ms each, and keeps 1024. Training meets more shapes than that (batch x length for every matmul of
# the encoder, decoder and their gradients; lengths 1-50), so with the default the kernels are
# evicted and rebuilt all the time (~20 per update at the lite profile). Set before the first bf16
# matmul of the process; a value the user exported wins.
os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "8192")
