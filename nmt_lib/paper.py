"""The paper's facts that the code uses: its five models, the sentences of its Figure 3 and of its
Appendix C, and its tables as typed from it into ``results/paper/`` (PAPER.md §5)."""

from __future__ import annotations

import csv

from .config import home

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


def paper_table(name: str) -> dict[str, dict]:
    """``results/paper/<name>.csv`` (typed from the paper: Tables 1 and 2, Figure 3, the corpus)
    as ``{first column: row}``."""
    with open(home() / "results" / "paper" / f"{name}.csv", encoding="utf-8") as f:
        rows = csv.DictReader(f)
        return {row[rows.fieldnames[0]]: row for row in rows}
