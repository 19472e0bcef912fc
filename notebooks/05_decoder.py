# %% [markdown]
# # The RNNsearch decoder and the deep maxout output
#
# **What you will derive.** The rest of RNNsearch, and with it the whole model, end to end: one
# decoder step in the order the authors' code runs it, and the *deep output* with maxout units
# that turns a state into a distribution over 30,000 words. The check at the end recomputes
# $\log p(\mathbf y \mid \mathbf x)$ from the raw parameters with nothing but loops and the
# equations of this page and the last, and compares it with `nmt_lib`. At the end a toy RNNsearch
# is trained in the page, and its alignment turns from uniform to diagonal.
#
# **What you need.** The GRU ({doc}`02_gru`), the encoder–decoder ({doc}`03_encdec`), and the
# annotations, the initial state and the alignment model ({doc}`04_alignment`). Notation:
# {doc}`../notation`.
#
# ## The paper's claim
#
# Appendix A.2: the decoder is a GRU whose gates all see the context $c_i$; the output is a "deep output"
# (Pascanu et al. 2014) with a single maxout hidden layer (Goodfellow et al. 2013).

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

from nmt_lib.config import ModelConfig
from nmt_lib.paper.model import RNNsearch, build_model, count_parameters

torch.manual_seed(0)
torch.set_num_threads(1)  # tiny tensors: one thread is fastest
torch.set_default_dtype(torch.float64)

# %% tags=["hide-input"]
from nmt_experiments.pages import diagrams

fig = diagrams.rnnsearch()  # nmt_experiments/pages/diagrams.py draws the paper's models
glue("diagram_rnnsearch", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} diagram_rnnsearch
# :name: fig-diagram_rnnsearch
#
# RNNsearch at one target position $i$: the two encoder GRUs, whose states side by side are the
# annotations $h_j$ ({doc}`04_alignment`); the alignment model, which weighs each annotation from
# the previous state $s_{i-1}$ (line widths: the weights $\alpha_{ij}$); the context $c_i$; and
# the decoder step: the distribution of $y_i$ from $s_{i-1}$, $y_{i-1}$ and $c_i$, then the next
# state $s_i$ from $s_{i-1}$, the emitted $y_i$ and the same $c_i$.
# ```
#
# ## The equations
#
# The encoder gives the annotations $h_j$, {eq}`enc-annot`, and the decoder starts from
# $s_0 = \tanh(W_s \overleftarrow h_1 + b_s)$, {eq}`enc-s0` ({doc}`04_alignment`).
#
# **One decoder step**, for $i = 1, \dots, T_y$, in the order of the authors' code (GroundHog). The
# context comes from the *previous* state ({doc}`04_alignment`):
#
# $$
# c_i = \sum_j \alpha_{ij} h_j, \qquad \alpha_{ij} = \operatorname{softmax}_j\, v_a^\top \tanh(W_a s_{i-1} + U_a h_j).
# $$ (dec-ctx)
#
# The deep output combines the previous state, the previous word and the context into $2l$
# pre-activations, and a maxout layer keeps the larger of each adjacent pair:
#
# $$
# \tilde t_i = U_o s_{i-1} + b_o + V_o\, \bar e(y_{i-1}) + C_o c_i, \qquad
# t_{i,k} = \max\{\tilde t_{i,2k-1}, \tilde t_{i,2k}\},\ k = 1..l,
# $$ (dec-maxout)
#
# with $\bar e(y_0) = 0$ (there is no beginning-of-sentence word). The next-word distribution is a
# softmax over the $K_y$ target words:
#
# $$
# p(y_i \mid y_{<i}, \mathbf x) = \operatorname{softmax}\big(W_o t_i + b_y\big)_{y_i}, \qquad
# W_o = W^{(2)} W^{(1)},
# $$ (dec-softmax)
#
# where GroundHog factorises $W_o$ through 620 dimensions (config `model.output_rank`; `None`
# gives the paper's full $W_o$). Finally the state is updated by a GRU whose three
# pre-activations all receive the context, reading the word just emitted:
#
# $$
# \begin{aligned}
# r_i &= \sigma(W_r \bar e(y_i) + U_r s_{i-1} + C_r c_i), \qquad
# z_i = \sigma(W_z \bar e(y_i) + U_z s_{i-1} + C_z c_i), \\
# \tilde s_i &= \tanh\big(W \bar e(y_i) + b + U[r_i \circ s_{i-1}] + C c_i\big), \qquad
# s_i = (1 - z_i) \circ s_{i-1} + z_i \circ \tilde s_i .
# \end{aligned}
# $$ (dec-state)

# %% tags=["hide-input"]
fig = diagrams.groundhog_order()  # nmt_experiments/pages/diagrams.py draws the paper's models
glue("diagram_groundhog", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} diagram_groundhog
# :name: fig-diagram_groundhog
#
# Two decoder steps in GroundHog's order, what is computed from what: (1) the context $c_i$ from
# $s_{i-1}$ and the annotations, (2) the distribution of $y_i$ from $s_{i-1}$, $y_{i-1}$ and
# $c_i$, (3) the word $y_i$, (4) the next state from $s_{i-1}$, $y_i$ and the same $c_i$; then the
# same for $i+1$.
# ```
#
# **Which index?** The paper's Eq. 4 scores $y_i$ from $(y_{i-1}, s_i, c_i)$ with
# $s_i = f(s_{i-1}, y_{i-1}, c_i)$; its Appendix A.2.2 keeps that recurrence but reads out from
# $s_{i-1}$. GroundHog, and Blocks from the same lab, do what {eq}`dec-maxout`–{eq}`dec-state`
# say: the recurrence reads the word $y_i$ just emitted, so the state $s_{i-1}$ that attends and
# scores $y_i$ has already read $y_{i-1}$, together with $c_{i-1}$. This is *not* the paper's
# model with the state index shifted, under either reading of the paper:
#
# - against A.2.2 as written, GroundHog's $s_{i-1}$ has read $y_{i-1}$, where A.2.2's has read
#   only up to $y_{i-2}$: in A.2.2 the previous word reaches the prediction of $y_i$ only through
#   the deep output's $V_o\, \bar e(y_{i-1})$, and the attention for word $i$ cannot depend on it;
# - relabelled into Eq. 4's form, $s'_i := s_{i-1}$, GroundHog's recurrence is
#   $s'_i = f(s'_{i-1}, y_{i-1}, c_{i-1})$: the state has absorbed the *previous* step's context
#   $c_{i-1}$, not $c_i$, and the attention for word $i$ comes from $s'_i$, a state that has
#   already read $y_{i-1}$, where Eq. 4 attends from $s_{i-1}$, before $y_{i-1}$ is read.
#
# The parameters and their shapes are the same; the function is not. What GroundHog's order
# changes is the conditioning: the alignment for word $i$ knows which word was emitted last, and
# the state that scores $y_i$ carries $y_{i-1}$ as well as the deep output's direct term. We
# follow the code, as `PAPER.md` §2.4 describes it (see {doc}`../deviations`).
#
# **Why maxout?** A maxout unit is a learned convex piecewise-linear function of its input: the
# maximum of two linear functions. It needs no saturating nonlinearity, and two pieces per unit
# are enough for the output layer to model sharp next-word preferences.
#
# ## The library functions
#
# The deep output {eq}`dec-maxout`–{eq}`dec-softmax`, for any number of leading dimensions (one
# step in beam search, all steps at once in training):
#
# ```{literalinclude} ../../nmt_lib/paper/decoder.py
# :pyobject: Decoder.deep_output
# ```
#
# ```{literalinclude} ../../nmt_lib/paper/decoder.py
# :pyobject: Decoder.logits
# ```
#
# The state update {eq}`dec-state`:
#
# ```{literalinclude} ../../nmt_lib/paper/decoder.py
# :pyobject: Decoder.step_state
# ```
#
# The model puts them together in two functions, in the order of {eq}`dec-maxout`–{eq}`dec-state`:
# `readout_step`, attention from $s_{i-1}$ and the readout, and `next_state`, the state update with
# the word just emitted:
#
# ```{literalinclude} ../../nmt_lib/paper/model.py
# :pyobject: EncoderDecoder.readout_step
# ```
#
# ```{literalinclude} ../../nmt_lib/paper/model.py
# :pyobject: EncoderDecoder.next_state
# ```
#
# A search calls them one word at a time ({doc}`07_beam_search`, through `model.steps()`); in
# training, `teacher_forced` runs them over the reference translation, the state copied past each
# sentence's end:
#
# ```{literalinclude} ../../nmt_lib/paper/steps.py
# :pyobject: teacher_forced
# ```
#
# This is what the reference backend (`train.backend = "reference"`) trains. The fast backend
# computes the same function faster, for instance the deep output and the softmax of *all* steps
# in one product after the loop, since they do not feed back into the recurrence ({doc}`14_fast`).
#
# ## The numeric check
#
# A tiny RNNsearch in float64 with large random weights (so that every term matters), two
# sentences of different lengths in one padded batch. The reference below uses only the named
# parameters and the equations of this page, one sentence at a time, no padding.

# %%
cfg = ModelConfig(src_vocab=11, trg_vocab=13, m=4, n=3, n_align=5, l=2, output_rank=3)
model = build_model(cfg).double()
for p in model.parameters():
    torch.nn.init.normal_(p, std=0.5)
x = torch.tensor([[5, 6, 7, 8, 2], [9, 4, 2, 0, 0]])  # EOS = 2, <pad> = 0
y = torch.tensor([[3, 4, 5, 6, 2], [6, 7, 2, 0, 0]])
x_mask, y_mask = x != 0, y != 0
sig, tanh = torch.sigmoid, torch.tanh


def gru_ref(g, e, h, extra=0.0):
    """(gru-r)-(gru-h) of the GRU page; `extra` = the context terms [C c; C_z c; C_r c]."""
    Cc, Czc, Crc = extra if isinstance(extra, tuple) else (0.0, 0.0, 0.0)
    r = sig(g.W_r @ e + g.U_r @ h + Crc)
    z = sig(g.W_z @ e + g.U_z @ h + Czc)
    h_tilde = tanh(g.W @ e + g.b + g.U @ (r * h) + Cc)
    return (1 - z) * h + z * h_tilde


def rnnsearch_reference(model, x, y):
    """log p(y_i | y_<i, x) and alpha for ONE sentence, from equations (enc-annot)-(dec-state)."""
    enc, dec, att = model.encoder, model.decoder, model.decoder.attention
    e_src = [enc.E_bar[w] + enc.b_E for w in x]  # embeddings with GroundHog's bias
    n = enc.n
    fwd, h = [], torch.zeros(n)
    for e in e_src:
        h = gru_ref(enc.forward_gru, e, h)
        fwd.append(h)
    bwd, h = [], torch.zeros(n)
    for e in reversed(e_src):
        h = gru_ref(enc.backward_gru, e, h)
        bwd.insert(0, h)
    H = [torch.cat([f, b]) for f, b in zip(fwd, bwd, strict=True)]  # (enc-annot)
    s = tanh(dec.W_s @ bwd[0] + dec.b_s)  # (enc-s0)
    logps, alphas, e_prev = [], [], torch.zeros(dec.E.shape[1])
    for w in y:
        energies = torch.stack([att.v_a @ tanh(att.W_a @ s + att.U_a @ h_j) for h_j in H])
        alpha = energies.exp() / energies.exp().sum()
        c = sum(a * h_j for a, h_j in zip(alpha, H, strict=True))  # (dec-ctx)
        t_tilde = dec.U_o @ s + dec.b_o + dec.V_o @ e_prev + dec.C_o @ c
        t = torch.stack([max(t_tilde[2 * k], t_tilde[2 * k + 1]) for k in range(len(t_tilde) // 2)])
        logits = dec.W2 @ (dec.W1 @ t) + dec.b_y  # (dec-maxout), (dec-softmax)
        logps.append(logits[w] - torch.logsumexp(logits, 0))
        alphas.append(alpha)
        e_y = dec.E[w] + dec.b_E
        s = gru_ref(dec.gru, e_y, s, (dec.C @ c, dec.C_z @ c, dec.C_r @ c))  # (dec-state)
        e_prev = e_y
    return torch.stack(logps), torch.stack(alphas)


logp, alpha = model(x, x_mask, y, y_mask)
for b in range(2):
    Tx, Ty = int(x_mask[b].sum()), int(y_mask[b].sum())
    logp_ref, alpha_ref = rnnsearch_reference(model, x[b, :Tx], y[b, :Ty])
    assert_close(logp[b, :Ty], logp_ref)
    assert_close(alpha[b, :Ty, :Tx], alpha_ref)
assert (logp[~y_mask] == 0).all() and (alpha[1, :, 3:] == 0).all()  # padding
print("nmt_lib RNNsearch == equations (enc-annot)-(dec-state), float64, per sentence and padded")

# %% [markdown]
# Every log-probability and every alignment weight of the padded batch equals the per-sentence
# reference to float64 precision. This is the strongest check in the book: nothing of `nmt_lib`
# is used by the reference except the parameter tensors. (`tests/test_model.py` holds the same
# identity on both backends.)
#
# ## The model at the paper's sizes
#
# With $m = 620$, $n = n' = 1000$, $l = 500$, 30,001-row vocabularies and the rank-620 output
# factorisation, the model's parameters, counted without allocating them:

# %%
with torch.device("meta"):
    paper_model = RNNsearch(ModelConfig())
groups = {}
for name, p in paper_model.named_parameters():
    part = name.split(".")[1] if name.startswith("decoder.attention") else name.split(".")[0]
    key = {"encoder": "encoder (embedding + 2 GRUs)", "decoder": "decoder (embedding, GRU, output)"}
    groups[key.get(part, "attention")] = groups.get(key.get(part, "attention"), 0) + p.numel()
n_params = count_parameters(paper_model)
glue("dec_n_params", n_params, display=False)
glue("dec_n_params_m", n_params / 1e6, display=False)
{k: f"{v:,}" for k, v in groups.items()} | {"total": f"{n_params:,}"}

# %% [markdown]
# RNNsearch has {glue:text}`dec_n_params_m:.1f` million parameters, most of them in the two
# embeddings and the output layer, whose sizes grow with the vocabulary.
#
# ## An illustration: maxout units
#
# Each maxout unit takes the maximum of two of the $2l$ linear functions of
# {eq}`dec-maxout`. Along any line through its input space it is a convex, piecewise-linear
# function with one kink; here are the units of the tiny model above, evaluated as the decoder
# state moves along a random direction.

# %%
dec = model.decoder
d = torch.randn(cfg.n)
ts = torch.linspace(-4, 4, 201)
with torch.no_grad():
    t_tilde = torch.stack([dec.U_o @ (u * d) + dec.b_o for u in ts])  # [201, 2l]
fig, axes = plt.subplots(1, cfg.l, figsize=(6, 2.6), sharey=True)
for k, ax in enumerate(axes):
    a, b = t_tilde[:, 2 * k], t_tilde[:, 2 * k + 1]
    ax.plot(ts, a, ":", color="gray", label=r"$\tilde t_{2k-1}$")
    ax.plot(ts, b, "--", color="gray", label=r"$\tilde t_{2k}$")
    ax.plot(ts, torch.maximum(a, b), "k-", lw=2, label=r"$t_k$ (maxout)")
    ax.set(title=f"unit k = {k + 1}", xlabel="position along a line in state space")
axes[0].legend(frameon=False, fontsize=8)
fig.tight_layout()
glue("dec_maxout_fig", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} dec_maxout_fig
# :name: fig-maxout
#
# Two linear pre-activations (gray) and the maxout unit (black) that keeps the larger of them,
# along a line through the decoder's state space.
# ```
#
# ## A toy run: the alignment learns
#
# The whole model of this page, at toy sizes, trained in the page (when the book is built; it
# takes well under a minute of one core). The task is to copy a sequence of 4 to 8 random digits:
# the translation of each sentence is the sentence itself, so the right alignment is known, the
# diagonal, and nothing tells the model about it. The model is `build_model` with the paper's
# initialisation, so $v_a = 0$ and every alignment starts uniform ({doc}`04_alignment`); it trains
# on the summed loss per sentence with Adam and the gradient clipped to norm 1 (the paper's
# Adadelta is {doc}`06_training`'s subject; Adam is faster on a toy). A fixed probe sentence shows
# the weights $\alpha_{ij}$ as training goes on.

# %%
from nmt_experiments.core import plots

torch.set_default_dtype(torch.float32)  # the toy run: float32, as training is
digits, lengths, batch_size, updates = 10, (4, 8), 32, 800
snapshots = (0, 250, 400, updates)  # the updates at which the probe's alignment is drawn
gen = torch.Generator().manual_seed(0)


def copy_batch(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """n random digit sequences (ids 3.., EOS = 2, padded with 0) and their mask."""
    L = torch.randint(lengths[0], lengths[1] + 1, (n,), generator=gen)
    x = torch.zeros(n, int(L.max()) + 1, dtype=torch.long)
    for b, k in enumerate(L.tolist()):
        x[b, :k] = torch.randint(3, 3 + digits, (k,), generator=gen)
        x[b, k] = 2  # EOS
    return x, x != 0


torch.manual_seed(0)
toy_cfg = ModelConfig(
    src_vocab=3 + digits, trg_vocab=3 + digits, m=16, n=32, n_align=32, l=16, output_rank=None
)
toy = build_model(toy_cfg)  # the paper's initialisation: v_a = 0
opt = torch.optim.Adam(toy.parameters(), lr=1e-2)
probe = torch.tensor([[5, 9, 4, 11, 7, 12, 2]])  # the digits 2 6 1 8 4 9, then EOS
names = [str(w - 3) for w in probe[0, :-1].tolist()] + ["</s>"]
seen, diagonal, losses = {}, [], []
for u in range(updates + 1):
    if u % 25 == 0 or u in snapshots:
        with torch.no_grad():
            _, a = toy(probe, probe != 0, probe, probe != 0)  # a[0, i, j] = alpha_ij
        diagonal.append((u, a[0].diagonal().mean().item()))
        if u in snapshots:
            seen[u] = a[0].numpy()
    if u == updates:
        break
    x, x_mask = copy_batch(batch_size)
    logp, _ = toy(x, x_mask, x, x_mask)  # the target is the source
    loss = -logp.sum() / batch_size  # nats per sentence
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(toy.parameters(), 1.0)
    opt.step()
    losses.append(loss.item())

glue("toy_updates", updates, display=False)
glue("toy_uniform", 1 / probe.shape[1], display=False)
for k, u in enumerate(snapshots):
    glue(f"toy_snap{k}", u, display=False)
    glue(f"toy_diag{k}", float(seen[u].diagonal().mean()), display=False)
glue("toy_loss_end", sorted(losses[-50:])[25], display=False)  # the median of the last 50
fig = plots.fig3_alignments(
    [
        {"src": names, "trg": names, "alpha": seen[u], "title": f"after {u} updates"}
        for u in snapshots
    ]
)
glue("toy_align_fig", fig, display=False)
plt.close(fig)
fig, ax = plt.subplots(figsize=(6.0, 2.6))
ax.plot(*zip(*diagonal, strict=True), "k-")
ax.axhline(1 / probe.shape[1], color="gray", ls=":", label="uniform")
ax.set(xlabel="update", ylabel="mean weight on\nthe diagonal", ylim=(0, 1))
ax.legend(frameon=False)
fig.tight_layout()
glue("toy_diag_fig", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} toy_align_fig
# :name: fig-toy-alignment
#
# The alignment of a toy RNNsearch for one probe sentence (copy the digits), as training goes on:
# each row is one output position's weights over the input positions, 0 black and 1 white.
# ```
#
# ```{glue:figure} toy_diag_fig
# :name: fig-toy-diagonal
#
# The mean weight that the probe's output positions put on the input position they copy, over the
# training of the toy RNNsearch.
# ```
#
# Before training every weight is {glue:text}`toy_uniform:.2f`, one over the probe's
# length: the mean weight on the diagonal is {glue:text}`toy_diag0:.2f`. After
# {glue:text}`toy_snap1` updates it is {glue:text}`toy_diag1:.2f`, after {glue:text}`toy_snap2`
# updates {glue:text}`toy_diag2:.2f`, and after {glue:text}`toy_snap3` updates
# {glue:text}`toy_diag3:.2f`, when the median loss of the last 50 updates is {glue:text}`toy_loss_end:.3f` nats per sentence. The model was never told where
# to look: the diagonal is what makes copying most probable, found by backpropagation through the
# softmax of {eq}`dec-ctx`. The real model learns the same way, with a less obvious answer
# ({doc}`09_alignments`).
#
# ## Summary
#
# - A decoder step attends from $s_{i-1}$, {eq}`dec-ctx`, reads out through a maxout deep output,
#   {eq}`dec-maxout`–{eq}`dec-softmax`, and then updates its state with the emitted word and the
#   same context in every gate, {eq}`dec-state` — GroundHog's order.
# - `nmt_lib`'s RNNsearch computes exactly these equations, recomputed above from the raw
#   parameters in float64.
#
# ## Exercises
#
# 1. Why can the deep output and the softmax of all $T_y$ steps be computed after the recurrent
#    loop during training, but not during beam search?
# 2. Count the parameters of the full output matrix $W_o \in \mathbb R^{K_y \times l}$ and of its
#    rank-620 factorisation, for $K_y = 30001$ and $l = 500$. Which is larger?
# 3. Show that a maxout unit with two pieces can represent $|u|$ and $\operatorname{ReLU}(u)$ of a
#    scalar input $u$.
#
# :::{admonition} Solutions
# :class: dropdown
#
# 1. In training the previous words are the reference's, known in advance, and the output does
#    not feed back into the state ({eq}`dec-state` reads $\bar e(y_i)$, not $t_i$). In search the
#    next word, hence the next state, depends on the output of this step.
# 2. Full: $30001 \cdot 500 = 15{,}000{,}500$. Factorised: $620 \cdot 500 + 30001 \cdot 620 =
#    18{,}910{,}620$. The factorisation (GroundHog's) is *larger* here, because $620 > l$; it follows
#    the authors' code, not a saving.
# 3. $|u| = \max\{u, -u\}$ and $\operatorname{ReLU}(u) = \max\{u, 0 \cdot u\}$.
# :::
#
# **Practise it:** {doc}`lab1_attention` puts your own attention into this chapter's RNNsearch and trains it on a toy reordering.
