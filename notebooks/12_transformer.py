# %% [markdown]
# # After the paper: the Transformer
#
# **What you will derive.** The model that replaced recurrent encoder–decoders (Vaswani et al.
# 2017): no recurrence, attention everywhere. You will derive scaled dot-product attention,
# multi-head attention, the sinusoidal position encodings, the encoder and decoder layers with the
# decoder's encoder–decoder attention (the paper's alignment, in a new form), and check that
# `nmt_lib.models.transformer` computes exactly them. Then the recipe it is trained with (residual
# connections and layer normalisation, the warm-up and inverse-square-root schedule, label
# smoothing, dropout), each checked against `nmt_lib`; a toy Transformer trained in the page, its
# attention heads drawn; and what came after the paper and the Transformer.
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
from nmt_experiments.core.results import check_parameters

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
from nmt_experiments.pages import diagrams_others

fig = diagrams_others.transformer()  # nmt_experiments/pages/diagrams_others.py draws it
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
# block-diagonal rotation $R(\Delta)$ for every position. Vaswani et al. chose the sinusoids for
# this reason, as a hypothesis: "we hypothesized it would allow the model to easily learn to
# attend by relative positions" (§3.5). The identity makes relative offsets expressible by one
# linear map; it does not show that a trained model attends by them, which Vaswani et al. did not
# test (learned position embeddings gave them nearly the same results, their Table 3). The check
# builds $R(\Delta)$ from {eq}`tf-pe-rot` and compares $\mathrm{PE}(\mathrm{pos})\, R(\Delta)$
# with `nmt_lib`'s $\mathrm{PE}(\mathrm{pos} + \Delta)$ at
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
# ## The recipe
#
# The equations above are not enough to train a Transformer. Vaswani et al. train it with a recipe
# of four parts (§5.3–5.4), none of which RNNsearch uses: residual connections with layer
# normalisation, already inside {eq}`tf-layers`; Adam ($\beta_2 = 0.98$) with a warm-up and an
# inverse-square-root decay of the learning rate; label smoothing ($\varepsilon_{\text{ls}} = 0.1$);
# and dropout ($p_{\text{drop}} = 0.1$). The Transformer of the Multi30k study
# ({doc}`13_compare`) is trained with all four; this section derives each and checks it against
# `nmt_lib`.
#
# **Residual connections and layer normalisation.** Each sub-layer $F$ (attention or
# feed-forward) of {eq}`tf-layers` is wrapped as $v \leftarrow \mathrm{LN}(v + F(v))$: its input
# is added to its output (a *residual connection*, He et al. 2016), and the sum is normalised
# over the $d$ entries of each row (*layer normalisation*, Ba, Kiros & Hinton 2016):
#
# $$
# \mathrm{LN}(v) = \gamma \circ \frac{v - \mu(v)}{\sqrt{\sigma^2(v) + 10^{-5}}} + \beta, \qquad
# \mu(v) = \frac1d \sum_{k=1}^d v_k, \quad \sigma^2(v) = \frac1d \sum_{k=1}^d (v_k - \mu(v))^2,
# $$ (tf-ln)
#
# with a gain $\gamma$ and a bias $\beta$ learned per layer (initialised to 1 and 0). The
# residual's Jacobian is $\partial (v + F(v)) / \partial v = I + \partial F / \partial v$: the
# gradient reaches the layers below through the identity, however small $F$'s own Jacobian is,
# and a block can start as (nearly) the identity and learn only a correction. The normalisation
# keeps each row at mean 0 and variance 1 whatever the depth, so that the scale of
# {eq}`tf-attention`'s dot products stays the one $1/\sqrt{d_k}$ was calibrated for.
#
# The library's layers are *post-norm*, as Vaswani et al.'s: the normalisation comes after the
# sum, on the path that the identity takes too. Most later implementations are *pre-norm*,
# $v \leftarrow v + F(\mathrm{LN}(v))$, which leaves the identity path unnormalised; Xiong et al.
# (2020) show that at initialisation post-norm's gradients near the output are large, which is one
# reason post-norm needs the warm-up below and pre-norm trains without it. The check rebuilds an
# encoder layer of the checked model from its own sub-layers both ways: post-norm is what the
# layer computes, pre-norm is a different function; each normalised row has mean 0 and variance 1
# before $\gamma$ and $\beta$; and the residual's Jacobian is $I$ plus the sub-layer's.

# %%
layer = model.encoder[0]  # the checked model above: float64, random weights
v = torch.randn(1, 6, cfg.m)
mask = torch.ones(1, 6, dtype=torch.bool)
attn = lambda z: layer.attention(z, z, mask[:, None])[0]  # noqa: E731
post = layer.norm1(v + attn(v))
post = layer.norm2(post + layer.ffn(post))
assert_close(layer(v, mask), post)  # the library's layer is post-norm
pre = v + attn(layer.norm1(v))
pre = pre + layer.ffn(layer.norm2(pre))
glue("tf_prenorm_diff", float((pre - post).abs().max().detach()), display=False)
assert not torch.allclose(pre, post)  # pre-norm: another function of the same weights
fresh = torch.nn.LayerNorm(cfg.m).double()  # gamma = 1, beta = 0, as initialised
rows = fresh(v + attn(v))[0]
assert_close(rows.mean(-1), torch.zeros(6))
assert_close(rows.var(-1, unbiased=False), torch.ones(6), rtol=0, atol=1e-4)  # eps = 1e-5
J = torch.autograd.functional.jacobian(lambda z: z + layer.ffn(z), v[0, 0])
assert_close(J, torch.eye(cfg.m) + torch.autograd.functional.jacobian(layer.ffn, v[0, 0]))
print("the layer is post-norm; LN rows: mean 0, variance 1; d(v + F(v))/dv = I + dF/dv")

# %% [markdown]
# Pre-norm and post-norm of the same weights differ here by up to
# {glue:text}`tf_prenorm_diff:.2f` in an output entry: a checkpoint trained one way is not a model
# of the other.
#
# **Warm-up and the inverse square root.** Vaswani et al. train with Adam and a learning rate that
# rises linearly for $u_w$ warm-up updates and then decays as the inverse square root of the
# update number $u$: $d^{-1/2} \min(u^{-1/2}, u\, u_w^{-3/2})$, whose peak, at $u = u_w$, is
# $(d\, u_w)^{-1/2}$. `nmt_lib` names the peak itself, $\mathrm{lr}_{\max}$ (`train.lr`, with
# `train.lr_schedule = "inverse_sqrt"` and `train.warmup_updates` $= u_w$):
#
# $$
# \mathrm{lr}(u) = \mathrm{lr}_{\max} \min\Big(\frac{u}{u_w}, \sqrt{\frac{u_w}{u}}\Big),
# $$ (tf-lr)
#
# the same curve as Vaswani et al.'s, scaled to its peak. Vaswani et al. give no reason for the
# warm-up. Two are usual: Adam divides by a running mean of squared gradients that rests on a few
# updates at the start, so its first steps are large and noisy; and post-norm's large gradients
# near the output at initialisation (above). The decay then shrinks the steps as the loss
# flattens. The check compares `nmt_lib.trainer.learning_rate`, the function the trainer calls
# before every update, with Vaswani et al.'s formula scaled to its peak, and draws it for the
# recipe that the Multi30k study chose for its Transformer:

# %%
import csv
import dataclasses

from torch.nn import functional as F

from nmt_experiments.comparison import multi30k
from nmt_experiments.core import plots
from nmt_lib.config import TrainConfig, run_from_dict
from nmt_lib.io import read_json
from nmt_lib.paper.steps import target_log_prob
from nmt_lib.search import greedy_search
from nmt_lib.trainer import learning_rate

sweep = multi30k.RESULTS / "recipes"  # the Multi30k recipe sweep ({doc}`13_compare`)
with open(sweep / "recipes.csv", newline="", encoding="utf-8") as f:
    arms = {f"{row['model']}.{row['arm']}": row for row in csv.DictReader(f)}  # run names
chosen = next(a for a, r in arms.items() if a.startswith("Transformer") and r["chosen"] == "True")
recipe = run_from_dict(read_json(sweep / "runs" / chosen / "config.json"))
t, u_w = recipe.train, recipe.train.warmup_updates
u = range(1, int(arms[chosen]["updates"]) + 1)
lr = [learning_rate(t, k) for k in u]
vaswani = [recipe.model.m**-0.5 * min(k**-0.5, k * u_w**-1.5) for k in u]
assert_close(torch.tensor(lr), t.lr * (recipe.model.m * u_w) ** 0.5 * torch.tensor(vaswani))
assert max(lr) == learning_rate(t, u_w) == t.lr  # the peak, at the end of the warm-up
fig, ax = plt.subplots(figsize=(6.0, 2.6))
ax.plot(u, lr, "k-")
ax.axvline(u_w, color="gray", ls=":")
ax.set(xlabel="update u", ylabel="learning rate")
fig.tight_layout()
glue("tf_lr_fig", fig, display=False)
plt.close(fig)
glue("tf_lr_peak", t.lr, display=False)
glue("tf_lr_warmup", u_w, display=False)
glue("tf_lr_end", lr[-1], display=False)
glue("tf_lr_updates", len(lr), display=False)

# %% [markdown]
# ```{glue:figure} tf_lr_fig
# :name: fig-tf-lr
#
# The learning rate {eq}`tf-lr` of the Multi30k study's Transformer, as `nmt_lib` computes it
# before each update: a warm-up over the first {glue:text}`tf_lr_warmup` updates (dotted) to its
# peak, then the inverse square root.
# ```
#
# The peak is {glue:text}`tf_lr_peak` at update {glue:text}`tf_lr_warmup`; after
# {glue:text}`tf_lr_updates` updates the rate is {glue:text}`tf_lr_end:.1e`.
#
# **Label smoothing.** The loss of {doc}`06_training` is the cross-entropy against the one-hot
# reference: $-\log p(y_i)$. Label smoothing (Szegedy et al. 2016) replaces the one-hot target by
# a mixture with the uniform distribution over the $K - 1$ words other than `<pad>`:
#
# $$
# q_k = (1 - \varepsilon_{\text{ls}})\,[k = y_i] + \frac{\varepsilon_{\text{ls}}}{K - 1}\,
# [k \ne \texttt{<pad>}], \qquad
# L_{\text{ls}} = -\sum_k q_k \log p_k .
# $$ (tf-ls)
#
# For $p = \operatorname{softmax}(z)$ the gradient of $L_{\text{ls}}$ with respect to the logits
# is $p - q$ (the cross-entropy's, with $q$ in place of the one-hot vector), so the loss is
# smallest at $p = q$: the model is trained never to be sure. At that optimum the right word has
# probability $q_{y_i} = 1 - \varepsilon_{\text{ls}} + \varepsilon_{\text{ls}}/(K-1)$, so the
# negative log-likelihood, measured against the reference, cannot fall below
# $-\log q_{y_i}$ per word, where an unsmoothed model could approach 0: smoothing *hurts* the
# NLL. BLEU does not read probabilities, only which words a search ranks first, and $q$ still ranks
# the reference word first; Vaswani et al. report that smoothing "hurts perplexity, as the model
# learns to be more unsure, but improves accuracy and BLEU score". The check compares
# `nmt_lib.paper.steps.target_log_prob` (what training maximises) with {eq}`tf-ls` built from an
# explicit $q$, and the gradient with $p - q$:

# %%
K, eps_ls = 7, 0.1
z = torch.randn(4, K, requires_grad=True)  # logits of 4 positions
y_ref = torch.tensor([3, 1, 6, 2])
q = torch.full((4, K), eps_ls / (K - 1))
q[:, 0] = 0.0  # <pad> (id 0) gets nothing
q[torch.arange(4), y_ref] += 1 - eps_ls
assert_close(q.sum(-1), torch.ones(4))
logp_z = torch.log_softmax(z, -1)
L_ls = -target_log_prob(logp_z, y_ref, eps_ls).sum()  # the library's
assert_close(L_ls, -(q * logp_z).sum())  # (tf-ls)
(grad,) = torch.autograd.grad(L_ls, z)
assert_close(grad, torch.softmax(z, -1).detach() - q)  # zero exactly at p = q


def nll_floor(eps, K):
    """The least NLL per word (nats) at the smoothed loss's optimum p = q."""
    return -math.log(1 - eps + eps / (K - 1))


smooth = {n: a for n, a in arms.items() if n.startswith("Transformer")}
no_ls = next(n for n, a in smooth.items() if "label_smoothing=0.0" in a["settings"])
twin = smooth[no_ls]["settings"].replace("label_smoothing=0.0", "label_smoothing=0.1")
with_ls = next(n for n, a in smooth.items() if a["settings"] == twin)  # differs in that alone
for key, arm in (("ls", with_ls), ("nols", no_ls)):
    glue(f"tf_{key}_nll", float(arms[arm]["dev NLL"]), display=False)
    glue(f"tf_{key}_bleu", float(arms[arm]["dev BLEU (greedy)"]), display=False)
glue("tf_ls_dnll", float(arms[with_ls]["dev NLL"]) - float(arms[no_ls]["dev NLL"]), display=False)
glue(
    "tf_ls_dbleu",
    float(arms[with_ls]["dev BLEU (greedy)"]) - float(arms[no_ls]["dev BLEU (greedy)"]),
    display=False,
)
glue("tf_ls_floor", nll_floor(0.1, recipe.model.trg_vocab), display=False)
glue("tf_ls_K", recipe.model.trg_vocab, display=False)
print("target_log_prob == -(tf-ls); its gradient in the logits == p - q")

# %% [markdown]
# With $\varepsilon_{\text{ls}} = 0.1$ and the $K$ = {glue:text}`tf_ls_K` target rows of the
# Multi30k models, the floor is {glue:text}`tf_ls_floor:.3f` nats per word. The Multi30k recipe
# sweep ({doc}`13_compare`) measured the trade: two Transformer arms that differ in nothing but
# label smoothing reach a dev NLL of {glue:text}`tf_ls_nll:.2f` nats per sentence with it and
# {glue:text}`tf_nols_nll:.2f` without ({glue:text}`tf_ls_dnll:+.2f` with smoothing), and a
# greedy dev BLEU of {glue:text}`tf_ls_bleu:.2f` with it and {glue:text}`tf_nols_bleu:.2f` without
# ({glue:text}`tf_ls_dbleu:+.2f`): one seed each, so a direction, not a measured effect.
#
# **Dropout.** While training, `model.dropout` $= p_{\text{drop}}$ sets each entry of the
# embeddings' sums $\sqrt d\, E w + \mathrm{PE}$, and of every sub-layer's output before it is
# added and normalised, to 0 with probability $p_{\text{drop}}$, and multiplies the others by
# $1/(1 - p_{\text{drop}})$ (Srivastava et al. 2014), so that each entry keeps its expectation;
# at test time nothing is dropped. No unit can rely on a particular other unit being there, which
# regularises a model that would otherwise fit a small corpus by heart. The check: in evaluation
# mode a model with dropout computes what the same weights without it compute; in training mode it
# does not, and the dropped sum keeps its mean.

# %%
dropped = build_model(dataclasses.replace(cfg, dropout=0.3)).double()
dropped.load_state_dict(model.state_dict())  # the checked model's weights, dropout 0.3
dropped.eval()
assert_close(dropped(x, x_mask, y, y_mask)[0], logp)  # evaluation: nothing dropped
dropped.train()
assert not torch.allclose(dropped(x, x_mask, y, y_mask)[0], logp)  # training: dropped
ones = torch.ones(200_000)
kept = dropped.drop(ones)  # the library's dropout: 0 or 1 / (1 - p)
assert set(kept.unique().tolist()) <= {0.0, 1 / 0.7}
assert abs(kept.mean().item() - 1) < 0.01  # the expectation is kept
dropout_arms = {  # lr 0.001 with label smoothing 0.1: two arms that differ in dropout alone
    n: a
    for n, a in smooth.items()
    if "label_smoothing=0.1" in a["settings"] and "lr=0.001" in a["settings"]
}
for a in dropout_arms.values():
    key = "hi" if "dropout=0.3" in a["settings"] else "lo"
    glue(f"tf_drop_{key}_nll", float(a["dev NLL"]), display=False)
    glue(f"tf_drop_{key}_bleu", float(a["dev BLEU (greedy)"]), display=False)
assert len(dropout_arms) == 2
print("dropout: identity in evaluation, 0 or 1/(1-p) in training, mean kept")

# %% [markdown]
# In the Multi30k sweep, the Transformer's dropout of 0.1 gave a dev NLL of
# {glue:text}`tf_drop_lo_nll:.2f` and a greedy dev BLEU of {glue:text}`tf_drop_lo_bleu:.2f`, and
# 0.3 gave {glue:text}`tf_drop_hi_nll:.2f` and {glue:text}`tf_drop_hi_bleu:.2f` (learning rate
# 0.001, label smoothing 0.1): dropout regularises, and too much of it starves the small model
# within the sweep's budget.
#
# ## A toy run: a Transformer learns to reverse
#
# The whole model of this page at toy sizes, trained in the page with the recipe above, as
# {doc}`05_decoder` trains a toy RNNsearch (when the book is built; it takes well under a minute
# of one core). The task is to *reverse* a sequence of 4 to 8 random digits: the right
# encoder–decoder attention is the anti-diagonal, and nothing tells the model about it. Adam with
# $\beta_2 = 0.98$, the schedule {eq}`tf-lr`, label smoothing 0.1, dropout 0.1 and the gradient
# clipped to norm 1.

# %%
torch.set_default_dtype(torch.float32)  # the toy run: float32, as training is
digits, lengths, batch_size, updates = 10, (4, 8), 32, 600
gen = torch.Generator().manual_seed(0)


def reverse_batch(n: int):
    """n random digit sequences (ids 3.., EOS = 2, padded with 0), their reversals, the masks."""
    L = torch.randint(lengths[0], lengths[1] + 1, (n,), generator=gen)
    src, trg = torch.zeros(2, n, int(L.max()) + 1, dtype=torch.long)
    for b, k in enumerate(L.tolist()):
        w = torch.randint(3, 3 + digits, (k,), generator=gen)
        src[b, :k], trg[b, :k] = w, w.flip(0)
        src[b, k] = trg[b, k] = 2  # EOS
    return src, src != 0, trg, trg != 0


torch.manual_seed(0)
toy_cfg = model_config(
    arch="Transformer",
    src_vocab=3 + digits,
    trg_vocab=3 + digits,
    m=32,
    heads=4,
    ff=64,
    layers=2,
    dropout=0.1,
)
toy = build_model(toy_cfg)
toy_t = TrainConfig(
    max_updates=updates,
    optimizer="adam",
    lr=5e-3,
    lr_schedule="inverse_sqrt",
    warmup_updates=100,
    adam_beta2=0.98,
    label_smoothing=0.1,
)
opt = torch.optim.Adam(toy.parameters(), lr=toy_t.lr, betas=(0.9, toy_t.adam_beta2))
held_out = reverse_batch(200)
curve = []  # (update, smoothed training loss, held-out NLL), nats per word
for k in range(1, updates + 1):
    for group in opt.param_groups:
        group["lr"] = learning_rate(toy_t, k)  # (tf-lr), before every update
    src, src_mask, trg, trg_mask = reverse_batch(batch_size)
    toy.train()
    lp, _ = toy(src, src_mask, trg, trg_mask, smoothing=toy_t.label_smoothing)
    loss = -lp.sum()
    opt.zero_grad()
    (loss / batch_size).backward()
    torch.nn.utils.clip_grad_norm_(toy.parameters(), 1.0)
    opt.step()
    if k % 50 == 0:
        toy.eval()
        with torch.no_grad():
            nll = -toy(*held_out)[0].sum() / held_out[3].sum()
        curve.append((k, loss.item() / trg_mask.sum().item(), nll.item()))
toy.eval()
with torch.no_grad():
    hyps = greedy_search(toy, held_out[0], held_out[1])
right = sum(
    h.tokens == held_out[2][b, : int(held_out[3][b].sum())].tolist() for b, h in enumerate(hyps)
)
spread = toy_t.label_smoothing / (toy_cfg.trg_vocab - 1)
q_toy = [1 - toy_t.label_smoothing + spread] + [spread] * (toy_cfg.trg_vocab - 2)  # no <pad>
floor = -sum(qk * math.log(qk) for qk in q_toy)  # H(q): the least smoothed loss per word
assert min(c[1] for c in curve) > floor - 1e-6  # no minibatch beats the optimum
glue("toy_tf_updates", updates, display=False)
glue("toy_tf_right", right, display=False)
glue("toy_tf_held", held_out[0].shape[0], display=False)
glue("toy_tf_nll", curve[-1][2], display=False)
glue("toy_tf_smoothed", curve[-1][1], display=False)
glue("toy_tf_floor", floor, display=False)
glue("toy_tf_nll_floor", nll_floor(toy_t.label_smoothing, toy_cfg.trg_vocab), display=False)
fig, ax = plt.subplots(figsize=(6.0, 2.6))
ax.plot([c[0] for c in curve], [c[1] for c in curve], "k-", label="smoothed loss (training)")
ax.plot([c[0] for c in curve], [c[2] for c in curve], "k--", label="NLL (held out)")
ax.axhline(floor, color="gray", ls=":", label="least smoothed loss, $H(q)$")
ax.set(xlabel="update", ylabel="nats per word", ylim=(0, None))
ax.legend(frameon=False)
fig.tight_layout()
glue("toy_tf_curve", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} toy_tf_curve
# :name: fig-toy-tf-curve
#
# The toy Transformer's training loss (label-smoothed, per word of the minibatch) and its NLL on
# held-out sentences, per word, with the least value the smoothed loss can take (dotted).
# ```
#
# After {glue:text}`toy_tf_updates` updates, greedy search reverses {glue:text}`toy_tf_right` of
# {glue:text}`toy_tf_held` held-out sequences exactly, at a held-out NLL of
# {glue:text}`toy_tf_nll:.3f` nats per word (in evaluation mode, without dropout; at the smoothed
# optimum $p = q$ it would be {glue:text}`toy_tf_nll_floor:.3f`). Its smoothed training loss is
# {glue:text}`toy_tf_smoothed:.3f` nats per word, and no model can take it below the entropy of
# $q$, {glue:text}`toy_tf_floor:.3f` (the cross-entropy of $q$ against any $p$ is at least $q$'s
# entropy): label smoothing keeps the training loss away from 0 on a task with one right answer.
#
# **The heads.** Each decoder layer has its own encoder–decoder attention with
# {glue:text}`toy_tf_heads` heads. The library returns their mean over the heads of the last
# layer; the cell below runs the library's decoder layers one by one to keep every head, checks
# that the mean of the last layer's heads is the library's alignment, and draws them all for one
# probe sentence.

# %%
probe = torch.tensor([[5, 9, 4, 11, 7, 12, 2]])  # the digits 2 6 1 8 4 9, then EOS
names = [str(w - 3) for w in probe[0, :-1].tolist()] + ["</s>"]
rev = torch.cat([probe[:, :-1].flip(1), probe[:, -1:]], 1)
with torch.no_grad():
    enc = toy.encode(probe, probe != 0)
    e = F.embedding(rev[:, :-1], toy.E)  # y_1 .. y_{T-1}; y_0 = 0, as Transformer.decode_states
    s_rows = toy.inputs(torch.cat([torch.zeros(1, 1, toy_cfg.m), e], 1))
    causal = torch.ones(rev.shape[1], rev.shape[1], dtype=torch.bool).tril()[None]
    heads = []  # per layer: [heads, Ty, Tx]
    for k, dec_layer in enumerate(toy.decoder):
        s_rows, a_k = dec_layer(s_rows, causal, enc.kv[:, k], enc.mask)
        heads.append(a_k[0])
    _, align_toy = toy(probe, probe != 0, rev, rev != 0)
assert_close(heads[-1].mean(0), align_toy[0])  # the library's alignment: the heads' mean
trg_names = [str(w - 3) for w in rev[0, :-1].tolist()] + ["</s>"]
panels = [
    {"src": names, "trg": trg_names, "alpha": a.numpy(), "title": f"layer {k + 1}, head {h + 1}"}
    for k, layer_heads in enumerate(heads)
    for h, a in enumerate(layer_heads)
]
fig = plots.fig3_alignments(panels, ncols=toy_cfg.heads)
glue("toy_tf_heads_fig", fig, display=False)
plt.close(fig)
glue("toy_tf_heads", toy_cfg.heads, display=False)
# the weight of output position i on input position T - 1 - i (the digit it copies), per head
anti = [[float(a[:-1, :-1].flip(1).diagonal().mean()) for a in lh] for lh in heads]
for name, per_head in zip(("first", "last"), (anti[0], anti[-1]), strict=True):
    glue(f"toy_tf_anti_{name}_lo", min(per_head), display=False)
    glue(f"toy_tf_anti_{name}_hi", max(per_head), display=False)
glue(
    "toy_tf_anti_mean", float(heads[-1].mean(0)[:-1, :-1].flip(1).diagonal().mean()), display=False
)

# %% [markdown]
# ```{glue:figure} toy_tf_heads_fig
# :name: fig-toy-tf-heads
#
# The encoder–decoder attention of every head of the toy Transformer for one probe sentence
# (reverse the digits): each row is one output position's weights over the input positions, 0
# black and 1 white; each panel titled with its decoder layer and head.
# ```
#
# The mean weight that a head puts on the digit its output position copies, over the probe's
# digits, lies between {glue:text}`toy_tf_anti_first_lo:.2f` and
# {glue:text}`toy_tf_anti_first_hi:.2f` for the heads of the first layer, and between
# {glue:text}`toy_tf_anti_last_lo:.2f` and {glue:text}`toy_tf_anti_last_hi:.2f` for those of the
# last; the mean of the last layer's heads, the alignment the library returns, puts
# {glue:text}`toy_tf_anti_mean:.2f` there. The paper's $\alpha_{ij}$ is one distribution per
# target word; a Transformer has one per head and layer, no one of which has to hold the whole
# alignment, and the mean that the library returns is only a summary of them.
#
# ## What came next
#
# Three problems that this book's models show were taken up in the years after the paper; each
# is a change to one piece derived in this book.
#
# - **Subword vocabularies.** A shortlist of words leaves every other word `<unk>`
#   ({doc}`01_problem`), and replacing it through the alignment ({doc}`09_alignments`) only copies
#   a source word. Sennrich, Haddow & Birch (2016) split rare words into *subword units* learned
#   by byte-pair encoding (BPE): start from characters and merge the most frequent adjacent pair,
#   again and again, until the vocabulary has the size wanted. Frequent words stay whole, rare
#   words and names are spelled from pieces, and there is no unknown word, so the model can
#   translate and transliterate words it has never seen whole.
# - **Coverage.** The alignment model {eq}`dec-ctx` of {doc}`05_decoder` does not know which
#   source words it has already translated, and an attention model can translate a word twice or
#   skip it (over- and under-translation). Tu et al. (2016) keep a *coverage vector*, for
#   instance the sum of the past weights $\sum_{i' < i} \alpha_{i'j}$ of each source word, and
#   feed it to the alignment model as one more input, beside $s_{i-1}$ and $h_j$.
# - **Exposure bias.** In training, every step reads the reference's previous word
#   ({doc}`06_training`); in a search it reads its own ({doc}`07_beam_search`), and a model never
#   trained on its own mistakes may not recover from them. Bengio et al. (2015) train with
#   *scheduled sampling*: the previous word is, with a probability that grows over training, the
#   model's own prediction. Ranzato et al. (2016) train on whole sequences the model generates,
#   with a sequence-level reward such as BLEU (MIXER), so that the loss is computed under the
#   conditions of the test.
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
# - The recipe: post-norm residual blocks {eq}`tf-ln`, a warm-up then an inverse-square-root
#   learning rate {eq}`tf-lr` (`nmt_lib.trainer.learning_rate`), label smoothing {eq}`tf-ls`,
#   which raises the least NLL a model can reach and, on Multi30k, went with a higher BLEU, and
#   dropout; with it a toy Transformer learns to reverse digits in the page.
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
# 4. With label smoothing $\varepsilon_{\text{ls}}$ over $K - 1$ words, what is the smallest
#    negative log-likelihood per word that the optimum of {eq}`tf-ls` gives the reference word?
#    Evaluate it for $\varepsilon_{\text{ls}} = 0.1$ as $K$ grows.
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
# 4. The optimum is $p = q$, so $-\log q_{y_i} = -\log\big(1 - \varepsilon_{\text{ls}} +
#    \varepsilon_{\text{ls}}/(K-1)\big)$; as $K$ grows it tends to $-\log 0.9 \approx 0.105$ nats
#    per word, whatever the model.
# :::
