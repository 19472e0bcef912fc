"""The notebook runner: sources, parameters, clear errors, the results helpers (quick; no training)."""

import csv
import json

import jupytext
import pytest

from nmt_lib import replicate

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
