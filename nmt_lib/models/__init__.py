"""Every architecture by name (``model.arch``): the paper's RNNsearch and RNNencdec
(:mod:`nmt_lib.paper.model`), and the models before and after it that the book compares with them on the
same data and budget: Sutskever et al.'s LSTM (:mod:`nmt_lib.models.seq2seq`), the "peeky" encoder–decoder
(:mod:`nmt_lib.models.peeky`), Luong et al.'s global attention (:mod:`nmt_lib.models.luong`) and the Transformer
(:mod:`nmt_lib.models.transformer`). All have what training, search and evaluation use of a
model (``forward``, ``encode``, ``init_state``, ``steps``, ``score``), so that they run them
unchanged; each has an encoding and a decoder state of its own, and the models before and after
the paper a step that reads the previous word first (:mod:`nmt_lib.models.steps`)."""

from __future__ import annotations

import torch
from torch import nn

from ..config import ModelConfig
from ..paper import model
from .luong import Luong
from .peeky import Peeky
from .seq2seq import Seq2seq
from .transformer import Transformer

#: The class of each ``model.arch``.
CLASSES = {"RNNsearch": model.RNNsearch, "RNNencdec": model.RNNencdec, "Seq2seq": Seq2seq,
           "Peeky": Peeky, "Luong": Luong, "Transformer": Transformer}  # fmt: skip


def build_model(cfg: ModelConfig, on=None) -> nn.Module:
    """The model of ``cfg.arch`` on the backend ``on`` (:func:`nmt_lib.backend.backend`; its class
    chosen there, :meth:`nmt_lib.recipe.Plain.build`; None: the plain class), initialised: the
    paper's models per App. B.1 (:meth:`nmt_lib.paper.model.EncoderDecoder.reset_parameters`); the others by the same rules of ``model.init``
    (:func:`nmt_lib.paper.model.init_parameters`), their LSTMs' recurrent matrices orthogonal (each
    gate's block) and biases zero but the forget gates' (``model.forget_bias``), layer norms the identity, and the Transformer's embeddings
    N(0, 1/d) (so that ``√d E w`` is of the size of the position encodings)."""
    if cfg.arch not in CLASSES:
        raise ValueError(f"no model for arch {cfg.arch!r}")
    net = CLASSES[cfg.arch](cfg) if on is None else on.build(CLASSES[cfg.arch], cfg)
    if cfg.arch in ("RNNsearch", "RNNencdec"):
        net.reset_parameters()
        return net
    model.init_parameters(net, cfg.init)
    with torch.no_grad():
        for name, p in net.named_parameters():
            if ".weight_hh_" in name and not p.is_meta:
                for block in p.split(p.shape[1]):  # [4n, n]: i, f, g, o
                    nn.init.orthogonal_(block)
            if ".bias_ih_" in name and not p.is_meta:  # b_f: bias_ih's, bias_hh's stays 0
                p[p.shape[0] // 4 : p.shape[0] // 2] = cfg.forget_bias
        for module in net.modules():
            if isinstance(module, nn.LayerNorm):
                module.reset_parameters()
        if isinstance(net, Transformer):
            for E in (net.E_bar, net.E):
                nn.init.normal_(E, 0.0, cfg.m**-0.5)
    return net
