"""Alignments measured (Figure 3's claim, judged in :mod:`nmt_experiments.core.claims`): how sharp an
attention matrix is, how closely it follows the diagonal and how often it steps back, and which
sentences are flagged because their weights say little (a translation mostly ``<unk>``, weights near
uniform). Reads nothing; takes ``attention.json``'s records."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from nmt_lib.io import read_json

from .results import run_dir

#: Figure 3's claim in numbers: an alignment is "peaked" when a generated word puts PEAKED of its
#: weight on one source word on average; it "follows the diagonal" when the rank correlation
#: between a generated word's position and the position of its heaviest source word is DIAGONAL
#: or more (the mean over sentences: attention stuck on one source word has none); "mostly
#: monotonic" when MONOTONIC of the steps from one generated word to the next do not move the
#: heaviest source word left, and a reordering is "local" when it moves it left by at most LOCAL
#: words. A sentence whose translation is more than UNK_SHARE ``<unk>``, or whose largest weights
#: are on average less than NEAR_UNIFORM times the uniform weight, is flagged and left out.
PEAKED, DIAGONAL, MONOTONIC, LOCAL = 0.5, 0.7, 0.7, 3
UNK_SHARE, NEAR_UNIFORM = 0.5, 2.0


def rank_correlation(x, y) -> float:
    """Spearman's rank correlation of ``x`` and ``y`` (ties get their mean rank); 0 where either
    is constant (attention stuck on one source word follows no diagonal)."""

    def ranks(v):
        v = np.asarray(v, dtype=np.float64)
        _, inverse, counts = np.unique(v, return_inverse=True, return_counts=True)
        mean_rank = np.cumsum(counts) - (counts + 1) / 2  # each distinct value's mean 0-based rank
        return mean_rank[inverse]

    rx, ry = ranks(x), ranks(y)
    if len(rx) < 2 or rx.std() == 0 or ry.std() == 0:
        return 0.0
    return float(np.corrcoef(rx, ry)[0, 1])


def alignment_stats(alpha, words: Sequence[str] = ()) -> dict:
    """Sharpness, diagonal and monotonicity of one attention matrix ``alpha [generated words,
    source words]`` (``words``: the generated words, EOS left out): mean largest weight, the uniform
    weight, the rank correlation of a generated word's position with its heaviest source word's
    (:func:`rank_correlation`), the number of steps from one generated word to the next, how many
    of them do not move the heaviest source word left, the sizes of the moves left, the share of
    ``<unk>`` among the words, and why the sentence is flagged (mostly ``<unk>``, near uniform)."""
    a = np.asarray(alpha, dtype=np.float64)
    heaviest = a.argmax(1)
    steps = np.diff(heaviest)
    peak, uniform = float(a.max(1).mean()), 1 / a.shape[1]
    unk = sum(w == "<unk>" for w in words) / max(len(words), 1)
    flags = ([f"{unk:.0%} of its words <unk>"] if unk > UNK_SHARE else []) + (
        [f"largest weight {peak:.2f}, near the uniform {uniform:.2f}"]
        if peak < NEAR_UNIFORM * uniform
        else []
    )
    return {
        "words": len(a),
        "peak": peak,
        "uniform": uniform,
        "diagonal": rank_correlation(np.arange(len(a)), heaviest),
        "steps": len(steps),
        "monotonic_steps": int((steps >= 0).sum()),
        "moves_left": [int(-d) for d in steps if d < 0],
        "unk": unk,
        "flags": flags,
    }


def without_eos(record: dict) -> tuple[list, list[str]]:
    """An ``attention.json`` record's weights and generated words without the EOS row of a
    finished translation (it aligns the end, not a word)."""
    words, alpha = record["hyp_tokens"], record["alpha"]
    if words[-1:] == ["</s>"]:
        return alpha[:-1], words[:-1]
    return alpha, words


def attention_summary(records: list[dict]) -> dict:
    """The alignments of ``attention.json``'s records, summed up over the sentences that are not
    flagged (:func:`alignment_stats`; EOS rows left out, :func:`without_eos`): how many sentences
    have them, the flagged ones (``[(index in records, why)]``), the mean largest weight and uniform
    weight, the mean rank correlation with the diagonal, the share of monotonic steps, and how many
    moves left there are and how many of them are local (at most ``LOCAL`` words)."""
    st, flagged = [], []
    for i, r in enumerate(records):
        if not r.get("alpha"):
            continue
        alpha, words = without_eos(r)
        if not len(alpha):
            continue
        s = alignment_stats(alpha, words)
        if s["flags"]:
            flagged.append((i, "; ".join(s["flags"])))
        else:
            st.append(s)
    back = [b for s in st for b in s["moves_left"]]
    mean = lambda k: float(np.mean([s[k] for s in st])) if st else 0.0  # noqa: E731
    return {
        "sentences": len(st),
        "flagged": flagged,
        "peak": mean("peak"),
        "uniform": mean("uniform"),
        "diagonal": mean("diagonal"),
        "monotonic": sum(s["monotonic_steps"] for s in st) / max(sum(s["steps"] for s in st), 1),
        "moves_left": len(back),
        "local": sum(b <= LOCAL for b in back),
    }


def attention_rows(out: Path, runs: Mapping[str, str]) -> list[dict]:
    """One row per model of ``runs`` (``{model: its run}``, attention models): the alignments of
    every sentence whose attention the run stored (``attention.json`` in ``out``), summed up by
    :func:`attention_summary` (the flagged sentences left out and counted)."""
    rows = []
    for model, run in runs.items():
        a = attention_summary(read_json(run_dir(out, run) / "attention.json"))
        rows.append(
            {
                "model": model,
                "sentences": a["sentences"],
                "mean largest weight": round(a["peak"], 2),
                "uniform weight": round(a["uniform"], 2),
                "diagonal (rank correlation)": round(a["diagonal"], 2),
                "monotonic steps (%)": round(100 * a["monotonic"]),
                "flagged": len(a["flagged"]),
                "moves left, local": f"{a['moves_left']}, {a['local']}",
            }
        )
    return rows
