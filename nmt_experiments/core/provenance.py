"""What every results directory records of how it was made: the commit of the code that trained
(:func:`git_state`), the profile with its resolved configs, the sha256 of every data file, the
hardware and the library versions (:func:`provenance`); a replication's ``manifest.json`` adds each
run's device, precision, sacreBLEU signatures, wall times and published files
(:func:`write_manifest`) from what each run recorded of itself (:func:`record_run`), a study's its
arms' wall times and commits (:func:`write_arms_manifest`)."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import torch

from nmt_lib import loading
from nmt_lib.config import home, to_dict
from nmt_lib.data import input_sha256
from nmt_lib.io import read_json, write_json
from nmt_lib.runtime import cpu_flags, cpu_info

from .results import published_dir, run_dir


def git_state() -> dict:
    """The commit of :func:`nmt_lib.config.home` (the repository) and whether its tracked files
    outside ``results/`` differ from it (the code that trains; a regeneration rewrites results)."""

    def git(*args):
        r = subprocess.run(["git", *args], cwd=home(), capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else None

    return {
        "commit": git("rev-parse", "HEAD"),
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!results")),
    }


def _data_files(prof) -> dict:
    """sha256 of every input file of the profile, by path relative to its data directory."""
    files = {}
    for run in prof.runs.values():
        files.update(input_sha256(run.data))
    return dict(sorted(files.items()))


def _version(package: str) -> str | None:
    """The installed version of ``package``; None where it runs from a tree (not installed)."""
    try:
        return version(package)
    except PackageNotFoundError:
        return None


def simd_flags() -> list[str]:
    """The CPU's vector-instruction flags (AVX, AMX, FMA): what decides its fp32 and bf16 kernels,
    so two CPUs of one model name can train differently."""
    return sorted(f for f in cpu_flags() if f.startswith(("avx", "amx", "fma")))


def provenance(prof, git: dict | None = None) -> dict:
    """What every results directory records: the profile, the resolved configs, the commit (``git``:
    the commit the runs started from; default: now), the sha256 of every data file, the hardware
    and the library versions."""
    pkgs = ("torch", "numpy", "sacrebleu", "sacremoses", "nmt_lib")
    return {
        "profile": prof.name,
        "description": prof.description,
        "created_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "git": git or git_state(),
        "runs": list(prof.runs),
        "configs": {name: to_dict(run) for name, run in prof.runs.items()},
        "data_sha256": _data_files(prof),
        "hardware": {
            "platform": platform.platform(),
            "cpu": platform.processor() or platform.machine(),
            "cpu_model": cpu_info("model name") or None,
            "cpu_flags_simd": simd_flags(),
            "cpu_count": os.cpu_count(),
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        },
        "versions": {"python": platform.python_version(), **{p: _version(p) for p in pkgs}},
    }


def write_manifest(out: Path, prof, walls: dict, git: dict | None = None) -> dict:
    """``manifest.json``: provenance of everything under ``out`` (DESIGN.md, results): the
    :func:`provenance`, the device and precision of every run, the sacreBLEU signatures, the wall
    times and the sha256 of each published model's files (``published``: what
    :func:`nmt_lib.loading.verify_published` checks them against)."""
    signatures, devices, precisions = {}, {}, {}
    for name in prof.runs:
        bleu = read_json(run_dir(out, name) / "bleu.json")
        signatures = {k: bleu["all"][k]["signature"] for k in ("tok", "detok")}
        summary = read_json(run_dir(out, name) / "train_summary.json")
        devices[name], precisions[name] = summary["device"], summary.get("precision")
    manifest = provenance(prof, git)
    later = {}  # runs trained in an earlier session, from another commit (record_run)
    for name in prof.runs:
        f = run_dir(out, name) / "made.json"
        if f.is_file() and (made := read_json(f)["git"]) != manifest["git"]:
            later[name] = {"what": "trained and evaluated", **made}
    if later:
        manifest["git_runs"] = later
    manifest["hardware"]["device_per_run"] = devices
    manifest["hardware"]["precision_per_run"] = precisions  # train.precision as resolved ("auto")
    manifest["sacrebleu_signatures"] = signatures
    manifest["wall_seconds"] = walls
    published = {name: published_dir(prof.name, name, out) for name in prof.publish}
    manifest["published"] = {
        name: loading.recorded_sums(d)
        for name, d in published.items()
        if (d / loading.SUMS).is_file()
    }
    write_json(out / "manifest.json", manifest)
    return manifest


def record_run(d: Path, git: dict, walls: dict) -> None:
    """``made.json`` of the run directory ``d``, written when the run is evaluated: the commit
    that trained it, when, on which CPU (its model name and vector flags), and its wall times. A
    profile's manifest is written once all its runs are evaluated, sessions later for a study
    trained a few runs at a time, and names each run made from another commit than its own
    (``git_runs``)."""
    write_json(
        d / "made.json",
        {
            "git": git,
            "created_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "cpu_model": cpu_info("model name") or None,
            "cpu_flags_simd": simd_flags(),
            "wall_seconds": walls,
        },
    )


def write_arms_manifest(out: Path, prof, walls: dict, git: dict) -> None:
    """A study's ``manifest.json`` (its arms trained one at a time, as the recipe sweep and the
    pilot train them): the arms finished so far, with each one's wall times and commit."""
    f = out / "manifest.json"
    old = read_json(f) if f.is_file() else {}
    manifest = provenance(prof, git)
    manifest["wall_seconds"] = {**old.get("wall_seconds", {}), **walls}
    manifest["git_per_run"] = {**old.get("git_per_run", {}), **dict.fromkeys(walls, git)}
    manifest["runs"] = [n for n in prof.runs if n in manifest["wall_seconds"]]
    manifest["configs"] = {n: manifest["configs"][n] for n in manifest["runs"]}
    write_json(f, manifest)
