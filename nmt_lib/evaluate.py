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
  replaced (``unk_replaced``, a model with attention); for a test set of several parts
  (Multi30k's ``multi30k.test_flickr``) also All of each part (``parts``);
* ``bleu_by_length.json``: Figure 2. Buckets by **source** length in words (EOS not counted), width
  10 (``0-9, 10-19, ..., 50-59, >=60``; PAPER.md A11), corpus BLEU per bucket from summed n-gram
  statistics, on the full test set (UNK included, as the caption says). The per-sentence lengths and
  statistics are stored too, so a plot can re-bin (:func:`nmt_lib.bleu.bleu_from_stats`);
* ``nll.json``: Table 2's per-sentence NLL (nats) averaged over a fixed sample of training pairs and
  over the whole dev set;
* ``attention.json``: Figure 3. For each requested source sentence found in the test set: source and
  output tokens (EOS as ``</s>``) and the attention matrix ``alpha[i][j]`` of the best hypothesis;
* ``views/<name>/``: for each test set of ``data.views`` (a second view, e.g. an in-domain set held
  out of the training corpus), its ``hyp.test.*.txt``, ``bleu.json`` and ``bleu_by_length.json``
  as above (:func:`view`).

The files are written into a staging directory beside them and moved into place as one step,
``bleu.json`` last (:func:`nmt_lib.staging.staged`), and what an earlier evaluation wrote and this
one does not (:data:`FILES`: a view no longer in ``data.views``) is removed in the same step: a
results directory with ``bleu.json`` holds one complete evaluation, and an interrupted one leaves
the previous one as it was.

Each result is one function that computes it and writes its file (:func:`table1_all`,
:func:`table1_no_unk`, :func:`hypothesis_files`, :func:`figure2`, :func:`table2`,
:func:`figure3`, :func:`view`), from the :class:`Job` that :func:`evaluate_run` makes of the loaded model (the
loaders are :mod:`nmt_lib.loading`'s, the decoding :mod:`nmt_lib.decoding`'s, the likelihoods
:mod:`nmt_lib.likelihood`'s, BLEU and Figure 3's records :mod:`nmt_lib.scoring`'s, translation
:mod:`nmt_lib.translate`'s). The dev metrics that training measures at each evaluation
are :mod:`nmt_lib.validation`'s.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from . import bleu, data
from .checkpoint import check_vocab, default_checkpoint_dir, portable
from .config import RunConfig, to_dict
from .data.text import detokenize
from .data.vocab import EOS
from .decoding import decode
from .io import NO_SPACE, naming, write_compact, write_json, write_lines
from .likelihood import replace_corpus, sentence_nll
from .loading import Loaded, load_trained
from .paper import FIG3_SOURCES
from .runtime import resolve_device, resolve_precision
from .scoring import attention_records, score
from .search import Hypothesis
from .staging import staged


def _journal(out_dir: Path, ckpt: Path, *what) -> Path:
    """The decoding journal of ``out_dir`` for this checkpoint file (as it is now) and ``what``
    (settings, sources): another model or setting never reads it."""
    st = ckpt.stat()
    key = json.dumps([str(ckpt.resolve()), st.st_size, st.st_mtime_ns, *what], sort_keys=True)
    return out_dir / f".decode.{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsonl"


# ----------------------------------------------------------------------------- evaluate_run
#: The files and directories an evaluation writes into a results directory (the module docstring).
FILES = (
    "hyp.test.tok.txt",
    "hyp.test.detok.txt",
    "hyp.test.no_unk.tok.txt",
    "hyp.test.unk_replaced.tok.txt",
    "bleu.json",
    "bleu_by_length.json",
    "nll.json",
    "attention.json",
    "views",
)


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
    with staged(out_dir, discard=".decode.*.jsonl", owned=FILES) as stage:
        with naming(out_dir, NO_SPACE):  # a full disk while decoding names the directory
            result = _evaluate_into(
                stage,
                run_cfg,
                out_dir,
                prep,
                checkpoint,
                nll_sentences,
                figure_sources,
                device,
                progress,
            )
    return result


# ------------------------------------------------------------------------------ the results
@dataclass(frozen=True)
class Job:
    """What each result of one evaluation is computed from: the loaded model (``loaded``), the
    prepared data, the run's config, the device and precision, the staging directory its files
    are written into, the results directory ``out_dir`` (its decoding journals) and whether to show
    progress."""

    loaded: Loaded
    prep: object
    run: RunConfig
    device: object
    precision: str
    stage: Path
    out_dir: Path
    progress: bool | None = None

    def decode(self, xs, what: str, ignore_unk: bool = False) -> list[Hypothesis]:
        """The run's search over ``xs``, journaled as ``what`` (an interrupted evaluation decodes
        only what it had not)."""
        test, search = self.prep.test, self.run.search
        journal = _journal(
            self.out_dir,
            self.loaded.path,
            to_dict(search),
            self.precision,
            test.name,
            len(test),
            what,
        )
        return decode(
            self.loaded.model,
            xs,
            search,
            ignore_unk=ignore_unk,
            device=self.device,
            precision=self.precision,
            progress=self.progress,
            journal=journal,
        )


def table1_all(job: Job) -> tuple[list[Hypothesis], list[list[str]] | None, dict]:
    """Table 1, All: the whole test set decoded, ``<unk>`` allowed (and scored as a wrong word);
    beyond the paper, each ``<unk>`` also replaced by the source word it attends to most
    (:mod:`nmt_lib.unk`; a model with attention). The hypotheses, their tokens with ``<unk>``
    replaced (None: no attention), and ``bleu.json``'s ``all``, ``unfinished`` and
    ``unk_replaced``."""
    test, vocab, lang = job.prep.test, job.prep.trg_vocab, job.run.data.trg_lang
    hyps = job.decode(test.x, "all")
    everything = range(len(test))
    hyp_tok = [vocab.decode(h.tokens) for h in hyps]
    out = {
        "all": score(hyp_tok, test, everything, lang),
        "unfinished": sum(not h.finished for h in hyps),
    }
    parts = dict.fromkeys(part for part, _, _ in test.ids)
    if len(parts) > 1:  # a test set of several (Multi30k's two Flickr sets): each one's BLEU too
        where = {p: [i for i in everything if test.ids[i][0] == p] for p in parts}
        out["parts"] = {
            p: score([hyp_tok[i] for i in idx], test, idx, lang) for p, idx in where.items()
        }
    replaced = replace_corpus(
        job.loaded.model, test.x, hyps, test.src_tok, vocab, 64, job.device, job.precision
    )
    if replaced is not None:
        out["unk_replaced"] = score(replaced, test, everything, lang)
    return hyps, replaced, out


def table1_no_unk(job: Job) -> tuple[list[list[str]], dict]:
    """Table 1, No-UNK: the sentences with no ``<unk>`` in source or reference, decoded without
    emitting ``<unk>``: their tokens, and ``bleu.json``'s ``no_unk``."""
    test = job.prep.test
    sub = [i for i in range(len(test)) if test.no_unk[i]]
    hyps = job.decode([test.x[i] for i in sub], "no_unk", ignore_unk=True)
    tokens = [job.prep.trg_vocab.decode(h.tokens) for h in hyps]
    return tokens, score(tokens, test, sub, job.run.data.trg_lang) if sub else {"n": 0}


def hypothesis_files(job: Job, hyp_tok, no_unk_tok, replaced) -> list[str]:
    """Write the ``hyp.test.*.txt`` files (module docstring); the detokenized hypotheses."""
    detok = [detokenize(h, job.run.data.trg_lang) for h in hyp_tok]
    write_lines(job.stage / "hyp.test.tok.txt", [" ".join(h) for h in hyp_tok])
    write_lines(job.stage / "hyp.test.detok.txt", detok)
    write_lines(job.stage / "hyp.test.no_unk.tok.txt", [" ".join(h) for h in no_unk_tok])
    if replaced is not None:
        write_lines(job.stage / "hyp.test.unk_replaced.tok.txt", [" ".join(h) for h in replaced])
    return detok


def figure2(job: Job, hyp_tok, detok) -> dict:
    """Figure 2: BLEU by source length (words, EOS not counted), written to
    ``bleu_by_length.json``; for a test set of several parts, each sentence's part (``parts``)."""
    test = job.prep.test
    src_len = [len(s) for s in test.src_tok]
    ref_tok = [" ".join(r) for r in test.ref_tok]
    st_tok = bleu.sentence_stats([" ".join(h) for h in hyp_tok], ref_tok, tokenized=True)
    st_detok = bleu.sentence_stats(detok, test.ref_raw, tokenized=False)
    out = {
        "length": "source words, EOS not counted",
        "edges": list(bleu.LENGTH_EDGES),
        "buckets_tok": bleu.bleu_by_length(st_tok, src_len, tokenized=True),
        "buckets_detok": bleu.bleu_by_length(st_detok, src_len, tokenized=False),
        "src_len": src_len,
        "ref_len": [len(r) for r in test.ref_tok],
        "stats_fields": "hyp_len ref_len match1-4 total1-4",
        "stats_tok": st_tok.tolist(),
        "stats_detok": st_detok.tolist(),
    }
    if len({part for part, _, _ in test.ids}) > 1:
        out["parts"] = [part for part, _, _ in test.ids]
    write_compact(job.stage / "bleu_by_length.json", out)
    return out


def table2(job: Job, nll_sentences: int) -> dict:
    """Table 2: per-sentence NLL over a fixed sample of ``nll_sentences`` training pairs and over
    the whole dev set, written to ``nll.json``."""
    prep, seed, model = job.prep, job.run.data.seed, job.loaded.model
    rng = np.random.default_rng(seed)
    n = min(nll_sentences, len(prep.train))
    pick = np.sort(rng.choice(len(prep.train), n, replace=False)) if n else []
    pairs = [prep.train.pair(int(i)) for i in pick]
    tx = [[*map(int, p[0]), EOS] for p in pairs]
    ty = [[*map(int, p[1]), EOS] for p in pairs]
    train_nll = sentence_nll(model, tx, ty, 64, job.device, job.precision) if n else []
    dev_nll = sentence_nll(model, prep.dev.x, prep.dev.y, 64, job.device, job.precision)
    out = {
        "unit": "nats per sentence (sum over target tokens incl. EOS), averaged over sentences",
        "train": {"mean": float(np.mean(train_nll)) if n else None, "n": n, "seed": seed},
        "dev": {"mean": float(np.mean(dev_nll)) if dev_nll else None, "n": len(dev_nll)},
    }
    write_json(job.stage / "nll.json", out)
    return out


def figure3(job: Job, sources: Sequence[str]) -> list[dict]:
    """Figure 3: the attention of the chosen ``sources`` (:func:`~nmt_lib.scoring.attention_records`),
    written to ``attention.json``."""
    p = job.prep
    out = attention_records(
        job.loaded.model,
        p.test,
        sources,
        p.trg_vocab,
        job.run.search,
        job.device,
        job.precision,
        p.src_vocab,
    )
    write_compact(job.stage / "attention.json", out)
    return out


def view(job: Job, name: str) -> dict:
    """A second view (``data.views``): the test set ``name`` decoded and scored as the test set is
    (Table 1 All and No-UNK, the hypothesis files, Figure 2), into ``views/<name>/`` with a
    ``bleu.json`` of its own; the view's ``bleu.json``."""
    stage = job.stage / "views" / name
    with naming(job.out_dir):
        stage.mkdir(parents=True)
    seen = replace(job, prep=replace(job.prep, test=job.prep.views[name]), stage=stage)
    hyps, replaced, out = table1_all(seen)
    no_unk_tok, out["no_unk"] = table1_no_unk(seen)
    hyp_tok = [job.prep.trg_vocab.decode(h.tokens) for h in hyps]
    figure2(seen, hyp_tok, hypothesis_files(seen, hyp_tok, no_unk_tok, replaced))
    out = {"run": job.run.name, "test": name, **out}
    write_json(stage / "bleu.json", out)
    return out


def _load(run_cfg: RunConfig, out_dir: Path, prep, checkpoint, device):
    """The model that :func:`evaluate_run` evaluates, checked against the run and its data; the
    prepared data (prepared from ``run_cfg.data`` when None); the device."""
    dev = resolve_device(device or run_cfg.train.device)
    if run_cfg.train.threads:
        torch.set_num_threads(run_cfg.train.threads)
    loaded = load_trained(checkpoint or default_checkpoint_dir(run_cfg, out_dir), dev)
    loaded.on.tune_process()
    if loaded.cfg.model != run_cfg.model:
        raise ValueError(
            f"{loaded.path}: the checkpoint's model config differs from run {run_cfg.name!r}"
        )
    prep = prep if prep is not None else data.prepare(run_cfg.data)
    for side, v in (("src", prep.src_vocab), ("trg", prep.trg_vocab)):
        check_vocab(v, loaded.trained_on, side, Path(prep.path) / f"{side}.vocab.txt", loaded.path)
    return loaded, prep, dev


def _evaluate_into(
    stage: Path, run_cfg, out_dir, prep, checkpoint, nll_sentences, figure_sources, device, progress
) -> dict:
    """:func:`evaluate_run`, its files written into ``stage``: each result in its turn."""
    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    loaded, prep, dev = _load(run_cfg, out_dir, prep, checkpoint, device)
    prec = run_cfg.train.precision
    job = Job(loaded, prep, run_cfg, dev, prec, stage, out_dir, progress)
    result = {
        "run": run_cfg.name,
        "checkpoint": portable(loaded.path, run_cfg),
        "search": to_dict(run_cfg.search),
        "precision": resolve_precision(prec, dev),
    }
    hyps, replaced, table1 = table1_all(job)
    result.update(table1)
    no_unk_tok, result["no_unk"] = table1_no_unk(job)
    hyp_tok = [prep.trg_vocab.decode(h.tokens) for h in hyps]
    detok = hypothesis_files(job, hyp_tok, no_unk_tok, replaced)
    figure2(job, hyp_tok, detok)
    nll = table2(job, nll_sentences)
    figure3(job, figure_sources)
    for name in run_cfg.data.views:
        view(job, name)
    result["nll"] = nll
    result["seconds"] = time.perf_counter() - t0
    write_json(stage / "bleu.json", result)
    return result
