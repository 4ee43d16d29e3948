"""Fault injection on the book's executor with two workers: a second process, a failing chapter
beside a running one, Ctrl-C during two chapters, a truncated or false timings file, a chapter
without a record.

Each row of ``ROWS`` builds a small book of its own under a temporary folder and checks the
behaviour the executor must have; it returns one line saying what happened
(``tests/test_fault_injection.py`` prints them in its table).  Rows marked "(processes)" run
real kernels in separate processes (``_DRIVER``); the others replace papermill by a function
that writes a complete notebook, and run the executor's two workers in this process.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.helpers import fault_rows

ROOT = Path(__file__).resolve().parent.parent

_CHAPTER = '''---
kernelspec:
  display_name: Python 3
  language: python
  name: python3
{front}---

# A chapter

```{{code-cell}} ipython3
:tags: [parameters]

scale = "book"
```

```{{code-cell}} ipython3
import pathlib, time, torch
pathlib.Path({mark!r}).write_text(str(torch.get_num_threads()))       # started, with its threads
time.sleep({seconds})
```

```{{code-cell}} ipython3
done = {tag!r}
```
'''

_DRIVER = r'''
import sys
from pathlib import Path
from tools import book, render, sources
tmp, mode, jobs = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
sources.ROOT, sources.BOOK, sources.BUILD = tmp, tmp / "book", tmp / "build"
sources.EXEC, sources.LOCKS = tmp / "build" / "exec", tmp / "build" / "locks"
sources.TIMINGS, sources.EXECUTOR = tmp / "build" / "timings.json", tmp / "build" / "executor.json"
sources.chapters = lambda: sorted((tmp / "book").glob("*.md"))

def page(src, nb, params):                      # the page: the notebook's bytes (no jupyter-book here)
    staging = sources.BUILD / "chapters" / (src.stem + ".building")
    html = staging / "_build" / "html" / "book" / (src.stem + ".html")
    html.parent.mkdir(parents=True, exist_ok=True)
    html.write_bytes(nb.read_bytes())
    return staging

render.build_chapter_page = page
try:
    if mode == "build":
        print(book.execute(force=True, jobs=jobs), flush=True)
    else:
        book.run_chapter(mode, {})
except book.BookError as exc:
    print(f"error: {exc}", file=sys.stderr)
    sys.exit(2)
'''


def _book(tmp: Path, chapters: dict) -> dict:
    """Write the chapters {name: (seconds, front matter)} under tmp/book; returns their marks."""
    (tmp / "book").mkdir(parents=True, exist_ok=True)
    (tmp / "driver.py").write_text(_DRIVER)
    marks = {}
    for name, (seconds, front) in chapters.items():
        marks[name] = tmp / f"{name}.started"
        (tmp / "book" / f"{name}.md").write_text(
            _CHAPTER.format(front=front, mark=str(marks[name]), seconds=seconds, tag=name))
    return marks


def _start(tmp: Path, mode: str, jobs: int = 2) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen([sys.executable, str(tmp / "driver.py"), str(tmp), mode, str(jobs)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _wait_for(*marks: Path, proc: subprocess.Popen, limit: float = 240.0) -> None:
    t0 = time.time()
    while not all(m.is_file() for m in marks):
        assert proc.poll() is None, f"the executor ended before its chapters started: {proc.stderr.read()}"
        assert time.time() - t0 < limit, "the chapters never started"
        time.sleep(0.1)


def _published(tmp: Path, name: str) -> tuple[bool, str]:
    """Whether the notebook of ``name`` is published under a record that names its bytes, and
    what its last cell says."""
    import hashlib

    nb, rec = tmp / "book" / f"{name}.ipynb", tmp / "build" / "exec" / f"{name}.json"
    if not nb.is_file() or not rec.is_file():
        return False, ""
    bound = json.loads(rec.read_text())["notebook_sha256"] == hashlib.sha256(nb.read_bytes()).hexdigest()
    return bound, nb.read_text()


class _Fake:
    """tools' executor pointed at tmp/book, papermill replaced by a function that sleeps the
    chapter's seconds (from its name: ``NN_sS`` sleeps S/10 s), logs its start and end, and fails
    for a chapter named ``*_fail``."""

    def __init__(self, tmp: Path, names: list[str], fronts: dict | None = None):
        from tools import execute, kernel, sources

        self.saved = [(m, k, getattr(m, k)) for m, k in
                      [(sources, k) for k in ("ROOT", "BOOK", "BUILD", "EXEC", "LOCKS", "TIMINGS", "EXECUTOR", "chapters")]
                      + [(kernel, "run_papermill"), (execute, "_REPORTED")]]
        (tmp / "book").mkdir(parents=True, exist_ok=True)
        self.srcs = []
        for name in names:
            src = tmp / "book" / f"{name}.md"
            front = (fronts or {}).get(name, "")
            src.write_text(f"---\nrnnbook:\n  {front}\n---\n# {name}\n" if front else f"# {name}\n")
            self.srcs.append(src)
        sources.ROOT, sources.BOOK, sources.BUILD = tmp, tmp / "book", tmp / "build"
        sources.EXEC, sources.LOCKS = tmp / "build" / "exec", tmp / "build" / "locks"
        sources.TIMINGS, sources.EXECUTOR = tmp / "build" / "timings.json", tmp / "build" / "executor.json"
        sources.chapters = lambda: list(self.srcs)
        execute._REPORTED = set()
        self.log, self.lock = [], threading.Lock()
        kernel.run_papermill = self.papermill
        self.tmp, self.sources = tmp, sources

    def papermill(self, src, out, parameters=None, threads=None):
        seconds = float(src.stem.split("_s")[1].split("_")[0]) / 10 if "_s" in src.stem else 0.01
        with self.lock:
            self.log.append(("start", src.stem, time.perf_counter(), threads))
        time.sleep(seconds)
        cell = {"cell_type": "code", "source": "x = 1", "execution_count": 1, "metadata": {},
                "outputs": [{"output_type": "stream", "name": "stdout", "text": src.stem}]}
        if src.stem.endswith("_fail"):
            cell["outputs"] = [{"output_type": "error", "ename": "AssertionError", "evalue": "", "traceback": []}]
            out.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
            raise RuntimeError("a cell failed")
        out.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
        with self.lock:
            self.log.append(("end", src.stem, time.perf_counter(), threads))
        return seconds

    def close(self):
        for module, key, value in self.saved:
            setattr(module, key, value)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# --------------------------------------------------------------------------------------------------
# the rows
# --------------------------------------------------------------------------------------------------
ROWS, row = fault_rows()


@row("two builds of one chapter at once (processes): the second is refused for it in one line naming the first; "
     "the first publishes its own notebook under its record, executed with its share of the cores in torch")
def two_builds(tmp: Path) -> str:
    marks = _book(tmp, {"50_slow": (6, "")})
    first = _start(tmp, "build")
    _wait_for(marks["50_slow"], proc=first)
    second = _start(tmp, "build")
    out2, err2 = second.communicate(timeout=240)
    out1, err1 = first.communicate(timeout=240)
    assert first.returncode == 0, err1
    refusal = [line for line in err2.splitlines() if "under way in another process" in line and "50_slow" in line]
    assert second.returncode == 2 and refusal and f"pid {first.pid}" in refusal[0], (out2, err2)
    bound, text = _published(tmp, "50_slow")
    assert bound and "'50_slow'" in text
    from tools.execute import default_jobs
    assert marks["50_slow"].read_text() == str(max(1, default_jobs() // 2))   # the kernel's share of the cores
    return refusal[0][:200]


@row("make chapter while a build executes that chapter (processes): refused in one line naming the build; "
     "the build's notebook and record stay bound")
def chapter_during_build(tmp: Path) -> str:
    marks = _book(tmp, {"50_slow": (6, "")})
    build = _start(tmp, "build")
    _wait_for(marks["50_slow"], proc=build)
    chapter = _start(tmp, "50")
    out2, err2 = chapter.communicate(timeout=240)
    out1, err1 = build.communicate(timeout=240)
    assert build.returncode == 0, err1
    lines = [line for line in err2.splitlines() if line.strip()]
    assert chapter.returncode == 2 and len(lines) == 1 and f"pid {build.pid}" in lines[0], err2
    assert not (tmp / "build" / "chapters" / "50_slow.json").exists()
    assert _published(tmp, "50_slow")[0]
    return lines[0][:200]


@row("two make chapter of one chapter at once (processes): the second is refused naming the first; "
     "the page, notebook and record are the first run's")
def two_chapters(tmp: Path) -> str:
    import hashlib

    marks = _book(tmp, {"50_slow": (6, "")})
    first = _start(tmp, "50")
    _wait_for(marks["50_slow"], proc=first)
    second = _start(tmp, "50")
    out2, err2 = second.communicate(timeout=240)
    out1, err1 = first.communicate(timeout=240)
    assert first.returncode == 0, err1
    assert second.returncode == 2 and f"pid {first.pid}" in err2, err2
    nb = tmp / "build" / "chapters" / "50_slow.ipynb"
    page = tmp / "build" / "chapters" / "50_slow" / "_build" / "html" / "book" / "50_slow.html"
    rec = json.loads((tmp / "build" / "chapters" / "50_slow.json").read_text())
    assert rec["notebook_sha256"] == hashlib.sha256(nb.read_bytes()).hexdigest() == \
        hashlib.sha256(page.read_bytes()).hexdigest()
    return err2.strip().splitlines()[-1][:200]


@row("Ctrl-C while two workers execute two chapters (processes): both kernels stop, neither chapter is "
     "published nor keeps a record; the next build executes both")
def interrupt_two(tmp: Path) -> str:
    marks = _book(tmp, {"50_a": (0, ""), "51_b": (0, "")})
    first = _start(tmp, "build")
    assert first.wait(timeout=240) == 0, first.stderr.read()
    assert _published(tmp, "50_a")[0] and _published(tmp, "51_b")[0]
    for m in marks.values():
        m.unlink()
    _book(tmp, {"50_a": (120, ""), "51_b": (120, "")})
    t0 = time.time()
    proc = _start(tmp, "build")
    _wait_for(*marks.values(), proc=proc)
    os.killpg(proc.pid, signal.SIGINT)
    proc.wait(timeout=60)
    stopped = time.time() - t0
    assert stopped < 110, f"Ctrl-C took {stopped:.0f} s: the kernels ran on"
    for name in ("50_a", "51_b"):
        assert not (tmp / "build" / "exec" / f"{name}.json").exists(), f"a record of {name} stayed"
        nb = tmp / "book" / f"{name}.ipynb"
        assert not nb.exists(), f"{name}'s notebook stayed published without its record"
    _book(tmp, {"50_a": (0, ""), "51_b": (0, "")})
    again = _start(tmp, "build")
    out, err = again.communicate(timeout=240)
    assert again.returncode == 0 and "50_a" in out.splitlines()[-1] and "51_b" in out.splitlines()[-1], err
    return f"stopped {stopped:.0f} s after the start; nothing published; the next build executed both"


@row("two workers, one chapter fails while another runs: the other is published with its record, the failed one "
     "publishes nothing, the build ends with an error naming it")
def one_fails(tmp: Path) -> str:
    from tools import execute
    from tools.sources import BookError

    with _Fake(tmp, ["50_s5", "51_s1_fail", "52_s1"]):
        with pytest.raises(BookError, match="failed to execute: 51_s1_fail") as exc:
            execute.execute(jobs=2)
        for name in ("50_s5", "52_s1"):
            assert _published(tmp, name)[0], name
        assert not (tmp / "book" / "51_s1_fail.ipynb").exists()
        assert not (tmp / "build" / "exec" / "51_s1_fail.json").exists()
        assert (tmp / "build" / "failed" / "51_s1_fail.ipynb").is_file()
    return str(exc.value)


@row("two workers: the longest chapter (last recorded time) starts first, each kernel gets one thread, the "
     "appendices start only after what they read, and the chapters' times sum to more than the wall time")
def order_and_overlap(tmp: Path) -> str:
    from tools import execute

    names = ["01_s10", "02_s10", "03_s20", "97_s1", "99_s1"]     # seconds long: the overheads are small beside
    fronts = {"97_s1": "reads: [records]", "99_s1": "reads: [timings]"}
    with _Fake(tmp, names, fronts) as fake:
        execute.execute(jobs=2)                           # records the times
        fake.log.clear()
        execute.execute(jobs=2, force=True)
        starts = [n for kind, n, _, _ in fake.log if kind == "start"]
        # longest first: the two workers start together, so the longest is among the first two to start (the order of
        # their start records is the scheduler's); shortest-first would start the two 10 s chapters and fail here
        assert "03_s20" in starts[:2], starts
        at = {(kind, n): t for kind, n, t, _ in fake.log}
        assert at[("start", "97_s1")] >= max(at[("end", n)] for n in ("01_s10", "02_s10", "03_s20"))
        assert at[("start", "99_s1")] >= at[("end", "97_s1")]
        assert {threads for _, _, _, threads in fake.log} == {max(1, execute.default_jobs() // 2)}
        summary = json.loads(fake.sources.EXECUTOR.read_text())
        assert summary["workers"] == 2 and summary["ratio"] > 1.2, summary
    return f"started in the order {', '.join(starts)}; sum of chapter times / wall = {summary['ratio']}"


@row("timings.json truncated, then one chapter re-executed: the timings are rebuilt from every chapter's record, "
     "and the appendix's total is of all chapters, not of the one")
def truncated_timings(tmp: Path) -> str:
    from lib.book import buildtime
    from tools import execute

    with _Fake(tmp, ["01_s2", "02_s3", "99_s1"], {"99_s1": "reads: [timings]"}) as fake:
        execute.execute(jobs=2)
        recorded = {n: json.loads((tmp / "build" / "exec" / f"{n}.json").read_text())["seconds"]
                    for n in ("01_s2", "02_s3")}
        fake.sources.TIMINGS.write_text('{"chap')
        assert execute.execute(["01"], force=True, jobs=2) == ["01_s2"]
        timings = json.loads(fake.sources.TIMINGS.read_text())
        assert set(timings["chapters"]) == {"01_s2", "02_s3"} and timings["missing"] == []
        recorded["01_s2"] = json.loads((tmp / "build" / "exec" / "01_s2.json").read_text())["seconds"]
        _, rows, caption = buildtime.report(timings)
        assert rows[-1][1] == f"**{sum(recorded.values()):.1f}**" and "all chapters" in rows[-1][0]
    return f"total row {rows[-1][1]} s of {len(rows) - 1} chapters; " + caption.split(". ")[-1][:120]


@row("a chapter without a record (never executed, or failed): the timings name it missing, and the appendix "
     "totals only the measured chapters and gives no time for the whole book")
def missing_record(tmp: Path) -> str:
    from lib.book import buildtime
    from tools import execute
    from tools.sources import BookError

    with _Fake(tmp, ["01_s2", "02_s1_fail", "99_s1"], {"99_s1": "reads: [timings]"}) as fake:
        with pytest.raises(BookError):
            execute.execute(jobs=2)
        timings = json.loads(fake.sources.TIMINGS.read_text())
        assert set(timings["chapters"]) == {"01_s2"} and timings["missing"] == ["02_s1_fail"]
        _, rows, caption = buildtime.report(timings)
        assert "02_s1_fail" in caption and "minutes" not in caption, caption
        assert "all chapters" not in rows[-1][0]
    return caption.split(". ", 1)[1][:200]


# --------------------------------------------------------------------------------------------------
# pytest and the table
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, fn", ROWS, ids=[fn.__name__ for _, fn in ROWS])
def test_executor_fault(tmp_path, name, fn):
    fn(tmp_path)


def table(folder: Path) -> list[dict]:
    """Every row, run in ``folder``: {"case", "outcome" ("holds" or "FAILS"), "what"}."""
    out = []
    for name, fn in ROWS:
        tmp = folder / fn.__name__
        tmp.mkdir()
        try:
            out.append({"case": name, "outcome": "holds", "what": fn(tmp)})
        except BaseException as exc:  # noqa: BLE001 - the table reports it
            out.append({"case": name, "outcome": "FAILS", "what": f"{type(exc).__name__}: {exc}"[:300]})
    return out


def test_the_build_time_report_gives_its_verdict_on_what_was_measured():
    """The appendix's time for the whole book: the last build's wall time when that build executed
    every chapter, else the sum; bad records are refused naming timings."""
    from lib.book import buildtime

    timings = {"chapters": {"01_a": {"seconds": 500.0}, "02_b": {"seconds": 500.0}}, "missing": []}
    _, rows, caption = buildtime.report(timings)
    assert rows[-1][1] == "**1000.0**" and "16.7 minutes" in caption
    build = {"executed": ["01_a", "02_b", "99_c"], "wall_seconds": 520.0, "chapter_seconds": 1000.0,
             "workers": 2, "finished": "today"}
    _, _, caption = buildtime.report(timings, build)
    assert "8.7 minutes of wall time" in caption and "1.92 times" in caption
    _, _, caption = buildtime.report(timings, {**build, "executed": ["01_a"]})    # a partial build: the sum
    assert "16.7 minutes" in caption and "wall time" not in caption
    for bad in ({"01_a": {"seconds": 1.0}}, {"chapters": {"01_a": {"seconds": -1}}}, {"chapters": {}}):
        with pytest.raises(ValueError, match="timings"):
            buildtime.report(bad)
