"""Every architecture by name (``model.arch``): the paper's RNNsearch and RNNencdec
(:mod:`nmt_lib.paper.model`), and the models before and after it that the book compares with them on the
same data and budget: Sutskever et al.'s LSTM (:mod:`nmt_lib.models.seq2seq`), the "peeky" encoder–decoder
(:mod:`nmt_lib.models.peeky`), Luong et al.'s global attention (:mod:`nmt_lib.models.luong`) and the Transformer
(:mod:`nmt_lib.models.transformer`). All have what training, search and evaluation use of a
model (``forward``, ``encode``, ``init_state``, ``steps``, ``score``), so that they run them
unchanged; each has an encoding and a decoder state of its own, and the models before and after
the paper a step that reads the previous word first (:mod:`nmt_lib.models.steps`)."""

from __future__ import annotations

from torch import nn

from ..config import ModelConfig
from ..paper import model
from .luong import Luong
from .peeky import Peeky
from .seq2seq import Seq2seq
from .transformer import Transformer

#: The class of each ``model.arch``.
CLASSES = {
    "RNNsearch": model.RNNsearch,
    "RNNencdec": model.RNNencdec,
    "Seq2seq": Seq2seq,
    "Peeky": Peeky,
    "Luong": Luong,
    "Transformer": Transformer,
}


def build_model(cfg: ModelConfig, on=None) -> nn.Module:
    """The model of ``cfg.arch`` on the backend ``on`` (:func:`nmt_lib.backend.backend`, which
    chooses its class: :meth:`nmt_lib.recipe.Plain.build`; None: the plain class), initialised by
    its own ``reset_parameters``: the paper's models per App. B.1
    (:meth:`nmt_lib.paper.model.EncoderDecoder.reset_parameters`), the others by the same rules of
    ``model.init`` and their own (the LSTMs': :func:`nmt_lib.models.seq2seq.init_lstms`; the
    Transformer's: :meth:`nmt_lib.models.transformer.Transformer.reset_parameters`)."""
    if cfg.arch not in CLASSES:
        raise ValueError(f"no model for arch {cfg.arch!r}")
    net = CLASSES[cfg.arch](cfg) if on is None else on.build(CLASSES[cfg.arch], cfg)
    net.reset_parameters()
    return net
