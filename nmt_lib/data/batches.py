"""Minibatches: :class:`Batch` (padded, batch-first, with masks), :func:`pad`, :func:`eval_batches`
(dev and test in file order) and :class:`TrainIterator`, the training batches over a
:class:`~nmt_lib.data.store.TrainSet`.

:class:`TrainIterator` batches as GroundHog's ``get_homogenous_batch_iter`` (PAPER.md §3, A7): read
``sort_k_batches * batch_size`` pairs, sort them by max(len_x, len_y), cut into minibatches, emit them
in ascending length. Deviation: GroundHog shuffles the corpus once offline and loops over it; we draw a
seeded permutation per epoch (``seed + epoch``), or the epoch-0 permutation every epoch with
``reshuffle=False`` (GroundHog's behaviour). The sort is stable (GroundHog's ``argsort`` is not).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .store import TrainSet
from .vocab import EOS, PAD


@dataclass
class Batch:
    """A padded minibatch, batch-first. ``x``/``y`` [B,Tx]/[B,Ty] long with EOS and ``<pad>`` = 0;
    masks bool, True on real tokens (EOS included). ``y``/``y_mask`` are None for source-only batches.
    """

    x: torch.Tensor
    x_mask: torch.Tensor
    y: torch.Tensor | None = None
    y_mask: torch.Tensor | None = None

    def to(self, device, non_blocking: bool = False) -> Batch:
        """The same batch on ``device``."""

        def mv(t):
            return None if t is None else t.to(device, non_blocking=non_blocking)

        return Batch(mv(self.x), mv(self.x_mask), mv(self.y), mv(self.y_mask))

    @property
    def n_trg_tokens(self) -> int:
        """Target tokens in the batch, EOS included (the loss is summed over these; PAPER.md §3)."""
        return 0 if self.y_mask is None else int(self.y_mask.sum())


def pad(seqs: Sequence[Sequence[int]], add_eos: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack id sequences into ``ids`` [B,T] long (``<pad>`` = 0) and ``mask`` [B,T] bool; T is the
    longest sequence (+1 with ``add_eos``, which appends EOS to each)."""
    T = max(len(s) for s in seqs) + add_eos
    ids = np.full((len(seqs), T), PAD, dtype=np.int64)
    mask = np.zeros((len(seqs), T), dtype=bool)
    for b, s in enumerate(seqs):
        n = len(s)
        ids[b, :n] = s
        if add_eos:
            ids[b, n] = EOS
        mask[b, : n + add_eos] = True
    return torch.from_numpy(ids), torch.from_numpy(mask)


def eval_batches(
    x_ids: Sequence[Sequence[int]], y_ids: Sequence[Sequence[int]] | None, batch_size: int
) -> Iterator[Batch]:
    """Batches of ``batch_size`` sentences in input order; ids already end in EOS (EvalSet.x/y)."""
    for i in range(0, len(x_ids), batch_size):
        x, x_mask = pad(x_ids[i : i + batch_size])
        y = y_mask = None
        if y_ids is not None:
            y, y_mask = pad(y_ids[i : i + batch_size])
        yield Batch(x, x_mask, y, y_mask)


class TrainIterator:
    """Endless GroundHog-style minibatches over a :class:`TrainSet` (App. B.2; PAPER.md §3, A7).

    Epoch ``e`` visits the pairs in the order of a permutation drawn with seed ``seed + e`` (``seed``
    every epoch if ``reshuffle=False``), ``sort_k_batches * batch_size`` pairs at a time, each group
    sorted by max(len_x, len_y) and cut into batches emitted shortest first. The last batch of an
    epoch may be smaller. :meth:`state_dict` is the exact position: a resumed run sees the same batches.
    """

    def __init__(
        self,
        train: TrainSet,
        batch_size: int,
        sort_k_batches: int,
        seed: int,
        reshuffle: bool = False,
    ):
        if len(train) == 0:
            raise ValueError("empty training set")
        self.train, self.batch_size, self.sort_k_batches = train, batch_size, sort_k_batches
        self.seed, self.reshuffle = seed, reshuffle
        self.key = np.maximum(train.src_len, train.trg_len)
        self.updates_per_epoch = math.ceil(len(train) / batch_size)
        self._epoch, self._batch = 0, 0  # position: next batch to emit
        self._perm_epoch, self._perm = None, None
        self._group_id, self._group = None, None

    @classmethod
    def from_config(cls, train: TrainSet, cfg) -> TrainIterator:
        """The iterator a :class:`~nmt_lib.config.DataConfig` describes (batch size, sort groups,
        seed, reshuffle)."""
        return cls(train, cfg.batch_size, cfg.sort_k_batches, cfg.seed, reshuffle=cfg.reshuffle)

    @property
    def epoch(self) -> float:
        """Epochs done, fractional (batches emitted / updates per epoch)."""
        return self._epoch + self._batch / self.updates_per_epoch

    def state_dict(self) -> dict:
        return {
            "epoch": self._epoch,
            "batch": self._batch,
            "seed": self.seed,
            "reshuffle": self.reshuffle,
            "n_pairs": len(self.train),
            "batch_size": self.batch_size,
            "sort_k_batches": self.sort_k_batches,
        }

    def load_state_dict(self, state: dict) -> None:
        mine = self.state_dict()
        for k in ("seed", "reshuffle", "n_pairs", "batch_size", "sort_k_batches"):
            if state[k] != mine[k]:
                raise ValueError(f"iterator state has {k}={state[k]!r}, this iterator {mine[k]!r}")
        self._epoch, self._batch = int(state["epoch"]), int(state["batch"])

    def _permutation(self) -> np.ndarray:
        if self._perm_epoch != self._epoch:
            seed = self.seed + (self._epoch if self.reshuffle else 0)
            self._perm = np.random.default_rng(seed).permutation(len(self.train))
            self._perm_epoch, self._group_id = self._epoch, None
        return self._perm

    def _batch_indices(self) -> np.ndarray:
        k, g = divmod(self._batch, self.sort_k_batches)
        perm = self._permutation()
        if self._group_id != k:
            size = self.sort_k_batches * self.batch_size
            group = perm[k * size : (k + 1) * size]
            self._group = group[np.argsort(self.key[group], kind="stable")]
            self._group_id = k
        return self._group[g * self.batch_size : (g + 1) * self.batch_size]

    def __iter__(self) -> TrainIterator:
        return self

    def __next__(self) -> Batch:
        idx = self._batch_indices()
        self._batch += 1
        if self._batch == self.updates_per_epoch:
            self._epoch, self._batch = self._epoch + 1, 0
        pairs = [self.train.pair(int(i)) for i in idx]
        x, x_mask = pad([p[0] for p in pairs], add_eos=True)
        y, y_mask = pad([p[1] for p in pairs], add_eos=True)
        return Batch(x, x_mask, y, y_mask)
