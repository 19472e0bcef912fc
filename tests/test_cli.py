"""The command line (python -m nmt_lib): the smoke profile end to end on the toy corpus."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from nmt_lib.__main__ import build_parser, main, parse_sets
from nmt_lib.config import ConfigError
from nmt_lib.data import fixtures
from nmt_lib.translate import alignment_line

ROOT = Path(__file__).resolve().parent.parent


def test_smoke_train_translate_evaluate(tmp_path, monkeypatch):
    fixtures.write_toy_wmt(tmp_path / "wmt", n_train=400, n_dev=20, n_test=20)
    env = {**os.environ, "NMT_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    sel = [
        "--profile",
        "smoke",
        "--run",
        "RNNsearch-50",
        "--data-dir",
        str(tmp_path / "wmt"),
        "--out",
        str(tmp_path / "results"),
        "--set",
        "train.threads=1",
    ]

    def cli(*args, stdin=None):
        r = subprocess.run(
            [sys.executable, "-m", "nmt_lib", *args],
            env=env,
            cwd=tmp_path,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr
        return r

    cli(
        "train",
        *sel,
        "--set",
        "train.max_updates=4",
        "--set",
        "train.eval_every=2",
        "--set",
        "train.dev_bleu_sentences=3",
    )
    run = tmp_path / "results" / "runs" / "RNNsearch-50"
    assert json.loads((run / "train_summary.json").read_text())["updates"] == 4
    assert json.loads((run / "config.json").read_text())["train"]["max_updates"] == 4

    r = cli("translate", *sel, "--beam", "2", stdin="The dog sleeps.\nA cat runs in the house.\n")
    out = r.stdout.splitlines()
    assert len(out) == 2 and all(isinstance(line, str) for line in out)
    # files instead of stdin/stdout, in this process (a subprocess costs seconds of imports)
    (tmp_path / "in.txt").write_text("The dog sleeps.\n\n", encoding="utf-8")
    monkeypatch.setenv("NMT_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    assert main(["translate", *sel, "-i", "in.txt", "-o", "out.txt"]) == 0
    lines = (tmp_path / "out.txt").read_text(encoding="utf-8").split("\n")
    assert len(lines) == 3 and lines[0].strip()
    assert lines[1:] == ["", ""]  # an empty line gives an empty translation
    assert main(["translate", *sel, "-i", "in.txt", "-o", "al.txt", "--alignment"]) == 0
    first, align, *_ = (tmp_path / "al.txt").read_text(encoding="utf-8").split("\n")
    assert first == lines[0] and align.count("←") == len(align.split(" | ")) >= 1
    sources = {p.split("←")[1].split()[0] for p in align.split(" | ")}
    assert sources <= {"The", "dog", "sleeps", ".", "</s>"}

    cli("evaluate", *sel)
    res = json.loads((run / "bleu.json").read_text())
    assert res["all"]["n"] == 20 and res["no_unk"]["n"] <= 20
    assert "tok:none" in res["all"]["tok"]["signature"]
    assert "tok:13a" in res["all"]["detok"]["signature"]
    assert len((run / "hyp.test.tok.txt").read_text(encoding="utf-8").splitlines()) == 20
    by_len = json.loads((run / "bleu_by_length.json").read_text())
    assert sum(b["n"] for b in by_len["buckets_tok"]) == 20 and len(by_len["stats_tok"]) == 20
    nll = json.loads((run / "nll.json").read_text())
    assert nll["dev"]["n"] == 40 and nll["train"]["mean"] > 0
    att = json.loads((run / "attention.json").read_text())
    assert att[0]["found"] is False and att[0]["index"] is None  # (a) is not in the toy test set,
    assert len(att[0]["alpha"]) == len(att[0]["hyp_tokens"])  # but translated from its own words
    assert att[0]["src_tokens"] == [*att[0]["source"].split(), "</s>"]

    # a pack for a machine without the data (trained from in test_replicate.py)
    assert main(["pack", *sel, str(tmp_path / "pack")]) == 0
    assert json.loads((tmp_path / "pack" / "pack.json").read_text())["train"] == ["toy"]

    # Figure 3 for a sentence that is in the (toy) test set, with the trained model
    from nmt_lib import data
    from nmt_lib.loading import load_trained
    from nmt_lib.scoring import attention_records

    ckpt = json.loads((run / "train_summary.json").read_text())["checkpoint_dir"]
    assert ckpt.startswith("<cache>/ckpt/") and res["checkpoint"].startswith(ckpt)  # no local path
    loaded = load_trained(tmp_path / "cache" / ckpt.removeprefix("<cache>/"))
    model, cfg = loaded.model, loaded.cfg
    prep = data.prepare(cfg.data, workers=1, progress=False)
    src = prep.test.src_raw[3]
    (rec,) = attention_records(
        model, prep.test, [src.replace(" ", "  ")], prep.trg_vocab, cfg.search
    )
    assert rec["found"] and rec["index"] == prep.test.src_raw.index(src)
    alpha = torch.tensor(rec["alpha"])
    assert alpha.shape == (len(rec["hyp_tokens"]), len(prep.test.src_tok[3]) + 1)
    torch.testing.assert_close(alpha.sum(1), torch.ones(len(alpha)), atol=1e-4, rtol=0)
    assert rec["src_tokens"][-1] == "</s>"
    (new,) = attention_records(
        model,
        prep.test,
        ["no such sentence ."],
        prep.trg_vocab,
        cfg.search,
        src_vocab=prep.src_vocab,
    )
    assert not new["found"] and "ref_tokens" not in new
    assert torch.tensor(new["alpha"]).shape == (len(new["hyp_tokens"]), 5)


def test_find_sentences():
    from types import SimpleNamespace

    from nmt_lib.paper import FIG3_SOURCES
    from nmt_lib.scoring import find_sentences

    ev = SimpleNamespace(
        src_raw=[
            "Hello world.",
            "“This will change my future with my family,” the man said.",
            "An admitting privilege is the right of a doctor.",
        ]
    )
    assert find_sentences(ev, [FIG3_SOURCES[3], "Hello world .", "nope"]) == [1, 0, None]
    assert find_sentences(ev, ["An admitting privilege is"], prefix=True) == [2]


def test_help_and_errors(capsys):
    for cmd in ("train", "translate", "evaluate"):
        with pytest.raises(SystemExit) as e:
            main([cmd, "--help"])
        assert e.value.code == 0
        assert "--profile" in capsys.readouterr().out
    assert main(["train", "--set", "train.no_such_key=1"]) == 2
    assert "no_such_key" in capsys.readouterr().err
    assert main(["train", "--run", "RNNsearch-99"]) == 2
    assert main(["train", "--run-name", "RNNsearch-99"]) == 2


def test_torchrun_passes_the_run_name_on():
    """``torchrun ... -m nmt_lib train --run-name R``: torchrun leaves ``--run-name`` to us, where
    it would take ``--run`` for an abbreviation of its ``--run-path``."""
    from torch.distributed.run import get_args_parser

    head = ["--nproc-per-node", "2", "-m", "nmt_lib"]
    args = get_args_parser().parse_args([*head, "train", "--profile", "gpu", "--run-name", "R"])
    assert args.training_script_args == ["train", "--profile", "gpu", "--run-name", "R"]
    assert build_parser().parse_args(args.training_script_args).run == ["R"]
    with pytest.raises(SystemExit):
        get_args_parser().parse_args([*head, "train", "--run", "R"])
    assert main(["train", "--profile", "no-such-profile"]) == 2
    assert parse_sets(["train.max_updates=100", "data.train=['a', 'b']", "train.device=cpu"]) == {
        "train": {"max_updates": 100, "device": "cpu"},
        "data": {"train": ["a", "b"]},
    }
    for bad in ("max_updates=1", "bogus.x=1", "train.x"):
        with pytest.raises(ConfigError):
            parse_sets([bad])


# ------------------------------------------------------------------------- translate edge cases
@pytest.fixture(scope="module")
def toy_model(toy_trained):
    """The checkpoint directory of the smoke profile's RNNsearch-50, 2 updates on a toy corpus."""
    return toy_trained.ckpt


def translate(capsys, ckpt, *args) -> tuple[int, str, str]:
    """``translate`` with the toy model (its toy corpus as the data directory, so that the
    default cache is never read), greedy."""
    rc = main(
        [
            "translate",
            "--profile",
            "smoke",
            "--run",
            "RNNsearch-50",
            "--checkpoint",
            str(ckpt),
            "--data-dir",
            str(ckpt.parents[2] / "wmt"),
            "--beam",
            "1",
            *args,
        ]
    )
    out, err = capsys.readouterr()
    return rc, out, err.strip()


def test_translate_to_a_directory_fails_clearly(toy_model, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("the cat\n", encoding="utf-8")
    rc, _, err = translate(capsys, toy_model, "-i", str(tmp_path / "in.txt"), "-o", str(tmp_path))
    assert rc == 1 and len(err.splitlines()) == 1
    assert f"{tmp_path}: is a directory" in err and ".tmp" not in err


def test_translate_keeps_the_good_lines_around_a_bad_one(toy_model, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_bytes(b"the cat sleeps .\nthe \xff dog\na house .\n")
    rc, _, err = translate(capsys, toy_model, "-i", str(src), "-o", str(tmp_path / "out.txt"))
    assert rc == 1 and len(err.splitlines()) == 1
    assert f"{src}, line 2: not UTF-8 (byte 0xff at column 5)" in err
    lines = (tmp_path / "out.txt").read_text(encoding="utf-8").split("\n")
    assert len(lines) == 4 and lines[0] and lines[1] == "" and lines[2] and lines[3] == ""
    one = tmp_path / "one.txt"
    one.write_text("the cat sleeps .\n", encoding="utf-8")
    rc, good, _ = translate(capsys, toy_model, "-i", str(one))
    assert rc == 0 and good.splitlines()[0] == lines[0]  # the same translation as alone


def test_translate_quotes_the_run_name_in_its_hint(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("NMT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("sys.stdin", open(os.devnull))  # noqa: SIM115
    rc = main(
        ["translate", "--profile", "smoke", "--run", "RNNsearch-50*", "--out", str(tmp_path / "r")]
    )
    err = capsys.readouterr().err
    assert rc == 1 and "--run 'RNNsearch-50*'" in err


def test_translate_warns_about_a_line_far_beyond_the_training_lengths(toy_model, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("the cat sleeps .\n" + " ".join(["the cat"] * 50) + "\n", encoding="utf-8")
    rc, out, err = translate(capsys, toy_model, "-i", str(src))
    assert rc == 0 and len(out.splitlines()) == 2
    assert len(err.splitlines()) == 1 and "line 2" in err and "100 words" in err
    assert "12" in err  # the smoke profile trains on sentences of at most 12 words


def test_the_alignment_line_shows_words_as_written_not_mosess_escapes():
    alpha = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.0, 0.1, 0.9]])
    line = alignment_line(["l&apos;", "homme", "&quot;"], ["the", "man&apos;s"], alpha)
    assert line == """  l'←the 0.70 | homme←man's 0.80 | "←</s> 0.90"""
    assert alignment_line(["le"], ["the"], None) == "  "
