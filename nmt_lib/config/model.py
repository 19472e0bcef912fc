"""The ``[model]`` section: one frozen config per architecture family (:data:`CONFIGS`, by
``model.arch``): :class:`ModelConfig` for the paper's RNNsearch and RNNencdec, :class:`LSTMConfig`,
:class:`LuongConfig` and :class:`TransformerConfig` for the models before and after it, all with the
:class:`Embeddings` every family has; :func:`model_config` makes the one of ``model.arch`` from a
section shared by several families.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .values import ConfigError, make


def _positive(cfg, *names: str) -> None:
    for name in names:
        if getattr(cfg, name) <= 0:
            raise ConfigError(f"model.{name} must be positive, got {getattr(cfg, name)}")


@dataclass(frozen=True)
class Embeddings:
    """What every architecture has: its name, the vocabulary rows and the embedding size.

    Vocabulary sizes count table rows: the special symbols ``<pad>``=0 (GroundHog's unused row 0),
    ``<unk>``=1 and ``</s>``=2, then the shortlist words. 30001 rows = 29,998 words + 3, as GroundHog's
    ``n_sym=30001``.
    """

    arch: str = "RNNsearch"
    src_vocab: int = 30001  # K_x, rows of the source embedding
    trg_vocab: int = 30001  # K_y, rows of the target embedding and the softmax
    m: int = 620  # word embedding dimension (the Transformer's width d)
    init: str = "paper"  # App. B.1; "fanin": fan-in-scaled weights for small models (a deviation)

    def __post_init__(self):
        if CONFIGS.get(self.arch) is not type(self):
            known = [a for a, cls in CONFIGS.items() if cls is type(self)]
            raise ConfigError(f"model.arch must be one of {known}, not {self.arch!r}")
        if self.init not in ("paper", "fanin"):
            raise ConfigError(f"model.init must be 'paper' or 'fanin', not {self.init!r}")
        _positive(self, "src_vocab", "trg_vocab", "m")
        if min(self.src_vocab, self.trg_vocab) < 4:
            raise ConfigError(
                "model vocabularies need at least 4 rows (<pad>, <unk>, </s>, a word)"
            )


@dataclass(frozen=True)
class ModelConfig(Embeddings):
    """Sizes and wiring of the paper's RNNsearch / RNNencdec (App. A.2.3; GroundHog ``state.py``)."""

    arch: str = "RNNsearch"  # "RNNsearch" (attention) or "RNNencdec" (c = h→_{T_x})
    n: int = 1000  # hidden units: each encoder direction, and the decoder (unless n_dec)
    n_dec: int | None = None  # decoder hidden units; None = n (the paper: 1000 for both)
    n_align: int = 1000  # n', hidden units of the alignment model
    l: int = 500  # maxout units of the deep output (2l pre-maxout)
    output_rank: int | None = 620  # GroundHog's W_o = W2 W1 (rank 620); None = the paper's W_o
    gate_bias: bool = False  # GroundHog: only the GRU candidate has a bias; True adds r/z biases
    embedding_bias: bool = True  # GroundHog's embedder is a linear layer with a learned bias
    # dropout while training (the paper: none; a deviation of the Multi30k testbed): the source and
    # target embeddings and the deep output's t_i before W_o (nmt_lib.paper.decoder)
    dropout: float = 0.0

    def __post_init__(self):
        super().__post_init__()
        _positive(self, "n", "n_align", "l")
        if self.n_dec is not None and self.n_dec <= 0:
            raise ConfigError(f"model.n_dec must be positive or None, got {self.n_dec}")
        _dropout(self)


@dataclass(frozen=True)
class LSTMConfig(Embeddings):
    """Sutskever et al.'s LSTM encoder–decoder and the "peeky" one (:mod:`nmt_lib.models.seq2seq`,
    :mod:`nmt_lib.models.peeky`)."""

    arch: str = "Seq2seq"  # "Seq2seq" or "Peeky"
    n: int = 1000  # hidden units of every LSTM layer
    layers: int = 1  # stacked LSTM layers
    reverse_source: bool = False  # Sutskever et al.: the encoder reads the source words reversed
    forget_bias: float = 0.0  # the forget-gate bias at initialisation (Jozefowicz et al.: 1)
    # dropout while training (Sutskever et al.: none; Zaremba et al.'s places): the embeddings,
    # between stacked layers, the decoder's top output before the output layer
    dropout: float = 0.0

    def __post_init__(self):
        super().__post_init__()
        _positive(self, "n", "layers")
        _dropout(self)


@dataclass(frozen=True)
class LuongConfig(LSTMConfig):
    """Luong et al.'s global attention on the LSTM encoder–decoder (:mod:`nmt_lib.models.luong`)."""

    arch: str = "Luong"
    score: str = "general"  # the alignment score: "dot", "general" or "concat"
    n_align: int = 1000  # the concat score's hidden units
    input_feed: bool = True  # h̃_{t-1} is fed to the decoder with y_{t-1}

    def __post_init__(self):
        super().__post_init__()
        if self.score not in ("dot", "general", "concat"):
            raise ConfigError(
                f"model.score must be 'dot', 'general' or 'concat', not {self.score!r}"
            )
        _positive(self, "n_align")


@dataclass(frozen=True)
class TransformerConfig(Embeddings):
    """The Transformer (:mod:`nmt_lib.models.transformer`); ``m`` is its width ``d``."""

    arch: str = "Transformer"
    layers: int = 1  # encoder layers, and decoder layers
    heads: int = 4  # attention heads (m must be a multiple)
    ff: int = 1024  # the feed-forward inner size
    dropout: float = 0.0  # dropout while training (Vaswani et al.: 0.1)

    def __post_init__(self):
        super().__post_init__()
        _positive(self, "layers", "heads", "ff")
        if self.m % self.heads:
            raise ConfigError(
                f"model.m ({self.m}) must be a multiple of model.heads ({self.heads})"
            )
        _dropout(self)


def _dropout(cfg) -> None:
    if not 0 <= cfg.dropout < 1:
        raise ConfigError(f"model.dropout must be in [0, 1), got {cfg.dropout}")


#: The config class of each architecture (``model.arch``): the paper's two
#: (:mod:`nmt_lib.paper.model`) and those before and after it (:mod:`nmt_lib.models`).
CONFIGS = {
    "RNNsearch": ModelConfig,
    "RNNencdec": ModelConfig,
    "Seq2seq": LSTMConfig,
    "Peeky": LSTMConfig,
    "Luong": LuongConfig,
    "Transformer": TransformerConfig,
}
#: The architectures.
ARCHS = tuple(CONFIGS)
#: Every ``[model]`` key of some architecture.
MODEL_KEYS = {f.name for cls in set(CONFIGS.values()) for f in dataclasses.fields(cls)}
#: The keys every architecture has.
BASE_KEYS = {f.name for f in dataclasses.fields(Embeddings)}


def model_config(values: dict | None = None, where: str = "model", **kw) -> Embeddings:
    """The config of ``values["arch"]``'s family (default RNNsearch) from ``values`` (and ``kw``).
    The keys of other architectures are left out (a profile's ``[model]`` section is shared by all
    its runs, and configs saved before the families were split hold every key), but they are
    checked as their own families check them. A key of no architecture, a wrong type or a bad
    value raises :class:`ConfigError` naming ``where``."""
    values = {**(values or {}), **kw}
    unknown = sorted(set(values) - MODEL_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; known: {sorted(MODEL_KEYS)}")
    arch = values.get("arch", "RNNsearch")
    if arch not in CONFIGS:
        raise ConfigError(f"{where}: model.arch must be one of {list(ARCHS)}, not {arch!r}")
    cls = CONFIGS[arch]
    own = {f.name for f in dataclasses.fields(cls)}
    for other in dict.fromkeys(CONFIGS.values()):  # each family whose own keys are given
        theirs = {f.name for f in dataclasses.fields(other)}
        if other is not cls and (set(values) & theirs) - own - BASE_KEYS:
            make(other, {k: v for k, v in values.items() if k in theirs and k != "arch"}, where)
    return make(cls, {k: v for k, v in values.items() if k in own}, where)
