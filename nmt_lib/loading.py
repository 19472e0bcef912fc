"""A trained model loaded to translate or evaluate with (:class:`Loaded`): from a checkpoint
(:func:`load_trained`, its vocabularies beside it: :func:`load_vocabs`), from the weights a profile
publishes with its results (:func:`load_published`, its files checked first: :func:`verify_published`),
or, for a run, whichever of the two it has (:func:`load_for_run`: the command line's ``translate``).

The model is built on its run's backend (``train.backend``), whose model classes carry their own
decoding steps (``model.steps()``; the fast models' word table: :func:`nmt_lib.decoding.decode`).
Writing checkpoints is :mod:`nmt_lib.checkpoint`'s, publishing :mod:`nmt_lib.publish`'s.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file

from .backend import backend
from .checkpoint import (
    CheckpointError,
    check_finite,
    check_vocab,
    default_checkpoint_dir,
    find_checkpoint,
    load_checkpoint,
    load_model_state,
)
from .config import RunConfig, run_dir_name, run_from_dict
from .data.vocab import Vocab
from .io import read_json, sha256_file
from .models import build_model

#: A published model's files (:mod:`nmt_lib.publish`): its weights, config and vocabularies, and
#: the file of their sha256s.
PUBLISHED_FILES = ("model.safetensors", "config.json", "src.vocab.txt", "trg.vocab.txt")
SUMS = "SHA256SUMS"


@dataclass(frozen=True)
class Loaded:
    """A trained model loaded once, with what translating or evaluating it needs.

    model: in eval mode, built on its run's backend (its decoding steps its own); cfg: the run's
    config (:class:`RunConfig`); on: that backend (:func:`nmt_lib.backend.backend` of
    ``cfg.train.backend``; what it wants of the process is the caller's to ask,
    ``on.tune_process()``); path: the file it was read from; trained_on: the fingerprint of its
    training data (:func:`nmt_lib.data.fingerprint`; None for old checkpoints and published
    models); src_vocab, trg_vocab: its vocabularies (None where not asked for).
    """

    model: torch.nn.Module
    cfg: RunConfig
    on: object
    path: Path
    trained_on: dict | None = None
    src_vocab: object = None
    trg_vocab: object = None


# ------------------------------------------------------------------------------- checkpoints
def load_trained(path: str | os.PathLike, device="cpu", vocabs: bool = False) -> Loaded:
    """The model of a checkpoint file or directory (:func:`~nmt_lib.checkpoint.find_checkpoint`),
    in eval mode on ``device``, on the run's backend; with ``vocabs``, also the vocabularies beside
    the file (:func:`load_vocabs`). Weights that are not all finite (a diverged run) raise
    :class:`~nmt_lib.checkpoint.CheckpointError`."""
    path = find_checkpoint(path)
    state = load_checkpoint(path)
    check_finite(state["model"], path)
    cfg = run_from_dict(state["config"])
    on = backend(cfg.train.backend)
    model = build_model(cfg.model, on)
    load_model_state(model, state, path)
    trained_on = state.get("data")
    src, trg = load_vocabs(path, trained_on) if vocabs else (None, None)
    return Loaded(model.to(device).eval(), cfg, on, path, trained_on, src, trg)


def load_vocabs(ckpt: str | os.PathLike, trained_on: dict | None) -> tuple:
    """The source and target vocabularies beside the checkpoint file ``ckpt``, checked against the
    fingerprint it records (``trained_on``): a file that is not the model's raises
    :class:`~nmt_lib.checkpoint.CheckpointError` naming it."""
    out = []
    for side in ("src", "trg"):
        f = Path(ckpt).parent / f"{side}.vocab.txt"
        try:
            v = Vocab.load(f)
        except (OSError, ValueError) as e:
            raise CheckpointError(f"{f}: cannot read the vocabulary of {ckpt} ({e})") from None
        check_vocab(v, trained_on, side, f, ckpt)
        out.append(v)
    return tuple(out)


# ------------------------------------------------------------------------------ published weights
def recorded_sums(path: Path) -> dict[str, str]:
    """``{file: sha256}`` as ``path/SHA256SUMS`` records them."""
    lines = (path / SUMS).read_text(encoding="utf-8").splitlines()
    return {name: digest for digest, _, name in (line.partition("  ") for line in lines)}


def manifest_sums(path: Path) -> tuple[Path, dict[str, str]]:
    """The profile's ``manifest.json`` beside the published model ``path``
    (``<results>/published/<run>/`` -> ``<results>/manifest.json``) and the sums it records for it
    (``{"published": {run: {file: sha256}}}``; none where it has no record of it)."""
    manifest = path.parent.parent / "manifest.json"
    try:
        published = read_json(manifest).get("published", {})
        sums = next(s for run, s in published.items() if run_dir_name(run) == path.name)
    except (OSError, ValueError, AttributeError, StopIteration):  # ConfigError: a run name
        return manifest, {}
    return manifest, sums if isinstance(sums, dict) else {}


def verify_published(path: str | os.PathLike) -> None:
    """Raise :class:`~nmt_lib.checkpoint.CheckpointError`, in one line naming the file, if a file
    of the published model ``path`` is missing or its sha256 is not the one ``SHA256SUMS`` records,
    or not the one the profile's results record (:func:`manifest_sums`)."""
    path = Path(path)
    sums = path / SUMS
    if not sums.is_file():
        raise CheckpointError(f"{sums}: missing: {path} is not a published model")
    want = recorded_sums(path)
    for name in PUBLISHED_FILES:
        f = path / name
        if name not in want:
            raise CheckpointError(f"{sums}: no sha256 for {name}")
        if not f.is_file():
            raise CheckpointError(f"{f}: missing from the published model")
        got = sha256_file(f)
        if got != want[name]:
            raise CheckpointError(
                f"{f}: sha256 {got[:16]}… is not the {want[name][:16]}… that {SUMS} records: the "
                f"file was changed or damaged; restore it (git checkout -- {path})"
            )
    manifest, recorded = manifest_sums(path)
    for name, digest in recorded.items():
        if name in want and want[name] != digest:
            raise CheckpointError(
                f"{path / name}: sha256 {want[name][:16]}… is not the {digest[:16]}… that "
                f"{manifest} records for it: the published model was changed after its results "
                f"were written; restore both (git checkout -- {path.parent.parent})"
            )


def load_published(path: str | os.PathLike, device="cpu") -> Loaded:
    """The published model ``path`` (:class:`Loaded`: the model, its config, backend and
    vocabularies), its files checked first (:func:`verify_published`); the model in float32, in
    eval mode on ``device``."""
    path = Path(path)
    verify_published(path)
    cfg = run_from_dict(read_json(path / PUBLISHED_FILES[1]))
    on = backend(cfg.train.backend)
    model = build_model(cfg.model, on)
    f = path / PUBLISHED_FILES[0]
    try:
        weights = load_file(str(f))
    except Exception as e:  # safetensors' own errors, a header that is not JSON, ...
        first = (str(e).strip().splitlines() or [""])[0]
        raise CheckpointError(
            f"{f}: not a readable safetensors file ({type(e).__name__}: {first})"
        ) from None
    check_weights(weights, model.state_dict(), f, cfg.name)
    model.load_state_dict({k: v.float() for k, v in weights.items()})
    src = Vocab.load(path / PUBLISHED_FILES[2])
    trg = Vocab.load(path / PUBLISHED_FILES[3])
    return Loaded(model.to(device).eval(), cfg, on, path, None, src, trg)


def check_weights(weights: dict, expected: dict, f: Path, run: str) -> None:
    """Raise :class:`~nmt_lib.checkpoint.CheckpointError` naming ``f`` unless ``weights`` have the
    names and shapes of the model's state dict ``expected``, its floating-point tensors in float16
    (as :func:`nmt_lib.publish.export` writes them) and the others in their own dtype, and are all
    finite."""
    if missing := sorted(set(expected) - set(weights)) or sorted(set(weights) - set(expected)):
        raise CheckpointError(
            f"{f}: the weights do not fit {run}: {missing[:3]} are missing or unexpected"
        )
    for name, t in weights.items():
        want = expected[name]
        dtype = torch.float16 if want.is_floating_point() else want.dtype
        if t.dtype != dtype or t.shape != want.shape:
            raise CheckpointError(
                f"{f}: {name} is {t.dtype} {list(t.shape)}, not the {dtype} {list(want.shape)} "
                f"of {run}'s published weights"
            )
    check_finite(weights, f)


# ------------------------------------------------------------------------------------- a run's
def load_for_run(
    cfg: RunConfig,
    results: str | os.PathLike,
    checkpoint: str | os.PathLike | None = None,
    device="cpu",
    profile: str = "PROFILE",
) -> Loaded:
    """The model of the run ``cfg`` whose profile's results are ``results``: the ``checkpoint``
    (file or directory) where one is named, else the run's own checkpoint
    (:func:`~nmt_lib.checkpoint.default_checkpoint_dir` of ``results/runs/<run>``), else its
    published weights (``results/published/<run>/``), with its vocabularies, on ``device``. A
    model of another run (another family, other sizes) raises
    :class:`~nmt_lib.checkpoint.CheckpointError` saying whose it is; so does a run with neither,
    saying how to train it (``profile``: the profile's name, for that line)."""
    results = Path(results)
    run_out = results / "runs" / run_dir_name(cfg.name)
    ckpt = find_checkpoint(checkpoint or default_checkpoint_dir(cfg, run_out))
    published = results / "published" / run_dir_name(cfg.name)
    if not ckpt.is_file() and not checkpoint and published.is_dir():
        loaded = load_published(published, device)
    elif not ckpt.is_file():
        raise CheckpointError(
            f"{ckpt}: no such checkpoint: train the model first (python -m nmt_lib train --profile "
            f"{shlex.quote(profile)} --run {shlex.quote(cfg.name)}; the committed results publish "
            "the weights of some runs only: results/<profile>/published/), or name one with "
            "--checkpoint"
        )
    else:
        loaded = load_trained(ckpt, device, vocabs=True)
    saved = loaded.cfg
    if saved.model != cfg.model:  # a checkpoint of another run (another family, other sizes)
        differ = [
            k for k in vars(cfg.model) if getattr(saved.model, k, None) != getattr(cfg.model, k)
        ]
        raise CheckpointError(
            f"{loaded.path}: holds a model of run {saved.name!r} ({saved.model.arch}), not one of "
            f"run {cfg.name!r} ({cfg.model.arch}; they differ in model.{', model.'.join(differ)}): "
            f"translate with --run {shlex.quote(saved.name)}, or with {cfg.name!r}'s checkpoint"
        )
    return loaded
