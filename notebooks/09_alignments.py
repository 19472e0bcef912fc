# %% [markdown]
# # Alignments and long sentences: Figure 3 and Appendix C
#
# **What you will see.** What the alignment model of {doc}`04_alignment` learned: the weights
# $\alpha_{ij}$ of a trained RNNsearch-50 for the paper's own Figure 3 sentences, drawn as the
# paper draws them, and the translations of the paper's long sentences of Appendix C by
# RNNencdec-50 and RNNsearch-50. In replicate mode this notebook writes
# `results/<profile>/fig3_alignments.png` and `long_sentences.md`; in report mode it redraws the
# figure from the committed `attention.json` and shows the committed sentences.
#
# **What you need.** The alignment model ({doc}`04_alignment`) and the experiments
# ({doc}`08_experiments`), whose runs this page reads.
#
# ## The paper's claims
#
# Section 5.2.1: the alignment of words between English and French is largely monotonic, with
# strong weights along the diagonal, but the model also handles non-trivial reorderings (in
# Figure 3(a), *European Economic Area* ↔ *zone économique européenne*) and benefits from
# *soft* alignment (in (d), *the man* → *l' homme*: the choice of *l'* depends on the following
# word). Section 5.2.2 and Appendix C: on long sentences, RNNencdec-50 drifts from the source
# meaning after about 30 words, while RNNsearch-50 translates the whole sentence.

# %% tags=["parameters"]
profile = "smoke"
train = False
results_dir = None
data_dir = None

# %%
import matplotlib.pyplot as plt
from IPython.display import Markdown
from myst_nb import glue

from nmt_lib import plots, replicate
from nmt_lib.io import atomic_write

out = replicate.results_path(profile, results_dir)
replicate.require_results(out, "manifest.json", "runs")
glue("al_profile", profile, display=False)

# %% [markdown]
# ## Figure 3: alignments
#
# Panels (b)–(d) of Figure 3 are sentences from the test set, newstest2014 (panel (a) is "an
# arbitrary sentence", not necessarily from it). `nmt_lib.evaluate` finds them in the test set,
# decodes them with beam search, and stores the attention weights of the best translation. When
# a profile's test set does not contain them (the toy corpus of `smoke` does not), the panels use
# three test sentences drawn by the paper's rule instead: no unknown word, 10–20 words (or the
# longest available).

# %%
panels, from_paper = replicate.fig3_panels(out)
fig = plots.fig3_alignments(panels, ncols=3)
if train:
    plots.save(fig, out / "fig3_alignments.png")
which = "the paper's sentences (b)–(d)" if from_paper else "sentences chosen by the paper's rule"
glue("al_which", which, display=False)
glue("fig3", fig, display=False)
plt.close(fig)
# the rows of the generated words (not the final <end>): their heaviest source word's weight, and
# what a uniform, alignment-free distribution would give
stats = [replicate.alignment_stats(p["alpha"][:-1] if p["trg"][-1:] == ["<end>"] else p["alpha"])
         for p in panels]  # fmt: skip
glue("al_peak", sum(s["peak"] for s in stats) / len(stats), display=False)
glue("al_uniform", sum(s["uniform"] for s in stats) / len(stats), display=False)

# %% [markdown]
# ```{glue:figure} fig3
# :name: fig-alignments
#
# Alignments found by RNNsearch-50 ({glue:text}`al_profile` profile) for
# {glue:text}`al_which`. The x-axis holds the source words, the y-axis the generated words; each
# pixel is the weight $\alpha_{ij}$ of source word $j$ for target word $i$, in grayscale (0 black,
# 1 white).
# ```
#
# On these panels, a generated word puts on average {glue:text}`al_peak:.2f` of its attention on
# its heaviest source word; a uniform, alignment-free distribution would give
# {glue:text}`al_uniform:.2f` (the same measure as in {ref}`claims`, over these sentences only). In
# the paper's figure most rows are nearly one-hot and follow the diagonal, with local
# reorderings; an untrained model attends almost uniformly, which shows as a dark matrix. How
# monotonic these alignments are, in numbers, is the last row of {ref}`claims`. The paper's own
# translations of these sentences are in `results/paper/figure3.csv`.
#
# ## Appendix C: long sentences
#
# The paper's Table 3 shows three test sentences of more than 30 words, translated by
# RNNencdec-50 and RNNsearch-50. `nmt_lib` decodes the whole test set, so the translations below
# are lines of the committed `hyp.test.detok.txt` of each run, next to the test set's reference.

# %%
if train:
    from nmt_lib.data import prepare

    prof = replicate.load(profile, data_dir)
    test = prepare(prof.runs["RNNsearch-50"].data).test
    text, from_paper = replicate.long_sentences(out, test)
    which = "the paper's three long sentences" if from_paper else "the three longest test sentences"
    head = f"Appendix C, profile `{profile}`: {which}, with the reference and our translations.\n\n"
    with atomic_write(out / "long_sentences.md") as f:
        f.write(head + text)
replicate.require_results(out, "long_sentences.md")
Markdown((out / "long_sentences.md").read_text(encoding="utf-8"))

# %% [markdown]
# With a reduced profile the models are far from the paper's, and on a toy corpus the "long"
# sentences have a dozen words; what to look for is *where* a translation stops following its
# source. RNNencdec must reconstruct the end of a long sentence from its fixed-length vector;
# RNNsearch can look back at it.
#
# ## Summary
#
# - Figure 3 is redrawn from the attention weights that `nmt_lib.evaluate` stores for the paper's
#   own sentences, found in the test set; if a profile's test set lacks them, the paper's selection
#   rule picks replacements, and the caption says so.
# - The alignments of a trained RNNsearch are soft and mostly monotonic, with local reorderings.
# - Appendix C's long sentences are read from the same full-test-set translations that Table 1
#   scores.
#
# ## Exercises
#
# 1. Why does the alignment matrix of RNNsearch have one row per *generated* word, not per
#    reference word? What would you have to change to draw it for the reference translation?
# 2. In panel (d) of the paper, *l'* attends to both *the* and *man*. Why would a hard, one-to-one
#    alignment have trouble here?
# 3. The measure above (the weight of the heaviest source word) says how *sharp* an alignment is,
#    not whether it is *monotonic*. Propose a measure of monotonicity that uses the whole
#    distribution $\alpha_{i\cdot}$.
#
# :::{admonition} Solutions
# :class: dropdown
#
# 1. The weights are computed while decoding, from the model's own previous state, so they belong
#    to the words the model generated. For the reference, run the model in teacher-forcing mode on
#    the reference (`model(x, x_mask, y, y_mask)` returns `alpha [B, Ty, Tx]`).
# 2. French *le*, *la* or *l'* depends on the noun that follows (*homme* begins with a vowel
#    sound); the article's translation needs information from *man*, not just from *the*.
# 3. For example the expected position $\bar j_i = \sum_j j\,\alpha_{ij}$ and the share of $i$ with
#    $\bar j_{i+1} \ge \bar j_i$, or the Kendall correlation between $i$ and $\bar j_i$.
# :::
