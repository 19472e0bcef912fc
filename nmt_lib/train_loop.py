"""A training session's loop: updates until a budget is spent, training stops early or a signal
arrives (:func:`loop`); the log's records (:class:`JsonlLog`: ``kind: "train"`` averages over a
:class:`Window` of updates, ``"nonfinite"`` and ``"eval"`` records); the evaluations every
``train.eval_every`` updates with the best model and early stopping (``train.patience``) and the
plateau schedule's decay; the checkpoints, never of non-finite weights, and divergence
(:class:`Diverged`); on several ranks, rank 0's decisions broadcast to all.
"""

from __future__ import annotations

import contextlib
import json
import math
import signal
import time
from pathlib import Path

import torch
import torch.distributed as dist
from tqdm import tqdm

from .checkpoint import BEST, LAST, save_checkpoint
from .io import atomic_write, naming
from .trainer import Trainer
from .validation import dev_metrics


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
    if trainer.early.stopped:
        return trainer.early.stopped
    if t.max_updates is not None and trainer.update >= t.max_updates:
        return "max_updates"
    if t.max_epochs is not None and trainer.epoch >= t.max_epochs:
        return "max_epochs"
    if t.max_hours is not None and trainer.elapsed >= t.max_hours * 3600:
        return "max_hours"
    return None


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


def loop(trainer: Trainer, prep, log, ckpt_dir: Path, progress, stop_signal: list) -> tuple:
    """Updates until a budget is spent, training stops early or a signal arrives: the training
    and evaluation records, the checkpoints, and a final evaluation and checkpoint. Returns why it
    stopped and the last evaluation."""
    t, device = trainer.cfg.train, trainer.device
    last = ckpt_dir / LAST
    window, last_eval, bar = Window(), None, _progress_bar(trainer, progress)
    t_session = t_save = time.perf_counter()
    elapsed0, updates0 = trainer.elapsed, trainer.update
    reason = _budget_left(trainer)
    try:
        while reason is None:
            s = trainer.step()
            trainer.elapsed = elapsed0 + time.perf_counter() - t_session
            _record(trainer, s, window, log, bar, last)
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


def _by_time(t) -> bool:
    """Whether the budget counts seconds (``train.max_hours`` alone), not updates."""
    return t.max_updates is None and t.max_hours is not None


def _progress_bar(trainer: Trainer, progress) -> tqdm:
    """The session's tqdm bar (rank 0's; ``progress`` None: if a tty): a budget in updates counts
    updates, one in hours counts seconds (either gives an ETA)."""
    t, lead = trainer.cfg.train, trainer.rank == 0
    quiet = True if not lead else (None if progress is None else not progress)  # None: if a tty
    by_time = _by_time(t)
    return tqdm(
        total=round(t.max_hours * 3600) if by_time else t.max_updates,
        initial=round(trainer.elapsed) if by_time else trainer.update,
        unit="s" if by_time else "it",
        desc=trainer.cfg.name,
        disable=quiet,
    )


def _record(trainer: Trainer, s: dict, window: Window, log, bar, last: Path) -> None:
    """After the update ``s`` (:meth:`Trainer.step`'s result): its ``"nonfinite"`` record, the
    divergence check (:class:`Diverged` after ``train.max_nonfinite`` such updates in a row), the
    bar, and every ``max(1, eval_every // 10)`` updates the ``"train"`` record of the window."""
    t, lead = trainer.cfg.train, trainer.rank == 0
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
            trainer.cfg.name,
            trainer.update,
            last,
            f"{trainer.nonfinite_streak} non-finite updates in a row "
            f"(train.max_nonfinite = {t.max_nonfinite})",
        )
    bar.update(round(trainer.elapsed) - bar.n if _by_time(t) else 1)
    if trainer.update % max(1, t.eval_every // 10) == 0 and lead:
        rec = window.record(trainer)
        log.write(rec)
        bar.set_postfix(
            update=trainer.update,
            nll=f"{rec['train_nll']:.2f}",
            tok_s=f"{rec['tokens_per_s']:.0f}",
        )


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


def _evaluate(trainer: Trainer, prep, device, log, bar, best: Path, final=False) -> dict:
    """Dev metrics on rank 0, observed by the trainer's :class:`~nmt_lib.trainer.EarlyStopping`
    (a ``final`` evaluation, at the end of a session between two ``eval_every``, may improve the
    best but is not counted as a bad evaluation), the ``best`` checkpoint (with patience); the
    decision to stop is broadcast so that every rank stops at the same update."""
    cfg, early = trainer.cfg, trainer.early
    rec = None
    if trainer.rank == 0:
        m = dev_metrics(trainer.model, prep, cfg, device)
        improved = early.observe(cfg.train, m["dev_nll"], trainer.update, final)
        if improved and cfg.train.patience and trainer.finite():
            save_checkpoint(best, trainer.state_dict())
        rec = {
            "kind": "eval",
            "update": trainer.update,
            "epoch": trainer.epoch,
            "elapsed": trainer.elapsed,
            "best_dev_nll": early.best_dev_nll,
            "bad_evals": early.bad_evals,
            "lr": trainer.lr(),
            **m,
        }
        log.write(rec)
        bar.set_postfix(dev_nll=f"{m['dev_nll']:.2f}", dev_bleu=m["dev_bleu"])
    if trainer.world > 1:
        (stop,) = _agree([early.stopped is not None], trainer.world, device)
        early.stopped = "early_stop" if stop else None
    return rec or {"update": trainer.update}
