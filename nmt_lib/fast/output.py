"""The output layer over the reference, computed faster (training): :func:`target_log_prob`, the
log-probability of each target word of the deep output's rows without storing a log-softmax, and
:func:`padded_rows`, the real positions it reads, padded to a multiple of 64 rows. ``fused``:
:mod:`nmt_lib.fast.kernels` or None (PyTorch only).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .scan import compute_dtype, product, transposed


def padded_rows(mask: Tensor, multiple: int = 64) -> tuple[Tensor, int]:
    """Flat indices of ``mask``'s N True entries, padded to a multiple of ``multiple`` with copies
    of the first, and N. The matmuls over the real positions then see a few dozen shapes instead of
    one per batch: bf16 matmuls on CPUs (oneDNN) build a kernel for each new shape, which costs
    more than the ≤ 63 extra rows (bench/README.md, "The output layer over the whole sequence").
    The copies' outputs are dropped, so they get no gradient."""
    idx = mask.flatten().nonzero().squeeze(1)
    return torch.cat([idx, idx[:1].expand(-len(idx) % multiple)]), len(idx)


def target_log_prob(u: Tensor, W: Tensor, b: Tensor, y: Tensor, fused=None) -> Tensor:
    """``log softmax(W u + b)[y]`` in float32 at least: ``u [N, r]``, ``W [K, r]``, ``b [K]``,
    ``y [N]`` -> ``[N]``.

    The same as ``log_softmax(F.linear(u, W, b)).gather(-1, y[:, None])`` with less memory
    traffic: the ``[N, K]`` logits are written once, in :func:`~nmt_lib.fast.scan.compute_dtype` and
    without the bias; the log-softmax is never stored (``logsumexp`` a few rows at a time, in
    float32, with the bias); the backward overwrites the logits with their gradient
    ``g (onehot(y) - softmax)``, whose target entry ``g (1 - p_y)`` comes from the float32 ``log p_y``.
    Float32 logits on a CPU are computed in blocks of rows (:func:`_logit_pieces`).
    """
    return _TargetLogProb.apply(u, W, b, y, fused)


#: Bytes of float32 logits that one block of :func:`_logit_pieces` holds at most: under glibc's
#: largest ``M_MMAP_THRESHOLD`` (32 MiB), so that a freed block stays in the heap for the next
#: step's (:func:`nmt_lib.fast.keep_freed_memory`) instead of being mapped afresh, each of its pages a
#: fault (the faults and the time they cost: bench/README.md, "The output layer over the whole
#: sequence").
LOGIT_BLOCK_BYTES = 24 << 20


def _logit_pieces(N: int, r: int, K: int, dtype: torch.dtype, device: torch.device) -> list[slice]:
    """Row ranges of the ``[N, K]`` logits (``u [N, r]``) computed as one block each: on a CPU in
    float32, a multiple of 64 rows under :data:`LOGIT_BLOCK_BYTES`, where the ``[r, K]`` weight
    gradient (summed over the blocks) is under it too; otherwise all rows. At the paper's sizes
    (a 74 MB weight gradient) the sum over blocks cost more than the faults it saved
    (bench/README.md, as above); on a GPU blocks would only add launches; in bf16 the sum would add
    a rounding."""
    if device.type != "cpu" or dtype != torch.float32 or 4 * r * K > LOGIT_BLOCK_BYTES:
        return [slice(0, N)]
    rows = max(64, LOGIT_BLOCK_BYTES // (4 * K) // 64 * 64)
    return [slice(i, i + rows) for i in range(0, N, rows)] or [slice(0, 0)]


def _row_chunks(x: Tensor) -> list[slice]:
    """Row ranges of ``x [N, K]``: ~2 MB of float32 at a time on a CPU (in cache), all on a GPU."""
    N, K = x.shape
    rows = max(1, (1 << 19) // K) if x.device.type == "cpu" else N
    return [slice(i, i + rows) for i in range(0, N, rows)]


class _TargetLogProb(torch.autograd.Function):
    @staticmethod
    def forward(ctx, u, W, b, y, fused):
        cd, wide = compute_dtype(W), torch.promote_types(W.dtype, torch.float32)
        with torch.autocast(u.device.type, enabled=False):
            u_c, W_c, b_w = u.to(cd), W.to(cd), b.to(wide)  # a cast keeps W's strides
            ctx.pieces = _logit_pieces(*u.shape, W.shape[0], cd, u.device)
            ctx.logits, ctx.stats, logp = [], [], []
            for rows in ctx.pieces:  # the bias is added below, in float32
                z = product(u_c[rows], W_c.t(), fused)  # [rows, K]
                fast = None if fused is None else fused.target_log_prob(z, b_w, y[rows])
                lp, stats = (_log_prob_in_pieces(z, b_w, y[rows]), None) if fast is None else fast
                ctx.logits.append(z)
                ctx.stats.append(stats)
                logp.append(lp)
            logp = torch.cat(logp) if len(logp) > 1 else logp[0]
        ctx.save_for_backward(u_c, W_c, b_w, y, logp)
        ctx.dtypes, ctx.fused = (u.dtype, W.dtype, b.dtype), fused
        return logp

    @staticmethod
    def backward(ctx, g):
        u_c, W_c, b_w, y, logp = ctx.saved_tensors
        fused = ctx.fused
        logits, ctx.logits = ctx.logits, None  # overwritten by their gradient below
        du, dW_t, db = [], None, None
        for i, rows in enumerate(ctx.pieces):
            # a second backward through the same graph (retain_graph): the logits recomputed
            d = product(u_c[rows], W_c.t(), fused) if logits is None else logits[i]
            stats, y_r, g_r, logp_r = ctx.stats[i], y[rows], g[rows], logp[rows]
            db_r = (
                None
                if stats is None
                else fused.target_log_prob_backward(d, b_w, y_r, g_r, stats, logp_r)
            )
            if db_r is None:
                db_r = _grad_in_pieces(d, b_w, y_r, g_r, logp_r)
            du.append(product(d, W_c, fused))  # [rows, r]
            dW_r = product(transposed(u_c[rows], u_c.dtype, fused), d, fused)  # [r, K]
            dW_t, db = (dW_r, db_r) if dW_t is None else (dW_t.add_(dW_r), db.add_(db_r))
        du = torch.cat(du) if len(du) > 1 else du[0]
        dW = dW_t.t() if W_c.t().is_contiguous() else transposed(dW_t, dW_t.dtype, fused)
        return du.to(ctx.dtypes[0]), dW.to(ctx.dtypes[1]), db.to(ctx.dtypes[2]), None, None


def _log_prob_in_pieces(logits: Tensor, b: Tensor, y: Tensor) -> Tensor:
    """``log softmax(logits + b)[y]`` ``[N]`` in ``b``'s dtype, :func:`_row_chunks` at a time."""
    logp = logits.new_empty(logits.shape[0], dtype=b.dtype)
    for rows in _row_chunks(logits):
        x = logits[rows].to(b.dtype, copy=True).add_(b)  # add(bf16, f32): slower
        top = x.amax(-1, keepdim=True)
        target = x.gather(-1, y[rows, None]).squeeze(-1)
        logp[rows] = target - x.sub_(top).exp_().sum(-1).log_() - top.squeeze(-1)
    return logp


def _grad_in_pieces(d: Tensor, b: Tensor, y: Tensor, g: Tensor, logp: Tensor) -> Tensor:
    """Overwrite the logits ``d`` with their gradient ``g (onehot(y) - softmax(d + b))``,
    :func:`_row_chunks` at a time (the target entry ``g (1 - p_y)`` from ``log p_y``); return the
    bias's gradient."""
    db = torch.zeros_like(b)
    for rows in _row_chunks(d):
        p = torch.softmax(d[rows].to(b.dtype).add_(b), -1).mul_(-g[rows, None])
        target = torch.arange(p.shape[0], device=p.device) * p.shape[1] + y[rows]
        p.view(-1)[target] = g[rows] * -torch.expm1(logp[rows])  # g (1 - p_y), accurately
        db += p.sum(0)
        d[rows] = p
    return db
