# %% [markdown]
# # Lab 3: another score
#
# **What you will write.** Luong et al.'s two bilinear scores, `dot` and `general`
# ({doc}`11_luong`), checked against `nmt_lib.models.luong` in float64. Then each score, yours,
# trains a tiny Luong model on the toy reversal, beside the additive score of the paper
# (`concat`), on the same batches. Last, the book's published RNNsearch-50* (trained on WMT'14
# English→French, {doc}`09_alignments`) translates a sentence that you type, and you read its
# attention.
#
# **What you need.** Chapters {doc}`04_alignment` and {doc}`11_luong`; the committed
# `results/lite/published/` model; nothing downloaded.
#
# **Time.** This page, at the build's sizes (three models, 300 updates each, one translation), took
# {glue:text}`lab3_seconds:.0f` s when this book was built (one thread); with `updates = 1500`, the
# exercise, about 3 minutes on a laptop's core.
#
# **Get the notebook.** {download}`lab3_scores.ipynb <../_build/labs/lab3_scores.ipynb>`, or all
# labs from a checkout with `.venv/bin/python tools/labs.py` (README, "Labs"). The solutions are
# on this page, folded.

# %% tags=["parameters"]
updates = 300  # updates per score (the exercise: 1500)
batch_size = 32
sentence = "The agreement on the European Economic Area was signed in August 1992."
book = True  # False in the student's notebook: figures shown in the cells

# %%
import time

import torch

from nmt_experiments.core import plots
from nmt_experiments.pages.labs import checks, toy
from nmt_lib.config import model_config
from nmt_lib.models.luong import Luong

t_start = time.perf_counter()
torch.set_num_threads(1)  # tiny tensors: one thread is fastest

# %% [markdown]
# ## Your scores
#
# Luong's decoder attends from its current state $h_t$ ({eq}`luong-score`):
#
# $$
# \operatorname{score}(h_t, \bar h_s) = h_t^\top \bar h_s \ \ (\texttt{dot}), \qquad
# \operatorname{score}(h_t, \bar h_s) = h_t^\top W_a \bar h_s \ \ (\texttt{general}),
# $$
#
# for a batch: `h_t [B, n]`, the source states `h_bar [B, Tx, n]`, `W_a [n, n]`, and the scores
# `[B, Tx]`, one per decoder state and source position (the softmax and the mask are the
# model's). One line each.


# %% tags=["skeleton", "remove-cell"]
def my_dot(h_t, h_bar):
    """score(h_t, h_bar_s) = h_t^T h_bar_s: h_t [B, n], h_bar [B, Tx, n] -> [B, Tx]."""
    raise NotImplementedError("in my_dot, return the scores h_t^T h_bar_s, shape [B, Tx]")


def my_general(h_t, h_bar, W_a):
    """score(h_t, h_bar_s) = h_t^T W_a h_bar_s: W_a [n, n] -> [B, Tx]."""
    raise NotImplementedError("in my_general, return the scores h_t^T W_a h_bar_s, shape [B, Tx]")


# %% tags=["solution", "hide-input"]
def my_dot(h_t, h_bar):  # noqa: F811 (the skeleton's, above)
    """score(h_t, h_bar_s) = h_t^T h_bar_s: h_t [B, n], h_bar [B, Tx, n] -> [B, Tx]."""
    return (h_bar @ h_t[:, :, None]).squeeze(-1)


def my_general(h_t, h_bar, W_a):  # noqa: F811 (the skeleton's, above)
    """score(h_t, h_bar_s) = h_t^T W_a h_bar_s: W_a [n, n] -> [B, Tx]."""
    return (h_bar @ W_a.T @ h_t[:, :, None]).squeeze(-1)  # W_a h_bar_s, then the dot product


# %% [markdown]
# ## The checks
#
# Each check draws a padded batch, encodes it with a tiny Luong model in float64, and compares
# your score with `Luong.scores` for a random $h_t$. The usual mistakes it names: $W_a$ on the
# wrong side ($h_t^\top W_a^\top \bar h_s$), a scaling by $1/\sqrt n$ (the Transformer's, not
# Luong's), and a result transposed.

# %%
checks.check_score(my_dot, "dot")
checks.check_score(my_general, "general")


# %% [markdown]
# ## Your scores in a model
#
# `Luong.scores(enc, h)` is the method that computes the scores of a step; a subclass that
# overrides it with your functions is Luong's model with your scores (one decoder state per
# sentence at a time, as with input feeding, the default).


# %%
class MyLuong(Luong):
    """Luong et al.'s model, its dot and general scores computed by my_dot and my_general."""

    def scores(self, enc, h):
        if self.cfg.score == "dot":
            return my_dot(h, enc.h_bar)
        if self.cfg.score == "general":
            return my_general(h, enc.h_bar, self.W_a)
        return super().scores(enc, h)  # concat: the paper's additive score


task = "reverse"
runs, acc = {}, {}
for score in ("dot", "general", "concat"):
    torch.manual_seed(0)
    cfg = model_config(
        dict(arch="Luong", src_vocab=toy.VOCAB, trg_vocab=toy.VOCAB, m=16, n=32, n_align=32)
        | dict(score=score, init="fanin")
    )
    model = MyLuong(cfg)
    model.reset_parameters()
    runs[score] = toy.train(model, task, (4, 8), updates, batch_size, snapshots=(updates,))
    acc[score] = toy.accuracy_by_length(model, task, [8], 32)[8]
    print(f"{score}: loss {runs[score]['losses'][-1]:.2f}, accuracy on 8 digits {acc[score]:.2f}")
_, _, src_words, trg_words = toy.probe(task)
fig = plots.fig3_alignments(
    [
        {"src": src_words, "trg": trg_words, "alpha": runs[s]["alphas"][updates], "title": s}
        for s in runs
    ],
    ncols=3,
)
toy.show(fig, "lab3_scores_fig", book)

# %% [markdown]
# ```{glue:figure} lab3_scores_fig
# :name: fig-lab3-scores
#
# The alignment of three tiny Luong models for one probe sentence (reverse the digits) after the
# same training, one per score: `dot` and `general` computed by the functions of this lab,
# `concat` the paper's additive score (0 black, 1 white).
# ```
#
# **Compare.** Read the three losses and accuracies printed above and the alignments in the
# figure: do the three scores find the anti-diagonal in the same number of updates? Why could
# `dot` be at a disadvantage when the encoder's and the decoder's states live in different
# spaces ({doc}`11_luong`, exercise 2)? Then run again with `updates = 1500`.
#
# ## The published model's attention, for your sentence
#
# The committed `lite` results publish an RNNsearch-50* (`results/lite/published/`, its weights in
# float16); `nmt_lib.loading.load_published` checks its files and loads it in float32. Change `sentence` in
# the parameters cell, and run the cells below: the model translates it with beam search, and the
# figure shows $\alpha_{ij}$ of each generated word over your words.

# %%
import html

from myst_nb import glue

from nmt_experiments.core.results import published_dir
from nmt_lib import search
from nmt_lib.data.text import detokenize, tokenize
from nmt_lib.loading import load_published

loaded = load_published(published_dir("lite", "RNNsearch-50*"))
words = tokenize(sentence, loaded.cfg.data.src_lang)
x = torch.tensor([loaded.src_vocab.encode(words, eos=True)])
with torch.no_grad():
    (hyp,) = search.beam_search(loaded.model, x, x != 0, beam=5, return_alpha=True)
out_words = loaded.trg_vocab.decode(hyp.tokens)
translation = detokenize(out_words, loaded.cfg.data.trg_lang)
print(translation)
unescape = lambda ws: [html.unescape(w) for w in ws]  # noqa: E731 Moses escapes, as text
src = unescape([*loaded.src_vocab.decode(x[0].tolist()), "</s>"])  # the shortlist's view: <unk>
trg = unescape([*out_words, "</s>"][: len(hyp.tokens)])
fig = plots.fig3_alignments([{"src": src, "trg": trg, "alpha": hyp.alpha, "title": sentence[:40]}])
toy.show(fig, "lab3_published_fig", book)
glue("lab3_translation", translation, display=False)
glue("lab3_seconds", time.perf_counter() - t_start, display=False)

# %% [markdown]
# ```{glue:figure} lab3_published_fig
# :name: fig-lab3-published
#
# The attention of the published RNNsearch-50* while it translates the lab's sentence: one row
# per generated word, one column per source word (as the model's shortlist sees it; `<unk>`
# outside it, `</s>` the end).
# ```
#
# Its translation: *{glue:text}`lab3_translation`*
#
# ## Exercises
#
# 1. Type a sentence with a reordering (an adjective before its noun, *the white house*): does
#    the alignment turn as in the paper's Figure 3(a)?
# 2. Type a sentence with a name the shortlist lacks: which source word does the `<unk>` attend
#    to, and what would `--replace-unk` write ({doc}`09_alignments`)?
# 3. Swap `my_general` for $h_t^\top W_a^\top \bar h_s$: the check fails, but would the model
#    still train as well? (Hint: $W_a$ is learned.)
#
# :::{admonition} Solutions
# :class: dropdown
#
# 3. Yes: $W_a^\top$ is just another $n \times n$ matrix, and training learns whichever the
#    formula uses. The check fails because it compares with Luong's parametrisation, where the
#    same weights must give the same scores (a checkpoint trained with one could not be read by
#    the other).
# :::
