# %% [markdown]
# # The problem: the most probable translation
#
# **What you will derive.** The task of the paper stated as a probabilistic problem, the training
# objective that follows from it, and the data that objective is fitted to: WMT'14
# English→French, tokenized as the paper tokenized it, with words outside a 30,000-word
# *shortlist* replaced by `<unk>`. The numbers on this page come from the data of the profile the
# book was built with, read from `results/<profile>/data_summary.json`.
#
# **What you need.** Basic probability: conditional distributions and maximum likelihood.
# Notation: {doc}`../notation`.
#
# ## The paper's claim
#
# Section 2: "from a probabilistic perspective, translation is equivalent to finding a target
# sentence $\mathbf y$ that maximizes the conditional probability of $\mathbf y$ given a source
# sentence $\mathbf x$". Neural machine translation fits a parameterized model of this
# distribution to a parallel corpus, and then, given a source sentence, searches for the
# translation the model finds most probable.

# %% tags=["parameters"]
profile = "lite"
train = False
results_dir = None
data_dir = None

# %% tags=["remove-cell"]
from nmt_experiments.core.results import check_parameters

check_parameters(profile, train, results_dir, data_dir)

# %%
import html
import json

import matplotlib.pyplot as plt
from myst_nb import glue

from nmt_experiments.core import plots
from nmt_experiments.core.results import require_results, results_path
from nmt_experiments.replicate import replication as replicate
from nmt_lib.config import DataConfig, ModelConfig
from nmt_lib.data.text import detokenize, tokenize
from nmt_lib.data.vocab import EOS, PAD, UNK, Vocab
from nmt_lib.io import write_json
from nmt_lib.paper import FIG3_SOURCES

out = results_path(profile, results_dir)
glue("profile", profile, display=False)

# %% [markdown]
# ## The equations
#
# A source sentence $\mathbf x = (x_1, \dots, x_{T_x})$ and a target sentence
# $\mathbf y = (y_1, \dots, y_{T_y})$ are sequences of words, each word a row of a vocabulary. A
# translation system is a rule that picks
#
# $$
# \hat{\mathbf y} = \arg\max_{\mathbf y}\; p(\mathbf y \mid \mathbf x).
# $$ (prob-argmax)
#
# Neural machine translation models $p(\mathbf y \mid \mathbf x)$ with a network of parameters
# $\theta$ and fits $\theta$ to a parallel corpus $\mathcal D = \{(\mathbf x^{(k)}, \mathbf y^{(k)})\}_{k=1}^{|\mathcal D|}$
# by maximum likelihood:
#
# $$
# \theta^\star = \arg\max_\theta \sum_{k=1}^{|\mathcal D|} \log p_\theta\big(\mathbf y^{(k)} \mid \mathbf x^{(k)}\big).
# $$ (prob-mle)
#
# Two problems are hidden in these two lines. {eq}`prob-mle` needs a model that can assign a
# probability to any target sentence given any source sentence — the encoder–decoder of
# {doc}`03_encdec` and the RNNsearch of {doc}`05_decoder`. {eq}`prob-argmax` is a search over
# all sentences, exponentially many; the paper approximates it with beam search
# ({doc}`07_beam_search`).
#
# Both sides need a finite vocabulary. The paper (Section 4.1) Moses-tokenizes the text,
# applies no lowercasing or stemming, keeps the 30,000 most frequent words of each language, and
# maps every other word to a special token `<unk>`. An end-of-sentence symbol (EOS) is appended
# to every sentence, so that a model's distribution over sentences of different lengths is
# well defined.
#
# ## The library functions
#
# Tokenization is the Moses tokenizer (via sacremoses), with `tokenizer.perl`'s defaults:
#
# ```{literalinclude} ../../nmt_lib/data/text.py
# :pyobject: tokenize
# ```
#
# The shortlist keeps the most frequent words, after three special rows:
#
# ```{literalinclude} ../../nmt_lib/data/vocab.py
# :pyobject: Vocab.build
# ```
#
# `nmt_lib.data.prepare` runs the whole pipeline for a profile — locate the WMT'14 files,
# tokenize, drop training pairs that occur in dev or test or exceed the length limit, build the
# shortlists, numericalize — and `nmt_lib.data.data_summary` reports what it did.
#
# ## The numeric checks
#
# **Tokenization.** The paper's Figure 3(a) shows its sentence as the model saw it, tokenized. We
# tokenize the raw sentence and compare (the Moses tokenizer escapes `'` and `"` as XML entities,
# as `tokenizer.perl` does; the figure shows them unescaped).

# %%
raw_en = "The agreement on the European Economic Area was signed in August 1992."
raw_fr = "L'accord sur la zone économique européenne a été signé en août 1992."
fig3a_en = FIG3_SOURCES[
    0
]  # "The agreement on the European Economic Area was signed in August 1992 ."
fig3a_fr = "L' accord sur la zone économique européenne a été signé en août 1992 ."
tok_en, tok_fr = tokenize(raw_en, "en"), tokenize(raw_fr, "fr")
assert [html.unescape(t) for t in tok_en] == fig3a_en.split()
assert [html.unescape(t) for t in tok_fr] == fig3a_fr.split()
assert detokenize(tok_fr, "fr") == raw_fr  # and back
print(" ".join(tok_fr))

# %% [markdown]
# **The shortlist.** Rows 0, 1, 2 are `<pad>`, `<unk>` and `</s>` (EOS); the words follow in
# order of decreasing frequency, so the paper's "30,000 words" are the model's
# {glue:text}`shortlist_rows` rows, of which {glue:text}`shortlist_words` are words — the layout
# of the authors' code. A word outside the shortlist becomes `<unk>`.

# %%
counts = {"la": 5, "zone": 3, "économique": 2, "européenne": 1, "accord": 1}
v = Vocab.build(counts, n_words=3)
assert (v.stoi["<pad>"], v.stoi["<unk>"], v.stoi["</s>"]) == (PAD, UNK, EOS)
assert v.itos[3:] == ["la", "zone", "économique"]  # by count
assert v.encode(["la", "zone", "européenne"], eos=True) == [3, 4, UNK, EOS]
paper_rows = ModelConfig().trg_vocab
assert paper_rows == DataConfig().trg_words + 3
glue("shortlist_rows", f"{paper_rows:,}", display=False)
glue("shortlist_words", f"{DataConfig().trg_words:,}", display=False)
v.itos

# %% [markdown]
# ## The data of this build
#
# The paper trains on the WMT'14 English–French parallel corpora, 850M words, reduced by data
# selection to 348M words, and tests on newstest2014. Each profile of this replication declares
# its own training data ({doc}`../deviations`); dev (newstest2012+2013) and test (newstest2014)
# are the official sets in every profile but `smoke`, which runs on a generated toy corpus in the
# same file layout. In replicate mode this notebook prepares the profile's data and writes its
# summary to `results/<profile>/data_summary.json`; in report mode it reads that file.

# %%
if train:
    summaries = replicate.data_summaries(replicate.load(profile, data_dir))
    write_json(out / "data_summary.json", summaries)
else:
    require_results(out, "data_summary.json")
    summaries = json.loads((out / "data_summary.json").read_text(encoding="utf-8"))

longest = max(summaries, key=lambda k: int(k.split("=")[1]))
S = summaries[longest]
tr, te = S["train"], S["test"]
glue("data_max_len", S["settings"]["max_len"], display=False)
glue("data_corpora", ", ".join(S["train_corpora"]), display=False)
glue("data_pairs", f"{tr['pairs']:,}", display=False)
glue("data_src_words", f"{tr['src']['words']:,}", display=False)
glue("data_trg_words", f"{tr['trg']['words']:,}", display=False)
glue("data_dropped_long", f"{tr['dropped']['too_long']:,}", display=False)
glue("data_dropped_devtest", f"{tr['dropped']['in_dev_test']:,}", display=False)
glue("data_coverage", 100 * tr["trg"]["shortlist_coverage"], display=False)
glue("data_test_pairs", f"{te['pairs']:,}", display=False)
glue("data_test_nounk", f"{te['no_unk']:,}", display=False)
glue("data_dev_pairs", f"{S['dev']['pairs']:,}", display=False)
rows = []
for key, s in summaries.items():
    rows.append(
        {
            "length limit": key,
            "runs": ", ".join(s["runs"]),
            "train pairs": s["train"]["pairs"],
            "dropped (too long)": s["train"]["dropped"]["too_long"],
            "dropped (in dev/test)": s["train"]["dropped"]["in_dev_test"],
            "src rows": s["vocab"]["src_rows"],
            "trg rows": s["vocab"]["trg_rows"],
            "test No-UNK": s["test"]["no_unk"],
        }
    )
rows

# %% [markdown]
# For the **{glue:text}`profile`** profile, training uses {glue:text}`data_corpora`. With the
# length limit of {glue:text}`data_max_len` words it keeps {glue:text}`data_pairs` sentence pairs
# ({glue:text}`data_src_words` English and {glue:text}`data_trg_words` French words), after
# dropping {glue:text}`data_dropped_long` pairs that are too long and
# {glue:text}`data_dropped_devtest` that also occur in dev or test. The French shortlist covers
# {glue:text}`data_coverage:.1f`% of the French training words. The test set has
# {glue:text}`data_test_pairs` sentences, of which {glue:text}`data_test_nounk` have no `<unk>`
# on either side (the "No UNK" subset of Table 1); dev has {glue:text}`data_dev_pairs`.
#
# ## An illustration: sentence lengths
#
# The paper trains each model twice, on pairs of at most 30 and at most 50 words, and Figure 2
# asks how translation quality falls with length. The length distribution of the data is where
# that story starts.

# %%
hist = {
    f"train, {name}": [n for n, c in enumerate(tr[name]["length_hist"]) for _ in range(c)]
    for name in ("src", "trg")
}
hist["test, src"] = [n for n, c in enumerate(te["src"]["length_hist"]) for _ in range(c)]
fig = plots.length_histogram(hist, max_len=S["settings"]["max_len"], title=f"profile: {profile}")
glue("data_len_fig", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} data_len_fig
# :name: fig-data-lengths
#
# Sentence lengths in words (EOS not counted) of the training pairs kept and of the test
# sources, for this build's profile, each as a share of its own sentences (their numbers in the
# legend). The dotted line is the length limit.
# ```
#
# ## Summary
#
# - Translation is $\arg\max_{\mathbf y} p(\mathbf y\mid\mathbf x)$, {eq}`prob-argmax`; a neural
#   model of $p$ is fitted by maximum likelihood on a parallel corpus, {eq}`prob-mle`.
# - Text is Moses-tokenized, cased, with EOS appended; each language keeps a shortlist of its most
#   frequent words and maps the rest to `<unk>`.
# - The data summary above is produced by `nmt_lib.data` for the profile of this build, and read
#   from `results/`; the paper's own corpus is not available offline (see {doc}`../deviations`).
#
# ## Exercises
#
# 1. Why does the training objective {eq}`prob-mle` not need the $\arg\max$ of {eq}`prob-argmax`,
#    and why is that a relief?
# 2. A shortlist of $K_y$ words covers a fraction $\mathrm{cov}(K_y)$ of the running words. Why is
#    $\mathrm{cov}$ concave, and what does that mean for the value of doubling the shortlist?
# 3. The paper drops, rather than truncates, training pairs longer than the limit. What would go
#    wrong if long pairs were truncated to their first 30 words on each side?
#
# :::{admonition} Solutions
# :class: dropdown
#
# 1. {eq}`prob-mle` scores the *reference* translation, which is given: one forward pass per pair.
#    The search over all sentences is only needed at test time.
# 2. Words are added in order of decreasing frequency, so each new word adds no more coverage than
#    the one before; doubling the list adds the rarest half, which covers little (Zipf's law).
# 3. The truncated target would no longer be a translation of the truncated source: word order
#    differs between the languages, so the last target words would refer to source words that were
#    cut, and the model would be trained to hallucinate or to stop early.
# :::
