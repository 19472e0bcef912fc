"""The Multi30k testbed's report (nmt_experiments.comparison.multi30k) on fake results: BLEU per Flickr
test set, and the claims judged on each set's sentences alone, at the captions' lengths."""

import json
import random

import numpy as np
import pytest

from nmt_experiments.comparison import multi30k
from nmt_experiments.core.results import run_dir
from nmt_lib import bleu

WORDS = [f"w{i}" for i in range(300)]
# each Flickr set: 30 captions of 8 words and 10 of 22 (Figure 2's restated lengths: <10, >=20)
LENGTHS = ([8] * 30 + [22] * 10) * 2
REFS = [" ".join(random.Random(k).choices(WORDS, k=n)) for k, n in enumerate(LENGTHS)]
PARTS = [multi30k.PARTS[0]] * 40 + [multi30k.PARTS[1]] * 40


def fake(root, models: dict):
    """``models``: name -> (model config, share translated right on 2016's set, on 2017's)."""
    runs, configs = [], {}
    for name, (cfg, ok16, ok17) in models.items():
        rng = random.Random(name)
        hyps = [
            r if (i % 40) < 40 * (ok16 if i < 40 else ok17) else " ".join(rng.choices(WORDS, k=9))
            for i, r in enumerate(REFS)
        ]
        run = f"{name}-s1"
        d = run_dir(root, run)
        d.mkdir(parents=True)
        stats = bleu.sentence_stats(hyps, REFS, True)
        by_len = {"src_len": LENGTHS, "stats_tok": stats.tolist(), "parts": PARTS}
        (d / "bleu_by_length.json").write_text(json.dumps(by_len))
        score = {
            p: {
                k: {"score": bleu.bleu_from_stats(stats[[q == p for q in PARTS]], True)}
                for k in ("tok", "detok")
            }
            for p in multi30k.PARTS
        }
        (d / "bleu.json").write_text(json.dumps({"parts": score}))
        if cfg["arch"] != "RNNencdec":  # the attention of 4 test captions, the paper's after none
            paper = [{"source": "x", "found": False, "index": None}] * 4
            drawn = [
                {
                    "index": i,
                    "src_tokens": REFS[i].split(),
                    "hyp_tokens": [*REFS[i].split(), "</s>"],
                    "alpha": np.eye(LENGTHS[i] + 1, LENGTHS[i]).tolist(),
                }
                for i in (35, 41, 2)  # 22, 8 (the 2nd of 2017's set) and 8 words (3rd of 2016's)
            ]
            (d / "attention.json").write_text(json.dumps(paper + drawn))
        runs.append(run)
        configs[run] = {"model": {"reverse_source": False, **cfg}}
    (root / "manifest.json").write_text(json.dumps({"runs": runs, "configs": configs}))
    return root


def test_each_flickr_set_has_its_bleu_and_its_own_verdicts(tmp_path):
    # RNNsearch learns both sets; RNNencdec learns 2016's and nothing of 2017's
    out = fake(
        tmp_path,
        {
            "RNNencdec-50": ({"arch": "RNNencdec"}, 0.75, 0.0),
            "RNNsearch-50": ({"arch": "RNNsearch"}, 1.0, 1.0),
        },
    )
    rows = {r["model"]: r for r in multi30k.table(out)}
    assert rows["RNNsearch-50"]["test_2016_flickr BLEU"] == 100.0
    assert rows["RNNencdec-50"]["test_2017_flickr BLEU"] < 5
    assert set(rows["RNNsearch-50"]) >= {"test_2016_flickr sacreBLEU", "test_2017_flickr sacreBLEU"}
    claims = multi30k.claims(out, n_samples=100)
    table1 = [r for r in claims if "beats RNNencdec-50" in r["claim"]]
    assert [(r["test set"], r["verdict"]) for r in table1] == [
        ("test_2016_flickr", "reproduced"),
        ("test_2017_flickr", "not testable here"),
    ]
    # Figure 2 at the captions' lengths: RNNsearch-50's long captions are as good as its short
    fig2 = [r for r in claims if "no deterioration" in r["claim"]]
    assert "20 words or more" in fig2[0]["claim"] and fig2[0]["verdict"] == "reproduced"
    multi30k.main(["--out", str(out)])
    assert "test_2016_flickr" in (out / "claims.md").read_text()
    assert (out / "comparison.csv").is_file()
    assert (out / "fig2_bleu_by_length.test_2017_flickr.png").is_file()
    # Figure 2 on 2016's set: RNNsearch-50 exact at both lengths, RNNencdec-50 right on 8-word
    # captions only (the first 30 of 40; the 22-word ones are random)
    curves = multi30k.curves(out)
    x, y = curves["RNNsearch-50"]
    assert x[2] == 10.0 and y[2] == pytest.approx(100) and y[5] == pytest.approx(100)
    assert np.isnan(y[0])  # no caption of fewer than 4 words
    assert curves["RNNencdec-50"][1][2] == pytest.approx(100) and curves["RNNencdec-50"][1][5] < 5


def test_the_two_testbeds_side_by_side(tmp_path):
    out = fake(
        tmp_path / "multi30k",
        {
            "RNNencdec-50": ({"arch": "RNNencdec"}, 0.75, 0.0),
            "RNNsearch-50": ({"arch": "RNNsearch"}, 1.0, 1.0),
        },
    )
    multi30k.main(["--out", str(out)])
    wmt = tmp_path / "compare"
    wmt.mkdir()
    (wmt / "claims.csv").write_text(
        "claim,verdict\n"
        '"RNNsearch-50 beats RNNencdec-50 (Bahdanau et al., Table 1)",not testable here\n'
        '"RNNsearch-50 shows no deterioration on sentences of 50 words or more (Bahdanau et al., '
        'Figure 2)",not reproduced\n'
        '"Reversing the source helps an LSTM encoder-decoder without attention (Sutskever et '
        'al.)",not testable here\n'
    )
    rows = {r["claim"]: r for r in multi30k.side_by_side(wmt, out)}
    table1 = rows["RNNsearch-50 beats RNNencdec-50 (Bahdanau et al., Table 1)"]
    assert table1["WMT'14"] == "not testable here"
    assert table1["Multi30k test_2016_flickr"] == "reproduced"
    assert table1["Multi30k test_2017_flickr"] == "not testable here"
    assert table1["decided"] == 1
    # Figure 2's claim is one row although the testbeds state its lengths differently
    fig2 = rows[
        "RNNsearch-50 shows no deterioration on its longest sentences (Bahdanau et al., Figure 2)"
    ]
    assert fig2["WMT'14"] == "not reproduced" and fig2["Multi30k test_2016_flickr"] == "reproduced"
    assert fig2["decided"] >= 2
    # a claim only one testbed judges (no Seq2seq in this fake study) is blank on the other
    reversal = next(r for c, r in rows.items() if c.startswith("Reversing"))
    assert reversal["Multi30k test_2016_flickr"] is None and reversal["decided"] == 0


def test_alignments_are_the_same_shortest_captions_for_every_attention_model(tmp_path):
    out = fake(
        tmp_path,
        {
            "RNNencdec-50": ({"arch": "RNNencdec"}, 0.75, 0.0),
            "RNNsearch-50": ({"arch": "RNNsearch"}, 1.0, 1.0),
            "Luong-dot-50": ({"arch": "Luong", "score": "dot"}, 1.0, 1.0),
        },
    )
    panels = multi30k.alignment_panels(out, sentences=2)
    # no panel of RNNencdec (no attention); the two shortest captions, ties in test order, each
    # named by its Flickr set and its line there
    assert [p["title"] for p in panels] == [
        "RNNsearch-50\ntest_2016_flickr, caption 3",
        "RNNsearch-50\ntest_2017_flickr, caption 2",
        "Luong-dot-50\ntest_2016_flickr, caption 3",
        "Luong-dot-50\ntest_2017_flickr, caption 2",
    ]
    assert panels[0]["trg"][-1] == "<end>" and len(panels[0]["alpha"]) == 9
    multi30k.main(["--out", str(out)])
    assert (out / "fig3_alignments.png").is_file()


def test_the_floor_on_each_flickr_set(tmp_path):
    out = fake(
        tmp_path,
        {
            "RNNencdec-50": ({"arch": "RNNencdec"}, 0.75, 0.0),
            "RNNsearch-50": ({"arch": "RNNsearch"}, 1.0, 1.0),
        },
    )
    assert multi30k.below_floor(out, multi30k.PARTS[0]) == {}
    assert list(multi30k.below_floor(out, multi30k.PARTS[1])) == ["RNNencdec-50"]


def test_the_lesson_counts_what_each_testbed_decides():
    row = lambda claim, *v: dict(  # noqa: E731
        zip(("claim", "WMT'14", "Multi30k a", "Multi30k b"), (claim, *v), strict=True), decided=0
    )
    both = [
        row("A", "not testable here", "reproduced", "reproduced"),
        row("B", "not testable here", "the opposite holds", "not testable here"),
        row("C", "reproduced", "not reproduced", "not reproduced"),
        row("D", "reproduced", "reproduced", "not reproduced"),
        row("E", "not testable here", None, None),
    ]
    text = multi30k.lesson(both)
    assert text.startswith(
        "Of the 5 claims, WMT'14 at its budget decides 2, Multi30k 4 on a and 3 on b."
    )
    assert "Multi30k's a decides 2: 1 reproduced, 1 the opposite holds." in text
    assert "Where both Flickr sets decide a claim, their verdicts agree on 2 of 3." in text
    assert (
        "they agree on 1 of 2; they differ on C (reproduced on WMT'14, not reproduced on Multi30k)."
        in text
    )


def test_no_text_says_converged_where_a_run_reached_its_cap(tmp_path):
    """The sentence on convergence is computed from each run's stopped_by: one run at its cap
    and it no longer says "to convergence", but names that run; and no static page, profile or
    README line outside the computed summary says it by hand."""
    import re

    from nmt_experiments.core.results import convergence_text
    from nmt_experiments.replicate.readme import README_MARKS
    from nmt_lib.config import home

    runs = ["A-s1", "A-s2", "B-s1"]
    configs = {r: {"train": {"patience": 4}} for r in runs}
    (tmp_path / "manifest.json").write_text(json.dumps({"runs": runs, "configs": configs}))
    for r in runs:
        d = run_dir(tmp_path, r)
        d.mkdir(parents=True)
        summary = {"stopped_by": "early_stop", "updates": 4000}
        (d / "train_summary.json").write_text(json.dumps(summary))
    assert convergence_text(tmp_path).startswith("every run trained to convergence")
    capped = {"stopped_by": "max_updates", "updates": 20000}
    (run_dir(tmp_path, "A-s2") / "train_summary.json").write_text(json.dumps(capped))
    text = convergence_text(tmp_path)
    assert "to convergence" not in text and text.endswith("cap of 20,000 updates first: A-s2")
    root = home()
    readme = (root / "README.md").read_text(encoding="utf-8")
    a, b = readme.index(README_MARKS[0]), readme.index(README_MARKS[1])
    static = {"README.md": readme[:a] + readme[b:]}
    for pattern in (
        "notebooks/*.py",
        "book/*.md",
        "nmt_lib/profiles/**/*.toml",
        "nmt_experiments/**/*.py",
    ):
        static |= {str(p): p.read_text(encoding="utf-8") for p in root.glob(pattern)}
    said = [
        f for f, t in static.items() if re.search(r"\b(trained|trains|train) to convergence", t)
    ]
    assert said == [f for f in said if f.endswith("results.py")], said


def test_the_machines_sentence_names_each_cpu_from_the_runs_records(tmp_path):
    """Which CPU trained which run, from each run's made.json: flags recorded by the run win; a
    run without flags on the manifest's CPU takes the manifest's; the minority CPUs name their
    runs; one CPU for all says so."""
    from nmt_experiments.core.results import machines_text

    runs = ["A-s1", "A-s2", "B-s1", "B-s2"]
    epyc = {"cpu_model": "AMD EPYC", "cpu_flags_simd": ["avx2", "avx512_bf16", "avx512f"]}
    manifest = {"runs": runs, "hardware": epyc}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    made = {
        "A-s1": {"cpu_model": "AMD EPYC"},
        "A-s2": {"cpu_model": "AMD EPYC"},
        "B-s1": {"cpu_model": "AMD EPYC", "cpu_flags_simd": ["avx", "avx2", "fma"]},
        "B-s2": {"cpu_model": "Intel(R) Xeon(R) Processor @ 2.80GHz"},
    }
    for r in runs:
        run_dir(tmp_path, r).mkdir(parents=True)
        (run_dir(tmp_path, r) / "made.json").write_text(json.dumps(made[r]))
    assert machines_text(tmp_path) == (
        "2 of the 4 runs on an AMD EPYC (AVX-512 with bf16); "
        "on an AMD EPYC (AVX2): B-s1; on an Intel Xeon: B-s2"
    )
    for r in ("B-s1", "B-s2"):
        (run_dir(tmp_path, r) / "made.json").write_text(json.dumps(made["A-s1"]))
    assert machines_text(tmp_path) == "every run on an AMD EPYC (AVX-512 with bf16)"
