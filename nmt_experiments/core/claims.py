"""The rules by which a claim about results is judged, which the judge
(:class:`nmt_experiments.core.judge.Judge`) applies: the paper's claims
(:mod:`nmt_experiments.replicate.paper_claims`) and those of the comparison of the models before and
after the paper (:mod:`nmt_experiments.comparison.verdicts`) share them, and the claims counted by
verdict (:func:`verdict_counts`).

The rules. An interval covers the test set (sentences resampled, the same resamples for every
model: *paired*) and, where a model has several seeds, training noise (its seeds resampled too:
:func:`seeded_scores`). A claim is decided only between models that have learned: every model it
names must be above the learning floor (:data:`FLOOR`), else it is *not testable here*, whichever
way the numbers point (an untrained baseline says no more about an architecture when it loses than
when it wins); what the numbers show at this budget may be noted beside the verdict, as an
observation. Between models above the floor, a claim that one model beats another by a BLEU
difference gets one of four verdicts (:func:`verdict`): *reproduced* (every interval above the
margin), *the opposite holds* (an interval below 0), *not reproduced* (an interval below the
margin: too small), or *not testable here* (an interval contains the margin: these seeds and this
test set cannot decide). Figure 2's claim has two parts, each with its own verdict: a model holds
up on long sentences (:meth:`~nmt_experiments.core.judge.Judge.holds_up`, its own long/short
ratio against 1 - the margin, by the same rule: its whole interval at or above it) and it holds up
better than the models without attention (:meth:`~nmt_experiments.core.judge.Judge.holds_up_better`).
Figure 3's claim is judged by the diagonal of the alignments
(:func:`nmt_experiments.core.alignment.attention_summary`)."""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

from nmt_lib import bleu

#: Table 1's claims in numbers: a model "beats" another when their BLEU difference is at least
#: MARGIN points (the paper's differences are 4-9 points; below one point a difference is too small
#: to carry the claim, however certain).
MARGIN = 1.0
#: Figure 2's claim in numbers: BLEU on sentences of LONG source words or more divided by BLEU on
#: sentences of fewer than SHORT words. A model "holds up" when that ratio's whole interval lies at
#: 1 - RATIO_MARGIN or above (any fall is within the margin), and "holds up better" than another
#: when its ratio is higher by at least RATIO_MARGIN.
SHORT, LONG, RATIO_MARGIN = 30, 50, 0.1
#: The learning floor: a model has learned enough to take part in a claim when its BLEU on the
#: test sentences of fewer than SHORT words (the mean over its seeds) is at least FLOOR. Below it
#: most of its n-gram matches are the frequent words any output has: its score, its ratio and its
#: losing or winning say nothing about its architecture.
FLOOR = 5.0
#: The verdicts.
REPRODUCED, NOT_REPRODUCED, OPPOSITE, NOT_TESTABLE = (
    "reproduced",
    "not reproduced",
    "the opposite holds",
    "not testable here",
)


def seeded_scores(
    stats: Sequence[np.ndarray], n_samples: int = 1000, subset=None, draw: str = ""
) -> np.ndarray:
    """BLEU of ``n_samples`` resamples of one model with ``len(stats)`` seeds (each ``[N, 10]``,
    :func:`nmt_lib.bleu.sentence_stats`): each resample draws the test sentences
    (:func:`nmt_lib.bleu.bootstrap_scores`, the same draws for every model) and the seeds, with
    replacement (drawn with a generator seeded by ``draw``, e.g. the model's name), and averages the
    drawn seeds' BLEU. One seed: the test-set bootstrap alone. ``subset``: as ``bootstrap_scores``."""
    per = np.stack([bleu.bootstrap_scores(s, True, n_samples, subset=subset) for s in stats])
    if len(stats) == 1:
        return per[0]
    pick = np.random.default_rng(zlib.crc32(draw.encode())).integers(
        0, len(stats), (n_samples, len(stats))
    )
    return per[pick, np.arange(n_samples)[:, None]].mean(1)


def short_bleu(stats: Sequence[np.ndarray], lengths) -> float:
    """The mean over seeds of BLEU on the sentences of fewer than SHORT source words: what the
    learning floor is judged on."""
    short = np.asarray(lengths) < SHORT
    return float(np.mean([bleu.bleu_from_stats(np.asarray(s)[short], True) for s in stats]))


def floor_text(below: dict[str, float]) -> str:
    """``"Seq2seq-50 (BLEU 0.9 on sentences of fewer than 30 words)"`` for each model below."""
    return ", ".join(
        f"{m} (BLEU {b:.1f} on sentences of fewer than {SHORT} words)" for m, b in below.items()
    )


def below_floor(below: dict[str, float]) -> str:
    """The reason of a claim that a model below the floor makes not testable, naming each."""
    return f"below the learning floor of {FLOOR:g} BLEU: {floor_text(below)}"


def verdict(
    intervals: list[list[float]],
    margin: float = MARGIN,
    below: dict[str, float] | None = None,
    unit: str = " BLEU",
) -> tuple[str, str]:
    """The verdict and its reason for a claim that one model is better than others by ``margin``:
    ``intervals`` of the differences (better minus other); ``below``: the models the claim names
    that are below the learning floor, with their short-sentence BLEU. Any such model, on either
    side, makes the claim *not testable here*."""
    if below:
        return NOT_TESTABLE, below_floor(below)
    if all(lo > margin for lo, _ in intervals):
        return REPRODUCED, f"every difference's 95% interval is above +{margin:g}{unit}"
    if any(hi < 0 for _, hi in intervals):
        return OPPOSITE, "a difference's 95% interval is below 0"
    if any(hi < margin for _, hi in intervals):
        return NOT_REPRODUCED, f"a difference's 95% interval is below +{margin:g}{unit}: too small"
    return NOT_TESTABLE, (
        f"a difference's 95% interval contains +{margin:g}{unit}: these seeds "
        "and this test set cannot decide"
    )


def holds_verdict(interval: list[float], margin: float = RATIO_MARGIN) -> tuple[str, str]:
    """The verdict of "a model shows no deterioration on long sentences" from the 95% interval
    of its long/short ratio, by the rule of :func:`verdict`: *reproduced* when the whole interval
    lies at or above ``1 - margin`` (the reason says so when it still reaches below 1), *not
    reproduced* when it lies wholly below, otherwise *not testable here*: a wider interval never
    passes more easily than a narrow one with the same ratio."""
    lo, hi = interval
    at = 1 - margin
    if lo >= at:
        why = f"the ratio's 95% interval lies at or above {at:g} (1 − {margin:g}): no fall beyond the margin"
        if lo < 1:
            why += "; it reaches below 1, so some fall within the margin"
        return REPRODUCED, why
    if hi < at:
        return (
            NOT_REPRODUCED,
            f"the ratio's 95% interval lies below {at:g} (1 − {margin:g}): it falls",
        )
    return NOT_TESTABLE, (
        f"the ratio's 95% interval contains {at:g} (1 − {margin:g}): these seeds and this "
        "test set cannot decide"
    )


def difference(point: float, iv: list[float]) -> str:
    """A difference and its 95% interval, as the claims tables print it: ``+1.20 [+0.40, +2.00]``."""
    return f"{point:+.2f} [{iv[0]:+.2f}, {iv[1]:+.2f}]"


def verdict_counts(verdicts: list[str]) -> str:
    """``"3 reproduced, 1 not testable here"``: how many claims got each verdict, in the order of
    this module's verdicts."""
    order = (REPRODUCED, NOT_REPRODUCED, OPPOSITE, NOT_TESTABLE)
    return ", ".join(f"{verdicts.count(v)} {v}" for v in order if verdicts.count(v))
