"""lib.book.fidelity: the records the chapters glue, the appendix that reads them back, and the check
that the two agree (the book test runs that check on the real chapters)."""
import json
import sys
from pathlib import Path

import nbformat
import pytest

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
    (dict(sperduti="[table.07-x]\nwhat = 'no'\n"), ValueError, "only \\[claim.KEY\\] and \\[erratum.KEY\\] tables"),
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
                                                         "correction = 'b'\nsection = 'sec-x'\n"))
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
    assert fidelity.verdict_counts(records, "zucchet") == {"reproduced": 0, "partially reproduced": 1,
                                                           "differs": 0, "not checked": 1}


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
    assert ("claim $b$", "exact", "1e-15", "2e-15", "reproduced", "{ref}`sec-b`") in rows
    assert ("the gap shrinks", "0.0947 (Table 1)", "0.1", "—", "reproduced", "{ref}`sec-x`") in rows   # ledger words
    assert ("a claim worded by the chapter", "0.125", "0.1", "—", "**differs**", "{ref}`sec-x`") in rows
    assert any(r[0] == "Emami" and r[1] == "Sec. 2" for r in rows) and any("**not checked**" in r for r in rows)


def test_the_appendix_tables_are_rendered_from_data_with_links_to_the_sections(appendix):
    """Each claims and errata table is one HTML table (lib.book.tables) whose "shown in" cells
    are cross-references the book's Sphinx extension resolves, and whose cells hold their text."""
    import nbformat

    _, out = appendix
    html = [o["data"]["text/html"] for c in nbformat.read(out, as_version=4).cells if c.cell_type == "code"
            for o in c.get("outputs", []) if "text/html" in o.get("data", {})]
    assert len(html) == 5                              # three papers, the errata, the counts
    assert all(h.count("<table") == 1 and 'class="rnnbook-table' in h for h in html)
    assert '<a class="rnnbook-xref" data-role="ref" data-target="sec-b"' in html[0]
    assert not any("{ref}" in h or "| " in h.split("<tbody>")[0] for h in html)


def test_a_changed_chapter_value_or_a_typed_appendix_row_is_caught(appendix, tmp_path):
    folder, out = appendix
    records = fidelity.collect(sorted(folder.glob(CHAPTERS)))
    changed = [dict(r) for r in records]
    changed[3]["book"] = "3e-15"                         # a chapter re-executed with another result
    assert any("claims table of emami" in p for p in fidelity.appendix_disagreements(out, changed))
    changed = [dict(r) for r in records]
    changed[4]["check"] = "z = 124"                      # an erratum's check changed
    assert any("errata table" in p for p in fidelity.appendix_disagreements(out, changed))
    nb = json.loads(out.read_text())                     # a row typed into the appendix
    for cell in nb["cells"]:
        for o in cell.get("outputs", []):
            meta = o.get("metadata", {})
            if fidelity.MIME in meta and meta[fidelity.MIME]["header"] == fidelity.CLAIMS_HEADER:
                meta[fidelity.MIME]["rows"].append(["typed", "1", "1", "—", "reproduced", "{ref}`sec-z`"])
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
                             verdict="not checked", section="sec-x", scale="paper")]


def test_unrecorded_names_the_ledger_entries_no_chapter_records(ledger):
    records = [fidelity.claim_record(k, **GOOD) for k in ("04-gap", "01-a", "01-d", "01-b", "01-c", "02-c", "12-eta")]
    records.append(fidelity.erratum_record("01-slip", check="z"))
    assert fidelity.unrecorded(records) == ["claim emami:04-bare", "claim emami:04-nosection"]
    assert fidelity.unrecorded(records[1:-1]) == ["claim emami:04-gap", "claim emami:04-bare",
                                                  "claim emami:04-nosection", "erratum emami:01-slip"]
