"""The paper's four claims about its results, judged on ours (:func:`claims`): each with our numbers,
95% intervals and a verdict by the rules below, which the comparison of the models before and after
the paper (:mod:`nmt_experiments.comparison`) shares. Reads only a results directory (``results/<profile>/``).

The rules. An interval covers the test set (sentences resampled, the same resamples for every
model: *paired*) and, where a model has several seeds, training noise (its seeds resampled too:
:func:`seeded_scores`). A claim that one model beats another by a BLEU difference, or holds up
better on long sentences by a ratio, gets one of four verdicts (:func:`verdict`): *reproduced*
(every interval above the margin), *the opposite holds* (an interval below 0), *not reproduced*
(an interval below the margin: too small), or *not testable here*: the claimed better model is below
the learning floor (:data:`FLOOR`), or a model that the claim needs to have learned is, or an
interval contains the margin (these seeds and this test set cannot decide)."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from nmt_lib import bleu
from nmt_lib.io import read_json
from nmt_lib.paper import MODELS

from .results import paper_table, run_dir, seed_groups

#: Table 1's claims in numbers: a model "beats" another when their BLEU difference is at least
#: MARGIN points (the paper's differences are 4-9 points; below one point a difference is too small
#: to carry the claim, however certain).
MARGIN = 1.0
#: Figure 2's claim in numbers: BLEU on sentences of fewer than SHORT source words against BLEU on
#: sentences of LONG words or more. A model "holds up better" than another when its long/short
#: ratio is higher by at least RATIO_MARGIN.
SHORT, LONG, RATIO_MARGIN = 30, 50, 0.1
#: The learning floor: a model has learned enough to test a claim about it when its BLEU on the
#: test sentences of fewer than SHORT words (the mean over its seeds) is at least FLOOR. Below it
#: most of its n-gram matches are the frequent words any output has; a ratio of two such scores,
#: or a model's failure to beat another, says nothing about its architecture.
FLOOR = 5.0
#: Figure 3's claim in numbers: an alignment is "peaked" when a generated word puts PEAKED of its
#: weight on one source word on average, "mostly monotonic" when MONOTONIC of the steps from one
#: generated word to the next do not move the heaviest source word left, and a reordering is
#: "local" when it moves it left by at most LOCAL words.
PEAKED, MONOTONIC, LOCAL = 0.5, 0.7, 3
#: The verdicts.
REPRODUCED, NOT_REPRODUCED, OPPOSITE, NOT_TESTABLE = (
    "reproduced", "not reproduced", "the opposite holds", "not testable here")  # fmt: skip


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
    return ", ".join(f"{m} (BLEU {b:.1f} on sentences of fewer than {SHORT} words)"
                     for m, b in below.items())  # fmt: skip


def verdict(
    intervals: list[list[float]],
    margin: float = MARGIN,
    better_below: dict[str, float] | None = None,
    others_below: dict[str, float] | None = None,
    unit: str = " BLEU",
) -> tuple[str, str]:
    """The verdict and its reason for a claim that one model is better than others by ``margin``:
    ``intervals`` of the differences (better minus other); ``better_below`` / ``others_below``:
    the models of either side that are below the learning floor, with their short-sentence BLEU.
    A model below the floor may lose a claim (its rival beats it: the difference is real at this
    budget) but never wins one or sinks one: then the verdict is *not testable here*."""
    floor = f"below the learning floor of {FLOOR:g} BLEU"
    if better_below:
        return NOT_TESTABLE, f"{floor}: {floor_text(better_below)}"
    if all(lo > margin for lo, _ in intervals):
        why = f"every difference's 95% interval is above +{margin:g}{unit}"
        if others_below:
            why += f"; not learned yet at this budget, {floor}: {floor_text(others_below)}"
        return REPRODUCED, why
    if others_below:
        return NOT_TESTABLE, f"{floor}: {floor_text(others_below)}"
    if any(hi < 0 for _, hi in intervals):
        return OPPOSITE, "a difference's 95% interval is below 0"
    if any(hi < margin for _, hi in intervals):
        return NOT_REPRODUCED, f"a difference's 95% interval is below +{margin:g}{unit}: too small"
    return NOT_TESTABLE, (f"a difference's 95% interval contains +{margin:g}{unit}: these seeds "
                          "and this test set cannot decide")  # fmt: skip


def difference(point: float, iv: list[float]) -> str:
    """A difference and its 95% interval, as the claims tables print it: ``+1.20 [+0.40, +2.00]``."""
    return f"{point:+.2f} [{iv[0]:+.2f}, {iv[1]:+.2f}]"


def alignment_stats(alpha) -> dict:
    """Sharpness and monotonicity of one attention matrix ``alpha [generated words, source words]``:
    mean largest weight, the uniform weight, the number of steps from one generated word to the
    next, how many of them do not move the heaviest source word left, and the sizes of the moves
    left."""
    a = np.asarray(alpha, dtype=np.float64)
    steps = np.diff(a.argmax(1))
    return {
        "words": len(a),
        "peak": float(a.max(1).mean()),
        "uniform": 1 / a.shape[1],
        "steps": len(steps),
        "monotonic_steps": int((steps >= 0).sum()),
        "moves_left": [int(-d) for d in steps if d < 0],
    }


def attention_summary(records: list[dict]) -> dict:
    """The alignments of ``attention.json``'s records, summed up: how many sentences have them,
    the mean largest weight and uniform weight, the share of monotonic steps, and how many moves
    left there are and how many of them are local (at most ``LOCAL`` words). The EOS row of a
    finished translation aligns its end, not a word: left out (an empty translation has no row
    left, and no alignment)."""
    alphas = [r["alpha"][:-1] if r["hyp_tokens"][-1:] == ["</s>"] else r["alpha"]
              for r in records if r.get("alpha")]  # fmt: skip
    st = [alignment_stats(a) for a in alphas if len(a)]
    back = [b for s in st for b in s["moves_left"]]
    return {
        "sentences": len(st),
        "peak": float(np.mean([s["peak"] for s in st])) if st else 0.0,
        "uniform": float(np.mean([s["uniform"] for s in st])) if st else 0.0,
        "monotonic": sum(s["monotonic_steps"] for s in st) / max(sum(s["steps"] for s in st), 1),
        "moves_left": len(back),
        "local": sum(b <= LOCAL for b in back),
    }


def ratio_claim(
    better: str, others: list[str], stats: dict, lengths, n_samples: int = 1000
) -> tuple[str, str, str]:
    """Figure 2's claim for the model ``better`` against ``others``: its BLEU(>= LONG) / BLEU(<
    SHORT) ratio is higher by :data:`RATIO_MARGIN`, judged (:func:`verdict`) only between models
    above the learning floor (a ratio of two chance-level scores says nothing). ``stats``: each
    model's list of per-seed statistics. Returns our numbers, the verdict and its reason."""
    lengths = np.asarray(lengths)
    short, long_ = lengths < SHORT, lengths >= LONG
    ratio, low = {}, {}
    for m in [better, *others]:
        with np.errstate(divide="ignore", invalid="ignore"):
            samples = (seeded_scores(stats[m], n_samples, long_, m)
                       / seeded_scores(stats[m], n_samples, short, m))  # fmt: skip
        point = np.mean([bleu.bleu_from_stats(s[long_], True) for s in stats[m]]) / max(
            np.mean([bleu.bleu_from_stats(s[short], True) for s in stats[m]]), 1e-9
        )
        ratio[m] = (float(point), samples)
        if (b := short_bleu(stats[m], lengths)) < FLOOR:
            low[m] = b

    def txt(m):
        lo, hi = bleu.interval(ratio[m][1])
        return f"{m} {ratio[m][0]:.2f} [{lo:.2f}, {hi:.2f}]"

    ours = (f"BLEU(≥{LONG}) / BLEU(<{SHORT}): " + "; ".join(txt(m) for m in [better, *others])
            + f" ({int(long_.sum())} test sentences of ≥{LONG} words)")  # fmt: skip
    if not long_.any() or not short.any():
        return ours, NOT_TESTABLE, f"no test sentences of ≥{LONG} or of <{SHORT} words"
    above = [m for m in others if m not in low]
    if better not in low and not above:
        return ours, NOT_TESTABLE, (
            f"no model to compare with above the learning floor of {FLOOR:g} BLEU: "
            f"{floor_text({m: low[m] for m in others})}")  # fmt: skip
    ivs = [bleu.interval(ratio[better][1] - ratio[m][1]) for m in above]
    v, why = verdict(ivs, RATIO_MARGIN, {better: low[better]} if better in low else None,
                     unit=" in the ratio")  # fmt: skip
    if v != NOT_TESTABLE and len(above) < len(others):
        why += f" (compared with {', '.join(above)}; the others are below the learning floor)"
    return ours, v, why


def claims(out: Path, n_samples: int = 1000) -> list[dict]:
    """The paper's four claims about its results, with our numbers (a model trained with several
    seeds: the mean over them), 95% intervals over test sentences and seeds (:func:`seeded_scores`;
    one seed: the paired test-set bootstrap) and a verdict by :func:`verdict`'s rules, with the
    reason; the alignment claim reads the attention of RNNsearch-50's first run, the one Figure 3
    draws. Reads only ``out``."""
    stats, lengths, groups = {}, None, seed_groups(out)
    for m in MODELS[:4]:
        ds = [read_json(run_dir(out, r) / "bleu_by_length.json") for r in groups[m]]
        stats[m], lengths = [np.array(d["stats_tok"]) for d in ds], np.array(ds[0]["src_len"])
    score = {m: float(np.mean([bleu.bleu_from_stats(s, True) for s in stats[m]])) for m in stats}
    samples = {m: seeded_scores(stats[m], n_samples, draw=m) for m in stats}
    low = {m: b for m in stats if (b := short_bleu(stats[m], lengths)) < FLOOR}
    paper = {k: float(v["bleu_all"]) for k, v in paper_table("table1").items()}
    rows = []

    def diff(a, b):
        return score[a] - score[b], bleu.interval(samples[a] - samples[b])

    def named(m):  # "RNNsearch-50 10.90 (3 seeds)"
        return f"{m} {score[m]:.2f}" + (f" ({len(stats[m])} seeds)" if len(stats[m]) > 1 else "")

    def ours(a, b, d):
        return f"{named(a)} vs {named(b)}, difference {difference(*d)}"

    def judged(better: list[str], others: list[str], ds) -> dict:
        pick = lambda ms: {m: low[m] for m in ms if m in low} or None  # noqa: E731
        v, why = verdict([iv for _, iv in ds], MARGIN, pick(better), pick(others))
        return {"verdict": v, "reason": why}

    # 1-2: Table 1, BLEU All, differences paired on the test sentences
    pairs = [("RNNsearch-30", "RNNencdec-30"), ("RNNsearch-50", "RNNencdec-50")]
    ds = [diff(a, b) for a, b in pairs]
    rows.append({
        "claim": "RNNsearch beats RNNencdec at both training lengths (Table 1)",
        "paper": "; ".join(f"{a} {paper[a]:.2f} vs {b} {paper[b]:.2f}" for a, b in pairs),
        "ours": "; ".join(ours(a, b, d) for (a, b), d in zip(pairs, ds, strict=True)),
        **judged(["RNNsearch-30", "RNNsearch-50"], ["RNNencdec-30", "RNNencdec-50"], ds),
    })  # fmt: skip
    d = diff("RNNsearch-30", "RNNencdec-50")
    rows.append({
        "claim": "RNNsearch-30 beats RNNencdec-50, which saw longer sentences (Table 1)",
        "paper": f"RNNsearch-30 {paper['RNNsearch-30']:.2f} vs RNNencdec-50 "
                 f"{paper['RNNencdec-50']:.2f}",
        "ours": ours("RNNsearch-30", "RNNencdec-50", d),
        **judged(["RNNsearch-30"], ["RNNencdec-50"], [d]),
    })  # fmt: skip

    # 3: Figure 2, long/short BLEU ratios
    ours, v, why = ratio_claim("RNNsearch-50", ["RNNencdec-30", "RNNencdec-50"], stats, lengths,
                               n_samples)  # fmt: skip
    rows.append({
        "claim": f"RNNencdec's BLEU falls as sentences get longer; RNNsearch-50 holds up on "
                 f"sentences of {LONG} words or more (Figure 2)",
        "paper": "Figure 2: both RNNencdec curves fall with length; RNNsearch-50's does not "
                 "fall, even past 50 words",
        "ours": ours, "verdict": v, "reason": why,
    })  # fmt: skip

    # 4: Figure 3, alignments of RNNsearch-50
    a = attention_summary(read_json(run_dir(out, "RNNsearch-50") / "attention.json"))
    n, peak, uniform, mono = a["sentences"], a["peak"], a["uniform"], a["monotonic"]
    back, local = a["moves_left"], a["local"]
    if not n:
        v, why = NOT_TESTABLE, "no translated sentence with attention weights"
    elif peak < PEAKED:
        v = NOT_TESTABLE
        why = (
            f"the attention is diffuse (largest weight {peak:.2f} < {PEAKED}): its "
            "heaviest source word says little"
        )
    elif mono >= MONOTONIC and local >= back - local:
        v = REPRODUCED
        why = f"peaked, {mono:.0%} ≥ {MONOTONIC:.0%} monotonic steps, most moves left local"
    else:
        v = NOT_REPRODUCED
        why = f"{mono:.0%} monotonic steps (< {MONOTONIC:.0%}) or mostly long moves left"
    rows.append({
        "claim": "The alignments are mostly monotonic, with local reorderings (Figure 3)",
        "paper": "Figure 3: weights concentrated near the diagonal; e.g. European Economic "
                 "Area → zone économique européenne reversed",
        "ours": f"{n} sentences: mean largest weight {peak:.2f} (uniform: {uniform:.2f}); "
                f"{mono:.0%} of the steps monotonic; {back} moves left, {local} of at "
                f"most {LOCAL} words",
        "verdict": v,
        "reason": why,
    })  # fmt: skip
    return rows
