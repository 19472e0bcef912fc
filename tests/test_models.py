"""``nmt_lib.models``: every architecture by name, initialised by one set of rules, and the
``compare`` study profile (``nmt_lib/profiles/studies/compare.toml``) that puts the models before and after the paper on lite's footing."""

import dataclasses

import pytest
import torch

from nmt_lib.backend import backend
from nmt_lib.config import ARCHS, PROFILE_DIR, ConfigError, load_profile, model_config
from nmt_lib.models import CLASSES, build_model

SMALL = dict(src_vocab=13, trg_vocab=11, m=8, n=6, n_align=5, l=3, heads=2, ff=12, init="fanin")


@pytest.mark.parametrize("arch", ARCHS)
def test_every_arch_builds_with_the_interface(arch):
    model = build_model(model_config(arch=arch, **SMALL))
    assert type(model) is CLASSES[arch]
    steps = ("readout_step", "next_state") if arch in ("RNNsearch", "RNNencdec") else ("step",)
    for method in ("encode", "init_state", *steps, "steps", "score"):
        assert callable(getattr(model, method)), method
    x, y = torch.tensor([[4, 5, 2]]), torch.tensor([[6, 2]])
    logp, _ = model(x, x != 0, y, y != 0)
    assert logp.shape == (1, 2) and (logp < 0).all()


def test_initialisation_rules():
    """LSTM recurrent matrices orthogonal per gate, biases zero, layer norms the identity, the
    Transformer's embeddings of size ``1/√d``."""
    torch.manual_seed(0)
    lstm = build_model(model_config(arch="Luong", **SMALL))
    for name, p in lstm.named_parameters():
        if ".weight_hh_" in name:
            for block in p.detach().split(p.shape[1]):
                torch.testing.assert_close(block.t() @ block, torch.eye(p.shape[1]))
        if ".bias_" in name or name == "b_y":
            assert not p.any(), name
    t = build_model(model_config(arch="Transformer", **{**SMALL, "src_vocab": 4000, "m": 64}))
    for module in t.modules():
        if isinstance(module, torch.nn.LayerNorm):
            assert (module.weight == 1).all() and not module.bias.any()
    assert t.E_bar.std().item() == pytest.approx(64**-0.5, rel=0.05)


@pytest.mark.parametrize("arch", ARCHS)
def test_every_class_initialises_itself(arch):
    """``build_model`` constructs the class and calls its own ``reset_parameters``, nothing else:
    the same numbers as the class initialising itself from the same seed, on either backend."""
    cfg = model_config(arch=arch, **SMALL)
    torch.manual_seed(0)
    own = CLASSES[arch](cfg)
    own.reset_parameters()
    for on in (None, backend("fast"), backend("reference")):
        torch.manual_seed(0)
        built = build_model(cfg, on)
        for (k, p), q in zip(built.named_parameters(), own.parameters(), strict=True):
            assert torch.equal(p, q), k


def test_config_checks_the_new_fields():
    with pytest.raises(ConfigError, match="model.arch"):
        model_config(arch="GNMT")
    with pytest.raises(ConfigError, match="model.score"):
        model_config(arch="Luong", score="location")
    with pytest.raises(ConfigError, match="multiple of model.heads"):
        model_config(arch="Transformer", m=10, heads=4)


@pytest.mark.parametrize("study", ["compare", "recipes"])
def test_the_studies_are_lite_but_the_architecture_and_its_recipe(study):
    """The comparison's rows and the recipe sweep's arms stand beside lite's: the same data (but
    the seed that orders the batches), vocabularies and sizes; only the architecture's own
    settings, the recipe and the search differ."""
    prof, lite = load_profile(PROFILE_DIR / "studies" / f"{study}.toml"), load_profile("lite")
    ref = lite.runs["RNNsearch-50"]
    own = {
        "arch",
        "layers",
        "reverse_source",
        "score",
        "input_feed",
        "heads",
        "ff",
        "dropout",
        "forget_bias",
    }
    archs = {run.model.arch for run in prof.runs.values()}
    assert archs >= set(ARCHS) - lite_archs(lite) - ({"Peeky"} if study == "recipes" else set())
    for name, run in prof.runs.items():
        assert dataclasses.replace(run.data, seed=ref.data.seed) == ref.data, name
        ours = {k: v for k, v in dataclasses.asdict(run.model).items() if k not in own}
        theirs = dataclasses.asdict(ref.model)
        assert ours == {k: theirs[k] for k in ours}, name  # the sizes it shares with lite's
    reversed_ = {r.model.arch for r in prof.runs.values() if getattr(r.model, "reverse_source", 0)}
    assert reversed_ <= {"Seq2seq"}  # the reversal's effect, measured on Sutskever's model


def lite_archs(lite):
    return {run.model.arch for run in lite.runs.values()}


@pytest.mark.parametrize("arch", ARCHS)
def test_label_smoothing_of_every_family_is_that_of_its_steps_distributions(arch):
    """``forward(..., smoothing=ε)`` of every architecture (both backends for the paper's) is
    ``(1 - ε) log p(y_i) + ε / (K - 1) Σ_{k ≠ <pad>} log p(k)`` of the distributions its decoding
    steps give over the reference."""
    from nmt_lib.fast import accelerate

    torch.manual_seed(0)
    model = build_model(model_config(arch=arch, **SMALL, layers=2)).double()
    x = torch.tensor([[4, 5, 7, 2], [6, 2, 0, 0]])
    y = torch.tensor([[6, 3, 4, 2], [5, 2, 0, 0]])
    enc, steps = model.encode(x, x != 0), model.steps()
    state, want = steps.start(enc), []
    for i in range(y.shape[1]):
        logp, _, carry = steps.readout(enc, state)
        q = torch.full_like(logp, 0.1 / (logp.shape[1] - 1))
        q[:, 0] = 0
        q[torch.arange(2), y[:, i]] += 0.9
        want.append((q * logp).sum(-1))
        state = steps.advance(carry, y[:, i])
    want = torch.stack(want, 1).masked_fill(y == 0, 0.0)
    models = [model] + ([accelerate(model)] if arch in ("RNNsearch", "RNNencdec") else [])
    for m in models:
        got, _ = m(x, x != 0, y, y != 0, smoothing=0.1)
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("arch", ARCHS)
def test_dropout_only_while_training(arch):
    """``model.dropout``: in eval mode the model is its dropout-0 self (the same parameters give
    the same log-probabilities, on both backends for the paper's models); while training, its
    outputs change."""
    from nmt_lib.fast import accelerate

    torch.manual_seed(0)
    cfg = model_config(arch=arch, **SMALL, layers=2)
    plain = build_model(cfg).double()
    dropped = build_model(dataclasses.replace(cfg, dropout=0.5)).double()
    dropped.load_state_dict(plain.state_dict())
    x = torch.tensor([[4, 5, 7, 2], [6, 2, 0, 0]])
    y = torch.tensor([[6, 3, 4, 2], [5, 2, 0, 0]])
    fast = arch in ("RNNsearch", "RNNencdec")
    pairs = [(plain, dropped)] + ([(accelerate(plain), accelerate(dropped))] if fast else [])
    for a, b in pairs:
        a.train(), b.eval()
        torch.testing.assert_close(b(x, x != 0, y, y != 0)[0], a(x, x != 0, y, y != 0)[0])
        b.train()
        assert not torch.allclose(b(x, x != 0, y, y != 0)[0], a(x, x != 0, y, y != 0)[0])
    with pytest.raises(ConfigError, match="model.dropout"):
        model_config(arch=arch, **SMALL, dropout=1.0)
