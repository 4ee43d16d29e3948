"""Execute the book's chapters, several at once, and keep the records that say what is current.

    execute(chapters, force, jobs)    execute the chapters whose inputs changed, ``jobs`` at a time
    rebuild_timings()                 _build/timings.json from the chapters' records
    chapter_lock(src)                 one execution of a chapter at a time, across processes

**Order.** The chapters are independent; an appendix that reads their fidelity records starts
when every chapter has finished, one that reads their wall times when every other chapter has
(their front matter says so: :func:`tools.sources.prerequisites`).  Of the chapters that may
start, the longest (by its last recorded wall time; one without a record counts as longest) starts
first, so that the workers finish together.  Each worker drives one kernel from a thread of this process; with ``jobs`` > 1 each
kernel gets an equal share of the cores (one thread each on a 2-core machine: OpenMP, MKL and
OpenBLAS, which torch follows).

**Records.** A chapter is re-executed only when its inputs changed: the SHA-256 of its ``.md``
source, of every file of ``lib/``, of the experiment registry and the claims ledgers, of the stored runs it declares and of
the Python and key package versions is stored in ``_build/exec/NN_subject.json`` together with
the measured wall time, the machine, and the SHA-256 of the notebook it published.  A notebook
is published only if it is the one its record names: a notebook from elsewhere, or one whose
outputs were edited, is executed again.  A chapter is executed into
``_build/exec/NN_subject.running.ipynb`` and renamed into place only when every code cell ran
without error; its record is removed before it runs and written (atomically) after the rename,
so an interrupted or killed run is executed again next time, and a notebook with a cell that
never ran is never taken as current.  A record that cannot be read is reported in one line and
treated as absent.

**Locks.** Each chapter's execution -- the check that it is current, the run, the publication --
holds ``_build/locks/NN_subject.lock`` (:class:`lib.storage.FileLock`); ``make chapter`` takes the
same lock.  A second process that reaches a chapter under way elsewhere is refused for that
chapter in one line naming the holder, and its build ends with an error that lists it.

**Timings.** ``_build/timings.json`` is rebuilt from the chapters' records after every
publication (and when a build starts): it lists the chapters measured, with their wall times,
and names those that have no record, so that no page can report a total of chapters that were
never measured.  ``_build/executor.json`` keeps the last build that executed something: its
wall time, the sum of its chapters' times, the number of workers and the load average.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from datetime import datetime, timezone
from pathlib import Path

from tools import kernel, sources
from tools.common import machine_description
from tools.sources import BookError

_REPORTED: set[str] = set()
_PRINT = threading.Lock()
_TIMINGS = threading.Lock()


def say(line: str, err: bool = False) -> None:
    """One progress line, whole (two workers never interleave within a line)."""
    with _PRINT:
        print(line, file=sys.stderr if err else sys.stdout, flush=True)


# ----------------------------------------------------------------------------- records

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
        say(f"[book] {path} ({what}) {problem}; treated as absent", err=True)
    return None


def write_json(path: Path, value) -> None:
    """Write a build record atomically and durably (:func:`lib.storage.write_bytes`)."""
    from lib.storage import write_bytes

    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes(path, json.dumps(value, indent=1, sort_keys=True).encode())


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def record_path(src: Path) -> Path:
    return sources.EXEC / (src.stem + ".json")


def chapter_lock(src: Path, wait: float = 0.0):
    """The lock every execution of chapter ``src`` holds (``make book`` and ``make chapter``)."""
    from lib.storage import FileLock

    return FileLock(sources.LOCKS / (src.stem + ".lock"), f"an execution of {src.stem}", wait=wait)


def timing_readers() -> set[str]:
    return {s.stem for s in sources.chapters() if "timings" in sources.dependencies(s)["reads"]}


def rebuild_timings() -> dict:
    """Rewrite ``_build/timings.json`` from the chapters' records (never from what it held):
    ``{"chapters": {name: {seconds, scale, measured, machine, workers}}, "missing": [names]}``,
    where ``missing`` lists the chapters of the book (those that do not read the wall times) with
    no readable record.  Returns what it wrote."""
    readers = timing_readers()
    measured, missing = {}, []
    for src in sources.chapters():
        if src.stem in readers:
            continue
        rec = read_json(record_path(src), f"the execution record of {src.stem}")
        seconds = (rec or {}).get("seconds")
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            missing.append(src.stem)
            continue
        measured[src.stem] = {"seconds": seconds, "scale": rec.get("scale", "book"),
                              "measured": rec.get("measured", "not recorded"),
                              "machine": rec.get("machine", "not recorded"), "workers": rec.get("workers", 1)}
    value = {"chapters": measured, "missing": missing}
    with _TIMINGS:
        write_json(sources.TIMINGS, value)
    return value


def read_timings() -> dict:
    """The chapters' wall times as ``_build/timings.json`` holds them ({name: {seconds, ...}})."""
    value = read_json(sources.TIMINGS, "the chapters' wall times") or {}
    chapters = value.get("chapters")
    return chapters if isinstance(chapters, dict) else {}


def timings_seen(src: Path) -> str | None:
    """For an appendix that reads the other chapters' outputs, a digest of what it reads (kept
    beside the input digest in its record, not in it): the wall-time records (and the names of
    the chapters without one) for a timings reader, the glued fidelity records of the executed
    chapters for a records reader; None for every other chapter."""
    reads = sources.dependencies(src)["reads"]
    readers = {s.stem for s in sources.chapters() if sources.dependencies(s)["reads"]}
    if "timings" in reads:
        value = read_json(sources.TIMINGS, "the chapters' wall times") or {}
        others = {k: v for k, v in (value.get("chapters") or {}).items() if k not in readers}
        seen = {"chapters": others, "missing": sorted(value.get("missing") or [])}
        return hashlib.sha256(json.dumps(seen, sort_keys=True).encode()).hexdigest()
    if "records" in reads:
        h = hashlib.sha256()
        for nb in sorted(sources.BOOK.glob("[0-9][0-9]_*.ipynb")):
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


def expected_seconds(src: Path) -> float:
    """The chapter's last recorded wall time; infinity for a chapter without a record (new, or
    changed since it failed): one of unknown length starts before those known to be short."""
    rec = read_json(record_path(src), f"the execution record of {src.stem}") or {}
    seconds = rec.get("seconds")
    return float(seconds) if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) else float("inf")


def default_jobs() -> int:
    """The cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:                    # a platform without affinity masks
        return max(1, os.cpu_count() or 1)


# ----------------------------------------------------------------------------- one chapter

class _Build:
    """What the workers of one ``execute`` share: the inputs' digest, the thread count of a
    kernel, the stop signal, and the progress counters."""

    def __init__(self, total: int, jobs: int, threads: int | None, force: bool):
        self.lib_hash = sources.lib_digest()
        self.total, self.jobs, self.threads, self.force = total, jobs, threads, force
        self.stop = threading.Event()
        self.t0 = time.perf_counter()
        self.finished = 0
        self.lock = threading.Lock()

    def tag(self, src: Path) -> str:
        return f"({self.finished}/{self.total} done, {time.perf_counter() - self.t0:.0f} s) {src.stem}"


def _execute_one(src: Path, b: _Build) -> tuple[str, float, str]:
    """Execute one chapter if its inputs changed, holding its lock; returns (outcome, seconds,
    message) with outcome "unchanged", "executed", "failed", "locked" or "interrupted"."""
    from lib.storage import LockHeld

    lock = chapter_lock(src)
    try:
        lock.acquire()
    except LockHeld as exc:
        return "locked", 0.0, str(exc)
    try:
        return _execute_locked(src, b)
    finally:
        lock.release()


def _execute_locked(src: Path, b: _Build) -> tuple[str, float, str]:
    if b.stop.is_set():
        return "interrupted", 0.0, "interrupted"
    record = record_path(src)
    out = src.with_suffix(".ipynb")
    digest = sources.input_digest(src, b.lib_hash)
    rec = read_json(record, f"the execution record of {src.stem}") if not b.force and out.is_file() else None
    if rec is not None:
        if (rec.get("digest") == digest and rec.get("timings") == timings_seen(src)
                and rec.get("notebook_sha256") == file_sha256(out) and not kernel.incomplete_cells(out)):
            return "unchanged", 0.0, "unchanged, not re-executed"
        if rec.get("notebook_sha256") != file_sha256(out):
            say(f"[book] {b.tag(src)}: {out.name} is not the notebook its record published "
                "(edited, or from elsewhere)")
    say(f"[book] {b.tag(src)}: executing with papermill ...")
    # the record goes first and the notebook is written beside its final place, then renamed:
    # an interrupted or killed run leaves no record and no half-executed notebook behind, so
    # the next run executes the chapter again instead of publishing it
    record.unlink(missing_ok=True)
    partial = sources.EXEC / (src.stem + ".running.ipynb")
    partial.unlink(missing_ok=True)
    failed = sources.BUILD / "failed" / out.name

    def set_aside() -> str:
        failed.parent.mkdir(parents=True, exist_ok=True)
        if partial.is_file():
            partial.replace(failed)
        out.unlink(missing_ok=True)
        return str(failed)

    try:
        wall = kernel.run_papermill(src, partial, threads=b.threads)
    except Exception as exc:  # papermill writes the failing notebook to `partial`
        where = set_aside()
        if b.stop.is_set():
            return "interrupted", 0.0, "interrupted"
        return "failed", 0.0, f"FAILED ({type(exc).__name__}); executed notebook with the error: {where}\n{exc}"
    bad = kernel.incomplete_cells(partial)
    if bad or b.stop.is_set():
        where = set_aside()
        if b.stop.is_set():
            return "interrupted", 0.0, "interrupted"
        return "failed", wall, f"papermill returned but cells {bad} did not complete; notebook left at {where}"
    published = file_sha256(partial)
    os.replace(partial, out)
    write_json(record, {"digest": digest, "timings": timings_seen(src), "seconds": round(wall, 2),
                        "notebook_sha256": published, "scale": "book",
                        "measured": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                        "machine": machine_description(), "workers": b.jobs})
    rebuild_timings()
    return "executed", wall, f"done in {wall:.1f} s"


# ----------------------------------------------------------------------------- the build

def execute(selected: list[str] | None = None, force: bool = False, jobs: int | None = None) -> list[str]:
    """Execute the chapters whose inputs changed, ``jobs`` at a time (default: the cores this
    process may use); returns the names that were executed, in the order they finished.

    A chapter that fails, or that another process is executing, does not stop the others; the
    build then ends with a BookError that names them.  Ctrl-C stops every kernel and publishes
    nothing that was under way."""
    if isinstance(jobs, bool) or not (jobs is None or isinstance(jobs, int)) or (jobs is not None and jobs < 1):
        raise BookError(f"jobs (-j) must be a whole number ≥ 1, got {jobs!r}")
    jobs = default_jobs() if jobs is None else jobs
    srcs = [sources.resolve(c) for c in selected] if selected else sources.chapters()
    if not srcs:
        raise BookError("no chapters found in _toc.yml")
    srcs = list(dict.fromkeys(srcs))
    sources.EXEC.mkdir(parents=True, exist_ok=True)
    kernel.remove_stale_ipc_folders()
    rebuild_timings()                                   # whatever timings.json held: the records say
    threads = max(1, default_jobs() // jobs) if jobs > 1 else None
    b = _Build(len(srcs), jobs, threads, force)
    before = sources.prerequisites(srcs)
    expected = {src: expected_seconds(src) for src in srcs}
    pending, running, done = list(srcs), {}, set()
    ran, failures, refused, chapter_seconds = [], [], [], 0.0
    load_start = _load()
    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="chapter")
    try:
        while pending or running:
            ready = sorted((s for s in pending if before[s] <= done), key=lambda s: (-expected[s], s.stem))
            assert ready or running, "no chapter can start: the prerequisites form a cycle"
            for src in ready[:jobs - len(running)]:
                pending.remove(src)
                running[pool.submit(_execute_one, src, b)] = src
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                src = running.pop(future)
                done.add(src)
                outcome, wall, message = future.result()
                b.finished += 1
                if outcome == "failed":
                    failures.append(src.stem)
                    say(f"[book] {src.stem}: {message}", err=True)
                elif outcome == "locked":
                    refused.append(src.stem)
                    say(f"[book] {src.stem}: not executed: {message}", err=True)
                else:
                    if outcome == "executed":
                        ran.append(src.stem)
                        chapter_seconds += wall
                    say(f"[book] {b.tag(src)}: {message}")
    except BaseException as exc:
        b.stop.set()
        pool.shutdown(wait=False, cancel_futures=True)
        while running:                    # a kernel that was starting is killed once it has a process
            kernel.kill_kernels()
            finished, _ = wait(running, timeout=0.5)
            for future in finished:
                running.pop(future)
        why = "interrupted" if isinstance(exc, KeyboardInterrupt) else f"stopped by {type(exc).__name__}"
        say(f"[book] {why}: the chapters under way were stopped and nothing of theirs was published", err=True)
        raise
    pool.shutdown(wait=True)
    wall = time.perf_counter() - b.t0
    if ran:
        summary = {"finished": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "workers": jobs,
                   "wall_seconds": round(wall, 2), "chapter_seconds": round(chapter_seconds, 2),
                   "ratio": round(chapter_seconds / wall, 3) if wall > 0 else None, "executed": ran,
                   "load_average": {"start": load_start, "end": _load()}, "machine": machine_description()}
        write_json(sources.EXECUTOR, summary)
        say(f"[book] executed {len(ran)} chapter(s) in {wall:.1f} s with {jobs} worker(s); their times sum to "
            f"{chapter_seconds:.1f} s = {summary['ratio']} x the wall time (load average {load_start} -> "
            f"{summary['load_average']['end']})")
    problems = []
    if failures:
        problems.append(f"chapter(s) failed to execute: {', '.join(failures)}")
    if refused:
        problems.append(f"chapter(s) under way in another process, not executed: {', '.join(refused)}")
    if problems:
        raise BookError("; ".join(problems))
    return ran


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None
