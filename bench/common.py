"""What the benchmarks share: shapes, synthetic batches, the training step, clocks, GEMM peak, FLOPs.

Not a test and not part of ``nmt_lib``. Timings on a shared machine are noisy: every script measures
``nmt_lib`` and the straightforward reference (``bench/naive.py``) alternately in the same process and
reports ratios of medians over the same batches.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/naive.py

from naive import check_same_function, naive_logp  # noqa: E402

from nmt_lib.backend import backend  # noqa: E402
from nmt_lib.config import ModelConfig, TrainConfig  # noqa: E402
from nmt_lib.fast import accelerate, kernels  # noqa: E402
from nmt_lib.gradients import clip_gradients  # noqa: E402
from nmt_lib.paper.model import build_model, forward_macs  # noqa: E402
from nmt_lib.runtime import cpu_flags, cpu_info, native_bf16  # noqa: E402

FAST = backend("fast")
FAST.tune_process()  # before the first oneDNN primitive of the process, as in training

#: The peers' "bench-small" (bench/README.md, "Definitions"): embeddings 256, encoder GRU 256 per direction,
#: decoder 512, alignment 512, maxout 256 (2l = 512), 10,000 words + 3 specials on each side; the
#: paper's full W_o (output_rank=None). Batch 64, 15-30 words (+ EOS) uniform on both sides.
#: "paper": App. A.2.3 sizes with GroundHog's rank-620 W_o (ModelConfig defaults), batch 80,
#: 10-50 words uniform.
SHAPES = {
    "small": dict(
        cfg=dict(
            src_vocab=10003,
            trg_vocab=10003,
            m=256,
            n=256,
            n_dec=512,
            n_align=512,
            l=256,
            output_rank=None,
        ),
        batch=64,
        lengths=(15, 30),
    ),
    "paper": dict(cfg=dict(), batch=80, lengths=(10, 50)),
}


def model_config(shape: str, arch: str) -> ModelConfig:
    return ModelConfig(arch=arch, **SHAPES[shape]["cfg"])


def setup_threads(threads: int) -> None:
    torch.set_num_threads(threads)
    torch.manual_seed(1234)


def machine_info() -> dict:
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "cpu": cpu_info("model name") or "?",
        "nproc": os.cpu_count(),
        "amx_bf16": "amx_bf16" in cpu_flags(),
        "cpu_bf16_native": native_bf16("cpu"),
        "onednn_float32": kernels.onednn_float32(),
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "loadavg_1min": load[0] if load else None,
        "THP_MEM_ALLOC_ENABLE": os.environ.get("THP_MEM_ALLOC_ENABLE"),
        "nmt_lib_kernels": kernels.library() is not None,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }


def synthetic_batches(cfg: ModelConfig, batch: int, lengths: tuple[int, int], count: int, seed=0):
    """``count`` batches ``(x, x_mask, y, y_mask)``: words uniform in the vocabulary, lengths uniform
    in ``lengths`` (words) independently on both sides, EOS appended, right-padded with 0."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(count):
        sides = []
        for K in (cfg.src_vocab, cfg.trg_vocab):
            L = torch.randint(lengths[0], lengths[1] + 1, (batch,), generator=g) + 1  # + EOS
            T = int(L.max())
            mask = torch.arange(T)[None] < L[:, None]
            ids = torch.randint(3, K, (batch, T), generator=g)
            ids[torch.arange(batch), L - 1] = 2  # EOS
            sides += [ids.masked_fill(~mask, 0), mask]
        out.append(tuple(sides))
    return out


def fixed_length(n: int):
    """The peers' decoding workload: a context that makes ``nmt_lib.search`` emit exactly ``n`` words
    per sentence (EOS forbidden before step ``n``, stop at ``n``: ``length_limits`` -> (n, n))."""
    from unittest import mock

    from nmt_lib import search

    def limits(x_mask, *_):
        k = torch.full((x_mask.shape[0],), n, dtype=torch.long, device=x_mask.device)
        return k, k

    return mock.patch.object(search, "length_limits", limits)


def default_precisions(device: str = "cpu") -> list[str]:
    """fp32, and bf16 where the device multiplies bf16 in hardware: elsewhere (an AVX2 CPU) bf16 is
    emulated, a bench-small training step ~30x slower than fp32 and one 2048^3 bf16 product of the
    GEMM peak ~30 s; ``--precision bf16`` times it all the same."""
    kind = torch.device(device).type
    if native_bf16(kind):
        return ["fp32", "bf16"]
    print(f"note: this {kind} has no bf16 matrix instructions: fp32 only (--precision to override)")
    return ["fp32"]


def autocast(precision: str, device: str = "cpu"):
    if precision != "bf16":
        return nullcontext()
    return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)


class Trainee:
    """One implementation being trained: a model (or a naive parameter dict) and its Adadelta.

    ``step(batch)`` is the full training step of ``nmt_lib.train.Trainer.step``: forward, the summed
    NLL, backward, global-norm clip to 1 (GroundHog), Adadelta (rho 0.95, eps 1e-6, lr 1): for
    nmt_lib, the fast backend's backward pass, optimizer and update, as the Trainer takes them; for
    the naive model, ``torch.optim.Adadelta`` after the clip.
    """

    def __init__(
        self,
        name: str,
        cfg: ModelConfig,
        model,
        naive: bool,
        precision: str,
        cuda_graphs: bool = False,
    ):
        self.name, self.cfg, self.naive, self.precision = name, cfg, naive, precision
        self.model, self.device = model, next(model.parameters()).device
        self.P = dict(model.named_parameters()) if naive else None
        self.params = list(model.parameters())
        if naive:
            self.opt = torch.optim.Adadelta(self.params, lr=1.0, rho=0.95, eps=1e-6)
        else:  # the paper's recipe on the fast backend, as the Trainer takes it
            self.opt = FAST.optimizer(TrainConfig(max_updates=1), self.params)
            self.backward = FAST.backward(model, self.params, precision, self.device, cuda_graphs)

    def logp(self, x, x_mask, y, y_mask):
        if self.naive:
            return naive_logp(self.P, self.cfg, x, x_mask, y, y_mask)
        return self.model(x, x_mask, y, y_mask)[0]

    def step(self, batch) -> float:
        self.opt.zero_grad(set_to_none=True)
        if not self.naive:  # as train.Trainer
            loss = self.backward(*batch)
            FAST.update(self.opt, self.params, 1.0, "shrink")
            return float(loss.detach())
        with autocast(self.precision, self.device):
            logp = self.logp(*batch)
        loss = -logp.float().sum()
        loss.backward()
        norm, action = clip_gradients(self.params, 1.0, "shrink")
        if action != "skip":
            self.opt.step()
        return float(loss.detach())


def pair(cfg: ModelConfig, precision: str, device="cpu") -> tuple[Trainee, Trainee]:
    """``nmt_lib`` and the naive reference with identical initial parameters on ``device``; checks
    that they compute the same log-probabilities on a small batch (float32, on the CPU); nmt_lib's
    on its fast backend (:func:`nmt_lib.fast.accelerate`)."""
    model = accelerate(build_model(cfg))
    naive_model = copy.deepcopy(model)
    b = synthetic_batches(cfg, 4, (3, 8), 1, seed=99)[0]
    check_same_function(model, dict(naive_model.named_parameters()), cfg, *b)
    model, naive_model = model.to(device), naive_model.to(device)
    return (
        Trainee("nmt_lib", cfg, model, False, precision),
        Trainee("naive", cfg, naive_model, True, precision),
    )


def sync() -> None:
    """Wait for the GPU's queued work, if CUDA is in use (its work is asynchronous)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def timed(fn, *args):
    """``(result, wall seconds, process CPU seconds)``; the GPU's work done within them."""
    sync()
    w, c = time.perf_counter(), time.process_time()
    r = fn(*args)
    sync()
    return r, time.perf_counter() - w, time.process_time() - c


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def gemm_peak(dtype: torch.dtype, size: int | None = None, reps: int = 5, device="cpu") -> float:
    """The machine's GEMM peak in FLOP/s: the best of ``reps`` ``[size]^3`` ``torch.matmul`` (bf16:
    AMX where present, tensor cores on a GPU), with this process's thread count, and in float32
    where nmt_lib multiplies by oneDNN (``kernels.onednn_float32``) the best of oneDNN's too.
    ``size``: 2048 on a CPU, 8192 on a GPU (smaller products leave an H100's multiprocessors
    partly idle)."""
    size = size or (2048 if torch.device(device).type == "cpu" else 8192)
    a = torch.randn(size, size).to(device, dtype)
    b = torch.randn(size, size).to(device, dtype)
    out = torch.empty(size, size, dtype=dtype, device=device)
    products = [lambda: torch.matmul(a, b, out=out)]
    if device == "cpu" and dtype == torch.float32 and kernels.onednn_float32():
        products.append(lambda: kernels.matmul(a, b))
    best = math.inf
    for product in products:
        product()
        best = min(best, *(timed(product)[1] for _ in range(reps)))
    return 2 * size**3 / best


def batch_train_flops(cfg: ModelConfig, batch) -> float:
    """Model FLOPs of one training step on ``batch`` (real tokens only): 3 × 2 × forward MACs."""
    _, x_mask, _, y_mask = batch
    src, trg = x_mask.sum(1).tolist(), y_mask.sum(1).tolist()
    return 6 * sum(forward_macs(cfg, a, b) for a, b in zip(src, trg, strict=True))


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child_peak_rss(args: list[str]) -> dict:
    """Run ``python args`` (a fresh process) and parse its last ``RSS {json}`` line."""
    import json

    out = subprocess.run([sys.executable, *args], capture_output=True, text=True, check=True)
    lines = [x for x in out.stdout.splitlines() if x.startswith("RSS ")]
    return json.loads(lines[-1][4:])


def replace_cfg(cfg: ModelConfig, **kw) -> ModelConfig:
    return dataclasses.replace(cfg, **kw)
