# %% [markdown]
# # Before the paper: sequence to sequence with LSTMs
#
# **What you will derive.** The other encoder–decoder of the paper's time. The paper's own baseline
# is Cho et al.'s RNNencdec (2014a; {doc}`03_encdec`): one GRU reads the source into a vector
# $c$ that every decoder step sees. Sutskever, Vinyals & Le (2014), at the same time, read the
# source with a stacked LSTM and start a second LSTM, the decoder, from its final state. Both make
# one fixed-size vector carry the whole source, the bottleneck the paper removes; the paper cites
# both and compares with RNNencdec only. You will derive the LSTM, the
# encoder–decoder, why *reversing the source* helped it, and the "peeky" variant that shows the
# summary to every decoder step, as the paper's RNNencdec does (in a model that differs from
# RNNencdec in much else); and check that
# `nmt_lib.models.seq2seq` and `nmt_lib.models.peeky` compute exactly these equations.
#
# **What you need.** The encoder–decoder, its chain rule and the paper's RNNencdec
# ({doc}`03_encdec`). Notation: {doc}`../notation`.
#
# ## The paper's claim
#
# Section 1: "A potential issue with this encoder–decoder approach is that a neural network needs
# to be able to compress all the necessary information of a source sentence into a fixed-length
# vector. This may make it difficult for the neural network to cope with long sentences." The
# encoder–decoders of the time were Cho et al.'s (RNNencdec) and Sutskever et al.'s, who reported
# that reading the source backwards made their LSTM "much better" and explained it by the short
# distances it creates between the first source words and the first target words.

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
from IPython.display import Markdown
from myst_nb import glue
from torch.testing import assert_close

from nmt_experiments.comparison.recipes import SEEDS, run_name
from nmt_experiments.core.markdown import markdown_table
from nmt_lib.config import PROFILE_DIR, load_profile, model_config
from nmt_lib.models import build_model
from nmt_lib.models.seq2seq import reverse_words
from nmt_lib.paper.model import count_parameters

torch.manual_seed(0)
torch.set_num_threads(1)  # tiny tensors: one thread is fastest
torch.set_default_dtype(torch.float64)

# %% tags=["hide-input"]
from nmt_experiments.pages import diagrams_others

fig = diagrams_others.seq2seq()  # nmt_experiments/pages/diagrams_others.py draws it
glue("diagram_seq2seq", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} diagram_seq2seq
# :name: fig-diagram_seq2seq
#
# Sutskever et al.'s encoder–decoder: stacked LSTMs read the source reversed, then the decoder
# LSTMs start from the encoder's last states and read the previous word; nothing attends.
# ```
#
# ## The equations
#
# **The LSTM** (Hochreiter & Schmidhuber 1997, with the forget gate of Gers et al. 2000) keeps a
# memory cell $\mu_t$ besides its output $h_t$. From the input $x_t$ and the previous $h_{t-1}$
# (a generic recurrent network's input and state, as in {doc}`02_gru`), four affine maps give an
# input gate $\iota_t$, a forget gate $\varphi_t$, a candidate $\tilde \mu_t$ and an output gate
# $\omega_t$ (Greek letters, so that $i$, $f$, $g$, $o$ and $c$ keep the meanings they have in
# the rest of the book: {doc}`../notation`):
#
# $$
# \begin{aligned}
# \iota_t &= \sigma(W_\iota x_t + U_\iota h_{t-1} + b_\iota), &
# \varphi_t &= \sigma(W_\varphi x_t + U_\varphi h_{t-1} + b_\varphi), \\
# \tilde \mu_t &= \tanh(W_\mu x_t + U_\mu h_{t-1} + b_\mu), &
# \omega_t &= \sigma(W_\omega x_t + U_\omega h_{t-1} + b_\omega), \\
# \mu_t &= \varphi_t \circ \mu_{t-1} + \iota_t \circ \tilde \mu_t, &
# h_t &= \omega_t \circ \tanh(\mu_t).
# \end{aligned}
# $$ (seq-lstm)
#
# The cell is updated additively, as the GRU's state is ({doc}`02_gru`): gradients flow through
# $\mu_t$ multiplied by the forget gate only. Layers are stacked: layer $k$ reads layer $k-1$'s
# $h_t$.
#
# **The encoder–decoder.** The encoder LSTM reads the embedded source $\bar E x_1, \dots, \bar E
# x_{T_x}$ (EOS last); its final $(h, \mu)$ of every layer is the decoder's initial state
# $(s_0, \mu_0)$. The decoder's outputs are its states $s_i$; it reads the previous target word and
# predicts the next from its top layer:
#
# $$
# (s_i, \mu_i) = \mathrm{LSTM}\big(E y_{i-1}, (s_{i-1}, \mu_{i-1})\big), \qquad
# p(y_i \mid y_{<i}, \mathbf x) = \operatorname{softmax}(W_y s_i + b_y),
# $$ (seq-out)
#
# with $E y_0 = 0$: the paper's models have no previous word at the first step either, and the
# encoder has just read EOS, which plays the role of Sutskever et al.'s start symbol. Everything
# the decoder knows about the source is in $(s_0, \mu_0)$: the fixed-length vector.
#
# **Reversal.** Sutskever et al. feed the source backwards: $x_{T_x - 1}, \dots, x_1$, then EOS
# (we keep EOS last, so that the final state follows it as before):
#
# $$
# (x_1, \dots, x_{T_x - 1}, \mathrm{EOS}) \mapsto (x_{T_x - 1}, \dots, x_1, \mathrm{EOS}).
# $$ (seq-rev)
#
# Nothing in the model changes, only the order. Their explanation: for a language pair with
# roughly monotone word order, source word $j$ is read $T_x - j$ steps before the decoder starts
# and target word $j$ is written $j$ steps after, a lag of about $T_x$ for *every* pair; reversed,
# the lag is about $2j$: short for the first words, so that gradients between them pass few steps
# and the decoder gets "started" well. The average lag is unchanged.
#
# **Peeky.** Cho et al. (2014a) let the summary $c$ (here the encoder's top-layer $h_{T_x}$, after
# EOS) enter every decoder step and the output layer:
#
# $$
# (s_i, \mu_i) = \mathrm{LSTM}\big([E y_{i-1}; c], (s_{i-1}, \mu_{i-1})\big), \qquad
# p(y_i \mid y_{<i}, \mathbf x) = \operatorname{softmax}(W_y [s_i; c] + b_y).
# $$ (seq-peeky)
#
# The paper's RNNencdec feeds its $c$ the same way — into every gate of the decoder ($C$,
# $C_z$, $C_r$) and into the output layer ($C_o$) — so the source is still one vector, but the
# decoder need not carry it in its state across the whole translation. In everything else the two
# differ, and not only in the cell. `nmt_lib.models.peeky.Peeky`, as the book's comparison trains it,
# beside the `lite` profile's RNNencdec-50:

# %%
compare = load_profile(PROFILE_DIR / "studies" / "compare.toml")
peeky_cfg = compare.runs[run_name("Peeky-50", SEEDS[0])].model
encdec_cfg = load_profile("lite").runs["RNNencdec-50"].model
with torch.device("meta"):  # counted without allocating
    n_peeky = count_parameters(build_model(peeky_cfg))
    n_encdec = count_parameters(build_model(encdec_cfg))
glue("seq_peeky_params_m", n_peeky / 1e6, display=False)
glue("seq_encdec_params_m", n_encdec / 1e6, display=False)
differences = [
    ("cell", "LSTM", "GRU"),
    ("layers (encoder, decoder)", f"{peeky_cfg.layers}, {peeky_cfg.layers}", "1, 1"),
    ("parameters", f"{n_peeky / 1e6:.2f} M", f"{n_encdec / 1e6:.2f} M"),
    ("$c$", "top layer's $h_{T_x}$", r"$\overrightarrow h_{T_x}$"),
    (
        "initial state",
        r"the encoder's final $(h, \mu)$, every layer",
        r"$s_0 = \tanh(W_s c + b_s)$",
    ),
    (
        "output layer",
        "one affine map of $[s_i; c]$ and a softmax",
        "deep output: maxout of $U_o s_{i-1} + V_o \\bar e(y_{i-1}) + C_o c$, then a softmax",
    ),
    (
        "previous word in the output layer",
        "only through the state",
        r"also directly, $V_o \bar e(y_{i-1})$",
    ),
]
rows = [{"": a, "Peeky (comparison)": b, "RNNencdec (`lite`)": c} for a, b, c in differences]
Markdown(markdown_table(rows))

# %% [markdown]
# Both read the same data with the same vocabularies, recipe and budget, and both pass the source
# through one vector that enters every decoder step. A comparison of the two can therefore tell
# whether a fixed-length summary behaves alike in both (how their scores fall with sentence
# length, say). It cannot attribute a difference to the cell: LSTM against GRU comes together with
# twice the depth, {glue:text}`seq_peeky_params_m:.2f` M parameters against
# {glue:text}`seq_encdec_params_m:.2f` M, another output layer and another initial state, and one
# run of each cannot separate them.
#
# ## The library functions
#
# `nmt_lib.models.seq2seq.Seq2seq` reads the previous word *before* it predicts, unlike the paper's
# decoder, so its decoding step is one function: `step` reads $y_{i-1}$, updates the state (an
# `LSTMState`, `h` and `c` of every layer) and gives the distribution {eq}`seq-out`
# (`nmt_lib.models.steps` drives it for a search). `forward` runs the decoder over the whole
# reference at once.
#
# ```{literalinclude} ../../nmt_lib/models/seq2seq.py
# :pyobject: Seq2seq.step
# ```
#
# The reversal {eq}`seq-rev`, on a padded batch:
#
# ```{literalinclude} ../../nmt_lib/models/seq2seq.py
# :pyobject: reverse_words
# ```
#
# `nmt_lib.models.peeky.Peeky` changes only what the decoder and the output layer read:
#
# ```{literalinclude} ../../nmt_lib/models/peeky.py
# :pyobject: Peeky.decoder_input
# ```
#
# ## The numeric check
#
# The reference below is {eq}`seq-lstm`–{eq}`seq-peeky` written literally, one sentence, one layer
# and one step at a time, reading only the parameter tensors of the `nmt_lib` model (large random
# weights, float64, two layers, a padded batch of three sentences).


# %%
def sig(v):
    return 1 / (1 + torch.exp(-v))


def lstm_step(P, prefix, layers, inp, state):
    """(seq-lstm) for every layer; ``state``: a list of (h, mu), output and cell."""
    new = []
    for k in range(layers):
        W, U = P[f"{prefix}.weight_ih_l{k}"], P[f"{prefix}.weight_hh_l{k}"]
        b = P[f"{prefix}.bias_ih_l{k}"] + P[f"{prefix}.bias_hh_l{k}"]  # PyTorch's two biases
        iota, phi, mu_cand, omega = (W @ inp + U @ state[k][0] + b).chunk(4)  # PyTorch's order
        mu = sig(phi) * state[k][1] + sig(iota) * torch.tanh(mu_cand)
        new.append((sig(omega) * torch.tanh(mu), mu))
        inp = new[-1][0]
    return new


def reference(model, src, trg):
    """log p(y_i | y_<i, x) of one unpadded sentence pair."""
    cfg, P = model.cfg, {k: v.detach() for k, v in model.named_parameters()}
    if cfg.reverse_source:
        src = list(reversed(src[:-1])) + [src[-1]]  # (seq-rev)
    state = [(torch.zeros(cfg.n), torch.zeros(cfg.n))] * cfg.layers
    for w in src:
        state = lstm_step(P, "encoder", cfg.layers, P["E_bar"][w], state)
    summary, e_prev, logp = state[-1][0], torch.zeros(cfg.m), []
    for w in trg:
        peeky = cfg.arch == "Peeky"
        state = lstm_step(
            P, "decoder", cfg.layers, torch.cat([e_prev, summary]) if peeky else e_prev, state
        )
        out = torch.cat([state[-1][0], summary]) if peeky else state[-1][0]
        logits = P["W_y"] @ out + P["b_y"]
        logp.append(logits[w] - torch.logsumexp(logits, 0))
        e_prev = P["E"][w]
    return torch.stack(logp)


lengths_x, lengths_y = [6, 3, 2], [2, 5, 4]
x_mask = torch.tensor([[j < L for j in range(6)] for L in lengths_x])
y_mask = torch.tensor([[i < L for i in range(5)] for L in lengths_y])
x = torch.randint(3, 13, x_mask.shape).masked_fill(~x_mask, 0)
y = torch.randint(3, 11, y_mask.shape).masked_fill(~y_mask, 0)
for arch, reverse in (("Seq2seq", False), ("Seq2seq", True), ("Peeky", False)):
    cfg = model_config(
        arch=arch, src_vocab=13, trg_vocab=11, m=5, n=4, layers=2, reverse_source=reverse
    )
    model = build_model(cfg).double()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.5)
    logp, _ = model(x, x_mask, y, y_mask)
    for b in range(3):
        ref = reference(model, x[b, : lengths_x[b]].tolist(), y[b, : lengths_y[b]].tolist())
        assert_close(logp[b, : lengths_y[b]], ref)
    print(f"{arch}{' (reversed)' if reverse else ''}: nmt_lib == the equations, float64, padded")

# %% [markdown]
# Every log-probability of the padded batch equals the per-sentence reference, with and without
# the reversal, for both wirings (`tests/test_seq2seq.py` holds the same identities, and that
# iterating `step` reproduces `forward`).
#
# ## Why reversal helps, in numbers
#
# For a sentence of $T$ words (then EOS) translated word for word in the same order, the lag
# between reading source word $j$ and writing target word $j$ is $T + 1$ for every pair without
# reversal, and $2j$ with it:

# %%
T = 20
tokens = torch.arange(1, T + 2)[None]  # words 1..T, then EOS (T + 1)
order = reverse_words(tokens, torch.ones_like(tokens, dtype=torch.bool))[0]  # as they are read
read_at = torch.empty(T + 1, dtype=torch.long)
read_at[order - 1] = torch.arange(1, T + 2)  # the encoder step that reads each token
j = torch.arange(1, T + 1)
lag_plain = (T + 1 - j) + j  # the rest of the source after x_j, then j decoder steps
lag_reversed = (T + 1 - read_at[:T]) + j
fig, ax = plt.subplots(figsize=(5.5, 3))
ax.plot(j, lag_plain, "o-", label="source as it is")
ax.plot(j, lag_reversed, "s-", label="source reversed (EOS last)")
ax.set_xlabel("word position j")
ax.set_ylabel("steps from reading $x_j$ to writing $y_j$")
ax.legend()
plt.tight_layout()
glue("seq_lag_first", int(lag_reversed[0]), display=False)
glue("seq_lag_mean_plain", float(lag_plain.float().mean()), display=False)
glue("seq_lag_mean_reversed", float(lag_reversed.float().mean()), display=False)
glue("seq_lag_fig", fig, display=False)
plt.close(fig)  # shown once, where the glue:figure places it

# %% [markdown]
# ```{glue:figure} seq_lag_fig
# :name: fig-seq-lag
#
# Steps between reading a source word and writing its (monotone) translation, for a 20-word
# sentence (EOS read last in both orders; `nmt_lib.models.seq2seq.reverse_words` gives the order).
# ```
#
# Reversed, the first word pair is {glue:text}`seq_lag_first` steps apart instead of
# {glue:text}`seq_lag_mean_plain:.0f`; the mean lag is {glue:text}`seq_lag_mean_reversed:.1f`
# against {glue:text}`seq_lag_mean_plain:.1f`: the same. Reversal does not remove the
# bottleneck; it makes the start of the translation easy to learn. Attention removes the lag
# altogether: every source word is one step from every target word. The book's comparison measures
# what each buys on the same data and budget.
#
# ## Summary
#
# - An LSTM carries a memory cell updated additively, {eq}`seq-lstm`.
# - Sutskever et al.'s encoder–decoder starts the decoder from the encoder's final state and
#   nothing else, {eq}`seq-out`: the fixed-length vector the paper calls a bottleneck.
# - Reversing the source {eq}`seq-rev` shortens the distance between the first words of the two
#   sentences, not the average distance.
# - The "peeky" wiring {eq}`seq-peeky` shows the summary to every step, as the paper's RNNencdec
#   does; the two differ in much else (cell, depth, size, output layer, initial state), so a
#   comparison of them cannot single out the cell.
# - `nmt_lib.models.seq2seq` and `nmt_lib.models.peeky` compute exactly these equations (checked above in
#   float64).
#
# ## Exercises
#
# 1. A decoder state of Sutskever et al.'s model has $2 n$ numbers ($s$ and $\mu$) per layer of
#    $n$ cells. How many floating-point numbers carry the source into their decoder (4 layers of
#    1000), and into the paper's RNNsearch-50 decoder at step $i$, for a 30-word sentence?
# 2. Why does reversal not help when the two languages order their words in reverse of each other?
# 3. The peeky decoder's first layer reads $[E y_{i-1}; c]$: which of its parameters multiply $c$,
#    and what do they correspond to in the paper's RNNencdec?
#
# :::{admonition} Solutions
# :class: dropdown
#
# 1. $2 \cdot 4 \cdot 1000 = 8000$ numbers, whatever the sentence. RNNsearch's decoder reads the
#    whole annotation matrix at every step: $T_x \cdot 2n = 31 \cdot 2000 = 62{,}000$ numbers (EOS
#    included), through $c_i$.
# 2. Then the *non-reversed* order already puts the first target word next to its source word (the
#    last one read); reversal would make every lag about $T$ again.
# 3. The columns of the layer's `weight_ih_l0` that meet $c$: for the four gates, the counterpart
#    of RNNencdec's $C$, $C_z$, $C_r$, which add $c$ to the GRU's candidate and gates.
# :::
