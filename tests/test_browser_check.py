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

# The defects a reader met in an earlier build of the book, each reduced to a minimal page made of
# that build's own HTML (the page it came from in brackets).  The content column is an
# <article class="bd-article"> of the theme's width at a 1,400 px window (785 px of text).
ARTICLE = '<article class="bd-article" style="width:785px;padding:0 32px;box-sizing:content-box">{}</article>'
OUTPUT = ('<div class="cell_output docutils container"><div class="output {kind} highlight-myst-ansi notranslate">'
          '<div class="highlight"><pre><span></span>{text}\n</pre></div></div></div>')
LONG_CODE = ('scale: str = "book"             # "book" (default build) or "paper" (larger sizes); '
             'every parameter of this chapter is a knob the reader may turn')
DEFECTS = {
    # (98_performance) a benchmark name holding |h| split its Markdown row: the table was not ours
    "markdown_table_output.html": ARTICLE.format(
        '<div class="cell_output docutils container"><div class="output text_markdown"><table class="table">'
        "<thead><tr><th>benchmark</th><th>file</th><th>target met</th></tr></thead><tbody><tr>"
        "<td>GatedLinearRNN forward, T=32, B=64,</td><td>h</td><td>=100, float64</td></tr></tbody></table>"
        "</div></div>"),
    # (97_fidelity) a claims table of 1,213 px in its scroll box: verdict and "shown in" off-screen
    "clipped_table.html": ARTICLE.format(
        '<div class="pst-scrollable-table-container" style="overflow-x:auto"><table class="table" style="width:1213px">'
        "<tr><th>claim</th><th>paper</th><th>this book</th><th>verdict</th><th>shown in</th></tr></table></div>"),
    # (07_sequence_autoencoders) a table scrolling in its own box inside an output box that
    # scrolls too but does not overflow: its last column off-screen
    "nested_scroll.html": ARTICLE.format(
        '<div class="output text_html" style="overflow:auto"><div class="rnnbook-table" style="overflow-x:auto">'
        '<table class="table" style="width:850px"><tr><th>data</th><th>worst prefix reconstruction</th></tr>'
        "</table></div></div>"),
    # an element simply wider than the column
    "too_wide.html": ARTICLE.format('<div style="width:1100px">a figure too wide for the column</div>'),
    # (01_linear_rnns_are_convolutions) the parameters cell: its comments cut off at the right
    "clipped_code.html": ARTICLE.format(f'<div class="highlight"><pre style="overflow-x:auto;white-space:pre">'
                                        f"{LONG_CODE}</pre></div>"),
    # (02_two_tangent_kernels, section 2.4) a line of the M_n formula read as a list item
    "latex_as_text.html": HEAD + "<body>" + ARTICLE.format(
        '<p>$(M_n)<em>{(j,a,b),(j’,c,d)} = \\tfrac1n\\delta</em>{ac}(Q_j^\\top Q_{j’})<em>{bd}</em></p>'
        '<ul class="simple"><li><p>\\tfrac1{n^2}\\sum_{m&lt;j,,m’&lt;j’} (P_m P_{m’}^\\top)</p></li></ul>') + "</body></html>",
    # (02_two_tangent_kernels) the rest of that paragraph swallowed into a formula, with its role
    "role_in_math.html": HEAD + "<body>" + ARTICLE.format(
        '<p>check both identities <span class="math notranslate nohighlight">\\(, and {eq}`eq-factor` against '
        "the autograd kernel of `lib.empirical_ntk` — to \\)</span></p>") + "</body></html>",
    # (04, 05, 11, 12) the value of a check that ended a cell
    "bare_true.html": ARTICLE.format(OUTPUT.format(kind="text_plain", text="True")),
    # (06_s1_real_data) a warning printed while importing, with the build machine's path
    "warning.html": ARTICLE.format(OUTPUT.format(
        kind="stderr", text="/home/builder/rnnbook/.venv/lib/python3.11/site-packages/tqdm/auto.py:21: TqdmWarning: IProgress "
                            "not found. Please update jupyter and ipywidgets.")),
    # a path of the machine in a printed line, without a warning
    "machine_path.html": ARTICLE.format(OUTPUT.format(kind="stream", text="results read from /home/builder/rnnbook/results")),
    # a results table whose cross-reference the Sphinx extension never resolved
    "unresolved_xref.html": ARTICLE.format(
        '<div class="cell_output docutils container"><div class="output text_html"><div class="rnnbook-table">'
        '<table class="table"><tr><th>shown in</th></tr><tr><td><a class="rnnbook-xref" data-role="ref" '
        'data-target="sec-width" data-title="">sec-width</a></td></tr></table></div></div></div>'),
    # (11_learning_attention_teacher, 98_performance) a boolean as a table cell and as a bold word
    "bare_words.html": ARTICLE.format(
        '<div class="rnnbook-table"><table class="table"><caption>c</caption><tr><th>snapshot</th><th>solved</th></tr>'
        "<tr><td>1000</td><td>True</td></tr></table></div><p>Kernel in use: <strong>True</strong>.</p>"),
    # (06_s1_real_data, 99_reproducibility) the build's own bookkeeping printed for the reader
    "build_text.html": ARTICLE.format(
        OUTPUT.format(kind="stream", text="chapter compute time so far 112 s wall, 80 s CPU")
        + "<p>Executing all chapters took 15.6 minutes, over the 15-minute budget of the book.</p>"),
    # (02_two_tangent_kernels, 03_implicit_bias_short_memory) TeX left as text in figure captions
    "raw_tex_caption.html": ARTICLE.format(
        '<figure><img src="ok.png"><figcaption><p><span class="caption-number">Fig. 2.3 </span>'
        "The points follow the dashed n^{-1/2} reference line.</p></figcaption></figure>"
        '<figure><img src="ok.png"><figcaption><p>with the bound ρ_max ν_W^{j-1} dashed</p></figcaption></figure>'),
    # (every chapter) a results table with neither number nor caption
    "12_uncaptioned.html": ARTICLE.format(
        '<a href="_sources/12_uncaptioned.md">.md</a><div class="rnnbook-table"><table class="table">'
        "<tr><th>hidden neurons</th><th>loss</th></tr><tr><td>80</td><td>0.1</td></tr></table></div>"),
    # (13_lru_lstm_gru) a 135-line cell of bookkeeping shown to the reader
    "13_long_cell.html": ARTICLE.format(
        '<a href="_sources/13_long_cell.md">.md</a><div class="cell docutils container"><div class="cell_input '
        'docutils container"><div class="highlight"><pre>' + "\n".join(f"row_{i} = {i}" for i in range(40))
        + "</pre></div></div></div>"),
    # (every chapter, at 390 px) code that wraps in the middle of an identifier
    "midword.html": '<html><body><article class="bd-article"><div class="highlight">'
                    '<pre style="white-space:pre-wrap;overflow-wrap:anywhere">'
                    + "gen=torch.Generator().manual_seed(theseedofthischapterandofeverydrawbelowit)"
                    + "</pre></div></article></body></html>",
}

# the same pages without their defect: each passes
CLEAN = {
    "14_captioned.html": HEAD + "<body>" + ARTICLE.format(
        '<a href="_sources/14_captioned.md">.md</a><div class="rnnbook-table"><table class="table"><caption>'
        '<span class="caption-number">Table 14.1 </span><span class="caption-text">Loss by width '
        '<span class="math notranslate nohighlight">\\(\\nu_W^{j-1}\\)</span></span></caption>'
        "<tr><th>hidden neurons</th><th>solved</th></tr><tr><td>80</td><td>yes</td></tr></table></div>"
        '<div class="cell docutils container tag_hide-input"><div class="cell_input docutils container">'
        '<div class="highlight"><pre>' + "\n".join(f"row_{i} = {i}" for i in range(40)) + "</pre></div></div></div>"
        '<div class="cell docutils container"><div class="cell_input docutils container"><div class="highlight"><pre>'
        + "\n".join(f"x_{i} = {i}" for i in range(30)) + "</pre></div></div></div>"
        "<p>The chapter runs at <code>book_only=True</code>; the run took 3 minutes of training.</p>") + "</body></html>",
    "nowrap.html": '<html><body><article class="bd-article"><div class="highlight" style="overflow-x:auto">'
                   '<pre style="white-space:pre-wrap">'
                   + "gen=torch.Generator().manual_seed(theseedofthischapterandofeverydrawbelowit)"
                   + "</pre></div></article></body></html>",
}


def clean_table_page() -> str:
    """A results table as lib.book.notebook.table renders it, with math in a header and a cell,
    an awkward cell and numbers: it passes, and MathJax typesets the math inside the cells."""
    from lib.book import tables

    html = tables.html(["benchmark", "$n$", "ratio", "target met"],
                       [["GatedLinearRNN forward, |h|=100 | T=32 * B $5", "1000", "**2.1×**", "**no**"],
                        ["tap error $\\lVert L_j \\rVert_F$", "64", "25.4×", "yes"]])
    return HEAD + "<body>" + ARTICLE.format(
        f'<div class="cell_output docutils container"><div class="output text_html">{html}</div></div>') + "</body></html>"


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
    (site / "_sources" / "14_captioned.md").write_text("# a chapter source\n")
    for name, html in {**PAGES, **DEFECTS, **CLEAN, "clean_table.html": clean_table_page()}.items():
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


def test_a_results_table_rendered_from_data_passes_with_its_math_typeset(problems):
    assert of(problems, "clean_table.html") == []


@pytest.mark.parametrize("page, words", [
    ("markdown_table_output.html", "not rendered by lib.book.notebook.table"),
    ("clipped_table.html", "hidden beyond the content column at 1400 px"),
    ("nested_scroll.html", "hidden beyond the content column at 1400 px: div.rnnbook-table"),
    ("too_wide.html", "wider than the content column at 1400 px"),
    ("clipped_code.html", "hidden beyond the content column at 1400 px: pre"),
    ("latex_as_text.html", "a LaTeX command left as text: '\\\\tfrac'"),
    ("role_in_math.html", "inside a formula"),
    ("bare_true.html", "a bare True printed under a cell"),
    ("warning.html", "a warning in the published page"),
    ("warning.html", "a path of the build machine in the page: '/home/builder/rnnbook/.venv/lib/python3.11/site-packages"),
    ("machine_path.html", "a path of the build machine in the page: '/home/builder/rnnbook/results'"),
    ("unresolved_xref.html", "was not resolved: 'sec-width'"),
    ("bare_words.html", "a bare boolean shown to the reader: td «True»"),
    ("bare_words.html", "a bare boolean shown to the reader: strong «True» in «Kernel in use: True.»"),
    ("build_text.html", "text about the build on a reader's page: 'compute time'"),
    ("build_text.html", "text about the build on a reader's page: '112 s wall'"),
    ("build_text.html", "text about the build on a reader's page: 'over the 15-minute budget'"),
    ("raw_tex_caption.html", "raw TeX in a caption (write its math as $...$): 'The points follow the dashed n^{-1/2}"),
    ("raw_tex_caption.html", "raw TeX in a caption (write its math as $...$): 'with the bound ρ_max ν_W^{j-1}"),
    ("12_uncaptioned.html", "a table without a caption"),
    ("13_long_cell.html", "1 visible code cell(s) longer than 30 lines (40)"),
    ("midword.html", "a word broken in the middle at 390 px"),
])
def test_each_defect_a_reader_met_fails(problems, page, words):
    found = of(problems, page)
    assert any(words in p for p in found), found


@pytest.mark.parametrize("page", sorted(CLEAN))
def test_the_same_pages_without_their_defect_pass(problems, page):
    assert of(problems, page) == []
