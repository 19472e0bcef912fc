"""The paper: its model (Figure 1, Appendix A) as its equations in plain PyTorch, one module for
each part (``gru``, ``encoder``, ``attention``, ``decoder``, ``model``, and ``steps``, the decoding
step that a search drives), and the facts of the paper that the code uses: its five models and the
sentences of its Figure 3 and of its Appendix C. Its tables, as typed from it, are
``results/paper/`` (:func:`nmt_experiments.core.results.paper_table`)."""

#: The paper's models in its order (Tables 1 and 2); Figure 2 draws the first four.
MODELS = ("RNNencdec-30", "RNNsearch-30", "RNNencdec-50", "RNNsearch-50", "RNNsearch-50*")

#: Figure 3's sentences, tokenized as the figure shows them: (a) "an arbitrary sentence", (b)-(d)
#: from newstest2014.
FIG3_SOURCES = (
    "The agreement on the European Economic Area was signed in August 1992 .",
    "It should be noted that the marine environment is the least known of environments .",
    "Destruction of the equipment means that Syria can no longer produce new chemical weapons .",
    '" This will change my future with my family , " the man said .',
)

#: Appendix C (Table 3): the beginnings of the paper's three long test sentences.
APPENDIX_C_PREFIXES = (
    "An admitting privilege is the right of a doctor",
    "This kind of experience is part of Disney's efforts",
    "In a press conference on Thursday, Mr Blair stated",
)
