"""BLEU, always through sacrebleu (never a home-made BLEU; STYLE.md).

Two flavours, both corpus-level BLEU-4 against one reference (PAPER.md §4, A10):

* :func:`bleu_detok` -- today's standard: detokenized output and reference, sacrebleu's default
  ``13a`` tokenizer and ``exp`` smoothing, reported with its signature string.
* :func:`bleu_tok` -- what the paper's era reported (Jean et al. 2015: ``multi-bleu.perl`` on
  tokenized, case-sensitive text): Moses-tokenized cased strings scored as they are
  (``tokenize='none'``, ``force=True``) and **no smoothing** (``smooth_method='none'``), since
  ``multi-bleu.perl`` has none: a zero n-gram precision gives BLEU 0.

Per-sentence sufficient statistics (:func:`sentence_stats`) make BLEU re-computable on any subset,
e.g. by source-length bucket for Figure 2 (:func:`bleu_by_length`, PAPER.md A11);
:func:`paired_bootstrap` wraps sacrebleu's paired bootstrap resampling for 95% intervals, and
:func:`bootstrap_scores` draws the same resamples from stored statistics (no text needed), also for a
subset such as a length bucket.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from sacrebleu.metrics import BLEU
from sacrebleu.significance import PairedTest

#: Source-length buckets of Figure 2 (PAPER.md A11): source words (EOS not counted), width 10,
#: ``[0,10), [10,20), ..., [50,60)`` and a last open bucket ``[60, inf)``.
LENGTH_EDGES = (0, 10, 20, 30, 40, 50, 60)


@dataclass(frozen=True)
class BleuResult:
    """A corpus BLEU score and what it is made of (sacrebleu ``BLEUScore``)."""

    score: float  # 0-100
    signature: str  # sacrebleu's reproducibility signature
    counts: list[int]  # matching 1..4-grams
    totals: list[int]  # hypothesis 1..4-grams
    precisions: list[float]
    bp: float  # brevity penalty
    sys_len: int
    ref_len: int
    n: int  # sentences

    def to_dict(self) -> dict:
        return asdict(self)


def metric(tokenized: bool) -> BLEU:
    """The sacrebleu metric object: multi-bleu-style (``tokenized``) or the detokenized default."""
    if tokenized:
        return BLEU(tokenize="none", force=True, smooth_method="none")
    return BLEU()


def _check(hyps: Sequence[str], refs: Sequence[str]) -> None:
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")


def corpus_bleu(hyps: Sequence[str], refs: Sequence[str], tokenized: bool) -> BleuResult:
    """Corpus BLEU of ``hyps`` against one reference each; see :func:`metric`."""
    _check(hyps, refs)
    m = metric(tokenized)
    s = m.corpus_score(list(hyps), [list(refs)])
    return BleuResult(
        float(s.score),
        str(m.get_signature()),
        list(map(int, s.counts)),
        list(map(int, s.totals)),
        [float(p) for p in s.precisions],
        float(s.bp),
        int(s.sys_len),
        int(s.ref_len),
        len(hyps),
    )


def bleu_detok(hyps: Sequence[str], refs: Sequence[str]) -> BleuResult:
    """BLEU on detokenized text, sacrebleu defaults (13a, exp smoothing), with its signature."""
    return corpus_bleu(hyps, refs, tokenized=False)


def bleu_tok(hyps_tok: Sequence[str], refs_tok: Sequence[str]) -> BleuResult:
    """BLEU on Moses-tokenized cased text as ``multi-bleu.perl`` (space-joined tokens)."""
    return corpus_bleu(hyps_tok, refs_tok, tokenized=True)


def sentence_stats(hyps: Sequence[str], refs: Sequence[str], tokenized: bool) -> np.ndarray:
    """sacrebleu's per-sentence sufficient statistics ``[N, 10]`` int64: hypothesis length,
    reference length, 4 n-gram match counts, 4 n-gram totals. Their column sums give corpus BLEU."""
    _check(hyps, refs)
    m = metric(tokenized)
    stats = m._extract_corpus_statistics(list(hyps), [list(refs)])
    return np.asarray(stats, dtype=np.int64).reshape(len(hyps), 10)


def bleu_from_stats(stats: np.ndarray, tokenized: bool) -> float:
    """Corpus BLEU from summed (or per-sentence ``[N, 10]``) statistics."""
    stats = np.asarray(stats)
    total = stats.sum(0) if stats.ndim == 2 else stats
    return float(metric(tokenized)._compute_score_from_stats([int(v) for v in total]).score)


def bucket_of(length: int, edges: Sequence[int] = LENGTH_EDGES) -> int:
    """Index of the bucket ``[edges[k], edges[k+1])`` holding ``length``; the last is open."""
    k = int(np.searchsorted(np.asarray(edges), length, side="right")) - 1
    return max(k, 0)


def bleu_by_length(
    stats: np.ndarray, lengths: Sequence[int], tokenized: bool, edges: Sequence[int] = LENGTH_EDGES
) -> list[dict]:
    """Corpus BLEU per length bucket (Figure 2): one dict per bucket with ``lo``, ``hi``
    (inclusive; None for the open last bucket), ``n`` sentences and ``bleu`` (None when empty).

    Args:
        stats: ``[N, 10]`` from :func:`sentence_stats`; lengths: ``[N]`` source words (no EOS).
    """
    lengths = np.asarray(lengths)
    which = np.array([bucket_of(int(n), edges) for n in lengths], dtype=np.int64)
    out = []
    for k, lo in enumerate(edges):
        sel = which == k
        hi = edges[k + 1] - 1 if k + 1 < len(edges) else None
        n = int(sel.sum())
        bleu = bleu_from_stats(stats[sel], tokenized) if n else None
        out.append({"lo": int(lo), "hi": hi, "n": n, "bleu": bleu})
    return out


def paired_bootstrap(
    systems: dict[str, Sequence[str]],
    refs: Sequence[str],
    tokenized: bool = True,
    n_samples: int = 1000,
) -> dict:
    """sacrebleu's paired bootstrap resampling (Koehn 2004; Moses
    ``bootstrap-hypothesis-difference-significance.pl``) over ``systems`` (name -> hypotheses).

    The first system is the baseline. Returns ``{"signature": str, "systems": {name: {"bleu",
    "mean", "ci", "interval": [lo, hi], "p_value"}}}``: ``mean`` ± ``ci`` is the 95% interval of the
    bootstrap scores; ``p_value`` (None for the baseline) tests the difference to the baseline.
    The seed is sacrebleu's (``SACREBLEU_SEED``, default 12345).
    """
    names = list(systems)
    for name in names:
        _check(systems[name], refs)
    test = PairedTest(
        [(name, list(systems[name])) for name in names],
        {"BLEU": metric(tokenized)},
        [list(refs)],
        test_type="bs",
        n_samples=n_samples,
    )
    signatures, scores = test()
    (key,) = [k for k in scores if k != "System"]
    out = {}
    for name, r in zip(scores["System"], scores[key], strict=True):
        out[name] = {
            "bleu": float(r.score),
            "mean": float(r.mean),
            "ci": float(r.ci),
            "interval": [float(r.mean - r.ci), float(r.mean + r.ci)],
            "p_value": None if r.p_value is None else float(r.p_value),
        }
    return {"signature": str(signatures[key]), "n_samples": n_samples, "systems": out}


def bootstrap_scores(
    stats: np.ndarray,
    tokenized: bool = True,
    n_samples: int = 1000,
    seed: int = 12345,
    subset: Sequence[bool] | None = None,
) -> np.ndarray:
    """BLEU of ``n_samples`` bootstrap resamples of the sentences of ``stats [N, 10]``
    (:func:`sentence_stats`), drawn as sacrebleu's paired bootstrap draws them
    (``numpy.random.default_rng(seed).choice(N, (n_samples, N))``, seed 12345 as sacrebleu's
    default): one seed gives the same resamples to every system of a test set, so differences
    of the returned scores are *paired*. ``subset [N]`` (bool): score only the resampled
    sentences that fall in it (e.g. a length bucket). Returns ``[n_samples]`` float64."""
    stats = np.asarray(stats, dtype=np.int64)
    n = len(stats)
    idx = np.random.default_rng(seed).choice(n, size=(n_samples, n), replace=True)
    counts = np.stack([np.bincount(row, minlength=n) for row in idx])  # [S, N]
    if subset is not None:
        counts[:, ~np.asarray(subset, dtype=bool)] = 0
    return np.array([bleu_from_stats(total, tokenized) for total in counts @ stats])


def paired_difference(
    stats_a: np.ndarray, stats_b: np.ndarray, tokenized: bool = True, n_samples: int = 1000
) -> tuple[float, list[float]]:
    """BLEU(a) - BLEU(b) from per-sentence statistics of the same sentences, with the 95% interval
    of paired bootstrap resampling (:func:`bootstrap_scores` with one seed: the same resamples for
    both systems)."""
    a, b = np.asarray(stats_a), np.asarray(stats_b)
    point = bleu_from_stats(a, tokenized) - bleu_from_stats(b, tokenized)
    diffs = bootstrap_scores(a, tokenized, n_samples) - bootstrap_scores(b, tokenized, n_samples)
    return point, interval(diffs)


def interval(samples: np.ndarray) -> list[float]:
    """The 95% interval of bootstrap ``samples`` as sacrebleu bounds it (``estimate_ci``: the
    ``n // 40``-th smallest and largest values)."""
    s = np.sort(np.asarray(samples, dtype=np.float64))
    k = len(s) // 40
    return [float(s[k]), float(s[len(s) - k - 1])]
