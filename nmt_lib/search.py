"""Decoding: GroundHog's beam search (``experiments/nmt/sample.py``, PAPER.md §4, A9) and greedy.

The paper only says "a beam search" (§4.2). We do what GroundHog's ``BeamSearch.search`` does:

* cost = accumulated ``-log p``; at step ``k`` (0-based) every live hypothesis is expanded over the
  full vocabulary and the best ``n_live = beam - finished`` (hypothesis, word) pairs are kept;
* a kept pair ending in EOS is *finished* and leaves the beam, which shrinks by one;
* EOS is forbidden while ``k < floor(|x| * min_len_ratio)`` and the search stops after
  ``floor(|x| * max_len_ratio)`` steps (``|x|`` counts the source EOS; GroundHog: 1/2 and 3);
  hypotheses still live then are dropped;
* ``ignore_unk`` sets ``log p(<unk>) = -inf`` (the No-UNK column of Table 1);
* the result is the finished hypothesis of lowest cost, or of lowest ``cost / length`` (length
  counts EOS) with ``normalize``.

Two documented differences: ``<pad>`` (row 0, never a training target; GroundHog's unused row 0) is
never emitted; and where GroundHog retries a sentence with no finished hypothesis (without
``ignore_unk``, then with a doubled beam), we return its best *live* hypothesis at the last step
(``finished=False``, no EOS).

All sentences of a batch are searched together: ``B * width`` rows in one tensor, reordered by
index, against the ``B`` encoded sentences (each once, not once per hypothesis). ``width`` is 1 at
the first step (one empty hypothesis per sentence), then the most live hypotheses any sentence
has (``beam`` until hypotheses end; finished ones are not carried, as in GroundHog); sentences
that are done are dropped from the tensors. The model is used only through ``encode``,
``Encoded.select`` and its step (``model.steps()``, :mod:`nmt_lib.paper.steps`).
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from .config import SearchConfig
from .data import pad
from .data.vocab import EOS, PAD

#: The search settings' defaults (GroundHog's), which the functions below take by default.
DEFAULT = SearchConfig()


@dataclass
class Hypothesis:
    """One decoded sentence.

    tokens: target ids, EOS included when ``finished``. cost: ``-log p(tokens | x)``.
    score: what the best was chosen by (``cost``, or ``cost / len(tokens)`` with normalize).
    alpha: ``[len(tokens), |x|]`` attention weights (row i: target word i over source words incl.
    EOS), or None (not requested, or RNNencdec).
    """

    tokens: list[int]
    cost: float
    score: float
    finished: bool
    alpha: Tensor | None = None

    def words(self) -> list[int]:
        """The ids without the final EOS."""
        return self.tokens[:-1] if self.finished else list(self.tokens)


def length_limits(
    x_mask: Tensor, min_len_ratio: float, max_len_ratio: float
) -> tuple[Tensor, Tensor]:
    """``min_len [B]`` (EOS forbidden at steps ``k < min_len``) and ``max_len [B]`` (at most this
    many steps, >= 1), from ``|x|`` = real source tokens incl. EOS (GroundHog: ``|x|/2``, ``3|x|``).
    """
    src_len = x_mask.sum(1).double()  # [B]
    min_len = torch.floor(src_len * min_len_ratio).long()
    max_len = torch.floor(src_len * max_len_ratio).long().clamp(min=1)
    return min_len, max_len


@torch.no_grad()
def greedy_search(
    model,
    x: Tensor,
    x_mask: Tensor,
    min_len_ratio: float = DEFAULT.min_len_ratio,
    max_len_ratio: float = DEFAULT.max_len_ratio,
    ignore_unk: bool = False,
    return_alpha: bool = False,
    steps=None,
) -> list[Hypothesis]:
    """The most probable word at every step, with the same length and UNK rules as the beam.

    Args:
        model: the model interface; x: ``[B, Tx]`` long; x_mask: ``[B, Tx]`` bool.
        steps: ``model.steps()``, made once for several batches of one thread (or None).
    Returns:
        ``B`` hypotheses in input order.
    """
    B = x.shape[0]
    min_len, max_len = length_limits(x_mask, min_len_ratio, max_len_ratio)
    enc = model.encode(x, x_mask)
    steps = model.steps() if steps is None else steps
    state = steps.start(enc)
    done = torch.zeros(B, dtype=torch.bool, device=x.device)
    cost = torch.zeros(B, dtype=torch.float32, device=x.device)
    length = torch.zeros(B, dtype=torch.long, device=x.device)
    ys, alphas = [], []
    for k in range(int(max_len.max())):
        scores, alpha, carry = steps.readout(enc, state)  # [B, K]
        lp, y = steps.best_words(scores, 1, k < min_len, ignore_unk)
        lp, y = lp.squeeze(1), y.squeeze(1)
        active = ~done
        cost = cost - torch.where(active, lp, torch.zeros_like(lp))
        length = length + active.long()
        ys.append(y)
        alphas.append(alpha)
        done = done | (y == EOS) | (k + 1 >= max_len)
        if bool(done.all()):
            break
        state = steps.advance(carry, y)
    tokens = torch.stack(ys, 1).tolist()  # [B, T]
    lengths, costs = length.tolist(), cost.tolist()
    out = []
    for b in range(B):
        toks = tokens[b][: lengths[b]]
        a = None
        if return_alpha and alphas[0] is not None:
            a = torch.stack([al[b] for al in alphas[: lengths[b]]])[:, : int(x_mask[b].sum())]
            a = a.float().cpu()
        out.append(Hypothesis(toks, costs[b], costs[b], toks[-1] == EOS, a))
    return out


@torch.no_grad()
def beam_search(
    model,
    x: Tensor,
    x_mask: Tensor,
    beam: int = DEFAULT.beam,
    normalize: bool = DEFAULT.normalize,
    min_len_ratio: float = DEFAULT.min_len_ratio,
    max_len_ratio: float = DEFAULT.max_len_ratio,
    ignore_unk: bool = False,
    return_alpha: bool = False,
    steps=None,
) -> list[Hypothesis]:
    """GroundHog's beam search over a batch of sentences (module docstring, PAPER.md §4).

    Args:
        model: the model interface; x: ``[B, Tx]`` long; x_mask: ``[B, Tx]`` bool.
        beam: beam size; normalize: choose the best by ``cost / length`` (length incl. EOS).
        min_len_ratio, max_len_ratio: the length rules; ignore_unk: never emit ``<unk>``.
        return_alpha: also return the best hypothesis's attention ``[len, |x|]``.
        steps: ``model.steps()``, made once for several batches of one thread (or None).
    Returns:
        ``B`` hypotheses in input order.
    """
    B, Tx = x.shape
    dev = x.device
    min_len, max_len = length_limits(x_mask, min_len_ratio, max_len_ratio)
    L = int(max_len.max())
    enc = model.encode(x, x_mask)  # [B', ...]: each sentence once for its hypotheses
    steps = model.steps() if steps is None else steps
    state = steps.start(enc)  # rows [B' * width]: width 1 (the empty hypothesis), then <= beam
    inf = torch.tensor(math.inf, device=dev)
    cost = torch.zeros(B, 1, device=dev)  # [B', width] of the active sentences
    hist = torch.zeros(B, 1, 0, dtype=torch.long, device=dev)  # [B', width, k]
    ahist = torch.zeros(B, 1, 0, Tx, device=dev) if return_alpha else None
    n_fin = torch.zeros(B, dtype=torch.long, device=dev)
    ids = torch.arange(B, device=dev)  # original index of each active sentence
    slots = torch.arange(beam, device=dev)
    # the best hypothesis found so far, per original sentence
    best_score = torch.full((B,), math.inf, device=dev)
    best_cost = torch.full((B,), math.inf, device=dev)
    best_tok = torch.full((B, L), PAD, dtype=torch.long, device=dev)
    best_len = torch.zeros(B, dtype=torch.long, device=dev)
    best_fin = torch.zeros(B, dtype=torch.bool, device=dev)
    best_alpha = torch.zeros(B, L, Tx, device=dev) if return_alpha else None

    def record(sel: Tensor, j: Tensor, score: Tensor, c: Tensor, fin: bool, k: int) -> None:
        """Store hypothesis ``j [n]`` of active sentences ``sel [n]`` (bool mask over B')."""
        b = ids[sel]
        best_score[b], best_cost[b] = score, c
        best_tok[b] = PAD
        best_tok[b, : k + 1] = hist[sel, j]
        best_len[b], best_fin[b] = k + 1, fin
        if ahist is not None:
            best_alpha[b, : k + 1] = ahist[sel, j]

    for k in range(L):
        Bk, width = cost.shape
        scores, alpha, carry = steps.readout(enc, state)  # [Bk*width, K]
        no_eos = (k < min_len[ids]).repeat_interleave(width)
        # the best `beam` of all width*K candidates are among each row's `beam` best words
        lp, w = steps.best_words(scores, beam, no_eos, ignore_unk)  # [Bk*width, min(beam, K)]
        kb = lp.shape[1]
        cand = (cost.unsqueeze(-1) - lp.view(Bk, width, kb)).view(Bk, -1)  # dead rows: inf
        if cand.shape[1] < beam:  # the first step with fewer words than the beam: pad with inf
            cand = torch.cat([cand, cand.new_full((Bk, beam - cand.shape[1]), math.inf)], 1)
        top_cost, top = cand.topk(beam, dim=1, largest=False)  # ascending
        top = top.clamp(max=width * kb - 1)  # the padding (infinite cost, never kept)
        parent = top // kb  # [Bk, beam]
        word = w.view(Bk, width * kb).gather(1, top)
        keep = (slots < (beam - n_fin).unsqueeze(1)) & torch.isfinite(top_cost)
        ended = keep & (word == EOS)
        live = keep & (word != EOS)
        hist = torch.cat(
            [hist.gather(1, parent.unsqueeze(-1).expand(-1, -1, k)), word[..., None]], 2
        )
        if ahist is not None:
            a = alpha.view(Bk, width, 1, Tx).float() if alpha is not None else None
            g = parent[..., None, None]
            ahist = torch.cat(
                [ahist.gather(1, g.expand(-1, -1, k, Tx)),
                 a.gather(1, g.expand(-1, -1, 1, Tx)) if a is not None
                 else torch.zeros(Bk, beam, 1, Tx, device=dev)], 2,
            )  # fmt: skip
        # finished hypotheses: keep the best per sentence
        score = top_cost / (k + 1) if normalize else top_cost
        f_score, f_j = torch.where(ended, score, inf).min(1)  # [Bk]
        better = f_score < best_score[ids]
        if bool(better.any()):
            record(better, f_j[better], f_score[better], top_cost.gather(1, f_j[:, None])[
                better, 0], True, k)  # fmt: skip
        n_fin = n_fin + ended.sum(1)
        cost = torch.where(live, top_cost, inf)
        done = (n_fin >= beam) | ~live.any(1) | (k + 1 >= max_len[ids])
        # fallback: a sentence done without any finished hypothesis keeps its best live one
        lost = done & torch.isinf(best_score[ids]) & live.any(1)
        if bool(lost.any()):
            l_cost, l_j = cost[lost].min(1)
            record(lost, l_j, l_cost / (k + 1) if normalize else l_cost, l_cost, False, k)
        if bool(done.all()):
            break
        # drop the sentences that are done, and the finished hypotheses (GroundHog carries the
        # beam - finished live ones): live first, as many columns as the sentence with the most
        act = (~done).nonzero().squeeze(1)  # [B'']
        live = live[act]
        cols = torch.argsort((~live).byte(), dim=1, stable=True)[:, : int(live.sum(1).max())]
        parent, word, cost = (t[act].gather(1, cols) for t in (parent, word, cost))
        hist = hist[act].gather(1, cols[..., None].expand(-1, -1, k + 1))
        if ahist is not None:
            ahist = ahist[act].gather(1, cols[..., None, None].expand(-1, -1, k + 1, Tx))
        if act.numel() < Bk:
            enc, ids, n_fin = enc.select(act), ids[act], n_fin[act]
        rows = (act[:, None] * width + parent).view(-1)  # parent rows in the current tensors
        # GroundHog: s_i from the parent's s_{i-1}, y_i and the same c_i
        state = steps.advance(tuple(t.index_select(0, rows) for t in carry), word.reshape(-1))
    tokens, lengths = best_tok.tolist(), best_len.tolist()
    src_len = x_mask.sum(1).tolist()
    out = []
    for b in range(B):
        a = None
        if best_alpha is not None and alpha is not None:
            a = best_alpha[b, : lengths[b], : src_len[b]].cpu()
        out.append(
            Hypothesis(tokens[b][: lengths[b]], float(best_cost[b]), float(best_score[b]),
                       bool(best_fin[b]), a)
        )  # fmt: skip
    return out


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


def search_bytes(beam: int, sentences: int, src_len: int, n_words: int, max_len_ratio: float,
                 return_alpha: bool) -> int:  # fmt: skip
    """An estimate of the memory one batch of :func:`beam_search` takes at its largest:
    ``sentences`` sources of ``src_len`` tokens, ``beam * sentences`` rows of ``n_words`` scores
    (and their log-softmax and selection), ``beam²`` candidates per sentence, the histories of
    ``|x| * max_len_ratio`` steps (and of the attention, with ``return_alpha``)."""
    steps = max(1, math.floor(src_len * max_len_ratio))
    per_row = 12 * n_words + 24 * beam + 16 * steps + (8 * steps * src_len if return_alpha else 0)
    return sentences * beam * per_row


def check_beam(beam: int, n_words: int | None, sentences: int = 1, src_len: int = 1,
               max_len_ratio: float = DEFAULT.max_len_ratio, return_alpha: bool = False, workers: int = 1,
               device=None) -> None:  # fmt: skip
    """Refuse, with one line, a beam larger than the target vocabulary (``n_words`` rows: a beam
    cannot hold more distinct continuations) or one whose search would need more memory than
    ``device`` has available (:func:`search_bytes` for ``workers`` batches at once)."""
    if n_words is not None and beam > n_words:
        raise ValueError(f"beam {beam} is larger than the target vocabulary ({n_words} rows): "
                         f"use a beam of at most {n_words}")  # fmt: skip
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


def decode_corpus(
    model,
    xs: Sequence[Sequence[int]],
    beam: int = DEFAULT.beam,
    batch_size: int = DEFAULT.batch_size,
    normalize: bool = DEFAULT.normalize,
    min_len_ratio: float = DEFAULT.min_len_ratio,
    max_len_ratio: float = DEFAULT.max_len_ratio,
    ignore_unk: bool = False,
    return_alpha: bool = False,
    device=None,
    progress: bool | None = False,
    workers: int | None = None,
    journal: str | os.PathLike | None = None,
    backend=None,
) -> list[Hypothesis]:
    """Decode source id lists (EOS included) in batches of similar length; results in input order.

    ``progress``: a bar (None: only on a terminal). ``journal``: a file that each decoded batch is appended to (without attention weights) as soon
    as it is done; batches already in it are read back instead of decoded, so a decoding that was
    interrupted goes on where it stopped, with the same batches and so the same results. The caller
    names the journal after everything that decides the results (model, settings, sources) and
    deletes it once the results are safe.

    ``beam=0`` decodes greedily (:func:`greedy_search`); otherwise :func:`beam_search`.
    ``workers`` batches are decoded at once, each in its own thread with one intra-op thread
    (:func:`in_threads`; default: ``torch.get_num_threads()`` on a CPU, else 1): a beam step's
    operations are small, and a core that waits for the other at each of them is idle. The model's
    steps are made by ``backend`` (:func:`nmt_lib.fast.backend`; None: the model's own
    ``model.steps()``), which may prepare them once for all the batches (for searches expected to
    advance ``rows`` hypotheses in all: the fast backend's word table); each thread makes its steps
    once for all its batches. A beam beyond the vocabulary or the memory available is refused
    before anything is decoded (:func:`check_beam`).
    """
    from tqdm import tqdm

    batches = length_batches(xs, batch_size)
    kind = torch.device(device or "cpu").type
    if workers is None:
        workers = torch.get_num_threads() if kind == "cpu" else 1
    if beam > 0 and batches:
        check_beam(beam, getattr(getattr(model, "cfg", None), "trg_vocab", None),
                   len(batches[0]), len(xs[batches[0][0]]), max_len_ratio, return_alpha,
                   min(workers, len(batches)), device)  # fmt: skip
    rows = max(beam, 1) * sum(map(len, xs))  # hypotheses advanced, targets as long as sources
    make_steps = model.steps if backend is None else backend.steps(model, rows)
    decode = batch_decoder(model, xs, beam, normalize, device, make_steps,
                           min_len_ratio=min_len_ratio, max_len_ratio=max_len_ratio,
                           ignore_unk=ignore_unk, return_alpha=return_alpha)  # fmt: skip
    book = Journal(journal, batches) if journal and not return_alpha else None
    done = book.done() if book is not None else {}
    out: list[Hypothesis | None] = [None] * len(xs)
    for k, hyps in done.items():
        for i, h in zip(batches[k], hyps, strict=True):
            out[i] = h
    todo = [k for k in range(len(batches)) if k not in done]
    bar = tqdm(total=len(xs), initial=sum(len(batches[k]) for k in done), desc="decode",
               disable=None if progress is None else not progress, leave=False)  # fmt: skip
    try:
        work = [batches[k] for k in todo]
        for k, hyps in zip(todo, in_threads(decode, work, workers, kind), strict=True):
            for i, h in zip(batches[k], hyps, strict=True):
                out[i] = h
            if book is not None:
                book.write(k, hyps)
            bar.update(len(batches[k]))
    finally:
        if book is not None:
            book.close()
        bar.close()
    return out  # type: ignore[return-value]


def length_batches(xs: Sequence[Sequence[int]], batch_size: int) -> list[list[int]]:
    """The indices of ``xs`` in batches of ``batch_size``, longest sources first (similar lengths
    together: little padding)."""
    order = sorted(range(len(xs)), key=lambda i: -len(xs[i]))
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def batch_decoder(model, xs, beam: int, normalize: bool, device, make_steps, **rules):
    """``decode(idx) -> hypotheses`` of the sources ``xs[i]`` for ``i`` in ``idx``, padded into one
    batch: greedy (``beam = 0``) or beam search with ``rules``, through the steps that
    ``make_steps()`` makes once per thread (their products may keep scratch buffers)."""
    local = threading.local()

    def decode(idx: list[int]) -> list[Hypothesis]:
        if getattr(local, "steps", None) is None:
            local.steps = make_steps()
        x, x_mask = (t.to(device) for t in pad([xs[i] for i in idx]))
        if beam == 0:
            return greedy_search(model, x, x_mask, steps=local.steps, **rules)
        return beam_search(model, x, x_mask, beam=beam, normalize=normalize, steps=local.steps,
                           **rules)  # fmt: skip

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
