"""The recipe sweep of the comparison study (nmt_experiments.comparison.recipes), end to end on the toy corpus: arms
train for the same updates, the chosen arm is the lowest dev NLL of its family, every family's
chosen model gets a search setting chosen on dev; and the comparison's profile takes exactly the
committed choices."""

import csv

import pytest

from nmt_experiments.comparison import recipe_sweep, recipes
from nmt_experiments.core import markdown
from nmt_lib.config import load_profile
from nmt_lib.io import write_json

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


def test_sweep_end_to_end(study_dir):
    with study_dir("toy", TOY) as root:
        sweep_end_to_end(root / "toy.toml", root / "recipes")


def sweep_end_to_end(prof, out):
    recipes.main(["--train", "--profile", str(prof), "--out", str(out)])
    rows = list(csv.DictReader((out / "recipes.csv").open()))
    assert [(r["model"], r["arm"]) for r in rows] == [
        ("Seq2seq-12", "adam-1e-3"),
        ("Seq2seq-12", "adam-0"),
        ("Transformer-12", "warmup-1e-3-dropout"),
    ]
    assert {r["updates"] for r in rows} == {"6"}
    # the chosen arm of a family is its lowest dev NLL
    lower = float(rows[0]["dev NLL"]) < float(rows[1]["dev NLL"])
    assert [r["chosen"] for r in rows] == [str(lower), str(not lower), "True"]
    assert "model.forget_bias=0.0" in rows[1]["settings"] and "train.lr=0.0" in rows[1]["settings"]
    manifest = (out / "manifest.json").read_text()
    assert "Transformer-12.warmup-1e-3-dropout" in manifest
    # a finished arm is not trained again
    mtime = (out / "runs" / "Seq2seq-12.adam-0" / "final.json").stat().st_mtime
    recipes.main(["--train", "--search", "--profile", str(prof), "--out", str(out)])
    assert (out / "runs" / "Seq2seq-12.adam-0" / "final.json").stat().st_mtime == mtime
    search = list(csv.DictReader((out / "search.csv").open()))
    assert [r["model"] for r in search] == ["Seq2seq-12"] * 4 + ["Transformer-12"] * 4
    for fam in ("Seq2seq-12", "Transformer-12"):
        mine = [r for r in search if r["model"] == fam]
        best = max(mine, key=lambda r: float(r["dev BLEU"]))
        assert [r["chosen"] == "True" for r in mine] == [r is best for r in mine]


def fake_sweep(out, best: dict, profile=recipe_sweep.PROFILE):
    """A finished sweep of the real profile (or ``profile``) in ``out``: the arm ``best[family]``
    lowest in dev NLL, the second search setting chosen for every family."""

    prof = load_profile(profile)
    for name in prof.runs:
        d = out / "runs" / name
        d.mkdir(parents=True)
        nll = 50.0 if name.split(".", 1)[1] == best[recipe_sweep.family(name)] else 60.0
        write_json(d / "final.json", {"dev_nll": nll, "dev_bleu_greedy": 1.0})
        write_json(d / "train_summary.json", {"updates": 1000, "hours": 0.5})
    rows = [
        {
            "model": fam,
            "search.normalize": n,
            "search.max_len_ratio": r,
            "dev BLEU": 1.0,
            "chosen": (n, r) == (True, 1.5),
        }
        for fam in best
        for n, r in [(False, 3.0), (True, 1.5)]
    ]
    markdown.write_table(out, "search", rows, "")


def test_compare_profile_is_the_chosen_recipes(tmp_path):
    best = {
        "RNNsearch-50": "adam-3e-3",
        "RNNencdec-50": "adam-1e-3",
        "Seq2seq-50": "adam-3e-4",
        "Luong-50": "adam-1e-3-1-layer-forget-bias-0",
        "Transformer-50": "warmup-1e-3-dropout-0.1",
    }
    out = tmp_path / "compare" / "recipes"
    fake_sweep(out, best)
    prof = tmp_path / "compare.toml"
    prof.write_text(recipes.compare_profile(out, tmp_path / "compare"))
    # --write-profile passes the testbed with its sweep replaced: still the comparison's command
    again = recipes.WMT14._replace(sweep=recipes.WMT14.sweep)
    assert recipes.compare_profile(out, tmp_path / "compare", again) == prof.read_text()
    runs = load_profile(prof).runs
    # seed 1: all nine models; seeds 2 and 3: the models of the claims (Luong's best is not known
    # before its first seed is evaluated)
    assert len(runs) == 9 + 2 * len(recipes.SEEDED)
    assert {r.train.max_updates for r in runs.values()} == {recipes.UPDATES}
    for name, run in runs.items():
        seed = int(name.rsplit("-s", 1)[1])
        assert run.train.seed == run.data.seed == seed
        assert run.search.normalize and run.search.max_len_ratio == 1.5
    assert runs["RNNsearch-50-s2"].train.lr == 3e-3 and runs["RNNencdec-50-s1"].train.lr == 1e-3
    peeky, rev = runs["Peeky-50-s1"].model, runs["Seq2seq-50-reversed-s3"].model
    assert peeky.arch == "Peeky" and peeky.layers == 2 and runs["Peeky-50-s1"].train.lr == 3e-4
    assert rev.arch == "Seq2seq" and rev.reverse_source and rev.forget_bias == 1.0
    dot = runs["Luong-dot-50-s1"]
    assert (dot.model.score, dot.model.layers, dot.model.forget_bias) == ("dot", 1, 0.0)
    tf = runs["Transformer-50-s3"]
    assert tf.model.dropout == 0.1 and tf.train.lr_schedule == "inverse_sqrt"
    assert tf.train.adam_beta2 == 0.98 and tf.train.warmup_updates == 250
    # once Luong's three scores are evaluated, the best on dev gets every seed
    for m, nll in zip(recipes.LUONG, (70.0, 69.0, 71.0), strict=True):
        d = tmp_path / "compare" / "runs" / recipes.run_name(m, 1)
        d.mkdir(parents=True)
        (d / "nll.json").write_text(f'{{"dev": {{"mean": {nll}}}}}')
    runs2 = tmp_path / "compare2.toml"
    runs2.write_text(recipes.compare_profile(out, tmp_path / "compare"))
    names = list(load_profile(runs2).runs)
    assert "Luong-general-50-s3" in names and "Luong-dot-50-s2" not in names
    assert set(names) - set(runs) == {"Luong-general-50-s2", "Luong-general-50-s3"}


def test_the_gpu_view_takes_the_chosen_recipes_at_the_gpu_sizes(tmp_path):
    best = {
        "RNNsearch-50": "adam-3e-3",
        "RNNencdec-50": "adam-1e-3",
        "Seq2seq-50": "adam-3e-4",
        "Luong-50": "adam-1e-3",
        "Transformer-50": "warmup-1e-3-dropout-0.1",
    }
    out = tmp_path / "compare" / "recipes"
    fake_sweep(out, best)
    prof = tmp_path / "compare-gpu.toml"
    prof.write_text(recipes.gpu_profile(out))
    runs, gpu = load_profile(prof).runs, load_profile("gpu").runs["RNNsearch-50"]
    assert list(runs) == list(recipes.GPU_MODELS)
    search, tf = runs["RNNsearch-50"], runs["Transformer-50"]
    assert search.model == gpu.model and search.data == gpu.data  # the paper's sizes, gpu's data
    assert search.train.lr == 3e-3 and search.train.cuda_graphs and search.train.precision == "bf16"
    assert search.train.max_hours == tf.train.max_hours == round(recipes.GPU_MINUTES / 60, 6)
    assert (tf.model.arch, tf.model.m, tf.model.layers, tf.model.heads, tf.model.ff) == (
        "Transformer",
        512,
        6,
        8,
        2048,
    )
    assert tf.model.dropout == 0.1 and tf.train.lr_schedule == "inverse_sqrt"
    assert not tf.train.cuda_graphs and tf.model.trg_vocab == gpu.model.trg_vocab
    for run in runs.values():
        assert run.search.normalize and run.search.max_len_ratio == 1.5 and run.search.beam == 10


@pytest.mark.skipif(
    not (recipe_sweep.RESULTS / "search.csv").is_file(), reason="sweep not committed"
)
def test_the_comparisons_profile_is_written_from_the_committed_sweep():
    """studies/compare.toml (and compare-gpu.toml) is what ``python -m nmt_experiments.comparison.recipes --write-profile`` makes of the
    committed sweep and comparison: every model with its family's chosen recipe and search."""
    assert recipes.COMPARE.read_text(encoding="utf-8") == recipes.compare_profile()
    assert recipes.GPU_COMPARE.read_text(encoding="utf-8") == recipes.gpu_profile()


def test_a_diverged_arm_is_a_row_of_the_sweep_and_never_chosen(tmp_path):

    best = {
        "RNNsearch-50": "adam-3e-3",
        "RNNencdec-50": "adam-1e-3",
        "Seq2seq-50": "adam-3e-4",
        "Luong-50": "adam-1e-3",
        "Transformer-50": "warmup-1e-3",
    }
    out = tmp_path / "recipes"
    fake_sweep(out, best)
    d = out / "runs" / "RNNsearch-50.adam-3e-3"  # the best arm of its family, had it not diverged
    (d / "train_summary.json").unlink()
    write_json(
        d / "final.json",
        {
            "diverged": "run diverged at update 7",
            "updates": 7,
            "dev_nll": None,
            "dev_bleu_greedy": None,
        },
    )
    rows = [r for r in recipe_sweep.table(out) if r["model"] == "RNNsearch-50"]
    gone = next(r for r in rows if r["arm"] == "adam-3e-3")
    assert gone["diverged"] and gone["dev NLL"] is None and gone["updates"] == 7
    assert not gone["chosen"] and sum(bool(r["chosen"]) for r in rows) == 1
    assert recipe_sweep.chosen(out)["RNNsearch-50"] != "RNNsearch-50.adam-3e-3"


def test_the_sweep_says_which_chosen_rates_it_brackets(tmp_path):
    # RNNsearch-50 at 3e-3 has 1e-3 and 1e-2 beside it (other settings equal); Seq2seq-50 at 3e-4
    # is the lowest rate tried; Luong's chosen arm differs from the others in layers and bias too
    best = {
        "RNNsearch-50": "adam-3e-3",
        "RNNencdec-50": "adam-1e-2",
        "Seq2seq-50": "adam-3e-4",
        "Luong-50": "adam-1e-3-1-layer-forget-bias-0",
        "Transformer-50": "warmup-1e-3",
    }
    out = tmp_path / "recipes"
    fake_sweep(out, best)
    found = recipe_sweep.bracketed(out)
    assert found["RNNsearch-50"] == {"lr": 0.003, "lower": True, "higher": True, "equal": []}
    assert found["RNNencdec-50"] == {"lr": 0.01, "lower": True, "higher": False, "equal": []}
    assert found["Seq2seq-50"] == {"lr": 0.0003, "lower": False, "higher": True, "equal": []}
    assert found["Luong-50"] == {"lr": 0.001, "lower": False, "higher": False, "equal": []}
    assert found["Transformer-50"] == {"lr": 0.001, "lower": True, "higher": True, "equal": []}
    text = recipe_sweep.bracketed_text(out)
    assert "RNNsearch-50 3e-3" in text and "Transformer-50 1e-3" in text
    assert "RNNencdec-50's 1e-2 is the highest rate tried" in text
    assert "Seq2seq-50's 3e-4 is the lowest rate tried" in text
    assert "Luong-50's 1e-3 was the only rate tried with its other settings" in text
    # an arm one step beyond that scores the same (to the table's 0.01) leaves the choice and the
    # edge open: the rate tied with is named
    tie = out / "runs" / "RNNsearch-50.adam-1e-2" / "final.json"
    write_json(tie, {"dev_nll": 50.004, "dev_bleu_greedy": 1.0})
    found = recipe_sweep.bracketed(out)
    assert found["RNNsearch-50"] == {"lr": 0.003, "lower": True, "higher": False, "equal": [0.01]}
    assert "RNNsearch-50's 3e-3 scores the same dev NLL as 1e-2 (a tie keeps" in (
        recipe_sweep.bracketed_text(out)
    )
    write_json(tie, {"dev_nll": 60.0, "dev_bleu_greedy": 1.0})
    # testing the 3 edges: one arm each at its family's 0.5 hours; the study's runs of the same
    # architecture (here one Seq2seq run of 2 hours, RNNsearch's not at an edge) trained again
    study = tmp_path / "study"
    for run, arch in (("Seq2seq-50-s1", "Seq2seq"), ("RNNsearch-50-s1", "RNNsearch")):
        write_json(study / "runs" / run / "config.json", {"model": {"arch": arch}})
        write_json(study / "runs" / run / "train_summary.json", {"hours": 2.0})
    cost = recipe_sweep.edge_cost_text(out, recipe_sweep.PROFILE, study)
    assert cost.startswith("One arm one step beyond each of these 3 edges would take about 1.5")
    assert "up to 1 runs and 2.0 hours of one core" in cost


def test_the_multi30k_study_is_written_from_its_sweep(tmp_path):
    """studies/multi30k.toml is what ``--testbed multi30k --write-profile`` makes of its sweep (the
    provisional arms while it has not chosen); every model of the comparison, the claims' with
    three seeds, trained to convergence (val NLL with patience under an upper bound in updates) on
    Multi30k's data; a chosen arm replaces a provisional one."""
    bed = recipes.MULTI30K
    assert bed.profile.read_text(encoding="utf-8") == recipes.compare_profile(testbed=bed)
    runs = load_profile(bed.profile).runs
    assert {recipes.run_name(m, 1) for m in recipes.MODELS} <= set(runs)
    seeded = {recipes.run_name(m, s) for m in recipes.SEEDED for s in (2, 3)}
    extra = set(runs) - seeded - {recipes.run_name(m, 1) for m in recipes.MODELS}
    # once Luong's first seeds are scored, the best score's seeds 2 and 3
    luong = [{recipes.run_name(m, 2), recipes.run_name(m, 3)} for m in recipes.LUONG]
    assert seeded <= set(runs) and (extra == set() or extra in luong)
    for run in runs.values():
        assert run.data.train == ("multi30k.train",) and run.data.dev == ("multi30k.val",)
        assert run.data.test == "multi30k.test_flickr" and run.model.trg_vocab == 6000
        assert run.train.max_updates == 20000 and run.train.patience == 4
        assert run.model.dropout > 0  # every family's (a deviation of this testbed)
    tf = runs["Transformer-50-s2"].train
    assert tf.label_smoothing == 0.1 and tf.lr_schedule == "inverse_sqrt"
    sweep = load_profile(bed.sweep).runs
    assert {recipe_sweep.family(n) for n in sweep} == {f for f, _ in recipes.MODELS.values()}
    assert set(recipes.MULTI30K_PROVISIONAL.values()) <= set(sweep)
    out = tmp_path / "multi30k" / "recipes"
    fake = {f: a.split(".", 1)[1] for f, a in recipes.MULTI30K_PROVISIONAL.items()}
    fake["RNNsearch-50"] = "adam-3e-3-dropout-0.4"
    fake_sweep(out, fake, bed.sweep)
    prof = tmp_path / "m.toml"
    prof.write_text(recipes.compare_profile(out, testbed=bed))
    chosen = load_profile(prof).runs["RNNsearch-50-s3"]
    assert chosen.model.dropout == 0.4 and chosen.train.lr == 3e-3


@pytest.mark.parametrize("bed", [recipes.WMT14, recipes.MULTI30K], ids=["compare", "multi30k"])
def test_a_search_of_some_models_keeps_the_others_rows_as_written(bed, tmp_path):
    """``--search MODEL``: the models not named keep their rows of search.csv, which read back
    as written (the committed tables come out byte for byte), so no model decodes."""
    rows = recipe_sweep.search_table(bed.results, profile=bed.sweep, models=[])
    assert {r["model"] for r in rows} == set(recipe_sweep.chosen(bed.results, bed.sweep))
    markdown.write_table(tmp_path, "search", rows, recipe_sweep.SEARCH_NOTE)
    for name in ("search.csv", "search.md"):
        assert (tmp_path / name).read_bytes() == (bed.results / name).read_bytes(), name


def test_a_tied_rate_with_a_worse_one_beyond_it_is_bracketed_and_named(tmp_path):
    """The chosen rate ties with the next one up and a rate further up scores worse: bracketed,
    the tie named."""
    arms = {"adam-1e-3": 1e-3, "adam-3e-3": 3e-3, "adam-5e-3": 5e-3, "adam-1e-2": 1e-2}
    prof = tmp_path / "sweep.toml"
    prof.write_text(
        'name = "sweep"\ndescription = "a test"\n[train]\nmax_updates = 10\n'
        + "".join(f'[runs."RNNsearch-50.{a}"]\ntrain = {{ lr = {lr} }}\n' for a, lr in arms.items())
    )
    out = tmp_path / "recipes"
    fake_sweep(out, {"RNNsearch-50": "adam-3e-3"}, prof)
    write_json(
        out / "runs" / "RNNsearch-50.adam-5e-3" / "final.json",
        {"dev_nll": 50.0, "dev_bleu_greedy": 1.0},
    )
    found = recipe_sweep.bracketed(out, prof)
    assert found["RNNsearch-50"] == {"lr": 0.003, "lower": True, "higher": True, "equal": [0.005]}
    assert "RNNsearch-50 3e-3 (tied with 5e-3)." in recipe_sweep.bracketed_text(out, prof)
