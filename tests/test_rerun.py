"""Budgets in updates and the rerun check (nmt_experiments.replicate.rerun): a run's first updates trained
again on the same machine give the same log, record by record; another precision is measured and
said so; the committed runs' budgets are described from their records."""

import json

from nmt_experiments.core.results import results_path, run_dir
from nmt_experiments.replicate import rerun
from nmt_lib.data import prepare
from nmt_lib.profile import load_runs
from nmt_lib.train import train_run


def test_the_first_updates_trained_again_give_the_same_log(tmp_path):
    every = {
        "max_updates": 12,
        "eval_every": 4,
    }  # a training record every update, an evaluation every 4
    run = load_runs("smoke", runs=["RNNsearch-50"], train=every).runs["RNNsearch-50"]
    committed = run_dir(tmp_path, "RNNsearch-50")
    train_run(run, committed, prep=prepare(run.data), checkpoint_dir=tmp_path / "a", progress=False)
    c = rerun.check(
        "smoke", "RNNsearch-50", 8, tmp_path, checkpoint_dir=tmp_path / "b", eval_every=4
    )
    assert c["updates"] == 8 and c["records_compared"] > 1 and c["identical"]
    assert c["max_train_nll_diff"] == 0 and json.loads(
        (tmp_path / "rerun" / "RNNsearch-50" / "check.json").read_text()
    )
    assert "log records identical" in rerun.check_text(tmp_path)
    # another machine in another precision: the difference is measured and explained
    f = tmp_path / "rerun" / "RNNsearch-50" / rerun.CHECK
    last = {"update": 8, "committed": 50.0, "rerun": 50.5}
    other = {**c, "identical": False, "max_train_nll_diff": 0.01, "max_dev_nll_diff": 0.5}
    other["last_dev_nll"] = last
    other["committed"] = {"precision": "bf16", "cpu_model": "AMD EPYC"}
    other["seconds_per_update"] = {"committed": 0.1, "rerun": 0.2}
    f.write_text(json.dumps(other))
    text = rerun.check_text(tmp_path)
    assert "dev NLL by at most 0.500" in text and "bf16 and float32 round" in text
    assert rerun.hours_text(tmp_path, 3.0).startswith("about 6.0 on one fp32 core")


def test_the_budgets_of_runs_trained_by_time_are_described_from_their_records():
    """lite's committed runs were budgeted by time: their seeds' update counts differ, and the
    profile budgets each by the count it made."""
    text = rerun.budget_text(results_path("lite"), "lite")
    spread = rerun.seed_updates(results_path("lite"))
    assert all(len(set(u)) > 1 for u in spread.values())
    assert "machine load, not training noise" in text and "budgets each run by the updates" in text
    assert rerun.budget_text(results_path("smoke"), "smoke") == ""  # budgeted in updates
