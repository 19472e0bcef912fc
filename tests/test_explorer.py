"""The alignment explorer's HTML (nmt_experiments.pages.explorer); tests/test_book.py runs it in a browser."""

import json
import re

import pytest

from nmt_experiments.pages.explorer import explorer_html

PANEL = {
    "title": "a </script> title",
    "src": ["the", "man", "<end>"],
    "trg": ["l'", "homme", "<end>"],
    "alpha": [[0.7, 0.3, 0.0], [0.1, 0.9, 0.0], [0.0, 0.0, 1.0]],
}


def test_the_data_travel_inline_and_cannot_end_the_script():
    page = explorer_html([PANEL], element_id="x1")
    assert page.count("</script>") == 2  # the data's own "</script>" is escaped
    payload = re.search(r'<script type="application/json">(.*?)</script>', page, re.S).group(1)
    (data,) = json.loads(payload.replace("<\\/", "</"))
    assert data["alpha"] == PANEL["alpha"] and data["src"][-1] == "<end>"
    assert 'id="x1"' in page and 'getElementById("x1")' in page
    assert "http" not in page  # nothing to fetch


def test_malformed_weights_are_refused():
    with pytest.raises(ValueError, match="alpha is not"):
        explorer_html([{**PANEL, "alpha": PANEL["alpha"][:2]}])
    with pytest.raises(ValueError, match="at least one"):
        explorer_html([])


def test_moses_escapes_are_shown_as_text():
    """The data hold Moses tokens (``&apos;``, ``&quot;``); the reader sees the characters, and a
    sentence's name detokenized."""
    panel = {
        **PANEL,
        "title": "test sentence 3: &quot; I won &apos;t go &quot; …",
        "src": ["won", "&apos;t", "<end>"],
        "trg": ["&quot;", "pas", "<end>"],
    }
    payload = re.search(r'<script type="application/json">(.*?)</script>', explorer_html([panel]))
    (data,) = json.loads(payload.group(1).replace("<\\/", "</"))
    assert data["title"] == 'test sentence 3: "I won\'t go" …'
    assert data["src"] == ["won", "'t", "<end>"] and data["trg"] == ['"', "pas", "<end>"]
    assert "&apos;" not in json.dumps(data) and "&quot;" not in json.dumps(data)
