"""lib/book/parameters.py (tools/parameters.py re-exports it): the grammar of a parameter's accepted
range, the check of a value, and the same check inside a notebook."""
import math

import pytest

from tools.parameters import RangeError, parse, split_comment


@pytest.mark.parametrize("text, inside, outside", [
    ("≥ 1", [1, 2, 10**6], [0, -1, 0.5]),
    (">= 1", [1], [0]),
    ("> 0", [1e-12, 3], [0, -1e-12]),
    ("≤ 10", [10, -5], [10.5]),
    ("< 0", [-0.5], [0, 1]),
    ("in (0, 1)", [0.5, 1e-9], [0, 1, 1.5]),
    ("in [0, 1)", [0, 0.999], [1, -0.1]),
    ("in (0, 1]", [1], [0]),
    ("in [1, inf)", [1, 1e9], [0.9]),
    ("real", [-3, 0, 2.5e10], [math.inf, math.nan]),
    ('"book" or "paper"', ["book", "paper"], ["huge", "Book", 1]),
    ('"a", "b" or "c"', ["a", "b", "c"], ["d"]),
    ("each ≥ 1", [[1, 2], (3,)], [[], [1, 0], 3]),
    ('each "A" or "B"', [["A"], ["A", "B"]], [["C"], "A"]),
    ("(≥ 1, in (0, 1))", [[2, 0.5], (1, 0.1)], [[0, 0.5], [2], [2, 0.5, 1]]),
    ('each (≥ 0, "adam" or "sgd")', [[[0, "adam"], [3, "sgd"]]], [[[0, "rmsprop"]], [[-1, "adam"]]]),
])
def test_values_inside_and_outside_each_kind_of_range(text, inside, outside):
    r = parse(text)
    for v in inside:
        assert r.problem(v) is None, (text, v)
    for v in outside:
        assert r.problem(v) is not None, (text, v)


def test_bools_and_strings_are_not_numbers():
    assert parse("≥ 0").problem(True) is not None
    assert parse("> 0").problem("1") is not None


def test_paths_exist_relative_to_the_base(tmp_path):
    (tmp_path / "a.json").write_text("{}")
    assert parse("an existing file").problem("a.json", base=tmp_path) is None
    assert "not one" in parse("an existing file").problem("b.json", base=tmp_path)
    assert parse("an existing folder").problem(".", base=tmp_path) is None
    assert parse("an existing folder").problem("a.json", base=tmp_path) is not None


@pytest.mark.parametrize("text", ["positive", "≥ one", "in (1, 0)", "in [0 1]", "'book' or 'paper'", "", "each"])
def test_what_follows_no_rule_is_not_a_range(text):
    with pytest.raises(RangeError):
        parse(text)


def test_a_comment_is_split_into_its_range_and_its_meaning():
    r, what = split_comment("≥ 1: their lengths are drawn from 1..max_len")
    assert r.text == "≥ 1" and what == "their lengths are drawn from 1..max_len"
    r, what = split_comment('"book" or "paper": default build, or the published sizes')
    assert r.choices == ("book", "paper") and what.startswith("default build")
    assert split_comment("None: quick unless scale is \"paper\"") == (None, 'None: quick unless scale is "paper"')
    assert split_comment("") == (None, "")


# ----------------------------------------------------------------------------- inside the notebook

from lib.book import experiments as ex
from lib.book import parameters as P


def test_the_notebook_reads_the_same_parameters_as_the_executor():
    """Every chapter's parameters cell, read from its .md in the kernel, declares the names, types,
    defaults and comments that papermill reads from the executor's notebook."""
    from tools import book

    for src in book.chapters():
        work = book.EXEC / (src.stem + ".check.ipynb")
        book.EXEC.mkdir(parents=True, exist_ok=True)
        book.to_notebook(src, work)
        theirs = book.declared(work)
        ours = P.declared(src.stem)
        assert list(ours) == list(theirs), src.stem
        for name, d in ours.items():
            assert d.comment == (theirs[name]["help"] or ""), (src.stem, name)
            assert (d.type or "None") == (theirs[name]["inferred_type_name"] or "None"), (src.stem, name)


def _namespace(**values):
    decl = P.declared("07_sequence_autoencoders")
    ns = {name: eval(d.default) for name, d in decl.items()}
    ns.update(values)
    return ns


@pytest.mark.parametrize("values, words", [
    (dict(seed="abc"), "parameter seed must be int, got 'abc' (str)"),
    (dict(max_len=0), "parameter max_len must be ≥ 1, got 0"),
    (dict(exact_tol=-1.0), "parameter exact_tol must be > 0, got -1.0"),
    (dict(scale="full"), "scale must be 'book' or 'paper'"),
    (dict(In=["# Parameters\nseed = 1\nbogus = 2\n"]), "unknown parameter(s) bogus of 07_sequence_autoencoders"),
    (dict(low_dim=3), "the parameters must satisfy low_dim < a"),
    (dict(low_dim=5, a=4), "got a = 4, low_dim = 5"),
])
def test_a_notebook_refuses_a_bad_value_by_name_before_filling(values, words):
    ns = _namespace(**values)
    before = dict(ns)
    with pytest.raises(ValueError) as err:
        ex.experiment("07_sequence_autoencoders").fill(ns["scale"], ns)
    assert words in str(err.value)
    if "low_dim" not in values:                                   # nothing filled before the refusal
        assert ns == before


def test_a_notebook_accepts_the_defaults_and_a_good_value():
    ns = _namespace(low_dim=1, a=5, In=["# Parameters\nlow_dim = 1\na = 5\n"])
    ex.experiment("07_sequence_autoencoders").fill("book", ns)
    assert ns["n_sequences"] == ex.experiment("07_sequence_autoencoders").value("n_sequences", "book")


def test_relations_accept_only_comparisons_of_arithmetic():
    rel = P.Relation("2 * n_fit <= T * long_factor", "x")
    assert rel.problem(dict(n_fit=3, T=3, long_factor=2)) is None
    assert "got T = 3, long_factor = 2, n_fit = 4" in rel.problem(dict(n_fit=4, T=3, long_factor=2))
    assert P.Relation("a < b", "x").problem(dict(a=None, b=1)) is None      # left to the scale rule
    lag = P.Relation("max(delays) < T", "x")
    assert lag.names == ["T", "delays"] and lag.problem(dict(delays=[0, 4], T=5)) is None
    assert "got T = 4, delays = [0, 4]" in lag.problem(dict(delays=[0, 4], T=4))
    for bad in ("a", "__import__('os') == 1", "a.b < 1", "f(a) < 1", "max(a, b) < 1", "max(a + 1) < 1",
                "open(a) < 1"):
        with pytest.raises(ValueError, match="relation"):
            P.Relation(bad, "x")
