"""Results tables rendered from data: one renderer for every table the chapters display.

A table is a ``header`` (column titles) and ``rows`` (one cell per column).  Each cell is text
the chapter has formatted (an ``int`` is written as it is; a float is refused, so that every
number carries the precision its chapter chose), rendered on its own as *inline* MyST Markdown
with markdown-it-py -- the parser MyST itself uses -- into an HTML table:

* ``**bold**``, ``*emphasis*``, ```code```, ``[links](url)`` and ``$math$`` render as in the
  book's prose; math is left to MathJax (the same ``<span class="math">`` Sphinx writes);
* nothing in a cell can reach outside it: block syntax (``#``, ``-``, ``|``) is inline text,
  raw HTML is escaped, and a newline is a line break inside the cell;
* the MyST roles ``{ref}``, ``{numref}``, ``{eq}`` and ``{doc}`` are written as placeholders that
  the book's Sphinx extension (``tools/md_source.py``) turns into Sphinx's own cross-references,
  so they resolve (and a missing label fails the strict build) as in the prose; any other role is
  refused with an error naming the cell;
* a column whose cells are all numbers is right-aligned in tabular figures.

:func:`html` gives the HTML, :func:`text` a plain-text rendering (what a terminal shows), and
:class:`Table` displays both in a notebook, with the data itself in the output's metadata
under :data:`MIME` (the fidelity appendix's agreement test reads it back).
"""
from __future__ import annotations

import html as _html
import re

__all__ = ["MIME", "ROLES", "Table", "cells", "html", "text"]

MIME = "application/vnd.rnnbook.table+json"
# the roles a cell may hold: (Sphinx domain, role) of the cross-reference each becomes
ROLES = {"ref": ("std", "ref"), "numref": ("std", "numref"), "doc": ("std", "doc"), "eq": ("math", "eq")}
_NUMBER = r"[-+−]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:[eE][-+−]?\d+)?\s*[%×]?"
_NUMERIC = re.compile(rf"^\s*{_NUMBER}(?:\s*±\s*{_NUMBER})?\s*$")
_EMPTY = {"", "—", "-", "–"}


def cells(header, rows) -> tuple[list[str], list[list[str]]]:
    """The table's cells as text, checked: a non-empty ``header``, and in ``rows`` one cell per
    column, each a string or an int.  A ValueError or TypeError names the first bad row or cell."""
    if isinstance(header, str):
        raise TypeError("header must be a list of column titles, got a string")
    header = list(header)
    if not header:
        raise ValueError("header must name at least one column")
    out_header = [_cell(c, f"header[{j}]") for j, c in enumerate(header)]
    out_rows = []
    for i, row in enumerate(rows):
        if isinstance(row, str):
            raise TypeError(f"rows[{i}] must be a list of cells, got a string")
        row = list(row)
        if len(row) != len(header):
            raise ValueError(f"rows[{i}] has {len(row)} cells; the header has {len(header)} columns")
        out_rows.append([_cell(c, f"rows[{i}][{j}]") for j, c in enumerate(row)])
    return out_header, out_rows


def _cell(value, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(f"{where} must be text (or an int), got {type(value).__name__} {value!r}: "
                        "format numbers with the precision the table shows")
    return str(value)


# ----------------------------------------------------------------------------- inline Markdown

_MD = None


def _markdown():
    """markdown-it-py with MyST's inline syntax: dollar math (MyST's defaults) and roles."""
    global _MD
    if _MD is None:
        from markdown_it import MarkdownIt
        from mdit_py_plugins.dollarmath import dollarmath_plugin
        from mdit_py_plugins.myst_role import myst_role_plugin

        md = MarkdownIt("commonmark", {"html": False, "breaks": True, "typographer": False})
        md.use(dollarmath_plugin, allow_labels=False, allow_space=True, allow_digits=True, double_inline=True)
        md.use(myst_role_plugin)
        md.disable("image")
        md.add_render_rule("math_inline", _render_math)
        md.add_render_rule("math_inline_double", _render_math_display)
        md.add_render_rule("myst_role", _render_role)
        md.add_render_rule("code_inline", _render_code)
        _MD = md
    return _MD


def _render_math(self, tokens, idx, options, env):
    return f'<span class="math notranslate nohighlight">\\({_html.escape(tokens[idx].content, quote=False)}\\)</span>'


def _render_math_display(self, tokens, idx, options, env):
    tex = _html.escape(tokens[idx].content, quote=False)
    return f'<span class="math notranslate nohighlight">\\(\\displaystyle {tex}\\)</span>'


def _render_code(self, tokens, idx, options, env):
    # a narrow column may wrap a code chip after "_", "." or "/" (<wbr>), never inside a word
    code = re.sub(r"(?<=[_./])(?=\w)", "<wbr>", _html.escape(tokens[idx].content, quote=False))
    return f'<code class="docutils literal notranslate">{code}</code>'


_EXPLICIT = re.compile(r"^(?P<title>.+?)\s*<(?P<target>[^<>]+)>$", re.S)


def _render_role(self, tokens, idx, options, env):
    name, content = tokens[idx].meta["name"], tokens[idx].content
    if name not in ROLES:
        raise ValueError(f"{env['where']}: the MyST role {{{name}}} cannot be rendered in a table cell "
                         f"(got {{{name}}}`{content}`); a cell may hold the roles "
                         f"{', '.join('{' + r + '}' for r in ROLES)}, or put the reference in the "
                         "text before or after the table")
    m = _EXPLICIT.match(content)
    title, target = (m["title"], m["target"].strip()) if m else ("", content.strip())
    if not target:
        raise ValueError(f"{env['where']}: the role {{{name}}} names no target")
    # what a notebook shows; the book's Sphinx extension replaces it by the resolved reference
    shown = title or (f"({target})" if name == "eq" else target)
    return (f'<a class="rnnbook-xref" data-role="{name}" data-target="{_html.escape(target)}" '
            f'data-title="{_html.escape(title)}">{_html.escape(shown, quote=False)}</a>')


def inline_html(source: str, where: str = "cell") -> str:
    """One cell's text rendered as inline MyST Markdown (see the module docstring)."""
    return _markdown().renderInline(source, {"where": where}).strip()


# ----------------------------------------------------------------------------- the table

def _plain(cell: str) -> str:
    return cell.replace("**", "").replace("`", "").strip()


def numeric_columns(rows) -> list[bool]:
    """For each column: do its cells hold numbers only (empty cells and dashes aside)?"""
    if not rows:
        return []
    out = []
    for j in range(len(rows[0])):
        values = [_plain(r[j]) for r in rows if _plain(r[j]) not in _EMPTY]
        out.append(bool(values) and all(_NUMERIC.match(v) for v in values))
    return out


_LABEL = re.compile(r"^[A-Za-z][\w-]*$")


def check_caption(caption, label) -> tuple[str, str | None]:
    """``caption`` (non-empty text: what the reader should see in the table) and ``label`` (None,
    or a MyST label such as ``tab-ae-ranks`` that ``{numref}`` refers to), checked."""
    if not isinstance(caption, str) or not caption.strip():
        raise ValueError(f"caption must be non-empty text (what the reader should see in the table), got {caption!r}")
    if label is not None and (not isinstance(label, str) or not _LABEL.match(label)):
        raise ValueError(f"label must be None or a MyST label (a letter, then letters, digits, '-' or '_'), "
                         f"got {label!r}")
    return caption.strip(), label


def html(header, rows, caption: str | None = None, label: str | None = None) -> str:
    """The HTML of a results table: every cell rendered on its own (inline MyST Markdown, see
    the module docstring), numeric columns right-aligned, wrapped in ``div.rnnbook-table``.

    A ``caption`` (inline MyST Markdown, math included) becomes the table's ``<caption>``; the
    book's Sphinx extension (``tools/book_html.py``) numbers it "Table N.k" like a figure and
    registers ``label`` for ``{numref}``/``{ref}`` (a captioned table without a label is
    numbered too)."""
    header, rows = cells(header, rows)
    if caption is not None or label is not None:
        caption, label = check_caption(caption, label)
    numeric = numeric_columns(rows) or [False] * len(header)

    def td(tag, j, content):
        cls = ' class="num"' if numeric[j] else ""
        return f"<{tag}{cls}>{content}</{tag}>"

    head = "".join(td("th", j, inline_html(c, f"header[{j}]")) for j, c in enumerate(header))
    body = "\n".join("<tr>" + "".join(td("td", j, inline_html(c, f"rows[{i}][{j}]")) for j, c in enumerate(row))
                     + "</tr>" for i, row in enumerate(rows))
    wide = " rnnbook-wide" if len(header) >= 6 else ""        # set smaller (tools/static/rnnbook.css)
    cap = attrs = ""
    if caption is not None:
        # the <span> is where the book's Sphinx extension writes the number ("Table 7.1")
        cap = (f'<caption><span class="caption-number"></span><span class="caption-text">'
               f'{inline_html(caption, "caption")}</span></caption>\n')
        attrs = f' data-caption="1"' + (f' data-label="{_html.escape(label)}"' if label else "")
    return (f'<div class="rnnbook-table{wide}"{attrs}><table class="table">\n{cap}<thead><tr>{head}</tr></thead>\n'
            f"<tbody>\n{body}\n</tbody>\n</table></div>")


def text(header, rows) -> str:
    """A plain-text rendering (columns padded, Markdown markers removed), for terminals."""
    header, rows = cells(header, rows)
    grid = [[_plain(c).replace("\n", " ") for c in r] for r in [header, *rows]]
    widths = [max(len(r[j]) for r in grid) for j in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in grid]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


class Table:
    """A results table for ``IPython.display.display``: HTML for the page and Jupyter, plain
    text for a terminal, and the data itself in the output's metadata under :data:`MIME` (not
    as an output of its own, which a renderer would try, and fail, to show)."""

    def __init__(self, header, rows, caption: str | None = None, label: str | None = None):
        self.header, self.rows = cells(header, rows)
        if caption is not None or label is not None:
            caption, label = check_caption(caption, label)
        self.caption, self.label = caption, label
        # renders every cell now: a bad role fails here
        self._html = html(self.header, self.rows, caption, label)

    def _repr_mimebundle_(self, include=None, exclude=None):
        plain = text(self.header, self.rows)
        if self.caption:
            plain = f"Table: {_plain(self.caption)}\n{plain}"
        data = {"text/html": self._html, "text/plain": plain}
        meta = {"header": self.header, "rows": self.rows}
        if self.caption:
            meta.update(caption=self.caption, label=self.label)
        return data, {MIME: meta}
