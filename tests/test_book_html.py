"""tools/book_html.py, the book's Sphinx extension: a results table's cross-references resolve as
Sphinx's own (a missing label fails the strict build), its stylesheet is served, chapter pages
end with the note on their source, and the repository's address comes from CITATION.cff.

A small Sphinx project (myst-nb, as jupyter-book configures it) renders one executed notebook
whose output is a table of lib.book.tables."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
from lib.book import tables
from tools import book_html

CONF = """
extensions = ["myst_nb", "tools.book_html"]
myst_enable_extensions = ["dollarmath", "amsmath"]
nb_execution_mode = "off"
numfig = True
math_numfig = True
math_eqref_format = "({number})"
exclude_patterns = ["_build", "book/*.md"]
"""

PAGE = """# Widths

(sec-width)=
## How the gap falls with the width

(sec-rho)=
## Where $\\rho_j$ comes from

See {{ref}}`sec-rho`.

$$
K = \\mathcal{{T}}^\\top M \\mathcal{{T}}
$$ (eq-factor)

Text.
"""


def _notebook(bundle) -> dict:
    data, metadata = bundle
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                                            "language": "python"}},
            "cells": [{"cell_type": "markdown", "id": "a", "metadata": {}, "source": "# 07 A chapter\n\nThe table:"},
                      {"cell_type": "code", "id": "b", "metadata": {}, "execution_count": 1, "source": "table(...)",
                       "outputs": [{"output_type": "display_data",
                                    "data": data, "metadata": metadata}]}]}


def build(tmp_path, rows, caption=None, label=None, numbered=False, extra="") -> subprocess.CompletedProcess:
    (tmp_path / "book").mkdir()
    (tmp_path / "conf.py").write_text(CONF)
    toctree = ":numbered:\n" if numbered else ""
    (tmp_path / "index.md").write_text(f"# Index\n\n```{{toctree}}\n{toctree}widths\nbook/07_chapter\n```\n")
    (tmp_path / "widths.md").write_text(PAGE.format() + extra)
    # the output exactly as lib.book.notebook.table displays it in a chapter
    bundle = tables.Table(["claim", "shown in", "equation"], rows, caption, label)._repr_mimebundle_()
    (tmp_path / "book" / "07_chapter.ipynb").write_text(json.dumps(_notebook(bundle)))
    (tmp_path / "book" / "07_chapter.md").write_text("the chapter's jupytext source\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-W", "-n", "-q", str(tmp_path),
                           str(tmp_path / "_build")], capture_output=True, text=True, timeout=300, env=env)


def test_table_cross_references_resolve_like_the_prose(tmp_path):
    res = build(tmp_path, [["a | b", "{ref}`sec-width`", "{eq}`eq-factor`"],
                           ["$x$", "{ref}`the study <sec-width>`", "—"]])
    assert res.returncode == 0, res.stderr[-3000:]
    page = (tmp_path / "_build" / "book" / "07_chapter.html").read_text()
    assert "rnnbook-xref" not in page
    assert '<a class="reference internal" href="../widths.html#sec-width"><span class="std std-ref">' \
           "How the gap falls with the width</span></a>" in page
    assert 'href="../widths.html#equation-eq-factor">(1)</a>' in page
    assert ">the study</span></a>" in page
    widths = (tmp_path / "_build" / "widths.html").read_text()
    assert '<a class="reference internal" href="#sec-rho"><span class="std std-ref">Where <span class="math ' \
           'notranslate nohighlight">\\(\\rho_j\\)</span> comes from</span></a>' in widths
    assert "Where \\rho_j" not in widths
    assert page.count("<table") == 1 and "a | b" in page
    assert (tmp_path / "_build" / "_static" / "rnnbook.css").is_file()
    assert "_static/rnnbook.css" in page


def test_a_captioned_table_is_numbered_and_referable(tmp_path):
    res = build(tmp_path, [["x", "—", "—"]], caption="What $\\nu_W$ does to the gap", label="tab-gap",
                numbered=True, extra="\nAs {numref}`tab-gap` shows, and {ref}`tab-gap`.\n")
    assert res.returncode == 0, res.stderr[-3000:]
    page = (tmp_path / "_build" / "book" / "07_chapter.html").read_text()
    assert '<div class="rnnbook-captioned" id="tab-gap">' in page
    assert '<caption><span class="caption-number">Table 2.1 </span><span class="caption-text">What ' \
           '<span class="math notranslate nohighlight">\\(\\nu_W\\)</span> does to the gap</span></caption>' in page
    widths = (tmp_path / "_build" / "widths.html").read_text()
    assert 'href="book/07_chapter.html#tab-gap"><span class="std std-numref">Table 2.1</span></a>' in widths
    assert 'href="book/07_chapter.html#tab-gap"><span class="std std-ref">What \\(\\nu_W\\) does to the gap' in widths


def test_a_table_without_a_label_is_numbered_too(tmp_path):
    res = build(tmp_path, [["x", "—", "—"]], caption="Plain", numbered=True)
    assert res.returncode == 0, res.stderr[-3000:]
    page = (tmp_path / "_build" / "book" / "07_chapter.html").read_text()
    assert '<span class="caption-number">Table 2.1 </span><span class="caption-text">Plain</span>' in page


def test_a_missing_label_in_a_table_fails_the_strict_build(tmp_path):
    res = build(tmp_path, [["x", "{ref}`sec-nowhere`", "—"]])
    assert res.returncode != 0
    assert "sec-nowhere" in res.stderr


def test_a_chapter_page_ends_with_the_way_to_its_source(tmp_path):
    res = build(tmp_path, [["x", "—", "—"]])
    assert res.returncode == 0, res.stderr[-3000:]
    page = (tmp_path / "_build" / "book" / "07_chapter.html").read_text()
    import html
    import re

    note = html.unescape(re.sub(r"<[^>]+>", "", page[page.index("rnnbook-source-note"):]))
    for words in ("its source is book/07_chapter.md", "make lab", 'make chapter CH=07 ARGS="-p NAME VALUE"',
                  "pip install -e .", "lib/"):
        assert words in note, words
    assert "rnnbook-source-note" not in (tmp_path / "_build" / "widths.html").read_text()   # not a chapter


def test_the_repository_address_comes_from_citation_cff(tmp_path):
    cff = tmp_path / "CITATION.cff"
    cff.write_text("cff-version: 1.2.0\ntitle: t\n")
    assert book_html.repository_url(cff) is None
    cff.write_text("cff-version: 1.2.0\nrepository-code: https://example.org/rnnbook\n")
    assert book_html.repository_url(cff) == "https://example.org/rnnbook"
    cff.write_text("cff-version: 1.2.0\nrepository-code: not an address\n")
    with pytest.raises(ValueError, match="repository-code must be an http"):
        book_html.repository_url(cff)
