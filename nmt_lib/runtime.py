"""Where and in what precision a model runs: the device a run asks for, and bf16 autocast where the
device multiplies bf16 in hardware (``train.device``, ``train.precision``)."""

from __future__ import annotations

import contextlib
import functools
import platform
import warnings

import torch


@functools.cache
def cpu_info(*keys: str) -> str:
    """The value of the first ``/proc/cpuinfo`` line that starts with one of ``keys``; "" where
    there is none (or no such file)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith(keys):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as ``/proc/cpuinfo`` lists them (x86 "flags", ARM "Features"); empty
    where there is no such file."""
    return frozenset(cpu_info("flags", "Features").split())


def resolve_device(name: str = "auto", local_rank: int = 0) -> torch.device:
    """``"auto"``: CUDA (this rank's GPU) when available, else CPU."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("train.device = 'cuda' but no CUDA device is available")
        return torch.device("cuda", local_rank)
    return torch.device(name)


@functools.cache
def native_bf16(device_type: str) -> bool:
    """Whether a device of this type multiplies bf16 matrices in hardware: a CUDA GPU with bf16
    support; an x86 CPU with AVX512-BF16 or AMX (its ``/proc/cpuinfo`` flags; without them oneDNN
    emulates bf16 products, far slower than float32: ``bench/README.md``, "Precision: bf16 where
    it is native"); another CPU where oneDNN runs bf16 (ARM's BF16 extension)."""
    if device_type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)
    if device_type != "cpu":
        return False
    flags = cpu_flags()
    if flags and platform.machine() in ("x86_64", "AMD64", "i686"):
        return bool({"avx512_bf16", "amx_bf16"} & flags)
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def resolve_precision(precision: str, device: torch.device) -> str:
    """What ``train.precision`` means on ``device``: ``"auto"`` is ``"bf16"`` where the device
    multiplies bf16 in hardware (:func:`native_bf16`) and ``"fp32"`` elsewhere; ``"bf16"`` and
    ``"fp32"`` are themselves."""
    if precision == "auto":
        return "bf16" if native_bf16(torch.device(device).type) else "fp32"
    return precision


def warn_emulated_bf16(precision: str, device: torch.device) -> None:
    """A warning when ``precision = "bf16"`` is asked of a device without bf16 hardware."""
    device = torch.device(device)
    if precision == "bf16" and not native_bf16(device.type):
        warnings.warn(
            f"train.precision = 'bf16' on a {device.type} device without bf16 matrix instructions"
            " (a CPU without AVX512-BF16 or AMX, a GPU before Ampere): its bf16 products are"
            " emulated, and a training step runs ~30x slower than in float32 on such a CPU"
            " (bench/README.md). train.precision = 'auto' chooses float32 there, bf16 where it is"
            " native.",
            RuntimeWarning,
            stacklevel=3,
        )


def autocast(device: torch.device, precision: str):
    """bf16 autocast (AMX or AVX512-BF16 on CPUs, tensor cores on GPUs) or nothing (``"fp32"``);
    ``"auto"`` as :func:`resolve_precision` resolves it."""
    if resolve_precision(precision, device) == "bf16":
        return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)
    return contextlib.nullcontext()
