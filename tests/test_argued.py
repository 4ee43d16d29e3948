"""lib.book.argued.ArguedSettings: a check is asserted at the settings it was argued for, reported elsewhere."""
import pytest

from lib.book.argued import ArguedSettings


def test_claims_assert_at_the_argued_settings():
    c = ArguedSettings({"steps": 3000, "lr": 2e-2}, {"steps": 3000, "lr": 0.02, "other": 1})
    assert c.asserted and c.check(True, "fine") is None      # nothing for a notebook cell to show
    with pytest.raises(AssertionError, match="loss below"):
        c.check(False, "loss below 1e-3")


def test_claims_report_elsewhere(capsys):
    c = ArguedSettings({"steps": 3000, "lr": 2e-2}, {"steps": 500, "lr": 2e-2})
    assert not c.asserted
    assert c.check(False, "loss below 1e-3") is None
    out = capsys.readouterr().out
    assert "does not hold" in out and "steps = 500 (argued for 3000)" in out and "lr" not in out.split("]")[0]


def test_claims_bad_input():
    with pytest.raises(ValueError, match="argued"):
        ArguedSettings({}, {})
    with pytest.raises(ValueError, match="not defined in the chapter: steps"):
        ArguedSettings({"steps": 1}, {})
