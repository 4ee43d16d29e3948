"""The chapter runner (tools/book.py): the table of contents, the parameters cells, and the
single-chapter command's rejection of unknown parameters (checked before anything runs)."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
from tools import book, sources


def test_every_chapter_source_is_in_the_toc():
    on_disk = sorted(p.stem for p in (ROOT / "book").glob("[0-9][0-9]_*.md"))
    assert sorted(s.stem for s in book.chapters()) == on_disk


@pytest.mark.parametrize("src", book.chapters(), ids=lambda p: p.stem)
def test_chapter_has_a_parameters_cell_with_the_scale_switch(src, tmp_path):
    nb = tmp_path / (src.stem + ".ipynb")
    book.to_notebook(src, nb)
    params = book.declared_parameters(nb)
    assert params.get("scale") == '"book"', f"{src.name}: parameters cell must set scale = \"book\""
    text = src.read_text()
    # an unknown scale is an error: the chapter passes it to lib.book.notebook.check_scale or to
    # the experiment registry's fill, which checks it the same way (tests/test_experiments.py)
    assert (re.search(r'^check_scale\(scale\)', text, flags=re.M)
            or re.search(r'^exp\.fill\(scale, globals\(\)\)', text, flags=re.M)), \
        f"{src.name}: an unknown scale must be an error"


@pytest.mark.parametrize("src", book.chapters(), ids=lambda p: p.stem)
def test_every_assigned_name_is_a_declared_parameter(src, tmp_path):
    """Running the parameters cell defines exactly the names the runner accepts with -p
    (tuple assignments and comments containing '=' included)."""
    import nbformat

    nb = tmp_path / (src.stem + ".ipynb")
    book.to_notebook(src, nb)
    cell = next(c for c in nbformat.read(nb, as_version=4).cells
                if "parameters" in c.metadata.get("tags", []))
    namespace: dict = {}
    exec(cell.source, namespace)  # noqa: S102 - the chapter's own parameters cell
    defined = {k for k in namespace if not k.startswith("__")}
    assert set(book.declared_parameters(nb)) == defined


def test_resolve_chapter_names():
    first = book.chapters()[0]
    assert book.resolve("01") == first
    assert book.resolve(first.stem) == first
    with pytest.raises(book.BookError, match="unknown chapter '77'"):
        book.resolve("77")


def run_tool(*args):
    return subprocess.run([sys.executable, "-m", "tools.book", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)


def test_single_chapter_command_rejects_an_unknown_parameter():
    res = run_tool("chapter", "01", "-p", "T_realise", "16")   # misspelt T_realize
    assert res.returncode == 2
    assert "unknown parameter(s) T_realise" in res.stderr
    assert "T_realize" in res.stderr and "scale" in res.stderr  # the declared names are listed


def test_parameters_file_is_checked_too(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("scale: book\nno_such_knob: 3\n")
    res = run_tool("chapter", "01", "-f", str(f))
    assert res.returncode == 2 and "no_such_knob" in res.stderr


def test_unknown_chapter_is_an_error():
    res = run_tool("chapter", "77")
    assert res.returncode == 2 and "unknown chapter" in res.stderr


def test_values_are_read_like_papermill():
    assert book.parse_value("24") == 24
    assert book.parse_value("0.5") == 0.5
    assert book.parse_value("paper") == "paper"
    assert book.parse_value("[1, 2]") == [1, 2]


_READER = """---
kernelspec:
  name: python3
rnnbook:
  stored: [icl]
---
x = 1
"""


def test_lib_digest_covers_the_registry_and_the_ledgers(tmp_path, monkeypatch):
    """A chapter's settings (book/experiments/*.toml) and its claims' words (book/claims/*.toml)
    are inputs of every chapter: editing either changes the digest, so the chapters are executed
    again; another file in book/ does not."""
    monkeypatch.setattr(sources, "ROOT", tmp_path)
    monkeypatch.setattr(sources, "BOOK", tmp_path / "book")
    for folder in ("lib", "book/experiments", "book/claims"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "lib" / "a.py").write_text("x = 1\n")
    registry, ledger = tmp_path / "book/experiments/emami.toml", tmp_path / "book/claims/emami.toml"
    registry.write_text("seeds = 24\n")
    ledger.write_text("what = 'a claim'\n")
    first = sources.lib_digest()
    (tmp_path / "book" / "notes.md").write_text("not an input\n")
    assert sources.lib_digest() == first
    registry.write_text("seeds = 48\n")
    second = sources.lib_digest()
    assert second != first
    ledger.write_text("what = 'another claim'\n")
    assert sources.lib_digest() not in (first, second)


def test_chapters_that_read_stored_runs_are_re_executed_when_a_run_changes(tmp_path, monkeypatch):
    """The input digest of a chapter covers the manifest lines of the stored runs its front matter
    declares (rnnbook: stored: [...]), and no other: a new teacher run leaves a chapter that reads
    only the icl run, and a chapter that reads none, as they were."""
    monkeypatch.setattr(sources, "RESULTS", tmp_path)
    reader, other = tmp_path / "12_reader.md", tmp_path / "01_other.md"
    reader.write_text(_READER)
    other.write_text("x = 1\n")
    manifest = tmp_path / "MANIFEST.sha256"

    def digests(icl, teacher):
        manifest.write_text(f"{icl * 64}  icl/run.pt\n{teacher * 64}  teacher/run.pt\n")
        return book.input_digest(reader, "lib"), book.input_digest(other, "lib")

    first = digests("a", "c")
    assert digests("a", "d") == first                              # another run changed: nothing
    changed = digests("b", "d")
    assert changed[0] != first[0] and changed[1] == first[1]       # its run changed: the reader only
    # a run in progress (results/runs/NAME, not in the manifest): a new checkpoint or finished
    # group re-executes the chapter that reads NAME, and only that one
    (tmp_path / "runs" / "teacher").mkdir(parents=True)
    (tmp_path / "runs" / "teacher" / "group-0.checkpoint.pt").write_bytes(b"step 1")
    assert digests("b", "d") == changed
    work = tmp_path / "runs" / "icl"
    work.mkdir()
    (work / "group-0.checkpoint.pt").write_bytes(b"step 1")
    step1 = digests("b", "d")
    assert step1[0] != changed[0] and step1[1] == changed[1]
    (work / "group-0.checkpoint.pt").write_bytes(b"step 2")
    step2 = digests("b", "d")
    assert step2[0] != step1[0] and step2[1] == step1[1]
    (work / "group-0.checkpoint.pt").unlink()
    (work / "group-0.pt").write_bytes(b"finished")
    assert digests("b", "d")[0] not in (step1[0], step2[0])
    everything = tmp_path / "99_all.md"                            # stored: all, a run only in progress included
    everything.write_text(_READER.replace("stored: [icl]", "stored: all"))
    (tmp_path / "runs" / "new").mkdir()
    assert book.dependencies(everything)["stored"] == ["icl", "new", "teacher"]
    assert book.dependencies(reader) == {"stored": ["icl"], "reads": []}
    bad = tmp_path / "13_bad.md"
    bad.write_text(_READER.replace("stored: [icl]", "reads: [everything]"))
    with pytest.raises(book.BookError, match="13_bad.md.*rnnbook"):
        book.dependencies(bad)


def test_timing_records_stay_out_of_the_input_digest(tmp_path, monkeypatch):
    """A chapter's cache key covers its source, lib/ and versions only; the appendix that
    tabulates wall times sees the timing records through a separate field of its record."""
    monkeypatch.setattr(sources, "TIMINGS", tmp_path / "timings.json")
    reader, other = tmp_path / "99_reproducibility.md", tmp_path / "01_other.md"
    reader.write_text("---\nrnnbook:\n  reads: [timings]\n---\ntimings\n")
    other.write_text("x = 1\n")
    sources.TIMINGS.write_text('{"chapters": {"01_other": {"seconds": 1.0}}, "missing": []}')
    before = [book.input_digest(p, "lib") for p in (reader, other)], book.timings_seen(reader)
    sources.TIMINGS.write_text('{"chapters": {"01_other": {"seconds": 2.0}}, "missing": []}')
    after = [book.input_digest(p, "lib") for p in (reader, other)], book.timings_seen(reader)
    assert before[0] == after[0]                       # digests unchanged by a new wall time
    assert before[1] != after[1]                       # ...but the timing appendix notices it
    assert book.timings_seen(other) is None


def test_the_fidelity_appendix_runs_after_the_chapters_and_sees_their_records(tmp_path, monkeypatch):
    """The appendix that tabulates the chapters' fidelity records runs after every chapter and
    before the timing appendix, and is re-executed when a chapter's glued record changes (and
    only then: another output of the chapter does not count)."""
    names = {"99_reproducibility": "reads: [timings]", "02_b": "", "97_fidelity": "reads: [records]", "01_a": ""}
    for name, reads in names.items():
        (tmp_path / f"{name}.md").write_text(f"---\nrnnbook:\n  {reads}\n---\n" if reads else "x = 1\n")
    assert [p.stem for p in book.run_order([tmp_path / f"{n}.md" for n in names])] == \
        ["02_b", "01_a", "97_fidelity", "99_reproducibility"]
    monkeypatch.setattr(sources, "BOOK", tmp_path)
    monkeypatch.setattr(sources, "chapters", lambda: [tmp_path / f"{n}.md" for n in names])
    reader = tmp_path / "97_fidelity.md"

    def chapter(book_value, stdout):
        glued = {"output_type": "display_data", "metadata": {"scrapbook": {"name": "fidelity-emami-01-a",
                 "mime_prefix": "application/papermill.record/"}},
                 "data": {"application/papermill.record/text/plain": '{"book": "%s"}' % book_value}}
        printed = {"output_type": "stream", "name": "stdout", "text": stdout}
        (tmp_path / "01_a.ipynb").write_text(json.dumps({"cells": [{"cell_type": "code", "outputs": [printed, glued]}]}))

    chapter("0.5", "took 3 s")
    first = book.timings_seen(reader)
    chapter("0.5", "took 4 s")
    assert book.timings_seen(reader) == first
    chapter("0.6", "took 4 s")
    assert book.timings_seen(reader) != first


_DRIVER = r'''
import os, sys
from pathlib import Path
from tools import book, sources
tmp = Path(sys.argv[2])
sources.BOOK, sources.BUILD = tmp / "book", tmp / "build"
sources.EXEC, sources.TIMINGS = tmp / "build" / "exec", tmp / "build" / "timings.json"
sources.LOCKS, sources.EXECUTOR = tmp / "build" / "locks", tmp / "build" / "executor.json"
sources.chapters = lambda: [tmp / "book" / "50_sleepy.md"]
print(book.execute(force=len(sys.argv) > 3), flush=True)
'''

_SLEEPY = '''---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

# Sleepy

```{code-cell} ipython3
:tags: [parameters]

scale = "book"
```

```{code-cell} ipython3
import os, pathlib, time
pathlib.Path(os.environ["SLEEPY_MARK"]).write_text("started")
time.sleep(float(os.environ["SLEEPY_SECONDS"]))
```

```{code-cell} ipython3
done = True
```
'''


def _sleepy_book(tmp_path):
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "50_sleepy.md").write_text(_SLEEPY)
    (tmp_path / "driver.py").write_text(_DRIVER)
    return tmp_path / "book" / "50_sleepy.ipynb", tmp_path / "build" / "exec" / "50_sleepy.json"


def _execute(tmp_path, seconds, mark, force=False):
    import os
    import signal
    env = {**os.environ, "SLEEPY_SECONDS": str(seconds), "SLEEPY_MARK": str(mark),
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    # Ctrl-C as a terminal delivers it: the executor starts with SIGINT at its default action even
    # when the test suite itself runs in the background (where the shell started it ignoring SIGINT)
    return subprocess.Popen([sys.executable, str(tmp_path / "driver.py"), str(ROOT / "tools"), str(tmp_path)]
                            + (["force"] if force else []),
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


@pytest.mark.parametrize("how", ["SIGINT", "SIGKILL"])
def test_interrupted_execution_leaves_no_current_looking_chapter(tmp_path, how):
    """Interrupt (Ctrl-C) or kill `execute` in the middle of a chapter, after a complete earlier
    run: no record of it stays and no half-executed notebook takes the chapter's place, so the
    next `execute` runs the chapter again (it is not 'unchanged')."""
    import os
    import signal
    import time

    out, record = _sleepy_book(tmp_path)
    first = _execute(tmp_path, 0, tmp_path / "mark0")
    assert first.wait(timeout=240) == 0, first.stderr.read()
    assert out.is_file() and record.is_file() and book.incomplete_cells(out) == []
    mark = tmp_path / "mark1"
    proc = _execute(tmp_path, 120, mark, force=True)      # `execute --force`, then interrupted
    t0 = time.time()
    while not mark.is_file():
        assert time.time() - t0 < 240 and proc.poll() is None, "the chapter never started"
        time.sleep(0.2)
    if how == "SIGINT":
        os.killpg(proc.pid, signal.SIGINT)
    else:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    assert not record.is_file(), "the record of an interrupted run must be gone"
    assert not out.is_file() or book.incomplete_cells(out) == [], "a half-executed notebook was put in place"
    again = _execute(tmp_path, 0, tmp_path / "mark2")
    stdout, stderr = again.communicate(timeout=240)
    assert again.returncode == 0, stderr
    assert "['50_sleepy']" in stdout, stdout           # executed again, not skipped as unchanged
    assert book.incomplete_cells(out) == [] and record.is_file()


def test_a_notebook_with_a_cell_that_never_ran_is_incomplete(tmp_path):
    import json
    nb = {"cells": [{"cell_type": "code", "source": "x = 1", "execution_count": 1, "outputs": []},
                    {"cell_type": "code", "source": "y = 2", "execution_count": None, "outputs": []},
                    {"cell_type": "code", "source": "", "execution_count": None, "outputs": []},
                    {"cell_type": "code", "source": "z", "execution_count": 3,
                     "outputs": [{"output_type": "error", "ename": "NameError"}]}],
          "metadata": {}}
    f = tmp_path / "nb.ipynb"
    f.write_text(json.dumps(nb))
    assert book.incomplete_cells(f) == [1, 3]
    f.write_text("{not json")
    assert book.incomplete_cells(f) == [-1]


@pytest.mark.parametrize("text, words", [("scale: [book\n", "not valid YAML"), ("- 1\n- 2\n", "mapping")])
def test_malformed_parameters_file_is_a_clear_error(tmp_path, text, words):
    f = tmp_path / "p.yaml"
    f.write_text(text)
    res = run_tool("chapter", "01", "-f", str(f))
    assert res.returncode == 2 and words in res.stderr and "Traceback" not in res.stderr, res.stderr


@pytest.mark.parametrize("src", book.chapters(), ids=lambda p: p.stem)
def test_papermill_help_lists_every_parameter_with_its_type(src, tmp_path):
    """Plain `papermill --help-notebook` reads the parameters cell fully: every declared
    parameter appears with a type (no 'Unknown type', no 'Unable to parse line')."""
    nb = tmp_path / (src.stem + ".ipynb")
    book.to_notebook(src, nb)
    res = subprocess.run([str(Path(sys.executable).with_name("papermill")), "--help-notebook", str(nb)],
                         capture_output=True, text=True, timeout=120)
    text = res.stdout + res.stderr
    assert res.returncode == 0 and "Unable to parse" not in text and "Unknown type" not in text, text
    listed = dict(re.findall(r"^  (\w+): (\S.*?) \(default ", text, re.M))
    declared = book.declared_parameters(nb)
    assert set(listed) == set(declared), (set(declared) ^ set(listed))
    assert listed == book.declared_types(nb)


def test_plain_papermill_runs_a_chapter_with_typed_values(tmp_path):
    """`papermill -p` with a float, an int, a string and None on Chapter 7 (a few seconds)."""
    import os

    import nbformat

    src = book.resolve("07")
    nb = tmp_path / "07.ipynb"
    book.to_notebook(src, nb)
    out = tmp_path / "07-out.ipynb"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([str(Path(sys.executable).with_name("papermill")), str(nb), str(out), "--cwd",
                          str(ROOT / "book"), "-p", "exact_tol", "1e-9", "-p", "seed", "3", "-p", "scale", "book",
                          "-p", "n_sequences", "None"], capture_output=True, text=True, timeout=600, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    cells = nbformat.read(out, as_version=4).cells
    injected = next(c for c in cells if "injected-parameters" in c.metadata.get("tags", []))
    ns: dict = {}
    exec(injected.source, ns)  # noqa: S102
    assert ns["exact_tol"] == 1e-9 and ns["seed"] == 3 and ns["scale"] == "book" and ns["n_sequences"] is None
    assert book.incomplete_cells(out) == []


@pytest.mark.parametrize("args, words", [(["-p", "seed", "abc"], "parameter seed must be int, got 'abc'"),
                                         (["-p", "exact_tol", "tiny"], "parameter exact_tol must be float"),
                                         (["-p", "n_sequences", "2.5"], "must be Optional[int], got 2.5")])
def test_make_chapter_names_a_parameter_of_the_wrong_type_before_running(args, words):
    res = run_tool("chapter", "07", *args)
    assert res.returncode == 2 and words in res.stderr, res.stderr
    assert "executing" not in res.stdout


def test_values_are_read_like_papermill_cli():
    assert book.parse_value("1e-3") == 1e-3 and book.parse_value("None") is None
    assert book.parse_value("True") is True and book.parse_value("-3") == -3
    assert book.parse_value("(8, 16)") == [8, 16]


@pytest.mark.parametrize("src", book.chapters(), ids=lambda p: p.stem)
def test_chapter_round_trips_through_jupytext_unchanged(src):
    """Opening a chapter as a notebook and saving it (jupytext, with the repository's
    jupytext.toml) writes back exactly the same text: an edit changes only what was edited."""
    import jupytext
    from jupytext.config import load_jupytext_config

    config = load_jupytext_config(str(src.parent))
    assert config is not None, "jupytext.toml not found"
    text = src.read_text()
    assert jupytext.writes(jupytext.reads(text, fmt="md:myst"), fmt="md:myst", config=config) == text


def test_executed_notebooks_are_plain_notebooks(tmp_path):
    """The .ipynb that papermill executes (and each page offers for download) carries no
    jupytext pairing metadata and is a valid nbformat 4 notebook."""
    import nbformat

    nb_path = tmp_path / "07.ipynb"
    book.to_notebook(book.resolve("07"), nb_path)
    nb = nbformat.read(nb_path, as_version=4)
    nbformat.validate(nb)
    assert "jupytext" not in nb.metadata and nb.metadata["kernelspec"]["name"] == "python3"


@pytest.mark.book
def test_make_chapter_page_looks_like_the_book(tmp_path):
    """`make chapter` re-executes Chapter 8 and renders its page with the book's configuration:
    theorems as theorem boxes, citations linked to the bibliography, no MyST markup left as
    text, and the page passes the same browser check as the book (MathJax typeset offline)."""
    from tools import browser_check

    res = run_tool("chapter", "08", "-p", "seed", "2")
    assert res.returncode == 0, res.stderr[-3000:]
    site = ROOT / "_build" / "chapters" / "08_linear_ff_to_rnn" / "_build" / "html"
    page = (site / "book" / "08_linear_ff_to_rnn.html").read_text()
    assert page.count('class="proof') >= 2                       # definition 3.1, theorem 3.1 (+ proof)
    assert 'href="bibliography.html#' in page                    # {cite:t} resolved to the bibliography
    assert "{cite" not in page and ":::{prf" not in page and "{eq}`" not in page
    assert "seed = 2" in (site / "book" / "index.html").read_text()
    assert browser_check.check_site(site) == []


# ----------------------------------------------------------------------------- parameter ranges

@pytest.mark.parametrize("src", book.chapters(), ids=lambda p: p.stem)
def test_every_parameter_declares_its_range_and_its_defaults_are_in_it(src, tmp_path):
    """Each parameter but a bool declares the range of values it accepts (tools/parameters.py);
    its default, and the registry's book and paper values of the setting it names, lie in it."""
    import ast

    from lib.book import experiments

    nb = tmp_path / (src.stem + ".ipynb")
    book.to_notebook(src, nb)
    ranges, types = book.declared_ranges(nb), book.declared_types(nb)
    missing = [n for n in book.declared_parameters(nb) if n not in ranges and "bool" not in types.get(n, "")]
    assert missing == [], f"{src.name}: parameters without a declared range: {missing}"
    exp = experiments.experiment(src.stem)
    for name, default in book.declared_parameters(nb).items():
        if name not in ranges:
            continue
        values = [] if default == "None" else [ast.literal_eval(default) if not default.startswith("2 /")
                                               else eval(default)]  # noqa: S307 - the chapter's own literal
        if name in exp.settings:
            values += [exp.settings[name].book, exp.settings[name].paper]
        for v in values:
            if v is None:
                continue
            v = [list(r) if isinstance(r, tuple) else r for r in v] if isinstance(v, (list, tuple)) else v
            if ranges[name].kind == "path":        # a default path exists once the book is executed
                assert isinstance(v, str), (src.name, name, v)
                continue
            assert ranges[name].problem(v, base=ROOT / "book") is None, \
                f"{src.name}: {name} = {v!r} is outside its declared range {ranges[name].text}"


@pytest.mark.parametrize("args, words", [
    (["chapter", "07", "-p", "max_len", "0"], "parameter max_len must be ≥ 1, got 0"),
    (["chapter", "1", "-p", "scale", "huge"], 'parameter scale must be "book" or "paper", got \'huge\''),
    (["chapter", "02", "-p", "nu_W", "1.5"], "parameter nu_W must be in (0, 1), got 1.5"),
    (["chapter", "09", "-p", "optimizer", "rmsprop"], 'parameter optimizer must be "adam" or "sgd"'),
    (["chapter", "03", "-p", "fw_widths", "[100, 0]"], "parameter fw_widths item 1 (0) must be ≥ 1"),
    (["chapter", "06", "-p", "fractions", "[0.7, 0.2]"], "parameter fractions must be a row of 3 values"),
    (["chapter", "99", "-p", "timings_file", "no/such.json"], "parameter timings_file must be an existing file"),
])
def test_a_value_outside_its_range_is_refused_before_a_kernel_starts(args, words):
    res = run_tool(*args)
    assert res.returncode == 2 and words in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and "executing" not in res.stdout


def test_a_chapter_is_named_by_its_number_with_or_without_the_zero():
    first = book.chapters()[0]
    assert book.resolve("1") == book.resolve("01") == book.resolve("ch01") == first
    res = run_tool("chapter", "1", "-p", "T_realize", "16", "--dry-run")
    assert res.returncode == 0 and "accepted; not executed" in res.stdout, res.stderr


def test_list_shows_numbers_and_titles():
    res = run_tool("list")
    lines = res.stdout.splitlines()
    assert res.returncode == 0 and len(lines) == len(book.chapters())
    assert lines[0].startswith("01  Linear RNNs are convolutions  (book/01_")


def test_parameters_lists_every_parameter_with_its_range():
    res = run_tool("chapter", "07", "--parameters")
    assert res.returncode == 0, res.stderr
    # a registry setting: its default None, its book and paper values, its range, and where it stands
    assert re.search(r"^max_len\s+Optional\[int\]\s+None\s+12\s+60\s+≥ 1\s+their lengths", res.stdout, re.M), res.stdout
    assert "in the paper: the book's random data sets" in res.stdout
    assert "The parameters must satisfy low_dim < a" in res.stdout


def _help_examples() -> list[str]:
    res = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    text = res.stdout.split("Examples", 1)[1]
    return [line.strip() for line in text.splitlines() if line.strip().startswith("make ")]


def _make(example: str, extra: str = ""):
    """Run a `make` example as written, with the tools of this Python (setup assumed done)."""
    import shlex

    words = shlex.split(example)
    assert words[0] == "make"
    if extra:
        words = [w + " " + extra if w.startswith("ARGS=") else w for w in words]
        if not any(w.startswith("ARGS=") for w in words):
            words.append(f"ARGS={extra}")
    return subprocess.run(["make", "-s", "-o", "setup", f"BIN={Path(sys.executable).parent}", *words[1:]], cwd=ROOT,
                          capture_output=True, text=True, timeout=1200)


def test_the_help_examples_name_real_chapters_and_parameters():
    """Every `make chapter` example of `make help` passes the checks of names, types and ranges."""
    examples = _help_examples()
    assert len(examples) >= 4 and any("make chapter" in e for e in examples)
    for example in (e for e in examples if e.startswith("make chapter") and "--parameters" not in e):
        res = _make(example, "--dry-run")
        assert res.returncode == 0 and "accepted" in res.stdout, (example, res.stdout, res.stderr)


@pytest.mark.book
def test_every_help_example_runs():
    """Each example of `make help` runs to its end as written.  A benchmark run ends with status 1
    (make's 2) when a ratio misses its target on this machine: it ran, and says so with the
    conditions."""
    for example in _help_examples():
        res = _make(example)
        if example.startswith("make bench") and res.returncode != 0 and "target missed" in res.stderr:
            assert "target missed" in res.stderr and "The ratios depend on the number of threads" in res.stdout, \
                (example, res.stdout[-2000:], res.stderr[-3000:])
            continue
        assert res.returncode == 0, (example, res.stdout[-2000:], res.stderr[-3000:])
