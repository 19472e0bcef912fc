# %% [markdown]
# # What a CPU-hour buys: the budget study
#
# **What you will see.** Why a replication on a laptop cannot simply run the paper's recipe for
# fewer hours, and what it runs instead. The paper trained each model for about five days on a
# GPU, some 300,000 updates; a CPU core makes a few thousand in the same number of minutes. This
# page trains one model, RNNsearch-50 at the `lite` profile's sizes, for the same wall-clock time
# in several *arms* that each change one thing — the optimizer, its learning rate, how the loss
# is normalised, the model size, the batch size, the shortlist — and compares what each arm has
# learned at equal time. The `lite` profile of {doc}`08_experiments` trains with the winner.
#
# **What you need.** The training recipe of {doc}`06_training`. The study is run by
# `python -m nmt_lib.budget --train --jobs 2` (two arms at a time, one core each) and read here
# from the committed `results/budget/`; this page never trains.

# %% tags=["parameters"]
profile = "smoke"
train = False
results_dir = None
data_dir = None

# %%
import matplotlib.pyplot as plt
from IPython.display import Markdown
from myst_nb import glue

from nmt_lib import budget, plots, replicate
from nmt_lib.config import load_profile, run_from_dict

out = budget.RESULTS
replicate.require_results(out, "manifest.json", "arms.csv")
manifest = replicate.read_json(out / "manifest.json")
configs = {name: run_from_dict(c) for name, c in manifest["configs"].items()}
found = budget.findings(out)
ref = manifest["runs"][0]
glue("bu_n_arms", len(manifest["runs"]), display=False)
glue("bu_minutes", configs[ref].train.max_hours * 60, display=False)
glue("bu_cpu", manifest["hardware"]["cpu_model"] or manifest["hardware"]["cpu"], display=False)
glue("bu_commit", (manifest["git"]["commit"] or "uncommitted")[:10], display=False)
glue("bu_ref", ref, display=False)
glue("bu_dev_subset", configs[ref].train.dev_nll_sentences, display=False)

# %% [markdown]
# ## The setting
#
# Every arm trains RNNsearch-50 on the `lite` profile's data for {glue:text}`bu_minutes:.0f`
# minutes of one core of an {glue:text}`bu_cpu` (evaluations included), two arms side by side, in
# float32. Each arm differs from the reference arm `{glue:text}`bu_ref`` in the settings that the
# table below names; everything else, the initial weights included, is the same. Every 250 updates
# the dev NLL — Table 2's measure, nats per sentence — is computed on a fixed subset of
# {glue:text}`bu_dev_subset` dev sentences spread over newstest2012 and 2013 (a few per cent of
# the training time), and the greedy BLEU of the first 100 dev sentences; at the end the whole
# dev set is scored. The results were produced from commit {glue:text}`bu_commit`;
# `results/budget/manifest.json` holds the resolved configs, data checksums, hardware and versions.
#
# ## Why the paper's recipe stalls

# %%
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
# start at zero and grow slowly: a recipe that works over 300,000 updates, given a few thousand. After
# {glue:text}`bu_at:.0f` minutes the `paper` arm had reached a dev NLL of
# {glue:text}`bu_paper_nll:.1f`; the best arm, `{glue:text}`bu_chosen``, was there after
# {glue:text}`bu_reach:.1f` minutes, {glue:text}`bu_speedup:.1f` times sooner.
#
# ## The curves

# %%
fig = plots.budget_curves(budget.curves(out))
glue("bu_fig", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} bu_fig
# :name: fig-budget
#
# Dev NLL of the fixed dev subset (left) and greedy dev BLEU of the first 100 dev sentences (right)
# against minutes of training on one core, one line per arm; the reference arm is the thick black
# line.
# ```
#
# ## The arms at equal time

# %%
rows = budget.arm_table(out)
Markdown(replicate.markdown_table(rows))

# %% [markdown]
# *dev NLL @t min*: the subset's dev NLL after *t* minutes (interpolated between evaluations);
# *all dev, end*: the whole dev set (6,003 sentences) when the arm stopped; *dev BLEU*: greedy, 500
# dev sentences, tokenized. *target tokens/s*: the median over the training log, evaluations
# excluded.

# %%
ranked = found["ranked"]
lines = [f"{k}. `{name}`: {nll:.2f}" for k, (name, nll) in enumerate(ranked, 1)]
glue("bu_ranked", Markdown("\n".join(lines)), display=False)


def nll_at(name):
    return dict(ranked).get(name)


def delta(a, b):
    """How much lower (better) arm ``a``'s dev NLL is than arm ``b``'s at the comparison time."""
    return None if nll_at(a) is None or nll_at(b) is None else nll_at(b) - nll_at(a)


effects = {
    "the optimizer (Adam vs Adadelta, both with the per-sentence mean)": delta(
        ref, "adadelta-sentence"
    ),
    "the loss normalisation under Adadelta (per-sentence mean vs sum)": delta(
        "adadelta-sentence", "paper"
    ),
    "the per-sentence mean vs the sum under Adam": delta(ref, "adam-1e-3-loss-sum"),
    "the per-sentence mean vs the per-token mean under Adam": delta(ref, "adam-1e-3-loss-token"),
    "Adam's learning rate 1e-3 vs 3e-4": delta(ref, "adam-3e-4"),
    "Adam's learning rate 1e-3 vs 3e-3": delta(ref, "adam-3e-3"),
    "the lite sizes vs twice the parameters": delta(ref, "adam-1e-3-large"),
    "batches of 80 vs 160": delta(ref, "adam-1e-3-batch-160"),
    "10,000-word vs 30,000-word shortlists": delta(ref, "adam-1e-3-vocab-30k"),
}
text = [
    f"- {what}: {'+' if d > 0 else '−'}{abs(d):.2f} nats in favour of the "
    f"{'first' if d > 0 else 'second'}"
    for what, d in effects.items()
    if d is not None
]
glue("bu_effects", Markdown("\n".join(text)), display=False)

# %% [markdown]
# Ranked by the subset's dev NLL at {glue:text}`bu_at:.0f` minutes (lower is better):
#
# ```{glue:md} bu_ranked
# :format: myst
# ```
#
# Each comparison below is one setting changed, everything else equal, at
# {glue:text}`bu_at:.0f` minutes (the difference in dev NLL, nats per sentence):
#
# ```{glue:md} bu_effects
# :format: myst
# ```
#
# On this CPU a step's time grows with the work it does: twice the parameters or twice the batch
# cost about twice the time per update, so at equal time they make half the updates. Larger models
# pay off only after many more updates than a short budget has.
#
# ## The recipe of the `lite` profile
#
# The `lite` profile trains its five models with the settings of the arm with the lowest dev NLL at
# the comparison time. The check below reads both files, so this page cannot describe a recipe
# that `configs/lite.toml` does not use.

# %%
lite = load_profile("lite").runs["RNNsearch-50"]
chosen = configs[found["chosen"]]
diff = budget.recipe_differences(lite, chosen)
glue(
    "bu_lite_same", "uses exactly these settings" if not diff else f"differs: {diff}", display=False
)
assert not diff, f"configs/lite.toml does not use the chosen arm's recipe: {diff}"
recipe = budget.recipe(chosen)
Markdown(
    "| setting | value |\n|---|---|\n" + "\n".join(f"| `{k}` | {v} |" for k, v in recipe.items())
)

# %% [markdown]
# `configs/lite.toml` {glue:text}`bu_lite_same`. Each of them that the paper does not use is a row
# of the {doc}`../deviations` page.
#
# ## Search settings, chosen on dev
#
# How beam search ranks its finished hypotheses is part of the recipe too. GroundHog's beam search
# compares them by their total cost, $-\log p(y \mid x)$, which favours short translations; the
# alternative divides the cost by the length. The chosen arm's model decodes 1,000 dev sentences
# (never the test set) both ways, with a beam of 10:

# %%
import csv

with open(out / "search.csv", encoding="utf-8") as f:
    search_rows = list(csv.DictReader(f))
choice = budget.search_choice(out)
glue(
    "bu_search_norm",
    "divided by the length" if choice["normalize"] else "the total cost",
    display=False,
)
assert lite.search.normalize == choice["normalize"], "configs/lite.toml: search.normalize"
Markdown(replicate.markdown_table(search_rows))

# %% [markdown]
# The higher dev BLEU ranks hypotheses by {glue:text}`bu_search_norm`, and `configs/lite.toml`
# decodes so (`search.normalize`).
#
# ## The gap to the paper
#
# How far does a CPU-hour get, measured against the paper's five days? The training cost of one
# update is about three forward passes (the backward pass costs two), and a forward pass's
# multiply-adds follow from the sizes (`nmt_lib.model.forward_macs`).

# %%
from nmt_lib.model import forward_macs

paper_run = load_profile("paper").runs["RNNsearch-50"]
paper_updates = float(replicate.paper_table("table2")["RNNsearch-50"]["updates_1e5"]) * 1e5
lengths = (27.0, 29.0)  # words + EOS, source and target: a typical sentence of the training data
per_update = {
    "paper": 6 * forward_macs(paper_run.model, *lengths) * paper_run.data.batch_size,
    "ours": 6 * forward_macs(chosen.model, *lengths) * chosen.data.batch_size,
}
fit = found["fit"]
ours_updates = found["updates_per_minute"] * lite.train.max_hours * 60
ratio = paper_updates * per_update["paper"] / (ours_updates * per_update["ours"])
glue("bu_paper_updates", paper_updates, display=False)
glue("bu_flop_ratio", per_update["paper"] / per_update["ours"], display=False)
glue("bu_lite_minutes", lite.train.max_hours * 60, display=False)
glue("bu_lite_updates", ours_updates, display=False)
glue("bu_compute_ratio", ratio, display=False)
glue("bu_fit_a", fit["a"], display=False)
glue("bu_fit_c", fit["c"], display=False)
glue("bu_fit_rmse", fit["rmse"], display=False)
glue("bu_fit_lite", fit["a"] + fit["b"] * ours_updates ** -fit["c"], display=False)
glue(
    "bu_paper_dev_nll",
    float(replicate.paper_table("table2")["RNNsearch-50"]["dev_nll"]),
    display=False,
)

# %% [markdown]
# The paper's RNNsearch-50 made {glue:text}`bu_paper_updates:,.0f` updates, each
# {glue:text}`bu_flop_ratio:.0f` times the multiply-adds of one of ours (its embeddings, states
# and shortlists are larger). At the chosen arm's speed, the {glue:text}`bu_lite_minutes:.0f`
# minutes that the `lite` profile gives RNNsearch-50 make about {glue:text}`bu_lite_updates:,.0f`
# updates: the paper spent {glue:text}`bu_compute_ratio:,.0f` times that computation.
#
# Fitted to the chosen arm's curve, $\text{NLL}(u) = a + b\,u^{-c}$ in the number of updates $u$
# gives $a =$ {glue:text}`bu_fit_a:.1f` and $c =$ {glue:text}`bu_fit_c:.2f` (root mean square error
# {glue:text}`bu_fit_rmse:.2f` nats). It predicts a dev NLL of {glue:text}`bu_fit_lite:.1f` for
# the `lite` RNNsearch-50; the paper's model reached {glue:text}`bu_paper_dev_nll:.1f` on its
# (different) dev data, with a model {glue:text}`bu_flop_ratio:.0f` times as costly and 30,000-word
# shortlists. A fit over a quarter of an hour says little about a model's limit: $a$ is where this
# curve would level off if its shape held, an optimistic floor for a model of this size, not a
# forecast for the paper's. What the gap means for BLEU is what {doc}`08_experiments` measures.
#
# ## Summary
#
# - With a budget of minutes, the paper's recipe wastes its updates: the summed loss's gradient is
#   clipped at every step, and Adadelta's step sizes start from zero.
# - Adam with the loss averaged over the sentences of a minibatch learns several times faster per
#   CPU-minute; the study ranks the alternatives and the `lite` profile uses the winner.
# - On a CPU without spare throughput, larger models and batches cost their size in time: at a
#   budget of minutes the small model wins.
#
# ## Exercises
#
# 1. Why does clipping the gradient norm to 1 make the learning rate of Adadelta irrelevant for the
#    summed loss, but not for the per-token mean loss?
# 2. Adam divides each gradient coordinate by a running estimate of its magnitude. What does that
#    make of the choice between the loss summed over the sentences and its mean, when no update
#    is clipped?
# 3. The study compares arms at equal *wall-clock time*, not at an equal number of updates. Which
#    arms would rank differently at equal updates, and why is time the right axis here?
#
# :::{admonition} Solutions
# :class: dropdown
#
# 1. Adadelta's step is $\Delta\theta = -\frac{\sqrt{E[\Delta\theta^2] + \epsilon}}{\sqrt{E[g^2] +
#    \epsilon}}\, g$: a clipped gradient has norm 1 whatever the loss's scale, so the scale of the
#    loss does not reach the step. With the per-token mean the gradient's norm is around one or
#    below, so some updates are not clipped and the loss's scale matters through $\epsilon$.
# 2. Almost nothing: Adam's step $\hat m / (\sqrt{\hat v} + \epsilon)$ is invariant to a constant
#    scale of the gradient (up to $\epsilon$), so the sum and the mean give the same steps. They
#    differ through clipping, which bounds the gradient *before* Adam sees it: the summed loss is
#    clipped at every step and the mean less often.
# 3. The larger model and the larger batch: per update they see more (more parameters, more
#    sentences), so at equal updates they look better. But each update costs them about twice the
#    time, and a budget is measured in hours, not updates.
# :::
