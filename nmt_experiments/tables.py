"""The paper's tables and figures, ours beside the paper's, built from ``results/<profile>/`` alone:
Table 1 (:func:`table1`), Table 2 (:func:`table2`), Figure 2's curves (:func:`fig2_curves`), Figure
3's panels (:func:`fig3_panels`), Appendix C (:func:`long_sentences`), what separates our runs from
the paper's (:func:`gap_to_paper`), and the README's summary of them (:func:`readme_results`)."""

from __future__ import annotations

import csv
import html
import io
from pathlib import Path

import numpy as np
import torch

from nmt_lib import bleu
from nmt_lib.config import load_profile, model_config, run_from_dict
from nmt_lib.io import atomic_write, read_json
from nmt_lib.models import build_model
from nmt_lib.paper import APPENDIX_C_PREFIXES, MODELS
from nmt_lib.paper.model import RNNencdec, RNNsearch, count_parameters, forward_macs

from .claims import NOT_REPRODUCED, NOT_TESTABLE, OPPOSITE, REPRODUCED
from .results import paper_table, results_path, run_dir, seed_groups, train_log

#: Table 1's column beyond the paper (tokenized BLEU, all sentences).
UNK_REPLACED = "All, <unk> replaced (beyond the paper)"


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
        mean, places = float(np.mean(vals)), (digits or {}).get(k, 2)
        whole = isinstance(vals[0], int) or places == 0
        found[k] = int(round(mean)) if whole else round(mean, places)
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
    """The runs of ``out`` by model (:func:`nmt_experiments.results.seed_groups`) and whether any model
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
    tokens per second (the median of the log's windows), updates and hours, one row per run."""
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
                    "All": round(b["all"]["tok"]["score"], 2),
                    "No UNK": round(b["no_unk"]["tok"]["score"], 2) if b["no_unk"]["n"] else None,
                    "dev NLL": round(nll["dev"]["mean"], 2),
                    "parameters (M)": round(params / 1e6, 2),
                    "train tok/s": round(float(np.median(tok_s))) if tok_s else None,
                    "updates": s["updates"],
                    "hours": round(s["hours"], 3),
                    "results": out.name,
                }
            )
    return rows


#: The width of the book's text column at a 1280 px window, in CSS pixels, less a margin: a table
#: estimated wider is shown as several (:func:`markdown_table`; ``tests/test_book.py`` measures).
BOOK_COLUMN_PX = 650


def md_text(text: str) -> str:
    """``text`` as Markdown that will reach HTML: ``<`` and ``>`` outside backtick code spans
    written as entities, so that a word such as ``<unk>`` or ``</s>`` shows instead of being read
    as a tag (which the browser drops). Code spans are left as they are: Markdown escapes them."""
    parts = str(text).split("`")
    return "`".join(
        p if k % 2 else p.replace("<", "&lt;").replace(">", "&gt;") for k, p in enumerate(parts)
    )


def _cell(v) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else ""
    return f"{v:,}" if isinstance(v, int) else md_text(v)


def _min_px(col: str, rows: list[dict]) -> float:
    """The narrowest a column can be shown: its longest word (a browser wraps cells at spaces),
    at about 8.6 px a character, plus the cell's padding (fitted to the book's measured tables)."""
    shown = [col] + [html.unescape(_cell(r.get(col))) for r in rows]
    words = [w for s in shown for w in s.split()]
    return 8.6 * max((len(w) for w in words), default=1) + 24


def markdown_table(rows: list[dict], fit: float | None = BOOK_COLUMN_PX) -> str:
    """A Markdown pipe table of ``rows`` (missing values blank). A table that the book's column
    (``fit`` pixels) cannot show without a scroll bar becomes several, one under the other, each
    with the first column and as many of the next ones as fit; ``fit=None``: always one table
    (the results' ``.md`` files)."""
    cols = list(dict.fromkeys(k for r in rows for k in r))
    groups = [cols[1:]]
    if fit and cols and sum(_min_px(c, rows) for c in cols) > fit:
        groups, room = [[]], fit - _min_px(cols[0], rows)
        for c in cols[1:]:
            if groups[-1] and sum(_min_px(g, rows) for g in groups[-1] + [c]) > room:
                groups.append([])
            groups[-1].append(c)
    parts = []
    for group in groups:
        part = cols[:1] + group
        lines = ["| " + " | ".join(map(md_text, part)) + " |", "|" + "---|" * len(part)]
        lines += ["| " + " | ".join(_cell(r.get(c)) for c in part) + " |" for r in rows]
        parts.append("\n".join(lines) + "\n")
    return "\n".join(parts)


#: The lines around the README's results summary (:func:`readme_results`).
README_MARKS = (
    "<!-- results: python -m nmt_experiments.replicate --readme -->",
    "<!-- /results -->",
)


def verdict_counts(verdicts: list[str]) -> str:
    """``"3 reproduced, 1 not testable here"``: how many claims got each verdict, in the order of
    :mod:`nmt_experiments.claims`'s verdicts."""
    order = (REPRODUCED, NOT_REPRODUCED, OPPOSITE, NOT_TESTABLE)
    return ", ".join(f"{verdicts.count(v)} {v}" for v in order if verdicts.count(v))


def ranked_text(rows: list[dict]) -> str:
    """``rows`` (a comparison table: ``model``, ``All``, ``All sd``) ranked by BLEU, as a sentence:
    neighbours whose difference is within the spread over seeds are a tie, joined by ``≈`` (the
    spread: the larger of the two models' standard deviations; a model with one seed has the
    median of the others')."""
    sds = sorted(float(r["All sd"]) for r in rows if r.get("All sd") not in (None, ""))
    typical = sds[len(sds) // 2] if sds else 0.0
    sd = lambda r: typical if r.get("All sd") in (None, "") else float(r["All sd"])  # noqa: E731
    ranked = sorted(rows, key=lambda r: -float(r["All"]))
    text = f"{ranked[0]['model']} {float(ranked[0]['All']):.2f}"
    for a, b in zip(ranked, ranked[1:], strict=False):
        tie = float(a["All"]) - float(b["All"]) < max(sd(a), sd(b))
        text += f"{' ≈ ' if tie else ', '}{b['model']} {float(b['All']):.2f}"
    return text


def claims_markdown(rows: list[dict]) -> str:
    """A claims table as the book shows it: each claim first in one plain sentence (the claim, its
    verdict and why, and what the numbers show outside the verdict), then the table of the paper's
    numbers and ours."""
    lines = [
        f"- **{r['claim']}**: *{r['verdict']}*; {r['reason']}."
        + (f" {r['observation']}" if r.get("observation") else "")
        for r in rows
    ]
    table = [{k: r[k] for k in ("claim", "paper", "ours", "verdict")} for r in rows]
    return "\n".join(lines) + "\n\n" + markdown_table(table)


def readme_results(profile: str = "lite") -> str:
    """The README's first-screen summary of the committed results: ``profile``'s Table 1 beside the
    paper's, its claims' verdicts, and the `gpu` run where there is one. Written into README.md by
    ``python -m nmt_experiments.replicate --readme``; a test checks that the README holds exactly this."""
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
    rows = [
        {"model": r["model"], f"BLEU, `{profile}`": r["All"], "BLEU, the paper": r["paper All"]}
        for r in t1
    ]
    seeds = f" ({seeded}: the table gives their mean)" if (seeded := seeds_text(out)) else ""
    text = [
        f"What the committed `{profile}` results show (newstest2014, tokenized BLEU as the paper's "
        f"Table 1). The five models{seeds}, smaller than the paper's and trained with the recipe "
        f"of the book's budget study, took {hours:.1f} CPU-core hours to train and evaluate "
        f"({manifest['hardware']['cpu_model'] or manifest['hardware']['cpu']}):",
        "",
        markdown_table(rows, fit=None).rstrip("\n"),
        "",
        f"Of the paper's {len(verdicts)} claims that the book tests: {verdict_counts(verdicts)} "
        '(the chapter "Experiments" gives each verdict, its interval and its reason).',
    ]
    return "\n".join(text + _compare_summary() + _gpu_summary()) + "\n"


def _compare_summary() -> list[str]:
    """The README summary's lines on the comparison (``results/compare/``), where it is committed."""
    compare = results_path("compare")
    if not (compare / "claims.csv").is_file():
        return []
    with open(compare / "comparison.csv", encoding="utf-8") as f:
        ranked = ranked_text(list(csv.DictReader(f)))
    with open(compare / "claims.csv", encoding="utf-8") as f:
        judged = [r["verdict"] for r in csv.DictReader(f)]
    cmp = read_json(compare / "manifest.json")
    t = run_from_dict(cmp["configs"][cmp["runs"][0]]).train
    budget = (
        f"the same {t.max_updates:,} updates each, with its own recipe chosen on dev"
        if t.max_updates
        else f"the same {60 * t.max_hours:.0f} minutes of one core each (equal time, "
        "which measures our implementations as much as the architectures), with "
        "lite's recipe"
    )
    return [
        "",
        "Beside them, on the same data and sizes, the models before and after the paper "
        f'(`results/compare/`, the book\'s part "Before and after the paper"), {budget}: '
        + ranked
        + " (≈: a tie, within the spread over seeds)"
        + f". Of the {len(judged)} claims that comparison tests: {verdict_counts(judged)}.",
    ]


def _gpu_summary() -> list[str]:
    """The README summary's line on the `gpu` run (``results/gpu/``), where it is committed."""
    gpu = results_path("gpu")
    if not (gpu / "manifest.json").is_file():
        return []
    (name,) = read_json(gpu / "manifest.json")["runs"]
    b = read_json(run_dir(gpu, name) / "bleu.json")
    summ = read_json(run_dir(gpu, name) / "train_summary.json")
    return [
        "",
        f"At the paper's sizes, {name} trained for {60 * summ['hours']:.0f} minutes of one "
        f"{summ['device']} scores {b['all']['tok']['score']:.2f} (`results/gpu/`).",
    ]


def write_table(out: Path, name: str, rows: list[dict], note: str) -> None:
    """``<name>.csv`` and ``<name>.md`` (with ``note``, e.g. the profile and the BLEU signature)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
    w.writeheader()
    w.writerows(rows)
    with atomic_write(out / f"{name}.csv") as f:
        f.write(buf.getvalue())
    with atomic_write(out / f"{name}.md") as f:
        f.write(markdown_table(rows, fit=None) + "\n" + md_text(note.strip()) + "\n")


def show_table(out: Path, name: str, rows: list[dict], note: str, write: bool) -> str:
    """``rows`` as Markdown with ``note`` under it, for a notebook to display; with ``write``
    (replicate mode) also saved as ``<name>.csv`` and ``<name>.md`` in ``out`` (:func:`write_table`)."""
    if write:
        write_table(out, name, rows, note)
    return markdown_table(rows) + "\n" + md_text(note)


def fig2_curves(out: Path, models=MODELS[:4]) -> tuple[dict, list[int]]:
    """Figure 2's curves from the per-sentence BLEU statistics of each run: ``{model: (bucket
    centres, BLEU: the mean over its seeds)}`` and the bucket edges. Buckets by source length,
    width 10 as the paper's axis suggests; width 2 when the test set has no sentence of 40 words or
    more (toy data)."""
    curves, edges, groups = {}, [], seed_groups(out)
    for name in models:
        per = []
        for run in groups[name]:
            d = read_json(run_dir(out, run) / "bleu_by_length.json")
            width = 10 if max(d["src_len"]) >= 40 else 2
            edges = list(range(0, max(d["src_len"]) + width + 1, width))
            buckets = bleu.bleu_by_length(np.array(d["stats_tok"]), d["src_len"], True, edges)
            per.append(
                [((b["lo"] + b["hi"] + 1) / 2, b["bleu"]) for b in buckets if b["n"] and b["hi"]]
            )
        curves[name] = (
            [x for x, _ in per[0]],
            [float(np.mean([p[k][1] for p in per])) for k in range(len(per[0]))],
        )
    return curves, edges


def fig3_panels(out: Path, model: str = "RNNsearch-50") -> tuple[list[dict], bool]:
    """Figure 3's panels from ``attention.json`` of ``model``: the paper's sentences (b)-(d) when
    the test set has them (then the flag is True), preceded by (a), the paper's "arbitrary
    sentence", where the run translated it; else the three sentences chosen by the paper's rule."""
    records = read_json(run_dir(out, model) / "attention.json")  # paper.FIG3_SOURCES, then ours
    use_paper = all(r["found"] and r.get("alpha") for r in records[1:4])
    if use_paper:
        chosen = [(f"({c})", r) for c, r in zip("abcd", records[:4], strict=True) if r.get("alpha")]
    else:
        chosen = [(f"test sentence {r['index'] + 1}", r) for r in records[4:7] if r.get("alpha")]
    return [{**attention_panel(r), "title": title} for title, r in chosen], use_paper


def attention_panel(record: dict) -> dict:
    """One ``attention.json`` record as words and weights: ``src``, ``trg`` (EOS shown as
    ``<end>``, as the paper labels it; Moses' escapes undone) and ``alpha``."""
    word = lambda t: "<end>" if t == "</s>" else html.unescape(t)  # noqa: E731
    return {
        "src": [word(t) for t in record["src_tokens"]],
        "trg": [word(t) for t in record["hyp_tokens"]],
        "alpha": record["alpha"],
    }


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


def long_sentences(out: Path, test, models=("RNNencdec-50", "RNNsearch-50")) -> tuple[str, bool]:
    """Appendix C: the paper's long test sentences (or, if the test set lacks them, its three
    longest), with the reference and each model's translation, as Markdown; and whether they
    are the paper's."""
    idx = [
        next((i for i, s in enumerate(test.src_raw) if s.startswith(p)), None)
        for p in APPENDIX_C_PREFIXES
    ]
    paper = all(i is not None for i in idx)
    if not paper:
        idx = sorted(range(len(test)), key=lambda i: -len(test.src_tok[i]))[:3]
    hyp = {
        m: (run_dir(out, m) / "hyp.test.detok.txt").read_text(encoding="utf-8").splitlines()
        for m in models
    }
    esc = lambda text: html.escape(text, quote=False)  # noqa: E731  <unk> is text, not a tag
    lines = []
    for k, i in enumerate(idx, 1):
        lines += [f"{k}. **Source** ({len(test.src_tok[i])} words): {esc(test.src_raw[i])}", ""]
        lines += [f"   - **Reference**: {esc(test.ref_raw[i])}"]
        lines += [f"   - **{m}**: {esc(hyp[m][i])}" for m in models]
        lines += [""]
    return "\n".join(lines), paper


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
    arch = {"RNNsearch": RNNsearch, "RNNencdec": RNNencdec}
    for name, runs in seed_groups(out).items():
        pc = paper_cfg[name].model
        p_seen = float(t2[name]["updates_1e5"]) * 1e5 * corpus["batch_size"]
        with torch.device("meta"):
            paper_n = count_parameters(arch[pc.arch](pc))
        per = []
        for run in runs:
            cfg = run_from_manifest(manifest, run)
            s = read_json(run_dir(out, run) / "train_summary.json")
            train = summ[f"max_len={cfg.data.max_len}"]["train"]
            src = train["src"]["words"] / train["pairs"] + 1  # + EOS
            trg = train["trg"]["words"] / train["pairs"] + 1
            with torch.device("meta"):
                ours_n = count_parameters(arch[cfg.model.arch](cfg.model))
            seen = s["updates"] * cfg.data.batch_size * s.get("world_size", 1)
            flops = 6 * forward_macs(cfg.model, src, trg) * seen
            p_flops = 6 * forward_macs(pc, src, trg) * p_seen
            per.append(
                {
                    "model": name,
                    "training pairs (≤ max_len)": train["pairs"],
                    "paper training pairs (all lengths)": int(corpus["training_pairs"]),
                    "pairs seen": seen,
                    "paper pairs seen": int(p_seen),
                    "target words seen (M)": seen * (trg - 1) / 1e6,
                    "paper target words seen (M)": p_seen * (trg - 1) / 1e6,
                    "parameters (M)": ours_n / 1e6,
                    "paper parameters (M)": paper_n / 1e6,
                    "hours": s["hours"],
                    "device": s["device"],
                    "paper hours": float(t2[name]["hours"]),
                    "paper GPU": t2[name]["gpu"],
                    "training PFLOP": flops / 1e15,
                    "paper training PFLOP": p_flops / 1e15,
                    "paper / ours compute": p_flops / flops if flops else None,
                }
            )
        rows.append(
            over_seeds(
                per,
                {
                    "target words seen (M)": 1,
                    "paper target words seen (M)": 1,
                    "training PFLOP": 3,
                    "paper training PFLOP": 1,
                    "paper / ours compute": 0,
                },
            )
        )
    return rows


def run_from_manifest(manifest: dict, name: str):
    """The resolved config of run ``name`` as recorded in ``manifest.json``."""
    return run_from_dict(manifest["configs"][name])
