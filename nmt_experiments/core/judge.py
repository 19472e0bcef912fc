"""The judge that applies the rules of :mod:`nmt_experiments.core.claims` to a study's results
(:class:`Judge`): the paper's claims (:mod:`nmt_experiments.replicate.paper_claims`) and those of the
comparison of the models before and after the paper (:mod:`nmt_experiments.comparison.verdicts`)
share it. Reads only a results directory (``results/<profile>/``). Figure 3's claim is judged by the
diagonal of the alignments (:func:`nmt_experiments.core.alignment.attention_summary`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from nmt_lib import bleu
from nmt_lib.io import read_json

from .alignment import (
    DIAGONAL,
    LOCAL,
    MONOTONIC,
    PEAKED,
    attention_summary,
)
from .claims import (
    FLOOR,
    LONG,
    MARGIN,
    NOT_REPRODUCED,
    NOT_TESTABLE,
    RATIO_MARGIN,
    REPRODUCED,
    SHORT,
    below_floor,
    difference,
    floor_text,
    holds_verdict,
    seeded_scores,
    short_bleu,
    verdict,
)
from .results import scored_dir


class Judge:
    """The claims of one study, judged by one set of rules: each model's per-sentence statistics
    (``stats``: ``{model: [stats of each seed, [N, 10]]}``), the source lengths, their scores (the
    mean over seeds), their resamples (:func:`seeded_scores`) and the models below the floor. Each
    method returns one row of a claims table: ``claim``, ``paper``, ``ours``, ``verdict``,
    ``reason`` and ``observation`` (what the numbers show outside the verdict, or empty)."""

    def __init__(
        self,
        stats: dict[str, list[np.ndarray]],
        lengths,
        n_samples: int = 1000,
        short: int = SHORT,
        long: int = LONG,
    ):
        self.stats, self.lengths, self.n = stats, np.asarray(lengths), n_samples
        # Figure 2's lengths (a testbed of short sentences: less)
        self.short, self.long = short, long
        self.score = {
            m: float(np.mean([bleu.bleu_from_stats(s, True) for s in ss]))
            for m, ss in stats.items()
        }
        self.samples = {m: seeded_scores(ss, n_samples, draw=m) for m, ss in stats.items()}
        self.low = {m: b for m, ss in stats.items() if (b := short_bleu(ss, lengths)) < FLOOR}

    @classmethod
    def of(
        cls,
        out: Path,
        groups: dict[str, list[str]],
        n_samples: int = 1000,
        view: str | None = None,
        part: str | None = None,
        **lengths,
    ) -> Judge:
        """The judge of the runs ``groups`` (``{model: its runs, one per seed}``) in ``out``, on
        their test set or on the test set ``view`` (``data.views``: ``views/<view>/`` of each
        run), or on the sentences of its part ``part`` (a test set of several: Multi30k's two
        Flickr sets); ``lengths``: ``short`` and ``long``, as the constructor takes them."""
        stats, src_len = {}, None
        for m, runs in groups.items():
            ds = [read_json(scored_dir(out, r, view) / "bleu_by_length.json") for r in runs]
            keep = slice(None) if part is None else np.array(ds[0]["parts"]) == part
            stats[m] = [np.array(d["stats_tok"])[keep] for d in ds]
            src_len = np.array(ds[0]["src_len"])[keep]
        return cls(stats, src_len, n_samples, **lengths)

    def below(self, models: Sequence[str]) -> dict[str, float]:
        """The models of ``models`` below the learning floor, with their short-sentence BLEU."""
        return {m: self.low[m] for m in models if m in self.low}

    def named(self, m: str) -> str:
        """``"RNNsearch-50 10.90 (3 seeds)"``."""
        k = len(self.stats[m])
        return f"{m} {self.score[m]:.2f}" + (f" ({k} seeds)" if k > 1 else " (1 seed)")

    def row(self, claim, paper, ours, v, why, observation="") -> dict:
        return {
            "claim": claim,
            "paper": paper,
            "ours": ours,
            "verdict": v,
            "reason": why,
            "observation": observation,
        }

    def beats(self, claim: str, paper: str, pairs: list[tuple[str, str]]) -> dict:
        """``claim``: in each pair ``(better, other)``, ``better`` beats ``other`` by
        :data:`MARGIN` BLEU (paired differences over the test sentences and the seeds). Where a
        model below the floor takes part, the observation says which model leads at this budget."""
        ds = [
            (self.score[a] - self.score[b], bleu.interval(self.samples[a] - self.samples[b]))
            for a, b in pairs
        ]
        below = self.below([m for p in pairs for m in p])
        v, why = verdict([iv for _, iv in ds], MARGIN, below)
        seen = ""
        if below:
            ahead = [
                f"{a} {'leads' if iv[0] > MARGIN else 'does not lead'} {b} by more than "
                f"{MARGIN:g} BLEU"
                for (a, b), (_, iv) in zip(pairs, ds, strict=True)
            ]
            seen = (
                f"At this budget, outside the verdict: {'; '.join(ahead)}. That says which "
                "model learned faster, not which architecture is better."
            )
        ours = "; ".join(
            f"{self.named(a)} vs {self.named(b)}, difference {difference(*d)}"
            for (a, b), d in zip(pairs, ds, strict=True)
        )
        return self.row(claim, paper, ours, v, why, seen)

    def ratio(self, m: str) -> tuple[float, list[float], np.ndarray]:
        """``m``'s BLEU(>= LONG) / BLEU(< SHORT): the mean over its seeds' scores, its 95%
        interval and its resamples."""
        short, long_ = self.lengths < self.short, self.lengths >= self.long
        with np.errstate(divide="ignore", invalid="ignore"):
            samples = seeded_scores(self.stats[m], self.n, long_, m) / seeded_scores(
                self.stats[m], self.n, short, m
            )
        at = lambda sel: np.mean([bleu.bleu_from_stats(s[sel], True) for s in self.stats[m]])  # noqa: E731
        return float(at(long_) / max(at(short), 1e-9)), bleu.interval(samples), samples

    def ratios_text(self, models: Sequence[str]) -> str:
        n_long, lo, hi = int((self.lengths >= self.long).sum()), self.long, self.short
        parts = [
            f"{m} {p:.2f} [{lo:.2f}, {hi:.2f}]"
            for m in models
            for p, (lo, hi), _ in [self.ratio(m)]
        ]
        return (
            f"BLEU(≥{lo}) / BLEU(<{hi}): "
            + "; ".join(parts)
            + f" ({n_long} test sentences of ≥{lo} words)"
        )

    def _no_lengths_reason(self) -> str:
        return f"no test sentences of ≥{self.long} or of <{self.short} words"

    def _no_lengths(self) -> bool:
        return not (self.lengths >= self.long).any() or not (self.lengths < self.short).any()

    def holds_up(self, claim: str, paper: str, m: str) -> dict:
        """Figure 2's first part: ``m`` shows no deterioration on sentences of LONG words or
        more, its own ratio against 1 (:func:`holds_verdict`); testable when ``m`` is above the
        floor."""
        ours = self.ratios_text([m])
        if self._no_lengths():
            return self.row(claim, paper, ours, NOT_TESTABLE, self._no_lengths_reason())
        if below := self.below([m]):
            return self.row(claim, paper, ours, NOT_TESTABLE, below_floor(below))
        return self.row(claim, paper, ours, *holds_verdict(self.ratio(m)[1]))

    def holds_up_better(self, claim: str, paper: str, better: str, others: list[str]) -> dict:
        """Figure 2's second part: ``better``'s ratio is higher than each of ``others``' by
        :data:`RATIO_MARGIN`, judged against those of ``others`` above the floor; not testable
        when ``better`` is below it or none of ``others`` is above it."""
        ours = self.ratios_text([better, *others])
        if self._no_lengths():
            return self.row(claim, paper, ours, NOT_TESTABLE, self._no_lengths_reason())
        if below := self.below([better]):
            return self.row(claim, paper, ours, NOT_TESTABLE, below_floor(below))
        above = [m for m in others if m not in self.low]
        if not above:
            return self.row(
                claim,
                paper,
                ours,
                NOT_TESTABLE,
                f"no model to compare with is above the learning floor of {FLOOR:g} "
                f"BLEU: {floor_text(self.below(others))}",
            )
        r = self.ratio(better)[2]
        ivs = [bleu.interval(r - self.ratio(m)[2]) for m in above]
        v, why = verdict(ivs, RATIO_MARGIN, unit=" in the ratio")
        if len(above) < len(others):
            why += (
                f" (compared with {', '.join(above)}; left out, {below_floor(self.below(others))})"
            )
        return self.row(claim, paper, ours, v, why)

    def aligns(self, claim: str, paper: str, m: str, records: list[dict], who: str) -> dict:
        """Figure 3's claim on ``m``'s attention ``records`` (``who``: which run they are, for the
        table): peaked (:data:`PEAKED`), along the diagonal (:data:`DIAGONAL`), mostly monotonic
        with local moves left; flagged sentences are named and left out (:func:`attention_summary`)."""
        a = attention_summary(records)
        n, peak, diag, mono = a["sentences"], a["peak"], a["diagonal"], a["monotonic"]
        back, local = a["moves_left"], a["local"]
        flagged = "; ".join(f"{_panel(records, i)}: {why}" for i, why in a["flagged"])
        ours = (
            f"{who}, {n} sentences: mean largest weight {peak:.2f} (uniform: "
            f"{a['uniform']:.2f}); rank correlation with the diagonal {diag:.2f}; "
            f"{mono:.0%} of the steps monotonic; {back} moves left, {local} of at most "
            f"{LOCAL} words" + (f". Flagged and left out: {flagged}" if flagged else "")
        )
        if below := self.below([m]):
            return self.row(claim, paper, ours, NOT_TESTABLE, below_floor(below))
        if not n:
            return self.row(
                claim,
                paper,
                ours,
                NOT_TESTABLE,
                "no translated sentence with attention weights that is not flagged",
            )
        if peak < PEAKED:
            return self.row(
                claim,
                paper,
                ours,
                NOT_TESTABLE,
                f"the attention is diffuse "
                f"(largest weight {peak:.2f} < {PEAKED}): its heaviest source word "
                "says little",
            )
        if diag >= DIAGONAL and mono >= MONOTONIC and local >= back - local:
            return self.row(
                claim,
                paper,
                ours,
                REPRODUCED,
                f"peaked; along the diagonal "
                f"({diag:.2f} ≥ {DIAGONAL}); {mono:.0%} ≥ {MONOTONIC:.0%} monotonic "
                "steps; most moves left local",
            )
        return self.row(
            claim,
            paper,
            ours,
            NOT_REPRODUCED,
            f"rank correlation with the diagonal "
            f"{diag:.2f} (< {DIAGONAL}?), {mono:.0%} monotonic steps (< "
            f"{MONOTONIC:.0%}?) or mostly long moves left",
        )


def _panel(records: list[dict], i: int) -> str:
    """How a claims table names record ``i`` of ``attention.json``: Figure 3's panel (a)-(d) for
    the first four (the paper's sentences, ``nmt_lib.paper.FIG3_SOURCES``), else its test index."""
    if i < 4:
        return f"Figure 3 ({'abcd'[i]})"
    r = records[i]
    return f"test sentence {r['index'] + 1}" if r.get("index") is not None else f"sentence {i + 1}"
