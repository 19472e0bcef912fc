"""Train, decode and evaluate every model of a profile into ``results/<profile>/``, with provenance.

What the experiment notebooks call in replicate mode (``python tools/notebooks.py --profile NAME
--train``): a profile with its data (the smoke profile's toy corpus: :func:`load`), one model
trained and evaluated (:func:`train_and_evaluate`), every model of a profile, several at a time
(:func:`replicate_profile`), with ``manifest.json``, the provenance of it all
(:mod:`nmt_experiments.provenance`); and ``<unk>`` replaced through a dictionary counted on the
training pairs (:func:`unk_dictionary`). Where the results live is :mod:`nmt_experiments.results`;
the tables and figures built from them are :mod:`nmt_experiments.tables`, the paper's claims judged
on them :mod:`nmt_experiments.paper_claims`.

``python -m nmt_experiments.replicate --readme`` rewrites README.md's summary of the committed results
(:func:`nmt_experiments.readme.readme_results`).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from multiprocessing import get_context
from pathlib import Path

from nmt_lib import publish
from nmt_lib.checkpoint import default_checkpoint_dir, find_checkpoint, portable
from nmt_lib.config import ConfigError, run_from_dict, to_dict
from nmt_lib.data import data_summary, prepare, train_pairs
from nmt_lib.evaluate import evaluate_run
from nmt_lib.io import read_json, write_json
from nmt_lib.paper import FIG3_SOURCES
from nmt_lib.profile import load_runs as load  # the profile's runs (replicate.load)
from nmt_lib.scoring import score
from nmt_lib.train import train_run
from nmt_lib.unk import UNK_WORD, dictionary, through

from . import paper_claims
from .provenance import git_state, write_manifest
from .readme import write_readme
from .results import published_dir, results_path, run_dir


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


def train_and_evaluate(profile, results_dir, data_dir, name: str) -> tuple[str, dict]:
    """Train (resumably), decode and evaluate one model of ``profile`` (a name, or a loaded
    profile) into ``<results>/runs/<model>/``; returns ``(name, wall times)``: the training clock
    of ``train_summary.json`` (the whole training, across resumptions) and the evaluation's. A run
    already :func:`evaluated` is not evaluated again: its evaluation time is the recorded one."""
    prof = load(profile, data_dir) if isinstance(profile, str) else profile
    run, out = prof.runs[name], results_path(prof.name, results_dir)
    prep = prepare(run.data)
    # attention.json: Figure 3's (a)-(d), three sentences by its rule, the explorer's sentences
    sources = (*FIG3_SOURCES, *figure_sentences(prep.test), *explorer_sentences(prep.test))
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
    if evaluated(run, run_dir(out, name)) is None:
        print(
            f"[replicate] {name}: training (at most {_budget(run.train, time.time())}), then "
            "decoding the test set",
            flush=True,
        )
    summary = train_run(run, run_dir(out, name), prep=prep, progress=False)
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
    if name in prof.publish:  # the weights a reader translates with (nmt_lib.publish)
        _publish(prof, name, results_dir, prep)
    print(
        f"[replicate] {name}: {summary['updates']} updates ({summary['stopped_by']}) in "
        f"{train_s:.0f} s, test BLEU {result['all']['tok']['score']:.2f}",
        flush=True,
    )
    return name, {"train_s": train_s, "evaluate_s": round(time.time() - t1, 1)}


def _publish(prof, name: str, results_dir, prep) -> None:
    """Publish run ``name``'s weights beside its results (:func:`nmt_lib.publish.export`)."""
    run, out = prof.runs[name], run_dir(results_path(prof.name, results_dir), name)
    target = published_dir(prof.name, name, results_dir)
    publish.export(default_checkpoint_dir(run, out), target, run, out, prep.test)
    manifest = results_path(prof.name, results_dir) / "manifest.json"
    if manifest.is_file():  # the sums that nmt_lib.publish.verify checks the new files against
        recorded = read_json(manifest)
        recorded.setdefault("published", {})[name] = publish.recorded_sums(target)
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


def same_run(saved: dict, run) -> bool:
    """Whether the config ``saved`` (a run's ``config.json``, in the layout of any version) is
    ``run``'s."""
    try:  # every section as this version reads it: its settings' defaults where it predates them
        return to_dict(run_from_dict(saved)) == to_dict(run)
    except (ConfigError, TypeError, KeyError):
        return False


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
        same_run(config, run)
        and summary.get("stopped_by") not in (None, "interrupted")
        and bleu.get("search") == to_dict(run.search)
    )
    return bleu if whole else None


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
    prof = load(profile, data_dir) if isinstance(profile, str) else profile
    out = results_path(prof.name, results_dir)
    git = git or git_state()  # the code that trains, not what the tree holds when the last is done
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


# ------------------------------------------------------------------ <unk> through a dictionary
#: What :func:`unk_dictionary` writes into a results directory.
UNK_DICTIONARY = "unk_dictionary.json"


def _lines(path: Path) -> list[list[str]]:
    return [x.split() for x in path.read_text(encoding="utf-8").splitlines()]


def unk_dictionary(
    profile, results_dir=None, data_dir=None, min_pairs=2, min_dice=0.3
) -> dict | None:
    """Whether a dictionary helps the ``<unk>`` replacement (:func:`nmt_lib.unk.dictionary`),
    measured on the runs of ``profile`` whose test translations have their ``<unk>`` replaced
    (``hyp.test.unk_replaced.tok.txt``): the dictionary is counted on the training pairs of the
    first such run's data for the source words that any of them copied, and each run's test BLEU
    with its copied words looked up in it is set beside the plain replacement's. Writes
    ``unk_dictionary.json`` into the results directory and returns it (None, writing nothing, where
    no run has its ``<unk>`` replaced). The runs share their target shortlist (a profile's runs
    share one: :mod:`nmt_lib.data`, step 4)."""
    prof = load(profile, data_dir) if isinstance(profile, str) else profile
    out = results_path(prof.name, results_dir)
    runs = _replaced_runs(out)
    if not runs:
        return None
    cfg = prof.runs[next(iter(runs))].data
    prep = prepare(cfg)
    copied = {a for before, after in runs.values() for (a,) in _copies(before, after)}
    table = dictionary(train_pairs(cfg), copied, prep.trg_vocab, min_pairs, min_dice)
    idx, lang = range(len(prep.test)), cfg.trg_lang
    scores = {}
    for name, (before, after) in runs.items():
        looked = [through(b, a, table) for b, a in zip(before, after, strict=True)]
        n = _copies(before, after, looked)
        scores[name] = {
            "copied": len(n),
            "looked_up": sum(a != x for a, x in n),
            "unk_replaced": score(after, prep.test, idx, lang),
            "dictionary": score(looked, prep.test, idx, lang),
        }
    result = {
        "counted_on": {
            "train": list(cfg.train),
            "max_len": cfg.max_len,
            "max_train_pairs": cfg.max_train_pairs,
            "trg_words": cfg.trg_words,
        },
        "min_pairs": min_pairs,
        "min_dice": min_dice,
        "copied_words": len(copied),
        "entries": table,
        "runs": scores,
    }
    write_json(out / UNK_DICTIONARY, result)
    return result


def _replaced_runs(out: Path) -> dict[str, tuple[list, list]]:
    """``{run: (its test translations, the same with their <unk> replaced)}`` (tokens) of the runs
    of ``out`` that have both."""
    runs = {}
    for name in read_json(out / "manifest.json")["runs"]:
        d = run_dir(out, name)
        if (d / "hyp.test.unk_replaced.tok.txt").is_file():
            runs[name] = (
                _lines(d / "hyp.test.tok.txt"),
                _lines(d / "hyp.test.unk_replaced.tok.txt"),
            )
    return runs


def _copies(before: list[list[str]], after: list[list[str]], *more) -> list[tuple[str, ...]]:
    """At each ``<unk>`` of ``before`` that ``after`` replaced, in order: ``after``'s word and the
    words of ``more`` (translations of the same lengths) at the same place."""
    return [
        (a, *m)
        for hb, ha, *hm in zip(before, after, *more, strict=True)
        for b, a, *m in zip(hb, ha, *hm, strict=True)
        if b == UNK_WORD and a != UNK_WORD
    ]


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
    ap.add_argument("--results-dir", help="default: results/<the profile's name>")
    ap.add_argument("--data-dir", help="the WMT'14 layout (default: the profile's, NMT_DATA)")
    ap.add_argument("--jobs", type=int, help="models trained at a time (default: NMT_JOBS, else 1)")
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
        "claims.csv and claims.md; --results-dir for another directory of that profile)",
    )
    ap.add_argument(
        "--view",
        metavar="TEST_SET",
        help="with --claims: on that test set of the profile's data.views (its runs' "
        "views/TEST_SET/), into views/TEST_SET/claims.csv and .md",
    )
    return ap


def _print_unk_dictionary(profile, results_dir, data_dir) -> int:
    """``--unk-dictionary``: :func:`unk_dictionary`, and each run's two scores printed."""
    r = unk_dictionary(profile, results_dir, data_dir)
    if r is None:
        print(
            f"[replicate] no run of {profile} has its <unk> replaced "
            "(hyp.test.unk_replaced.tok.txt): nothing to measure",
            file=sys.stderr,
        )
        return 1
    for name, x in r["runs"].items():
        print(
            f"[replicate] {name}: <unk> replaced {x['unk_replaced']['tok']['score']:.2f}, "
            f"through the dictionary {x['dictionary']['tok']['score']:.2f} "
            f"({x['looked_up']} of {x['copied']} copied words looked up)"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = _parser()
    a = ap.parse_args(argv)
    if a.claims:
        out = results_path(a.claims, a.results_dir)
        to = paper_claims.write(out, a.claims, a.view)
        print(f"[replicate] wrote claims.csv and claims.md into {to}")
        return 0
    if a.unk_dictionary:
        return _print_unk_dictionary(a.unk_dictionary, a.results_dir, a.data_dir)
    if not (a.readme or a.train):  # --claims and --unk-dictionary have returned
        ap.error(
            "nothing to do without --readme or --train; the notebooks, and a profile's replication "
            "through them, run with python tools/notebooks.py --profile NAME [--train]"
        )
    if a.train:
        walls = replicate_profile(a.train, a.results_dir, a.data_dir, jobs=a.jobs)
        print(f"[replicate] {len(walls)} runs -> {results_path(load(a.train).name, a.results_dir)}")
    if a.readme:
        write_readme()
    return 0


if __name__ == "__main__":
    sys.exit(main())
