"""The paper's claims about its results, judged on ours (:func:`claims`): each with our numbers,
95% intervals and a verdict by the rules of :mod:`nmt_experiments.core.claims`; the claims table's note
(:func:`note`), and the claim left out (:data:`MOSES_CLAIM`). Reads only a results directory
(``results/<profile>/``)."""

from __future__ import annotations

from pathlib import Path

from nmt_lib.io import naming, read_json
from nmt_lib.paper import MODELS

from ..core.claims import FLOOR, LONG, MARGIN, RATIO_MARGIN, SHORT
from ..core.judge import Judge
from ..core.markdown import write_table
from ..core.results import paper_table, run_dir, seed_groups

#: The paper's claim that the book does not judge, and why (Table 1's No-UNK column).
MOSES_CLAIM = (
    "The paper's claim that RNNsearch-50* is as good as the phrase-based Moses on the sentences "
    "without unknown words (No UNK: 36.15 against 35.63) is not judged: no phrase-based system is "
    "trained on this profile's data, and Moses's score comes from its own, far larger training "
    "set, so there is nothing to compare RNNsearch-50* with on one footing."
)


def claims(out: Path, n_samples: int = 1000, view: str | None = None) -> list[dict]:
    """The paper's claims about its results, with our numbers (a model trained with several
    seeds: the mean over them), 95% intervals over test sentences and seeds
    (:func:`~nmt_experiments.core.claims.seeded_scores`; one seed: the paired test-set bootstrap) and a
    verdict by the rules of :class:`~nmt_experiments.core.judge.Judge`, with the reason; Figure 2's
    claim in its two parts; the alignment claim reads the attention of RNNsearch-50's first run,
    the one Figure 3 draws. (The Moses claim is not judged: :data:`MOSES_CLAIM`.) ``view``: the
    claims on that test set of ``data.views`` instead, the alignments aside (Figure 3's sentences
    are the test set's). Reads only ``out``."""
    groups = seed_groups(out)
    judge = Judge.of(out, {m: groups[m] for m in MODELS[:4]}, n_samples, view)
    paper = {k: float(v["bleu_all"]) for k, v in paper_table("table1").items()}
    vs = lambda a, b: f"{a} {paper[a]:.2f} vs {b} {paper[b]:.2f}"  # noqa: E731
    pairs = [("RNNsearch-30", "RNNencdec-30"), ("RNNsearch-50", "RNNencdec-50")]
    first = groups["RNNsearch-50"][0]
    rows = [
        judge.beats(
            "RNNsearch beats RNNencdec at both training lengths (Table 1)",
            "; ".join(vs(a, b) for a, b in pairs),
            pairs,
        ),
        judge.beats(
            "RNNsearch-30 beats RNNencdec-50, which saw longer sentences (Table 1)",
            vs("RNNsearch-30", "RNNencdec-50"),
            [("RNNsearch-30", "RNNencdec-50")],
        ),
        judge.holds_up(
            f"RNNsearch-50 shows no deterioration on sentences of {LONG} words or more (Figure 2)",
            "Figure 2: RNNsearch-50's curve does not fall, even past 50 words",
            "RNNsearch-50",
        ),
        judge.holds_up_better(
            "RNNencdec's BLEU falls with length where RNNsearch-50's holds up (Figure 2)",
            "Figure 2: both RNNencdec curves fall with length; RNNsearch-50's does not",
            "RNNsearch-50",
            ["RNNencdec-30", "RNNencdec-50"],
        ),
    ]
    if view:
        return rows
    return [
        *rows,
        judge.aligns(
            "The alignments follow the diagonal, mostly monotonic, with local "
            "reorderings (Figure 3)",
            "Figure 3: weights concentrated near the diagonal; e.g. European Economic "
            "Area → zone économique européenne reversed",
            "RNNsearch-50",
            read_json(run_dir(out, first) / "attention.json"),
            "RNNsearch-50 ("
            + ("its first seed" if first == "RNNsearch-50" else first)
            + ", Figure 3's model)",
        ),
    ]


def note(
    out: Path, profile: str | None = None, view: str | None = None, groups: dict | None = None
) -> str:
    """The claims table's note: the profile (``profile``, else the results directory's name) and
    the test set (``view``: one of ``data.views``), the intervals, the margins, the floor, and the
    claim left out. ``groups``: the runs judged, ``{model: its runs}`` (default: the manifest's)."""
    seeded = any(len(runs) > 1 for runs in (groups or seed_groups(out)).values())
    on = f", on the test set {view} (a second view; newstest2014 is the paper's)" if view else ""
    return (
        f"Profile `{profile or out.name}`{on}. 95% intervals: paired bootstrap, 1000 resamples of the test set"
        f"{' and of the seeds of a model that has several' if seeded else ''}, tokenized BLEU. "
        f"Margin: {MARGIN:g} BLEU; in the ratio, {RATIO_MARGIN:g}. Learning floor: {FLOOR:g} "
        f"BLEU on sentences of fewer than {SHORT} words. Paper: results/paper/table1.csv and "
        f"Figures 2-3. {MOSES_CLAIM}"
    )


def write(out: Path, profile: str, view: str | None = None) -> Path:
    """``claims.csv`` and ``claims.md`` of ``out`` (``view``: of that test set, into
    ``views/<view>/``); the directory they are in."""
    to = out / "views" / view if view else out
    with naming(to):
        to.mkdir(parents=True, exist_ok=True)
    write_table(to, "claims", claims(out, view=view), note(out, profile, view))
    return to
