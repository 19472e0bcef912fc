"""A study's arms as the studies that train them share them: one arm trained (resumably) and scored
on the whole dev set (:func:`train_arm`, :func:`final_eval`), the model it ended with, trained again
where its checkpoint is gone (:func:`trained_arm`), and a dev set decoded with a search's settings
(:func:`dev_search`). The budget study (:mod:`nmt_experiments.budget`) and the comparison's recipe
sweep (:mod:`nmt_experiments.comparison.recipe_sweep`) train their arms with them."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

from nmt_lib import bleu
from nmt_lib.checkpoint import located
from nmt_lib.config import RunConfig, load_profile, run_dir_name
from nmt_lib.data import prepare
from nmt_lib.decoding import decode
from nmt_lib.io import write_json
from nmt_lib.loading import load_trained
from nmt_lib.train import train_run
from nmt_lib.train_loop import Diverged
from nmt_lib.validation import dev_metrics


def arm_model(out_dir: Path, run: RunConfig):
    """The model that the run in ``out_dir`` ended with (its ``train_summary.json`` names the
    checkpoint), ready to evaluate, the process tuned for its backend."""
    summary = json.loads((out_dir / "train_summary.json").read_text(encoding="utf-8"))
    loaded = load_trained(located(summary["model_checkpoint"], run))
    loaded.on.tune_process()
    return loaded.model


def trained_arm(out_dir: Path, run: RunConfig, prep):
    """:func:`arm_model`, the arm trained again first where its checkpoint is gone (checkpoints
    are not results: another machine or session has none), into ``<cache>/retrain/<arm>/``.
    Training is deterministic, so the retrained arm's best dev NLL must be the recorded one (to
    1e-4, for another CPU's rounding); a mismatch raises, naming both."""
    summary = json.loads((out_dir / "train_summary.json").read_text(encoding="utf-8"))
    if located(summary["model_checkpoint"], run).is_file():
        return arm_model(out_dir, run)
    again = run.data.resolved_cache_dir() / "retrain" / out_dir.name
    print(f"[budget] {run.name}: no checkpoint here; training it again into {again}", flush=True)
    redone = train_run(run, again, prep=prep, progress=False)
    if abs(redone["best_dev_nll"] - summary["best_dev_nll"]) > 1e-4 * summary["best_dev_nll"]:
        raise RuntimeError(
            f"{run.name}: trained again, its best dev NLL is {redone['best_dev_nll']!r}, not the "
            f"{summary['best_dev_nll']!r} that {out_dir / 'train_summary.json'} records"
        )
    return arm_model(again, run)


def final_eval(run: RunConfig, out_dir: Path, prep, bleu_sentences: int = 500) -> dict:
    """The whole dev set's NLL per sentence and the greedy BLEU of its first ``bleu_sentences``
    sentences, of the model an arm ended with; written to ``final.json``."""

    model = arm_model(out_dir, run)
    cfg = dataclasses.replace(
        run, train=dataclasses.replace(run.train, dev_bleu_sentences=bleu_sentences)
    )
    m = dev_metrics(model, prep, cfg, "cpu", full=True)
    result = {
        "dev_nll": m["dev_nll"],
        "dev_nll_sentences": m["dev_nll_sentences"],
        "dev_bleu_greedy": m["dev_bleu"],
        "dev_bleu_sentences": min(bleu_sentences, len(prep.dev)),
        "seconds": m["eval_seconds"],
    }
    write_json(out_dir / "final.json", result)
    return result


def train_arm(profile: str, results_dir: str, data_dir: str | None, name: str) -> tuple[str, dict]:
    """Train (resumably) one arm and score it on the whole dev set; returns ``(name, seconds)``.
    An arm that diverges is an outcome of the study, not an error: its ``final.json`` says so,
    with no dev score."""

    run = study_profile(profile, data_dir).runs[name]
    out = Path(results_dir) / "runs" / run_dir_name(name)
    prep = prepare(run.data)
    t0 = time.time()
    try:
        summary = train_run(run, out, prep=prep, progress=False)
    except Diverged as e:
        write_json(
            out / "final.json",
            {"diverged": str(e), "updates": e.update, "dev_nll": None, "dev_bleu_greedy": None},
        )
        print(f"[budget] {name}: diverged at update {e.update}", flush=True)
        return name, {"train_s": round(time.time() - t0, 1), "final_eval_s": 0.0}
    t1 = time.time()
    result = final_eval(run, out, prep)
    print(
        f"[budget] {name}: {summary['updates']} updates in {summary['hours'] * 60:.1f} min, "
        f"dev NLL {result['dev_nll']:.2f}, dev BLEU (greedy) {result['dev_bleu_greedy']:.2f}",
        flush=True,
    )
    return name, {"train_s": round(t1 - t0, 1), "final_eval_s": round(time.time() - t1, 1)}


def dev_search(model, prep, idx: list[int], search, precision: str = "fp32") -> dict:
    """``model`` decodes the dev sentences ``idx`` with ``search``: their tokenized BLEU, brevity
    penalty and length ratio, and the seconds it took."""
    t0 = time.perf_counter()
    hyps = decode(model, [prep.dev.x[i] for i in idx], search, device="cpu", precision=precision)
    seconds = time.perf_counter() - t0
    refs = [" ".join(prep.dev.ref_tok[i]) for i in idx]
    score = bleu.bleu_tok([" ".join(prep.trg_vocab.decode(h.tokens)) for h in hyps], refs)
    return {
        "dev sentences": len(idx),
        "dev BLEU": round(score.score, 2),
        "brevity penalty": round(score.bp, 3),
        "length ratio": round(score.sys_len / score.ref_len, 3),
        "seconds": round(seconds, 1),
    }


def study_profile(profile, data_dir):
    """A study's profile, its runs reading their data from ``data_dir`` where one is given."""
    overrides = {"data": {"data_dir": str(data_dir)}} if data_dir is not None else {}
    return load_profile(profile, **overrides)
