"""Optional compiled CPU kernels: work that PyTorch operations cannot fuse, in plain C (``kernels.c``).

A beam step normalises and ranks ``[beam * B, K]`` logits: in PyTorch ops that is a float32 copy,
the bias, the max, ``exp``, the sum and the top-k, each a pass over the matrix (25 MB at bench-small,
out of cache); the kernel does it row by row in one pass over the logits, in cache. Likewise the
attention step (energies, masked softmax and context, and in training its backward), the training
output layer, the elementwise work of every GRU step (gates, update and their backward: a dozen
PyTorch operations per step, each a pass over memory and a dispatch, in both training scans and the
decoding step), the transposing copies before the weight-gradient matmuls, and Adadelta's update.
And :func:`right_product`: the training scans' per-step products, by AMX tiles where the CPU has
them (``amx_product``), else by oneDNN's prepacked weights (PyTorch's own operators).

The C file is compiled on first use (the first CPU beam search or training step of a process) with
the system's C compiler (``$CC``, else ``cc``; gcc or clang with OpenMP) for this machine
(``-march=native``), into ``$NMT_LIB_CACHE`` (default ``~/.cache/nmt_lib``), once per source, flags
and CPU, and loaded with ctypes: about a second, once. Where there is no compiler, the build fails,
or ``NMT_LIB_KERNELS=0``, :func:`library` is None (with a warning when a build failed) and the
callers use their PyTorch operations: the same results up to float rounding (the tests compare the
two), only slower. Imports only torch.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import math
import os
import platform
import shlex
import subprocess
import tempfile
import threading
import warnings
from pathlib import Path

import torch
from torch import Tensor

from ..runtime import cpu_flags, cpu_info
from .process import tune_process

SOURCE = Path(__file__).with_name("kernels.c")
FLAGS = (
    "-O3",
    "-march=native",
    "-fopenmp",
    "-fno-math-errno",
    "-fno-trapping-math",
    "-shared",
    "-fPIC",
) + (
    ("-mprefer-vector-width=512",) if platform.machine() in ("x86_64", "AMD64") else ()
)  # AVX-512 where there is: a faster tanh (bench/README.md, "Compiled kernels")


def _cpu_id() -> bytes:
    """What ``-march=native`` compiles for: the machine and its CPU's feature flags (x86 "flags",
    ARM "Features" and "CPU part")."""
    flags = sorted(cpu_flags()), cpu_info("CPU part")
    return f"{platform.machine()} {platform.processor()} {flags}".encode()


def build(cc: str, folder: Path) -> Path:
    """Compile ``kernels.c`` with the command ``cc`` (may hold arguments, e.g. ``"ccache gcc"``)
    into ``folder`` (once: the file name carries a hash of the source, the compiler command and the
    CPU) and return the library's path. Raises OSError or ``subprocess.SubprocessError`` when the
    compiler is missing or fails."""
    key = hashlib.sha256(SOURCE.read_bytes() + " ".join((cc, *FLAGS)).encode() + _cpu_id())
    lib = folder / f"kernels-{key.hexdigest()[:16]}.so"
    if not lib.exists():
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(suffix=".tmp", prefix=lib.name + ".", dir=folder)  # each its own
        os.close(fd)
        try:
            subprocess.run(
                [*shlex.split(cc), *FLAGS, "-o", tmp, str(SOURCE)],
                check=True,
                capture_output=True,
                text=True,
                timeout=300,
            )
            os.replace(tmp, lib)
        finally:
            Path(tmp).unlink(missing_ok=True)
    return lib


_LOCK = threading.Lock()
_LOADED: list = []  # [the library or None], once loaded


def library() -> ctypes.CDLL | None:
    """The compiled kernels, or None (``NMT_LIB_KERNELS=0``, no compiler, or a failed build); built
    and loaded by the first call of the process (thread-safe)."""
    with _LOCK:
        if not _LOADED:
            _LOADED.append(load())
        return _LOADED[0]


def load() -> ctypes.CDLL | None:
    """Build (if needed) and load the kernels, without :func:`library`'s memo."""
    if os.environ.get("NMT_LIB_KERNELS", "1") == "0":
        return None
    cc = os.environ.get("CC") or "cc"
    try:
        folder = Path(os.environ.get("NMT_LIB_CACHE") or Path.home() / ".cache" / "nmt_lib")
        lib = ctypes.CDLL(str(build(cc, folder)))
    except (OSError, RuntimeError, ValueError, subprocess.SubprocessError) as e:
        detail = getattr(e, "stderr", None) or e
        warnings.warn(
            f"nmt_lib: could not build {SOURCE.name} with {cc!r} ({detail}); beam search "
            "and training on the CPU use PyTorch operations instead (slower). "
            "NMT_LIB_KERNELS=0 silences this.",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    return _declare(lib)


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    """``lib`` with the argument types of ``kernels.c``'s functions, one table (``v``: a strided
    operand, :class:`View`); each returns nothing but ``amx_ready``, an int."""
    p, i64, i32, f32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_float
    v = ctypes.POINTER(View)
    argtypes = {
        "best_words": [p, i32, i64, i64, i64, p, p, i32, i32, i64, i32, p, p, p],
        "attend": [p, p, p, p, p, i32, i64, i64, i64, i64, i64, i32, p, p, i32],
        "target_logp": [p, i32, i64, i64, i64, p, p, i32, p, p],
        "target_logp_backward": [p, i32, i64, i64, i64, p, p, p, p, p, i32, p],
        "attend_backward": [p, p, p, p, i32, p, i32, p, p, i64, i64, i64, i64, i32, p, p, v, p],
        "gru_gates": [i64, i64, i64, v, v, v, v, v, v, v, i32],
        "gru_update": [i64, i64, i64, v, v, v, v, v, p, i64, i64, v, v, v, i32],
        "gru_backward_update": [i64, i64, i64, v, p, i64, i64, v, v, v, v, v, i32],
        "gru_backward_reset": [i64, i64, i64, v, v, v, v, v, v, v, i32],
        "adadelta": [p, p, p, p, i64, f32, f32, f32, f32, f32, i32],
        "transpose": [i64, i64, i64, v, p, i32, i32],
        "amx_pack": [i64, i64, i64, p, i64, i64, i64, p, i32],
        "amx_product": [i64, i64, i64, i64, v, p, p, v, p, i32],
    }
    for name, types in argtypes.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = types, None
    lib.amx_ready.restype = ctypes.c_int
    return lib


def _buffer(*shape: int, dtype: torch.dtype = torch.float32, zero: bool = False) -> Tensor:
    """A CPU tensor for the kernels to write (not the default dtype or device: the C code's)."""
    return (torch.zeros if zero else torch.empty)(*shape, dtype=dtype, device="cpu")


def _cpu(*ts: Tensor, dtypes=(torch.float32,)) -> bool:
    return all(t.device.type == "cpu" and t.dtype in dtypes for t in ts)


def best_words(
    x: Tensor, k: int, no_eos: Tensor, ignore_unk: bool, bias: Tensor | None, normalized: bool
) -> tuple[Tensor, Tensor] | None:
    """:func:`nmt_lib.fast.steps.best_words` in one pass (``kernels.c``), or None where the kernel does
    not apply (not CPU tensors, a dtype other than bf16/float32, ``k > K``, ``no_eos`` not one flag
    per row, no library): then the caller computes it with PyTorch operations. ``x`` is not
    modified. A NaN logit is never among the best words (PyTorch's ``topk`` puts it first)."""
    R, K = x.shape
    if (
        not _cpu(x, dtypes=(torch.bfloat16, torch.float32))
        or not 0 < k <= K
        or R == 0
        or no_eos.numel() != R
        or no_eos.device.type != "cpu"
        or (bias is not None and (bias.numel() != K or not _cpu(bias, dtypes=(bias.dtype,))))
        or (lib := library()) is None
    ):
        return None
    if x.stride(1) != 1:
        x = x.contiguous()
    b = torch.zeros(K) if bias is None else bias.to(torch.float32).contiguous()
    mask = no_eos.reshape(R).to(torch.uint8).contiguous()
    threads = torch.get_num_threads()
    work = _buffer(threads, K + -(-K // 64))  # each thread's row and block maxima
    v, j = _buffer(R, k), _buffer(R, k, dtype=torch.long)
    lib.best_words(
        x.data_ptr(),
        x.dtype == torch.bfloat16,
        R,
        K,
        x.stride(0),
        b.data_ptr(),
        mask.data_ptr(),
        ignore_unk,
        not normalized,
        k,
        threads,
        work.data_ptr(),
        v.data_ptr(),
        j.data_ptr(),
    )
    return v, j


def _rows_of(t: Tensor, *shape: int) -> bool:
    """Whether ``t`` is a contiguous bf16 or float32 CPU tensor of ``shape``."""
    return (
        _cpu(t, dtypes=(torch.bfloat16, torch.float32)) and t.shape == shape and t.is_contiguous()
    )


MAX_CONTEXT = 8192  # kernels.c: ctx, n' of the attention kernels (rows on each thread's stack)


def attend(
    Uh: Tensor, Ws: Tensor, v_a: Tensor, h: Tensor, mask: Tensor, out: tuple | None = None
) -> tuple[Tensor, Tensor] | None:
    """One attention step in one pass (``kernels.c``): the energies
    (:func:`nmt_lib.fast.attention.energies_in_pieces`) at the real positions only, the masked softmax
    (:func:`nmt_lib.paper.attention.masked_softmax`) and the context ``c = Σ_j α_j h_j`` accumulated in
    float32 (:func:`nmt_lib.paper.attention.context` rounds ``α`` to ``h``'s dtype first); a row without
    real positions gets ``α = 0``, ``c = 0`` (``masked_softmax``: NaN). ``Uh [B, Tx, n']``,
    ``Ws [G * B, n']``, ``v_a [n']`` float32; ``h [B, Tx, ctx]`` bf16 or float32; ``mask [B, Tx]``
    bool. Returns ``(c [G * B, ctx]`` in ``h``'s dtype, ``α [G * B, Tx]`` float32), written into
    ``out = (c, α)`` when given (contiguous, ``c`` bf16 or float32); or None where the kernel does
    not apply (other dtypes, shapes or devices, ``ctx`` > ``MAX_CONTEXT``, an ``out`` it cannot
    write, no library)."""
    (B, Tx, N), (GB, C) = Uh.shape, (Ws.shape[0], h.shape[-1])
    if (
        not _cpu(Uh, Ws, v_a)
        or Ws.shape != (GB, N)
        or v_a.shape != (N,)
        or GB % max(B, 1)
        or (GB and not B)
        or not _rows_of(h, B, Tx, C)
        or C > MAX_CONTEXT
        or mask.shape != (B, Tx)
        or not _cpu(mask, dtypes=(torch.bool,))
    ):
        return None
    c, alpha = out or (_buffer(GB, C, dtype=h.dtype), _buffer(GB, Tx))
    if (
        not _rows_of(c, GB, C)
        or not _cpu(alpha)
        or alpha.shape != (GB, Tx)
        or not alpha.is_contiguous()
        or (lib := library()) is None
    ):
        return None
    Uh, Ws, v_a, mask = Uh.contiguous(), Ws.contiguous(), v_a.contiguous(), mask.contiguous()
    if GB:
        lib.attend(
            Uh.data_ptr(),
            Ws.data_ptr(),
            v_a.data_ptr(),
            mask.data_ptr(),
            h.data_ptr(),
            h.dtype == torch.bfloat16,
            B,
            GB // B,
            Tx,
            N,
            C,
            torch.get_num_threads(),
            alpha.data_ptr(),
            c.data_ptr(),
            c.dtype == torch.bfloat16,
        )
    return c, alpha


def attend_backward(
    Uh: Tensor,
    q: Tensor,
    v_a: Tensor,
    h: Tensor,
    d_c: Tensor,
    alpha: Tensor,
    d_alpha: Tensor | None,
    d_sum: Tensor,
    d_q: Tensor,
    dv: Tensor,
) -> bool:
    """The backward of :func:`attend` for one state per sentence (``kernels.c``), for
    ``nmt_lib.fast.decoder._AttentionDecoderScan``: from ``∂L/∂c = d_c [B, ctx]`` and ``∂L/∂α = d_alpha
    [B, Tx]`` (None: 0), writes ``∂L/∂q = v_a ∘ Σ_j ∂L/∂e_j (1 - t_j²)`` into ``d_q [B, n']`` (``q =
    W_a s``; bf16 or float32, rows may be strided) and adds, in place, ``∂L/∂e ∘ (1 - t²)`` to
    ``d_sum [B, Tx, n']`` and ``Σ_j ∂L/∂e_j t_j`` to ``dv [B, n']`` (summed over the rows by the
    caller: ``∂L/∂v_a``). ``Uh``, ``q``, ``v_a``, ``alpha``, ``d_alpha``, ``d_sum``, ``dv`` float32,
    ``h`` and ``d_c`` both bf16 or both float32. True when done, False (nothing written) where the
    kernel does not apply (other dtypes, shapes or devices, ``d_sum`` or ``dv`` not contiguous,
    ``ctx`` or ``n'`` > ``MAX_CONTEXT``, no library)."""
    (B, Tx, N), C = Uh.shape, h.shape[-1]
    if (
        not _attend_backward_applies(Uh, q, v_a, h, d_c, alpha, d_alpha, d_sum, dv)
        or (vq := _view(d_q, 1, B, N)) is None
        or (lib := library()) is None
    ):
        return False
    Uh, q, v_a, alpha, d_c = (t.contiguous() for t in (Uh, q, v_a, alpha, d_c))
    d_alpha, d_e = None if d_alpha is None else d_alpha.contiguous(), _buffer(B, Tx)
    lib.attend_backward(
        Uh.data_ptr(),
        q.data_ptr(),
        v_a.data_ptr(),
        h.data_ptr(),
        h.dtype == torch.bfloat16,
        d_c.data_ptr(),
        d_c.dtype == torch.bfloat16,
        alpha.data_ptr(),
        None if d_alpha is None else d_alpha.data_ptr(),
        B,
        Tx,
        N,
        C,
        torch.get_num_threads(),
        d_e.data_ptr(),
        d_sum.data_ptr(),
        ctypes.byref(vq),
        dv.data_ptr(),
    )
    return True


def _attend_backward_applies(Uh, q, v_a, h, d_c, alpha, d_alpha, d_sum, dv) -> bool:
    """Whether :func:`attend_backward`'s kernel takes these operands (its docstring: dtypes, shapes,
    devices, contiguous ``d_sum`` and ``dv``, sizes up to ``MAX_CONTEXT``)."""
    (B, Tx, N), C = Uh.shape, h.shape[-1]
    return not (
        not _cpu(Uh, q, v_a, alpha, d_sum, dv, *([] if d_alpha is None else [d_alpha]))
        or q.shape != (B, N)
        or v_a.shape != (N,)
        or alpha.shape != (B, Tx)
        or d_sum.shape != Uh.shape
        or dv.shape != (B, N)
        or (d_alpha is not None and d_alpha.shape != (B, Tx))
        or not d_sum.is_contiguous()
        or not dv.is_contiguous()
        or not _rows_of(h, B, Tx, C)
        or d_c.dtype != h.dtype
        or d_c.shape != (B, C)
        or d_c.device != h.device
        or max(C, N) > MAX_CONTEXT
    )


def _logits_apply(z: Tensor, bias: Tensor, y: Tensor) -> bool:
    """Whether the output-layer kernels take ``z [N, K]`` (bf16/float32, rows contiguous), a
    float32 ``bias [K]`` and long targets ``y [N]`` in range, all on the CPU."""
    N, K = z.shape
    return (
        _cpu(z, dtypes=(torch.bfloat16, torch.float32))
        and z.stride(1) == 1
        and _cpu(bias)
        and bias.numel() == K
        and _cpu(y, dtypes=(torch.long,))
        and y.numel() == N
        and (N == 0 or 0 <= int(y.min()) and int(y.max()) < K)
    )


def target_log_prob(z: Tensor, bias: Tensor, y: Tensor) -> tuple[Tensor, Tensor] | None:
    """The forward of :func:`nmt_lib.fast.output.target_log_prob` after its matmul, in one pass per row
    (``kernels.c``): ``log softmax(z + bias)[y]`` ``[N]`` float32 and the row statistics ``[N, 2]``
    (max, log Σ exp) for :func:`target_log_prob_backward`; or None where the kernel does not apply."""
    if not _logits_apply(z, bias, y) or (lib := library()) is None:
        return None
    (N, K), y, bias = z.shape, y.contiguous(), bias.contiguous()
    logp, stats = _buffer(N), _buffer(N, 2)
    lib.target_logp(
        z.data_ptr(),
        z.dtype == torch.bfloat16,
        N,
        K,
        z.stride(0),
        bias.data_ptr(),
        y.data_ptr(),
        torch.get_num_threads(),
        logp.data_ptr(),
        stats.data_ptr(),
    )
    return logp, stats


def target_log_prob_backward(
    z: Tensor, bias: Tensor, y: Tensor, g: Tensor, stats: Tensor, logp: Tensor
) -> Tensor | None:
    """Its backward: overwrites the logits ``z`` with their gradient ``g (onehot(y) - softmax)``
    and returns the bias's gradient ``[K]`` float32; or None (nothing done) where the kernel does
    not apply."""
    if (
        not _logits_apply(z, bias, y)
        or not _cpu(g, stats, logp)
        or g.numel() != z.shape[0]
        or (lib := library()) is None
    ):
        return None
    (N, K), threads = z.shape, torch.get_num_threads()
    y, bias, g = y.contiguous(), bias.contiguous(), g.contiguous()
    db = _buffer(threads, K, zero=True)
    lib.target_logp_backward(
        z.data_ptr(),
        z.dtype == torch.bfloat16,
        N,
        K,
        z.stride(0),
        bias.data_ptr(),
        y.data_ptr(),
        g.data_ptr(),
        stats.data_ptr(),
        logp.data_ptr(),
        threads,
        db.data_ptr(),
    )
    return db.sum(0)


class View(ctypes.Structure):
    """``kernels.c``'s ``view``: a ``[D, rows, columns]`` bf16/float32 tensor whose columns are
    contiguous; data None: absent."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("sd", ctypes.c_int64),
        ("sr", ctypes.c_int64),
        ("bf16", ctypes.c_int32),
    ]


MAX_UNITS = 4096  # kernels.c: the GRU kernels' n (their rows live on the threads' stacks)
_ABSENT = View(None, 0, 0, 0)
_IS_BF16 = {torch.float32: 0, torch.bfloat16: 1}


def _view(t: Tensor | None, D: int, k: int, cols: int) -> View | None:
    """A :class:`View` of ``t``, a CPU bf16/float32 ``[D, k, cols]`` tensor (``[k, cols]`` when
    ``D`` is 1) with contiguous columns and no two rows in the same memory (``_ABSENT`` for None),
    or None if it is not one. Cheap: called for every operand of every recurrent step."""
    if t is None:
        return _ABSENT
    bf16, shape = _IS_BF16.get(t.dtype), t.shape
    if bf16 is None or not t.is_cpu:
        return None
    if len(shape) == 2 and D == 1 and shape == (k, cols):
        (sr, sc), sd = t.stride(), 0
    elif shape == (D, k, cols):
        sd, sr, sc = t.stride()
    else:
        return None
    if (sc != 1 and cols > 1) or (sd == 0 and D > 1) or (sr == 0 and k > 1):  # e.g. expand()ed
        return None
    return View(t.data_ptr(), sd, sr, bf16)


def _mask(mask: Tensor | None, D: int, k: int) -> tuple | None:
    """``(pointer, stride over D, stride over rows)`` of a CPU bool ``mask [D, k, 1]`` (``[k, 1]``
    when ``D`` is 1), ``(None, 0, 0)`` for no mask, None if it is not such a tensor."""
    if mask is None:
        return None, 0, 0
    if mask.dtype != torch.bool or not mask.is_cpu:
        return None
    if mask.shape == (D, k, 1):
        return mask.data_ptr(), mask.stride(0), mask.stride(1)
    if D == 1 and mask.shape == (k, 1):
        return mask.data_ptr(), 0, mask.stride(0)
    return None


def _dims(h: Tensor) -> tuple[int, int, int] | None:
    """``(D, k, n)`` of the GRU kernels' state ``h``: ``[D, k, n]``, or ``[k, n]`` for one GRU."""
    if h.dim() == 3:
        return h.shape
    return (1, *h.shape) if h.dim() == 2 else None


def _ready(n: int, D: int, k: int, views: list) -> ctypes.CDLL | None:
    """The library, if the GRU kernels apply: every view made, ``0 < n <= MAX_UNITS``, rows."""
    if D * k == 0 or not 0 < n <= MAX_UNITS or None in views:
        return None
    return library()


def gru_gates(a, x, g, h, r, z, rh) -> bool:
    """:func:`nmt_lib.fast.scan.gru_gates` (``kernels.c``), all ``[D, k, ·]`` or ``[k, ·]``: True when
    done, False (nothing written) where the kernel does not apply."""
    if (dims := _dims(h)) is None:
        return False
    D, k, n = dims
    vs = [
        _view(a, D, k, 3 * n),
        _view(x, D, k, 3 * n),
        _view(g, D, k, 2 * n),
        _view(h, D, k, n),
        _view(r, D, k, n),
        _view(z, D, k, n),
        _view(rh, D, k, n),
    ]
    if (lib := _ready(n, D, k, vs)) is None:
        return False
    lib.gru_gates(D, k, n, *map(ctypes.byref, vs), torch.get_num_threads())
    return True


def gru_update(a, x, u, z, h, mask, ht, out, out_c=None) -> bool:
    """:func:`nmt_lib.fast.scan.gru_update` (``kernels.c``), all ``[D, k, ·]`` or ``[k, ·]`` (``mask
    [D, k, 1]`` / ``[k, 1]`` bool or None; ``out`` may be ``h``): True when done, False (nothing
    written) where the kernel does not apply."""
    if (dims := _dims(h)) is None:
        return False
    D, k, n = dims
    vs = [_view(t, D, k, n) for t in (a, x, u, z, h, ht, out, out_c)]
    if (m := _mask(mask, D, k)) is None or (lib := _ready(n, D, k, vs)) is None:
        return False
    refs = list(map(ctypes.byref, vs))
    lib.gru_update(D, k, n, *refs[:5], *m, *refs[5:], torch.get_num_threads())
    return True


def gru_backward_update(dh, mask, z, ht, h, dA, dcand_c) -> bool:
    """:func:`nmt_lib.fast.scan.gru_backward_update` (``kernels.c``), all ``[D, k, ·]`` or ``[k, ·]``:
    True when done, False (nothing written) where the kernel does not apply."""
    if (dims := _dims(h)) is None:
        return False
    D, k, n = dims
    vs = [
        _view(dh, D, k, n),
        _view(z, D, k, n),
        _view(ht, D, k, n),
        _view(h, D, k, n),
        _view(dA, D, k, 3 * n),
        _view(dcand_c, D, k, n),
    ]
    if (m := _mask(mask, D, k)) is None or (lib := _ready(n, D, k, vs)) is None:
        return False
    refs = list(map(ctypes.byref, vs))
    lib.gru_backward_update(D, k, n, refs[0], *m, *refs[1:], torch.get_num_threads())
    return True


def gru_backward_reset(d_rh, h, r, dA, drz_c, dh, dA_c=None) -> bool:
    """:func:`nmt_lib.fast.scan.gru_backward_reset` (``kernels.c``), all ``[D, k, ·]`` or ``[k, ·]``:
    True when done, False (nothing written) where the kernel does not apply."""
    if (dims := _dims(h)) is None:
        return False
    D, k, n = dims
    vs = [
        _view(d_rh, D, k, n),
        _view(h, D, k, n),
        _view(r, D, k, n),
        _view(dA, D, k, 3 * n),
        _view(drz_c, D, k, 2 * n),
        _view(dh, D, k, n),
        _view(dA_c, D, k, 3 * n),
    ]
    if (lib := _ready(n, D, k, vs)) is None:
        return False
    lib.gru_backward_reset(D, k, n, *map(ctypes.byref, vs), torch.get_num_threads())
    return True


def transposed(x: Tensor, dtype: torch.dtype) -> Tensor | None:
    """:func:`nmt_lib.fast.scan.transposed` (``kernels.c``): ``x.mT`` as a new contiguous tensor of
    ``dtype``, ``x`` ``[..., R, C]`` bf16/float32 with contiguous columns and leading dims that
    flatten into one; None where the kernel does not apply. Faster than PyTorch's transposing copy
    (bench/README.md, "Compiled kernels")."""
    if x.dim() < 2 or dtype not in _IS_BF16:
        return None
    *lead, R, C = x.shape
    try:
        x3 = x.view(math.prod(lead), R, C)
    except RuntimeError:  # leading dims that do not flatten without a copy
        return None
    if (vx := _view(x3, x3.shape[0], R, C)) is None or (lib := library()) is None:
        return None
    out = torch.empty(*lead, C, R, dtype=dtype)
    if out.numel():
        lib.transpose(
            x3.shape[0],
            R,
            C,
            ctypes.byref(vx),
            out.data_ptr(),
            _IS_BF16[dtype],
            torch.get_num_threads(),
        )
    return out


def right_product(W: Tensor, bias: Tensor | None = None, amx_tiles: bool = True):
    """``x -> x @ W (+ bias [m])`` for a bf16 CPU weight ``W [n, m]`` or ``[D, n, m]`` that a
    recurrence (or a search) multiplies by at every step (or a float32 one where
    :func:`onednn_float32`), or None where nothing is faster than ``torch.matmul``. ``x``:
    ``[..., n]`` (``[D, k, n]`` for ``D`` > 1), bf16 or float32, contiguous rows; the product is
    in ``W``'s dtype, its float32 sums (and the bias) rounded once (as ``torch.matmul``'s).
    ``amx_tiles`` False: oneDNN's even where the CPU has AMX.

    With AMX (:func:`amx`), ``kernels.c``'s ``amx_product``: ``W`` packed once into the tiles'
    layout, ``x`` at every call. Without, for a 2-D ``W``: oneDNN's prepacked weight (as
    ``torch.compile``'s frozen linear layers), which spares the reorder that ``torch.matmul``
    does at every call. At the 16-80 rows of a recurrent step, oneDNN spends as long setting up
    a product as computing it (bench/README.md, "Prepacked oneDNN products"). None for another
    device or dtype, ``NMT_LIB_KERNELS=0``, or a 3-D ``W`` without AMX (one ``bmm`` was faster
    than two prepacked products)."""
    if amx_tiles and (fast := amx_product(W, bias)) is not None:
        return fast
    if not _recurrent_weight(W):
        return None
    W = W[0] if W.dim() == 3 and W.shape[0] == 1 else W  # x [1, k, n]: linear keeps leading dims
    if W.dim() != 2 or not _prepacking(W.dtype):
        return None
    # from a contiguous copy (the kernel's transpose where it applies): reordering a transposed
    # view is slower than copy and reorder (bench/README.md, "Prepacked oneDNN products")
    Wt = W.mT if W.mT.is_contiguous() else transposed(W, W.dtype)
    if Wt is None:
        Wt = W.mT.contiguous()
    packed, b = torch.ops.mkldnn._reorder_linear_weight(Wt), bias if bias is None else bias.to(W)
    return lambda x: torch.ops.mkldnn._linear_pointwise(x.to(W), packed, b, "none", [], "")


def amx_product(W: Tensor, bias: Tensor | None = None):
    """:func:`right_product` by ``kernels.c``'s ``amx_pack`` and ``amx_product`` (``x -> x @ W +
    bias``, the bias ``[m]`` added to the float32 sums before they are rounded), or None without
    AMX (:func:`amx`), for another device or dtype, or with ``NMT_LIB_KERNELS=0``. The decoding
    step uses it directly: at 640 rows it is faster than ``torch.matmul`` for some shapes only."""
    if (
        W.dtype != torch.bfloat16
        or not _recurrent_weight(W)
        or (lib := library()) is None
        or not amx()
    ):
        return None
    threads = torch.get_num_threads()
    *lead, K, N = W.shape
    b = None if bias is None else bias.to(torch.float32).reshape(N).contiguous()
    D = W.shape[0] if lead else 1
    W3, tiles_k = W.reshape(D, K, N), -(-K // 32)
    packed = _buffer(D * tiles_k * 32 * -(-N // 32) * 32, dtype=torch.bfloat16)
    lib.amx_pack(D, K, N, W3.data_ptr(), *W3.stride(), packed.data_ptr(), threads)
    work = [_buffer(0, dtype=torch.bfloat16)]  # x packed, reused by the calls

    def product(x: Tensor) -> Tensor:
        if x.shape[-1] != K or (D > 1 and (x.dim() != 3 or x.shape[0] != D)):
            raise ValueError(f"right_product: x {list(x.shape)} @ W {list(W.shape)}")
        M = x.shape[-2] if D > 1 else math.prod(x.shape[:-1])
        out, x3 = _buffer(*x.shape[:-1], N, dtype=torch.bfloat16), x.reshape(D, M, K)
        if (vx := _view(x3, D, M, K)) is None:  # another dtype, or strided columns
            vx = _view(x3 := x3.to(torch.bfloat16).contiguous(), D, M, K)
        if out.numel():
            if work[0].numel() < (size := D * -(-M // 16) * 16 * tiles_k * 32):
                work[0] = _buffer(size, dtype=torch.bfloat16)
            lib.amx_product(
                D,
                M,
                K,
                N,
                ctypes.byref(vx),
                packed.data_ptr(),
                None if b is None else b.data_ptr(),
                ctypes.byref(_view(out.view(D, M, N), D, M, N)),
                work[0].data_ptr(),
                threads,
            )
        return out

    return product


def _recurrent_weight(W: Tensor) -> bool:
    """Whether :func:`right_product` may take ``W``: a CPU ``[n, m]`` or ``[D, n, m]``, bf16 (or
    float32 where :func:`onednn_float32`), the kernels not turned off (``NMT_LIB_KERNELS=0``)."""
    return (
        W.device.type == "cpu"
        and W.dim() in (2, 3)
        and (W.dtype == torch.bfloat16 or (W.dtype == torch.float32 and onednn_float32()))
        and os.environ.get("NMT_LIB_KERNELS", "1") != "0"
    )


@functools.cache
def amx() -> bool:
    """Whether :func:`right_product` uses ``kernels.c``'s AMX code: the library was built for a CPU
    with AMX (bf16 tiles) and Linux lets this process use them."""
    return (lib := library()) is not None and lib.amx_ready() == 1


@functools.cache
def _prepacking(dtype: torch.dtype = torch.bfloat16) -> bool:
    """Whether this PyTorch has oneDNN's prepacked linear for ``dtype`` (private operators, so
    checked); for bf16, on a CPU where oneDNN runs bf16. The process is tuned first
    (:func:`~nmt_lib.fast.process.tune_process`): oneDNN reads its kernel cache's size once."""
    tune_process()
    try:
        x, w = torch.ones(2, 3, dtype=dtype), torch.ones(4, 3, dtype=dtype)
        y = torch.ops.mkldnn._linear_pointwise(
            x, torch.ops.mkldnn._reorder_linear_weight(w), None, "none", [], ""
        )
        native = dtype != torch.bfloat16 or torch.ops.mkldnn._is_mkldnn_bf16_supported()
        return native and bool((y == 3).all())
    except (AttributeError, RuntimeError):
        return False


@functools.cache
def onednn_float32() -> bool:
    """Whether float32 products on the CPU go through oneDNN (:func:`matmul`, :func:`right_product`)
    rather than ``torch.matmul`` (MKL): on AMD CPUs, where MKL's float32 products at the
    shapes of a training step ran longer than oneDNN's (bench/README.md, "oneDNN float32 on AMD
    CPUs"; PyTorch's bf16 products are oneDNN's already).
    ``NMT_LIB_KERNELS=0`` turns it off."""
    if os.environ.get("NMT_LIB_KERNELS", "1") == "0" or cpu_info("vendor_id") != "AuthenticAMD":
        return False
    return _prepacking(torch.float32)


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """``a @ b`` for 2-D or (batched) 3-D tensors without autograd (inside an autograd Function):
    by oneDNN where :func:`onednn_float32` and both are non-empty float32 CPU tensors (a 3-D
    product matrix by matrix), else ``torch.matmul``. The same product within float32 rounding
    (another order of the sums)."""
    if (
        a.dtype == b.dtype == torch.float32
        and a.device.type == b.device.type == "cpu"
        and a.dim() == b.dim() in (2, 3)
        and a.shape[:-2] == b.shape[:-2]
        and a.shape[-1] == b.shape[-2]
        and a.numel()
        and b.numel()
        and onednn_float32()
        and not (torch.is_grad_enabled() and (a.requires_grad or b.requires_grad))
    ):
        if a.dim() == 3:
            return torch.stack([matmul(x, y) for x, y in zip(a, b, strict=True)])
        a, b = _dense(a), _dense(b)  # oneDNN multiplies a row or column slice far slower
        return torch.ops.mkldnn._linear_pointwise(a, b.t(), None, "none", [], "")
    return torch.matmul(a, b)


def _dense(x: Tensor) -> Tensor:
    """``x`` (2-D) if it or its transpose is contiguous, else a contiguous copy."""
    return x if x.is_contiguous() or x.t().is_contiguous() else x.contiguous()


def adadelta(
    p: Tensor,
    g: Tensor,
    sq: Tensor,
    acc: Tensor,
    lr: float,
    rho: float,
    eps: float,
    grad_scale: float = 1.0,
) -> bool:
    """A step of ``torch.optim.Adadelta`` in one pass (``kernels.c``) over 1-D contiguous float32 CPU
    tensors of the same length: the parameters ``p``, gradient ``g``, ``square_avg`` ``sq`` and
    ``acc_delta`` ``acc``, updated in place; torch's operations in its order, correctly rounded
    (torch's own vectorized sqrt is an ulp off in ~1-20 % of the updates, by CPU), on the gradient
    ``g * grad_scale`` (as ``g.mul_(grad_scale)`` before; ``g`` is not modified). True when done,
    False (nothing written) where the kernel does not apply."""
    ts = (p, g, sq, acc)
    if (
        not _cpu(*ts)
        or any(t.dim() != 1 or t.stride(0) != 1 or t.shape != p.shape for t in ts)
        or (lib := library()) is None
    ):
        return False
    lib.adadelta(
        p.data_ptr(),
        g.data_ptr(),
        sq.data_ptr(),
        acc.data_ptr(),
        p.numel(),
        rho,
        1 - rho,
        eps,
        -lr,
        grad_scale,
        torch.get_num_threads(),
    )
    return True
