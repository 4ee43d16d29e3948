"""lib.book.tables and lib.book.notebook.table: results tables rendered from data.

The HTML is read back with a real HTML parser: whatever a cell holds, every row has one cell per
column and each cell shows its own text."""
from html.parser import HTMLParser

import pytest
import torch

from lib.book import notebook, tables


class _Cells(HTMLParser):
    """Rows of (tag, classes, text) cells of the first table; <br> read as a newline."""

    def __init__(self):
        super().__init__()
        self.rows, self.cell, self.depth = [], None, 0
        self.inner = []                 # tags opened inside the current cell

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self.cell = [tag, a.get("class") or "", ""]
        elif tag == "br" and self.cell is not None:
            self.cell[2] += "\n"
        elif self.cell is not None:
            self.inner.append((tag, a))

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append(tuple(self.cell))
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell[2] += data.strip("\n") if data.strip() else ""


def parse(html: str) -> _Cells:
    p = _Cells()
    p.feed(html)
    return p


def test_a_cell_with_a_pipe_a_star_a_dollar_and_a_newline_stays_one_cell_of_text():
    awkward = "GatedLinearRNN forward, |h|=100 | T=32 * B $5\nsecond line"
    html = tables.html(["benchmark", "ratio", "target met"], [[awkward, "**2.1×**", "**no**"], ["plain", "3.0×", "yes"]])
    rows = parse(html).rows
    assert [len(r) for r in rows] == [3, 3, 3]
    assert rows[1][0][2] == "GatedLinearRNN forward, |h|=100 | T=32 * B $5\nsecond line"
    assert [c[2] for c in rows[1][1:]] == ["2.1×", "no"]            # the last cells are where they belong
    assert "<strong>no</strong>" in html


@pytest.mark.parametrize("cell", ["# not a heading", "- not a list", "> not a quote", "| a | b |", "1. not a list",
                                  "<script>alert(1)</script>", "<td>x</td>", "```\ncode\n```"])
def test_block_syntax_and_html_in_a_cell_are_text(cell):
    html = tables.html(["a", "b"], [[cell, "x"]])
    rows = parse(html).rows
    assert [len(r) for r in rows] == [2, 2]
    assert "<script" not in html and "<ul" not in html and "<ol" not in html and "<h1" not in html
    assert rows[1][1][2] == "x"


def test_inline_markdown_renders_and_math_is_left_for_mathjax():
    html = tables.html(["$\\nu_W$", "value"], [["`lib.LinearRNN`", "*about* $10^{-10}$ [link](https://example.org)"]])
    assert '<th><span class="math notranslate nohighlight">\\(\\nu_W\\)</span></th>' in html
    assert '<code class="docutils literal notranslate">lib.<wbr>LinearRNN</code>' in html   # may wrap after the dot only
    assert "<em>about</em>" in html and '\\(10^{-10}\\)' in html and 'href="https://example.org"' in html


def test_math_is_escaped_for_html_but_keeps_its_tex():
    html = tables.html(["a"], [["$a < b \\& c$"]])
    assert "\\(a &lt; b \\&amp; c\\)" in html


def test_roles_become_placeholders_the_book_resolves():
    html = tables.html(["shown in"], [["{ref}`sec-width`"], ["{eq}`eq-factor`"], ["{ref}`the text <sec-x>`"]])
    assert '<a class="rnnbook-xref" data-role="ref" data-target="sec-width" data-title="">sec-width</a>' in html
    assert 'data-role="eq" data-target="eq-factor"' in html
    assert 'data-target="sec-x" data-title="the text">the text</a>' in html


def test_a_role_the_book_cannot_resolve_is_refused_naming_the_cell():
    with pytest.raises(ValueError, match=r"rows\[1\]\[0\]: the MyST role \{cite\} cannot be rendered in a table cell"):
        tables.html(["a"], [["fine"], ["{cite}`emami2021`"]])


def test_numeric_columns_are_marked_for_right_alignment():
    rows = parse(tables.html(["name", "error", "ratio", "mixed"],
                             [["a", "1.0e-03", "**25.4×**", "3"], ["b", "—", "0.9×", "n/a"], ["c", "-2.5 ± 0.1", "12", "4"]])).rows
    classes = [c[1] for c in rows[1]]
    assert classes == ["", "num", "num", ""]


@pytest.mark.parametrize("header, rows, error, match", [
    ([], [], ValueError, "header must name at least one column"),
    ("ab", [], TypeError, "header must be a list"),
    (["a", "b"], [["1", "2"], ["3"]], ValueError, r"rows\[1\] has 1 cells; the header has 2 columns"),
    (["a", "b"], [["x", 0.5]], TypeError, r"rows\[0\]\[1\] must be text \(or an int\), got float"),
    (["a"], [[True]], TypeError, r"rows\[0\]\[0\] must be text"),
    (["a"], [[None]], TypeError, r"rows\[0\]\[0\] must be text"),
    (["a"], [[torch.tensor(1.0)]], TypeError, r"rows\[0\]\[0\] must be text \(or an int\), got Tensor"),
    (["a"], ["row"], TypeError, r"rows\[0\] must be a list of cells"),
])
def test_bad_tables_are_refused_by_position(header, rows, error, match):
    with pytest.raises(error, match=match):
        tables.html(header, rows)


def test_plain_text_rendering_lines_up_the_columns():
    assert tables.text(["n", "error"], [[10, "**1.0e-03**"], ["100", "3.2e-04"]]).splitlines() == [
        "n    error", "---  -------", "10   1.0e-03", "100  3.2e-04"]


def test_table_displays_the_caption_around_the_data(monkeypatch):
    shown = []
    monkeypatch.setattr(notebook, "display", shown.append)
    notebook.table(["a", "b"], [["1", "x | y"]], before="what ran", after="what to see")
    assert [type(s).__name__ for s in shown] == ["Markdown", "Table", "Markdown"]
    assert shown[0].data == "what ran" and shown[2].data == "what to see"
    data, metadata = shown[1]._repr_mimebundle_()
    assert set(data) == {"text/html", "text/plain"}          # nothing a page renderer cannot show
    assert metadata[tables.MIME] == {"header": ["a", "b"], "rows": [["1", "x | y"]]}
    assert "<table" in data["text/html"] and "x | y" in data["text/plain"]


def test_a_bad_cell_is_refused_before_anything_is_displayed(monkeypatch):
    shown = []
    monkeypatch.setattr(notebook, "display", shown.append)
    with pytest.raises(ValueError, match="cite"):
        notebook.table(["a"], [["{cite}`x`"]], before="what ran")
    assert shown == []


def test_a_caption_is_rendered_inline_and_checked():
    html = tables.html(["a"], [["1"]], caption="The gap at $\\nu_W = 0.5$, **bold**", label="tab-gap")
    assert 'data-caption="1" data-label="tab-gap"' in html
    assert ('<caption><span class="caption-number"></span><span class="caption-text">The gap at '
            '<span class="math notranslate nohighlight">\\(\\nu_W = 0.5\\)</span>, <strong>bold</strong>'
            '</span></caption>') in html
    assert "<caption>" not in tables.html(["a"], [["1"]])
    with pytest.raises(ValueError, match="caption must be non-empty"):
        tables.html(["a"], [["1"]], caption="  ")
    with pytest.raises(ValueError, match="caption must be non-empty"):
        tables.Table(["a"], [["1"]], label="tab-x")
    with pytest.raises(ValueError, match="label must be None or a MyST label"):
        tables.html(["a"], [["1"]], caption="c", label="tab x")
    data, meta = tables.Table(["a"], [["1"]], "c $x$", "tab-x")._repr_mimebundle_()
    assert data["text/plain"].startswith("Table: c $x$\n")
    assert meta[tables.MIME]["caption"] == "c $x$" and meta[tables.MIME]["label"] == "tab-x"
