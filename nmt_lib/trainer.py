"""One model's training state and its update (§4.2, App. B.2): :class:`Trainer` holds the model,
the optimizer, the batch stream and the counters of one process (one rank of ``world``), makes one
update (:meth:`Trainer.step`, in its order: the loss as ``train.loss`` normalises it, the gradients
summed over the ranks, the learning rate, GroundHog's gradient treatment, the optimizer's step; the
backend gives the optimizer, the backward pass and the step), and is saved to and restored from a
checkpoint (:meth:`Trainer.state_dict`, :meth:`Trainer.load_state_dict`). What the evaluations
decide (the best dev NLL, early stopping, the plateau's decay) is :class:`EarlyStopping`'s.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from .backend import backend
from .checkpoint import (
    CheckpointError,
    check_compatible,
    load_model_state,
    rng_state,
    set_rng_state,
)
from .config import RunConfig, to_dict
from .gradients import sum_gradients, treat_gradients
from .runtime import resolve_precision, warn_emulated_bf16


def learning_rate(t, u: int, scale: float = 1.0) -> float:
    """The schedule's learning rate at update ``u`` (from 1) of the training config ``t``:
    ``train.lr`` times the linear warm-up ``min(1, u / warmup_updates)``; with ``lr_schedule =
    "inverse_sqrt"`` (Vaswani et al. 2017, §5.3, its peak ``train.lr`` at ``u = warmup_updates``)
    times ``sqrt(warmup_updates / u)`` after the warm-up; ``scale``: the plateau's decays so far
    (:attr:`EarlyStopping.lr_scale`)."""
    warmup = min(1.0, u / t.warmup_updates) if t.warmup_updates else 1.0
    if t.lr_schedule == "inverse_sqrt":
        warmup = min(warmup, math.sqrt(t.warmup_updates / u))
    return t.lr * scale * warmup


@dataclass
class EarlyStopping:
    """What the evaluations on dev decide (``train.patience``, ``train.lr_schedule = "plateau"``):
    the best dev NLL and its update, the evaluations since without progress (``bad_evals``), the
    learning rate's scale (times ``train.lr_decay`` per such evaluation, with the plateau schedule)
    and whether training stops early (``stopped``: ``"early_stop"`` once ``bad_evals`` reaches the
    patience). Kept in a checkpoint under these names (:meth:`state_dict`)."""

    best_dev_nll: float = math.inf
    best_update: int = 0
    bad_evals: int = 0
    lr_scale: float = 1.0
    stopped: str | None = None

    def observe(self, t, dev_nll: float, update: int, final: bool = False) -> bool:
        """One evaluation's dev NLL at ``update`` under the training config ``t``; whether it is
        the best so far. A ``final`` evaluation (the end of a session between two ``eval_every``)
        may improve the best but never counts against the patience."""
        improved = dev_nll < self.best_dev_nll
        if improved:
            self.best_dev_nll, self.best_update = dev_nll, update
            self.bad_evals = 0
        elif not final:
            self.bad_evals += 1
            if t.lr_schedule == "plateau":
                self.lr_scale *= t.lr_decay
        if t.patience and self.bad_evals >= t.patience:
            self.stopped = "early_stop"
        return improved

    def state_dict(self) -> dict:
        return {
            "best_dev_nll": self.best_dev_nll,
            "best_update": self.best_update,
            "bad_evals": self.bad_evals,
            "lr_scale": self.lr_scale,
            "stopped": self.stopped,
        }

    def load_state_dict(self, state: dict) -> None:
        """From a checkpoint (``lr_scale``: 1 in one written before the plateau schedule)."""
        self.best_dev_nll, self.best_update = state["best_dev_nll"], state["best_update"]
        self.bad_evals, self.stopped = state["bad_evals"], state["stopped"]
        self.lr_scale = state.get("lr_scale", 1.0)


class Trainer:
    """One model's training state: model, optimizer, batch stream, counters (single process or one
    rank of ``world``).

    Args:
        cfg: the run's config; model: on ``device``, made by ``on`` (:func:`nmt_lib.backend.backend`
        of ``train.backend`` when None), which also gives the optimizer, the backward pass and the
        update; iterator: a :class:`~nmt_lib.data.TrainIterator` (the same seed and position on
        every rank).
    """

    def __init__(
        self, cfg: RunConfig, model, iterator, device=None, rank: int = 0, world: int = 1, on=None
    ):
        self.cfg, self.model, self.iterator = cfg, model, iterator
        self.on = on if on is not None else backend(cfg.train.backend)
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self.rank, self.world = rank, world
        t = cfg.train
        warn_emulated_bf16(t.precision, self.device)
        self.precision = resolve_precision(t.precision, self.device)  # "bf16" or "fp32"
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.opt = self.on.optimizer(t, self.params)
        if world > 1:  # every rank starts from rank 0's weights
            with torch.no_grad():
                for p in self.params:
                    buf = p.contiguous()  # NCCL takes contiguous tensors only (W_o is column-major)
                    dist.broadcast(buf, 0)
                    if buf.data_ptr() != p.data_ptr():
                        p.copy_(buf)
        # the loss and its gradients: eager, or replayed as CUDA graphs (train.cuda_graphs)
        self.backward = self.on.backward(
            model, self.params, self.precision, self.device, t.cuda_graphs, t.label_smoothing
        )
        self.update = 0
        self.elapsed = 0.0  # seconds of training, summed over resumes
        self.early = EarlyStopping()  # the best dev NLL, patience, the plateau's decay
        self.n_nonfinite = 0
        self.nonfinite_streak = 0  # non-finite updates in a row (train.max_nonfinite)
        self.data_fingerprint: dict | None = None  # nmt_lib.data.fingerprint of the training data

    @property
    def epoch(self) -> float:
        return self.iterator.epoch

    def next_batch(self):
        """This rank's minibatch of the next ``world`` ones, and the sentences and target tokens
        of all of them."""
        mine, sentences, tokens = None, 0, 0
        for r in range(self.world):
            b = next(self.iterator)
            sentences += b.x.shape[0]
            tokens += b.n_trg_tokens
            if r == self.rank:
                mine = b
        return mine, sentences, tokens

    def lr(self) -> float:
        """The learning rate of the next update ``update + 1`` (:func:`learning_rate`), times the
        plateau decays so far."""
        return learning_rate(self.cfg.train, self.update + 1, self.early.lr_scale)

    def step(self) -> dict:
        """One update (App. B.2). Returns ``loss`` (sum NLL of this rank's batch), ``sentences``,
        ``tokens`` (target tokens, padding excluded, all ranks), ``grad_norm`` (of the gradient of
        the loss as ``train.loss`` normalises it), ``action``."""
        t = self.cfg.train
        batch, sentences, tokens = self.next_batch()
        batch = batch.to(self.device)
        # train.loss: the paper SUMS the token NLLs, EOS included (PAPER.md §3, A6); "sentence" and
        # "token" divide that sum by the sentences or target tokens of the update (all ranks)
        denom = {"sum": 1, "sentence": sentences, "token": tokens}[t.loss]
        self.model.train()
        self.opt.zero_grad(set_to_none=True)
        loss = self.backward(batch.x, batch.x_mask, batch.y, batch.y_mask, denom)
        if self.world > 1:
            sum_gradients(self.params)
        for group in self.opt.param_groups:
            group["lr"] = self.lr()
        # GroundHog's gradient treatment (nmt_lib.gradients), then the backend's optimizer step
        # with the clip's scaling (which the fast Adadelta does in its own pass)
        norm, action, scale = treat_gradients(self.params, t.clip_norm, t.nonfinite)
        if action != "skip":
            self.on.step(self.opt, self.params, scale)
        if action in ("skip", "shrink"):
            self.n_nonfinite += 1
            self.nonfinite_streak += 1
        else:
            self.nonfinite_streak = 0
        self.update += 1
        return {
            "loss": float(loss.detach()),
            "sentences": int(batch.x.shape[0]),
            "tokens": tokens,
            "grad_norm": norm,
            "action": action,
        }

    def state_dict(self) -> dict:
        return {
            "config": to_dict(self.cfg),
            "model": self.model.state_dict(),
            "optimizer": self.opt.state_dict(),
            "iterator": self.iterator.state_dict(),
            "rng": rng_state(),
            "update": self.update,
            "epoch": self.epoch,
            "elapsed": self.elapsed,
            **self.early.state_dict(),
            "n_nonfinite": self.n_nonfinite,
            "nonfinite_streak": self.nonfinite_streak,
            "world": self.world,
            "data": self.data_fingerprint,
        }

    def load_state_dict(self, state: dict, path: str | os.PathLike = "<checkpoint>") -> None:
        """Continue from a checkpoint: raises :class:`CheckpointError` naming ``path`` if it does not
        belong to this config."""
        check_compatible(state, self.cfg, path)
        saved, mine = state.get("data"), self.data_fingerprint
        if saved and mine and saved != mine:  # a checkpoint of format 1 has none
            what = ", ".join(k for k in mine if saved.get(k) != mine[k])
            raise CheckpointError(
                f"{path}: checkpoint trained on other data than this run's (they differ in: {what}); "
                "use another checkpoint directory, or start afresh without resuming"
            )
        load_model_state(self.model, state, path)
        try:
            self.opt.load_state_dict(state["optimizer"])
            self.iterator.load_state_dict(state["iterator"])
        except (ValueError, KeyError, RuntimeError) as e:
            raise CheckpointError(f"{path}: cannot restore the training state: {e}") from None
        set_rng_state(state["rng"])
        for k in ("update", "elapsed", "n_nonfinite"):
            setattr(self, k, state[k])
        self.early.load_state_dict(state)
        self.nonfinite_streak = state.get("nonfinite_streak", 0)

    def finite(self) -> bool:
        """Whether every parameter is finite (no NaN, no infinity)."""
        with torch.no_grad():
            return bool(torch.stack([torch.isfinite(p).all() for p in self.params]).all())
