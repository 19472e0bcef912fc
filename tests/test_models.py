"""``nmt_lib.models``: every architecture by name, initialised by one set of rules, and the
``compare`` study profile (``nmt_lib/profiles/studies/compare.toml``) that puts the models before and after the paper on lite's footing."""

import dataclasses

import pytest
import torch

from nmt_lib.config import ARCHS, PROFILE_DIR, ConfigError, ModelConfig, load_profile
from nmt_lib.models import CLASSES, build_model

SMALL = dict(src_vocab=13, trg_vocab=11, m=8, n=6, n_align=5, l=3, heads=2, ff=12, init="fanin")


@pytest.mark.parametrize("arch", ARCHS)
def test_every_arch_builds_with_the_interface(arch):
    model = build_model(ModelConfig(arch=arch, **SMALL))
    assert type(model) is CLASSES[arch]
    for method in ("encode", "init_state", "readout_step", "next_state", "steps",
                   "word_projections", "score"):  # fmt: skip
        assert callable(getattr(model, method)), method
    x, y = torch.tensor([[4, 5, 2]]), torch.tensor([[6, 2]])
    logp, _ = model(x, x != 0, y, y != 0)
    assert logp.shape == (1, 2) and (logp < 0).all()


def test_initialisation_rules():
    """LSTM recurrent matrices orthogonal per gate, biases zero, layer norms the identity, the
    Transformer's embeddings of size ``1/√d``."""
    torch.manual_seed(0)
    lstm = build_model(ModelConfig(arch="Luong", **SMALL))
    for name, p in lstm.named_parameters():
        if ".weight_hh_" in name:
            for block in p.detach().split(p.shape[1]):
                torch.testing.assert_close(block.t() @ block, torch.eye(p.shape[1]))
        if ".bias_" in name or name == "b_y":
            assert not p.any(), name
    t = build_model(ModelConfig(arch="Transformer", **{**SMALL, "src_vocab": 4000, "m": 64}))
    for module in t.modules():
        if isinstance(module, torch.nn.LayerNorm):
            assert (module.weight == 1).all() and not module.bias.any()
    assert t.E_bar.std().item() == pytest.approx(64**-0.5, rel=0.05)


def test_config_checks_the_new_fields():
    with pytest.raises(ConfigError, match="model.arch"):
        ModelConfig(arch="GNMT")
    with pytest.raises(ConfigError, match="model.score"):
        ModelConfig(arch="Luong", score="location")
    with pytest.raises(ConfigError, match="multiple of model.heads"):
        ModelConfig(arch="Transformer", m=10, heads=4)


def test_compare_profile_is_lite_but_the_architecture():
    """The comparison's rows stand beside lite's: the same data, vocabularies, sizes, recipe,
    budget and search; only the architecture's own settings differ."""
    compare, lite = load_profile(PROFILE_DIR / "studies" / "compare.toml"), load_profile("lite")
    ref = lite.runs["RNNsearch-50"]
    own = {"arch", "layers", "reverse_source", "score", "input_feed", "heads", "ff"}
    expected = set(ARCHS) - lite_archs(lite)
    assert {run.model.arch for run in compare.runs.values()} == expected
    for name, run in compare.runs.items():
        assert run.data == ref.data and run.train == ref.train and run.search == ref.search, name
        ours = {k: v for k, v in dataclasses.asdict(run.model).items() if k not in own}
        theirs = {k: v for k, v in dataclasses.asdict(ref.model).items() if k not in own}
        assert ours == theirs, name
    reversed_ = [r for r in compare.runs.values() if r.model.reverse_source]
    assert [r.model.arch for r in reversed_] == ["Seq2seq"]  # the reversal's effect, measured


def lite_archs(lite):
    return {run.model.arch for run in lite.runs.values()}
