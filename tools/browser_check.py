"""Check the rendered book in a real headless browser (Chromium driven by Playwright).

    python tools/browser_check.py [_build/html]
    python tools/browser_check.py --source [book/NN_subject.md ...]   visible code per chapter

Every HTML page of the build is opened from disk (file://, as a reader would) and must:
  * request nothing from another host (any http(s)/ws request to a host other than
    localhost is recorded as a problem and aborted, so the check itself stays offline);
  * load every resource it asks for (no failed requests, e.g. a missing script or image);
  * log no JavaScript error (console messages of type "error", uncaught exceptions);
  * have its math typeset by MathJax: every Sphinx ``.math`` element holds an
    ``mjx-container``, there is no MathJax error node, and no raw ``$$``, ``\\[`` or ``\\(``
    delimiters survive in the text outside code;
  * show every ``<img>`` (complete and naturalWidth > 0);
  * show no Markdown as text: no paragraph that is a pipe table (``| a | b |``), no MyST role
    (``{eq}`...```, ``{ref}``, ``{cite}``, any ``{name}`...```), no inline ``$...$`` math and
    no LaTeX command (``\\tfrac``) left in the text outside code, and no backtick or role inside
    a formula MathJax typeset (a formula the Markdown parser cut apart);
  * show under its cells no bare ``True`` / ``False`` / ``None`` (a cell's last expression), nor
    one as a table cell or a bold or italic word ("Kernel in use: **True**"), no warning or
    traceback printed to stderr, and no path of the machine that built it (this checkout, the
    Python installation, the home folder, ``/tmp/...``, ``site-packages``);
  * show no text about the build itself (a chapter's compute time, "s wall", "s CPU", the
    book's time budget);
  * on a chapter page (``NN_subject.html``): give every table a caption (a results table:
    ``lib.book.notebook.table(..., caption=...)``; a Markdown table: the ``{table}`` directive),
    show no visible code cell longer than :data:`MAX_CELL_LINES` lines (bookkeeping is folded,
    ``hide-input``), and leave no raw TeX in a figure or table caption (``n^{-1/2}``, ``\nu_W``,
    ``ν_W``: math in a caption is written ``$...$``);
  * render every table in a cell's output with ``lib.book.notebook.table`` (a ``div.rnnbook-table``:
    built from data, so no cell can break a row) with its cross-references resolved;
  * fit the content column at a 1,400 x 900 window: no element reaches past the column's right
    edge, and no box that scrolls sideways hides part of its content (a table, a code line);
  * show at most one search box, and, on a chapter page (``NN_subject.html``), link its
    jupytext source ``_sources/.../NN_subject.md`` (the download menu).
At a phone's 390 x 844 window every page is opened again and must break no word of its code
or tables in the middle (an identifier is split only at ``_``, ``.`` or ``/``, never between
two letters).
In addition every internal link (``<a href>`` to a local file, with its ``#fragment``) must
resolve to an existing page and anchor; this part is checked on the HTML source.

Exit status 0 when every page passes; otherwise the problems are printed and the status is 1.
Chromium is looked for in $CHROMIUM, then /usr/bin/chromium; a missing browser is an error,
never a skip.
"""
from __future__ import annotations

import os
import re
import shutil
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

CHAPTER = re.compile(r"^\d\d_\w+\.html$")   # a chapter page: it offers its jupytext .md source
SKIP_DIRS = {"_static", "_sources", "_images", "mathjax", "_downloads"}
LOCAL_HOSTS = {"localhost", "127.0.0.1", "[::1]", "::1"}
WINDOW = (1400, 900)      # the reader's window: every page must fit its content column at this size
PHONE = (390, 844)        # a phone's window: no word of code or of a table broken in the middle
MAX_CELL_LINES = 30       # the longest code cell a reader is shown unfolded
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions",
]

PAGE_PROBE = r"""
async (machineRoots) => {
  const out = {};
  if (window.MathJax && window.MathJax.startup && window.MathJax.startup.promise) {
    await window.MathJax.startup.promise;
    out.mathjax = true;
  } else {
    out.mathjax = false;
  }
  const imgs = [...document.images];
  imgs.forEach(img => { img.loading = "eager"; });
  await Promise.all(imgs.map(img => img.complete ? null :
      new Promise(r => { img.addEventListener("load", r); img.addEventListener("error", r); })));
  out.brokenImages = imgs.filter(img => !(img.complete && img.naturalWidth > 0))
                         .map(img => img.getAttribute("src"));
  const mathNodes = [...document.querySelectorAll(".math")];
  out.mathNodes = mathNodes.length;
  out.untypeset = mathNodes.filter(el => !el.querySelector("mjx-container"))
                           .map(el => el.textContent.trim().slice(0, 60));
  out.mathErrors = document.querySelectorAll("mjx-merror, [data-mjx-error]").length;
  const clone = document.body.cloneNode(true);
  clone.querySelectorAll("pre, code, script, style, textarea, mjx-container, mjx-assistive-mml")
       .forEach(el => el.remove());
  const text = clone.textContent;
  out.rawDelimiters = ["$$", "\\[", "\\("].filter(d => text.includes(d));
  // Markdown that reached the page as text: pipe tables, MyST roles, inline $...$ math
  out.rawTables = [...clone.querySelectorAll("p")]
      .filter(p => /^\s*\|/.test(p.textContent) && (p.textContent.match(/\|/g) || []).length >= 4)
      .map(p => p.textContent.trim().slice(0, 60));
  out.rawRoles = (text.match(/\{[a-zA-Z][\w:+-]*\}`[^`]*`/g) || []).slice(0, 5);
  out.rawInlineMath = (text.match(/\$[^$\s][^$\n]{0,80}?\$/g) || []).slice(0, 5);
  // LaTeX that reached the page as text (a formula the Markdown parser broke, e.g. a line of it
  // read as a list item), and MyST markup that ended up inside a formula
  out.rawLatex = [...new Set(text.match(/\\[a-zA-Z]{2,}/g) || [])].slice(0, 5);
  out.mathWithMarkup = [];
  if (window.MathJax && MathJax.startup && MathJax.startup.document && MathJax.startup.document.math) {
    for (const item of MathJax.startup.document.math) {
      const tex = String(item.math);
      if (/`|\{[a-zA-Z][\w:+-]*\}`/.test(tex)) out.mathWithMarkup.push(tex.replace(/\s+/g, " ").slice(0, 80));
    }
  }
  // cell outputs a reader should not see: a bare True / False / None (a cell's last expression),
  // a warning printed to stderr, a path of the machine the book was built on
  const outputs = [...document.querySelectorAll(".cell_output .output")];
  out.bareValues = outputs.filter(o => o.classList.contains("text_plain") &&
      /^(True|False|None)$/.test(o.textContent.trim())).map(o => o.textContent.trim());
  // ... nor as a table cell or an emphasised word of the text ("Kernel in use: **True**")
  out.bareWords = [...document.querySelectorAll("article td, article th, article strong, article em, article b")]
      .filter(el => !el.closest(".cell_input") && /^(True|False|None)$/.test(el.textContent.trim()))
      .map(el => `${el.tagName.toLowerCase()} «${el.textContent.trim()}» in «` +
           (el.closest("tr, p, li") || el).textContent.trim().replace(/\s+/g, " ").slice(0, 60) + "»");
  // tables and their captions: every table of a chapter is numbered and captioned; a caption's
  // math is typeset (no TeX or "ν_W" left as text)
  const article = document.querySelector("article.bd-article") || document.body;
  out.uncaptioned = [...article.querySelectorAll("table")].filter(t => !t.querySelector(":scope > caption"))
      .map(t => t.textContent.trim().replace(/\s+/g, " ").slice(0, 60));
  out.rawTexCaptions = [...article.querySelectorAll("figcaption, table > caption")].map(c => {
      const k = c.cloneNode(true);
      k.querySelectorAll("mjx-container, mjx-assistive-mml, code, .caption-number").forEach(e => e.remove());
      return k.textContent.replace(/\s+/g, " ").trim();
    }).filter(t => /[\^_]\{|\\[a-zA-Z]+|[A-Za-z\u0370-\u03ff]_[A-Za-z0-9]|[A-Za-z0-9)]\^[-\w{]/.test(t))
      .map(t => t.slice(0, 80));
  // code a reader must scroll past: the visible (unfolded) code cells and their lengths
  out.cellLines = [...document.querySelectorAll(".cell")].filter(c => !c.classList.contains("tag_hide-input") &&
      !c.classList.contains("tag_remove-input") && c.querySelector(".cell_input"))
      .map(c => (c.querySelector(".cell_input pre") || {textContent: ""}).textContent.replace(/\n$/, "").split("\n").length);
  out.warnings = outputs.filter(o => o.classList.contains("stderr") || o.classList.contains("traceback"))
      .map(o => o.textContent.trim()).filter(t => /Warning\b|^WARNING|Traceback/m.test(t)).map(t => t.slice(0, 100));
  const visible = document.body.cloneNode(true);
  visible.querySelectorAll(".cell_input, script, style, mjx-assistive-mml").forEach(el => el.remove());
  const vtext = visible.textContent;
  const pathRe = /(?:^|[\s"'(=:\[])(\/(?:home|root|tmp|work|Users|opt|var|srv|mnt|usr\/local|private)\/[^\s"'<>)\]]*)/g;
  out.machinePaths = [...new Set([...vtext.matchAll(pathRe)].map(m => m[1]))];
  if (/site-packages/.test(vtext)) out.machinePaths.push("site-packages");
  for (const p of (machineRoots || [])) if (p && vtext.includes(p)) out.machinePaths.push(p);
  out.machinePaths = [...new Set(out.machinePaths)].slice(0, 5);
  // the build itself is not the reader's business: compute times, the time budget
  const buildRe = /compute time|\d+(?:\.\d+)?\s*s (?:wall|CPU)\b|budget of the book|over the \d+-minute budget/gi;
  out.buildText = [...new Set(vtext.match(buildRe) || [])].slice(0, 5);
  // results tables: rendered from data by lib.book.notebook.table, cross-references resolved
  out.foreignTables = [...document.querySelectorAll(".cell_output table")]
      .filter(t => !t.closest(".rnnbook-table")).map(t => t.textContent.trim().replace(/\s+/g, " ").slice(0, 60));
  out.unresolved = [...document.querySelectorAll("a.rnnbook-xref")].map(a => a.getAttribute("data-target"));
  // geometry at the reader's window: nothing wider than the content column, nothing hidden
  // in a box that scrolls sideways
  const column = document.querySelector("article.bd-article") || document.querySelector("main") || document.body;
  const cstyle = getComputedStyle(column);
  const right = column.getBoundingClientRect().right - parseFloat(cstyle.paddingRight || "0") + 1;
  const describe = el => el.tagName.toLowerCase() + (typeof el.className === "string" && el.className.trim()
      ? "." + el.className.trim().split(/\s+/).slice(0, 2).join(".") : "") + " «" +
      (el.textContent || "").trim().replace(/\s+/g, " ").slice(0, 50) + "»";
  const scrollers = [];
  out.tooWide = [];
  out.clipped = [];
  for (const el of column.querySelectorAll("*")) {
    if (el.closest("mjx-assistive-mml")) continue;
    // MathJax's own parts are laid out inside their formula: the formula's box is measured
    if (el.tagName.startsWith("MJX-") && el.tagName !== "MJX-CONTAINER") continue;
    const st = getComputedStyle(el);
    if (st.display === "none" || st.visibility === "hidden") continue;
    if (scrollers.some(box => box.contains(el))) continue;      // inside a box already reported
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    // an inline formula's box is as wide as its typeset math (its scroll width counts MathJax's
    // hidden speech copy): it is measured against the column, not as a box that scrolls; a
    // displayed formula that scrolls sideways is reported as hiding its end
    const formula = el.matches("span.math") || (el.tagName === "MJX-CONTAINER" && el.getAttribute("display") !== "true");
    if (!formula && ["auto", "scroll", "hidden", "clip"].includes(st.overflowX) && el.scrollWidth > el.clientWidth + 1) {
      scrollers.push(el);                 // reported once; what it hides is not reported again
      out.clipped.push(`${describe(el)} shows ${el.clientWidth} of ${el.scrollWidth} px`);
      continue;
    }
    if (r.right > right) out.tooWide.push(`${describe(el)} reaches ${Math.round(r.right - right)} px past the column`);
  }
  out.tooWide = out.tooWide.slice(0, 5);
  out.clipped = out.clipped.slice(0, 5);
  // search fields the page displays (the theme's header and sidebar each can hold one)
  out.searchFields = [...document.querySelectorAll(".search-button-field")]
      .filter(el => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== "hidden").length;
  out.mdSources = [...document.querySelectorAll("a[href]")].map(a => a.getAttribute("href"))
      .filter(h => /_sources\/.*\.md$/.test(h));
  return out;
}
"""


PHONE_PROBE = r"""
() => {
  // a word of code or of a table that the layout breaks between two of its letters or digits
  const out = [];
  const range = document.createRange();
  const roots = [...document.querySelectorAll("article pre, article code, article td, article th")]
      .filter(el => !el.parentElement.closest("pre, code, td, th"));
  for (const root of roots) {
    if (root.getClientRects().length === 0) continue;
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    let node;
    while ((node = walker.nextNode()) && out.length < 5) {
      if (node.parentElement.closest("mjx-container, mjx-assistive-mml, script, style")) continue;
      const re = /[A-Za-z0-9]{4,}/g;
      let m;
      while ((m = re.exec(node.data)) && out.length < 5) {
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const tops = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (tops.size > 1) out.push(m[0]);
      }
    }
    if (out.length >= 5) break;
  }
  return out;
}
"""


HIDDEN_TAGS = {"hide-input", "remove-input", "remove-cell"}


def source_cells(md: Path) -> list[tuple[int, bool]]:
    """(lines, shown) of every code cell of a chapter's jupytext source: ``shown`` is False for a
    cell whose input is folded or removed (``hide-input``, ``remove-input``, ``remove-cell``)."""
    import jupytext

    out = []
    for cell in jupytext.read(md).cells:
        if cell.cell_type != "code":
            continue
        tags = set(cell.metadata.get("tags", []))
        out.append((len(cell.source.rstrip("\n").split("\n")) if cell.source.strip() else 0,
                    not (tags & HIDDEN_TAGS)))
    return out


def source_stats(mds) -> dict[str, dict]:
    """Per chapter: the visible code lines a reader scrolls past, the visible cells, the longest
    one, and the cells over :data:`MAX_CELL_LINES` lines (measured on the sources)."""
    out = {}
    for md in sorted(Path(m) for m in mds):
        cells = source_cells(md)
        shown = [n for n, vis in cells if vis]
        out[md.stem] = {"visible_lines": sum(shown), "visible_cells": len(shown), "longest": max(shown, default=0),
                        "over_limit": sum(n > MAX_CELL_LINES for n in shown), "all_lines": sum(n for n, _ in cells)}
    return out


def machine_roots() -> list[str]:
    """Folders of the machine that builds the book, which no page may show: this checkout, the
    Python installation, the user's home."""
    out = {str(Path(__file__).resolve().parent.parent), sys.prefix, sys.base_prefix, str(Path.home())}
    return sorted(p for p in out if p not in ("", "/"))


class _Anchors(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.redirect: str | None = None   # target of a <meta http-equiv="refresh">

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "meta" and (a.get("http-equiv") or "").lower() == "refresh":
            m = re.search(r"url=(.+)$", a.get("content") or "", re.I)
            if m:
                self.redirect = m.group(1).strip().strip("'\"")
                self.links.append(self.redirect)
        for key in ("id", "name"):
            if a.get(key):
                self.ids.add(a[key])
        if tag == "a" and a.get("href") is not None:
            self.links.append(a["href"])


def pages(root: Path) -> list[Path]:
    out = []
    for p in sorted(root.rglob("*.html")):
        rel = p.relative_to(root)
        if rel.parts and rel.parts[0] in SKIP_DIRS:
            continue
        out.append(p)
    return out


def check_links(root: Path, page_list: list[Path]) -> list[str]:
    """Every local ``<a href>`` resolves to an existing file and, if given, anchor."""
    parsed: dict[Path, _Anchors] = {}

    def parse(p: Path) -> _Anchors:
        if p not in parsed:
            a = _Anchors()
            a.feed(p.read_text(errors="replace"))
            parsed[p] = a
        return parsed[p]

    problems = []
    for page in page_list:
        for href in parse(page).links:
            parts = urlsplit(href)
            if parts.scheme or parts.netloc or href.startswith(("mailto:", "javascript:")):
                continue  # links to other sites are allowed; they are never fetched by a page
            target = page if not parts.path else (page.parent / unquote(parts.path)).resolve()
            rel = page.relative_to(root)
            if not parts.path and not parts.fragment:
                continue
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                problems.append(f"{rel}: broken link {href!r} (no file {target})")
                continue
            if parts.fragment and target.suffix == ".html":
                if unquote(parts.fragment) not in parse(target).ids:
                    problems.append(f"{rel}: broken link {href!r} (no anchor #{parts.fragment})")
    return problems


def find_chromium() -> str:
    for cand in (os.environ.get("CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"),
                 shutil.which("chromium-browser")):
        if cand and Path(cand).is_file():
            return cand
    raise RuntimeError("Chromium not found (set $CHROMIUM or install the Debian package 'chromium'); "
                       "the browser check cannot be skipped")


def check_pages(root: Path, page_list: list[Path], timeout_ms: int = 60_000) -> list[str]:
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=find_chromium(), args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": WINDOW[0], "height": WINDOW[1]})
        current: dict[str, str] = {"page": ""}

        def route(r):
            url = urlsplit(r.request.url)
            if url.scheme in ("http", "https", "ws", "wss") and url.hostname not in LOCAL_HOSTS:
                problems.append(f"{current['page']}: external request to {r.request.url}")
                r.abort()
            else:
                r.continue_()

        context.route("**/*", route)
        for path in page_list:
            rel = str(path.relative_to(root))
            current["page"] = rel
            page = context.new_page()
            page.on("console", lambda m, rel=rel: problems.append(f"{rel}: console {m.type}: {m.text}")
                    if m.type == "error" else None)
            page.on("pageerror", lambda e, rel=rel: problems.append(f"{rel}: JavaScript error: {e}"))

            def failed(req, rel=rel):
                url = urlsplit(req.url)
                if url.scheme in ("http", "https", "ws", "wss") and url.hostname not in LOCAL_HOSTS:
                    return  # already reported as an external request
                problems.append(f"{rel}: failed to load {req.url} ({req.failure})")

            page.on("requestfailed", failed)
            try:
                page.goto(path.resolve().as_uri(), wait_until="load", timeout=timeout_ms)
                info = page.evaluate(PAGE_PROBE, machine_roots())
            except Exception as exc:  # noqa: BLE001 - a page that cannot load is a problem
                problems.append(f"{rel}: could not be checked: {exc}")
                page.close()
                continue
            if info["mathNodes"] and not info["mathjax"]:
                problems.append(f"{rel}: {info['mathNodes']} math elements but MathJax did not load")
            for src in info["brokenImages"]:
                problems.append(f"{rel}: image did not load: {src}")
            for snippet in info["untypeset"][:5]:
                problems.append(f"{rel}: math not typeset by MathJax: {snippet!r}")
            if info["mathErrors"]:
                problems.append(f"{rel}: {info['mathErrors']} MathJax error node(s)")
            for d in info["rawDelimiters"]:
                problems.append(f"{rel}: raw math delimiter {d!r} left in the page text")
            for t in info["rawTables"]:
                problems.append(f"{rel}: a Markdown table left as text: {t!r}")
            for r in info["rawRoles"]:
                problems.append(f"{rel}: a MyST role left as text: {r!r}")
            for m in info["rawInlineMath"]:
                problems.append(f"{rel}: inline math left as text: {m!r}")
            for t in info["rawLatex"]:
                problems.append(f"{rel}: a LaTeX command left as text: {t!r}")
            for t in info["mathWithMarkup"]:
                problems.append(f"{rel}: Markdown or a MyST role inside a formula: {t!r}")
            for t in info["bareValues"]:
                problems.append(f"{rel}: a bare {t} printed under a cell (a cell's last expression)")
            for t in info["bareWords"]:
                problems.append(f"{rel}: a bare boolean shown to the reader: {t}")
            for t in info["buildText"]:
                problems.append(f"{rel}: text about the build on a reader's page: {t!r}")
            if CHAPTER.match(path.name):
                for t in info["uncaptioned"]:
                    problems.append(f"{rel}: a table without a caption (number and caption every table): {t!r}")
                long = [n for n in info["cellLines"] if n > MAX_CELL_LINES]
                if long:
                    problems.append(f"{rel}: {len(long)} visible code cell(s) longer than {MAX_CELL_LINES} lines "
                                    f"({', '.join(map(str, long))}): fold the bookkeeping (hide-input) or move it to lib.book")
            for t in info["rawTexCaptions"]:
                problems.append(f"{rel}: raw TeX in a caption (write its math as $...$): {t!r}")
            for t in info["warnings"]:
                problems.append(f"{rel}: a warning in the published page: {t!r}")
            for t in info["machinePaths"]:
                problems.append(f"{rel}: a path of the build machine in the page: {t!r}")
            for t in info["foreignTables"]:
                problems.append(f"{rel}: a table in a cell's output not rendered by lib.book.notebook.table: {t!r}")
            for t in info["unresolved"]:
                problems.append(f"{rel}: a cross-reference in a results table was not resolved: {t!r}")
            for t in info["tooWide"]:
                problems.append(f"{rel}: wider than the content column at {WINDOW[0]} px: {t}")
            for t in info["clipped"]:
                problems.append(f"{rel}: hidden beyond the content column at {WINDOW[0]} px: {t}")
            if info["searchFields"] > 1:
                problems.append(f"{rel}: {info['searchFields']} search boxes shown (one per page)")
            if CHAPTER.match(path.name) and not any(h.endswith(path.stem + ".md") for h in info["mdSources"]):
                problems.append(f"{rel}: no download link to the chapter's source {path.stem}.md")
            page.close()
        context.close()
        phone = browser.new_context(viewport={"width": PHONE[0], "height": PHONE[1]})
        phone.route("**/*", route)
        for path in page_list:
            rel = str(path.relative_to(root))
            current["page"] = rel
            page = phone.new_page()
            try:
                page.goto(path.resolve().as_uri(), wait_until="load", timeout=timeout_ms)
                broken = page.evaluate(PHONE_PROBE)
            except Exception as exc:  # noqa: BLE001
                problems.append(f"{rel}: could not be checked at {PHONE[0]} px: {exc}")
                page.close()
                continue
            for w in broken:
                problems.append(f"{rel}: a word broken in the middle at {PHONE[0]} px: {w!r}")
            page.close()
        phone.close()
        browser.close()
    return problems


def check_site(root: str | os.PathLike) -> list[str]:
    """All problems of the site at ``root`` (empty list: the site passes)."""
    root = Path(root).resolve()
    page_list = pages(root)
    if not page_list:
        return [f"{root}: no HTML pages found"]
    # a redirect page (jupyter-book's index.html) only navigates away: its target is checked
    # as a link and opened as a page of its own
    def is_redirect(p: Path) -> bool:
        a = _Anchors()
        a.feed(p.read_text(errors="replace"))
        return a.redirect is not None

    content = [p for p in page_list if not is_redirect(p)]
    return list(dict.fromkeys(check_links(root, page_list) + check_pages(root, content)))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--source":            # the page measure, on the chapters' sources
        stats = source_stats(argv[1:] or sorted((Path(__file__).resolve().parent.parent / "book").glob("[0-9][0-9]_*.md")))
        print(f"{'chapter':40} visible lines  cells  longest  over {MAX_CELL_LINES}  (all code lines)")
        for name, st in stats.items():
            print(f"{name:40} {st['visible_lines']:13d} {st['visible_cells']:6d} {st['longest']:8d} "
                  f"{st['over_limit']:8d}  ({st['all_lines']})")
        return 1 if any(st["over_limit"] for st in stats.values()) else 0
    root = Path(argv[0] if argv else Path(__file__).resolve().parent.parent / "_build" / "html")
    problems = check_site(root)
    n = len(pages(root.resolve()))
    if problems:
        print(f"browser check: {len(problems)} problem(s) in {root}:")
        for p in problems:
            print("  " + p)
        return 1
    print(f"browser check: {n} pages of {root} passed (offline, MathJax typeset, images, links, console)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
