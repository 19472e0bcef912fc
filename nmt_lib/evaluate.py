"""Decode a test set and compute every number the paper reports about it (§5, Tables 1–2, Figs 2–3).

:func:`evaluate_run` loads a trained model from its checkpoint and writes small files into the run's
results directory:

* ``hyp.test.tok.txt`` / ``hyp.test.detok.txt``: the beam-search translations of the whole test set,
  Moses-tokenized (``<unk>`` kept: it counts as an error, PAPER.md §4) and detokenized;
  ``hyp.test.no_unk.tok.txt``: the No-UNK subset decoded with ``ignore_unk`` (Table 1 note ◦);
  ``hyp.test.unk_replaced.tok.txt`` (a model with attention): the whole test set's translations
  with each ``<unk>`` replaced by the source word it attends to most (:mod:`nmt_lib.unk`; beyond
  the paper);
* ``bleu.json``: BLEU All and No-UNK (Table 1), each as multi-bleu-style tokenized BLEU and as
  sacrebleu's detokenized BLEU with its signature (:mod:`nmt_lib.bleu`), and All with ``<unk>``
  replaced (``unk_replaced``, a model with attention);
* ``bleu_by_length.json``: Figure 2. Buckets by **source** length in words (EOS not counted), width
  10 (``0-9, 10-19, ..., 50-59, >=60``; PAPER.md A11), corpus BLEU per bucket from summed n-gram
  statistics, on the full test set (UNK included, as the caption says). The per-sentence lengths and
  statistics are stored too, so a plot can re-bin (:func:`nmt_lib.bleu.bleu_from_stats`);
* ``nll.json``: Table 2's per-sentence NLL (nats) averaged over a fixed sample of training pairs and
  over the whole dev set;
* ``attention.json``: Figure 3. For each requested source sentence found in the test set: source and
  output tokens (EOS as ``</s>``) and the attention matrix ``alpha[i][j]`` of the best hypothesis.

The files are written into a temporary directory beside them (``.evaluate.<random>/``). Once all
exist, that directory is renamed ``.evaluate.commit`` (the decision, one rename) and its files are
moved into place, ``bleu.json`` last, with SIGINT and SIGTERM held back until the last move: a
results directory with ``bleu.json`` holds one complete evaluation, and an evaluation interrupted
before the decision leaves the previous one as it was. A process killed outright between the moves
leaves ``.evaluate.commit``, which the next evaluation of the directory completes first; it also
removes the staging directories that a crashed evaluation left. One evaluation of a results
directory runs at a time (a lock, ``.evaluate.lock``).

The per-sentence likelihoods (:func:`sentence_nll`) and the dev metrics that training measures at
each evaluation (:func:`dev_metrics`) are here too: training depends on evaluation, not the reverse.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from . import bleu
from .checkpoint import (
    BEST,
    LAST,
    CheckpointError,
    check_finite,
    check_vocab,
    default_checkpoint_dir,
    load_checkpoint,
    load_model_state,
    portable,
)
from .config import RunConfig, SearchConfig, run_from_dict, to_dict
from .data import pad
from .data.vocab import EOS, UNK
from .decoding import decode_corpus
from .fast import backend
from .io import NO_SPACE, atomic_write, locked, naming, signals_deferred, write_json
from .models import build_model
from .paper import FIG3_SOURCES
from .runtime import autocast, resolve_device, resolve_precision
from .search import Hypothesis
from .unk import replace


# ---------------------------------------------------------------------------- loading a model
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


def load_trained(path: str | os.PathLike, device="cpu", with_data: bool = False):
    """``(model, run_cfg)`` from a checkpoint file or directory (:func:`find_checkpoint`), in eval
    mode on ``device``, on the run's backend (``train.backend``, :func:`nmt_lib.fast.backend`; what
    the backend wants of the process is the caller's to ask, ``backend.tune_process()``); with
    ``with_data``, also the
    fingerprint of the data it was trained on (:func:`nmt_lib.data.fingerprint`; None for old
    checkpoints). Weights that are not all finite (a diverged run) raise
    :class:`~nmt_lib.checkpoint.CheckpointError`."""
    path = find_checkpoint(path)
    state = load_checkpoint(path)
    check_finite(state["model"], path)
    cfg = run_from_dict(state["config"])
    model = backend(cfg.train.backend).model(build_model(cfg.model))
    load_model_state(model, state, path)
    model = model.to(device).eval()
    return (model, cfg, state.get("data")) if with_data else (model, cfg)


def load_vocabs(ckpt: str | os.PathLike, trained_on: dict | None):
    """The source and target vocabularies beside the checkpoint file ``ckpt``, checked against the
    fingerprint it records (``trained_on``): a file that is not the model's raises
    :class:`~nmt_lib.checkpoint.CheckpointError` naming it."""
    from .data.vocab import Vocab

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


# ---------------------------------------------------------------------------------- decoding
def decode(
    model,
    xs: Sequence[Sequence[int]],
    search: SearchConfig,
    device=None,
    precision: str = "fp32",
    ignore_unk: bool = False,
    return_alpha: bool = False,
    progress: bool | None = False,
    journal: str | os.PathLike | None = None,
    on=None,
) -> list[Hypothesis]:
    """Beam search (``search``) over source id lists (EOS included), in input order; ``journal``:
    see :func:`nmt_lib.search.decode_corpus`; ``on``: the model's backend (its steps;
    :func:`nmt_lib.fast.backend`), or None for the model's own ``steps()``."""
    device = device or next(model.parameters()).device
    with autocast(torch.device(device), precision):
        return decode_corpus(model, xs, search, False, ignore_unk, return_alpha, device, progress,
                             journal=journal, on=on)


# ------------------------------------------------------------------------------- likelihoods
def batch_nll(model, batch) -> torch.Tensor:
    """``[B]`` per-sentence NLL ``-log p(y | x)`` (sum over target tokens incl. EOS)."""
    logp, _ = model(batch.x, batch.x_mask, batch.y, batch.y_mask)  # [B, Ty], 0 at padding
    return -logp.float().sum(1)


@torch.no_grad()
def sentence_nll(
    model,
    xs: Sequence[Sequence[int]],
    ys: Sequence[Sequence[int]],
    batch_size: int = 64,
    device=None,
    precision: str = "fp32",
) -> list[float]:
    """Per-sentence NLL in nats of reference ``ys`` given ``xs`` (id lists with EOS); their mean is
    Table 2's "average per-sentence conditional log-probability" (sign flipped)."""
    out = [0.0] * len(xs)
    for idx, logp, _ in teacher_forced(model, xs, ys, batch_size, device, precision):
        for i, v in zip(idx, (-logp.float().sum(1)).tolist(), strict=True):
            out[i] = v
    return out


@torch.no_grad()
def teacher_forced(model, xs, ys, batch_size: int = 64, device=None, precision: str = "fp32"):
    """The model teacher-forced on the pairs ``(xs[i], ys[i])`` (id lists) in batches of similar
    length, in eval mode: yields ``(indices, logp [B, Ty], alpha [B, Ty, Tx] or None)`` per batch."""
    was_training = model.training
    model.eval()
    device = device or next(model.parameters()).device
    order = sorted(range(len(xs)), key=lambda i: len(xs[i]) + len(ys[i]))
    try:
        for k in range(0, len(order), batch_size):
            idx = order[k : k + batch_size]
            x, x_mask, y, y_mask = (
                t.to(device) for t in (*pad([xs[i] for i in idx]), *pad([ys[i] for i in idx]))
            )
            with autocast(torch.device(device), precision):
                logp, alpha = model(x, x_mask, y, y_mask)
            yield idx, logp, alpha
    finally:
        model.train(was_training)


def alignments(
    model,
    xs: Sequence[Sequence[int]],
    ys: Sequence[Sequence[int]],
    batch_size: int = 64,
    device=None,
    precision: str = "fp32",
) -> list[list[int]] | None:
    """For each source ``x`` (ids, EOS included) and its translation ``y`` (ids, as decoded), the
    source position that each word of ``y`` attends to most; None for a model without attention."""
    out: list[list[int]] = [[] for _ in xs]
    todo = [i for i in range(len(xs)) if len(ys[i])]
    pairs = teacher_forced(model, [xs[i] for i in todo], [ys[i] for i in todo], batch_size,
                           device, precision)  # fmt: skip
    for idx, _, alpha in pairs:
        if alpha is None:
            pairs.close()
            return None
        for k, row in zip(idx, alpha.float().argmax(-1).tolist(), strict=True):
            out[todo[k]] = row[: len(ys[todo[k]])]
    return out


def replace_corpus(model, xs, hyps, src_tokens, trg_vocab, batch_size=64, device=None,
                   precision="fp32") -> list[list[str]] | None:  # fmt: skip
    """The decoded ``hyps`` (:class:`~nmt_lib.search.Hypothesis`, EOS dropped) as tokens with
    their ``<unk>`` replaced (:func:`nmt_lib.unk.replace`); None for a model without attention."""
    ys = [h.tokens for h in hyps]
    align = alignments(model, xs, ys, batch_size, device, precision)
    if align is None:
        return None
    out = []
    for h, src, a in zip(hyps, src_tokens, align, strict=True):
        words = trg_vocab.decode(h.tokens)  # EOS dropped
        out.append(replace(words, src, a) if UNK in h.tokens else words)
    return out


def dev_subset(n_dev: int, n: int) -> list[int]:
    """``n`` dev sentence indices spread evenly over the dev set (both of its years), the same at
    every evaluation; all of them when ``n`` is 0 or not smaller than the dev set."""
    if n <= 0 or n >= n_dev:
        return list(range(n_dev))
    return [i * n_dev // n for i in range(n)]


def dev_metrics(model, prep, cfg: RunConfig, device, full: bool = False) -> dict:
    """Dev NLL per sentence (mean over ``train.dev_nll_sentences`` fixed dev sentences,
    :func:`dev_subset`; the whole dev set with ``full``) and dev BLEU (greedy, tokenized, on the
    first ``train.dev_bleu_sentences`` sentences; None when 0), and the seconds they took: what
    training measures at each evaluation."""
    t = cfg.train
    t0 = time.perf_counter()
    idx = dev_subset(len(prep.dev), 0 if full else t.dev_nll_sentences)
    xs, ys = [prep.dev.x[i] for i in idx], [prep.dev.y[i] for i in idx]
    nll = sentence_nll(model, xs, ys, 64, device, t.precision)
    out = {"dev_nll": sum(nll) / max(len(nll), 1), "dev_nll_sentences": len(idx), "dev_bleu": None}
    n = min(t.dev_bleu_sentences, len(prep.dev))
    if n > 0:
        model.eval()
        with autocast(torch.device(device), t.precision):
            hyps = decode_corpus(model, prep.dev.x[:n], cfg.search, greedy=True, device=device,
                                 on=backend(t.backend))
        hyp = [" ".join(prep.trg_vocab.decode(h.tokens)) for h in hyps]
        ref = [" ".join(r) for r in prep.dev.ref_tok[:n]]
        out["dev_bleu"] = bleu.bleu_tok(hyp, ref).score
    out["eval_seconds"] = time.perf_counter() - t0
    return out


def _journal(out_dir: Path, ckpt: Path, *what) -> Path:
    """The decoding journal of ``out_dir`` for this checkpoint file (as it is now) and ``what``
    (settings, sources): another model or setting never reads it."""
    st = ckpt.stat()
    key = json.dumps([str(ckpt.resolve()), st.st_size, st.st_mtime_ns, *what], sort_keys=True)
    return out_dir / f".decode.{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsonl"


def translate_lines(
    model,
    lines: Sequence[str],
    src_vocab,
    trg_vocab,
    search: SearchConfig,
    src_lang: str = "en",
    trg_lang: str = "fr",
    device=None,
    precision: str = "fp32",
    ignore_unk: bool = False,
    alignment: bool = False,
    replace_unk: bool = False,
    on=None,
) -> list[str]:
    """Raw source sentences -> detokenized translations (Moses tokenization, shortlist, EOS, beam
    search, detokenization). Empty lines give empty translations. With ``alignment``, each
    translation is followed by a line that pairs every generated word with the source word it
    attends to most (``chat←cat 0.82``; ``</s>``: the end of the sentence). With ``replace_unk``,
    each ``<unk>`` is replaced by the source word it attends to most (:mod:`nmt_lib.unk`). ``on``:
    the model's backend (:func:`decode`)."""
    from .data.text import detokenize, tokenize

    toks = [tokenize(line, src_lang) if line.strip() else [] for line in lines]
    xs = [src_vocab.encode(t, eos=True) for t in toks]
    hyps = decode(model, xs, search, device, precision, ignore_unk, return_alpha=alignment, on=on)
    replaced = replace_corpus(model, xs, hyps, toks, trg_vocab, 64, device, precision) if (
        replace_unk) else None  # fmt: skip
    out = []
    for k, (t, h) in enumerate(zip(toks, hyps, strict=True)):
        words = trg_vocab.decode(h.tokens) if replaced is None else replaced[k]
        out.append(detokenize(words, trg_lang) if t else "")
        if alignment:
            out.append(alignment_line(words, t, h.alpha) if t else "  ")
    return out


def alignment_line(words: Sequence[str], src: Sequence[str], alpha) -> str:
    """``translate_lines``'s line under a translation: each generated word (of ``words``) with
    the source word (of ``src``, tokenized; ``</s>`` after it) of largest weight in its row of
    ``alpha [len(words) or more, len(src) + 1]`` (None: no attention, an empty line), in words as
    written (``l'``, not Moses's escaped ``l&apos;``)."""
    src = [*src, "</s>"]
    pairs = [] if alpha is None else [
        f"{html.unescape(w)}←{html.unescape(src[int(row.argmax())])} {float(row.max()):.2f}"
        for w, row in zip(words, alpha.float(), strict=False)
    ]  # fmt: skip
    return "  " + " | ".join(pairs)


# ----------------------------------------------------------------------------------- scoring
def score(hyp_tok: Sequence[Sequence[str]], evalset, idx: Sequence[int], trg_lang: str) -> dict:
    """Tokenized (multi-bleu) and detokenized (sacrebleu) BLEU of ``hyp_tok`` against the
    references ``idx`` of ``evalset``."""
    from .data.text import detokenize

    ref_tok = [" ".join(evalset.ref_tok[i]) for i in idx]
    ref_raw = [evalset.ref_raw[i] for i in idx]
    return {
        "n": len(idx),
        "tok": bleu.bleu_tok([" ".join(h) for h in hyp_tok], ref_tok).to_dict(),
        "detok": bleu.bleu_detok([detokenize(h, trg_lang) for h in hyp_tok], ref_raw).to_dict(),
    }


def _squash(s: str) -> str:
    """Compare sentences whatever their tokenization: no whitespace, ASCII quotes."""
    s = s.replace("“", '"').replace("”", '"').replace("’", "'").replace("&quot;", '"')
    return re.sub(r"\s+", "", s.replace("&apos;", "'"))


def find_sentences(evalset, sources: Sequence[str], prefix: bool = False) -> list[int | None]:
    """Index in ``evalset`` of each source sentence (tokenized or raw; compared without whitespace
    and with ASCII quotes), or None; with ``prefix``, the first sentence that starts so."""
    raws = [_squash(raw) for raw in evalset.src_raw]
    if prefix:
        return [next((i for i, r in enumerate(raws) if r.startswith(_squash(s))), None)
                for s in sources]  # fmt: skip
    where = {}
    for i, raw in enumerate(raws):
        where.setdefault(raw, i)
    return [where.get(_squash(s)) for s in sources]


def attention_records(
    model, evalset, sources: Sequence[str], trg_vocab, search: SearchConfig, device=None,
    precision: str = "fp32", src_vocab=None, on=None,
) -> list[dict]:  # fmt: skip
    """Figure 3: the best hypothesis and its attention for each of ``sources`` (``alpha[i][j]``:
    output token i over source token j, EOS included on both axes). A source found in ``evalset``
    is decoded from there (``found``, ``index``, with its reference); one that is not, such as the
    paper's "arbitrary sentence" (a), is translated from its own tokens when ``src_vocab`` is given
    (Moses-tokenized text, as :data:`nmt_lib.paper.FIG3_SOURCES`), else recorded as not found."""
    found = find_sentences(evalset, sources)
    todo = [(k, evalset.x[i], evalset.src_tok[i]) for k, i in enumerate(found) if i is not None]
    if src_vocab is not None:
        todo += [(k, src_vocab.encode(sources[k].split(), eos=True), sources[k].split())
                 for k, i in enumerate(found) if i is None]  # fmt: skip
    hyps = decode(model, [x for _, x, _ in todo], search, device, precision, return_alpha=True,
                  on=on)  # fmt: skip
    by_k = {k: (tok, h) for (k, _, tok), h in zip(todo, hyps, strict=True)}
    out = []
    for k, (src, i) in enumerate(zip(sources, found, strict=True)):
        rec = {"source": src, "found": i is not None, "index": i}
        if k in by_k:
            tok, h = by_k[k]
            rec["src_tokens"] = [*tok, "</s>"]
            rec["hyp_tokens"] = trg_vocab.decode(h.tokens) + (["</s>"] if h.finished else [])
            if i is not None:
                rec["ref_tokens"] = list(evalset.ref_tok[i])
            rec["alpha"] = (
                None if h.alpha is None else np.round(h.alpha.float().numpy(), 5).tolist()
            )
        out.append(rec)
    return out


def _write_lines(path: Path, lines: Sequence[str]) -> None:
    with atomic_write(path) as f:
        f.writelines(line + "\n" for line in lines)


def _write_compact(path: Path, obj) -> None:
    """JSON with one top-level item per line and no indentation inside (long number lists)."""
    if isinstance(obj, dict):
        items = [f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in obj.items()]
        text = "{\n" + ",\n".join(items) + "\n}\n"
    else:
        text = "[\n" + ",\n".join(json.dumps(v, ensure_ascii=False) for v in obj) + "\n]\n"
    with atomic_write(path) as f:
        f.write(text)


# ----------------------------------------------------------------------------- evaluate_run
def evaluate_run(
    run_cfg: RunConfig,
    out_dir: str | os.PathLike,
    prep=None,
    checkpoint: str | os.PathLike | None = None,
    nll_sentences: int = 1000,
    figure_sources: Sequence[str] = FIG3_SOURCES,
    device: str | None = None,
    progress: bool | None = None,
) -> dict:
    """Evaluate one trained model on the test set and write the files of the module docstring.

    Args:
        run_cfg: the run's config (its ``search`` settings are used; the model must match the
        checkpoint's); out_dir: its results directory; prep: the prepared data (prepared from
        ``run_cfg.data`` when None); checkpoint: file or directory (default: the run's
        :func:`~nmt_lib.checkpoint.default_checkpoint_dir`); nll_sentences: size of the fixed
        training sample for Table 2's train NLL; figure_sources: sentences for ``attention.json``.
    Returns:
        The dict written to ``bleu.json``, plus ``nll`` and timing.
    """
    out_dir = Path(out_dir)
    with naming(out_dir):
        out_dir.mkdir(parents=True, exist_ok=True)
    with locked(out_dir / ".evaluate.lock", f"results directory {out_dir} (an evaluation)"):
        _finish_commit(out_dir)  # what a killed evaluation had decided, then its debris
        for d in out_dir.glob(".evaluate.*"):
            if d.is_dir() and d.name != COMMIT:
                shutil.rmtree(d, ignore_errors=True)
        with naming(out_dir):
            stage = Path(tempfile.mkdtemp(prefix=".evaluate.", dir=out_dir))
        try:
            with naming(out_dir, NO_SPACE):  # a full disk while decoding names the directory
                result = _evaluate_into(stage, run_cfg, out_dir, prep, checkpoint, nll_sentences,
                                        figure_sources, device, progress)  # fmt: skip
            with signals_deferred():  # the rename and the moves, as one step
                os.rename(stage, out_dir / COMMIT)
                _finish_commit(out_dir)
            for f in out_dir.glob(".decode.*.jsonl"):  # the decodings are safe in the results now
                f.unlink()
        finally:
            shutil.rmtree(stage, ignore_errors=True)
    return result


COMMIT = ".evaluate.commit"  # a complete evaluation whose files are being moved into place


def _finish_commit(out_dir: Path) -> None:
    """Move the files of ``out_dir/.evaluate.commit`` (if any) into ``out_dir``: ``bleu.json``
    (the mark of a complete evaluation) removed first and moved last."""
    commit = out_dir / COMMIT
    if not commit.is_dir():
        return
    with naming(out_dir):
        if (commit / "bleu.json").exists():
            (out_dir / "bleu.json").unlink(missing_ok=True)
        for f in sorted(commit.iterdir(), key=lambda f: f.name == "bleu.json"):
            os.replace(f, out_dir / f.name)
        commit.rmdir()


def _evaluate_into(stage: Path, run_cfg, out_dir, prep, checkpoint, nll_sentences, figure_sources,
                   device, progress) -> dict:  # fmt: skip
    """:func:`evaluate_run`, its files written into ``stage``."""
    from . import data

    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    dev = resolve_device(device or run_cfg.train.device)
    prec = run_cfg.train.precision
    if run_cfg.train.threads:
        torch.set_num_threads(run_cfg.train.threads)
    ckpt = find_checkpoint(checkpoint or default_checkpoint_dir(run_cfg, out_dir))
    model, saved_cfg, trained_on = load_trained(ckpt, dev, with_data=True)
    on = backend(saved_cfg.train.backend)
    on.tune_process()
    if saved_cfg.model != run_cfg.model:
        raise ValueError(f"{ckpt}: the checkpoint's model config differs from run {run_cfg.name!r}")
    prep = prep if prep is not None else data.prepare(run_cfg.data)
    for side, v in (("src", prep.src_vocab), ("trg", prep.trg_vocab)):
        check_vocab(v, trained_on, side, Path(prep.path) / f"{side}.vocab.txt", ckpt)
    test, lang, search = prep.test, run_cfg.data.trg_lang, run_cfg.search
    vocab = prep.trg_vocab

    # Table 1, All: the whole test set, <unk> allowed (and scored as a wrong word)
    def journal(*what):  # an interrupted evaluation decodes only what it had not
        return _journal(out_dir, ckpt, to_dict(search), prec, test.name, len(test), *what)

    hyps = decode(
        model, test.x, search, dev, prec, progress=progress, journal=journal("all"), on=on
    )
    hyp_tok = [vocab.decode(h.tokens) for h in hyps]
    everything = list(range(len(test)))
    result = {"run": run_cfg.name, "checkpoint": portable(ckpt, run_cfg), "search": to_dict(search),
              "precision": resolve_precision(prec, dev)}  # fmt: skip
    result["all"] = score(hyp_tok, test, everything, lang)
    result["unfinished"] = sum(not h.finished for h in hyps)
    # beyond the paper: each <unk> replaced by the source word it attends to most (nmt_lib.unk)
    replaced = replace_corpus(model, test.x, hyps, test.src_tok, vocab, 64, dev, prec)
    if replaced is not None:
        result["unk_replaced"] = score(replaced, test, everything, lang)
    # Table 1, No-UNK: no <unk> in source or reference; the model may not emit <unk>
    sub = [i for i in everything if test.no_unk[i]]
    hyps_nu = decode(model, [test.x[i] for i in sub], search, dev, prec, True, progress=progress,
                     journal=journal("no_unk"), on=on)  # fmt: skip
    nu_tok = [vocab.decode(h.tokens) for h in hyps_nu]
    result["no_unk"] = score(nu_tok, test, sub, lang) if sub else {"n": 0}

    from .data.text import detokenize

    detok = [detokenize(h, lang) for h in hyp_tok]
    _write_lines(stage / "hyp.test.tok.txt", [" ".join(h) for h in hyp_tok])
    _write_lines(stage / "hyp.test.detok.txt", detok)
    _write_lines(stage / "hyp.test.no_unk.tok.txt", [" ".join(h) for h in nu_tok])
    if replaced is not None:
        _write_lines(stage / "hyp.test.unk_replaced.tok.txt", [" ".join(h) for h in replaced])

    # Figure 2: BLEU by source length (words, EOS not counted)
    src_len = [len(s) for s in test.src_tok]
    ref_tok = [" ".join(r) for r in test.ref_tok]
    st_tok = bleu.sentence_stats([" ".join(h) for h in hyp_tok], ref_tok, tokenized=True)
    st_detok = bleu.sentence_stats(detok, test.ref_raw, tokenized=False)
    _write_compact(
        stage / "bleu_by_length.json",
        {
            "length": "source words, EOS not counted",
            "edges": list(bleu.LENGTH_EDGES),
            "buckets_tok": bleu.bleu_by_length(st_tok, src_len, tokenized=True),
            "buckets_detok": bleu.bleu_by_length(st_detok, src_len, tokenized=False),
            "src_len": src_len,
            "ref_len": [len(r) for r in test.ref_tok],
            "stats_fields": "hyp_len ref_len match1-4 total1-4",
            "stats_tok": st_tok.tolist(),
            "stats_detok": st_detok.tolist(),
        },
    )

    # Table 2: per-sentence NLL, a fixed sample of training pairs and the whole dev set
    rng = np.random.default_rng(run_cfg.data.seed)
    n = min(nll_sentences, len(prep.train))
    pick = np.sort(rng.choice(len(prep.train), n, replace=False)) if n else []
    pairs = [prep.train.pair(int(i)) for i in pick]
    tx = [[*map(int, p[0]), EOS] for p in pairs]
    ty = [[*map(int, p[1]), EOS] for p in pairs]
    train_nll = sentence_nll(model, tx, ty, 64, dev, prec) if n else []
    dev_nll = sentence_nll(model, prep.dev.x, prep.dev.y, 64, dev, prec)
    nll = {
        "unit": "nats per sentence (sum over target tokens incl. EOS), averaged over sentences",
        "train": {
            "mean": float(np.mean(train_nll)) if n else None,
            "n": n,
            "seed": run_cfg.data.seed,
        },
        "dev": {"mean": float(np.mean(dev_nll)) if dev_nll else None, "n": len(dev_nll)},
    }
    write_json(stage / "nll.json", nll)

    # Figure 3: attention of the chosen sentences
    att = attention_records(model, test, figure_sources, vocab, search, dev, prec, prep.src_vocab,
                            on)  # fmt: skip
    _write_compact(stage / "attention.json", att)
    result["nll"] = nll
    result["seconds"] = time.perf_counter() - t0
    write_json(stage / "bleu.json", result)
    return result
