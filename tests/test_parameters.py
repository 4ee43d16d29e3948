"""tools/parameters.py: the grammar of a parameter's accepted range and the check of a value."""
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
