"""The paper's constants (nmt_lib.paper) agree with its numbers as typed into results/paper/."""

from nmt_experiments.core.results import paper_table
from nmt_lib.paper import FIG3_SOURCES, MODELS


def test_the_papers_tables_name_its_models_and_figure_3s_sentences():
    assert list(paper_table("table1")) == [*MODELS, "Moses"]
    assert set(paper_table("table2")) == set(MODELS)
    figure3 = paper_table("figure3")
    assert [r["source"] for r in figure3.values()] == [f"{s} <end>" for s in FIG3_SOURCES]
