"""A results directory's files replaced as one step.

:func:`staged` gives a staging directory beside the results (``.evaluate.<random>/``). When the
block ends without an error, that directory is renamed ``.evaluate.commit`` (the decision, one
rename) and its files are moved into place, ``bleu.json`` last, with SIGINT and SIGTERM held back
until the last move; what an earlier evaluation wrote and this one does not (``owned``: the names
an evaluation writes, such as its ``views/``) is removed in the same step, before ``bleu.json``
comes back: a results directory with ``bleu.json`` holds one complete evaluation, and an
evaluation interrupted before the decision leaves the previous one as it was. A process killed
outright between the moves leaves ``.evaluate.commit``, which the next one completes first; it also
removes the staging directories that a crashed one left. One evaluation of a results directory runs
at a time (a lock, ``.evaluate.lock``).

A whole directory (a published model, a pack) is replaced by :func:`swap_in`: the new one written
beside it, then exchanged with it in one step, so that the target holds the old or the new one
whatever moment a kill hits; :func:`stale` gives the staging directories a killed one left.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .io import locked, naming, signals_deferred

COMMIT = ".evaluate.commit"  # a complete evaluation whose files are being moved into place
REMOVED = ".removed"  # in a commit: the names of the earlier evaluation's files it removes


@contextmanager
def staged(
    out_dir: Path, discard: str | None = None, owned: tuple[str, ...] = ()
) -> Iterator[Path]:
    """The staging directory of ``out_dir`` (created), committed into it when the block ends
    without an error; ``discard``: a glob of the work in progress (an interrupted evaluation's
    journals) that the commit makes useless, removed after it; ``owned``: the names of the files
    and directories an evaluation writes, those the staging directory lacks removed by the
    commit (before its first move)."""
    with naming(out_dir):
        out_dir.mkdir(parents=True, exist_ok=True)
    with locked(out_dir / ".evaluate.lock", f"results directory {out_dir} (an evaluation)"):
        _finish_commit(out_dir)  # what a killed evaluation had decided, then its debris
        for d in out_dir.glob(".evaluate.*"):
            if d.is_dir() and d.name != COMMIT:
                shutil.rmtree(d, ignore_errors=True)
        with naming(out_dir):
            stage = Path(tempfile.mkdtemp(prefix=".evaluate.", dir=out_dir))
        try:
            yield stage
            gone = [name for name in owned if not (stage / name).exists()]
            (stage / REMOVED).write_text("".join(f"{name}\n" for name in gone), encoding="utf-8")
            with signals_deferred():  # the rename and the moves, as one step
                os.rename(stage, out_dir / COMMIT)
                _finish_commit(out_dir)
            for f in out_dir.glob(discard) if discard else ():
                f.unlink()
        finally:
            shutil.rmtree(stage, ignore_errors=True)


def _finish_commit(out_dir: Path) -> None:
    """Move the files of ``out_dir/.evaluate.commit`` (if any) into ``out_dir``: ``bleu.json``
    (the mark of a complete evaluation) removed first and moved last; what its :data:`REMOVED`
    lists (the earlier evaluation's files that this one does not write) removed before the
    moves; a directory (``views/``) replaces the previous one."""
    commit = out_dir / COMMIT
    if not commit.is_dir():
        return
    with naming(out_dir):
        if (commit / "bleu.json").exists():
            (out_dir / "bleu.json").unlink(missing_ok=True)
        if (commit / REMOVED).exists():
            for name in (commit / REMOVED).read_text(encoding="utf-8").split():
                old = out_dir / name
                if old.is_dir() and not old.is_symlink():
                    shutil.rmtree(old)
                else:
                    old.unlink(missing_ok=True)
            (commit / REMOVED).unlink()
        for f in sorted(commit.iterdir(), key=lambda f: f.name == "bleu.json"):
            if f.is_dir():
                shutil.rmtree(out_dir / f.name, ignore_errors=True)
            os.replace(f, out_dir / f.name)
        commit.rmdir()


AT_FDCWD, RENAME_EXCHANGE = -100, 2  # linux/fcntl.h, linux/fs.h


def swap_in(new: Path, out: Path) -> None:
    """Put the directory ``new`` in the place of ``out`` (missing, or a directory, removed) in one
    step: an exchange of the two names (Linux's ``renameat2``). Where the exchange is not
    available, ``out`` is renamed ``.<name>.old`` beside it and ``new`` renamed ``out``, SIGINT and
    SIGTERM held back between the two; :func:`stale` puts such an ``.old`` back where a kill left
    no ``out``."""
    if out.exists() and _exchange(new, out):  # ``new`` now names the old one
        new.unlink() if new.is_symlink() else shutil.rmtree(new)
        return
    old = out.parent / f".{out.name}.old"
    shutil.rmtree(old, ignore_errors=True)
    with signals_deferred():
        if out.exists():
            os.rename(out, old)
        os.rename(new, out)
    shutil.rmtree(old, ignore_errors=True)


def _exchange(a: Path, b: Path) -> bool:
    """Exchange the names ``a`` and ``b`` atomically; False where the system cannot."""
    if sys.platform != "linux":
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        done = libc.renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE)
    except AttributeError:  # a C library without renameat2
        return False
    if done == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def stale(out: Path, prefix: str) -> list[Path]:
    """The staging directories (``<prefix>*`` beside ``out``, none a link) that a killed
    :func:`swap_in` and the writing before it left, to remove; the caller holds the lock of
    ``out``. An ``out`` that a kill left missing between the two renames is put back first."""
    old = out.parent / f".{out.name}.old"
    if old.is_dir() and not old.is_symlink() and not out.exists():
        os.rename(old, out)
    found = {d for d in out.parent.glob(f"{prefix}*") if d.is_dir() and not d.is_symlink()}
    if old.is_dir() and not old.is_symlink():  # out is whole: the old one set aside
        found.add(old)
    return sorted(found - {out})
