"""A run's config, :class:`RunConfig`: its model's (:mod:`nmt_lib.config.model`), where the data
are and how they become minibatches (:class:`DataConfig`), the training recipe
(:class:`TrainConfig`) and beam search (:class:`SearchConfig`), each with the paper's values as
defaults; a run read back from its saved dict (:func:`run_from_dict`), the directory its results go
to (:func:`run_dir_name`), and where the default directories are (:func:`home`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .model import Embeddings, ModelConfig, model_config
from .values import ConfigError, check_name, make


def home() -> Path:
    """Where the default ``results/``, ``.cache/`` and ``data/wmt14`` are: the repository when
    ``nmt_lib`` runs from a checkout (so that the command line finds the same results and
    checkpoints from any directory), else the working directory."""
    repo = Path(__file__).resolve().parents[2]
    checkout = (repo / "pyproject.toml").is_file() and (repo / "nmt_lib").is_dir()
    return repo if checkout else Path.cwd()


@dataclass(frozen=True)
class DataConfig:
    """Where the WMT'14 files are and how they become minibatches (§4.1, App. B.2, GroundHog)."""

    data_dir: str | None = None  # the WMT'14 layout; None: NMT_DATA, else <home>/data/wmt14
    cache_dir: str | None = None  # tokenized/prepared caches; None: NMT_CACHE, else <home>/.cache
    packed: str | None = None  # a pack (`python -m nmt_lib pack`): its data instead of data_dir's
    train: tuple[str, ...] = ("europarl-v7.fr-en",)  # corpus names under train/
    dev: tuple[str, ...] = ("newstest2012", "newstest2013")
    test: str = "newstest2014"
    # test sets decoded and scored beside `test`, each into views/<name>/ of a run's results (e.g.
    # an in-domain set held out of the training corpus); training drops their pairs as it drops test's
    views: tuple[str, ...] = ()
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


#: The config class of each section of a run (the model's: its family's, :func:`model_config`).
SECTIONS = {"model": ModelConfig, "data": DataConfig, "train": TrainConfig, "search": SearchConfig}


def run_from_dict(d: dict) -> RunConfig:
    """Inverse of :func:`to_dict` for a RunConfig (e.g. read back from a checkpoint); a model section
    saved before the families were split, with every architecture's keys, reads back too
    (:func:`model_config`)."""
    parts = {
        sec: model_config(d.get(sec, {}), f"config.{sec}")
        if sec == "model"
        else make(cls, d.get(sec, {}), f"config.{sec}")
        for sec, cls in SECTIONS.items()
    }
    return RunConfig(name=d["name"], **parts)


def run_dir_name(run_name: str) -> str:
    """A file-system-safe name: ``RNNsearch-50*`` -> ``RNNsearch-50star``; a name that is a path
    (:func:`check_name`) raises :class:`ConfigError`."""
    return check_name(run_name, "run name").replace("*", "star")
