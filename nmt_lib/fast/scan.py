"""The GRU recurrence of :mod:`nmt_lib.paper.gru`, computed faster: :func:`fast_gru_scan` is
:func:`~nmt_lib.paper.gru.gru_scan` (the same function; the tests compare the two on both backends) with a
hand-written backward through time, the state kept only for the rows still running
(:func:`active_rows`), and the elementwise work of each step in few operations (:func:`gru_gates`,
:func:`gru_update` and their backward), each replaced by its compiled version where one is passed in
(``fused``: :mod:`nmt_lib.fast.kernels`, or None for PyTorch only).

Also the helpers the fast decoder shares: :func:`compute_dtype`, :func:`transposed`,
:func:`product`, :func:`right_products`, :func:`static_shapes`, :func:`embedding`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def gru_gates(a, x, g, h, r, z, rh) -> None:
    """The gates of :func:`~nmt_lib.paper.gru.gru_step`, written into ``r``, ``z`` and ``rh = r ∘ h``::

        r = σ(a_r + x_r + g_r),   z = σ(a_z + x_z + g_z)

    ``a``, ``x`` (None: 0): packed pre-activations ``[..., 3n]``; ``g = [U_r h; U_z h]``
    ``[..., 2n]``; ``h``, ``r``, ``z``, ``rh``: ``[..., n]`` (any float dtypes; the sums are
    computed in ``h``'s). Written in place, in few operations: on a GPU each costs a launch."""
    n, a = h.shape[-1], a.to(h.dtype)  # sums in the state's dtype (float32 under autocast)
    pre = a if x is None else a + x
    torch.add(pre[..., 2 * n :], g[..., :n], out=r).sigmoid_()
    torch.add(pre[..., n : 2 * n], g[..., n:], out=z).sigmoid_()
    torch.mul(r, h, out=rh)


def gru_update(a, x, u, z, h, mask, ht, out, out_c=None) -> None:
    """The rest of :func:`~nmt_lib.paper.gru.gru_step` given ``u = U (r ∘ h)``: ``ht = tanh(a_h + x_h + u)`` and
    ``out = (1 - z) ∘ h + z ∘ ht`` where ``mask`` (``[..., 1]`` bool, None: everywhere), else ``h``
    (``out`` may be ``h``); ``out_c`` (optional) gets ``out`` again (e.g. in bf16 for the next
    matmul). ``a``, ``x`` (None: 0): the candidate's pre-activations ``[..., n]``. ``h``, ``z``,
    ``ht`` in one dtype."""
    pre = a.to(h.dtype) if x is None else a.to(h.dtype) + x
    torch.add(pre, u, out=ht).tanh_()
    new = torch.lerp(h, ht, z)  # h + z ∘ (ht - h) = (1 - z) ∘ h + z ∘ ht
    if mask is None:
        out.copy_(new)
    else:
        torch.where(mask, new, h, out=out)
    if out_c is not None:
        out_c.copy_(out)


def gru_backward_update(dh, mask, z, ht, h, dA, dcand_c) -> None:
    """The backward of :func:`gru_update` and of the ``z`` gate, from ``dh = ∂L/∂h_t`` (on rows
    where ``mask``, else 0 for this step): ``∂L/∂a`` of the candidate and of ``z`` into
    ``dA[..., :2n]`` (``dA``: ``[..., 3n]``, ordered as ``a``), the candidate's again into
    ``dcand_c`` (for the matmul with ``U``); ``dh`` becomes the part of ``∂L/∂h_{t-1}`` that
    passes by the matmuls: ``(1 - z) ∘ dh``, or ``dh`` itself where masked out."""
    n, aten = h.shape[-1], torch.ops.aten
    dn = dh if mask is None else torch.where(mask, dh, 0)
    dn_z = dn * z
    aten.tanh_backward.grad_input(dn_z, ht, grad_input=dA[..., :n])
    aten.sigmoid_backward.grad_input(dn * (ht - h), z, grad_input=dA[..., n : 2 * n])
    dcand_c.copy_(dA[..., :n])
    dh.sub_(dn_z)  # (1 - z) ∘ dh where mask, else dh


def gru_backward_reset(d_rh, h, r, dA, drz_c, dh, dA_c=None) -> None:
    """The backward of the ``r`` gate (:func:`gru_gates`) given ``d_rh = ∂L/∂(r ∘ h)``: ``∂L/∂a_r``
    into ``dA[..., 2n:]``; ``drz_c = [∂L/∂a_r; ∂L/∂a_z]`` (for the matmul with ``[U_r; U_z]``) and
    ``dA_c`` (optional) ``= dA``, in their dtypes; adds ``d_rh ∘ r`` to ``dh``."""
    n = h.shape[-1]
    d_r = torch.ops.aten.sigmoid_backward.grad_input(d_rh * h, r, grad_input=dA[..., 2 * n :])
    drz_c[..., :n], drz_c[..., n:] = d_r, dA[..., n : 2 * n]
    dh.addcmul_(d_rh, r)
    if dA_c is not None:
        dA_c.copy_(dA)


def elementwise(fused=None) -> tuple:
    """``(gru_gates, gru_update, gru_backward_update, gru_backward_reset)``, each replaced by
    ``fused``'s function of the same name where given (compiled, :mod:`~nmt_lib.fast.kernels`: it returns
    False where it does not apply, and the PyTorch function here runs instead)."""
    fns = (gru_gates, gru_update, gru_backward_update, gru_backward_reset)
    if fused is None:
        return fns
    return tuple(_either(getattr(fused, f.__name__), f) for f in fns)


def _either(fast, slow):
    return lambda *args: fast(*args) or slow(*args)


def compute_dtype(like: Tensor) -> torch.dtype:
    """The dtype matrix products run in: autocast's (bf16 on AMX CPUs / tensor cores) when autocast
    is on for ``like``'s device, else ``like``'s own dtype."""
    dev = like.device.type
    return torch.get_autocast_dtype(dev) if torch.is_autocast_enabled(dev) else like.dtype


def transposed(x: Tensor, dtype: torch.dtype, fused=None) -> Tensor:
    """``x.mT`` as a contiguous tensor of ``dtype``, in one copy: matmuls whose first operand is a
    transposed view run much slower on CPUs (bf16 oneDNN) than on a contiguous copy. ``fused``:
    an object whose ``transposed`` does the same faster, or returns None (:mod:`~nmt_lib.fast.kernels`)."""
    if fused is not None and (out := fused.transposed(x, dtype)) is not None:
        return out
    return torch.empty(x.mT.shape, dtype=dtype, device=x.device).copy_(x.mT)


def in_transposed_layout(x: Tensor, fused=None) -> Tensor:
    """``x`` ``[..., R, C]``, its values laid out as its transpose's (``x.mT`` contiguous), in one
    copy (:func:`transposed`). The gradient of a weight passed as ``P.t()`` (or a concatenation's)
    comes back in ``P``'s own layout that way: AccumulateGrad keeps a contiguous slice as it is,
    and makes a slow transposing copy of a strided one."""
    return transposed(x, x.dtype, fused).mT


def product(a: Tensor, b: Tensor, fused=None) -> Tensor:
    """``a @ b`` (2-D or batched 3-D, no autograd): ``fused``'s ``matmul`` where given
    (:mod:`~nmt_lib.fast.kernels`: oneDNN's float32 products on AMD CPUs), else ``torch.matmul``."""
    return torch.matmul(a, b) if fused is None else fused.matmul(a, b)


def right_products(W: Tensor, fused=None):
    """``x -> x @ W`` for a ``W [..., n, m]`` that a scan multiplies by at every step: ``fused``'s
    ``right_product`` (:mod:`~nmt_lib.fast.kernels`: AMX tiles, or a prepacked oneDNN weight) where given and
    it applies, else ``torch.matmul``."""
    fast = None if fused is None else fused.right_product(W)
    return fast or (lambda x: torch.matmul(x, W))


#: Row multiple of :func:`active_rows` (16 = an AMX tile).
ROW_TILE = 16


def static_shapes(t: Tensor) -> bool:
    """Whether shapes must not depend on the values of tensors like ``t``: while a CUDA graph is
    being captured (:mod:`nmt_lib.fast.graphs`), when no value may be read back from the GPU."""
    return t.is_cuda and torch.cuda.is_current_stream_capturing()


def embedding(ids: Tensor, E: Tensor) -> Tensor:
    """``E[ids]`` (``F.embedding``); under :func:`static_shapes` by ``index_select``, whose backward
    (``index_add_``) reads nothing back from the GPU, where the embedding's (a sort) may."""
    if static_shapes(ids):
        return E.index_select(0, ids.flatten()).view(*ids.shape, E.shape[-1])
    return nn.functional.embedding(ids, E)


def active_rows(mask: Tensor | None, tile: int = ROW_TILE) -> list[int]:
    """For each step of a time-major ``mask [T, ..., B, 1]``: how many leading rows a scan computes,
    the last row with a real token at that step (any leading dim) + 1, rounded up to
    ``tile`` (:data:`ROW_TILE`).

    The rows after it are padding at that step, where the state is copied: with right-padded
    sentences sorted by length, longest first, the recurrences shrink as sentences end (cuDNN's
    packed sequences). Rounding to 16 rows, the AMX tile, bounds the matmul shapes (oneDNN builds
    a kernel per shape) at little cost. All ``B`` rows at every step under :func:`static_shapes`."""
    if mask is None:
        return []
    T, B = mask.shape[0], mask.shape[-2]
    if static_shapes(mask):
        return [B] * T
    real = mask.reshape(T, -1, B).any(1)  # [T, B]
    last = torch.where(real, torch.arange(1, B + 1, device=mask.device), 0).amax(1)
    return [min(B, -(-k // tile) * tile) for k in last.tolist()]


def fast_gru_scan(
    a: Tensor,
    h0: Tensor,
    U_rz: Tensor,
    U: Tensor,
    mask: Tensor | None = None,
    fused=None,
    tile: int = ROW_TILE,
) -> Tensor:
    """:func:`~nmt_lib.paper.gru.gru_scan`, the same function, with a hand-written backward through time.

    Autograd through :func:`~nmt_lib.paper.gru.gru_scan` computes the gradients of ``U_rz`` and ``U`` with one small
    matmul per step and adds them up step by step; here (as in cuDNN) the backward loop computes only
    what the recurrence needs, and each weight gradient is then one matmul over all ``B * T`` rows.
    The state, the gates and the gradients of the pre-activations stay in ``h0``'s dtype; the matrix
    products run in :func:`compute_dtype` (bf16 under autocast). Arguments and result as
    :func:`~nmt_lib.paper.gru.gru_scan` (``U_rz``, ``U`` may omit the leading dims of ``a``); ``fused``: compiled
    versions of the elementwise work (:func:`elementwise`) and of the per-step products
    (:func:`right_products`), or None; ``tile``: :func:`active_rows`'s.
    """
    *lead, B, T, n3 = a.shape
    n, cd = n3 // 3, compute_dtype(U)
    D = torch.Size(lead).numel()
    a_t = a.reshape(D, B, T, n3).permute(2, 0, 1, 3)  # time-major view: read in place, as it is
    m_t = None if mask is None else mask.reshape(D, B, T).permute(2, 0, 1).unsqueeze(-1)
    U_rz = U_rz.to(cd).expand(*lead, n, 2 * n).reshape(D, n, 2 * n)
    U = U.to(cd).expand(*lead, n, n).reshape(D, n, n)
    H = _GRUScan.apply(a_t, h0.reshape(D, B, n), U_rz, U, m_t, fused, tile)  # [T, D, B, n]
    return H.permute(1, 2, 0, 3).reshape(*lead, B, T, n)


class _GRUScan(torch.autograd.Function):
    """``a [T, D, B, 3n]``, ``h0 [D, B, n]``, ``U_rz [D, n, 2n]``, ``U [D, n, n]``, ``mask [T, D, B,
    1]`` or None -> ``h_1..h_T [T, D, B, n]``; D independent GRUs (e.g. the two directions).
    Step ``t`` computes only the first :func:`active_rows` rows; the others copy their state. ``a``
    may be any view, in any float dtype (the sums are computed in ``h0``'s); its gradient comes in
    ``a``'s memory layout."""

    @staticmethod
    def forward(ctx, a, h0, U_rz, U, mask, fused, tile):
        n, cd, B = h0.shape[-1], U.dtype, h0.shape[-2]
        H = h0.new_empty(a.shape[0], *h0.shape)  # h_1 .. h_T
        R, Z, Ht = torch.empty_like(H), torch.empty_like(H), torch.empty_like(H)
        RH = H.new_zeros(H.shape, dtype=cd)  # r_t ∘ h_{t-1}, the input of U
        ks = active_rows(mask, tile) or [B] * a.shape[0]
        h_c = h0.to(cd, copy=True) if cd != h0.dtype else None  # the state in the compute dtype
        gates, update, _, _ = elementwise(fused)
        times_U_rz, times_U = right_products(U_rz, fused), right_products(U, fused)
        with torch.autocast(h0.device.type, enabled=False):
            for t, k in enumerate(ks):
                h = h0 if t == 0 else H[t - 1]  # h_{t-1}; h_t is written into H[t]
                if k < B:  # the rows past their end: the state is copied
                    H[t, :, k:] = h[:, k:]
                h_k = h[:, :k]
                g = times_U_rz(h_k if h_c is None else h_c[:, :k])  # [D, k, 2n]
                gates(a[t, :, :k], None, g, h_k, R[t, :, :k], Z[t, :, :k], RH[t, :, :k])
                u = times_U(RH[t, :, :k])  # U (r ∘ h)
                update(
                    a[t, :, :k, :n],
                    None,
                    u,
                    Z[t, :, :k],
                    h_k,
                    None if mask is None else mask[t, :, :k],
                    Ht[t, :, :k],
                    H[t, :, :k],
                    None if h_c is None else h_c[:, :k],
                )
        ctx.save_for_backward(h0, U_rz, U, mask, H, R, Z, Ht, RH)
        ctx.ks, ctx.fused = ks, fused
        ctx.a_shape, ctx.a_order = a.shape, sorted(range(4), key=lambda i: -a.stride(i))
        return H

    @staticmethod
    def backward(ctx, dH):
        h0, U_rz, U, mask, H, R, Z, Ht, RH = ctx.saved_tensors
        (T, D, B), n, cd = H.shape[:3], h0.shape[-1], U.dtype
        H_prev = torch.cat([h0[None], H[:-1]])  # h_0 .. h_{T-1}
        order = ctx.a_order  # ∂L/∂a [T, D, B, 3n] ([candidate; z; r]) laid out in memory as a:
        dA = H.new_empty([ctx.a_shape[i] for i in order]).permute(
            [order.index(i) for i in range(4)]
        )
        dh = torch.zeros_like(h0)
        # in the compute dtype and direction-major, [D, T*B, ·] views for the weight gradients:
        D_cand = dA.new_empty(D, T, B, n, dtype=cd)  # ∂L/∂a of the candidate, for U
        D_rz = dA.new_empty(D, T, B, 2 * n, dtype=cd)  # ∂L/∂a of r, z, for [U_r; U_z]
        _, _, back_update, back_reset = elementwise(ctx.fused)
        times_U_t, times_U_rz_t = (
            right_products(U.mT, ctx.fused),
            right_products(U_rz.mT, ctx.fused),
        )
        for t in reversed(range(T)):
            k = ctx.ks[t]
            if k < B:  # the rows past their end
                dA[t, :, k:], D_cand[:, t, k:], D_rz[:, t, k:] = 0, 0, 0
            dh += dH[t]  # ∂L/∂h_t; rows from k on: past the end, h_t = h_{t-1}, it passes through
            m = None if mask is None else mask[t, :, :k]  # padding: h_t = h_{t-1}, it passes too
            h, r, z, h_tilde = H_prev[t, :, :k], R[t, :, :k], Z[t, :, :k], Ht[t, :, :k]
            back_update(dh[:, :k], m, z, h_tilde, h, dA[t, :, :k], D_cand[:, t, :k])
            d_rh = times_U_t(D_cand[:, t, :k])
            back_reset(d_rh, h, r, dA[t, :, :k], D_rz[:, t, :k], dh[:, :k])
            dh[:, :k] += times_U_rz_t(D_rz[:, t, :k])
        # weight gradients: one matmul over all steps and sentences each, [D, n, T*B] @ [D, T*B, k]
        rows = lambda x: x.transpose(0, 1).reshape(x.shape[1], -1, x.shape[-1])  # noqa: E731
        dU = product(transposed(rows(RH), cd, ctx.fused), D_cand.view(D, T * B, n), ctx.fused)
        dU_rz = product(
            transposed(rows(H_prev), cd, ctx.fused), D_rz.view(D, T * B, 2 * n), ctx.fused
        )
        dU, dU_rz = (in_transposed_layout(d, ctx.fused) for d in (dU, dU_rz))  # as [U_r; U_z], U
        return dA, dh, dU_rz, dU, None, None, None
