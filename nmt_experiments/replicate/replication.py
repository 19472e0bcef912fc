"""Train, decode and evaluate every model of a profile into ``results/<profile>/``, with provenance.

What the experiment notebooks call in replicate mode (``python tools/notebooks.py --profile NAME
--train``): a profile with its data (the smoke profile's toy corpus: :func:`load`), one model
trained and evaluated (:func:`train_and_evaluate`), every model of a profile, several at a time
(:func:`replicate_profile`), with ``manifest.json``, the provenance of it all
(:mod:`nmt_experiments.core.provenance`); and ``<unk>`` replaced through a dictionary counted on the
training pairs (:func:`unk_dictionary`). Where the results live is :mod:`nmt_experiments.core.results`;
the tables and figures built from them are :mod:`nmt_experiments.core.tables`, the paper's claims judged
on them :mod:`nmt_experiments.replicate.paper_claims`.

``python -m nmt_experiments.replicate --readme`` rewrites README.md's summary of the committed results
(:func:`nmt_experiments.replicate.readme.readme_results`).
"""

from __future__ import annotations

import argparse
import os
import random
import time
from functools import partial
from pathlib import Path

from nmt_lib import loading, publish
from nmt_lib.checkpoint import default_checkpoint_dir, find_checkpoint, portable
from nmt_lib.config import ConfigError, to_dict
from nmt_lib.data import data_summary, prepare
from nmt_lib.evaluate import evaluate_run
from nmt_lib.io import locked, read_json, write_json
from nmt_lib.paper import FIG3_SOURCES
from nmt_lib.profile import load_runs as load  # the profile's runs (replicate.load)
from nmt_lib.train import train_run

from ..core.options import add_out
from ..core.provenance import git_state, record_run, write_manifest
from ..core.results import published_dir, results_path, run_dir, same_run
from ..core.workers import reported, run_all
from . import lexicon, lite_long, paper_claims
from .readme import write_readme


def data_summaries(prof) -> dict:
    """Prepare (cached) the data of every distinct data config of a profile and summarise it:
    ``{"max_len=L": {"runs": [...], **nmt_lib.data.data_summary}}`` without machine-local paths."""
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


# ------------------------------------------------------------------------ training and evaluating
def figure_sentences(test, k: int = 3, seed: int = 1234) -> list[str]:
    """Figure 3's rule for panels (b)-(d): ``k`` random test sentences with no unknown word and
    10-20 words (for a test set of shorter sentences, such as the toy corpus: its longest ones)."""
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
    ok = [i for i in range(len(test)) if test.no_unk[i] and 5 <= len(test.src_tok[i]) <= 50]
    pick = sorted(random.Random(seed).sample(ok, min(k, len(ok))))
    return [" ".join(test.src_tok[i]) for i in pick]


def _budget(t, start: float) -> str:
    """A run's training budget (``t``: its TrainConfig) in words, with the time it ends by."""
    parts = []
    if t.max_hours:
        end = time.strftime("%H:%M", time.localtime(start + t.max_hours * 3600))
        parts.append(f"{t.max_hours * 60:.0f} minutes, until about {end}")
    if t.max_updates:
        parts.append(f"{t.max_updates:,} updates")
    return " or ".join(parts) or "no limit"


def train_and_evaluate(
    profile, results_dir, data_dir, name: str, git: dict | None = None
) -> tuple[str, dict]:
    """Train (resumably), decode and evaluate one model of ``profile`` (a name, or a loaded
    profile) into ``<results>/runs/<model>/``; returns ``(name, wall times)``: the training clock
    of ``train_summary.json`` (the whole training, across resumptions) and the evaluation's. A run
    already :func:`evaluated` is not evaluated again: its evaluation time is the recorded one. An
    evaluated run records ``git`` (default: this repository's state) in its ``made.json``."""
    prof = load(profile, data_dir) if isinstance(profile, str) else profile
    run, out = prof.runs[name], results_path(prof.name, results_dir)
    kept = recorded(run, run_dir(out, name))
    # results made on a machine that had the checkpoint (weights still to publish need it here)
    published = published_dir(prof.name, name, results_dir)
    if kept is not None and (
        name not in prof.publish or publish.current(published, run, run_dir(out, name))
    ):
        print(
            f"[replicate] {name}: recorded already (no checkpoint here to train on), test BLEU "
            f"{kept['all']['tok']['score']:.2f}",
            flush=True,
        )
        summary = read_json(run_dir(out, name) / "train_summary.json")
        return name, {
            "train_s": round(summary["hours"] * 3600, 1),
            "evaluate_s": round(kept["seconds"], 1),
        }
    prep = prepare(run.data)  # not for a recorded run: its manifest needs no data prepared
    # attention.json: Figure 3's (a)-(d), three sentences by its rule, the explorer's sentences
    sources = (*FIG3_SOURCES, *figure_sentences(prep.test), *explorer_sentences(prep.test))
    if evaluated(run, run_dir(out, name)) is None:
        print(
            f"[replicate] {name}: training (at most {_budget(run.train, time.time())}), then "
            "decoding the test set",
            flush=True,
        )
        summary = train_run(run, run_dir(out, name), prep=prep, progress=False)
    else:  # trained and evaluated: its summary stays as its training wrote it
        summary = read_json(run_dir(out, name) / "train_summary.json")
    train_s = round(summary["hours"] * 3600, 1)  # its whole training, across resumptions
    t1 = time.time()
    done = evaluated(run, run_dir(out, name))
    if done is not None:  # a replication resumed after this run's evaluation: its recorded times
        if name in prof.publish and not publish.current(published, run, run_dir(out, name)):
            _publish(prof, name, results_dir, prep)
        print(
            f"[replicate] {name}: evaluated already, test BLEU {done['all']['tok']['score']:.2f}",
            flush=True,
        )
        return name, {"train_s": train_s, "evaluate_s": round(done["seconds"], 1)}
    result = evaluate_run(run, run_dir(out, name), prep=prep, figure_sources=sources)
    walls = {"train_s": train_s, "evaluate_s": round(time.time() - t1, 1)}
    record_run(run_dir(out, name), git or git_state(), walls)
    if name in prof.publish:  # the weights a reader translates with (nmt_lib.publish)
        _publish(prof, name, results_dir, prep)
    print(
        f"[replicate] {name}: {summary['updates']} updates ({summary['stopped_by']}) in "
        f"{train_s:.0f} s, test BLEU {result['all']['tok']['score']:.2f}",
        flush=True,
    )
    return name, walls


def _publish(prof, name: str, results_dir, prep) -> None:
    """Publish run ``name``'s weights beside its results (:func:`nmt_lib.publish.export`)."""
    run, out = prof.runs[name], run_dir(results_path(prof.name, results_dir), name)
    target = published_dir(prof.name, name, results_dir)
    publish.export(default_checkpoint_dir(run, out), target, run, out, prep.test)
    manifest = results_path(prof.name, results_dir) / "manifest.json"
    if (
        manifest.is_file()
    ):  # the sums that nmt_lib.loading.verify_published checks the new files against
        recorded = read_json(manifest)
        recorded.setdefault("published", {})[name] = loading.recorded_sums(target)
        write_json(manifest, recorded)
    print(f"[replicate] {name}: weights published -> {target}", flush=True)


def evaluated(run, d: Path) -> dict | None:
    """Run directory ``d``'s ``bleu.json`` if it is the evaluation of the run's checkpoint as it
    is now (the same file, not written since) with the run's search settings; else None."""
    f = d / "bleu.json"
    if not f.is_file():
        return None
    bleu = read_json(f)
    ckpt = find_checkpoint(default_checkpoint_dir(run, d))
    same = (
        bleu.get("checkpoint") in (portable(ckpt, run), str(ckpt))
        and bleu.get("search") == to_dict(run.search)
        and ckpt.is_file()
        and ckpt.stat().st_mtime <= f.stat().st_mtime
    )
    return bleu if same else None


def recorded(run, d: Path) -> dict | None:
    """Run directory ``d``'s ``bleu.json`` where the run's checkpoint is not at hand (a fresh clone
    of the committed results: checkpoints are never committed) and ``d`` records the run whole: its
    ``config.json`` is the run's config, its training ended by its budget (not interrupted) and its
    evaluation used the run's search settings; else None. Such a run is not trained again (one that
    the profile publishes, where its weights are published already: :func:`nmt_lib.publish.current`)."""
    if find_checkpoint(default_checkpoint_dir(run, d)).is_file():
        return None  # the checkpoint decides (:func:`evaluated`)
    files = [d / f for f in ("config.json", "train_summary.json", "bleu.json")]
    if not all(f.is_file() for f in files):
        return None
    config, summary, bleu = map(read_json, files)
    whole = (
        same_run(config, run, summary)
        and summary.get("stopped_by") not in (None, "interrupted")
        and bleu.get("search") == to_dict(run.search)
    )
    return bleu if whole else None


def replicate_profile(
    profile,
    results_dir=None,
    data_dir=None,
    jobs: int | None = None,
    git: dict | None = None,
    runs: list[str] | None = None,
):
    """Train, decode and evaluate every model of ``profile`` (a name, or a loaded profile:
    :func:`load`) with :func:`train_and_evaluate` and write ``manifest.json``; returns the wall
    times. ``git``: the manifest's commit, for a copy of the tree without its history (default:
    this repository's).

    ``jobs`` models run at a time, each in its own process (default: ``NMT_JOBS``, else 1), the
    largest time budget first. Each model keeps its own ``train.threads``, so on a 2-core machine
    ``jobs=2`` with ``threads=1`` trains two models side by side, each on one core.

    ``runs``: only these, in this order (a study whose runs take hours, trained a few at a time);
    the manifest is written once every run of the profile is evaluated. One replication of a
    results directory at a time: a second is refused (:class:`~nmt_lib.io.Busy`). A signal or a
    failed run stops the replication as :func:`nmt_experiments.core.workers.run_all` says."""
    prof = load(profile, data_dir) if isinstance(profile, str) else profile
    unknown = sorted(set(runs or ()) - set(prof.runs))
    if unknown:
        raise ConfigError(f"--runs: {prof.name} has no run {', '.join(unknown)}")
    out = results_path(prof.name, results_dir)
    git = git or git_state()  # the code that trains, not what the tree holds when the last is done
    jobs = jobs or int(os.environ.get("NMT_JOBS") or 1)
    one = partial(train_and_evaluate, prof, results_dir, data_dir, git=git)
    names = runs or sorted(prof.runs, key=lambda n: -(prof.runs[n].train.max_hours or 0))
    out.mkdir(parents=True, exist_ok=True)
    with locked(out / ".replicate.lock", f"the replication of {prof.name} into {out}"):
        return _replicate(prof, out, one, names, jobs, git)


def _replicate(prof, out: Path, one, names: list[str], jobs: int, git: dict) -> dict:
    """:func:`replicate_profile` once its results directory is locked."""
    if jobs <= 1:
        done = dict(map(one, names))
    else:
        for run in {prof.runs[n].data: prof.runs[n] for n in names}.values():
            prepare(run.data)  # once, here, not in two workers at a time
        done = dict(run_all(one, names, jobs))
    # the runs of earlier sessions, evaluated already: their recorded times
    rest = [
        n
        for n in prof.runs
        if n not in done
        and (evaluated(prof.runs[n], run_dir(out, n)) or recorded(prof.runs[n], run_dir(out, n)))
    ]
    done.update(map(one, rest))
    walls = {name: done[name] for name in prof.runs if name in done}
    if len(walls) == len(prof.runs):
        write_manifest(out, prof, walls, git)
    return walls


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m nmt_experiments.replicate",
        description="Train and evaluate every run of a profile into its results directory, with "
        "its manifest (--train); rewrite README.md's summary of the committed results (--readme).",
    )
    ap.add_argument("--readme", action="store_true", help="rewrite README.md's results summary")
    ap.add_argument(
        "--train",
        metavar="PROFILE",
        help="a profile name or TOML path, e.g. nmt_lib/profiles/studies/compare.toml",
    )
    add_out(ap, help="default: results/<the profile's name>")
    ap.add_argument("--data-dir", help="the WMT'14 layout (default: the profile's, NMT_DATA)")
    ap.add_argument("--jobs", type=int, help="models trained at a time (default: NMT_JOBS, else 1)")
    ap.add_argument("--runs", nargs="+", metavar="RUN", help="with --train: only these runs")
    ap.add_argument(
        "--unk-dictionary",
        metavar="PROFILE",
        help="measure <unk> replaced through a dictionary counted on the training data, "
        "on the profile's committed translations (unk_dictionary.json)",
    )
    ap.add_argument(
        "--claims",
        metavar="PROFILE",
        help="judge the paper's claims on the profile's committed results (its "
        "claims.csv and claims.md; --out for another directory of that profile)",
    )
    ap.add_argument(
        "--view",
        metavar="TEST_SET",
        help="with --claims: on that test set of the profile's data.views (its runs' "
        "views/TEST_SET/), into views/TEST_SET/claims.csv and .md",
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    """The command line; a stopped replication or a run in use is one line each, not a traceback
    (:func:`nmt_experiments.core.workers.reported`)."""
    return reported("replicate", _main, argv)


def _main(argv: list[str] | None) -> int:
    ap = _parser()
    a = ap.parse_args(argv)
    if a.claims:
        out = results_path(a.claims, a.out)
        if a.claims == "lite-long":  # its pair, on every test set at once
            to = ", ".join(map(str, lite_long.write(out)))
        else:
            to = paper_claims.write(out, a.claims, a.view)
        print(f"[replicate] wrote claims.csv and claims.md into {to}")
        return 0
    if a.unk_dictionary:
        return lexicon.print_unk_dictionary(a.unk_dictionary, a.out, a.data_dir)
    if not (a.readme or a.train):  # --claims and --unk-dictionary have returned
        ap.error(
            "nothing to do without --readme or --train; the notebooks, and a profile's replication "
            "through them, run with python tools/notebooks.py --profile NAME [--train]"
        )
    if a.train:
        walls = replicate_profile(a.train, a.out, a.data_dir, jobs=a.jobs, runs=a.runs)
        print(f"[replicate] {len(walls)} runs -> {results_path(load(a.train).name, a.out)}")
    if a.readme:
        write_readme()
    return 0
