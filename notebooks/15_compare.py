# %% [markdown]
# # Before and after the paper: the results
#
# **What you will see.** The models of this part trained on the same data, at the same sizes,
# with the same recipe and the same budget of CPU time as the `lite` profile's RNNencdec-50 and
# RNNsearch-50, and evaluated by the same code: one table beside those two rows of Table 1, Figure 2
# for every model, the attention of each attention model on a sentence of Figure 3, and a verdict,
# with its bootstrap interval, for each claim the comparison tests. The runs are committed in
# `results/compare/` and this chapter only reads them.
#
# **What you need.** Table 1 and Figure 2 of this replication ({doc}`08_experiments`), how the
# claims are judged ({ref}`claims`), and the three chapters before this one: {doc}`12_seq2seq`,
# {doc}`13_luong`, {doc}`14_transformer`.
#
# ## The claims
#
# Three papers make claims that the comparison can test on one footing:
#
# 1. Bahdanau et al. (Figure 2): a fixed-length vector is a bottleneck on long sentences, and
#    attention removes it. If attention is what removes it, *every* attention model should hold up
#    on long sentences where the models without attention fall: Luong et al.'s global attention
#    and the Transformer as well as RNNsearch.
# 2. Sutskever et al. (§3.3): reading the source backwards makes an LSTM encoder–decoder
#    much better (test BLEU 25.9 → 30.6).
# 3. Vaswani et al. (Table 2): the Transformer translates better than the recurrent attention
#    models, at a fraction of their training cost.

# %% tags=["parameters"]
profile = "smoke"
train = False
results_dir = None
data_dir = None

# %% tags=["hide-input"]
import matplotlib.pyplot as plt
from IPython.display import Markdown
from myst_nb import glue

from nmt_lib import claims, comparison, plots, tables
from nmt_lib.config import run_from_dict
from nmt_lib.io import read_json
from nmt_lib.results import commit_text, require_results, run_dir

out = comparison.RESULTS
require_results(out, "manifest.json", "runs")
manifest = read_json(out / "manifest.json")
where = comparison.models(out)
configs = {name: run_from_dict(c) for name, c in manifest["configs"].items()}
first = configs[manifest["runs"][0]]
glue("cmp_minutes", first.train.max_hours * 60, display=False)
glue("cmp_cpu", manifest["hardware"]["cpu_model"] or manifest["hardware"]["cpu"], display=False)
glue("cmp_commit", commit_text(manifest), display=False)
glue("cmp_created", manifest["created_utc"], display=False)
glue("cmp_n", len(manifest["runs"]), display=False)
precision = read_json(run_dir(out, manifest["runs"][0]) / "train_summary.json")["precision"]
glue("cmp_precision", precision, display=False)

# %% [markdown]
# ## How the numbers are computed
#
# The study profile `nmt_lib/profiles/studies/compare.toml` is `lite`'s RNNsearch-50 with only the
# architecture changed (a test, `tests/test_models.py`, checks that data, vocabularies, sizes,
# recipe, budget and search are `lite`'s). Its {glue:text}`cmp_n` models were trained for
# {glue:text}`cmp_minutes:.0f` minutes of one core of an {glue:text}`cmp_cpu` each, two side by
# side, in {glue:text}`cmp_precision`, evaluations included, by the same `train_and_evaluate` as
# the paper's models ({doc}`08_experiments`); the results were produced on
# {glue:text}`cmp_created` from commit {glue:text}`cmp_commit`, and `results/compare/manifest.json`
# records the resolved configs, the data's sha256, the hardware and the versions. To regenerate
# them (about three hours of training on 2 cores), then the tables of this page:
#
# ```bash
# python -m nmt_lib.replicate --train nmt_lib/profiles/studies/compare.toml --jobs 2
# python -m nmt_lib.comparison
# ```
#
# The models are deliberately small and briefly trained: read the rows against each other, not
# against the papers' numbers. What each model simplifies is on the deviations page
# ({ref}`deviations-other-models`). The "peeky" LSTM of {doc}`12_seq2seq` has RNNencdec's wiring,
# so its row beside `lite`'s RNNencdec-50 shows what LSTMs instead of GRUs change there.
#
# ## The table

# %%
rows = comparison.table(out)
Markdown(tables.markdown_table(rows) + "\n" + comparison.NOTE.split(" 95%")[0]
         + " Dev NLL: nats per sentence, on all of dev. train tok/s: target words per second "
           "of one core, the median of the training log.")  # fmt: skip

# %% tags=["hide-input"]
by = {r["model"]: r for r in rows}
best = max(rows, key=lambda r: r["All"])
glue("cmp_best", best["model"], display=False)
glue("cmp_best_bleu", best["All"], display=False)
glue("cmp_search_bleu", by["RNNsearch-50"]["All"], display=False)
glue("cmp_encdec_bleu", by["RNNencdec-50"]["All"], display=False)
ranked = sorted(rows, key=lambda r: -r["All"])
glue("cmp_order", ", ".join(f"{r['model']} ({r['All']})" for r in ranked), display=False)
attn = [m for m, d in where.items() if comparison.has_attention(d, m)]
plain = [m for m in where if m not in attn]
palette = {m: f"C{k}" for k, m in enumerate(where)}
styles = {m: {"ls": "-" if m in attn else "--", "color": palette[m]} for m in where}
glue("cmp_best_plain", max(by[m]["All"] for m in plain), display=False)
glue("cmp_worst_attn", min(by[m]["All"] for m in attn), display=False)
fastest = max(rows, key=lambda r: r["train tok/s"])
glue("cmp_fastest", f"{fastest['model']} ({fastest['train tok/s']:,} tok/s)", display=False)

# %% [markdown]
# Ranked by BLEU on all test sentences: {glue:text}`cmp_order`. Every model with attention scores
# at least {glue:text}`cmp_worst_attn` BLEU; the best model without attention scores
# {glue:text}`cmp_best_plain`. The models differ in what an update costs as well as in what it
# learns: the most tokens per second went through {glue:text}`cmp_fastest`.
#
# ## A budget of time, or of updates?
#
# A budget of minutes ranks architectures *and* implementations: a model whose update costs more
# makes fewer of them. The GRU models run on this library's fast backend ({doc}`11_fast`); the
# others run as plain PyTorch modules. The curves below separate the two: dev NLL against minutes
# (what the budget bought) and against updates (what each update learned).

# %%
dev = comparison.dev_curves(out)
common, nll_at = comparison.at_updates(dev)
fig = plots.nll_by_time_and_updates(dev, styles)
glue("cmp_dev_fig", fig, display=False)
plt.close(fig)
per_update = [{"model": m, "seconds per update": round(3600 * by[m]["hours"] / by[m]["updates"], 2),
               f"dev NLL at update {common:,}": round(nll_at[m], 1),
               "dev NLL at the end": round(dev[m][-1]["dev_nll"], 1)} for m in where]  # fmt: skip
glue("cmp_common", f"{common:,}", display=False)
glue("cmp_nll_order", ", ".join(f"{m} ({nll_at[m]:.1f})" for m in sorted(nll_at, key=nll_at.get)),
     display=False)  # fmt: skip
Markdown(
    tables.markdown_table(per_update) + "\nDev NLL: nats per sentence on the fixed dev "
    f"subset of {first.train.dev_nll_sentences} sentences that training evaluates."
)

# %% [markdown]
# ```{glue:figure} cmp_dev_fig
# :name: fig-compare-nll
#
# Dev NLL during training, against minutes of one core (left) and against updates (right);
# models with attention solid, models without dashed (the colours of
# {numref}`fig-compare-length`).
# ```
#
# At update {glue:text}`cmp_common`, the last that every model reached, the dev NLL ranks them:
# {glue:text}`cmp_nll_order`.
#
# ## Figure 2 for every model

# %%
curves, edges = comparison.curves(out)
fig = plots.fig2_bleu_by_length(curves, xmax=max(60, edges[-1]), styles=styles,
                                title="profiles: compare and lite")  # fmt: skip
glue("cmp_fig2", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} cmp_fig2
# :name: fig-compare-length
#
# BLEU of the test translations against the length of the source sentence (buckets of 10 words,
# as {numref}`fig-bleu-length`), for every model of the comparison and `lite`'s RNNencdec-50 and
# RNNsearch-50: models with attention solid, models without dashed.
# ```
#
# ## The verdicts
#
# The rules are those of {ref}`claims`: a model "beats" another when every 95% interval of their
# paired BLEU difference is above {glue:text}`cmp_margin` BLEU; a model "holds up" on long
# sentences when its BLEU on sentences of {glue:text}`cmp_long` words or more, divided by its BLEU
# on sentences of fewer than {glue:text}`cmp_short`, has an interval that reaches
# {glue:text}`cmp_holds`, and is above every such ratio of the models without attention.

# %%
judged = comparison.claims(out)
Markdown(tables.markdown_table(judged) + "\n" + comparison.NOTE)

# %% tags=["hide-input"]
glue("cmp_margin", f"{claims.MARGIN:g}", display=False)
glue("cmp_long", claims.LONG, display=False)
glue("cmp_short", claims.SHORT, display=False)
glue("cmp_holds", claims.HOLDS, display=False)
held = [r["claim"].split(":")[0] for r in judged[: len(attn)] if r["verdict"] == "reproduced"]
not_held = [r["claim"].split(":")[0] for r in judged[: len(attn)] if r["verdict"] != "reproduced"]


def names(ms):
    return ", ".join(ms) if ms else "none"


glue("cmp_held", names(held), display=False)
glue("cmp_not_held", names(not_held), display=False)
glue("cmp_bottleneck", "Yes, for every one." if not not_held else "Not for every one.",
     display=False)  # fmt: skip
reversal = next(r for r in judged if r["claim"].startswith("Reversing"))
glue("cmp_reversal", reversal["verdict"], display=False)
glue("cmp_reversal_ours", reversal["ours"], display=False)
tf = next((r for r in judged if r["claim"].startswith("The Transformer beats")), None)
glue("cmp_transformer", (
    f"{tf['verdict']} at {first.train.max_hours * 60:.0f} minutes of one CPU core: {tf['ours']}"
    if tf else "not measured: the results have no Transformer run"
), display=False)  # fmt: skip

# %% [markdown]
# **Does attention remove the bottleneck for every attention variant?**
# {glue:text}`cmp_bottleneck` The models that hold up on long sentences by the rule above:
# {glue:text}`cmp_held`; those that do not, or where the test set cannot tell:
# {glue:text}`cmp_not_held`.
#
# A ratio is only as certain as the BLEU under it: a model that barely translates the short
# sentences gives a ratio whose interval spans almost everything, and a difference from it that
# the test set cannot sign. The BLEU of every model is in the table above, its curve in
# {numref}`fig-compare-length`.
#
# **Does reversing the source help an LSTM without attention?** Sutskever et al.'s claim is
# **{glue:text}`cmp_reversal`** here: {glue:text}`cmp_reversal_ours`.
#
# **Where does the Transformer stand at this budget?** Vaswani et al.'s claim, that it beats the
# recurrent attention models, is {glue:text}`cmp_transformer`. The Transformer here has none of
# what its paper trains it with: no warm-up of the learning rate, no dropout, no label smoothing,
# and thousands of updates where the paper's base model made 100,000 on 8 GPUs. A verdict is about
# this budget, not about the architecture.
#
# ## What the searches made of each model
#
# BLEU scores what the beam search returns, and a search can go wrong where the model is only
# a little unsure. The table counts three symptoms in each model's test translations:

# %%
shapes = comparison.outputs(out)
Markdown(tables.markdown_table(shapes) + "\n" + comparison.OUTPUTS_NOTE)

# %% tags=["hide-input"]
loopiest = max(shapes, key=lambda r: r["looping (%)"])
longest = max(shapes, key=lambda r: r["length / reference"])
glue("cmp_loop_model", loopiest["model"], display=False)
glue("cmp_loop_pct", loopiest["looping (%)"], display=False)
glue("cmp_loop_search", next(r for r in shapes if r["model"] == "RNNsearch-50")["looping (%)"],
     display=False)  # fmt: skip
glue("cmp_long_model", longest["model"], display=False)
glue("cmp_long_ratio", longest["length / reference"], display=False)
glue("cmp_long_unfinished", longest["unfinished"], display=False)

# %% [markdown]
# {glue:text}`cmp_loop_model` repeats itself most: a 3-word sequence (without `<unk>`) comes back
# at least three times in {glue:text}`cmp_loop_pct`% of its translations, against
# {glue:text}`cmp_loop_search`% for RNNsearch-50. The longest output is
# {glue:text}`cmp_long_model`'s, {glue:text}`cmp_long_ratio` times as long as the references, with
# {glue:text}`cmp_long_unfinished` hypotheses still open at the length limit. Both cost BLEU
# through its n-gram precisions, as a short output costs it through the brevity penalty. The
# search divides a hypothesis's cost by its length (`search.normalize`, chosen on dev for
# RNNsearch by {doc}`10_budget`): a model that gives a repeated phrase a high probability can then
# prefer a long loop to ending the sentence.
#
# ## Attention on a sentence of Figure 3

# %%
panels, summary = [], []
for m in attn:
    sentences, from_paper = tables.fig3_panels(where[m], m)
    panels.append({**sentences[0], "title": f"{m}: {sentences[0]['title']}"})
    a = claims.attention_summary(read_json(run_dir(where[m], m) / "attention.json"))
    summary.append({
        "model": m,
        "sentences": a["sentences"],
        "mean largest weight": round(a["peak"], 2),
        "uniform weight": round(a["uniform"], 2),
        "monotonic steps (%)": round(100 * a["monotonic"]),
        "moves left, local": f"{a['moves_left']}, {a['local']}",
    })  # fmt: skip
fig = plots.fig3_alignments(panels, ncols=2, cell=0.25)
glue("cmp_fig3", fig, display=False)
plt.close(fig)
peaked = [s["model"] for s in summary if s["mean largest weight"] >= claims.PEAKED]
glue("cmp_peaked", names(peaked), display=False)
glue("cmp_peaked_rule", claims.PEAKED, display=False)
Markdown(tables.markdown_table(summary))

# %% [markdown]
# ```{glue:figure} cmp_fig3
# :name: fig-compare-attention
#
# The attention of each attention model on the first of Figure 3's sentences that it translated,
# drawn as {numref}`fig-alignments`: target words down, source words across, each weight in
# grayscale (0 black, 1 white). Luong et al.'s weights $a_t$ are computed from the current state
# $h_t$, Bahdanau et al.'s $\alpha_i$ from the previous state $s_{i-1}$; the Transformer's are its
# last decoder layer's encoder–decoder weights, averaged over the heads.
# ```
#
# The table above sums the alignments of every sentence whose attention each run stored (Figure
# 3's and test sentences drawn by the paper's rule), as {ref}`claims` does for RNNsearch-50: the
# attention of a generated word is peaked (at least {glue:text}`cmp_peaked_rule` of it on one
# source word, on average) for {glue:text}`cmp_peaked`. The Transformer's weights are an average
# over heads and come from its last layer only, so they are a weaker picture of what it aligns
# than $\alpha_{ij}$ is of RNNsearch.
#
# ## What this comparison does not show
#
# Every model here is small and trained for minutes, so the table ranks what each architecture
# learns *early*, on a CPU, with a recipe chosen for RNNsearch ({doc}`10_budget`). The papers'
# models were trained for days with recipes chosen for them, and the Transformer in particular
# needs its warm-up and more updates than this budget allows. The long-sentence question is the
# one this budget answers best, because it is about the shape of each curve in
# {numref}`fig-compare-length`, not its height.
