"""nmt_lib.data: prepare() on the toy WMT'14 fixture, the train set on disk, batching, errors."""

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from nmt_lib import data as data_mod
from nmt_lib.config import load_profile
from nmt_lib.data import Batch, TrainIterator, data_summary, eval_batches, prepare
from nmt_lib.data.corpus import DataError
from nmt_lib.data.fixtures import write_toy_multi30k, write_toy_wmt
from nmt_lib.data.readers import read_lines
from nmt_lib.data.text import tokenize
from nmt_lib.data.vocab import EOS, PAD, UNK


def smoke(root, cache, run="RNNsearch-50", **over):
    cfg = load_profile("smoke").runs[run].data
    return dataclasses.replace(cfg, data_dir=str(root), cache_dir=str(cache), **over)


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    monkeypatch.delenv("NMT_DATA", raising=False)
    monkeypatch.delenv("NMT_CACHE", raising=False)


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    root = write_toy_wmt(tmp_path_factory.mktemp("wmt14"))
    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("NMT_DATA", raising=False)
        mp.delenv("NMT_CACHE", raising=False)
        prep = prepare(smoke(root, cache), workers=1)
    return root, cache, prep


def copy_fixture(toy, tmp_path):
    root = tmp_path / "wmt14"
    shutil.copytree(toy[0], root)
    return root


def test_prepare_smoke_counts_and_filters(toy):
    root, _, prep = toy
    st = prep.stats["train"]
    assert st["lines_read"] == 1200 == st["corpora"]["toy"]["lines"]
    assert st["pairs"] + sum(st["dropped"].values()) == st["lines_read"]
    assert st["dropped"]["empty"] == 2  # lines 10 and 20 of the fixture
    assert st["dropped"]["in_dev_test"] > 0 and st["dropped"]["too_long"] > 0
    assert len(prep.src_vocab) == len(prep.trg_vocab) == 63  # 60 words + 3 specials
    train = prep.train
    assert len(train) == st["pairs"]
    assert train.src_len.max() <= 12 and train.trg_len.max() <= 12 and train.src_len.min() >= 1
    assert train.src_ids.dtype == np.uint16
    # no kept pair has a side that occurs in dev or test
    seen_src = {tuple(x) for x in prep.dev.x + prep.test.x}
    seen_trg = {tuple(y) for y in prep.dev.y + prep.test.y}
    for i in range(len(train)):
        x, y = train.pair(i)
        x_, y_ = tuple(x.tolist()) + (EOS,), tuple(y.tolist()) + (EOS,)
        assert (UNK in x_ or x_ not in seen_src) and (UNK in y_ or y_ not in seen_trg)


def test_first_pair_is_the_tokenized_first_line(toy):
    root, _, prep = toy
    en, fr = next(read_lines(root / "train/toy.en")), next(read_lines(root / "train/toy.fr"))
    x, y = prep.train.pair(0)
    assert prep.src_vocab.decode(x) == [
        w if w in prep.src_vocab else "<unk>" for w in tokenize(en, "en")
    ]
    assert prep.trg_vocab.decode(y) == [
        w if w in prep.trg_vocab else "<unk>" for w in tokenize(fr, "fr")
    ]


def test_eval_sets_in_file_order_with_eos_and_no_unk(toy):
    root, _, prep = toy
    dev, test = prep.dev, prep.test
    assert len(dev) == 100 and len(test) == 80
    assert dev.ids[0] == ("newstest2012", "toy-newstest2012-0", "1")
    assert dev.ids[50] == ("newstest2013", "toy-newstest2013-0", "1")
    assert dev.src_raw[0].endswith(".") and " ." in " ".join(dev.src_tok[0])
    for ev in (dev, test):
        for x, y, tok, ok in zip(ev.x, ev.y, ev.src_tok, ev.no_unk, strict=True):
            assert x[-1] == EOS and y[-1] == EOS and len(x) == len(tok) + 1
            assert ok == (UNK not in x and UNK not in y)
    # the rare words make the No-UNK subset a proper, non-empty subset
    assert 0 < prep.stats["test"]["no_unk"] < len(test)
    assert prep.stats["dev"]["parts"] == {"newstest2012": 50, "newstest2013": 50}


def test_cached_and_keyed_on_settings(toy):
    root, cache, prep = toy
    again = prepare(smoke(root, cache), workers=1)
    assert again.path == prep.path
    short = prepare(smoke(root, cache, "RNNsearch-30"), workers=1)
    assert short.path != prep.path and len(short.train) < len(prep.train)
    assert short.train.src_len.max() <= 8
    # -30 and -50 share one vocabulary and so one No-UNK subset (GroundHog builds one)
    assert short.src_vocab == prep.src_vocab and short.test.no_unk == prep.test.no_unk


def test_changed_input_is_never_served_from_a_stale_cache(toy, tmp_path):
    root = copy_fixture(toy, tmp_path)
    first = prepare(smoke(root, tmp_path / "cache"), workers=1)
    with open(root / "train/toy.en", "a", encoding="utf-8") as f:
        f.write("the cat sleeps under a tree.\n")
    with open(root / "train/toy.fr", "a", encoding="utf-8") as f:
        f.write("le chat dort sous un arbre.\n")
    second = prepare(smoke(root, tmp_path / "cache"), workers=1)
    assert second.path != first.path
    assert second.stats["train"]["lines_read"] == 1201


def test_max_train_pairs_keeps_the_first_usable_pairs(toy, tmp_path):
    root, _, _ = toy
    full = prepare(smoke(root, tmp_path, max_len=8), workers=1)
    cut = prepare(smoke(root, tmp_path, max_len=8, max_train_pairs=50), workers=1)
    assert len(cut.train) == 50 and cut.stats["train"]["lines_read"] < 1200
    # the vocabulary is counted over the first 50 non-empty pairs not in dev/test, before the
    # length filter, so that it does not depend on max_len
    assert cut.stats["train"]["vocab_pairs"] == 50
    assert cut.src_vocab == prepare(smoke(root, tmp_path, max_train_pairs=50), workers=1).src_vocab
    full = prepare(smoke(root, tmp_path, max_len=50, src_words=100, trg_words=100), workers=1)
    cut = prepare(
        smoke(root, tmp_path, max_len=50, src_words=100, trg_words=100, max_train_pairs=50),
        workers=1,
    )
    for i in range(50):  # every word is in these shortlists: compare words, not rows
        (cx, cy), (fx, fy) = cut.train.pair(i), full.train.pair(i)
        assert cut.src_vocab.decode(cx) == full.src_vocab.decode(fx)
        assert cut.trg_vocab.decode(cy) == full.trg_vocab.decode(fy)


def test_iterator_groups_sorted_batches_and_covers_each_pair_once(toy):
    prep = toy[2]
    B, K = 16, 4
    it = TrainIterator(prep.train, B, K, seed=7)
    n = len(prep.train)
    assert it.updates_per_epoch == -(-n // B)
    key = np.maximum(prep.train.src_len, prep.train.trg_len)
    seen = []
    for _ in range(it.updates_per_epoch):
        batch = next(it)
        assert batch.x.dtype == torch.long and batch.x_mask.dtype == torch.bool
        x_len, y_len = batch.x_mask.sum(1), batch.y_mask.sum(1)
        assert batch.x.shape[1] == int(x_len.max()) and batch.y.shape[1] == int(y_len.max())
        rows = torch.arange(batch.x.shape[0])
        assert (batch.x[rows, x_len - 1] == EOS).all() and (batch.y[rows, y_len - 1] == EOS).all()
        assert (batch.x[~batch.x_mask] == PAD).all() and (batch.y[~batch.y_mask] == PAD).all()
        assert batch.n_trg_tokens == int(y_len.sum())
        seen.append(torch.maximum(x_len, y_len) - 1)
    assert it.epoch == 1.0
    lens = torch.cat(seen)
    assert len(lens) == n and sorted(lens.tolist()) == sorted(key.tolist())
    for g in range(0, it.updates_per_epoch, K):  # ascending within each group of K batches
        group = torch.cat(seen[g : g + K])
        assert (group[1:] >= group[:-1]).all()


def _take(it, k):
    return [next(it) for _ in range(k)]


def _same(a: Batch, b: Batch):
    return all(torch.equal(getattr(a, f), getattr(b, f)) for f in ("x", "x_mask", "y", "y_mask"))


def test_iterator_resumes_exactly_and_reshuffles_per_epoch(toy):
    train = toy[2].train
    it = TrainIterator(train, 16, 4, seed=3, reshuffle=True)
    _take(it, it.updates_per_epoch - 3)
    state = json.loads(json.dumps(it.state_dict()))  # survives a checkpoint file
    ahead = _take(it, 8)  # crosses into epoch 1
    resumed = TrainIterator(train, 16, 4, seed=3, reshuffle=True)
    resumed.load_state_dict(state)
    assert resumed.epoch == pytest.approx((it.updates_per_epoch - 3) / it.updates_per_epoch)
    assert all(_same(a, b) for a, b in zip(ahead, _take(resumed, 8), strict=True))
    e0 = _take(TrainIterator(train, 16, 4, seed=3, reshuffle=True), 3)
    again = TrainIterator(train, 16, 4, seed=3, reshuffle=True)
    again.load_state_dict({**state, "epoch": 1, "batch": 0})
    assert not all(_same(a, b) for a, b in zip(e0, _take(again, 3), strict=True))
    fixed = TrainIterator(train, 16, 4, seed=3, reshuffle=False)
    fixed.load_state_dict({**fixed.state_dict(), "epoch": 1, "batch": 0})
    assert all(_same(a, b) for a, b in zip(e0, _take(fixed, 3), strict=True))
    with pytest.raises(ValueError, match="batch_size"):
        TrainIterator(train, 8, 4, seed=3, reshuffle=True).load_state_dict(state)


def test_eval_batches_keep_input_order(toy):
    dev = toy[2].dev
    xs, ys = [], []
    for b in eval_batches(dev.x, dev.y, 7):
        assert b.x.shape[0] <= 7
        xs += [row[m].tolist() for row, m in zip(b.x, b.x_mask, strict=True)]
        ys += [row[m].tolist() for row, m in zip(b.y, b.y_mask, strict=True)]
    assert xs == dev.x and ys == dev.y
    (only_src,) = list(eval_batches(dev.x[:3], None, 10))
    assert only_src.y is None and only_src.n_trg_tokens == 0
    moved = only_src.to("cpu")
    assert isinstance(moved, Batch) and torch.equal(moved.x, only_src.x)


def test_summary_is_plain_json(toy):
    s = data_summary(toy[2])
    assert json.loads(json.dumps(s)) == s
    assert set(s["train"]["dropped"]) == {"empty", "in_dev_test", "too_long"}
    for split in ("train", "dev", "test"):
        for side in ("src", "trg"):
            d = s[split][side]
            assert 0 <= d["oov_token_rate"] <= 1 and 0 <= d["oov_sentence_rate"] <= 1
            assert (d["oov_token_rate"] > 0) == (d["oov_sentence_rate"] > 0)
            assert sum(d["length_hist"]) == (s[split]["pairs"])
    assert s["test"]["no_unk"] == sum(toy[2].test.no_unk)


def _no_leftovers(cache):
    """Nothing half-written: no temporary files, no prepared directory."""
    assert not [p for p in cache.rglob("*") if p.name.startswith(".")]
    assert not (cache / "prep").exists() or not list((cache / "prep").iterdir())


def test_unaligned_sides_name_both_files_and_counts(toy, tmp_path):
    root = copy_fixture(toy, tmp_path)
    lines = (root / "train/toy.fr").read_text(encoding="utf-8").splitlines(keepends=True)
    (root / "train/toy.fr").write_text("".join(lines[:-5]), encoding="utf-8")
    with pytest.raises(DataError, match=r"toy\.en has 1200 lines, .*toy\.fr has 1195"):
        prepare(smoke(root, tmp_path / "cache"), workers=1)
    _no_leftovers(tmp_path / "cache")


def test_invalid_utf8_in_training_names_file_and_line(toy, tmp_path):
    root = copy_fixture(toy, tmp_path)
    raw = (root / "train/toy.en").read_bytes().split(b"\n")
    raw[4] = b"the cat \xe9 sleeps."
    (root / "train/toy.en").write_bytes(b"\n".join(raw))
    with pytest.raises(DataError, match=r"toy\.en:5: invalid UTF-8"):
        prepare(smoke(root, tmp_path / "cache"), workers=1)
    _no_leftovers(tmp_path / "cache")


def test_broken_sgml_and_mismatched_eval_files(toy, tmp_path):
    root = copy_fixture(toy, tmp_path)
    ref = root / "test-full/newstest2014-fren-ref.fr.sgm"
    text = ref.read_text(encoding="utf-8")
    ref.write_text(text.replace('<seg id="3">', '<seg id="3"', 1), encoding="utf-8")
    with pytest.raises(DataError, match=r"newstest2014-fren-ref\.fr\.sgm:5: broken <seg>"):
        prepare(smoke(root, tmp_path / "cache"), workers=1)
    lines = text.splitlines(keepends=True)
    ref.write_text("".join(x for x in lines if '<seg id="3">' not in x), encoding="utf-8")
    with pytest.raises(DataError, match=r"src\.en\.sgm \(80 segments\) and .*ref\.fr\.sgm \(72"):
        prepare(smoke(root, tmp_path / "cache"), workers=1)


def test_pretokenized_corpus_is_split_on_spaces_only(toy, tmp_path, monkeypatch):
    root = copy_fixture(toy, tmp_path)
    (root / "train/pre").mkdir()
    (root / "train/pre/a.en").write_text("it 's  a cat .\n" * 3, encoding="utf-8")
    (root / "train/pre/a.fr").write_text("c' est un chat .\n" * 3, encoding="utf-8")
    pre = data_mod.corpus.Corpus("pre", "train", ("train/pre/a",), note="test", pretokenized=True)
    monkeypatch.setitem(data_mod.corpus.CORPORA, "pre", pre)
    prep = prepare(smoke(root, tmp_path / "cache", train=("pre",), src_words=10), workers=1)
    assert prep.src_vocab.itos[3:] == ["'s", ".", "a", "cat", "it"]  # ties: code points
    assert prep.trg_vocab.decode(prep.train.pair(0)[1]) == ["c'", "est", "un", "chat", "."]


def test_a_pack_trains_and_evaluates_without_the_data_directory(toy, tmp_path):
    """``pack`` then ``data.packed`` elsewhere: the same training pairs, vocabularies and dev/test,
    with the WMT'14 directory gone and a fresh cache; another setting or other dev/test refused."""
    root, cache, prep = toy
    src = copy_fixture(toy, tmp_path)
    out = data_mod.pack(smoke(src, cache), tmp_path / "pack")
    shutil.rmtree(src)
    cfg = smoke(tmp_path / "gone", tmp_path / "fresh-cache", packed=str(out))
    got = prepare(cfg, workers=1)
    assert got.src_vocab == prep.src_vocab and got.trg_vocab == prep.trg_vocab
    assert len(got.train) == len(prep.train)
    assert all(
        np.array_equal(a, b)
        for i in (0, len(prep.train) - 1)
        for a, b in zip(got.train.pair(i), prep.train.pair(i), strict=True)
    )
    assert (got.dev.x, got.test.y, got.test.no_unk) == (prep.dev.x, prep.test.y, prep.test.no_unk)
    assert set(data_mod.read_pack(out)["data_sha256"]) >= {
        "train/toy.en",
        "test-full/" + next(p.name for p in (out / "data/test-full").iterdir()),
    }
    with pytest.raises(DataError, match=r"pack\.json: packed with data\.max_len = 12, not 8"):
        prepare(dataclasses.replace(cfg, max_len=8), workers=1)
    ref = next((out / "data/test-full").glob("*ref*"))
    ref.write_text(ref.read_text(encoding="utf-8").replace("le", "la", 1), encoding="utf-8")
    with pytest.raises(DataError, match="do not belong together"):
        prepare(cfg, workers=1)
    with pytest.raises(DataError, match="not a pack"):
        prepare(smoke(root, cache, packed=str(tmp_path)), workers=1)


# ------------------------------------------------------------------------------- Multi30k testbed
def multi30k(root, cache, **over):
    """The Multi30k profile's data settings on the toy corpus in Multi30k's layout."""
    cfg = load_profile("studies/multi30k").runs["RNNsearch-50-s1"].data
    return dataclasses.replace(cfg, data_dir=str(root), cache_dir=str(cache), **over)


@pytest.fixture
def toy30k(tmp_path):
    return write_toy_multi30k(tmp_path / "multi30k"), tmp_path / "cache"


def test_multi30k_reads_plain_text_dev_and_both_flickr_test_sets(toy30k, monkeypatch):
    root, cache = toy30k
    monkeypatch.setenv("NMT_DATA", str(root))  # the data directory rules: the environment
    cfg = dataclasses.replace(multi30k(root, cache), data_dir=None, src_words=20, trg_words=20)
    prep = prepare(cfg, workers=1)
    assert len(prep.dev) == 20 and len(prep.test) == 40
    assert [i[0] for i in prep.test.ids] == ["multi30k.test_2016_flickr"] * 20 + [
        "multi30k.test_2017_flickr"
    ] * 20
    assert prep.test.ids[20][2] == "1"  # line numbers within each part
    first = next(read_lines(root / "multi30k.task1.test_2017_flickr.en"))
    assert prep.test.src_raw[20] == first and prep.test.src_tok[20] == tokenize(first, "en")
    assert prep.stats["test"]["parts"] == {
        "multi30k.test_2016_flickr": 20,
        "multi30k.test_2017_flickr": 20,
    }
    assert len(prep.src_vocab) == len(prep.trg_vocab) == 23  # the training side's 20 words
    assert prep.stats["train"]["lines_read"] == 300
    # the Moses-tokenized first training line, in the shortlist's words
    en = next(read_lines(root / "multi30k.task1.train.en"))
    assert prep.src_vocab.decode(prep.train.pair(0)[0]) == [
        w if w in prep.src_vocab else "<unk>" for w in tokenize(en, "en")
    ]


@pytest.mark.parametrize("split", ["train", "val", "test_2017_flickr"])
def test_multi30k_truncated_misaligned_or_missing_file_is_named(toy30k, split):
    root, cache = toy30k
    f = root / f"multi30k.task1.{split}.fr"
    text = f.read_text(encoding="utf-8")
    f.write_text(text[:-7], encoding="utf-8")  # cut in the last line
    with pytest.raises(DataError, match=rf"task1\.{split}\.fr: ends without a newline.*truncated"):
        prepare(multi30k(root, cache), workers=1)
    f.write_text("".join(text.splitlines(keepends=True)[:-2]), encoding="utf-8")  # two lines short
    n = {"train": 300}.get(split, 20)
    msg = (
        rf"{split}\.en has {n} lines, .*{split}\.fr has {n - 2}"
        if split == "train"
        else rf"{split}\.en has {n} lines and .*{split}\.fr {n - 2}"
    )
    with pytest.raises(DataError, match=msg):
        prepare(multi30k(root, cache), workers=1)
    f.unlink()
    with pytest.raises(DataError, match=rf"lacks files.*\n.*task1\.{split}\.fr\[\.gz\|\.xz\]"):
        prepare(multi30k(root, cache), workers=1)


def test_multi30k_test_parts_alone(toy30k):
    root, cache = toy30k
    prep = prepare(multi30k(root, cache, test="multi30k.test_2016_flickr"), workers=1)
    assert {i[0] for i in prep.test.ids} == {"multi30k.test_2016_flickr"} and len(prep.test) == 20


def test_multi30k_reads_the_releases_gzipped_files(toy30k):
    """The release's own files are gzipped (``data/task1/raw/<split>.<lang>.gz``): read the same."""
    import gzip

    root, cache = toy30k
    plain = prepare(multi30k(root, cache / "a"), workers=1)
    for lang in ("en", "fr"):
        f = root / f"multi30k.task1.val.{lang}"
        Path(f"{f}.gz").write_bytes(gzip.compress(f.read_bytes()))
        f.unlink()
    zipped = prepare(multi30k(root, cache / "b"), workers=1)
    assert zipped.dev.x == plain.dev.x and zipped.dev.ref_raw == plain.dev.ref_raw


def test_text_is_read_in_nfc_without_a_byte_order_mark(tmp_path):
    """A Multi30k file that an editor saved with a BOM, text in NFD: read as the same words."""
    from nmt_lib.data.readers import read_plain_pair, read_sgml

    root = write_toy_multi30k(tmp_path / "m30k")
    src, ref = (root / f"multi30k.task1.test_2016_flickr.{x}" for x in ("en", "fr"))
    first = src.read_text(encoding="utf-8").split("\n")[0]
    src.write_text("\ufeff" + src.read_text(encoding="utf-8"), encoding="utf-8")
    lines = ref.read_text(encoding="utf-8").split("\n")
    lines[1] = "un caf\u0065\u0301 ."  # NFD: e and a combining acute accent
    ref.write_text("\n".join(lines), encoding="utf-8")
    pairs = read_plain_pair(src, ref)
    assert pairs[0][0] == first and pairs[1][1] == "un caf\u00e9 ."
    assert read_lines(src).__next__() == first
    sgml = tmp_path / "t.sgm"
    sgml.write_text('\ufeff<srcset>\n<doc docid="d">\n<seg id="1">caf&#101;&#769;</seg>\n</doc>\n')
    assert [s.text for s in read_sgml(sgml)] == ["caf\u00e9"]
    with open(src, encoding="utf-8") as f:  # the file itself is left as it was
        assert f.read(1) == "\ufeff"
