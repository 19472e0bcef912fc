"""Every BLEU an evaluation records scores again from its hypothesis files
(nmt_experiments.core.rescore), and a hypothesis file that is not the one scored is found out."""

import json
import shutil

from nmt_experiments.core import rescore
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
    assert (
        row["differ"] == [] and len(row["checked"]) >= 10
    )  # all, detok file, 2 parts, no_unk, length

    refs = [" ".join(r) for r in prep.test.ref_tok]  # BLEU 100: not what was recorded
    (d / "hyp.test.tok.txt").write_text("\n".join(refs) + "\n", encoding="utf-8")
    (differ,) = [r["differ"] for r in rescore.rescore_profile(tmp_path / "results")]
    assert {"all tok", "multi30k.test_2016_flickr tok", "by length stats_tok"} <= set(differ)
    assert not any("detok.txt" in w for w in differ)
    (d / "hyp.test.tok.txt").write_text("\n".join(refs[1:]) + "\n", encoding="utf-8")
    (row,) = rescore.rescore_profile(tmp_path / "results")
    assert row["damaged"].endswith("hyp.test.tok.txt: 39 lines, but its test set has 40 sentences")
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
    assert row["checked"] == [] and "elsewhere" in row["missing"]


def test_rescore_says_what_it_checked_and_names_a_missing_or_damaged_file(
    tmp_path, monkeypatch, capsys
):
    cfg, prep = fixtures.toy_run(tmp_path / "toy", max_updates=2)
    monkeypatch.setenv("NMT_CACHE", str(tmp_path / "toy" / "cache"))
    good = tmp_path / "good"
    d = good / "runs" / "RNNsearch-50"
    train_run(cfg, d, prep, progress=False)
    evaluate.evaluate_run(cfg, d, prep, nll_sentences=5)

    def run(*args) -> tuple[int, list[str]]:
        code = rescore.main([str(a) for a in args])
        out = capsys.readouterr()
        assert "Traceback" not in out.err + out.out
        return code, (out.out + out.err).strip().splitlines()

    code, lines = run(good)
    assert code == 0 and lines == [lines[0]] and "re-score exactly: all tok, all detok" in lines[0]
    # a mistyped results directory, one that loops
    code, lines = run(tmp_path / "mistyped")
    assert code == 2 and len(lines) == 1 and "mistyped: no results directory" in lines[0]
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    assert run(tmp_path / "loop")[0] == 2

    def damaged(change, says: str) -> None:
        bad = tmp_path / "bad"
        shutil.rmtree(bad, ignore_errors=True)
        shutil.copytree(good, bad)
        change(bad / "runs" / "RNNsearch-50")
        code, lines = run(bad)
        assert code == 1 and len(lines) == 1 and says in lines[0], lines

    damaged(lambda d: (d / "hyp.test.tok.txt").unlink(), "hyp.test.tok.txt: missing")
    damaged(  # an extra blank line
        lambda d: (d / "hyp.test.detok.txt").write_text(
            (d / "hyp.test.detok.txt").read_text() + "\n"
        ),
        "hyp.test.detok.txt: 21 lines, but its test set has 20 sentences",
    )

    def not_utf8(d):
        lines = (d / "hyp.test.tok.txt").read_bytes().split(b"\n")
        lines[2] += b"\xff"
        (d / "hyp.test.tok.txt").write_bytes(b"\n".join(lines))

    damaged(not_utf8, "hyp.test.tok.txt: line 3: not UTF-8 (byte 0xff)")
    damaged(
        lambda d: (d / "bleu.json").write_text((d / "bleu.json").read_text()[:50]),
        "bleu.json: line",
    )

    def unlisted_view(d):
        shutil.copytree(d, tmp_path / "view", ignore=shutil.ignore_patterns("views"))
        (d / "views").mkdir(exist_ok=True)
        shutil.copytree(tmp_path / "view", d / "views" / "newstest2099")
        shutil.rmtree(tmp_path / "view")

    bad = tmp_path / "bad"
    shutil.rmtree(bad)
    shutil.copytree(good, bad)
    unlisted_view(bad / "runs" / "RNNsearch-50")
    code, lines = run(bad)
    assert code == 1 and len(lines) == 2, lines  # the run, and its view named
    assert "views/newstest2099: a view its data.views does not list" in lines[1]
