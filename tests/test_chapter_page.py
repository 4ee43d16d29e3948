"""tools/chapter_page.py: a re-executed chapter keeps the book's chapter number, names the
parameters that differ from its defaults, and writes a configuration for its small book."""
import yaml

from tools import book, chapter_page


def test_the_chapter_number_is_its_place_in_the_numbered_parts():
    numbered = [s.stem for s in book.chapters() if s.stem[:2] < "97"]
    assert [chapter_page.chapter_number(s) for s in numbered] == list(range(1, len(numbered) + 1))
    assert chapter_page.chapter_number("97_fidelity") is None          # an appendix: unnumbered
    assert chapter_page.chapter_number("no_such_chapter") is None


def test_only_parameters_that_differ_from_the_defaults_are_named():
    defaults = {"seed": "0", "scale": '"book"', "max_len": "None", "tol": "1e-10"}
    assert chapter_page.changed_parameters({"seed": 0, "scale": "book", "max_len": 12, "tol": 1e-10},
                                           defaults) == {"max_len": 12}
    assert chapter_page.changed_parameters({"seed": 0.0}, defaults) == {"seed": 0.0}   # another type


def test_the_small_book_config_adds_the_extension_and_what_it_needs(tmp_path):
    cfg = yaml.safe_load(chapter_page.staging_config(
        book.ROOT / "_config.yml", "book/07_sequence_autoencoders", 7, {"seed": 3}, {"seed": "0"},
        tmp_path / "html", tmp_path / "env.pickle"))
    assert cfg["sphinx"]["local_extensions"]["chapter_page"] == "tools"
    assert cfg["sphinx"]["config"]["extensions"][-1] == "chapter_page"
    info = cfg["sphinx"]["config"]["rnnbook_chapter"]
    assert info == {"docname": "book/07_sequence_autoencoders", "number": 7, "changed": {"seed": "3"},
                    "defaults": {"seed": "0"}, "book_html": "", "book_env": ""}   # no book build there
    assert cfg["sphinx"]["config"]["numfig"] is True                               # the book's own settings


def _sphinx(src, out, doctrees, conf):
    import os
    import subprocess
    import sys

    (src / "conf.py").write_text(conf)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(book.ROOT), os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-d", str(doctrees), str(src), str(out)],
                          capture_output=True, text=True, timeout=300, env=env)


CONF = """
extensions = ["myst_parser"{extra}]
myst_enable_extensions = ["dollarmath", "amsmath"]
numfig = True
math_numfig = True
math_eqref_format = "({{number}})"
exclude_patterns = ["_build"]
"""


def test_a_re_executed_page_keeps_the_books_numbers_and_links_its_chapters(tmp_path):
    main, small = tmp_path / "main", tmp_path / "small"
    main.mkdir(), small.mkdir()
    (main / "index.md").write_text("# Book\n\n```{toctree}\n:numbered:\none\ntwo\n```\n")
    (main / "one.md").write_text("# One\n\nText.\n")
    (main / "two.md").write_text("# Two\n\n(sec-two)=\n## The second section\n\n$$\na = b\n$$ (eq-two)\n")
    res = _sphinx(main, main / "_build", tmp_path / "main_doctrees", CONF.format(extra=""))
    assert res.returncode == 0, res.stderr
    (small / "index.md").write_text("# Small\n\n```{toctree}\n:numbered:\nthree\n```\n")
    (small / "three.md").write_text("# Three\n\n## Its section\n\n$$\nc = d\n$$ (eq-three)\n\n"
                                    "See {eq}`eq-three`, {ref}`sec-two`, {eq}`eq-two` and {numref}`sec-two`.\n")
    info = {"docname": "three", "number": 3, "changed": {"seed": "3"}, "defaults": {"seed": "0"},
            "book_html": str(main / "_build"), "book_env": str(tmp_path / "main_doctrees" / "environment.pickle")}
    res = _sphinx(small, small / "_build", tmp_path / "small_doctrees",
                  CONF.format(extra=', "tools.chapter_page"') + f"rnnbook_chapter = {info!r}\n")
    assert res.returncode == 0, res.stderr
    page = (small / "_build" / "three.html").read_text()
    assert '<span class="section-number">3.1. </span>Its section' in page                  # the book's chapter 3
    assert '<span class="eqno">(3.1)' in page and ">(3.1)</a>" in page
    assert 'href="../../main/_build/two.html#sec-two"' in page                               # the book's own page
    assert ">The second section</span></a>" in page and ">(2.1)</span></a>" in page
    assert '<span class="pre">seed</span> <span class="pre">=</span> <span class="pre">3</span></code> (book: 0)' in page
    assert "rnnbook-reexecuted" in page
