"""Typed, validated configuration: one frozen dataclass per concern, one TOML file per profile.

A profile file (``nmt_lib/profiles/<profile>.toml``, installed with the package) has the sections ``[data]``, ``[model]``, ``[train]`` and
``[search]`` that every model of the profile shares, and one ``[runs."<model name>"]`` table per paper
model that overrides them (``arch``, ``max_len``, a longer budget for RNNsearch-50*)::

    name = "smoke"
    [model]
    m = 16
    [runs."RNNsearch-50"]
    model = { arch = "RNNsearch" }
    data = { max_len = 50 }

Defaults live here, in one place, and are the paper's (``PAPER.md`` §6, §9; each departure a row of
``book/deviations.md``). Unknown keys, wrong types and values out of their range (NaN and infinities
included: every number must be finite) are errors that name the file and the key; a run's name is a
name, never a path. The resolved config of every run is saved next to its results (:func:`to_dict`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path

#: Where the profile files live: package data of ``nmt_lib`` (``nmt_lib/profiles/``; the studies'
#: profiles in ``studies/``), so that an installed package loads them by name.
PROFILE_DIR = Path(__file__).resolve().parent / "profiles"


def home() -> Path:
    """Where the default ``results/``, ``.cache/`` and ``data/wmt14`` are: the repository when
    ``nmt_lib`` runs from a checkout (so that the command line finds the same results and
    checkpoints from any directory), else the working directory."""
    repo = Path(__file__).resolve().parent.parent
    checkout = (repo / "pyproject.toml").is_file() and (repo / "nmt_lib").is_dir()
    return repo if checkout else Path.cwd()


class ConfigError(ValueError):
    """A configuration file or value is invalid; the message names the file and key."""


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


@dataclass(frozen=True)
class DataConfig:
    """Where the WMT'14 files are and how they become minibatches (§4.1, App. B.2, GroundHog)."""

    data_dir: str | None = None  # the WMT'14 layout; None: NMT_DATA, else <home>/data/wmt14
    cache_dir: str | None = None  # tokenized/prepared caches; None: NMT_CACHE, else <home>/.cache
    packed: str | None = None  # a pack (`python -m nmt_lib pack`): its data instead of data_dir's
    train: tuple[str, ...] = ("europarl-v7.fr-en",)  # corpus names under train/
    dev: tuple[str, ...] = ("newstest2012", "newstest2013")
    test: str = "newstest2014"
    src_lang: str = "en"
    trg_lang: str = "fr"
    src_words: int = 29998  # shortlist words; rows = words + 3 specials (must match the model)
    trg_words: int = 29998
    max_len: int = 50  # drop (never truncate) pairs with more words on either side; EOS not counted
    max_train_pairs: int | None = None  # reduced profiles: keep the first N usable pairs
    batch_size: int = 80
    sort_k_batches: int = 20  # sort this many batches at a time by max(len_x, len_y)
    reshuffle: bool = False  # False: one shuffle, the same order every epoch (GroundHog)
    seed: int = 1234

    def __post_init__(self):
        for name in ("max_len", "batch_size", "sort_k_batches", "src_words", "trg_words"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"data.{name} must be > 0, got {getattr(self, name)}")
        if self.max_train_pairs is not None and self.max_train_pairs <= 0:
            raise ConfigError(
                f"data.max_train_pairs must be > 0 (or unset), got {self.max_train_pairs}"
            )

    def resolved_data_dir(self) -> Path:
        """``data_dir`` if set, else ``NMT_DATA``, else ``data/wmt14`` under :func:`home`: a setting
        (a profile, a ``--data-dir``, the smoke profile's toy corpus) beats the environment."""
        return Path(
            self.data_dir or os.environ.get("NMT_DATA") or home() / "data/wmt14"
        ).expanduser()

    def resolved_cache_dir(self) -> Path:
        """``cache_dir`` if set, else ``NMT_CACHE``, else ``.cache`` under :func:`home`."""
        return Path(self.cache_dir or os.environ.get("NMT_CACHE") or home() / ".cache").expanduser()


@dataclass(frozen=True)
class TrainConfig:
    """The training recipe. The defaults are the paper's (§4.2, App. B.2; GroundHog
    ``SGD_adadelta``): Adadelta, the loss summed over the tokens of a minibatch, the gradient norm
    clipped to 1, a constant learning rate. ``optimizer``, ``loss``, ``lr_schedule`` and
    ``warmup_updates`` name the measured alternatives of reduced budgets (the book's deviations page
    and its "What a CPU-hour buys" section)."""

    optimizer: str = "adadelta"  # the paper's; or "adam" (Kingma & Ba, betas 0.9/0.999, eps 1e-8)
    rho: float = 0.95  # Adadelta
    eps: float = 1e-6  # Adadelta's epsilon (Adam keeps its own 1e-8)
    lr: float = 1.0  # Adadelta: 1 (GroundHog); Adam: e.g. 1e-3
    # the minibatch loss: "sum" of its token NLLs (the paper), its "sentence" or "token" mean
    loss: str = "sum"
    # label smoothing ε (Szegedy et al. 2016; Vaswani et al.: 0.1; the paper: 0): the loss of a
    # target position is the cross-entropy against (1 - ε) on the reference word and ε spread
    # evenly over the K - 1 rows but <pad> (nmt_lib.paper.steps.target_log_prob)
    label_smoothing: float = 0.0
    adam_beta2: float = 0.999  # Adam's beta_2 (Vaswani et al.: 0.98)
    # or "plateau": lr *= lr_decay after each evaluation without progress; or "inverse_sqrt"
    # (Vaswani et al.): after the warm-up, lr * sqrt(warmup_updates / update)
    lr_schedule: str = "constant"
    lr_decay: float = 0.5
    warmup_updates: int = 0  # linear warm-up of the learning rate from 0 over this many updates
    clip_norm: float = 1.0  # global L2 norm
    nonfinite: str = "shrink"  # GroundHog: g <- 0.1 * theta; or "skip"
    # non-finite updates in a row after which training stops as diverged (its last checkpoint kept)
    max_nonfinite: int = 10
    max_updates: int | None = None  # budgets: whichever comes first
    max_epochs: float | None = None
    max_hours: float | None = None
    eval_every: int = 1000  # updates between dev evaluations
    dev_nll_sentences: int = 0  # dev NLL of a fixed subset at each evaluation; 0 = all of dev
    dev_bleu_sentences: int = 200  # dev sample decoded (greedy) at each evaluation; 0 = none
    patience: int | None = None  # early stopping on dev NLL (RNNsearch-50*); None = off
    checkpoint_minutes: float = 10.0
    precision: str = "auto"  # "bf16" autocast, "fp32" (the paper), "auto": bf16 where native
    device: str = "auto"  # "auto", "cpu", "cuda"
    # "fast": the same functions computed faster (nmt_lib.backend.backend), or "reference": the
    # paper modules' plain PyTorch
    backend: str = "fast"
    cuda_graphs: bool = False  # GPU, fast backend: forward + backward as CUDA graphs (fast.graphs)
    threads: int | None = None  # torch CPU threads; None = torch default
    seed: int = 1234

    def __post_init__(self):
        choices = {
            "optimizer": ("adadelta", "adam"),
            "loss": ("sum", "sentence", "token"),
            "lr_schedule": ("constant", "plateau", "inverse_sqrt"),
            "backend": ("fast", "reference"),
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ConfigError(
                    f"train.{name} must be one of {list(allowed)}, not {getattr(self, name)!r}"
                )
        if self.lr < 0:
            raise ConfigError(f"train.lr must be >= 0, got {self.lr}")
        for name in ("clip_norm", "eps"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"train.{name} must be > 0, got {getattr(self, name)}")
        if not 0 < self.rho < 1:
            raise ConfigError(f"train.rho must be in (0, 1), got {self.rho}")
        if self.checkpoint_minutes < 0:
            raise ConfigError(
                f"train.checkpoint_minutes must be >= 0, got {self.checkpoint_minutes}"
            )
        if self.threads is not None and self.threads < 1:
            raise ConfigError(f"train.threads must be >= 1 (or unset), got {self.threads}")
        if not 0 <= self.label_smoothing < 1:
            raise ConfigError(
                f"train.label_smoothing must be in [0, 1), got {self.label_smoothing}"
            )
        if not 0 < self.adam_beta2 < 1:
            raise ConfigError(f"train.adam_beta2 must be in (0, 1), got {self.adam_beta2}")
        if self.lr_schedule == "inverse_sqrt" and not self.warmup_updates:
            raise ConfigError("train.lr_schedule = 'inverse_sqrt' needs train.warmup_updates > 0")
        if not 0 < self.lr_decay <= 1:
            raise ConfigError(f"train.lr_decay must be in (0, 1], got {self.lr_decay}")
        for name in ("warmup_updates", "dev_nll_sentences", "dev_bleu_sentences"):
            if getattr(self, name) < 0:
                raise ConfigError(f"train.{name} must be >= 0, got {getattr(self, name)}")
        if self.eval_every <= 0:
            raise ConfigError(f"train.eval_every must be > 0, got {self.eval_every}")
        for name in ("max_updates", "max_epochs", "max_hours", "patience"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigError(f"train.{name} must be > 0 (or unset), got {value}")
        if self.max_nonfinite < 1:
            raise ConfigError(f"train.max_nonfinite must be >= 1, not {self.max_nonfinite}")
        if self.nonfinite not in ("shrink", "skip"):
            raise ConfigError(f"train.nonfinite must be 'shrink' or 'skip', not {self.nonfinite!r}")
        if self.precision not in ("auto", "bf16", "fp32"):
            raise ConfigError(
                f"train.precision must be 'auto', 'bf16' or 'fp32', not {self.precision!r}"
            )
        if self.max_updates is None and self.max_epochs is None and self.max_hours is None:
            raise ConfigError("train needs a budget: max_updates, max_epochs or max_hours")


@dataclass(frozen=True)
class SearchConfig:
    """Beam search as GroundHog's ``sample.py`` (PAPER.md §4, A9)."""

    beam: int = 10
    normalize: bool = False  # divide cost by length (incl. EOS) when choosing the best
    min_len_ratio: float = 0.5  # EOS forbidden before floor(|x| * ratio) steps (|x| incl. EOS)
    max_len_ratio: float = 3.0  # stop after |x| * ratio steps
    batch_size: int = 64  # decoded together (64 beats 32: bench/README.md, "Decoding step")

    def __post_init__(self):
        if self.beam < 1:
            raise ConfigError(f"search.beam must be >= 1, got {self.beam}")
        if self.batch_size < 1:
            raise ConfigError(f"search.batch_size must be >= 1, got {self.batch_size}")
        if self.min_len_ratio < 0:
            raise ConfigError(f"search.min_len_ratio must be >= 0, got {self.min_len_ratio}")
        if self.max_len_ratio <= 0:
            raise ConfigError(f"search.max_len_ratio must be > 0, got {self.max_len_ratio}")


@dataclass(frozen=True)
class RunConfig:
    """Everything one model of a profile needs: the resolved config saved with its results."""

    name: str
    model: Embeddings = field(default_factory=ModelConfig)  # the family of model.arch (CONFIGS)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=lambda: TrainConfig(max_updates=288_000))
    search: SearchConfig = field(default_factory=SearchConfig)

    def __post_init__(self):
        if self.model.src_vocab != self.data.src_words + 3 or self.model.trg_vocab != (
            self.data.trg_words + 3
        ):
            raise ConfigError(
                f"run {self.name!r}: model vocab rows ({self.model.src_vocab}, "
                f"{self.model.trg_vocab}) must equal data words + 3 "
                f"({self.data.src_words + 3}, {self.data.trg_words + 3})"
            )


@dataclass(frozen=True)
class Profile:
    """A profile: a name, a description, and its runs in the paper's order."""

    name: str
    description: str
    runs: dict[str, RunConfig]
    path: str
    publish: tuple[str, ...] = ()  # runs whose weights go into the results (nmt_lib.publish)


_SECTIONS = {"model": ModelConfig, "data": DataConfig, "train": TrainConfig, "search": SearchConfig}


def _coerce(cls, value, where: str):
    """Check ``value`` against the annotation ``cls`` (int, float, str, bool, tuples, optionals);
    no number may be NaN or infinite."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{where}: expected a finite number, got {value!r}")
    origin = typing.get_origin(cls)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(cls)
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(arg, value, where)
            except ConfigError:
                pass
        names = " or ".join("None" if a is type(None) else a.__name__ for a in args)
        raise ConfigError(f"{where}: expected {names}, got {value!r}")
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        (item,) = typing.get_args(cls)[:1]
        return tuple(_coerce(item, v, where) for v in value)
    if cls is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if cls in (int, float, str, bool) and type(value) is cls:
        return value
    raise ConfigError(f"{where}: expected {cls.__name__}, got {value!r}")


def _checked(cls, values: dict, where: str) -> dict:
    """``values`` for dataclass ``cls``, type-checked; unknown keys and wrong types raise
    ConfigError naming ``where``."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - names)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; known: {sorted(names)}")
    return {k: _coerce(hints[k], v, f"{where}.{k}") for k, v in values.items()}


def make(cls, values: dict, where: str):
    """Build dataclass ``cls`` from ``values``; unknown keys and wrong types raise ConfigError."""
    coerced = _checked(cls, values, where)
    try:
        return cls(**coerced)
    except ConfigError as e:  # the dataclass's own checks, which name the key
        raise ConfigError(f"{where}: {e}") from None


def profile_path(name_or_path: str | os.PathLike) -> Path:
    """``smoke`` -> ``<PROFILE_DIR>/smoke.toml``; an existing path is returned as is."""
    p = Path(name_or_path)
    if p.suffix == ".toml" or p.exists():
        return p
    return PROFILE_DIR / f"{name_or_path}.toml"


def load_profile(name_or_path: str | os.PathLike, **section_overrides: dict) -> Profile:
    """Read and validate a profile file. ``section_overrides`` (e.g. ``train={"max_updates": 5}``)
    are applied to every run after the file, for command-line overrides and tests."""
    path = profile_path(name_or_path)
    if not path.is_file():
        known = sorted(p.stem for p in PROFILE_DIR.glob("*.toml"))
        raise ConfigError(f"{path}: no such profile file (known profiles: {known})")
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: {e}") from None
    unknown = sorted(set(doc) - {"name", "description", "runs", "publish", *_SECTIONS})
    if unknown:
        raise ConfigError(f"{path}: unknown top-level key(s) {unknown}")
    for key in ("runs", *_SECTIONS):
        _table(doc.get(key, {}), f"{path}: {key}")
    for key in ("name", "description"):
        if not isinstance(doc.get(key, ""), str):
            raise ConfigError(f"{path}: {key}: expected a string, got {doc[key]!r}")
    for sec, values in section_overrides.items():  # blamed on the override, not on the file
        if sec == "model":  # the types here; the values with each run's (below)
            for k, v in values.items():
                if k not in MODEL_KEYS:
                    raise ConfigError(f"--set model: unknown key(s) [{k!r}]")
                declared = next(c for c in CONFIGS.values() if k in c.__dataclass_fields__)
                _checked(declared, {k: v}, "--set model")
        else:
            _checked(_SECTIONS[sec], values, f"--set {sec}")
    runs = {}
    for run_name, run in doc.get("runs", {}).items():
        check_name(run_name, f"{path}: runs.{run_name!r}")
        _table(run, f"{path}: runs.{run_name!r}")
        bad = sorted(set(run) - set(_SECTIONS))
        if bad:
            raise ConfigError(f"{path}: runs.{run_name!r}: unknown key(s) {bad}")
        parts = {}
        for sec, cls in _SECTIONS.items():
            _table(run.get(sec, {}), f"{path}: runs.{run_name!r}.{sec}")
            values = {**doc.get(sec, {}), **run.get(sec, {}), **section_overrides.get(sec, {})}
            where = f"{path}: runs.{run_name!r}.{sec}"
            parts[sec] = model_config(values, where) if sec == "model" else make(cls, values, where)
        family = {f.name for f in dataclasses.fields(parts["model"])}
        if foreign := sorted(set(run.get("model", {})) - family):  # the shared section's may be
            raise ConfigError(
                f"{path}: runs.{run_name!r}.model: {foreign} do not apply to "
                f"arch {parts['model'].arch!r}"
            )
        try:
            runs[run_name] = RunConfig(name=run_name, **parts)
        except ConfigError as e:
            raise ConfigError(f"{path}: {e}") from None
    if not runs:
        raise ConfigError(f'{path}: a profile needs at least one [runs."<name>"] table')
    publish = doc.get("publish", [])
    if not isinstance(publish, list) or not all(isinstance(n, str) for n in publish):
        raise ConfigError(f"{path}: publish: expected a list of run names, got {publish!r}")
    publish = tuple(publish)
    if missing := [n for n in publish if n not in runs]:
        raise ConfigError(f"{path}: publish names no run of the profile: {missing}")
    name = check_name(doc.get("name", path.stem), f"{path}: name")
    return Profile(name, doc.get("description", ""), runs, str(path), publish)


def _table(value, where: str) -> dict:
    """``value`` if it is a TOML table, else :class:`ConfigError` naming ``where``."""
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a table, got {value!r}")
    return value


def check_name(name: str, where: str) -> str:
    """``name`` (a run's, a profile's) if it can name a directory (no separator or NUL, not ``.``,
    ``..`` or empty), else :class:`ConfigError` naming ``where``: results never go outside
    ``--out``."""
    if name in ("", ".", "..") or any(c in name for c in "/\\\0"):
        raise ConfigError(
            f"{where}: {name!r} is not a name (a name has no '/', '\\' or NUL and is not '.' or '..')"
        )
    return name


def to_dict(cfg) -> dict:
    """A JSON-ready dict of any config dataclass (tuples become lists)."""
    return json.loads(json.dumps(dataclasses.asdict(cfg)))


def run_from_dict(d: dict) -> RunConfig:
    """Inverse of :func:`to_dict` for a RunConfig (e.g. read back from a checkpoint); a model section
    saved before the families were split, with every architecture's keys, reads back too
    (:func:`model_config`)."""
    parts = {
        sec: model_config(d.get(sec, {}), f"config.{sec}")
        if sec == "model"
        else make(cls, d.get(sec, {}), f"config.{sec}")
        for sec, cls in _SECTIONS.items()
    }
    return RunConfig(name=d["name"], **parts)


def run_dir_name(run_name: str) -> str:
    """A file-system-safe name: ``RNNsearch-50*`` -> ``RNNsearch-50star``; a name that is a path
    (:func:`check_name`) raises :class:`ConfigError`."""
    return check_name(run_name, "run name").replace("*", "star")
