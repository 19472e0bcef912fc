"""Every work the book cites by its authors has an entry in book/references.md."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCES = ROOT / "book" / "references.md"
#: "Sutskever et al.", "Kingma & Ba", "Luong, Pham & Manning", "Luong, Sutskever et al."
CITATION = re.compile(
    r"\b([A-Z][a-zé]+(?:-[A-Z][a-z]+)?)((?:, [A-Z][a-zé]+)*)( et al\.| & ([A-Z][a-zé]+))"
)


def cited_authors(text: str) -> set[str]:
    """The surnames of every author a citation in ``text`` names."""
    names = set()
    for m in CITATION.finditer(text):
        names.add(m.group(1))
        names.update(n for n in m.group(2).split(", ") if n)
        if m.group(4):
            names.add(m.group(4))
    return names


def book_sources() -> list[Path]:
    notebooks = ROOT / "notebooks"
    return (
        sorted(notebooks.glob("[0-9][0-9]_*.py"))
        + sorted(notebooks.glob("lab*.py"))
        + sorted(p for p in (ROOT / "book").glob("*.md") if p != REFERENCES)
    )


def test_every_cited_author_has_a_reference():
    refs = REFERENCES.read_text(encoding="utf-8")
    missing = {}
    for src in book_sources():
        for name in cited_authors(src.read_text(encoding="utf-8")):
            if name not in refs:
                missing.setdefault(name, src.name)
    assert not missing, f"cited but not in book/references.md: {missing}"


def test_the_citations_are_found():
    """The check can fail: the pattern finds each author of the usual forms."""
    found = cited_authors("as Luong, Pham & Manning (2015) and Gers et al. 2000 and Kingma & Ba")
    assert found == {"Luong", "Pham", "Manning", "Gers", "Kingma", "Ba"}
    assert "Nobody" in cited_authors("Nobody et al. (2031)")


def test_the_unknown_word_is_spelled_as_the_code_prints_it():
    """One spelling of the unknown word in the book, the vocabulary's (`<unk>`), never `[UNK]`."""
    from nmt_lib.data.vocab import SPECIALS, UNK

    assert SPECIALS[UNK] == "<unk>"
    pages = [*ROOT.glob("notebooks/*.py"), *ROOT.glob("book/*.md"), ROOT / "README.md"]
    spelled = [p.name for p in pages if "[UNK]" in p.read_text(encoding="utf-8")]
    assert not spelled, spelled
