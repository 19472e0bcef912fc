# %% [markdown]
# # How the studies were run
#
# **What you will see.** The bookkeeping behind the verdicts of {doc}`08_experiments` and
# {doc}`13_compare`: what it would cost to train lite's models past the learning floor (a pilot),
# the study that trains them that far (lite-long), its progress and its cost; the recipe sweep and
# the search settings that give each model of the comparison its own recipe, and what the searches
# made of each model; and the comparison asked again where compute is plentiful, on one GPU. The
# chapters of the Experiments part state the claims and their verdicts; this one says what the
# runs behind them cost and how their settings were chosen.
#
# **What you need.** The learning floor and the verdicts ({ref}`claims`), the comparison
# ({doc}`13_compare`), and the budget study ({doc}`15_budget`), whose measure of time this chapter
# uses.

# %% tags=["parameters", "hide-input"]
profile = "lite"
train = False
results_dir = None
data_dir = None

# %% tags=["hide-input", "remove-cell"]
from nmt_experiments.core.results import check_parameters

check_parameters(profile, train, results_dir, data_dir)

# %% tags=["hide-input"]
import csv

import matplotlib.pyplot as plt
from IPython.display import Markdown, display
from myst_nb import glue

from nmt_experiments.comparison import footing, recipe_sweep
from nmt_experiments.comparison import runs as comparison
from nmt_experiments.core import claims, figures, markdown, plots
from nmt_experiments.core.results import (
    commit_text,
    paper_table,
    require_results,
    results_path,
    run_dir,
)
from nmt_experiments.pilot import report as pilot_report
from nmt_experiments.replicate import lite_long, paper_claims
from nmt_lib.io import read_json

out = comparison.RESULTS
require_results(out, "manifest.json", "runs")
manifest = read_json(out / "manifest.json")
by_updates = bool(comparison.config(out, manifest["runs"][0])["train"]["max_updates"])
glue("cmp_compute", footing.compute_text(out), display=False)
lite_hours = read_json(run_dir(results_path("lite"), "RNNencdec-50") / "train_summary.json")[
    "hours"
]
glue(
    "lite_minutes", f"{60 * lite_hours:.0f}", display=False
)  # lite's RNNencdec-50, from its record
paper_all = {m: float(r["bleu_all"]) for m, r in paper_table("table1").items()}

# %% [markdown]
# (pilot)=
# ## What passing the floor would cost: a pilot

# %% tags=["hide-input"]
pilot_out = results_path("pilot")
for name, value in pilot_report.book_numbers(pilot_out).items():
    glue(name, value, display=False)
pilot_fig = pilot_report.figure(read_json(pilot_out / "summary.json"), pilot_out)
glue("pilot_fig", pilot_fig, display=False)
plt.close(pilot_fig)

# %% [markdown]
# Before training lite's RNNencdec longer, a pilot measured what longer costs (`results/pilot/`):
# RNNencdec-50 on lite's data and sizes, budgets in updates, one arm at a time on one core, scored
# every {glue:text}`pilot_score_every` updates on the {glue:text}`pilot_short_sentences` test
# sentences of fewer than {glue:text}`pilot_short` words that the floor of {glue:text}`pilot_floor`
# BLEU is judged on, beside the dev NLL that training logs. The arms take the comparison's learning
# rate (3e-3; lite's is 1e-3), then also n = 512 (the one vector that carries the source), or batches
# of 160 pairs: {glue:text}`pilot_core_minutes` minutes of one thread in all.
#
# At 3e-3, {glue:text}`pilot_lr_3e_3_updates` updates reach dev NLL {glue:text}`pilot_lr_3e_3_last_nll`
# (1e-3: {glue:text}`pilot_lite_nll_at_first`) and {glue:text}`pilot_lr_3e_3_last_beam` BLEU with beam
# search: {glue:text}`pilot_lr_gap_early` nats ahead of 1e-3 after {glue:text}`pilot_lr_gap_early_updates`
# updates, {glue:text}`pilot_lr_gap_late` after {glue:text}`pilot_lr_gap_late_updates`. At equal
# core-time, n = 512 ends {glue:text}`pilot_lr_3e_3_n_512_ect_diff` nats
# {glue:text}`pilot_lr_3e_3_n_512_ect_word` the dev NLL of n = 256, twice the batch
# {glue:text}`pilot_lr_3e_3_batch_160_ect_diff` nats {glue:text}`pilot_lr_3e_3_batch_160_ect_word` it.
#
# To extrapolate, ln BLEU is fitted as a line in dev NLL (the pilot's beam-scored points and lite's
# three runs put the floor at dev NLL {glue:text}`pilot_floor_nll_beam`), and the second half of each
# NLL curve as a line in log updates. Lite's recipe reaches the floor after about
# {glue:text}`pilot_lr_1e_3_updates_to_floor_nll_beam` updates ({glue:text}`pilot_lr_1e_3_times_lite`
# times its {glue:text}`lite_minutes` minutes; its other seeds {glue:text}`pilot_lr_1e_3_s2_updates_to_floor_nll_beam` and
# {glue:text}`pilot_lr_1e_3_s3_updates_to_floor_nll_beam`), 3e-3 after about
# {glue:text}`pilot_lr_3e_3_updates_to_floor_nll_beam`, twice the batch after about
# {glue:text}`pilot_lr_3e_3_batch_160_updates_to_floor_nll_beam` of its updates (the shortest,
# steepest curve: the most optimistic estimate). The plan that would decide Table 1 (three seeds of RNNencdec-50 and
# RNNsearch-50, one of RNNencdec-30 and RNNsearch-30, at equal updates) costs
# {glue:text}`pilot_plan_factor` RNNencdec-50 updates per update, so {glue:text}`pilot_plan_core_hours`
# core-hours buy {glue:text}`pilot_lr_1e_3_plan_max_updates_lite` at lite's rate; at lite's recipe's
# estimate it takes {glue:text}`pilot_lr_1e_3_plan_core_hours_lite` core-hours and
# {glue:text}`pilot_lr_1e_3_plan_fits_lite` (twice the batch: {glue:text}`pilot_lr_3e_3_batch_160_plan_core_hours_lite`),
# by margins smaller than the extrapolation's own uncertainty: a curve that bends needs more.
# The study profile `nmt_lib/profiles/studies/lite-long.toml` is that plan, with lite's recipe for
# 45,000 updates per model and a second test set held out of Europarl, in-domain for the training
# data, beside newstest2014 ({ref}`deviations-lite-long`).
#
# ```{glue:figure} pilot_fig
# :name: fig-pilot
#
# The pilot's arms (RNNencdec-50 on lite's data, `results/pilot/`) beside lite's committed runs:
# BLEU on the test sentences of fewer than 30 words, greedy and with beam search (top), and the dev
# NLL (bottom), against updates on a log scale; the dotted lines extend each NLL curve to the dev
# NLL at the learning floor. `results/pilot/summary.md` gives the tables and the arithmetic.
# ```

# %% [markdown]
# (lite-long)=
# ## Past the floor: the study at 45,000 updates

# %% tags=["hide-input"]
long_out = results_path("lite-long")
for name, value in lite_long.book_numbers(long_out).items():
    glue(name, value, display=False)
long_rows = lite_long.progress(long_out)
long_fig = lite_long.figure(long_out)
glue("ll_fig", long_fig, display=False)
plt.close(long_fig)

# %% [markdown]
# The study profile trains lite's -50 pair, two seeds each, for up to {glue:text}`ll_budget`
# updates, where the pilot's lines put lite's RNNencdec-50 at dev NLL {glue:text}`ll_pred_nll`
# (its three seeds) and, through the line of BLEU in dev NLL, at {glue:text}`ll_pred_bleu` BLEU
# on the short sentences: {glue:text}`ll_pred_where` the floor of {glue:text}`pilot_floor`, which
# that line crosses at dev NLL {glue:text}`ll_floor_nll`. Trained and evaluated:
# {glue:text}`ll_trained` of its {glue:text}`ll_runs` runs (`results/lite-long/`).
# {glue:text}`ll_budgets` {glue:text}`ll_cost` {glue:text}`ll_left_out`
# {glue:text}`ll_measured` Each run is scored on newstest2014, the paper's test set, and on 3,003
# Europarl pairs that no training here reads, in the domain of most of the training data
# ({ref}`deviations-lite-long`). Table 1's claim for the pair and Figure 2's two parts are judged
# below on both, with the updates each model had: where RNNsearch-50 had fewer, its win counts a
# fortiori and a tie or a loss decides nothing.

# %% tags=["hide-input"]
note_ll = (
    "Profile `lite-long`. Tokenized BLEU on newstest2014 and on the held-out Europarl pairs "
    "(europarl-v7.heldout): All, every sentence; <30, the sentences of fewer than 30 source "
    "words, where the learning floor is judged. Dev NLL: the best, nats per sentence. A row "
    "without numbers: a run not trained yet."
)
label = {"newstest2014": "newstest", "europarl-v7.heldout": "held-out"}
shown = [
    {
        "run": r["run"],
        "updates": r["updates"],
        "dev NLL": r["dev NLL"],
        **{
            f"{label[t]} {kind}": r[f"{t} BLEU{suffix}"]
            for t in lite_long.test_sets()
            for kind, suffix in (("All", ""), ("<30", " <30"))
        },
    }
    for r in long_rows
]
Markdown(markdown.show_table(long_out, "progress", shown, note_ll, write=False))

# %% [markdown]
# ```{glue:figure} ll_fig
# :name: fig-lite-long
#
# Dev NLL against updates (log scale) of the study's trained runs, beside lite's RNNencdec-50
# ({glue:text}`lite_minutes` minutes, black), the pilot's line for it extended to the study's budget (dotted) and the dev
# NLL at which short-sentence BLEU crosses the learning floor (dashed).
# ```
#
# {glue:text}`ll_reader`

# %% tags=["hide-input"]
long_claims = lite_long.judged(long_out)
pair = {m: runs for m, runs in lite_long.groups(long_rows).items() if m in lite_long.PAIR}
if not long_claims:  # a study trained again, before its manifest
    display(Markdown("The claims are judged here once the study's manifest is written."))
for test_set, rows in long_claims.items():
    view = None if test_set == lite_long.PAPER_TEST else test_set
    display(Markdown(f"**On {test_set}.** " + markdown.claims_markdown(rows)))
    display(Markdown(paper_claims.note(long_out, "lite-long", view, pair)))
    curves_long, _ = figures.fig2_curves(long_out, lite_long.PAIR, view, pair)
    fig = plots.fig2_bleu_by_length(
        curves_long, xmax=60, title=f"lite-long, {test_set}", paper=paper_all
    )
    glue(f"ll_fig2_{label[test_set].replace('-', '_')}", fig, display=False)
    plt.close(fig)

# %% [markdown]
# ```{glue:figure} ll_fig2_newstest
# :name: fig-lite-long-fig2-newstest
#
# Figure 2 of the study on newstest2014: BLEU against source length of the models judged above
# (each the mean over its seeds), the paper's BLEU on all test sentences (Table 1) as thin grey
# lines.
# ```
#
# ```{glue:figure} ll_fig2_held_out
# :name: fig-lite-long-fig2-heldout
#
# Figure 2 of the study on the held-out Europarl pairs (europarl-v7.heldout), as above.
# ```

# %% [markdown]
# (recipes)=
# ## The comparison's recipes and searches
#
# The comparison ({doc}`13_compare`) trains every model for the same updates on the same batches,
# each with a recipe and search settings chosen on dev for its family. {glue:text}`cmp_compute`
#
# **Each model's own recipe.** One recipe chosen for RNNsearch would judge the others by how well
# they suit it. A short sweep per family (`nmt_lib/profiles/studies/recipes.toml`, run by
# `python -m nmt_experiments.comparison.recipes`) trains each setting for a third of the comparison's updates on the
# same batches and keeps the one of lowest dev NLL: Adam's learning rate for every family (3e-4,
# 1e-3, 3e-3 and 1e-2; an arm that diverges is a row of the table, never chosen); for the
# LSTMs the forget-gate bias of later practice; for Luong et al.'s model their stacked layers; for
# the Transformer its paper's schedule (linear warm-up, then inverse-square-root decay, Adam's
# β₂ = 0.98) against a constant rate, and its paper's dropout. Then each family's chosen model,
# as the sweep left it, decodes 500 dev sentences with and without length normalisation and with
# two length limits, and keeps the setting of highest dev BLEU. Label smoothing is not tried. To
# regenerate everything (the cost is given above; every stage resumes where it stopped), then the
# tables of this page:
#
# ```bash
# python -m nmt_experiments.comparison.recipes --train --jobs 2 && python -m nmt_experiments.comparison.recipes --search
# python -m nmt_experiments.comparison.recipes --write-profile
# python -m nmt_experiments.replicate --train nmt_lib/profiles/studies/compare.toml --jobs 2
# python -m nmt_experiments.comparison
# ```
#
# The models are deliberately small and briefly trained: read the rows against each other, not
# against the papers' numbers. What each model simplifies is on the deviations page
# ({ref}`deviations-other-models`).

# %% tags=["hide-input"]
Markdown(markdown.markdown_table(comparison.recipes(out)) + "\n" + comparison.recipes_note(out))

# %% tags=["hide-input"]
sweep = recipe_sweep.RESULTS / "recipes.csv"
swept = (
    list(csv.DictReader(sweep.read_text(encoding="utf-8").splitlines())) if sweep.is_file() else []
)
# one table a reader can follow row by row: the arm's settings beside its dev scores, the chosen
# arm marked in words (the family's name only on its first row)
shown = [
    {
        "model": r["model"] if k == 0 or r["model"] != swept[k - 1]["model"] else "",
        "settings": r["settings"].replace(",", ", "),
        "dev NLL": r["dev NLL"],
        "dev BLEU (greedy)": r["dev BLEU (greedy)"],
        "the recipe": "**chosen**" if r.get("chosen") == "True" else "",
    }
    for k, r in enumerate(swept)
]
Markdown(
    markdown.markdown_table(shown, fit=None)
    + "\n"
    + recipe_sweep.NOTE
    + "\n\n"
    + recipe_sweep.bracketed_text()
    if swept and by_updates
    else "*The recipe sweep's table is shown here once the comparison's runs are trained with "
    "its recipes.*"
)

# %% [markdown]
# ## What the searches made of each model
#
# BLEU scores what the beam search returns, and a search can go wrong where the model is only
# a little unsure. The table counts three symptoms in each model's test translations:

# %% tags=["hide-input"]
shapes = comparison.outputs(out)
Markdown(markdown.markdown_table(shapes) + "\n" + comparison.OUTPUTS_NOTE)

# %% tags=["hide-input"]
loopiest = max(shapes, key=lambda r: r["looping (%)"])
least = min(shapes, key=lambda r: r["looping (%)"])
longest = max(shapes, key=lambda r: r["length / reference"])
open_most = max(shapes, key=lambda r: r["unfinished"])
glue("cmp_loop_model", loopiest["model"], display=False)
glue("cmp_loop_pct", loopiest["looping (%)"], display=False)
glue("cmp_loop_least", f"{least['looping (%)']}% for {least['model']}", display=False)
glue("cmp_long_model", longest["model"], display=False)
glue("cmp_long_ratio", longest["length / reference"], display=False)
glue("cmp_open_model", open_most["model"], display=False)
glue("cmp_open_n", f"{open_most['unfinished']:,g}", display=False)

# %% [markdown]
# {glue:text}`cmp_loop_model` repeats itself most: a 3-word sequence (without `<unk>`) comes back
# at least three times in {glue:text}`cmp_loop_pct`% of its translations, against
# {glue:text}`cmp_loop_least`. {glue:text}`cmp_open_model` leaves the most translations
# unfinished: {glue:text}`cmp_open_n` of them (the mean over its seeds) were still open at the
# length limit, and the search cut them off there. The longest output is
# {glue:text}`cmp_long_model`'s, {glue:text}`cmp_long_ratio` times as long as the references.
# Loops cost BLEU through its n-gram precisions, as a short output costs it through the brevity
# penalty. A search that divides a hypothesis's cost by its length (`search.normalize`) lets a
# model that gives a repeated phrase a high probability prefer a long loop to ending the sentence;
# a tighter length limit (`search.max_len_ratio`) caps the loop. Which of the two each model
# searches with is in the recipes table above, chosen on dev.
#
# %% [markdown]
# ## Where compute is plentiful: one GPU
#
# The same question asked where compute is cheap: RNNsearch-50 at the paper's sizes and a
# Transformer at its own paper's base sizes, each with the recipe and search chosen for its family
# on the sweep above (at the sweep's small sizes on a CPU, carried over unchanged to these larger
# models: a transfer that is itself a suspect where a model fails), trained for the same minutes of
# one GPU on the `gpu` profile's data
# (`nmt_lib/profiles/studies/compare-gpu.toml`, `bench/gpu_compare.sh`). Equal time measures the
# architecture and its implementation together, and one short run per model gives no spread over
# seeds: read it as where each stands, not as a verdict.

# %% tags=["hide-input"]
gpu_rows = footing.gpu_view()
if gpu_rows:
    gm = read_json(footing.GPU_RESULTS / "manifest.json")
    device = next(iter(gm["hardware"]["device_per_run"].values()))
    short = f"All <{claims.SHORT} words"
    below = {r["model"]: r[short] for r in gpu_rows if r[short] < claims.FLOOR}
    above = [r for r in gpu_rows if r["model"] not in below]
    text = (
        f"On one {device}, in {gpu_rows[0]['minutes']:g} minutes each: "
        + "; ".join(
            f"{r['model']} made {r['updates']:,} updates ({r['train tok/s']:,} target "
            f"tokens/s) and scores {r['All']:.2f} BLEU"
            for r in gpu_rows
        )
        + f". ({commit_text(gm)}, {gm['created_utc'][:10]}.)"
    )
    if len(above) > 1:
        text += f" Of the models above the learning floor, {max(above, key=lambda r: r['All'])['model']} leads."
    if below:
        text += (
            f" Below the learning floor of {claims.FLOOR:g} BLEU, and so *not testable at this "
            f"budget*: {claims.floor_text(below)}. "
        )
    for model in below:
        opening, n, total = footing.commonest_opening(run_dir(footing.GPU_RESULTS, model))
        same = ": the same opening whatever the source" if 2 * n > total else ""
        text += f"{n:,} of {model}'s {total:,} test translations begin with “{opening}”{same}. "
    if any(m.startswith("Transformer") for m in below):
        text += footing.transformer_recipe(footing.GPU_RESULTS) + (
            footing.transformer_footing(footing.GPU_RESULTS)
        )
    note = (
        f"Profile `{gm['profile']}` (newstest2014, tokenized BLEU), one run per model, "
        f"{', '.join(sorted(set(gm['hardware']['precision_per_run'].values())))}; minutes: "
        "training, its evaluations on dev included."
    )
    display_gpu = Markdown(f"{text}\n\n{markdown.markdown_table(gpu_rows)}\n{note}")
else:
    display_gpu = Markdown("No GPU run of the comparison is committed (`results/gpu/compare/`).")
display_gpu

# %% [markdown]
# ## Summary
#
# - The pilot measures how far lite's RNNencdec-50 is from the learning floor and what passing it
#   costs; lite-long is the study that trains lite's models that far, judged by the same rules as
#   chapter 8, on the paper's test set and on a held-out in-domain one.
# - Each model of the comparison trains with a recipe and search settings chosen on dev for its
#   family, so that no model is judged by how well another model's recipe suits it.
# - The searches' failures (loops, unfinished translations) are counted for every model: BLEU
#   scores what the search returns, not what the model knows.
# - Equal time on one GPU is a second view of the comparison, not a verdict: it measures the
#   architecture and its implementation together.
