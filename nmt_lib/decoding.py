"""Decoding a corpus: its sources in batches of similar length, searched by :mod:`nmt_lib.search`
(greedy or GroundHog's beam) in several threads at once, each batch appended to a journal as it is
done (an interrupted decoding goes on where it stopped), a beam beyond the vocabulary or the memory
refused before anything is decoded (:func:`decode`)."""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
from tqdm import tqdm

from . import search as searches  # looked up at each call (tests replace its searches)
from .config import SearchConfig
from .data import pad
from .runtime import autocast
from .search import DEFAULT, Hypothesis


def available_memory(device) -> int | None:
    """Bytes of memory a search on ``device`` may still take: free GPU memory, or the kernel's
    ``MemAvailable``; None where unknown."""
    device = torch.device(device or "cpu")
    if device.type == "cuda":  # free, plus what PyTorch holds in its cache unused
        cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return torch.cuda.mem_get_info(device)[0] + cached
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def search_bytes(
    beam: int, sentences: int, src_len: int, n_words: int, max_len_ratio: float, return_alpha: bool
) -> int:
    """An estimate of the memory one batch of :func:`nmt_lib.search.beam_search` takes at its
    largest: ``sentences`` sources of ``src_len`` tokens, ``beam * sentences`` rows of ``n_words`` scores
    (and their log-softmax and selection), ``beam²`` candidates per sentence, the histories of
    ``|x| * max_len_ratio`` steps (and of the attention, with ``return_alpha``)."""
    steps = max(1, math.floor(src_len * max_len_ratio))
    per_row = 12 * n_words + 24 * beam + 16 * steps + (8 * steps * src_len if return_alpha else 0)
    return sentences * beam * per_row


def check_beam(
    beam: int,
    n_words: int | None,
    sentences: int = 1,
    src_len: int = 1,
    max_len_ratio: float = DEFAULT.max_len_ratio,
    return_alpha: bool = False,
    workers: int = 1,
    device=None,
) -> None:
    """Refuse, with one line, a beam larger than the target vocabulary (``n_words`` rows: a beam
    cannot hold more distinct continuations) or one whose search would need more memory than
    ``device`` has available (:func:`search_bytes` for ``workers`` batches at once)."""
    if n_words is not None and beam > n_words:
        raise ValueError(
            f"beam {beam} is larger than the target vocabulary ({n_words} rows): "
            f"use a beam of at most {n_words}"
        )
    if n_words is None or beam <= 1:
        return
    need = workers * search_bytes(beam, sentences, src_len, n_words, max_len_ratio, return_alpha)
    free = available_memory(device)
    if free is not None and need > free:
        raise ValueError(
            f"beam {beam}: the search would need about {need / 2**20:,.0f} MiB of memory "
            f"({workers} batch(es) of {sentences} sentence(s) of up to {src_len} tokens at once), "
            f"more than the {free / 2**20:,.0f} MiB available: use a smaller beam (or "
            "search.batch_size)"
        )


def decode(
    model,
    xs: Sequence[Sequence[int]],
    search: SearchConfig = DEFAULT,
    *,
    greedy: bool = False,
    ignore_unk: bool = False,
    return_alpha: bool = False,
    device=None,
    precision: str = "fp32",
    progress: bool | None = False,
    workers: int | None = None,
    journal: str | os.PathLike | None = None,
) -> list[Hypothesis]:
    """Decode source id lists (EOS included) in batches of ``search.batch_size`` sources of
    similar length, with ``search``'s beam and rules (:func:`nmt_lib.search.beam_search`), or
    greedily with its rules (``greedy``, :func:`nmt_lib.search.greedy_search`), on ``device`` (the
    model's by default) in ``precision`` (its autocast); results in input order.

    ``progress``: a bar (None: only on a terminal). ``journal``: a file that each decoded batch is
    appended to (without attention weights) as soon as it is done; batches already in it are read
    back instead of decoded, so a decoding that was interrupted goes on where it stopped, with the
    same batches and so the same results. The caller names the journal after everything that
    decides the results (model, settings, sources) and deletes it once the results are safe.

    ``workers`` batches are decoded at once, each in its own thread with one intra-op thread
    (:func:`in_threads`; default: ``torch.get_num_threads()`` on a CPU, else 1): a beam step's
    operations are small, and a core that waits for the other at each of them is idle. The model
    makes its own steps (:func:`steps_maker`), which may be prepared once for all the batches;
    each thread makes its steps once for all its batches. A beam beyond the vocabulary or the
    memory available is refused before anything is decoded (:func:`check_beam`).
    """
    device = device or next(model.parameters()).device
    with autocast(torch.device(device), precision):
        return _decode(
            model, xs, search, greedy, ignore_unk, return_alpha, device, progress, workers, journal
        )


def steps_maker(model, rows: int | None = None):
    """A maker of ``model``'s decoding steps for searches that will advance ``rows`` hypotheses in
    all: ``model.prepared_steps(rows)`` where the model has it (the fast models tabulate their
    word products once for long searches: :meth:`nmt_lib.fast.model.FastModel.prepared_steps`),
    else ``model.steps``."""
    prepared = getattr(model, "prepared_steps", None)
    return model.steps if prepared is None else prepared(rows)


def _decode(
    model, xs, search, greedy, ignore_unk, return_alpha, device, progress, workers, journal
) -> list[Hypothesis]:
    """:func:`decode` under its autocast."""
    batches = length_batches(xs, search.batch_size)
    kind = torch.device(device or "cpu").type
    if workers is None:
        workers = torch.get_num_threads() if kind == "cpu" else 1
    beam = 0 if greedy else search.beam
    if beam > 0 and batches:
        n_words = getattr(getattr(model, "cfg", None), "trg_vocab", None)
        check_beam(
            beam,
            n_words,
            len(batches[0]),
            len(xs[batches[0][0]]),
            search.max_len_ratio,
            return_alpha,
            min(workers, len(batches)),
            device,
        )
    rows = max(beam, 1) * sum(map(len, xs))  # hypotheses advanced, targets as long as sources
    make_steps = steps_maker(model, rows)
    decode = batch_decoder(model, xs, search, greedy, device, make_steps, ignore_unk, return_alpha)
    book = Journal(journal, batches) if journal and not return_alpha else None
    try:
        return _decode_batches(decode, xs, batches, book, workers, kind, progress)
    finally:
        if book is not None:
            book.close()


def _decode_batches(decode, xs, batches, book, workers: int, kind: str, progress) -> list:
    """:func:`decode`'s hypotheses, in input order: each of ``batches`` read back from the
    journal ``book`` (or None) or decoded (``decode``), in ``workers`` threads, and journaled."""
    done = book.done() if book is not None else {}
    out: list[Hypothesis | None] = [None] * len(xs)
    for k, hyps in done.items():
        for i, h in zip(batches[k], hyps, strict=True):
            out[i] = h
    todo = [k for k in range(len(batches)) if k not in done]
    initial = sum(len(batches[k]) for k in done)
    disable = None if progress is None else not progress
    with tqdm(total=len(xs), initial=initial, desc="decode", disable=disable, leave=False) as bar:
        work = [batches[k] for k in todo]
        for k, hyps in zip(todo, in_threads(decode, work, workers, kind), strict=True):
            for i, h in zip(batches[k], hyps, strict=True):
                out[i] = h
            if book is not None:
                book.write(k, hyps)
            bar.update(len(batches[k]))
    return out


def length_batches(xs: Sequence[Sequence[int]], batch_size: int) -> list[list[int]]:
    """The indices of ``xs`` in batches of ``batch_size``, longest sources first (similar lengths
    together: little padding)."""
    order = sorted(range(len(xs)), key=lambda i: -len(xs[i]))
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def batch_decoder(
    model,
    xs,
    search: SearchConfig,
    greedy: bool,
    device,
    make_steps,
    ignore_unk: bool = False,
    return_alpha: bool = False,
):
    """``decode(idx) -> hypotheses`` of the sources ``xs[i]`` for ``i`` in ``idx``, padded into one
    batch: greedy (``greedy``, with ``search``'s length rules) or beam search (``search``), through
    the steps that ``make_steps()`` makes once per thread (their products may keep scratch
    buffers)."""
    local = threading.local()
    rules = dict(
        min_len_ratio=search.min_len_ratio,
        max_len_ratio=search.max_len_ratio,
        ignore_unk=ignore_unk,
        return_alpha=return_alpha,
    )

    def decode(idx: list[int]) -> list[Hypothesis]:
        if getattr(local, "steps", None) is None:
            local.steps = make_steps()
        x, x_mask = (t.to(device) for t in pad([xs[i] for i in idx]))
        if greedy:
            return searches.greedy_search(model, x, x_mask, steps=local.steps, **rules)
        return searches.beam_search(
            model, x, x_mask, search.beam, search.normalize, steps=local.steps, **rules
        )

    return decode


class Journal:
    """The batches of a decoding, appended to the file ``path`` (one JSON line each: the batch's
    number and size, each hypothesis's tokens, cost, score and whether it finished; no attention
    weights) as soon as each is done, so that a decoding that was interrupted reads them back
    (:meth:`done`) instead of decoding them again."""

    def __init__(self, path: str | os.PathLike, batches: list[list[int]]):
        self.path, self.batches = Path(path), batches
        self.done_before = self._read()
        self.f = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (closed by close())

    def done(self) -> dict[int, list[Hypothesis]]:
        """The batches decoded before, from the complete records (a torn last line, from an
        interruption while it was written, is ignored and rewritten)."""
        return self.done_before

    def _read(self) -> dict[int, list[Hypothesis]]:
        if not self.path.is_file():
            return {}
        done, good = {}, 0
        with open(self.path, "rb") as f:
            for line in f:
                try:
                    rec = json.loads(line)
                    k = rec["batch"]
                    size = len(self.batches[k])
                    if rec["size"] != size or len(rec["hyps"]) != size:
                        raise ValueError("batch size")
                except (ValueError, KeyError, IndexError, TypeError):
                    break
                done[k] = [Hypothesis(list(t), c, sc, fin) for t, c, sc, fin in rec["hyps"]]
                good += len(line)
        with open(self.path, "r+b") as f:  # drop what follows the last complete record
            f.truncate(good)
        return done

    def write(self, k: int, hyps: list[Hypothesis]) -> None:
        """Batch ``k``'s hypotheses, flushed."""
        rows = [[h.tokens, h.cost, h.score, h.finished] for h in hyps]
        self.f.write(json.dumps({"batch": k, "size": len(self.batches[k]), "hyps": rows}) + "\n")
        self.f.flush()

    def close(self) -> None:
        self.f.close()


def in_threads(fn, items: Sequence, workers: int, device_type: str = "cpu") -> Iterator:
    """``map(fn, items)`` (lazily, in order), computed by up to ``workers`` threads, each with one
    intra-op thread (``torch.set_num_threads(1)``; the caller's count is restored at the end) and
    the caller's autocast for ``device_type``, which is per thread. PyTorch's operators release the
    GIL. An error in ``fn`` is raised in the caller, and the items not yet started are dropped."""
    workers = min(workers, len(items))
    if workers <= 1:
        yield from map(fn, items)
        return
    threads = torch.get_num_threads()
    amp = torch.is_autocast_enabled(device_type), torch.get_autocast_dtype(device_type)

    def call(item):
        torch.set_num_threads(1)
        with torch.autocast(device_type, dtype=amp[1], enabled=amp[0]):
            return fn(item)

    try:
        with ThreadPoolExecutor(workers) as pool:
            yield from pool.map(call, items)  # on an error, cancels the items not yet started
    finally:
        torch.set_num_threads(threads)
