"""Small file helpers shared by every module: atomic writes, JSON, sha256 sums, errors of a full
or read-only disk that name their file, exclusive locks on a run, deferred signals, and the removal
of a crashed writer's temporary files."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import signal
import tempfile
import threading
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path

#: errno values of a disk that cannot take a write, with what to do about each
_ADVICE = {
    errno.ENOSPC: "free some space on that disk (or write elsewhere: --out, NMT_CACHE), then rerun "
    "the same command",
    errno.EDQUOT: "free some of your disk quota there (or write elsewhere: --out, NMT_CACHE), then "
    "rerun the same command",
    errno.EROFS: "that file system is read-only: write elsewhere (--out, NMT_CACHE)",
    errno.EACCES: "it is not writable by you: fix its permissions or write elsewhere (--out, "
    "NMT_CACHE)",
    errno.EIO: "the disk reported an I/O error: check it, then rerun the same command",
}


class WriteError(OSError):
    """A write that failed for want of space, quota or permission; its message is one line naming
    the file or directory and what to do."""

    def __str__(self) -> str:
        return self.strerror or ""


#: the errno values of a full disk or quota
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def write_error(
    e: OSError, path: str | os.PathLike, errnos: Iterable[int] = tuple(_ADVICE)
) -> OSError:
    """``e`` as a :class:`WriteError` naming ``path`` (or the file ``e`` names) and what to do,
    when its errno is one of ``errnos`` (by default: every errno of a disk that cannot take a
    write); else ``e`` itself."""
    if isinstance(e, WriteError) or e.errno not in _ADVICE or e.errno not in errnos:
        return e
    where = e.filename if e.filename is not None else path
    return WriteError(e.errno, f"{where}: {os.strerror(e.errno)} while writing: {_ADVICE[e.errno]}")


@contextmanager
def naming(path: str | os.PathLike, errnos: Iterable[int] = tuple(_ADVICE)):
    """Turn an OSError of a disk that cannot take a write (of ``errnos``) into a
    :class:`WriteError` naming ``path`` (see :func:`write_error`)."""
    try:
        yield
    except OSError as e:
        err = write_error(e, path, errnos)
        if err is e:
            raise
        raise err from None


@contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8"):
    """Open a temporary file beside ``path``; on success rename it over ``path``, else delete it.

    Readers never see a half-written file, and a crash leaves the old file (if any) intact; a disk
    that cannot take the write raises :class:`WriteError` naming ``path``. ``path`` must not be a
    directory.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, f"{path}: is a directory, not a file name")
    with naming(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with naming(path):
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


def remove_debris(directory: str | os.PathLike, names: Iterable[str]) -> list[Path]:
    """Delete the temporary files that :func:`atomic_write` of the files ``names`` of
    ``directory`` left behind (``.<name>.*.tmp``: a writer killed before its rename), and nothing
    else; the caller holds the directory's lock, so no writer of its own is at work. Returns the
    paths removed."""
    gone = []
    for name in names:
        for p in Path(directory).glob(f".{name}.*.tmp"):
            if p.is_file():
                p.unlink(missing_ok=True)
                gone.append(p)
    return gone


class Busy(RuntimeError):
    """A lock held by another process; the message names what is locked and the process."""


class LockLink(OSError):
    """A lock file that is a symbolic link; the message names it."""


@contextmanager
def locked(path: str | os.PathLike, what: str):
    """Hold an exclusive lock (``flock``) on the file ``path`` while the block runs; the file holds
    this process's id and is removed at the end. If another process holds it, raise :class:`Busy`
    at once: "<what> is in use by process <pid>". The operating system releases a lock when its
    process ends, however it ends, so a crashed process never leaves one held (only its file, which
    the next holder takes over). A symbolic link at ``path`` is refused (:class:`LockLink`): the
    lock would write into the file it points to."""
    path = Path(path)
    while True:
        try:
            with naming(path):
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o666)
        except OSError as e:
            if e.errno != errno.ELOOP:
                raise
            raise LockLink(
                f"{path}: the lock file of {what} is a symbolic link (to "
                f"{os.readlink(path)}); it is not followed: remove it, then rerun"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                os.close(fd)
                raise
            pid = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise Busy(
                f"{what} is in use by process {pid} (lock {path}): wait for it to end, or "
                "stop it, then rerun"
            ) from None
        try:  # the previous holder may have removed the file between our open and our lock
            same = os.lstat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        path.unlink(missing_ok=True)  # while still held: nobody else can hold this file
        os.close(fd)


@contextmanager
def signals_deferred(signals: Iterable[int] = (signal.SIGINT, signal.SIGTERM)):
    """Hold ``signals`` back while the block runs: one that arrives meanwhile is recorded and
    raised again, to its own handler, when the block ends. Python's handlers run in the main thread
    only; elsewhere this changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    old = {sig: signal.signal(sig, lambda signum, frame: caught.append(signum)) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(caught):
            signal.raise_signal(sig)


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


def write_lines(path: str | os.PathLike, lines) -> None:
    """``lines`` (strings), each followed by a newline, written atomically."""
    with atomic_write(path) as f:
        f.writelines(line + "\n" for line in lines)


def write_compact(path: str | os.PathLike, obj) -> None:
    """JSON with one top-level item per line and no indentation inside (long number lists),
    written atomically."""
    if isinstance(obj, dict):
        items = [f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in obj.items()]
        text = "{\n" + ",\n".join(items) + "\n}\n"
    else:
        text = "[\n" + ",\n".join(json.dumps(v, ensure_ascii=False) for v in obj) + "\n]\n"
    with atomic_write(path) as f:
        f.write(text)
