"""Moses tokenization (paper §4.1, footnote 6) via sacremoses, and a cache of tokenized files.

Settings are those of ``tokenizer.perl -l en`` / ``-l fr`` with its defaults: XML-escaping of special
characters on (``&`` -> ``&amp;``, ``'`` -> ``&apos;``, ...), aggressive hyphen splitting off, and no
lowercasing (§4.1: "we do not apply any other special preprocessing").

The cache (:func:`tokenized`): a tokenized file is stored under ``<cache_dir>/tok/`` in shards of
50,000 lines, one line per input line (or per ``<seg>`` of an SGML file), tokens separated by single
spaces. Names carry a key made of the input's sha256 and every tokenizer setting (the sacremoses
version included), so a changed input or setting never reuses a stale file. The sha256 (and the line
count) is computed once per (path, size, mtime) and remembered in ``<cache_dir>/tok/files.json``: a
full hash of every input, done once, rather than trusting size and mtime alone. Files are written
atomically (temporary file + rename).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
from collections import deque
from collections.abc import Iterable, Iterator
from functools import cache
from importlib.metadata import version
from itertools import islice
from pathlib import Path
from typing import NamedTuple

from sacremoses import MosesDetokenizer, MosesTokenizer
from tqdm import tqdm

from ..io import atomic_write, sha256_file, write_json
from .readers import count_lines, read_lines, read_sgml

#: Everything that changes the tokenized text; part of every cache key.
SETTINGS = {
    "tokenizer": "sacremoses",
    "version": version("sacremoses"),
    "escape": True,
    "aggressive_dash_splits": False,
    "lowercase": False,
    "format": 1,  # bump when the cache layout changes
}
_CHUNK = 2000  # lines per task sent to a worker
SHARD_LINES = 50_000  # lines per cached file


@cache
def _tokenizer(lang: str) -> MosesTokenizer:
    return MosesTokenizer(lang=lang)


@cache
def _detokenizer(lang: str) -> MosesDetokenizer:
    return MosesDetokenizer(lang=lang)


def tokenize(line: str, lang: str) -> list[str]:
    """Moses tokens of ``line`` (``tokenizer.perl -l lang``, default escaping, no ``-a``)."""
    return _tokenizer(lang).tokenize(line, escape=True, aggressive_dash_splits=False)


def detokenize(tokens: Iterable[str], lang: str) -> str:
    """Inverse of :func:`tokenize` for output text (``detokenizer.perl -l lang``, unescaping)."""
    return _detokenizer(lang).detokenize(list(tokens), unescape=True)


def _tokenize_chunk(lang: str, lines: list[str]) -> list[str]:
    tok = _tokenizer(lang)
    # Joined from the token list: sacremoses' return_str can leave a trailing space.
    return [" ".join(tok.tokenize(x, escape=True, aggressive_dash_splits=False)) for x in lines]


def default_workers() -> int:
    """The CPU cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def tokenize_lines(lines: Iterable[str], lang: str, workers: int | None = None) -> Iterator[str]:
    """Tokenize a stream of lines, in order, each as one space-separated string.

    With ``workers > 1`` chunks of lines go to a process pool; at most a few chunks per worker are in
    flight, so memory stays bounded however long the stream is.
    """
    workers = workers or default_workers()
    it = iter(lines)
    first = list(islice(it, _CHUNK))
    if workers <= 1 or len(first) < _CHUNK:  # a small input is not worth starting processes
        chunk = first
        while chunk:
            yield from _tokenize_chunk(lang, chunk)
            chunk = list(islice(it, _CHUNK))
        return
    with multiprocessing.get_context().Pool(workers) as pool:
        pending: deque = deque()
        chunk = first
        while chunk:
            pending.append(pool.apply_async(_tokenize_chunk, (lang, chunk)))
            if len(pending) >= 3 * workers:
                yield from pending.popleft().get()
            chunk = list(islice(it, _CHUNK))
        while pending:
            yield from pending.popleft().get()


class FileInfo(NamedTuple):
    sha256: str  # of the file as stored (compressed or not)
    lines: int  # lines of its (decompressed) text


def file_info(path: str | Path, memo_dir: str | Path) -> FileInfo:
    """sha256 and line count of ``path``, computed once per (resolved path, size, mtime_ns) and
    remembered in ``memo_dir/files.json``."""
    path, memo_path = Path(path), Path(memo_dir) / "files.json"
    st = path.stat()
    name, ident = str(path.resolve()), [st.st_size, st.st_mtime_ns]
    try:
        memo = json.loads(memo_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        memo = {}
    hit = memo.get(name)
    if hit and hit[:2] == ident:
        return FileInfo(*hit[2:])
    info = FileInfo(sha256_file(path), count_lines(path))
    memo[name] = [*ident, *info]
    write_json(memo_path, memo)
    return info


def is_sgml(path: str | Path) -> bool:
    return str(path).endswith(".sgm")


def cache_key(path: str | Path, lang: str, cache_dir: str | Path) -> str:
    """The cache key of ``path`` tokenized as ``lang``: its sha256 and every setting."""
    ident = {"sha256": file_info(path, cache_dir).sha256, "lang": lang, "sgml": is_sgml(path)}
    return hashlib.sha256(json.dumps({**ident, **SETTINGS}, sort_keys=True).encode()).hexdigest()


def read_tokenized(path: str | Path) -> Iterator[str]:
    """The lines of a tokenized cache file (only ``\\n`` ends a line)."""
    with open(path, encoding="utf-8", newline="\n") as f:
        for line in f:
            yield line.removesuffix("\n")


def _source(path: Path) -> Iterator[str]:
    return (s.text for s in read_sgml(path)) if is_sgml(path) else read_lines(path)


def tokenized(
    path: str | Path,
    lang: str,
    cache_dir: str | Path,
    workers: int | None = None,
    progress: bool | None = None,
) -> Iterator[str]:
    """The tokenized lines of a corpus file (plain/.gz/.xz lines, or an ``.sgm`` file's segments),
    each one space-separated string, streaming.

    The cache holds the file in shards of ``SHARD_LINES`` lines: cached shards are read back, missing
    ones are tokenized (``workers`` processes) and stored as they are consumed, so a reader that needs
    only the head of a big corpus (``max_train_pairs``) tokenizes only that head, and a later reader
    goes on from there. A shard is stored only when complete. ``progress``: a tqdm bar while
    tokenizing (None = only on a terminal).
    """
    path, cache_dir = Path(path), Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    base = f"{path.name}.{cache_key(path, lang, cache_dir)[:16]}"
    done_path = cache_dir / f"{base}.done.json"
    raw, raw_pos, bar, k = None, 0, None, 0
    try:
        while True:
            done = (
                json.loads(done_path.read_text(encoding="utf-8")) if done_path.is_file() else None
            )
            if done is not None and k >= done["shards"]:
                return
            shard = cache_dir / f"{base}.{k:05d}.tok"
            if shard.is_file():
                yield from read_tokenized(shard)
                k += 1
                continue
            if raw is None:
                raw = _source(path)
            for _ in islice(raw, k * SHARD_LINES - raw_pos):  # resume after cached shards
                pass
            lines = list(islice(raw, SHARD_LINES))
            raw_pos = (k + 1) * SHARD_LINES
            if bar is None:
                bar = _tokenize_bar(path, cache_dir, k * SHARD_LINES, progress)
            if lines:
                yield from _store_shard(shard, lines, lang, workers, bar)
            if len(lines) < SHARD_LINES:
                write_json(done_path, {"shards": k + bool(lines), "source": str(path), **SETTINGS})
                return
            k += 1
    finally:
        if raw is not None:
            raw.close()
        if bar is not None:
            bar.close()


def _tokenize_bar(path: Path, cache_dir: Path, initial: int, progress: bool | None) -> tqdm:
    """The tqdm bar of :func:`tokenized` tokenizing ``path`` from line ``initial`` on (its total:
    the file's lines; an SGML file's segments are not counted ahead)."""
    return tqdm(
        desc=f"tokenize {path.name}",
        total=None if is_sgml(path) else file_info(path, cache_dir).lines,
        initial=initial,
        unit=" lines",
        unit_scale=True,
        disable=None if progress is None else not progress,
    )


def _store_shard(shard: Path, lines: list[str], lang: str, workers, bar) -> Iterator[str]:
    """``lines`` tokenized (``workers`` processes), yielded as they are written to ``shard``, which
    is stored (atomically) once all are written."""
    with atomic_write(shard) as f:
        for i, line in enumerate(tokenize_lines(lines, lang, workers), 1):
            f.write(line + "\n")
            yield line
            if i % _CHUNK == 0:
                bar.update(_CHUNK)
    bar.update(len(lines) % _CHUNK)


def pretokenized_lines(path: str | Path) -> Iterator[str]:
    """Lines of a corpus that is already tokenized upstream, whitespace-normalised (no cache)."""
    for line in read_lines(path):
        yield " ".join(line.split())
