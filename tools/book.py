"""Execute the book's chapters with papermill and build the HTML book.

    python tools/book.py execute [--force] [CH ...]   execute changed chapters (all by default)
    python tools/book.py build [--strict]             execute, then jupyter-book build -> _build/html
    python tools/book.py chapter CH [-p NAME VALUE]... [-f params.yaml] [--dry-run]
                                                      re-execute one chapter with other parameters
                                                      into _build/chapters/ (notebook + its page,
                                                      rendered by jupyter-book as in the book);
                                                      every value is checked against the range its
                                                      parameter declares before anything runs
    python tools/book.py chapter CH --parameters      the chapter's parameters, types, ranges, defaults
    python tools/book.py list                         the chapters and their titles, in order

CH is the chapter's number (``1``, ``01``) or name.

A *chapter* is a jupytext MyST notebook ``book/NN_subject.md`` listed in ``_toc.yml``.  Its
executed copy ``book/NN_subject.ipynb`` (git-ignored) is what jupyter-book renders; the
``.md`` sources are excluded in ``_config.yml`` and ``execute_notebooks`` is off, so the
book is built from exactly the notebooks papermill produced, with no second execution.

A chapter is re-executed only when its inputs changed: the SHA-256 of its ``.md`` source, of
every file of ``lib/`` and of the Python and key package versions is stored in ``_build/exec/NN_subject.json`` together with the
measured wall time and the SHA-256 of the notebook it published; the Reproducibility appendix
reads those records.  A notebook is published only if it is the one its record names: a
notebook from elsewhere, or one whose outputs were edited, is executed again.  A chapter is
executed into ``_build/exec/NN_subject.running.ipynb`` and renamed into place only when every
code cell ran without error; its record is removed before it runs and written (atomically) after
the rename, so an interrupted or killed run is executed again next time, and a notebook with a
cell that never ran is never taken as current.  A record or ``_build/timings.json`` that cannot
be read is reported in one line and treated as absent.

``chapter`` executes into ``_build/chapters/NN_subject.running.ipynb`` and renders the page from
that complete notebook in a folder of its own; only then do the notebook and the page replace the
previous ones, and ``_build/chapters/NN_subject.json`` records the parameters and the SHA-256 of
the notebook the page shows (removed just before the swap, so a pair without it is not a result).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import tempfile
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from tools.common import ROOT, cpu_model, machine_description, parse_value  # noqa: F401  (re-exported)

BOOK = ROOT / "book"
BUILD = ROOT / "_build"
EXEC = BUILD / "exec"
TIMINGS = BUILD / "timings.json"
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
    """SHA-256 of every file of lib/, of the claims ledgers (book/claims/*.toml, whose words the
    chapters' records carry) and of the Python and key package versions."""
    from importlib.metadata import PackageNotFoundError, version

    h = hashlib.sha256(platform.python_version().encode())
    for pkg in DIGEST_PACKAGES:
        try:
            h.update(f"{pkg}=={version(pkg)}".encode())
        except PackageNotFoundError:
            h.update(f"{pkg} missing".encode())
    for f in sorted([p for p in (ROOT / "lib").rglob("*") if p.suffix in (".py", ".c")]
                    + list((BOOK / "claims").glob("*.toml"))):
        h.update(str(f.relative_to(ROOT)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()


_REPORTED: set[str] = set()


def read_json(path: Path, what: str):
    """The JSON content of a build record (a dict), or None when it is absent -- or unreadable:
    a corrupt record is reported in one line (once per process) and treated as absent, so that
    the build carries on and rewrites it instead of failing with a traceback until it is deleted."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        problem = f"cannot be read ({exc.strerror or exc})"
    else:
        try:
            value = json.loads(text)
        except ValueError as exc:
            problem = f"is not valid JSON ({exc})"
        else:
            if isinstance(value, dict):
                return value
            problem = f"holds a {type(value).__name__}, not a JSON object"
    if str(path) not in _REPORTED:
        _REPORTED.add(str(path))
        print(f"[book] {path} ({what}) {problem}; treated as absent", file=sys.stderr, flush=True)
    return None


def write_json(path: Path, value) -> None:
    """Write a build record atomically (a temporary file beside it, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value, indent=1, sort_keys=True))
    os.replace(tmp, path)


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_timings() -> dict:
    return read_json(TIMINGS, "the chapters' wall times") or {}


RESULTS = ROOT / "results"


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


def timings_seen(src: Path) -> str | None:
    """For an appendix that reads the other chapters' outputs, a digest of what it reads (kept
    beside the input digest in its record, not in it): the wall-time records for a timings
    reader, the glued fidelity records of the executed chapters for a records reader; None for
    every other chapter."""
    reads = dependencies(src)["reads"]
    if "timings" in reads:
        readers = {s.stem for s in chapters() if dependencies(s)["reads"]}
        others = {k: v for k, v in read_timings().items() if k not in readers}
        return hashlib.sha256(json.dumps(others, sort_keys=True).encode()).hexdigest()
    if "records" in reads:
        h = hashlib.sha256()
        readers = {s.stem for s in chapters() if dependencies(s)["reads"]}
        for nb in sorted(BOOK.glob("[0-9][0-9]_*.ipynb")):
            if nb.stem in readers:
                continue
            try:
                cells = json.loads(nb.read_text()).get("cells", [])
            except (OSError, ValueError, AttributeError):   # unreadable: its bytes stand for it
                h.update(nb.read_bytes() if nb.is_file() else b"")
                continue
            for cell in cells:
                for out in cell.get("outputs", []):
                    if out.get("metadata", {}).get("scrapbook", {}).get("name", "").startswith("fidelity-"):
                        h.update(json.dumps(out["data"], sort_keys=True).encode())
        return h.hexdigest()
    return None


def run_order(srcs: list[Path]) -> list[Path]:
    """Chapters first, then the appendices that read their records, then those that read the
    wall times (which include the record readers')."""
    def rank(src):
        reads = dependencies(src)["reads"]
        return 2 if "timings" in reads else 1 if "records" in reads else 0
    return sorted(srcs, key=rank)


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


def declared(nb_path: Path) -> dict:
    """The ``parameters`` cell as papermill reads it (``papermill.inspect_notebook``): name ->
    {"default": source text, "inferred_type_name": the type hint, "help": the comment}.  Chapters
    write one ``name: type = value  # help`` per line, so nothing is lost in this reading
    (tests/test_book_tool.py compares it with the names the cell really defines)."""
    import nbformat
    import papermill

    nb = nbformat.read(nb_path, as_version=4)
    if not any(c.cell_type == "code" and "parameters" in c.metadata.get("tags", []) for c in nb.cells):
        raise BookError(f"{nb_path.name}: no cell tagged 'parameters' (every chapter needs one)")
    return papermill.inspect_notebook(str(nb_path))


def declared_parameters(nb_path: Path) -> dict:
    """Name -> default expression (source text) of every parameter."""
    return {name: p["default"] for name, p in declared(nb_path).items()}


def declared_types(nb_path: Path) -> dict:
    """Name -> type hint as written ("int", "list[float]", "Optional[int]", ...); parameters
    without a hint are absent."""
    return {name: p["inferred_type_name"] for name, p in declared(nb_path).items()
            if p["inferred_type_name"] not in (None, "None")}


from lib.book.parameters import conforms  # noqa: E402  (one home: the grammar the notebooks check by too)


def check_parameter_types(src: Path, parameters: dict, types: dict) -> None:
    """A BookError naming the first parameter whose value does not fit its type hint."""
    for name, value in parameters.items():
        if name in types and not conforms(value, types[name]):
            raise BookError(f"{src.name}: parameter {name} must be {types[name]}, got {value!r} "
                            f"({type(value).__name__})")


def declared_ranges(nb_path: Path) -> dict:
    """Name -> :class:`tools.parameters.Range` of every parameter whose comment declares its
    accepted range (``name: int = 3  # ≥ 1: what it is``, grammar in ``tools/parameters.py``)."""
    from tools.parameters import split_comment

    out = {}
    for name, p in declared(nb_path).items():
        rng, _ = split_comment(p.get("help") or "")
        if rng is not None:
            out[name] = rng
    return out


def check_parameters(src: Path, parameters: dict, nb_path: Path) -> None:
    """Every check a reader's values get before a kernel starts, each a BookError naming the
    parameter: a name the parameters cell does not declare, a value of the wrong type, a value
    outside the parameter's declared range (``None`` passes where the type is Optional)."""
    known = declared(nb_path)
    unknown = sorted(set(parameters) - set(known))
    if unknown:
        raise BookError(f"{src.name}: unknown parameter(s) {', '.join(unknown)}; "
                        f"the parameters cell declares: {', '.join(known)}")
    check_parameter_types(src, parameters, declared_types(nb_path))
    ranges = declared_ranges(nb_path)
    for name, value in parameters.items():
        if value is None or name not in ranges:
            continue
        problem = ranges[name].problem(value, base=BOOK)
        if problem:
            raise BookError(f"{src.name}: parameter {name} {problem}, got {value!r} "
                            f"(declared: {known[name].get('help')})")
    check_relations(src, parameters, known)


def check_relations(src: Path, parameters: dict, known: dict) -> None:
    """The relations between parameters the chapter declares in its registry table
    (``relations`` in ``book/experiments/*.toml``), for the reader's values over the defaults,
    with the settings left at None taking their column of the chosen scale."""
    import ast

    from lib.book.experiments import experiment
    from lib.book.parameters import ParameterError

    exp = experiment(src.stem)
    if not exp.relations:
        return
    values = {}
    for name, p in known.items():
        try:
            values[name] = ast.literal_eval(p["default"])
        except (ValueError, SyntaxError):
            values[name] = None
    values.update(parameters)
    try:
        exp.check_relations(values, scale=values.get("scale") or "book")
    except ParameterError as exc:
        raise BookError(f"{src.name}: {str(exc).split(': ', 1)[-1]}") from None


def parameters_table(src: Path) -> str:
    """The chapter's parameters as a reader reads them: name, type, default, range, meaning; for a
    setting of the experiment registry its book and paper values and where it stands in the
    paper; the relations the parameters must satisfy."""
    from lib.book.experiments import experiment
    from tools.parameters import split_comment

    EXEC.mkdir(parents=True, exist_ok=True)
    work = EXEC / (src.stem + ".check.ipynb")
    to_notebook(src, work)
    exp = experiment(src.stem)

    def short(v) -> str:
        t = repr(v)
        return t if len(t) <= 24 else t[:21] + "..."

    rows = [("name", "type", "default", "book", "paper", "accepted", "what it is")]
    wheres = {}
    for name, p in declared(work).items():
        rng, what = split_comment(p.get("help") or "")
        kind = p["inferred_type_name"] or ""
        s = exp.settings.get(name)
        book_v, paper_v = (short(s.book), short(s.paper)) if s else ("", "")
        if s:
            wheres[name] = s.where
        rows.append((name, kind, p["default"], book_v, paper_v,
                     rng.text if rng else ("True or False" if "bool" in kind else "—"), what))
    widths = [max(len(r[j]) for r in rows) for j in range(6)]
    lines = []
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r[:6], widths)) + "  " + r[6])
        if r[0] in wheres:
            lines.append(" " * (widths[0] + 2) + f"in the paper: {wheres[r[0]]}")
    lines.insert(1, "-" * len(lines[0]))
    out = [f"{src.stem}: {title(src)}", *lines,
           "None takes the column of the chosen scale (scale=\"book\" or \"paper\"): book and paper above, "
           f"declared in {exp.source or 'book/experiments/*.toml'}."]
    for r in exp.relations:
        out.append(f"The parameters must satisfy {r.rule}: {r.why}.")
    return "\n".join(out)


def kernel_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")      # idle OpenMP threads sleep, not spin (loaded machines)
    env.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    return env


IPC_PREFIX = "rnnbook-ipc-"                 # + the executing process's id + "-"
LEGACY_PREFIX = "rnnbook-kernel-"           # the socket folders of earlier versions (never removed)


def _ipc_kernel_manager(folders: list[str]):
    """A kernel manager that talks to the kernel over local IPC sockets (in a private temporary
    folder, appended to ``folders`` so that the caller removes it) instead of TCP: nothing
    listens on a port, and ipykernel has no reason to warn that the kernel is "running over TCP
    without encryption" for every chapter."""
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import CaselessStrEnum, default

    class IPCKernelManager(AsyncKernelManager):
        transport = CaselessStrEnum(["tcp", "ipc"], default_value="ipc", config=True)

        @default("ip")
        def _ip_default(self):
            folder = tempfile.mkdtemp(prefix=f"{IPC_PREFIX}{os.getpid()}-")
            folders.append(folder)
            return os.path.join(folder, "kernel")

    return IPCKernelManager


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:                  # exists, another user's
        return True
    return True


def remove_stale_ipc_folders(older_than: float = 3600.0) -> int:
    """Remove the socket folders that killed executions left in the temporary folder: a folder
    of this version names the process that made it and is removed (with the socket files of
    its dead kernel) once that process is gone; a folder of an earlier version only when it is
    empty and older than ``older_than`` seconds (the kernel of a live execution keeps its sockets
    there, and ``os.rmdir`` removes only empty folders).  Returns how many were removed."""
    import stat

    removed, now = 0, time.time()
    for folder in Path(tempfile.gettempdir()).glob(IPC_PREFIX + "*"):
        pid = folder.name[len(IPC_PREFIX):].split("-", 1)[0]
        try:
            if not pid.isdigit() or _alive(int(pid)) or not folder.is_dir():
                continue
            entries = list(folder.iterdir())
            if all(stat.S_ISSOCK(e.lstat().st_mode) for e in entries):   # only a dead kernel's sockets
                for e in entries:
                    e.unlink()
                folder.rmdir()
                removed += 1
        except OSError:              # not ours to remove, or gone meanwhile
            pass
    for folder in Path(tempfile.gettempdir()).glob(LEGACY_PREFIX + "*"):
        try:
            if folder.is_dir() and now - folder.stat().st_mtime > older_than:
                folder.rmdir()
                removed += 1
        except OSError:              # not empty (a compiled kernel's private folder, or in use)
            pass
    return removed


def run_papermill(src: Path, out: Path, parameters: dict | None = None) -> float:
    """Convert ``src`` and execute it with papermill into ``out``; returns the wall time (s)."""
    import papermill

    work = EXEC / (src.stem + ".input.ipynb")
    to_notebook(src, work)
    parameters = parameters or {}
    if parameters:
        check_parameters(src, parameters, work)
    out.parent.mkdir(parents=True, exist_ok=True)
    old_env = dict(os.environ)
    os.environ.update(kernel_env())
    folders: list[str] = []
    t0 = time.perf_counter()
    try:
        papermill.execute_notebook(
            str(work), str(out), parameters=parameters, cwd=str(BOOK), kernel_name="python3",
            progress_bar=False, log_output=False, report_mode=False,
            kernel_manager_class=_ipc_kernel_manager(folders),
        )
    finally:
        os.environ.clear()
        os.environ.update(old_env)
        for folder in folders:       # the kernel has shut down: its socket folder goes with it
            shutil.rmtree(folder, ignore_errors=True)
    return time.perf_counter() - t0


def incomplete_cells(nb_path: Path) -> list[int]:
    """Indices of the code cells of an executed notebook that did not run to completion: never
    executed (no execution count), or ended with an error output.  [] for a complete notebook;
    an unreadable notebook counts as wholly incomplete ([-1])."""
    try:
        nb = json.loads(nb_path.read_text())
    except (OSError, ValueError):
        return [-1]
    bad = []
    for i, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code" or not "".join(cell.get("source", "")).strip():
            continue
        if cell.get("execution_count") is None or any(o.get("output_type") == "error"
                                                       for o in cell.get("outputs", [])):
            bad.append(i)
    if (nb.get("metadata", {}).get("papermill", {}) or {}).get("exception"):
        bad.append(-1)
    return bad


def execute(selected: list[str] | None = None, force: bool = False) -> list[str]:
    """Execute chapters whose inputs changed; returns the names that were executed."""
    srcs = [resolve(c) for c in selected] if selected else chapters()
    if not srcs:
        raise BookError("no chapters found in _toc.yml")
    EXEC.mkdir(parents=True, exist_ok=True)
    remove_stale_ipc_folders()
    lib_hash = lib_digest()
    ran = []
    failures = []
    # appendices that read the others' outputs run last, after those are up to date
    srcs = run_order(srcs)
    t_all = time.perf_counter()
    for i, src in enumerate(srcs, 1):
        tag = f"({i}/{len(srcs)}, {time.perf_counter() - t_all:.0f} s) {src.stem}"
        record = EXEC / (src.stem + ".json")
        out = src.with_suffix(".ipynb")
        digest = input_digest(src, lib_hash)
        rec = read_json(record, f"the execution record of {src.stem}") if not force and out.is_file() else None
        if rec is not None:
            if (rec.get("digest") == digest and rec.get("timings") == timings_seen(src)
                    and rec.get("notebook_sha256") == file_sha256(out) and not incomplete_cells(out)):
                print(f"[book] {tag}: unchanged, not re-executed", flush=True)
                continue
            if rec.get("notebook_sha256") != file_sha256(out):
                print(f"[book] {tag}: {out.name} is not the notebook its record published "
                      "(edited, or from elsewhere)", flush=True)
        print(f"[book] {tag}: executing with papermill ...", flush=True)
        # the record goes first and the notebook is written beside its final place, then renamed:
        # an interrupted or killed run leaves no record and no half-executed notebook behind, so
        # the next run executes the chapter again instead of publishing it
        record.unlink(missing_ok=True)
        partial = EXEC / (src.stem + ".running.ipynb")
        partial.unlink(missing_ok=True)
        try:
            wall = run_papermill(src, partial)
        except Exception as exc:  # papermill writes the failing notebook to `partial`
            failed = BUILD / "failed" / out.name
            failed.parent.mkdir(parents=True, exist_ok=True)
            if partial.is_file():
                partial.replace(failed)
            out.unlink(missing_ok=True)
            print(f"[book] {src.stem}: FAILED ({type(exc).__name__}); executed notebook with the "
                  f"error: {failed}\n{exc}", file=sys.stderr, flush=True)
            failures.append(src.stem)
            continue
        bad = incomplete_cells(partial)
        if bad:
            raise BookError(f"{src.stem}: papermill returned but cells {bad} did not complete; "
                            f"notebook left at {partial}")
        published = file_sha256(partial)
        os.replace(partial, out)
        print(f"[book] {tag}: done in {wall:.1f} s", flush=True)
        if "timings" not in dependencies(src)["reads"]:
            timings = read_timings()
            timings[src.stem] = {
                "seconds": round(wall, 2),
                "scale": "book",
                "measured": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "machine": machine_description(),
            }
            write_json(TIMINGS, timings)
        write_json(record, {"digest": digest, "timings": timings_seen(src), "seconds": round(wall, 2),
                            "notebook_sha256": published})
        ran.append(src.stem)
    if failures:
        raise BookError(f"chapter(s) failed to execute: {', '.join(failures)}")
    return ran


def build_html(strict: bool = False) -> Path:
    missing = [s.stem for s in chapters() if not s.with_suffix(".ipynb").is_file()]
    if missing:
        raise BookError(f"not executed yet: {', '.join(missing)} (run `python tools/book.py execute`)")
    if not MATHJAX.is_file():
        raise BookError(f"MathJax is not installed at {MATHJAX}; run `make mathjax` (npm) first")
    cmd = [sys.executable, "-m", "jupyter_book", "build", str(ROOT), "--builder", "html"]
    if strict:
        cmd += ["-W", "-n", "--keep-going"]
    jb = Path(sys.executable).with_name("jupyter-book")
    if jb.is_file():
        cmd = [str(jb)] + cmd[3:]
    print("[book] " + " ".join(cmd), flush=True)
    res = subprocess.run(cmd, cwd=ROOT)
    if res.returncode != 0:
        raise BookError(f"jupyter-book build failed (exit {res.returncode})")
    index = BUILD / "html" / "index.html"
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
    src = resolve(ch)
    out_dir = BUILD / "chapters"
    out = out_dir / (src.stem + ".ipynb")
    record = out_dir / (src.stem + ".json")
    if params:            # names, types and ranges checked before anything runs or is announced
        EXEC.mkdir(parents=True, exist_ok=True)
        work = EXEC / (src.stem + ".check.ipynb")
        to_notebook(src, work)
        check_parameters(src, params, work)
    if dry_run:
        print(f"[book] {src.stem}: parameters {params or '(defaults)'} accepted; not executed (--dry-run)",
              flush=True)
        return out
    print(f"[book] {src.stem}: executing with parameters {params or '(defaults)'}", flush=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    remove_stale_ipc_folders()
    partial = out_dir / (src.stem + ".running.ipynb")
    partial.unlink(missing_ok=True)
    failed = out_dir / "failed" / out.name
    try:
        wall = run_papermill(src, partial, params)
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
    bad = incomplete_cells(partial)
    if bad:
        failed.parent.mkdir(parents=True, exist_ok=True)
        partial.replace(failed)
        raise BookError(f"{src.stem}: papermill returned but cells {bad} did not complete; notebook left at {failed}")
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
                        "page": html.relative_to(BUILD).as_posix(), "seconds": round(wall, 2)})
    print(f"[book] notebook: {out}\n[book] page:     {html}", flush=True)
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
    staging = BUILD / "chapters" / (src.stem + ".building")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "book").mkdir(parents=True)
    for name in ("references.bib", ".cache", "tools", "lib"):   # lib: the code listings
        if (ROOT / name).exists():
            (staging / name).symlink_to(ROOT / name)
    # the book's configuration, with the chapter's number, the parameters that differ from its
    # defaults and the book's own build for cross-references (tools/chapter_page.py)
    from tools import chapter_page

    number = chapter_page.chapter_number(src.stem)
    defaults = declared_parameters(nb)
    (staging / "_config.yml").write_text(chapter_page.staging_config(
        ROOT / "_config.yml", f"book/{src.stem}", number, chapter_page.changed_parameters(params, defaults),
        defaults, BUILD / "html", BUILD / ".doctrees" / "environment.pickle"))
    (staging / "book" / src.name).symlink_to(src)          # the .md source, offered for download
    for name in ("notation.md", "bibliography.md"):
        (staging / "book" / name).symlink_to(BOOK / name)
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


# ----------------------------------------------------------------------------- command line

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tools/book.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("execute", help="execute changed chapters with papermill")
    e.add_argument("chapters", nargs="*")
    e.add_argument("--force", action="store_true", help="re-execute even if unchanged")
    b = sub.add_parser("build", help="execute changed chapters, then build the HTML book")
    b.add_argument("--strict", action="store_true", help="warnings are errors (-W -n --keep-going)")
    b.add_argument("--force", action="store_true")
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
            execute(args.chapters, force=args.force)
        elif args.cmd == "build":
            t0 = time.perf_counter()
            execute(force=args.force)
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
