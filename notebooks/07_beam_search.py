# %% [markdown]
# # Beam search
#
# **What you will derive.** How a trained model is used to translate: an approximate search for
# $\arg\max_{\mathbf y} p(\mathbf y \mid \mathbf x)$ ({eq}`prob-argmax` of {doc}`01_problem`).
# You will see why the exact search is out of reach, what greedy decoding gets wrong, and the
# beam search of the authors' code with its length rules, and check on a toy model with a known
# answer that `nmt_lib.search` finds it.
#
# **What you need.** The model's next-word distribution $p(y_i \mid y_{<i}, \mathbf x)$ and the
# state update ({doc}`05_decoder`). Notation: {doc}`../notation`.
#
# ## The paper's claim
#
# Section 4.2: "Once a model is trained, we use a beam search to find a translation that
# approximately maximizes the conditional probability". That is all the paper says: no beam
# width, no length normalisation. Where it is silent this page follows the authors' GroundHog
# `sample.py`: unnormalised costs by default, and a beam width that the command line gives (it has
# no default; GroundHog's test and demo scripts pass 10, as our profiles do). The reduced profiles choose how to rank
# finished hypotheses on dev data instead ({doc}`15_budget`, "Search settings"): the `lite`
# profile, and the comparison of {doc}`13_compare` that shares its recipe, rank them
# {glue:text}`beam_lite_rule`. Both are rows of {doc}`../deviations`.

# %% tags=["parameters"]
profile = "lite"
train = False
results_dir = None
data_dir = None

# %% tags=["remove-cell"]
from nmt_experiments.core.results import check_parameters

check_parameters(profile, train, results_dir, data_dir)

# %%
import itertools
import math

import matplotlib.pyplot as plt
import torch
from myst_nb import glue
from torch.testing import assert_close

from nmt_lib import search
from nmt_lib.config import ModelConfig, SearchConfig, load_profile
from nmt_lib.data import pad
from nmt_lib.data.vocab import EOS
from nmt_lib.paper.model import Encoded, build_model
from nmt_lib.paper.steps import Steps

_ = torch.manual_seed(0)
torch.set_num_threads(1)  # tiny tensors: one thread is fastest
lite_normalize = load_profile("lite").runs["RNNsearch-50"].search.normalize
glue(
    "beam_lite_rule",
    "by their cost per word (`search.normalize`)"
    if lite_normalize
    else "by their total cost, as GroundHog does",
    display=False,
)

# %% [markdown]
# ## The equations
#
# By the chain rule ({eq}`encdec-chain`), the log-probability of a hypothesis is a sum over its
# words, so its *cost* can be accumulated word by word:
#
# $$
# \operatorname{cost}(y_1 \dots y_k) = -\sum_{i=1}^{k} \log p(y_i \mid y_{<i}, \mathbf x)
#   = \operatorname{cost}(y_1 \dots y_{k-1}) - \log p(y_k \mid y_{<k}, \mathbf x).
# $$ (beam-cost)
#
# The exact $\arg\min$ of the cost ranges over $K_y^{T}$ sentences of length $T$: with
# $K_y = 30{,}000$ that is hopeless. **Greedy** decoding takes the cheapest word at every step; it
# can be wrong, because a cheap first word may only allow expensive continuations. **Beam search**
# keeps the $b$ cheapest partial hypotheses $\mathcal B_{k-1}$ and extends all of them by every
# word:
#
# $$
# \mathcal B_k = \operatorname*{top}_{b_k}\Big\{ (h, w) : h \in \mathcal B_{k-1},\ w \in \{1..K_y\} \Big\}
#   \text{ by } \operatorname{cost}(h) - \log p(w \mid h, \mathbf x),
# $$ (beam-step)
#
# where, in GroundHog, a kept hypothesis that ends in EOS is *finished* and leaves the beam, so the
# width shrinks: $b_k = b - (\text{number finished so far})$. The search stops when nothing is
# live, and returns the finished hypothesis of lowest cost. GroundHog adds two length rules, with
# $|\mathbf x|$ the source length counting EOS: EOS is forbidden for the first
# $\lfloor |\mathbf x|/2 \rfloor$ steps, and the search stops after $3|\mathbf x|$ steps. With
# `normalize`, hypotheses are compared by cost per word instead:
#
# $$
# \hat{\mathbf y} = \arg\min_{\mathbf y \text{ finished}} \operatorname{cost}(\mathbf y)
#  \quad\text{or}\quad \arg\min_{\mathbf y \text{ finished}} \operatorname{cost}(\mathbf y)/|\mathbf y| .
# $$ (beam-final)
#
# ## The library function
#
# `nmt_lib.search.beam_search` runs {eq}`beam-step` for a whole batch of sentences at once (rows
# `sentence × beam` of one tensor, against each sentence's encoding once) and uses the model only
# through `encode` and its step, `model.steps()`: `start` ($s_0$), `readout` (the next-word
# distribution of every row), `best_words` (the $k$ best words of every row) and `advance` (the
# state after the chosen word). The live hypotheses are a `search.Beam` (their costs, words and
# parents, `select`ed as sentences end) and the best finished one of each sentence a
# `search.Finished` (`record`). On the paper modules the step is `readout_step` and `next_state`
# of {doc}`05_decoder`:
#
# ```{literalinclude} ../../nmt_lib/paper/steps.py
# :pyobject: Steps
# ```
#
# The fast backend computes the same step faster ({doc}`14_fast`). The length rules:
#
# ```{literalinclude} ../../nmt_lib/search.py
# :pyobject: length_limits
# ```
#
# The settings, with GroundHog's values as defaults:
#
# ```{literalinclude} ../../nmt_lib/config/run.py
# :pyobject: SearchConfig
# ```
#
# ## The numeric checks
#
# **A model with a known answer.** The toy model below ignores the source and is a first-order
# Markov chain over the words `a b c d e`: its state is the last word. Greedy decoding picks `a`
# (probability 0.6) and is then stuck with weak continuations; the best sentence starts with the
# less likely `b`. We enumerate every sentence to find the true $\arg\max$.

# %%
WORDS = ["<pad>", "<unk>", "</s>", "a", "b", "c", "d", "e"]
P = torch.full((len(WORDS), len(WORDS)), 1e-9)  # P[prev, next]; row 0 = the start
P[0, 3], P[0, 4] = 0.6, 0.4  # start: a 0.6, b 0.4
P[3, 5], P[3, 6], P[3, 7] = 0.34, 0.33, 0.33  # after a: c, d, e
P[4, 5], P[4, 2] = 0.9, 0.1  # after b: c 0.9, EOS 0.1
P[5, 2] = P[6, 2] = P[7, 2] = 1.0  # then EOS
logP = (P / P.sum(1, keepdim=True)).log()


class MarkovToy:
    """The model interface of CONTRIBUTING.md; the state s is the last word (0 at the start)."""

    def steps(self):
        return Steps(self)  # the search's step through init_state, readout_step, next_state

    def __init__(self, logP):
        self.logP = logP  # [prev word, next word]

    def encode(self, x, x_mask):
        return Encoded(x_mask)

    def init_state(self, enc):
        return torch.zeros(enc.mask.shape[0], dtype=torch.long)

    def readout_step(self, enc, s_prev, y_prev):
        return self.logP[s_prev], torch.zeros(len(s_prev), 1), None

    def next_state(self, s_prev, y, c):
        return y


def toy_logp(words):
    prev, total = 0, 0.0
    for w in words:
        total += logP[prev, w].item()
        prev = w
    return total


x = torch.tensor([[3, 2]])  # a one-word source: |x| = 2, so EOS is allowed from step 1
x_mask = torch.ones_like(x, dtype=torch.bool)
sentences = [list(s) + [EOS] for T in range(1, 6) for s in itertools.product(range(3, 8), repeat=T)]
exact = max(sentences, key=toy_logp)
greedy = search.greedy_search(MarkovToy(logP), x, x_mask)[0]
beam2 = search.beam_search(MarkovToy(logP), x, x_mask, beam=2)[0]
assert beam2.tokens == exact and greedy.tokens != exact
assert math.isclose(beam2.cost, -toy_logp(exact), rel_tol=1e-6)
glue("beam_toy_greedy", " ".join(WORDS[w] for w in greedy.tokens), display=False)
glue("beam_toy_beam", " ".join(WORDS[w] for w in beam2.tokens), display=False)
glue("beam_toy_p_greedy", math.exp(-greedy.cost), display=False)
glue("beam_toy_p_beam", math.exp(-beam2.cost), display=False)
{"greedy": greedy.tokens, "beam 2": beam2.tokens, "exact argmax": exact}

# %% [markdown]
# Greedy decoding returns *{glue:text}`beam_toy_greedy`* with probability
# {glue:text}`beam_toy_p_greedy:.3f`; a beam of two returns *{glue:text}`beam_toy_beam`* with
# probability {glue:text}`beam_toy_p_beam:.3f`, the true $\arg\max$ found by enumerating all
# sentences, and its cost is exactly $-\log p$ of {eq}`beam-cost`.
#
# **Invariants on a real model.** On a small random RNNsearch: a beam of one *is* greedy search;
# the cost the search reports is the model's own $-\log p(\hat{\mathbf y}\mid\mathbf x)$ under
# teacher forcing; and the length rules hold.

# %%
cfg = ModelConfig(src_vocab=20, trg_vocab=20, m=8, n=8, n_align=8, l=4, output_rank=None)
model = build_model(cfg)
for p in model.parameters():
    torch.nn.init.normal_(p, std=1.0)  # peaky distributions, so search matters
model.eval()
xs = [torch.randint(3, 20, (int(T),)).tolist() + [EOS] for T in torch.randint(2, 9, (24,))]
xb, mb = pad(xs)
g = search.greedy_search(model, xb, mb)
b1 = search.beam_search(model, xb, mb, beam=1)
assert [h.tokens for h in g] == [h.tokens for h in b1]  # beam 1 == greedy
rules = SearchConfig()
b10 = search.beam_search(model, xb, mb, beam=10)
for src, h in zip(xs, b10, strict=True):
    yb, ymb = pad([h.tokens])
    score = model.score(torch.tensor([src]), torch.ones(1, len(src), dtype=torch.bool), yb, ymb)
    assert_close(h.cost, -score.item(), rtol=1e-4, atol=1e-4)  # cost = -log p(y|x)
    assert len(h.words()) >= math.floor(len(src) * rules.min_len_ratio)  # no early EOS
    assert len(h.tokens) <= len(src) * rules.max_len_ratio
print("beam 1 == greedy; cost == -log p(y|x); GroundHog's length rules hold")

# %% [markdown]
# ## An illustration: how often is the search exact?
#
# Random Markov-chain "models" like the toy above, over five words and EOS, with sparse random
# transition probabilities. For each, we enumerate all sentences of up to five words to find the
# true $\arg\max$, and count how often beam search of each width returns it.

# %%
sentences = [list(s) + [EOS] for T in range(1, 6) for s in itertools.product(range(3, 8), repeat=T)]
S = torch.zeros(len(sentences), 6, dtype=torch.long)  # padded word ids
for k, s in enumerate(sentences):
    S[k, : len(s)] = torch.tensor(s)
prev = torch.cat([torch.zeros(len(S), 1, dtype=torch.long), S[:, :-1]], 1)  # 0 = the start
widths, n_models = [1, 2, 3, 4, 5, 10], 100
exact_found = dict.fromkeys(widths, 0)
for _ in range(n_models):
    P = torch.full((8, 8), 1e-12)
    P[:, 2:] = torch.distributions.Dirichlet(torch.full((6,), 0.5)).sample((8,))
    logP = (P / P.sum(1, keepdim=True)).log()
    best = torch.where(S > 0, logP[prev, S], 0.0).sum(1).max().item()  # log p of the argmax
    for w in widths:
        h = search.beam_search(MarkovToy(logP), x, x_mask, beam=w)[0]
        exact_found[w] += abs(h.cost + best) < 1e-5
share = [exact_found[w] / n_models for w in widths]
fig, ax = plt.subplots(figsize=(5.5, 3.2))
ax.plot(widths, share, "ko-")
ax.set(
    xlabel="beam width", ylabel="share of models where\nthe exact argmax is found", ylim=(0, 1.05)
)
fig.tight_layout()
glue("beam_width_fig", fig, display=False)
glue("beam_exact_greedy", 100 * share[0], display=False)
glue("beam_exact_10", 100 * share[widths.index(10)], display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} beam_width_fig
# :name: fig-beam-width
#
# How often beam search returns the true most probable sentence, against the beam width, over
# random Markov-chain toy models (greedy is width 1).
# ```
#
# Greedy decoding finds the most probable sentence for {glue:text}`beam_exact_greedy:.0f`% of
# these toy models, a beam of 10 for {glue:text}`beam_exact_10:.0f`%. Real translation models
# have 30,000 words per step and sentences of 30 words, so the search is never exact; whether
# more probable means *better* translations is a question for the experiments
# ({doc}`08_experiments`).
#
# ## Summary
#
# - Costs add up word by word, {eq}`beam-cost`, so the search can extend hypotheses one word at a
#   time; beam search keeps the $b$ cheapest, {eq}`beam-step`.
# - GroundHog's beam shrinks as hypotheses finish, forbids EOS before $\lfloor|\mathbf x|/2\rfloor$
#   steps, stops at $3|\mathbf x|$, and by default compares unnormalised costs, {eq}`beam-final`.
# - `nmt_lib.search` finds the exact $\arg\max$ where greedy fails, reduces to greedy with a beam
#   of one, and reports costs that equal the model's $-\log p$ (checked above and in
#   `tests/test_search.py`).
#
# ## Exercises
#
# 1. Show that the unnormalised cost {eq}`beam-cost` can only grow as a hypothesis gets longer.
#    What bias does that give the search, and how do GroundHog's length rules counter it?
# 2. Construct a small example (a `MarkovToy`) in which beam 2 returns a *less* probable sentence
#    than greedy decoding, beam 1. (Hint: a wider beam keeps more hypotheses at every step, and
#    they can crowd out the one greedy follows.)
# 3. How many calls to `readout_step` does beam search with width $b$ make for a batch of $B$
#    sentences of output length $T$, compared with one sentence at a time?
#
# :::{admonition} Solutions
# :class: dropdown
#
# 1. Each term $-\log p \ge 0$. The search prefers short hypotheses (EOS early). The minimum
#    length $\lfloor|\mathbf x|/2\rfloor$ forbids very short outputs; `normalize` divides by length.
# 2. Make the second-best first word have two good continuations that both beat the best
#    continuation of greedy's first word, and then lead nowhere. Start: `a` 0.55, `b` 0.45; after
#    `a`: `d` 0.4, `c` 0.3, `e` 0.3; after `b`: `c` 0.5, `e` 0.5; after `c` and after `e`: `d` 0.8,
#    EOS 0.2; after `d`: EOS. Greedy follows `a d` (0.22) and ends *{glue:text}`beam_ex2_greedy`*
#    with probability {glue:text}`beam_ex2_p_greedy:.3f`. Beam 2 keeps `b c` and `b e` (0.225
#    each) at the second step, which push `a d` (0.22) out of the beam, and its best sentence is
#    *{glue:text}`beam_ex2_beam2`*, probability {glue:text}`beam_ex2_p_beam2:.3f`. Beam 3 keeps
#    `a d` and finds greedy's sentence again. The cell below checks it.
# 3. $T$ calls, each on $B\cdot b$ rows at once (the first on $B$: one empty hypothesis per
#    sentence), instead of $B\cdot T$ calls on $b$ rows.
# :::

# %% tags=["hide-input"]
# Exercise 2: beam 2 is worse than greedy on this chain (the solution's numbers)
P = torch.full((len(WORDS), len(WORDS)), 1e-9)
P[0, 3], P[0, 4] = 0.55, 0.45  # start: a, b
P[3, 6], P[3, 5], P[3, 7] = 0.4, 0.3, 0.3  # after a: d, c, e
P[4, 5], P[4, 7] = 0.5, 0.5  # after b: c, e
P[5, 6], P[5, 2] = P[7, 6], P[7, 2] = 0.8, 0.2  # after c and after e: d, EOS
P[6, 2] = 1.0  # after d: EOS
toy = MarkovToy((P / P.sum(1, keepdim=True)).log())
greedy = search.greedy_search(toy, x, x_mask)[0]
beam2, beam3 = (search.beam_search(toy, x, x_mask, beam=b)[0] for b in (2, 3))
assert beam2.cost > greedy.cost + 0.1  # beam 2 finds a less probable sentence than greedy
assert beam3.tokens == greedy.tokens  # a wider beam finds greedy's again
for name, h in (("greedy", greedy), ("beam2", beam2)):
    glue(f"beam_ex2_{name}", " ".join(WORDS[w] for w in h.tokens), display=False)
    glue(f"beam_ex2_p_{name}", math.exp(-h.cost), display=False)
print(f"greedy: p = {math.exp(-greedy.cost):.3f}; beam 2: p = {math.exp(-beam2.cost):.3f}")
