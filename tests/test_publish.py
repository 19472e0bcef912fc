"""Published weights (nmt_lib.publish): float16 safetensors, vocabularies, config, card and sha256s;
loading checks every file; ``translate`` runs them with no checkpoint and no WMT'14 files."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from nmt_lib import publish
from nmt_lib.__main__ import main
from nmt_lib.checkpoint import CheckpointError
from nmt_lib.config import ConfigError, load_profile
from nmt_lib.data import fixtures
from nmt_lib.evaluate import evaluate_run
from nmt_lib.loading import (
    PUBLISHED_FILES,
    SUMS,
    load_published,
    load_trained,
    recorded_sums,
    verify_published,
)
from nmt_lib.train import train_run


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """The smoke profile's RNNsearch-50*, 4 updates on a toy corpus, evaluated and published
    into ``<root>/results/published/RNNsearch-50star``: ``(root, checkpoint dir, published)``."""
    root = tmp_path_factory.mktemp("pub")
    cfg, prep = fixtures.toy_run(root, run="RNNsearch-50*", dev_bleu_sentences=0, eval_every=2)
    cfg = replace(cfg, train=replace(cfg.train, max_updates=4))
    run_out = root / "results" / "runs" / "RNNsearch-50star"
    ckpt = Path(train_run(cfg, run_out, prep, progress=False)["checkpoint_dir"])
    evaluate_run(cfg, run_out, prep, checkpoint=ckpt, nll_sentences=10, figure_sources=())
    out = publish.export(
        ckpt, root / "results" / "published" / "RNNsearch-50star", cfg, run_out, prep.test
    )
    return root, ckpt, out


def test_the_published_files_and_their_card(published):
    root, _, out = published
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted([*PUBLISHED_FILES, SUMS, publish.CARD, "agreement.json"])
    card = (out / publish.CARD).read_text(encoding="utf-8")
    bleu = json.loads((root / "results/runs/RNNsearch-50star/bleu.json").read_text())
    assert f"{bleu['all']['tok']['score']:.2f} (Table 1's row)" in card
    for line in (out / SUMS).read_text().splitlines():
        digest, name = line.split("  ")
        assert f"`{name}`: `{digest}`" in card
    agreement = json.loads((out / "agreement.json").read_text())
    assert agreement["sentences"] == 20 and 0 <= agreement["same"] <= 20


def test_loading_gives_the_checkpoints_weights_in_float16(published):
    _, ckpt, out = published
    pub = load_published(out)
    model, cfg, trg = pub.model, pub.cfg, pub.trg_vocab
    ref, ref_cfg = load_trained(ckpt).model, load_trained(ckpt).cfg
    assert cfg == ref_cfg and len(trg) == cfg.model.trg_vocab
    for (name, w), (_, r) in zip(model.state_dict().items(), ref.state_dict().items(), strict=True):
        assert w.dtype == torch.float32, name
        assert torch.equal(w, r.half().float()), name
    assert (out / "model.safetensors").stat().st_size < 0.6 * (ckpt / "last.pt").stat().st_size


def test_a_changed_file_is_refused_in_one_line_naming_it(published, tmp_path):
    import shutil

    _, _, out = published
    copy = tmp_path / "m"
    shutil.copytree(out, copy)
    with open(copy / "trg.vocab.txt", "a", encoding="utf-8") as f:
        f.write("x\t1\n")
    with pytest.raises(CheckpointError) as e:
        load_published(copy)
    msg = str(e.value)
    assert "\n" not in msg and str(copy / "trg.vocab.txt") in msg and "sha256" in msg
    (copy / "trg.vocab.txt").unlink()
    with pytest.raises(CheckpointError, match="trg.vocab.txt: missing"):
        load_published(copy)


def test_translate_runs_the_published_model_without_checkpoint_or_data(
    published, tmp_path, capsys, monkeypatch
):
    root, ckpt, out = published
    monkeypatch.setenv("NMT_CACHE", str(tmp_path / "empty-cache"))  # no checkpoint here
    src = tmp_path / "in.txt"
    src.write_text("the cat sleeps .\na house .\n", encoding="utf-8")
    args = [
        "translate",
        "--profile",
        "smoke",
        "--run",
        "RNNsearch-50*",
        "--out",
        str(root / "results"),
        "--data-dir",
        str(tmp_path / "no-data"),
        "-i",
        str(src),
    ]
    assert main(args) == 0
    from_published = capsys.readouterr().out
    assert main([*args, "--checkpoint", str(ckpt)]) == 0
    from_checkpoint = capsys.readouterr().out
    assert len(from_published.splitlines()) == 2
    assert from_published == from_checkpoint or "unk" not in from_published  # fp16 rounding only
    assert main([*args, "--replace-unk"]) == 0
    assert "<unk>" not in capsys.readouterr().out.replace("&lt;unk&gt;", "<unk>")


def test_a_profile_publishes_only_its_own_runs(tmp_path):
    prof = tmp_path / "p.toml"
    prof.write_text(
        'publish = ["nope"]\n[runs."a"]\ntrain = { max_updates = 1 }\n', encoding="utf-8"
    )
    with pytest.raises(ConfigError, match="publish names no run"):
        load_profile(prof)
    assert load_profile("lite").publish == ("RNNsearch-50*",)


def test_each_committed_model_card_is_its_table_1_row():
    """Every published model of the committed results: its files intact, its card's test BLEU the
    profile's Table 1 row, and its float16 weights translating as the checkpoint on at least 99%
    of the sample (else the card gives their own BLEU)."""
    import csv

    from nmt_lib.config import home

    found = sorted((home() / "results").glob(f"*/published/*/{SUMS}"))
    assert found, "no published model in the committed results"
    for sums in found:
        path, profile = sums.parent, sums.parents[2]
        verify_published(path)
        cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
        with open(profile / "table1.csv", encoding="utf-8") as f:
            row = next(r for r in csv.DictReader(f) if r["model"] == cfg["name"])
        card = (path / publish.CARD).read_text(encoding="utf-8")
        assert f"| {float(row['All']):.2f} (Table 1's row)" in card, path
        agreement = json.loads((path / "agreement.json").read_text(encoding="utf-8"))
        if agreement["same"] < 0.99 * agreement["sentences"]:
            assert "test BLEU with the float16 weights" in card, path


def _tampered(published, tmp_path, edit) -> tuple[Path, Path]:
    """A copy of the published model beside a manifest recording its sums, its weights edited by
    ``edit`` (a function of the tensors; None: random bytes) and SHA256SUMS rewritten to match:
    ``(published copy, manifest)``."""
    import shutil

    from safetensors.torch import load_file, save_file

    from nmt_lib.io import sha256_file, write_json

    _, _, out = published
    copy = tmp_path / "res" / "published" / "RNNsearch-50star"
    shutil.copytree(out, copy)
    manifest = tmp_path / "res" / "manifest.json"
    write_json(manifest, {"published": {"RNNsearch-50*": recorded_sums(copy)}})
    f = copy / "model.safetensors"
    if edit is None:
        f.write_bytes(torch.randint(0, 256, (4096,), dtype=torch.uint8).numpy().tobytes())
    else:
        tensors = load_file(str(f))
        save_file(edit(tensors), str(f))
    sums = {name: sha256_file(copy / name) for name in PUBLISHED_FILES}
    (copy / SUMS).write_text("".join(f"{h}  {n}\n" for n, h in sums.items()))
    return copy, manifest


def _negate_one(t):
    name = next(iter(t))
    return {**t, name: -t[name]}


def _one_nan(t):
    name = next(iter(t))
    w = t[name].clone()
    w.view(-1)[0] = float("nan")
    return {**t, name: w}


def test_weights_edited_with_their_sums_are_refused_against_the_manifest(published, tmp_path):
    copy, manifest = _tampered(published, tmp_path, _negate_one)
    with pytest.raises(CheckpointError) as e:
        load_published(copy)
    msg = str(e.value)
    assert "\n" not in msg and str(copy / "model.safetensors") in msg and str(manifest) in msg


@pytest.mark.parametrize(
    "edit, says",
    [
        (_one_nan, "non-finite weights"),
        (lambda t: {k: v.to(torch.int64) for k, v in t.items()}, "torch.int64"),
        (lambda t: {k: v.float() for k, v in t.items()}, "torch.float32"),
        (lambda t: {k: v[:1] for k, v in t.items()}, "torch.float16 [1"),
        (None, "not a readable safetensors file"),
    ],
    ids=["nan", "int64", "float32", "shapes", "garbage"],
)
def test_published_weights_of_wrong_dtype_shape_or_value_are_one_line(
    published, tmp_path, edit, says
):
    copy, manifest = _tampered(published, tmp_path, edit)
    manifest.unlink()  # SHA256SUMS alone agrees with them: the weights themselves are checked
    with pytest.raises(CheckpointError) as e:
        load_published(copy)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(str(copy / "model.safetensors")) and says in msg


def test_an_export_clears_the_staging_a_killed_one_left(published, tmp_path):
    root, ckpt, _ = published
    target = tmp_path / "published" / "RNNsearch-50star"
    stale = tmp_path / "published" / ".publish.k1ll3d"
    stale.mkdir(parents=True)
    (stale / "model.safetensors").write_bytes(b"a copy of the weights")
    cfg = load_trained(ckpt).cfg
    publish.export(ckpt, target, cfg, root / "results" / "runs" / "RNNsearch-50star")
    assert sorted(p.name for p in target.parent.iterdir()) == ["RNNsearch-50star"]
    verify_published(target)
    publish.export(ckpt, target, cfg, root / "results" / "runs" / "RNNsearch-50star")  # replaced
    assert sorted(p.name for p in target.parent.iterdir()) == ["RNNsearch-50star"]
