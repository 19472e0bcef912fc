"""The settings that make a training recipe (:data:`RECIPE`): what the budget study varies and what
the ``lite`` profile takes from its chosen arm, read from a run's config (:func:`recipe`) and
compared between two runs (:func:`recipe_differences`). The pilot (:mod:`nmt_experiments.pilot`)
reads its arms' recipes with them."""

from __future__ import annotations

from nmt_lib.config import RunConfig

#: The settings that make a recipe: what the study varies, and what the ``lite`` profile takes from
#: the chosen arm (the budget, evaluation and model-specific settings such as ``max_len`` are not).
RECIPE = {
    "model": ("m", "n", "n_dec", "n_align", "l", "output_rank", "init", "src_vocab", "trg_vocab"),
    "data": ("batch_size", "src_words", "trg_words"),
    "train": (
        "optimizer",
        "lr",
        "rho",
        "eps",
        "loss",
        "lr_schedule",
        "lr_decay",
        "warmup_updates",
        "clip_norm",
        "precision",
    ),
}


def recipe(run: RunConfig) -> dict:
    """The :data:`RECIPE` settings of ``run``: ``{"train.optimizer": "adam", ...}``."""
    return {
        f"{sec}.{k}": getattr(getattr(run, sec), k) for sec, keys in RECIPE.items() for k in keys
    }


def recipe_differences(run: RunConfig, arm: RunConfig) -> str:
    """The :data:`RECIPE` settings in which ``run`` differs from ``arm`` ("" when none)."""
    a, b = recipe(run), recipe(arm)
    return ", ".join(f"{k}={a[k]!r} (arm: {b[k]!r})" for k in a if a[k] != b[k])
