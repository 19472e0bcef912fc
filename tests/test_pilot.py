"""The pilot (nmt_experiments.pilot): two arms on the toy corpus end to end, trained in segments to
exactly the weights of one uninterrupted run; the arithmetic of its extrapolation; and the committed
pilot against the code and its hypotheses."""

from __future__ import annotations

import csv
import json
import math
import os
from pathlib import Path

import pytest
import torch

from nmt_experiments.core.claims import FLOOR
from nmt_experiments.pilot import extrapolation as pilot_extrapolation
from nmt_experiments.pilot import fits
from nmt_experiments.pilot import report as pilot_report
from nmt_experiments.pilot import study as pilot
from nmt_lib.checkpoint import default_checkpoint_dir, load_checkpoint
from nmt_lib.config import home, load_profile
from nmt_lib.train import train_run

STUDY = """
name = "toy-pilot"
[data]
train = ["toy"]
src_words = 60
trg_words = 60
max_len = 12
batch_size = 16
sort_k_batches = 4
[model]
arch = "RNNencdec"
src_vocab = 63
trg_vocab = 63
m = 16
n = 24
n_align = 24
l = 12
output_rank = 16
init = "fanin"
[train]
optimizer = "adam"
lr = 1e-2
loss = "sentence"
eval_every = 2
dev_nll_sentences = 6
dev_bleu_sentences = 0
precision = "fp32"
threads = 1
[search]
beam = 3
[runs."a"]
train = { max_updates = 10 }
[runs."b"]
model = { n = 32 }
train = { max_updates = 4 }
"""


@pytest.fixture(scope="module")
def study(study_dir):
    with study_dir("pilot", STUDY, n_train=300, n_dev=12, n_test=12) as root:
        pilot.main(
            [
                "--profile",
                str(root / "pilot.toml"),
                "--out",
                str(root / "out"),
                "--data-dir",
                str(root / "wmt"),
                "--train",
                "--every",
                "4",
            ]
        )
        yield root


def test_points_are_every_k_updates_and_the_budget():
    assert pilot.points(10, 4) == [4, 8, 10]
    assert pilot.points(8, 4) == [4, 8]
    assert pilot.points(3, 4) == [3]


def test_each_arm_is_scored_at_its_points_with_its_hypotheses(study):
    out = study / "out"
    curves = pilot_extrapolation.arm_curves(out, study / "pilot.toml")
    assert [p["update"] for p in curves["a"]] == [4, 8, 10]
    assert [p["update"] for p in curves["b"]] == [4]
    short = curves["a"][0]["short_sentences"]
    assert 0 < short <= 12
    for name, c in curves.items():
        d = out / "runs" / name
        for p in c:
            assert len(pilot.hypotheses(d, "greedy", p["update"])) == short
            assert len(pilot.hypotheses(d, "beam", p["update"])) == short
            assert p["beam_bleu"] >= 0 and p["greedy_bleu"] >= 0
        # the dev NLL at a point is the training log's evaluation there
        log = [json.loads(x) for x in (d / "train_log.jsonl").read_text().splitlines()]
        ev = {r["update"]: r["dev_nll"] for r in log if r.get("kind") == "eval"}
        assert all(p["dev_nll"] == pytest.approx(ev[p["update"]], abs=1e-3) for p in c)
    rows = list(csv.DictReader((out / "curves.csv").open()))
    assert [(r["arm"], int(r["update"])) for r in rows] == [("a", 4), ("a", 8), ("a", 10), ("b", 4)]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["runs"] == ["a", "b"]
    assert manifest["git"]["commit"] and manifest["data_sha256"] and manifest["versions"]["torch"]
    assert manifest["hardware"]["cpu_count"] and set(manifest["wall_seconds"]["a"]) == {
        "train_s",
        "score_s",
    }
    assert manifest["configs"]["a"]["train"]["max_updates"] == 10
    assert (out / "pilot_curves.png").read_bytes()[:4] == b"\x89PNG"
    assert "# The pilot" in (out / "summary.md").read_text()


def test_training_in_segments_gives_the_uninterrupted_run(study, monkeypatch):
    """Arm a trained to 4, scored, to 8, scored, to 10: the same weights as 10 updates in one go."""
    monkeypatch.setenv("NMT_CACHE", str(study / "cache"))
    prof = load_profile(study / "pilot.toml", data={"data_dir": str(study / "wmt")})
    once = study / "once"
    train_run(prof.runs["a"], once, progress=False)
    a = load_checkpoint(default_checkpoint_dir(prof.runs["a"], once) / "last.pt")
    seg = study / "out" / "runs" / "a"
    b = load_checkpoint(default_checkpoint_dir(prof.runs["a"], seg) / "last.pt")
    assert a["update"] == b["update"] == 10
    assert a["model"].keys() == b["model"].keys()
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])


def test_a_second_run_trains_and_scores_nothing_again(study, monkeypatch):
    monkeypatch.setenv("NMT_CACHE", str(study / "cache"))
    out = study / "out"
    before = (out / "runs" / "a" / "curve.json").read_text()
    walls = pilot.train_arm(study / "pilot.toml", out, "a", study / "wmt", every=4)
    assert walls == {"train_s": 0.0, "score_s": 0.0}
    assert (out / "runs" / "a" / "curve.json").read_text() == before


def test_an_arm_scored_at_a_missing_point_resumes_there(study, monkeypatch):
    """A point whose scoring was interrupted (not in curve.json) is scored again, to the same
    numbers, from the checkpoint at the budget (the run is not trained again)."""
    monkeypatch.setenv("NMT_CACHE", str(study / "cache"))
    f = study / "out" / "runs" / "b" / "curve.json"
    before = json.loads(f.read_text())
    f.write_text("[]")
    pilot.train_arm(study / "pilot.toml", study / "out", "b", study / "wmt", every=4)
    after = json.loads(f.read_text())
    drop = ("greedy_seconds", "beam_seconds", "load_avg", "segment_updates", "segment_cpu_s")
    assert [{k: v for k, v in p.items() if k not in drop} for p in after] == [
        {k: v for k, v in p.items() if k not in drop} for p in before
    ]


def test_a_log_fit_recovers_a_known_line_and_solves_for_the_floor():
    ups = [1000, 2000, 4000, 8000]
    fit = fits.fit_log(ups, [1.0 + 0.8 * math.log(u) for u in ups])
    assert fit["b"] == pytest.approx(0.8) and fit["a"] == pytest.approx(1.0)
    assert fit["per_doubling"] == pytest.approx(0.8 * math.log(2)) and fit["rmse"] < 1e-9
    assert fits.reach(fit, 1.0 + 0.8 * math.log(20000)) == pytest.approx(20000)
    assert fits.reach({**fit, "b": 0.0}, 5.0) is None
    falling = fits.fit_log(ups, [9.0 - 0.5 * math.log(u) for u in ups])
    assert fits.reach(falling, 9.0) is None  # moving away from it
    assert fits.reach(falling, 9.0 - 0.5 * math.log(16000)) == pytest.approx(16000)
    # BLEU falling exponentially in the NLL: ln BLEU = 10 - 0.1 NLL reaches the floor at NLL 100 - 10 ln 5
    m = fits.bleu_vs_nll(
        [(x, math.exp(10 - 0.1 * x)) for x in (95.0, 100.0, 110.0)] + [(120.0, 0.0)]
    )
    assert m["points"] == 3 and m["slope"] == pytest.approx(-0.1) and m["rmse"] < 1e-9
    assert m["floor_nll"] == pytest.approx(100 - 10 * math.log(FLOOR))
    assert fits.bleu_vs_nll([(100.0, 1.0)]) is None
    does_not_fall = fits.bleu_vs_nll([(100.0, 1.0), (90.0, 0.5)])
    assert does_not_fall["floor_nll"] is None
    rows = [{"update": u} for u in (250, 500, 750, 1000)]
    assert [r["update"] for r in fits.second_half(rows)] == [500, 750, 1000]


def test_the_plan_costs_each_model_at_its_share_of_rnnencdec_50s_update(study):
    s = json.loads((study / "out" / "summary.json").read_text())
    p = s["plan"]
    cost = pilot_extrapolation.lite_cost()
    want = sum(n * cost[m] / cost["RNNencdec-50"] for m, n in pilot_extrapolation.PLAN.items())
    assert p["rnnencdec50_updates_per_plan_update"] == pytest.approx(want)
    # RNNsearch costs more per update than RNNencdec
    assert want > sum(pilot_extrapolation.PLAN.values()) - 1
    for name, a in p["arms"].items():
        row = s["arms"][name]
        assert a["core_hours"] == pytest.approx(a["updates"] * want * row["s_per_update"] / 3600)
        assert a["fits"] == (a["core_hours"] <= pilot_extrapolation.PLAN_CORE_HOURS)


# ------------------------------------------------------------------------ the committed pilot
COMMITTED = pilot_extrapolation.RESULTS / "summary.json"


@pytest.mark.skipif(not COMMITTED.is_file(), reason="no committed pilot")
def test_committed_summary_is_what_the_code_makes_of_the_runs():
    s = json.loads(COMMITTED.read_text())
    now = pilot_extrapolation.extrapolate()
    assert json.loads(json.dumps(now["arms"])) == s["arms"]
    assert json.loads(json.dumps(now["plan"])) == s["plan"]
    assert (pilot_extrapolation.RESULTS / "summary.md").read_text() == pilot_report.summary_md(s)
    nums = pilot_report.book_numbers()
    chapter = (home() / "notebooks" / "16_studies.py").read_text()  # the pilot's section
    names = [w.split("`")[1] for w in chapter.split("{glue:text}")[1:]]
    assert any(n.startswith("pilot_") for n in names)
    for name in (n for n in names if n.startswith("pilot_")):
        assert name in nums, f"chapter 16 names {name}, which book_numbers lacks"


DATA = os.environ.get("NMT_DATA")


@pytest.mark.skipif(
    not COMMITTED.is_file() or not DATA or not Path(DATA, "test-full").is_dir(),
    reason="needs the committed pilot and newstest2014 (NMT_DATA)",
)
def test_every_committed_point_rescores_from_its_hypotheses():
    rows = pilot.rescored()
    assert rows and all(r["rescored"] == r["recorded"] for r in rows)
