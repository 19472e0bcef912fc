# %% [markdown]
# # The RNN encoder–decoder and its bottleneck
#
# **What you will derive.** The baseline the paper improves on, RNNencdec (Cho et al. 2014a; the
# LSTM encoder–decoder of Sutskever et al. 2014 is the same idea with other cells and no $c$ in
# the decoder's steps, {doc}`10_seq2seq`): an encoder RNN reads the source into one fixed-length vector $c$, and a
# decoder RNN generates the translation from it. You will write the model's probability of a
# translation as a product of per-word conditionals, check that `nmt_lib` computes exactly that,
# and measure the bottleneck the paper is about: how little of the *first* words of a long sentence
# reaches $c$.
#
# **What you need.** The GRU of {doc}`02_gru`. The deep output of the decoder is derived in
# {doc}`05_decoder`; here it is a black box $g$. Notation: {doc}`../notation`.
#
# ## The paper's claim
#
# Section 1: an encoder–decoder "needs to be able to compress all the necessary information of a
# source sentence into a fixed-length vector", which "may make it difficult for the neural network
# to cope with long sentences, especially those that are longer than the sentences in the training
# corpus". Cho et al. (2014b) showed that the performance of a basic encoder–decoder deteriorates
# rapidly as the length of an input sentence increases. Figure 2 of the paper measures exactly
# this ({doc}`08_experiments`).

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
from nmt_lib.paper.encoder import Encoder
from nmt_lib.paper.model import build_model, init_parameters

torch.manual_seed(0)
torch.set_num_threads(1)  # tiny tensors: one thread is fastest
torch.set_default_dtype(torch.float64)

# %% [markdown]
# ## The equations
#
# Translation is a search for the most probable target sentence,
# $\arg\max_{\mathbf y} p(\mathbf y \mid \mathbf x)$ ({doc}`01_problem`). By the chain rule, any
# model of $p(\mathbf y \mid \mathbf x)$ is a product of next-word distributions:
#
# $$
# p(\mathbf y \mid \mathbf x) = \prod_{i=1}^{T_y} p(y_i \mid y_1, \dots, y_{i-1}, \mathbf x).
# $$ (encdec-chain)
#
# The **encoder** embeds each source word, $\bar e(x_j) = \bar E x_j$ (plus a bias in GroundHog),
# and runs a GRU from $\overrightarrow h_0 = 0$:
#
# $$
# \overrightarrow h_j = \operatorname{GRU}\big(\bar e(x_j), \overrightarrow h_{j-1}\big), \qquad
# c = \overrightarrow h_{T_x},
# $$ (encdec-enc)
#
# where $T_x$ counts the end-of-sentence symbol: $c$ is the state after reading EOS. The
# **decoder** starts from $s_0 = \tanh(W_s c + b_s)$ and models each conditional of
# {eq}`encdec-chain` from its state, the previous word, and the *same* $c$:
#
# $$
# p(y_i \mid y_{<i}, \mathbf x) = g(y_{i-1}, s_{i-1}, c), \qquad
# s_i = \operatorname{GRU}\big([\,\bar e(y_i); c\,], s_{i-1}\big).
# $$ (encdec-dec)
#
# The paper (Appendix A.2.2) defines RNNencdec as RNNsearch with $c_i$ fixed to
# $\overrightarrow h_{T_x}$: the same decoder, the same deep output $g$, and $c$ entering every
# gate. Everything the decoder will ever know about the source passes through the $n$ numbers of
# $c$: $n$ = {glue:text}`encdec_n` in the paper, whether the sentence has 5 words or 80.
#
# **Which words a state has read.** The indices of {eq}`encdec-dec` are the authors' code's
# (GroundHog's). Step $i$ first scores $y_i$, from the state $s_{i-1}$ and the previous word
# $y_{i-1}$; then, once $y_i$ is known (the reference's word in training, the chosen one in a
# search), the state reads it: $s_i$ is computed from $\bar e(y_i)$. Unrolled from the start:
#
# - $s_0$ has read no target word, and step 1 scores $y_1$ from $s_0$ and $\bar e(y_0) = 0$
#   (there is no beginning-of-sentence word);
# - $s_1 = \operatorname{GRU}([\bar e(y_1); c], s_0)$ has read $y_1$, and step 2 scores $y_2$
#   from it and from $y_1$;
# - in general $s_{i-1}$ has read $y_1, \dots, y_{i-1}$, exactly the words that the conditional
#   $p(y_i \mid y_{<i}, \mathbf x)$ of {eq}`encdec-chain` may depend on, and never $y_i$.
#
# So the state that scores a word is one step *behind* in its index and has already read the word
# before it. The paper's Eq. 4 writes the recurrence with $y_{i-1}$ in place of $y_i$ and scores
# $y_i$ from $s_i$; that is not this model with the index shifted ({doc}`05_decoder` derives both
# orders and what differs between them).
#
# ## The library functions
#
# The model exposes the pieces of {eq}`encdec-enc` and {eq}`encdec-dec` one by one, so that beam
# search can drive them step by step:
#
# ```{literalinclude} ../../nmt_lib/paper/model.py
# :pyobject: RNNencdec
# ```
#
# and the shared machinery, including `readout_step` ($g$) and `next_state` (the GRU update):
#
# ```{literalinclude} ../../nmt_lib/paper/model.py
# :pyobject: EncoderDecoder.readout_step
# ```
#
# ## The numeric checks
#
# **The context.** $c$ must be the forward GRU's state after the last *real* token, whatever the
# padding. Reference: the GRU run over each sentence alone.

# %%
cfg = ModelConfig(arch="RNNencdec", src_vocab=11, trg_vocab=13, m=4, n=5, l=3, output_rank=None)
model = build_model(cfg).double()
for p in model.parameters():  # larger than the paper's init, so every term matters
    torch.nn.init.normal_(p, std=0.3)
x = torch.tensor([[5, 6, 7, 8, 2], [9, 4, 2, 0, 0]])  # EOS = 2, <pad> = 0
x_mask = x != 0
y = torch.tensor([[3, 4, 5, 2], [6, 2, 0, 0]])
y_mask = y != 0

enc = model.encode(x, x_mask)
fwd = model.encoder.forward_gru
for b in range(2):
    T = int(x_mask[b].sum())
    h_alone = fwd(model.encoder.embed(x[b : b + 1, :T]))  # [1, T, n], no padding at all
    assert_close(enc.c[b], h_alone[0, -1])  # c = h→_{T_x}
print("c = the forward state after EOS, for every sentence of a padded batch")

# %% [markdown]
# **The chain rule.** `model(x, x_mask, y, y_mask)` returns $\log p(y_i \mid y_{<i}, \mathbf x)$ for
# every position at once (teacher forcing, for training). Driving `readout_step` and `next_state`
# by hand, as beam search does, must give the same numbers, and their sum is the sentence's
# $\log p(\mathbf y \mid \mathbf x)$ of {eq}`encdec-chain`.

# %%
logp, alpha = model(x, x_mask, y, y_mask)
assert alpha is None  # RNNencdec has no alignment
s, y_prev, steps = model.init_state(enc), None, []
for i in range(y.shape[1]):
    logp_next, c, _ = model.readout_step(enc, s, y_prev)  # g(y_{i-1}, s_{i-1}, c)
    steps.append(logp_next.gather(1, y[:, i : i + 1]).squeeze(1))
    s = model.next_state(s, y[:, i], c)  # the state reads y_i and c
    y_prev = y[:, i]
stepwise = torch.stack(steps, 1).masked_fill(~y_mask, 0.0)
assert_close(logp, stepwise)
assert_close(model.score(x, x_mask, y, y_mask), stepwise.sum(1))
assert_close(logp_next.exp().sum(1), torch.ones(2))  # each conditional is a distribution
print("teacher forcing == step by step; log p(y|x) = sum of the conditionals")

# %% [markdown]
# ## An illustration: the fixed-length bottleneck
#
# How much does $c$ depend on each source word? We measure
# $\lVert \partial c / \partial \bar e(x_j) \rVert$ for every position $j$ of a 50-word random
# sentence, for an RNNencdec at the paper's sizes and initialisation (Appendix B.1). This is an
# untrained model, so it shows what the architecture starts with, not what training reaches: the
# gradient path from word $j$ to $c$ is $T_x - j$ GRU steps long.

# %%
torch.set_default_dtype(torch.float32)
paper_cfg = ModelConfig(arch="RNNencdec", src_vocab=1003, trg_vocab=1003)
encoder = Encoder(paper_cfg.src_vocab, paper_cfg.m, paper_cfg.n, bidirectional=False)
init_parameters(encoder)  # App. B.1, as build_model does for the whole model
T = 50
x_long = torch.randint(3, 1003, (1, T))
x_long[0, -1] = 2  # EOS
emb = encoder.embed(x_long).detach().requires_grad_(True)
h_fwd = encoder.forward_gru(emb)  # [1, T, n]
c_long = h_fwd[0, -1]  # [n]
v = torch.randn_like(c_long)  # a random direction: E ||d(v.c)/de_j|| tracks ||dc/de_j||
(grad,) = torch.autograd.grad(c_long @ v, emb)
sens = grad[0].norm(dim=-1)  # [T]
sens = (sens / sens[-1]).tolist()
glue("encdec_sens_first", sens[0], display=False)
glue("encdec_T", T, display=False)
glue("encdec_n", paper_cfg.n, display=False)

fig, ax = plt.subplots(figsize=(6, 3.2))
ax.semilogy(range(1, T + 1), sens, "k-")
ax.set(xlabel="source position j", ylabel="sensitivity of c to word j\n(relative to the last)")
fig.tight_layout()
glue("encdec_sens_fig", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} encdec_sens_fig
# :name: fig-encdec-sens
#
# Sensitivity $\lVert\partial c/\partial \bar e(x_j)\rVert$ of the RNNencdec context to each word
# of a {glue:text}`encdec_T`-word sentence, relative to the last word (paper sizes, untrained).
# ```
#
# At initialisation the first word of a {glue:text}`encdec_T`-word sentence moves $c$ about
# {glue:text}`encdec_sens_first:.1e` times as much as the last word does. Training can open the
# update gates to carry information further, but all of it must still fit in
# {glue:text}`encdec_n` numbers. RNNsearch removes the constraint: every annotation $h_j$ stays
# available to the decoder, and the bidirectional encoder makes each $h_j$ about the words
# *around* $j$ ({doc}`04_alignment`).

# %% tags=["hide-input"]
from nmt_experiments.pages import diagrams

fig = diagrams.encdec_and_search()  # nmt_experiments/pages/diagrams.py draws the paper's models
glue("diagram_encdec", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} diagram_encdec
# :name: fig-diagram_encdec
#
# RNNencdec (left) reads the source into one vector $c$, the forward encoder's last state, which
# enters every decoder step; RNNsearch (right, {doc}`04_alignment` and {doc}`05_decoder`) keeps an
# annotation per source word and gives every step a context $c_i$ of its own, a weighted mean of
# all of them.
# ```
#
# ## Summary
#
# - An encoder–decoder models $p(\mathbf y\mid\mathbf x)$ as a product of next-word distributions,
#   {eq}`encdec-chain`, all conditioned on one vector $c = \overrightarrow h_{T_x}$, {eq}`encdec-enc`.
# - In the paper's RNNencdec, $c$ enters the initial state, every gate of the decoder GRU and the
#   deep output, {eq}`encdec-dec`.
# - `nmt_lib`'s teacher-forced log-probabilities equal the step-by-step ones used by beam search,
#   and padding does not change $c$ (checked above in float64, and in `tests/test_model.py`).
# - The context has a fixed size, and the path from early words to it is long: the bottleneck that
#   RNNsearch removes.
#
# ## Exercises
#
# 1. Every source sentence ends with an EOS symbol. What does it give $c$, and what, in a padded
#    batch, keeps $c$ independent of the padding: the EOS, or something else?
# 2. Sutskever et al. (2014) reversed the source sentence. Using the illustration above, argue why
#    that helps an encoder–decoder translate the *beginning* of a sentence.
# 3. Show that {eq}`encdec-chain` holds for any distribution over finite sequences, whatever the
#    model: it is an identity of probability, not an assumption.
#
# :::{admonition} Solutions
# :class: dropdown
#
# 1. With EOS, the last real input is the same symbol for every sentence, so $c$ is "the state after
#    the sentence ends", and the encoder can learn to mark the end in it. It does not make $c$
#    independent of the padding: that is the encoder's copying of its state over padded positions
#    (the state after the last real token is carried unchanged to the end of the batch), which the
#    check above tests.
# 2. Reversed, the first source words are read last, so they are closest to $c$ (high sensitivity),
#    and the first target words, which are generated first, depend on them most.
# 3. By the definition of conditional probability, $p(y_1,\dots,y_T\mid\mathbf x) =
#    p(y_1\mid\mathbf x)\,p(y_2,\dots,y_T\mid y_1,\mathbf x)$; repeat $T-1$ times. EOS at the end makes
#    the length part of the sequence, so the product over $i \le T_y$ is a distribution over
#    sentences of all lengths.
# :::
