"""lib.book.fidelity: the records the chapters glue, the appendix that reads them back, and the check
that the two agree (the book test runs that check on the real chapters)."""
import json
import math
import re
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest

from lib.book import experiments as ex
from lib.book import fidelity

ROOT = Path(__file__).resolve().parent.parent
from tools import book

LEDGERS = Path(__file__).resolve().parent / "ledgers"   # a claims ledger a paper, as book/claims/ holds them


def write_ledgers(folder: Path, texts=None) -> Path:
    """The test ledgers copied to ``folder``, with the papers in ``texts`` replaced by other text."""
    folder.mkdir(parents=True, exist_ok=True)
    for paper in fidelity.PAPERS:
        (folder / f"{paper}.toml").write_text((texts or {}).get(paper) or (LEDGERS / f"{paper}.toml").read_text())
    return folder


@pytest.fixture
def ledger(tmp_path, monkeypatch):
    """The ledgers above, in place of the book's."""
    folder = write_ledgers(tmp_path / "claims")
    monkeypatch.setattr(fidelity, "LEDGER", folder)
    return folder


GOOD = dict(book="0.101", verdict="reproduced")


@pytest.mark.parametrize("change, match", [
    (dict(key="Fig 4"), "key must be a lower-case slug"),
    (dict(key="04-missing"), "claim key '04-missing' is in none of the ledgers"),
    (dict(verdict="ok"), "verdict must be one of 'reproduced'"),
    (dict(verdict="depends on"), "verdict must be one of 'reproduced'"),     # "depends on" names its choice
    (dict(what="again"), "claim 04-gap: what is given both by the ledger emami.toml and by the chapter"),
    (dict(key="04-bare", published="p"), "claim 04-bare: what is missing: give it in \\[claim.04-bare\\] of emami.toml"),
    (dict(key="04-nosection", section="see section 4"), "section must be the label"),
    (dict(book="see {cite}`emami2021`"), r"book: the MyST role \{cite\} cannot be rendered in a table cell"),
    (dict(book=""), "book must be a non-empty string"),
    (dict(scale="huge"), "scale must be 'book' or 'paper'"),
    (dict(verdict="not checked"), "a claim that is 'not checked' has no book value"),
])
def test_claim_rejects_bad_input(ledger, change, match):
    args = dict(key="04-gap", **GOOD) | change
    with pytest.raises(ValueError, match=match):
        fidelity.claim(args.pop("key"), **args)
    args = dict(key="04-gap", **GOOD) | change
    with pytest.raises(ValueError, match=match):   # the record itself is validated the same way
        fidelity.claim_record(args.pop("key"), **args)


@pytest.mark.parametrize("value", [True, [0.1], {"a": 1}])
def test_claim_rejects_values_that_are_not_text_or_numbers(ledger, value):
    with pytest.raises(TypeError, match="book must be a string or a real number"):
        fidelity.claim("04-gap", **(GOOD | dict(book=value)))


def test_the_words_come_from_the_ledger_or_from_the_chapter(ledger):
    r = fidelity.claim_record("04-gap", **GOOD)
    assert (r["paper"], r["what"], r["published"], r["section"]) == ("emami", "the gap shrinks", "0.0947 (Table 1)",
                                                                     "sec-x")
    r = fidelity.claim_record("04-bare", what="measured in the chapter", published=f"{0.5:.2f} (Table 1)", **GOOD)
    assert (r["what"], r["published"], r["section"]) == ("measured in the chapter", "0.50 (Table 1)", "sec-x")
    r = fidelity.erratum_record("01-slip", check="z = 12")
    assert (r["paper"], r["where"], r["statement"], r["check"]) == ("emami", "Sec. 2", "$\\nu_W$", "z = 12")
    with pytest.raises(ValueError, match="erratum 01-slip: where is given both"):
        fidelity.erratum("01-slip", check="z", where="Sec. 3")
    with pytest.raises(ValueError, match="erratum key '04-gap' is in none of the ledgers"):
        fidelity.erratum("04-gap", check="z")   # a claim's key is not an erratum's


@pytest.mark.parametrize("texts, error, match", [
    (dict(sperduti="[claim.04-gap]\nsection = 'sec-y'\n"), ValueError, "claim '04-gap' stands in two ledgers: emami.toml and sperduti.toml"),
    (dict(sperduti="[claim.07-x]\nwhy = 'no'\n"), ValueError, "may give only what, published, section"),
    (dict(sperduti="[table.07-x]\nwhat = 'no'\n"), ValueError, "only \\[claim.KEY\\], \\[erratum.KEY\\] and \\[published.CHAPTER\\] tables"),
])
def test_a_malformed_ledger_is_named(tmp_path, texts, error, match):
    folder = write_ledgers(tmp_path / "claims", texts)
    with pytest.raises(error, match=match):
        fidelity.ledger(folder)


def test_a_missing_ledger_is_named(tmp_path):
    folder = write_ledgers(tmp_path / "claims")
    assert len(fidelity.ledger(folder)) == 10
    (folder / "zucchet.toml").unlink()
    with pytest.raises(FileNotFoundError, match="the ledger of zucchet is missing"):
        fidelity.ledger(folder)


def test_the_book_ledgers_read():
    entries = fidelity.ledger()
    assert {paper for paper, _ in entries.values()} == set(fidelity.PAPERS)
    assert all(key.startswith(tuple(f"{n:02d}-" for n in range(1, 15))) for _, key in entries)


def test_numbers_are_formatted_and_not_checked_claims_carry_a_dash(ledger):
    assert fidelity.claim("12-eta", book=2, verdict="reproduced") is None    # nothing for a notebook to display
    r = fidelity.claim_record("04-bare", what="w", published=1 / 3, book=0.123456789, verdict="reproduced")
    assert (r["published"], r["book"], r["paper_scale"]) == ("0.3333", "0.1235", None)
    r = fidelity.claim_record("12-eta", book=fidelity.NO_ARTEFACT, verdict="not checked")
    assert r["verdict"] == "not checked"


def _chapter(path: Path, source: str, ledger: Path) -> None:
    """Execute a one-cell notebook that records with lib.book.fidelity, as a chapter does (with the
    ledgers in ``ledger``)."""
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f"import pathlib\nfrom lib.book import fidelity\nfidelity.LEDGER = pathlib.Path({str(ledger)!r})\n"
                                          + source)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    NotebookClient(nb, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    nbformat.write(nb, path)


RECORDS = """
for key in ("01-a", "01-b", "01-c"):           # a claim of each paper
    fidelity.claim(key, book=f"{0.5 + 0.25:.2f}", verdict="partially reproduced")
fidelity.claim("01-d", book=1e-15, verdict="reproduced", paper_scale="2e-15")
fidelity.erratum("01-slip", check="z = 123")
"""


MORE_RECORDS = """
fidelity.claim("04-gap", book="0.1", verdict="reproduced")
fidelity.claim("04-bare", what="a claim worded by the chapter", published=f"{1 / 8:.3f}", book="0.1", verdict="differs")
fidelity.claim("04-nosection", section="sec-d", book="2", verdict="reproduced")
fidelity.claim("12-eta", book="1", verdict="reproduced")
"""
CHAPTERS = "0[0-9]_*.ipynb"   # the synthetic executed chapters (the appendix is 97_*)


@pytest.fixture(scope="module")
def appendix(tmp_path_factory):
    """Synthetic executed chapters and the real appendix notebook executed on them."""
    folder = tmp_path_factory.mktemp("chapters")
    claims = write_ledgers(folder / "claims")
    _chapter(folder / "01_first.ipynb", RECORDS, claims)
    _chapter(folder / "02_second.ipynb", 'fidelity.claim("02-c", book="—", verdict="not checked")', claims)
    _chapter(folder / "04_third.ipynb", MORE_RECORDS, claims)
    src = ROOT / "book" / "97_fidelity.md"
    out = folder / "97_fidelity.ipynb"
    import papermill

    nb_in = folder / "97_in.ipynb"
    book.to_notebook(src, nb_in)
    papermill.execute_notebook(str(nb_in), str(out), parameters={"chapters_dir": str(folder), "ledger_dir": str(claims)},
                               cwd=str(ROOT / "book"), progress_bar=False, log_output=False,
                               kernel_name="python3")
    return folder, out


def test_a_claim_and_an_erratum_may_share_a_key(tmp_path):
    claims = write_ledgers(tmp_path / "claims", dict(emami="[claim.01-x]\nwhat = 'c'\npublished = '1'\nsection = 'sec-x'\n"
                                                         "[erratum.01-x]\nwhere = 'Sec. 2'\nstatement = 'a'\n"
                                                         "correction = 'b'\nevidence = 'suspected'\nsection = 'sec-x'\n"))
    _chapter(tmp_path / "01_both.ipynb", 'fidelity.claim("01-x", book="2", verdict="differs")\n'
             'fidelity.erratum("01-x", check="c")', claims)
    nb = nbformat.read(tmp_path / "01_both.ipynb", as_version=4)
    names = [o["metadata"]["scrapbook"]["name"] for o in nb.cells[0].outputs]
    assert names == ["fidelity-claim-emami-01-x", "fidelity-erratum-emami-01-x"]   # distinct glue keys
    assert [o["output_type"] for o in nb.cells[0].outputs] == ["display_data"] * 2    # no displayed dict
    assert [r["kind"] for r in fidelity.collect([tmp_path / "01_both.ipynb"])] == ["claim", "erratum"]


def test_collect_reads_every_record_in_order(appendix):
    folder, _ = appendix
    records = fidelity.collect(sorted(folder.glob("0[12]_*.ipynb")))
    assert [(r["paper"], r["key"], r["docname"]) for r in records] == [
        ("emami", "01-a", "01_first"), ("sperduti", "01-b", "01_first"), ("zucchet", "01-c", "01_first"),
        ("emami", "01-d", "01_first"), ("emami", "01-slip", "01_first"), ("zucchet", "02-c", "02_second")]
    assert records[0]["book"] == "0.75" and records[3]["book"] == "1e-15" and records[3]["paper_scale"] == "2e-15"
    assert fidelity.verdict_counts(records, "zucchet") == {"reproduced": 0, "depends on": 0, "partially reproduced": 1,
                                                           "differs": 0, "not resolved": 0, "not checked": 1, "by construction": 0}


def test_a_key_recorded_in_two_chapters_is_an_error(appendix, tmp_path):
    folder, _ = appendix
    twin = tmp_path / "03_twin.ipynb"
    twin.write_bytes((folder / "02_second.ipynb").read_bytes())
    with pytest.raises(ValueError, match="zucchet:02-c is recorded twice: in 02_second and in 03_twin"):
        fidelity.collect([folder / "02_second.ipynb", twin])


def test_the_appendix_shows_exactly_the_chapters_records(appendix):
    folder, out = appendix
    records = fidelity.collect(sorted(folder.glob(CHAPTERS)))
    assert fidelity.appendix_disagreements(out, records) == []
    rows = [tuple(r) for t in fidelity.shown_tables(out) for r in t["rows"]]
    assert ("claim $b$ ({ref}`sec-b`)", "exact", "1e-15; stored paper-scale run: 2e-15", "reproduced") in rows
    assert ("the gap shrinks ({ref}`sec-x`)", "0.0947 (Table 1)", "0.1", "reproduced") in rows   # ledger words
    assert ("a claim worded by the chapter ({ref}`sec-x`)", "0.125", "0.1", "**differs**") in rows
    assert any(r[0].startswith("Emami, Sec. 2 ({ref}`sec-b`)") for r in rows) and any("**not checked**" in r for r in rows)
    assert fidelity.paper_summary(records, "emami") in fidelity._markdown_outputs(out)


def test_the_appendix_tables_are_rendered_from_data_with_links_to_the_sections(appendix):
    """Each claims and errata table is one HTML table (lib.book.tables) whose section references
    are cross-references the book's Sphinx extension resolves, and whose cells hold their text."""
    import nbformat

    _, out = appendix
    html = [o["data"]["text/html"] for c in nbformat.read(out, as_version=4).cells if c.cell_type == "code"
            for o in c.get("outputs", []) if "text/html" in o.get("data", {})]
    assert len(html) == 7                              # three papers, the book's own, two classes of errata, the counts
    assert all(h.count("<table") == 1 and 'class="rnnbook-table' in h for h in html)
    # the counts open the page; the book's own results have a table of their own
    claims = [h for h in html if 'data-label="tab-verdict-counts"' not in h and 'data-label="tab-findings"' not in h]
    assert len(claims) == 5
    assert '<a class="rnnbook-xref" data-role="ref" data-target="sec-b"' in claims[0]
    assert not any("{ref}" in h or "| " in h.split("<tbody>")[0] for h in html)


def test_a_changed_chapter_value_or_a_typed_appendix_row_is_caught(appendix, tmp_path):
    folder, out = appendix
    records = fidelity.collect(sorted(folder.glob(CHAPTERS)))
    changed = [dict(r) for r in records]
    changed[3]["book"] = "3e-15"                         # a chapter re-executed with another result
    assert any("claims table of emami" in p for p in fidelity.appendix_disagreements(out, changed))
    changed = [dict(r) for r in records]
    changed[4]["check"] = "z = 124"                      # an erratum's check changed
    assert any("table of demonstrated errata" in p for p in fidelity.appendix_disagreements(out, changed))
    nb = json.loads(out.read_text())                     # a row typed into the appendix
    for cell in nb["cells"]:
        for o in cell.get("outputs", []):
            meta = o.get("metadata", {})
            if fidelity.MIME in meta and meta[fidelity.MIME]["header"] == fidelity.CLAIMS_HEADER:
                meta[fidelity.MIME]["rows"].append(["typed ({ref}`sec-z`)", "1", "1", "reproduced"])
                break
    typed = tmp_path / "97_typed.ipynb"
    typed.write_text(json.dumps(nb))
    assert any("no chapter records" in p for p in fidelity.appendix_disagreements(typed, records))


def test_verdict_of_counts_the_checks_that_ran():
    assert fidelity.verdict_of(True) == "reproduced"
    assert fidelity.verdict_of(False) == "differs"
    assert fidelity.verdict_of(True, False) == "partially reproduced"
    assert fidelity.verdict_of(True, None) == "reproduced"          # the paper-scale check did not run
    assert fidelity.verdict_of(False, None, False) == "differs"
    assert fidelity.verdict_of(1.0 < 2.0, [], 0) == "partially reproduced"   # truth values, as `if` reads them
    with pytest.raises(ValueError, match="at least one check that ran"):
        fidelity.verdict_of(None, None)
    with pytest.raises(ValueError, match="at least one check that ran"):
        fidelity.verdict_of()


def test_not_checked_is_a_claim_without_a_book_value(ledger, monkeypatch):
    recorded = []
    monkeypatch.setattr(fidelity, "_glue", recorded.append)
    fidelity.not_checked("04-gap", scale="paper")
    assert recorded == [dict(kind="claim", paper="emami", key="04-gap", what="the gap shrinks",
                             published="0.0947 (Table 1)", book=fidelity.NO_ARTEFACT, paper_scale=None,
                             stored=None, verdict="not checked", section="sec-x",
                             scale="paper", sweep=None, wrong=None, standard=None)]


def test_the_appendix_names_a_stored_run_by_its_words(ledger):
    # a run trained for fewer steps than the paper's is a "stored run", not a paper-scale one
    short = fidelity.claim_record("04-gap", book="0.1", verdict="reproduced",
                                  paper_scale="0.2 (50,000 of the paper's 781,250 steps)", stored="stored run")
    full = fidelity.claim_record("01-a", book="0.1", verdict="reproduced", paper_scale="0.3")
    books = [row[2] for row in fidelity.claims_table([short, full], "emami")[1]]
    assert books == ["0.1; stored run: 0.2 (50,000 of the paper's 781,250 steps)", "0.1; stored paper-scale run: 0.3"]
    old = {k: v for k, v in full.items() if k != "stored"}        # a record glued before the field existed
    assert fidelity.claims_table([old], "emami")[1][0][2] == "0.1; stored paper-scale run: 0.3"
    with pytest.raises(ValueError, match="stored"):
        fidelity.claim_record("01-a", book="0.1", verdict="reproduced", paper_scale="0.3", stored="  ")
    # a record that reads no artefact names none (it is not said to come from a stored run)
    assert fidelity.claim_record("01-a", book="0.1", verdict="reproduced")["stored"] is None
    with pytest.raises(ValueError, match="stored names the artefact"):
        fidelity.claim_record("01-a", book="0.1", verdict="reproduced", stored="stored run")


def test_unrecorded_names_the_ledger_entries_no_chapter_records(ledger):
    records = [fidelity.claim_record(k, **GOOD) for k in ("04-gap", "01-a", "01-d", "01-b", "01-c", "02-c", "12-eta")]
    records.append(fidelity.erratum_record("01-slip", check="z"))
    assert fidelity.unrecorded(records) == ["claim emami:04-bare", "claim emami:04-nosection"]
    assert fidelity.unrecorded(records[1:-1]) == ["claim emami:04-gap", "claim emami:04-bare",
                                                  "claim emami:04-nosection", "erratum emami:01-slip"]


# ----------------------------------------------------------------------------- verdicts over choices

def test_a_sweep_gives_reproduced_depends_on_or_differs():
    budget = fidelity.sweep("the training budget", {"10 epochs": False, "100 epochs": True, "1000 epochs": True})
    assert budget.status == "mixed" and budget.holds == ["100 epochs", "1000 epochs"] and budget.fails == ["10 epochs"]
    assert fidelity.verdict_over(budget) == "depends on the training budget"
    assert budget.text() == "over the training budget: holds at 100 epochs, 1000 epochs; fails at 10 epochs"
    start = fidelity.sweep("the start", {"0": True, "L0": False})
    assert fidelity.verdict_over(budget, start, True) == "depends on the training budget and the start"
    always = fidelity.sweep("the code", [("random", True), ("balanced", True), ("skipped", None)])
    never = fidelity.sweep("the split", {"fold 0": False, "fold 1": False})
    assert always.outcomes == (("random", True), ("balanced", True))       # None: not computed, left out
    assert fidelity.verdict_over(always) == "reproduced"
    assert fidelity.verdict_over(never) == "differs"
    assert fidelity.verdict_over(always, never) == "partially reproduced"   # e.g. book scale holds, paper scale fails
    assert fidelity.verdict_over(always, None, False) == "partially reproduced"
    assert fidelity.sweep("the code", {"a": True}, at="stored run").text() == \
        "over the code (stored run): holds at every setting tried (a)"
    with pytest.raises(ValueError, match="at least one sweep or check"):
        fidelity.verdict_over(None)
    with pytest.raises(ValueError, match="at least one setting that was computed"):
        fidelity.sweep("the code", {"random": None})
    with pytest.raises(ValueError, match="may not contain"):
        fidelity.sweep("the budget", {"10, 30 epochs": True})
    with pytest.raises(ValueError, match="choice must name"):
        fidelity.sweep("", {"a": True})


def test_an_open_setting_decides_only_when_its_outcome_changes_the_verdict():
    """A setting the runs leave undecided: harmless when both of its outcomes give the same verdict,
    the verdict's decider (not resolved) when they do not."""
    # one setting fails: an open one that held would make it "depends on", one that failed "differs"
    assert fidelity.open_settings_decide("the variant", {"In+Out": False}, ["In+Skip"])
    # one setting holds, another fails: "depends on" whatever the open one does
    assert not fidelity.open_settings_decide("the threshold", {"0.01": True, "0.003": False}, ["0.001"])
    # a mixed sweep beside a failing check: "depends on" either way
    assert not fidelity.open_settings_decide("the code", {"a": True, "c": False}, ["b"], False)
    assert fidelity.open_settings_decide("the code", {"a": True}, ["b"])        # reproduced or depends on
    with pytest.raises(ValueError, match="at least one setting"):
        fidelity.open_settings_decide("the code", {"a": True}, [])
    with pytest.raises(ValueError, match="decided or open"):
        fidelity.open_settings_decide("the code", {"a": True}, ["a"])


def test_verdict_class_groups_every_choice_under_depends_on():
    assert fidelity.verdict_class("depends on the amino-acid code") == "depends on"
    assert fidelity.verdict_class("by construction") == "by construction"
    assert fidelity.verdict_class("reproduced (past the peak, nu_W <= 0.7)") == "reproduced"
    for bad in ("depends on", "depends on ", "fine", None, "reproduced ()", "reproduced mostly"):
        with pytest.raises(ValueError, match="verdict must be one of"):
            fidelity.verdict_class(bad)


def test_a_verdict_must_agree_with_its_sweeps(ledger):
    mixed = fidelity.sweep("the budget", {"10": False, "100": True})
    holds = fidelity.sweep("the code", {"a": True, "b": True})
    r = fidelity.claim_record("04-gap", book="0.1", verdict="depends on the budget", sweeps=[mixed, holds])
    assert r["sweep"] == ("over the budget: holds at 100; fails at 10; "
                          "over the code: holds at every setting tried (a, b)")
    with pytest.raises(ValueError, match="the verdict is 'depends on the budget', not 'reproduced'"):
        fidelity.claim_record("04-gap", book="0.1", verdict="reproduced", sweeps=[mixed])
    with pytest.raises(ValueError, match="needs a sweep over that choice"):
        fidelity.claim_record("04-gap", book="0.1", verdict="depends on the code", sweeps=[holds])
    with pytest.raises(ValueError, match="'differs' with a sweep that holds"):
        fidelity.claim_record("04-gap", book="0.1", verdict="differs", sweeps=[holds])
    # a claim left open by another choice (not resolved over it) keeps the sweep that flips, printed with it
    r = fidelity.claim_record("04-gap", book="0.1", verdict="not resolved over the seed", sweeps=[mixed])
    assert r["sweep"].startswith("over the budget: holds at 100")
    with pytest.raises(TypeError, match="fidelity.sweep"):
        fidelity.claim_record("04-gap", book="0.1", verdict="reproduced", sweeps=[("a", True)])
    with pytest.raises(ValueError, match="no sweep, no wrong value"):
        fidelity.claim_record("04-gap", book="0.1", verdict="by construction", sweeps=[holds])


def test_a_check_that_holds_on_a_plausible_wrong_value_is_refused(ledger):
    r = fidelity.claim_record("04-gap", book="1655", verdict="reproduced", wrong=("1,800", False))
    assert r["wrong"] == "fails on 1,800"
    with pytest.raises(ValueError, match="also holds on the plausible wrong value 1,656"):
        fidelity.claim_record("04-gap", book="1655", verdict="reproduced", wrong=("1,656", True))
    with pytest.raises(TypeError, match="wrong must be"):
        fidelity.claim_record("04-gap", book="1655", verdict="reproduced", wrong="1,800")


def test_a_differs_shows_its_check_holding_where_the_claim_holds(ledger):
    r = fidelity.claim_record("04-gap", book="1655", verdict="differs", wrong=("the exact construction", True))
    assert r["wrong"] == "holds on the exact construction"
    with pytest.raises(ValueError, match="a 'differs' needs its check to hold"):
        fidelity.claim_record("04-gap", book="1655", verdict="differs", wrong=("the exact construction", False))


def test_by_construction_is_listed_but_not_counted(ledger, monkeypatch):
    recorded = []
    monkeypatch.setattr(fidelity, "_glue", recorded.append)
    fidelity.by_construction("04-gap", book="the window is 159 long: any non-zero weights span it")
    fidelity.claim("04-bare", what="w", published="p", book="2", verdict="depends on the budget",
                   sweeps=[fidelity.sweep("the budget", {"10": True, "100": False})])
    assert recorded[0]["verdict"] == "by construction"
    counts = fidelity.verdict_counts([dict(r, docname="04") for r in recorded], "emami")
    assert counts["by construction"] == 1 and counts["depends on"] == 1
    summary = fidelity.paper_summary(recorded, "emami")
    assert summary.startswith("The book tests 1 claim of Emami")
    assert "1 depends on a choice" in summary and "0 reproduce in part and 0 differ." in summary
    assert "1 holds by the book's own construction" in summary and "w (the budget, {ref}`sec-x`)" in summary


def test_the_one_rule_for_a_match():
    assert fidelity.match_ratio(0.2, 0.1) == pytest.approx(1.0)             # two standard deviations
    assert fidelity.match_ratio(-0.1, 0.1) == pytest.approx(0.5)
    assert fidelity.match_ratio(0.2, 0.1, n_rep=4) == pytest.approx(1 / (1.25 ** 0.5))
    ratios = fidelity.match_ratio(np.array([0.0, 0.3]), np.array([0.1, 0.1]))
    assert ratios.tolist() == pytest.approx([0.0, 1.5])
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="spread must be positive"):
            fidelity.match_ratio(0.1, bad)
    with pytest.raises(ValueError, match="n_rep must be an int >= 2"):
        fidelity.match_ratio(0.1, 0.1, n_rep=1)


def test_the_rule_for_the_largest_of_k_matches():
    from statistics import NormalDist
    assert fidelity.match_sd(1) == fidelity.MATCH_SD
    tail = lambda z: 2 * (1 - NormalDist().cdf(z))
    previous = fidelity.MATCH_SD
    for k in (2, 12, 33, 1000):
        z = fidelity.match_sd(k)
        assert z > previous                                   # more statistics, a wider band
        assert tail(z) * k == pytest.approx(tail(fidelity.MATCH_SD), rel=1e-9)   # Bonferroni at the one level
        previous = z
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="k must be an int >= 1"):
            fidelity.match_sd(bad)


def test_an_erratum_needs_its_evidence(tmp_path):
    text = "[erratum.07-x]\nwhere = 'Sec. 2'\nstatement = 'a'\ncorrection = 'b'\nsection = 'sec-x'\n"
    folder = write_ledgers(tmp_path / "claims", dict(sperduti=text))
    with pytest.raises(ValueError, match="needs evidence = 'demonstrated'"):
        fidelity.ledger(folder)
    folder = write_ledgers(tmp_path / "claims2", dict(sperduti=text.replace("section", "evidence = 'suspected'\nsection")))
    r = fidelity.erratum_record("07-x", check="c", ledger_folder=folder)
    assert r["evidence"] == "suspected"
    records = [r, fidelity.erratum_record("01-slip", check="z", ledger_folder=folder)]
    assert [r[0] for r in fidelity.errata_table(records, "suspected")[1]] == ["Sperduti, Sec. 2 ({ref}`sec-x`)"]
    assert not any("Sperduti" in r[0] for r in fidelity.errata_table(records, "demonstrated")[1])
    with pytest.raises(ValueError, match="evidence must be one of"):
        fidelity.errata_table(records, "likely")


def test_a_summary_may_quote_only_numbers_its_chapter_computed():
    outputs = "gap 0.112 (tol. 0.390); 24 initialisations of widths 10, 40, 200 and 1000\n{\"k\": 1602}"
    prose = ("At width 1,000 the gap is 0.112 over 24 initialisations (Fig. 4, Table 1, eq. (21), Section 5.1); "
             "{glue:text}`s1_minutes` minutes; `make paper EXP=ch04`; the smallest k is 1602.")
    assert fidelity.numbers_not_in_outputs(prose, outputs) == []
    assert fidelity.numbers_not_in_outputs("the gap is 0.11 and k = 1108", outputs) == ["0.11", "1108"]
    assert fidelity.numbers_not_in_outputs("$3.7\\times10^{-4}$, from (30) and (35)", "loss 3.7e-04, 10 and 4") == []


def test_a_notebook_summary_and_its_outputs_are_read(tmp_path):
    nb = nbformat.v4.new_notebook()
    out = nbformat.v4.new_output("display_data", data={"text/markdown": "gap 0.112", "text/plain": "<md>"})
    code = nbformat.v4.new_code_cell("x")
    code.outputs = [out, nbformat.v4.new_output("stream", name="stdout", text="k = 1602\n")]
    nb.cells = [nbformat.v4.new_markdown_cell("# Title"), code, nbformat.v4.new_markdown_cell("## Summary\n\n- gap 0.112"),
                nbformat.v4.new_markdown_cell("- and k = 1108"), nbformat.v4.new_markdown_cell("## After\n\nno 77")]
    path = tmp_path / "01_x.ipynb"
    nbformat.write(nb, path)
    assert fidelity.notebook_summary(path) == "\n- gap 0.112\n- and k = 1108"
    assert "gap 0.112" in fidelity.notebook_outputs(path) and "k = 1602" in fidelity.notebook_outputs(path)
    assert fidelity.numbers_not_in_outputs(fidelity.notebook_summary(path), fidelity.notebook_outputs(path)) == ["1108"]


def _ledgers(tmp_path, published: str):
    """The three ledgers, the emami one holding ``published`` (a TOML text) besides nothing else."""
    for paper in fidelity.PAPERS:
        (tmp_path / f"{paper}.toml").write_text(published if paper == "emami" else "")
    return tmp_path


def test_published_numbers_have_one_home(tmp_path):
    """A chapter's published numbers: values with where they stand, tuples where asked, and a
    number that is also a setting of the chapter read from the experiment registry."""
    folder = _ledgers(tmp_path, '[published."04_training_dynamics"]\n'
                                'widths = { value = [10, 40], where = "Fig. 4" }\n'
                                'pair = { value = [1.5, 2], tuple = true, where = "§5" }\n'
                                'rows = { value = [[1, 2], [3, 4]], where = "Table 1" }\n'
                                'lr = { setting = "lr" }\n')
    got = fidelity.published("04_training_dynamics", folder)
    assert got == {"widths": [10, 40], "pair": (1.5, 2), "rows": [(1, 2), (3, 4)],
                   "lr": ex.experiment("04_training_dynamics").settings["lr"].paper}
    assert type(got["pair"]) is tuple and type(got["rows"][0]) is tuple


@pytest.mark.parametrize("entry, message", [
    ('x = { value = 1 }', "must be { value = ..., where"),                   # no where
    ('x = { value = 1, where = "" }', "must be { value = ..., where"),       # an empty where
    ('x = { setting = "no_such_setting" }', "naming a setting of 04_training_dynamics"),
    ('x = 3', "must be { value = ..., where"),
    ('x = { value = 1, where = "w", unit = "s" }', "must be { value = ..., where"),
])
def test_a_malformed_published_number_is_named(tmp_path, entry, message):
    folder = _ledgers(tmp_path, f'[published."04_training_dynamics"]\n{entry}\n')
    with pytest.raises(ValueError, match=re.escape(message)):
        fidelity.published("04_training_dynamics", folder)


def test_a_chapter_without_published_numbers_is_named(tmp_path):
    with pytest.raises(ValueError, match=r'\[published."05_memory_and_delay"\].*found 0'):
        fidelity.published("05_memory_and_delay", _ledgers(tmp_path, ""))


def test_every_chapter_that_reads_published_numbers_has_them():
    """Each chapter that calls fidelity.published finds its table, every entry well formed."""
    for src in sorted((ROOT / "book").glob("[0-9][0-9]_*.md")):
        if f'fidelity.published("{src.stem}")' in src.read_text():
            assert fidelity.published(src.stem)


# ----------------------------------------------------------------------------- one standard per kind

def test_ordering_resolves_only_beyond_the_spread():
    # the means of Fig. 4's four widths in order, with errors small enough to decide every pair
    assert fidelity.ordering([0.48, 0.25, 0.10, 0.07], [0.01, 0.01, 0.005, 0.005]) == "holds"
    # the same means with errors that overlap for the last pair: the repetitions cannot decide
    assert fidelity.ordering([0.48, 0.25, 0.10, 0.07], [0.01, 0.01, 0.03, 0.03]) == "not resolved"
    # a pair resolved in the reverse order fails, whatever the others do
    assert fidelity.ordering([0.48, 0.25, 0.07, 0.10], [0.01, 0.01, 0.001, 0.001]) == "fails"
    assert fidelity.ordering([1.0, 2.0, 3.0], [0.1, 0.1, 0.1], decreasing=False) == "holds"
    assert fidelity.ordering([1.0, 2.0, 3.0], [0.1, 0.1, 0.1]) == "fails"
    # a trend against the stated order that no adjacent step resolves, but the ends do (Fig. 4's gap to a wrong
    # limit: rising by less than two se a step, by three se from the first to the last), refutes it
    rising, se = [0.752, 0.800, 0.856, 0.865], [0.034, 0.026, 0.018, 0.015]
    assert fidelity.ordering(rising[:2], se[:2]) == fidelity.ordering(rising[2:], se[2:]) == "not resolved"
    assert fidelity.ordering(rising, se) == "fails"
    # the same means with errors too wide for any pair: not resolved
    assert fidelity.ordering(rising, [0.1] * 4) == "not resolved"


@pytest.mark.parametrize("values,errors", [([1.0], [0.1]), ([1.0, 2.0], [0.1]), ([1.0, float("nan")], [0.1, 0.1]),
                                           ([1.0, 2.0], [0.1, -0.1])])
def test_ordering_refuses_bad_input(values, errors):
    with pytest.raises(ValueError, match="values"):
        fidelity.ordering(values, errors)


@pytest.mark.parametrize("first,second", [(24, 48), (12, 48)])
def test_two_look_bound_keeps_one_looks_error_rate(first, second):
    # two looks at the same growing sample: the statistic at the first look and at the second, correlated by
    # sqrt(first / second); simulated, the chance that either exceeds the bound is one look's at MATCH_SD
    c = fidelity.two_look_bound(first, second)
    rng = np.random.default_rng(first)
    n = 400_000
    a, b = rng.standard_normal(n), rng.standard_normal(n)
    rho = math.sqrt(first / second)
    z1, z2 = a, rho * a + math.sqrt(1 - rho * rho) * b
    alpha = 2 * (1 - 0.5 * (1 + math.erf(fidelity.MATCH_SD / math.sqrt(2))))
    tol = 4 * math.sqrt(alpha * (1 - alpha) / n)                  # four Monte-Carlo standard errors
    rate = np.mean((np.abs(z1) > c) | (np.abs(z2) > c))
    assert abs(rate - alpha) <= tol, (rate, alpha, tol)
    # the control: two looks each at MATCH_SD decide wrongly far more often than one
    naive = np.mean((np.abs(z1) > fidelity.MATCH_SD) | (np.abs(z2) > fidelity.MATCH_SD))
    assert naive - alpha > 10 * tol, (naive, alpha)


@pytest.mark.parametrize("first,second,match", [(1, 48, "first"), (24, 24, "second"), (24, 12, "second"),
                                                (24.0, 48, "first"), (24, True, "second")])
def test_two_look_bound_refuses_bad_input(first, second, match):
    with pytest.raises(ValueError, match=match):
        fidelity.two_look_bound(first, second)


def test_ordering_at_a_two_look_bound():
    # a pair 2.1 standard errors of its difference apart: resolved at MATCH_SD, not at the two-look bound
    se = [0.01, 0.01]
    d = 2.1 * math.hypot(*se)
    assert fidelity.ordering([d, 0.0], se) == "holds"
    assert fidelity.ordering([d, 0.0], se, z=fidelity.two_look_bound(24, 48)) == "not resolved"
    assert fidelity.ordering([0.0, d], se, z=fidelity.two_look_bound(24, 48)) == "not resolved"
    with pytest.raises(ValueError, match="z must"):
        fidelity.ordering([d, 0.0], se, z=1.0)


def test_magnitude_is_one_sided_within_its_factor():
    # Table 1's polynomial distance, 3.7e-4: a tenfold larger error still meets it, a larger one does not
    assert fidelity.magnitude([1e-4, 3.7e-3], 3.7e-4)
    assert not fidelity.magnitude([1e-4, 3.8e-3], 3.7e-4)          # one repetition outside decides
    assert fidelity.magnitude([1e-24], 2e-10)                      # far smaller: closer to the target
    assert not fidelity.magnitude([2.0e-3], 3.7e-4, factor=3)
    with pytest.raises(ValueError, match="values"):
        fidelity.magnitude([float("nan")], 1e-3)
    with pytest.raises(ValueError, match="published"):
        fidelity.magnitude([1e-3], 0.0)


def test_rate_is_judged_against_its_prediction_or_zero():
    assert fidelity.rate(-0.52, 0.03, predicted=-0.5)
    assert not fidelity.rate(-0.30, 0.03, predicted=-0.5)      # the wrong exponent is told apart
    assert fidelity.rate(-0.30, 0.03)                          # no prediction: resolved from 0
    assert not fidelity.rate(-0.02, 0.03)
    with pytest.raises(ValueError, match="se"):
        fidelity.rate(-0.5, 0.0)


def test_not_resolved_is_a_verdict_listed_but_not_counted():
    assert fidelity.verdict_class("not resolved at 10 epochs with 12 seeds") == "not resolved"
    assert "not resolved" not in fidelity.COUNTED
    with pytest.raises(ValueError, match="not resolved <with what>"):
        fidelity.verdict_class("not resolved ")


def test_not_checked_may_name_where_and_why_and_still_has_no_book_value(ledger):
    v = "not checked at the paper's recording length (the recording is not public; 0.1 on the public block)"
    assert fidelity.verdict_class(v) == "not checked"
    assert "not checked" not in fidelity.COUNTED
    assert fidelity.claim_record("12-eta", book=fidelity.NO_ARTEFACT, verdict=v)["verdict"] == v
    with pytest.raises(ValueError, match="has no book value"):
        fidelity.claim_record("12-eta", book=0.1, verdict=v)
    with pytest.raises(ValueError, match="verdict must be one of"):
        fidelity.verdict_class("not checked ")


def test_differs_may_name_the_setting_it_was_measured_at():
    assert fidelity.verdict_class("differs at the one initialisation tried") == "differs"
    assert "differs" in fidelity.COUNTED
    with pytest.raises(ValueError, match="verdict must be one of"):
        fidelity.verdict_class("differs ")


def test_a_standard_must_be_one_of_the_kinds(ledger_folder=None):
    records = []
    with pytest.raises(ValueError, match="standard must be one of"):
        fidelity.claim_record("k", book=1.0, verdict="reproduced", what="w", published="p", section="sec-x",
                              standard="roughly", ledger_folder=_one_claim_ledger())
    r = fidelity.claim_record("k", book=1.0, verdict="reproduced", what="w", published="p", section="sec-x",
                              standard="identity", wrong=("a mutated formula", False),
                              ledger_folder=_one_claim_ledger())
    records.append(dict(r, docname="01"))
    bare = fidelity.claim_record("k", book=1.0, verdict="differs", what="w", published="p", section="sec-x",
                                 ledger_folder=_one_claim_ledger())
    assert fidelity.uncontrolled(records) == []
    assert fidelity.uncontrolled(records + [dict(bare, docname="01")]) == [f"{bare['paper']}:k"]


def _one_claim_ledger():
    import tempfile
    from pathlib import Path

    folder = Path(tempfile.mkdtemp())
    for paper in fidelity.PAPERS:
        (folder / f"{paper}.toml").write_text("[claim.k]\n" if paper == "emami" else "")
    return folder
def test_a_finding_is_the_books_own_and_never_counted():
    rec = fidelity.finding_record("15-x", what="a result", book="0.5", section="sec-x", control=("a wrong one", False))
    assert rec["kind"] == "finding" and rec["paper"] == fidelity.BOOK and rec["control"] == "fails on a wrong one"
    records = [rec]
    assert all(v == 0 for v in fidelity.verdict_counts(records, "emami").values())
    header, rows = fidelity.findings_table(records)
    assert header == fidelity.FINDINGS_HEADER and rows == [["a result ({ref}`sec-x`)", "0.5", "fails on a wrong one"]]
    assert fidelity.claims_table(records, "emami")[1] == []
    with pytest.raises(ValueError, match="wrong statement"):
        fidelity.finding_record("15-x", what="a result", book="0.5", section="sec-x", control=("a wrong one", True))
    with pytest.raises(TypeError, match="control"):
        fidelity.finding_record("15-x", what="a result", book="0.5", section="sec-x", control="a wrong one")
    with pytest.raises(ValueError, match="section"):
        fidelity.finding_record("15-x", what="a result", book="0.5", section="not a label!", control=("w", False))


def test_unformatted_fields_finds_a_string_that_lost_its_f_prefix():
    lost = "its length, {minutes:.1f} minutes, is not the stated {PAPER['minutes']} ({{ref}}`sec-s1-data`)"
    assert fidelity.unformatted_fields(lost) == ["{PAPER['minutes']}", "{minutes:.1f}", "{{ref}}"]
    minutes, PAPER = 29.3, {"minutes": 51}
    filled = f"its length, {minutes:.1f} minutes, is not the stated {PAPER['minutes']} ({{ref}}`sec-s1-data`)"
    # LaTeX braces, MyST roles and glue are not fields
    assert fidelity.unformatted_fields(filled + r" $\frac{a}{b}$, $x_{t}$, {glue:text}`k`, {cite:p}`x`") == []
