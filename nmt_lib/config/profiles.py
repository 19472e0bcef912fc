"""Profiles: a profile file (``nmt_lib/profiles/<profile>.toml``, package data) read and validated
into a :class:`Profile`, its runs' configs (:func:`load_profile`), found by name or path
(:func:`profile_path`).
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from .model import CONFIGS, MODEL_KEYS, model_config
from .run import SECTIONS, RunConfig
from .values import ConfigError, check_name, checked, make

#: Where the profile files live: package data of ``nmt_lib`` (``nmt_lib/profiles/``; the studies'
#: profiles in ``studies/``), so that an installed package loads them by name.
PROFILE_DIR = Path(__file__).resolve().parents[1] / "profiles"


@dataclass(frozen=True)
class Profile:
    """A profile: a name, a description, and its runs in the paper's order."""

    name: str
    description: str
    runs: dict[str, RunConfig]
    path: str
    publish: tuple[str, ...] = ()  # runs whose weights go into the results (nmt_lib.publish)


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
    doc = _read(path)
    _check_overrides(section_overrides)
    runs = {
        run_name: _run(path, doc, run_name, run, section_overrides)
        for run_name, run in doc.get("runs", {}).items()
    }
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


def _read(path: Path) -> dict:
    """The TOML document of the profile file ``path``, its top level checked: known keys only,
    tables where tables belong, a string name and description."""
    if not path.is_file():
        known = sorted(p.stem for p in PROFILE_DIR.glob("*.toml"))
        raise ConfigError(f"{path}: no such profile file (known profiles: {known})")
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: {e}") from None
    unknown = sorted(set(doc) - {"name", "description", "runs", "publish", *SECTIONS})
    if unknown:
        raise ConfigError(f"{path}: unknown top-level key(s) {unknown}")
    for key in ("runs", *SECTIONS):
        _table(doc.get(key, {}), f"{path}: {key}")
    for key in ("name", "description"):
        if not isinstance(doc.get(key, ""), str):
            raise ConfigError(f"{path}: {key}: expected a string, got {doc[key]!r}")
    return doc


def _check_overrides(section_overrides: dict) -> None:
    """The overrides' keys and types, blamed on the override (``--set``), not on the file."""
    for sec, values in section_overrides.items():
        if sec == "model":  # the types here; the values with each run's (:func:`_run`)
            for k, v in values.items():
                if k not in MODEL_KEYS:
                    raise ConfigError(f"--set model: unknown key(s) [{k!r}]")
                declared = next(c for c in CONFIGS.values() if k in c.__dataclass_fields__)
                checked(declared, {k: v}, "--set model")
        else:
            checked(SECTIONS[sec], values, f"--set {sec}")


def _run(path: Path, doc: dict, run_name: str, run, section_overrides: dict) -> RunConfig:
    """The config of the run ``run_name`` (its table ``run``): each section the profile's shared
    one, then the run's, then the overrides; a model key of the run's own that its family lacks is
    an error (the shared section's are left out)."""
    check_name(run_name, f"{path}: runs.{run_name!r}")
    _table(run, f"{path}: runs.{run_name!r}")
    bad = sorted(set(run) - set(SECTIONS))
    if bad:
        raise ConfigError(f"{path}: runs.{run_name!r}: unknown key(s) {bad}")
    parts = {}
    for sec, cls in SECTIONS.items():
        _table(run.get(sec, {}), f"{path}: runs.{run_name!r}.{sec}")
        values = {**doc.get(sec, {}), **run.get(sec, {}), **section_overrides.get(sec, {})}
        where = f"{path}: runs.{run_name!r}.{sec}"
        parts[sec] = model_config(values, where) if sec == "model" else make(cls, values, where)
    family = {f.name for f in dataclasses.fields(parts["model"])}
    if foreign := sorted(set(run.get("model", {})) - family):
        raise ConfigError(
            f"{path}: runs.{run_name!r}.model: {foreign} do not apply to "
            f"arch {parts['model'].arch!r}"
        )
    try:
        return RunConfig(name=run_name, **parts)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None


def _table(value, where: str) -> dict:
    """``value`` if it is a TOML table, else :class:`ConfigError` naming ``where``."""
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a table, got {value!r}")
    return value
