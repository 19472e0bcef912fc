"""The labs' toy tasks, made by code: copy or reverse a sequence of random digits.

A sentence is ``k`` digits (ids ``3 .. 3 + DIGITS - 1``) and EOS (2), padded with 0 (the
vocabulary's conventions, ``CONTRIBUTING.md``); its translation is the same digits, in the same
order (``copy``: the alignment is the diagonal) or reversed (``reverse``: the anti-diagonal).
Training is :func:`train`, the summed loss per sentence with Adam and the gradient clipped to
norm 1, as chapter 5's toy run; :func:`accuracy_by_length` decodes greedily and counts the words
in the right place.
"""

from __future__ import annotations

import time

import torch
from torch import Tensor

from nmt_lib.search import greedy_search

#: Digits of the toy vocabulary; its rows are these and the three special symbols.
DIGITS = 10
VOCAB = 3 + DIGITS
TASKS = ("copy", "reverse")


def sample(task: str, n: int, lengths: tuple[int, int], gen: torch.Generator):
    """``n`` sentence pairs of ``task``, ``lengths[0] <= k <= lengths[1]`` digits each:
    ``x [n, Tx]``, ``x_mask``, ``y [n, Ty]``, ``y_mask`` (EOS at the end of both)."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, not {task!r}")
    L = torch.randint(lengths[0], lengths[1] + 1, (n,), generator=gen)
    x = torch.zeros(n, int(L.max()) + 1, dtype=torch.long)
    y = torch.zeros_like(x)
    for b, k in enumerate(L.tolist()):
        x[b, :k] = torch.randint(3, VOCAB, (k,), generator=gen)
        y[b, :k] = x[b, :k].flip(0) if task == "reverse" else x[b, :k]
        x[b, k] = y[b, k] = 2  # EOS
    return x, x != 0, y, y != 0


def probe(task: str, k: int = 8, seed: int = 1) -> tuple[Tensor, Tensor, list[str], list[str]]:
    """One fixed sentence of ``k`` digits: ``x [1, k+1]``, ``y``, and their words to draw."""
    x, _, y, _ = sample(task, 1, (k, k), torch.Generator().manual_seed(seed))
    words = lambda t: [str(w - 3) for w in t[0, :-1].tolist()] + ["</s>"]  # noqa: E731
    return x, y, words(x), words(y)


def train(
    model,
    task: str,
    lengths,
    updates: int,
    batch_size: int = 32,
    lr: float = 1e-2,
    seed: int = 0,
    snapshots=(),
    probe_k: int = 8,
) -> dict:
    """Train ``model`` on ``task`` for ``updates`` updates; returns ``losses`` (nats per
    sentence, one per update), ``seconds`` and, for each update of ``snapshots``, the probe's
    alignment ``alpha [Ty, Tx]`` (``alphas``; models with attention)."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    px, py, _, _ = probe(task, probe_k)
    out = {"losses": [], "alphas": {}}
    t0 = time.perf_counter()
    for u in range(updates + 1):
        if u in snapshots:
            with torch.no_grad():
                _, alpha = model(px, px != 0, py, py != 0)
            if alpha is not None:
                out["alphas"][u] = alpha[0].numpy()
        if u == updates:
            break
        x, x_mask, y, y_mask = sample(task, batch_size, lengths, gen)
        logp, _ = model(x, x_mask, y, y_mask)
        loss = -logp.sum() / batch_size
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        out["losses"].append(loss.item())
    out["seconds"] = time.perf_counter() - t0
    return out


def word_accuracy(hyps: list[list[int]], refs: list[list[int]]) -> float:
    """The share of the reference words (EOS included), over all sentences, that the hypothesis
    has at the same position: ``hyps[b][i] == refs[b][i]``."""
    right = sum(
        sum(a == b for a, b in zip(h, r, strict=False)) for h, r in zip(hyps, refs, strict=True)
    )
    return right / sum(len(r) for r in refs)


@torch.no_grad()
def accuracy_by_length(
    model, task: str, lengths, n: int = 32, seed: int = 123, accuracy=word_accuracy
) -> dict[int, float]:
    """For each length ``k`` of ``lengths``: ``accuracy(hyps, refs)`` of greedy decoding on ``n``
    test sentences of ``k`` digits (:func:`word_accuracy` by default; token ids, EOS included)."""
    gen = torch.Generator().manual_seed(seed)
    model.eval()
    acc = {}
    for k in lengths:
        x, x_mask, y, y_mask = sample(task, n, (k, k), gen)
        hyps = [h.tokens for h in greedy_search(model, x, x_mask)]
        acc[k] = accuracy(hyps, [r[m].tolist() for r, m in zip(y, y_mask, strict=True)])
    model.train()
    return acc


def diagonal_weight(alpha, task: str) -> float:
    """The mean weight that the output words put on the word they copy (``alpha [Ty, Tx]``,
    square; the anti-diagonal of the digits for ``reverse``, EOS on EOS)."""
    a = torch.as_tensor(alpha)
    k = a.shape[0] - 1
    cols = torch.arange(k).flip(0) if task == "reverse" else torch.arange(k)
    return float(torch.cat([a[torch.arange(k), cols], a[k:, k]]).mean())


def show(fig, name: str, book: bool) -> None:
    """A lab's figure: glued as ``name`` for the book's ``{glue:figure}`` (``book``, the labs'
    parameter), displayed in the cell's output in the student's notebook; closed either way."""
    import matplotlib.pyplot as plt

    if book:
        from myst_nb import glue

        glue(name, fig, display=False)
    else:
        from IPython.display import display

        display(fig)
    plt.close(fig)
