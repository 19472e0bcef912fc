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

from nmt_lib import data, evaluate, translate
from nmt_lib.__main__ import main
from nmt_lib.checkpoint import CheckpointError, load_checkpoint
from nmt_lib.data import fixtures
from nmt_lib.loading import load_trained
from nmt_lib.train import Interrupted, train_run
from nmt_lib.trainer import Trainer


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
    # the handlers before: Python's own, or "ignore" where a shell started pytest in the background
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signal_during_update(monkeypatch, sig, at=3)
    with pytest.raises(Interrupted) as e:
        train_run(updates(cfg, 6), tmp_path / "a", prep, progress=False)
    assert e.value.signum == sig and "at update 3" in str(e.value) and "rerun" in str(e.value)
    assert "last.pt" in str(e.value)
    monkeypatch.undo()
    assert {s: signal.getsignal(s) for s in before} == before  # the handlers restored
    resumed = train_run(updates(cfg, 6), tmp_path / "a", prep, progress=False)
    assert resumed["resumed_from_update"] == 3
    straight = train_run(updates(cfg, 6), tmp_path / "b", prep, progress=False)
    a, b = weights(resumed), weights(straight)
    assert all(torch.equal(a[k], b[k]) for k in b)


def test_an_interrupted_cli_run_exits_nonzero_with_one_line(toy, tmp_path, monkeypatch, capsys):
    _, _, root = toy
    monkeypatch.setenv("NMT_CACHE", str(root / "cache"))
    signal_during_update(monkeypatch, signal.SIGTERM, at=2)
    rc = main(
        [
            "train",
            "--profile",
            "smoke",
            "--run",
            "RNNsearch-50",
            "--data-dir",
            str(root / "wmt"),
            "--out",
            str(tmp_path / "r"),
            "--no-progress",
            "--set",
            "train.threads=1",
            "--set",
            "train.max_updates=5",
        ]
    )
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
        load_trained(last)


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
        return {
            p.name: (p.stat().st_ino, p.read_bytes())
            for p in out.iterdir()
            if p.is_file() and not p.name.startswith(".decode.")
        }

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
    rc, err = cli_error(
        capsys,
        "train",
        "--profile",
        "smoke",
        "--data-dir",
        str(root / "wmt"),
        "--out",
        str(tmp_path),
        "--checkpoint-dir",
        str(tmp_path / "ckpt"),
        "--set",
        'data.train=["nosuch"]',
    )
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
    # the committed model (the input is read once a model is loaded)
    rc, err = cli_error(
        capsys, "translate", "--profile", "smoke", "--run", "RNNsearch-50*", "-i", str(bad)
    )
    assert rc == 1 and f"{bad}, line 2: not UTF-8 (byte 0xff at column 5)" in err


def test_translate_without_a_trained_model_says_to_train_it(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("NMT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("sys.stdin", open(os.devnull))  # noqa: SIM115
    rc, err = cli_error(
        capsys,
        "translate",
        "--profile",
        "lite",
        "--run",
        "RNNsearch-50",
        "--out",
        str(tmp_path / "r"),
    )
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
    from nmt_lib import decoding, search
    from nmt_lib.config import SearchConfig
    from nmt_lib.paper.model import build_model

    cfg, prep, _ = toy
    torch.manual_seed(0)
    model = build_model(cfg.model).eval()
    xs, journal = prep.test.x, tmp_path / ".decode.test.jsonl"

    def run(**kw):
        with torch.no_grad():
            return decoding.decode(model, xs, SearchConfig(beam=3, batch_size=4), workers=1, **kw)

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


# ------------------------------------------------------------------------------- round two
def trained(toy, tmp_path, n: int = 2, name: str = "r", **kw) -> Path:
    """The checkpoint directory of the toy model trained ``n`` updates into ``tmp_path/name``."""
    cfg, prep, _ = toy
    s = train_run(updates(cfg, n), tmp_path / name, prep, progress=False, **kw)
    return Path(s["checkpoint_dir"])


def test_a_second_training_of_a_run_is_refused_at_once_naming_the_process(
    toy, tmp_path, monkeypatch
):
    import threading

    cfg, prep, _ = toy
    ckpt, out = tmp_path / "ckpt", tmp_path / "r"
    started, release = threading.Event(), threading.Event()

    def next_batch(self, _orig=Trainer.next_batch):  # the first training waits at update 2
        if threading.current_thread() is not threading.main_thread() and self.update == 1:
            started.set()
            release.wait(30)
        return _orig(self)

    monkeypatch.setattr(Trainer, "next_batch", next_batch)
    first: dict = {}
    t = threading.Thread(
        target=lambda: first.update(
            train_run(updates(cfg, 3), out, prep, checkpoint_dir=ckpt, progress=False)
        )
    )
    t.start()
    try:
        assert started.wait(30)
        with pytest.raises(RuntimeError) as e:
            train_run(updates(cfg, 3), out, prep, checkpoint_dir=ckpt, progress=False)
    finally:
        release.set()
        t.join(60)
    msg = str(e.value)
    assert "\n" not in msg and "'RNNsearch-50'" in msg and f"process {os.getpid()}" in msg
    assert first["updates"] == 3  # the first run went on undisturbed
    # a run killed while it holds the lock (kill -9: its file is left) does not hold it any more
    import subprocess
    import sys

    hold = (
        "import sys, time; from nmt_lib.io import locked\n"
        "with locked(sys.argv[1], 'run'):\n    print('held', flush=True); time.sleep(60)"
    )
    p = subprocess.Popen(
        [sys.executable, "-c", hold, str(ckpt / ".train.lock")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert p.stdout.readline().strip() == "held"
        with pytest.raises(RuntimeError, match=f"in use by process {p.pid}"):
            train_run(updates(cfg, 4), out, prep, checkpoint_dir=ckpt, progress=False)
    finally:
        p.kill()
        p.wait()
    assert (ckpt / ".train.lock").read_text().strip() == str(p.pid)
    assert (
        train_run(updates(cfg, 4), out, prep, checkpoint_dir=ckpt, progress=False)["updates"] == 4
    )
    assert not (ckpt / ".train.lock").exists()


def test_divergence_stops_the_run_nonzero_and_keeps_the_good_checkpoint(
    toy, tmp_path, capsys, monkeypatch
):
    cfg, prep, root = toy
    ckpt = trained(toy, tmp_path, 2)
    good = (ckpt / "last.pt").read_bytes()
    wild = replace(cfg, train=replace(cfg.train, lr=1e30, max_updates=12, max_nonfinite=3))
    with pytest.raises(RuntimeError, match=r"non-finite.*train\.max_nonfinite = 3"):
        train_run(wild, tmp_path / "r", prep, resume=False, progress=False)
    assert (ckpt / "last.pt").read_bytes() == good
    # the command line: one line, a non-zero exit
    monkeypatch.setenv("NMT_CACHE", str(root / "cache"))
    rc = main(
        [
            "train",
            "--profile",
            "smoke",
            "--run",
            "RNNsearch-50",
            "--data-dir",
            str(root / "wmt"),
            "--out",
            str(tmp_path / "cli"),
            "--no-progress",
            "--set",
            "train.threads=1",
            "--set",
            "train.max_updates=12",
            "--set",
            "train.lr=1e30",
            "--set",
            "train.max_nonfinite=3",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1 and "diverged" in err[0]


def test_nonfinite_weights_are_never_saved_nor_evaluated(toy, tmp_path, monkeypatch):
    cfg, prep, _ = toy

    def step(self, _orig=Trainer.step):  # the weights turn NaN during update 3
        out = _orig(self)
        if self.update == 3:
            with torch.no_grad():
                next(self.model.parameters()).view(-1)[0] = float("nan")
        return out

    monkeypatch.setattr(Trainer, "step", step)
    every = replace(cfg, train=replace(cfg.train, max_updates=6, checkpoint_minutes=0.0))
    with pytest.raises(RuntimeError, match="non-finite"):
        train_run(every, tmp_path / "r", prep, progress=False)
    state = load_checkpoint(_ckpt_of(cfg, tmp_path / "r") / "last.pt")
    assert state["update"] == 2
    assert all(torch.isfinite(v).all() for v in state["model"].values() if v.is_floating_point())
    # a checkpoint with NaN weights (written by other means) is refused by evaluation
    state["model"][next(iter(state["model"]))].view(-1)[0] = float("inf")
    from nmt_lib.checkpoint import save_checkpoint

    bad = tmp_path / "nan.pt"
    save_checkpoint(bad, state)
    with pytest.raises(CheckpointError, match=rf"{bad}: .*non-finite"):
        load_trained(bad)


def _ckpt_of(cfg, out: Path) -> Path:
    from nmt_lib.checkpoint import default_checkpoint_dir

    return default_checkpoint_dir(cfg, out)


def _cache_copy(toy, tmp_path):
    """The toy config on a copy of its prepared-data cache, and that copy's prepared directory."""
    cfg, prep, root = toy
    shutil.copytree(root / "cache", tmp_path / "cache")
    cfg = replace(cfg, data=replace(cfg.data, cache_dir=str(tmp_path / "cache")))
    return cfg, tmp_path / "cache" / "prep" / prep.path.name


def swap_rows(path: Path, a: int = 5, b: int = 6) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[a], lines[b] = lines[b], lines[a]
    path.write_text("".join(lines), encoding="utf-8")


def test_a_changed_vocabulary_in_the_prepared_cache_is_refused(toy, tmp_path):
    cfg, prepared = _cache_copy(toy, tmp_path)
    data.prepare(cfg.data, workers=1, progress=False)  # as written, it loads
    swap_rows(prepared / "src.vocab.txt")
    with pytest.raises(data.corpus.DataError, match=rf"{prepared / 'src.vocab.txt'}: "):
        data.prepare(cfg.data, workers=1, progress=False)


def test_a_truncated_prepared_array_names_the_file(toy, tmp_path):
    cfg, prepared = _cache_copy(toy, tmp_path)
    ids = prepared / "src.ids.npy"
    ids.write_bytes(ids.read_bytes()[: ids.stat().st_size // 2])
    with pytest.raises(data.corpus.DataError, match=rf"{ids}: "):
        data.prepare(cfg.data, workers=1, progress=False)


@pytest.mark.parametrize("damage", ["swapped", "cut"])
def test_a_vocabulary_beside_a_checkpoint_that_is_not_its_own_is_refused(
    toy, tmp_path, capsys, damage
):
    ckpt = trained(toy, tmp_path)
    trg = ckpt / "trg.vocab.txt"
    if damage == "swapped":
        swap_rows(trg)
    else:
        trg.write_text("".join(trg.read_text(encoding="utf-8").splitlines(True)[:10]), "utf-8")
    (tmp_path / "in.txt").write_text("the cat\n", encoding="utf-8")
    rc, err = cli_error(
        capsys,
        "translate",
        "--profile",
        "smoke",
        "--run",
        "RNNsearch-50",
        "--checkpoint",
        str(ckpt),
        "-i",
        str(tmp_path / "in.txt"),
        "--data-dir",
        str(toy[2] / "wmt"),
    )
    assert rc == 1 and len(err.splitlines()) == 1 and f"{trg}: " in err and "vocabulary" in err


def test_evaluating_against_data_with_another_vocabulary_is_refused(toy, tmp_path):
    cfg, prep, _ = toy
    ckpt = trained(toy, tmp_path)
    itos = list(prep.trg_vocab.itos)
    itos[5], itos[6] = itos[6], itos[5]
    from nmt_lib.data.vocab import Vocab

    other = replace(prep, trg_vocab=Vocab(itos[3:], prep.trg_vocab.counts))
    with pytest.raises(CheckpointError, match=r"trg\.vocab\.txt.*vocabulary"):
        evaluate.evaluate_run(cfg, tmp_path / "r", other, checkpoint=ckpt)
    assert not (tmp_path / "r" / "bleu.json").exists()


def test_a_training_file_changed_behind_its_size_and_time_is_noticed_on_resume(toy, tmp_path):
    cfg, _, root = toy
    shutil.copytree(root / "wmt", tmp_path / "wmt")
    cfg = replace(
        cfg,
        data=replace(cfg.data, data_dir=str(tmp_path / "wmt"), cache_dir=str(tmp_path / "cache")),
    )
    prep = data.prepare(cfg.data, workers=1, progress=False)
    train_run(updates(cfg, 2), tmp_path / "r", prep, progress=False)
    fr = tmp_path / "wmt" / "train" / "toy.fr"
    st = fr.stat()
    raw = bytearray(fr.read_bytes())
    raw[0:1] = b"Z" if raw[0:1] != b"Z" else b"Y"  # same size
    fr.write_bytes(bytes(raw))
    os.utime(fr, ns=(st.st_atime_ns, st.st_mtime_ns))  # same time
    with pytest.raises(data.corpus.DataError, match=rf"{fr}: .*changed"):
        train_run(updates(cfg, 4), tmp_path / "r", progress=False)


def test_a_beam_beyond_the_vocabulary_or_the_memory_is_refused(toy, tmp_path, capsys, monkeypatch):
    from nmt_lib import decoding

    ckpt = trained(toy, tmp_path)
    (tmp_path / "in.txt").write_text("the cat\n", encoding="utf-8")
    sel = [
        "translate",
        "--profile",
        "smoke",
        "--run",
        "RNNsearch-50",
        "--checkpoint",
        str(ckpt),
        "-i",
        str(tmp_path / "in.txt"),
        "--data-dir",
        str(toy[2] / "wmt"),
    ]
    rc, err = cli_error(capsys, *sel, "--beam", "64")  # the toy model has 63 target rows
    assert rc == 1 and len(err.splitlines()) == 1 and "beam 64" in err and "63" in err
    monkeypatch.setattr(decoding, "available_memory", lambda device: 1000)
    rc, err = cli_error(capsys, *sel, "--beam", "60")
    assert rc == 1 and len(err.splitlines()) == 1 and "beam 60" in err and "memory" in err


def test_the_next_run_removes_the_debris_of_a_crashed_one_and_only_that(toy, tmp_path):
    cfg, prep, _ = toy
    out = tmp_path / "r"
    ckpt = trained(toy, tmp_path, 2)
    debris = [ckpt / ".last.pt.k2j3h4.tmp", ckpt / ".best.pt.x9y8.tmp"]
    keep = [ckpt / "notes.tmp", ckpt / ".last.pt.bak", out / ".evaluate.txt", out / "mine.tmp"]
    for p in debris + keep:
        p.write_bytes(b"x" * 1000)
    stage = out / ".evaluate.abc123"
    stage.mkdir()
    (stage / "bleu.json").write_text("{}")
    train_run(updates(cfg, 3), out, prep, progress=False)
    assert not any(p.exists() for p in debris)
    evaluate.evaluate_run(cfg, out, prep)
    assert not stage.exists()
    assert all(p.exists() for p in keep)


def _evaluation(out: Path) -> dict:
    """An evaluation's files, bleu.json reduced to the checkpoint it evaluated."""
    got = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name[0] != "."}
    got = {
        k: v
        for k, v in got.items()
        if k not in ("config.json", "train_log.jsonl", "train_summary.json")
    }
    if "bleu.json" in got:
        got["bleu.json"] = json.loads(got["bleu.json"])["checkpoint"].encode()
    return got


def test_an_evaluation_replacing_another_is_whole_whatever_move_a_signal_hits(
    toy, tmp_path, monkeypatch
):
    cfg, prep, _ = toy
    out = tmp_path / "r"
    a, b = trained(toy, tmp_path, 2) / "last.pt", trained(toy, tmp_path, 5, "other") / "last.pt"
    whole = {}
    for ck in (a, b):
        evaluate.evaluate_run(cfg, out, prep, checkpoint=ck)
        whole[ck] = _evaluation(out)
    assert whole[a] != whole[b]
    real_replace = os.replace
    for k in range(1, 8):  # a SIGINT just before the k-th file's move
        moves = []

        def replace_(src, dst, *args, moves=moves, k=k, **kw):
            if Path(dst).parent == out and Path(src).parent.name.startswith(".evaluate."):
                moves.append(dst)
                if len(moves) == k:
                    os.kill(os.getpid(), signal.SIGINT)
            return real_replace(src, dst, *args, **kw)

        monkeypatch.setattr(os, "replace", replace_)
        ck = a if k % 2 else b  # each round replaces the other model's evaluation
        try:
            evaluate.evaluate_run(cfg, out, prep, checkpoint=ck)
        except KeyboardInterrupt:
            pass
        monkeypatch.setattr(os, "replace", real_replace)
        assert len(moves) >= k
        assert _evaluation(out) == whole[ck], f"a SIGINT at move {k} left a mixed directory"
        assert [p.name for p in out.iterdir() if p.is_dir()] == []


def test_an_evaluation_cut_short_between_its_moves_is_completed_by_the_next(
    toy, tmp_path, monkeypatch
):
    cfg, prep, _ = toy
    out = tmp_path / "r"
    a, b = trained(toy, tmp_path, 2) / "last.pt", trained(toy, tmp_path, 5, "other") / "last.pt"
    evaluate.evaluate_run(cfg, out, prep, checkpoint=b)
    whole_b = _evaluation(out)
    evaluate.evaluate_run(cfg, out, prep, checkpoint=a)
    real_replace, moves = os.replace, []

    def failing(src, dst, *args, **kw):  # the process dies at the third move
        if Path(dst).parent == out and Path(src).parent.name.startswith(".evaluate."):
            moves.append(dst)
            if len(moves) == 3:
                raise OSError(5, "Input/output error")
        return real_replace(src, dst, *args, **kw)

    monkeypatch.setattr(os, "replace", failing)
    with pytest.raises(OSError):
        evaluate.evaluate_run(cfg, out, prep, checkpoint=b)
    monkeypatch.setattr(os, "replace", real_replace)
    assert "bleu.json" not in _evaluation(out)  # incomplete, and marked so

    def broken(*args, **kwargs):
        raise RuntimeError("no evaluation this time")

    monkeypatch.setattr(evaluate, "_evaluate_into", broken)
    with pytest.raises(RuntimeError):
        evaluate.evaluate_run(cfg, out, prep, checkpoint=a)
    assert _evaluation(out) == whole_b  # the decided evaluation was completed first


def test_a_full_disk_is_one_line_naming_the_file_and_what_to_do(toy, tmp_path, capsys, monkeypatch):
    import errno

    _, _, root = toy
    monkeypatch.setenv("NMT_CACHE", str(root / "cache"))
    real_fsync = os.fsync

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    rc, err = cli_error(
        capsys,
        "train",
        "--profile",
        "smoke",
        "--run",
        "RNNsearch-50",
        "--data-dir",
        str(root / "wmt"),
        "--out",
        str(tmp_path / "r"),
        "--no-progress",
        "--set",
        "train.max_updates=2",
    )
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert rc == 1 and len(err.splitlines()) == 1, err
    assert str(tmp_path / "r") in err and "No space left" in err and "free" in err
    # an append-only log on a full disk names its file too
    from nmt_lib.train_loop import JsonlLog

    log = JsonlLog(tmp_path / "log.jsonl", None)

    class Full:
        def write(self, s):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        flush = close = write

    log.f.close()
    log.f = Full()
    with pytest.raises(OSError, match=rf"{tmp_path / 'log.jsonl'}.*No space left.*free"):
        log.write({"update": 1})


# ------------------------------------------------------------------------------ round three
def test_pack_refuses_a_target_that_is_not_its_own_pack_and_replaces_its_own(
    toy, tmp_path, monkeypatch, capsys
):
    _, _, root = toy
    monkeypatch.setenv("NMT_CACHE", str(root / "cache"))
    mine = tmp_path / "mydir"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work", encoding="utf-8")
    argv = ["pack", "--profile", "smoke", "--run", "RNNsearch-50", "--data-dir", str(root / "wmt")]
    rc, err = cli_error(capsys, *argv, str(mine))
    assert rc == 1 and len(err.splitlines()) == 1
    assert f"{mine}: exists and is not a pack" in err
    assert (mine / "thesis.tex").read_text(encoding="utf-8") == "years of work"
    monkeypatch.chdir(mine)  # `pack .`: the working directory
    rc, err = cli_error(capsys, *argv, ".")
    assert rc == 1 and "is not a pack" in err and (mine / "thesis.tex").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mydir"]  # no staging left beside it
    fresh = tmp_path / "pack"
    assert main([*argv, str(fresh)]) == 0
    before = (fresh / "pack.json").read_text(encoding="utf-8")
    assert main([*argv, str(fresh)]) == 0  # its own pack: replaced
    assert (fresh / "pack.json").read_text(encoding="utf-8") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mydir", "pack"]


class _OpensAFile:
    """An object whose unpickling creates a file: what a hostile checkpoint carries."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_a_checkpoint_whose_pickle_runs_code_is_refused_in_one_line(toy, tmp_path, capsys):
    from nmt_lib.checkpoint import save_checkpoint

    ckpt = trained(toy, tmp_path)
    last, marker = ckpt / "last.pt", tmp_path / "created-by-the-checkpoint"
    state = load_checkpoint(last)  # its own content (numpy and python RNG states) loads
    save_checkpoint(last, {**state, "extra": _OpensAFile(marker)})  # a valid sha256 line
    with pytest.raises(CheckpointError, match=rf"{last}: refused: .*io.open"):
        load_checkpoint(last)
    src = tmp_path / "in.txt"
    src.write_text("a b c\n", encoding="utf-8")
    rc, err = cli_error(
        capsys,
        "translate",
        "--profile",
        "smoke",
        "--run",
        "RNNsearch-50",
        "--checkpoint",
        str(last),
        "-i",
        str(src),
    )
    assert rc == 1 and len(err.splitlines()) == 1 and f"{last}: refused" in err
    assert not marker.exists()


@pytest.mark.parametrize("name", ["../../escaped", "/tmp/absolute", "a/b", "..", "a\\b"])
def test_a_run_name_that_is_a_path_is_refused_naming_the_run(tmp_path, capsys, name):
    from nmt_lib.config import PROFILE_DIR

    prof = tmp_path / "p.toml"
    text = (PROFILE_DIR / "smoke.toml").read_text(encoding="utf-8")
    prof.write_text(
        text + f'\n[runs.{json.dumps(name)}]\nmodel = {{ arch = "RNNsearch" }}\n', encoding="utf-8"
    )
    rc, err = cli_error(capsys, "train", "--profile", str(prof), "--out", str(tmp_path / "out"))
    assert rc == 2 and len(err.splitlines()) == 1
    assert f"{prof}: runs.{name!r}: {name!r} is not a name" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.toml"]


@pytest.mark.parametrize(
    "setting, says",
    [
        ("train.clip_norm=nan", "train.clip_norm: expected a finite number, got nan"),
        ("search.max_len_ratio=-1", "search.max_len_ratio must be > 0, got -1.0"),
        ("search.max_len_ratio=nan", "search.max_len_ratio: expected a finite number"),
        ("search.batch_size=0", "search.batch_size must be >= 1, got 0"),
        ("train.lr=inf", "train.lr: expected a finite number, got inf"),
        ("train.rho=1.5", "train.rho must be in (0, 1), got 1.5"),
    ],
)
def test_a_setting_out_of_its_range_is_one_line_naming_it(capsys, setting, says):
    rc, err = cli_error(capsys, "train", "--profile", "smoke", "--set", setting)
    assert rc == 2 and len(err.splitlines()) == 1 and says in err


@pytest.mark.parametrize(
    "text, says",
    [
        ("runs = 5", "runs: expected a table, got 5"),
        ('model = 5\n[runs."a"]\ntrain = { max_updates = 1 }', "model: expected a table, got 5"),
        ('[runs."a"]\ntrain = 7', "runs.'a'.train: expected a table, got 7"),
        ("runs = { a = 3 }", "runs.'a': expected a table, got 3"),
        ('publish = 5\n[runs."a"]\ntrain = { max_updates = 1 }', "publish: expected a list"),
        (
            '[runs."a"]\ntrain = { max_updates = 1, clip_norm = nan }',
            "clip_norm: expected a finite",
        ),
    ],
)
def test_a_profile_of_wrong_shapes_is_one_line_not_a_traceback(tmp_path, capsys, text, says):
    prof = tmp_path / "p.toml"
    prof.write_text(text + "\n", encoding="utf-8")
    rc, err = cli_error(capsys, "train", "--profile", str(prof), "--out", str(tmp_path / "out"))
    assert rc == 2 and len(err.splitlines()) == 1 and f"{prof}: " in err and says in err


def _translate_published(monkeypatch, tmp_path, *argv):
    """``translate`` with the committed smoke model (no checkpoint here: an empty cache)."""
    monkeypatch.setenv("NMT_CACHE", str(tmp_path / "empty-cache"))
    return main(["translate", "--profile", "smoke", "--run", "RNNsearch-50*", *argv])


def test_translate_reads_translates_and_writes_in_bounded_chunks(tmp_path, monkeypatch, capsys):
    import io
    import sys

    import nmt_lib.__main__ as cli

    class Source(io.BytesIO):
        read_lines = 0

        def __iter__(self):
            while line := self.readline():
                Source.read_lines += 1
                yield line

    calls, real = [], translate.translate_lines

    def translate_lines(loaded, lines, *a, **kw):
        calls.append((len(lines), Source.read_lines, len(sys.stdout.getvalue().splitlines())))
        return real(loaded, lines, *a, **kw)

    monkeypatch.setattr(cli, "CHUNK_LINES", 3)
    monkeypatch.setattr(translate, "translate_lines", translate_lines)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(Source(b"the cat .\n" * 7)))
    monkeypatch.setattr("sys.stdout", io.StringIO())
    assert _translate_published(monkeypatch, tmp_path) == 0
    # (lines translated, lines read so far, lines written before): 3 at a time, written as it goes
    assert calls == [(3, 3, 0), (3, 6, 3), (1, 7, 6)]
    assert len(sys.stdout.getvalue().splitlines()) == 7


def test_a_final_line_without_a_newline_that_is_not_utf8_keeps_its_place(
    tmp_path, monkeypatch, capsys
):
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_bytes(b"the cat .\n\xff\xfe the end")
    assert _translate_published(monkeypatch, tmp_path, "-i", str(src), "-o", str(out)) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"nmt_lib translate: {src}, line 2: not UTF-8 (byte 0xff at column 1): "
        "translated as an empty line"
    ]
    lines = out.read_text(encoding="utf-8").split("\n")
    assert len(lines) == 3 and lines[0] and lines[1:] == ["", ""]  # two lines, the second empty


def test_a_checkpoint_of_another_model_is_refused_saying_what_it_holds(toy, tmp_path, capsys):
    from nmt_lib.config import load_profile

    cfg, prep, root = toy
    other = load_profile("smoke").runs["RNNencdec-50"]  # on the toy run's data
    encdec = replace(cfg, name=other.name, model=other.model)
    s = train_run(updates(encdec, 2), tmp_path / "r", prep, progress=False)
    src = tmp_path / "in.txt"
    src.write_text("a b c\n", encoding="utf-8")
    rc, err = cli_error(
        capsys,
        "translate",
        "--profile",
        "smoke",
        "--data-dir",
        str(root / "wmt"),
        "--run",
        "RNNsearch-50",
        "--checkpoint",
        s["checkpoint_dir"],
        "-i",
        str(src),
        "--alignment",
    )
    assert rc == 1 and len(err.splitlines()) == 1
    assert "holds a model of run 'RNNencdec-50' (RNNencdec), not one of run 'RNNsearch-50'" in err


@pytest.mark.parametrize("where", ["results", "checkpoints", "evaluation"])
def test_a_lock_file_that_is_a_link_is_refused_and_its_target_kept(toy, tmp_path, where):
    from nmt_lib.io import LockLink

    cfg, prep, _ = toy
    out, ckpt = tmp_path / "r", tmp_path / "ckpt"
    if where == "evaluation":
        train_run(updates(cfg, 2), out, prep, checkpoint_dir=ckpt, progress=False)
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me\n", encoding="utf-8")
    link = {"results": out, "checkpoints": ckpt, "evaluation": out}[where] / (
        ".evaluate.lock" if where == "evaluation" else ".train.lock"
    )
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(victim)
    with pytest.raises(LockLink, match=rf"{link}: the lock file of .* is a symbolic link"):
        if where == "evaluation":
            evaluate.evaluate_run(
                cfg, out, prep, checkpoint=ckpt, nll_sentences=2, figure_sources=()
            )
        else:
            train_run(updates(cfg, 2), out, prep, checkpoint_dir=ckpt, progress=False)
    assert victim.read_text(encoding="utf-8") == "keep me\n" and link.is_symlink()


def test_an_unknown_profile_says_so_and_lists_the_profiles(capsys, tmp_path):
    from nmt_experiments.core.results import ResultsMissing, require_results, results_path
    from tools import notebooks

    with pytest.raises(
        ResultsMissing, match=r"no profile 'doesnotexist': the profiles are .*smoke"
    ):
        require_results(results_path("doesnotexist"), "manifest.json")
    assert notebooks.main(["--profile", "doesnotexist", "--out-dir", str(tmp_path / "nb")]) == 1
    err = capsys.readouterr().err
    assert "no profile 'doesnotexist'" in err and "--train" not in err
    assert not (tmp_path / "nb").exists()  # refused before any notebook ran
    with pytest.raises(ResultsMissing, match=r"--profile lite --train"):  # a profile: train it
        require_results(tmp_path / "lite", "manifest.json")


def test_translate_refuses_a_line_over_max_words_naming_it(tmp_path, monkeypatch, capsys):
    import time

    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text("the cat .\n" + "the cat " * 100_000 + "\nthe cat sleeps .\n", encoding="utf-8")
    t0 = time.perf_counter()
    assert _translate_published(monkeypatch, tmp_path, "-i", str(src), "-o", str(out)) == 1
    assert time.perf_counter() - t0 < 60  # not the hours its decoding would take
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"nmt_lib translate: {src}, line 2: 200,000 words, over --max-words 1000: "
        "translated as an empty line"
    ]
    lines = out.read_text(encoding="utf-8").split("\n")
    assert len(lines) == 4 and lines[0] and lines[1] == "" and lines[2]
    args = ("-i", str(src), "-o", str(out), "--max-words", "3")  # the limit is the user's
    src.write_text("the cat .\nthe cat sleeps .\n", encoding="utf-8")
    assert _translate_published(monkeypatch, tmp_path, *args) == 1
    assert "line 2: 4 words, over --max-words 3" in capsys.readouterr().err


def test_translate_reads_nfd_and_a_byte_order_mark_as_the_same_text(tmp_path, monkeypatch):
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    nfc, nfd = "the caf\u00e9 sleeps .", "the cafe\u0301 sleeps ."
    src.write_text(f"\ufeffthe cat sleeps .\nthe cat sleeps .\n{nfd}\n{nfc}\n", encoding="utf-8")
    assert (
        _translate_published(monkeypatch, tmp_path, "-i", str(src), "-o", str(out), "--alignment")
        == 0
    )
    lines = out.read_text(encoding="utf-8").split("\n")  # a translation, then its alignment
    assert lines[0:2] == lines[2:4] and lines[4:6] == lines[6:8]
    assert "\ufeff" not in lines[1] and "\u0301" not in lines[5]
