"""The notebook runner (tools/notebooks.py): sources, parameters, clear errors."""

import json
import os

import jupytext
import pytest

from tools import notebooks as runner

PARAMS = {"profile", "train", "results_dir", "data_dir"}


def test_every_notebook_has_one_parameters_cell_with_the_declared_inputs():
    sources = runner.notebooks()
    assert [p.stem[:2] for p in sources] == [f"{k:02d}" for k in range(1, len(sources) + 1)]
    for src in sources:
        nb = jupytext.read(src)
        cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(cells) == 1, src.name
        names = {line.split("=")[0].strip() for line in cells[0].source.splitlines() if "=" in line}
        assert names == PARAMS, src.name
        assert not any(c.get("outputs") for c in nb.cells if c.cell_type == "code")


def test_only_filters_and_rejects_unknown_names():
    assert [p.stem for p in runner.notebooks("04")] == ["04_alignment"]
    with pytest.raises(runner.NotebookError, match="matches no notebook"):
        runner.notebooks("no-such-notebook")


def test_a_failing_notebook_is_named_with_its_cell(tmp_path, monkeypatch, capsys):
    (tmp_path / "01_ok.py").write_text(
        '# %% tags=["parameters"]\nprofile = "smoke"\n\n# %%\nx = 1\n', encoding="utf-8"
    )
    (tmp_path / "02_bad.py").write_text(
        '# %% tags=["parameters"]\nprofile = "smoke"\n\n# %%\nraise ValueError("boom")\n',
        encoding="utf-8",
    )
    monkeypatch.setattr(runner, "NOTEBOOKS", tmp_path)
    code = runner.main(["--out-dir", str(tmp_path / "out")])
    err = capsys.readouterr()
    assert code == 1
    assert "02_bad.py" in err.err and "raise ValueError" in err.err and "boom" in err.err
    assert "[notebooks] 1/2 01_ok.py ok" in err.out
    executed = json.loads((tmp_path / "out" / "01_ok.ipynb").read_text())
    tags = [c["metadata"].get("tags", []) for c in executed["cells"]]
    assert ["parameters", "remove-cell"] in tags and ["injected-parameters"] in tags


def test_two_parameters_cells_are_refused(tmp_path):
    src = tmp_path / "01_two.py"
    src.write_text('# %% tags=["parameters"]\na = 1\n\n# %% tags=["parameters"]\nb = 2\n')
    with pytest.raises(runner.NotebookError, match="exactly one cell tagged 'parameters'"):
        runner._to_notebook(src)


def test_the_book_executes_the_jupytext_chapters_on_the_committed_results():
    """`jupyter-book build book` alone makes the whole book: the toc names every notebook of
    notebooks/ (through the link book/chapters), myst-nb reads them with jupytext and executes
    them with their default parameters, which are report mode on the committed `lite` results."""
    import yaml

    book = runner.ROOT / "book"
    assert (book / "chapters").resolve() == runner.NOTEBOOKS.resolve()
    toc = yaml.safe_load((book / "_toc.yml").read_text(encoding="utf-8"))
    files = [c["file"] for p in toc["parts"] for c in p["chapters"]]
    from nmt_experiments.pages.labs.student import sources as labs

    assert sorted(f for f in files if f.startswith("chapters/")) == [
        f"chapters/{p.stem}" for p in runner.notebooks() + labs()
    ]
    config = yaml.safe_load((book / "_config.yml").read_text(encoding="utf-8"))
    assert config["execute"]["execute_notebooks"] == "cache"
    reader, options = config["sphinx"]["config"]["nb_custom_formats"][".py"]
    assert reader == "jupytext.reads" and options == {"fmt": "py:percent"}
    for src in runner.notebooks():
        (cell,) = [
            c for c in jupytext.read(src).cells if "parameters" in c.metadata.get("tags", [])
        ]
        assert 'profile = "lite"' in cell.source and "train = False" in cell.source, src.name
        assert (runner.ROOT / "results" / "lite" / "manifest.json").is_file()


def test_results_chapters_fold_their_code_and_derivations_show_it():
    """The results chapters show tables and figures with the code folded (`hide-input`); the
    derivation chapters keep their code open."""
    results = {"08_experiments", "09_alignments", "15_budget", "13_compare", "16_studies"}
    for src in runner.notebooks():
        code = [c for c in jupytext.read(src).cells if c.cell_type == "code"]
        hidden = ["hide-input" in c.metadata.get("tags", []) for c in code]
        if src.stem in results:
            assert all(hidden), f"{src.name}: a code cell is not folded"
        elif src.stem < "08":
            assert not all(hidden), f"{src.name}: a derivation chapter hides all its code"


def test_the_toy_corpus_is_named_relative_to_the_repository():
    path = runner._toy_data_dir()
    assert not path.startswith("/") and (runner.ROOT / path / "train").is_dir()


def test_every_chapter_checks_its_parameters_first():
    """The cell after the parameters (after papermill's injected ones) checks them."""
    for src in runner.notebooks():
        cells = [c for c in jupytext.read(src).cells if c.cell_type == "code"]
        at = next(k for k, c in enumerate(cells) if "parameters" in c.metadata.get("tags", []))
        assert "check_parameters(profile, train, results_dir, data_dir)" in cells[at + 1].source, (
            src.name
        )


def test_a_chapter_given_an_unknown_profile_stops_in_its_first_cell_in_one_line(
    tmp_path, monkeypatch
):
    """Papermill on a derivation chapter, as a reader would run it, not through the runner."""
    monkeypatch.setenv("JUPYTER_PATH", os.environ.get("JUPYTER_PATH", ""))
    runner._register_kernel(tmp_path / "kernel")
    (src,) = runner.notebooks("11")
    out = tmp_path / "11.ipynb"
    with pytest.raises(runner.NotebookError) as e:
        runner.run_notebook(src, out, {"profile": "doesnotexist"})
    assert "ParameterError: profile: no profile 'doesnotexist': the profiles are" in str(e.value)
    assert "lite" in str(e.value)
    executed = json.loads(out.read_text())
    errors = [o for c in executed["cells"] for o in c.get("outputs", []) if o.get("ename")]
    (error,) = errors
    assert len(error["traceback"]) == 1  # one line, no traceback
    from nmt_experiments.core.results import ParameterError, check_parameters

    for bad, says in (
        ({"train": "yes"}, "train: 'yes'"),
        ({"data_dir": "/nonexistent"}, "data_dir"),
    ):
        with pytest.raises(ParameterError, match=says):
            check_parameters("lite", **bad)
