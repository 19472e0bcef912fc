"""What training measures at each evaluation (``train.eval_every``): the dev NLL on a fixed subset of
the dev set (:func:`dev_subset`) and the BLEU of greedy translations of its first sentences
(:func:`dev_metrics`). Training depends on these, not on the test set's evaluation
(:mod:`nmt_lib.evaluate`)."""

from __future__ import annotations

import time

from . import bleu
from .config import RunConfig
from .decoding import decode
from .likelihood import sentence_nll


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
        hyps = decode(
            model, prep.dev.x[:n], cfg.search, greedy=True, device=device, precision=t.precision
        )
        hyp = [" ".join(prep.trg_vocab.decode(h.tokens)) for h in hyps]
        ref = [" ".join(r) for r in prep.dev.ref_tok[:n]]
        out["dev_bleu"] = bleu.bleu_tok(hyp, ref).score
    out["eval_seconds"] = time.perf_counter() - t0
    return out
