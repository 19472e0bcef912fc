# %% [markdown]
# # Lab 1: attention by hand
#
# **What you will write.** The paper's alignment model and context vector, Eqs. 5–6
# ({doc}`04_alignment`), as one function of your own. A check compares it with the library's
# verified function in float64 and, when they differ, says in one sentence what is wrong. Then
# your function goes into the paper's RNNsearch, and a tiny model learns to reverse sequences of
# digits while you watch its alignment turn anti-diagonal.
#
# **What you need.** Chapters {doc}`04_alignment` and {doc}`05_decoder`; this environment
# (`nmt_lib`, PyTorch), nothing downloaded: the data are made by code.
#
# **Time.** This page, as the book's build runs it (600 updates), took
# {glue:text}`lab1_seconds:.0f` s when this book was built (one thread); your notebook runs to its
# first check in seconds, and with your function written, top to bottom in about a minute on a
# laptop's core (about 2 minutes with `updates = 2000`, the exercise).
#
# **Get the notebook.** {download}`lab1_attention.ipynb <../_build/labs/lab1_attention.ipynb>`, or
# all labs at once from a checkout: `.venv/bin/python tools/labs.py` writes them into `labs/`
# (README, "Labs"). The solutions are on this page, folded: try first.

# %% tags=["parameters"]
task = "reverse"  # or "copy": the diagonal
updates = 600  # training updates of the toy model
batch_size = 32
book = True  # False in the student's notebook: figures shown in the cells

# %%
import time

import torch

from nmt_experiments.core import plots
from nmt_experiments.pages.labs import checks, toy
from nmt_lib.paper.model import build_model

t_start = time.perf_counter()
torch.set_num_threads(1)  # tiny tensors: one thread is fastest

# %% [markdown]
# ## Your function
#
# For one decoder step and a batch of $B$ padded sentences, given the previous states
# $s_{i-1}$, the annotations $h_j$, their products $U_a h_j$ (computed once per sentence,
# {doc}`04_alignment`), the mask and the parameters $W_a$, $v_a$, compute
#
# $$
# e_{ij} = v_a^\top \tanh\big(W_a s_{i-1} + U_a h_j\big), \qquad
# \alpha_{ij} = \frac{\exp e_{ij}}{\sum_{k\,\text{real}} \exp e_{ik}}, \qquad
# c_i = \sum_j \alpha_{ij} h_j ,
# $$
#
# with $\alpha_{ij} = 0$ exactly where position $j$ is padding, and return the pair
# $(c_i, \alpha_{i\cdot})$. The shapes, batch-first as everywhere in `nmt_lib`:
#
# | argument | shape | | argument | shape |
# |---|---|---|---|---|
# | `s_prev` | `[B, n]` | | `mask` | `[B, Tx]` bool, True on real words |
# | `h` | `[B, Tx, 2n]` | | `W_a` | `[n', n]` |
# | `Uh` | `[B, Tx, n']` | | `v_a` | `[n']` |
#
# and the results `c [B, 2n]`, `alpha [B, Tx]`. Three lines of PyTorch are enough: a matrix
# product and a broadcast sum, a masked softmax, a weighted sum. Replace the
# `raise NotImplementedError` below.


# %% tags=["skeleton", "remove-cell"]
def my_attention(s_prev, h, Uh, mask, W_a, v_a):
    """c_i and alpha_i of Eqs. 5-6: s_prev [B, n], h [B, Tx, 2n], Uh [B, Tx, n'], mask [B, Tx]
    (bool), W_a [n', n], v_a [n'] -> (c [B, 2n], alpha [B, Tx])."""
    # e = ...      the energies e_ij, [B, Tx]
    # alpha = ...  softmax over the source positions j, 0 where mask is False
    # c = ...      sum over j of alpha_ij h_j, [B, 2n]
    raise NotImplementedError(
        "in my_attention, write the energies e, the masked softmax alpha and the context c, "
        "and return (c, alpha)"
    )


# %% tags=["solution", "hide-input"]
def my_attention(s_prev, h, Uh, mask, W_a, v_a):  # noqa: F811 (the skeleton's, above)
    """c_i and alpha_i of Eqs. 5-6: s_prev [B, n], h [B, Tx, 2n], Uh [B, Tx, n'], mask [B, Tx]
    (bool), W_a [n', n], v_a [n'] -> (c [B, 2n], alpha [B, Tx])."""
    e = torch.tanh(Uh + (s_prev @ W_a.T)[:, None, :]) @ v_a  # [B, Tx]
    alpha = e.masked_fill(~mask, float("-inf")).softmax(dim=-1)  # [B, Tx], 0 on padding
    c = (alpha[:, :, None] * h).sum(dim=1)  # [B, 2n]
    return c, alpha


# %% [markdown]
# ## Check 1: your function against the paper's
#
# The check draws a padded batch of three sentences (5, 3 and 2 real positions, so that padding
# matters) with sizes that all differ ($B = 3$, $T_x = 5$, $n = 4$, $2n = 8$, $n' = 6$, so that a
# transposed result has a shape of its own), calls your function and
# `nmt_lib.paper.attention.additive` in float64, and compares. When they differ it names the
# mistake: the usual ones are a softmax over the wrong axis (the rows of $\alpha$ must sum to
# one), padding not masked (weight on positions that are not words), shapes transposed, and the
# sum over the wrong index ($c_i$ sums over the source positions $j$).

# %%
checks.check_attention(my_attention)

# %% [markdown]
# ## Check 2: your function inside RNNsearch
#
# The paper's RNNsearch takes its attention function at construction: by name (`"additive"`,
# the default, the paper's) or as a callable with the signature above. The library's default is
# the same three equations, written once per equation:
#
# ```{literalinclude} ../../nmt_lib/paper/attention.py
# :pyobject: additive
# ```
#
# `build_model(cfg, attention=my_attention)` builds the paper's model with your function in
# that place; nothing else changes, and nothing is patched. The check gives both models the
# same weights and compares their log-probabilities and alignments on a padded batch.

# %%
checks.check_model(my_attention)

# %% [markdown]
# ## Train it: a toy reordering
#
# The task: read 4 to 8 random digits and write them reversed (`task = "reverse"`), as
# *European Economic Area* becomes *zone économique européenne*. Nothing tells the model where to
# look; the anti-diagonal is what makes reversing most probable. The model is {doc}`05_decoder`'s
# toy RNNsearch ($m = 16$, $n = n' = 32$, $l = 16$), with your attention, initialised by the
# small-model rule (`model.init = "fanin"`, {doc}`../deviations`: with the paper's
# $v_a = 0$ a model this small keeps uniform weights for many updates) and trained with Adam.

# %%
torch.manual_seed(0)
cfg = checks.toy_config(toy.VOCAB, m=16, n=32, n_align=32, l=16, init="fanin")
model = build_model(cfg, attention=my_attention)
snapshots = (0, updates // 3, 2 * updates // 3, updates)
run = toy.train(model, task, (4, 8), updates, batch_size, snapshots=snapshots)
_, _, src_words, trg_words = toy.probe(task)
diag = {u: toy.diagonal_weight(a, task) for u, a in run["alphas"].items()}
fig = plots.fig3_alignments(
    [
        {"src": src_words, "trg": trg_words, "alpha": run["alphas"][u], "title": f"{u} updates"}
        for u in snapshots
    ]
)
toy.show(fig, "lab1_alignment_fig", book)
print(
    f"{updates} updates in {run['seconds']:.0f} s;",
    f"last loss {run['losses'][-1]:.2f} nats per sentence",
)
print("mean weight on the words to copy:", {u: round(d, 2) for u, d in diag.items()})

# %% [markdown]
# ```{glue:figure} lab1_alignment_fig
# :name: fig-lab1-alignment
#
# The alignment of the toy RNNsearch with the attention written in this lab, for one probe
# sentence, as training goes on: each row is one output word's weights over the input digits
# (0 black, 1 white). Reversal's right answer is the anti-diagonal.
# ```

# %%
from myst_nb import glue

glue("lab1_diag_end", diag[updates], display=False)
glue("lab1_diag_start", diag[0], display=False)
glue("lab1_seconds", time.perf_counter() - t_start, display=False)

# %% [markdown]
# The weight on the right source digit goes from {glue:text}`lab1_diag_start:.2f` (uniform
# weights) to {glue:text}`lab1_diag_end:.2f` after the last update: your three lines learned
# where to look, by backpropagation through them.
#
# ## Exercises
#
# 1. Set `task = "copy"` and run again: which diagonal appears? Then `updates = 2000`: how
#    sharp do the weights become?
# 2. Break your function on purpose in each of the four ways that the check names, and read
#    what it says. Which mistake still trains a model (and what does that model attend to)?
# 3. Your function recomputes nothing per sentence, because `Uh` is passed in. Write a variant
#    that takes `U_a` and computes `U_a h_j` itself: how many more multiply–adds per sentence
#    ({doc}`04_alignment`, exercise 2)?
#
# :::{admonition} Solutions
# :class: dropdown
#
# 1. The diagonal: output $i$ copies input $i$. With more updates the rows approach one-hot.
# 2. Padding not masked still trains (the padded positions' annotations are the encoder's
#    states past the sentence's end), but the weights then depend on how much padding a
#    sentence has, and a sentence scores differently alone and in a batch. The others fail at
#    once or learn nothing useful.
# 3. $T_y \cdot T_x \cdot n' \cdot 2n$ instead of $T_x \cdot n' \cdot 2n$: a factor $T_y$.
# :::
