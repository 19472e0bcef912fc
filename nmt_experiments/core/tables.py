"""The paper's tables, ours beside the paper's, built from ``results/<profile>/`` alone: Table 1
(:func:`table1`), Table 2 (:func:`table2`), ``<unk>`` replaced (:func:`unk_replacement`), what
separates our runs from the paper's (:func:`gap_to_paper`), and several results directories' runs
side by side (:func:`comparison_table`). The figures are :mod:`nmt_experiments.core.figures`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from nmt_lib.config import load_profile, model_config, run_from_dict
from nmt_lib.io import read_json
from nmt_lib.models import build_model
from nmt_lib.paper.model import RNNencdec, RNNsearch, count_parameters, forward_macs

from .results import paper_table, run_dir, seed_groups, train_log

#: Table 1's column beyond the paper (tokenized BLEU, all sentences).
UNK_REPLACED = "All, <unk> replaced (beyond the paper)"


def mean_of(values: list[float], places: int = 2) -> float | int:
    """The mean of a model's unrounded per-seed ``values``, rounded once, for display: every
    table, claim and README line prints a mean through this (or from the same unrounded values)."""
    mean = float(np.mean(values))
    return int(round(mean)) if places == 0 else round(mean, places)


def over_seeds(rows: list[dict], digits: dict[str, int] | None = None) -> dict:
    """One row for a model from the rows of its seeds (unrounded): each number the mean over the
    seeds, rounded to ``digits[column]`` places (2 by default; a count stays a whole number), or
    None where a seed lacks it; any other value the first seed's. One seed: its row, rounded."""
    found = {}
    for k, first in rows[0].items():
        vals = [r.get(k) for r in rows]
        if None in vals or isinstance(first, (str, bool)):
            found[k] = None if None in vals else first
            continue
        found[k] = mean_of(vals, 0 if isinstance(vals[0], int) else (digits or {}).get(k, 2))
    return found


def mean_sd(values: list[float]) -> tuple[float, float | None]:
    """The mean of a model's per-seed ``values`` and their standard deviation (None for one seed)."""
    return float(np.mean(values)), float(np.std(values, ddof=1)) if len(values) > 1 else None


def seeds_text(out: Path) -> str:
    """``"RNNencdec-50 and RNNsearch-50 with 3 seeds each"``: the models of ``out`` trained with
    several seeds; empty where none is."""
    seeded = {m: len(runs) for m, runs in seed_groups(out).items() if len(runs) > 1}
    if not seeded:
        return ""
    counts = "/".join(map(str, sorted(set(seeded.values()))))
    return f"{' and '.join(seeded)} with {counts} seeds each"


def _seeds(out: Path) -> tuple[dict[str, list[str]], bool]:
    """The runs of ``out`` by model (:func:`nmt_experiments.core.results.seed_groups`) and whether any model
    has several seeds (then the tables say how many, and Table 1 their spread)."""
    groups = seed_groups(out)
    return groups, any(len(r) > 1 for r in groups.values())


def table1(out: Path) -> list[dict]:
    """Table 1: test BLEU, All and No-UNK, ours (tokenized multi-bleu style, and sacreBLEU on
    detokenized text) beside the paper's; once the results hold it, a column beyond the paper:
    All with each ``<unk>`` replaced by its aligned source word (:mod:`nmt_lib.unk`; empty for a
    model without attention). A model trained with several seeds: the mean over them, with their
    number and the standard deviation of All."""
    paper, rows = paper_table("table1"), []
    groups, seeded = _seeds(out)
    bleus = {n: read_json(run_dir(out, n) / "bleu.json") for runs in groups.values() for n in runs}
    replaced = any("unk_replaced" in b for b in bleus.values())
    for name, runs in groups.items():
        per = []
        for b in (bleus[r] for r in runs):
            row = {
                "model": name,
                "All": b["all"]["tok"]["score"],
                "No UNK": b["no_unk"]["tok"]["score"] if b["no_unk"]["n"] else None,
                "All (sacreBLEU)": b["all"]["detok"]["score"],
                "No-UNK sentences": b["no_unk"]["n"],
            }
            if replaced:
                r = b.get("unk_replaced")
                row[UNK_REPLACED] = r["tok"]["score"] if r else None
            per.append(row)
        row = over_seeds(per)
        if seeded:  # the seeds and their spread beside the mean
            sd = mean_sd([r["All"] for r in per])[1]
            row = {
                "model": name,
                "seeds": len(runs),
                "All": row.pop("All"),
                "All sd": None if sd is None else round(sd, 2),
                **row,
            }
        row["paper All"] = float(paper[name]["bleu_all"])
        row["paper No UNK"] = float(paper[name]["bleu_no_unk"])
        rows.append(row)
    moses = paper["Moses"]
    rows.append(
        {
            "model": "Moses",
            "paper All": float(moses["bleu_all"]),
            "paper No UNK": float(moses["bleu_no_unk"]),
        }
    )
    return rows


def table2(out: Path) -> list[dict]:
    """Table 2: learning statistics, ours beside the paper's (NLL: nats per sentence); a model
    trained with several seeds: the mean over them."""
    paper, rows = paper_table("table2"), []
    groups, seeded = _seeds(out)
    for name, runs in groups.items():
        per = []
        for run in runs:
            s = read_json(run_dir(out, run) / "train_summary.json")
            nll = read_json(run_dir(out, run) / "nll.json")
            per.append(
                {
                    "model": name,
                    **({"seeds": len(runs)} if seeded else {}),
                    "updates": s["updates"],
                    "epochs": s["epochs"],
                    "hours": s["hours"],
                    "device": s["device"],
                    "train NLL": nll["train"]["mean"],
                    "dev NLL": nll["dev"]["mean"],
                }
            )
        p = paper[name]
        rows.append(
            {
                **over_seeds(per, {"hours": 3}),
                "paper updates": int(float(p["updates_1e5"]) * 1e5),
                "paper epochs": float(p["epochs"]),
                "paper hours": float(p["hours"]),
                "paper GPU": p["gpu"],
                "paper train NLL": float(p["train_nll"]),
                "paper dev NLL": float(p["dev_nll"]),
            }
        )
    return rows


def comparison_table(*outs: Path) -> list[dict]:
    """The models of several results directories side by side (e.g. ``results/compare`` beside
    ``results/lite``): test BLEU All and No-UNK, dev NLL (nats per sentence), parameters, training
    tokens per second (the median of the log's windows), updates and hours, one row per run,
    unrounded (a mean over seeds is taken of these, then rounded: :func:`mean_of`)."""
    rows = []
    for out in outs:
        manifest = read_json(out / "manifest.json")
        for name in manifest["runs"]:
            d = run_dir(out, name)
            b, nll = read_json(d / "bleu.json"), read_json(d / "nll.json")
            s = read_json(d / "train_summary.json")
            cfg = model_config(manifest["configs"][name]["model"], "model")
            with torch.device("meta"):  # shapes only
                params = count_parameters(build_model(cfg))
            tok_s = [r["tokens_per_s"] for r in train_log(d) if r.get("kind") == "train"]
            rows.append(
                {
                    "model": name,
                    "arch": cfg.arch,
                    "All": b["all"]["tok"]["score"],
                    "No UNK": b["no_unk"]["tok"]["score"] if b["no_unk"]["n"] else None,
                    "dev NLL": nll["dev"]["mean"],
                    "parameters (M)": round(params / 1e6, 2),
                    "train tok/s": float(np.median(tok_s)) if tok_s else None,
                    "updates": s["updates"],
                    "hours": s["hours"],
                    "results": out.name,
                }
            )
    return rows


def unk_replacement(out: Path, examples: int = 4, max_words: int = 25) -> tuple[list[dict], list]:
    """``<unk>`` replaced through the alignment (:mod:`nmt_lib.unk`), from each run's
    ``hyp.test.tok.txt`` and ``hyp.test.unk_replaced.tok.txt``: one row per model whose runs all
    have both (test BLEU before and after, the share of output tokens that are ``<unk>`` before and
    after; a model with several seeds: the mean over them), and ``examples`` translations
    (``(model, before, after)``, tokens) of at most ``max_words`` words that the replacement
    changed, the first in test order, from the first run of the last such model. Where the results
    hold ``unk_dictionary.json`` (``python -m nmt_experiments.replicate --unk-dictionary``), each row also
    gives the BLEU with the copied words looked up in that dictionary."""
    rows, changed = [], []
    f = out / "unk_dictionary.json"
    looked_up = read_json(f)["runs"] if f.is_file() else {}
    for model, runs in seed_groups(out).items():
        per = []
        for name in runs:
            d = run_dir(out, name)
            b = read_json(d / "bleu.json")
            if "unk_replaced" not in b:
                continue
            before = (d / "hyp.test.tok.txt").read_text(encoding="utf-8").splitlines()
            after = (d / "hyp.test.unk_replaced.tok.txt").read_text(encoding="utf-8").splitlines()
            n = sum(len(h.split()) for h in before) or 1
            per.append(
                {
                    "model": model,
                    "All": b["all"]["tok"]["score"],
                    "All, <unk> replaced": b["unk_replaced"]["tok"]["score"],
                    "<unk> in the output (%)": 100
                    * sum(h.split().count("<unk>") for h in before)
                    / n,
                    "<unk> left (%)": 100 * sum(h.split().count("<unk>") for h in after) / n,
                }
            )
            if name in looked_up:
                per[-1]["All, through a dictionary"] = looked_up[name]["dictionary"]["tok"]["score"]
            if len(per) == 1:
                first = [
                    (model, x.split(), y.split())
                    for x, y in zip(before, after, strict=True)
                    if x != y and len(x.split()) <= max_words
                ][:examples]
        if per and len(per) == len(runs):  # a model whose every seed has both
            rows.append(over_seeds(per, {"<unk> in the output (%)": 1, "<unk> left (%)": 1}))
            changed = first
    return rows, changed


def gap_to_paper(out: Path) -> list[dict]:
    """Why our BLEU is far from the paper's, in numbers, per model (the mean over its seeds):
    training pairs available and seen, target words seen, updates, parameters, hours and device,
    and model FLOPs of training (:func:`nmt_lib.paper.model.forward_macs` × 6 at the mean training
    sentence lengths, ours for both: the paper does not give its lengths after the length filter)."""
    manifest = read_json(out / "manifest.json")
    summ = read_json(out / "data_summary.json")
    corpus = {k: float(v["value"]) for k, v in paper_table("corpus").items()}
    t2, paper_cfg = paper_table("table2"), load_profile("paper").runs
    rows = []
    for name, runs in seed_groups(out).items():
        paper = {
            "model": paper_cfg[name].model,
            "pairs": int(corpus["training_pairs"]),
            "seen": float(t2[name]["updates_1e5"]) * 1e5 * corpus["batch_size"],
            "hours": float(t2[name]["hours"]),
            "gpu": t2[name]["gpu"],
        }
        per = [_gap_row(out, name, run, manifest, summ, paper) for run in runs]
        rows.append(over_seeds(per, GAP_DIGITS))
    return rows


#: The places :func:`gap_to_paper` rounds its means to (2 elsewhere).
GAP_DIGITS = {
    "target words seen (M)": 1,
    "paper target words seen (M)": 1,
    "training PFLOP": 3,
    "paper training PFLOP": 1,
    "paper / ours compute": 0,
}


def _gap_row(out: Path, name: str, run: str, manifest: dict, summ: dict, paper: dict) -> dict:
    """Run ``run``'s row of :func:`gap_to_paper` beside the paper's model ``name`` (``paper``: its
    model config, training pairs, pairs seen, hours and GPU); ``summ``: ``data_summary.json``."""
    cfg = run_from_manifest(manifest, run)
    s = read_json(run_dir(out, run) / "train_summary.json")
    train = summ[f"max_len={cfg.data.max_len}"]["train"]
    src = train["src"]["words"] / train["pairs"] + 1  # + EOS
    trg = train["trg"]["words"] / train["pairs"] + 1
    seen, p_seen = s["updates"] * cfg.data.batch_size * s.get("world_size", 1), paper["seen"]
    flops = 6 * forward_macs(cfg.model, src, trg) * seen
    p_flops = 6 * forward_macs(paper["model"], src, trg) * p_seen
    return {
        "model": name,
        "training pairs (≤ max_len)": train["pairs"],
        "paper training pairs (all lengths)": paper["pairs"],
        "pairs seen": seen,
        "paper pairs seen": int(p_seen),
        "target words seen (M)": seen * (trg - 1) / 1e6,
        "paper target words seen (M)": p_seen * (trg - 1) / 1e6,
        "parameters (M)": _parameters(cfg.model) / 1e6,
        "paper parameters (M)": _parameters(paper["model"]) / 1e6,
        "hours": s["hours"],
        "device": s["device"],
        "paper hours": paper["hours"],
        "paper GPU": paper["gpu"],
        "training PFLOP": flops / 1e15,
        "paper training PFLOP": p_flops / 1e15,
        "paper / ours compute": p_flops / flops if flops else None,
    }


def _parameters(cfg) -> int:
    """The parameters of the paper's model ``cfg`` (RNNsearch or RNNencdec), counted on the meta
    device (shapes only)."""
    with torch.device("meta"):
        return count_parameters({"RNNsearch": RNNsearch, "RNNencdec": RNNencdec}[cfg.arch](cfg))


def run_from_manifest(manifest: dict, name: str):
    """The resolved config of run ``name`` as recorded in ``manifest.json``."""
    return run_from_dict(manifest["configs"][name])
