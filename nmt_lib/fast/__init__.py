"""Speed, behind one seam: the paper modules compute the paper's equations in plain PyTorch, and the
fast backend computes the same functions faster. Training, evaluation and search reach it through
one object, :func:`backend` (``train.backend``), and import nothing else from here.

* :mod:`~nmt_lib.fast.scan`: the GRU recurrence with a hand-written backward through time;
* :mod:`~nmt_lib.fast.attention`, :mod:`~nmt_lib.fast.decoder`: the decoder over a reference
  (precomputed projections, the attention in cache, the output layer over the whole sequence);
* :mod:`~nmt_lib.fast.steps`: the decoding step with its products merged, the best words of the
  logits in one pass, its word products tabulated;
* :mod:`~nmt_lib.fast.kernels`: optional compiled CPU kernels (the only importer of ``kernels.c``);
* :mod:`~nmt_lib.fast.optim`: Adadelta's update in fewer passes over memory, the gradient clip's
  scaling inside it;
* :mod:`~nmt_lib.fast.graphs`: a training step as CUDA graphs;
* :mod:`~nmt_lib.fast.model`: the paper's model classes with those computations;
* :mod:`~nmt_lib.fast.process`: what the fast paths want of the process.

The book's chapter "Making it fast" derives each as an identity with the paper's function, and the
tests check every one on both backends (``train.backend = "fast" | "reference"``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import torch
from torch import nn

from ..gradients import clip_gradients
from ..runtime import autocast
from . import kernels
from . import steps as decoding
from .graphs import GraphedLoss
from .model import Fast as FastModel
from .model import faster
from .optim import Adadelta
from .process import keep_freed_memory, tune_process
from .scan import ROW_TILE

__all__ = ["Fast", "Reference", "accelerate", "backend", "keep_freed_memory", "kernels",
           "tune_process"]  # fmt: skip


class Reference:
    """The paper modules as they are: what every part of training, evaluation and search asks of a
    backend, computed the plain way."""

    name = "reference"

    def model(self, model: nn.Module) -> nn.Module:
        """The model that computes ``model``'s functions on this backend: ``model`` itself."""
        return model

    def tune_process(self) -> dict:
        """What this backend wants of the process, done once: nothing."""
        return {}

    def optimizer(self, t, params: Sequence[nn.Parameter]) -> torch.optim.Optimizer:
        """``train.optimizer``: the paper's Adadelta (``rho``, ``eps``, ``lr``: GroundHog's 0.95,
        1e-6, 1), or Adam (Kingma & Ba 2015; torch's ``eps = 1e-8``, ``betas = (0.9,
        train.adam_beta2)``, at ``train.lr``)."""
        if t.optimizer == "adam":
            return torch.optim.Adam(params, lr=t.lr, betas=(0.9, t.adam_beta2))
        return self._adadelta(params, lr=t.lr, rho=t.rho, eps=t.eps)

    _adadelta = torch.optim.Adadelta

    def backward(
        self, model, params, precision: str, device, cuda_graphs: bool = False,
        smoothing: float = 0.0,
    ) -> Callable:  # fmt: skip
        """``loss_backward(x, x_mask, y, y_mask, denom) -> loss``: the summed NLL of a batch, its
        gradient divided by ``denom`` left in each parameter's ``grad``; as CUDA graphs with
        ``cuda_graphs`` on a GPU (:class:`~nmt_lib.fast.graphs.GraphedLoss`, the same loss and
        gradients replayed). ``smoothing``: label smoothing (``train.label_smoothing``), the loss
        then the summed smoothed cross-entropy (:func:`nmt_lib.paper.steps.target_log_prob`)."""
        device = torch.device(device)
        smooth = {"smoothing": smoothing} if smoothing else {}  # any model's forward without it
        if cuda_graphs and device.type == "cuda":
            graphs = GraphedLoss(model, params, precision, smoothing=smoothing)

            def replayed(x, x_mask, y, y_mask, denom=1):
                loss = graphs.backward(x, x_mask, y, y_mask)
                if denom != 1:
                    torch._foreach_div_([p.grad for p in params if p.grad is not None], denom)
                return loss

            replayed.graphs = graphs
            return replayed
        if cuda_graphs:
            msg = f"train.cuda_graphs applies on a GPU only: ignored on {device}"
            warnings.warn(msg, stacklevel=3)

        def eager(x, x_mask, y, y_mask, denom=1):
            with autocast(device, precision):
                logp, _ = model(x, x_mask, y, y_mask, **smooth)  # [B, Ty]
            loss = -logp.float().sum()
            (loss / denom if denom != 1 else loss).backward()
            return loss

        return eager

    def update(self, opt, params, clip_norm: float, nonfinite: str) -> tuple[float, str]:
        """GroundHog's gradient treatment (:func:`nmt_lib.gradients.clip_gradients`), then the
        optimizer's step unless the update is skipped; returns ``(norm, action)``."""
        norm, action = clip_gradients(params, clip_norm, nonfinite)
        if action != "skip":
            opt.step()
        return norm, action

    def compiled_kernels(self, device) -> bool:
        """Whether this backend computes with the compiled CPU kernels on ``device``."""
        return False

    def steps(self, model, rows: int | None = None) -> Callable:
        """A maker of ``model``'s decoding steps (``model.steps()``), for searches that will advance
        ``rows`` hypotheses in all; each thread of a search makes its own."""
        return model.steps


class Fast(Reference):
    """The same functions, faster: the fast model classes (:func:`nmt_lib.fast.model.faster`),
    Adadelta with the gradient clip's scaling in its own pass (:class:`nmt_lib.fast.optim.Adadelta`),
    the decoding step's word products tabulated for long searches
    (:func:`nmt_lib.fast.steps.word_projections`), the process tuned (:func:`tune_process`).
    ``compiled``: use the compiled kernels where they apply; ``tile``: the row multiple of the
    recurrences."""

    name = "fast"
    _adadelta = Adadelta

    def __init__(self, compiled: bool = True, tile: int = ROW_TILE):
        self.compiled, self.tile = compiled, tile

    def model(self, model: nn.Module) -> nn.Module:
        """A fast model made of ``model``'s parameters (the same objects); ``model`` itself where it
        has no fast class (the models before and after the paper)."""
        return faster(model, self.compiled, self.tile)

    def tune_process(self) -> dict:
        return tune_process()

    def compiled_kernels(self, device) -> bool:
        return (
            self.compiled and torch.device(device).type == "cpu" and kernels.library() is not None
        )

    def update(self, opt, params, clip_norm: float, nonfinite: str) -> tuple[float, str]:
        if not isinstance(opt, Adadelta):
            return super().update(opt, params, clip_norm, nonfinite)
        norm, action = clip_gradients(params, clip_norm, nonfinite, defer=True)
        if action != "skip":  # the clip's scaling in Adadelta's own pass over the gradients
            opt.step(grad_scale=clip_norm / norm if action == "clip" else 1.0)
        return norm, action

    def steps(self, model, rows: int | None = None) -> Callable:
        if not isinstance(model, FastModel):
            return model.steps
        words = decoding.word_projections(model.steps(), rows)
        return lambda: model.steps(words)


def backend(name: str = "fast", compiled: bool = True, tile: int = ROW_TILE) -> Reference:
    """The backend named ``name`` (``train.backend``): ``"fast"`` (:class:`Fast`) or
    ``"reference"`` (:class:`Reference`, the paper modules as they are)."""
    if name == "fast":
        return Fast(compiled, tile)
    if name == "reference":
        return Reference()
    raise ValueError(f"backend must be 'fast' or 'reference', not {name!r}")


def accelerate(model: nn.Module, compiled: bool = True, tile: int = ROW_TILE) -> nn.Module:
    """``model`` computed faster: ``backend("fast", compiled, tile).model(model)``, a new model of
    the same parameters (the paper model keeps its classes; :func:`nmt_lib.fast.model.faster`)."""
    return Fast(compiled, tile).model(model)
