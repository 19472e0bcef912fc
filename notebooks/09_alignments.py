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

# %% tags=["parameters", "hide-input"]
profile = "lite"
train = False
results_dir = None
data_dir = None

# %% tags=["hide-input", "remove-cell"]
from nmt_experiments.core.results import check_parameters

check_parameters(profile, train, results_dir, data_dir)

# %% tags=["hide-input"]
import matplotlib.pyplot as plt
from IPython.display import Markdown, display
from myst_nb import glue

from nmt_experiments.core import alignment, figures, markdown, plots, tables
from nmt_experiments.core.results import (
    published_dir,
    require_results,
    results_path,
    run_dir,
    seed_groups,
)
from nmt_experiments.replicate import lexicon, lite_long, reader
from nmt_experiments.replicate import replication as replicate
from nmt_lib.io import atomic_write, read_json

out = results_path(profile, results_dir)
require_results(out, "manifest.json", "runs")
if train:  # beyond the paper: whether a dictionary helps the <unk> replacement (below)
    lexicon.unk_dictionary(profile, results_dir, data_dir)
glue("al_profile", profile, display=False)

# %% [markdown]
# ## Figure 3: alignments
#
# Panels (b)–(d) of Figure 3 are sentences from the test set, newstest2014; panel (a), "The
# agreement on the European Economic Area was signed in August 1992.", is "an arbitrary sentence"
# that newstest2014 does not contain. `nmt_lib.evaluate` finds (b)–(d) in the test set, translates
# (a) from its own words, as the paper did, decodes all four with beam search, and stores the
# attention weights of the best translation. When a profile's test set does not contain (b)–(d)
# (the toy corpus of `smoke` does not), the panels use three test sentences drawn by the paper's
# rule instead: no unknown word, 10–20 words (or the longest available).
#
# A translation made mostly of `<unk>` has rows that name no word, and its alignment cannot be
# read. Where a profile trains RNNsearch-50 with several seeds ({doc}`08_experiments`), each
# panel shows, among the seeds' translations of its sentence, the one with the fewest `<unk>` (the
# first seed on a tie), and its title names that run. The rule looks only at the output's unknown
# words, never at the weights or at BLEU.

# %% tags=["hide-input"]
panels, from_paper = figures.fig3_panels(out, seeds=True)  # each: the seed with fewest <unk>
runs_of = len(seed_groups(out).get("RNNsearch-50", []))
choice = (
    f"each panel from whichever of its {runs_of} seeds' runs has the fewest unknown words in its "
    "translation, named in the panel's title"
    if runs_of > 1
    else "one run"
)
glue("al_choice", choice, display=False)
fig = plots.fig3_alignments(panels, ncols=1, cell=0.3)  # one panel a row: legible at page width
if train:
    plots.save(fig, out / "fig3_alignments.png")
which = (
    f"the paper's sentences {panels[0]['title'].split(',')[0]}–{panels[-1]['title'].split(',')[0]}"
    if from_paper
    else "sentences chosen by the paper's rule"
)
glue("al_which", which, display=False)
glue("fig3", fig, display=False)
plt.close(fig)
# the rows of the generated words (not the final <end>): their heaviest source word's weight, the
# diagonal, and what a uniform, alignment-free distribution would give; a panel whose translation
# is mostly <unk> or whose weights are near uniform is flagged and left out of the averages
stats = [
    alignment.alignment_stats(
        *(
            (p["alpha"][:-1], p["trg"][:-1])
            if p["trg"][-1:] == ["<end>"]
            else (p["alpha"], p["trg"])
        )
    )
    for p in panels
]
flagged = [
    f"{p['title']} ({'; '.join(s['flags'])})"
    for p, s in zip(panels, stats, strict=True)
    if s["flags"]
]
kept = [s for s in stats if not s["flags"]] or stats
peak = sum(s["peak"] for s in kept) / len(kept)
monotonic = sum(s["monotonic_steps"] for s in kept) / max(sum(s["steps"] for s in kept), 1)
diagonal = sum(s["diagonal"] for s in kept) / len(kept)
glue("al_peak", peak, display=False)
glue("al_uniform", sum(s["uniform"] for s in kept) / len(kept), display=False)
glue("al_monotonic", 100 * monotonic, display=False)
glue("al_diagonal", diagonal, display=False)
glue("al_diagonal_rule", alignment.DIAGONAL, display=False)
sharp = "sharp" if peak >= alignment.PEAKED else "diffuse"
order = ("along the diagonal" if diagonal >= alignment.DIAGONAL else "off the diagonal") + (
    ", mostly monotonic" if monotonic >= alignment.MONOTONIC else ", not mostly monotonic"
)
glue("al_verdict", f"{sharp}, {order}", display=False)
glue(
    "al_flagged",
    (
        f"flagged and left out of these averages: {'; '.join(flagged)}. Weights on "
        "words the model could not name say little of what it aligns."
    )
    if flagged
    else "no panel is flagged here.",
    display=False,
)
glue("al_peaked", alignment.PEAKED, display=False)
glue("al_monotonic_rule", 100 * alignment.MONOTONIC, display=False)

# %% [markdown]
# ```{glue:figure} fig3
# :name: fig-alignments
#
# Alignments found by RNNsearch-50 ({glue:text}`al_profile` profile) for
# {glue:text}`al_which`; {glue:text}`al_choice`. The x-axis holds the source words, the y-axis the generated words; each
# pixel is the weight $\alpha_{ij}$ of source word $j$ for target word $i$, in grayscale (0 black,
# 1 white).
# ```
#
# A panel whose translation is mostly `<unk>`, or whose weights are near uniform, is flagged
# ({ref}`claims`): {glue:text}`al_flagged` On the other panels, a generated word puts on average
# {glue:text}`al_peak:.2f` of its attention on its heaviest source word; a uniform,
# alignment-free distribution would give {glue:text}`al_uniform:.2f`. The rank correlation
# between a generated word's position and that of its heaviest source word is
# {glue:text}`al_diagonal:.2f` on average (1: a perfect diagonal; attention stuck on one source
# word: 0), and from one generated word to the next the heaviest source word stays or moves right
# in {glue:text}`al_monotonic:.0f` % of the steps. By the rules of {ref}`claims` (sharp: at least
# {glue:text}`al_peaked` on average; along the diagonal: at least {glue:text}`al_diagonal_rule`;
# mostly monotonic: at least {glue:text}`al_monotonic_rule:.0f` % of the steps), these alignments
# are **{glue:text}`al_verdict`**. In the paper's figure most rows are nearly one-hot and follow the
# diagonal, with local reorderings; an untrained model attends almost uniformly, which shows as a
# dark matrix. The paper's own translations of these sentences are in
# `results/paper/figure3.csv`.
#
# ## Explore the alignments
#
# Pick a sentence — Figure 3's and a few dozen more test sentences without unknown words — and
# point at a generated word: the source words show how much of its attention each of them gets.
# The weights are those of the committed `attention.json` of RNNsearch-50; the explorer runs in
# the page, with no server.

# %% tags=["hide-input"]
from IPython.display import HTML

from nmt_experiments.pages.explorer import explorer_html

records = read_json(run_dir(out, "RNNsearch-50") / "attention.json")
figure3 = {id(r): f"Figure 3 ({c})" for c, r in zip("abcd", records[:4], strict=True)}
explore = [
    {
        **figures.attention_panel(r),
        "title": figure3.get(id(r))
        or f"test sentence {r['index'] + 1}: " + " ".join(r["src_tokens"][:8]) + " …",
    }
    for r in records
    if r.get("alpha")
]
glue("al_n_explore", len(explore), display=False)
HTML(explorer_html(explore))

# %% [markdown]
# The explorer holds {glue:text}`al_n_explore` sentences.
#
# ## Appendix C: long sentences
#
# The paper's Table 3 shows three test sentences of more than 30 words, translated by
# RNNencdec-50 and RNNsearch-50. `nmt_lib` decodes the whole test set, so the translations below
# are lines of the committed `hyp.test.detok.txt` of each run, next to the test set's reference.

# %% tags=["hide-input"]
if train:
    from nmt_lib.data import prepare

    prof = replicate.load(profile, data_dir)
    test = prepare(prof.runs["RNNsearch-50"].data).test
    text, from_paper = figures.long_sentences(out, test)
    which = "the paper's three long sentences" if from_paper else "the three longest test sentences"
    head = f"Appendix C, profile `{profile}`: {which}, with the reference and our translations.\n\n"
    with atomic_write(out / "long_sentences.md") as f:
        f.write(head + text)
require_results(out, "long_sentences.md")
Markdown((out / "long_sentences.md").read_text(encoding="utf-8"))

# %% [markdown]
# With a reduced profile the models are far from the paper's (and with `smoke`'s toy corpus the
# "long" sentences have a dozen words); what to look for is *where* a translation stops following
# its source. RNNencdec must reconstruct the end of a long sentence from its fixed-length vector;
# RNNsearch can look back at it.
#
# ## `<unk>` replaced through the alignment
#
# A model with a shortlist writes `<unk>` for every word outside it, and Table 1 counts each as a
# wrong word, as the paper does. The alignment points from each generated word to the source
# words it was generated from, so an `<unk>` can be replaced by the source word of largest
# weight, $x_{\arg\max_j \alpha_{ij}}$ (`nmt_lib.unk`): names, numbers and many rare words are
# written the same in French. This is what the paper's group did right after it (Jean et al.,
# 2015). Luong, Sutskever et al. (2015) had replaced `<unk>` a little earlier, in a model without
# attention: it learned to write, with each unknown word, the relative position of its source
# word, taught by the alignments of an external word aligner on the training data, not by
# attention weights. Here the replacement is beyond the paper, a column of its own in Table 1
# beside the paper's. RNNencdec has no alignment, nothing that points back at a source word, so its `<unk>`
# stay. The table gives each model with attention's test BLEU before and after, and how much of
# its output is `<unk>` (a model with several seeds: the mean over them); below it, translations
# that the replacement changed, the copied words in bold.
#
# Luong, Sutskever et al. take one step more: a copied word is looked up in a dictionary of word
# pairs that their aligner found in the training data, so that *Mubarak* becomes *Moubarak*. `nmt_lib.unk.dictionary`
# counts one without an aligner: for each copied source word, the target word outside the
# shortlist (an `<unk>` stands for such a word) that shares the most training pairs with it, by
# Dice's coefficient, if at least 2 pairs and 0.3. Where the results hold it
# (`python -m nmt_experiments.replicate --unk-dictionary PROFILE`), the column *All, through a
# dictionary* measures whether it helps, and a sample of its entries follows the table.

# %% tags=["hide-input"]
import html as _html

from IPython.display import HTML

unk_rows, unk_examples = tables.unk_replacement(out)


def _marked(before, after):
    return " ".join(
        f"<b>{_html.escape(_html.unescape(w))}</b>" if w != v else _html.escape(_html.unescape(w))
        for v, w in zip(before, after, strict=True)
    )


if unk_rows:
    cells = "".join(
        f"<tr><td>{m}</td><td>{_marked(b, b)}</td><td>{_marked(b, a)}</td></tr>"
        for m, b, a in unk_examples
    )
    display(
        Markdown(
            markdown.markdown_table(unk_rows) + "\nnewstest2014, tokenized BLEU, all "
            "sentences; % of the output's tokens."
        )
    )
    head = f"<tr><th>model</th><th>translation</th><th>{_html.escape('<unk>')} replaced</th></tr>"
    display(
        HTML(f"<table>{head}{cells}</table>")
        if cells
        else Markdown("No translation has an `<unk>` to replace.")
    )
    if (out / "unk_dictionary.json").is_file():
        lexicon = read_json(out / "unk_dictionary.json")
        entries = lexicon["entries"]
        step = max(1, len(entries) // 12)
        sample = ", ".join(f"{w} → {t}" for w, t in list(entries.items())[::step][:12])
        which = "twelve of them, evenly spaced in code-point order" if step > 1 else "they are"
        display(
            Markdown(
                f"The dictionary has {len(entries):,} entries for the "
                f"{lexicon['copied_words']:,} distinct source words copied; {which}: "
                f"{sample or 'none'}."
            )
        )
else:
    display(
        Markdown(
            f"The `{profile}` results hold no translations with `<unk>` replaced "
            "(`hyp.test.unk_replaced.tok.txt`): `python -m nmt_lib evaluate` of a run "
            "writes them."
        )
    )

# %% [markdown]
# ## Summary
#
# - Figure 3 is redrawn from the attention weights that `nmt_lib.evaluate` stores for the paper's
#   own sentences, found in the test set; if a profile's test set lacks them, the paper's selection
#   rule picks replacements, and the caption says so.
# - The alignments of this build's RNNsearch-50 on Figure 3's sentences are
#   {glue:text}`al_verdict`, by the rules of {ref}`claims`.
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
#
# **Practise it:** {doc}`lab2_why_attention` measures Figure 2's gap in miniature, RNNencdec against RNNsearch, in minutes on a CPU.

# %% [markdown]
# ## Translate a sentence yourself
#
# Type an English sentence and press *Translate*: this page runs the profile's published
# RNNsearch-50* (`results/<profile>/published/`, its weights in float16) in your browser, with no
# server. The page holds a second implementation of the model in plain JavaScript
# (`book/_static/translator.js`): the same Moses tokenization, shortlist, encoder and decoder
# steps, and the same beam search as `nmt_lib.search.beam_search` (beam size, cost or cost per
# word, length limits), which `tests/test_translator.py` holds to the Python one word for word.
# The model is loaded on the first click only. It is the longer-trained RNNsearch-50*, not the
# RNNsearch-50 whose weights Figure 3 and the explorer above show: two models with the same
# wiring but other weights, so their translations and alignments of a sentence can differ. Figure
# 3 and the explorer show RNNsearch-50 because the paper's figure shows the model of Table 1's
# row, and they need only its committed attention files; the translator needs weights, and runs
# the reader's model, chosen by one rule: {glue:text}`al_reader` Under the translation, its alignment: one row per
# generated word, one column per source word, the darker the cell, the larger $\alpha_{ij}$;
# point at a cell for its number.
#
# A word outside the target shortlist comes out as `<unk>`. With *replace each `<unk>`* ticked,
# each `<unk>` is replaced by the source word it attends to most, $x_{\arg\max_j \alpha_{ij}}$,
# as `nmt_lib.unk` does (beyond the paper: Jean et al., 2015): names, numbers
# and rare words are often written the same in French. An `<unk>` whose heaviest weight is on
# the source's end of sentence stays. RNNencdec could not do this: it reads the source into one
# vector and has no alignment, nothing that points from a generated word back to a source word.

# %% tags=["hide-input"]
from IPython.display import HTML, display

from nmt_experiments.pages import translator
from nmt_lib import loading
from nmt_lib.config import home, load_profile

ready = [(run, published_dir(profile, run, results_dir)) for run in load_profile(profile).publish]
shown_by = (
    reader.reader_text(lite_long.RESULTS, results_path(profile, results_dir))
    if profile == "lite"
    else ""
)
glue("al_reader", shown_by or "the profile's published model.", display=False)
ready = [(run, path) for run, path in ready if (path / loading.SUMS).is_file()]
if ready:
    # the bundle goes into the book's _static folder, which the build copies after it has run
    # the chapters; the fragment loads it on its first click
    run, path = ready[0]
    display(
        HTML(
            translator.book_translator(
                path,
                home() / "book" / "_static",
                f"nmt-translator-{profile}-{path.name}",
                f"{run} of the {profile} profile",
            )
        )
    )
else:
    print(
        f"The {profile} profile has no published model yet (results/{profile}/published/), "
        "so this page has no translator."
    )
