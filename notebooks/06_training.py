# %% [markdown]
# # Training
#
# **What you will derive.** The paper's training recipe — maximum likelihood with Adadelta,
# minibatches of 80 sorted by length, the gradient norm clipped to 1 — and one consequence the
# paper does not spell out: because the loss is a *sum* over some two thousand target words, the
# gradient is clipped at almost every update, and Adadelta's $\epsilon$ then makes each update a
# step of fixed size. You will check `nmt_lib`'s optimiser and clipping against the formulas and
# watch, on a tiny model, what happens when the sum is replaced by PyTorch's usual mean.
#
# **What you need.** The training objective {eq}`prob-mle` of {doc}`01_problem` and a model that
# computes $\log p(\mathbf y\mid\mathbf x)$ ({doc}`05_decoder`). Notation: {doc}`../notation`.
#
# ## The paper's claim
#
# Section 4.2 and Appendix B: each model is trained by minibatch stochastic gradient descent with
# Adadelta ($\epsilon = 10^{-6}$, $\rho = 0.95$); the $L_2$ norm of the gradient is normalised to
# be at most 1; a minibatch has 80 sentence pairs; every 20 updates, 1600 pairs are read, sorted by
# length and split into 20 minibatches. Recurrent matrices start as random orthogonal matrices,
# $W_a$ and $U_a$ with standard deviation $0.001$, $v_a$ and all biases at zero, and every other
# weight with standard deviation $0.01$ (Appendix B.1). Each model trained for about five days.

# %% tags=["parameters"]
profile = "lite"
train = False
results_dir = None
data_dir = None

# %% tags=["remove-cell"]
from nmt_experiments.core.results import check_parameters

check_parameters(profile, train, results_dir, data_dir)

# %%
import csv
import math

import matplotlib.pyplot as plt
import torch
from myst_nb import glue
from torch.testing import assert_close

from nmt_experiments.budget import report as budget_report
from nmt_experiments.replicate import replication as replicate
from nmt_lib.config import ModelConfig, TrainConfig
from nmt_lib.data import TrainIterator, prepare
from nmt_lib.gradients import clip_gradients
from nmt_lib.likelihood import sentence_nll
from nmt_lib.paper.model import RNNsearch, build_model, count_parameters

_ = torch.manual_seed(0)

# %% [markdown]
# ## The equations
#
# **The loss** of a minibatch is the negative log-likelihood of its reference translations,
# *summed* over every target word of every sentence, EOS included — the authors' code divides by
# nothing:
#
# $$
# L(\theta) = -\sum_{k=1}^{80} \sum_{i=1}^{T_y^{(k)}} \log p_\theta\big(y^{(k)}_i \mid y^{(k)}_{<i}, \mathbf x^{(k)}\big).
# $$ (train-loss)
#
# **Clipping.** With $g = \nabla_\theta L$ over all parameters and threshold $\tau = 1$ (GroundHog
# tests $\lVert g\rVert \ge \tau$):
#
# $$
# g \leftarrow g \cdot \frac{\tau}{\lVert g \rVert_2} \quad\text{if } \lVert g \rVert_2 \ge \tau .
# $$ (train-clip)
#
# **Adadelta** (Zeiler 2012) keeps two running averages per parameter, of squared gradients and of
# squared updates, and scales each coordinate by the ratio of their roots:
#
# $$
# \begin{aligned}
# E[g^2]_t &= \rho\, E[g^2]_{t-1} + (1-\rho)\, g_t^2, \\
# \Delta\theta_t &= -\frac{\sqrt{E[\Delta\theta^2]_{t-1} + \epsilon}}{\sqrt{E[g^2]_t + \epsilon}}\; g_t, \\
# E[\Delta\theta^2]_t &= \rho\, E[\Delta\theta^2]_{t-1} + (1-\rho)\, \Delta\theta_t^2,
#   \qquad \theta_t = \theta_{t-1} + \Delta\theta_t .
# \end{aligned}
# $$ (train-adadelta)
#
# **The interaction (PAPER.md §3, engineering note).** A summed loss over $\approx 80 \times 25$
# words has a gradient norm far above 1, so {eq}`train-clip` fires at almost every update and
# $\lVert g_t\rVert = 1$. Spread over the $P$ = {glue:text}`train_P` parameters of RNNsearch at the
# paper's sizes, a typical coordinate has $g^2 \approx 1/P \approx 10^{-8}$, so $(1-\rho) g^2 \ll \epsilon = 10^{-6}$. Then
# $E[g^2] \ll \epsilon$ and $E[\Delta\theta^2] \ll \epsilon$ in {eq}`train-adadelta`, and
#
# $$
# \Delta\theta_t \approx -\frac{\sqrt{\epsilon}}{\sqrt{\epsilon}}\, g_t = -g_t ,
# \qquad \lVert \Delta\theta_t \rVert \approx 1 :
# $$ (train-step)
#
# early in training, Adadelta with the paper's settings behaves like plain SGD with learning rate
# 1 on a unit-norm gradient: every update moves the parameters by about the same distance,
# whatever the loss scale.
#
# **What a mean over tokens changes.** Dividing the loss by the $N$ target words of the minibatch
# divides its gradient by $N$ and leaves its direction as it is. In the budget study
# ({doc}`15_budget`, the reduced model), two runs differ in nothing but the loss (Adam at the same
# learning rate, the same batches). The summed loss's gradient has a median norm of
# {glue:text}`train_norm_sum:,.0f` and is clipped at {glue:text}`train_clipped_sum:.0f`% of the
# updates, while the token mean's has a median norm of {glue:text}`train_norm_token:.2f` and is
# clipped at {glue:text}`train_clipped_token:.1f`%: a ratio of {glue:text}`train_norm_ratio:,.0f`,
# of the order of the target words in a minibatch. After the clip the two are about the same
# size: the sum's gradient is always cut to norm 1, the mean's is near 1 already. So the mean does
# *not* make the steps some thousand times smaller. What it changes is the rule for their length:
# with the sum and the clip, every update has the same norm, 1 (normalised gradient descent, for as
# long as the gradient stays above the threshold); with the mean, an update's length follows its
# gradient's norm whenever that is below 1, so it shrinks as the loss flattens, and a minibatch's
# weight no longer depends on how many words it holds. The sum and the clipping are therefore not
# details: together they set the effective learning rate.
#
# ## The library functions
#
# `nmt_lib.train` uses `torch.optim.Adadelta(lr=1.0, rho=0.95, eps=1e-6)` (PyTorch's default
# $\rho$ is 0.9) and GroundHog's gradient treatment, including its rule for a non-finite gradient
# (replace it by $0.1\,\theta$, which shrinks the weights):
#
# ```{literalinclude} ../../nmt_lib/gradients.py
# :pyobject: clip_gradients
# ```
#
# One update, with the summed loss:
#
# ```{literalinclude} ../../nmt_lib/trainer.py
# :pyobject: Trainer.step
# ```
#
# The update's order is the trainer's: the learning rate, GroundHog's gradient treatment
# (`treat_gradients`, which returns the clip's factor $\tau / \lVert g \rVert$ as `scale`), then the
# optimiser's step. The loss, its gradient and the step come from the run's backend (`self.backward`,
# `self.on.step`; `nmt_lib.backend.backend`, the recipe in `nmt_lib.recipe`). The plain one scales the
# gradients, then steps; the fast one gives the factor to `Adadelta.step(grad_scale=...)`, which multiplies each
# gradient by it in the same pass as the update: the same float32 numbers as scaling the gradients
# first, one pass over them fewer (`tests/test_train.py` checks the two bit for bit).
#
# The recipe lives in one config section, the paper's values as defaults:
#
# ```{literalinclude} ../../nmt_lib/config/run.py
# :pyobject: TrainConfig
# ```
#
# ## The numeric checks
#
# **Adadelta.** PyTorch's optimiser, as configured by `TrainConfig`, against {eq}`train-adadelta`
# written out, for five steps with random gradients in float64.

# %%
with torch.device("meta"):  # the paper-size model, counted without allocating it
    glue("train_P", f"{count_parameters(RNNsearch(ModelConfig())):,}", display=False)
arms_csv = budget_report.RESULTS / "arms.csv"  # the budget study
with open(arms_csv, newline="", encoding="utf-8") as f:
    arms = {row["arm"]: row for row in csv.DictReader(f)}
like = {"sum": "adam-1e-3-loss-sum", "token": "adam-1e-3-loss-token"}  # one optimizer, one lr
for key, arm in like.items():  # each arm differs from the reference in train.loss alone
    assert arms[arm]["differs from the reference"] == f"train.loss={key}"
    glue(f"train_norm_{key}", float(arms[arm]["median gradient norm"]), display=False)
    glue(f"train_clipped_{key}", float(arms[arm]["clipped (%)"]), display=False)
norms = [float(arms[arm]["median gradient norm"]) for arm in like.values()]
glue("train_norm_ratio", norms[0] / norms[1], display=False)
t = TrainConfig(max_updates=1)
theta = torch.randn(7, dtype=torch.float64, requires_grad=True)
opt = torch.optim.Adadelta([theta], lr=t.lr, rho=t.rho, eps=t.eps)
ref = theta.detach().clone()
Eg2, Ed2 = torch.zeros_like(ref), torch.zeros_like(ref)
for _ in range(5):
    g = torch.randn_like(ref) * 1e-3
    theta.grad = g.clone()
    opt.step()
    Eg2 = t.rho * Eg2 + (1 - t.rho) * g**2
    delta = -torch.sqrt(Ed2 + t.eps) / torch.sqrt(Eg2 + t.eps) * g
    Ed2 = t.rho * Ed2 + (1 - t.rho) * delta**2
    ref = ref + delta
assert_close(theta.detach(), ref)
assert (t.rho, t.eps, t.lr, t.clip_norm) == (0.95, 1e-6, 1.0, 1.0)
print("torch.optim.Adadelta(rho=0.95, eps=1e-6, lr=1) == equation (train-adadelta)")

# %% [markdown]
# **Clipping.** `clip_gradients` against {eq}`train-clip`: a large gradient is rescaled to norm 1, a
# small one is left alone, a non-finite one becomes $0.1\,\theta$.

# %%
p = torch.nn.Parameter(torch.randn(5, dtype=torch.float64))
for scale, expect in ((10.0, "clip"), (0.01, "none")):
    g = torch.randn(5, dtype=torch.float64) * scale
    p.grad = g.clone()
    norm, action = clip_gradients([p], 1.0, "shrink")
    assert action == expect and math.isclose(norm, g.norm().item(), rel_tol=1e-6)
    assert_close(p.grad, g * min(1.0, 1.0 / g.norm().item()), rtol=1e-6, atol=0)  # norm in fp32
p.grad = torch.full((5,), math.nan, dtype=torch.float64)
assert clip_gradients([p], 1.0, "shrink")[1] == "shrink"
assert_close(p.grad, 0.1 * p.detach())
print("clip_gradients == equation (train-clip); NaN gradient -> 0.1 * theta (GroundHog)")

# %% [markdown]
# ## A tiny demonstration: sum or mean?
#
# The same tiny RNNsearch, the same batches of the toy corpus (the smoke profile's data, generated
# on the spot), trained for 80 updates twice: with the paper's summed loss {eq}`train-loss`, and
# with the summed loss divided by the number of target words (PyTorch's `reduction="mean"`). Both
# clip at 1 and use the paper's Adadelta. We record the training NLL per word, how often clipping
# fires, the size $\lVert\Delta\theta_t\rVert$ of each update, and the dev NLL at the end.

# %%
torch.set_num_threads(1)  # a tiny model: one thread is fastest
smoke = replicate.load("smoke").runs["RNNsearch-50"]
prep = prepare(smoke.data)


def demo(reduction: str, updates: int = 80) -> dict:
    torch.manual_seed(0)
    model = build_model(smoke.model)
    params = list(model.parameters())
    opt = torch.optim.Adadelta(params, lr=t.lr, rho=t.rho, eps=t.eps)
    d = smoke.data
    batches = TrainIterator.from_config(prep.train, d)
    log = {"nll": [], "clipped": [], "step": []}
    for _ in range(updates):
        b = next(batches)
        logp, _ = model(b.x, b.x_mask, b.y, b.y_mask)
        loss = -logp.sum()  # (train-loss)
        log["nll"].append(loss.item() / b.n_trg_tokens)
        if reduction == "mean":
            loss = loss / b.n_trg_tokens
        opt.zero_grad()
        loss.backward()
        _, action = clip_gradients(params, t.clip_norm, t.nonfinite)
        before = torch.cat([q.detach().flatten() for q in params])
        opt.step()
        after = torch.cat([q.detach().flatten() for q in params])
        log["clipped"].append(action == "clip")
        log["step"].append((after - before).norm().item())
    dev = sentence_nll(model, prep.dev.x, prep.dev.y)
    log["dev_nll"] = sum(dev) / len(dev)
    return log


runs = {"sum (the paper)": demo("sum"), "mean over tokens": demo("mean")}
s, m = runs["sum (the paper)"], runs["mean over tokens"]
glue("train_clip_sum", 100 * sum(s["clipped"]) / len(s["clipped"]), display=False)
glue("train_clip_mean", 100 * sum(m["clipped"]) / len(m["clipped"]), display=False)
glue("train_step_sum", sum(s["step"]) / len(s["step"]), display=False)
glue("train_step_mean", sum(m["step"]) / len(m["step"]), display=False)
glue("train_dev_sum", s["dev_nll"], display=False)
glue("train_dev_mean", m["dev_nll"], display=False)

fig, (ax1, ax2) = plt.subplots(
    1, 2, figsize=(6.6, 3.2)
)  # the text column (nmt_experiments.core.plots)
for (name, r), style in zip(runs.items(), ["-", "--"], strict=True):
    ax1.plot(r["nll"], style, color="k", label=name)
    ax2.semilogy(r["step"], style, color="k", label=name)
ax1.set(xlabel="update", ylabel="train NLL per word (nats)")
ax2.set(xlabel="update", ylabel=r"update size $\|\Delta\theta_t\|$")
ax1.legend(frameon=False)
fig.tight_layout()
glue("train_demo_fig", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} train_demo_fig
# :name: fig-train-demo
#
# A tiny RNNsearch on the toy corpus, trained with the summed loss of the paper (solid) and with
# a per-word mean (dashed): training NLL per word (left) and the size of each update (right).
# ```
#
# With the summed loss, clipping fires at {glue:text}`train_clip_sum:.0f`% of the updates and the
# mean update size is {glue:text}`train_step_sum:.3f`; with the mean, clipping fires at
# {glue:text}`train_clip_mean:.0f`% and updates average {glue:text}`train_step_mean:.4f`. After
# the same 80 updates the dev NLL per sentence is {glue:text}`train_dev_sum:.1f` nats with the
# sum and {glue:text}`train_dev_mean:.1f` with the mean. The two kinds of update are of a size, as
# the argument above says: the mean is clipped less often, and its steps are the shorter only where
# its gradient's norm falls below 1. The model here is tiny, so $(1-\rho)g^2$ is not negligible
# against $\epsilon$ as it is at the paper's {glue:text}`train_P` parameters, but the mechanism of
# {eq}`train-step` is already visible.
#
# ## Summary
#
# - The loss is the summed NLL of the minibatch's reference words, {eq}`train-loss`; its gradient
#   norm is clipped to 1, {eq}`train-clip`; Adadelta with $\rho = 0.95$, $\epsilon = 10^{-6}$ takes
#   the step, {eq}`train-adadelta`.
# - With the paper's model size, $\epsilon$ dominates Adadelta's denominators early on, so a
#   clipped update is a step of norm about 1, {eq}`train-step`. A mean over tokens divides the
#   gradient by the number of words, but after the clip its updates are about as large: what it
#   changes is that their length then follows the gradient's norm instead of being fixed at 1.
# - This recipe was made for the paper's 300,000 updates. In a budget of minutes it barely starts
#   learning: {doc}`15_budget` measures named alternatives (`train.optimizer`, `train.loss`, ...)
#   per CPU-minute, and the reduced `lite` profile trains with the one that learned fastest.
# - `nmt_lib.train` computes exactly these (checked above, and in `tests/`), and records the
#   gradient norm and clip rate of every run in its training log.
#
# ## Exercises
#
# 1. Compute the first Adadelta step $\Delta\theta_1$ exactly, from zero-initialised averages.
#    For which gradient values is $|\Delta\theta_1| \approx |g_1|$, and for which is it
#    $\approx \sqrt{\epsilon/(1-\rho)}$?
# 2. Sorting 20 minibatches at a time by length (App. B.2) reduces padding. Why not sort the whole
#    corpus once?
# 3. GroundHog replaces a non-finite gradient by $0.1\,\theta$. What does one Adadelta step on that
#    "gradient" do to the weights?
#
# :::{admonition} Solutions
# :class: dropdown
#
# 1. $E[g^2]_1 = (1-\rho) g_1^2$, $E[\Delta\theta^2]_0 = 0$, so
#    $\Delta\theta_1 = -\sqrt{\epsilon}\, g_1 / \sqrt{(1-\rho) g_1^2 + \epsilon}$. If
#    $(1-\rho) g_1^2 \ll \epsilon$ it is $\approx -g_1$; if $(1-\rho) g_1^2 \gg \epsilon$ it is
#    $\approx -\operatorname{sign}(g_1)\sqrt{\epsilon/(1-\rho)} \approx \mp 4.5\cdot 10^{-3}$.
# 2. Then every minibatch would hold sentences of one length, and consecutive updates would see
#    only short, then only long sentences: the gradient would no longer be an unbiased estimate
#    over the corpus. Sorting small groups keeps the order random at the scale of 20 updates.
# 3. It moves every weight towards zero in proportion to its size: weight decay, a shrink step
#    that usually brings the model back from a numerically bad region.
# :::
