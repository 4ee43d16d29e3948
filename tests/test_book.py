"""End to end: every chapter executed by papermill at scale="book", the HTML book built from
those notebooks with warnings as errors, and every page checked in headless Chromium.

Chapters whose inputs (source, lib/, package versions) are unchanged since their last
successful execution are not executed again (tools/book.py keeps the digests); on a fresh
clone, as in CI, every chapter runs.  Marked ``book``: ``pytest -m "not book"`` skips them."""
import json
import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
from tools import book
from tools import browser_check

pytestmark = pytest.mark.book


@pytest.fixture(scope="module")
def executed():
    book.execute()
    return book.chapters()


def test_every_chapter_executes_without_errors(executed):
    for src in executed:
        nb = nbformat.read(src.with_suffix(".ipynb"), as_version=4)
        errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                  if o.get("output_type") == "error"]
        assert errors == [], f"{src.stem}: error output in the executed notebook"
        assert book.incomplete_cells(src.with_suffix(".ipynb")) == [], f"{src.stem}: cells that never ran"
        assert nb.metadata["papermill"]["exception"] in (None, False), src.stem


def test_chapters_ran_at_book_scale(executed):
    for src in executed:
        nb = nbformat.read(src.with_suffix(".ipynb"), as_version=4)
        params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert params and re.search(r'^scale(: *str)? *= *"book"', params[0].source, re.M), src.stem
        assert not any("injected-parameters" in c.metadata.get("tags", []) for c in nb.cells), \
            f"{src.stem}: the book must be built from the default parameters"


def test_timings_recorded(executed):
    timings = json.loads((ROOT / "_build" / "timings.json").read_text())
    measured = [src.stem for src in executed if "timings" not in book.dependencies(src)["reads"]]
    assert timings["missing"] == []                    # every chapter has its record after the build
    for name in measured:
        assert timings["chapters"][name]["seconds"] > 0


def test_fidelity_appendix_agrees_with_the_chapters(executed):
    from lib.book import fidelity

    chapters = [s.with_suffix(".ipynb") for s in executed if not book.dependencies(s)["reads"]]
    records = fidelity.collect(chapters)
    assert {r["paper"] for r in records} == set(fidelity.PAPERS) | {fidelity.BOOK}   # the papers' and the book's own
    assert fidelity.unrecorded(records) == []          # every claim of the ledgers is checked by a chapter
    # every counted verdict could have failed: its check has an outcome on a plausible wrong value
    assert fidelity.uncontrolled(records) == [], "counted claims without a control"
    (appendix,) = [s.with_suffix(".ipynb") for s in executed if "records" in book.dependencies(s)["reads"]]
    assert fidelity.appendix_disagreements(appendix, records) == []


def test_summaries_quote_only_numbers_their_chapter_computed(executed):
    """A chapter's "## Summary" quotes no number that its executed notebook does not output, and
    the introduction none that no chapter outputs (its counts are pasted from the appendix)."""
    from lib.book import fidelity

    problems, everything = [], []
    for src in executed:
        nb = src.with_suffix(".ipynb")
        outputs = fidelity.notebook_outputs(nb)
        everything.append(outputs)
        missing = fidelity.numbers_not_in_outputs(fidelity.notebook_summary(nb), outputs)
        if missing:
            problems.append(f"{src.stem}: the summary quotes {missing}, which no output of the chapter contains")
    intro = re.sub(r"```.*?```", " ", (ROOT / "book" / "intro.md").read_text(), flags=re.S)
    missing = fidelity.numbers_not_in_outputs(intro, "\n".join(everything))
    if missing:
        problems.append(f"intro: quotes {missing}, which no chapter outputs")
    assert problems == [], "\n".join(problems)


def test_no_output_shows_an_unformatted_field(executed):
    """No text a chapter displays or glues carries a format string's field that was never filled
    (a string that lost its f prefix prints "{minutes:.1f}" on the page, or "{{ref}}", which the
    strict build then rejects far from its cause)."""
    from lib.book import fidelity

    raw = {src.stem: fidelity.unformatted_fields(fidelity.notebook_outputs(src.with_suffix(".ipynb")))
           for src in executed}
    assert {k: v for k, v in raw.items() if v} == {}


@pytest.fixture(scope="module")
def site(executed):
    book.build_html(strict=True)   # jupyter-book build -W -n --keep-going; raises on a warning
    return ROOT / "_build" / "html"


def test_every_chapter_is_a_page(site):
    for src in book.chapters():
        assert (site / "book" / (src.stem + ".html")).is_file(), src.stem


def test_browser_check_of_the_whole_book(site):
    problems = browser_check.check_site(site)
    assert problems == [], "\n".join(problems)


def test_single_chapter_with_a_changed_parameter(executed):
    out = book.run_chapter("01", {"T_realize": 16})
    nb = nbformat.read(out, as_version=4)
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected and "T_realize = 16" in injected[0].source
    assert (ROOT / "_build" / "chapters" / out.stem / "_build" / "html" / "book" / (out.stem + ".html")).is_file()
    assert nb.metadata["papermill"]["exception"] in (None, False)
