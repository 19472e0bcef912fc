"""A whole directory replaced in one step (nmt_lib.staging.swap_in): a published model and a pack
killed (SIGKILL, in a process of their own) at the move that replaces the old one leave the old or
the new one whole, and the next one removes what the killed one left."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nmt_lib import loading, publish, staging
from nmt_lib.data import pack

ROOT = Path(__file__).resolve().parents[1]

#: Run ``WORK`` with a SIGKILL to itself right after the first move of ``target`` (a rename of it,
#: or an exchange with it): a kill at the worst moment of a replacement.
KILLED = """
import os, signal, sys
from pathlib import Path
from nmt_lib import staging

target = Path(sys.argv[1]).absolute()
rename = os.rename


def moved(src, dst, *args, **kw):
    rename(src, dst, *args, **kw)
    if target in (Path(src).absolute(), Path(dst).absolute()):
        os.kill(os.getpid(), signal.SIGKILL)


os.rename = moved
if hasattr(staging, "_exchange"):
    exchange = staging._exchange

    def exchanged(a, b):
        done = exchange(a, b)
        os.kill(os.getpid(), signal.SIGKILL)
        return done

    staging._exchange = exchanged
"""


def killed(target: Path, work: str, *args) -> None:
    code = KILLED + work
    p = subprocess.run(
        [sys.executable, "-c", code, str(target), *map(str, args)], cwd=ROOT, timeout=120
    )
    assert p.returncode == -9, "it was not killed at the move"


@pytest.fixture(scope="module")
def toy(toy_trained):
    return toy_trained.cfg, toy_trained.ckpt, toy_trained.out


def test_a_publication_killed_at_its_move_leaves_a_whole_model(toy, tmp_path):
    cfg, ckpt, run_out = toy
    target = tmp_path / "published" / "r"
    publish.export(ckpt, target, cfg, run_out)
    work = (
        "from nmt_lib import publish\nfrom nmt_lib.loading import load_trained\n"
        "ckpt, results = map(Path, sys.argv[2:4])\n"
        "publish.export(ckpt, target, load_trained(ckpt).cfg, results)\n"
    )
    killed(target, work, ckpt, run_out)
    loading.verify_published(target)  # the old model or the new one, whole
    assert loading.load_published(target).cfg == loading.load_trained(ckpt).cfg
    publish.export(ckpt, target, cfg, run_out)  # the next one removes what the killed one left
    assert sorted(p.name for p in target.parent.iterdir()) == ["r"]


def test_a_pack_killed_at_its_move_leaves_a_whole_pack_and_the_next_cleans_up(toy, tmp_path):
    cfg, ckpt, _ = toy
    target = tmp_path / "pk"
    pack(cfg.data, target)
    before = (target / "pack.json").read_text()
    work = (
        "from nmt_lib.loading import load_trained\nfrom nmt_lib.data import pack\n"
        "pack(load_trained(Path(sys.argv[2])).cfg.data, target)\n"
    )
    killed(target, work, ckpt)
    assert (target / "pack.json").read_text() == before  # whole (the same pack, here)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".pk.")]  # its copies
    pack(cfg.data, target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pk"]  # none left


def test_a_replacement_cut_between_two_renames_is_put_back_by_the_next(tmp_path):
    """Where the system cannot exchange two names: the old directory set aside, then killed."""
    out, old = tmp_path / "pk", tmp_path / ".pk.old"
    old.mkdir()
    (old / "f").write_text("old")  # as a kill between the two renames leaves it: no pk
    (tmp_path / ".pk.x1").mkdir()  # and a staging copy
    assert staging.stale(out, ".pk.") == [tmp_path / ".pk.x1"]
    assert (out / "f").read_text() == "old" and not old.exists()
    new = tmp_path / ".pk.new"
    new.mkdir()
    (new / "f").write_text("new")
    staging.swap_in(new, out)
    assert (out / "f").read_text() == "new" and not new.exists()
