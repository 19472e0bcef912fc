"""The pictures of the models: drawn for the book's column, every text legible and inside the
picture."""

import matplotlib.pyplot as plt
import pytest

from nmt_experiments.core import plots
from nmt_experiments.pages import canvas, diagrams, diagrams_others


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


@pytest.mark.parametrize("name", sorted(diagrams.DIAGRAMS))
def test_diagram_fits_the_column_with_legible_text(name, tmp_path):
    fig = diagrams.DIAGRAMS[name]()
    width, _ = fig.get_size_inches()
    assert width <= plots.COLUMN_WIDTH + 1e-9
    fig.canvas.draw()
    box = fig.bbox
    drawn = [t for ax in fig.axes for t in [*ax.texts, ax.title]] + fig.texts  # no axes: no ticks
    texts = [t for t in drawn if t.get_text().strip()]
    assert len(texts) >= 5, "a picture with almost no labels"
    for t in texts:
        assert t.get_fontsize() >= plots.MIN_FONT_PT, (t.get_text(), t.get_fontsize())
        ext = t.get_window_extent()
        inside = ext.x0 >= box.x0 - 1 and ext.x1 <= box.x1 + 1 and ext.y0 >= box.y0 - 1
        assert inside and ext.y1 <= box.y1 + 1, f"{name}: {t.get_text()!r} is cut off"
    plots.save(fig, tmp_path / f"{name}.png")
    assert (tmp_path / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_text_outside_the_picture_is_found():
    """The check above can fail: a label past the right edge."""
    fig = diagrams_others.seq2seq()
    fig.axes[0].text(9.9, 1.0, "a label that runs past the edge", fontsize=canvas.SMALL)
    fig.canvas.draw()
    ext = [t.get_window_extent() for t in fig.axes[0].texts if "past the edge" in t.get_text()]
    assert ext[0].x1 > fig.bbox.x1
