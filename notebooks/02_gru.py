# %% [markdown]
# # The gated recurrent unit
#
# **What you will derive.** The recurrent unit that every part of RNNsearch is built from: the
# gated recurrent unit (GRU) of Cho et al. (2014a), in the exact form the paper uses (Appendix A.1.1).
# You will see why its gates let gradients survive long sentences, how it differs from PyTorch's
# `torch.nn.GRU`, and check that `nmt_lib.paper.gru` computes exactly the equations below.
#
# **What you need.** A plain recurrent network $h_t = \tanh(W x_t + U h_{t-1})$, the logistic
# sigmoid $\sigma$, and the element-wise product $\circ$. Notation: {doc}`../notation`.
#
# ## The paper's claim
#
# The paper does not use a plain tanh RNN. Its Appendix A.1.1 uses gated hidden units, which "can
# adaptively remember and forget" and make it easier to learn long-term dependencies: an *update
# gate* $z$ decides how much of the state is replaced by a new candidate, and a *reset gate* $r$
# decides how much of the previous state the candidate may look at.

# %% tags=["parameters"]
profile = "lite"
train = False
results_dir = None
data_dir = None

# %% tags=["remove-cell"]
from nmt_experiments.core.results import check_parameters

check_parameters(profile, train, results_dir, data_dir)

# %%
import matplotlib.pyplot as plt
import torch
from myst_nb import glue
from torch.testing import assert_close

from nmt_lib.paper import gru

torch.manual_seed(0)
torch.set_num_threads(1)  # tiny tensors: one thread is fastest
torch.set_default_dtype(torch.float64)  # the checks compare formulas exactly, in float64

# %% [markdown]
# ## The equations
#
# For an input $x_t \in \mathbb R^m$ and the previous state $h_{t-1} \in \mathbb R^n$, with
# $W, W_z, W_r \in \mathbb R^{n\times m}$ and $U, U_z, U_r \in \mathbb R^{n\times n}$:
#
# $$
# r_t = \sigma(W_r x_t + U_r h_{t-1})
# $$ (gru-r)
#
# $$
# z_t = \sigma(W_z x_t + U_z h_{t-1})
# $$ (gru-z)
#
# $$
# \tilde h_t = \tanh\big(W x_t + b + U [r_t \circ h_{t-1}]\big)
# $$ (gru-cand)
#
# $$
# h_t = (1 - z_t) \circ h_{t-1} + z_t \circ \tilde h_t
# $$ (gru-h)
#
# The paper omits biases; the authors' code (GroundHog) has a bias $b$ on the candidate only, and
# so does `nmt_lib` (the gate biases are the config field `model.gate_bias`, off by default).
#
# **Why the gates help.** Differentiate {eq}`gru-h` with respect to $h_{t-1}$, holding the gates
# fixed for a moment:
#
# $$
# \frac{\partial h_t}{\partial h_{t-1}} \approx \operatorname{diag}(1 - z_t)
#   + \operatorname{diag}\big(z_t \circ (1 - \tilde h_t^2)\big)\, U \operatorname{diag}(r_t).
# $$ (gru-jac)
#
# When a unit's update gate is closed ($z_t \to 0$) the first term is the identity: the unit copies
# its value forward and the gradient flows back through it unchanged, however many steps there
# are. A tanh RNN has only the second kind of term, $\operatorname{diag}(1-h_t^2)\,U$, whose
# product over many steps typically shrinks (or explodes). The reset gate, when closed
# ($r_t \to 0$), lets the candidate ignore the past and start afresh.
#
# **Reset before, not after.** In {eq}`gru-cand` the reset gate multiplies the previous state
# *before* the matrix $U$. PyTorch's `torch.nn.GRU` (the cuDNN kernel) computes
# $\tanh(W_{in} x_t + b_{in} + r_t \circ (W_{hn} h_{t-1} + b_{hn}))$ instead: reset *after*
# the matrix. Since $r \circ (U h) \ne U (r \circ h)$ unless $U$ is diagonal, the two are
# different functions, and no choice of weights turns one into the other.
#
# ## The library function
#
# `nmt_lib.paper.gru` packs the three input projections into one matrix $[W; W_z; W_r]$, computed for
# all time steps at once, and the two gate matrices into one $[U_r; U_z]$, so a step is two
# matrix products:
#
# ```{literalinclude} ../../nmt_lib/paper/gru.py
# :pyobject: gru_step
# ```
#
# Over a sentence, `gru_scan` copies the state at padded positions, so a padded sentence ends in the same state as the unpadded one:
#
# ```{literalinclude} ../../nmt_lib/paper/gru.py
# :pyobject: gru_scan
# ```
#
# ## The numeric check
#
# The reference below is {eq}`gru-r`–{eq}`gru-h` written literally, one step at a time, with the
# paper's matrices; the library runs its packed, masked version. Small float64 inputs, a batch of
# two sentences of which the second is padded after three steps.

# %%
m, n, B, T = 3, 4, 2, 5
cell = gru.GRU(m, n)
for p in cell.parameters():
    torch.nn.init.normal_(p, std=0.5)
x = torch.randn(B, T, m)
mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])


def gru_reference(x, mask, W, W_z, W_r, U, U_z, U_r, b):
    """Equations (gru-r)-(gru-h), literally, copying the state on padding."""
    h = torch.zeros(x.shape[0], W.shape[0])
    out = []
    for t in range(x.shape[1]):
        x_t = x[:, t]
        r = torch.sigmoid(x_t @ W_r.T + h @ U_r.T)
        z = torch.sigmoid(x_t @ W_z.T + h @ U_z.T)
        h_tilde = torch.tanh(x_t @ W.T + b + (r * h) @ U.T)
        h_new = (1 - z) * h + z * h_tilde
        h = torch.where(mask[:, t, None], h_new, h)
        out.append(h)
    return torch.stack(out, 1)


c = cell
ref = gru_reference(x, mask, c.W, c.W_z, c.W_r, c.U, c.U_z, c.U_r, c.b)
assert_close(cell(x, mask), ref)
assert_close(cell(x[1:, :3]), ref[1:, :3])  # padding changes nothing
print("nmt_lib.paper.gru.GRU == equations (gru-r)-(gru-h), float64, with and without padding")

# %% [markdown]
# Now the comparison with PyTorch. We load the paper GRU's weights into `torch.nn.GRU`: PyTorch
# orders its blocks $(r, z, n)$, and its update gate weights the *old* state, so its $z$ is
# $1 - z_{\text{paper}}$, which $\sigma(-a) = 1 - \sigma(a)$ gives by negating the $z$ weights.
# That relabelling is exact. What cannot be matched is where the reset gate sits.


# %%
def torch_gru_from_paper(cell: gru.GRU, U: torch.Tensor) -> torch.nn.GRU:
    """A torch.nn.GRU with the paper cell's weights (and candidate matrix U)."""
    t = torch.nn.GRU(cell.W.shape[1], cell.n, batch_first=True)
    with torch.no_grad():
        t.weight_ih_l0.copy_(torch.cat([cell.W_r, -cell.W_z, cell.W]))
        t.weight_hh_l0.copy_(torch.cat([cell.U_r, -cell.U_z, U]))
        t.bias_ih_l0.copy_(torch.cat([torch.zeros(2 * cell.n), cell.b]))
        t.bias_hh_l0.zero_()
    return t


nn_gru = torch_gru_from_paper(cell, cell.U)
out_torch = nn_gru(x[:1])[0]
# nmt_lib's reset-after reference is torch.nn.GRU ...
W_ih, W_hh = nn_gru.weight_ih_l0, nn_gru.weight_hh_l0
after = gru.reset_after_gru(
    x[:1], torch.zeros(1, n), W_ih, W_hh, nn_gru.bias_ih_l0, nn_gru.bias_hh_l0
)
assert_close(after, out_torch)
# ... and it is NOT the paper's GRU:
gap = (out_torch - cell(x[:1])).abs().max().item()
assert gap > 1e-3
# With a diagonal U, r ∘ (U h) = U (r ∘ h): the two variants coincide.
U_diag = torch.diag(torch.randn(n))
with torch.no_grad():
    cell.U.copy_(U_diag)
assert_close(torch_gru_from_paper(cell, U_diag)(x[:1])[0], cell(x[:1]))
glue("gru_gap", gap, display=False)
print(f"max |torch.nn.GRU - paper GRU| with the same weights: {gap:.3f}; 0 when U is diagonal")

# %% [markdown]
# With identical weights, `torch.nn.GRU` and the paper's GRU differ by up to
# {glue:text}`gru_gap:.3f` on this tiny example, and agree exactly once $U$ is diagonal, as the
# algebra says. `nmt_lib` therefore implements the paper's cell itself; using cuDNN would be a
# deviation (see {doc}`../deviations`).
#
# ## An illustration: gradients through time
#
# Equation {eq}`gru-jac` predicts that a GRU whose update gates are mostly closed carries the
# gradient $\partial h_T / \partial h_0$ across many steps, while a tanh RNN with the same recurrent
# matrix loses it. We measure $\lVert \partial h_T/\partial h_0 \rVert$ with autograd for random
# weights, shifting the update gates' pre-activation by a constant to set how open they are.

# %%
n, T_max = 32, 60
cell = gru.GRU(n, n, gate_bias=True)
for name, p in cell.named_parameters():
    torch.nn.init.orthogonal_(p) if name.startswith("U") else torch.nn.init.normal_(p, std=0.1)
xs = torch.randn(1, T_max, n)


def grad_norms(step, h0):
    """||d h_t / d h_0||_2 for t = 1..T_max, by the chain rule: J_t = (d h_t / d h_{t-1}) J_{t-1}."""
    norms, h, J = [], h0, torch.eye(n)
    for x_t in xs.unbind(1):
        J_step = torch.autograd.functional.jacobian(lambda h_, x_t=x_t: step(x_t, h_), h)
        J = J_step.reshape(n, n) @ J
        h = step(x_t, h).detach()
        norms.append(torch.linalg.matrix_norm(J, ord=2).item())
    return norms


def tanh_step(x_t, h):
    return torch.tanh(x_t @ cell.W.T + h @ cell.U.T)


def gru_step_with(bias):
    def step(x_t, h):
        with torch.no_grad():
            cell.b_z.fill_(bias)
        a = cell.project(x_t)
        return gru.gru_step(a, h, *cell.recurrent_weights())

    return step


h0 = torch.zeros(1, n) + 0.1
curves = {"tanh RNN": grad_norms(tanh_step, h0)}
for bias in (0.0, -3.0):
    z_mean = torch.sigmoid(torch.tensor(bias)).item()
    curves[f"GRU, mean update gate ≈ {z_mean:.2f}"] = grad_norms(gru_step_with(bias), h0)

fig, ax = plt.subplots(figsize=(6, 3.5))
for (label, v), style in zip(curves.items(), ["-", "--", ":"], strict=True):
    ax.semilogy(range(1, T_max + 1), v, style, color="k", label=label)
ax.set(xlabel="steps T", ylabel=r"$\|\partial h_T / \partial h_0\|_2$")
ax.legend(frameon=False)
fig.tight_layout()
glue("gru_grad_fig", fig, display=False)
glue("gru_grad_tanh", curves["tanh RNN"][-1], display=False)
glue("gru_grad_gru", list(curves.values())[-1][-1], display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} gru_grad_fig
# :name: fig-gru-grad
#
# How much of the initial state survives after $T$ steps: the gradient norm
# $\lVert\partial h_T/\partial h_0\rVert_2$ for a tanh RNN and for GRUs whose update gates are
# half open or mostly closed (random weights, orthogonal $U$).
# ```
#
# After 60 steps the tanh RNN's gradient norm is {glue:text}`gru_grad_tanh:.1e`, while the GRU
# with mostly closed update gates keeps {glue:text}`gru_grad_gru:.2f`: the identity path of
# {eq}`gru-jac` at work. Sentences in the paper's test set are up to 80 words long, so this matters.
#
# ## Summary
#
# - The GRU interpolates between the previous state and a candidate, {eq}`gru-h`; the update gate
#   $z$ sets the mix and opens an identity path for the gradient, {eq}`gru-jac`.
# - The paper's cell resets *before* the recurrent matrix, {eq}`gru-cand`; `torch.nn.GRU` resets
#   after it, a different function that agrees only for diagonal $U$.
# - `nmt_lib.paper.gru.gru_step` computes {eq}`gru-r`–{eq}`gru-h` exactly (checked in float64 above and in
#   `tests/test_gru.py`), with GroundHog's single candidate bias.
#
# ## Exercises
#
# 1. Show that with $z_t = 1$ and $r_t = 1$ for all $t$, the GRU is a tanh RNN.
# 2. Show that $\sigma(-a) = 1 - \sigma(a)$, and use it to explain why the different update-gate
#    convention of PyTorch is only a relabelling.
# 3. Count the multiply–adds of one GRU step for a batch of $B$ with input size $m$ and state size
#    $n$, separating the part that can be computed for all time steps at once.
#
# :::{admonition} Solutions
# :class: dropdown
#
# 1. {eq}`gru-h` becomes $h_t = \tilde h_t = \tanh(W x_t + b + U h_{t-1})$.
# 2. $\sigma(-a) = 1/(1+e^{a}) = e^{-a}/(1+e^{-a}) = 1 - \sigma(a)$. PyTorch's state update is
#    $h_t = (1-z'_t)\circ n_t + z'_t \circ h_{t-1}$; with $z'_t = \sigma(-a) = 1 - z_t$ it is
#    {eq}`gru-h`. Negating the $z$ rows of both weight matrices (and bias) gives exactly that.
# 3. Per sentence of the batch: the input projections $3nm$, independent of the state, so one
#    matrix product for all time steps; the recurrent part $2n^2$ (for $U_r, U_z$) plus $n^2$ (for
#    $U$), which must run step by step — and, reset-before, as two *sequential* products, because
#    $U$ needs $r_t$ first. For the batch, $B$ times each: $3Bnm$ that can be computed for all steps
#    at once, and $3Bn^2$ per step.
# :::
