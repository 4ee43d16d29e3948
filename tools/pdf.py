"""The whole book as one PDF, built offline: ``make pdf``.

    python -m tools.pdf [--out _build/pdf/rnnbook.pdf]

jupyter-book renders the executed chapters (``book/NN_subject.ipynb``, written by ``make book``)
as one HTML page (Sphinx's ``singlehtml`` builder, the book's own configuration and stylesheet,
MathJax served from the build), and the local Chromium prints that page to PDF once MathJax has
typeset every formula and every image has loaded -- the same browser the browser check uses, so
nothing is fetched from another host.  The print styles of ``tools/static/rnnbook.css`` keep
figures with their captions, let code and tables break across pages and leave out the page's
controls.  A chapter that is not executed yet is an error naming it (run ``make book`` first).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "_build"
OUT = BUILD / "pdf" / "rnnbook.pdf"


class PdfError(RuntimeError):
    pass


def build_singlehtml(root: Path = ROOT) -> Path:
    """The book as one HTML page (``_build/singlehtml/index.html``), from the executed notebooks."""
    from tools import book

    missing = [s.stem for s in book.chapters() if not s.with_suffix(".ipynb").is_file()]
    if missing:
        raise PdfError(f"not executed yet: {', '.join(missing)} (run `make book` first)")
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = ([str(jb)] if jb.is_file() else [sys.executable, "-m", "jupyter_book"]) + [
        "build", str(root), "--builder", "singlehtml"]
    print("[pdf] " + " ".join(cmd), flush=True)
    res = subprocess.run(cmd, cwd=root)
    index = root / "_build" / "singlehtml" / "index.html"
    if res.returncode != 0 or not index.is_file():
        raise PdfError(f"jupyter-book singlehtml build failed (exit {res.returncode})")
    # jupyter-book's index.html only redirects to the root document, which holds the whole book
    import re

    m = re.search(r'url=([^"\'>\s]+)', index.read_text(), re.I)
    page = index.parent / m[1] if m else index
    if not page.is_file():
        raise PdfError(f"the single page {page} is missing")
    # Sphinx writes that page's links (_static/, _images/) as if it stood at the build's root,
    # where the root document is in a folder (book/intro): it is printed from there
    single = index.parent / "rnnbook.html"
    single.write_text(page.read_text())
    return single


def print_pdf(page: Path, out: Path, timeout_ms: int = 600_000) -> Path:
    """Print the HTML ``page`` (opened from disk) to the PDF ``out`` with the local Chromium, after
    MathJax has typeset the page and its images have loaded; nothing from another host is fetched
    (such a request is aborted and the print fails)."""
    from playwright.sync_api import sync_playwright

    from tools.browser_check import CHROMIUM_ARGS, LOCAL_HOSTS, find_chromium

    from urllib.parse import urlsplit

    external: list[str] = []
    failed: list[str] = []
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(".partial.pdf")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=find_chromium(), args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1200, "height": 900})

        def route(r):
            url = urlsplit(r.request.url)
            if url.scheme in ("http", "https", "ws", "wss") and url.hostname not in LOCAL_HOSTS:
                external.append(r.request.url)
                r.abort()
            else:
                r.continue_()

        context.route("**/*", route)
        tab = context.new_page()
        # (the single page has no search index: the theme's request for it is no missing content)
        tab.on("requestfailed", lambda req: failed.append(f"{req.url} ({req.failure})")
               if urlsplit(req.url).scheme == "file" and not req.url.endswith("/searchindex.js") else None)
        tab.set_default_timeout(timeout_ms)
        tab.goto(page.resolve().as_uri(), wait_until="load", timeout=timeout_ms)
        tab.evaluate("""async () => {
          if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
          const imgs = [...document.images];
          imgs.forEach(img => { img.loading = "eager"; });
          await Promise.all(imgs.map(img => img.complete ? null :
              new Promise(r => { img.addEventListener("load", r); img.addEventListener("error", r); })));
          document.querySelectorAll("details").forEach(d => { d.open = false; });
        }""")
        tab.emulate_media(media="print")
        tab.pdf(path=str(partial), format="A4", print_background=True, outline=True, tagged=True,
                margin={"top": "16mm", "bottom": "16mm", "left": "14mm", "right": "14mm"})
        browser.close()
    if external or failed:
        partial.unlink(missing_ok=True)
        if external:
            raise PdfError(f"{page}: requests to other hosts while printing: {', '.join(external[:3])}")
        raise PdfError(f"{page}: {len(failed)} resource(s) did not load: {', '.join(failed[:3])}")
    partial.replace(out)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tools/pdf.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(OUT), help="the PDF to write")
    args = ap.parse_args(argv)
    try:
        t0 = time.perf_counter()
        index = build_singlehtml()
        out = print_pdf(index, Path(args.out))
        print(f"[pdf] {out} ({out.stat().st_size / 1e6:.1f} MB) in {time.perf_counter() - t0:.0f} s", flush=True)
    except (PdfError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
