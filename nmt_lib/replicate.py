"""Run the book's notebooks: ``python -m nmt_lib.replicate --profile NAME [--train]``.

Each ``notebooks/NN_name.py`` (jupytext percent format, the only committed form) is converted to a
notebook and executed by papermill with the parameters ``profile``, ``train``, ``results_dir`` and
``data_dir``; the executed notebook goes to ``book/_nb/NN_name.ipynb``, which the book shows.

* **report** (default): the derivation notebooks run their numeric checks; the experiment notebooks
  read the committed ``results/<profile>/`` and regenerate tables and figures from it. They stop with a
  clear error if it is missing; they never train because a file is missing.
* **replicate** (``--train``): the experiment notebooks train, decode and evaluate every model of the
  profile and rewrite ``results/<profile>/`` (or ``--results-dir``).

The kernel is this interpreter (``sys.executable``), registered under the name ``python3`` in a
temporary kernel directory that comes first on ``JUPYTER_PATH``.

The module also holds what the notebooks share, so that they stay short: where results live and the
check that they exist (:func:`results_path`, :func:`require_results`), a profile with its data (the
smoke profile's toy corpus: :func:`load`), training and evaluating a whole profile
(:func:`replicate_profile`, :func:`write_manifest`), and the tables and figure data built from
``results/<profile>/`` next to ``results/paper/`` (:func:`table1`, :func:`table2`,
:func:`fig2_curves`, :func:`fig3_panels`, :func:`long_sentences`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
OUT_DIR = ROOT / "book" / "_nb"
KERNEL = "python3"


class ResultsMissing(FileNotFoundError):
    """Report mode found no committed results; the message says how to make them."""


def results_path(profile: str, results_dir: str | os.PathLike | None = None) -> Path:
    """``results_dir`` if given, else ``results/<profile>/`` of this repository."""
    return Path(results_dir) if results_dir else ROOT / "results" / profile


def require_results(path: Path, *names: str) -> Path:
    """Check that ``path`` holds ``names`` (report mode); never trains to make them."""
    missing = [n for n in names if not (path / n).exists()]
    if missing:
        profile = path.name
        raise ResultsMissing(
            f"{path} has no {', '.join(missing)}. Report mode only reads committed results; to "
            f"create them run `python -m nmt_lib.replicate --profile {profile} --train` "
            "(or pass results_dir= the directory of an earlier run)."
        )
    return path


def toy_data_dir() -> Path:
    """The smoke profile's declared data: the toy corpus of :mod:`nmt_lib.fixtures`, written
    (deterministically, same bytes every time) into the cache directory."""
    from nmt_lib.config import DataConfig
    from nmt_lib.fixtures import write_toy_wmt

    root = DataConfig().resolved_cache_dir() / "toy-wmt14"  # relative, as every default path
    if not (root / "train" / "toy.en").is_file():
        write_toy_wmt(root)
    return root


def load(profile: str, data_dir: str | os.PathLike | None = None, runs=None, **overrides):
    """The profile's runs (``runs``: only these), with ``data_dir`` applied to each (smoke: the toy
    corpus by default) and ``overrides`` as :func:`nmt_lib.config.load_profile` takes them."""
    from dataclasses import replace

    from nmt_lib.config import ConfigError, load_profile

    if data_dir is None and profile == "smoke":
        data_dir = toy_data_dir()
    if data_dir is not None:
        overrides["data"] = {**overrides.get("data", {}), "data_dir": str(data_dir)}
    prof = load_profile(profile, **overrides)
    if runs is None:
        return prof
    unknown = [n for n in runs if n not in prof.runs]
    if unknown:
        raise ConfigError(f"{prof.path}: no run(s) {unknown}; known: {list(prof.runs)}")
    return replace(prof, runs={n: prof.runs[n] for n in runs})


def data_summaries(prof) -> dict:
    """Prepare (cached) the data of every distinct data config of a profile and summarise it:
    ``{"max_len=L": {"runs": [...], **nmt_lib.data.data_summary}}`` without machine-local paths."""
    from nmt_lib.data import data_summary, prepare

    out = {}
    for name, run in prof.runs.items():
        key = f"max_len={run.data.max_len}"
        if key not in out:
            summary = data_summary(prepare(run.data))
            for k in ("data_dir", "prepared"):
                summary.pop(k, None)
            summary["train"].pop("seconds", None)
            out[key] = {"runs": [], **summary}
        out[key]["runs"].append(name)
    return out


# ------------------------------------------------------------------- replicate mode: train, evaluate
#: The paper's models in its order; Figure 2 draws the first four.
MODELS = ("RNNencdec-30", "RNNsearch-30", "RNNencdec-50", "RNNsearch-50", "RNNsearch-50*")
#: Appendix C (Table 3): the paper's three long test sentences, by their first words.
LONG_PREFIXES = (
    "An admitting privilege is the right of a doctor",
    "This kind of experience is part of Disney's efforts",
    "In a press conference on Thursday, Mr Blair stated",
)


def figure_sentences(test, k: int = 3, seed: int = 1234) -> list[str]:
    """Figure 3's rule for panels (b)-(d): ``k`` random test sentences with no unknown word and
    10-20 words (for a test set of shorter sentences, such as the toy corpus: its longest ones)."""
    import random

    ok = [i for i in range(len(test)) if test.no_unk[i]]
    pick = [i for i in ok if 10 <= len(test.src_tok[i]) <= 20]
    if len(pick) < k:
        pick = sorted(ok, key=lambda i: -len(test.src_tok[i]))[: 4 * k]
    return [" ".join(test.src_tok[i]) for i in sorted(random.Random(seed).sample(pick, k))]


#: Test sentences whose attention the alignment explorer of the alignments chapter shows.
EXPLORER_SENTENCES = 36


def explorer_sentences(test, k: int = EXPLORER_SENTENCES, seed: int = 4321) -> list[str]:
    """``k`` random test sentences of 5-50 words with no unknown word (all of them if fewer), in
    test-set order: the alignment explorer's sentences, besides Figure 3's."""
    import random

    ok = [i for i in range(len(test)) if test.no_unk[i] and 5 <= len(test.src_tok[i]) <= 50]
    pick = sorted(random.Random(seed).sample(ok, min(k, len(ok))))
    return [" ".join(test.src_tok[i]) for i in pick]


def run_dir(out: Path, name: str) -> Path:
    from nmt_lib.config import run_dir_name

    return out / "runs" / run_dir_name(name)


def _budget(t, start: float) -> str:
    """A run's training budget (``t``: its TrainConfig) in words, with the time it ends by."""
    parts = []
    if t.max_hours:
        end = time.strftime("%H:%M", time.localtime(start + t.max_hours * 3600))
        parts.append(f"{t.max_hours * 60:.0f} minutes, until about {end}")
    if t.max_updates:
        parts.append(f"{t.max_updates:,} updates")
    return " or ".join(parts) or "no limit"


def train_and_evaluate(profile, results_dir, data_dir, name: str) -> tuple[str, dict]:
    """Train (resumably), decode and evaluate one model of ``profile`` (a name, or a loaded
    profile) into ``<results>/runs/<model>/``; returns ``(name, wall times)``."""
    from nmt_lib.data import prepare
    from nmt_lib.evaluate import FIG3_SOURCES, evaluate_run
    from nmt_lib.train import train_run

    prof = load(profile, data_dir) if isinstance(profile, str) else profile
    run, out = prof.runs[name], results_path(prof.name, results_dir)
    prep = prepare(run.data)
    # attention.json: Figure 3's (a)-(d), three sentences by its rule, the explorer's sentences
    sources = (*FIG3_SOURCES, *figure_sentences(prep.test), *explorer_sentences(prep.test))
    t0 = time.time()
    print(f"[replicate] {name}: training (at most {_budget(run.train, t0)}), then decoding the "
          "test set", flush=True)  # fmt: skip
    summary = train_run(run, run_dir(out, name), prep=prep, progress=False)
    t1 = time.time()
    result = evaluate_run(run, run_dir(out, name), prep=prep, figure_sources=sources)
    print(
        f"[replicate] {name}: {summary['updates']} updates ({summary['stopped_by']}) in "
        f"{t1 - t0:.0f} s, test BLEU {result['all']['tok']['score']:.2f}",
        flush=True,
    )
    return name, {"train_s": round(t1 - t0, 1), "evaluate_s": round(time.time() - t1, 1)}


def replicate_profile(
    profile, results_dir=None, data_dir=None, jobs: int | None = None, git: dict | None = None
):
    """Train, decode and evaluate every model of ``profile`` (a name, or a loaded profile:
    :func:`load`) with :func:`train_and_evaluate` and write ``manifest.json``; returns the wall
    times. ``git``: the manifest's commit, for a copy of the tree without its history (default:
    this repository's).

    ``jobs`` models run at a time, each in its own process (default: ``NMT_JOBS``, else 1), the
    largest time budget first. Each model keeps its own ``train.threads``, so on a 2-core machine
    ``jobs=2`` with ``threads=1`` trains two models side by side, each on one core."""
    from concurrent.futures import ProcessPoolExecutor
    from functools import partial
    from multiprocessing import get_context

    from nmt_lib.data import prepare

    prof = load(profile, data_dir) if isinstance(profile, str) else profile
    out = results_path(prof.name, results_dir)
    git = git or _git()  # the code that trains, not what the tree holds when the last model is done
    jobs = jobs or int(os.environ.get("NMT_JOBS") or 1)
    one = partial(train_and_evaluate, prof, results_dir, data_dir)
    if jobs <= 1:
        done = dict(map(one, prof.runs))
    else:
        for run in {r.data: r for r in prof.runs.values()}.values():
            prepare(run.data)  # once, here, not in two workers at a time
        order = sorted(prof.runs, key=lambda n: -(prof.runs[n].train.max_hours or 0))
        with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
            done = dict(pool.map(one, order))
    walls = {name: done[name] for name in prof.runs}
    write_manifest(out, prof, walls, git)
    return walls


def _git() -> dict:
    import subprocess

    def git(*args):
        r = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else None

    return {
        "commit": git("rev-parse", "HEAD"),
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
    }


def _data_files(prof) -> dict:
    """sha256 of every input file of the profile, by path relative to its data directory."""
    from nmt_lib.data import input_sha256

    files = {}
    for run in prof.runs.values():
        files.update(input_sha256(run.data))
    return dict(sorted(files.items()))


def _version(package: str) -> str | None:
    """The installed version of ``package``; None where it runs from a tree (not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


def provenance(prof, git: dict | None = None) -> dict:
    """What every results directory records: the profile, the resolved configs, the commit (``git``:
    the commit the runs started from; default: now), the sha256 of every data file, the hardware
    and the library versions."""
    import datetime
    import platform

    import torch

    from nmt_lib.config import to_dict
    from nmt_lib.kernels import cpu_flags, cpu_info

    pkgs = ("torch", "numpy", "sacrebleu", "sacremoses", "nmt_lib")
    return {
        "profile": prof.name,
        "description": prof.description,
        "created_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "git": git or _git(),
        "runs": list(prof.runs),
        "configs": {name: to_dict(run) for name, run in prof.runs.items()},
        "data_sha256": _data_files(prof),
        "hardware": {
            "platform": platform.platform(),
            "cpu": platform.processor() or platform.machine(),
            "cpu_model": cpu_info("model name") or None,
            "cpu_flags_simd": sorted(f for f in cpu_flags() if f.startswith(("avx", "amx", "fma"))),
            "cpu_count": os.cpu_count(),
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        },
        "versions": {"python": platform.python_version(), **{p: _version(p) for p in pkgs}},
    }


def write_manifest(out: Path, prof, walls: dict, git: dict | None = None) -> dict:
    """``manifest.json``: provenance of everything under ``out`` (DESIGN.md, results): the
    :func:`provenance`, the device and precision of every run, the sacreBLEU signatures and the
    wall times."""
    from nmt_lib.io import write_json

    signatures, devices, precisions = {}, {}, {}
    for name in prof.runs:
        bleu = json.loads((run_dir(out, name) / "bleu.json").read_text(encoding="utf-8"))
        signatures = {k: bleu["all"][k]["signature"] for k in ("tok", "detok")}
        summary = json.loads((run_dir(out, name) / "train_summary.json").read_text("utf-8"))
        devices[name], precisions[name] = summary["device"], summary.get("precision")
    manifest = provenance(prof, git)
    manifest["hardware"]["device_per_run"] = devices
    manifest["hardware"]["precision_per_run"] = precisions  # train.precision as resolved ("auto")
    manifest["sacrebleu_signatures"] = signatures
    manifest["wall_seconds"] = walls
    write_json(out / "manifest.json", manifest)
    return manifest


# -------------------------------------------------------------- both modes: tables and figures
def read_json(path: Path):
    return json.loads(Path(path).read_text(encoding="utf-8"))


def paper_table(name: str) -> dict[str, dict]:
    """``results/paper/<name>.csv`` (typed from the paper) as ``{first column: row}``."""
    import csv

    with open(ROOT / "results" / "paper" / f"{name}.csv", encoding="utf-8") as f:
        rows = csv.DictReader(f)
        return {row[rows.fieldnames[0]]: row for row in rows}


def table1(out: Path) -> list[dict]:
    """Table 1: test BLEU, All and No-UNK, ours (tokenized multi-bleu style, and sacreBLEU on
    detokenized text) beside the paper's."""
    paper, rows = paper_table("table1"), []
    for name in read_json(out / "manifest.json")["runs"]:
        b = read_json(run_dir(out, name) / "bleu.json")
        rows.append(
            {
                "model": name,
                "All": round(b["all"]["tok"]["score"], 2),
                "No UNK": round(b["no_unk"]["tok"]["score"], 2) if b["no_unk"]["n"] else None,
                "All (sacreBLEU)": round(b["all"]["detok"]["score"], 2),
                "No-UNK sentences": b["no_unk"]["n"],
                "paper All": float(paper[name]["bleu_all"]),
                "paper No UNK": float(paper[name]["bleu_no_unk"]),
            }
        )
    moses = paper["Moses"]
    rows.append({"model": "Moses", "paper All": float(moses["bleu_all"]),
                 "paper No UNK": float(moses["bleu_no_unk"])})  # fmt: skip
    return rows


def table2(out: Path) -> list[dict]:
    """Table 2: learning statistics, ours beside the paper's (NLL: nats per sentence)."""
    paper, rows = paper_table("table2"), []
    for name in read_json(out / "manifest.json")["runs"]:
        s = read_json(run_dir(out, name) / "train_summary.json")
        nll = read_json(run_dir(out, name) / "nll.json")
        p = paper[name]
        rows.append(
            {
                "model": name,
                "updates": s["updates"],
                "epochs": round(s["epochs"], 2),
                "hours": round(s["hours"], 3),
                "device": s["device"],
                "train NLL": round(nll["train"]["mean"], 2),
                "dev NLL": round(nll["dev"]["mean"], 2),
                "paper updates": int(float(p["updates_1e5"]) * 1e5),
                "paper epochs": float(p["epochs"]),
                "paper hours": float(p["hours"]),
                "paper GPU": p["gpu"],
                "paper train NLL": float(p["train_nll"]),
                "paper dev NLL": float(p["dev_nll"]),
            }
        )
    return rows


def markdown_table(rows: list[dict]) -> str:
    """A Markdown pipe table of ``rows`` (missing values blank)."""
    cols = list(dict.fromkeys(k for r in rows for k in r))
    cell = lambda v: "" if v is None else (f"{v:,}" if isinstance(v, int) else str(v))  # noqa: E731
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"


#: The lines around the README's results summary (:func:`readme_results`).
README_MARKS = ("<!-- results: python -m nmt_lib.replicate --readme -->", "<!-- /results -->")


def readme_results(profile: str = "lite") -> str:
    """The README's first-screen summary of the committed results: ``profile``'s Table 1 beside the
    paper's, its claims' verdicts, and the `gpu` run where there is one. Written into README.md by
    ``python -m nmt_lib.replicate --readme``; a test checks that the README holds exactly this."""
    import csv

    out = results_path(profile)
    manifest = read_json(out / "manifest.json")
    with open(out / "table1.csv", encoding="utf-8") as f:
        t1 = [r for r in csv.DictReader(f) if r["All"]]
    with open(out / "claims.csv", encoding="utf-8") as f:
        verdicts = [r["verdict"] for r in csv.DictReader(f)]
    hours = sum(  # training (a resumed run's earlier sessions included) and evaluation
        read_json(run_dir(out, name) / "train_summary.json")["hours"] + w["evaluate_s"] / 3600
        for name, w in manifest["wall_seconds"].items()
    )
    rows = [{"model": r["model"], f"BLEU, `{profile}`": r["All"], "BLEU, the paper": r["paper All"]}
            for r in t1]  # fmt: skip
    text = [
        f"What the committed `{profile}` results show (newstest2014, tokenized BLEU as the paper's "
        f"Table 1). The five models, smaller than the paper's and trained with the recipe of the "
        f"book's budget study, took {hours:.1f} CPU-core hours to train and evaluate "
        f"({manifest['hardware']['cpu_model'] or manifest['hardware']['cpu']}):",
        "",
        markdown_table(rows).rstrip("\n"),
        "",
        f"Of the paper's {len(verdicts)} claims that the book tests, "
        f"{verdicts.count('reproduced')} are reproduced by these models"
        + (
            ""
            if verdicts.count("reproduced") == len(verdicts)
            else f", {len(verdicts) - verdicts.count('reproduced')} not reproduced or unclear"
        )
        + ' (the chapter "Experiments" gives each verdict and its interval).',
    ]
    gpu = results_path("gpu")
    if (gpu / "manifest.json").is_file():
        g = read_json(gpu / "manifest.json")
        (name,) = g["runs"]
        b = read_json(run_dir(gpu, name) / "bleu.json")
        summ = read_json(run_dir(gpu, name) / "train_summary.json")
        text += [
            "",
            f"At the paper's sizes, {name} trained for {60 * summ['hours']:.0f} minutes of one "
            f"{summ['device']} scores {b['all']['tok']['score']:.2f} (`results/gpu/`).",
        ]
    return "\n".join(text) + "\n"


def write_table(out: Path, name: str, rows: list[dict], note: str) -> None:
    """``<name>.csv`` and ``<name>.md`` (with ``note``, e.g. the profile and the BLEU signature)."""
    import csv
    import io

    from nmt_lib.io import atomic_write

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
    w.writeheader()
    w.writerows(rows)
    with atomic_write(out / f"{name}.csv") as f:
        f.write(buf.getvalue())
    with atomic_write(out / f"{name}.md") as f:
        f.write(markdown_table(rows) + "\n" + note.strip() + "\n")


def show_table(out: Path, name: str, rows: list[dict], note: str, write: bool) -> str:
    """``rows`` as Markdown with ``note`` under it, for a notebook to display; with ``write``
    (replicate mode) also saved as ``<name>.csv`` and ``<name>.md`` in ``out`` (:func:`write_table`)."""
    if write:
        write_table(out, name, rows, note)
    return markdown_table(rows) + "\n" + note


def fig2_curves(out: Path, models=MODELS[:4]) -> tuple[dict, list[int]]:
    """Figure 2's curves from the per-sentence BLEU statistics of each run: ``{model: (bucket
    centres, BLEU)}`` and the bucket edges. Buckets by source length, width 10 as the paper's
    axis suggests; width 2 when the test set has no sentence of 40 words or more (toy data)."""
    import numpy as np

    from nmt_lib import bleu

    curves, edges = {}, []
    for name in models:
        d = read_json(run_dir(out, name) / "bleu_by_length.json")
        width = 10 if max(d["src_len"]) >= 40 else 2
        edges = list(range(0, max(d["src_len"]) + width + 1, width))
        buckets = bleu.bleu_by_length(np.array(d["stats_tok"]), d["src_len"], True, edges)
        pts = [((b["lo"] + b["hi"] + 1) / 2, b["bleu"]) for b in buckets if b["n"] and b["hi"]]
        curves[name] = ([x for x, _ in pts], [y for _, y in pts])
    return curves, edges


def fig3_panels(out: Path, model: str = "RNNsearch-50") -> tuple[list[dict], bool]:
    """Figure 3's panels from ``attention.json`` of ``model``: the paper's sentences (b)-(d) when
    the test set has them (then the flag is True), preceded by (a), the paper's "arbitrary
    sentence", where the run translated it; else the three sentences chosen by the paper's rule."""
    records = read_json(run_dir(out, model) / "attention.json")  # FIG3_SOURCES (a)-(d), then ours
    use_paper = all(r["found"] and r.get("alpha") for r in records[1:4])
    if use_paper:
        chosen = [(f"({c})", r) for c, r in zip("abcd", records[:4], strict=True) if r.get("alpha")]
    else:
        chosen = [(f"test sentence {r['index'] + 1}", r) for r in records[4:7] if r.get("alpha")]
    return [{**attention_panel(r), "title": title} for title, r in chosen], use_paper


def attention_panel(record: dict) -> dict:
    """One ``attention.json`` record as words and weights: ``src``, ``trg`` (EOS shown as
    ``<end>``, as the paper labels it; Moses' escapes undone) and ``alpha``."""
    import html

    word = lambda t: "<end>" if t == "</s>" else html.unescape(t)  # noqa: E731
    return {
        "src": [word(t) for t in record["src_tokens"]],
        "trg": [word(t) for t in record["hyp_tokens"]],
        "alpha": record["alpha"],
    }


def long_sentences(out: Path, test, models=("RNNencdec-50", "RNNsearch-50")) -> tuple[str, bool]:
    """Appendix C: the paper's long test sentences (or, if the test set lacks them, its three
    longest), with the reference and each model's translation, as Markdown; and whether they
    are the paper's."""
    idx = [next((i for i, s in enumerate(test.src_raw) if s.startswith(p)), None)
           for p in LONG_PREFIXES]  # fmt: skip
    paper = all(i is not None for i in idx)
    if not paper:
        idx = sorted(range(len(test)), key=lambda i: -len(test.src_tok[i]))[:3]
    hyp = {
        m: (run_dir(out, m) / "hyp.test.detok.txt").read_text(encoding="utf-8").splitlines()
        for m in models
    }
    import html

    esc = lambda text: html.escape(text, quote=False)  # noqa: E731  <unk> is text, not a tag
    lines = []
    for k, i in enumerate(idx, 1):
        lines += [f"{k}. **Source** ({len(test.src_tok[i])} words): {esc(test.src_raw[i])}", ""]
        lines += [f"   - **Reference**: {esc(test.ref_raw[i])}"]
        lines += [f"   - **{m}**: {esc(hyp[m][i])}" for m in models]
        lines += [""]
    return "\n".join(lines), paper


# ------------------------------------------------------------- the paper's claims, judged
#: Figure 2's claim in numbers: BLEU on sentences of fewer than SHORT source words against BLEU on
#: sentences of LONG words or more; "holds up" means the long/short ratio's interval reaches HOLDS.
SHORT, LONG, HOLDS = 30, 50, 0.9
#: Figure 3's claim in numbers: an alignment is "peaked" when a generated word puts PEAKED of its
#: weight on one source word on average, "mostly monotonic" when MONOTONIC of the steps from one
#: generated word to the next do not move the heaviest source word left, and a reordering is
#: "local" when it moves it left by at most LOCAL words.
PEAKED, MONOTONIC, LOCAL = 0.5, 0.7, 3


#: Table 1's claims in numbers: a model "beats" another when their BLEU difference is at least
#: MARGIN points (the paper's differences are 4-9 points; below one point a difference is too small
#: to carry the claim, however certain).
MARGIN = 1.0


def _verdict(intervals: list[list[float]]) -> tuple[str, str]:
    """BLEU differences: every 95% interval above +MARGIN: reproduced; any below +MARGIN: not
    reproduced; else (an interval contains +MARGIN) unclear."""
    if all(lo > MARGIN for lo, _ in intervals):
        return "reproduced", f"every difference's 95% interval is above +{MARGIN:g} BLEU"
    if any(hi < MARGIN for _, hi in intervals):
        below = any(hi < 0 for _, hi in intervals)
        why = "below 0: the opposite holds" if below else f"below +{MARGIN:g} BLEU: too small"
        return "not reproduced", f"a difference's 95% interval is {why}"
    return "unclear", f"a difference's 95% interval contains +{MARGIN:g} BLEU"


def _fmt(point: float, iv: list[float]) -> str:
    return f"{point:+.2f} [{iv[0]:+.2f}, {iv[1]:+.2f}]"


def alignment_stats(alpha) -> dict:
    """Sharpness and monotonicity of one attention matrix ``alpha [generated words, source words]``:
    mean largest weight, the uniform weight, the number of steps from one generated word to the
    next, how many of them do not move the heaviest source word left, and the sizes of the moves
    left."""
    import numpy as np

    a = np.asarray(alpha, dtype=np.float64)
    steps = np.diff(a.argmax(1))
    return {
        "words": len(a),
        "peak": float(a.max(1).mean()),
        "uniform": 1 / a.shape[1],
        "steps": len(steps),
        "monotonic_steps": int((steps >= 0).sum()),
        "moves_left": [int(-d) for d in steps if d < 0],
    }


def claims(out: Path, n_samples: int = 1000) -> list[dict]:
    """The paper's four claims about its results, with our numbers, 95% bootstrap intervals
    (:func:`nmt_lib.bleu.bootstrap_scores`, paired: one seed for every model) and a verdict:
    *reproduced*, *not reproduced* or *unclear*, with the reason. Reads only ``out``."""
    import numpy as np

    from nmt_lib import bleu

    lengths, stats_of = {}, {}

    def boot(name, subset=None):
        d = read_json(run_dir(out, name) / "bleu_by_length.json")
        lengths[name] = np.array(d["src_len"])
        stats = stats_of[name] = np.array(d["stats_tok"])
        sel = None if subset is None else subset(lengths[name])
        point = bleu.bleu_from_stats(stats if sel is None else stats[sel], True)
        return point, bleu.bootstrap_scores(stats, True, n_samples, subset=sel)

    paper = {k: float(v["bleu_all"]) for k, v in paper_table("table1").items()}
    rows = []

    # 1-2: Table 1, BLEU All, paired differences
    allb = {m: boot(m) for m in MODELS[:4]}

    def diff(a, b):
        return bleu.paired_difference(stats_of[a], stats_of[b], True, n_samples)

    pairs = [("RNNsearch-30", "RNNencdec-30"), ("RNNsearch-50", "RNNencdec-50")]
    ds = [diff(a, b) for a, b in pairs]
    rows.append({
        "claim": "RNNsearch beats RNNencdec at both training lengths (Table 1)",
        "paper": "; ".join(f"{a} {paper[a]:.2f} vs {b} {paper[b]:.2f}" for a, b in pairs),
        "ours": "; ".join(f"{a} {allb[a][0]:.2f} vs {b} {allb[b][0]:.2f}, difference "
                          f"{_fmt(*d)}" for (a, b), d in zip(pairs, ds, strict=True)),
        **dict(zip(("verdict", "reason"), _verdict([iv for _, iv in ds]), strict=True)),
    })  # fmt: skip
    d = diff("RNNsearch-30", "RNNencdec-50")
    rows.append({
        "claim": "RNNsearch-30 beats RNNencdec-50, which saw longer sentences (Table 1)",
        "paper": f"RNNsearch-30 {paper['RNNsearch-30']:.2f} vs RNNencdec-50 "
                 f"{paper['RNNencdec-50']:.2f}",
        "ours": f"RNNsearch-30 {allb['RNNsearch-30'][0]:.2f} vs RNNencdec-50 "
                f"{allb['RNNencdec-50'][0]:.2f}, difference {_fmt(*d)}",
        **dict(zip(("verdict", "reason"), _verdict([d[1]]), strict=True)),
    })  # fmt: skip

    # 3: Figure 2, long/short BLEU ratios
    ratio = {}
    for m in ("RNNencdec-30", "RNNencdec-50", "RNNsearch-50"):
        (ps, ss), (pl, sl) = boot(m, lambda n: n < SHORT), boot(m, lambda n: n >= LONG)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio[m] = (pl / ps if ps else float("nan"), sl / ss)
    iv = {m: bleu.interval(r[1]) for m, r in ratio.items()}
    gap = bleu.interval(ratio["RNNsearch-50"][1] - ratio["RNNencdec-50"][1])
    n_long = int((lengths["RNNsearch-50"] >= LONG).sum())
    encdec, s50 = MODELS[0:3:2], iv["RNNsearch-50"]
    if not n_long or any(not np.isfinite(r[1]).all() for r in ratio.values()):
        verdict = "unclear"
        reason = f"no BLEU on short or on ≥{LONG}-word sentences to compare"
    elif all(iv[m][1] < 1 for m in encdec) and gap[0] > 0 and s50[1] >= HOLDS:
        verdict = "reproduced"
        reason = (
            f"both RNNencdec ratios' intervals are below 1; RNNsearch-50's is above "
            f"RNNencdec-50's (difference [{gap[0]:.2f}, {gap[1]:.2f}]) and reaches {HOLDS}"
        )
    elif s50[1] < HOLDS:
        verdict = "not reproduced"
        reason = f"RNNsearch-50 also falls: its ratio's interval stays below {HOLDS}"
    elif any(iv[m][0] > 1 for m in encdec) or gap[1] < 0:
        verdict = "not reproduced"
        reason = "an RNNencdec ratio is above 1, or RNNsearch-50's is below RNNencdec-50's"
    else:
        verdict = "unclear"
        reason = (
            f"an interval contains 1 (RNNencdec) or 0 (RNNsearch-50 minus RNNencdec-50: "
            f"[{gap[0]:.2f}, {gap[1]:.2f}])"
        )
    rows.append({
        "claim": f"RNNencdec's BLEU falls as sentences get longer; RNNsearch-50 holds up on "
                 f"sentences of {LONG} words or more (Figure 2)",
        "paper": "Figure 2: both RNNencdec curves fall with length; RNNsearch-50's does not "
                 "fall, even past 50 words",
        "ours": "; ".join(f"{m} BLEU(≥{LONG}) / BLEU(<{SHORT}) = {ratio[m][0]:.2f} "
                          f"[{iv[m][0]:.2f}, {iv[m][1]:.2f}]" for m in ratio)
                + f" ({n_long} test sentences of ≥{LONG} words)" if n_long
                else f"the test set has no sentence of ≥{LONG} words",
        "verdict": verdict,
        "reason": reason,
    })  # fmt: skip

    # 4: Figure 3, alignments of RNNsearch-50. The EOS row of a finished translation aligns its
    # end, not a word: left out (an empty translation has no row left, and no alignment)
    recs = read_json(run_dir(out, "RNNsearch-50") / "attention.json")
    alphas = [r["alpha"][:-1] if r["hyp_tokens"][-1:] == ["</s>"] else r["alpha"]
              for r in recs if r.get("alpha")]  # fmt: skip
    st = [alignment_stats(a) for a in alphas if len(a)]
    peak = float(np.mean([s["peak"] for s in st])) if st else 0.0
    uniform = float(np.mean([s["uniform"] for s in st])) if st else 0.0
    mono = sum(s["monotonic_steps"] for s in st) / max(sum(s["steps"] for s in st), 1)
    back = [b for s in st for b in s["moves_left"]]
    local = sum(b <= LOCAL for b in back)
    if not st:
        verdict, reason = "unclear", "no translated sentence with attention weights"
    elif peak < PEAKED:
        verdict = "unclear"
        reason = (
            f"the attention is diffuse (largest weight {peak:.2f} < {PEAKED}): its "
            "heaviest source word says little"
        )
    elif mono >= MONOTONIC and local >= len(back) - local:
        verdict = "reproduced"
        reason = f"peaked, {mono:.0%} ≥ {MONOTONIC:.0%} monotonic steps, most moves left local"
    else:
        verdict = "not reproduced"
        reason = f"{mono:.0%} monotonic steps (< {MONOTONIC:.0%}) or mostly long moves left"
    rows.append({
        "claim": "The alignments are mostly monotonic, with local reorderings (Figure 3)",
        "paper": "Figure 3: weights concentrated near the diagonal; e.g. European Economic "
                 "Area → zone économique européenne reversed",
        "ours": f"{len(st)} sentences: mean largest weight {peak:.2f} (uniform: {uniform:.2f}); "
                f"{mono:.0%} of the steps monotonic; {len(back)} moves left, {local} of at "
                f"most {LOCAL} words",
        "verdict": verdict,
        "reason": reason,
    })  # fmt: skip
    return rows


def gap_to_paper(out: Path) -> list[dict]:
    """Why our BLEU is far from the paper's, in numbers, per model: training pairs available and
    seen, target words seen, updates, parameters, hours and device, and model FLOPs of training
    (:func:`nmt_lib.model.forward_macs` × 6 at the mean training sentence lengths, ours for both:
    the paper does not give its lengths after the length filter)."""
    import torch

    from nmt_lib.config import load_profile
    from nmt_lib.model import RNNencdec, RNNsearch, count_parameters, forward_macs

    manifest = read_json(out / "manifest.json")
    summ = read_json(out / "data_summary.json")
    corpus = {k: float(v["value"]) for k, v in paper_table("corpus").items()}
    t2, paper_cfg = paper_table("table2"), load_profile("paper").runs
    rows = []
    for name in manifest["runs"]:
        cfg = run_from_manifest(manifest, name)
        s = read_json(run_dir(out, name) / "train_summary.json")
        train = summ[f"max_len={cfg.data.max_len}"]["train"]
        src = train["src"]["words"] / train["pairs"] + 1  # + EOS
        trg = train["trg"]["words"] / train["pairs"] + 1
        p_updates = float(t2[name]["updates_1e5"]) * 1e5
        with torch.device("meta"):
            arch = {"RNNsearch": RNNsearch, "RNNencdec": RNNencdec}
            ours_n = count_parameters(arch[cfg.model.arch](cfg.model))
            pc = paper_cfg[name].model
            paper_n = count_parameters(arch[pc.arch](pc))
        seen = s["updates"] * cfg.data.batch_size * s.get("world_size", 1)
        p_seen = p_updates * corpus["batch_size"]
        flops = 6 * forward_macs(cfg.model, src, trg) * seen
        p_flops = 6 * forward_macs(pc, src, trg) * p_seen
        rows.append({
            "model": name,
            "training pairs (≤ max_len)": train["pairs"],
            "paper training pairs (all lengths)": int(corpus["training_pairs"]),
            "pairs seen": seen,
            "paper pairs seen": int(p_seen),
            "target words seen (M)": round(seen * (trg - 1) / 1e6, 1),
            "paper target words seen (M)": round(p_seen * (trg - 1) / 1e6, 1),
            "parameters (M)": round(ours_n / 1e6, 2),
            "paper parameters (M)": round(paper_n / 1e6, 2),
            "hours": round(s["hours"], 2),
            "device": s["device"],
            "paper hours": float(t2[name]["hours"]),
            "paper GPU": t2[name]["gpu"],
            "training PFLOP": round(flops / 1e15, 3),
            "paper training PFLOP": round(p_flops / 1e15, 1),
            "paper / ours compute": round(p_flops / flops) if flops else None,
        })  # fmt: skip
    return rows


def run_from_manifest(manifest: dict, name: str):
    """The resolved config of run ``name`` as recorded in ``manifest.json``."""
    from nmt_lib.config import run_from_dict

    return run_from_dict(manifest["configs"][name])


class NotebookError(RuntimeError):
    """A notebook failed; the message names the notebook, the cell and the error."""


def notebooks(only: str | None = None) -> list[Path]:
    """The notebook sources in reading order, optionally those whose name contains ``only``."""
    found = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))
    if only:
        found = [p for p in found if only in p.stem]
        if not found:
            raise NotebookError(f"--only {only!r} matches no notebook in {NOTEBOOKS}")
    return found


def _register_kernel(tmp: Path) -> None:
    """A ``python3`` kernel spec for *this* interpreter, found before any other on JUPYTER_PATH."""
    spec = tmp / "kernels" / KERNEL
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    argv.append("--IPKernelApp.log_level=CRITICAL")  # not the TCP notice at every start
    kernel = {"argv": argv, "display_name": "Python 3 (nmt_lib)", "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(kernel))
    os.environ["JUPYTER_PATH"] = os.pathsep.join(
        filter(None, [str(tmp), os.environ.get("JUPYTER_PATH")])
    )


def _to_notebook(src: Path):
    """Read a jupytext percent file as a notebook, with the kernel set to :data:`KERNEL`."""
    import jupytext

    nb = jupytext.read(src)
    nb.metadata["kernelspec"] = {"name": KERNEL, "display_name": "Python 3", "language": "python"}
    nb.metadata.pop("jupytext", None)
    n_params = sum("parameters" in c.metadata.get("tags", []) for c in nb.cells)
    if n_params != 1:
        raise NotebookError(
            f"{src.name}: needs exactly one cell tagged 'parameters', has {n_params}"
        )
    return nb


def _show_injected(path: Path) -> None:
    """The book shows the parameters a notebook actually ran with (papermill's injected cell) and
    removes the cell of defaults (tag ``remove-cell``)."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    if any("injected-parameters" in c.metadata.get("tags", []) for c in nb.cells):
        for cell in nb.cells:
            tags = cell.metadata.get("tags", [])
            if "parameters" in tags and "remove-cell" not in tags:
                cell.metadata["tags"] = [*tags, "remove-cell"]
    nbformat.write(nb, path)


def run_notebook(src: Path, out: Path, parameters: dict) -> None:
    """Execute one notebook source into ``out``; raise :class:`NotebookError` naming the cell."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    nb = _to_notebook(src)
    try:
        papermill.execute_notebook(
            nb,
            str(out),
            parameters=parameters,
            kernel_name=KERNEL,
            cwd=str(ROOT),
            progress_bar=False,
            request_save_on_cell_execute=False,
        )
    except PapermillExecutionError as e:
        first = next((line for line in e.source.splitlines() if line.strip()), "")
        raise NotebookError(
            f"notebook {src.name} failed in code cell [{e.exec_count}] (starting {first!r}):\n"
            f"  {e.ename}: {e.evalue}\n  the executed notebook with the traceback: {out}"
        ) from None
    _show_injected(out)


def run_all(
    profile: str,
    train: bool = False,
    results_dir: str | None = None,
    data_dir: str | None = None,
    only: str | None = None,
    out_dir: str | os.PathLike = OUT_DIR,
) -> dict[str, float]:
    """Execute the notebooks in order; returns the wall time in seconds of each."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    params = {"profile": profile, "train": train, "results_dir": results_dir, "data_dir": data_dir}
    sources = notebooks(only)
    times = {}
    mode = "replicate (train)" if train else "report"
    print(f"[replicate] profile {profile}, {mode} mode, {len(sources)} notebooks -> {out_dir}")
    with tempfile.TemporaryDirectory(prefix="nmt-kernel-") as tmp:
        _register_kernel(Path(tmp))
        for k, src in enumerate(sources, 1):
            print(f"[replicate] {k}/{len(sources)} {src.name} ...", flush=True)
            t0 = time.time()
            run_notebook(src, out_dir / f"{src.stem}.ipynb", params)
            times[src.stem] = time.time() - t0
            print(
                f"[replicate] {k}/{len(sources)} {src.name} ok in {times[src.stem]:.1f} s",
                flush=True,
            )
    print(f"[replicate] all {len(sources)} notebooks ok in {sum(times.values()):.0f} s")
    return times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m nmt_lib.replicate", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--profile", default="smoke", help="configs/<profile>.toml (default: smoke)")
    ap.add_argument("--train", action="store_true", help="train, decode, evaluate; rewrite results")
    ap.add_argument("--results-dir", help="default: results/<profile>")
    ap.add_argument("--data-dir", help="the WMT'14 layout (smoke: a generated toy corpus)")
    ap.add_argument("--only", help="run only the notebooks whose name contains this")
    ap.add_argument(
        "--out-dir", default=str(OUT_DIR), help="executed notebooks (default: book/_nb)"
    )
    ap.add_argument(
        "--jobs", type=int, help="with --train: models trained at a time (default: NMT_JOBS or 1)"
    )
    ap.add_argument(
        "--readme", action="store_true", help="rewrite README.md's results summary and stop"
    )
    a = ap.parse_args(argv)
    if a.readme:
        readme = ROOT / "README.md"
        text = readme.read_text(encoding="utf-8")
        start, end = README_MARKS
        head, rest = text.split(start + "\n", 1)
        tail = rest.split(end, 1)[1]
        readme.write_text(f"{head}{start}\n{readme_results()}{end}{tail}", encoding="utf-8")
        return 0
    if a.jobs:
        os.environ["NMT_JOBS"] = str(a.jobs)  # the notebook kernels inherit it
    try:
        run_all(a.profile, a.train, a.results_dir, a.data_dir, a.only, a.out_dir)
    except NotebookError as e:
        print(f"[replicate] FAILED: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
