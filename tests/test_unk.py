"""``<unk>`` replaced through the alignment (nmt_lib.unk): the source word of largest attention
weight, read by teacher forcing, is the one the search attended to most when it wrote the word."""

from __future__ import annotations

import torch

from nmt_lib.config import SearchConfig, model_config
from nmt_lib.data.vocab import EOS, UNK
from nmt_lib.decoding import decode
from nmt_lib.likelihood import alignments
from nmt_lib.models import build_model
from nmt_lib.unk import dictionary, replace, through


def test_each_unk_takes_the_source_word_it_attends_to_most():
    src = ["Mr", "Schulz", "said", "."]
    words = ["M.", "<unk>", "a", "<unk>", "."]
    assert replace(words, src, [0, 1, 2, 4, 3]) == ["M.", "Schulz", "a", "<unk>", "."]
    assert replace(["le", "chat"], src, [0, 1]) == ["le", "chat"]  # nothing to replace


def test_the_dictionary_maps_a_copied_word_to_its_likeliest_translation_outside_the_shortlist():
    """Dice's coefficient over training pairs; a word of the shortlist is never the answer (the
    model would have written it), nor a pair seen fewer than ``min_pairs`` times or below
    ``min_dice``; equal coefficients: more pairs first, then code-point order."""
    pairs = [
        ("Mubarak said .".split(), "Moubarak a dit .".split()),
        ("Mubarak left".split(), "Moubarak est parti".split()),
        ("Mubarak and Vilvoorde".split(), "Moubarak et Vilvoorde".split()),
        ("Vilvoorde".split(), "Vilvoorde".split()),
        ("pony".split(), "poney".split()),
        ("candy .".split(), "bonbon Voldemort .".split()),
        ("candy".split(), "bonbon".split()),
        ("Kim".split(), "Kim Zed".split()),
        ("Kim".split(), "Kim Zed".split()),
    ]
    shortlist = {"a", "dit", ".", "est", "parti", "et"}
    table = dictionary(pairs, ["Mubarak", "pony", "candy", "Kim", "absent"], shortlist)
    assert table == {"Mubarak": "Moubarak", "candy": "bonbon", "Kim": "Kim"}  # pony: one pair
    assert dictionary(pairs, ["pony"], shortlist, min_pairs=1) == {"pony": "poney"}
    without = shortlist | {"Moubarak"}  # then Vilvoorde: one pair in common, Dice 2 * 1 / (3 + 2)
    assert dictionary(pairs, ["Mubarak"], without) == {}
    assert dictionary(pairs, ["Mubarak"], without, min_pairs=1) == {"Mubarak": "Vilvoorde"}
    assert dictionary(pairs, ["Mubarak"], without, min_pairs=1, min_dice=0.41) == {}


def test_through_the_dictionary_only_words_that_replaced_an_unk():
    before = ["<unk>", "a", "dit", "<unk>", "<unk>"]
    after = ["Mubarak", "a", "dit", "Kim", "<unk>"]  # the last attended to the end of sentence
    table = {"Mubarak": "Moubarak", "a": "à"}
    assert through(before, after, table) == ["Moubarak", "a", "dit", "Kim", "<unk>"]


def _model(arch: str, seed: int = 3):
    torch.manual_seed(seed)
    cfg = model_config(
        arch=arch,
        src_vocab=30,
        trg_vocab=30,
        m=8,
        n=10,
        n_align=10,
        l=6,
        output_rank=None,
        init="fanin",
    )
    return build_model(cfg).eval()


def test_teacher_forced_alignments_are_the_searchs():
    model = _model("RNNsearch")
    g = torch.Generator().manual_seed(0)
    xs = [[*torch.randint(3, 30, (n,), generator=g).tolist(), EOS] for n in (3, 7, 5, 9, 4)]
    hyps = decode(model, xs, SearchConfig(beam=4, batch_size=2), return_alpha=True)
    align = alignments(model, xs, [h.tokens for h in hyps], batch_size=3)
    for h, a in zip(hyps, align, strict=True):
        assert a == h.alpha.argmax(-1).tolist()
        assert len(a) == len(h.tokens)


def test_a_model_without_attention_has_no_alignment():
    model = _model("RNNencdec")
    assert alignments(model, [[4, 5, EOS]], [[6, UNK, EOS]]) is None
