"""A re-executed chapter's page, rendered as the book renders it (``make chapter``).

``tools/book.py chapter`` executes one chapter with other parameters and renders its page in a
small book of its own (the chapter, the notation page and the bibliography).  This module makes
that page read like the book's own:

* **chapter numbering kept**: the chapter's number in the book (``_toc.yml``, numbered parts,
  numbering continued across parts) replaces the small book's "1" in its sections, figures,
  tables and equations ("Fig. 3.1", "(3.1)", "Table 3.2", "3.4 The bound");
* **cross-references resolved** against the book's own build (``_build/html`` and its Sphinx
  environment ``_build/.doctrees/environment.pickle``): a ``{ref}``, ``{numref}``, ``{eq}`` or
  ``{doc}`` to another chapter links that chapter's page in the book, with the section title,
  figure or equation number the book shows;  without a book build they stay unresolved (a
  warning, as before), and the page says so;
* **a banner** at the top of the page names the parameters that differ from the chapter's
  defaults, and links the book's own page of the chapter.

The Sphinx side is :func:`setup` (the local extension ``chapter_page`` of the small book's
configuration, which :func:`staging_config` writes).
"""
from __future__ import annotations

import ast
import html
import os
import pickle
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "_build"


# ----------------------------------------------------------------------------- the book's numbers

def chapter_number(stem: str, toc: Path = ROOT / "_toc.yml") -> int | None:
    """The number the book gives chapter ``stem`` ("03_implicit_bias_short_memory"): its place
    among the chapters of the numbered parts of ``_toc.yml`` (numbering continued across parts,
    ``use_multitoc_numbering``); None for a chapter of an unnumbered part (the appendices)."""
    import yaml

    data = yaml.safe_load(toc.read_text())
    n = 0
    for part in data.get("parts", []):
        for entry in part.get("chapters", []):
            if part.get("numbered"):
                n += 1
            if Path(str(entry.get("file", ""))).name == stem:
                return n if part.get("numbered") else None
    return None


def changed_parameters(params: dict, defaults: dict) -> dict:
    """The parameters whose value differs from the chapter's default (``defaults``: name -> the
    default's source text, as the parameters cell writes it)."""
    out = {}
    for name, value in params.items():
        try:
            default = ast.literal_eval(defaults.get(name, "None"))
        except (ValueError, SyntaxError):
            default = object()
        if value != default or type(value) is not type(default):
            out[name] = value
    return out


def staging_config(config: Path, docname: str, number: int | None, changed: dict, defaults: dict,
                   book_html: Path = BUILD / "html", book_env: Path = BUILD / ".doctrees" / "environment.pickle") -> str:
    """The small book's ``_config.yml``: the book's own, with this module as a local extension
    and what it needs to know (the chapter, its number, the parameters, the book's build)."""
    import yaml

    cfg = yaml.safe_load(config.read_text())
    sphinx = cfg.setdefault("sphinx", {})
    sphinx.setdefault("local_extensions", {})["chapter_page"] = "tools"
    conf = sphinx.setdefault("config", {})
    conf["extensions"] = list(conf.get("extensions", [])) + ["chapter_page"]
    conf["rnnbook_chapter"] = {
        "docname": docname, "number": number,
        "changed": {k: repr(v) for k, v in changed.items()},
        "defaults": {k: defaults.get(k, "None") for k in changed},
        "book_html": str(book_html.resolve()) if book_html.is_dir() else "",
        "book_env": str(book_env.resolve()) if book_env.is_file() else "",
    }
    return yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True)


# ----------------------------------------------------------------------------- Sphinx: numbers

def _renumber(t: tuple, number: int) -> tuple:
    return (number, *t[1:]) if t else t


def renumber(app, env) -> list:
    """After Sphinx has numbered the small book (the chapter is its "1"), give the chapter's
    sections, figures, tables and equations the book's chapter number."""
    info = app.config.rnnbook_chapter or {}
    doc, number = info.get("docname"), info.get("number")
    if not doc or not number:
        return []
    if doc in env.toc_secnumbers:
        env.toc_secnumbers[doc] = {k: _renumber(v, number) for k, v in env.toc_secnumbers[doc].items()}
    if doc in env.toc_fignumbers:
        env.toc_fignumbers[doc] = {t: {k: _renumber(v, number) for k, v in ids.items()}
                                   for t, ids in env.toc_fignumbers[doc].items()}
    from docutils import nodes

    if doc in env.tocs:                          # the chapter's own table of contents (the sidebar)
        for ref in env.tocs[doc].findall(nodes.reference):
            if ref.get("secnumber"):
                ref["secnumber"] = _renumber(tuple(ref["secnumber"]), number)
    return []


# ----------------------------------------------------------------------------- Sphinx: the book's labels

_BOOK: dict = {}


def _book_env(path: str):
    """The book build's Sphinx environment (labels, titles, numbers), read once."""
    if path not in _BOOK:
        try:
            with open(path, "rb") as f:
                _BOOK[path] = pickle.load(f)
        except Exception:           # noqa: BLE001 - another Sphinx, a damaged file: no book to link
            _BOOK[path] = None
    return _BOOK[path]


def _link(app, fromdoc: str, docname: str, anchor: str, text: str):
    from docutils import nodes

    info = app.config.rnnbook_chapter
    page = Path(info["book_html"]) / f"{docname}.html"
    here = Path(app.outdir) / f"{fromdoc}.html"
    uri = os.path.relpath(page, here.parent).replace(os.sep, "/") + (f"#{anchor}" if anchor else "")
    ref = nodes.reference("", "", internal=False, refuri=uri, classes=["rnnbook-book-link"])
    ref += nodes.inline(text, text, classes=["std", "std-ref"])
    return ref


def resolve_in_book(app, env, node, contnode):
    """A reference the small book cannot resolve, looked up in the book's own build."""
    info = app.config.rnnbook_chapter or {}
    if not info.get("book_env") or not info.get("book_html"):
        return None
    book = _book_env(info["book_env"])
    if book is None:
        return None
    domain, typ, target = node.get("refdomain"), node.get("reftype"), node.get("reftarget", "")
    std = book.domaindata.get("std", {})
    fromdoc = node.get("refdoc", env.docname)
    if domain == "std" and typ in ("ref", "numref"):
        docname, labelid, title = std.get("labels", {}).get(target, ("", "", ""))
        if not docname:
            docname, labelid = std.get("anonlabels", {}).get(target, ("", ""))
        if not docname:
            return None
        explicit = node.get("refexplicit") and contnode.astext()
        if typ == "numref":
            nums = None
            for figtype, ids in book.toc_fignumbers.get(docname, {}).items():
                if labelid in ids:
                    nums, kind = ids[labelid], figtype
                    break
            if nums is None:
                secnum = book.toc_secnumbers.get(docname, {}).get("#" + labelid)
                if secnum is None:
                    return None
                nums, kind = secnum, "section"
            fmt = app.config.numfig_format.get(kind, "%s")
            number = ".".join(map(str, nums))
            text = explicit.replace("{number}", number).replace("%s", number) if explicit else fmt % number
        else:
            text = explicit or title or target
        return _link(app, fromdoc, docname, labelid, text)
    if domain == "math" and typ in ("eq", "numref"):
        eqs = book.domaindata.get("math", {}).get("objects", {})
        if target not in eqs:
            return None
        from docutils.nodes import make_id

        docname = eqs[target][0]
        node_id = make_id(f"equation-{target}")
        nums = book.toc_fignumbers.get(docname, {}).get("displaymath", {}).get(node_id, ())
        number = ".".join(map(str, nums)) or str(eqs[target][1])
        return _link(app, fromdoc, docname, node_id, (app.config.math_eqref_format or "({number})").format(number=number))
    if domain == "std" and typ == "doc":
        docname = target.lstrip("/")
        if docname not in book.titles:
            return None
        return _link(app, fromdoc, docname, "", node.get("refexplicit") and contnode.astext() or book.titles[docname].astext())
    return None


# ----------------------------------------------------------------------------- Sphinx: the banner

def add_banner(app, doctree) -> None:
    """The parameters this execution changed, and the way to the book's own page, at the top of
    the re-executed chapter."""
    from docutils import nodes

    info = app.config.rnnbook_chapter or {}
    if app.env.docname != info.get("docname"):
        return
    changed, defaults = info.get("changed") or {}, info.get("defaults") or {}
    if changed:
        items = [nodes.Text("This page was re-executed with ")]
        for i, (name, value) in enumerate(changed.items()):
            if i:
                items.append(nodes.Text(", "))
            items += [nodes.literal("", f"{name} = {value}"),
                      nodes.Text(f" (book: {defaults.get(name, 'None')})")]
        items.append(nodes.Text("; every number, figure and verdict below is of this execution, not of the book."))
    else:
        items = [nodes.Text("This page was re-executed with the chapter's default parameters.")]
    para = nodes.paragraph("", "", *items)
    body = [para]
    if info.get("book_html"):
        page = Path(info["book_html"]) / f"{info['docname']}.html"
        if page.is_file():
            uri = os.path.relpath(page, (Path(app.outdir) / info["docname"]).parent).replace(os.sep, "/")
            body.append(nodes.paragraph("", "", nodes.Text("The book's own page of this chapter: "),
                                        nodes.reference("", "", nodes.Text(html.unescape(page.name)), refuri=uri,
                                                        internal=False), nodes.Text(".")))
    else:
        body.append(nodes.paragraph("", "", nodes.Text("References to other chapters are shown unresolved: the "
                                                       "book has not been built here (make book).")))
    note = nodes.admonition("", nodes.title("", "Re-executed with other parameters" if changed else "Re-executed"),
                            *body, classes=["attention", "rnnbook-reexecuted"])
    sections = [n for n in doctree.children if isinstance(n, nodes.section)]
    target = sections[0] if sections else doctree
    at = 1 if target is not doctree and target.children and isinstance(target[0], nodes.title) else 0
    target.insert(at, note)


def setup(app):
    app.add_config_value("rnnbook_chapter", {}, "env")
    app.connect("env-get-updated", renumber, priority=900)       # after Sphinx has numbered the small book
    app.connect("missing-reference", resolve_in_book)
    app.connect("doctree-read", add_banner)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
