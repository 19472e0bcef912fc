"""book/_ext/reading_time.py: the reading line under a page's title counts the prose's words, not
its code, math, outputs or titles."""

import sys
from pathlib import Path

from docutils import nodes
from docutils.core import publish_doctree

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "book" / "_ext"))
from reading_time import add_reading_time, count_words, reading_line  # noqa: E402

PAGE = """
A title
=======

One two three four five.

.. code-block:: python

   not counted at all

.. math::

   e = m c^2

A list:

- six seven
- eight

Section
-------

Nine ten.
"""


def page(text: str = PAGE) -> nodes.document:
    # as Sphinx reads a page: its title stays the first section's
    return publish_doctree(text, settings_overrides={"report_level": 5, "doctitle_xform": False})


def test_the_words_of_the_prose_are_counted_and_code_math_titles_are_not():
    doc = page()
    assert count_words(doc) == 12  # "One .. five.", "A list:", "six seven", "eight", "Nine ten."
    output = nodes.container(classes=["cell_output"])
    output += nodes.paragraph(text="an output of many words is not read")
    doc[0] += output  # doc[0]: the page's section
    assert count_words(doc) == 12


def test_the_line_goes_under_the_title_with_its_pace():
    doc = page()
    line = add_reading_time(doc, wpm=5)
    section = doc.next_node(nodes.section)
    assert isinstance(section[0], nodes.title) and section[1] is line
    assert line.astext() == "About 2 minutes to read (12 words at 5 a minute)"
    assert section[0].astext() == "A title"
    assert count_words(doc) == 12  # the line does not count itself


def test_minutes_round_and_never_fall_below_one():
    assert reading_line(0) == "About 1 minute to read (0 words at 200 a minute)"
    assert reading_line(2_437) == "About 12 minutes to read (2,437 words at 200 a minute)"
    assert reading_line(2_437, wpm=100).startswith("About 24 minutes")


def test_a_page_without_a_title_gets_no_line():
    doc = page("Just a paragraph.\n")
    assert add_reading_time(doc) is None
    assert "to read" not in doc.astext()
