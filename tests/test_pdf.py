"""tools/pdf.py: the book printed to one PDF by the local Chromium, offline, once MathJax has
typeset it (``make pdf``).  A small page is printed here; the whole book, by ``make pdf``, in the
``book`` test."""
import re
import shutil
from pathlib import Path

import pytest

from tools import pdf

ROOT = Path(__file__).resolve().parent.parent
MATHJAX = ROOT / ".cache" / "mathjax" / "mathjax"
HEAD = '<html><head><meta charset="utf-8"><script src="mathjax/es5/tex-mml-chtml.js"></script></head>'


def _site(tmp_path, body):
    if not (MATHJAX / "es5" / "tex-mml-chtml.js").is_file():
        pytest.fail(f"MathJax is not installed at {MATHJAX}: run `make mathjax`")
    shutil.copytree(MATHJAX, tmp_path / "mathjax")
    page = tmp_path / "index.html"
    page.write_text(HEAD + "<body>" + body + "</body></html>")
    return page


def test_a_page_is_printed_with_its_math_typeset(tmp_path):
    page = _site(tmp_path, "<h1>A chapter</h1>" + "<p>The rate <span class='math'>\\(n^{-1/2}\\)</span>.</p>" * 200)
    out = pdf.print_pdf(page, tmp_path / "out" / "book.pdf")
    data = out.read_bytes()
    assert data.startswith(b"%PDF")
    assert len(re.findall(rb"/Type\s*/Page\b", data)) >= 2        # 200 paragraphs: more than one page
    assert not (tmp_path / "out" / "book.partial.pdf").exists()


def test_a_request_to_another_host_fails_the_print(tmp_path):
    page = _site(tmp_path, '<p>x</p><img src="https://example.org/a.png">')
    with pytest.raises(pdf.PdfError, match="requests to other hosts"):
        pdf.print_pdf(page, tmp_path / "book.pdf")
    assert not (tmp_path / "book.pdf").exists()


@pytest.mark.book
def test_make_pdf_builds_the_whole_book(tmp_path):
    out = tmp_path / "rnnbook.pdf"
    assert pdf.main(["--out", str(out)]) == 0
    data = out.read_bytes()
    assert data.startswith(b"%PDF") and len(re.findall(rb"/Type\s*/Page\b", data)) > 50


def test_a_missing_resource_fails_the_print(tmp_path):
    page = _site(tmp_path, '<p>x</p><img src="_images/missing.png">')
    with pytest.raises(pdf.PdfError, match="did not load"):
        pdf.print_pdf(page, tmp_path / "book.pdf")
