# %% [markdown]
# # After the paper: the Transformer
#
# **What you will derive.** The model that replaced recurrent encoder–decoders (Vaswani et al.
# 2017): no recurrence, attention everywhere. You will derive scaled dot-product attention,
# multi-head attention, the sinusoidal position encodings, the encoder and decoder layers with the
# decoder's encoder–decoder attention (the paper's alignment, in a new form), and check that
# `nmt_lib.transformer` computes exactly them.
#
# **What you need.** The paper's alignment model ({doc}`04_alignment`) and Luong et al.'s scores
# ({doc}`13_luong`). Notation: {doc}`../notation`.
#
# ## The paper's claim
#
# The paper's attention removed the fixed-length bottleneck between encoder and decoder, but kept
# recurrences on both sides, so that a sentence is still processed one word after another.
# Vaswani et al.: "the Transformer is the first transduction model relying entirely on
# self-attention to compute representations of its input and output without using sequence
# aligned RNNs or convolution". Every position attends to every other in one step, and all the
# positions of a sentence are computed at once in training.

# %% tags=["parameters"]
profile = "smoke"
train = False
results_dir = None
data_dir = None

# %%
import math

import matplotlib.pyplot as plt
import torch
from myst_nb import glue
from torch.testing import assert_close

from nmt_lib.config import ModelConfig
from nmt_lib.models import build_model
from nmt_lib.transformer import positions

torch.manual_seed(0)
torch.set_num_threads(1)  # tiny tensors: one thread is fastest
torch.set_default_dtype(torch.float64)

# %% [markdown]
# ## The equations
#
# **Scaled dot-product attention.** Queries $Q$, keys $K$ and values $V$ (one per row); each query
# takes a weighted mean of the values, weighted by its dot products with the keys:
#
# $$
# \operatorname{Attention}(Q, K, V) = \operatorname{softmax}\Big(\frac{Q K^\top}{\sqrt{d_k}}\Big) V .
# $$ (tf-attention)
#
# It is Luong's `dot` score ({doc}`13_luong`) with a scale: for random unit-variance vectors the
# dot product of two $d_k$-vectors has variance $d_k$, and $1/\sqrt{d_k}$ keeps the softmax out of
# its saturated regime. Masked positions (padding; in the decoder, the future) get $-\infty$.
#
# **Multi-head attention.** $h$ attentions in parallel, each on its own $d_k = d/h$-dimensional
# projections, concatenated and projected back:
#
# $$
# \operatorname{MultiHead}(X, Y) = [\mathrm{head}_1; \dots; \mathrm{head}_h]\, W_O, \qquad
# \mathrm{head}_j = \operatorname{Attention}(X W_Q^{(j)}, Y W_K^{(j)}, Y W_V^{(j)}) .
# $$ (tf-multihead)
#
# Self-attention is $\operatorname{MultiHead}(X, X)$; the decoder's encoder–decoder attention is
# $\operatorname{MultiHead}(X, H)$ with $H$ the encoder's output: the paper's alignment
# $\alpha_{ij}$, computed from the decoder's current layer, per head.
#
# **Positions.** Attention is blind to order, so a position encoding is added to each input:
#
# $$
# \mathrm{PE}(p, 2i) = \sin\!\big(p / 10000^{2i/d}\big), \qquad
# \mathrm{PE}(p, 2i+1) = \cos\!\big(p / 10000^{2i/d}\big),
# $$ (tf-pe)
#
# and the inputs are $\sqrt d\, E w + \mathrm{PE}(p)$.
#
# **Layers.** With $\mathrm{FFN}(x) = \max(0, x W_1 + b_1) W_2 + b_2$ and layer normalisation
# $\mathrm{LN}$, an encoder layer and a decoder layer are (post-norm, as the paper):
#
# $$
# \begin{aligned}
# \text{encoder:}\quad & x \leftarrow \mathrm{LN}(x + \operatorname{MultiHead}(x, x)), &
# x &\leftarrow \mathrm{LN}(x + \mathrm{FFN}(x)), \\
# \text{decoder:}\quad & z \leftarrow \mathrm{LN}(z + \operatorname{MultiHead}_{\text{causal}}(z, z)), &
# z &\leftarrow \mathrm{LN}(z + \operatorname{MultiHead}(z, H)), \quad
# z \leftarrow \mathrm{LN}(z + \mathrm{FFN}(z)),
# \end{aligned}
# $$ (tf-layers)
#
# and $p(y_i \mid y_{<i}, \mathbf x) = \operatorname{softmax}(W_y z_i + b_y)$ from the last decoder
# layer at position $i$, whose input is $y_{i-1}$ (a zero embedding at $i = 1$, as in the paper's
# models).
#
# ## The library functions
#
# Multi-head attention {eq}`tf-attention`–{eq}`tf-multihead`, the heads side by side in one
# $[d, d]$ matrix each:
#
# ```{literalinclude} ../../nmt_lib/transformer.py
# :pyobject: MultiHead.forward
# ```
#
# The decoder over a target sentence, all positions at once under the causal mask (training calls
# it once per batch; a search computes one position at a time, below):
#
# ```{literalinclude} ../../nmt_lib/transformer.py
# :pyobject: Transformer.decode
# ```
#
# ## The numeric check
#
# The reference below is {eq}`tf-attention`–{eq}`tf-layers` written literally, one sentence, one
# position and one head at a time (the softmax and the layer norm by hand), reading only the model's
# parameter tensors (large random weights, float64, two layers of two heads, a padded batch).


# %%
def layer_norm(v, P, p):
    mu, var = v.mean(), ((v - v.mean()) ** 2).mean()
    return (v - mu) / math.sqrt(var + 1e-5) * P[p + ".weight"] + P[p + ".bias"]


def multi_head(P, p, X, Y, causal, heads):
    """(tf-multihead) row by row; also the weights averaged over the heads."""
    d = X[0].shape[0]
    dk, out, avg = d // heads, [], []
    for t, x_t in enumerate(X):
        keys = range(t + 1) if causal else range(len(Y))
        parts, mean = [], 0
        for j in range(heads):
            cols = slice(j * dk, (j + 1) * dk)
            q = x_t @ P[p + ".W_Q"][:, cols]
            e = torch.stack([q @ (Y[s] @ P[p + ".W_K"][:, cols]) for s in keys]) / math.sqrt(dk)
            a = torch.exp(e) / torch.exp(e).sum()  # (tf-attention)
            parts.append(sum(a[s] * (Y[s] @ P[p + ".W_V"][:, cols]) for s in keys))
            mean = mean + a / heads
        out.append(torch.cat(parts) @ P[p + ".W_O"])
        avg.append(mean)
    return out, avg


def reference(model, src, trg):
    cfg, P = model.cfg, {k: v.detach() for k, v in model.named_parameters()}
    d, H = cfg.m, cfg.heads
    pe = lambda p: torch.tensor([math.sin(p / 10000 ** (i / d)) if i % 2 == 0  # noqa: E731
                                 else math.cos(p / 10000 ** ((i - 1) / d)) for i in range(d)])  # fmt: skip
    ffn = lambda v, p: P[p + ".W_2"] @ torch.relu(P[p + ".W_1"] @ v + P[p + ".b_1"]) + P[p + ".b_2"]  # noqa: E731
    h = [math.sqrt(d) * P["E_bar"][w] + pe(j) for j, w in enumerate(src)]
    for k in range(cfg.layers):
        p = f"encoder.{k}"
        att, _ = multi_head(P, p + ".attention", h, h, False, H)
        h = [layer_norm(h[j] + att[j], P, p + ".norm1") for j in range(len(h))]
        h = [layer_norm(v + ffn(v, p + ".ffn"), P, p + ".norm2") for v in h]
    prev = [torch.zeros(d)] + [P["E"][w] for w in trg[:-1]]  # y_0 = 0, y_1 .. y_{T-1}
    z = [math.sqrt(d) * e + pe(i) for i, e in enumerate(prev)]
    for k in range(cfg.layers):
        p = f"decoder.{k}"
        att, _ = multi_head(P, p + ".self_attention", z, z, True, H)
        z = [layer_norm(z[i] + att[i], P, p + ".norm1") for i in range(len(z))]
        att, align = multi_head(P, p + ".cross_attention", z, h, False, H)
        z = [layer_norm(z[i] + att[i], P, p + ".norm2") for i in range(len(z))]
        z = [layer_norm(v + ffn(v, p + ".ffn"), P, p + ".norm3") for v in z]
    logits = [P["W_y"] @ v + P["b_y"] for v in z]
    logp = torch.stack([lg[w] - torch.logsumexp(lg, 0) for lg, w in zip(logits, trg, strict=True)])
    return logp, torch.stack(align)


cfg = ModelConfig(arch="Transformer", src_vocab=13, trg_vocab=11, m=8, heads=2, ff=12, layers=2)
model = build_model(cfg).double()
with torch.no_grad():
    for name, p in model.named_parameters():
        is_gain = ".norm" in name and name.endswith("weight")  # layer norm gains near 1
        p.normal_(1.0 if is_gain else 0.0, 0.5)
lengths_x, lengths_y = [6, 3, 2], [2, 5, 4]
x_mask = torch.tensor([[j < L for j in range(6)] for L in lengths_x])
y_mask = torch.tensor([[i < L for i in range(5)] for L in lengths_y])
x = torch.randint(3, 13, x_mask.shape).masked_fill(~x_mask, 0)
y = torch.randint(3, 11, y_mask.shape).masked_fill(~y_mask, 0)
logp, align = model(x, x_mask, y, y_mask)
for b in range(3):
    Lx, Ly = lengths_x[b], lengths_y[b]
    ref_logp, ref_align = reference(model, x[b, :Lx].tolist(), y[b, :Ly].tolist())
    assert_close(logp[b, :Ly], ref_logp)
    assert_close(align[b, :Ly, :Lx], ref_align)
print("nmt_lib Transformer == (tf-attention)-(tf-layers), float64, per sentence and padded")

# %% [markdown]
# Every log-probability and every encoder–decoder weight of the padded batch equals the
# per-sentence reference (`tests/test_transformer.py` holds the same identity, that no position
# sees a later one, and that the search's step below reproduces the parallel forward).
#
# ## Decoding one word at a time: the key/value cache
#
# A search knows $y_{i-1}$ only after step $i - 1$, so it computes position $i$ alone. In each
# decoder layer, position $i$ attends to the positions $\le i$ through their keys $z_{i'} W_K$ and
# values $z_{i'} W_V$, and those do not change once computed (no position sees a later one). The
# search therefore carries, in the place of the paper's state $s_{i-1}$, each layer's keys and
# values of the positions before $i$ (the *cache*, `[rows, layers, 2, i - 1, d]`); a step appends
# position $i$'s own and attends to all of them, without a mask (there is no future yet). The
# encoder–decoder keys and values depend on the source only and are computed once per sentence,
# in `Encoded.Uh`, as RNNsearch's $U_a h_j$ ({doc}`04_alignment`):
#
# ```{literalinclude} ../../nmt_lib/transformer.py
# :pyobject: DecoderLayer.step
# ```
#
# Run position by position along the batch's references, the step gives the parallel forward's
# log-probabilities and alignments:

# %%
enc = model.encode(x, x_mask)
cache, y_prev = model.init_state(enc), None
for i in range(y.shape[1]):
    logp_i, cache, align_i = model.readout_step(enc, cache, y_prev)
    real = y_mask[:, i]
    assert_close(logp_i[real].gather(1, y[real, i, None])[:, 0], logp[real, i])
    assert_close(align_i[real], align[real, i])
    y_prev = y[:, i]
print("cached steps == the parallel forward; cache after the last step:", tuple(cache.shape))

# %% [markdown]
# Without the cache, step $i$ would run the decoder over all $i$ positions again: $T_y(T_y + 1)/2$
# position-steps for a translation of $T_y$ words instead of $T_y$, and a beam search that runs to
# its length limit of $3 T_x$ words on a long sentence pays that square.
#
# ## The position encodings
#
# Each pair of dimensions $(2i, 2i+1)$ of {eq}`tf-pe` is a rotation at its own frequency, from one
# turn every $2\pi$ positions down to one every $2\pi \cdot 10000$: the encoding of $p + k$ is a
# fixed linear function (a rotation) of that of $p$, for every $p$, which lets attention express
# relative offsets.

# %%
pe = positions(50, 64, torch.zeros(()))
k = 7
rot = torch.linalg.lstsq(pe[:-k], pe[k:]).solution  # one linear map for every position
glue("tf_pe_residual", float((pe[:-k] @ rot - pe[k:]).abs().max()), display=False)
fig, ax = plt.subplots(figsize=(6, 2.8))
im = ax.imshow(pe.T, aspect="auto", cmap="RdBu", vmin=-1, vmax=1)
ax.set_xlabel("position p")
ax.set_ylabel("dimension")
fig.colorbar(im, ax=ax)
plt.tight_layout()
glue("tf_pe_fig", fig, display=False)

# %% [markdown]
# ```{glue:figure} tf_pe_fig
# :name: fig-tf-pe
#
# The sinusoidal position encodings {eq}`tf-pe` of 50 positions in 64 dimensions.
# ```
#
# One linear map takes the encoding of every position $p$ to that of $p + 7$, to
# {glue:text}`tf_pe_residual:.1e` (least squares over all 43 pairs).
#
# ## Summary
#
# - Scaled dot-product attention {eq}`tf-attention` is Luong's `dot` score with a $1/\sqrt{d_k}$
#   scale; multi-head attention {eq}`tf-multihead` runs several on their own projections.
# - Sinusoidal encodings {eq}`tf-pe` give order to attention, which has none.
# - The encoder–decoder attention of {eq}`tf-layers` is the paper's alignment: the decoder's
#   current representation attends to every source position, in every layer and head.
# - No recurrence: in training every position is computed at once; in a search, each step computes
#   one new position from a cache of the earlier positions' keys and values.
# - `nmt_lib.transformer` computes exactly these equations (checked above in float64).
#
# ## Exercises
#
# 1. Why does the decoder's self-attention need the causal mask in training but not in a search's
#    step?
# 2. Show that for random $q, k \in \mathbb R^{d_k}$ with independent unit-variance entries,
#    $\operatorname{Var}(q^\top k) = d_k$.
# 3. How many position-steps does a decoder that recomputes the whole prefix at every step compute
#    for a 30-word translation, and how many does the cached step?
#
# :::{admonition} Solutions
# :class: dropdown
#
# 1. In training the whole reference is the input at once, so position $i$ could see $y_i$ (its own
#    target) and later words; in a step the cache holds only the positions already computed, so
#    there is no future to hide.
# 2. $q^\top k = \sum_{t=1}^{d_k} q_t k_t$, a sum of $d_k$ independent terms of mean 0 and
#    variance $\mathbb E[q_t^2]\mathbb E[k_t^2] = 1$.
# 3. $1 + 2 + \dots + 30 = 465$ position-steps without a cache, 30 with one (each new position
#    attends to the cached keys and values of the earlier ones).
# :::
