"""GroundHog's gradient treatment (``SGD_adadelta``; PAPER.md §3): the global L2 norm of the
gradient, rescaled to ``clip_norm`` when it is larger, a non-finite gradient replaced by ``0.1 θ``
or its update skipped; and the sum of the gradients over the ranks of a data-parallel run."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.distributed as dist


def treat_gradients(
    params: Sequence[torch.nn.Parameter], clip_norm: float, nonfinite: str
) -> tuple[float, str, float]:
    """GroundHog's ``SGD_adadelta`` gradient treatment, but for the clip's scaling, which is left
    to the step (the backend's ``step(opt, params, scale)``, which may do it in the optimizer's own
    pass over the gradients: :meth:`nmt_lib.fast.optim.Adadelta.step`).

    Returns ``(norm, action, scale)``: the global L2 norm before any change, one of ``"none"``,
    ``"clip"`` (``norm >= clip_norm``: the step takes ``g * clip_norm / norm``), ``"shrink"``
    (non-finite norm: ``g <- 0.1 * θ``, in place) or ``"skip"`` (non-finite norm: no step), and
    the gradients' scale for the step (``clip_norm / norm`` for ``"clip"``, else 1).
    """
    grads = [p.grad for p in params if p.grad is not None]
    norm = float(torch.stack([_squared_norm(g) for g in grads]).sum().sqrt())
    if not math.isfinite(norm):
        if nonfinite == "skip":
            return norm, "skip", 1.0
        with torch.no_grad():
            for p in params:
                if p.grad is not None:
                    p.grad.copy_(0.1 * p)
        return norm, "shrink", 1.0
    if norm >= clip_norm:
        return norm, "clip", clip_norm / norm
    return norm, "none", 1.0


def scale_gradients(params: Sequence[torch.nn.Parameter], scale: float) -> None:
    """``g <- g * scale`` for the gradient ``g`` of each of ``params``, in place."""
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                p.grad.mul_(scale)


def clip_gradients(params: Sequence[torch.nn.Parameter], clip_norm: float, nonfinite: str):
    """GroundHog's ``SGD_adadelta`` gradient treatment, in place (:func:`treat_gradients`, the
    clip's scaling done here). Returns ``(norm, action)``: the global L2 norm before any change
    and one of ``"none"``, ``"clip"`` (``norm >= clip_norm``: ``g <- g * clip_norm / norm``),
    ``"shrink"`` (non-finite norm: ``g <- 0.1 * θ``) or ``"skip"`` (non-finite norm: the caller
    must not step)."""
    norm, action, scale = treat_gradients(params, clip_norm, nonfinite)
    if action == "clip":
        scale_gradients(params, scale)
    return norm, action


def _squared_norm(g: torch.Tensor) -> torch.Tensor:
    """``Σ g²`` as float32 dot products of chunks of 2^18 entries, summed in float64 (on a GPU: one
    dot): on CPUs
    faster than ``vector_norm`` and closer to the exact sum, and the chunks keep it so where one
    long float32 dot is not (``[3000, 620]`` of N(0, 1) on an AVX-512 EPYC: the squared norm's
    relative error 7e-6 in one dot, 3e-7 in chunks; the time: bench/README.md, "Precomputed
    projections and layouts").
    Column-major matrices (``W_o``'s gradient) are read as they lie."""
    g = g.float()
    flat = (flat_alike(g) or [g.reshape(-1)])[0]
    if flat.device.type != "cpu":  # one launch; a GPU's reduction is a tree
        return torch.dot(flat, flat)
    return torch.stack([torch.dot(c, c) for c in flat.split(1 << 18)]).sum(dtype=torch.float64)


def sum_gradients(params: Sequence[torch.nn.Parameter]) -> None:
    """All-reduce (sum) the gradients over the ranks, in one flat buffer (data parallelism)."""
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    flat = torch.cat([p.grad.reshape(-1) for p in params])
    dist.all_reduce(flat)  # SUM
    i = 0
    for p in params:
        n = p.grad.numel()
        p.grad.copy_(flat[i : i + n].view_as(p.grad))
        i += n


def flat_alike(*ts: torch.Tensor) -> list[torch.Tensor] | None:
    """1-D views of tensors laid out alike in memory (contiguous, or transposed matrices like
    ``W_o``), element ``i`` of each the same parameter entry; None if they are not."""
    if any(t.stride() != ts[0].stride() or t.shape != ts[0].shape for t in ts):
        return None
    if ts[0].is_contiguous():
        return [t.view(-1) for t in ts]
    if ts[0].dim() == 2 and ts[0].t().is_contiguous():
        return [t.t().view(-1) for t in ts]
    return None
