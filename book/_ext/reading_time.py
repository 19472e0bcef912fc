"""Reading time under every page's title, counted from the page's words at build
(``_config.yml``: ``sphinx.local_extensions``): "About 12 minutes to read (2,437 words at 200 a
minute)".

The words are those of the page's prose as the reader gets it, glued numbers included, after the
notebook has run: the text of every paragraph, list, table, caption and admonition. Code (cells and
literal blocks), cell outputs, math and raw HTML are not counted; they are read at another pace,
or looked at. The pace is the config value ``reading_time_wpm`` (words a minute, default
:data:`WPM`), stated on the page; the minutes are rounded to the nearest whole one, at least 1.
"""

from __future__ import annotations

from docutils import nodes

#: Words a minute: a usual figure for technical prose read with attention.
WPM = 200
#: Nodes whose text is not counted.
SKIP = (
    nodes.literal_block,
    nodes.doctest_block,
    nodes.math,
    nodes.math_block,
    nodes.raw,
    nodes.comment,
    nodes.system_message,
    nodes.title,  # the page's title, and the sections'
)
#: The classes of a notebook cell's output (myst-nb) and of the line this extension adds.
SKIP_CLASSES = {"cell_output", "reading-time"}


def _skipped(node: nodes.Node) -> bool:
    while node is not None:
        if isinstance(node, SKIP):
            return True
        if isinstance(node, nodes.Element) and SKIP_CLASSES & set(node.get("classes", [])):
            return True
        node = node.parent
    return False


def count_words(doctree: nodes.Node) -> int:
    """The words of ``doctree``'s prose (whitespace-separated), as the module docstring says."""
    return sum(
        len(text.astext().split()) for text in doctree.findall(nodes.Text) if not _skipped(text)
    )


def reading_line(words: int, wpm: int = WPM) -> str:
    """``"About N minutes to read (W words at wpm a minute)"``."""
    minutes = max(1, round(words / wpm))
    unit = "minute" if minutes == 1 else "minutes"
    return f"About {minutes} {unit} to read ({words:,} words at {wpm} a minute)"


def add_reading_time(doctree: nodes.Node, wpm: int = WPM) -> nodes.paragraph | None:
    """The reading line as a paragraph right under the page's title (the first section's); None,
    and nothing added, for a page without a titled section."""
    section = next(iter(doctree.findall(nodes.section)), None)
    if section is None or not section.children or not isinstance(section[0], nodes.title):
        return None
    line = nodes.paragraph(classes=["reading-time"])
    line += nodes.emphasis(text=reading_line(count_words(doctree), wpm))
    section.insert(1, line)
    return line


def _on_doctree_resolved(app, doctree, docname) -> None:
    add_reading_time(doctree, app.config.reading_time_wpm)


def setup(app):
    app.add_config_value("reading_time_wpm", WPM, "env", [int])
    app.connect("doctree-resolved", _on_doctree_resolved)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
