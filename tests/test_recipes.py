"""The recipe sweep of the comparison study (nmt_lib.recipes), end to end on the toy corpus: arms
train for the same updates, the chosen arm is the lowest dev NLL of its family, every family's
chosen model gets a search setting chosen on dev; and the comparison's profile takes exactly the
committed choices."""

import csv

import pytest

from nmt_lib import recipes
from nmt_lib.config import load_profile
from nmt_lib.replicate import toy_data_dir

TOY = """
name = "toy-recipes"
[data]
train = ["toy"]
src_words = 60
trg_words = 60
max_len = 12
batch_size = 16
seed = 1
[model]
src_vocab = 63
trg_vocab = 63
m = 16
n = 24
n_align = 24
l = 12
output_rank = 16
init = "fanin"
[train]
optimizer = "adam"
max_updates = 6
eval_every = 3
dev_nll_sentences = 20
dev_bleu_sentences = 0
precision = "fp32"
threads = 1
seed = 1
[search]
beam = 2
[runs."Seq2seq-12.adam-1e-3"]
model = { arch = "Seq2seq", forget_bias = 1.0 }
[runs."Seq2seq-12.adam-0"]
model = { arch = "Seq2seq" }
train = { lr = 0.0 }
[runs."Transformer-12.warmup-1e-3-dropout"]
model = { arch = "Transformer", layers = 1, heads = 2, ff = 16, dropout = 0.1 }
train = { lr_schedule = "inverse_sqrt", warmup_updates = 2, adam_beta2 = 0.98 }
"""


def test_sweep_end_to_end(tmp_path, monkeypatch):
    monkeypatch.setenv("NMT_CACHE", str(tmp_path / "cache"))
    prof = tmp_path / "toy.toml"
    prof.write_text(
        TOY.replace('train = ["toy"]', f'train = ["toy"]\ndata_dir = "{toy_data_dir()}"')
    )
    out = tmp_path / "recipes"
    recipes.main(["--train", "--profile", str(prof), "--results-dir", str(out)])
    rows = list(csv.DictReader((out / "recipes.csv").open()))
    assert [(r["model"], r["arm"]) for r in rows] == [
        ("Seq2seq-12", "adam-1e-3"), ("Seq2seq-12", "adam-0"),
        ("Transformer-12", "warmup-1e-3-dropout")]  # fmt: skip
    assert {r["updates"] for r in rows} == {"6"}
    # the chosen arm of a family is its lowest dev NLL
    lower = float(rows[0]["dev NLL"]) < float(rows[1]["dev NLL"])
    assert [r["chosen"] for r in rows] == [str(lower), str(not lower), "True"]
    assert "model.forget_bias=0.0" in rows[1]["settings"] and "train.lr=0.0" in rows[1]["settings"]
    manifest = (out / "manifest.json").read_text()
    assert "Transformer-12.warmup-1e-3-dropout" in manifest
    # a finished arm is not trained again
    mtime = (out / "runs" / "Seq2seq-12.adam-0" / "final.json").stat().st_mtime
    recipes.main(["--train", "--search", "--profile", str(prof), "--results-dir", str(out)])
    assert (out / "runs" / "Seq2seq-12.adam-0" / "final.json").stat().st_mtime == mtime
    search = list(csv.DictReader((out / "search.csv").open()))
    assert [r["model"] for r in search] == ["Seq2seq-12"] * 4 + ["Transformer-12"] * 4
    for fam in ("Seq2seq-12", "Transformer-12"):
        mine = [r for r in search if r["model"] == fam]
        best = max(mine, key=lambda r: float(r["dev BLEU"]))
        assert [r["chosen"] == "True" for r in mine] == [r is best for r in mine]


COMPARE = "nmt_lib/profiles/studies/compare.toml"


@pytest.mark.skipif(not (recipes.RESULTS / "search.csv").is_file(), reason="sweep not committed")
def test_compare_profile_takes_the_committed_choices():
    """Every model of the comparison trains with its family's chosen arm's recipe and searches
    with its family's chosen setting."""
    prof, sweep = load_profile(COMPARE), load_profile(recipes.PROFILE)
    search = [
        r for r in csv.DictReader((recipes.RESULTS / "search.csv").open()) if r["chosen"] == "True"
    ]
    chosen = recipes.chosen()
    for name, run in prof.runs.items():
        fam = recipes.FAMILY_OF(run)
        arm = sweep.runs[chosen[fam]]
        for sec, keys in recipes.RECIPE.items():
            for k in keys:
                assert getattr(getattr(run, sec), k) == getattr(getattr(arm, sec), k), (name, k)
        (s,) = [r for r in search if r["model"] == fam]
        assert run.search.normalize == (s["search.normalize"] == "True"), name
        assert run.search.max_len_ratio == float(s["search.max_len_ratio"]), name
