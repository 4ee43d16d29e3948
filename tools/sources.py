"""The book's chapters and what each declares: where the sources are, the order of the table of
contents, what a chapter reads besides its source, and the digest of its inputs.

    chapters(), resolve(CH), title(src)      the chapters of _toc.yml, in reading order
    dependencies(src)                        its front matter's ``rnnbook:`` entry (stored runs,
                                             the other chapters' records or wall times it reads)
    prerequisites(srcs)                      which of ``srcs`` must be executed before each one
    lib_digest(), input_digest(src, lib)     what makes a chapter's record current
    to_notebook(src, dest)                   the jupytext source as a plain notebook

The paths below are read at call time (``sources.BUILD``, ...), so that a test can point the
whole executor at a book of its own.
"""
from __future__ import annotations

import hashlib
import os
import platform
import tempfile
from contextlib import contextmanager
from pathlib import Path

from tools.common import ROOT

BOOK = ROOT / "book"
BUILD = ROOT / "_build"
EXEC = BUILD / "exec"
LOCKS = BUILD / "locks"
TIMINGS = BUILD / "timings.json"
EXECUTOR = BUILD / "executor.json"
RESULTS = ROOT / "results"
MATHJAX = ROOT / ".cache" / "mathjax" / "mathjax" / "es5" / "tex-mml-chtml.js"


class BookError(RuntimeError):
    pass


# ----------------------------------------------------------------------------- chapters

def toc_files() -> list[str]:
    """Every document of _toc.yml, in reading order (root first), as sphinx-external-toc (the
    parser jupyter-book itself uses) reads it."""
    from sphinx_external_toc.parsing import parse_toc_yaml

    site = parse_toc_yaml(ROOT / "_toc.yml")
    out: list[str] = []

    def walk(docname: str) -> None:
        out.append(docname)
        for subtree in site[docname].subtrees:
            for item in subtree.items:
                if isinstance(item, str):            # a file (globs and URLs are not chapters)
                    walk(str(item))

    walk(site.root.docname)
    return out


def chapters() -> list[Path]:
    """Chapter sources (jupytext .md with a kernelspec) in table-of-contents order."""
    found = []
    for entry in toc_files():
        src = ROOT / (entry + ".md")
        if src.parent == BOOK and src.name[:2].isdigit() and src.is_file():
            found.append(src)
    return found


def resolve(ch: str) -> Path:
    """A chapter given as ``1``, ``01``, ``ch01``, ``01_linear_rnns_are_convolutions`` or a path."""
    cands = chapters()
    p = Path(ch)
    number = ch.removeprefix("ch").zfill(2) if ch.removeprefix("ch").isdigit() else None
    for src in cands:
        if ch in (src.stem, str(src), str(src.relative_to(ROOT))) or number == src.stem[:2] or p.resolve() == src:
            return src
    names = ", ".join(s.stem for s in cands)
    raise BookError(f"unknown chapter {ch!r}; chapters are: {names} (give the number, e.g. 1 or 01, or the name)")


def title(src: Path) -> str:
    """The chapter's title: the first level-1 heading of its source."""
    import re

    m = re.search(r"^# (.+)$", src.read_text(), re.M)
    return m[1].strip() if m else src.stem


# the packages whose versions can change a chapter's numbers
DIGEST_PACKAGES = ("torch", "numpy", "scipy", "sympy", "matplotlib")


def lib_digest() -> str:
    """SHA-256 of every file of lib/, of the experiment registry (book/experiments/*.toml, every
    chapter's settings and stored runs), of the claims ledgers (book/claims/*.toml, whose words the
    chapters' records carry) and of the Python and key package versions."""
    from importlib.metadata import PackageNotFoundError, version

    h = hashlib.sha256(platform.python_version().encode())
    for pkg in DIGEST_PACKAGES:
        try:
            h.update(f"{pkg}=={version(pkg)}".encode())
        except PackageNotFoundError:
            h.update(f"{pkg} missing".encode())
    for f in sorted([p for p in (ROOT / "lib").rglob("*") if p.suffix in (".py", ".c")]
                    + list((BOOK / "experiments").glob("*.toml")) + list((BOOK / "claims").glob("*.toml"))):
        h.update(str(f.relative_to(ROOT)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()



def dependencies(src: Path) -> dict:
    """What a chapter declares it reads besides its source and lib/, in its front matter::

        rnnbook:
          stored: [teacher, teacher_width]   # stored runs, results/NAME (make paper); or: all
          reads: [records]                   # the other chapters' fidelity records
          reads: [timings]                   # the other chapters' wall-time records
          page: wide                         # (for the HTML only: tools/book_html.py)

    Returns {"stored": [...], "reads": [...]} (empty lists when nothing is declared); an unknown
    key or value is a BookError naming the chapter."""
    import yaml

    text = src.read_text()
    front = yaml.safe_load(text.split("---", 2)[1]) if text.startswith("---") else {}
    declared = (front or {}).get("rnnbook") or {}
    if not isinstance(declared, dict) or set(declared) - {"stored", "reads", "page"} \
            or set(declared.get("reads", [])) - {"records", "timings"} or declared.get("page", "wide") != "wide":
        raise BookError(f"{src.name}: front matter 'rnnbook' may hold 'stored: [run names]', "
                        f"'reads: [records | timings]' and 'page: wide', got {declared!r}")
    stored = declared.get("stored", [])
    if stored == "all":
        from lib.book.artefacts import read_manifest

        runs = RESULTS / "runs"
        in_progress = {p.name for p in runs.iterdir() if p.is_dir()} if runs.is_dir() else set()
        stored = sorted({k.split("/", 1)[0] for k in read_manifest(RESULTS)} | in_progress)
    return {"stored": list(stored), "reads": list(declared.get("reads", []))}


def stored_digest(names) -> bytes:
    """The manifest lines of the stored runs ``names``, and the SHA-256 of every file of each
    one's run in progress (``results/runs/NAME/*.pt``: its checkpoints and finished groups, which
    the manifest does not list), so that a chapter is re-executed when a run it reads changes or
    advances, and only then."""
    from lib.book.artefacts import read_manifest
    from lib.data import sha256

    lines = read_manifest(RESULTS)
    out = []
    for name in sorted(names):
        files = sorted(k for k in lines if k.split("/", 1)[0] == name)
        out += [f"{lines[k]}  {k}" for k in files] or [f"{name}: not stored"]
        work = RESULTS / "runs" / name
        out += [f"{sha256(f)}  runs/{name}/{f.name}" for f in sorted(work.glob("*.pt"))] if work.is_dir() else []
    return "\n".join(out).encode()


def input_digest(src: Path, lib_hash: str) -> str:
    h = hashlib.sha256(src.read_bytes())
    h.update(lib_hash.encode())
    h.update(stored_digest(dependencies(src)["stored"]))
    return h.hexdigest()



def stage(src: Path) -> int:
    """0 for a chapter, 1 for an appendix that reads the chapters' fidelity records, 2 for one
    that reads the wall times (which include the record readers')."""
    reads = dependencies(src)["reads"]
    return 2 if "timings" in reads else 1 if "records" in reads else 0


def run_order(srcs: list[Path]) -> list[Path]:
    """Chapters first, then the appendices that read their records, then those that read the
    wall times: the order of a serial execution."""
    return sorted(srcs, key=stage)


def prerequisites(srcs: list[Path]) -> dict[Path, set[Path]]:
    """For each of ``srcs``, those of ``srcs`` that must have finished before it starts: nothing
    for a chapter (the chapters are independent), every chapter for an appendix that reads their
    records, every chapter and record reader for an appendix that reads the wall times."""
    stages = {src: stage(src) for src in srcs}
    return {src: {other for other in srcs if stages[other] < stages[src]} for src in srcs}


def to_notebook(src: Path, dest: Path) -> None:
    import jupytext

    nb = jupytext.read(src)
    # a plain notebook: without jupytext's pairing metadata ("formats": "md:myst") the executed
    # and downloadable .ipynb opens in any Jupyter as itself
    nb.metadata.pop("jupytext", None)
    nb.metadata.setdefault("kernelspec", {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"})
    nb.metadata["kernelspec"]["name"] = "python3"
    dest.parent.mkdir(parents=True, exist_ok=True)
    jupytext.write(nb, dest, fmt="ipynb")


@contextmanager
def as_notebook(src: Path, purpose: str):
    """The chapter's source converted into a notebook of a name of its own in ``EXEC``
    (``NN_subject.PURPOSE.XXXX.ipynb``), removed on leaving: two processes that read or execute
    the same chapter never share a working file."""
    EXEC.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=EXEC, prefix=f"{src.stem}.{purpose}.", suffix=".ipynb")
    os.close(fd)
    path = Path(name)
    try:
        to_notebook(src, path)
        yield path
    finally:
        path.unlink(missing_ok=True)
