"""nmt_lib.data.heldout: a test set drawn from a training corpus's unread lines."""

import json
import lzma

import pytest

from nmt_lib.data.corpus import DataError
from nmt_lib.data.heldout import Draw, check_unread, draw, written


def corpus_files(tmp_path, n=200, empty=(), compress=False):
    src = [f"source {i}" if i not in empty else "" for i in range(n)]
    trg = [f"cible {i}" if i not in empty else "   " for i in range(n)]
    paths = []
    for lang, lines in (("en", src), ("fr", trg)):
        text = "".join(x + "\n" for x in lines).encode()
        p = tmp_path / (f"c.{lang}.xz" if compress else f"c.{lang}")
        p.write_bytes(lzma.compress(text) if compress else text)
        paths.append(p)
    return paths


def test_the_draw_is_a_fixed_sample_of_the_lines_from_start_with_text(tmp_path):
    src, trg = corpus_files(tmp_path, empty={150, 151}, compress=True)
    d = Draw("c", start=100, size=20, seed=7)
    pairs = draw(src, trg, d)
    lines = [i for i, _, _ in pairs]
    assert len(pairs) == 20 and lines == sorted(lines) and len(set(lines)) == 20
    assert min(lines) >= 100 and not {150, 151} & set(lines)
    assert all(a == f"source {i}" and b == f"cible {i}" for i, a, b in pairs)
    assert draw(src, trg, d) == pairs  # the same seed, the same pairs
    other = [i for i, _, _ in draw(src, trg, Draw("c", 100, 20, seed=8))]
    assert other != lines  # another seed, another sample
    # every line of the range is as likely: over many seeds, early and late lines both drawn
    seen = {i for s in range(60) for i, _, _ in draw(src, trg, Draw("c", 100, 20, s))}
    assert len(seen) == 98  # 100 lines from 100 on, two of them empty


def test_too_few_lines_or_misaligned_sides_are_one_clear_error(tmp_path):
    src, trg = corpus_files(tmp_path, n=50)
    with pytest.raises(DataError, match=r"c\.en: 10 pairs with text from line 40 on; .* needs 20"):
        draw(src, trg, Draw("c", 40, 20, 1))
    trg.write_text("".join(f"cible {i}\n" for i in range(30)), encoding="utf-8")
    with pytest.raises(DataError, match=r"c\.fr ends at line 30, before .*c\.en"):
        draw(src, trg, Draw("c", 0, 5, 1))


def test_the_set_is_written_once_with_its_record_and_drawn_again_from_other_files(tmp_path):
    src, trg = corpus_files(tmp_path)
    cache = tmp_path / "cache" / "heldout"
    d = Draw("c", 120, 10, 3)
    a, b = written("held", src, trg, d, ("en", "fr"), cache)
    assert a == cache / "held.en" and b == cache / "held.fr"
    rec = json.loads((cache / "held.json").read_text(encoding="utf-8"))
    assert rec["draw"] == {"source": "c", "start": 120, "size": 10, "seed": 3}
    assert [f"source {i}" for i in rec["lines"]] == a.read_text(encoding="utf-8").splitlines()
    assert [f"cible {i}" for i in rec["lines"]] == b.read_text(encoding="utf-8").splitlines()
    stamp = a.stat().st_mtime_ns
    written("held", src, trg, d, ("en", "fr"), cache)
    assert a.stat().st_mtime_ns == stamp  # not drawn again
    src.write_text("".join(f"autre {i}\n" for i in range(200)), encoding="utf-8")
    written("held", src, trg, d, ("en", "fr"), cache)
    assert a.read_text(encoding="utf-8").startswith("autre ")  # the training file changed


def test_training_that_reads_past_the_start_of_a_held_out_set_is_refused():
    held = {"europarl-v7.heldout": Draw("europarl-v7.fr-en", 1_000_000, 3003, 2014)}
    check_unread(held, {"europarl-v7.fr-en": 1_000_000, "newstest2009": 2525})
    check_unread(held, {"newstest2009": 2525})
    with pytest.raises(DataError, match=r"reads 1,000,001 lines of europarl-v7\.fr-en, past line"):
        check_unread(held, {"europarl-v7.fr-en": 1_000_001})
