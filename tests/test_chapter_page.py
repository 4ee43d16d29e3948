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
