"""Checkpoints (nmt_lib.checkpoint): exact resumption, atomic writes, clear errors, SIGKILL."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from nmt_lib import data
from nmt_lib.checkpoint import (
    CheckpointError,
    check_compatible,
    load_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from nmt_lib.config import to_dict
from nmt_lib.data import fixtures
from nmt_lib.paper.model import build_model
from nmt_lib.trainer import Trainer

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    root = tmp_path_factory.mktemp("toy")
    return (*fixtures.toy_run(root), root)


def new_trainer(cfg, prep, seed):
    """A fresh process's objects: new model (any init), optimizer and iterator."""
    torch.manual_seed(seed)
    it = data.TrainIterator.from_config(prep.train, cfg.data)
    return Trainer(cfg, build_model(cfg.model), it)


def test_resume_continues_exactly(toy, tmp_path):
    cfg, prep, _ = toy
    k = 6
    start = new_trainer(cfg, prep, cfg.train.seed)
    upe = start.iterator.updates_per_epoch
    # start 3 batches before the end of the first epoch: the k updates cross an epoch boundary
    pos = dict(start.iterator.state_dict(), batch=upe - 3)
    start.iterator.load_state_dict(pos)
    save_checkpoint(tmp_path / "start.pt", start.state_dict())

    straight = new_trainer(cfg, prep, 0)
    straight.load_state_dict(load_checkpoint(tmp_path / "start.pt"))
    losses_a = [straight.step()["loss"] for _ in range(k)]

    first = new_trainer(cfg, prep, 1)
    first.load_state_dict(load_checkpoint(tmp_path / "start.pt"))
    losses_b = [first.step()["loss"] for _ in range(k // 2)]
    save_checkpoint(tmp_path / "half.pt", first.state_dict())
    del first
    torch.manual_seed(999), np.random.seed(999), random.seed(999)  # disturb every RNG
    second = new_trainer(cfg, prep, 2)
    second.load_state_dict(load_checkpoint(tmp_path / "half.pt"), tmp_path / "half.pt")
    assert second.update == k // 2
    losses_b += [second.step()["loss"] for _ in range(k - k // 2)]

    assert losses_a == losses_b
    assert straight.iterator.state_dict() == second.iterator.state_dict()
    assert straight.iterator.epoch > 1 > pos["batch"] / upe
    for (n, p), q in zip(straight.model.named_parameters(), second.model.parameters(), strict=True):
        assert torch.equal(p, q), n
    sa, sb = straight.opt.state_dict()["state"], second.opt.state_dict()["state"]
    for i in sa:
        for key in sa[i]:
            assert torch.equal(torch.as_tensor(sa[i][key]), torch.as_tensor(sb[i][key]))


def test_rng_states_round_trip(tmp_path):
    torch.manual_seed(1), np.random.seed(2), random.seed(3)
    save_checkpoint(tmp_path / "c.pt", {"rng": rng_state()})
    expect = (torch.rand(4), np.random.rand(4), random.random())
    torch.manual_seed(7), np.random.seed(7), random.seed(7)
    set_rng_state(load_checkpoint(tmp_path / "c.pt")["rng"])
    got = (torch.rand(4), np.random.rand(4), random.random())
    assert torch.equal(expect[0], got[0]) and np.array_equal(expect[1], got[1])
    assert expect[2] == got[2]


def test_corrupt_checkpoints_name_the_file(tmp_path):
    good = tmp_path / "good.pt"
    save_checkpoint(good, {"update": 3, "weights": torch.ones(1000)})
    assert load_checkpoint(good)["update"] == 3
    blob = good.read_bytes()
    cases = {
        "truncated.pt": blob[: len(blob) // 2],
        "garbage.pt": os.urandom(4096),
        "empty.pt": b"",
    }
    for name, content in cases.items():
        (tmp_path / name).write_bytes(content)
        with pytest.raises(CheckpointError, match=name):
            load_checkpoint(tmp_path / name)
    torch.save({"something": "else"}, tmp_path / "foreign.pt")
    with pytest.raises(CheckpointError, match="foreign.pt.*not an nmt_lib checkpoint"):
        load_checkpoint(tmp_path / "foreign.pt")
    with pytest.raises(CheckpointError, match="missing.pt"):
        load_checkpoint(tmp_path / "missing.pt")
    # format 1 (torch.save's bytes alone, no sha256) is still read
    torch.save({"format": "nmt_lib.checkpoint/1", "update": 7}, tmp_path / "v1.pt")
    assert load_checkpoint(tmp_path / "v1.pt")["update"] == 7


def test_a_failed_save_keeps_the_previous_checkpoint(tmp_path):
    path = tmp_path / "last.pt"
    save_checkpoint(path, {"update": 1})
    with pytest.raises(Exception):  # noqa: B017 - whatever pickle raises
        save_checkpoint(path, {"update": 2, "bad": lambda: None})  # unpicklable
    assert load_checkpoint(path)["update"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]  # no temporary file left


def test_mismatched_checkpoints_are_refused(toy, tmp_path):
    cfg, prep, _ = toy
    tr = new_trainer(cfg, prep, 0)
    path = tmp_path / "last.pt"
    save_checkpoint(path, tr.state_dict())
    state = load_checkpoint(path)
    longer = replace(cfg, train=replace(cfg.train, max_updates=10**6, eval_every=7))
    check_compatible(state, longer, path)  # budgets and evaluation may change
    other_arch = replace(cfg, model=replace(cfg.model, arch="RNNencdec"))
    with pytest.raises(CheckpointError, match=r"last\.pt.*\n.*model\.arch"):
        new_trainer(other_arch, prep, 0).load_state_dict(state, path)
    other_data = replace(cfg, data=replace(cfg.data, max_len=30))
    with pytest.raises(CheckpointError, match="data.max_len"):
        check_compatible(state, other_data, path)
    # same config, weights of another shape (e.g. a hand-edited config): still a clear error
    state["model"]["decoder.W_s"] = torch.zeros(3, 3)
    with pytest.raises(CheckpointError, match=r"last\.pt: model weights"):
        new_trainer(cfg, prep, 0).load_state_dict(state, path)


def test_sigkill_mid_run_then_resume(toy, tmp_path):
    """A real training process killed with SIGKILL resumes from its last checkpoint and finishes."""
    cfg, _, root = toy
    out, cache = tmp_path / "results", root / "cache"
    env = {**os.environ, "NMT_CACHE": str(cache), "PYTHONPATH": str(ROOT)}
    base = [
        sys.executable,
        "-m",
        "nmt_lib",
        "train",
        "--profile",
        "smoke",
        "--run",
        "RNNsearch-50",
        "--data-dir",
        str(root / "wmt"),
        "--out",
        str(out),
        "--set",
        "train.threads=1",
        "--set",
        "train.precision='fp32'",
        "--set",
        "train.checkpoint_minutes=0.0001",
        "--set",
        "train.eval_every=10",
        "--set",
        "train.dev_bleu_sentences=2",
    ]
    log = out / "runs" / "RNNsearch-50" / "train_log.jsonl"
    proc = subprocess.Popen(
        [*base, "--set", "train.max_updates=100000"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.time() + 60
        while time.time() < deadline and proc.poll() is None:
            if log.is_file() and len(log.read_text().splitlines()) >= 8:
                break
            time.sleep(0.1)
        assert proc.poll() is None, proc.stderr.read().decode()
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        proc.kill()
    assert proc.returncode == -signal.SIGKILL
    (ckpt_dir,) = (cache / "ckpt").glob("RNNsearch-50-*")
    u = load_checkpoint(ckpt_dir / "last.pt")["update"]  # intact despite the kill
    assert u >= 1
    done = subprocess.run(
        [*base, "--set", f"train.max_updates={u + 3}"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "runs" / "RNNsearch-50" / "train_summary.json").read_text())
    assert summary["resumed_from_update"] == u and summary["updates"] == u + 3
    updates = [
        r["update"] for r in map(json.loads, log.read_text().splitlines()) if r["kind"] == "train"
    ]
    assert updates == list(range(1, u + 4))  # records after the checkpoint were dropped, no gaps
    assert json.loads((out / "runs" / "RNNsearch-50" / "config.json").read_text())["name"] == (
        "RNNsearch-50"
    )
    assert to_dict(cfg)["model"] == load_checkpoint(ckpt_dir / "last.pt")["config"]["model"]


def test_a_checkpoint_saved_with_every_architectures_model_keys_still_fits_its_run():
    """A checkpoint written before the model configs were split by family holds every
    architecture's keys: it fits the run whose own keys it matches, and only that one."""
    from nmt_lib.checkpoint import check_compatible
    from nmt_lib.config import RunConfig, TrainConfig, to_dict

    run = RunConfig(name="r", train=TrainConfig(max_updates=1))
    old = to_dict(run)
    old["model"] |= {"layers": 1, "heads": 4, "ff": 1024, "score": "general", "dropout": 0.0}
    check_compatible({"config": old}, run, "old.pt")
    old["model"]["n_align"] = 7
    with pytest.raises(CheckpointError, match="model.n_align"):
        check_compatible({"config": old}, run, "old.pt")


@pytest.mark.parametrize("arch", ["RNNsearch", "Seq2seq"])
def test_a_checkpoint_that_predates_a_setting_fits_its_run_with_the_default(arch):
    """A checkpoint written before ``model.dropout`` and ``train.label_smoothing`` existed fits
    the run with their defaults (the paper's: none), and no run with another value."""
    from nmt_lib.checkpoint import check_compatible
    from nmt_lib.config import RunConfig, TrainConfig, model_config

    run = RunConfig(name="r", model=model_config(arch=arch), train=TrainConfig(max_updates=1))
    old = to_dict(run)
    del old["model"]["dropout"], old["train"]["label_smoothing"]
    check_compatible({"config": old}, run, "old.pt")
    for other in (
        replace(run, model=replace(run.model, dropout=0.3)),
        replace(run, train=replace(run.train, label_smoothing=0.1)),
    ):
        with pytest.raises(CheckpointError, match="dropout|label_smoothing"):
            check_compatible({"config": old}, other, "old.pt")
