"""The notebook runner: sources, parameters, clear errors, the results helpers (quick; one toy
training run, of the GPU reference script)."""

import csv
import json
import os

import jupytext
import pytest

from nmt_lib import replicate
from nmt_lib.config import ConfigError

PARAMS = {"profile", "train", "results_dir", "data_dir"}


def test_every_notebook_has_one_parameters_cell_with_the_declared_inputs():
    sources = replicate.notebooks()
    assert [p.stem[:2] for p in sources] == [f"{k:02d}" for k in range(1, len(sources) + 1)]
    for src in sources:
        nb = jupytext.read(src)
        cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(cells) == 1, src.name
        names = {line.split("=")[0].strip() for line in cells[0].source.splitlines() if "=" in line}
        assert names == PARAMS, src.name
        assert not any(c.get("outputs") for c in nb.cells if c.cell_type == "code")


def test_only_filters_and_rejects_unknown_names():
    assert [p.stem for p in replicate.notebooks("04")] == ["04_alignment"]
    with pytest.raises(replicate.NotebookError, match="matches no notebook"):
        replicate.notebooks("no-such-notebook")


def test_report_mode_never_trains_a_missing_result(tmp_path):
    with pytest.raises(replicate.ResultsMissing, match=r"--profile lite --train"):
        replicate.require_results(tmp_path / "lite", "manifest.json")
    (tmp_path / "manifest.json").write_text("{}")
    assert replicate.require_results(tmp_path, "manifest.json") == tmp_path


def test_a_failing_notebook_is_named_with_its_cell(tmp_path, monkeypatch, capsys):
    (tmp_path / "01_ok.py").write_text(
        '# %% tags=["parameters"]\nprofile = "smoke"\n\n# %%\nx = 1\n', encoding="utf-8"
    )
    (tmp_path / "02_bad.py").write_text(
        '# %% tags=["parameters"]\nprofile = "smoke"\n\n# %%\nraise ValueError("boom")\n',
        encoding="utf-8",
    )
    monkeypatch.setattr(replicate, "NOTEBOOKS", tmp_path)
    code = replicate.main(["--out-dir", str(tmp_path / "out")])
    err = capsys.readouterr()
    assert code == 1
    assert "02_bad.py" in err.err and "raise ValueError" in err.err and "boom" in err.err
    assert "[replicate] 1/2 01_ok.py ok" in err.out
    executed = json.loads((tmp_path / "out" / "01_ok.ipynb").read_text())
    tags = [c["metadata"].get("tags", []) for c in executed["cells"]]
    assert ["parameters", "remove-cell"] in tags and ["injected-parameters"] in tags


def test_two_parameters_cells_are_refused(tmp_path):
    src = tmp_path / "01_two.py"
    src.write_text('# %% tags=["parameters"]\na = 1\n\n# %% tags=["parameters"]\nb = 2\n')
    with pytest.raises(replicate.NotebookError, match="exactly one cell tagged 'parameters'"):
        replicate._to_notebook(src)


def test_tables_carry_the_papers_numbers_from_results_paper(tmp_path):
    paper = replicate.paper_table("table1")
    assert list(paper) == [*replicate.MODELS, "Moses"]
    assert set(replicate.paper_table("table2")) == set(replicate.MODELS)
    assert len(replicate.paper_table("figure3")) == 4
    rows = [{"model": "A", "All": 1.5, "n": 1000}, {"model": "B", "paper All": 2.0}]
    md = replicate.markdown_table(rows)
    assert md.splitlines()[0] == "| model | All | n | paper All |"
    assert md.splitlines()[2] == "| A | 1.5 | 1,000 |  |"
    replicate.write_table(tmp_path, "t", rows, "note")
    with open(tmp_path / "t.csv", encoding="utf-8") as f:
        assert [r["model"] for r in csv.DictReader(f)] == ["A", "B"]
    assert (tmp_path / "t.md").read_text(encoding="utf-8").endswith("note\n")


def fake_results(root, long_ok: dict, alpha):
    """A results dir with per-sentence BLEU statistics: 40 short sentences translated perfectly
    by every model and 40 long ones translated perfectly by the models with ``long_ok``, else
    replaced by junk (a weaker model also loses a third of the short ones)."""
    import random

    from nmt_lib import bleu

    rng = random.Random(0)
    words = [f"w{i}" for i in range(500)]
    refs = [" ".join(rng.choices(words, k=n)) for n in [15] * 40 + [55] * 40]
    for name in replicate.MODELS[:4]:
        weak = "encdec" in name
        hyps = [r if (i < 40 and not (weak and i % 3 == 0)) or (i >= 40 and long_ok[name])
                else " ".join(rng.choices(words, k=len(r.split()))) for i, r in enumerate(refs)]  # fmt: skip
        d = replicate.run_dir(root, name)
        d.mkdir(parents=True)
        stats = bleu.sentence_stats(hyps, refs, True)
        lengths = [len(r.split()) for r in refs]
        (d / "bleu_by_length.json").write_text(
            json.dumps({"src_len": lengths, "stats_tok": stats.tolist()})
        )
    att = [{"alpha": alpha, "hyp_tokens": ["w"] * (len(alpha) - 1) + ["</s>"]}, {"found": False}]
    (replicate.run_dir(root, "RNNsearch-50") / "attention.json").write_text(json.dumps(att))


def test_claims_verdicts_follow_the_numbers(tmp_path):
    import numpy as np

    diag = np.eye(9).tolist()
    ok = {"RNNencdec-30": False, "RNNsearch-30": True, "RNNencdec-50": False, "RNNsearch-50": True}
    fake_results(tmp_path / "a", ok, diag)
    verdicts = [r["verdict"] for r in replicate.claims(tmp_path / "a", n_samples=100)]
    assert verdicts == ["reproduced"] * 4

    # RNNsearch-50 loses the long sentences too; the alignment runs backwards
    fake_results(tmp_path / "b", {**ok, "RNNsearch-50": False}, np.eye(9)[::-1].tolist())
    rows = replicate.claims(tmp_path / "b", n_samples=100)
    assert [r["verdict"] for r in rows] == ["reproduced"] * 2 + ["not reproduced"] * 2
    assert "also falls" in rows[2]["reason"]

    # every model equal: no difference, no fall; uniform attention says nothing
    fake_results(tmp_path / "c", dict.fromkeys(ok, True), (np.ones((9, 9)) / 9).tolist())
    for name in replicate.MODELS[:4]:  # make every model the weak one
        src = replicate.run_dir(tmp_path / "c", "RNNencdec-50") / "bleu_by_length.json"
        (replicate.run_dir(tmp_path / "c", name) / "bleu_by_length.json").write_text(
            src.read_text()
        )
    rows = replicate.claims(tmp_path / "c", n_samples=100)
    # equal models do not "beat" each other: a difference must reach replicate.MARGIN BLEU
    assert [r["verdict"] for r in rows] == ["not reproduced"] * 3 + ["unclear"]
    assert all("too small" in r["reason"] for r in rows[:2])
    assert "diffuse" in rows[3]["reason"]


def test_alignment_stats_counts_moves_left():
    a = [[1, 0, 0, 0], [0, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 1]]
    s = replicate.alignment_stats(a)
    assert (s["words"], s["steps"], s["monotonic_steps"], s["moves_left"]) == (4, 3, 2, [1])
    assert s["peak"] == 1.0 and s["uniform"] == 0.25


@pytest.mark.parametrize(
    "profile",
    [
        p.parent.name
        for p in sorted((replicate.ROOT / "results").glob("*/manifest.json"))
        if (p.parent / "table1.csv").is_file()
    ],  # fmt: skip
)
def test_committed_tables_are_what_the_code_makes_of_the_committed_runs(profile):
    """Every committed table of results/<profile>/ is regenerated, equal, from its runs."""
    out = replicate.results_path(profile)
    made = {
        "table1": replicate.table1(out),
        "table2": replicate.table2(out),
        "claims": replicate.claims(out),
        "gap": replicate.gap_to_paper(out),
    }
    for name, rows in made.items():
        with open(out / f"{name}.csv", encoding="utf-8") as f:
            committed = list(csv.DictReader(f))
        cols = list(dict.fromkeys(k for r in rows for k in r))
        assert list(committed[0]) == cols, name
        assert committed == [{k: "" if r.get(k) is None else str(r[k]) for k in cols} for r in rows]


def test_gpu_reference_trains_one_run_from_a_pack_with_its_provenance(tmp_path):
    """bench/gpu_reference.py, as a GPU machine without the data runs it: one run of a profile
    from a pack, for a budget in minutes, its manifest naming the given commit and the pack's
    data files."""
    import subprocess
    import sys

    from nmt_lib import data, fixtures

    root = fixtures.write_toy_wmt(tmp_path / "wmt14")
    env = {**os.environ, "NMT_CACHE": str(tmp_path / "cache")}
    env.pop("NMT_DATA", None)
    cfg = replicate.load("smoke", root).runs["RNNsearch-50"].data
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NMT_CACHE", str(tmp_path / "cache"))
        pack = data.pack(cfg, tmp_path / "pack")
    env["NMT_CACHE"] = str(tmp_path / "other-cache")
    out = tmp_path / "results"
    cmd = [sys.executable, str(replicate.ROOT / "bench/gpu_reference.py"), "--profile", "smoke",
           "--pack", str(pack), "--minutes", "0.05", "--out", str(out), "--commit", "abc123"]  # fmt: skip
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


def test_the_readme_summary_is_what_the_committed_results_say():
    """README.md's "Results at a glance" is generated (python -m nmt_lib.replicate --readme)."""
    text = (replicate.ROOT / "README.md").read_text(encoding="utf-8")
    start, end = replicate.README_MARKS
    block = text.split(start + "\n", 1)[1].split(end, 1)[0]
    assert block == replicate.readme_results()
