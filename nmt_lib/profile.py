"""A profile's runs as the command line and the replication select them: its declared data
applied (the smoke profile's: the generated toy corpus) and only the runs asked for."""

from __future__ import annotations

import os
from dataclasses import replace

from .config import ConfigError, load_profile
from .data.fixtures import toy_data_dir


def load_runs(profile: str, data_dir: str | os.PathLike | None = None, runs=None, **overrides):
    """The profile ``profile`` (a name or a TOML path) with ``overrides`` as
    :func:`nmt_lib.config.load_profile` takes them, ``data_dir`` applied to each run (it beats a
    ``data.data_dir`` override; the smoke profile's default, the toy corpus, does not), and with
    ``runs`` only these runs, in that order (an unknown one raises :class:`ConfigError` naming the
    profile's file)."""
    data = dict(overrides.get("data", {}))
    if data_dir is not None:
        data["data_dir"] = str(data_dir)
    elif profile == "smoke":
        data.setdefault("data_dir", str(toy_data_dir()))
    if data:
        overrides["data"] = data
    prof = load_profile(profile, **overrides)
    if runs is None:
        return prof
    unknown = [n for n in runs if n not in prof.runs]
    if unknown:
        raise ConfigError(f"{prof.path}: no run(s) {unknown}; known: {list(prof.runs)}")
    return replace(prof, runs={n: prof.runs[n] for n in runs})
