"""The book's command line: execute the chapters with papermill and build the HTML book.

    python -m tools.book execute [--force] [-j N] [CH ...]   execute changed chapters (all by default)
    python -m tools.book build [--strict] [-j N]             execute, then jupyter-book build -> _build/html
    python -m tools.book chapter CH [-p NAME VALUE]... [-f params.yaml] [--dry-run]
                                                      re-execute one chapter with other parameters
                                                      into _build/chapters/ (notebook + its page,
                                                      rendered by jupyter-book as in the book);
                                                      every value is checked against the range its
                                                      parameter declares before anything runs
    python -m tools.book chapter CH --parameters      the chapter's parameters, types, ranges, defaults
    python -m tools.book list                         the chapters and their titles, in order

CH is the chapter's number (``1``, ``01``) or name.  ``-j N`` executes up to N chapters at once
(default: the number of cores); the appendices that read the chapters' records or wall times
start after what they read.

A *chapter* is a jupytext MyST notebook ``book/NN_subject.md`` listed in ``_toc.yml``.  Its
executed copy ``book/NN_subject.ipynb`` (git-ignored) is what jupyter-book renders; the
``.md`` sources are excluded in ``_config.yml`` and ``execute_notebooks`` is off, so the
book is built from exactly the notebooks papermill produced, with no second execution.

The work is split by job:

    tools/sources.py      the chapters, what each declares it reads, the digest of its inputs
    tools/parameters.py   a chapter's parameters cell: names, types, ranges, and their check
    tools/kernel.py       papermill and the kernel (environment, sockets, complete cells)
    tools/execute.py      the build's execution, several chapters at once, with records and locks
    tools/render.py       jupyter-book: the whole book, or one re-executed chapter's page
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tools.common import ROOT, parse_value  # noqa: F401  (re-exported)
from tools.execute import (  # noqa: F401  (re-exported: the executor's public names)
    chapter_lock, default_jobs, execute, file_sha256, read_json, read_timings, rebuild_timings, timings_seen,
    write_json)
from tools.kernel import incomplete_cells, kernel_env, remove_stale_ipc_folders, run_papermill  # noqa: F401
from tools.parameters import (  # noqa: F401
    check_parameters, conforms, declared, declared_parameters, declared_ranges, declared_types, parameters_table)
from tools.render import build_chapter_page, build_html, run_chapter  # noqa: F401
from tools.sources import (  # noqa: F401  (the paths, to read: tools.sources holds them)
    BOOK, BUILD, EXEC, MATHJAX, RESULTS, TIMINGS, BookError, chapters, dependencies, input_digest, lib_digest, prerequisites, resolve, run_order, stored_digest,
    title, to_notebook)


def jobs_argument(text: str) -> int:
    """``-j N``: a whole number ≥ 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"-j must be a whole number ≥ 1 (chapters executed at once), got {text!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.book", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("execute", help="execute changed chapters with papermill")
    e.add_argument("chapters", nargs="*")
    e.add_argument("--force", action="store_true", help="re-execute even if unchanged")
    e.add_argument("-j", "--jobs", type=jobs_argument, default=None,
                   help=f"chapters executed at once (default: the number of cores, {default_jobs()} here)")
    b = sub.add_parser("build", help="execute changed chapters, then build the HTML book")
    b.add_argument("--strict", action="store_true", help="warnings are errors (-W -n --keep-going)")
    b.add_argument("--force", action="store_true")
    b.add_argument("-j", "--jobs", type=jobs_argument, default=None,
                   help=f"chapters executed at once (default: the number of cores, {default_jobs()} here)")
    c = sub.add_parser("chapter", help="re-execute one chapter with other parameters")
    c.add_argument("chapter", help="chapter number (01) or name")
    c.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    c.add_argument("-f", "--parameters-file", help="YAML file of parameters")
    c.add_argument("--parameters", action="store_true", help="list the chapter's parameters and their ranges")
    c.add_argument("--dry-run", action="store_true", help="check the parameters, execute nothing")
    sub.add_parser("list", help="list the chapters")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "list":
            for src in chapters():
                print(f"{src.stem[:2]}  {title(src)}  ({src.relative_to(ROOT)})")
        elif args.cmd == "execute":
            execute(args.chapters, force=args.force, jobs=args.jobs)
        elif args.cmd == "build":
            t0 = time.perf_counter()
            execute(force=args.force, jobs=args.jobs)
            build_html(strict=args.strict)
            print(f"[book] total {time.perf_counter() - t0:.1f} s", flush=True)
        elif args.cmd == "chapter":
            import yaml

            params = {}
            if args.parameters_file:
                f = Path(args.parameters_file)
                try:
                    loaded = yaml.safe_load(f.read_text())
                except OSError as exc:
                    raise BookError(f"parameters file {f}: cannot be read ({exc.strerror or exc})") from exc
                except yaml.YAMLError as exc:
                    raise BookError(f"parameters file {f}: not valid YAML ({exc})") from exc
                if loaded is not None and not isinstance(loaded, dict):
                    raise BookError(f"parameters file {f}: must be a mapping NAME: VALUE, got "
                                    f"{type(loaded).__name__}")
                params.update(loaded or {})
            for name, value in args.parameter:
                params[name] = parse_value(value)
            if args.parameters:
                print(parameters_table(resolve(args.chapter)))
            else:
                run_chapter(args.chapter, params, dry_run=args.dry_run)
    except BookError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
