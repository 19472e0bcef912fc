"""Training as the paper and GroundHog did (§4.2, App. B.2; PAPER.md §3, A6, A14), by default:

* Adadelta with ``rho = 0.95``, ``eps = 1e-6`` and learning rate 1 (``torch.optim.Adadelta`` is
  GroundHog's ``SGD_adadelta``; on the fast backend :class:`nmt_lib.fast.optim.Adadelta` computes
  its update faster on a CPU); the model, the optimizer, the backward pass and the update come from
  the run's backend (:func:`nmt_lib.backend.backend`; the recipe: :class:`nmt_lib.recipe.Plain`);
* loss = the **sum** of the token negative log-likelihoods of the minibatch, EOS included, never the
  mean (PAPER.md §3 engineering note, A6);
* the global L2 norm of the gradient is rescaled to 1 when it is ``>= 1``; a NaN/Inf gradient is
  replaced by ``0.1 * θ`` (GroundHog, ``train.nonfinite = "shrink"``) or the update is skipped
  (``"skip"``), and counted in the log; after ``train.max_nonfinite`` such updates in a row the run
  has diverged: training stops with :class:`~nmt_lib.train_loop.Diverged` and its last checkpoint is kept. A checkpoint
  is written only of finite weights, so a good one is never replaced by a diverged one;
* minibatches of 80 from :class:`~nmt_lib.data.TrainIterator` (20 batches sorted by length at a time);
* the named alternatives of reduced budgets (``TrainConfig``): ``optimizer = "adam"``, ``loss =
  "sentence"`` or ``"token"`` (the sum divided by the update's sentences or target tokens, so that
  ``clip_norm`` bounds the gradient of that mean), a linear warm-up and a learning rate that decays
  when an evaluation brings no progress (``lr_schedule = "plateau"``), and label smoothing
  (``label_smoothing``, the loss then the summed smoothed cross-entropy, which the log's
  ``train_nll`` reports; the dev NLL stays the NLL);
* budgets in updates, epochs or hours, whichever comes first; every ``eval_every`` updates the dev
  NLL (per-sentence NLL averaged over ``dev_nll_sentences`` fixed dev sentences, or the whole dev
  set, Table 2's measure) and the BLEU of greedy translations of
  the first ``dev_bleu_sentences`` dev sentences (tokenized, multi-bleu style;
  :func:`nmt_lib.validation.dev_metrics`); with
  ``train.patience`` training stops when the dev NLL has not improved for that many evaluations and
  the best model is kept (RNNsearch-50*: "until the performance on the development set stopped
  improving", A14).

Several GPUs: run under ``torchrun`` (one process per GPU, NCCL; gloo on CPU). Every rank reads the
same batch stream and takes every ``world``-th batch (batch ``i`` goes to rank ``i mod world``, as a
DistributedSampler shards data); after the backward pass the gradients are summed over the ranks in
one flat all-reduce. One update then is exactly the single-process update on the ``world``
minibatches together: the loss stays a sum, but an update sees ``world * 80`` pairs (budgets in
epochs or hours keep their meaning; in updates, scale them yourself). We all-reduce by hand rather
than wrap the model in ``DistributedDataParallel`` (which averages): the same arithmetic with the
sum explicit, and the model's own methods (``encode``, the decoding steps) used unwrapped. Rank 0
evaluates, logs and writes the checkpoints; every rank resumes from the same checkpoint file (one
machine, shared disk).

:func:`train_run` is what the notebooks and the CLI call. One training of a run at a time: it holds a
lock (``.train.lock``) in the checkpoint directory and the results directory, and a second one is
refused at once, naming the process that holds it; the lock dies with its process, however that
ends. Holding it, a run removes the temporary files that a killed run of its own left
(``.last.pt.*.tmp``, ...), and nothing else. The update and the training state it checkpoints are
:class:`~nmt_lib.trainer.Trainer`'s; the session's loop (the log's records, the evaluations and
early stopping, the checkpoints, divergence) is :func:`nmt_lib.train_loop.loop`.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
from pathlib import Path

import torch
import torch.distributed as dist

from . import data
from .backend import backend
from .checkpoint import BEST, LAST, default_checkpoint_dir, load_checkpoint, portable
from .config import RunConfig, to_dict
from .io import locked, naming, remove_debris, write_json
from .models import build_model
from .runtime import resolve_device
from .train_loop import JsonlLog, loop, stop_signals
from .trainer import Trainer

__all__ = ["Interrupted", "train_run"]


def train_run(
    run_cfg: RunConfig,
    out_dir: str | os.PathLike,
    prep=None,
    resume: bool = True,
    checkpoint_dir: str | os.PathLike | None = None,
    progress: bool | None = None,
) -> dict:
    """Train one model of a profile; resumable at any time (checkpoints, PAPER.md §3).

    Writes small files under ``out_dir``: ``config.json`` (the resolved config), ``train_log.jsonl``
    (``kind: "train"`` records every ``max(1, eval_every // 10)`` updates: update, epoch, tokens/s
    with padding excluded, train NLL per sentence, grad norm, clip rate, the number of updates these
    averages cover (``window_updates``), elapsed; ``kind: "eval"``
    records: dev NLL, dev BLEU) and ``train_summary.json``. Checkpoints (``last.pt``, ``best.pt``
    with patience) and the vocabularies go to ``checkpoint_dir`` (default
    :func:`~nmt_lib.checkpoint.default_checkpoint_dir`, outside the results).

    Args:
        run_cfg: the run's config; out_dir: its results directory; prep: the prepared data
        (:func:`nmt_lib.data.prepare` of ``run_cfg.data`` when None); resume: continue from
        ``last.pt`` if there is one (else start afresh and overwrite); progress: tqdm bar (None:
        only on a terminal).
    Returns:
        The summary dict also written to ``train_summary.json``.
    Raises:
        Interrupted: after SIGINT or SIGTERM, once the checkpoint of the last complete update is
        saved (a rerun resumes to exactly the uninterrupted result).
    """
    cfg, out_dir = run_cfg, Path(out_dir)
    rank, world, device = _process(cfg.train)
    ckpt_dir = Path(checkpoint_dir) if checkpoint_dir else default_checkpoint_dir(cfg, out_dir)
    _writable(out_dir, ckpt_dir)  # before the data are prepared, which may take minutes
    with _held(cfg, out_dir, ckpt_dir, rank):
        return _train(cfg, out_dir, ckpt_dir, prep, resume, progress, rank, world, device)


def _process(t) -> tuple[int, int, torch.device]:
    """This process's rank, the world size and its device (the process group started under
    torchrun; ``train.threads`` intra-op threads)."""
    rank, world, local_rank = _dist_info()
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    device = resolve_device(t.device, local_rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if t.threads:
        torch.set_num_threads(t.threads)
    return rank, world, device


def _dist_info() -> tuple[int, int, int]:
    """(rank, world, local_rank) from torchrun's environment, or an initialized process group."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", 0))
    world = int(os.environ.get("WORLD_SIZE", 1))
    return int(os.environ.get("RANK", 0)), world, int(os.environ.get("LOCAL_RANK", 0))


def _writable(*dirs: Path) -> None:
    """Make ``dirs``; one that cannot be written raises, naming it."""
    for d in dirs:
        with naming(d):
            d.mkdir(parents=True, exist_ok=True)
        if not os.access(d, os.W_OK):
            raise PermissionError(f"{d}: not writable (results and checkpoints go there)")


@contextlib.contextmanager
def _held(cfg: RunConfig, out_dir: Path, ckpt_dir: Path, rank: int):
    """One training of this run at a time (rank 0 holds the locks; the other ranks are this
    training); the temporary files a killed run of its own left are removed, nothing else."""
    with contextlib.ExitStack() as held:
        if rank == 0:
            what = f"run {cfg.name!r} ({{}})"
            held.enter_context(locked(ckpt_dir / ".train.lock", what.format(ckpt_dir)))
            if out_dir.resolve() != ckpt_dir.resolve():
                held.enter_context(locked(out_dir / ".train.lock", what.format(out_dir)))
            remove_debris(ckpt_dir, (LAST, BEST, "config.json", "src.vocab.txt", "trg.vocab.txt"))
            remove_debris(out_dir, ("config.json", "train_log.jsonl", "train_summary.json"))
        yield


def _train(
    cfg: RunConfig, out_dir: Path, ckpt_dir: Path, prep, resume, progress, rank, world, device
) -> dict:
    """:func:`train_run` once the run is locked."""
    last = ckpt_dir / LAST
    resuming = resume and last.is_file()
    prep = _prepared(cfg, prep, resuming, last)
    trainer = _trainer(cfg, prep, device, rank, world)
    resumed_from = None
    if resuming:
        trainer.load_state_dict(load_checkpoint(last), last)
        resumed_from = trainer.update
    log = _run_files(cfg, prep, out_dir, ckpt_dir, resumed_from) if rank == 0 else None
    updates0 = trainer.update
    try:
        with stop_signals() as stop_signal:
            reason, last_eval = loop(trainer, prep, log, ckpt_dir, progress, stop_signal)
    finally:
        if log is not None:
            log.close()
    if last_eval is None and rank == 0:  # nothing trained in this session: the last logged eval
        evals = [json.loads(x) for x in log.path.read_text(encoding="utf-8").splitlines()]
        last_eval = next((r for r in reversed(evals) if r.get("kind") == "eval"), None)
    summary = _summary(trainer, reason, updates0, resumed_from, last_eval, ckpt_dir)
    if rank == 0:  # the file names the checkpoints relative to the cache (checkpoint.portable)
        where = {k: portable(summary[k], cfg) for k in ("checkpoint_dir", "model_checkpoint")}
        write_json(out_dir / "train_summary.json", {**summary, **where})
    if reason == "interrupted":
        raise Interrupted(stop_signal[0] if stop_signal else signal.SIGTERM, trainer.update, last)
    return summary


def _prepared(cfg: RunConfig, prep, resuming: bool, last: Path):
    """The prepared data (prepared now when ``prep`` is None), checked against the files they were
    made from when resuming, and the vocabularies against the model's rows."""
    if prep is None or resuming:  # contents edited behind an unchanged size and mtime
        changed = data.verify_inputs(cfg.data)
        if changed and (resuming or prep is not None):
            made = f"the checkpoint {last} and the" if resuming else "the"
            raise data.corpus.DataError(
                f"{changed[0]}: its contents changed since it was hashed, though its size and "
                f"modification time did not: {made} prepared data were made from the old "
                "contents; restore the file, or start afresh (--no-resume)"
            )
    if prep is None:
        prep = data.prepare(cfg.data, verify=resuming)
    elif resuming:
        data.check_prepared(prep.path, full=True)
    for side, v, rows in (
        ("src", prep.src_vocab, cfg.model.src_vocab),
        ("trg", prep.trg_vocab, cfg.model.trg_vocab),
    ):
        if len(v) > rows:
            raise ValueError(f"{side} vocabulary has {len(v)} rows, the model only {rows}")
    return prep


def _trainer(cfg: RunConfig, prep, device, rank: int, world: int) -> Trainer:
    """A fresh model (the initialisation of ``train.seed``, the same on every rank) on the run's
    backend, and its :class:`Trainer` over the training data."""
    on = backend(cfg.train.backend)
    on.tune_process()
    torch.manual_seed(cfg.train.seed)  # the initialisation (App. B.1), identical on every rank
    model = build_model(cfg.model, on).to(device)
    iterator = data.TrainIterator.from_config(prep.train, cfg.data)
    trainer = Trainer(cfg, model, iterator, device, rank, world, on)
    trainer.data_fingerprint = data.fingerprint(prep)
    return trainer


def _run_files(cfg: RunConfig, prep, out_dir: Path, ckpt_dir: Path, resumed_from) -> JsonlLog:
    """The run's config beside its results and its checkpoints, the vocabularies beside the
    checkpoints, and its training log (kept up to the checkpoint resumed from)."""
    write_json(out_dir / "config.json", to_dict(cfg))
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    prep.src_vocab.save(ckpt_dir / "src.vocab.txt")
    prep.trg_vocab.save(ckpt_dir / "trg.vocab.txt")
    write_json(ckpt_dir / "config.json", to_dict(cfg))
    return JsonlLog(out_dir / "train_log.jsonl", resumed_from)


def _summary(trainer: Trainer, reason, updates0: int, resumed_from, last_eval, ckpt_dir: Path):
    """What ``train_summary.json`` records of the session."""
    t, device, early = trainer.cfg.train, trainer.device, trainer.early
    return {
        "run": trainer.cfg.name,
        "stopped_by": reason,
        "updates": trainer.update,
        "epochs": trainer.epoch,
        "hours": trainer.elapsed / 3600,
        "updates_this_session": trainer.update - updates0,
        "resumed_from_update": resumed_from,
        "nonfinite_updates": trainer.n_nonfinite,
        "best_dev_nll": None if math.isinf(early.best_dev_nll) else early.best_dev_nll,
        "best_update": early.best_update,
        "last_eval": last_eval,
        "world_size": trainer.world,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "precision": trainer.precision,
        "compiled_kernels": trainer.on.compiled_kernels(device),
        "checkpoint_dir": str(ckpt_dir),
        "model_checkpoint": str(
            ckpt_dir / (BEST if t.patience and (ckpt_dir / BEST).is_file() else LAST)
        ),
    }


class Interrupted(RuntimeError):
    """Training stopped by SIGINT or SIGTERM at an update boundary, its checkpoint saved."""

    def __init__(self, signum: int, update: int, checkpoint: Path):
        self.signum = int(signum)
        super().__init__(
            f"{signal.Signals(signum).name} at update {update}: checkpoint saved as {checkpoint}; "
            "rerun the same command to resume"
        )
