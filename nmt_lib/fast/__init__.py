"""Speed, behind one seam: the paper modules compute the paper's equations in plain PyTorch, and the
fast backend computes the same functions faster. Training, evaluation and search reach it through
one object, :class:`FastBackend` (``nmt_lib.backend.backend("fast")``), a subclass of the plain backend
(:class:`nmt_lib.recipe.Plain`, which holds the training recipe) that overrides what it computes
faster, and import nothing else from here.

* :mod:`~nmt_lib.fast.scan`: the GRU recurrence with a hand-written backward through time;
* :mod:`~nmt_lib.fast.attention`, :mod:`~nmt_lib.fast.decoder`, :mod:`~nmt_lib.fast.output`: the
  decoder over a reference (precomputed projections, the attention in cache, the output layer over
  the whole sequence);
* :mod:`~nmt_lib.fast.steps`: the decoding step with its products merged, the best words of the
  logits in one pass, its word products tabulated;
* :mod:`~nmt_lib.fast.kernels`: optional compiled CPU kernels (the only importer of ``kernels.c``);
* :mod:`~nmt_lib.fast.optim`: Adadelta's update in fewer passes over memory, the gradient clip's
  scaling inside it;
* :mod:`~nmt_lib.fast.graphs`: a training step as CUDA graphs;
* :mod:`~nmt_lib.fast.model`: the paper's model classes with those computations, built as such;
* :mod:`~nmt_lib.fast.process`: what the fast paths want of the process.

The book's chapter "Making it fast" derives each as an identity with the paper's function, and the
tests check every one on both backends (``train.backend = "fast" | "reference"``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from ..recipe import Plain
from . import kernels
from .graphs import graphed_backward
from .model import FAST, fast_copy, set_options
from .optim import Adadelta
from .process import keep_freed_memory, tune_process
from .scan import ROW_TILE

__all__ = ["FastBackend", "accelerate", "keep_freed_memory", "kernels", "tune_process"]


class FastBackend(Plain):
    """The same functions, faster: the fast model classes (:mod:`nmt_lib.fast.model`, chosen at
    construction), Adadelta with the gradient clip's scaling in its own pass
    (:class:`nmt_lib.fast.optim.Adadelta`), the training step as CUDA graphs on a GPU
    (``train.cuda_graphs``, :class:`nmt_lib.fast.graphs.GraphedLoss`), the process tuned
    (:func:`tune_process`); its models carry their fast decoding steps
    (:meth:`nmt_lib.fast.model.FastModel.prepared_steps`). ``compiled``: use the compiled kernels where they apply; ``tile``:
    the row multiple of the recurrences."""

    name = "fast"
    _adadelta = Adadelta

    def __init__(self, compiled: bool = True, tile: int = ROW_TILE):
        self.compiled, self.tile = compiled, tile

    def build(self, cls: type[nn.Module], *args, **kwargs) -> nn.Module:
        """A new module of ``cls``'s fast class (:data:`nmt_lib.fast.model.FAST`) with this
        backend's options, of ``cls`` where it has none (the models before and after the paper)."""
        module = FAST.get(cls, cls)(*args, **kwargs)
        return set_options(module, self.compiled, self.tile)

    def tune_process(self) -> dict:
        return tune_process()

    def compiled_kernels(self, device) -> bool:
        return (
            self.compiled and torch.device(device).type == "cpu" and kernels.library() is not None
        )

    def backward(
        self,
        model,
        params,
        precision: str,
        device,
        cuda_graphs: bool = False,
        smoothing: float = 0.0,
    ) -> Callable:
        """As the plain backend's; with ``cuda_graphs`` on a GPU, the same loss and gradients
        replayed as CUDA graphs (:func:`nmt_lib.fast.graphs.graphed_backward`)."""
        if cuda_graphs and torch.device(device).type == "cuda":
            return graphed_backward(model, params, precision, smoothing)
        return super().backward(model, params, precision, device, cuda_graphs, smoothing)

    def step(self, opt, params, scale: float = 1.0) -> None:
        """The optimizer's step with the gradients times ``scale``: the paper's Adadelta with the
        scaling inside its own pass over the gradients (:meth:`nmt_lib.fast.optim.Adadelta.step`),
        another optimizer as the plain backend steps it."""
        if isinstance(opt, Adadelta):
            opt.step(grad_scale=scale)
        else:
            super().step(opt, params, scale)


def accelerate(model: nn.Module, compiled: bool = True, tile: int = ROW_TILE) -> nn.Module:
    """A fast copy of ``model`` (:func:`nmt_lib.fast.model.fast_copy`): a model of its fast class
    holding copies of its parameters, ``model`` unchanged; ``model`` itself where it has no fast
    class. To build a fast model, ``nmt_lib.models.build_model(cfg, backend("fast"))``."""
    return fast_copy(model, compiled, tile)
