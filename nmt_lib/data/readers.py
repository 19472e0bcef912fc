"""Reading the corpus files, streaming: a training file is read line by line, decompressed on the
fly (plain, ``.gz`` or ``.xz``), so memory does not grow with the corpus; a WMT SGML file's
segments (:func:`read_sgml`); a plain-text dev/test set's sentence pairs (:func:`read_plain_pair`).
Every line read is :func:`normal`: Unicode NFC, without a leading byte-order mark, so that the same
text reads the same for training, evaluation and translation. Bad input raises
:class:`~nmt_lib.data.corpus.DataError` naming the file and the line.
"""

from __future__ import annotations

import gzip
import html
import lzma
import re
import unicodedata
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from .corpus import DataError

BOM = "\ufeff"  # a byte-order mark, which some editors put at the start of a UTF-8 file


def normal(text: str) -> str:
    """``text`` as the project reads it: without a leading byte-order mark, in Unicode NFC (a
    letter and its accent one code point, as the corpora write them; NFD's combining marks would
    be other words)."""
    return unicodedata.normalize("NFC", text.removeprefix(BOM))


def _open_binary(path: Path):
    name = str(path)
    if name.endswith(".gz"):
        return gzip.open(path, "rb")
    if name.endswith(".xz"):
        return lzma.open(path, "rb")
    return open(path, "rb")


def read_lines(path: str | Path) -> Iterator[str]:
    """Stream the lines of a plain, ``.gz`` or ``.xz`` UTF-8 file, without their line ends,
    :func:`normal`.

    Only ``\\n`` ends a line (a stray ``\\r`` before it is dropped), so a line-aligned corpus keeps its
    alignment whatever other separators its text contains. Invalid UTF-8 raises DataError(file:line).
    """
    path, lineno = Path(path), 0
    try:
        with _open_binary(path) as f:
            for lineno, raw in enumerate(f, 1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise DataError(f"{path}:{lineno}: invalid UTF-8 ({e.reason})") from None
                yield normal(line.rstrip("\n").removesuffix("\r"))
    except _BROKEN as e:
        raise _broken(path, e, f"line {lineno + 1}") from None


def count_lines(path: str | Path) -> int:
    """The number of lines :func:`read_lines` yields (a last line without ``\\n`` counts), streaming."""
    n, last = 0, b"\n"
    try:
        with _open_binary(Path(path)) as f:
            while block := f.read(1 << 20):
                n += block.count(b"\n")
                last = block[-1:]
    except _BROKEN as e:
        raise _broken(path, e, f"after {n} lines") from None
    return n + (last != b"\n")


def check_whole_lines(path: str | Path) -> None:
    """Refuse a file of whole lines (``Corpus.plain``) whose last line has no newline: a file cut
    short, mid-sentence (DataError naming it). An empty file is refused too."""
    path = Path(path)
    try:
        if str(path).endswith((".gz", ".xz")):
            with _open_binary(path) as f:
                last = b""
                while block := f.read(1 << 20):
                    last = block[-1:]
        else:
            with open(path, "rb") as f:
                f.seek(0, 2)
                if f.tell():
                    f.seek(-1, 2)
                last = f.read(1)
    except _BROKEN as e:
        raise _broken(path, e, "while checking its end") from None
    if last != b"\n":
        why = "is empty" if not last else "ends without a newline, in mid-line"
        raise DataError(f"{path}: {why}: truncated? (every line of this corpus ends in a newline)")


def read_plain_pair(src: str | Path, ref: str | Path) -> list[tuple[str, str]]:
    """The sentence pairs of a plain-text dev/test set (``Corpus.plain``): line ``i`` of ``src``
    and of ``ref``. A truncated file (:func:`check_whole_lines`), two files of different line counts
    or an empty line raises DataError naming the file (and line)."""
    for p in (src, ref):
        check_whole_lines(p)
    a, b = list(read_lines(src)), list(read_lines(ref))
    if len(a) != len(b):
        raise DataError(
            f"{src} has {len(a)} lines and {ref} {len(b)}: a dev/test set's two sides "
            "must be line-aligned (a file truncated or from another split?)"
        )
    for path, lines in ((src, a), (ref, b)):
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                raise DataError(
                    f"{path}:{lineno}: empty line (every test and dev sentence has text)"
                )
    return list(zip(a, b, strict=True))


#: What a truncated or damaged .gz/.xz file raises while it is read.
_BROKEN = (EOFError, zlib.error, lzma.LZMAError, gzip.BadGzipFile)


def _broken(path, e: Exception, where: str) -> DataError:
    return DataError(
        f"{path}: damaged or truncated compressed file ({where}: {type(e).__name__}: {e}); "
        "fetch it again"
    )


class Segment(NamedTuple):
    """One ``<seg>`` of a WMT SGML file, in file order."""

    docid: str
    segid: str
    text: str


_SEG = re.compile(r"^\s*<seg\b([^>]*)>(.*)</seg>\s*$", re.IGNORECASE)
_ATTR_ID = re.compile(r"""\bid\s*=\s*"?([^"\s>]*)"?""", re.IGNORECASE)
_DOCID = re.compile(r"""\bdocid\s*=\s*"([^"]*)\"""", re.IGNORECASE)


def read_sgml(path: str | Path) -> Iterator[Segment]:
    """The segments of a WMT SGML file (``<srcset>``/``<refset>``, ``<doc>``, one ``<seg>`` per line),
    with XML entities unescaped and whitespace collapsed (as sacrebleu reads them). A ``<seg>`` that
    does not open and close on one line raises DataError(file:line)."""
    path = Path(path)
    docid = ""
    for lineno, line in enumerate(read_lines(path), 1):
        low = line.lower()
        if "<doc" in low:
            m = _DOCID.search(line)
            docid = m.group(1) if m else ""
        if "<seg" not in low and "</seg>" not in low:
            continue
        m = _SEG.match(line)
        if m is None or "<seg" in m.group(2).lower() or "</seg>" in m.group(2).lower():
            raise DataError(f"{path}:{lineno}: broken <seg> (expected <seg id=...>text</seg>)")
        sid = _ATTR_ID.search(m.group(1))
        text = " ".join(normal(html.unescape(m.group(2))).split())
        if not text:
            raise DataError(f"{path}:{lineno}: empty <seg> (every test and dev segment has text)")
        yield Segment(docid, sid.group(1) if sid else "", text)
