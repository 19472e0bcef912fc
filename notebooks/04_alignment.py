# %% [markdown]
# # The annotations, the alignment model and the context vector
#
# **What you will derive.** First the two things the alignment model reads: the *annotations*
# $h_j$ of the bidirectional encoder, one per source word, and the decoder's state $s_{i-1}$.
# Then the paper's central idea: instead of one fixed vector for the whole
# source sentence, the decoder computes, at every target position $i$, a *context vector* $c_i$, a
# weighted average of the encoder's annotations, with weights $\alpha_{ij}$ given by a small
# feed-forward *alignment model*. You will derive the three equations, see why $U_a h_j$ is
# computed once per sentence, check that `nmt_lib.paper.attention` computes exactly them, and watch an
# alignment model learn a reordering.
#
# **What you need.** The GRU ({doc}`02_gru`) and the encoder–decoder with its decoder state $s_i$
# ({doc}`03_encdec`). The decoder step that uses $c_i$ is the next chapter's,
# {doc}`05_decoder`. Notation: {doc}`../notation`.
#
# ## The paper's claim
#
# Appendix A.2: the encoder is a bidirectional RNN whose annotations
# $h_j = [\overrightarrow h_j; \overleftarrow h_j]$ summarise both the preceding and the following
# words.
# Section 3.1: the probability $\alpha_{ij}$ reflects how important the annotation $h_j$ is, with
# respect to the previous state $s_{i-1}$, for deciding the next state $s_i$ and generating $y_i$.
# Letting the decoder choose what to attend to "relieves the encoder from the burden of having to
# encode all information in the source sentence into a fixed-length vector". Unlike traditional
# machine translation, the alignment is not a latent variable: it is computed, soft, and trained
# jointly with everything else by backpropagation.

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

from nmt_experiments.core import plots
from nmt_lib.paper import attention

torch.manual_seed(0)
torch.set_num_threads(1)  # tiny tensors: one thread is fastest
torch.set_default_dtype(torch.float64)

# %% [markdown]
# ## Before the alignment: the annotations and the decoder state
#
# **The annotations.** RNNencdec's encoder ({doc}`03_encdec`) runs one GRU forwards and keeps only
# its last state. RNNsearch runs two GRUs over the embedded source, forwards and backwards, sharing
# the embedding $\bar e$, and keeps every position: the annotation of word $j$ concatenates their
# states,
#
# $$
# \overrightarrow h_j = \operatorname{GRU}_{\rightarrow}(\bar e(x_j), \overrightarrow h_{j-1}),\quad
# \overleftarrow h_j = \operatorname{GRU}_{\leftarrow}(\bar e(x_j), \overleftarrow h_{j+1}),\quad
# h_j = \begin{bmatrix}\overrightarrow h_j \\ \overleftarrow h_j\end{bmatrix},
# $$ (enc-annot)
#
# from $\overrightarrow h_0 = \overleftarrow h_{T_x+1} = 0$. Because recurrent networks represent
# recent inputs best, $h_j$ is about the words *around* $j$: the forward half about $x_j$ and the
# words before it, the backward half about $x_j$ and the words after it.
#
# **The decoder state.** As in RNNencdec, the decoder is a GRU whose state $s_i$ sums up what it has
# generated so far (its update, with the context in every gate, is {doc}`05_decoder`'s). It starts
# from the backward state at the first word, which has read the whole sentence (Appendix A.2.2):
#
# $$
# s_0 = \tanh\big(W_s \overleftarrow h_1 + b_s\big).
# $$ (enc-s0)
#
# All the alignment model needs of the decoder is that, before it generates word $i$, there is a
# state $s_{i-1}$ of $n$ numbers.
#
# The encoder computes {eq}`enc-annot` for a padded batch, each direction with the padding's mask:
#
# ```{literalinclude} ../../nmt_lib/paper/encoder.py
# :pyobject: Encoder.forward
# ```
#
# The check: every sentence of a padded batch gets the annotations of its two GRUs run over it
# alone, the backward one over the reversed words.

# %%
from nmt_lib.paper.encoder import Encoder

encoder = Encoder(11, 4, 3, bidirectional=True)
for p in encoder.parameters():
    torch.nn.init.normal_(p, std=0.5)
x = torch.tensor([[5, 6, 7, 2], [9, 2, 0, 0]])  # EOS = 2, <pad> = 0
x_mask = x != 0
h_batch = encoder(x, x_mask)  # [B, Tx, 2n]
for b in range(2):
    T = int(x_mask[b].sum())
    e = encoder.embed(x[b : b + 1, :T])  # [1, T, m], no padding at all
    h_fwd = encoder.forward_gru(e)  # h→_1 .. h→_T
    h_bwd = encoder.backward_gru(e.flip(1)).flip(1)  # h←_1 .. h←_T
    assert_close(h_batch[b, :T], torch.cat([h_fwd, h_bwd], -1)[0])  # (enc-annot)
print("annotations of a padded batch == each sentence's forward and backward GRUs, concatenated")

# %% [markdown]
# ## The equations
#
# The *energy* $e_{ij}$ scores how well the inputs around position $j$ match the output at
# position $i$. The paper's alignment model is a one-hidden-layer perceptron with $n'$ tanh units,
# $W_a \in \mathbb R^{n'\times n}$, $U_a \in \mathbb R^{n'\times 2n}$ and
# $v_a \in \mathbb R^{n'}$ (Appendix A.1.2):
#
# $$
# e_{ij} = a(s_{i-1}, h_j) = v_a^\top \tanh\big(W_a s_{i-1} + U_a h_j\big)
# $$ (align-e)
#
# A softmax over the source positions turns energies into weights, which are positive and sum to
# one:
#
# $$
# \alpha_{ij} = \frac{\exp(e_{ij})}{\sum_{k=1}^{T_x} \exp(e_{ik})}
# $$ (align-alpha)
#
# and the context vector is the expected annotation under these weights (Eq. 5):
#
# $$
# c_i = \sum_{j=1}^{T_x} \alpha_{ij} h_j .
# $$ (align-c)
#
# Three remarks that shape the code:
#
# 1. **$U_a h_j$ does not depend on $i$.** Computing it once per sentence costs
#    $T_x \cdot n' \cdot 2n$ multiply–adds, instead of $T_y$ times that inside the decoder loop;
#    per step only $W_a s_{i-1}$ (size $n'$) is new.
# 2. **Padding.** In a minibatch, sentences are padded to the longest one. The sum in
#    {eq}`align-alpha` runs over the *real* positions only (EOS included), so padded positions get
#    weight exactly zero: the softmax is taken over energies set to $-\infty$ there.
# 3. **Initialisation.** The paper initialises $v_a = 0$ (Appendix B.1), so every $e_{ij} = 0$
#    and training starts from uniform weights $\alpha_{ij} = 1/T_x$.
#
# ## The library functions
#
# One function per equation. The energies, with `Uh` $= U_a h_j$ passed in:
#
# ```{literalinclude} ../../nmt_lib/paper/attention.py
# :pyobject: alignment_scores
# ```
#
# The weights, with the mask:
#
# ```{literalinclude} ../../nmt_lib/paper/attention.py
# :pyobject: masked_softmax
# ```
#
# And the context:
#
# ```{literalinclude} ../../nmt_lib/paper/attention.py
# :pyobject: context
# ```
#
# `Attention.precompute` computes $U_a h_j$ for every position of every sentence in one matrix
# product, once, when the source is encoded.
#
# ## The numeric check
#
# The reference is {eq}`align-e`–{eq}`align-c` written as a loop over $j$, one sentence at a time,
# on the sentence's own length; the library works on a padded batch.

# %%
n, n_align, B, Tx = 3, 5, 2, 4
lengths = [4, 2]  # the second sentence is padded after 2 positions
att = attention.Attention(n, 2 * n, n_align)
for p in att.parameters():
    torch.nn.init.normal_(p)
s_prev = torch.randn(B, n)  # s_{i-1}
h = torch.randn(B, Tx, 2 * n)  # annotations h_j
mask = torch.arange(Tx) < torch.tensor(lengths)[:, None]  # [B, Tx]


def attention_reference(s_prev, h, W_a, U_a, v_a):
    """Equations (align-e)-(align-c) for ONE sentence, literally, as a loop over j."""
    e = torch.stack([v_a @ torch.tanh(W_a @ s_prev + U_a @ h_j) for h_j in h])
    alpha = torch.exp(e) / torch.exp(e).sum()
    c = sum(alpha[j] * h[j] for j in range(len(h)))
    return c, alpha


c, alpha = att(s_prev, h, att.precompute(h), mask)  # the library, on the padded batch
for b, T in enumerate(lengths):
    c_ref, alpha_ref = attention_reference(s_prev[b], h[b, :T], att.W_a, att.U_a, att.v_a)
    assert_close(c[b], c_ref)
    assert_close(alpha[b, :T], alpha_ref)
assert (alpha[~mask] == 0).all()  # exactly zero weight on padding
assert_close(alpha.sum(-1), torch.ones(B))
# The same energies as one einsum over the whole batch (no loop):
Uh = torch.einsum("ak,btk->bta", att.U_a, h)
e = torch.einsum(
    "a,bta->bt", att.v_a, torch.tanh(Uh + torch.einsum("ak,bk->ba", att.W_a, s_prev)[:, None])
)
assert_close(attention.alignment_scores(s_prev, Uh, att.W_a, att.v_a), e)
print("nmt_lib.paper.attention == equations (align-e)-(align-c), float64; padding gets weight 0")

# %% [markdown]
# The library's padded batch computation, the loop over $j$, and the einsum agree to float64
# precision, padded positions get weight exactly zero, and every row of weights sums to one.
# The same identities are in `tests/test_attention.py`. With the paper's initialisation,
# $v_a = 0$, the weights start uniform:

# %%
torch.nn.init.zeros_(att.v_a)
c0, alpha0 = att(s_prev, h, att.precompute(h), mask)
assert_close(alpha0[0], torch.full((Tx,), 1 / Tx))
assert_close(c0[1], h[1, :2].mean(0))  # the mean of the real annotations
alpha0

# %% [markdown]
# ## An illustration: learning to reorder
#
# Figure 3(a) of the paper shows the model translating *European Economic Area* into *zone
# économique européenne*, attending to the source words in reverse order. Here is that alignment
# learned in miniature. The annotations are fixed random vectors, one per source word, and the
# decoder state $s_{i-1}$ a fixed random vector per target position; only $W_a$, $U_a$, $v_a$ are
# trained, to maximise $\log \alpha_{i, \pi(i)}$ for the reordering $\pi$ a translator would use.
# This is a toy with a given answer, not the trained model (that is {doc}`09_alignments`).

# %%
src = ["the", "European", "Economic", "Area", "<end>"]
trg = ["la", "zone", "économique", "européenne", "<end>"]
pi = torch.tensor([0, 3, 2, 1, 4])  # target position i attends to source word pi[i]
torch.manual_seed(1)
n, n_align = 8, 16
toy = attention.Attention(n, 2 * n, n_align)
torch.nn.init.normal_(toy.W_a, std=0.1)
torch.nn.init.normal_(toy.U_a, std=0.1)
H = torch.randn(1, len(src), 2 * n).expand(len(trg), -1, -1)  # the same sentence for every i
S = torch.randn(len(trg), n)  # s_{i-1} for i = 1..5
M = torch.ones(len(trg), len(src), dtype=torch.bool)
opt, toy_steps = torch.optim.Adam(toy.parameters(), lr=0.05), 150
for _ in range(toy_steps):
    _, A = toy(S, H, toy.precompute(H), M)  # A[i, j] = alpha_ij
    loss = -A[torch.arange(len(trg)), pi].log().sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
A = A.detach()
on_right = A[torch.arange(len(trg)), pi]  # each target word's weight on its source word
glue("align_toy_rest", 1 - on_right.min().item(), display=False)  # the most any word leaves
glue("align_toy_steps", toy_steps, display=False)
fig = plots.fig3_alignments(
    [{"src": src, "trg": trg, "alpha": A.numpy(), "title": "a toy alignment model"}]
)
glue("align_toy_fig", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} align_toy_fig
# :name: fig-align-toy
#
# Weights $\alpha_{ij}$ of a trained toy alignment model, drawn as in Figure 3: each row is one
# target word's distribution over the source words, 0 black and 1 white.
# ```
#
# After {glue:text}`align_toy_steps` steps the weight that a target word leaves off the right source word is at most
# {glue:text}`align_toy_rest:.1e` (of 1), and the matrix shows the inverted diagonal of *European Economic Area*.
# In the real model, nothing tells the alignment model where to look: the weights are whatever
# makes the translation most probable.
#
# ## Summary
#
# - The energy $e_{ij}$ is a small MLP of the previous decoder state and one annotation,
#   {eq}`align-e`; a softmax over real source positions turns energies into weights,
#   {eq}`align-alpha`; the context is the weighted mean of the annotations, {eq}`align-c`.
# - $U_a h_j$ is computed once per sentence; per target word only $W_a s_{i-1}$ and a tanh are new.
# - Padding gets weight exactly zero; $v_a = 0$ at initialisation makes the first weights uniform.
# - `nmt_lib.paper.attention` computes exactly these equations (checked above in float64, and in
#   `tests/test_attention.py`).
#
# ## Exercises
#
# 1. Show that adding the same constant to every $e_{ij}$ of a row leaves $\alpha_{i\cdot}$
#    unchanged. Why does the alignment model need no bias added to its output,
#    $e_{ij} = v_a^\top \tanh(\cdot) + b$?
# 2. For the paper's sizes ($n = n' = 1000$, $T_x = T_y = 30$), how many multiply–adds does
#    precomputing $U_a h_j$ save per sentence compared with computing it inside the decoder loop?
# 3. RNNencdec can be seen as this model with a fixed alignment. Which $\alpha_{ij}$ gives the
#    RNNencdec context $c = \overrightarrow h_{T_x}$? (Careful: $h_j$ contains both directions.)
#
# :::{admonition} Solutions
# :class: dropdown
#
# 1. $\exp(e_{ij} + \gamma) / \sum_k \exp(e_{ik} + \gamma) = \exp(e_{ij}) / \sum_k \exp(e_{ik})$.
#    A bias $b$ added to $v_a^\top \tanh(\cdot)$ is the same for every source word $j$, so it is
#    such a constant and has no effect on $\alpha_{ij}$. (A bias *inside* the tanh, added to
#    $W_a s_{i-1} + U_a h_j$, would matter, because the tanh is not linear; GroundHog has none.)
# 2. Inside the loop: $T_y \cdot T_x \cdot n' \cdot 2n = 30 \cdot 30 \cdot 2\cdot 10^6 = 1.8\cdot 10^9$;
#    precomputed: $T_x \cdot n' \cdot 2n = 6\cdot 10^7$. The saving is $1.74\cdot 10^9$ multiply–adds
#    per sentence, a factor $T_y = 30$.
# 3. $\alpha_{i T_x} = 1$ and 0 elsewhere gives $c_i = h_{T_x} = [\overrightarrow h_{T_x};
#    \overleftarrow h_{T_x}]$, which contains $\overrightarrow h_{T_x}$ but also the backward state.
#    RNNencdec uses the forward encoder alone, so it is this with the backward half removed.
# :::
#
# **Practise it:** {doc}`lab1_attention`, where you write the alignment model and the context vector yourself, checked against this chapter's.
