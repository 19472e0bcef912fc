"""Small file helpers shared by every module: atomic writes, JSON, sha256 sums."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8"):
    """Open a temporary file beside ``path``; on success rename it over ``path``, else delete it.

    Readers never see a half-written file, and a crash leaves the old file (if any) intact.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600 files; give the usual permissions
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: str | os.PathLike, obj) -> None:
    """Atomically write ``obj`` as indented, key-sorted JSON."""
    with atomic_write(path) as f:
        json.dump(obj, f, indent=2, sort_keys=True, ensure_ascii=False)
        f.write("\n")


def read_json(path: str | os.PathLike):
    """The JSON value in the file ``path``."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """The sha256 hex digest of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()
