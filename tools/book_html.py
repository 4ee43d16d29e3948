"""Sphinx extension: what the book's HTML pages add to jupyter-book's.

* **Cross-references in results tables.**  :mod:`lib.book.tables` renders a results table to
  HTML in the notebook and writes each ``{ref}``, ``{numref}``, ``{eq}`` or ``{doc}`` role of a
  cell as a placeholder (``<a class="rnnbook-xref" data-role=... data-target=...>``).  When a
  page is read, each placeholder becomes Sphinx's own ``pending_xref`` between the table's raw
  HTML pieces, so it resolves exactly as the same role in the prose does (section titles,
  equation numbers; a missing label is a warning, an error in the strict build).
* **Numbered, captioned tables.**  A table with a ``caption`` (``lib.book.notebook.table(...,
  caption=..., label=...)``) is a ``div.rnnbook-table[data-caption]`` holding a ``<caption>``.
  When a page is read, each becomes an enumerable node of the figure type ``table`` (numbered
  "Table N.k" beside the book's figures, its number written into the caption) and its label a
  target, so ``{numref}`tab-...``` and ``{ref}`` resolve to it as to a figure.
* **Section titles with math in references.**  A ``{ref}`` to a section whose title holds math
  shows the title as typeset math, not its TeX source (what Sphinx alone prints).
* **The stylesheet** ``tools/static/rnnbook.css``: results tables and code that fit the content
  column (cells wrap, numbers right-aligned, the first column pinned if a table must scroll).
* **Wide pages.**  A page whose source declares ``rnnbook: {page: wide}`` in its front matter
  (the appendices of wide tables) shows no table of contents of its own on the right and gives
  the content that width.
* **A way back to the source.**  The repository's address is declared once, as
  ``repository-code`` in ``CITATION.cff``; when it is there the theme's repository button links
  it.  Every chapter page ends with a note that names its source ``book/NN_subject.md``, how to
  edit and re-execute it, and what a downloaded notebook needs (``lib/`` from the repository).
"""
from __future__ import annotations

import html
import re
from pathlib import Path

from docutils import nodes

ROOT = Path(__file__).resolve().parent.parent
STATIC = Path(__file__).resolve().parent / "static"
# the placeholder lib.book.tables writes for a role in a table cell
XREF = re.compile(r'<a class="rnnbook-xref" data-role="(?P<role>\w+)" data-target="(?P<target>[^"]*)" '
                  r'data-title="(?P<title>[^"]*)">(?P<shown>.*?)</a>', re.S)
CHAPTER = re.compile(r"^book/(\d\d)_\w+$")


def repository_url(citation: Path = ROOT / "CITATION.cff") -> str | None:
    """``repository-code`` of ``CITATION.cff`` (the one place the repository's address is
    declared), or None when the file does not give it."""
    import yaml

    if not citation.is_file():
        return None
    url = (yaml.safe_load(citation.read_text()) or {}).get("repository-code")
    if url is not None and not (isinstance(url, str) and re.match(r"^https?://\S+$", url)):
        raise ValueError(f"{citation}: repository-code must be an http(s) address, got {url!r}")
    return url


# ----------------------------------------------------------------------------- tables

def _xref(domain: str, typ: str, target: str, title: str, docname: str):
    from sphinx import addnodes

    if typ in ("ref", "numref"):
        target = target.lower()                      # as Sphinx's own roles store the labels
    shown = title or target
    inner = nodes.inline(shown, shown, classes=["xref", domain, f"{domain}-{typ}"])
    return addnodes.pending_xref("", inner, refdomain=domain, reftype=typ, reftarget=target,
                                 refexplicit=bool(title), refwarn=True, refdoc=docname)


def resolve_table_roles(app, doctree) -> None:
    """Replace the placeholders of the results tables of the page just read by pending_xref
    nodes, between the table's raw HTML pieces."""
    docname = app.env.docname
    for raw in list(doctree.findall(nodes.raw)):
        text = raw.astext()
        if "html" not in raw.get("format", "").split() or "rnnbook-xref" not in text:
            continue
        # the roles a cell may hold, as the renderer declares them (imported only for a page whose
        # tables hold one: importing lib.book imports lib)
        from lib.book.tables import ROLES
        parts, pos = [], 0
        for m in XREF.finditer(text):
            if m["role"] not in ROLES:
                raise ValueError(f"{docname}: a table cell holds the role {{{m['role']}}}, which the book "
                                 f"cannot resolve (roles: {', '.join(ROLES)})")
            parts.append(nodes.raw("", text[pos:m.start()], format="html"))
            parts.append(nodes.inline("", "", _xref(*ROLES[m["role"]], html.unescape(m["target"]),
                                                    html.unescape(m["title"]), docname)))
            pos = m.end()
        parts.append(nodes.raw("", text[pos:], format="html"))
        raw.replace_self(nodes.container("", *parts, classes=list(raw["classes"])))


# the div lib.book.tables writes around a captioned table
CAPTIONED = re.compile(r'<div class="rnnbook-table[^"]*" data-caption="1"(?: data-label="(?P<label>[^"]*)")?>')
CAPTION_TEXT = re.compile(r'<span class="caption-text">(?P<text>.*?)</span></caption>', re.S)
NUMBER_SLOT = '<span class="caption-number"></span>'


class captioned_table(nodes.General, nodes.Element):
    """A results table with a caption: numbered as a ``table``; its children are the table's HTML
    pieces (and the cross-references of its cells)."""


def _caption_title(node) -> str:
    return node.get("caption", "")


def number_tables(app, doctree) -> None:
    """Wrap every captioned results table of the page just read in a :class:`captioned_table`
    with an id (its label, or one of Sphinx's own) and its label as an explicit target: Sphinx
    then numbers it and ``{numref}`` finds it."""
    document = doctree
    for raw in list(doctree.findall(nodes.raw)):
        text = raw.astext()
        if "html" not in raw.get("format", "").split():
            continue
        m = CAPTIONED.search(text)
        if not m:
            continue
        cap = CAPTION_TEXT.search(text)
        caption = html.unescape(re.sub(r"<[^>]+>", "", cap["text"])).strip() if cap else ""
        node = captioned_table("", caption=caption)
        raw.replace_self(node)
        node["classes"] = []                             # replace_self copied the raw node's own
        node.append(raw)
        if m["label"]:
            label = html.unescape(m["label"]).lower()        # as Sphinx's roles store the labels
            node["names"].append(label)
            document.note_explicit_target(node, node)
        else:
            document.set_id(node)


def _visit_captioned_table(self, node) -> None:
    start = len(self.body)
    self.add_fignumber(node)                    # "<span class="caption-number">Table 3.1 </span>"
    number = "".join(self.body[start:])
    del self.body[start:]
    node["_number"], node["_start"] = number, len(self.body)
    self.body.append(self.starttag(node, "div", CLASS="rnnbook-captioned"))


def _depart_captioned_table(self, node) -> None:
    start = node["_start"]
    out = "".join(self.body[start:]) + "</div>\n"
    if node["_number"]:
        out = out.replace(NUMBER_SLOT, node["_number"], 1)
    self.body[start:] = [out]


def _skip(self, node) -> None:
    raise nodes.SkipNode


def _number_tables_transform():
    """:func:`number_tables` as a transform that runs before Sphinx's domains collect the page's
    labels (``SphinxDomains``, priority 850)."""
    from sphinx.transforms import SphinxTransform

    class NumberTables(SphinxTransform):
        default_priority = 800

        def apply(self, **kwargs) -> None:
            number_tables(self.app, self.document)

    return NumberTables


# ----------------------------------------------------------------------------- section titles

RICH_TITLE = (nodes.Text, nodes.math, nodes.emphasis, nodes.strong, nodes.literal, nodes.inline)


def _rich_titles():
    """A post-transform that runs just before Sphinx resolves references: a ``{ref}`` without
    its own text to a section whose title holds math links with the title as the page shows it
    (Sphinx's own resolution would print the title's TeX source, ``\\rho_j``)."""
    from sphinx import addnodes
    from sphinx.transforms.post_transforms import SphinxPostTransform
    from sphinx.util.nodes import make_refnode

    class RichSectionTitles(SphinxPostTransform):
        default_priority = 5                      # before ReferencesResolver (10)

        def run(self, **kwargs) -> None:
            labels = self.env.get_domain("std").labels
            for node in list(self.document.findall(addnodes.pending_xref)):
                if (node.get("refdomain"), node.get("reftype")) != ("std", "ref") or node.get("refexplicit"):
                    continue
                docname, labelid, _ = labels.get(node["reftarget"], ("", "", ""))
                if not docname:
                    continue
                section = self.env.get_doctree(docname).ids.get(labelid)
                if not isinstance(section, nodes.section) or not section.children:
                    continue
                title = section[0]
                if not any(isinstance(c, nodes.math) for c in title.findall()) or \
                        not all(isinstance(c, RICH_TITLE) for c in title.children):
                    continue
                inner = nodes.inline("", "", *[c.deepcopy() for c in title.children], classes=["std", "std-ref"])
                node.replace_self(make_refnode(self.app.builder, self.env.docname, docname, labelid, inner))

    return RichSectionTitles


# ----------------------------------------------------------------------------- the source

def _edit_note(docname: str, url: str | None) -> nodes.Element:
    """The note at the end of a chapter page: its source, how to re-execute it, what a
    downloaded notebook needs."""
    number = CHAPTER.match(docname)[1]
    source = f"{docname}.md"

    def lit(t):
        return nodes.literal(t, t)

    where = [nodes.Text("its source is "), lit(source)]
    if url:
        where = [nodes.Text("its source is "),
                 nodes.reference("", "", lit(source), refuri=f"{url.rstrip('/')}/blob/main/{source}"),
                 nodes.Text(" in the "), nodes.reference("", "repository", refuri=url)]
    first = nodes.paragraph("", "", nodes.strong("", "Edit or re-execute this chapter: "), *where,
                            nodes.Text(" (also in this page's download menu, with the executed "), lit(".ipynb"),
                            nodes.Text("). Edit the "), lit(".md"), nodes.Text(" as text, or as a notebook with "),
                            lit("make lab"), nodes.Text("; re-execute it with other parameters with "),
                            lit(f'make chapter CH={number} ARGS="-p NAME VALUE"'),
                            nodes.Text(" (its parameters, their ranges and defaults: "),
                            lit(f"make chapter CH={number} ARGS=--parameters"),
                            nodes.Text("), or rebuild the book with "), lit("make book"), nodes.Text("."))
    second = nodes.paragraph("", "", nodes.Text("A downloaded notebook imports the book's library "), lit("lib/"),
                             nodes.Text(": run it in a clone of the repository after "), lit("pip install -e ."),
                             nodes.Text(" (or "), lit("make book"), nodes.Text("), from its "), lit("book/"),
                             nodes.Text(" folder."))
    return nodes.container("", first, second, classes=["rnnbook-source-note"])


def add_edit_note(app, doctree) -> None:
    docname = app.env.docname
    if not CHAPTER.match(docname) or not (Path(app.srcdir) / f"{docname}.md").is_file():
        return
    sections = [n for n in doctree.children if isinstance(n, nodes.section)]
    (sections[-1] if sections else doctree).append(_edit_note(docname, app.config.rnnbook_repository_url))


# ----------------------------------------------------------------------------- wide pages

def front_matter(path: Path) -> dict:
    """The YAML front matter of a MyST source (empty when it has none)."""
    import yaml

    text = path.read_text() if path.is_file() else ""
    if not text.startswith("---"):
        return {}
    return yaml.safe_load(text.split("---", 2)[1]) or {}


def widen(app, pagename, templatename, context, doctree) -> None:
    """A page whose source declares ``rnnbook: {page: wide}`` (an appendix of wide tables) gives
    its content the width of the page's own table of contents, which it does not show."""
    declared = front_matter(Path(app.srcdir) / f"{pagename}.md").get("rnnbook") or {}
    if isinstance(declared, dict) and declared.get("page") == "wide":
        context["secondary_sidebar_items"] = []
        meta = dict(context.get("meta") or {})
        meta["html_theme.sidebar_secondary.remove"] = True
        context["meta"] = meta


# ----------------------------------------------------------------------------- setup

def _configure(app, config) -> None:
    url = repository_url()
    config.rnnbook_repository_url = url
    if url:
        options = dict(config.html_theme_options or {})
        options.update(repository_url=url, use_repository_button=True, repository_branch="main", path_to_docs="")
        config.html_theme_options = options
    declared = [Path(app.confdir, p).resolve() for p in (config.html_static_path or [])]
    if STATIC.resolve() not in declared:
        config.html_static_path = list(config.html_static_path or []) + [str(STATIC)]


def _fresh_static(app) -> None:
    """Sphinx copies the static files only when it writes some page: an edit of the book's
    stylesheet alone would not reach an existing build.  Its copy is refreshed here."""
    import shutil

    for source in STATIC.iterdir():
        target = Path(app.outdir) / "_static" / source.name
        if source.is_file() and target.parent.is_dir() and \
                (not target.is_file() or target.read_bytes() != source.read_bytes()):
            shutil.copyfile(source, target)


def setup(app):
    app.add_config_value("rnnbook_repository_url", None, "html")
    app.connect("builder-inited", _fresh_static)
    app.connect("config-inited", _configure)
    app.add_css_file("rnnbook.css")
    app.add_enumerable_node(captioned_table, "table", _caption_title,
                            html=(_visit_captioned_table, _depart_captioned_table),
                            latex=(_skip, None), text=(_skip, None), man=(_skip, None), texinfo=(_skip, None))
    app.add_transform(_number_tables_transform())
    app.connect("doctree-read", resolve_table_roles)
    app.connect("doctree-read", add_edit_note)
    app.add_post_transform(_rich_titles())
    app.connect("html-page-context", widen, priority=900)      # after the theme has chosen its sidebars
    return {"parallel_read_safe": True, "parallel_write_safe": True}
