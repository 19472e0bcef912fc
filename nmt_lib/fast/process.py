"""What the fast paths want of the process: oneDNN's kernel cache and glibc's allocator, tuned once,
when the fast backend is asked to (``backend.tune_process()``: training, evaluation and
``translate`` ask) or the fast paths first use oneDNN
(:mod:`nmt_lib.fast.kernels`), never at import."""

from __future__ import annotations

import ctypes
import os
import sys

_TUNED: dict[str, bool] = {}


def tune_process() -> dict[str, bool]:
    """What the fast paths want of the process, done once, when the fast backend is asked to:

    * oneDNN's kernel cache: bf16 matmuls on CPUs run in oneDNN, which builds (JIT-compiles) a
      kernel for every new shape, and keeps 1024. Training meets more shapes than that (batch x
      length for every matmul of the encoder, decoder and their gradients), so with the default
      the kernels are evicted and rebuilt all the time (bench/README.md, "Memory: allocator and
      oneDNN's kernel cache"). ``ONEDNN_PRIMITIVE_CACHE_CAPACITY=8192``, unless the user
      exported a value; it takes effect if set before the process's first oneDNN primitive.
    * :func:`keep_freed_memory`.

    Returns what took (``{"onednn_cache": ..., "malloc": ...}``)."""
    if not _TUNED:
        os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "8192")
        _TUNED["onednn_cache"] = os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "8192"
        _TUNED["malloc"] = keep_freed_memory()
    return dict(_TUNED)


def keep_freed_memory() -> bool:
    """Keep freed memory in the process (glibc: ``M_TRIM_THRESHOLD`` 1 GiB, ``M_MMAP_THRESHOLD``
    32 MiB). glibc's default gives large freed blocks back to the OS and maps them again at the
    next allocation, page by page: a beam step allocates and frees ``[beam * B, K]`` logits, and
    the page faults cost beam search time (bench/README.md, "Memory: allocator and oneDNN's kernel
    cache"). Linux with glibc only; ``NMT_LIB_MALLOPT=0`` leaves malloc alone. Returns whether
    the settings took."""
    if os.environ.get("NMT_LIB_MALLOPT", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        return libc.mallopt(-1, 1 << 30) == 1 and libc.mallopt(-3, 1 << 25) == 1
    except (OSError, AttributeError):  # not glibc
        return False
