"""What evaluation measures of decoded translations: BLEU against the references (Table 1), and
the attention of chosen sentences (Figure 3), found in a test set by their text."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from . import bleu
from .config import SearchConfig
from .data.text import detokenize
from .decoding import decode


def score(hyp_tok: Sequence[Sequence[str]], evalset, idx: Sequence[int], trg_lang: str) -> dict:
    """Tokenized (multi-bleu) and detokenized (sacrebleu) BLEU of ``hyp_tok`` against the
    references ``idx`` of ``evalset``."""
    ref_tok = [" ".join(evalset.ref_tok[i]) for i in idx]
    ref_raw = [evalset.ref_raw[i] for i in idx]
    return {
        "n": len(idx),
        "tok": bleu.bleu_tok([" ".join(h) for h in hyp_tok], ref_tok).to_dict(),
        "detok": bleu.bleu_detok([detokenize(h, trg_lang) for h in hyp_tok], ref_raw).to_dict(),
    }


def _squash(s: str) -> str:
    """Compare sentences whatever their tokenization: no whitespace, ASCII quotes."""
    s = s.replace("“", '"').replace("”", '"').replace("’", "'").replace("&quot;", '"')
    return re.sub(r"\s+", "", s.replace("&apos;", "'"))


def find_sentences(evalset, sources: Sequence[str], prefix: bool = False) -> list[int | None]:
    """Index in ``evalset`` of each source sentence (tokenized or raw; compared without whitespace
    and with ASCII quotes), or None; with ``prefix``, the first sentence that starts so."""
    raws = [_squash(raw) for raw in evalset.src_raw]
    if prefix:
        return [
            next((i for i, r in enumerate(raws) if r.startswith(_squash(s))), None) for s in sources
        ]
    where = {}
    for i, raw in enumerate(raws):
        where.setdefault(raw, i)
    return [where.get(_squash(s)) for s in sources]


def attention_records(
    model,
    evalset,
    sources: Sequence[str],
    trg_vocab,
    search: SearchConfig,
    device=None,
    precision: str = "fp32",
    src_vocab=None,
) -> list[dict]:
    """Figure 3: the best hypothesis and its attention for each of ``sources`` (``alpha[i][j]``:
    output token i over source token j, EOS included on both axes). A source found in ``evalset``
    is decoded from there (``found``, ``index``, with its reference); one that is not, such as the
    paper's "arbitrary sentence" (a), is translated from its own tokens when ``src_vocab`` is given
    (Moses-tokenized text, as :data:`nmt_lib.paper.FIG3_SOURCES`), else recorded as not found."""
    found = find_sentences(evalset, sources)
    todo = [(k, evalset.x[i], evalset.src_tok[i]) for k, i in enumerate(found) if i is not None]
    if src_vocab is not None:
        todo += [
            (k, src_vocab.encode(sources[k].split(), eos=True), sources[k].split())
            for k, i in enumerate(found)
            if i is None
        ]
    xs = [x for _, x, _ in todo]
    hyps = decode(model, xs, search, return_alpha=True, device=device, precision=precision)
    by_k = {k: (tok, h) for (k, _, tok), h in zip(todo, hyps, strict=True)}
    out = []
    for k, (src, i) in enumerate(zip(sources, found, strict=True)):
        rec = {"source": src, "found": i is not None, "index": i}
        if k in by_k:
            tok, h = by_k[k]
            rec["src_tokens"] = [*tok, "</s>"]
            rec["hyp_tokens"] = trg_vocab.decode(h.tokens) + (["</s>"] if h.finished else [])
            if i is not None:
                rec["ref_tokens"] = list(evalset.ref_tok[i])
            rec["alpha"] = (
                None if h.alpha is None else np.round(h.alpha.float().numpy(), 5).tolist()
            )
        out.append(rec)
    return out
