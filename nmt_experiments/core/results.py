"""Where a profile's results live: ``results/<profile>/``, with one directory per model under
``runs/``, and the check that report mode makes before it reads them."""

from __future__ import annotations

import csv
import json
import os
import re
from pathlib import Path

from nmt_lib.config import (
    PROFILE_DIR,
    ConfigError,
    home,
    load_profile,
    profile_path,
    run_dir_name,
    run_from_dict,
    to_dict,
)
from nmt_lib.io import read_json


class ResultsMissing(FileNotFoundError):
    """Report mode found no committed results; the message says how to make them."""


def results_path(profile: str, results_dir: str | os.PathLike | None = None) -> Path:
    """``results_dir`` if given, else ``results/<profile>/`` under :func:`nmt_lib.config.home`
    (the repository, from a checkout)."""
    return Path(results_dir) if results_dir else home() / "results" / profile


def check_profile(profile: str, results_dir: str | os.PathLike | None = None) -> None:
    """Raise :class:`ResultsMissing` saying so, with the profiles that exist, if ``profile`` is
    neither a profile (:func:`nmt_lib.config.profile_path`, or a study's of
    ``nmt_lib/profiles/studies/``) nor the name of a results directory (``results_dir`` given:
    nothing to check)."""
    if results_dir is not None or results_path(profile).is_dir():
        return
    if profile_path(profile).is_file() or (PROFILE_DIR / "studies" / f"{profile}.toml").is_file():
        return
    known = sorted(p.stem for p in PROFILE_DIR.glob("*.toml"))
    studies = sorted(p.stem for p in (PROFILE_DIR / "studies").glob("*.toml"))
    raise ResultsMissing(
        f"no profile {profile!r}: the profiles are {', '.join(known)} (and the studies' "
        f"{', '.join(studies)}), or a profile file's path"
    )


class ParameterError(ValueError):
    """A chapter's parameter that names nothing known; shown in a notebook as its one line."""

    def _render_traceback_(self) -> list[str]:  # IPython's hook: the message, no traceback
        return [f"{type(self).__name__}: {self}"]


def check_parameters(profile, train=False, results_dir=None, data_dir=None) -> None:
    """A chapter's first check of its papermill parameters: ``profile`` a profile or a results
    directory (:func:`check_profile`), ``train`` True or False, ``data_dir`` (if given) a
    directory; else :class:`ParameterError` naming the value (and the known profiles)."""
    try:
        check_profile(str(profile), results_dir)
    except ResultsMissing as e:
        raise ParameterError(f"profile: {e}") from None
    if not isinstance(train, bool):
        raise ParameterError(f"train: {train!r}, but it is True or False")
    if data_dir is not None and not Path(data_dir).is_dir():
        raise ParameterError(f"data_dir: {str(data_dir)!r} is no directory")


def require_results(path: Path, *names: str) -> Path:
    """Check that ``path`` holds ``names`` (report mode); never trains to make them. A ``path``
    of ``results/`` whose name is no profile says so (:func:`check_profile`)."""
    missing = [n for n in names if not (path / n).exists()]
    if missing:
        profile = path.name
        if Path(path) == results_path(profile):
            check_profile(profile)
        raise ResultsMissing(
            f"{path} has no {', '.join(missing)}. Report mode only reads committed results; to "
            f"create them run `python tools/notebooks.py --profile {profile} --train` "
            "(or pass results_dir= the directory of an earlier run)."
        )
    return path


def run_dir(out: Path, name: str) -> Path:
    """The directory of model ``name`` in the results directory ``out``."""
    return out / "runs" / run_dir_name(name)


def scored_dir(out: Path, name: str, view: str | None = None) -> Path:
    """Where run ``name``'s scores on a test set are: its run directory, or for the test set
    ``view`` of ``data.views`` its ``views/<view>/`` (:func:`nmt_lib.evaluate.evaluate_run`)."""
    return run_dir(out, name) / "views" / view if view else run_dir(out, name)


def model_of(run: str) -> str:
    """The model a run trains: ``<model>-s<k>`` is ``model`` with seed ``k``; any other run is a
    model of its own."""
    return re.sub(r"-s\d+$", "", run)


def seed_groups(out: Path) -> dict[str, list[str]]:
    """The runs of the results directory ``out`` by model, in the manifest's order: ``{model: its
    runs}``, where a run named ``<model>-s<k>`` is ``model`` trained with seed ``k`` (another
    initialisation and order of the batches) and any other run is a model of its own."""
    found: dict[str, list[str]] = {}
    for run in read_json(out / "manifest.json")["runs"]:
        found.setdefault(model_of(run), []).append(run)
    return found


def commit_text(manifest: dict) -> str:
    """The commit that made a results directory, as its ``manifest`` names it: short, "with
    uncommitted changes" where the tree differed from it, and the runs made later from other
    commits (``git_runs``: what was made, from which commit)."""
    git = manifest["git"]
    text = git["commit"][:10] if git["commit"] else "uncommitted"
    text += " with uncommitted changes" if git["dirty"] else ""
    later = "; ".join(
        f"{name}: {g['what']} from {g['commit'][:10]}"
        for name, g in manifest.get("git_runs", {}).items()
    )
    return text + (f" ({later})" if later else "")


def train_log(d: Path) -> list[dict]:
    """The records of the run in ``d``'s ``train_log.jsonl``, in order."""
    text = (d / "train_log.jsonl").read_text(encoding="utf-8")
    return [json.loads(x) for x in text.splitlines() if x.strip()]


def tokens_per_update(d: Path) -> float:
    """The target tokens of one update of the run in ``d``, the median over its training log's
    windows: a window's tokens per second times its seconds (the elapsed time since the record
    before), over its updates. Logs written before windows were counted give none: ``ValueError``."""
    recs = [r for r in train_log(d) if "window_updates" in r]
    per = sorted(
        b["tokens_per_s"] * (b["elapsed"] - a["elapsed"]) / b["window_updates"]
        for a, b in zip(recs, recs[1:], strict=False)
        if b["elapsed"] > a["elapsed"]
    )
    if not per:
        raise ValueError(f"{d / 'train_log.jsonl'}: no training windows with their updates")
    return per[len(per) // 2]


def eval_share(d: Path) -> float:
    """The share of the run in ``d``'s training time that went to its evaluations on dev."""
    recs = train_log(d)
    spent = sum(r.get("eval_seconds", 0.0) for r in recs if r.get("kind") == "eval")
    return spent / max(r["elapsed"] for r in recs if "elapsed" in r)


def eval_curve(d: Path) -> list[dict]:
    """The evaluations during training of the run in ``d``, in order, from its ``train_log.jsonl``:
    ``[{"minutes", "update", "dev_nll", "dev_bleu"}]`` (the dev NLL of the fixed subset, the greedy
    BLEU of the first dev sentences). The untrained model is not evaluated: a curve starts at the
    first evaluation."""
    recs = train_log(d)
    return [
        {
            "minutes": r["elapsed"] / 60,
            "update": r["update"],
            "dev_nll": r["dev_nll"],
            "dev_bleu": r["dev_bleu"],
        }
        for r in recs
        if r.get("kind") == "eval"
    ]


def published_dir(profile: str, run: str, results_dir=None) -> Path:
    """``results/<profile>/published/<run>/`` (``RNNsearch-50*`` -> ``RNNsearch-50star``)."""
    return results_path(profile, results_dir) / "published" / run_dir_name(run)


def paper_table(name: str) -> dict[str, dict]:
    """``results/paper/<name>.csv`` (typed from the paper: Tables 1 and 2, Figure 3, the corpus)
    as ``{first column: row}``."""
    with open(home() / "results" / "paper" / f"{name}.csv", encoding="utf-8") as f:
        rows = csv.DictReader(f)
        return {row[rows.fieldnames[0]]: row for row in rows}


def convergence_text(out: Path) -> str:
    """How the evaluated runs of ``out`` stopped, from their ``train_summary.json``: "every run
    trained to convergence" only where early stopping ended every one; else the runs that reached
    their cap, by name. Empty where no run has its summary."""
    manifest = read_json(out / "manifest.json") if (out / "manifest.json").is_file() else {}
    found = [(r, run_dir(out, r) / "train_summary.json") for r in manifest.get("runs", [])]
    stops = {r: read_json(f) for r, f in found if f.is_file()}
    if not stops:
        return ""
    patience = {c["train"].get("patience") for c in manifest["configs"].values()}
    rule = (
        f"its dev NLL not improved for {'/'.join(map(str, sorted(patience, key=str)))} evaluations"
    )
    capped = [r for r, s in stops.items() if s["stopped_by"] != "early_stop"]
    if not capped:
        return f"every run trained to convergence (stopped by early stopping: {rule})"
    cap = max(stops[r]["updates"] for r in capped)
    return (
        f"every run trained until early stopping ended it ({rule}) except {len(capped)} of the "
        f"{len(stops)}, which reached their cap of {cap:,} updates first: {', '.join(capped)}"
    )


def config_changes(saved: dict, run, summary: dict | None = None) -> list[str]:
    """How ``run`` differs from the config ``saved`` (a run's ``config.json``, in the layout of any
    version), one ``"section.key saved → run's"`` per setting; empty where ``saved`` is ``run``'s.
    ``summary``: that run's ``train_summary.json``, which says where its budget ended it; training
    is the same update by update whatever the budget, so a run that early stopping ended at update
    U is ``run``'s under any cap of at least U, and one that its time budget ended at update U is
    ``run``'s with a budget of exactly U updates (``train.max_updates``)."""
    try:  # every section as this version reads it: its settings' defaults where it predates them
        saved, want = to_dict(run_from_dict(saved)), to_dict(run)
    except (ConfigError, TypeError, KeyError):
        return ["a config this version cannot read"]
    stop, made = (summary or {}).get("stopped_by"), (summary or {}).get("updates")
    have, cap = saved["train"], want["train"]["max_updates"]
    timeless = want["train"]["max_hours"] in (None, have["max_hours"])
    if stop == "early_stop" and timeless and (cap is None or made <= cap):
        have.update(max_updates=cap, max_hours=want["train"]["max_hours"])
    elif stop == "max_hours" and cap == made and want["train"]["max_hours"] is None:
        have.update(max_updates=cap, max_hours=None)
    have, want = _settings(saved), _settings(want)
    return [f"{k} {have.get(k)} → {v}" for k, v in want.items() if have.get(k) != v]


def _settings(config: dict) -> dict:
    """A config's settings by one name each: ``{"train.lr": ..., "name": ...}``."""
    flat = {}
    for sec, values in config.items():
        if isinstance(values, dict):
            flat |= {f"{sec}.{k}": v for k, v in values.items()}
        else:
            flat[sec] = values
    return flat


def same_run(saved: dict, run, summary: dict | None = None) -> bool:
    """Whether the config ``saved`` is ``run``'s (:func:`config_changes`: no setting differs)."""
    return not config_changes(saved, run, summary)


def stale_text(out: Path, profile) -> str:
    """The evaluated runs of ``out`` that ``profile`` (a name or path) would train differently now
    (:func:`config_changes`; a recipe chosen again since they were trained), by name with the
    settings that changed and their recorded hours of one core: what training them again costs.
    Empty where every run is the profile's."""
    manifest = read_json(out / "manifest.json") if (out / "manifest.json").is_file() else {}
    runs = load_profile(profile).runs
    changed: dict[str, list[str]] = {}
    hours = 0.0
    for r in manifest.get("runs", []):
        files = [run_dir(out, r) / f for f in ("config.json", "train_summary.json")]
        if r not in runs or not all(f.is_file() for f in files):
            continue
        saved, summary = map(read_json, files)
        if what := config_changes(saved, runs[r], summary):
            changed.setdefault(", ".join(what), []).append(r)
            hours += summary.get("hours", 0.0)
    if not changed:
        return ""
    runs_text = "; ".join(f"{', '.join(rs)} ({what})" for what, rs in changed.items())
    n = sum(map(len, changed.values()))
    return (
        f"{n} of the {len(manifest['runs'])} runs were trained with settings that "
        f"{Path(profile_path(profile)).name} no longer names, its recipes chosen again since: "
        f"{runs_text}; training them again takes about {hours:.1f} hours of one core at their "
        "recorded times"
    )


def _cpu_label(model: str | None, flags: list[str] | None) -> str:
    """A CPU's model name without trademarks or clock, and its widest vector instructions where
    they are known: "AMD EPYC (AVX-512 with bf16)"."""
    name = re.sub(r"\((R|TM)\)|@.*$|\bProcessor\b", "", model or "unnamed CPU")
    name = " ".join(name.split())
    widths = (("avx512_bf16", "AVX-512 with bf16"), ("avx512f", "AVX-512"), ("avx2", "AVX2"))
    width = next((w for flag, w in widths if flag in (flags or ())), None)
    return f"{name} ({width})" if width else name


def machines_text(out: Path) -> str:
    """Which CPUs trained the evaluated runs of ``out``, from each run's ``made.json``: its model
    name and vector flags (a run that recorded no flags, on the CPU the manifest names, takes the
    manifest's). The most common CPU by its count, every other by its runs' names; empty where no
    run recorded one."""
    manifest = read_json(out / "manifest.json") if (out / "manifest.json").is_file() else {}
    hardware = manifest.get("hardware", {})
    groups: dict[str, list[str]] = {}
    for r in manifest.get("runs", []):
        f = run_dir(out, r) / "made.json"
        if not f.is_file():
            continue
        made = read_json(f)
        flags = made.get("cpu_flags_simd")
        if flags is None and made.get("cpu_model") == hardware.get("cpu_model"):
            flags = hardware.get("cpu_flags_simd")
        groups.setdefault(_cpu_label(made.get("cpu_model"), flags), []).append(r)
    if not groups:
        return ""
    (most, runs), *others = sorted(groups.items(), key=lambda g: -len(g[1]))
    if not others:
        return f"every run on an {most}"
    named = "; ".join(f"on an {cpu}: {', '.join(rs)}" for cpu, rs in others)
    return f"{len(runs)} of the {sum(map(len, groups.values()))} runs on an {most}; {named}"


def nll_curve(d: Path) -> list[dict]:
    """``[{"update", "dev_nll"}]``: a run's logged evaluations."""
    return [
        {"update": r["update"], "dev_nll": r["dev_nll"]}
        for r in train_log(d)
        if r.get("kind") == "eval"
    ]
