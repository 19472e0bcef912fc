# %% [markdown]
# # After the paper: global attention
#
# **What you will derive.** The attention of Luong, Pham & Manning (2015), the form most courses
# and toolkits teach as "attention": scored from the decoder's *current* state, with three score
# functions (`dot`, `general`, `concat`), an *attentional hidden state* $\hat s_i$, and *input
# feeding*. You will contrast it with the paper's, equation by equation, show that its `concat`
# score is the paper's alignment model, and check that `nmt_lib.models.luong` computes exactly it.
#
# **What you need.** The paper's alignment model ({doc}`04_alignment`), its decoder
# ({doc}`05_decoder`), the LSTM ({doc}`10_seq2seq`). Notation: {doc}`../notation`.
#
# ## The paper's claim
#
# Bahdanau et al. compute the context from the *previous* decoder state, put it *inside* the
# recurrence (it enters the GRU's gates) and in the deep output. (Later papers and libraries call
# this "Bahdanau attention"; Luong et al. do not, they compare with it as Bahdanau et al.'s model.)
# Luong et al. propose a simpler path: compute the recurrent state first, attend from
# it, and combine the context with it only for the output. Their claim: global attention with a
# simple score is as good, and cheaper; feeding $\hat s_{i-1}$ back into the recurrence
# (input feeding) gives the decoder the information of past alignment decisions that the
# paper's recurrence gets from $c_i$.

# %% tags=["parameters"]
profile = "lite"
train = False
results_dir = None
data_dir = None

# %% tags=["remove-cell"]
from nmt_experiments.core.results import check_parameters

check_parameters(profile, train, results_dir, data_dir)

# %%
import torch
from IPython.display import Markdown
from myst_nb import glue
from torch.nn import functional as F
from torch.testing import assert_close

from nmt_lib.config import model_config
from nmt_lib.models import build_model
from nmt_lib.paper.attention import alignment_scores

torch.manual_seed(0)
torch.set_num_threads(1)  # tiny tensors: one thread is fastest
torch.set_default_dtype(torch.float64)

# %% tags=["hide-input"]
import matplotlib.pyplot as plt

from nmt_experiments.pages import diagrams_others

fig = diagrams_others.luong()  # nmt_experiments/pages/diagrams_others.py draws it
glue("diagram_luong", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} diagram_luong
# :name: fig-diagram_luong
#
# One decoder step of Luong et al.'s global attention: the LSTM state $h_t$ first, the attention
# from it over the source states, the attentional state $\tilde h_t$ that the output layer reads
# ($W_y$, $b_y$ in the book's symbols; Luong et al. write $W_s$, which this book keeps for the
# initial-state matrix), and $\tilde h_t$ fed to the next step (input feeding). Compare the
# paper's order in {numref}`fig-diagram_groundhog`.
# ```
#
# ## The equations
#
# The book writes Luong et al.'s model in its own notation ({doc}`../notation`): their target
# step $t$ is our $i$, their source position $s$ our $j$, their decoder state $h_t$ our $s_i$,
# their source states $\bar h_s$ our $h_j$, their attentional hidden state $\tilde h_t$ our
# $\hat s_i$ and their weights $a_t(s)$ our $\alpha_{ij}$ (the code, `nmt_lib.models.luong`, keeps their
# names). The encoder is an LSTM ({doc}`10_seq2seq`); its top-layer states $h_1, \dots, h_{T_x}$
# are the source states, and its final state starts the decoder. At target step $i$:
#
# $$
# s_i = \mathrm{LSTM}\big([E y_{i-1}; \hat s_{i-1}],\, s_{i-1}\big)
# $$ (luong-state)
#
# (input feeding; without it, the LSTM reads $E y_{i-1}$ alone), then the alignment from $s_i$:
#
# $$
# \operatorname{score}(s_i, h_j) =
# \begin{cases}
# s_i^\top h_j & \text{dot} \\
# s_i^\top W_a h_j & \text{general} \\
# v_a^\top \tanh\big(W_a [s_i; h_j]\big) & \text{concat}
# \end{cases}
# \qquad
# \alpha_{ij} = \frac{\exp \operatorname{score}(s_i, h_j)}{\sum_{k} \exp \operatorname{score}(s_i, h_k)}
# $$ (luong-score)
#
# the context and the attentional hidden state, which alone feeds the output layer:
#
# $$
# c_i = \sum_j \alpha_{ij}\, h_j, \qquad
# \hat s_i = \tanh\big(W_c [c_i; s_i]\big), \qquad
# p(y_i \mid y_{<i}, \mathbf x) = \operatorname{softmax}(W_y \hat s_i + b_y).
# $$ (luong-out)
#
# **Equation by equation against the paper** ({doc}`04_alignment`, {doc}`05_decoder`):

# %%
rows = [
    (
        "the state attention is computed from",
        "$s_{i-1}$, before the recurrent step",
        "$s_i$, after it",
    ),
    (
        "the score",
        "$v_a^\\top \\tanh(W_a s_{i-1} + U_a h_j)$ (additive)",
        "dot, general (bilinear) or concat (additive)",
    ),
    (
        "the context enters the recurrence",
        "yes: $C c_i$ in every gate of $s_i$",
        "no; $\\hat s_{i-1}$ does, with input feeding",
    ),
    (
        "the output layer reads",
        "$s_{i-1}$, $E y_{i-1}$, $c_i$ (deep output, maxout)",
        "$\\hat s_i = \\tanh(W_c [c_i; s_i])$",
    ),
    (
        "the source states",
        "bidirectional GRU annotations $[\\overrightarrow h_j; \\overleftarrow h_j]$",
        "top layer of a (stacked) LSTM, one direction",
    ),
]
table = "| | Bahdanau et al. (the paper) | Luong et al. (global) |\n|---|---|---|\n"
table += "\n".join(f"| {a} | {b} | {c} |" for a, b, c in rows)
glue("luong_contrast", Markdown(table), display=False)

# %% [markdown]
# ```{glue:md} luong_contrast
# :format: myst
# ```
#
# **`concat` is the paper's score.** Split $W_a = [W_a^{(s)}, W_a^{(h)}]$ by columns: then
# $W_a [s_i; h_j] = W_a^{(s)} s_i + W_a^{(h)} h_j$, which is
# {eq}`align-e` with $W_a^{(s)}$ in the place of $W_a$, $W_a^{(h)}$ in the place of $U_a$, and
# $s_i$ in the place of $s_{i-1}$. The difference between the two attentions is *where* the score
# is computed, not *how*. The check below computes the `concat` score with the paper's function.

# %%
n, n_align, Tx = 4, 3, 5
W_a, v_a = torch.randn(n_align, 2 * n), torch.randn(n_align)
s_i, h = torch.randn(1, n), torch.randn(1, Tx, n)  # s_i and the h_j
concat = torch.stack([v_a @ torch.tanh(W_a @ torch.cat([s_i[0], h[0, j]])) for j in range(Tx)])
paper = alignment_scores(s_i, F.linear(h, W_a[:, n:]), W_a[:, :n], v_a)[0]  # (align-e)
assert_close(paper, concat)
print("Luong's concat score == the paper's alignment model, W_a split by columns")

# %% [markdown]
# ## The library functions
#
# One decoder step of `nmt_lib.models.luong.Luong`: {eq}`luong-state`, the alignment from $s_i$, and
# {eq}`luong-out`. Its state is a `LuongState`: the LSTM's `h` and `c`, and $\hat s_i$ (`h_tilde`),
# which input feeding passes to the next step.
#
# ```{literalinclude} ../../nmt_lib/models/luong.py
# :pyobject: Luong.step
# ```
#
# The three scores, with what depends on $h_j$ alone computed once per sentence
# (`LuongEncoded.keys`: $W_a h_j$ for `general`, $W_a^{(h)} h_j$ for `concat`), as the
# paper's $U_a h_j$ is:
#
# ```{literalinclude} ../../nmt_lib/models/luong.py
# :pyobject: Luong.scores
# ```
#
# ## The numeric check
#
# The reference below is {eq}`luong-state`–{eq}`luong-out` written literally, one sentence and one
# step at a time, reading only the model's parameter tensors (large random weights, float64, a
# padded batch of three sentences), for the three scores and without input feeding.


# %%
def sig(v):
    return 1 / (1 + torch.exp(-v))


def lstm_step(P, prefix, inp, h, mu):
    """(seq-lstm): the gates iota, phi, omega and the candidate; h the output, mu the cell."""
    pre = P[f"{prefix}.weight_ih_l0"] @ inp + P[f"{prefix}.weight_hh_l0"] @ h
    iota, phi, mu_cand, omega = (pre + P[f"{prefix}.bias_ih_l0"] + P[f"{prefix}.bias_hh_l0"]).chunk(
        4
    )
    mu = sig(phi) * mu + sig(iota) * torch.tanh(mu_cand)
    return sig(omega) * torch.tanh(mu), mu


def reference(model, src, trg):
    """log p(y_i | y_<i, x) and alpha_i of one unpadded sentence pair (one LSTM layer)."""
    cfg, P = model.cfg, {k: v.detach() for k, v in model.named_parameters()}
    h_j, mu, H = torch.zeros(cfg.n), torch.zeros(cfg.n), []
    for w in src:
        h_j, mu = lstm_step(P, "encoder", P["E_bar"][w], h_j, mu)
        H.append(h_j)  # the source states h_1 .. h_Tx
    s, s_hat, e_prev, logp, align = H[-1], torch.zeros(cfg.n), torch.zeros(cfg.m), [], []
    for w in trg:
        inp = torch.cat([e_prev, s_hat]) if cfg.input_feed else e_prev
        s, mu = lstm_step(P, "decoder", inp, s, mu)  # (luong-state)
        if cfg.score == "dot":
            e = torch.stack([s @ h for h in H])
        elif cfg.score == "general":
            e = torch.stack([s @ P["W_a"] @ h for h in H])
        else:
            e = torch.stack([P["v_a"] @ torch.tanh(P["W_a"] @ torch.cat([s, h])) for h in H])
        alpha = torch.softmax(e, 0)  # (luong-score)
        c = sum(alpha[j] * H[j] for j in range(len(src)))
        s_hat = torch.tanh(P["W_c"] @ torch.cat([c, s]))  # (luong-out)
        logits = P["W_y"] @ s_hat + P["b_y"]
        logp.append(logits[w] - torch.logsumexp(logits, 0))
        align.append(alpha)
        e_prev = P["E"][w]
    return torch.stack(logp), torch.stack(align)


lengths_x, lengths_y = [6, 3, 2], [2, 5, 4]
x_mask = torch.tensor([[j < L for j in range(6)] for L in lengths_x])
y_mask = torch.tensor([[i < L for i in range(5)] for L in lengths_y])
x = torch.randint(3, 13, x_mask.shape).masked_fill(~x_mask, 0)
y = torch.randint(3, 11, y_mask.shape).masked_fill(~y_mask, 0)
for score, feed in (("dot", True), ("general", True), ("concat", True), ("general", False)):
    cfg = model_config(
        arch="Luong", src_vocab=13, trg_vocab=11, m=5, n=4, n_align=3, score=score, input_feed=feed
    )
    model = build_model(cfg).double()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.5)
    logp, align = model(x, x_mask, y, y_mask)
    for b in range(3):
        Lx, Ly = lengths_x[b], lengths_y[b]
        ref_logp, ref_align = reference(model, x[b, :Lx].tolist(), y[b, :Ly].tolist())
        assert_close(logp[b, :Ly], ref_logp)
        assert_close(align[b, :Ly, :Lx], ref_align)
    assert (align[~x_mask[:, None, :].expand_as(align)] == 0).all()  # no weight on padding
    print(f"{score}{'' if feed else ', no input feeding'}: nmt_lib == the equations, float64")

# %% [markdown]
# Every log-probability and alignment weight of the padded batch equals the per-sentence
# reference, for each score, with and without input feeding (`tests/test_luong.py` holds the same
# identities, with two layers and a reversed source too, and that beam search uses the model
# through the same step interface as RNNsearch).
#
# **Why input feeding matters.** Without it, the decoder's recurrence {eq}`luong-state` never reads
# the context: $s_i$ is a function of the encoder's final state, from which the decoder starts, and
# of the target words $y_{<i}$. The source reaches the recurrence through that one vector only, as
# in Sutskever et al.'s model, and which source words were attended to before cannot influence
# where the model looks next, except through the words it chose to emit. The paper's decoder puts
# $c_i$ in every gate of $s_i$, so its recurrence always knows; input feeding gives Luong's decoder
# the same knowledge through $\hat s_{i-1}$.
#
# ## Summary
#
# - Luong et al.'s global attention scores the source states from the *current* decoder state
#   $s_i$, {eq}`luong-score`, and combines the context with $s_i$ only for the output,
#   {eq}`luong-out`.
# - Its `concat` score is the paper's alignment model {eq}`align-e` with $W_a$ split by columns;
#   `dot` and `general` are bilinear, cheaper at a step (no tanh over $T_x \times n'$).
# - Input feeding {eq}`luong-state` puts $\hat s_{i-1}$, and with it the previous alignment, into
#   the recurrence, as the paper's $C c_i$ does.
# - `nmt_lib.models.luong` computes exactly these equations (checked above in float64).
#
# ## Exercises
#
# 1. Count the multiply–adds of one decoder step's scores for a source of $T_x$ words with $n$-unit
#    states, $n'$-unit `concat`: dot, general, concat (with $h_j$'s part precomputed).
# 2. With `dot`, the score is largest for the source state most similar to $s_i$. What must the
#    encoder and decoder learn so that this picks the right word?
# 3. Without input feeding, can Luong's decoder avoid attending twice to the same source word
#    (translating it twice)? What does the paper's decoder have that helps?
#
# :::{admonition} Solutions
# :class: dropdown
#
# 1. dot: $T_x n$. general: $T_x n$ too with $W_a h_j$ precomputed once per sentence (what
#    `Luong.scores` does: $s_i^\top (W_a h_j)$); without it, the cheapest order is
#    $(s_i^\top W_a)\, h_j$: $n^2 + T_x n$ (and $T_x n^2 + T_x n$ if $W_a h_j$ is recomputed for
#    every $j$). concat, with $W_a^{(h)} h_j$ precomputed: $n' n$ multiply–adds for
#    $W_a^{(s)} s_i$ and $T_x n'$ for $v_a^\top$: $n'n + T_x n'$; the $T_x n'$ additions inside the
#    tanh are additions, not multiply–adds (and come with $T_x n'$ tanh evaluations).
# 2. A shared space: the decoder state when it is about to write $y_i$ must point in the direction
#    of the source state of the word $y_i$ translates. Nothing else in `dot` can rotate one into
#    the other; `general`'s $W_a$ can.
# 3. Only through the words it has already written ($E y_{i-1}$ and its state, which otherwise
#    holds the encoder's final state): it has no record of where it attended. The paper's $s_i$
#    reads $c_i$ in every gate, so past alignments shape the state that chooses the next one; so
#    does $\hat s_{i-1}$ with input feeding. (Coverage models,
#    later, made this explicit.)
# :::
#
# **Practise it:** {doc}`lab3_scores`, where you write the `dot` and `general` scores, train them, and read the published model's attention.
