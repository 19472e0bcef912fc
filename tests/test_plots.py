"""The figure functions draw what they are given and write real PNGs."""

import matplotlib.pyplot as plt
import numpy as np
import pytest

from nmt_experiments.core import plots


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_fig2_line_styles_and_axes(tmp_path):
    curves = {name: ([5, 15, 25], [10.0, 20.0, 15.0]) for name in plots.FIG2_STYLES}
    fig = plots.fig2_bleu_by_length(curves)
    ax = fig.axes[0]
    styles = {line.get_label(): line.get_linestyle() for line in ax.get_lines()}
    assert styles == plots.FIG2_STYLES
    assert ax.get_xlim() == (0, 60) and ax.get_ylim() == (0, 30)
    assert ax.get_xlabel() == "Sentence length" and ax.get_ylabel() == "BLEU score"
    plots.save(fig, tmp_path / "f2.png")
    assert (tmp_path / "f2.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    high = plots.fig2_bleu_by_length({"RNNsearch-50": ([5, 15], [10.0, 40.0])})
    assert high.axes[0].get_ylim() == (0, 42)
    low = plots.fig2_bleu_by_length({"RNNsearch-50": ([5, 15], [0.5, 2.0])})
    assert low.axes[0].get_ylim() == (0, 2.5)  # briefly trained: the axis fits the scores
    empty_first = plots.fig2_bleu_by_length({"RNNsearch-50": ([1, 5, 15], [np.nan, 10.0, 40.0])})
    assert empty_first.axes[0].get_ylim() == (0, 42)  # a bucket without sentences (NaN) is skipped
    more = plots.fig2_bleu_by_length(
        {"RNNsearch-50": ([5], [10.0]), "Luong-dot-50": ([5], [12.0])},
        styles={"Luong-dot-50": {"ls": "--", "color": "C1"}},
    )
    lines = {line.get_label(): line for line in more.axes[0].get_lines()}
    assert lines["RNNsearch-50"].get_color() == "k" and lines["Luong-dot-50"].get_color() == "C1"
    assert lines["Luong-dot-50"].get_linestyle() == "--"


def test_fig3_grayscale_zero_black_one_white():
    alpha = np.array([[1.0, 0.0, 0.0], [0.0, 0.5, 0.5]])
    fig = plots.fig3_alignments(
        [{"src": ["a", "b", "<end>"], "trg": ["x", "<end>"], "alpha": alpha, "title": "(a)"}] * 3
    )
    im = fig.axes[0].get_images()[0]
    assert im.get_cmap().name == "gray" and im.get_clim() == (0.0, 1.0)
    rgba = im.to_rgba(np.array([0.0, 1.0]))
    np.testing.assert_allclose(rgba[:, :3], [[0, 0, 0], [1, 1, 1]])
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["a", "b", "<end>"]
    assert len(fig.axes) == 4 and not fig.axes[3].axison  # 3 panels on a 2x2 grid


def test_length_histogram_counts():
    fig = plots.length_histogram({"en": [1, 2, 2, 3], "fr": [2, 2]}, max_len=3)
    patches = fig.axes[0].patches
    assert len(patches) == 2
    assert fig.axes[0].get_legend() is not None
    # each series as a share of its own sentences: a small test set is as tall as a large train set
    tops = [p.get_path().vertices[:, 1].max() for p in patches]
    assert tops == [50.0, 100.0]


def test_nll_by_time_and_updates_draws_both_axes():
    recs = [
        {"minutes": 1.0, "update": 250, "dev_nll": 9.0},
        {"minutes": 2.0, "update": 500, "dev_nll": 8.0},
    ]
    fig = plots.nll_by_time_and_updates({"A": recs, "B": recs}, {"B": {"ls": "--"}})
    left, right = fig.axes
    assert list(left.get_lines()[0].get_xdata()) == [1.0, 2.0]
    assert list(right.get_lines()[1].get_xdata()) == [250, 500]
    assert right.get_lines()[1].get_linestyle() == "--"


def _figures():
    """Each figure function on data of the sizes the book gives it (the comparison's nine
    models, Figure 3's 50-word sentences on two columns)."""
    names = [f"model-{k}" for k in range(9)]
    recs = [
        {"minutes": m, "update": 100 * m, "dev_nll": 60.0 - m, "dev_bleu": m / 2} for m in range(9)
    ]
    panel = {
        "src": [f"source-{j}" for j in range(50)],
        "trg": [f"target-{i}" for i in range(50)],
        "alpha": np.full((50, 50), 0.02),
        "title": "(a) a long title for the panel",
    }
    curves = {n: ([5, 15, 25, 35, 45, 55], [10.0, 20.0, 15.0, 12, 11, 10]) for n in names}
    return {
        "fig2": plots.fig2_bleu_by_length(curves, paper={"RNNsearch-50": 26.75}),
        "fig2 (paper's four)": plots.fig2_bleu_by_length(
            {n: curves["model-0"] for n in plots.FIG2_STYLES}, paper={"RNNsearch-50": 26.75}
        ),
        "fig3": plots.fig3_alignments([panel] * 4, ncols=2, cell=0.25),
        "histogram": plots.length_histogram({"en": [3, 5, 50], "fr": [4, 6, 48]}, max_len=50),
        "budget": plots.budget_curves({n: recs for n in names}),
        "nll": plots.nll_by_time_and_updates({n: recs for n in names}),
    }


def test_figures_fit_the_column_with_readable_text():
    """As the book shows them (100 dpi, cut to their tight bounding box): no wider than the text
    column, so never shrunk, and no text below MIN_FONT_PT (9.7 px)."""
    for name, fig in _figures().items():
        fig.canvas.draw()
        width = fig.get_tightbbox().width  # inches, as `bbox_inches="tight"` crops
        assert width <= plots.COLUMN_WIDTH + 0.05, f"{name}: {width:.2f} in wide"
        texts = [t for t in fig.findobj(plt.Text) if t.get_visible() and t.get_text().strip()]
        small = {
            t.get_text(): t.get_fontsize() for t in texts if t.get_fontsize() < plots.MIN_FONT_PT
        }
        assert not small, f"{name}: text below {plots.MIN_FONT_PT} pt: {small}"
