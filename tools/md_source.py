"""Sphinx extension: offer each chapter's jupytext source (``book/NN_subject.md``) for download.

The book renders the executed notebooks (``book/NN_subject.ipynb``), so the theme's download
menu offers the ``.ipynb``.  The ``.md`` is the chapter's only source — what a reader edits and
re-executes — so this copies it to ``_sources/book/NN_subject.md`` in the HTML output and adds it
to the page's download menu (after the theme has built the menu).  Pages without a ``.md``
beside their notebook are left alone.
"""
from __future__ import annotations

import shutil
from pathlib import Path


def _add_md_button(app, pagename, templatename, context, doctree):
    source = Path(app.srcdir) / f"{pagename}.md"
    if doctree is None or not source.is_file() or not (Path(app.srcdir) / f"{pagename}.ipynb").is_file():
        return
    target = Path(app.outdir) / "_sources" / f"{pagename}.md"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    for group in context.get("header_buttons", []):
        if group.get("label") == "download-buttons":
            url = f"{context['pathto']('_sources', 1)}/{pagename}.md"
            group["buttons"].insert(0, {
                "type": "link", "url": url, "text": ".md",
                "tooltip": "Download the chapter's source (jupytext MyST notebook)",
                "icon": "fas fa-file-code", "label": "download-md-source-button",
            })


def setup(app):
    # after sphinx-book-theme's add_header_buttons (priority 501) has built the download menu
    app.connect("html-page-context", _add_md_button, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
