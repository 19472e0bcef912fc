"""The budget study (nmt_experiments.budget): a two-arm study on the toy corpus end to end, the arithmetic
of its report, and the committed study against the code and the lite profile."""

from __future__ import annotations

import csv
import json
import math

import pytest

from nmt_experiments.budget import report as budget_report
from nmt_experiments.budget import study as budget
from nmt_experiments.core import arms
from nmt_experiments.core.recipe import RECIPE, recipe_differences
from nmt_lib import bleu
from nmt_lib.config import load_profile, run_from_dict
from nmt_lib.data import prepare

STUDY = """
name = "toy-study"
description = "two arms on the toy corpus"
[data]
train = ["toy"]
src_words = 60
trg_words = 60
max_len = 12
batch_size = 16
sort_k_batches = 4
[model]
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
max_updates = 12
eval_every = 4
dev_nll_sentences = 6
dev_bleu_sentences = 4
precision = "fp32"
threads = 1
[runs."adam"]
[runs."paper"]
train = { optimizer = "adadelta", lr = 1.0, loss = "sum" }
"""


@pytest.fixture(scope="module")
def study(study_dir):
    with study_dir("study", STUDY, n_train=300, n_dev=12, n_test=12) as root:
        budget.main(
            [
                "--profile",
                str(root / "study.toml"),
                "--out",
                str(root / "out"),
                "--data-dir",
                str(root / "wmt"),
                "--train",
            ]
        )
        yield root


def test_a_study_trains_every_arm_and_writes_its_report(study):
    out = study / "out"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["runs"] == ["adam", "paper"]
    assert manifest["git"]["commit"] and manifest["data_sha256"] and manifest["versions"]["torch"]
    rows = list(csv.DictReader((out / "arms.csv").open()))
    assert [r["arm"] for r in rows] == ["adam", "paper"]
    assert rows[0]["differs from the reference"] == "(reference)"
    assert rows[1]["differs from the reference"] == (
        "train.optimizer=adadelta, train.lr=1.0, train.loss=sum"
    )
    assert all(int(r["updates"]) == 12 for r in rows)
    final = json.loads((out / "runs" / "paper" / "final.json").read_text())
    assert final["dev_nll_sentences"] == 24 == final["dev_bleu_sentences"]  # 2 dev sets of 12
    curves = budget_report.curves(out)
    assert [r["update"] for r in curves["adam"]] == [4, 8, 12]
    assert all(
        a["minutes"] < b["minutes"]
        for a, b in zip(curves["adam"][:-1], curves["adam"][1:], strict=True)
    )
    assert (out / "budget_curves.png").read_bytes()[:4] == b"\x89PNG"
    # the report is a function of the runs: rewriting it changes nothing
    before = (out / "arms.csv").read_text()
    budget.main(["--out", str(out), "--profile", str(study / "study.toml")])
    assert (out / "arms.csv").read_text() == before


def test_interpolation_and_first_crossing():
    curve = [{"minutes": 1.0, "dev_nll": 10.0}, {"minutes": 3.0, "dev_nll": 6.0}]
    assert budget_report.at_minutes(curve, 2.0) == pytest.approx(8.0)
    assert budget_report.at_minutes(curve, 3.0) == pytest.approx(6.0)
    assert (
        budget_report.at_minutes(curve, 0.5) is None
        and budget_report.at_minutes(curve, 3.5) is None
    )
    assert budget_report.reach_minutes(curve, 7.0) == pytest.approx(2.5)
    assert (
        budget_report.reach_minutes(curve, 11.0) == 1.0
        and budget_report.reach_minutes(curve, 5.0) is None
    )


def test_log_linear_fit_recovers_a_known_curve():
    import math

    u = [250 * k for k in range(1, 20)]
    fit = budget_report.fit_log_linear(u, [300 - 25 * math.log(x) for x in u])
    assert fit["alpha"] == pytest.approx(300) and fit["beta"] == pytest.approx(25)
    assert fit["rmse"] < 1e-9


def test_recipe_differences_name_the_settings():
    prof = load_profile(budget.PROFILE)
    ref, paper = prof.runs["adam-1e-3"], prof.runs["paper"]
    assert recipe_differences(ref, ref) == ""
    diff = recipe_differences(paper, ref)
    assert "train.optimizer='adadelta' (arm: 'adam')" in diff and "train.loss='sum'" in diff
    assert "model." not in diff


committed = pytest.mark.skipif(
    not (budget_report.RESULTS / "manifest.json").is_file(), reason="no committed budget study"
)


@committed
def test_committed_study_tables_are_what_the_code_makes_of_its_runs():
    rows = budget_report.arm_table(budget_report.RESULTS)
    with open(budget_report.RESULTS / "arms.csv", encoding="utf-8") as f:
        saved = list(csv.DictReader(f))
    assert saved == [{k: "" if v is None else str(v) for k, v in r.items()} for r in rows]


@committed
def test_lite_trains_with_the_recipe_the_study_chose():
    manifest = json.loads((budget_report.RESULTS / "manifest.json").read_text(encoding="utf-8"))
    chosen = budget_report.findings(budget_report.RESULTS)["chosen"]
    arm = run_from_dict(manifest["configs"][chosen])
    for name, run in load_profile("lite").runs.items():
        assert recipe_differences(run, arm) == "", name
        assert run.search.normalize == budget_report.search_choice()["normalize"], name
    paper = budget_report.findings(budget_report.RESULTS).get("paper")
    assert paper and math.isfinite(paper["dev_nll"]) and paper["clip_rate"] > 0.9


def test_gpu_takes_lites_training_recipe_and_search():
    """The `gpu` profile differs from `lite` in its sizes and precision, not in how it learns."""
    lite = load_profile("lite").runs["RNNsearch-50"]
    for name, run in load_profile("gpu").runs.items():
        same = [k for k in RECIPE["train"] if k != "precision"]
        assert {k: getattr(run.train, k) for k in same} == {
            k: getattr(lite.train, k) for k in same
        }, name
        assert (run.search.normalize, run.data.batch_size) == (
            lite.search.normalize,
            lite.data.batch_size,
        ), name
        assert run.data.max_train_pairs == lite.data.max_train_pairs, name


def test_search_settings_are_compared_on_dev(study):
    rows = budget.search_study(study / "out", sentences=6, data_dir=study / "wmt")
    assert [r["search.normalize"] for r in rows] == [False, True]
    assert all(r["arm"] == budget_report.findings(study / "out")["chosen"] for r in rows)
    assert all(r["dev sentences"] == 6 and 0 <= r["brevity penalty"] <= 1 for r in rows)
    saved = list(csv.DictReader((study / "out" / "search.csv").open()))
    assert [r["dev BLEU"] for r in saved] == [str(r["dev BLEU"]) for r in rows]
    best = max(rows, key=lambda r: r["dev BLEU"])
    assert budget_report.search_choice(study / "out") == {"normalize": best["search.normalize"]}


def test_the_chosen_arm_trains_on_and_is_evaluated_on_the_test_set(study):
    out = study / "out"
    if not (out / "search.csv").is_file():
        budget.search_study(out, sentences=6, data_dir=study / "wmt")
    before = (out / "arms.csv").read_text()
    chosen = budget_report.findings(out)["chosen"]
    trained = json.loads((out / "runs" / chosen / "train_summary.json").read_text())["hours"]
    # a budget beyond the arm's own, however long its 12 updates took on a loaded machine
    ext = budget.extend_arm(out, minutes=60 * trained + 0.05, data_dir=study / "wmt")
    arm = ext["arm"]
    assert ext["summary"]["resumed_from_update"] == 12 and ext["summary"]["updates"] > 12
    assert ext["summary"]["stopped_by"] == "max_hours"
    d = out / "extended" / arm
    bleu = json.loads((d / "bleu.json").read_text())
    assert bleu["search"]["normalize"] == budget_report.search_choice(out)["normalize"]
    assert len((d / "hyp.test.tok.txt").read_text().splitlines()) == 12
    assert json.loads((d / "final.json").read_text())["dev_nll_sentences"] == 24
    assert (out / "arms.csv").read_text() == before  # the study's arms are left as they were
    assert (out / "runs" / arm / "bleu.json").is_file()  # and the arm itself was scored on test


def test_sharing_cost_times_one_and_two_processes(study):
    r = budget.sharing_cost(
        study / "study.toml", study / "out", steps=3, data_dir=str(study / "wmt")
    )
    assert r["arm"] == "adam" and r["alone_s_per_update"] > 0 and r["shared_s_per_update"] > 0
    assert json.loads((study / "out" / "sharing.json").read_text()) == r


def test_the_same_recipe_trains_rnnencdec_from_scratch(study):
    out = study / "out"
    if not (out / "search.csv").is_file():
        budget.search_study(out, sentences=6, data_dir=study / "wmt")
    ext = budget.extend_arm(out, minutes=0.03, data_dir=study / "wmt", arch="RNNencdec")
    d = out / "extended" / f"{ext['arm']}-RNNencdec"
    assert ext["summary"]["resumed_from_update"] is None and ext["summary"]["updates"] > 0
    assert json.loads((d / "config.json").read_text())["model"]["arch"] == "RNNencdec"
    assert json.loads((d / "walls.json").read_text())["train_s"] > 0


def test_extrapolation_and_paired_difference():
    assert budget_report.minutes_for_bleu([(10, 2.0), (40, 6.0)], 10.0) == pytest.approx(160.0)
    assert budget_report.minutes_for_bleu([(10, 6.0), (40, 6.0)], 10.0) is None
    import numpy as np

    rng = np.random.default_rng(0)
    stats = []
    for _ in range(2):
        s = rng.integers(1, 20, size=(50, 10))
        s[:, 0] = s[:, 1] = 20  # hypothesis and reference lengths
        s[:, 6:] = 20
        stats.append(s)
    d, (lo, hi) = bleu.paired_difference(stats[0], stats[0])
    assert d == 0 and lo == hi == 0  # a system against itself: no difference in any resample
    d, (lo, hi) = bleu.paired_difference(stats[0], stats[1])
    assert lo <= d <= hi


@committed
def test_noise_floor_is_the_largest_difference_between_replicates():
    """The replicate pairs differ in the loss's scale only and clipped every update; the floor is the
    largest of their dev NLL differences, recomputed here from the committed arms.csv."""
    result = budget_report.noise_floor(budget_report.RESULTS)
    assert result["pairs"] == list(budget_report.REPLICATES)
    for a, b in result["pairs"]:
        assert (
            budget_report.clipped_share(budget_report.RESULTS, a)
            == budget_report.clipped_share(budget_report.RESULTS, b)
            == 1
        )
    with open(budget_report.RESULTS / "arms.csv", encoding="utf-8") as f:
        rows = {r["arm"]: r for r in csv.DictReader(f)}
    diffs = [
        abs(float(rows[a][f"dev NLL @{m:g} min"]) - float(rows[b][f"dev NLL @{m:g} min"]))
        for a, b in budget_report.REPLICATES
        for m in budget_report.COMPARE_AT
    ]
    assert result["floor"] == pytest.approx(max(diffs), abs=0.011)  # arms.csv rounds to 0.01
    assert len(result["differences"]) == len(diffs)


@committed
def test_noise_floor_refuses_pairs_that_are_not_replicates():
    with pytest.raises(ValueError, match="more than train.loss"):
        budget_report.noise_floor(budget_report.RESULTS, pairs=(("adam-1e-3", "adam-3e-3"),))
    # the same recipe up to the loss, but not every update clipped: different steps, left out
    unclipped = budget_report.noise_floor(
        budget_report.RESULTS, pairs=(("adam-1e-3", "adam-1e-3-loss-token"),)
    )
    assert unclipped == {"floor": None, "differences": [], "pairs": []}


def test_an_arm_whose_checkpoint_is_gone_is_trained_again_to_the_same_numbers(study, tmp_path):
    """Checkpoints are not results: on a machine (or in a session) without them, the search
    trains the arm again, which must end at the dev NLL its committed summary records."""
    prof = load_profile(
        study / "study.toml", data={"data_dir": str(study / "wmt"), "cache_dir": str(tmp_path)}
    )
    run = prof.runs["adam"]
    prep = prepare(run.data)
    model = arms.trained_arm(study / "out" / "runs" / "adam", run, prep)
    again = json.loads((tmp_path / "retrain" / "adam" / "train_summary.json").read_text())
    first = json.loads((study / "out" / "runs" / "adam" / "train_summary.json").read_text())
    assert again["best_dev_nll"] == first["best_dev_nll"] and model is not None
    assert arms.trained_arm(tmp_path / "retrain" / "adam", run, prep) is not None  # no retrain
