"""The claims that the comparison of the models before and after the paper tests (:func:`claims`),
judged by the rules of :mod:`nmt_experiments.core.claims` (intervals over seeds and test sentences,
the learning floor) on the runs of :mod:`nmt_experiments.comparison.runs`: Bahdanau et al.'s Table 1
and Figure 2, Sutskever et al.'s reversed source and Vaswani et al.'s Transformer."""

from __future__ import annotations

from pathlib import Path

from ..core.claims import LONG, SHORT
from ..core.judge import Judge
from ..core.results import paper_table
from .runs import ATTENDING, RESULTS, config, models

#: Sutskever et al. (2014), Table 1: one LSTM ensemble member on the source as it is and reversed
#: (test perplexity 5.8 → 4.7, BLEU 25.9 → 30.6, §3.3).
SUTSKEVER_REVERSAL = "test BLEU 25.9 → 30.6 and perplexity 5.8 → 4.7 (§3.3)"


#: Vaswani et al. (2017), Table 2: EN-FR newstest2014.
VASWANI_CLAIM = (
    "EN-FR newstest2014 (Table 2): Transformer (big) 41.8 BLEU, above every earlier single model "
    "(the best, MoE, 40.56) and ensemble (ConvS2S, 41.29), at under a quarter of the training "
    "cost of the best; Transformer (base) 38.1"
)


def claims(
    out: Path = RESULTS,
    n_samples: int = 1000,
    short: int = SHORT,
    long: int = LONG,
    part: str | None = None,
) -> list[dict]:
    """The claims the comparison tests, at equal updates, with our numbers, 95% intervals over
    seeds and test sentences and a verdict by the rules of :class:`nmt_experiments.core.judge.Judge`
    (a claim is decided only between models above the learning floor):

    1. Bahdanau et al.'s Table 1: RNNsearch-50 beats RNNencdec-50 (by ``MARGIN`` BLEU);
    2. per attention model, Bahdanau et al.'s Figure 2 in its two parts: (a) its BLEU on sentences
       of ``LONG`` words or more, relative to BLEU on sentences of fewer than ``SHORT``, shows no
       fall; (b) that ratio is higher than the models' without attention;
    3. Sutskever et al.'s: reversing the source helps an LSTM encoder-decoder (by ``MARGIN``);
    4. Vaswani et al.'s: the Transformer beats the recurrent attention models (by ``MARGIN``).

    ``short`` and ``long``: Figure 2's lengths, for a testbed whose sentences are short (the
    learning floor is judged on sentences of fewer than ``SHORT`` words all the same); ``part``:
    the claims on that part of the test set alone (Multi30k's ``multi30k.test_2016_flickr``)."""
    found = models(out)
    judge = Judge.of(out, found, n_samples, part=part, short=short, long=long)
    model = {m: config(out, runs[0])["model"] for m, runs in found.items()}
    attn = [m for m in found if model[m]["arch"] in ATTENDING]
    return [
        *_table1_claim(judge, found),
        *_figure2_claims(judge, found, attn, long),
        *_reversal_claim(judge, model),
        *_transformer_claim(judge, model, attn),
    ]


def _table1_claim(judge: Judge, found: dict) -> list[dict]:
    """Bahdanau et al.'s Table 1, where both models were trained."""
    if "RNNsearch-50" not in found or "RNNencdec-50" not in found:
        return []
    paper_t1 = {k: float(v["bleu_all"]) for k, v in paper_table("table1").items()}
    return [
        judge.beats(
            "RNNsearch-50 beats RNNencdec-50 (Bahdanau et al., Table 1)",
            f"RNNsearch-50 {paper_t1['RNNsearch-50']:.2f} vs RNNencdec-50 "
            f"{paper_t1['RNNencdec-50']:.2f}",
            [("RNNsearch-50", "RNNencdec-50")],
        )
    ]


def _figure2_claims(judge: Judge, found: dict, attn: list[str], long: int) -> list[dict]:
    """Bahdanau et al.'s Figure 2 in its two parts, for each attention model of ``attn``."""
    plain = [m for m in found if m not in attn]
    rows = []
    for m in attn:
        rows.append(
            judge.holds_up(
                f"{m} shows no deterioration on sentences of {long} words or more (Bahdanau et "
                "al., Figure 2)",
                "RNNsearch-50's curve does not fall past 50 words",
                m,
            )
        )
        rows.append(
            judge.holds_up_better(
                f"{m} holds up on long sentences better than the models without attention "
                "(Bahdanau et al., Figure 2)",
                "RNNsearch-50's curve does not fall; RNNencdec's do",
                m,
                plain,
            )
        )
    return rows


def _reversal_claim(judge: Judge, model: dict[str, dict]) -> list[dict]:
    """Sutskever et al.'s, where an LSTM encoder-decoder was trained both ways (``model``: each
    model's config)."""
    lstm = [m for m in model if model[m]["arch"] == "Seq2seq"]
    back = [m for m in lstm if model[m].get("reverse_source", False)]
    fwd = [m for m in lstm if m not in back]
    if not (fwd and back):
        return []
    return [
        judge.beats(
            "Reversing the source helps an LSTM encoder-decoder without attention "
            "(Sutskever et al.)",
            SUTSKEVER_REVERSAL,
            [(back[0], fwd[0])],
        )
    ]


def _transformer_claim(judge: Judge, model: dict[str, dict], attn: list[str]) -> list[dict]:
    """Vaswani et al.'s, where a Transformer and a recurrent attention model were trained."""
    tf = [m for m in attn if model[m]["arch"] == "Transformer"]
    recurrent = [m for m in attn if m not in tf]
    if not (tf and recurrent):
        return []
    return [
        judge.beats(
            "The Transformer beats the recurrent attention models (Vaswani et al.)",
            VASWANI_CLAIM,
            [(tf[0], m) for m in recurrent],
        )
    ]
