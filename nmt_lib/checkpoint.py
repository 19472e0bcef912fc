"""Checkpoints for multi-day runs: everything needed to continue a run *exactly*.

A checkpoint is one ``torch.save`` file holding the model and Adadelta states, the RNG states (torch,
CUDA, numpy, python), the data iterator's position, the update count, the wall time used, the best
dev NLL, the early-stopping counter, the resolved config and the fingerprint of the data and
vocabularies it was trained on. It is written atomically (a temporary file renamed over the old
one), so a crash or ``SIGKILL`` while saving leaves the previous checkpoint intact, and it carries
the sha256 of its contents: a file changed on disk afterwards (a flipped bit, a bad copy) is refused
when read, instead of training on from damaged weights. GroundHog saved every 10 minutes
(``saveFreq``, PAPER.md §3); we save every
``train.checkpoint_minutes`` and at the end, as ``last.pt`` (and ``best.pt`` with early stopping) in
a directory outside the results (:func:`default_checkpoint_dir`).

Checkpoints are read with ``torch.load(weights_only=True)``: tensors and plain values, and the numpy
array of the numpy RNG state (:data:`SAFE_GLOBALS`, allowed while reading a checkpoint only); a file
whose pickle needs anything else (an object that would run code when read) is refused. A truncated,
damaged or garbage file, or one written for another model or data setting, raises
:class:`CheckpointError` naming the file.

This module stores and reads the files; a trained model is loaded from them by :mod:`nmt_lib.loading`.

The file is a header line ``nmt_lib.checkpoint/2``, a line with the sha256 of the rest, and then
``torch.save``'s bytes. Files of format 1 (``torch.save``'s bytes alone) are still read, unchecked.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import random
from pathlib import Path

import numpy as np
import torch

from .config import CONFIGS, RunConfig, to_dict
from .io import atomic_write

#: A run's checkpoint files in its checkpoint directory: the latest, and the best on dev NLL (with
#: ``train.patience``).
LAST, BEST = "last.pt", "best.pt"

FORMAT = "nmt_lib.checkpoint/2"
_FORMATS = (FORMAT, "nmt_lib.checkpoint/1")  # what load_checkpoint reads

#: What a checkpoint holds besides tensors and plain values: the numpy RNG state's ``key`` (an array of
#: uint32), which ``torch.load(weights_only=True)`` is allowed to rebuild while reading one (numpy 1
#: named its function ``numpy.core.multiarray._reconstruct``).
_reconstruct = np._core.multiarray._reconstruct
SAFE_GLOBALS = [
    _reconstruct,
    (_reconstruct, "numpy.core.multiarray._reconstruct"),
    np.ndarray,
    np.dtype,
    np.dtypes.UInt32DType,
]

#: Settings that must not change when a run is resumed (budgets, evaluation, checkpointing,
#: precision, device and search settings may).
FINGERPRINT = {
    "model": None,  # every field
    "data": (
        "train",
        "src_lang",
        "trg_lang",
        "src_words",
        "trg_words",
        "max_len",
        "max_train_pairs",
        "batch_size",
        "sort_k_batches",
        "seed",
    ),
    "train": (
        "optimizer",
        "rho",
        "eps",
        "lr",
        "loss",
        "lr_schedule",
        "lr_decay",
        "warmup_updates",
        "clip_norm",
        "seed",
        "label_smoothing",
    ),
}


class CheckpointError(RuntimeError):
    """A checkpoint cannot be read or does not belong to this run; the message names the file."""


def default_checkpoint_dir(cfg: RunConfig, out_dir: str | os.PathLike) -> Path:
    """``<cache>/ckpt/<out_dir name>-<hash of its absolute path>``: never under the results, one
    directory per results directory, so tests and profiles never share checkpoints."""
    out_dir = Path(out_dir).resolve()
    tag = hashlib.sha256(str(out_dir).encode()).hexdigest()[:10]
    return cfg.data.resolved_cache_dir() / "ckpt" / f"{out_dir.name}-{tag}"


#: How results files name the cache directory (``data.cache_dir``, ``NMT_CACHE``, ``.cache``), so
#: that no committed file names a machine's directories: ``<cache>/ckpt/RNNsearch-50-…/last.pt``.
CACHE = "<cache>"


def portable(path: str | os.PathLike, cfg: RunConfig) -> str:
    """``path`` as a results file records it: relative to the run's cache directory, written
    ``<cache>/…`` (:data:`CACHE`), when it lies under it; else as it is (a ``--checkpoint-dir`` of
    the user's own)."""
    cache = cfg.data.resolved_cache_dir().resolve()
    try:
        return f"{CACHE}/{Path(path).resolve().relative_to(cache).as_posix()}"
    except ValueError:
        return str(path)


def located(recorded: str, cfg: RunConfig) -> Path:
    """The file that a results file names (:func:`portable`), in this machine's cache directory."""
    if recorded.startswith(CACHE + "/"):
        return cfg.data.resolved_cache_dir() / recorded[len(CACHE) + 1 :]
    return Path(recorded)


def rng_state() -> dict:
    """The states of every random generator a run may draw from."""
    state = {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(legacy=False),
        "python": random.getstate(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    """Restore :func:`rng_state` (the CUDA states only where the same devices exist)."""
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        if len(state["cuda"]) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(path: str | os.PathLike, state: dict) -> None:
    """Atomically write ``state`` (a dict; ``format`` is added) to ``path``, with its sha256."""
    buf = io.BytesIO()
    torch.save({"format": FORMAT, **state}, buf)
    body = buf.getbuffer()
    with atomic_write(path, "wb") as f:
        f.write(f"{FORMAT}\n{hashlib.sha256(body).hexdigest()}\n".encode())
        f.write(body)


def load_checkpoint(path: str | os.PathLike, map_location="cpu") -> dict:
    """Read a checkpoint written by :func:`save_checkpoint`; unreadable or damaged files raise
    :class:`CheckpointError` naming ``path``."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint")
    raw = path.read_bytes()
    body = memoryview(raw)
    header = f"{FORMAT}\n".encode()
    if raw.startswith(header):  # format 2: the sha256 line, then torch.save's bytes
        start = len(header) + 65
        written = raw[len(header) : start - 1].decode("ascii", "replace")
        body = body[start:]
        if hashlib.sha256(body).hexdigest() != written:
            raise CheckpointError(
                f"{path}: damaged checkpoint (its contents no longer match the sha256 written with "
                "them): delete it to start afresh, or restore a copy"
            )
    try:
        with torch.serialization.safe_globals(SAFE_GLOBALS):
            state = torch.load(io.BytesIO(body), map_location=map_location, weights_only=True)
    except pickle.UnpicklingError:  # an object that is not a tensor, a plain value or SAFE_GLOBALS
        try:
            found = torch.serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(body))
        except Exception:
            found = []
        raise CheckpointError(
            f"{path}: refused: it holds objects other than tensors and plain values "
            f"({', '.join(found) or 'unknown'}), which could run code when read; use a checkpoint "
            "written by nmt_lib"
        ) from None
    except Exception as e:  # truncated zip, garbage bytes, ...
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise CheckpointError(
            f"{path}: not a readable checkpoint ({type(e).__name__}: {first}); it may be truncated "
            "or corrupt: delete it to start afresh, or restore a copy"
        ) from None
    if not isinstance(state, dict) or state.get("format") not in _FORMATS:
        found = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise CheckpointError(f"{path}: not an nmt_lib checkpoint (format {found!r}, not {FORMAT})")
    return state


def fingerprint(cfg: RunConfig | dict) -> dict:
    """The part of a run's config that a checkpoint must match (:data:`FINGERPRINT`)."""
    d = to_dict(cfg) if isinstance(cfg, RunConfig) else cfg
    defaults = to_dict(RunConfig(name=""))  # a setting that a config predates has its default
    out = {}
    for sec, keys in FINGERPRINT.items():
        part = d.get(sec, {})
        if sec == "model" and part.get("arch", "RNNsearch") in CONFIGS:  # and a model field, its
            arch = part.get("arch", "RNNsearch")  # family's default (model.dropout, say)
            part = {**to_dict(CONFIGS[arch](arch=arch)), **part}
        for k in sorted(part) if keys is None else keys:
            out[f"{sec}.{k}"] = part.get(k, defaults[sec].get(k))
    return out


def check_compatible(state: dict, cfg: RunConfig, path: str | os.PathLike) -> None:
    """Raise :class:`CheckpointError` if checkpoint ``state`` (read from ``path``) was written for
    another model, data or optimizer setting than ``cfg``."""
    saved, mine = fingerprint(state.get("config", {})), fingerprint(cfg)
    diff = [
        f"{k}: checkpoint {saved[k]!r}, config {mine[k]!r}" for k in mine if saved[k] != mine[k]
    ]
    if diff:
        raise CheckpointError(
            f"{path}: checkpoint of run {state.get('config', {}).get('name')!r} does not match the "
            f"config of run {cfg.name!r}:\n  " + "\n  ".join(diff) + "\n(use another checkpoint "
            "directory, or start afresh without resuming)"
        )


def check_finite(weights: dict, path: str | os.PathLike) -> None:
    """Raise :class:`CheckpointError` naming ``path`` if a floating-point tensor of ``weights`` (a
    state dict) holds a NaN or an infinity: the weights of a run that diverged."""
    for name, t in weights.items():
        if torch.is_tensor(t) and t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise CheckpointError(
                f"{path}: non-finite weights (NaN or Inf in {name}): the run diverged; use an "
                "earlier checkpoint, or train again with a lower train.lr"
            )


def check_vocab(vocab, trained_on: dict | None, side: str, path, ckpt) -> None:
    """Raise :class:`CheckpointError` naming ``path`` if ``vocab`` (read from ``path``) is not the
    ``side`` ("src" or "trg") vocabulary that the checkpoint ``ckpt`` was trained with, as its data
    fingerprint ``trained_on`` records it (sha256 of the words in row order; checkpoints without
    one are not checked)."""
    want = (trained_on or {}).get(f"{side}_vocab")
    if want and vocab.digest() != want:
        what = {"src": "source", "trg": "target"}[side]
        raise CheckpointError(
            f"{path}: not the {what} vocabulary that {ckpt} was trained with ({len(vocab)} rows, "
            "other words or another order): use the vocabulary and data of the model's own run"
        )


def load_model_state(model: torch.nn.Module, state: dict, path: str | os.PathLike) -> None:
    """``model.load_state_dict(state["model"])`` with an error naming ``path`` on mismatch."""
    try:
        model.load_state_dict(state["model"])
    except (RuntimeError, KeyError) as e:
        raise CheckpointError(f"{path}: model weights do not fit this model: {e}") from None


def find_checkpoint(path: str | os.PathLike) -> Path:
    """A checkpoint file, or in a checkpoint directory ``best.pt`` when the run used early
    stopping and saved one, else ``last.pt``."""
    path = Path(path)
    if path.is_dir():
        cfg = path / "config.json"
        best = path / BEST
        if best.is_file() and cfg.is_file():
            if json.loads(cfg.read_text(encoding="utf-8"))["train"].get("patience"):
                return best
        return path / LAST
    return path
