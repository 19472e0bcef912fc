"""The backend of a run by name (``train.backend``): :func:`backend`. Training, evaluation and search
reach the model classes, the optimizer, the backward pass, the update and the decoding steps through
the object it returns: the plain one (:class:`nmt_lib.recipe.Plain`, which holds the training
recipe) or the fast one (:class:`nmt_lib.fast.FastBackend`, its overrides)."""

from __future__ import annotations

from .fast import FastBackend
from .fast.scan import ROW_TILE
from .recipe import Plain


def backend(name: str = "fast", compiled: bool = True, tile: int = ROW_TILE) -> Plain:
    """The backend named ``name`` (``train.backend``): ``"fast"`` (:class:`~nmt_lib.fast.FastBackend`,
    with the options ``compiled`` and ``tile``) or ``"reference"`` (:class:`~nmt_lib.recipe.Plain`,
    the model classes as they are)."""
    if name == "fast":
        return FastBackend(compiled, tile)
    if name == "reference":
        return Plain()
    raise ValueError(f"backend must be 'fast' or 'reference', not {name!r}")
