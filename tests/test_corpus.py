"""nmt_lib.data.corpus (the registry, locating files in the WMT'14 layout) and
nmt_lib.data.readers (streaming readers)."""

import gzip
import lzma

import pytest

from nmt_lib.config import DataConfig
from nmt_lib.data.corpus import CORPORA, DataError, get_corpus
from nmt_lib.data.files import find_plain, locate
from nmt_lib.data.fixtures import write_toy_wmt
from nmt_lib.data.readers import count_lines, read_lines, read_sgml

TEXT = "Première ligne\r\nsecond line\n\nlast line without newline"


def test_plain_gz_xz_read_the_same(tmp_path):
    raw = TEXT.encode()
    (tmp_path / "c.en").write_bytes(raw)
    (tmp_path / "c.en.gz").write_bytes(gzip.compress(raw))
    (tmp_path / "c.en.xz").write_bytes(lzma.compress(raw))
    want = ["Première ligne", "second line", "", "last line without newline"]
    for name in ("c.en", "c.en.gz", "c.en.xz"):
        assert list(read_lines(tmp_path / name)) == want
        assert count_lines(tmp_path / name) == 4
    assert find_plain(tmp_path / "c.en") == tmp_path / "c.en"
    (tmp_path / "c.en").unlink()
    assert find_plain(tmp_path / "c.en") == tmp_path / "c.en.gz"


def test_only_newline_ends_a_line(tmp_path):
    (tmp_path / "c").write_text("a\u2028b\x85c\x0bd\nnext\n", encoding="utf-8")
    assert list(read_lines(tmp_path / "c")) == ["a\u2028b\x85c\x0bd", "next"]


def test_invalid_utf8_names_file_and_line(tmp_path):
    p = tmp_path / "bad.fr.gz"
    p.write_bytes(gzip.compress(b"ok\nstill ok\nbad \xff byte\n"))
    with pytest.raises(DataError, match=r"bad\.fr\.gz:3: invalid UTF-8"):
        list(read_lines(p))


SGML = """<srcset setid="newstest2099" srclang="any">
<doc docid="d1" genre="news" origlang="en">
<p>
<seg id="1">AT&amp;T  &lt;b&gt; said &quot;hi&quot;</seg>
</p>
<seg id="2"> It&#39;s   spaced </seg>
</doc>
<doc sysid="ref" docid="d2" genre="news" origlang="fr">
<seg id="1">Été</seg>
</doc>
</srcset>
"""


def test_sgml_unescapes_and_keeps_ids_in_order(tmp_path):
    p = tmp_path / "x.sgm"
    p.write_text(SGML, encoding="utf-8")
    segs = list(read_sgml(p))
    assert [(s.docid, s.segid) for s in segs] == [("d1", "1"), ("d1", "2"), ("d2", "1")]
    assert [s.text for s in segs] == ['AT&T <b> said "hi"', "It's spaced", "Été"]


@pytest.mark.parametrize(
    "line",
    ['<seg id="2">no closing tag', '<seg id="2">two <seg id="3">in one</seg>', "text</seg>"],
)
def test_broken_seg_names_file_and_line(tmp_path, line):
    p = tmp_path / "broken.sgm"
    p.write_text(SGML.replace('<seg id="2"> It&#39;s   spaced </seg>', line), encoding="utf-8")
    with pytest.raises(DataError, match=r"broken\.sgm:6: broken <seg>"):
        list(read_sgml(p))


def test_missing_files_say_what_where_and_how(tmp_path):
    cfg = DataConfig(data_dir=str(tmp_path), train=("europarl-v7.fr-en", "giga-fren.head30000"))
    with pytest.raises(DataError) as e:
        locate(cfg, tmp_path)
    msg = str(e.value)
    assert str(tmp_path / "test-full/newstest2014-fren-src.en.sgm") in msg
    assert str(tmp_path / "dev/newstest2013-ref.fr.sgm") in msg
    assert "http://www.statmt.org/wmt14/test-full.tgz" in msg
    assert f"python -m nmt_lib.data.download --data-dir {tmp_path} newstest2014" in msg
    assert str(tmp_path / "train/europarl-v7.fr-en.fr") + "[.gz|.xz]" in msg
    assert "training-parallel-europarl-v7.tgz" in msg
    assert "giga-fren.head30000 is an excerpt that exists only in offline copies" in msg


def test_unknown_corpus_lists_known_names(tmp_path):
    write_toy_wmt(tmp_path, n_train=20)
    with pytest.raises(
        DataError, match=r"unknown training corpus 'nope'; known: .*europarl-v7\.fr-en"
    ):
        locate(DataConfig(train=("nope",)), tmp_path)
    with pytest.raises(DataError, match=r"unknown test set 'newstest2099'; known: .*newstest2014"):
        locate(DataConfig(train=("toy",), test="newstest2099"), tmp_path)
    with pytest.raises(DataError, match="unknown corpus"):
        get_corpus("bitexts")


def test_locates_the_toy_fixture_and_a_corpus_of_ones_own(tmp_path):
    write_toy_wmt(tmp_path, n_train=20)
    (tmp_path / "train/mine.en.xz").write_bytes(lzma.compress(b"a\n"))
    (tmp_path / "train/mine.fr.gz").write_bytes(gzip.compress(b"b\n"))
    found = locate(DataConfig(train=("toy", "mine")), tmp_path)
    assert found.test[0].src == tmp_path / "test-full/newstest2014-fren-src.en.sgm"
    assert found.test[0].ref == tmp_path / "test-full/newstest2014-fren-ref.fr.sgm"
    assert [d.name for d in found.dev] == ["newstest2012", "newstest2013"]
    assert found.train[0].pairs == ((tmp_path / "train/toy.en", tmp_path / "train/toy.fr"),)
    assert found.train[1].pairs == ((tmp_path / "train/mine.en.xz", tmp_path / "train/mine.fr.gz"),)


def test_registry_members_land_where_locate_looks():
    for c in CORPORA.values():
        assert c.kind in ("test", "dev", "train")
        if c.archive is None:
            assert c.note
            continue
        dests = {dest for _, dest in c.archive.members}
        for stem in c.parts:
            for lang in ("en", "fr"):
                if c.kind == "train":
                    assert dests & {f"{stem}.{lang}{s}" for s in ("", ".gz", ".xz")}, (c, lang)
                else:
                    assert {f"{stem}-src.{lang}.sgm", f"{stem}-ref.{lang}.sgm"} <= dests
