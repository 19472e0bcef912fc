"""Speed, behind one seam: the paper modules compute the paper's equations in plain PyTorch, and
:func:`accelerate` makes a model compute the same functions faster.

* :mod:`~nmt_lib.fast.scan`: the GRU recurrence with a hand-written backward through time;
* :mod:`~nmt_lib.fast.attention`, :mod:`~nmt_lib.fast.decoder`: the decoder over a reference
  (precomputed projections, the attention in cache, the output layer over the whole sequence);
* :mod:`~nmt_lib.fast.steps`: the decoding step with its products merged, the best words of the
  logits in one pass;
* :mod:`~nmt_lib.fast.kernels`: optional compiled CPU kernels (the only importer of ``kernels.c``);
* :mod:`~nmt_lib.fast.optim`: Adadelta's update in fewer passes over memory;
* :mod:`~nmt_lib.fast.graphs`: a training step as CUDA graphs;
* :mod:`~nmt_lib.fast.model`: the paper's model classes with those computations.

The book's chapter "Making it fast" derives each as an identity with the paper's function, and the
tests check every one on both backends (``train.backend = "fast" | "reference"``).
"""

from __future__ import annotations

import os
import sys

from torch import nn

from . import kernels
from .model import FAST
from .scan import ROW_TILE

__all__ = ["accelerate", "kernels", "on_backend", "tune_process"]


def accelerate(model: nn.Module, compiled: bool = True, tile: int = ROW_TILE) -> nn.Module:
    """``model`` (an :class:`~nmt_lib.model.RNNsearch` or :class:`~nmt_lib.model.RNNencdec`), its
    modules turned into their fast classes (:data:`nmt_lib.fast.model.FAST`), in place: the same
    parameters and functions. ``compiled``: use the compiled kernels where they apply;
    ``tile``: the row multiple of the recurrences. Tunes the process once (:func:`tune_process`)."""
    tune_process()
    for module in model.modules():
        fast = FAST.get(type(module))
        if fast is not None:
            module.__class__ = fast
        if isinstance(module, tuple(FAST.values())):
            module.compiled, module.tile = compiled, tile
    return model


_TUNED: dict[str, bool] = {}


def tune_process() -> dict[str, bool]:
    """What the fast paths want of the process, done once, when acceleration is chosen:

    * oneDNN's kernel cache: bf16 matmuls on CPUs run in oneDNN, which builds (JIT-compiles) a
      kernel for every new shape, 2-100 ms each, and keeps 1024. Training meets more shapes than
      that (batch x length for every matmul of the encoder, decoder and their gradients), so with
      the default the kernels are evicted and rebuilt all the time (~20 per update at the lite
      profile). ``ONEDNN_PRIMITIVE_CACHE_CAPACITY=8192``, unless the user exported a value; it
      takes effect if set before the process's first bf16 matmul.
    * :func:`keep_freed_memory`.

    Returns what took (``{"onednn_cache": ..., "malloc": ...}``)."""
    if not _TUNED:
        os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "8192")
        _TUNED["onednn_cache"] = os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "8192"
        _TUNED["malloc"] = keep_freed_memory()
    return dict(_TUNED)


def keep_freed_memory() -> bool:
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


def on_backend(model: nn.Module, backend: str) -> nn.Module:
    """``model`` on ``backend`` (``train.backend``): ``"fast"`` (:func:`accelerate`) or
    ``"reference"`` (the paper modules as they are)."""
    if backend not in ("fast", "reference"):
        raise ValueError(f"backend must be 'fast' or 'reference', not {backend!r}")
    return accelerate(model) if backend == "fast" else model
