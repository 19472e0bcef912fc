"""The tables built from results (nmt_experiments.core.tables): Markdown and CSV, every committed table equal to
what the code makes of its runs, and the README's summary of them."""

import csv

import pytest

from nmt_experiments.core.markdown import markdown_table, md_text, table1_views, write_table
from nmt_experiments.core.results import results_path
from nmt_experiments.core.tables import gap_to_paper, table1, table2
from nmt_experiments.replicate.paper_claims import claims
from nmt_experiments.replicate.readme import README_MARKS, readme_results
from nmt_lib.config import home


def test_markdown_writes_tags_as_text_outside_code():
    """A word such as <unk> in a header, a cell or a note would be read as an HTML tag, and
    dropped by the browser ("All,  replaced"); in a code span Markdown escapes it itself."""
    md = markdown_table([{"model": "A", "All, <unk> replaced": 1.0, "hyp": "x <unk> y"}])
    assert "<unk>" not in md and md.count("&lt;unk&gt;") == 2
    assert md_text("the `<unk>` and </s>") == "the `<unk>` and &lt;/s&gt;"


def test_table1_reads_ours_beside_the_papers_across_a_row_and_keeps_the_rest_by_model():
    rows = [
        {"model": "A", "seeds": 3, "All": 12.564, "All sd": 0.48, "No UNK": 22.0,
         "All (sacreBLEU)": 7.7, "paper All": 26.75, "paper No UNK": 34.16},
        {"model": "Moses", "seeds": None, "All": None, "All sd": None, "No UNK": None,
         "All (sacreBLEU)": None, "paper All": 33.3, "paper No UNK": 35.63},
    ]  # fmt: skip
    main, rest = table1_views(rows)
    assert main[0] == {
        "model": "A",
        "All: ours": "12.56 ± 0.48",
        "All: the paper": "26.75",
        "No UNK: ours": "22.00",
        "No UNK: the paper": "34.16",
    }
    assert main[1]["All: ours"] is None and main[1]["All: the paper"] == "33.30"
    assert rest == [{"model": "A", "seeds": 3, "All (sacreBLEU)": 7.7}]


def test_markdown_and_csv_tables(tmp_path):
    rows = [{"model": "A", "All": 1.5, "n": 1000}, {"model": "B", "paper All": 2.0}]
    md = markdown_table(rows)
    assert md.splitlines()[0] == "| model | All | n | paper All |"
    assert md.splitlines()[2] == "| A | 1.5 | 1,000 |  |"
    write_table(tmp_path, "t", rows, "note")
    with open(tmp_path / "t.csv", encoding="utf-8") as f:
        assert [r["model"] for r in csv.DictReader(f)] == ["A", "B"]
    assert (tmp_path / "t.md").read_text(encoding="utf-8").endswith("note\n")


def test_a_table_too_wide_for_the_book_is_split_and_its_file_is_not(tmp_path):
    """In the book a wide table becomes several, each with the first column and every other
    column once, in order; the results' ``.md`` file keeps one table."""
    rows = [
        {"model": f"RNNsearch-{k}", **{f"column {c}": 12_000_000 * k for c in range(12)}}
        for k in range(3)
    ]
    parts = markdown_table(rows).split("\n\n")
    assert len(parts) > 1
    heads = [p.splitlines()[0].strip("| ").split(" | ") for p in parts]
    assert all(h[0] == "model" for h in heads)
    assert [c for h in heads for c in h[1:]] == [f"column {c}" for c in range(12)]
    assert all(len(p.splitlines()) == 2 + len(rows) for p in parts)
    assert len(markdown_table(rows, fit=None).split("\n\n")) == 1
    assert "\n\n" not in markdown_table([{"model": "A", "All": 1.5}])  # a narrow table: one
    write_table(tmp_path, "wide", rows, "note")
    assert (tmp_path / "wide.md").read_text(encoding="utf-8").count("| model |") == 1


@pytest.mark.parametrize(
    "profile",
    [
        p.parent.name
        for p in sorted((home() / "results").glob("*/manifest.json"))
        if (p.parent / "table1.csv").is_file()
    ],
)
def test_committed_tables_are_what_the_code_makes_of_the_committed_runs(profile):
    """Every committed table of results/<profile>/ is regenerated, equal, from its runs."""
    out = results_path(profile)
    made = {
        "table1": table1(out),
        "table2": table2(out),
        "claims": claims(out),
        "gap": gap_to_paper(out),
    }
    for name, rows in made.items():
        with open(out / f"{name}.csv", encoding="utf-8") as f:
            committed = list(csv.DictReader(f))
        cols = list(dict.fromkeys(k for r in rows for k in r))
        assert list(committed[0]) == cols, name
        assert committed == [{k: "" if r.get(k) is None else str(r[k]) for k in cols} for r in rows]


def test_the_readme_summary_is_what_the_committed_results_say():
    """README.md's "Results at a glance" is generated (python -m nmt_experiments.replicate --readme)."""
    text = (home() / "README.md").read_text(encoding="utf-8")
    start, end = README_MARKS
    block = text.split(start + "\n", 1)[1].split(end, 1)[0]
    assert block == readme_results()


def test_unk_replacement_compares_each_runs_two_outputs(tmp_path):
    import json

    from nmt_experiments.core.results import run_dir
    from nmt_experiments.core.tables import unk_replacement

    runs = {"RNNencdec-50": None, "RNNsearch-50": 12.0, "RNNsearch-50-s2": 13.0}
    (tmp_path / "manifest.json").write_text(json.dumps({"runs": list(runs)}))
    for name, score in runs.items():
        d = run_dir(tmp_path, name)
        d.mkdir(parents=True)
        bleu = {"all": {"tok": {"score": 10.0}}}
        if score is not None:
            bleu["unk_replaced"] = {"tok": {"score": score}}
        (d / "bleu.json").write_text(json.dumps(bleu))
        (d / "hyp.test.tok.txt").write_text("le <unk> dort .\n<unk> <unk>\nun chat\n")
        second = "Oslo Berlin" if name.endswith("-s2") else "Oslo <unk>"
        (d / "hyp.test.unk_replaced.tok.txt").write_text(f"le Schulz dort .\n{second}\nun chat\n")
    rows, examples = unk_replacement(tmp_path, examples=2)
    # a model's seeds make one row: the mean of their scores and shares (seed 2 replaced all three)
    assert rows == [
        {
            "model": "RNNsearch-50",
            "All": 10.0,
            "All, <unk> replaced": 12.5,
            "<unk> in the output (%)": 37.5,
            "<unk> left (%)": 6.2,
        }
    ]
    assert examples == [  # from the model's first run
        ("RNNsearch-50", ["le", "<unk>", "dort", "."], ["le", "Schulz", "dort", "."]),
        ("RNNsearch-50", ["<unk>", "<unk>"], ["Oslo", "<unk>"]),
    ]
    # a model whose seeds are not all replaced has no row: its mean would not be Table 1's
    bleu = json.loads((run_dir(tmp_path, "RNNsearch-50-s2") / "bleu.json").read_text())
    del bleu["unk_replaced"]
    (run_dir(tmp_path, "RNNsearch-50-s2") / "bleu.json").write_text(json.dumps(bleu))
    assert unk_replacement(tmp_path) == ([], [])


def test_a_model_with_seeds_is_one_row_with_their_mean_and_spread(tmp_path):
    import json

    from nmt_experiments.core.results import run_dir

    runs = {
        "RNNencdec-50": (2.0, 1000, 40.0, 0.6667),
        "RNNsearch-50": (10.0, 1000, 30.0, 0.6),
        "RNNsearch-50-s2": (12.5, 1202, 29.0, 0.7),
    }
    (tmp_path / "manifest.json").write_text(json.dumps({"runs": list(runs)}))
    for name, (score, updates, dev, hours) in runs.items():
        d = run_dir(tmp_path, name)
        d.mkdir(parents=True)
        tok = {"tok": {"score": score}, "detok": {"score": score - 1}}
        (d / "bleu.json").write_text(json.dumps({"all": tok, "no_unk": {"n": 0}}))
        (d / "train_summary.json").write_text(
            json.dumps({"updates": updates, "epochs": 0.5, "hours": hours, "device": "cpu"})
        )
        (d / "nll.json").write_text(json.dumps({"train": {"mean": dev - 5}, "dev": {"mean": dev}}))
    t1 = {r["model"]: r for r in table1(tmp_path)}
    assert list(t1) == ["RNNencdec-50", "RNNsearch-50", "Moses"]
    assert t1["RNNsearch-50"]["All"] == 11.25 and t1["RNNsearch-50"]["All (sacreBLEU)"] == 10.25
    assert (t1["RNNsearch-50"]["seeds"], t1["RNNsearch-50"]["All sd"]) == (2, 1.77)
    assert list(t1["RNNsearch-50"])[:5] == ["model", "seeds", "All", "All sd", "No UNK"]
    assert (t1["RNNencdec-50"]["seeds"], t1["RNNencdec-50"]["All sd"]) == (1, None)
    assert t1["RNNencdec-50"]["No UNK"] is None and t1["RNNsearch-50"]["paper All"] == 26.75
    t2 = {r["model"]: r for r in table2(tmp_path)}
    assert t2["RNNsearch-50"]["updates"] == 1101 and isinstance(t2["RNNsearch-50"]["updates"], int)
    assert (t2["RNNsearch-50"]["dev NLL"], t2["RNNsearch-50"]["hours"]) == (29.5, 0.65)
    assert t2["RNNencdec-50"]["hours"] == 0.667
    assert t2["RNNsearch-50"]["seeds"] == 2 and t2["RNNencdec-50"]["train NLL"] == 35.0


def test_over_seeds_means_numbers_and_keeps_text_and_gaps():
    from nmt_experiments.core.tables import over_seeds

    rows = [
        {"model": "M", "n": 3, "x": 1.004, "unk": 2.0, "device": "cpu"},
        {"model": "M", "n": 4, "x": 2.0, "unk": None, "device": "cpu"},
    ]
    assert over_seeds(rows, {"x": 1}) == {
        "model": "M",
        "n": 4,
        "x": 1.5,
        "unk": None,
        "device": "cpu",
    }
    assert over_seeds(rows[:1]) == {"model": "M", "n": 3, "x": 1.0, "unk": 2.0, "device": "cpu"}


def _means(path, column: str, part: str | None = None) -> dict[str, str]:
    """``{model: its mean as printed}`` from a committed table's ``column``."""
    with open(path, encoding="utf-8") as f:
        return {r["model"]: f"{float(r[column]):.2f}" for r in csv.DictReader(f) if r[column]}


@pytest.mark.parametrize(
    "study, table, column, part",
    [
        ("lite", "table1", "All", None),
        ("compare", "comparison", "All", None),
        ("multi30k", "comparison", "test_2016_flickr BLEU", "test_2016_flickr"),
        ("multi30k", "comparison", "test_2017_flickr BLEU", "test_2017_flickr"),
    ],
)
def test_a_mean_prints_the_same_digits_in_tables_claims_and_readme(study, table, column, part):
    """Each model's mean BLEU over its seeds, rounded once from unrounded scores: the study's table,
    every claims row that names the model and the README's summary print the same digits."""
    import re

    out = results_path(study)
    means = _means(out / f"{table}.csv", column)
    named = re.compile(r"([\w*.-]+) (\d+\.\d\d) \(\d+ seeds?\)")
    seen = 0
    with open(out / "claims.csv", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if part and row["test set"] != part:
                continue
            for model, score in named.findall(row["ours"]):
                assert means[model] == score, (study, row["claim"], model)
                seen += 1
    assert seen, f"no claims row of {study} names a model's mean"
    readme = (home() / "README.md").read_text(encoding="utf-8")
    summary = readme[readme.index(README_MARKS[0]) : readme.index(README_MARKS[1])]
    if part == "test_2017_flickr":
        return  # the README gives Multi30k's first Flickr set only
    opening = {"lite": "| model |", "compare": "Beside them", "multi30k": "On a second testbed"}
    block = next(b for b in summary.split("\n\n") if b.lstrip().startswith(opening[study]))
    for model, mean in means.items():
        printed = f"| {model} | {mean} |" if study == "lite" else f"{model} {mean}"
        assert printed in block, (study, model, mean)


def test_fig3_panels_take_each_sentence_from_the_seed_with_fewest_unk(tmp_path):
    """Figure 3 drawn from a seed whose translation is all <unk> shows no alignment: with
    ``seeds``, each panel comes from the seed with the fewest <unk> (the first on a tie), named."""
    import json

    from nmt_experiments.core.figures import fig3_panels
    from nmt_experiments.core.results import run_dir

    runs = ["RNNsearch-50", "RNNsearch-50-s2", "RNNsearch-50-s3"]
    (tmp_path / "manifest.json").write_text(json.dumps({"runs": runs}))
    hyps = {  # per run, its translations of (a)-(d)
        "RNNsearch-50": ["a b", "<unk> b", "c d", "<unk> <unk>"],
        "RNNsearch-50-s2": ["a b", "a b", "c <unk>", "<unk> d"],
        "RNNsearch-50-s3": ["a <unk>", "a b", "c d", "e d"],
    }
    for name, texts in hyps.items():
        d = run_dir(tmp_path, name)
        d.mkdir(parents=True)
        records = [
            {
                "found": k > 0,
                "index": k,
                "src_tokens": ["x"],
                "hyp_tokens": t.split(),
                "alpha": [[1]],
            }
            for k, t in enumerate(texts)
        ]
        (d / "attention.json").write_text(json.dumps(records))
    panels, from_paper = fig3_panels(tmp_path, seeds=True)
    assert from_paper
    assert [p["title"] for p in panels] == [
        "(a), RNNsearch-50",
        "(b), RNNsearch-50-s2",
        "(c), RNNsearch-50",
        "(d), RNNsearch-50-s3",
    ]
    assert [p["trg"] for p in panels] == [["a", "b"], ["a", "b"], ["c", "d"], ["e", "d"]]
    plain, _ = fig3_panels(tmp_path)  # one run, as before: its (d) is all <unk>
    assert [p["title"] for p in plain] == ["(a)", "(b)", "(c)", "(d)"]
    assert plain[3]["trg"] == ["<unk>", "<unk>"]
