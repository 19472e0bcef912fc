"""Typed, validated configuration: one frozen dataclass per concern, one TOML file per profile.

A profile file (``nmt_lib/profiles/<profile>.toml``, installed with the package) has the sections
``[data]``, ``[model]``, ``[train]`` and ``[search]`` that every model of the profile shares, and
one ``[runs."<model name>"]`` table per paper model that overrides them (``arch``, ``max_len``, a
longer budget for RNNsearch-50*)::

    name = "smoke"
    [model]
    m = 16
    [runs."RNNsearch-50"]
    model = { arch = "RNNsearch" }
    data = { max_len = 50 }

Defaults live in the dataclasses, in one place, and are the paper's (``PAPER.md`` §6, §9; each
departure a row of ``book/deviations.md``). Unknown keys, wrong types and values out of their range
(NaN and infinities included: every number must be finite) are errors that name the file and the
key; a run's name is a name, never a path. The resolved config of every run is saved next to its
results (:func:`to_dict`).

This package is the public face of its modules, which import one another one way:
:mod:`~nmt_lib.config.values` (values checked into a dataclass and back: :func:`make`,
:func:`to_dict`, :class:`ConfigError`), :mod:`~nmt_lib.config.model` (the ``[model]`` section, one
config per architecture family), :mod:`~nmt_lib.config.run` (the data, training and search
sections and :class:`RunConfig`) and :mod:`~nmt_lib.config.profiles` (the profile files read:
:func:`load_profile`).
"""

from .model import (
    ARCHS,
    BASE_KEYS,
    CONFIGS,
    MODEL_KEYS,
    Embeddings,
    LSTMConfig,
    LuongConfig,
    ModelConfig,
    TransformerConfig,
    model_config,
)
from .profiles import PROFILE_DIR, Profile, load_profile, profile_path
from .run import (
    DataConfig,
    RunConfig,
    SearchConfig,
    TrainConfig,
    home,
    run_dir_name,
    run_from_dict,
)
from .values import ConfigError, check_name, make, to_dict

__all__ = [
    "ARCHS",
    "BASE_KEYS",
    "CONFIGS",
    "MODEL_KEYS",
    "PROFILE_DIR",
    "ConfigError",
    "DataConfig",
    "Embeddings",
    "LSTMConfig",
    "LuongConfig",
    "ModelConfig",
    "Profile",
    "RunConfig",
    "SearchConfig",
    "TrainConfig",
    "TransformerConfig",
    "check_name",
    "home",
    "load_profile",
    "make",
    "model_config",
    "profile_path",
    "run_dir_name",
    "run_from_dict",
    "to_dict",
]
