# %% [markdown]
# # Making it fast
#
# **What you will derive.** Nothing new about the model. The chapters so far checked each paper
# module (`nmt_lib.paper.gru`, `attention`, `decoder`, `model`, `steps`) against the paper's equations:
# those modules are the *specification*. This chapter is about `nmt_lib.fast`, which computes the
# same functions faster. Each fast path is an identity with the slow one: linearity for the
# precomputed and merged products, teacher forcing for the output layer outside the loop, the
# chain rule for the hand-written backward through time, and a shift that leaves the order of
# scores unchanged for the beam's word choice. For each one we derive the identity, include the
# code, and check it in float64. At the end, a measured table says what all of this buys.
#
# **What you need.** The GRU ({doc}`02_gru`), the decoder ({doc}`05_decoder`), training
# ({doc}`06_training`) and beam search ({doc}`07_beam_search`). Notation: {doc}`../notation`.
# This chapter and the next are the book's engineering part: the course ({doc}`../intro`) does not
# need them.
#
# ## The paper's claim
#
# The paper makes no claim about speed. Table 2 reports what its models cost: RNNsearch-50 made
# {glue:text}`fast_paper_updates` updates in {glue:text}`fast_paper_hours` hours on one GPU, about
# {glue:text}`fast_paper_s_per_update:.1f` s per update of 80 sentence pairs. Our claim is about
# this library only: with `train.backend = "fast"` (the default) a model computes the same
# log-probabilities, gradients and translations as the paper modules, up to floating-point
# rounding, and does it faster.

# %% tags=["parameters"]
profile = "lite"
train = False
results_dir = None
data_dir = None

# %% tags=["remove-cell"]
from nmt_experiments.core.results import check_parameters

check_parameters(profile, train, results_dir, data_dir)

# %%
import copy
import dataclasses

import matplotlib.pyplot as plt
import torch
from IPython.display import Markdown
from myst_nb import glue
from torch.nn import functional as F
from torch.testing import assert_close

from nmt_experiments.core.markdown import markdown_table
from nmt_experiments.core.results import paper_table
from nmt_lib.config import ModelConfig, TrainConfig, home
from nmt_lib.data import pad
from nmt_lib.fast import accelerate
from nmt_lib.fast.output import padded_rows, target_log_prob
from nmt_lib.fast.scan import active_rows, fast_gru_scan
from nmt_lib.io import read_json
from nmt_lib.paper.decoder import log_softmax, maxout
from nmt_lib.paper.gru import gru_scan
from nmt_lib.paper.model import build_model, forward_macs
from nmt_lib.search import beam_search

torch.manual_seed(0)
torch.set_num_threads(1)  # tiny tensors: one thread is fastest
torch.set_default_dtype(torch.float64)  # the checks compare two computations exactly, in float64

t2 = paper_table("table2")["RNNsearch-50"]
updates, hours = float(t2["updates_1e5"]) * 1e5, float(t2["hours"])
glue("fast_paper_updates", f"{updates:,.0f}", display=False)
glue("fast_paper_hours", t2["hours"], display=False)
glue("fast_paper_s_per_update", hours * 3600 / updates, display=False)
defaults = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
glue("fast_default_backend", defaults["backend"], display=False)

# %% [markdown]
# **Two backends, the same weights.** `nmt_lib.models.build_model(cfg, nmt_lib.backend.backend("fast"))`
# builds a model of the fast classes (the class is chosen when the model is made), and
# `nmt_lib.fast.accelerate(model)` makes a fast copy of a paper model: the same parameters under
# the same names, so a checkpoint loads on either backend. Below, one tiny RNNsearch in float64 with
# large random weights (so that every term matters), a fast copy of it, and a padded batch of three
# sentence pairs whose lengths are in no particular order.

# %%
cfg = ModelConfig(src_vocab=13, trg_vocab=11, m=5, n=4, n_align=3, l=3, output_rank=2)
ref = build_model(cfg)  # the paper modules: the specification
with torch.no_grad():
    for p in ref.parameters():
        p.normal_(0, 0.5)
fast = accelerate(ref)  # the same weights (copies), computed faster
x_mask = torch.tensor([[j < L for j in range(6)] for L in (6, 3, 2)])
y_mask = torch.tensor([[i < L for i in range(5)] for L in (2, 5, 4)])
x = torch.randint(3, cfg.src_vocab, x_mask.shape).masked_fill(~x_mask, 0)
y = torch.randint(3, cfg.trg_vocab, y_mask.shape).masked_fill(~y_mask, 0)
assert [k for k, _ in fast.named_parameters()] == [k for k, _ in ref.named_parameters()]
print(f"{type(ref).__name__} -> {type(fast).__name__}, the same {len(ref.state_dict())} tensors")

# %% [markdown]
# (fast-projections)=
# ## Precomputed and merged projections
#
# **The identity.** A matrix product is linear, so the products of one matrix with many vectors
# are one matrix product. Stack the inputs of all $T$ steps as the rows of $X$, and the outputs
# come out as rows too; stack several matrices that share an input, and their products come out
# stacked:
#
# $$
# \begin{bmatrix} (W x_1)^\top \\ \vdots \\ (W x_T)^\top \end{bmatrix} = X W^\top,
# \quad X = \begin{bmatrix} x_1^\top \\ \vdots \\ x_T^\top \end{bmatrix};
# \qquad
# \begin{bmatrix} A \\ B \end{bmatrix} s = \begin{bmatrix} A s \\ B s \end{bmatrix}.
# $$ (fast-linear)
#
# One large product runs far closer to the machine's peak than many small ones, and costs one call
# instead of many. Where the identity is used:
#
# - **Input projections.** $W x_t$, $W_z x_t$, $W_r x_t$ of {eq}`gru-r`–{eq}`gru-cand` do not
#   depend on the state, so they are computed for all steps and all sentences before the
#   recurrence, as one product with $[W; W_z; W_r]$. The paper modules already do this
#   (`GRU.project`, {doc}`02_gru`); the fast encoder also does both directions in the same
#   product and both recurrences in one scan, with the steps laid out time-major (`[T, B, ·]`) so
#   that each step reads its rows as one block.
# - **$U_a h_j$ once per sentence.** In $e_{ij} = v_a^\top \tanh(W_a s_{i-1} + U_a h_j)$ the term
#   $U_a h_j$ does not depend on $i$. Computed inside the decoder's loop it would cost $T_y$ times
#   as much; the paper modules take it precomputed (`Attention.precompute`, as every efficient
#   implementation does). For a 30-word sentence and a 30-word translation at the paper's sizes,
#   recomputing it at every step would add {glue:text}`fast_Uh_extra:.0f` % to the multiply-adds
#   of the whole forward pass.
# - **Products that share an input.** In the decoder's loop, $s_{i-1}$ meets $U_r$, $U_z$ (the
#   gates of the next state) and $W_a$ (the attention): one product with $[U_r; U_z; W_a]$. In a
#   decoding step, $s_{i-1}$ also meets $U_o$ (the deep output), and $c_i$ meets $C_o$, $C$, $C_z$,
#   $C_r$; the emitted word's embedding meets $W$, $W_z$, $W_r$ and $V_o$ (for the next step's deep
#   output). `DecodeSteps` concatenates each group once per search: the twelve products of these
#   three groups ($s_{i-1}$ with $W_a$, $U_o$, $U_r$, $U_z$; $c_i$ with four; the embedding with
#   four) become three.
#
# The fast encoder, both directions' input projections in one product:
#
# ```{literalinclude} ../../nmt_lib/fast/model.py
# :pyobject: encode
# ```
#
# **One more rearrangement.** The maxout of {eq}`dec-maxout` takes the maximum of adjacent pairs
# $(\tilde t_{2k-1}, \tilde t_{2k})$, a strided read. Permuting the rows of $U_o$, $V_o$, $C_o$ and
# $b_o$ once, so that the pairs sit in the two halves, turns it into the maximum of two contiguous
# halves: the same numbers, read in order.
#
# **The check.** The fast encoder against the paper's; `DecodeSteps`' merged product of $s_{i-1}$
# against the four products it stands for; the maxout of halves against the maxout of pairs.

# %%
assert_close(fast.encoder(x, x_mask), ref.encoder(x, x_mask))
steps, dec = fast.steps(), ref.decoder
s = torch.randn(4, cfg.n)
na, l2 = cfg.n_align, 2 * cfg.l
pairs = torch.arange(l2).view(-1, 2).t().flatten()  # units (2k, 2k+1) -> (k, l + k)
merged = (s @ steps.S + steps.b_S).split([na, l2, cfg.n, cfg.n], dim=1)
separate = [
    s @ dec.attention.W_a.T,
    s @ dec.U_o[pairs].T + dec.b_o[pairs],
    s @ dec.gru.U_r.T,
    s @ dec.gru.U_z.T,
]
for got, want in zip(merged, separate, strict=True):
    assert_close(got, want)
t_tilde = s @ dec.U_o.T + dec.b_o
halves = t_tilde[:, pairs]
assert_close(torch.maximum(halves[:, : cfg.l], halves[:, cfg.l :]), maxout(t_tilde))

paper_cfg, T = ModelConfig(), 30  # the paper's sizes; 30 words on each side
Uh_per_step = (T - 1) * T * 2 * paper_cfg.n * paper_cfg.n_align  # U_a h_j again at steps 2..T_y
glue("fast_Uh_extra", 100 * Uh_per_step / forward_macs(paper_cfg, T, T), display=False)
print("fast encoder == paper encoder; [W_a; U_o; U_r; U_z] s == 4 products; maxout of halves")

# %% [markdown]
# (fast-output-layer)=
# ## The output layer over the whole sequence
#
# **The identity.** In training the decoder reads the reference translation (teacher forcing):
# $s_{i-1}$, $\bar e(y_{i-1})$ and $c_i$ are fixed by the reference and the recurrence alone, and
# the output $p(y_i \mid y_{<i}, \mathbf x)$ feeds nothing back ({eq}`dec-state` reads
# $\bar e(y_i)$, not $t_i$). So the loop only needs to produce the states and contexts; the deep
# output {eq}`dec-maxout` and the softmax {eq}`dec-softmax` of every position are then one product
# over the $N$ real (non-padding) positions of the batch, $N \le B\,T_y$. Stack the maxout
# outputs $t_n$ ({eq}`dec-maxout`) of those positions as the rows of
# $\mathcal T \in \mathbb R^{N \times l}$, with $y_n$ the reference word at position $n$ and $(b_y)_k$ the $k$-th entry of the output bias:
#
# $$
# Z = \mathcal T W_o^\top \in \mathbb R^{N \times K_y}, \qquad
# \log p_n = z_{n, y_n} + (b_y)_{y_n} - \log \sum_{k} \exp\big(z_{n,k} + (b_y)_k\big).
# $$ (fast-output)
#
# The paper modules compute them inside the loop of `nmt_lib.paper.steps.teacher_forced`, step by
# step as the equations are written; the fast `teacher_forced` moves them after it (exercise 1 of {doc}`05_decoder` asks why that
# is allowed). Differentiating {eq}`fast-output` for a loss
# $L = \sum_n \lambda_n \log p_n$ (any weights $\lambda_n$; the training loss has
# $\lambda_n = -1$) gives the gradient of the logits without the log-softmax:
#
# $$
# \frac{\partial L}{\partial z_{n,k}}
#   = \lambda_n \big(\mathbb 1[k = y_n] - \operatorname{softmax}(z_n + b_y)_k\big).
# $$ (fast-output-grad)
#
# So `target_log_prob` keeps only the $N \times K_y$ logits (the largest tensor of a training step:
# $K_y$ is 30,000 at the paper's sizes) and the $N$ target log-probabilities. The log-softmax is
# never stored, the log-sum-exp is computed a few rows at a time while they are in cache, and the
# backward overwrites the logits with {eq}`fast-output-grad`. The positions are gathered by
# `padded_rows`: the $N$ real ones, then copies of the first up to a multiple of 64, so that the
# products see a few dozen shapes instead of one per batch (a CPU's bf16 library builds a kernel for
# every new shape). The copies' outputs are dropped, so they receive no gradient.
#
# ```{literalinclude} ../../nmt_lib/fast/decoder.py
# :pyobject: teacher_forced
# ```
#
# ```{literalinclude} ../../nmt_lib/fast/decoder.py
# :pyobject: _output_log_prob
# ```
#
# ```{literalinclude} ../../nmt_lib/fast/output.py
# :pyobject: padded_rows
# ```
#
# The backward of the output layer, {eq}`fast-output-grad` written over the logits a few rows at a
# time (the target entry $\lambda_n (1 - p_{y_n})$ is computed from $\log p_{y_n}$, which is
# accurate even when $p_{y_n}$ is close to 1):
#
# ```{literalinclude} ../../nmt_lib/fast/output.py
# :pyobject: _grad_in_pieces
# ```
#
# **The check.** `target_log_prob` against the log-softmax and `gather` of the paper module, values
# and gradients; {eq}`fast-output-grad` against autograd; and the rows `padded_rows` picks for our
# batch's target mask (time-major, as the decoder reads it).

# %%
N, r, K = 7, 3, cfg.trg_vocab
u, W, b = (torch.randn(*shape, requires_grad=True) for shape in ((N, r), (K, r), (K,)))
y_n, g = torch.randint(0, K, (N,)), torch.randn(N)
lp_ref = log_softmax(F.linear(u, W, b)).gather(-1, y_n[:, None]).squeeze(-1)
lp_fast = target_log_prob(u, W, b, y_n)
assert_close(lp_fast, lp_ref)
for gf, gr in zip(
    torch.autograd.grad((lp_fast * g).sum(), (u, W, b)),
    torch.autograd.grad((lp_ref * g).sum(), (u, W, b)),
    strict=True,
):
    assert_close(gf, gr)
z = F.linear(u, W, b).detach().requires_grad_()  # (fast-output-grad), by autograd
lp_z = log_softmax(z).gather(-1, y_n[:, None]).squeeze(-1)
(dz,) = torch.autograd.grad((lp_z * g).sum(), z)
assert_close(dz, g[:, None] * (F.one_hot(y_n, K) - z.softmax(-1)))
idx, n_real = padded_rows(y_mask.t(), multiple=8)
Ty_, B_ = y_mask.t().shape  # the time-major mask, [Ty, B]
real_flat = [i * B_ + b for i in range(Ty_) for b in range(B_) if y_mask[b, i]]  # in time order
assert n_real == len(real_flat) == int(y_mask.sum())
assert idx.tolist() == real_flat + real_flat[:1] * (-len(real_flat) % 8)  # then copies of the first
glue("fast_rows", f"{idx.tolist()}", display=False)
glue("fast_rows_real", n_real, display=False)
glue("fast_rows_all", y_mask.numel(), display=False)
print("target_log_prob == log_softmax + gather (values, gradients); (fast-output-grad) holds")
print(f"padded_rows: {idx.tolist()} ({n_real} real positions of {y_mask.numel()})")

# %% [markdown]
# Of the batch's {glue:text}`fast_rows_all` target positions, {glue:text}`fast_rows_real` are
# real; `padded_rows` (here to a multiple of 8) picks the flat positions
# {glue:text}`fast_rows` of the time-major mask: the real ones in order, then copies of the first.
#
# ## The backward through time, by hand
#
# Autograd through `gru_scan` records every operation of every step and, on the way back,
# computes the gradient of the recurrent matrices step by step: a small product per step, each
# added to the last. Written by hand, the backward loop computes only what the recurrence needs,
# and each weight gradient becomes one large product after the loop, as cuDNN's recurrent networks
# do.
#
# **The backward of one step.** Write the GRU step of {eq}`gru-r`–{eq}`gru-h` with its
# pre-activations $a_t = [a^h_t; a^z_t; a^r_t]$ (the input projections, plus $C c_i$ in the
# decoder): $r_t = \sigma(a^r_t + U_r h_{t-1})$, $z_t = \sigma(a^z_t + U_z h_{t-1})$,
# $\tilde h_t = \tanh(a^h_t + U (r_t \circ h_{t-1}))$, $h_t = (1 - z_t) \circ h_{t-1} + z_t \circ
# \tilde h_t$. Given $\delta_t = \partial L / \partial h_t$ (from the output at step $t$ and from
# step $t+1$), the chain rule, with $\sigma' = \sigma(1 - \sigma)$ and $\tanh' = 1 - \tanh^2$:
#
# $$
# \begin{aligned}
# d^h_t &= \delta_t \circ z_t \circ (1 - \tilde h_t^2), \qquad
# d^z_t = \delta_t \circ (\tilde h_t - h_{t-1}) \circ z_t (1 - z_t), \\
# \psi_t &= U^\top d^h_t, \qquad
# d^r_t = \psi_t \circ h_{t-1} \circ r_t (1 - r_t), \\
# \frac{\partial L}{\partial h_{t-1}} &\mathrel{+}= (1 - z_t) \circ \delta_t + r_t \circ \psi_t
#   + U_r^\top d^r_t + U_z^\top d^z_t ,
# \end{aligned}
# $$ (fast-bptt)
#
# where $d^h_t, d^z_t, d^r_t$ are $\partial L / \partial a_t$, the gradients of the
# pre-activations (and so, by one more product, of the input projections' weights and of the
# inputs). At a padded step the state is copied, $h_t = h_{t-1}$: then $\delta_t$ passes to
# $h_{t-1}$ unchanged and $d^h_t = d^z_t = d^r_t = 0$.
#
# **The weight gradients in one product each.** $U$ appears in every step, so its gradient is a
# sum over steps and over the $B$ sentences of the batch. Stack the vectors of all $B\,T$ (sentence,
# step) pairs as rows, $D^h$ with rows $(d^h_t)^\top$ and $R$ with rows $(r_t \circ h_{t-1})^\top$;
# then
#
# $$
# \frac{\partial L}{\partial U} = \sum_{t} d^h_t\, (r_t \circ h_{t-1})^\top = (D^h)^\top R, \qquad
# \frac{\partial L}{\partial [U_r; U_z]} = [D^r\ D^z]^\top H_{\text{prev}} ,
# $$ (fast-weights)
#
# with the sums over every step of every sentence, because $\sum_t a_t b_t^\top = A^\top B$ for
# matrices $A$, $B$ whose rows are the $a_t$, $b_t$.
# The same number of multiply-adds as $T$ products of $B$ rows each, in one product of inner size
# $B\,T$, which runs near the machine's peak. The backward loop itself ({eq}`fast-bptt`) keeps only
# the two products with $U^\top$ and $[U_r; U_z]^\top$ per step.
#
# **Rows dropped as sentences end.** `nmt_lib.fast`'s model sorts each batch by target length,
# longest first (and restores the caller's order at the end). At step $t$ the sentences that have
# already ended are then the last rows, so a step computes only the first $k_t$ rows and copies the
# state of the rest (`active_rows`, which rounds $k_t$ up to a multiple of 16, the rows of an AMX
# tile, to bound the number of shapes); the backward skips the same rows, where $\delta_t$ only
# passes through.
#
# The elementwise part of {eq}`fast-bptt`, in two functions (each replaced by a compiled kernel
# where one applies):
#
# ```{literalinclude} ../../nmt_lib/fast/scan.py
# :pyobject: gru_backward_update
# ```
#
# ```{literalinclude} ../../nmt_lib/fast/scan.py
# :pyobject: gru_backward_reset
# ```
#
# ::::{admonition} The code: the backward loop, the rows still running, and the sorted batch
# :class: dropdown
#
# The loop of {eq}`fast-bptt`, then {eq}`fast-weights` as two products
# (`product(transposed(…), …)`):
#
# ```{literalinclude} ../../nmt_lib/fast/scan.py
# :pyobject: _GRUScan.backward
# ```
#
# ```{literalinclude} ../../nmt_lib/fast/scan.py
# :pyobject: active_rows
# ```
#
# ```{literalinclude} ../../nmt_lib/fast/model.py
# :pyobject: FastModel.forward
# ```
# ::::
#
# The decoder of RNNsearch has its own scan, `attention_decoder_scan`, built the same way: per step
# the merged product of $s_{i-1}$, the attention, the GRU update; in the backward the attention's
# backward too, with $\tanh(W_a s_{i-1} + U_a h_j)$ recomputed rather than stored.
#
# **The check.** `fast_gru_scan` against `gru_scan` on four sentences of lengths 6, 4, 4 and 1,
# sorted, with `tile=1` so that rows are really dropped: states and the gradients of all four
# inputs. Then {eq}`fast-weights` itself, from the reference's autograd gradients of the
# pre-activations: one product each gives autograd's gradients of $U$ and $[U_r; U_z]$.

# %%
B, T, n = 4, 6, 3
mask = torch.arange(T)[None] < torch.tensor([6, 4, 4, 1])[:, None]  # [B, T], sorted by length
a, h0 = torch.randn(B, T, 3 * n, requires_grad=True), torch.randn(B, n, requires_grad=True)
U_rz, U = torch.randn(n, 2 * n, requires_grad=True), torch.randn(n, n, requires_grad=True)
inputs = (a, h0, U_rz, U)  # U_rz = [U_r; U_z]ᵀ and U = Uᵀ, as gru_step multiplies h @ U_rz
H_ref, H_fast = gru_scan(a, h0, U_rz, U, mask), fast_gru_scan(a, h0, U_rz, U, mask, tile=1)
assert_close(H_fast, H_ref)
w = torch.randn(B, T, n)  # L = Σ w ∘ H
grads_ref = torch.autograd.grad((H_ref * w).sum(), inputs)
for gf, gr in zip(torch.autograd.grad((H_fast * w).sum(), inputs), grads_ref, strict=True):
    assert_close(gf, gr)
ks = active_rows(mask.t()[..., None], tile=1)  # time-major [T, B, 1]
assert ks == [int(mask[:, t].sum()) for t in range(T)]  # the sentences still running at step t
assert min(ks) < B  # rows were dropped

# (fast-weights): all B*T rows in one product, from d = ∂L/∂a = [d^h, d^z, d^r]
d = grads_ref[0]
H_prev = torch.cat([h0[:, None], H_ref[:, :-1]], 1)  # h_0 .. h_{T-1}
r_t = torch.sigmoid(a[..., 2 * n :] + H_prev @ U_rz[:, :n])
rows = lambda v: v.reshape(B * T, -1)  # noqa: E731
assert_close(grads_ref[3], rows(r_t * H_prev).T @ rows(d[..., :n]))  # ∂L/∂Uᵀ = Rᵀ D^h
d_rz = torch.cat([d[..., 2 * n :], d[..., n : 2 * n]], -1)  # [d^r, d^z]
assert_close(grads_ref[2], rows(H_prev).T @ rows(d_rz))  # ∂L/∂[U_r; U_z]ᵀ = H_prevᵀ [D^r D^z]
glue("fast_ks", ", ".join(map(str, ks)), display=False)
print(f"fast_gru_scan == gru_scan (values, 4 gradients); rows computed per step: {ks}")
print("(fast-weights): one product over all B*T rows == autograd's step-by-step sum")

# %% [markdown]
# The scan computed {glue:text}`fast_ks` rows at its six steps instead of 4 each, and gave the
# same states and gradients. The same holds for the whole model: the fast RNNsearch against the
# paper's, log-probabilities, attention weights, and the gradient of every parameter of a loss
# that weights both with random numbers. With the default tile of 16 rows a batch of three would
# drop no row, so the check runs a copy of the fast model with `tile=1` (`accelerate`'s option):
# sorted by target length, longest first, its decoder computes
# {glue:text}`fast_dec_ks` rows at the target's five steps, and the output layer sees the
# {glue:text}`fast_rows_real` real positions only.

# %%
gen = torch.Generator().manual_seed(1)
fast = accelerate(copy.deepcopy(ref), tile=1)  # the same weights; rows dropped one by one
order = y_mask.sum(1).argsort(descending=True, stable=True)  # as FastModel.forward sorts the batch
dec_ks = active_rows(y_mask[order].t()[..., None], tile=1)
assert dec_ks == [int((y_mask.sum(1) > i).sum()) for i in range(y_mask.shape[1])]
assert min(dec_ks) < len(order)  # the decoder's recurrence drops rows
glue("fast_dec_ks", ", ".join(map(str, dec_ks)), display=False)
logp_f, alpha_f = fast(x, x_mask, y, y_mask)
logp_r, alpha_r = ref(x, x_mask, y, y_mask)
assert_close(logp_f, logp_r)
assert_close(alpha_f, alpha_r)
w_logp = torch.randn(logp_r.shape, generator=gen)
w_alpha = torch.randn(alpha_r.shape, generator=gen)
worst = 0.0
loss_f = (logp_f * w_logp).sum() + (alpha_f * w_alpha).sum()
loss_r = (logp_r * w_logp).sum() + (alpha_r * w_alpha).sum()
g_fast = torch.autograd.grad(loss_f, list(fast.parameters()))
g_ref = torch.autograd.grad(loss_r, list(ref.parameters()))
for name, gf, gr in zip([k for k, _ in ref.named_parameters()], g_fast, g_ref, strict=True):
    assert_close(gf, gr, msg=name)
    worst = max(worst, (gf - gr).abs().max().item())
glue("fast_n_params", len(g_ref), display=False)
glue("fast_worst_grad", worst, display=False)
print(f"fast == paper RNNsearch: logp, alpha, {len(g_ref)} gradients (max diff {worst:.1e})")

# %% [markdown]
# All {glue:text}`fast_n_params` parameter gradients agree, the largest difference being
# {glue:text}`fast_worst_grad:.1e`: float64 rounding, from summing in another order.
# (`tests/test_fast_paths.py` checks the same for RNNencdec and other configurations, and under
# bf16 autocast, where the fast path must stay as close to float32 as the paper modules do.)
#
# ## An illustration: the work a sorted batch leaves out
#
# How many rows does a step compute in a batch of 64 random sentences of 15–30 words (plus EOS),
# sorted by length? Each sentence runs until its end; the rounding to 16 rows costs a little.

# %%
gen = torch.Generator().manual_seed(2)
lengths = torch.randint(16, 32, (64,), generator=gen).sort(descending=True).values
batch_mask = (torch.arange(int(lengths[0]))[None] < lengths[:, None]).t()[..., None]  # [T, B, 1]
rows_1, rows_16 = active_rows(batch_mask, tile=1), active_rows(batch_mask, tile=16)
fig, ax = plt.subplots(figsize=(6, 3))
steps_t = range(1, len(rows_1) + 1)
ax.step(steps_t, [64] * len(rows_1), where="mid", color="gray", ls=":", label="every row (B = 64)")
ax.step(steps_t, rows_16, where="mid", color="k", label="active_rows, tile 16")
ax.step(steps_t, rows_1, where="mid", color="k", ls="--", label="the sentences still running")
ax.set(xlabel="step t", ylabel="rows computed", ylim=(0, 70))
ax.legend(frameon=False, loc="lower left")
fig.tight_layout()
glue("fast_rows_fig", fig, display=False)
plt.close(fig)
glue("fast_rows_real_frac", 100 * sum(rows_1) / batch_mask.numel(), display=False)
glue("fast_rows_tile_frac", 100 * sum(rows_16) / batch_mask.numel(), display=False)

# %% [markdown]
# ```{glue:figure} fast_rows_fig
# :name: fig-fast-rows
#
# Rows computed at each step of a recurrence over 64 sentences of 15–30 words sorted by length:
# all of them (the paper modules), and `active_rows` with tiles of 16 rows.
# ```
#
# The real tokens are {glue:text}`fast_rows_real_frac:.0f` % of the padded batch's positions; in
# tiles of 16 the scans compute {glue:text}`fast_rows_tile_frac:.0f` %. The training pipeline
# already sorts sentences by length across 20 minibatches ({doc}`06_training`), so its batches have
# little padding to begin with; the saving matters for batches that were not built that way.
#
# ## The batched beam
#
# Beam search ({doc}`07_beam_search`) extends up to $b$ hypotheses of every sentence per step.
# `nmt_lib.search` keeps all sentences and all their hypotheses in one tensor: $G$ consecutive
# rows per sentence ($G = 1$ at the first step, then up to $b$), against the $B$ encoded sentences,
# each stored once.
#
# **Each sentence once for its hypotheses.** Row $(b, g)$'s energies need $U_a h_{b,j}$ of its own
# sentence. Copying $h_b$ and $U_a h_b$ for each of the $G$ hypotheses would give every row its
# own; instead the states are viewed as $[B, G, n']$ and added to $U_a h$ viewed as
# $[B, 1, T_x, n']$ (broadcasting is the copy, never written), and the context is one
# $[G, T_x] \times [T_x, 2n]$ product per sentence:
#
# $$
# e_{(b,g), j} = v_a^\top \tanh\big(W_a s_{(b,g)} + U_a h_{b,j}\big), \qquad
# c_{(b,\cdot)} = \alpha_{(b,\cdot)}\, H_b .
# $$ (fast-beam)
#
# The paper module (`nmt_lib.paper.attention`) already takes $G$ states per sentence; the fast step
# computes the $\tanh$ a few sentences at a time, so that the temporary stays in cache, and merges
# the step's products ({ref}`fast-projections`).
#
# **The best words without the log-softmax.** The beam needs, for every row, the $k$ most probable
# words and their log-probabilities. With a row's logits $\zeta = z + b_y$, their maximum
# $\zeta_{\max}$ and $\ell = \log \sum_v \exp(\zeta_v - \zeta_{\max})$,
#
# $$
# \log p_w = (\zeta_w - \zeta_{\max}) - \ell, \qquad
# \operatorname{top}_k\, \log p = \operatorname{top}_k\, \zeta ,
# $$ (fast-topk)
#
# since subtracting one number from a whole row changes no order. So `best_words` computes each
# row's $\zeta_{\max}$ and $\ell$ in one pass, a few rows at a time while they are in cache, finds the best
# $k$ words of the logits themselves, and normalises only those $k$ values; the $[G B, K_y]$
# log-softmax is never written. The excluded words (`<pad>`, optionally `<unk>`, and EOS before the
# minimum length) are set to $-\infty$ after $\ell$ is computed, as GroundHog masks after its
# log-softmax. The compiled kernel does all of it in one pass over each row.
#
# ```{literalinclude} ../../nmt_lib/fast/steps.py
# :pyobject: DecodeSteps.readout
# ```
#
# ```{literalinclude} ../../nmt_lib/fast/steps.py
# :pyobject: best_words
# ```
#
# **The check.** Both backends' steps (`model.steps()`, the protocol of `nmt_lib.paper.steps`) driven
# side by side for three steps over three sentences, keeping $G = 3$ hypotheses per sentence after
# the first: at every step the full next-word distribution (the fast step's logits normalised),
# the attention weights, the chosen words and their log-probabilities, and the next states agree.
# Then beam search itself, beam 5, on both backends, with a sharper random model whose hypotheses
# end at different steps, so that finished hypotheses leave the beam and the rows are reordered.

# %%
srcs = [[5, 6, 7, 2], [8, 2], [9, 10, 11, 12, 3, 2]]
xb, mb = pad(srcs)
G = 3
with torch.no_grad():
    enc_r, enc_f = ref.encode(xb, mb), fast.encode(xb, mb)
    steps_r, steps_f = ref.steps(), fast.steps()
    state_r, state_f = steps_r.start(enc_r), steps_f.start(enc_f)
    for i in range(3):
        logp_next, alpha_i_r, carry_r = steps_r.readout(enc_r, state_r)
        (z, b_y), alpha_i_f, carry_f = steps_f.readout(enc_f, state_f)
        assert_close(log_softmax(z + b_y), logp_next)  # the same distribution
        assert_close(alpha_i_f, alpha_i_r)
        no_eos = torch.zeros(len(z), dtype=torch.bool)
        best_r, words_r = steps_r.best_words(logp_next, G, no_eos, False)
        best_f, words_f = steps_f.best_words((z, b_y), G, no_eos, False)
        assert torch.equal(words_f, words_r)
        assert_close(best_f, best_r)  # float32, as a search accumulates them
        # the first step: G children of each sentence's one row; then each row's best word
        keep = torch.arange(len(z)).repeat_interleave(G) if i == 0 else torch.arange(len(z))
        chosen = words_r.flatten() if i == 0 else words_r[:, 0]
        state_r = steps_r.advance(tuple(t[keep] for t in carry_r), chosen)
        state_f = steps_f.advance(tuple(t[keep] for t in carry_f), chosen)
        assert_close(state_f[0], state_r[0])  # s_i, [G * B, n] against B encodings

torch.manual_seed(0)  # a sharper model: App. B.1's initialisation, its matrices scaled up
beam_ref = build_model(
    ModelConfig(src_vocab=13, trg_vocab=11, m=8, n=10, n_align=6, l=4, output_rank=5)
)
with torch.no_grad():
    for p in beam_ref.parameters():
        p.mul_(30 if p.dim() > 1 else 1)
beam_fast = accelerate(beam_ref)
hyps_r, hyps_f = beam_search(beam_ref, xb, mb, beam=5), beam_search(beam_fast, xb, mb, beam=5)
for hr, hf in zip(hyps_r, hyps_f, strict=True):
    assert (hf.tokens, hf.finished) == (hr.tokens, hr.finished) and abs(hf.cost - hr.cost) < 1e-5
    end = "ends in EOS" if hr.finished else "no EOS by the length limit"
    print(f"{hr.tokens} ({end}): cost {hr.cost:.5f} (reference), {hf.cost:.5f} (fast)")

# %% [markdown]
# The same distributions at every step, the same words, and the same translations (of a random
# model: meaningless, but the same) with the same costs up to float32, the precision in which
# both steps return log-probabilities.
#
# ## Kernels, CUDA graphs, and the switch
#
# **Compiled CPU kernels** (`nmt_lib.fast.kernels`, from `nmt_lib/fast/kernels.c`). Some work
# cannot be fused from PyTorch operations, each of which makes a pass over memory: a beam step's
# bias, log-sum-exp, masks and top-$k$ over $[G B, K_y]$ logits (`best_words`); the attention step
# and its backward (energies at the real positions only, masked softmax, context); the training
# output layer's log-sum-exp and {eq}`fast-output-grad`; the elementwise work of every GRU step,
# forward and backward ({eq}`fast-bptt`); the transposing copies before the weight-gradient
# products; Adadelta's update (`nmt_lib.fast.optim.Adadelta`: `torch.optim.Adadelta`'s numbers in
# one pass over memory instead of nine); and the training scans' per-step products, by AMX tiles
# or prepacked weights where the CPU has them. The C file is compiled on first use for the machine
# it runs on. The kernels are optional: each says "does not apply" for the dtypes, shapes or
# devices it does not handle (float64 here, so the checks above ran the PyTorch operations), and
# without a compiler, or with `NMT_LIB_KERNELS=0`, every caller uses its PyTorch operations.
# `tests/test_kernels.py` compares each kernel with those operations.
#
# **CUDA graphs** (`nmt_lib.fast.graphs`, `train.cuda_graphs`). On a GPU a recurrent step is about a
# hundred small kernels, each shorter than the time it takes to launch it. A CUDA graph records a
# whole forward and backward once per padded batch shape and replays it in one launch. Its shapes
# must not depend on the data, so under capture every row of every step is computed
# (`static_shapes` switches `active_rows` and `padded_rows` off): the same function, checked on
# the CPU with the capture check forced on.
#
# **The switch.** `train.backend` is `"fast"` or `"reference"` (`TrainConfig`'s default: the
# {glue:text}`fast_default_backend` backend). The reference backend runs the paper modules as they
# are: slower, and the definition to fall back on when a result looks wrong. Nothing else selects
# an algorithm: no environment variable read at import, no grad mode, no global flag. Importing
# `nmt_lib` changes nothing in the process; training and evaluation on the fast backend ask it to
# raise oneDNN's kernel cache and keep freed memory in the process (`backend.tune_process()`),
# which it runs faster with. Everything here is reached through that one object,
# `nmt_lib.backend.backend(train.backend)`: the model's classes (whose decoding steps the models
# carry), the optimizer, the backward pass, the optimizer's step (the plain backend and the training
# recipe are `nmt_lib.recipe.Plain`; the fast one, `nmt_lib.fast.FastBackend`, overrides only what
# it speeds up).

# %% [markdown]
# ## What it buys: the benchmarks
#
# `bench/bench_train.py` and `bench/bench_search.py` time `nmt_lib` (the fast backend with its
# compiled kernels) against `bench/naive.py`: RNNsearch written the way a first implementation
# would be, every matrix its own `F.linear`, the deep output and the softmax inside the loop,
# autograd for the backward, the annotations copied for every hypothesis of a beam ($U_a h_j$ is
# computed once per sentence, as the paper says). Both hold the same parameters (a state dict
# loads both ways), and `bench_train.py` first checks that they compute the same
# log-probabilities. Both are timed in float32, and in bf16 autocast where the machine multiplies
# bf16 natively. They run **alternately, in one process, on the same batches**, and the speed-up
# is the median over batches of naive time / `nmt_lib` time: on a shared machine absolute speeds
# drift from minute to minute, ratios much less. The numbers below are read from the committed
# results, `results/bench/`.

# %% tags=["hide-input"]
BENCH = home() / "results" / "bench"


def bench_results(name: str) -> dict:
    path = BENCH / name
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: python bench/{path.stem}.py --json {path}")
    return read_json(path)


def machine(info: dict) -> str:
    gpu = f", {info['gpu']}" if info.get("gpu") else ""
    threads = f"{info['threads']} thread" + ("s" if info["threads"] != 1 else "")
    return f"{info['cpu']}{gpu}, {threads}, PyTorch {info['torch']}, {info['date_utc']} UTC"


def fmt(v, spec: str) -> str:
    return "–" if v is None else format(v, spec)


def span(values: list[float]) -> str:
    """``1.99×``, or the range ``1.90–2.47×`` of several rows."""
    if not values:
        return "not measured"
    lo, hi = min(values), max(values)
    return f"{lo:.2f}×" if round(lo, 2) == round(hi, 2) else f"{lo:.2f}–{hi:.2f}×"


bench_train, bench_search = bench_results("bench_train.json"), bench_results("bench_search.json")
train_rows = [
    {
        "model, shape": f"{r['arch']}, {r['shape']}",
        "precision": r["precision"],
        "nmt_lib tok/s": fmt(r["nmt_lib_tok_s"], ",.0f"),
        "naive.py tok/s": fmt(r.get("naive_tok_s"), ",.0f"),
        "speed-up": fmt(r.get("speedup"), ".2f") + "×",
        "nmt_lib, % of GEMM peak": fmt(100 * r["nmt_lib_flop_frac"], ".0f"),
    }
    for r in bench_train["throughput"]
]
search_rows = [
    {
        "precision": r["precision"],
        "nmt_lib beam sent/s": fmt(r["nmt_lib beam sent/s"], ".1f"),
        "naive.py beam sent/s": fmt(r.get("naive beam sent/s"), ".1f"),
        "beam speed-up": fmt(r.get("beam speed-up vs naive"), ".2f") + "×",
        "nmt_lib greedy sent/s": fmt(r["nmt_lib greedy sent/s"], ".1f"),
        "naive.py greedy sent/s": fmt(r.get("naive greedy sent/s"), ".1f"),
        "greedy speed-up": fmt(r.get("greedy speed-up vs naive"), ".2f") + "×",
    }
    for r in bench_search["search"]
]
glue("fast_train_machine", machine(bench_train["machine"]), display=False)
glue("fast_search_machine", machine(bench_search["machine"]), display=False)
glue("fast_train_table", Markdown(markdown_table(train_rows)), display=False)
glue("fast_search_table", Markdown(markdown_table(search_rows)), display=False)
speedups = [r["speedup"] for r in bench_train["throughput"] if r.get("speedup")]
beam_speedups = [
    r["beam speed-up vs naive"] for r in bench_search["search"] if r.get("beam speed-up vs naive")
]
glue("fast_train_speedup", span(speedups), display=False)
glue("fast_beam_speedup", span(beam_speedups), display=False)

# %% [markdown]
# **Training** (target tokens per second, padding excluded; the step is `Trainer.step`'s: forward,
# summed loss, backward, clipping, Adadelta), on {glue:text}`fast_train_machine`:
#
# ```{glue:md} fast_train_table
# :format: myst
# ```
#
# **Decoding** (sentences per second; beam 10 and greedy, each sentence decoded to a fixed length
# so that both implementations do the same work), on {glue:text}`fast_search_machine`:
#
# ```{glue:md} fast_search_table
# :format: myst
# ```
#
# A training step of `nmt_lib` is {glue:text}`fast_train_speedup` as fast as `naive.py`'s, and beam
# search {glue:text}`fast_beam_speedup`. The speed-up is a median of per-batch ratios, so it need
# not equal the ratio of the two tokens-per-second columns. "% of GEMM peak" is the model's
# multiply-adds per second over those of one large matrix product in the same precision, measured
# right after each step. `bench/README.md` gives the shapes, the other machines (including a GPU),
# what each technique above contributed, and what was tried and not kept.
#
# ## Summary
#
# - The paper modules are the specification; `nmt_lib.fast` computes the same functions, and
#   `train.backend` chooses between them. Each fast path is an identity, checked above in float64
#   and in `tests/test_fast_paths.py` on both backends.
# - **Linearity** {eq}`fast-linear`: the input projections of all steps, $U_a h_j$ once per
#   sentence, and every group of products that shares an input, each as one matrix product.
# - **Teacher forcing**: the output layer runs once over the real positions after the recurrence,
#   {eq}`fast-output`, and its backward is {eq}`fast-output-grad` written over the logits; no
#   log-softmax is stored.
# - **The chain rule by hand** {eq}`fast-bptt`: the backward loop keeps only what the recurrence
#   needs, each recurrent weight's gradient is one product over all $B\,T$ rows
#   {eq}`fast-weights`, and the rows of sentences that have ended are skipped.
# - **The batched beam**: every sentence's hypotheses against one copy of its encoding,
#   {eq}`fast-beam`, and the best words found from the logits, {eq}`fast-topk`.
#
# ## Exercises
#
# 1. Show that the top-$k$ words of a row of logits are its top-$k$ words by log-probability
#    ({eq}`fast-topk`). Why must the excluded words still count in $\ell$ to give GroundHog's
#    scores, and what would change if they were removed before normalising?
# 2. $W_a s_{i-1}$ is a product in the decoder's loop, like $U_a h_j$. Why can it not be computed
#    for all steps before the loop as $U_a h_j$ is? Which products of a decoder step could be,
#    during training?
# 3. Count the multiply-adds of $\partial L/\partial U$ computed as $T$ products of $B$ rows and as
#    one product {eq}`fast-weights`. If the counts are equal, where does the speed come from?
#
# :::{admonition} Solutions
# :class: dropdown
#
# 1. $\log p_w = \zeta_w - (\zeta_{\max} + \ell)$ with the same $\zeta_{\max} + \ell$ for every
#    word of the row, and subtracting a constant preserves the order. GroundHog normalises over the
#    whole vocabulary, then sets the excluded words to $-\infty$: their probability mass stays in
#    the denominator. Removing them first would renormalise over the remaining words and make
#    every log-probability larger by $-\log(1 - p_{\text{excluded}})$, which changes the costs
#    (and, with EOS excluded on some rows only, can change which hypotheses win).
# 2. $s_{i-1}$ depends on the previous step (through {eq}`dec-state`), so it is not known before
#    the loop; $h_j$ is. In training, what depends only on the reference can be precomputed:
#    $[W; W_z; W_r]\,\bar e(y_i)$ (done) and $V_o \bar e(y_{i-1})$; the deep output and the softmax
#    can follow the loop ({ref}`fast-output-layer`). $U_r s$, $U_z s$, $U (r \circ s)$, $W_a s$
#    and $C c_i$ cannot.
# 3. Both are $B\,T\,n^2$ multiply-adds. One product of inner size $B\,T$ writes $U$'s gradient
#    once instead of adding $T$ partial products into it, makes one call instead of $T$, and gives
#    the matrix library a shape large enough to run near its peak; $T$ products of $B$ rows each,
#    with $B$ in the tens, do not.
# :::
