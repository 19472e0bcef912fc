# %% [markdown]
# # Lab 2: why attention — Figure 2 in miniature
#
# **What you will do.** Train a tiny RNNencdec and a tiny RNNsearch on the same synthetic task,
# with the same batches and the same number of updates, and measure how their accuracy falls with
# the sentence's length: the paper's Figure 2 ({doc}`08_experiments`) in minutes. You write the
# measure (checked), read the gap, then take the backward encoder out of RNNsearch (checked) and
# see what changes when the task is to reverse.
#
# **What you need.** Chapters {doc}`03_encdec`, {doc}`04_alignment`, {doc}`08_experiments` and
# {doc}`09_alignments`; nothing downloaded: the data are made by code.
#
# **Time.** This page, at the build's sizes (sentences up to 24 digits, 300 updates per model, four
# models), took {glue:text}`lab2_seconds:.0f` s when this book was built (one thread). The
# exercise's sizes, `max_len = 40` and `updates = 1000`, take about 10 minutes on a laptop's core.
#
# **Get the notebook.** {download}`lab2_why_attention.ipynb <../_build/labs/lab2_why_attention.ipynb>`,
# or all labs from a checkout with `.venv/bin/python tools/labs.py` (README, "Labs"). The
# solutions are on this page, folded.

# %% tags=["parameters"]
task = "copy"  # the paper's difficulty: the first word must be remembered longest
max_len = 24  # sentences of 2 .. max_len digits (the exercise: 40)
updates = 300  # updates per model, the same for every model (the exercise: 1000)
batch_size = 16
n_test = 32  # test sentences per length
book = True  # False in the student's notebook: figures shown in the cells

# %%
import time

import matplotlib.pyplot as plt
import torch

from nmt_experiments.pages.labs import checks, toy
from nmt_lib.paper.model import Encoded, RNNsearch, build_model

t_start = time.perf_counter()
torch.set_num_threads(1)  # tiny tensors: one thread is fastest


def config(arch: str):
    """The toy models' sizes: the same for both architectures but the attention."""
    return checks.toy_config(toy.VOCAB, m=16, n=32, n_align=32, l=16, arch=arch, init="fanin")


# %% [markdown]
# ## Your measure: words in the right place
#
# The models will be compared by the share of the words they put in the right place. Write
# `my_accuracy(hyps, refs)`: `hyps` and `refs` are lists of sentences, each a list of word ids
# ending in EOS; return the share of all the reference words that the hypothesis has at the same
# position. A hypothesis may be shorter or longer than its reference.


# %% tags=["skeleton", "remove-cell"]
def my_accuracy(hyps, refs):
    """The share of the words of refs (lists of ids, EOS included), over all sentences, that the
    hypothesis has at the same position."""
    raise NotImplementedError(
        "in my_accuracy, count the positions i where hyp[i] == ref[i] over all sentences and "
        "divide by the number of reference words"
    )


# %% tags=["solution", "hide-input"]
def my_accuracy(hyps, refs):  # noqa: F811 (the skeleton's, above)
    """The share of the words of refs (lists of ids, EOS included), over all sentences, that the
    hypothesis has at the same position."""
    right = sum(sum(a == b for a, b in zip(h, r)) for h, r in zip(hyps, refs))  # noqa: B905
    return right / sum(len(r) for r in refs)


# %%
checks.check_accuracy(my_accuracy)

# %% [markdown]
# ## Two models, the same training
#
# RNNencdec reads the source into one vector, $c = \overrightarrow h_{T_x}$ ({doc}`03_encdec`);
# RNNsearch keeps one annotation per word and attends ({doc}`04_alignment`). Both are trained to
# copy sentences of 2 to `max_len` random digits, on the same batches (the same seed) for the same
# number of updates, with Adam and the small-model initialisation ({doc}`../deviations`).

# %%
runs = {}
for arch in ("RNNencdec", "RNNsearch"):
    torch.manual_seed(0)
    model = build_model(config(arch))
    runs[arch] = model, toy.train(model, task, (2, max_len), updates, batch_size)
    print(f"{arch}: {updates} updates in {runs[arch][1]['seconds']:.0f} s")

# %% [markdown]
# ## Accuracy against length
#
# Each model decodes `n_test` new sentences of each length greedily ({doc}`07_beam_search`), and
# your function scores them.

# %%
lengths = list(range(2, max_len + 1, max(1, max_len // 8)))
acc = {
    arch: toy.accuracy_by_length(model, task, lengths, n_test, accuracy=my_accuracy)
    for arch, (model, _) in runs.items()
}
fig, ax = plt.subplots(figsize=(6.0, 2.8))
for arch, style in (("RNNsearch", "k-o"), ("RNNencdec", "k--s")):
    ax.plot(lengths, [acc[arch][k] for k in lengths], style, label=arch, ms=4)
ax.set(xlabel="sentence length (digits)", ylabel="words in the right place", ylim=(0, 1.02))
ax.legend(frameon=False)
fig.tight_layout()
toy.show(fig, "lab2_length_fig", book)

# %% [markdown]
# ```{glue:figure} lab2_length_fig
# :name: fig-lab2-length
#
# Accuracy (the share of the words in the right place) of a tiny RNNencdec and a tiny RNNsearch,
# trained on the same batches for the same number of updates to copy random digits, against the
# length of the sentence: the paper's Figure 2 in miniature.
# ```
#
# **Explain the gap** (then unfold the answer).
#
# :::{admonition} Answer
# :class: dropdown
#
# RNNencdec must carry every digit through one fixed-length vector and then through the
# decoder's state; the longer the sentence, the more it must hold and the longer it must hold
# the first digits, so its accuracy falls with length. RNNsearch's decoder reads annotation $j$
# directly when it writes word $j$: the distance from a source word to its copy is one step of
# attention, whatever the length, so it holds up, as the paper's Figure 2 says of real sentences.
# :::

# %%
from myst_nb import glue

long = [k for k in lengths if k > max_len // 2]
for arch in runs:
    glue(f"lab2_{arch}_long", sum(acc[arch][k] for k in long) / len(long), display=False)
glue("lab2_long_from", long[0], display=False)

# %% [markdown]
# On the sentences of {glue:text}`lab2_long_from` digits and more, RNNsearch puts
# {glue:text}`lab2_RNNsearch_long:.2f` of the words in the right place, RNNencdec
# {glue:text}`lab2_RNNencdec_long:.2f`.
#
# ## Exercise: take the backward encoder out
#
# RNNsearch's annotation $h_j = [\overrightarrow h_j; \overleftarrow h_j]$ concatenates a
# forward and a backward GRU ({eq}`enc-annot`). Write a subclass of `RNNsearch` whose encoding
# keeps the forward half and sets the backward half to zero (the backward GRU then changes
# nothing, and $s_0 = \tanh(W_s \overleftarrow h_1 + b_s)$ sees zeros). `encode` returns an
# `Encoded(mask, h, Uh)`; `Uh` is `self.decoder.attention.precompute(h)`, and `n` is
# `self.cfg.n`.


# %% tags=["skeleton", "remove-cell"]
class ForwardOnly(RNNsearch):
    """RNNsearch whose annotations are the forward GRU's states alone (the backward half 0)."""

    def encode(self, x, x_mask):
        raise NotImplementedError(
            "in ForwardOnly.encode, run self.encoder, set h[..., n:] to zero, recompute Uh and "
            "return Encoded(x_mask, h, Uh)"
        )


# %% tags=["solution", "hide-input"]
class ForwardOnly(RNNsearch):  # noqa: F811 (the skeleton's, above)
    """RNNsearch whose annotations are the forward GRU's states alone (the backward half 0)."""

    def encode(self, x, x_mask):
        h = self.encoder(x, x_mask)  # [B, Tx, 2n]
        h = torch.cat([h[..., : self.cfg.n], torch.zeros_like(h[..., self.cfg.n :])], -1)
        return Encoded(x_mask, h, self.decoder.attention.precompute(h))


# %%
checks.check_forward_only(ForwardOnly)

# %% [markdown]
# Now train both encoders to *reverse*, on the same batches, and compare.

# %%
rev = {}
for name, cls in (("bidirectional", RNNsearch), ("forward only", ForwardOnly)):
    torch.manual_seed(0)
    model = cls(config("RNNsearch"))
    model.reset_parameters()
    toy.train(model, "reverse", (2, max_len), updates, batch_size)
    rev[name] = toy.accuracy_by_length(model, "reverse", lengths, n_test, accuracy=my_accuracy)
fig, ax = plt.subplots(figsize=(6.0, 2.8))
for name, style in (("bidirectional", "k-o"), ("forward only", "k--s")):
    ax.plot(lengths, [rev[name][k] for k in lengths], style, label=f"RNNsearch, {name}", ms=4)
ax.set(xlabel="sentence length (digits)", ylabel="words in the right place", ylim=(0, 1.02))
ax.legend(frameon=False)
fig.tight_layout()
toy.show(fig, "lab2_reverse_fig", book)
for name in rev:
    glue(f"lab2_rev_{name.split()[0]}", sum(rev[name][k] for k in long) / len(long), display=False)
glue("lab2_seconds", time.perf_counter() - t_start, display=False)

# %% [markdown]
# ```{glue:figure} lab2_reverse_fig
# :name: fig-lab2-reverse
#
# Reversing random digits: RNNsearch with its bidirectional encoder and without the backward
# GRU, trained on the same batches for the same number of updates.
# ```
#
# On the long sentences, the bidirectional RNNsearch reverses {glue:text}`lab2_rev_bidirectional:.2f`
# of the words into place, the forward-only one {glue:text}`lab2_rev_forward:.2f`.
#
# :::{admonition} What changes, and why
# :class: dropdown
#
# To reverse, the decoder must start with the *last* digit. With the backward GRU, its first
# state $s_0 = \tanh(W_s \overleftarrow h_1 + b_s)$ has read the whole sentence, and every
# annotation also says how far its word is from the end. Forward-only annotations know only the
# words before them: $s_0$ knows nothing of the sentence, and the decoder must find the last
# word by content alone. How much that costs depends on the length and on the training budget:
# run it with `max_len = 40` and `updates = 1000`, and compare with copying (`task = "copy"`),
# where the forward states suffice.
# :::
