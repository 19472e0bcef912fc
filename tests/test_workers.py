"""A study's runs in processes of their own (nmt_experiments.core.workers), through the real command
(``python -m nmt_experiments.replicate --train … --jobs 2``) in a process group of its own: a
signal to the study stops every run with its checkpoint, a study killed outright leaves no run
training, a run killed on its own ends the study in one line per run, and a second replication of
the same results is refused in one line."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from nmt_experiments.replicate import replication as replicate
from nmt_lib.checkpoint import load_checkpoint
from nmt_lib.data import fixtures
from nmt_lib.train import train_run

ROOT = Path(__file__).resolve().parents[1]
RUNS = ("RNNsearch-50", "RNNencdec-50")

#: The study's command, its training slowed down after update 2, where each run's process leaves
#: its pid in ``$MARKS/<run>`` (spawned workers import this file as their ``__mp_main__``).
STUDY = """
import os, sys, time
from pathlib import Path
from nmt_lib.trainer import Trainer

_next_batch = Trainer.next_batch


def next_batch(self):
    if self.update >= 2 and os.environ.get("SLOW"):
        mark = Path(os.environ["MARKS"], self.cfg.name)
        if not mark.exists():
            mark.write_text(str(os.getpid()))
        time.sleep(0.2)
    return _next_batch(self)


Trainer.next_batch = next_batch
if __name__ == "__main__":
    from nmt_experiments.replicate.replication import main
    sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture
def study(tmp_path, monkeypatch):
    """``(start, args, marks)``: ``start(slow=True)`` starts the study's command in a new session."""
    smoke = (ROOT / "nmt_lib" / "profiles" / "smoke.toml").read_text()
    head = smoke.split("[runs.")[0].replace('name = "smoke"', 'name = "two-runs"')
    head = "".join(x for x in head.splitlines(True) if not x.startswith("publish"))
    head = head.replace("max_updates = 1000", "max_updates = 30")
    profile = tmp_path / "two-runs.toml"
    profile.write_text(
        head + '[runs."RNNsearch-50"]\n\n[runs."RNNencdec-50"]\nmodel = { arch = "RNNencdec" }\n'
    )
    (tmp_path / "study.py").write_text(STUDY)
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setenv("NMT_CACHE", str(tmp_path / "cache"))
    args = ["--train", str(profile), "--out", str(tmp_path / "results")]
    args += ["--data-dir", str(fixtures.toy_data_dir())]
    started = []

    def start(slow: bool = True, jobs: int = 2) -> subprocess.Popen:
        env = {**os.environ, "MARKS": str(marks), "SLOW": "1" if slow else ""}
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
        p = subprocess.Popen(
            [sys.executable, str(tmp_path / "study.py"), *args, "--jobs", str(jobs)],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            env=env,
            start_new_session=True,  # its own process group, the workers in it
        )
        started.append(p)
        return p

    yield start, args, marks
    for p in started:  # only the groups this test started
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def training(marks: Path, p: subprocess.Popen) -> dict[str, int]:
    """The pid of each run's process once both are training."""
    for _ in range(1200):
        pids = {r: (marks / r).read_text() for r in RUNS if (marks / r).is_file()}
        if len(pids) == len(RUNS) and all(pids.values()):
            return {r: int(v) for r, v in pids.items()}
        assert p.poll() is None, p.stderr.read()
        time.sleep(0.1)
    raise AssertionError("the runs did not start training")


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def gone(pids, seconds: float = 30) -> bool:
    end = time.time() + seconds
    while time.time() < end:
        if not any(alive(pid) for pid in pids):
            return True
        time.sleep(0.1)
    return False


def last_update(tmp_path: Path, run: str) -> int:
    (ckpt,) = (tmp_path / "cache" / "ckpt").glob(f"{run}-*/last.pt")
    return load_checkpoint(ckpt)["update"]


def test_a_signal_to_the_study_stops_every_run_at_a_checkpoint_and_the_rerun_resumes(
    study, tmp_path, capsys
):
    start, args, marks = study
    p = start()
    pids = training(marks, p)
    # a second replication of the same results: one line naming what is in use, and by whom
    assert replicate.main([*args, "--jobs", "2"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "in use by process" in err[0] and str(p.pid) in err[0], err
    os.kill(p.pid, signal.SIGTERM)  # a terminal's `kill PID`: to the study's process only
    assert p.wait(60) == 128 + signal.SIGTERM
    err = p.stderr.read()
    assert "Traceback" not in err, err
    assert gone(pids.values(), 5)
    for run in RUNS:  # each stopped at an update, with its checkpoint
        (line,) = [x for x in err.splitlines() if f"{run}: SIGTERM at update" in x]
        stopped = int(line.split("at update ")[1].split(":")[0])
        assert 2 <= stopped < 30 and last_update(tmp_path, run) == stopped
        assert not list((tmp_path / "cache" / "ckpt").glob(f"{run}-*/.train.lock"))
    rerun = start(slow=False, jobs=1)
    assert rerun.wait(300) == 0, rerun.stderr.read()
    # the resumed run is the uninterrupted one
    cfg = replicate.load(args[1], args[-1]).runs["RNNencdec-50"]
    straight = train_run(cfg, tmp_path / "straight", progress=False)
    want = load_checkpoint(Path(straight["checkpoint_dir"]) / "last.pt")["model"]
    (ckpt,) = (tmp_path / "cache" / "ckpt").glob("RNNencdec-50-*/last.pt")
    got = load_checkpoint(ckpt)["model"]
    assert all(torch.equal(got[k], want[k]) for k in want)


def test_a_study_killed_outright_leaves_no_run_training(study, tmp_path):
    start, _, marks = study
    p = start()
    pids = training(marks, p)
    os.kill(p.pid, signal.SIGKILL)
    p.wait(10)
    assert gone(pids.values(), 20)  # each noticed its parent gone, saved and ended
    for run in RUNS:
        assert last_update(tmp_path, run) >= 2
        assert not list((tmp_path / "cache" / "ckpt").glob(f"{run}-*/.train.lock"))


def test_a_run_killed_on_its_own_ends_the_study_in_one_line_per_run(study, tmp_path):
    start, _, marks = study
    p = start()
    pids = training(marks, p)
    os.kill(pids["RNNsearch-50"], signal.SIGKILL)  # the out-of-memory killer
    assert p.wait(60) == 1
    err = p.stderr.read()
    assert "Traceback" not in err and "BrokenProcessPool" not in err, err
    assert "RNNsearch-50: killed by SIGKILL" in err
    assert "RNNencdec-50: SIGTERM at update" in err  # the other stopped, its checkpoint kept
    assert last_update(tmp_path, "RNNencdec-50") >= 2
    assert gone(pids.values(), 5)
