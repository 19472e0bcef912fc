"""Faults a user meets, injected on a tiny corpus: signals during training, damaged checkpoints,
resuming on other data, interrupted evaluations. Each case once went wrong silently."""

from __future__ import annotations

import json
import os
import shutil
import signal
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from nmt_lib import data, evaluate, fixtures
from nmt_lib.__main__ import main
from nmt_lib.checkpoint import CheckpointError, load_checkpoint
from nmt_lib.train import Interrupted, Trainer, train_run


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """The smoke profile's RNNsearch-50 on a small toy corpus, fp32, one thread."""
    root = tmp_path_factory.mktemp("toy")
    return (*fixtures.toy_run(root, dev_bleu_sentences=5, eval_every=20), root)


def updates(cfg, n):
    return replace(cfg, train=replace(cfg.train, max_updates=n))


def signal_during_update(monkeypatch, sig, at: int):
    """Deliver ``sig`` to this process in the middle of update number ``at`` (1-based): after the
    batch is drawn, before the parameters move."""

    def next_batch(self, _orig=Trainer.next_batch):
        out = _orig(self)
        if self.update == at - 1:
            os.kill(os.getpid(), sig)
        return out

    monkeypatch.setattr(Trainer, "next_batch", next_batch)


def weights(summary) -> dict:
    return load_checkpoint(Path(summary["checkpoint_dir"]) / "last.pt")["model"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_at_an_update_and_the_rerun_resumes_exactly(toy, tmp_path, monkeypatch, sig):
    cfg, prep, _ = toy
    signal_during_update(monkeypatch, sig, at=3)
    with pytest.raises(Interrupted) as e:
        train_run(updates(cfg, 6), tmp_path / "a", prep, progress=False)
    assert e.value.signum == sig and "at update 3" in str(e.value) and "rerun" in str(e.value)
    assert "last.pt" in str(e.value)
    monkeypatch.undo()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers restored
    resumed = train_run(updates(cfg, 6), tmp_path / "a", prep, progress=False)
    assert resumed["resumed_from_update"] == 3
    straight = train_run(updates(cfg, 6), tmp_path / "b", prep, progress=False)
    a, b = weights(resumed), weights(straight)
    assert all(torch.equal(a[k], b[k]) for k in b)


def test_an_interrupted_cli_run_exits_nonzero_with_one_line(toy, tmp_path, monkeypatch, capsys):
    _, _, root = toy
    monkeypatch.setenv("NMT_CACHE", str(root / "cache"))
    signal_during_update(monkeypatch, signal.SIGTERM, at=2)
    rc = main(["train", "--profile", "smoke", "--run", "RNNsearch-50", "--data-dir",
               str(root / "wmt"), "--out", str(tmp_path / "r"), "--no-progress",
               "--set", "train.threads=1", "--set", "train.max_updates=5"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 128 + signal.SIGTERM
    assert len(err) == 1 and "SIGTERM at update 2" in err[0] and "rerun the same command" in err[0]


def test_a_damaged_checkpoint_is_refused_and_kept(toy, tmp_path):
    cfg, prep, _ = toy
    s = train_run(updates(cfg, 2), tmp_path / "r", prep, progress=False)
    last = Path(s["checkpoint_dir"]) / "last.pt"
    raw = bytearray(last.read_bytes())
    mid = len(raw) // 2
    raw[mid : mid + 64] = bytes(b ^ 0xFF for b in raw[mid : mid + 64])
    last.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match=rf"{last}: damaged checkpoint"):
        train_run(updates(cfg, 4), tmp_path / "r", prep, progress=False)
    assert last.read_bytes() == bytes(raw)  # not overwritten
    with pytest.raises(CheckpointError, match="damaged"):
        evaluate.load_trained(last)


def test_resuming_on_other_data_is_refused_and_keeps_the_vocabulary(toy, tmp_path):
    cfg, prep, root = toy
    ckpt = tmp_path / "ckpt"
    train_run(updates(cfg, 2), tmp_path / "r", prep, checkpoint_dir=ckpt, progress=False)
    vocab = (ckpt / "trg.vocab.txt").read_bytes()
    other = tmp_path / "wmt"
    shutil.copytree(root / "wmt", other)
    fr = other / "train" / "toy.fr"
    lines = fr.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[0] = "zzzmot " + lines[0]  # one word more, the same number of pairs
    fr.write_text("".join(lines), encoding="utf-8")
    cfg2 = replace(cfg, data=replace(cfg.data, data_dir=str(other)))
    prep2 = data.prepare(cfg2.data, workers=1, progress=False)
    assert len(prep2.train) == len(prep.train)
    with pytest.raises(CheckpointError, match=r"last\.pt: checkpoint trained on other data"):
        train_run(updates(cfg2, 4), tmp_path / "r", prep2, checkpoint_dir=ckpt, progress=False)
    assert (ckpt / "trg.vocab.txt").read_bytes() == vocab


def test_the_first_log_record_after_a_resume_says_how_many_updates_it_averages(toy, tmp_path):
    cfg, prep, _ = toy  # eval_every 20: a train record every 2 updates
    train_run(updates(cfg, 3), tmp_path / "r", prep, progress=False)
    train_run(updates(cfg, 6), tmp_path / "r", prep, progress=False)
    log = [json.loads(x) for x in (tmp_path / "r" / "train_log.jsonl").read_text().splitlines()]
    train = [(r["update"], r["window_updates"]) for r in log if r["kind"] == "train"]
    assert train == [(2, 2), (4, 1), (6, 2)]


def test_an_interrupted_evaluation_leaves_the_previous_one_whole(toy, tmp_path, monkeypatch):
    cfg, prep, _ = toy
    out = tmp_path / "r"
    train_run(updates(cfg, 2), out, prep, progress=False)
    evaluate.evaluate_run(cfg, out, prep)

    def files():  # the evaluation's files (an interrupted decoding's journal aside)
        return {p.name: (p.stat().st_ino, p.read_bytes()) for p in out.iterdir()
                if p.is_file() and not p.name.startswith(".decode.")}  # fmt: skip

    before = files()
    assert "bleu.json" in before and "hyp.test.tok.txt" in before
    assert not list(out.glob(".decode.*"))  # a finished evaluation keeps no journal

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(evaluate, "attention_records", interrupted)  # its last step
    with pytest.raises(KeyboardInterrupt):
        evaluate.evaluate_run(cfg, out, prep)
    assert files() == before
    assert len(list(out.glob(".decode.*.jsonl"))) == 2  # the decodings are kept for the rerun
    assert [p.name for p in out.iterdir() if p.is_dir()] == []  # no staging left behind


# --------------------------------------------------------------------------------- bad input
def cli_error(capsys, *argv) -> tuple[int, str]:
    rc = main(list(argv))
    return rc, capsys.readouterr().err.strip()


def test_a_wrong_setting_is_blamed_on_the_override_once(capsys):
    rc, err = cli_error(capsys, "train", "--profile", "smoke", "--set", "train.max_updates=abc")
    assert rc == 2
    assert (
        err
        == "nmt_lib: configuration error: --set train.max_updates: expected int or None, got 'abc'"
    )


def test_an_unknown_corpus_names_the_setting_and_where_it_was_looked_for(toy, capsys, tmp_path):
    _, _, root = toy
    rc, err = cli_error(capsys, "train", "--profile", "smoke", "--data-dir", str(root / "wmt"),
                        "--out", str(tmp_path), "--set", 'data.train=["nosuch"]')  # fmt: skip
    assert rc == 1 and len(err.splitlines()) == 1
    assert "data.train: unknown training corpus 'nosuch'" in err
    assert str(root / "wmt" / "train" / "nosuch") in err


def test_translate_refuses_beam_0_and_names_the_line_of_bad_input(capsys, tmp_path, monkeypatch):
    with pytest.raises(SystemExit):
        main(["translate", "--profile", "smoke", "--beam", "0"])
    assert "--beam: expected a whole number >= 1, got '0'" in capsys.readouterr().err
    bad = tmp_path / "in.txt"
    bad.write_bytes(b"a good line\nthe \xff cat\n")
    monkeypatch.setenv("NMT_CACHE", str(tmp_path / "cache"))
    rc, err = cli_error(capsys, "translate", "--profile", "smoke", "--run", "RNNsearch-50",
                        "-i", str(bad), "--out", str(tmp_path / "r"))  # fmt: skip
    assert rc == 1 and err.endswith(f"{bad}, line 2: not UTF-8 (byte 0xff at column 5)")


def test_translate_without_a_trained_model_says_to_train_it(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("NMT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("sys.stdin", open(os.devnull))  # noqa: SIM115
    rc, err = cli_error(capsys, "translate", "--profile", "lite", "--run", "RNNsearch-50",
                        "--out", str(tmp_path / "r"))  # fmt: skip
    assert rc == 1 and "no such checkpoint: train the model first" in err
    assert "python -m nmt_lib train --profile lite --run RNNsearch-50" in err


@pytest.mark.parametrize("suffix", [".gz", ".xz"])
def test_a_truncated_compressed_corpus_names_the_file(toy, tmp_path, suffix):
    import gzip
    import lzma

    cfg, _, root = toy
    wmt = tmp_path / "wmt"
    shutil.copytree(root / "wmt", wmt)
    opener = gzip.open if suffix == ".gz" else lzma.open
    for lang in ("en", "fr"):
        plain = wmt / "train" / f"toy.{lang}"
        with opener(plain.with_name(plain.name + suffix), "wb") as f:
            f.write(plain.read_bytes())
        plain.unlink()
    packed = wmt / "train" / f"toy.fr{suffix}"
    packed.write_bytes(packed.read_bytes()[: packed.stat().st_size // 2])
    cfg = replace(cfg.data, data_dir=str(wmt), cache_dir=str(tmp_path / "cache"))
    with pytest.raises(data.corpus.DataError, match=rf"{packed}: damaged or truncated compressed"):
        data.prepare(cfg, workers=1, progress=False)


def test_an_empty_reference_segment_names_file_and_line(toy, tmp_path):
    cfg, _, root = toy
    wmt = tmp_path / "wmt"
    shutil.copytree(root / "wmt", wmt)
    ref = next((wmt / "test-full").glob("*-ref.fr.sgm"))
    lines = ref.read_text(encoding="utf-8").splitlines(keepends=True)
    k = next(i for i, line in enumerate(lines) if "<seg" in line)
    lines[k] = lines[k][: lines[k].index(">") + 1] + "</seg>\n"
    ref.write_text("".join(lines), encoding="utf-8")
    cfg = replace(cfg.data, data_dir=str(wmt), cache_dir=str(tmp_path / "cache"))
    with pytest.raises(data.corpus.DataError, match=rf"{ref}:{k + 1}: empty <seg>"):
        data.prepare(cfg, workers=1, progress=False)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only directories")
def test_a_read_only_results_directory_is_refused_before_the_data_are_prepared(
    toy, tmp_path, monkeypatch
):
    cfg, _, _ = toy
    out = tmp_path / "ro"
    out.mkdir()
    out.chmod(0o555)
    monkeypatch.setattr(data, "prepare", lambda *a, **k: pytest.fail("prepared first"))
    with pytest.raises(PermissionError, match=f"{out}: not writable"):
        train_run(updates(cfg, 1), out, progress=False)


def test_a_results_directory_that_cannot_be_made_is_refused_before_the_data_are_prepared(
    toy, tmp_path, monkeypatch
):
    cfg, _, _ = toy
    (tmp_path / "a-file").write_text("")
    monkeypatch.setattr(data, "prepare", lambda *a, **k: pytest.fail("prepared first"))
    with pytest.raises(OSError, match="a-file"):
        train_run(updates(cfg, 1), tmp_path / "a-file" / "r", progress=False)


def test_an_interrupted_decoding_goes_on_where_it_stopped(toy, tmp_path, monkeypatch):
    from nmt_lib import search
    from nmt_lib.model import build_model

    cfg, prep, _ = toy
    torch.manual_seed(0)
    model = build_model(cfg.model).eval()
    xs, journal = prep.test.x, tmp_path / ".decode.test.jsonl"

    def run(**kw):
        with torch.no_grad():
            return search.decode_corpus(model, xs, beam=3, batch_size=4, workers=1, **kw)

    straight = run()
    calls, real, fail_at = [], search.beam_search, [3]

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) in fail_at:
            raise RuntimeError("stopped")
        return real(*args, **kwargs)

    monkeypatch.setattr(search, "beam_search", flaky)
    with pytest.raises(RuntimeError, match="stopped"):
        run(journal=journal)
    with open(journal, "a", encoding="utf-8") as f:
        f.write('{"batch": 4, "size": 4, "hy')  # torn by the interruption
    calls.clear(), fail_at.clear()
    resumed = run(journal=journal)
    assert len(calls) == 5 - 2  # the two batches in the journal were not decoded again
    assert [(h.tokens, h.cost) for h in resumed] == [(h.tokens, h.cost) for h in straight]
    assert len(journal.read_text().splitlines()) == 5
