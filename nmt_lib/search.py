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
``Encoded.select`` and its step (``model.steps()``, :mod:`nmt_lib.paper.steps`). The live hypotheses are a
:class:`Beam` (``best_pairs``, ``grow``, ``select``), the best finished one of each sentence a
:class:`Finished` (``record``). A corpus is decoded in batches and threads by
:func:`nmt_lib.decoding.decode`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from .config import SearchConfig
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


@dataclass
class Beam:
    """The live hypotheses of the sentences still searched (``B'`` of them, ``width`` each).

    ids: ``[B']`` each sentence's index in the batch. n_fin: ``[B']`` its finished hypotheses.
    cost: ``[B', width]`` accumulated ``-log p`` (inf: no hypothesis). words: ``[B', width, k]``
    the words after ``k`` steps. alpha: ``[B', width, k, Tx]`` their attention (or None).
    parent: ``[B', width]`` each hypothesis's row in the previous step's tensors (None at first).
    """

    ids: Tensor
    n_fin: Tensor
    cost: Tensor
    words: Tensor
    alpha: Tensor | None
    parent: Tensor | None = None

    @classmethod
    def start(cls, B: int, Tx: int, return_alpha: bool, device) -> Beam:
        """One empty hypothesis per sentence."""
        alpha = torch.zeros(B, 1, 0, Tx, device=device) if return_alpha else None
        return cls(
            torch.arange(B, device=device),
            torch.zeros(B, dtype=torch.long, device=device),
            torch.zeros(B, 1, device=device),
            torch.zeros(B, 1, 0, dtype=torch.long, device=device),
            alpha,
        )

    def best_pairs(self, lp: Tensor, w: Tensor, beam: int) -> tuple[Tensor, Tensor, Tensor]:
        """The ``beam`` cheapest (hypothesis, word) pairs of each sentence, ascending, from each
        row's best words ``w`` and their log-probabilities ``lp`` ``[B' * width, kb]``:
        ``(cost, parent, word)``, each ``[B', beam]`` (cost inf where there are fewer pairs)."""
        Bk, width = self.cost.shape
        kb = lp.shape[1]
        cand = (self.cost.unsqueeze(-1) - lp.view(Bk, width, kb)).view(Bk, -1)  # dead rows: inf
        if cand.shape[1] < beam:  # the first step with fewer words than the beam: pad with inf
            cand = torch.cat([cand, cand.new_full((Bk, beam - cand.shape[1]), math.inf)], 1)
        top_cost, top = cand.topk(beam, dim=1, largest=False)
        top = top.clamp(max=width * kb - 1)  # the padding (infinite cost, never kept)
        return top_cost, top // kb, w.view(Bk, width * kb).gather(1, top)

    def grow(
        self, parent: Tensor, word: Tensor, alpha: Tensor | None, cost: Tensor, ended: Tensor
    ) -> Beam:
        """The beam after a step: hypothesis ``parent`` extended by ``word`` (and the step's
        attention ``alpha [B' * width, Tx]``), with ``cost``, and ``ended`` more finished."""
        Bk, beam = parent.shape
        k, Tx = self.words.shape[2], None if self.alpha is None else self.alpha.shape[3]
        words = torch.cat(
            [self.words.gather(1, parent.unsqueeze(-1).expand(-1, -1, k)), word[..., None]], 2
        )
        alphas = None
        if self.alpha is not None:
            g = parent[..., None, None]
            new = (
                alpha.view(Bk, -1, 1, Tx).float().gather(1, g.expand(-1, -1, 1, Tx))
                if alpha is not None
                else torch.zeros(Bk, beam, 1, Tx, device=word.device)
            )
            alphas = torch.cat([self.alpha.gather(1, g.expand(-1, -1, k, Tx)), new], 2)
        return Beam(self.ids, self.n_fin + ended.sum(1), cost, words, alphas, parent)

    def select(self, act: Tensor, cols: Tensor) -> Beam:
        """Sentences ``act [B'']`` only, and of each the hypotheses ``cols [B'', width']``."""
        k = self.words.shape[2]
        words = self.words[act].gather(1, cols[..., None].expand(-1, -1, k))
        alpha = None
        if self.alpha is not None:
            alpha = self.alpha[act].gather(
                1, cols[..., None, None].expand(-1, -1, k, self.alpha.shape[3])
            )
        return Beam(
            self.ids[act],
            self.n_fin[act],
            self.cost[act].gather(1, cols),
            words,
            alpha,
            self.parent[act].gather(1, cols),
        )


@dataclass
class Finished:
    """The best hypothesis found so far for each of the batch's ``B`` sentences (score inf: none
    yet): its ``score``, ``cost``, ``words [B, L]`` (PAD after ``length``), whether it
    ``finished`` (ended in EOS) and its attention ``alpha [B, L, Tx]`` (or None)."""

    score: Tensor
    cost: Tensor
    words: Tensor
    length: Tensor
    finished: Tensor
    alpha: Tensor | None

    @classmethod
    def empty(cls, B: int, L: int, Tx: int, return_alpha: bool, device) -> Finished:
        return cls(
            torch.full((B,), math.inf, device=device),
            torch.full((B,), math.inf, device=device),
            torch.full((B, L), PAD, dtype=torch.long, device=device),
            torch.zeros(B, dtype=torch.long, device=device),
            torch.zeros(B, dtype=torch.bool, device=device),
            torch.zeros(B, L, Tx, device=device) if return_alpha else None,
        )

    def record(
        self, beam: Beam, sel: Tensor, j: Tensor, score: Tensor, cost: Tensor, finished: bool
    ) -> None:
        """Store hypothesis ``j [n]`` of the beam's sentences ``sel [n]`` (a mask over ``B'``)."""
        b, k = beam.ids[sel], beam.words.shape[2]
        self.score[b], self.cost[b] = score, cost
        self.words[b] = PAD
        self.words[b, :k] = beam.words[sel, j]
        self.length[b], self.finished[b] = k, finished
        if self.alpha is not None:
            self.alpha[b, :k] = beam.alpha[sel, j]

    def hypotheses(self, x_mask: Tensor, attention: bool) -> list[Hypothesis]:
        """One per sentence, in batch order (with its attention when ``attention``)."""
        tokens, lengths = self.words.tolist(), self.length.tolist()
        src_len = x_mask.sum(1).tolist()
        out = []
        for b in range(len(tokens)):
            a = None
            if self.alpha is not None and attention:
                a = self.alpha[b, : lengths[b], : src_len[b]].cpu()
            out.append(
                Hypothesis(
                    tokens[b][: lengths[b]],
                    float(self.cost[b]),
                    float(self.score[b]),
                    bool(self.finished[b]),
                    a,
                )
            )
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
    """GroundHog's beam search over a batch of sentences (module docstring, PAPER.md §4): the
    live hypotheses a :class:`Beam`, the best finished ones :class:`Finished`.

    ``x [B, Tx]`` long, ``x_mask [B, Tx]`` bool; ``normalize``: choose the best by ``cost /
    length`` (length incl. EOS); ``return_alpha``: also the best hypothesis's attention ``[len,
    |x|]``; ``steps``: ``model.steps()``, made once for several batches of one thread (or None).
    ``B`` hypotheses in input order.
    """
    B, Tx = x.shape
    min_len, max_len = length_limits(x_mask, min_len_ratio, max_len_ratio)
    L = int(max_len.max())
    enc = model.encode(x, x_mask)  # [B', ...]: each sentence once for its hypotheses
    steps = model.steps() if steps is None else steps
    state = steps.start(enc)  # rows [B' * width]: width 1 (the empty hypothesis), then <= beam
    live_beam, best = (
        Beam.start(B, Tx, return_alpha, x.device),
        Finished.empty(B, L, Tx, return_alpha, x.device),
    )
    slots = torch.arange(beam, device=x.device)
    for k in range(L):
        Bk, width = live_beam.cost.shape
        scores, alpha, carry = steps.readout(enc, state)  # [Bk*width, K]
        no_eos = (k < min_len[live_beam.ids]).repeat_interleave(width)
        # the best `beam` of all width*K candidates are among each row's `beam` best words
        lp, w = steps.best_words(scores, beam, no_eos, ignore_unk)  # [Bk*width, min(beam, K)]
        top_cost, parent, word = live_beam.best_pairs(lp, w, beam)
        keep = (slots < (beam - live_beam.n_fin).unsqueeze(1)) & torch.isfinite(top_cost)
        ended, live = keep & (word == EOS), keep & (word != EOS)
        live_beam = live_beam.grow(
            parent, word, alpha, torch.where(live, top_cost, math.inf), ended
        )
        done = _keep_best(best, live_beam, top_cost, ended, live, normalize, max_len, beam)
        if bool(done.all()):
            break
        # drop the sentences that are done, and the finished hypotheses (GroundHog carries the
        # beam - finished live ones): live first, as many columns as the sentence with the most
        act = (~done).nonzero().squeeze(1)  # [B'']
        live = live[act]
        cols = torch.argsort((~live).byte(), dim=1, stable=True)[:, : int(live.sum(1).max())]
        live_beam = live_beam.select(act, cols)
        if act.numel() < Bk:
            enc = enc.select(act)
        rows = (act[:, None] * width + live_beam.parent).view(-1)  # parents in the step's rows
        # GroundHog: s_i from the parent's s_{i-1}, y_i and the same c_i
        y = live_beam.words[:, :, -1].reshape(-1)
        state = steps.advance(tuple(t.index_select(0, rows) for t in carry), y)
    return best.hypotheses(x_mask, alpha is not None)


def _keep_best(
    best: Finished,
    beam: Beam,
    top_cost: Tensor,
    ended: Tensor,
    live: Tensor,
    normalize: bool,
    max_len: Tensor,
    size: int,
) -> Tensor:
    """Record in ``best`` the hypotheses of the step just taken (``beam``, of costs ``top_cost``)
    that are better than those it holds, and, for a sentence done without any finished one, its
    best live one (the fallback); ``[B']`` whether each sentence of the beam is done."""
    k = beam.words.shape[2]  # steps taken
    score = top_cost / k if normalize else top_cost
    f_score, f_j = torch.where(ended, score, math.inf).min(1)  # [B']
    better = f_score < best.score[beam.ids]
    if bool(better.any()):
        f_cost = top_cost.gather(1, f_j[:, None])[better, 0]
        best.record(beam, better, f_j[better], f_score[better], f_cost, True)
    done = (beam.n_fin >= size) | ~live.any(1) | (k >= max_len[beam.ids])
    lost = done & torch.isinf(best.score[beam.ids]) & live.any(1)
    if bool(lost.any()):
        l_cost, l_j = beam.cost[lost].min(1)
        best.record(beam, lost, l_j, l_cost / k if normalize else l_cost, l_cost, False)
    return done
