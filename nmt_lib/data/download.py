"""Fetch the official WMT'14 archives into the data-directory layout (PAPER.md §1, DESIGN.md "Data").

    python -m nmt_lib.data.download --data-dir data/wmt14                  # the paper's data: test, dev,
                                                                      # and the LIUM selection
    python -m nmt_lib.data.download --data-dir D newstest2014 europarl-v7.fr-en
    python -m nmt_lib.data.download --data-dir D --profile lite            # what a profile needs
    python -m nmt_lib.data.download --list                                 # the registry

Each archive (statmt.org's WMT'14 test-full, dev and training archives; the LIUM selected bitexts of
§4.1 footnote 5) is downloaded once to ``<data dir>/downloads/``, written atomically, and checked
against its published checksum where one is known. Where none is, its sha256 is recorded in
``downloads/SHA256SUMS`` on first download and checked against that afterwards. Only the members the
corpora need are extracted, each atomically, to the paths :mod:`nmt_lib.data.corpus` reads.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import tarfile
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

from tqdm import tqdm

from ..config import DataConfig, load_profile
from ..io import atomic_write, sha256_file
from .corpus import CORPORA, Archive, Corpus, DataError, get_corpus

PAPER_DATA = ("newstest2014", "newstest2012", "newstest2013", "bitexts.selected")


class ChecksumError(DataError):
    """A downloaded file does not have the expected checksum."""


def _sums_path(data_dir: Path) -> Path:
    return data_dir / "downloads" / "SHA256SUMS"


def _recorded(data_dir: Path) -> dict[str, str]:
    p = _sums_path(data_dir)
    if not p.is_file():
        return {}
    return {n: h for h, n in (line.split(None, 1) for line in p.read_text().splitlines() if line)}


def _record(data_dir: Path, name: str, sha256: str) -> None:
    sums = {**_recorded(data_dir), name: sha256}
    with atomic_write(_sums_path(data_dir)) as f:
        f.writelines(f"{h}  {n}\n" for n, h in sorted(sums.items()))


def _check(path: Path, url: str, got: dict[str, str], want: dict[str, str | None]) -> None:
    for algo, expected in want.items():
        if expected and got[algo] != expected.lower():
            raise ChecksumError(
                f"{path}: {algo} mismatch for {url}: expected {expected}, got {got[algo]}; the "
                "download is corrupt or the archive changed upstream (nothing was kept)"
            )


def fetch(
    url: str,
    dest: Path,
    want: dict[str, str | None],
    opener: Callable = urllib.request.urlopen,
    progress: bool | None = None,
) -> dict[str, str]:
    """Stream ``url`` into ``dest`` atomically; return its sha256/md5. A checksum in ``want`` that
    does not match raises ChecksumError and leaves no file behind."""
    hashes = {"sha256": hashlib.sha256(), "md5": hashlib.md5()}
    with opener(url) as r, atomic_write(dest, "wb") as f:
        size = r.headers.get("Content-Length") if getattr(r, "headers", None) else None
        bar = tqdm(
            desc=f"download {dest.name}",
            total=int(size) if size else None,
            unit="B",
            unit_scale=True,
            disable=None if progress is None else not progress,
        )
        with bar:
            while block := r.read(1 << 20):
                f.write(block)
                for h in hashes.values():
                    h.update(block)
                bar.update(len(block))
        got = {k: h.hexdigest() for k, h in hashes.items()}
        _check(dest, url, got, want)  # raising here removes the temporary file
    return got


def extract(archive: Path, members: Sequence[tuple[str, str]], data_dir: Path) -> list[Path]:
    """Copy the wanted ``(member, destination)`` pairs out of a tar/tgz archive (streaming, each
    destination written atomically). A member the archive lacks raises DataError."""
    wanted = dict(members)
    written = []
    names = []
    with tarfile.open(archive, "r|*") as tar:
        for m in tar:
            name = m.name.removeprefix("./")
            names.append(name)
            if name in wanted and m.isfile():
                dest = data_dir / wanted.pop(name)
                with tar.extractfile(m) as src, atomic_write(dest, "wb") as out:
                    shutil.copyfileobj(src, out, 1 << 20)
                written.append(dest)
    if wanted:
        raise DataError(
            f"{archive} lacks {sorted(wanted)}; it holds e.g. {names[:20]} — the registry in "
            "nmt_lib/data/corpus.py may need updating"
        )
    return written


def download(
    names: Sequence[str],
    data_dir: str | Path,
    registry: dict[str, Corpus] | None = None,
    opener: Callable = urllib.request.urlopen,
    force: bool = False,
    progress: bool | None = None,
) -> list[Path]:
    """Download and extract the corpora ``names`` into ``data_dir``; return the files of those
    corpora (already present ones included). Files that exist are kept unless ``force``."""
    data_dir = Path(data_dir)
    corpora = [get_corpus(n, registry=registry) for n in names]
    offline = [c for c in corpora if c.archive is None]
    if offline:
        raise DataError(
            "cannot be downloaded: " + "; ".join(f"{c.name} is {c.note}" for c in offline)
        )
    by_url: dict[str, tuple[Archive, list[tuple[str, str]]]] = {}
    for c in corpora:
        members = by_url.setdefault(c.archive.url, (c.archive, []))[1]
        members += [m for m in c.archive.members if m not in members]
    files = []
    for url, (archive, members) in by_url.items():
        targets = [data_dir / dest for _, dest in members]
        files += targets
        todo = [m for m, t in zip(members, targets, strict=True) if force or not t.is_file()]
        if not todo:
            continue
        path = data_dir / "downloads" / url.rsplit("/", 1)[-1]
        want = {"sha256": archive.sha256 or _recorded(data_dir).get(path.name), "md5": archive.md5}
        if path.is_file() and not force:
            got = {"sha256": sha256_file(path), "md5": _md5(path)}
            _check(path, url, got, want)
        else:
            print(f"downloading {url}", file=sys.stderr)
            got = fetch(url, path, want, opener, progress)
        if not archive.sha256:
            _record(data_dir, path.name, got["sha256"])
        extract(path, todo, data_dir)
    return files


def _md5(path: Path) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: see the module docstring."""
    ap = argparse.ArgumentParser(
        prog="python -m nmt_lib.data.download", description=__doc__.split("\n")[0]
    )
    ap.add_argument("names", nargs="*", help=f"corpora (default: {' '.join(PAPER_DATA)})")
    ap.add_argument("--data-dir", help="target directory (default: $NMT_DATA or data/wmt14)")
    ap.add_argument("--profile", help="download what this profile's data section needs")
    ap.add_argument("--list", action="store_true", help="list the known corpora and exit")
    ap.add_argument("--force", action="store_true", help="download and extract again")
    args = ap.parse_args(argv)
    if args.list:
        for c in CORPORA.values():
            print(f"{c.name:34s} {c.kind:5s} {c.archive.url if c.archive else c.note}")
        return 0
    names = list(args.names)
    if args.profile:
        for run in load_profile(args.profile).runs.values():
            d = run.data
            names += [n for n in (d.test, *d.dev, *d.train) if n not in names]
    names = names or list(PAPER_DATA)
    data_dir = Path(args.data_dir) if args.data_dir else DataConfig().resolved_data_dir()
    try:
        if args.profile:  # a profile may also use offline excerpts: say so, fetch the rest
            skip = [c for c in map(get_corpus, names) if c.archive is None]
            for c in skip:
                print(f"skipping {c.name}: {c.note}", file=sys.stderr)
            names = [n for n in names if n not in {c.name for c in skip}]
        files = download(names, data_dir, force=args.force)
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{len(files)} files in {data_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
