"""The library's docstrings point at the book: every public name says which chapter derives or
uses it, and every section it names exists in that chapter."""
import inspect
import re
from pathlib import Path

import lib

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = {int(p.name[:2]): p for p in (ROOT / "book").glob("[0-9][0-9]_*.md")}


def _labels(path: Path) -> set[str]:
    return set(re.findall(r"^\((sec-[A-Za-z0-9-]+)\)=\s*$", path.read_text(), flags=re.M))


def _public():
    for name in lib.__all__:
        obj = getattr(lib, name)
        if inspect.isfunction(obj) or inspect.isclass(obj):
            yield f"{obj.__module__}.{name}", obj, inspect.getdoc(obj) or ""


def test_every_public_name_names_its_chapter():
    missing = [where for where, _, doc in _public() if not re.search(r"Chapters? \d+", doc)]
    assert missing == [], f"docstrings that name no chapter: {missing}"


def test_every_section_a_docstring_names_is_a_label_of_its_chapter():
    """'Chapter N, section "sec-x"' (or 'sections "sec-x" and "sec-y"'): each label is in Chapter N."""
    wrong = []
    for where, _, doc in _public():
        text = " ".join(doc.split())
        for chapter, labels in re.findall(r"Chapter (\d+),? sections? ((?:\"sec-[A-Za-z0-9-]+\"(?:,? (?:and )?)?)+)", text):
            path = CHAPTERS.get(int(chapter))
            for label in re.findall(r"\"(sec-[A-Za-z0-9-]+)\"", labels):
                if path is None or label not in _labels(path):
                    wrong.append(f"{where}: Chapter {chapter} has no section {label!r}")
    assert wrong == [], wrong
