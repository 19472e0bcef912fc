"""data.views: test sets decoded and scored beside the test set, here one held out of the toy
training corpus (nmt_lib.data.heldout through the corpus registry)."""

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from nmt_lib import data, evaluate
from nmt_lib.data import corpus, fixtures
from nmt_lib.data.corpus import Corpus, DataError, Draw
from nmt_lib.train import train_run

HELD = Corpus("toy.heldout", "test", (), plain=True, drawn=Draw("toy", 300, 30, 5))


@pytest.fixture
def registry(monkeypatch):
    monkeypatch.setitem(corpus.CORPORA, HELD.name, HELD)


def toy_cfg(root, **data_settings):
    cfg, _ = fixtures.toy_run(root, max_updates=2)
    return replace(cfg, data=replace(cfg.data, **data_settings))


def test_a_view_is_held_out_of_training_and_evaluated_beside_the_test_set(registry, tmp_path):
    cfg = toy_cfg(tmp_path, views=("toy.heldout",), max_train_pairs=250)
    prep = data.prepare(cfg.data, workers=1, progress=False)
    view = prep.views["toy.heldout"]
    assert len(view) == 30 and view.name == "toy.heldout"
    assert prep.stats["train"]["corpora"]["toy"]["read"] <= 300
    held = json.loads((tmp_path / "cache" / "heldout" / "toy.heldout.json").read_text())
    assert min(held["lines"]) >= 300 and len(held["lines"]) == 30
    # the views' pairs are dropped from training as the test's are: the key says so
    plain = data.prepare(replace(cfg.data, views=()), workers=1, progress=False)
    assert plain.key != prep.key and not plain.views
    assert "cache/heldout/toy.heldout.en" in data.input_sha256(cfg.data)

    out = tmp_path / "r"
    train_run(cfg, out, prep, progress=False)
    result = evaluate.evaluate_run(cfg, out, prep)
    seen = out / "views" / "toy.heldout"
    bleu = json.loads((seen / "bleu.json").read_text())
    assert bleu["test"] == "toy.heldout" and bleu["run"] == cfg.name
    assert set(bleu) >= {"all", "no_unk", "unfinished"}
    assert len((seen / "hyp.test.tok.txt").read_text().splitlines()) == 30
    by_len = json.loads((seen / "bleu_by_length.json").read_text())
    assert len(by_len["src_len"]) == 30
    assert bleu["all"] != result["all"]  # another test set, another score
    evaluate.evaluate_run(cfg, out, prep)  # evaluated again: the view is replaced, not refused
    assert json.loads((seen / "bleu.json").read_text())["all"] == bleu["all"]


def test_training_that_reads_the_held_out_lines_is_refused(registry, tmp_path):
    cfg = toy_cfg(tmp_path, views=("toy.heldout",))  # every one of the 400 lines is read
    with pytest.raises(
        DataError, match=r"reads 400 lines of toy, past line 300, where the held-out"
    ):
        data.prepare(cfg.data, workers=1, progress=False)


def test_a_pack_has_no_views(tmp_path):
    cfg = toy_cfg(tmp_path, views=("europarl-v7.heldout",), packed=str(tmp_path / "pack"))
    with pytest.raises(DataError, match=r"data\.views \['europarl-v7\.heldout'\]: a pack"):
        data.prepare(cfg.data, workers=1, progress=False)


def test_an_evaluation_without_a_view_removes_the_earlier_ones(registry, tmp_path, monkeypatch):
    """A results directory holds one evaluation: a view the new one does not write goes, in its
    commit (also where that commit was cut short and the next evaluation completes it)."""
    cfg = toy_cfg(tmp_path, views=("toy.heldout",), max_train_pairs=250)
    prep = data.prepare(cfg.data, workers=1, progress=False)
    out = tmp_path / "r"
    train_run(cfg, out, prep, progress=False)
    evaluate.evaluate_run(cfg, out, prep)
    assert (out / "views" / "toy.heldout" / "bleu.json").is_file()
    plain = replace(cfg, data=replace(cfg.data, views=()))
    evaluate.evaluate_run(plain, out, replace(prep, views={}))
    assert not (out / "views").exists() and (out / "bleu.json").is_file()
    (out / "keep.txt").write_text("not the evaluation's")
    evaluate.evaluate_run(cfg, out, prep)  # the view again, then a commit killed at its first move

    def killed(src, dst, *args, **kw):  # the commit's first move fails
        if Path(src).parent.name == ".evaluate.commit":
            raise OSError(5, "Input/output error")
        return real_replace(src, dst, *args, **kw)

    real_replace = os.replace
    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(OSError):
        evaluate.evaluate_run(plain, out, replace(prep, views={}))
    monkeypatch.setattr(os, "replace", real_replace)
    assert not (out / "bleu.json").exists()  # incomplete, and marked so
    monkeypatch.setattr(evaluate, "_evaluate_into", lambda *a, **k: 1 / 0)
    with pytest.raises(ZeroDivisionError):  # the next one completes the decided commit first
        evaluate.evaluate_run(cfg, out, prep)
    assert not (out / "views").exists() and (out / "bleu.json").is_file()
    assert (out / "keep.txt").read_text() == "not the evaluation's"
