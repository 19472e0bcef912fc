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

from torch import nn

from . import kernels
from .model import FAST
from .process import keep_freed_memory, tune_process
from .scan import ROW_TILE

__all__ = ["accelerate", "keep_freed_memory", "kernels", "on_backend", "tune_process"]


def accelerate(model: nn.Module, compiled: bool = True, tile: int = ROW_TILE) -> nn.Module:
    """``model`` (an :class:`~nmt_lib.paper.model.RNNsearch` or :class:`~nmt_lib.paper.model.RNNencdec`), its
    modules turned into their fast classes (:data:`nmt_lib.fast.model.FAST`), in place: the same
    parameters and functions. ``compiled``: use the compiled kernels where they apply;
    ``tile``: the row multiple of the recurrences. Tunes the process once (:func:`tune_process`).
    The models before and after the paper (:mod:`nmt_lib.models`) have no fast classes: they stay
    as they are."""
    tune_process()
    for module in model.modules():
        fast = FAST.get(type(module))
        if fast is not None:
            module.__class__ = fast
        if isinstance(module, tuple(FAST.values())):
            module.compiled, module.tile = compiled, tile
    return model


def on_backend(model: nn.Module, backend: str) -> nn.Module:
    """``model`` on ``backend`` (``train.backend``): ``"fast"`` (:func:`accelerate`) or
    ``"reference"`` (the paper modules as they are)."""
    if backend not in ("fast", "reference"):
        raise ValueError(f"backend must be 'fast' or 'reference', not {backend!r}")
    return accelerate(model) if backend == "fast" else model
