# %% [markdown]
# # After the paper: the Transformer
#
# **What you will derive.** The model that replaced recurrent encoder–decoders (Vaswani et al.
# 2017): no recurrence, attention everywhere. You will derive scaled dot-product attention,
# multi-head attention, the sinusoidal position encodings, the encoder and decoder layers with the
# decoder's encoder–decoder attention (the paper's alignment, in a new form), and check that
# `nmt_lib.models.transformer` computes exactly them.
#
# **What you need.** The paper's alignment model ({doc}`04_alignment`) and Luong et al.'s scores
# ({doc}`11_luong`). Notation: {doc}`../notation`.
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
profile = "lite"
train = False
results_dir = None
data_dir = None

# %% tags=["remove-cell"]
from nmt_experiments.results import check_parameters

check_parameters(profile, train, results_dir, data_dir)

# %%
import math

import matplotlib.pyplot as plt
import torch
from myst_nb import glue
from torch.testing import assert_close

from nmt_lib.config import model_config
from nmt_lib.models import build_model
from nmt_lib.models.transformer import positions

torch.manual_seed(0)
torch.set_num_threads(1)  # tiny tensors: one thread is fastest
torch.set_default_dtype(torch.float64)

# %% tags=["hide-input"]
from nmt_experiments import diagrams

fig = diagrams.transformer()  # nmt_experiments/diagrams.py draws every picture of a model
glue("diagram_transformer", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} diagram_transformer
# :name: fig-diagram_transformer
#
# The Transformer: an encoder of $N$ blocks of self-attention and a feed-forward layer over all
# source positions at once; a decoder of $N$ blocks that attend to the words so far (masked), then
# to the encoder's output, then a feed-forward layer. No recurrence anywhere.
# ```
#
# ## The equations
#
# **Scaled dot-product attention.** Queries $Q$, keys $K$ and values $V$ (one per row); each query
# takes a weighted mean of the values, weighted by its dot products with the keys:
#
# $$
# \operatorname{Attention}(Q, K, V) = \operatorname{softmax}\Big(\frac{Q K^\top}{\sqrt{d_k}}\Big) V .
# $$ (tf-attention)
#
# It is Luong's `dot` score ({doc}`11_luong`) with a scale: for random vectors whose entries are
# independent with mean 0 and variance 1, the dot product of two $d_k$-vectors has mean 0 and
# variance $d_k$, and $1/\sqrt{d_k}$ keeps the softmax out of its saturated regime. The scale is
# calibrated for entries of mean 0: with nonzero means the dot product's variance is larger and
# its mean is no longer 0 (exercise 2). Masked positions (padding; in the decoder, the future) get
# $-\infty$.
#
# **Multi-head attention.** $n_h$ attentions (*heads*) in parallel, each on its own
# $d_k = d/n_h$-dimensional projections, concatenated and projected back:
#
# $$
# \operatorname{MultiHead}(X, Y) = [\mathrm{head}^{(1)}; \dots; \mathrm{head}^{(n_h)}]\, W_{\mathrm{MH}},
# \qquad
# \mathrm{head}^{(\eta)} = \operatorname{Attention}(X W_Q^{(\eta)}, Y W_K^{(\eta)}, Y W_V^{(\eta)}) .
# $$ (tf-multihead)
#
# Self-attention is $\operatorname{MultiHead}(X, X)$; the decoder's encoder–decoder attention is
# $\operatorname{MultiHead}(X, H)$ with $H$ the encoder's output, one row $h_j$ per source word:
# the paper's alignment $\alpha_{ij}$, computed from the decoder's current layer, per head.
#
# **Positions.** Attention is blind to order, so a position encoding is added to each input:
#
# $$
# \mathrm{PE}(\mathrm{pos}, 2k) = \sin\!\big(\mathrm{pos} / 10000^{2k/d}\big), \qquad
# \mathrm{PE}(\mathrm{pos}, 2k+1) = \cos\!\big(\mathrm{pos} / 10000^{2k/d}\big),
# $$ (tf-pe)
#
# for the position $\mathrm{pos}$ and the pair of dimensions $k = 0, \dots, d/2 - 1$, and the
# inputs are $\sqrt d\, E w + \mathrm{PE}(\mathrm{pos})$ for the word $w$ at $\mathrm{pos}$.
#
# **Layers.** With $\mathrm{FFN}(v) = \max(0, v W_1 + b_1) W_2 + b_2$ and layer normalisation
# $\mathrm{LN}$, an encoder layer (its rows $h_j$, one per source position) and a decoder layer
# (its rows $s_i$, one per target position) are (post-norm, as the paper):
#
# $$
# \begin{aligned}
# \text{encoder:}\quad & h \leftarrow \mathrm{LN}(h + \operatorname{MultiHead}(h, h)), &
# h &\leftarrow \mathrm{LN}(h + \mathrm{FFN}(h)), \\
# \text{decoder:}\quad & s \leftarrow \mathrm{LN}(s + \operatorname{MultiHead}_{\text{causal}}(s, s)), &
# s &\leftarrow \mathrm{LN}(s + \operatorname{MultiHead}(s, H)), \quad
# s \leftarrow \mathrm{LN}(s + \mathrm{FFN}(s)),
# \end{aligned}
# $$ (tf-layers)
#
# and $p(y_i \mid y_{<i}, \mathbf x) = \operatorname{softmax}(W_y s_i + b_y)$ from the last decoder
# layer at position $i$, whose input is $y_{i-1}$ (a zero embedding at $i = 1$, as in the paper's
# models). $W_1, W_2, b_1, b_2$ are the feed-forward layer's, not the output factors
# $W^{(1)}, W^{(2)}$ of {doc}`05_decoder`; the code names the multi-head matrices `W_Q`, `W_K`,
# `W_V` and `W_O` ($W_{\mathrm{MH}}$ here, to keep $W_o$ for the paper's output matrix).
#
# ## The library functions
#
# Multi-head attention {eq}`tf-attention`–{eq}`tf-multihead`, the heads side by side in one
# $[d, d]$ matrix each:
#
# ```{literalinclude} ../../nmt_lib/models/transformer.py
# :pyobject: MultiHead.forward
# ```
#
# The decoder over a target sentence, all positions at once under the causal mask (training calls
# it once per batch; a search computes one position at a time, below):
#
# ```{literalinclude} ../../nmt_lib/models/transformer.py
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


def multi_head(P, p, X, Y, causal, n_h):
    """(tf-multihead) row by row; also the weights averaged over the n_h heads."""
    d = X[0].shape[0]
    dk, out, avg = d // n_h, [], []
    for t, x_t in enumerate(X):
        keys = range(t + 1) if causal else range(len(Y))
        parts, mean = [], 0
        for eta in range(n_h):
            cols = slice(eta * dk, (eta + 1) * dk)
            q = x_t @ P[p + ".W_Q"][:, cols]
            e = torch.stack([q @ (Y[u] @ P[p + ".W_K"][:, cols]) for u in keys]) / math.sqrt(dk)
            a = torch.exp(e) / torch.exp(e).sum()  # (tf-attention)
            parts.append(sum(a[u] * (Y[u] @ P[p + ".W_V"][:, cols]) for u in keys))
            mean = mean + a / n_h
        out.append(torch.cat(parts) @ P[p + ".W_O"])  # W_MH
        avg.append(mean)
    return out, avg


def reference(model, src, trg):
    cfg, P = model.cfg, {k: v.detach() for k, v in model.named_parameters()}
    d, n_h = cfg.m, cfg.heads

    def pe(pos):  # the sinusoidal position encoding of position pos
        return torch.tensor(
            [
                math.sin(pos / 10000 ** (2 * (u // 2) / d))
                if u % 2 == 0
                else math.cos(pos / 10000 ** (2 * (u // 2) / d))
                for u in range(d)
            ]
        )

    def ffn(v, p):  # the position-wise feed-forward network of sublayer p
        return P[p + ".W_2"] @ torch.relu(P[p + ".W_1"] @ v + P[p + ".b_1"]) + P[p + ".b_2"]

    h = [math.sqrt(d) * P["E_bar"][w] + pe(j) for j, w in enumerate(src)]  # rows h_j
    for k in range(cfg.layers):
        p = f"encoder.{k}"
        att, _ = multi_head(P, p + ".attention", h, h, False, n_h)
        h = [layer_norm(h[j] + att[j], P, p + ".norm1") for j in range(len(h))]
        h = [layer_norm(v + ffn(v, p + ".ffn"), P, p + ".norm2") for v in h]
    prev = [torch.zeros(d)] + [P["E"][w] for w in trg[:-1]]  # y_0 = 0, y_1 .. y_{T-1}
    s = [math.sqrt(d) * e + pe(i) for i, e in enumerate(prev)]  # rows s_i
    for k in range(cfg.layers):
        p = f"decoder.{k}"
        att, _ = multi_head(P, p + ".self_attention", s, s, True, n_h)
        s = [layer_norm(s[i] + att[i], P, p + ".norm1") for i in range(len(s))]
        att, align = multi_head(P, p + ".cross_attention", s, h, False, n_h)
        s = [layer_norm(s[i] + att[i], P, p + ".norm2") for i in range(len(s))]
        s = [layer_norm(v + ffn(v, p + ".ffn"), P, p + ".norm3") for v in s]
    logits = [P["W_y"] @ v + P["b_y"] for v in s]
    logp = torch.stack([lg[w] - torch.logsumexp(lg, 0) for lg, w in zip(logits, trg, strict=True)])
    return logp, torch.stack(align)


cfg = model_config(arch="Transformer", src_vocab=13, trg_vocab=11, m=8, heads=2, ff=12, layers=2)
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
# decoder layer, position $i$ attends to the positions $\le i$ through their keys $s_{i'} W_K$ and
# values $s_{i'} W_V$, and those do not change once computed (no position sees a later one). The
# search therefore carries, in the place of the paper's state $s_{i-1}$, each layer's keys and
# values of the positions before $i$ (the *cache*, `[rows, layers, 2, i - 1, d]`); a step appends
# position $i$'s own and attends to all of them, without a mask (there is no future yet). The
# encoder–decoder keys and values depend on the source only and are computed once per sentence,
# in `TransformerEncoded.kv`, as RNNsearch's $U_a h_j$ ({doc}`04_alignment`):
#
# ```{literalinclude} ../../nmt_lib/models/transformer.py
# :pyobject: DecoderLayer.step
# ```
#
# Run position by position along the batch's references, the step gives the parallel forward's
# log-probabilities and alignments:

# %%
enc = model.encode(x, x_mask)
cache, y_prev = model.init_state(enc), None
for i in range(y.shape[1]):
    logp_i, cache, align_i = model.step(enc, cache, y_prev)
    real = y_mask[:, i]
    assert_close(logp_i[real].gather(1, y[real, i, None])[:, 0], logp[real, i])
    assert_close(align_i[real], align[real, i])
    y_prev = y[:, i]
print("cached steps == the parallel forward; cache after the last step:", tuple(cache.kv.shape))

# %% [markdown]
# Without the cache, step $i$ would run the decoder over all $i$ positions again: $T_y(T_y + 1)/2$
# position-steps for a translation of $T_y$ words instead of $T_y$, and a beam search that runs to
# its length limit of $3 T_x$ words on a long sentence pays that square.
#
# ## The position encodings
#
# Each pair of dimensions $(2k, 2k+1)$ of {eq}`tf-pe` turns at its own frequency
# $\nu_k = 10000^{-2k/d}$, from one turn every $2\pi$ positions down to one every
# $2\pi \cdot 10000$. By the sum formulas of sine and cosine, moving every position by an offset
# $\Delta$ rotates each pair by the angle $\nu_k \Delta$, whatever the position:
#
# $$
# \big[\mathrm{PE}(\mathrm{pos} + \Delta, 2k),\ \mathrm{PE}(\mathrm{pos} + \Delta, 2k+1)\big]
# = \big[\mathrm{PE}(\mathrm{pos}, 2k),\ \mathrm{PE}(\mathrm{pos}, 2k+1)\big]
# \begin{bmatrix} \cos \nu_k \Delta & -\sin \nu_k \Delta \\
#                 \sin \nu_k \Delta & \cos \nu_k \Delta \end{bmatrix} ,
# $$ (tf-pe-rot)
#
# so the encoding of $\mathrm{pos} + \Delta$ is $\mathrm{PE}(\mathrm{pos})\, R(\Delta)$ with one
# block-diagonal rotation $R(\Delta)$ for every position, which lets attention express relative
# offsets. The check builds $R(\Delta)$ from {eq}`tf-pe-rot` and compares
# $\mathrm{PE}(\mathrm{pos})\, R(\Delta)$ with `nmt_lib`'s $\mathrm{PE}(\mathrm{pos} + \Delta)$ at
# more positions than there are dimensions.

# %%
d_pe, n_pos, delta = 64, 200, 7
pe = positions(n_pos, d_pe, torch.zeros(()))  # [200, 64]
nu = 10000.0 ** (-torch.arange(0, d_pe, 2) / d_pe)  # one frequency nu_k per pair k
cos, sin = torch.cos(nu * delta), torch.sin(nu * delta)
R = torch.zeros(d_pe, d_pe)  # block-diagonal, (tf-pe-rot) for every pair
R[0::2, 0::2], R[0::2, 1::2] = torch.diag(cos), torch.diag(-sin)
R[1::2, 0::2], R[1::2, 1::2] = torch.diag(sin), torch.diag(cos)
assert_close(R @ R.T, torch.eye(d_pe))  # a rotation
assert_close(pe[:-delta] @ R, pe[delta:])  # one map for all 193 positions, 64 dimensions
glue("tf_pe_residual", float((pe[:-delta] @ R - pe[delta:]).abs().max()), display=False)
glue("tf_pe_pairs", n_pos - delta, display=False)
glue("tf_pe_dims", d_pe, display=False)
glue("tf_pe_delta", delta, display=False)
pe = pe[:50]  # the picture: 50 positions
fig, ax = plt.subplots(figsize=(6, 2.8))
im = ax.imshow(pe.T, aspect="auto", cmap="RdBu", vmin=-1, vmax=1)
ax.set_xlabel("position pos")
ax.set_ylabel("dimension")
fig.colorbar(im, ax=ax)
plt.tight_layout()
glue("tf_pe_fig", fig, display=False)
plt.close(fig)  # shown once, where the glue:figure places it

# %% [markdown]
# ```{glue:figure} tf_pe_fig
# :name: fig-tf-pe
#
# The sinusoidal position encodings {eq}`tf-pe` of 50 positions in 64 dimensions.
# ```
#
# The rotation $R(\Delta)$ of {eq}`tf-pe-rot`, for $\Delta$ = {glue:text}`tf_pe_delta`, takes the
# encoding of every position to that of the position {glue:text}`tf_pe_delta` further on, for all
# {glue:text}`tf_pe_pairs` pairs of positions in {glue:text}`tf_pe_dims` dimensions, to
# {glue:text}`tf_pe_residual:.1e` (float64 rounding).
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
# - `nmt_lib.models.transformer` computes exactly these equations (checked above in float64).
#
# ## Exercises
#
# 1. Why does the decoder's self-attention need the causal mask in training but not in a search's
#    step?
# 2. Show that for random $q, k \in \mathbb R^{d_k}$ whose $2 d_k$ entries are independent with
#    mean 0 and variance 1, $\operatorname{Var}(q^\top k) = d_k$. What changes if the entries have
#    means $\mu_q, \mu_k \ne 0$?
# 3. How many position-steps does a decoder that recomputes the whole prefix at every step compute
#    for a 30-word translation, and how many does the cached step?
#
# :::{admonition} Solutions
# :class: dropdown
#
# 1. In training the whole reference is the input at once, so position $i$ could see $y_i$ (its own
#    target) and later words; in a step the cache holds only the positions already computed, so
#    there is no future to hide.
# 2. $q^\top k = \sum_{u=1}^{d_k} q_u k_u$, a sum of $d_k$ independent terms. Each has mean
#    $\mathbb E[q_u]\,\mathbb E[k_u] = 0$ and variance
#    $\mathbb E[q_u^2]\,\mathbb E[k_u^2] - (\mathbb E[q_u]\,\mathbb E[k_u])^2 = 1 \cdot 1 - 0 = 1$,
#    where the means being 0 is used twice: for $\mathbb E[q_u^2] = \operatorname{Var}(q_u) = 1$ and
#    for the last term. With means $\mu_q, \mu_k$ each term has variance
#    $(1 + \mu_q^2)(1 + \mu_k^2) - \mu_q^2 \mu_k^2 = 1 + \mu_q^2 + \mu_k^2$ and mean $\mu_q \mu_k$: the
#    dot product has variance $d_k (1 + \mu_q^2 + \mu_k^2)$ and mean $d_k \mu_q \mu_k$, and
#    $1/\sqrt{d_k}$ no longer makes it of order 1.
# 3. $1 + 2 + \dots + 30 = 465$ position-steps without a cache, 30 with one (each new position
#    attends to the cached keys and values of the earlier ones).
# :::
