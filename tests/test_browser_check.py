"""The browser check fails on each defect it is meant to catch, and passes a clean page.

One small site with one defect per page is checked once in headless Chromium; every page's
problems must name that page's defect, and the clean page must have none."""
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
from tools import browser_check

MATHJAX = ROOT / ".cache" / "mathjax" / "mathjax"
PNG_1PX = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c6360f8cf000000030101001018dd8d0000000049454e44ae426082")

HEAD = '<html><head><meta charset="utf-8"><script src="mathjax/es5/tex-mml-chtml.js"></script></head>'
PAGES = {
    "clean.html": HEAD + '<body id="top"><p>Inline <span class="math notranslate">\\(a^2\\)</span>.</p>'
                  '<div class="math notranslate">\\[\\sum_j \\rho_j\\]</div>'
                  '<img src="ok.png"><a href="other.html#sec">a link</a> <a href="#top">up</a>'
                  '<a href="https://example.org/">external links are not fetched</a></body></html>',
    "other.html": '<html><body><h1 id="sec">Section</h1></body></html>',
    "broken_image.html": '<html><body><img src="missing.png"></body></html>',
    "external.html": '<html><head><script src="https://cdn.example.com/lib.js"></script></head>'
                     '<body>x</body></html>',
    "raw_math.html": "<html><body><p>$$ y_t = \\sum_j L_j x_{t-j} $$</p></body></html>",
    "untypeset.html": '<html><body><div class="math">\\[x\\]</div></body></html>',
    "js_error.html": '<html><body><script>throw new Error("boom in page");</script></body></html>',
    "bad_link.html": '<html><body><a href="nowhere.html">x</a><a href="other.html#nosuch">y</a></body></html>',
    "redirect.html": '<html><head><meta http-equiv="refresh" content="0; url=clean.html"></head></html>',
    "raw_table.html": "<html><body><p>| a | b |\n|---|---|\n| 1 | 2 |</p></body></html>",
    "raw_role.html": "<html><body><p>as in {eq}`eq-gated-rnn` above</p></body></html>",
    "raw_inline_math.html": "<html><body><p>the rate $\\eta^*$ here</p></body></html>",
    "two_search.html": '<html><body><button class="search-button-field">Search</button>'
                       '<div><button class="search-button-field">Search</button></div></body></html>',
    "07_no_source.html": '<html><body><a href="_sources/07_no_source.ipynb">.ipynb</a></body></html>',
    "08_with_source.html": '<html><body><button class="search-button-field">Search</button>'
                           '<a href="_sources/08_with_source.md">.md</a></body></html>',
}


@pytest.fixture(scope="module")
def problems(tmp_path_factory):
    if not (MATHJAX / "es5" / "tex-mml-chtml.js").is_file():
        pytest.fail(f"MathJax is not installed at {MATHJAX}: run `make mathjax`")
    site = tmp_path_factory.mktemp("site")
    shutil.copytree(MATHJAX, site / "mathjax")
    (site / "ok.png").write_bytes(PNG_1PX)
    (site / "_sources").mkdir()
    (site / "_sources" / "08_with_source.md").write_text("# a chapter source\n")
    (site / "_sources" / "07_no_source.ipynb").write_text("{}")
    for name, html in PAGES.items():
        (site / name).write_text(html)
    return browser_check.check_site(site)


def of(problems, page):
    return [p for p in problems if p.startswith(page + ":")]


def test_clean_page_passes(problems):
    assert of(problems, "clean.html") == []
    assert of(problems, "other.html") == []
    assert of(problems, "redirect.html") == []
    assert of(problems, "08_with_source.html") == []     # a chapter page with its .md and one search box


def test_broken_image_fails(problems):
    assert any("image did not load: missing.png" in p for p in of(problems, "broken_image.html"))


def test_external_request_fails(problems):
    assert any("external request to https://cdn.example.com/lib.js" in p
               for p in of(problems, "external.html"))


def test_raw_math_fails(problems):
    assert any("raw math delimiter '$$'" in p for p in of(problems, "raw_math.html"))


def test_math_without_mathjax_fails(problems):
    found = of(problems, "untypeset.html")
    assert any("MathJax did not load" in p for p in found)
    assert any("not typeset" in p for p in found)


def test_javascript_error_fails(problems):
    assert any("boom in page" in p for p in of(problems, "js_error.html"))


def test_broken_internal_links_fail(problems):
    found = of(problems, "bad_link.html")
    assert any("nowhere.html" in p for p in found)
    assert any("no anchor #nosuch" in p for p in found)


def test_empty_site_fails(tmp_path):
    assert browser_check.check_site(tmp_path) != []


@pytest.mark.parametrize("page, words", [("raw_table.html", "Markdown table"), ("raw_role.html", "MyST role"),
                                         ("raw_inline_math.html", "inline math")])
def test_markdown_left_as_text_fails(problems, page, words):
    assert any(words in p for p in of(problems, page)), of(problems, page)


def test_two_search_boxes_fail(problems):
    assert any("2 search boxes" in p for p in of(problems, "two_search.html")), of(problems, "two_search.html")


def test_chapter_page_without_its_md_source_fails(problems):
    found = of(problems, "07_no_source.html")
    assert any("07_no_source.md" in p for p in found), found
