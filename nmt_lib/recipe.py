"""The plain backend (``train.backend = "reference"``): the model classes as they are, and the
training recipe every backend follows (:class:`Plain`). The fast backend
(:class:`nmt_lib.fast.FastBackend`) is a subclass that overrides what it computes faster; the factory of
both is :func:`nmt_lib.backend.backend`.

The recipe: the optimizer of ``train.optimizer`` with its settings (:meth:`Plain.optimizer`), the
gradient of the summed NLL of a batch (:meth:`Plain.backward`), and the optimizer's step with the
gradients scaled (:meth:`Plain.step`: GroundHog's clip, :func:`nmt_lib.gradients.treat_gradients`).
The order of one update is :meth:`nmt_lib.trainer.Trainer.step`'s. A new optimizer is added here.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import torch
from torch import nn

from .gradients import scale_gradients
from .runtime import autocast


class Plain:
    """What every part of training, evaluation and search asks of a backend, computed the plain
    way: the paper modules (and the other families) as they are."""

    name = "reference"

    def build(self, cls: type[nn.Module], *args, **kwargs) -> nn.Module:
        """A new module of class ``cls`` (``cls(*args, **kwargs)``) on this backend: of ``cls``
        itself here, uninitialised (``nmt_lib.models.build_model`` initialises it)."""
        return cls(*args, **kwargs)

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
        self,
        model,
        params,
        precision: str,
        device,
        cuda_graphs: bool = False,
        smoothing: float = 0.0,
    ) -> Callable:
        """``loss_backward(x, x_mask, y, y_mask, denom) -> loss``: the summed NLL of a batch, its
        gradient divided by ``denom`` left in each parameter's ``grad``. ``smoothing``: label
        smoothing (``train.label_smoothing``), the loss then the summed smoothed cross-entropy
        (:func:`nmt_lib.paper.steps.target_log_prob`). ``cuda_graphs``: replay the step as CUDA
        graphs, which the fast backend does on a GPU (:meth:`nmt_lib.fast.FastBackend.backward`); ignored
        here, with a warning."""
        device = torch.device(device)
        if cuda_graphs:
            where = "on a GPU only" if device.type != "cuda" else "on the fast backend only"
            msg = f"train.cuda_graphs applies {where}: ignored on {device} ({self.name} backend)"
            warnings.warn(msg, stacklevel=3)
        smooth = {"smoothing": smoothing} if smoothing else {}  # any model's forward without it

        def eager(x, x_mask, y, y_mask, denom=1):
            with autocast(device, precision):
                logp, _ = model(x, x_mask, y, y_mask, **smooth)  # [B, Ty]
            loss = -logp.float().sum()
            (loss / denom if denom != 1 else loss).backward()
            return loss

        return eager

    def step(self, opt, params, scale: float = 1.0) -> None:
        """The optimizer's step with the gradients of ``params`` times ``scale`` (the clip's
        ``clip_norm / norm``, :func:`nmt_lib.gradients.treat_gradients`), scaled in place first."""
        if scale != 1.0:
            scale_gradients(params, scale)
        opt.step()

    def compiled_kernels(self, device) -> bool:
        """Whether this backend computes with the compiled CPU kernels on ``device``."""
        return False
