"""nmt_lib.data.text: Moses tokenization as tokenizer.perl's defaults, and the tokenized-file cache."""

import json

import pytest

from nmt_lib.data import text
from nmt_lib.data.text import detokenize, tokenize, tokenize_lines, tokenized


def test_tokenizer_perl_defaults():
    # escaping on, no lowercasing, English clitics split off
    assert tokenize("Mr. Smith's dog isn't here & <b>.", "en") == [
        "Mr.",
        "Smith",
        "&apos;s",
        "dog",
        "isn",
        "&apos;t",
        "here",
        "&amp;",
        "&lt;",
        "b",
        "&gt;",
        ".",
    ]
    # aggressive hyphen splitting off (tokenizer.perl without -a)
    assert tokenize("A well-known fact.", "en") == ["A", "well-known", "fact", "."]
    # French elision keeps the apostrophe on the left word
    assert tokenize("L'homme n'est-ce pas ?", "fr") == [
        "L&apos;",
        "homme",
        "n&apos;",
        "est-ce",
        "pas",
        "?",
    ]
    assert tokenize("", "en") == []


@pytest.mark.parametrize(
    "line,lang",
    [
        ("Mr. Smith's dog isn't here, is it?", "en"),
        ('He said "hello" -- and left (quickly).', "en"),
        ("L'homme d'affaires a dit « bonjour » aujourd'hui, n'est-ce pas ?", "fr"),
    ],
)
def test_detokenize_inverts_tokenize(line, lang):
    assert detokenize(tokenize(line, lang), lang) == line


def test_pool_gives_the_serial_result(monkeypatch):
    monkeypatch.setattr(text, "_CHUNK", 4)  # small chunks so that 2 workers get used
    lines = [f"Line {i}: it's {i}-fold, isn't it?" for i in range(23)]
    serial = [" ".join(tokenize(x, "en")) for x in lines]
    assert list(tokenize_lines(lines, "en", workers=2)) == serial
    assert list(tokenize_lines(lines, "en", workers=1)) == serial


class Counting:
    """Wraps the chunk tokenizer to count how many lines really get tokenized."""

    def __init__(self, monkeypatch):
        self.lines = 0
        real = text._tokenize_chunk

        def counted(lang, lines):
            self.lines += len(lines)
            return real(lang, lines)

        monkeypatch.setattr(text, "_tokenize_chunk", counted)


def test_cache_is_reused_and_keyed_on_content_and_settings(tmp_path, monkeypatch):
    src, cache = tmp_path / "c.en", tmp_path / "cache"
    src.write_text("Hello, world.\nIt's me.\n", encoding="utf-8")
    n = Counting(monkeypatch)
    want = ["Hello , world .", "It &apos;s me ."]
    assert list(tokenized(src, "en", cache, workers=1)) == want
    assert list(tokenized(src, "en", cache, workers=1)) == want
    assert n.lines == 2  # second read from the cache
    src.write_text("Hello, world!\nIt's me.\n", encoding="utf-8")  # same size, new content
    assert list(tokenized(src, "en", cache, workers=1))[0] == "Hello , world !"
    assert n.lines == 4
    monkeypatch.setitem(text.SETTINGS, "version", "0.0.0-other")
    list(tokenized(src, "en", cache, workers=1))
    assert n.lines == 6
    list(tokenized(src, "fr", cache, workers=1))
    assert n.lines == 8
    assert not list(cache.glob("*.tmp"))


def test_shards_tokenize_only_what_is_read_and_resume(tmp_path, monkeypatch):
    monkeypatch.setattr(text, "SHARD_LINES", 3)
    src, cache = tmp_path / "c.en", tmp_path / "cache"
    lines = [f"Sentence number {i}." for i in range(8)]
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    want = [" ".join(tokenize(x, "en")) for x in lines]
    n = Counting(monkeypatch)
    it = tokenized(src, "en", cache, workers=1)
    assert [next(it) for _ in range(4)] == want[:4]
    it.close()  # stopped inside the second shard: only the first is stored
    assert n.lines == 6
    assert len(list(cache.glob("c.en.*.tok"))) == 1
    assert not list(cache.glob("*.done.json")) and not list(cache.glob(".*tmp"))
    assert list(tokenized(src, "en", cache, workers=1)) == want
    assert n.lines == 6 + 5  # shards 2 and 3; the first was not tokenized again
    assert len(list(cache.glob("c.en.*.tok"))) == 3
    (done,) = cache.glob("*.done.json")
    assert json.loads(done.read_text())["shards"] == 3
    assert list(tokenized(src, "en", cache, workers=1)) == want
    assert n.lines == 11


def test_sgml_is_tokenized_per_segment(tmp_path):
    p = tmp_path / "t-src.en.sgm"
    p.write_text(
        '<srcset setid="t" srclang="any">\n<doc docid="a">\n'
        '<seg id="1">It&apos;s fine.</seg>\n<seg id="2">Yes.</seg>\n</doc>\n</srcset>\n',
        encoding="utf-8",
    )
    assert list(tokenized(p, "en", tmp_path / "cache", workers=1)) == ["It &apos;s fine .", "Yes ."]


def test_file_info_is_remembered_and_refreshed(tmp_path):
    p = tmp_path / "f"
    p.write_text("a\nb\n")
    info = text.file_info(p, tmp_path / "memo")
    assert info.lines == 2 and len(info.sha256) == 64
    assert text.file_info(p, tmp_path / "memo") == info
    p.write_text("a\nb\nc")
    assert text.file_info(p, tmp_path / "memo").lines == 3
