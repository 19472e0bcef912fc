"""How a config is made from plain values and written back: :func:`make` builds a config
dataclass from a dict, each value checked against its field's annotation (ints, floats, strings,
booleans, tuples, optionals; every number finite), unknown keys refused; :func:`check_name` a run's
or a profile's name; :func:`to_dict` a config as JSON. Every error is a :class:`ConfigError` that
names the file and the key.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing


class ConfigError(ValueError):
    """A configuration file or value is invalid; the message names the file and key."""


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


def checked(cls, values: dict, where: str) -> dict:
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
    coerced = checked(cls, values, where)
    try:
        return cls(**coerced)
    except ConfigError as e:  # the dataclass's own checks, which name the key
        raise ConfigError(f"{where}: {e}") from None


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
