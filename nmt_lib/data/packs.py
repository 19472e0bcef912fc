"""Packs, for a machine without the data files (a GPU machine): :func:`pack` writes one (the
prepared training data, copies of the dev and test files, ``pack.json``), which training reads with
``data.packed`` (:func:`nmt_lib.data.store.prepare_packed`); and the inputs' sha256
(:func:`input_sha256`, :func:`verify_inputs`).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from ..config import DataConfig
from ..io import locked, sha256_file, write_json
from ..staging import stale, swap_in
from . import corpus, files, text
from .pipeline import prepare, train_inputs
from .store import PACK, prepared_settings, read_pack


def pack(cfg: DataConfig, out: str | os.PathLike) -> Path:
    """Write what training and evaluation with ``cfg`` need into ``out``, for a machine without the
    WMT'14 files (a GPU machine): the prepared training data, copies of the dev and test files, and
    ``pack.json`` with the prepared data's key and the sha256 of every input file. Train there with
    ``data.packed = out``. The pack is written into a new directory beside ``out``
    (``.<name>.*``), then put in its place in one step (:func:`nmt_lib.staging.swap_in`: after a
    kill ``out`` holds the old pack or the new one), and the next pack into ``out`` removes the
    staging copies a killed one left; one pack into ``out`` at a time (a lock, ``.<name>.lock``).
    An ``out`` that exists must be an empty directory or a pack (which it replaces): anything else
    raises :class:`~nmt_lib.data.corpus.DataError`, before any work, and is left as it is."""
    out = Path(out).absolute()
    _check_pack_target(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with locked(out.parent / f".{out.name}.lock", f"{out} (a pack being written)"):
        for d in stale(out, f".{out.name}."):  # the staging copies of a pack that was killed
            shutil.rmtree(d, ignore_errors=True)
        return _pack(cfg, out)


def _pack(cfg: DataConfig, out: Path) -> Path:
    """:func:`pack` once its target is locked."""
    prep = prepare(cfg)
    found = files.locate(cfg)
    root, memo = cfg.resolved_data_dir(), cfg.resolved_cache_dir() / "tok"
    _, train_keys = train_inputs(found, cfg, memo, None, False)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        shutil.copytree(prep.path, tmp / "prepared")
        for ev in (*found.test, *found.dev):
            for p in (ev.src, ev.ref):
                dest = tmp / "data" / p.relative_to(root)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(p, dest)
        write_json(
            tmp / PACK,
            {
                "key": prep.key,
                "settings": prepared_settings(cfg),
                "train": list(cfg.train),
                "train_keys": train_keys,
                "data_sha256": input_sha256(cfg),
            },
        )
        _check_pack_target(out)  # still empty or a pack
        swap_in(tmp, out)  # the old pack or the new one there, whenever a kill comes
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _check_pack_target(out: Path) -> None:
    """Raise :class:`~nmt_lib.data.corpus.DataError` unless ``out`` is missing, an empty directory,
    or a pack that :func:`pack` wrote (``pack.json`` and its two directories, nothing else)."""
    if not out.exists() and not out.is_symlink():
        return
    if out.is_symlink() or not out.is_dir():
        raise corpus.DataError(
            f"{out}: exists and is not a directory: pack writes a new directory "
            "(or replaces a pack of its own); name another one"
        )
    entries = sorted(os.listdir(out))
    if not entries:
        return
    if PACK in entries and set(entries) <= {PACK, "prepared", "data"}:
        try:
            if "key" in read_pack(out):
                return
        except (corpus.DataError, TypeError):
            pass
    raise corpus.DataError(
        f"{out}: exists and is not a pack written by `python -m nmt_lib pack` ({len(entries)} "
        f"entries, e.g. {entries[0]!r}): pack replaces only a pack of its own, never anything "
        "else; name a new directory"
    )


def input_sha256(cfg: DataConfig) -> dict[str, str]:
    """The sha256 of every input file of ``cfg`` (dev, test, views, training), by path relative to
    its data directory (a test set held out of a training corpus: ``cache/`` and its path in the
    data cache); for a pack, as recorded where it was written."""
    if cfg.packed:
        return read_pack(cfg.packed)["data_sha256"]
    root, cache = cfg.resolved_data_dir(), cfg.resolved_cache_dir()
    return {
        _relative(p, root, cache): text.file_info(p, cache / "tok").sha256 for p in _inputs(cfg)
    }


def _inputs(cfg: DataConfig) -> list[Path]:
    found = files.locate(cfg, cfg.resolved_data_dir())
    sets = (*found.test, *found.dev, *(ev for _, parts in found.views for ev in parts))
    return [Path(p) for ev in sets for p in (ev.src, ev.ref)] + [
        Path(p) for tf in found.train for pair in tf.pairs for p in pair
    ]


def _relative(p: Path, root: Path, cache: Path) -> str:
    if p.is_relative_to(root):
        return str(p.relative_to(root))
    return "cache/" + str(p.relative_to(cache))


def verify_inputs(cfg: DataConfig) -> list[Path]:
    """Hash every input file of ``cfg`` again and compare with the sha256 remembered for its path,
    size and mtime (:func:`nmt_lib.data.text.file_info`). A file whose contents changed behind an
    unchanged size and mtime is forgotten (it is hashed afresh when next used, and so gets new
    prepared data) and returned; the prepared data and checkpoints made from it are stale. A pack
    (``data.packed``) has no input files here: nothing to check (its prepared files are checked
    when loaded)."""
    if cfg.packed:
        return []
    memo_dir = cfg.resolved_cache_dir() / "tok"
    changed = [p for p in _inputs(cfg) if sha256_file(p) != text.file_info(p, memo_dir).sha256]
    if changed:
        memo_path = memo_dir / "files.json"
        memo = json.loads(memo_path.read_text(encoding="utf-8"))
        for p in changed:
            memo.pop(str(p.resolve()), None)
        write_json(memo_path, memo)
    return changed
