"""nmt_lib: the models, data pipeline, training recipe and evaluation of Bahdanau, Cho & Bengio (2014),
"Neural Machine Translation by Jointly Learning to Align and Translate", in PyTorch.

One concept per module: ``gru``, ``encoder``, ``attention``, ``decoder``, ``model`` (Figure 1 of the
paper); ``corpus``, ``text``, ``vocab``, ``data`` (WMT'14); ``train``, ``search``, ``bleu``,
``evaluate``; ``config`` for the typed settings; ``kernels``, optional compiled CPU kernels.
"""

__version__ = "0.1.0"

import os
import sys

# bf16 matmuls on CPUs run in oneDNN, which builds (JIT-compiles) a kernel for every new shape, 2-100
# ms each, and keeps 1024. Training meets more shapes than that (batch x length for every matmul of
# the encoder, decoder and their gradients; lengths 1-50), so with the default the kernels are
# evicted and rebuilt all the time (~20 per update at the lite profile). Set before the first bf16
# matmul of the process; a value the user exported wins.
os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "8192")


def _keep_freed_memory() -> bool:
    """Keep freed memory in the process (glibc: ``M_TRIM_THRESHOLD`` 1 GiB, ``M_MMAP_THRESHOLD``
    32 MiB). glibc's default gives large freed blocks back to the OS and maps them again at the
    next allocation, page by page: a beam step allocates and frees ``[beam * B, K]`` logits, and
    the page faults cost 5-10 % of beam search time. Linux with glibc only; ``NMT_LIB_MALLOPT=0``
    leaves malloc alone. Returns whether the settings took."""
    if os.environ.get("NMT_LIB_MALLOPT", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        return libc.mallopt(-1, 1 << 30) == 1 and libc.mallopt(-3, 1 << 25) == 1
    except (OSError, AttributeError):  # not glibc
        return False


MALLOC_TUNED = _keep_freed_memory()
