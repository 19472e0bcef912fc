"""BLEU wrappers (nmt_lib.bleu) against sacrebleu called directly (PAPER.md §4, A10, A11)."""

from __future__ import annotations

import numpy as np
import pytest
import sacrebleu

from nmt_lib import bleu

# a small hand-made corpus: Moses-tokenized French (``l' homme``) and its detokenized form
TOK_HYP = [
    "l' homme a dit : « bonjour » .",
    "le chat est sur le tapis .",
    "il fait très beau aujourd' hui , dit-il .",
    "la maison bleue est grande .",
    "nous avons mangé une pomme verte hier soir .",
]
TOK_REF = [
    "l' homme a dit « bonjour » .",
    "le chat est assis sur le tapis .",
    "il fait beau aujourd' hui , dit-il .",
    "la grande maison est bleue .",
    "hier soir , nous avons mangé une pomme verte .",
]
DETOK_HYP = [
    "L'homme a dit : « bonjour ».",
    "Le chat est sur le tapis.",
    "Il fait très beau aujourd'hui, dit-il.",
    "La maison bleue est grande.",
    "Nous avons mangé une pomme verte hier soir.",
]
DETOK_REF = [
    "L'homme a dit « bonjour ».",
    "Le chat est assis sur le tapis.",
    "Il fait beau aujourd'hui, dit-il.",
    "La grande maison est bleue.",
    "Hier soir, nous avons mangé une pomme verte.",
]


def test_wrappers_equal_sacrebleu_directly():
    tok = bleu.bleu_tok(TOK_HYP, TOK_REF)
    ref = sacrebleu.corpus_bleu(
        TOK_HYP, [TOK_REF], tokenize="none", force=True, smooth_method="none"
    )
    assert tok.score == pytest.approx(ref.score, abs=1e-12)
    assert tok.counts == list(ref.counts) and tok.totals == list(ref.totals)
    assert "tok:none" in tok.signature and "smooth:none" in tok.signature
    assert "case:mixed" in tok.signature and "nrefs:1" in tok.signature

    detok = bleu.bleu_detok(DETOK_HYP, DETOK_REF)
    ref = sacrebleu.corpus_bleu(DETOK_HYP, [DETOK_REF])
    assert detok.score == pytest.approx(ref.score, abs=1e-12)
    metric = sacrebleu.BLEU()
    metric.corpus_score(DETOK_HYP, [DETOK_REF])
    assert detok.signature == str(metric.get_signature())
    assert detok.n == 5 and 0 < detok.score < 100


def test_tokenized_differs_from_detokenized():
    tok = bleu.bleu_tok(TOK_HYP, TOK_REF)
    detok = bleu.bleu_detok(DETOK_HYP, DETOK_REF)
    # Moses splits "l'homme" after the apostrophe; 13a does not: different n-gram counts and scores
    assert tok.sys_len != detok.sys_len
    assert tok.score != pytest.approx(detok.score, abs=0.1)
    # case matters (cased BLEU): lowercasing the hypotheses changes the tokenized score
    lower = bleu.bleu_tok([h.upper() for h in TOK_HYP], TOK_REF)
    assert lower.score < tok.score
    # multi-bleu.perl has no smoothing: no 4-gram match gives 0, sacrebleu's default does not
    hyp, ref = ["a b c d"], ["a b c e"]
    assert bleu.bleu_tok(hyp, ref).score == 0.0
    assert bleu.bleu_detok(hyp, ref).score > 0.0
    with pytest.raises(ValueError, match="hypotheses"):
        bleu.bleu_tok(TOK_HYP, TOK_REF[:2])


def test_bleu_from_sentence_stats_and_buckets():
    for tokenized, hyp, ref in ((True, TOK_HYP, TOK_REF), (False, DETOK_HYP, DETOK_REF)):
        stats = bleu.sentence_stats(hyp, ref, tokenized)
        assert stats.shape == (5, 10)
        whole = bleu.corpus_bleu(hyp, ref, tokenized).score
        assert bleu.bleu_from_stats(stats, tokenized) == pytest.approx(whole, abs=1e-9)
        # one bucket holding every sentence gives the corpus BLEU
        (only,) = bleu.bleu_by_length(stats, [3, 4, 5, 6, 7], tokenized, edges=(0,))
        assert only["n"] == 5 and only["bleu"] == pytest.approx(whole, abs=1e-9)
        # each bucket equals sacrebleu on that subset alone
        lengths = [5, 12, 15, 64, 3]
        buckets = bleu.bleu_by_length(stats, lengths, tokenized)
        assert [b["n"] for b in buckets] == [2, 2, 0, 0, 0, 0, 1]
        assert buckets[0]["lo"] == 0 and buckets[0]["hi"] == 9 and buckets[-1]["hi"] is None
        assert buckets[2]["bleu"] is None
        sub = [0, 4]
        direct = bleu.corpus_bleu([hyp[i] for i in sub], [ref[i] for i in sub], tokenized).score
        assert buckets[0]["bleu"] == pytest.approx(direct, abs=1e-9)
    assert [bleu.bucket_of(n) for n in (0, 9, 10, 59, 60, 200)] == [0, 0, 1, 5, 6, 6]


def test_paired_bootstrap():
    worse = [" ".join(h.split()[::-1]) for h in TOK_HYP]  # scrambled word order
    refs = TOK_REF * 8
    res = bleu.paired_bootstrap(
        {"base": worse * 8, "good": TOK_HYP * 8, "same": worse * 8}, refs, n_samples=200
    )
    s = res["systems"]
    assert list(s) == ["base", "good", "same"]
    assert s["base"]["p_value"] is None
    assert s["good"]["bleu"] == pytest.approx(bleu.bleu_tok(TOK_HYP * 8, refs).score)
    assert s["good"]["p_value"] < 0.05
    assert s["same"]["bleu"] == s["base"]["bleu"]
    for r in s.values():
        lo, hi = r["interval"]
        assert lo <= r["mean"] <= hi and np.isclose(hi - lo, 2 * r["ci"])
    assert "bs:200" in res["signature"]


def test_bootstrap_from_stats_draws_sacrebleus_resamples():
    """From stored statistics alone: the same resamples, hence the same mean and interval, as
    sacrebleu's paired bootstrap on the text; a subset scores only its own sentences."""
    worse = [" ".join(h.split()[::-1]) for h in TOK_HYP]
    refs = TOK_REF * 8
    systems = {"base": worse * 8, "good": TOK_HYP * 8}
    res = bleu.paired_bootstrap(systems, refs, n_samples=200)["systems"]
    for name, hyps in systems.items():
        scores = bleu.bootstrap_scores(bleu.sentence_stats(hyps, refs, True), n_samples=200)
        lo, hi = bleu.interval(scores)
        assert scores.mean() == pytest.approx(res[name]["mean"], abs=1e-6)  # sacrebleu: float32
        assert (hi - lo) / 2 == pytest.approx(res[name]["ci"], abs=1e-6)
    stats = bleu.sentence_stats(systems["good"], refs, True)
    first = np.arange(len(refs)) < len(TOK_HYP)
    sub = bleu.bootstrap_scores(stats, n_samples=50, subset=first)
    whole = bleu.bootstrap_scores(stats[first], n_samples=50)
    assert not np.allclose(sub, whole)  # other resamples: the draw is over all N sentences
    assert (
        bleu.interval(sub)[0] <= bleu.bleu_from_stats(stats[first], True) <= bleu.interval(sub)[1]
    )
    assert bleu.interval(np.arange(40.0)) == [1.0, 38.0]
