"""Every BLEU an evaluation records scores again from its hypothesis files
(nmt_experiments.rescore), and a hypothesis file that is not the one scored is found out."""

import json

import pytest

from nmt_experiments import rescore
from nmt_lib import data, evaluate
from nmt_lib.config import load_profile
from nmt_lib.data import fixtures
from nmt_lib.train import train_run


def test_an_evaluation_rescores_from_its_files_and_a_changed_file_does_not(tmp_path, monkeypatch):
    root = fixtures.write_toy_multi30k(tmp_path / "m30k")  # two test parts: each part's BLEU too
    monkeypatch.setenv("NMT_DATA", str(root))
    monkeypatch.setenv("NMT_CACHE", str(tmp_path / "cache"))
    m30k = load_profile("studies/multi30k").runs["RNNsearch-50-s1"].data
    cfg = load_profile(
        "smoke",
        data={k: getattr(m30k, k) for k in ("train", "dev", "test")},
        train={"threads": 1, "precision": "fp32", "device": "cpu", "max_updates": 2},
    ).runs["RNNsearch-50"]
    prep = data.prepare(cfg.data, workers=1, progress=False)
    d = tmp_path / "results" / "runs" / "RNNsearch-50"
    train_run(cfg, d, prep, progress=False)
    evaluate.evaluate_run(cfg, d, prep, nll_sentences=5)
    (row,) = rescore.rescore_profile(tmp_path / "results")
    assert row["differ"] == [] and row["checks"] >= 10  # all, detok file, 2 parts, no_unk, length

    refs = [" ".join(r) for r in prep.test.ref_tok]  # BLEU 100: not what was recorded
    (d / "hyp.test.tok.txt").write_text("\n".join(refs) + "\n", encoding="utf-8")
    (differ,) = [r["differ"] for r in rescore.rescore_profile(tmp_path / "results")]
    assert {"all tok", "multi30k.test_2016_flickr tok", "by length stats_tok"} <= set(differ)
    assert not any("detok.txt" in w for w in differ)
    (d / "hyp.test.tok.txt").write_text("\n".join(refs[1:]) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="hyp.test.tok.txt: 39 lines, but its test set has 40"):
        rescore.rescore_profile(tmp_path / "results")
    (d / "hyp.test.tok.txt").write_text("\n".join(refs) + "\n", encoding="utf-8")
    saved = json.loads((d / "bleu.json").read_text())
    saved["no_unk"]["tok"]["score"] += 1e-12  # to the last digit
    (d / "bleu.json").write_text(json.dumps(saved), encoding="utf-8")
    (differ,) = [r["differ"] for r in rescore.rescore_profile(tmp_path / "results")]
    assert "no_unk tok" in differ
    # where its data is not (another data directory, nothing cached): said, not scored
    monkeypatch.setenv("NMT_DATA", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("NMT_CACHE", str(tmp_path / "cache2"))
    (row,) = rescore.rescore_profile(tmp_path / "results")
    assert row["checks"] == 0 and "elsewhere" in row["missing"]
