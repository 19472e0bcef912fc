"""Replicating a profile (nmt_experiments.replicate) and where its results live (nmt_experiments.core.results): report
mode's check, one toy training run of the GPU reference script with its provenance."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nmt_experiments.comparison import report, runs
from nmt_experiments.core import provenance, tables
from nmt_experiments.core.results import ResultsMissing, require_results
from nmt_experiments.replicate import lexicon
from nmt_experiments.replicate import replication as replicate
from nmt_lib import data, publish
from nmt_lib.config import ConfigError
from nmt_lib.data import fixtures

ROOT = Path(__file__).resolve().parent.parent


def test_report_mode_never_trains_a_missing_result(tmp_path):
    with pytest.raises(ResultsMissing, match=r"tools/notebooks.py --profile lite --train"):
        require_results(tmp_path / "lite", "manifest.json")
    (tmp_path / "manifest.json").write_text("{}")
    assert require_results(tmp_path, "manifest.json") == tmp_path


def test_the_readme_command_wants_readme(capsys):
    with pytest.raises(SystemExit):
        replicate.main([])
    assert "tools/notebooks.py" in capsys.readouterr().err


def test_gpu_reference_trains_one_run_from_a_pack_with_its_provenance(tmp_path):
    """bench/gpu_reference.py, as a GPU machine without the data runs it: one run of a profile
    from a pack, for a budget in minutes, its manifest naming the given commit and the pack's
    data files."""
    root = fixtures.write_toy_wmt(tmp_path / "wmt14")
    env = {**os.environ, "NMT_CACHE": str(tmp_path / "cache")}
    env.pop("NMT_DATA", None)
    cfg = replicate.load("smoke", root).runs["RNNsearch-50"].data
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NMT_CACHE", str(tmp_path / "cache"))
        pack = data.pack(cfg, tmp_path / "pack")
    env["NMT_CACHE"] = str(tmp_path / "other-cache")
    out = tmp_path / "results"
    cmd = [
        sys.executable,
        str(ROOT / "bench/gpu_reference.py"),
        "--profile",
        "smoke",
        "--pack",
        str(pack),
        "--minutes",
        "0.05",
        "--out",
        str(out),
        "--commit",
        "abc123",
    ]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["runs"] == ["RNNsearch-50"] and manifest["git"]["commit"] == "abc123"
    assert manifest["configs"]["RNNsearch-50"]["train"]["max_hours"] == pytest.approx(0.05 / 60)
    assert manifest["data_sha256"] == data.read_pack(pack)["data_sha256"]
    assert "train/toy.en" in manifest["data_sha256"]
    summary = json.loads((out / "runs/RNNsearch-50/train_summary.json").read_text("utf-8"))
    assert summary["stopped_by"] == "max_hours"
    assert (out / "runs/RNNsearch-50/bleu.json").is_file()
    with pytest.raises(ConfigError, match=r"no run\(s\) \['RNNsearch-99'\]"):
        replicate.load("smoke", root, runs=["RNNsearch-99"])


def test_a_study_profile_of_other_architectures_replicates_end_to_end(
    tmp_path, monkeypatch, capsys
):
    """``python -m nmt_experiments.replicate --train PROFILE`` on a profile of the models before and after
    the paper (here two of them, tiny, on the toy corpus): each is trained, decoded and evaluated
    through the same commands as RNNsearch, and the results directory gets its manifest."""
    smoke = (ROOT / "nmt_lib" / "profiles" / "smoke.toml").read_text()
    head = smoke.split("[runs.")[0].replace('name = "smoke"', 'name = "mini-compare"')
    head = "".join(x for x in head.splitlines(True) if not x.startswith("publish"))  # smoke's runs
    head = head.replace("max_updates = 1000", "max_updates = 50")  # two log windows of 25
    profile = tmp_path / "mini-compare.toml"
    profile.write_text(
        head + '[runs."Luong-dot-s1"]\nmodel = { arch = "Luong", score = "dot" }\n\n'
        '[runs."Transformer-s1"]\nmodel = { arch = "Transformer", heads = 2, ff = 32 }\n\n'
        '[runs."Luong-dot-s2"]\nmodel = { arch = "Luong", score = "dot" }\n'
        "train = { seed = 2 }\ndata = { seed = 2 }\n"
    )
    monkeypatch.setenv("NMT_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "results"
    code = replicate.main(
        [
            "--train",
            str(profile),
            "--out",
            str(out),
            "--data-dir",
            str(fixtures.toy_data_dir()),
        ]
    )
    assert code == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["runs"] == ["Luong-dot-s1", "Transformer-s1", "Luong-dot-s2"]
    for name, arch in (("Luong-dot-s1", "Luong"), ("Transformer-s1", "Transformer")):
        run = replicate.run_dir(out, name)
        hours = json.loads((run / "train_summary.json").read_text())["hours"]
        assert manifest["wall_seconds"][name]["train_s"] == round(hours * 3600, 1)  # the clock
        assert manifest["configs"][name]["model"]["arch"] == arch
        bleu = json.loads((run / "bleu.json").read_text())
        assert bleu  # decoded and scored like the paper's models
    rows = tables.comparison_table(out)  # the comparison chapter's table, from the run's files
    assert [(r["model"], r["arch"]) for r in rows] == [
        ("Luong-dot-s1", "Luong"),
        ("Transformer-s1", "Transformer"),
        ("Luong-dot-s2", "Luong"),
    ]
    for r in rows:
        assert r["updates"] == 50 and r["parameters (M)"] > 0 and r["train tok/s"] > 0
        assert r["dev NLL"] > 0 and 0 <= r["All"] <= 100 and r["results"] == "results"
    # the chapter's tables: one row per model, its seeds together, with what each attends with
    rows = runs.table(out)
    assert [(r["model"], r["seeds"], r["updates"]) for r in rows] == [
        ("Luong-dot", 2, 50),
        ("Transformer", 1, 50),
    ]
    assert [r["attention"] for r in rows] == [
        "Luong: dot, from h_t",
        "multi-head scaled dot-product",
    ]
    assert report.main(["--out", str(out)]) == 0
    for name in ("comparison", "recipes", "claims", "outputs"):
        assert (out / f"{name}.md").is_file()

    # resumed after both evaluations: neither is decoded again, and the manifest keeps their times;
    # a run whose evaluation is missing is evaluated again, alone
    calls = []
    evaluate = replicate.evaluate_run
    monkeypatch.setattr(
        replicate,
        "evaluate_run",
        lambda run, *a, **k: calls.append(run.name) or evaluate(run, *a, **k),
    )
    (replicate.run_dir(out, "Transformer-s1") / "bleu.json").unlink()
    summary = replicate.run_dir(out, "Luong-dot-s1") / "train_summary.json"
    before = summary.read_bytes()
    capsys.readouterr()
    assert (
        replicate.main(
            [
                "--train",
                str(profile),
                "--out",
                str(out),
                "--data-dir",
                str(fixtures.toy_data_dir()),
            ]
        )
        == 0
    )
    assert calls == ["Transformer-s1"]
    said = capsys.readouterr().out  # an evaluated run is not announced as training
    assert "Luong-dot-s1: evaluated already" in said and "Luong-dot-s1: training" not in said
    assert summary.read_bytes() == before  # not resumed: no session of 0 updates recorded
    again = json.loads((out / "manifest.json").read_text())
    kept = again["wall_seconds"]["Luong-dot-s1"]
    assert kept["evaluate_s"] == round(
        json.loads((replicate.run_dir(out, "Luong-dot-s1") / "bleu.json").read_text())["seconds"], 1
    )
    assert kept["train_s"] > 0 and again["configs"] == manifest["configs"]

    # a fresh clone of these results (no checkpoint at hand): nothing is trained or decoded again,
    # but a run whose record is not whole (here, an evaluation with other search settings) is
    toy = str(fixtures.toy_data_dir())  # the data where it was
    monkeypatch.setenv("NMT_CACHE", str(tmp_path / "fresh-cache"))
    logs = {
        n: (replicate.run_dir(out, n) / "train_log.jsonl").read_text() for n in manifest["runs"]
    }
    bleu = replicate.run_dir(out, "Luong-dot-s2") / "bleu.json"
    b = json.loads(bleu.read_text())
    bleu.write_text(json.dumps({**b, "search": {**b["search"], "beam": 1}}))
    assert replicate.main(["--train", str(profile), "--out", str(out), "--data-dir", toy]) == 0
    assert calls == ["Transformer-s1", "Luong-dot-s2"]
    for n in ("Luong-dot-s1", "Transformer-s1"):
        assert (replicate.run_dir(out, n) / "train_log.jsonl").read_text() == logs[n]
    assert json.loads((out / "manifest.json").read_text())["wall_seconds"]["Luong-dot-s1"] == kept


def test_the_unk_dictionary_learns_the_toy_lexicon_and_is_measured_on_the_runs(
    tmp_path, monkeypatch
):
    """``python -m nmt_experiments.replicate --unk-dictionary smoke`` on the smoke results: every entry
    counted on the toy corpus is its generator's translation of the word, the plain replacement's
    BLEU is the one the evaluation recorded, and the translations through the dictionary are
    scored for every run with ``<unk>`` replaced."""
    monkeypatch.setenv("NMT_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "smoke"
    shutil.copytree(ROOT / "results" / "smoke", out)
    assert replicate.main(["--unk-dictionary", "smoke", "--out", str(out)]) == 0
    r = json.loads((out / lexicon.UNK_DICTIONARY).read_text())
    assert r["entries"] and all(fixtures.DICTIONARY[s] == t for s, t in r["entries"].items())
    replaced = [
        n
        for n in r["runs"]
        if (replicate.run_dir(out, n) / "hyp.test.unk_replaced.tok.txt").is_file()
    ]
    assert replaced and sorted(r["runs"]) == sorted(replaced)
    for name, x in r["runs"].items():
        bleu = json.loads((replicate.run_dir(out, name) / "bleu.json").read_text())
        assert x["unk_replaced"]["tok"]["score"] == bleu["unk_replaced"]["tok"]["score"]
        assert 0 < x["looked_up"] <= x["copied"]
        assert x["dictionary"]["tok"]["score"] > x["unk_replaced"]["tok"]["score"]
    for name in replaced:  # nothing to measure: a clear line and no file
        (replicate.run_dir(out, name) / "hyp.test.unk_replaced.tok.txt").unlink()
    (out / lexicon.UNK_DICTIONARY).unlink()
    assert replicate.main(["--unk-dictionary", "smoke", "--out", str(out)]) == 1
    assert not (out / lexicon.UNK_DICTIONARY).exists()


def test_the_manifests_commit_is_dirty_for_code_changes_not_for_results(tmp_path, monkeypatch):
    """A regeneration deletes and rewrites ``results/``: that leaves the commit clean; a change
    to the code does not."""

    def git(*args):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=tmp_path,
            check=True,
            capture_output=True,
        )

    for f in ("nmt_lib/train.py", "results/lite/table1.csv"):
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("a\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "c")
    monkeypatch.setattr(provenance, "home", lambda: tmp_path)
    assert provenance.git_state()["dirty"] is False
    (tmp_path / "results/lite/table1.csv").unlink()  # a regeneration starts from no runs
    (tmp_path / "results/lite/new.csv").write_text("b\n")
    assert provenance.git_state()["dirty"] is False
    (tmp_path / "nmt_lib/train.py").write_text("b\n")
    state = provenance.git_state()
    assert state["dirty"] is True and len(state["commit"]) == 40


def test_a_published_run_whose_weights_match_its_results_is_not_trained_again(
    tmp_path, monkeypatch
):
    """A clone of results with a run's published weights and no checkpoint: the run is recorded,
    not trained again; weights that another training of it left (their card is not the one its
    results make) are published again, which needs its checkpoint, so it trains."""
    monkeypatch.setenv("NMT_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "smoke"
    shutil.copytree(ROOT / "results" / "smoke", out)
    prof = replicate.load("smoke")
    config = replicate.run_dir(out, "RNNsearch-50*") / "config.json"
    c = json.loads(config.read_text(encoding="utf-8"))
    config.write_text(
        json.dumps({**c, "data": {**c["data"], "data_dir": str(fixtures.toy_data_dir())}})
    )

    def train_run(*a, **k):
        raise AssertionError("trained")

    def prepare(*a, **k):
        raise AssertionError("prepared")

    monkeypatch.setattr(replicate, "train_run", train_run)
    real_prepare = replicate.prepare
    monkeypatch.setattr(replicate, "prepare", prepare)  # a recorded run needs no data prepared
    name, walls = replicate.train_and_evaluate(prof, out, None, "RNNsearch-50*")
    assert name == "RNNsearch-50*" and walls["evaluate_s"] > 0
    monkeypatch.setattr(replicate, "prepare", real_prepare)
    card = replicate.published_dir("smoke", name, out) / publish.CARD
    score = json.loads((replicate.run_dir(out, name) / "bleu.json").read_text())["all"]["tok"][
        "score"
    ]
    text = card.read_text(encoding="utf-8")
    assert f"{score:.2f}" in text  # the card gives the run's test BLEU: make it another run's
    card.write_text(text.replace(f"{score:.2f}", f"{score - 1:.2f}"), encoding="utf-8")
    with pytest.raises(AssertionError, match="trained"):
        replicate.train_and_evaluate(prof, out, None, "RNNsearch-50*")


def test_a_study_trained_a_few_runs_at_a_time_gets_its_manifest_with_the_last(
    tmp_path, monkeypatch
):
    """``--train PROFILE --runs …``: only those runs; the manifest waits for the profile's last
    run, and then records the earlier ones too, from another session without their checkpoints."""
    smoke = (ROOT / "nmt_lib" / "profiles" / "smoke.toml").read_text()
    head = smoke.split("[runs.")[0].replace('name = "smoke"', 'name = "two-runs"')
    head = "".join(x for x in head.splitlines(True) if not x.startswith("publish"))
    head = head.replace("max_updates = 1000", "max_updates = 10")
    profile = tmp_path / "two-runs.toml"
    profile.write_text(
        head + '[runs."RNNsearch-50"]\n\n[runs."RNNencdec-50"]\nmodel = { arch = "RNNencdec" }\n'
    )
    monkeypatch.setenv("NMT_CACHE", str(tmp_path / "cache"))
    out, toy = tmp_path / "results", str(fixtures.toy_data_dir())
    args = ["--train", str(profile), "--out", str(out), "--data-dir", toy, "--runs"]
    first, later = ({"commit": c * 40, "dirty": False} for c in "ab")
    monkeypatch.setattr(replicate, "git_state", lambda: first)
    assert replicate.main([*args, "RNNencdec-50"]) == 0
    assert (out / "runs" / "RNNencdec-50" / "bleu.json").is_file()
    assert not (out / "runs" / "RNNsearch-50").exists() and not (out / "manifest.json").exists()
    monkeypatch.setenv("NMT_CACHE", str(tmp_path / "next-session"))  # its checkpoint is gone
    monkeypatch.setattr(replicate, "git_state", lambda: later)  # the code changed in between
    assert replicate.main([*args, "RNNsearch-50"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert sorted(manifest["wall_seconds"]) == ["RNNencdec-50", "RNNsearch-50"]
    # each run's own commit: the manifest's, and the earlier session's for the run it trained
    made = json.loads((out / "runs" / "RNNsearch-50" / "made.json").read_text())
    assert made["git"] == later == manifest["git"] and "cpu_model" in made
    assert made["cpu_flags_simd"] == manifest["hardware"]["cpu_flags_simd"]
    assert manifest["git_runs"] == {"RNNencdec-50": {"what": "trained and evaluated", **first}}
    with pytest.raises(ConfigError, match=r"--runs: two-runs has no run RNNsearch-99"):
        replicate.main([*args, "RNNsearch-99"])
