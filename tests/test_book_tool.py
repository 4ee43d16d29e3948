"""The chapter runner (tools/book.py): the table of contents, the parameters cells, and the
single-chapter command's rejection of unknown parameters (checked before anything runs)."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import book  # noqa: E402


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
    assert re.search(r'if scale not in \("book", "paper"\):\s*\n\s*raise ValueError', text), \
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
    return subprocess.run([sys.executable, str(ROOT / "tools" / "book.py"), *args],
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


def test_chapters_that_read_stored_runs_are_re_executed_when_a_run_changes(tmp_path, monkeypatch):
    """The input digest of a chapter that calls load_run covers results/MANIFEST.sha256; the
    digest of every other chapter does not."""
    manifest = tmp_path / "MANIFEST.sha256"
    monkeypatch.setattr(book, "RUNS_MANIFEST", manifest)
    reader, other = tmp_path / "11_reader.md", tmp_path / "01_other.md"
    reader.write_text("run = lib.load_run('icl')\n")
    other.write_text("x = 1\n")
    manifest.write_text("aaaa  icl/run.pt\n")
    before = book.input_digest(reader, "lib"), book.input_digest(other, "lib")
    manifest.write_text("bbbb  icl/run.pt\n")
    after = book.input_digest(reader, "lib"), book.input_digest(other, "lib")
    assert before[0] != after[0] and before[1] == after[1]
