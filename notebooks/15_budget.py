# %% [markdown]
# # What a CPU-hour buys: the budget study
#
# **What you will see.** Why a replication on a laptop cannot simply run the paper's recipe for
# fewer hours, and what it runs instead. The paper trained each model for about five days on a
# GPU, between {glue:text}`bu_t2_min` and {glue:text}`bu_t2_max` updates (Table 2); a CPU core
# makes a few thousand in the same number of minutes. This
# page trains one model, RNNsearch-50 at the `lite` profile's sizes, for the same wall-clock time
# in several *arms* that each change one thing — the optimizer, its learning rate, how the loss
# is normalised, the model size, the batch size, the shortlist — and compares what each arm has
# learned at equal time. The `lite` profile of {doc}`08_experiments` trains with the winner.
#
# **What you need.** The training recipe of {doc}`06_training`. The study is run by
# `python -m nmt_experiments.budget --train --jobs 2` (two arms at a time, one core each) and read here
# from the committed `results/budget/`; this page never trains. Like {doc}`14_fast`, it is
# engineering: the course needs only its outcome, the `lite` recipe that {doc}`08_experiments`
# names.

# %% tags=["parameters", "hide-input"]
profile = "lite"
train = False
results_dir = None
data_dir = None

# %% tags=["hide-input", "remove-cell"]
from nmt_experiments.core.results import check_parameters

check_parameters(profile, train, results_dir, data_dir)

# %% tags=["hide-input"]
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Markdown
from myst_nb import glue

from nmt_experiments.budget import report as budget_report
from nmt_experiments.core import markdown, plots, tables
from nmt_experiments.core.alignment import alignment_stats
from nmt_experiments.core.claims import MARGIN
from nmt_experiments.core.judge import Judge
from nmt_experiments.core.recipe import recipe as recipe_of
from nmt_experiments.core.recipe import recipe_differences
from nmt_experiments.core.results import (
    commit_text,
    paper_table,
    require_results,
    results_path,
    run_dir,
)
from nmt_lib.config import load_profile, run_from_dict
from nmt_lib.io import read_json

out = budget_report.RESULTS
require_results(out, "manifest.json", "arms.csv")
manifest = read_json(out / "manifest.json")
configs = {name: run_from_dict(c) for name, c in manifest["configs"].items()}
found = budget_report.findings(out)
ref = manifest["runs"][0]
glue("bu_n_arms", len(manifest["runs"]), display=False)
glue("bu_minutes", configs[ref].train.max_hours * 60, display=False)
glue("bu_cpu", manifest["hardware"]["cpu_model"] or manifest["hardware"]["cpu"], display=False)
glue("bu_commit", commit_text(manifest), display=False)
glue("bu_ref", ref, display=False)
glue("bu_dev_subset", configs[ref].train.dev_nll_sentences, display=False)
t2_updates = [float(r["updates_1e5"]) * 1e5 for r in paper_table("table2").values()]
glue("bu_t2_min", f"{min(t2_updates):,.0f}", display=False)
glue("bu_t2_max", f"{max(t2_updates):,.0f}", display=False)
precision = read_json(out / "runs" / ref / "train_summary.json")["precision"]
glue(
    "bu_precision",
    {"bf16": "bf16 (the CPU multiplies bf16 natively)"}.get(precision, precision),
    display=False,
)

# %% [markdown]
# ## The setting
#
# Every arm trains RNNsearch-50 on the `lite` profile's data for {glue:text}`bu_minutes:.0f`
# minutes of one core of an {glue:text}`bu_cpu` (evaluations included), two arms side by side, in
# {glue:text}`bu_precision`. Each arm differs from the reference arm **{glue:text}`bu_ref`** in
# the settings that the table below names; everything else, the initial weights included, is the
# same. Every 250 updates
# the dev NLL — Table 2's measure, nats per sentence — is computed on a fixed subset of
# {glue:text}`bu_dev_subset` dev sentences spread over newstest2012 and 2013 (a few per cent of
# the training time), and the greedy BLEU of the first 100 dev sentences; at the end the whole
# dev set is scored. The results were produced from commit {glue:text}`bu_commit`;
# `results/budget/manifest.json` holds the resolved configs, data checksums, hardware and versions.
#
# ## Why the paper's recipe stalls

# %% tags=["hide-input"]
paper = found.get("paper")
if paper:
    glue("bu_paper_nll", paper["dev_nll"], display=False)
    glue("bu_paper_norm", paper["median_grad_norm"], display=False)
    glue("bu_paper_clip", 100 * paper["clip_rate"], display=False)
    reach = paper["chosen_reaches_it_at"]
    glue("bu_reach", reach if reach is not None else float("nan"), display=False)
    glue("bu_speedup", found["compare_at"] / reach if reach else float("nan"), display=False)
glue("bu_at", found["compare_at"], display=False)
glue("bu_chosen", found["chosen"], display=False)

# %% [markdown]
# The paper's recipe (§4.2, App. B.2) is Adadelta with $\rho = 0.95$, $\epsilon = 10^{-6}$, the loss
# *summed* over the tokens of a minibatch of 80 sentences, and the gradient's norm rescaled to 1
# whenever it exceeds 1. Summed over some 2,000 target tokens, the gradient is large: in the
# `paper` arm its median norm was {glue:text}`bu_paper_norm:.0f`, and
# {glue:text}`bu_paper_clip:.0f` % of the updates were clipped. Every update is then a step of norm
# one in the direction of the gradient, scaled per parameter by Adadelta's running averages, which
# start at zero and grow slowly: a recipe made for hundreds of thousands of updates, given a few
# thousand. After
# {glue:text}`bu_at:.0f` minutes the `paper` arm had reached a dev NLL of
# {glue:text}`bu_paper_nll:.1f`; the best arm, **{glue:text}`bu_chosen`**, was there after
# {glue:text}`bu_reach:.1f` minutes, {glue:text}`bu_speedup:.1f` times sooner.
#
# ## The curves

# %% tags=["hide-input"]
fig = plots.budget_curves(budget_report.curves(out))
glue("bu_fig", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} bu_fig
# :name: fig-budget
#
# Dev NLL of the fixed dev subset (top) and greedy dev BLEU of the first 100 dev sentences (bottom)
# against minutes of training on one core, one line per arm; the reference arm is the thick black
# line.
# ```
#
# ## The arms at equal time

# %% tags=["hide-input"]
rows = budget_report.arm_table(out)
by_arm = {r["arm"]: r for r in rows}
learned = ["arm", *(k for k in rows[0] if k.startswith("dev "))]
did = [k for k in rows[0] if k not in learned[1:]]
Markdown(
    "What each arm learned:\n\n"
    + markdown.markdown_table([{k: r[k] for k in learned} for r in rows])
    + "\n\nWhat each arm is and did in its minutes:\n\n"
    + markdown.markdown_table([{k: r[k] for k in did} for r in rows])
)

# %% tags=["hide-input"]
same = [
    r["updates"]
    for r in rows
    if r["parameters (M)"] == rows[0]["parameters (M)"]
    and "batch_size" not in r["differs from the reference"]
]
glue("bu_upd_min", f"{min(same):,}", display=False)
glue("bu_upd_max", f"{max(same):,}", display=False)

# %% [markdown]
# Arms of the reference's size and batch made between {glue:text}`bu_upd_min` and
# {glue:text}`bu_upd_max` updates in the same minutes: their updates do the same work, so the
# spread is the variation in speed of a machine shared with another arm. The comparisons are at
# equal wall-clock time, as a user's budget is, with that noise included; the noise floor below
# measures how much it matters.
#
# *dev NLL @t min*: the subset's dev NLL after *t* minutes (interpolated between evaluations);
# *all dev, end*: the whole dev set (6,003 sentences) when the arm stopped; *dev BLEU*: greedy, 500
# dev sentences, tokenized. *target tokens/s*: the median over the training log, evaluations
# excluded.

# %% tags=["hide-input"]
noise = budget_report.noise_floor(out)
floor = noise["floor"]
assert noise["pairs"], "no replicate pair: the study cannot state its noise"
glue("bu_floor", floor, display=False)
glue("bu_floor_n", len(noise["differences"]), display=False)
glue("bu_floor_pairs", ", and ".join(f"`{a}` and `{b}`" for a, b in noise["pairs"]), display=False)
glue(
    "bu_floor_list",
    ", ".join(f"{d['difference']:.2f}" for d in noise["differences"]),
    display=False,
)

# %% [markdown]
# **The noise floor.** Two pairs of arms take the same steps: {glue:text}`bu_floor_pairs`,
# differ only in the scale of the loss, and every update of all four was clipped (the table's
# *clipped* column), which turns either gradient into the same unit vector (exercise 1). Each pair is a
# replicate: what separates its two runs is rounding, which grows as training goes on, and how
# many updates the shared machine allowed in the same minutes. At the three comparison times their
# dev NLL differed by {glue:text}`bu_floor_list` nats. The largest, {glue:text}`bu_floor:.2f`
# nats, is the *noise floor* this page uses: a difference between two arms below it is not
# resolved by one run of each. Two pairs are few, so the floor is rough; more seeds of the leading
# arms would sharpen it.

# %% tags=["hide-input"]
ranked = found["ranked"]
best_name, best_nll = ranked[0]
tied = [name for name, nll in ranked if nll - best_nll < floor]
lines = []
for k, (name, nll) in enumerate(ranked, 1):
    gap = nll - best_nll
    note = "" if k == 1 else f" (+{gap:.2f}" + (", within the noise floor)" if gap < floor else ")")
    lines.append(f"{k}. `{name}`: {nll:.2f}{note}")
glue("bu_ranked", Markdown("\n".join(lines)), display=False)
glue("bu_tied", ", ".join(f"`{n}`" for n in tied), display=False)


def nll_at(name):
    return dict(ranked).get(name)


def delta(a, b):
    """How much lower (better) arm ``a``'s dev NLL is than arm ``b``'s at the comparison time."""
    return None if nll_at(a) is None or nll_at(b) is None else nll_at(b) - nll_at(a)


effects = {  # what one setting changes: (the arm with the first setting, the arm with the second)
    "the optimizer (Adam vs Adadelta, both with the per-sentence mean)": (ref, "adadelta-sentence"),
    "the loss normalisation under Adadelta (per-sentence mean vs sum)": (
        "adadelta-sentence",
        "paper",
    ),
    "the per-sentence mean vs the sum under Adam": (ref, "adam-1e-3-loss-sum"),
    "the per-sentence mean vs the per-token mean under Adam": (ref, "adam-1e-3-loss-token"),
    "Adam's learning rate 1e-3 vs 3e-4": (ref, "adam-3e-4"),
    "Adam's learning rate 1e-3 vs 3e-3": (ref, "adam-3e-3"),
    "the lite sizes vs twice the parameters": (ref, "adam-1e-3-large"),
    "batches of 80 vs 160": (ref, "adam-1e-3-batch-160"),
}
replicate = {frozenset(pair) for pair in noise["pairs"]}
text = []
for what, (a, b) in effects.items():
    d = delta(a, b)
    if d is None:
        continue
    if frozenset((a, b)) in replicate:
        verdict = ": a replicate pair, so this difference is noise by construction"
    else:
        verdict = ", below the noise floor: not resolved" if abs(d) < floor else ""
    text.append(
        f"- {what}: {abs(d):.2f} nats in favour of the {'first' if d > 0 else 'second'}{verdict}"
    )
for arm in found["other_vocabulary"]:  # NLL over other symbols: compare their dev BLEU instead
    a, b = by_arm[arm]["dev BLEU (greedy, end)"], by_arm[ref]["dev BLEU (greedy, end)"]
    text.append(
        f"- `{arm}` has another shortlist, so its NLL is over other symbols (a shortlist turns "
        f"every rarer word into one `<unk>`, which is easy to predict) and is not ranked; its "
        f"greedy dev BLEU at the end was {a:.2f} against the reference's {b:.2f}"
    )
glue("bu_effects", Markdown("\n".join(text)), display=False)

lr_arm = "adam-3e-3"  # the learning rate next to the chosen one
lr_text = ""
if lr_arm in by_arm and delta(found["chosen"], lr_arm) is not None:
    gap, a, b = delta(found["chosen"], lr_arm), by_arm[found["chosen"]], by_arm[lr_arm]
    early = [
        m
        for m in budget_report.COMPARE_AT[:-1]
        if b[f"dev NLL @{m:g} min"] < a[f"dev NLL @{m:g} min"]
    ]
    within = abs(gap) < floor
    lr_text = (
        f"The `lite` profile's learning rate was chosen by this ranking: `{found['chosen']}` ended "
        f"{abs(gap):.2f} nats {'below' if gap > 0 else 'above'} `{lr_arm}`, "
        + (
            "within the noise floor: **the study does not tell the two learning rates apart**"
            if within
            else "above the noise floor"
        )
        + (f". `{lr_arm}` led at {' and '.join(f'{m:g}' for m in early)} minutes" if early else "")
        + f"; its greedy dev BLEU at the end was {b['dev BLEU (greedy, end)']:.2f}, against "
        f"{a['dev BLEU (greedy, end)']:.2f}."
        + (
            f" The `lite` recipe takes the lower dev NLL at {found['compare_at']:.0f} minutes: a tie "
            f"broken by noise, not a finding."
            if within
            else ""
        )
    )
glue("bu_lr_verdict", lr_text, display=False)

# %% [markdown]
# Ranked by the subset's dev NLL at {glue:text}`bu_at:.0f` minutes (lower is better), with each
# arm's distance from the first:
#
# ```{glue:md} bu_ranked
# :format: myst
# ```
#
# Within the noise floor of the first, {glue:text}`bu_tied` are not told apart by this study; the
# order among them is not a result. Each comparison below is one setting changed, everything else
# equal, at {glue:text}`bu_at:.0f` minutes (the difference in dev NLL, nats per sentence); only
# those above the noise floor are findings:
#
# ```{glue:md} bu_effects
# :format: myst
# ```
#
# {glue:text}`bu_lr_verdict`
#
# ## What sharing the machine and evaluating cost

# %% tags=["hide-input"]
import json

sharing = read_json(out / "sharing.json")
log = [json.loads(x) for x in (out / "runs" / ref / "train_log.jsonl").read_text().splitlines()]
evals = [r for r in log if r.get("kind") == "eval"]
gaps = [b["elapsed"] - a["elapsed"] for a, b in zip(evals[:-1], evals[1:], strict=True)]
eval_s = sum(r["eval_seconds"] for r in evals) / len(evals)
full_s = read_json(out / "runs" / ref / "final.json")["seconds"]
glue("bu_alone", sharing["alone_s_per_update"], display=False)
glue("bu_shared", sharing["shared_s_per_update"], display=False)
glue("bu_slowdown", sharing["slowdown"], display=False)
if sharing["slowdown"] < 1:  # faster side by side: on two cores, only noise can do that
    verdict = (
        f"no slower: on two cores the shared updates cannot really have been faster, so the "
        f"{100 * (1 - sharing['slowdown']):.0f} % between the two is the noise of a "
        f"{sharing['steps']}-update measurement. Two arms at a time therefore do about twice the "
        f"work of one; the measurement resolves no slowdown, and no more than that"
    )
else:
    verdict = (
        f"{sharing['slowdown']:.2f} times as long, so two arms at a time do "
        f"{2 / sharing['slowdown']:.2f} times the work of one"
    )
glue("bu_sharing_verdict", verdict, display=False)
glue("bu_sharing_steps", sharing["steps"], display=False)
glue("bu_eval_s", eval_s, display=False)
glue("bu_eval_share", 100 * eval_s / (sum(gaps) / len(gaps)), display=False)
glue("bu_full_s", full_s, display=False)
glue("bu_full_share", 100 * full_s / (sum(gaps) / len(gaps)), display=False)

# %% [markdown]
# The machine has two cores, and each arm runs on one. Side by side, an update of the reference
# arm took {glue:text}`bu_shared:.3f` s against {glue:text}`bu_alone:.3f` s alone, over
# {glue:text}`bu_sharing_steps` updates: {glue:text}`bu_sharing_verdict`. An
# evaluation on the 500-sentence dev subset took {glue:text}`bu_eval_s:.1f` s,
# {glue:text}`bu_eval_share:.1f` % of the time between two evaluations; scoring the whole dev set
# (6,003 sentences, and 500 greedy translations) took {glue:text}`bu_full_s:.0f` s, which at every
# evaluation would have been {glue:text}`bu_full_share:.0f` % — hence the subset during training
# and the whole dev set once at the end.
#
# What a larger model or batch costs on this CPU, from the arms' logs:

# %% tags=["hide-input"]
cost = []
for arm, what in (
    ("adam-1e-3-large", "the larger model"),
    ("adam-1e-3-batch-160", "batches of 160"),
    ("adam-1e-3-vocab-30k", "30,000-word shortlists"),
):
    if arm in by_arm:
        a, b = by_arm[arm], by_arm[ref]
        cost.append(
            f"- {what} (`{arm}`): {a['parameters (M)']:.1f} M parameters against "
            f"{b['parameters (M)']:.1f} M, {a['updates']:,} updates in the budget against "
            f"{b['updates']:,}, {a['target tokens/s']:,} target tokens per second against "
            f"{b['target tokens/s']:,}"
        )
Markdown("\n".join(cost))

# %% [markdown]
# ## The recipe of the `lite` profile
#
# The `lite` profile trains its five models with the settings of the arm with the lowest dev NLL at
# the comparison time — the lowest, not a winner above the noise floor: {glue:text}`bu_tied` are
# tied within it. The check below reads both files, so this page cannot describe a recipe
# that `nmt_lib/profiles/lite.toml` does not use.

# %% tags=["hide-input"]
lite = load_profile("lite").runs["RNNsearch-50"]
chosen = configs[found["chosen"]]
diff = recipe_differences(lite, chosen)
glue(
    "bu_lite_same", "uses exactly these settings" if not diff else f"differs: {diff}", display=False
)
assert not diff, f"profile lite does not use the chosen arm's recipe: {diff}"
recipe = recipe_of(chosen)
unused = {"adam": ("train.rho", "train.eps")}.get(chosen.train.optimizer, ())  # Adadelta's
unused += ("train.lr_decay",) if chosen.train.lr_schedule == "constant" else ()
recipe = {k: v for k, v in recipe.items() if k not in unused}
Markdown(
    "| setting | value |\n|---|---|\n" + "\n".join(f"| `{k}` | {v} |" for k, v in recipe.items())
)

# %% [markdown]
# The `lite` profile {glue:text}`bu_lite_same`. Each of them that the paper does not use is a row
# of the {doc}`../deviations` page.
#
# ## Search settings, chosen on dev
#
# How beam search ranks its finished hypotheses is part of the recipe too. GroundHog's beam search
# compares them by their total cost, $-\log p(y \mid x)$, which favours short translations; the
# alternative divides the cost by the length. The chosen arm's model decodes 1,000 dev sentences
# (never the test set) both ways, with a beam of 10:

# %% tags=["hide-input"]
import csv

with open(out / "search.csv", encoding="utf-8") as f:
    search_rows = list(csv.DictReader(f))
choice = budget_report.search_choice(out)
glue(
    "bu_search_norm",
    "their cost divided by their length" if choice["normalize"] else "their total cost",
    display=False,
)
assert lite.search.normalize == choice["normalize"], "profile lite: search.normalize"
Markdown(
    markdown.markdown_table(
        [{k: v for k, v in r.items() if k not in ("arm", "beam")} for r in search_rows]
    )
)

# %% [markdown]
# The higher dev BLEU ranks hypotheses by {glue:text}`bu_search_norm`, and the `lite` profile
# decodes so (`search.normalize`).
#
# ## The recipe at a `lite` model's budget
#
# Fifteen minutes rank the recipes; what do they give at the budget of a `lite` model? The chosen
# arm trained on to that budget (`python -m nmt_experiments.budget --extend`), and RNNencdec-50 with the
# same recipe and budget from scratch, both scored on the test set (newstest2014, beam 10, the
# search settings chosen on dev, tokenized BLEU as Table 1), with Figure 3's sentences:

# %% tags=["hide-input"]
ext = budget_report.extended(out)
long_run = ext.get(found["chosen"])
encdec = ext.get(f"{found['chosen']}-RNNencdec")
short_run = ext.get(f"{found['chosen']} (study arm)")
table = [
    {
        "model": f"`{name}`",
        "architecture": e["arch"],
        "updates": f"{e['updates']:,}",
        "minutes": round(e["minutes"], 1),
        "dev NLL (all dev)": None if e["dev_nll"] is None else round(e["dev_nll"], 2),
        "test BLEU": round(e["test_bleu"], 2),
        "brevity penalty": round(e["brevity_penalty"], 3),
    }
    for name, e in ext.items()
]
Markdown(markdown.markdown_table(table) if table else "*(not run)*")

# %% tags=["hide-input"]
values = dict.fromkeys(("bu_pair", "bu_pair_verdict", "bu_need_10", "bu_need_14"), "(not measured)")
values |= dict.fromkeys(("bu_att_peak", "bu_att_mono", "bu_long_bleu", "bu_long_min"), float("nan"))
if long_run and encdec:  # judged as chapter 8 judges Table 1's claim (nmt_experiments.core.judge)
    pair = Judge(
        {
            m: [np.array(r["stats_tok"])]
            for m, r in (("RNNsearch-50", long_run), ("RNNencdec-50", encdec))
        },
        long_run["src_len"],
    ).beats("RNNsearch-50 beats RNNencdec-50", "", [("RNNsearch-50", "RNNencdec-50")])
    values["bu_pair"] = pair["ours"]
    values["bu_pair_verdict"] = f"*{pair['verdict']}*: {pair['reason']}"
if long_run:
    records = read_json(long_run["dir"] / "attention.json")[:4]
    st = [
        alignment_stats(r["alpha"][:-1] if r["hyp_tokens"][-1:] == ["</s>"] else r["alpha"])
        for r in records
        if r.get("alpha")
    ]
    values["bu_att_peak"] = sum(x["peak"] for x in st) / len(st)
    values["bu_att_mono"] = (
        100 * sum(x["monotonic_steps"] for x in st) / max(sum(x["steps"] for x in st), 1)
    )
    values["bu_long_bleu"], values["bu_long_min"] = long_run["test_bleu"], long_run["minutes"]
if long_run and short_run:
    pts = [
        (short_run["minutes"], short_run["test_bleu"]),
        (long_run["minutes"], long_run["test_bleu"]),
    ]
    for target in (10, 14):
        t = budget_report.minutes_for_bleu(pts, target)
        values[f"bu_need_{target}"] = f"{t:,.0f} minutes" if t else "no finite time"
values["bu_margin"] = f"{MARGIN:+g}"
for key, value in values.items():  # the verdict is Markdown (its italics), the rest text
    glue(key, Markdown(value) if key == "bu_pair_verdict" else value, display=False)

# %% [markdown]
# RNNsearch-50 with the chosen recipe scores {glue:text}`bu_long_bleu:.2f` BLEU after
# {glue:text}`bu_long_min:.0f` minutes of one core. RNNsearch minus RNNencdec, same recipe and
# budget: {glue:text}`bu_pair`. By the rules that judge the claims of {doc}`08_experiments`
# (a margin of {glue:text}`bu_margin` BLEU, both models above the learning floor), Table 1's claim
# at this budget is {glue:md}`bu_pair_verdict`. On Figure 3's four sentences its generated words put on average
# {glue:text}`bu_att_peak:.2f` of their attention on one source word, and
# {glue:text}`bu_att_mono:.0f` % of the steps from one word to the next keep or advance the
# heaviest source word. A line through the two test scores of the chosen recipe (after the study's
# minutes and after the extension's), $\text{BLEU} = \kappa_0 + \kappa_1 \ln t$, reaches 10 BLEU after
# {glue:text}`bu_need_10` and 14 after {glue:text}`bu_need_14` of one core: a rough guide to what
# a larger budget buys, since such curves bend down as training goes on.
#
# ## The gap to the paper
#
# How far does a CPU-hour get, measured against the paper's five days? The training cost of one
# update is about three forward passes (the backward pass costs two), and a forward pass's
# multiply-adds follow from the sizes (`nmt_lib.paper.model.forward_macs`, at the mean length of a
# training pair of the `lite` data, for both models: the paper gives no lengths).

# %% tags=["hide-input"]
from nmt_lib.paper.model import forward_macs

paper_run = load_profile("paper").runs["RNNsearch-50"]
paper_updates = float(paper_table("table2")["RNNsearch-50"]["updates_1e5"]) * 1e5
# the mean training pair of the lite data (words + EOS), for both: the paper gives no lengths
train_stats = read_json(results_path("lite") / "data_summary.json")
train_stats = train_stats["max_len=50"]["train"]
lengths = tuple(train_stats[side]["words"] / train_stats["pairs"] + 1 for side in ("src", "trg"))
per_update = {
    "paper": 6 * forward_macs(paper_run.model, *lengths) * paper_run.data.batch_size,
    "ours": 6 * forward_macs(chosen.model, *lengths) * chosen.data.batch_size,
}
fit = found["fit"]
# what the lite run made (Table 2 of the experiments chapter: the mean over the seeds) and the
# compute ratio of its gap table, both from results/lite
lite_out = results_path("lite")
ours_updates = {r["model"]: r for r in tables.table2(lite_out)}["RNNsearch-50"]["updates"]
gap_rows = {r["model"]: r for r in tables.gap_to_paper(lite_out)}
ratio = gap_rows["RNNsearch-50"]["paper / ours compute"]
glue("bu_paper_updates", paper_updates, display=False)
glue("bu_flop_ratio", per_update["paper"] / per_update["ours"], display=False)
lite_trained = run_from_dict(read_json(lite_out / "manifest.json")["configs"]["RNNsearch-50"])
glue("bu_lite_minutes", lite_trained.train.max_hours * 60, display=False)
glue("bu_lite_updates", ours_updates, display=False)
glue("bu_compute_ratio", ratio, display=False)
import math

glue("bu_fit_alpha", fit["alpha"], display=False)
glue("bu_fit_beta", fit["beta"], display=False)
glue("bu_fit_rmse", fit["rmse"], display=False)
glue("bu_fit_lite", fit["alpha"] - fit["beta"] * math.log(ours_updates), display=False)
check = ""
if long_run:  # the fit against what the extension measured on the same dev subset
    log = (long_run["dir"] / "train_log.jsonl").read_text(encoding="utf-8").splitlines()
    last = [r for r in map(json.loads, log) if r.get("kind") == "eval"][-1]
    pred = fit["alpha"] - fit["beta"] * math.log(last["update"])
    check = (
        f" Extended to {last['update']:,} updates, the arm measured {last['dev_nll']:.1f} "
        f"where the line predicted {pred:.1f}."
    )
glue("bu_fit_check", check, display=False)
glue(
    "bu_paper_dev_nll",
    float(paper_table("table2")["RNNsearch-50"]["dev_nll"]),
    display=False,
)

# %% [markdown]
# The paper's RNNsearch-50 made {glue:text}`bu_paper_updates:,.0f` updates, each
# {glue:text}`bu_flop_ratio:.0f` times the multiply-adds of one of ours (its embeddings, states
# and shortlists are larger). In the {glue:text}`bu_lite_minutes:.0f` minutes of one core that
# the committed `lite` runs trained for, our RNNsearch-50 made {glue:text}`bu_lite_updates:,.0f` updates (the mean of
# its seeds, Table 2 of {doc}`08_experiments`): the paper spent {glue:text}`bu_compute_ratio:,.0f`
# times that computation (the gap table of the same chapter, which counts the multiply-adds of
# every update at the training data's mean sentence lengths).
#
# Over its {glue:text}`bu_at:.0f` minutes the chosen arm's dev NLL fell about linearly in the
# logarithm of its updates $u$: $\text{NLL} \approx$ {glue:text}`bu_fit_alpha:.1f` $-$
# {glue:text}`bu_fit_beta:.1f` $\ln u$ (root mean square error {glue:text}`bu_fit_rmse:.2f` nats
# on the dev subset), that is {glue:text}`bu_fit_beta:.1f` nats less for every $e$-fold more
# updates.{glue:text}`bu_fit_check` At the `lite` budget the line gives
# {glue:text}`bu_fit_lite:.1f`; the paper's model reached {glue:text}`bu_paper_dev_nll:.1f` on its
# (different) dev data, with a model {glue:text}`bu_flop_ratio:.0f` times as costly per update and
# 30,000-word shortlists. A straight line in $\ln u$ cannot be followed far: learning curves bend
# towards a floor that a quarter of an hour does not reveal, so these numbers say what a few times
# more budget buys, not what the paper's would. What the gap means for BLEU is what
# {doc}`08_experiments` measures.
#
# ## The paper's recipe at the `lite` budget
#
# Before this study the `lite` profile trained its five models with the paper's recipe. That run is
# kept, as the study's `paper` arm at full length, in `results/budget/lite-paper-recipe/`:

# %% tags=["hide-input"]
old = out / "lite-paper-recipe"
old_manifest = read_json(old / "manifest.json")
old_rows = []
for row, t2 in zip(tables.table1(old), tables.table2(old), strict=False):
    old_rows.append(
        {
            "model": row["model"],
            "updates": f"{t2['updates']:,}",
            "minutes": round(60 * t2["hours"]),
            "dev NLL (all dev)": t2["dev NLL"],
            "test BLEU": row["All"],
            "No UNK": row["No UNK"],
            "paper's test BLEU": row["paper All"],
        }
    )
old_cfg = run_from_dict(old_manifest["configs"]["RNNsearch-50"])
glue("bu_old_best", max(r["test BLEU"] for r in old_rows), display=False)
glue("bu_old_minutes", old_cfg.train.max_hours * 60, display=False)
glue(
    "bu_old_recipe", f"{old_cfg.train.optimizer}, the loss as a {old_cfg.train.loss}", display=False
)
glue("bu_old_commit", commit_text(old_manifest), display=False)
Markdown(markdown.markdown_table(old_rows))

# %% [markdown]
# Trained with {glue:text}`bu_old_recipe` (commit {glue:text}`bu_old_commit`), for
# {glue:text}`bu_old_minutes:.0f` minutes per model (RNNsearch-50\* twice that), no model passed
# {glue:text}`bu_old_best:.2f` BLEU. {doc}`08_experiments` shows the same five models trained with
# the recipe chosen here.
#
# ## The same recipe at the paper's sizes, on a GPU
#
# The `gpu` profile trains the paper's sizes (620-dimensional embeddings, 1000 hidden units,
# 30,000-word shortlists) with the recipe chosen here, in bf16 with each training step replayed as
# a CUDA graph, on the `lite` data. Its RNNsearch-50, given a few minutes of a GPU
# (`bench/gpu_reference.py`, from a pack of the data made by `python -m nmt_lib pack`):

# %% tags=["hide-input"]
gpu = results_path("gpu")
gpu_rows, gpu_values = [], {}
if (gpu / "manifest.json").is_file():
    gpu_manifest = read_json(gpu / "manifest.json")
    for where, name, label in (
        (gpu, "RNNsearch-50", "gpu"),
        (results_path("lite"), "RNNsearch-50", "lite"),
    ):
        if not (run_dir(where, name) / "bleu.json").is_file():
            continue
        summ = read_json(run_dir(where, name) / "train_summary.json")
        b = read_json(run_dir(where, name) / "bleu.json")
        nll = read_json(run_dir(where, name) / "nll.json")
        gpu_rows.append(
            {
                "profile": f"`{label}`",
                "device": summ["device"],
                "minutes": round(60 * summ["hours"], 1),
                "updates": f"{summ['updates']:,}",
                "epochs": round(summ["epochs"], 2),
                "dev NLL (all dev)": round(nll["dev"]["mean"], 2),
                "test BLEU": round(b["all"]["tok"]["score"], 2),
                "No UNK": round(b["no_unk"]["tok"]["score"], 2),
            }
        )
        if label == "gpu":
            gpu_values = {
                "bu_gpu_minutes": 60 * summ["hours"],
                "bu_gpu_updates": summ["updates"],
                "bu_gpu_bleu": b["all"]["tok"]["score"],
                "bu_gpu_device": summ["device"],
                "bu_gpu_share": 100 * summ["updates"] / paper_updates,
                "bu_gpu_commit": commit_text(gpu_manifest),
            }
    paper_t1 = paper_table("table1")["RNNsearch-50"]
    paper_t2 = paper_table("table2")["RNNsearch-50"]
    gpu_rows.append(
        {
            "profile": "the paper",
            "device": paper_t2["gpu"],
            "minutes": round(60 * float(paper_t2["hours"])),
            "updates": f"{paper_updates:,.0f}",
            "epochs": float(paper_t2["epochs"]),
            "dev NLL (all dev)": float(paper_t2["dev_nll"]),
            "test BLEU": float(paper_t1["bleu_all"]),
            "No UNK": float(paper_t1["bleu_no_unk"]),
        }
    )
for key in ("bu_gpu_minutes", "bu_gpu_updates", "bu_gpu_bleu", "bu_gpu_share"):
    glue(key, gpu_values.get(key, float("nan")), display=False)
for key in ("bu_gpu_device", "bu_gpu_commit"):
    glue(key, gpu_values.get(key, "(not run)"), display=False)
Markdown(markdown.markdown_table(gpu_rows) if gpu_values else "*(not run)*")

# %% [markdown]
# In {glue:text}`bu_gpu_minutes:.0f` minutes of one {glue:text}`bu_gpu_device` (commit
# {glue:text}`bu_gpu_commit`, `results/gpu/manifest.json`), RNNsearch-50 at the paper's sizes made
# {glue:text}`bu_gpu_updates:,.0f` updates, {glue:text}`bu_gpu_share:.1f` % of the paper's, and
# scored {glue:text}`bu_gpu_bleu:.2f` BLEU on newstest2014. (The paper's dev NLL is on its own
# dev data and shortlists: it is not comparable with ours.)
#
# ## Summary


# %% tags=["hide-input"]
def rank(arm):
    return next((k for k, (n, _) in enumerate(ranked, 1) if n == arm), None)


summary = []
if paper:
    summary.append(
        f"- With {found['compare_at']:.0f} minutes, the paper's recipe clipped "
        f"{100 * paper['clip_rate']:.0f} % of its updates and reached a dev NLL of "
        f"{paper['dev_nll']:.1f}; `{found['chosen']}` got there "
        + (f"{found['compare_at'] / reach:.1f} times sooner." if reach else "never.")
    )
summary.append(
    f"- The arms ranked by dev NLL at equal time: {', '.join(f'`{n}`' for n, _ in ranked)}. "
    f"Two pairs of replicate arms put the noise floor at {floor:.2f} nats; within it of the first, "
    f"{', '.join(f'`{n}`' for n in tied)} are not told apart. The `lite` profile trains with the "
    f"first's recipe"
    + (
        f", and its learning rate over `{lr_arm}`'s is a choice within the noise."
        if lr_text and lr_arm in tied
        else "."
    )
)
for arm, what in (
    ("adam-1e-3-large", "the larger model"),
    ("adam-1e-3-batch-160", "batches of 160"),
    ("adam-1e-3-vocab-30k", "the 30,000-word shortlists"),
):
    if rank(arm) is not None and rank(ref) is not None:
        gap = delta(ref, arm)
        verb = "learned less" if rank(arm) > rank(ref) else "learned more"
        if abs(gap) < floor:
            verb = "did not differ, within the noise floor, from"
        else:
            verb += " than"
        summary.append(f"- In this budget {what} {verb} the reference arm per CPU-minute.")
glue("bu_summary", Markdown("\n".join(summary)), display=False)

# %% [markdown]
# ```{glue:md} bu_summary
# :format: myst
# ```
#
# ## Exercises
#
# 1. The arms `paper` and `adadelta-sentence` differ only in the scale of the loss: a sum over some
#    2,000 target tokens, or that sum divided by the 80 sentences. Why do their curves nearly
#    coincide? (Look at the table's *clipped* column.)
# 2. Adam divides each gradient coordinate by a running estimate of its magnitude. What does that
#    make of the choice between the loss summed over the sentences and its mean, when no update
#    is clipped? And when every update is?
# 3. The study compares arms at equal *wall-clock time*, not at an equal number of updates. Which
#    arms would rank differently at equal updates, and why is time the right axis here?
#
# :::{admonition} Solutions
# :class: dropdown
#
# 1. Both clip every update: the gradient of the sum has a norm of thousands, that of the mean
#    tens, and either is rescaled to norm 1. After clipping the two gradients are the same vector,
#    so Adadelta makes the same steps; what differs is how many updates each arm made in its
#    minutes.
# 2. Nothing, up to Adam's $\epsilon$: its step $\hat m / (\sqrt{\hat v} + \epsilon)$ does not
#    change when every gradient is multiplied by the same constant, and dividing by the (fixed)
#    number of sentences is such a constant. When every update is clipped, Adam sees unit-norm
#    gradients in both cases, so again the steps are the same. The normalisation matters when
#    some updates are clipped and others not: then it decides which ones.
# 3. The larger model and the larger batch: per update they see more (more parameters, more
#    sentences), so at equal updates they look better. But each update costs them about twice the
#    time, and a budget is measured in hours, not updates.
# :::
