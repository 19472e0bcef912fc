"""Config files: every profile loads, unknown keys and wrong types are errors that name the place."""

import json
import tomllib
from importlib.resources import files
from pathlib import Path

import pytest

from nmt_lib.config import (
    PROFILE_DIR,
    ConfigError,
    DataConfig,
    ModelConfig,
    TrainConfig,
    home,
    load_profile,
    make,
    profile_path,
    run_dir_name,
    run_from_dict,
    to_dict,
)
from nmt_lib.paper import MODELS

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("path", sorted(PROFILE_DIR.glob("*.toml")), ids=lambda p: p.stem)
def test_every_profile_has_the_five_paper_models(path):
    """The paper's five models, then any more seeds of them: a run ``<model>-s<k>`` is ``model``
    with seed ``k`` for the initialisation and the order of the batches, and nothing else changed
    but its budget in updates (``lite``: the updates each committed run made)."""
    prof = load_profile(path)
    assert list(prof.runs)[: len(MODELS)] == list(MODELS)
    for name, run in prof.runs.items():
        assert run.model.arch == name.split("-")[0]
    for name in list(prof.runs)[len(MODELS) :]:
        model, k = name.rsplit("-s", 1)
        seeded = to_dict(prof.runs[name])
        assert seeded["data"]["seed"] == seeded["train"]["seed"] == int(k)
        base = {**to_dict(prof.runs[model]), "name": name}
        for sec in ("data", "train"):
            base[sec]["seed"] = int(k)
        base["train"]["max_updates"] = seeded["train"]["max_updates"]
        assert seeded == base, name
    short, long = prof.runs["RNNsearch-30"].data.max_len, prof.runs["RNNsearch-50"].data.max_len
    assert short < long
    assert prof.runs["RNNencdec-30"].data.max_len == short
    if prof.name != "smoke":
        assert (short, long) == (30, 50)


def test_profiles_are_package_data_found_through_the_package():
    """An installed ``nmt_lib`` loads a profile by name: the profile files are files of the package
    (found through ``importlib.resources``, not the checkout) and declared as its package data."""
    shipped = files("nmt_lib") / "profiles"
    names = sorted(p.name for p in shipped.iterdir() if p.name.endswith(".toml"))
    assert names == ["gpu.toml", "lite.toml", "paper.toml", "smoke.toml"]
    assert (shipped / "studies" / "budget.toml").is_file()
    lite = Path(str(shipped / "lite.toml")).resolve()
    assert profile_path("lite").resolve() == lite
    assert Path(load_profile("lite").path).resolve() == lite
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    globs = pyproject["tool"]["setuptools"]["package-data"]["nmt_lib"]
    declared = {p.resolve() for g in globs for p in PROFILE_DIR.parent.glob(g)}
    assert set(PROFILE_DIR.resolve().rglob("*.toml")) <= declared


def test_paper_profile_uses_the_papers_settings():
    run = load_profile("paper").runs["RNNsearch-50"]
    assert (run.model.m, run.model.n, run.model.n_align, run.model.l) == (620, 1000, 1000, 500)
    assert (run.data.batch_size, run.data.sort_k_batches) == (80, 20)
    assert (run.train.rho, run.train.eps, run.train.clip_norm) == (0.95, 1e-6, 1.0)
    assert run.train.precision == "fp32"


def _write(tmp_path, text):
    p = tmp_path / "p.toml"
    p.write_text(text)
    return p


def test_unknown_key_is_an_error_naming_file_and_key(tmp_path):
    p = _write(tmp_path, '[model]\nhidden = 3\n[runs."A"]\n')
    with pytest.raises(ConfigError, match=r"p\.toml.*hidden"):
        load_profile(p)


def test_wrong_type_is_an_error(tmp_path):
    p = _write(tmp_path, '[model]\nn = "big"\n[runs."A"]\n')
    with pytest.raises(ConfigError, match=r"model\.n"):
        load_profile(p)


def test_unknown_run_section_and_empty_profile(tmp_path):
    with pytest.raises(ConfigError, match="optim"):
        load_profile(_write(tmp_path, '[runs."A"]\noptim = {}\n'))
    with pytest.raises(ConfigError, match="at least one"):
        load_profile(_write(tmp_path, 'name = "x"\n'))


def test_missing_profile_lists_the_known_ones():
    with pytest.raises(ConfigError, match="smoke"):
        load_profile("no-such-profile")


def test_vocab_rows_must_match_shortlist_plus_specials(tmp_path):
    p = _write(tmp_path, '[data]\nsrc_words = 10\n[train]\nmax_updates = 1\n[runs."A"]\n')
    with pytest.raises(ConfigError, match="data words \\+ 3"):
        load_profile(p)


def test_overrides_apply_to_every_run_and_round_trip():
    prof = load_profile("smoke", train={"max_updates": 3})
    assert {r.train.max_updates for r in prof.runs.values()} == {3}
    run = prof.runs["RNNsearch-50*"]
    d = json.loads(json.dumps(to_dict(run)))
    assert run_from_dict(d) == run
    assert run_dir_name(run.name) == "RNNsearch-50star"


def test_validation_of_values():
    with pytest.raises(ConfigError):
        ModelConfig(arch="GNMT")
    with pytest.raises(ConfigError):
        make(DataConfig, {"max_len": 0}, "data")
    assert make(DataConfig, {"train": ["a", "b"]}, "data").train == ("a", "b")
    assert make(TrainConfig, {"precision": "auto", "max_updates": 1}, "train").precision == "auto"
    with pytest.raises(ConfigError, match="'auto', 'bf16' or 'fp32'"):
        make(TrainConfig, {"precision": "fp16", "max_updates": 1}, "train")


def test_setting_beats_env_beats_default(monkeypatch, tmp_path):
    monkeypatch.setenv("NMT_DATA", str(tmp_path))
    assert DataConfig(data_dir="elsewhere").resolved_data_dir() == Path("elsewhere")
    assert DataConfig().resolved_data_dir() == tmp_path
    monkeypatch.delenv("NMT_DATA")
    assert DataConfig().resolved_data_dir() == home() / "data/wmt14"
    assert home() == ROOT  # a checkout: anchored at its root


@pytest.mark.parametrize(
    "train, message",
    [
        ({"optimizer": "sgd"}, "train.optimizer must be one of"),
        ({"loss": "mean"}, "train.loss must be one of"),
        ({"lr_schedule": "cosine"}, "train.lr_schedule must be one of"),
        ({"lr_decay": 0.0}, "train.lr_decay"),
        ({"eval_every": 0}, "train.eval_every must be > 0"),
        ({"max_updates": -5}, "train.max_updates must be > 0"),
        ({"dev_nll_sentences": -1}, "train.dev_nll_sentences must be >= 0"),
        ({"clip_norm": 0.0}, "train.clip_norm"),
        ({"label_smoothing": 1.0}, r"train.label_smoothing must be in \[0, 1\)"),
        ({"label_smoothing": -0.1}, r"train.label_smoothing must be in \[0, 1\)"),
    ],
)
def test_recipe_settings_are_validated(train, message):
    with pytest.raises(ConfigError, match=message):
        load_profile("smoke", train=train)


def test_the_paper_recipe_is_the_default():
    from nmt_lib.config import LSTMConfig, LuongConfig, ModelConfig, TrainConfig, TransformerConfig

    t = TrainConfig(max_updates=1)
    assert (t.optimizer, t.lr, t.rho, t.eps, t.loss, t.clip_norm) == (
        "adadelta",
        1.0,
        0.95,
        1e-6,
        "sum",
        1.0,
    )
    assert (t.lr_schedule, t.warmup_updates, t.dev_nll_sentences) == ("constant", 0, 0)
    assert t.label_smoothing == 0.0  # the paper: none; nor dropout, in any family
    assert {cls().dropout for cls in (ModelConfig, LSTMConfig, LuongConfig, TransformerConfig)} == {
        0
    }
    paper = load_profile("paper").runs["RNNsearch-50"].train
    assert (paper.optimizer, paper.loss, paper.lr_schedule) == ("adadelta", "sum", "constant")


def test_each_architecture_has_a_config_of_its_own():
    """``model_config`` picks the family of ``arch`` and leaves out the keys of the others (a
    profile's ``[model]`` section is shared by runs of several families); a key of no architecture
    is an error; each family has only its own fields, and what it has not cannot be set."""
    from nmt_lib.config import (
        ARCHS,
        CONFIGS,
        LSTMConfig,
        LuongConfig,
        TransformerConfig,
        model_config,
    )

    shared = dict(src_vocab=13, trg_vocab=13, m=8, n=6, n_align=5, l=3, heads=2, layers=2)
    assert type(model_config(shared)) is ModelConfig
    assert type(model_config(shared, arch="Seq2seq")) is LSTMConfig
    assert type(model_config(shared, arch="Luong")) is LuongConfig
    t = model_config(shared, arch="Transformer")
    assert type(t) is TransformerConfig and (t.heads, t.layers) == (2, 2)
    assert not hasattr(t, "n_align") and not hasattr(model_config(shared), "heads")
    assert set(CONFIGS) == set(ARCHS)
    with pytest.raises(ConfigError, match=r"model: unknown key\(s\) \['depth'\]"):
        model_config(depth=3)
    with pytest.raises(ConfigError, match="arch must be one of"):
        LSTMConfig(arch="Transformer")


def test_a_config_saved_with_every_architectures_keys_reads_back():
    """Configs saved before the families were split hold every key: they read back as the family's,
    equal to the run's own (so that committed results still record their runs)."""
    from nmt_experiments.core.results import same_run

    run = load_profile(ROOT / "nmt_lib" / "profiles" / "studies" / "compare.toml").runs
    seq = run["Seq2seq-50-s1"]
    old = to_dict(seq)
    old["model"] |= {
        "n_align": 256,
        "l": 128,
        "output_rank": 128,
        "score": "general",
        "heads": 4,
        "ff": 1024,
        "dropout": 0.0,
        "input_feed": True,
        "n_dec": None,
        "gate_bias": False,
        "embedding_bias": True,
    }
    assert run_from_dict(old) == seq and same_run(old, seq)
    assert not same_run({**old, "model": {**old["model"], "layers": 1}}, seq)


def test_a_budget_that_a_run_did_not_reach_changes_nothing_before_it():
    """A raised cap retrains the runs that reached the old one, and only those; a run that its
    time budget stopped is the same run with a budget of the updates it made, and no other."""
    import dataclasses

    from nmt_experiments.core.results import same_run

    run = load_profile(ROOT / "nmt_lib" / "profiles" / "studies" / "compare.toml").runs
    run = run["RNNsearch-50-s1"]

    def budget(**t):
        return dataclasses.replace(run, train=dataclasses.replace(run.train, **t))

    raised, saved = budget(max_updates=20000), to_dict(budget(max_updates=6000))
    stopped = {"stopped_by": "early_stop", "updates": 4500}
    assert not same_run(saved, raised)  # nobody said it did not reach its cap
    assert not same_run(saved, raised, {"stopped_by": "max_updates", "updates": 6000})
    assert same_run(saved, raised, stopped)
    assert not same_run(saved, raised, {**stopped, "updates": 25000})  # past the new cap
    assert not same_run({**saved, "train": {**saved["train"], "lr": 0.5}}, raised, stopped)
    timed = to_dict(budget(max_updates=None, max_hours=0.667))
    by_time = {"stopped_by": "max_hours", "updates": 12018}
    assert same_run(timed, budget(max_updates=12018), by_time)
    assert not same_run(timed, budget(max_updates=12000), by_time)
    assert not same_run(timed, budget(max_updates=12018))


def test_the_runs_a_profile_would_train_differently_now_are_named(tmp_path):
    """A recipe chosen again after the study's runs were trained: the text names those runs, the
    setting that changed and what training them again costs; a study trained as its profile says
    gets no text."""
    import dataclasses

    from nmt_experiments.core.results import stale_text
    from nmt_lib.io import write_json

    src = ROOT / "nmt_lib" / "profiles" / "studies" / "compare.toml"
    runs = load_profile(src).runs
    names = ["RNNsearch-50-s1", "Luong-dot-50-s1"]
    for name in names:
        d = tmp_path / "runs" / name
        d.mkdir(parents=True)
        write_json(d / "config.json", to_dict(runs[name]))
        write_json(
            d / "train_summary.json", {"stopped_by": "early_stop", "updates": 100, "hours": 0.5}
        )
    write_json(tmp_path / "manifest.json", {"runs": names})
    assert stale_text(tmp_path, src) == ""
    luong = runs["Luong-dot-50-s1"]
    lr = luong.train.lr
    head, tail = src.read_text(encoding="utf-8").split('[runs."Luong-dot-50-s1"]')
    newer = f'{head}[runs."Luong-dot-50-s1"]' + tail.replace(f"lr = {lr},", f"lr = {2 * lr},", 1)
    assert newer != src.read_text(encoding="utf-8")
    (tmp_path / "p.toml").write_text(newer, encoding="utf-8")
    assert load_profile(tmp_path / "p.toml").runs["Luong-dot-50-s1"] == dataclasses.replace(
        luong, train=dataclasses.replace(luong.train, lr=2 * lr)
    )
    text = stale_text(tmp_path, tmp_path / "p.toml")
    assert text.startswith("1 of the 2 runs were trained with settings that p.toml no longer")
    assert f"Luong-dot-50-s1 (train.lr {lr} → {2 * lr})" in text and "RNNsearch" not in text
    assert text.endswith("about 0.5 hours of one core at their recorded times")


def test_a_runs_own_model_key_of_another_architecture_is_an_error(tmp_path):
    p = tmp_path / "p.toml"
    head = '[model]\nl = 4\n[train]\nmax_updates = 1\n[runs."x"]\n'
    p.write_text(head + 'model = { arch = "Seq2seq", heads = 2 }\n')
    with pytest.raises(ConfigError, match=r"runs.'x'.model: \['heads'\] do not apply to arch"):
        load_profile(p)
    p.write_text(head + 'model = { arch = "Seq2seq" }\n')
    assert not hasattr(load_profile(p).runs["x"].model, "l")  # the shared section's: left out


def test_a_bad_model_value_of_another_family_is_still_an_error():
    """Keys of other families are left out of a run's config, not out of the checks: a bad value
    in an override raises, naming where it came from."""
    for bad, message in (
        ({"layers": 0}, "model.layers must be positive"),
        ({"score": "bogus"}, "model.score must be"),
        ({"heads": "x"}, r"--set model.heads: expected int"),
    ):
        with pytest.raises(ConfigError, match=message):
            load_profile("smoke", model=bad)
    with pytest.raises(ConfigError, match="model.arch must be one of"):
        load_profile("smoke", model={"arch": "GNMT"})
