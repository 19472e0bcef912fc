"""nmt_lib.data.vocab: shortlists with <pad>=0, <unk>=1, </s>=2, deterministic ties, readable files."""

import pytest

from nmt_lib.data.vocab import EOS, PAD, SPECIALS, UNK, Vocab

COUNTS = {"le": 9, "chat": 5, "b": 3, "a": 3, "c": 3, "rare": 1, "<unk>": 100}


def test_specials_then_words_by_count_ties_by_code_point():
    v = Vocab.build(COUNTS, n_words=4, n_sentences=7)
    assert (PAD, UNK, EOS) == (0, 1, 2)
    assert v.itos == [*SPECIALS, "le", "chat", "a", "b"]
    assert len(v) == 7
    # <unk> counts the tokens left out ("c" and "rare"); a literal "<unk>" word is never a word
    assert v.counts == [0, 3 + 1, 7, 9, 5, 3, 3]
    assert Vocab.build(dict(reversed(COUNTS.items())), 4).itos == v.itos


def test_encode_decode():
    v = Vocab.build(COUNTS, n_words=4)
    assert v.encode(["le", "chat", "rare"]) == [3, 4, UNK]
    assert v.encode(["le"], eos=True) == [3, EOS]
    assert v.decode([3, UNK, 4, EOS, 5, PAD]) == ["le", "<unk>", "chat"]
    assert v.decode([PAD, 3, PAD]) == ["le"]
    assert "chat" in v and "rare" not in v


def test_save_load_readable_round_trip(tmp_path):
    v = Vocab.build(COUNTS, n_words=5, n_sentences=2)
    v.save(tmp_path / "v.txt")
    lines = (tmp_path / "v.txt").read_text(encoding="utf-8").splitlines()
    assert lines[:4] == ["<pad>\t0", "<unk>\t1", "</s>\t2", "le\t9"]
    w = Vocab.load(tmp_path / "v.txt")
    assert w == v and w.counts == v.counts


def test_load_rejects_malformed_files(tmp_path):
    p = tmp_path / "v.txt"
    p.write_text("<pad>\t0\n<unk>\t0\n</s>\t0\nword without count\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"v\.txt:4: expected 'word<TAB>count'"):
        Vocab.load(p)
    p.write_text("<unk>\t0\n<pad>\t0\n</s>\t0\n", encoding="utf-8")
    with pytest.raises(ValueError, match="first rows must be"):
        Vocab.load(p)
