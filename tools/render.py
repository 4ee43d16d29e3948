"""Render the book, or one chapter re-executed with other parameters, with jupyter-book.

    build_html(strict)              _build/html from the executed notebooks (no second execution)
    run_chapter(CH, params)         ``make chapter``: execute one chapter with ``params`` into
                                    _build/chapters/ and render its page as the book renders it

``run_chapter`` executes into ``_build/chapters/NN_subject.running.ipynb`` and renders the page
from that complete notebook in a folder of its own; only then do the notebook and the page
replace the previous ones, and ``_build/chapters/NN_subject.json`` records the parameters and the
SHA-256 of the notebook the page shows (removed just before the swap, so a pair without it is not
a result).  It holds the chapter's lock (:func:`tools.execute.chapter_lock`) from the start of the
execution to the record, so two ``make chapter`` (or one and ``make book``) of the same chapter
never publish a mixed result: the second is refused in one line naming the first.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tools import kernel, sources
from tools.execute import chapter_lock, file_sha256, write_json
from tools.parameters import check_parameters, declared_parameters
from tools.sources import BookError


def build_html(strict: bool = False) -> Path:
    missing = [s.stem for s in sources.chapters() if not s.with_suffix(".ipynb").is_file()]
    if missing:
        raise BookError(f"not executed yet: {', '.join(missing)} (run `python tools/book.py execute`)")
    if not sources.MATHJAX.is_file():
        raise BookError(f"MathJax is not installed at {sources.MATHJAX}; run `make mathjax` (npm) first")
    cmd = [sys.executable, "-m", "jupyter_book", "build", str(sources.ROOT), "--builder", "html"]
    if strict:
        cmd += ["-W", "-n", "--keep-going"]
    jb = Path(sys.executable).with_name("jupyter-book")
    if jb.is_file():
        cmd = [str(jb)] + cmd[3:]
    print("[book] " + " ".join(cmd), flush=True)
    res = subprocess.run(cmd, cwd=sources.ROOT)
    if res.returncode != 0:
        raise BookError(f"jupyter-book build failed (exit {res.returncode})")
    index = sources.BUILD / "html" / "index.html"
    print(f"[book] the book is at {index}", flush=True)
    return index


# ----------------------------------------------------------------------------- one chapter

def run_chapter(ch: str, params: dict, dry_run: bool = False) -> Path:
    """Execute chapter ``ch`` with ``params`` into ``_build/chapters/`` and render its page.

    The notebook is executed into ``NN_subject.running.ipynb``; only a complete one (every code
    cell ran, no error) is rendered, in a folder of its own, and only when the page is built do
    the notebook and the page replace the previous ones.  The record ``NN_subject.json`` (the
    parameters and the SHA-256 of the notebook the page shows) is removed just before that swap
    and written after it, so a pair without a record is not a result.  A failed or interrupted
    run leaves the previous notebook, page and record as they were, and its own notebook in
    ``_build/chapters/failed/``.  With ``dry_run`` the parameters are checked and nothing runs."""
    src = sources.resolve(ch)
    out_dir = sources.BUILD / "chapters"
    out = out_dir / (src.stem + ".ipynb")
    record = out_dir / (src.stem + ".json")
    if params:            # names, types and ranges checked before anything runs or is announced
        with sources.as_notebook(src, "check") as work:
            check_parameters(src, params, work)
    if dry_run:
        print(f"[book] {src.stem}: parameters {params or '(defaults)'} accepted; not executed (--dry-run)",
              flush=True)
        return out
    from lib.storage import LockHeld

    lock = chapter_lock(src)
    try:
        lock.acquire()
    except LockHeld as exc:
        raise BookError(f"{src.stem} not executed: {exc}") from None
    try:
        print(f"[book] {src.stem}: executing with parameters {params or '(defaults)'}", flush=True)
        out_dir.mkdir(parents=True, exist_ok=True)
        kernel.remove_stale_ipc_folders()
        partial = out_dir / (src.stem + ".running.ipynb")
        partial.unlink(missing_ok=True)
        failed = out_dir / "failed" / out.name
        try:
            wall = kernel.run_papermill(src, partial, params)
        except BookError:
            raise
        except BaseException as exc:            # an error in a cell, or Ctrl-C: keep what ran, aside
            where = "(nothing was executed)"
            if partial.is_file():
                failed.parent.mkdir(parents=True, exist_ok=True)
                partial.replace(failed)
                where = f"the executed notebook with the error is {failed}"
            kept = f"; the previous result {out} is unchanged" if out.is_file() else ""
            if not isinstance(exc, Exception):
                print(f"[book] {src.stem}: interrupted; {where}{kept}", file=sys.stderr, flush=True)
                raise
            raise BookError(f"{src.stem} failed; {where}{kept}\n{exc}") from exc
        bad = kernel.incomplete_cells(partial)
        if bad:
            failed.parent.mkdir(parents=True, exist_ok=True)
            partial.replace(failed)
            raise BookError(f"{src.stem}: papermill returned but cells {bad} did not complete; "
                            f"notebook left at {failed}")
        print(f"[book] {src.stem}: executed in {wall:.1f} s; rendering its page with the book's configuration",
              flush=True)
        staging = build_chapter_page(src, partial, params)
        notebook_sha256 = file_sha256(partial)
        # the swap: no record while the pair is being replaced, so a run killed here leaves no record
        record.unlink(missing_ok=True)
        site = out_dir / src.stem
        shutil.rmtree(site, ignore_errors=True)
        os.replace(staging, site)
        os.replace(partial, out)
        html = site / "_build" / "html" / "book" / (src.stem + ".html")
        write_json(record, {"chapter": src.stem, "parameters": params, "notebook_sha256": notebook_sha256,
                            "page": html.relative_to(sources.BUILD).as_posix(), "seconds": round(wall, 2)})
        print(f"[book] notebook: {out}\n[book] page:     {html}", flush=True)
    finally:
        lock.release()
    return out


def build_chapter_page(src: Path, nb: Path, params: dict) -> Path:
    """Render a re-executed chapter as the book renders it: jupyter-book, the book's _config.yml,
    the notation page and the bibliography, in a small book of its own under
    _build/chapters/NN_subject/ (theorems, citations, numbered equations, offline MathJax), with
    the chapter's number in the book, references to other chapters resolved against the book's
    build (``_build/html``; unresolved, a warning, where there is none) and a banner naming the
    parameters that differ from the defaults (tools/chapter_page.py).  The page is
    built in ``NN_subject.building/``, which is returned once complete (the caller puts it in
    place)."""
    staging = sources.BUILD / "chapters" / (src.stem + ".building")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "book").mkdir(parents=True)
    for name in ("references.bib", ".cache", "tools", "lib"):   # lib: the code listings
        if (sources.ROOT / name).exists():
            (staging / name).symlink_to(sources.ROOT / name)
    # the book's configuration, with the chapter's number, the parameters that differ from its
    # defaults and the book's own build for cross-references (tools/chapter_page.py)
    from tools import chapter_page

    number = chapter_page.chapter_number(src.stem)
    defaults = declared_parameters(nb)
    (staging / "_config.yml").write_text(chapter_page.staging_config(
        sources.ROOT / "_config.yml", f"book/{src.stem}", number, chapter_page.changed_parameters(params, defaults),
        defaults, sources.BUILD / "html", sources.BUILD / ".doctrees" / "environment.pickle"))
    (staging / "book" / src.name).symlink_to(src)          # the .md source, offered for download
    for name in ("notation.md", "bibliography.md"):
        (staging / "book" / name).symlink_to(sources.BOOK / name)
    shutil.copy(nb, staging / "book" / (src.stem + ".ipynb"))
    shown = ", ".join(f"{k} = {v!r}" for k, v in params.items()) or "the defaults"
    (staging / "book" / "index.md").write_text(
        f"# {src.stem}: re-executed\n\nThis is the chapter `{src.name}` executed by `make chapter` with "
        f"{shown}, rendered with the book's configuration. The book itself is in `_build/html`.\n")
    (staging / "_toc.yml").write_text(
        "format: jb-book\nroot: book/index\nparts:\n"
        f"  - caption: Re-executed chapter\n{'    numbered: true' + chr(10) if number else ''}"
        f"    chapters:\n      - file: book/{src.stem}\n"
        "  - caption: Front matter and references\n    chapters:\n      - file: book/notation\n"
        "      - file: book/bibliography\n")
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = ([str(jb)] if jb.is_file() else [sys.executable, "-m", "jupyter_book"]) + [
        "build", str(staging), "--builder", "html", "--quiet"]
    res = subprocess.run(cmd, cwd=staging, capture_output=True, text=True)
    if res.returncode != 0 or not (staging / "_build" / "html" / "book" / (src.stem + ".html")).is_file():
        raise BookError(f"rendering {src.stem} failed (jupyter-book exit {res.returncode}); the previous page "
                        f"is unchanged:\n{(res.stdout + res.stderr)[-3000:]}")
    return staging

