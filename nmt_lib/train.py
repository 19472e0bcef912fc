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
  has diverged: training stops with :class:`Diverged` and its last checkpoint is kept. A checkpoint
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
  :func:`nmt_lib.evaluate.dev_metrics`); with
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
(``.last.pt.*.tmp``, ...), and nothing else.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import time
from pathlib import Path

import torch
import torch.distributed as dist

from .backend import backend
from .checkpoint import (
    BEST,
    LAST,
    CheckpointError,
    check_compatible,
    default_checkpoint_dir,
    load_checkpoint,
    load_model_state,
    portable,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from .config import RunConfig, to_dict
from .evaluate import dev_metrics
from .gradients import sum_gradients
from .io import atomic_write, locked, naming, remove_debris, write_json
from .models import build_model
from .runtime import resolve_device, resolve_precision, warn_emulated_bf16


class Trainer:
    """One model's training state: model, optimizer, batch stream, counters (single process or one
    rank of ``world``).

    Args:
        cfg: the run's config; model: on ``device``, made by ``on`` (:func:`nmt_lib.backend.backend`
        of ``train.backend`` when None), which also gives the optimizer, the backward pass and the
        update; iterator: a :class:`~nmt_lib.data.TrainIterator` (the same seed and position on
        every rank).
    """

    def __init__(
        self, cfg: RunConfig, model, iterator, device=None, rank: int = 0, world: int = 1, on=None
    ):
        self.cfg, self.model, self.iterator = cfg, model, iterator
        self.on = on if on is not None else backend(cfg.train.backend)
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self.rank, self.world = rank, world
        t = cfg.train
        warn_emulated_bf16(t.precision, self.device)
        self.precision = resolve_precision(t.precision, self.device)  # "bf16" or "fp32"
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.opt = self.on.optimizer(t, self.params)
        if world > 1:  # every rank starts from rank 0's weights
            with torch.no_grad():
                for p in self.params:
                    buf = p.contiguous()  # NCCL takes contiguous tensors only (W_o is column-major)
                    dist.broadcast(buf, 0)
                    if buf.data_ptr() != p.data_ptr():
                        p.copy_(buf)
        # the loss and its gradients: eager, or replayed as CUDA graphs (train.cuda_graphs)
        self.backward = self.on.backward(
            model, self.params, self.precision, self.device, t.cuda_graphs, t.label_smoothing
        )
        self.update = 0
        self.elapsed = 0.0  # seconds of training, summed over resumes
        self.best_dev_nll = math.inf
        self.best_update = 0
        self.bad_evals = 0
        self.n_nonfinite = 0
        self.nonfinite_streak = 0  # non-finite updates in a row (train.max_nonfinite)
        # train.lr_schedule = "plateau": times lr_decay per evaluation without progress
        self.lr_scale = 1.0
        self.stopped: str | None = None  # "early_stop" once patience is exhausted
        self.data_fingerprint: dict | None = None  # nmt_lib.data.fingerprint of the training data

    @property
    def epoch(self) -> float:
        return self.iterator.epoch

    def next_batch(self):
        """This rank's minibatch of the next ``world`` ones, and the sentences and target tokens
        of all of them."""
        mine, sentences, tokens = None, 0, 0
        for r in range(self.world):
            b = next(self.iterator)
            sentences += b.x.shape[0]
            tokens += b.n_trg_tokens
            if r == self.rank:
                mine = b
        return mine, sentences, tokens

    def lr(self) -> float:
        """The learning rate of the next update ``u = update + 1``: ``train.lr``, times the plateau
        decays so far, times the linear warm-up ``min(1, u / warmup_updates)``; with
        ``lr_schedule = "inverse_sqrt"`` (Vaswani et al. 2017, §5.3, its peak ``train.lr``) times
        ``sqrt(warmup_updates / u)`` after the warm-up."""
        t, u = self.cfg.train, self.update + 1
        warmup = min(1.0, u / t.warmup_updates) if t.warmup_updates else 1.0
        if t.lr_schedule == "inverse_sqrt":
            warmup = min(warmup, math.sqrt(t.warmup_updates / u))
        return t.lr * self.lr_scale * warmup

    def step(self) -> dict:
        """One update (App. B.2). Returns ``loss`` (sum NLL of this rank's batch), ``sentences``,
        ``tokens`` (target tokens, padding excluded, all ranks), ``grad_norm`` (of the gradient of
        the loss as ``train.loss`` normalises it), ``action``."""
        t = self.cfg.train
        batch, sentences, tokens = self.next_batch()
        batch = batch.to(self.device)
        # train.loss: the paper SUMS the token NLLs, EOS included (PAPER.md §3, A6); "sentence" and
        # "token" divide that sum by the sentences or target tokens of the update (all ranks)
        denom = {"sum": 1, "sentence": sentences, "token": tokens}[t.loss]
        self.model.train()
        self.opt.zero_grad(set_to_none=True)
        loss = self.backward(batch.x, batch.x_mask, batch.y, batch.y_mask, denom)
        if self.world > 1:
            sum_gradients(self.params)
        for group in self.opt.param_groups:
            group["lr"] = self.lr()
        # GroundHog's gradient treatment (nmt_lib.gradients), then the optimizer's step
        norm, action = self.on.update(self.opt, self.params, t.clip_norm, t.nonfinite)
        if action in ("skip", "shrink"):
            self.n_nonfinite += 1
            self.nonfinite_streak += 1
        else:
            self.nonfinite_streak = 0
        self.update += 1
        return {
            "loss": float(loss.detach()),
            "sentences": int(batch.x.shape[0]),
            "tokens": tokens,
            "grad_norm": norm,
            "action": action,
        }

    def state_dict(self) -> dict:
        return {
            "config": to_dict(self.cfg),
            "model": self.model.state_dict(),
            "optimizer": self.opt.state_dict(),
            "iterator": self.iterator.state_dict(),
            "rng": rng_state(),
            "update": self.update,
            "epoch": self.epoch,
            "elapsed": self.elapsed,
            "best_dev_nll": self.best_dev_nll,
            "best_update": self.best_update,
            "bad_evals": self.bad_evals,
            "n_nonfinite": self.n_nonfinite,
            "nonfinite_streak": self.nonfinite_streak,
            "lr_scale": self.lr_scale,
            "stopped": self.stopped,
            "world": self.world,
            "data": self.data_fingerprint,
        }

    def load_state_dict(self, state: dict, path: str | os.PathLike = "<checkpoint>") -> None:
        """Continue from a checkpoint: raises :class:`CheckpointError` naming ``path`` if it does not
        belong to this config."""
        check_compatible(state, self.cfg, path)
        saved, mine = state.get("data"), self.data_fingerprint
        if saved and mine and saved != mine:  # a checkpoint of format 1 has none
            what = ", ".join(k for k in mine if saved.get(k) != mine[k])
            raise CheckpointError(
                f"{path}: checkpoint trained on other data than this run's (they differ in: {what}); "
                "use another checkpoint directory, or start afresh without resuming"
            )
        load_model_state(self.model, state, path)
        try:
            self.opt.load_state_dict(state["optimizer"])
            self.iterator.load_state_dict(state["iterator"])
        except (ValueError, KeyError, RuntimeError) as e:
            raise CheckpointError(f"{path}: cannot restore the training state: {e}") from None
        set_rng_state(state["rng"])
        for k in (
            "update",
            "elapsed",
            "best_dev_nll",
            "best_update",
            "bad_evals",
            "n_nonfinite",
            "stopped",
        ):
            setattr(self, k, state[k])
        self.lr_scale = state.get("lr_scale", 1.0)
        self.nonfinite_streak = state.get("nonfinite_streak", 0)

    def finite(self) -> bool:
        """Whether every parameter is finite (no NaN, no infinity)."""
        with torch.no_grad():
            return bool(torch.stack([torch.isfinite(p).all() for p in self.params]).all())


# -------------------------------------------------------------------------------- bookkeeping
class JsonlLog:
    """Append-only JSON lines (one record per line), flushed at every write."""

    def __init__(self, path: Path, keep_until: int | None):
        """Open ``path``; records with ``update > keep_until`` (written after the checkpoint we
        resume from) are dropped, and everything when ``keep_until`` is None."""
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        kept = []
        if keep_until is not None and path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut by a crash
                if rec.get("update", 0) <= keep_until:
                    kept.append(line)
        with atomic_write(path) as f:
            f.writelines(line + "\n" for line in kept)
        with naming(path):
            self.f = open(path, "a", encoding="utf-8")

    def write(self, rec: dict) -> None:
        """Append ``rec``; a full disk raises :class:`~nmt_lib.io.WriteError` naming the file."""
        with naming(self.path):
            self.f.write(json.dumps(rec, sort_keys=True) + "\n")
            self.f.flush()

    def close(self) -> None:
        self.f.close()


def _dist_info() -> tuple[int, int, int]:
    """(rank, world, local_rank) from torchrun's environment, or an initialized process group."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", 0))
    world = int(os.environ.get("WORLD_SIZE", 1))
    return int(os.environ.get("RANK", 0)), world, int(os.environ.get("LOCAL_RANK", 0))


def _agree(flags: list[bool], world: int, device) -> list[bool]:
    """Rank 0's decisions, broadcast to every rank."""
    if world == 1:
        return flags
    t = torch.tensor([int(f) for f in flags], device=device)
    dist.broadcast(t, 0)
    return [bool(v) for v in t.tolist()]


def _budget_left(trainer: Trainer) -> str | None:
    """Why training must stop now, or None."""
    t = trainer.cfg.train
    if trainer.stopped:
        return trainer.stopped
    if t.max_updates is not None and trainer.update >= t.max_updates:
        return "max_updates"
    if t.max_epochs is not None and trainer.epoch >= t.max_epochs:
        return "max_epochs"
    if t.max_hours is not None and trainer.elapsed >= t.max_hours * 3600:
        return "max_hours"
    return None


# ------------------------------------------------------------------------------- train_run
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
            reason, last_eval = _loop(trainer, prep, log, ckpt_dir, progress, stop_signal)
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
    from . import data

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
    from . import data

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


@contextlib.contextmanager
def stop_signals():
    """SIGINT (Ctrl-C) and SIGTERM, recorded in the list yielded: the run stops at the next update
    boundary, where the checkpoint is the state of an uninterrupted run; a second Ctrl-C stops at
    once, keeping the last one. The handlers before are restored on exit (none are installed off
    the main thread)."""
    received: list[int] = []
    old_handlers = {}

    def on_signal(signum, frame):
        received.append(signum)
        if signum == signal.SIGINT:
            signal.signal(signal.SIGINT, signal.default_int_handler)

    with contextlib.suppress(ValueError):  # not the main thread: no handlers
        for sig in (signal.SIGINT, signal.SIGTERM):
            old_handlers[sig] = signal.signal(sig, on_signal)
    try:
        yield received
    finally:
        for sig, handler in old_handlers.items():
            signal.signal(sig, handler)


class Window:
    """What the ``kind: "train"`` records average over: the updates since the last record."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.loss, self.sentences, self.tokens, self.norm, self.clip, self.n = 0.0, 0, 0, 0.0, 0, 0
        self.restart_clock()

    def restart_clock(self) -> None:
        """Time from now on (evaluation time is not training throughput)."""
        self.t0 = time.perf_counter()

    def add(self, s: dict) -> None:
        """One update's :meth:`Trainer.step` result."""
        self.loss += s["loss"]
        self.sentences += s["sentences"]
        self.tokens += s["tokens"]
        self.norm += s["grad_norm"] if math.isfinite(s["grad_norm"]) else 0.0
        self.clip += s["action"] == "clip"
        self.n += 1

    def record(self, trainer: Trainer) -> dict:
        """The training record of the window, which then starts again."""
        dt = time.perf_counter() - self.t0
        rec = {
            "kind": "train",
            "update": trainer.update,
            "epoch": trainer.epoch,
            "train_nll": self.loss / max(self.sentences, 1),
            "tokens_per_s": self.tokens / max(dt, 1e-9),
            "grad_norm": self.norm / self.n,
            "clip_rate": self.clip / self.n,
            "window_updates": self.n,  # fewer in the first record after a resume
            "lr": trainer.lr(),
            "elapsed": trainer.elapsed,
        }
        self.reset()
        return rec


def _save(trainer: Trainer, path: Path, last: Path) -> None:
    """A checkpoint of ``trainer`` (rank 0 writes it); a diverged state never replaces a good
    checkpoint."""
    if not trainer.finite():
        raise Diverged(trainer.cfg.name, trainer.update, last, "non-finite weights (NaN or Inf)")
    if trainer.rank == 0:
        save_checkpoint(path, trainer.state_dict())


def _loop(trainer: Trainer, prep, log, ckpt_dir: Path, progress, stop_signal: list) -> tuple:
    """Updates until a budget is spent, training stops early or a signal arrives: the training
    and evaluation records, the checkpoints, and a final evaluation and checkpoint. Returns why it
    stopped and the last evaluation."""
    from tqdm import tqdm

    cfg, t, device = trainer.cfg, trainer.cfg.train, trainer.device
    lead, last = trainer.rank == 0, ckpt_dir / LAST
    log_every = max(1, t.eval_every // 10)
    window, last_eval = Window(), None
    quiet = True if not lead else (None if progress is None else not progress)  # None: if a tty
    # a budget in updates counts updates; one in hours counts seconds (either gives an ETA)
    by_time = t.max_updates is None and t.max_hours is not None
    bar = tqdm(
        total=round(t.max_hours * 3600) if by_time else t.max_updates,
        initial=round(trainer.elapsed) if by_time else trainer.update,
        unit="s" if by_time else "it",
        desc=cfg.name,
        disable=quiet,
    )
    t_session = t_save = time.perf_counter()
    elapsed0, updates0 = trainer.elapsed, trainer.update
    reason = _budget_left(trainer)
    try:
        while reason is None:
            s = trainer.step()
            trainer.elapsed = elapsed0 + time.perf_counter() - t_session
            window.add(s)
            if s["action"] in ("skip", "shrink") and lead:
                log.write(
                    {
                        "kind": "nonfinite",
                        "update": trainer.update,
                        "action": s["action"],
                        "epoch": trainer.epoch,
                        "elapsed": trainer.elapsed,
                    }
                )
            if trainer.nonfinite_streak >= t.max_nonfinite:  # the same on every rank
                raise Diverged(
                    cfg.name,
                    trainer.update,
                    last,
                    f"{trainer.nonfinite_streak} non-finite updates in a row "
                    f"(train.max_nonfinite = {t.max_nonfinite})",
                )
            bar.update(round(trainer.elapsed) - bar.n if by_time else 1)
            if trainer.update % log_every == 0 and lead:
                rec = window.record(trainer)
                log.write(rec)
                bar.set_postfix(
                    update=trainer.update,
                    nll=f"{rec['train_nll']:.2f}",
                    tok_s=f"{rec['tokens_per_s']:.0f}",
                )
            if trainer.update % t.eval_every == 0:
                last_eval = _evaluate(trainer, prep, device, log, bar, ckpt_dir / BEST)
                window.restart_clock()  # evaluation time is not training throughput
            due = time.perf_counter() - t_save >= t.checkpoint_minutes * 60
            save_now, sig = _agree([due, bool(stop_signal)], trainer.world, device)
            if sig:
                reason = "interrupted"
                break
            reason = _budget_left(trainer)
            if save_now and reason is None:
                _save(trainer, last, last)
                t_save = time.perf_counter()
        if (
            reason != "interrupted"
            and trainer.update > updates0
            and (last_eval is None or last_eval["update"] != trainer.update)
        ):
            last_eval = _evaluate(trainer, prep, device, log, bar, ckpt_dir / BEST, final=True)
        if trainer.update > updates0 or not last.is_file():  # else the checkpoint is this state
            _save(trainer, last, last)
    finally:
        bar.close()
    return reason, last_eval


def _summary(trainer: Trainer, reason, updates0: int, resumed_from, last_eval, ckpt_dir: Path):
    """What ``train_summary.json`` records of the session."""
    t, device = trainer.cfg.train, trainer.device
    return {
        "run": trainer.cfg.name,
        "stopped_by": reason,
        "updates": trainer.update,
        "epochs": trainer.epoch,
        "hours": trainer.elapsed / 3600,
        "updates_this_session": trainer.update - updates0,
        "resumed_from_update": resumed_from,
        "nonfinite_updates": trainer.n_nonfinite,
        "best_dev_nll": None if math.isinf(trainer.best_dev_nll) else trainer.best_dev_nll,
        "best_update": trainer.best_update,
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


class Diverged(RuntimeError):
    """Training stopped because the run diverged (non-finite updates or weights); its last
    checkpoint, of finite weights, is kept."""

    def __init__(self, run: str, update: int, checkpoint: Path, why: str):
        self.update = update
        kept = f"{checkpoint} is kept" if checkpoint.is_file() else "no checkpoint was written"
        super().__init__(
            f"run {run!r} diverged at update {update}: {why}; {kept}: start afresh "
            "(--no-resume) with a lower train.lr, or another train.clip_norm"
        )


class Interrupted(RuntimeError):
    """Training stopped by SIGINT or SIGTERM at an update boundary, its checkpoint saved."""

    def __init__(self, signum: int, update: int, checkpoint: Path):
        self.signum = int(signum)
        super().__init__(
            f"{signal.Signals(signum).name} at update {update}: checkpoint saved as {checkpoint}; "
            "rerun the same command to resume"
        )


def _evaluate(trainer: Trainer, prep, device, log, bar, best: Path, final=False) -> dict:
    """Dev metrics on rank 0, early-stopping bookkeeping, ``best`` checkpoint (with patience); the
    decision to stop is broadcast so that every rank stops at the same update. A ``final``
    evaluation (end of a session between two ``eval_every``) may improve the best but is not
    counted as a bad evaluation."""
    cfg = trainer.cfg
    rec = None
    if trainer.rank == 0:
        m = dev_metrics(trainer.model, prep, cfg, device)
        improved = m["dev_nll"] < trainer.best_dev_nll
        if improved:
            trainer.best_dev_nll, trainer.best_update = m["dev_nll"], trainer.update
            trainer.bad_evals = 0
            if cfg.train.patience and trainer.finite():
                save_checkpoint(best, trainer.state_dict())
        elif not final:  # the evaluation at the end of a session never counts against patience
            trainer.bad_evals += 1
            if cfg.train.lr_schedule == "plateau":
                trainer.lr_scale *= cfg.train.lr_decay
        if cfg.train.patience and trainer.bad_evals >= cfg.train.patience:
            trainer.stopped = "early_stop"
        rec = {
            "kind": "eval",
            "update": trainer.update,
            "epoch": trainer.epoch,
            "elapsed": trainer.elapsed,
            "best_dev_nll": trainer.best_dev_nll,
            "bad_evals": trainer.bad_evals,
            "lr": trainer.lr(),
            **m,
        }
        log.write(rec)
        bar.set_postfix(dev_nll=f"{m['dev_nll']:.2f}", dev_bleu=m["dev_bleu"])
    if trainer.world > 1:
        (stop,) = _agree([trainer.stopped is not None], trainer.world, device)
        trainer.stopped = "early_stop" if stop else None
    return rec or {"update": trainer.update}
