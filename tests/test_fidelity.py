"""lib.fidelity: the records the chapters glue, the appendix that reads them back, and the check
that the two agree (the book test runs that check on the real chapters)."""
import json
import sys
from pathlib import Path

import nbformat
import pytest

from lib import fidelity

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import book  # noqa: E402

GOOD = dict(published="0.0947 (Table 1)", book="0.101", verdict="reproduced", section="sec-x")


@pytest.mark.parametrize("change, match", [
    (dict(paper="vaswani"), "paper must be one of emami, sperduti, zucchet"),
    (dict(key="Fig 4"), "key must be a lower-case slug"),
    (dict(verdict="ok"), "verdict must be one of 'reproduced'"),
    (dict(section="see section 4"), "section must be the label"),
    (dict(book="0.1 | 0.2"), "book must fit in one table cell"),
    (dict(published="two\nlines"), "published must fit in one table cell"),
    (dict(book=""), "book must be a non-empty string"),
    (dict(scale="huge"), "scale must be 'book' or 'paper'"),
    (dict(verdict="not checked"), "a claim that is 'not checked' has no book value"),
])
def test_claim_rejects_bad_input(change, match):
    args = dict(paper="emami", key="04-gap", what="the gap shrinks", **GOOD) | change
    with pytest.raises(ValueError, match=match):
        fidelity.claim(args.pop("paper"), args.pop("key"), args.pop("what"), **args)
    with pytest.raises(ValueError, match=match):   # the record itself is validated the same way
        args = dict(paper="emami", key="04-gap", what="the gap shrinks", **GOOD) | change
        fidelity.claim_record(args.pop("paper"), args.pop("key"), args.pop("what"), **args)


@pytest.mark.parametrize("value", [True, [0.1], {"a": 1}])
def test_claim_rejects_values_that_are_not_text_or_numbers(value):
    with pytest.raises(TypeError, match="book must be a string or a real number"):
        fidelity.claim("emami", "04-gap", "the gap", **(GOOD | dict(book=value)))


def test_numbers_are_formatted_and_not_checked_claims_carry_a_dash():
    assert fidelity.claim("zucchet", "12-eta", "eta*", published=1, book=2, verdict="reproduced",
                          section="sec-x") is None            # nothing for a notebook to display
    r = fidelity.claim_record("zucchet", "12-eta", "eta*", published=1 / 3, book=0.123456789, verdict="reproduced",
                       section="sec-x")
    assert (r["published"], r["book"], r["paper_scale"]) == ("0.3333", "0.1235", None)
    r = fidelity.claim_record("zucchet", "12-other", "a claim", published="x", book=fidelity.NO_ARTEFACT,
                       verdict="not checked", section="sec-x")
    assert r["verdict"] == "not checked"


def _chapter(path: Path, source: str) -> None:
    """Execute a one-cell notebook that records with lib.fidelity, as a chapter does."""
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import lib\n" + source)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    NotebookClient(nb, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    nbformat.write(nb, path)


RECORDS = """
for paper in ("emami", "sperduti", "zucchet"):
    lib.fidelity.claim(paper, "01-a", f"claim a of {paper}", published="1.0 (eq. 3)", book=f"{0.5 + 0.25:.2f}",
                       verdict="partially reproduced", section="sec-a")
lib.fidelity.claim("emami", "01-b", "claim $b$", published="exact", book=1e-15, verdict="reproduced", section="sec-b",
                   paper_scale="2e-15")
lib.fidelity.erratum("emami", "01-slip", "Sec. 2", statement="$\\\\nu_W$", correction="$\\\\sqrt{\\\\nu_W}$",
                     check="z = 123", section="sec-b")
"""


@pytest.fixture(scope="module")
def appendix(tmp_path_factory):
    """Synthetic executed chapters and the real appendix notebook executed on them."""
    folder = tmp_path_factory.mktemp("chapters")
    _chapter(folder / "01_first.ipynb", RECORDS)
    _chapter(folder / "02_second.ipynb", 'lib.fidelity.claim("zucchet", "02-c", "claim c", published="0.1", '
                                         'book="—", verdict="not checked", section="sec-c")')
    src = ROOT / "book" / "97_fidelity.md"
    out = folder / "97_fidelity.ipynb"
    import papermill

    nb_in = folder / "97_in.ipynb"
    book.to_notebook(src, nb_in)
    papermill.execute_notebook(str(nb_in), str(out), parameters={"chapters_dir": str(folder)},
                               cwd=str(ROOT / "book"), progress_bar=False, log_output=False,
                               kernel_name="python3")
    return folder, out


def test_a_claim_and_an_erratum_may_share_a_key(tmp_path):
    _chapter(tmp_path / "01_both.ipynb", 'lib.fidelity.claim("emami", "01-x", "c", published="1", book="2", '
             'verdict="differs", section="sec-x")\nlib.fidelity.erratum("emami", "01-x", "Sec. 2", statement="a", '
             'correction="b", check="c", section="sec-x")')
    nb = nbformat.read(tmp_path / "01_both.ipynb", as_version=4)
    names = [o["metadata"]["scrapbook"]["name"] for o in nb.cells[0].outputs]
    assert names == ["fidelity-claim-emami-01-x", "fidelity-erratum-emami-01-x"]   # distinct glue keys
    assert [o["output_type"] for o in nb.cells[0].outputs] == ["display_data"] * 2    # no displayed dict
    assert [r["kind"] for r in fidelity.collect([tmp_path / "01_both.ipynb"])] == ["claim", "erratum"]


def test_collect_reads_every_record_in_order(appendix):
    folder, _ = appendix
    records = fidelity.collect(sorted(folder.glob("0[12]_*.ipynb")))
    assert [(r["paper"], r["key"], r["docname"]) for r in records] == [
        ("emami", "01-a", "01_first"), ("sperduti", "01-a", "01_first"), ("zucchet", "01-a", "01_first"),
        ("emami", "01-b", "01_first"), ("emami", "01-slip", "01_first"), ("zucchet", "02-c", "02_second")]
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
    records = fidelity.collect(sorted(folder.glob("0[12]_*.ipynb")))
    assert fidelity.appendix_disagreements(out, records) == []
    shown = fidelity._markdown_outputs(out)
    assert "| claim $b$ | exact | 1e-15 | 2e-15 | reproduced | {ref}`sec-b` |" in shown
    assert "| Emami | Sec. 2 |" in shown and "**not checked**" in shown


def test_a_changed_chapter_value_or_a_typed_appendix_row_is_caught(appendix, tmp_path):
    folder, out = appendix
    records = fidelity.collect(sorted(folder.glob("0[12]_*.ipynb")))
    changed = [dict(r) for r in records]
    changed[3]["book"] = "3e-15"                         # a chapter re-executed with another result
    assert any("claims table of emami" in p for p in fidelity.appendix_disagreements(out, changed))
    changed = [dict(r) for r in records]
    changed[4]["check"] = "z = 124"                      # an erratum's check changed
    assert any("errata table" in p for p in fidelity.appendix_disagreements(out, changed))
    nb = json.loads(out.read_text())                     # a row typed into the appendix
    for cell in nb["cells"]:
        for o in cell.get("outputs", []):
            if "text/markdown" in o.get("data", {}):
                md = o["data"]["text/markdown"]
                o["data"]["text/markdown"] = (md if isinstance(md, str) else "".join(md)) + \
                    "\n| typed | 1 | 1 | — | reproduced | {ref}`sec-z` |"
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


def test_not_checked_is_a_claim_without_a_book_value(monkeypatch):
    recorded = []
    monkeypatch.setattr(fidelity, "_glue", recorded.append)
    fidelity.not_checked("emami", "02-lemma", "a cited lemma", published="exact (App. C)", section="sec-tau",
                         scale="paper")
    assert recorded == [dict(kind="claim", paper="emami", key="02-lemma", what="a cited lemma",
                             published="exact (App. C)", book=fidelity.NO_ARTEFACT, paper_scale=None,
                             verdict="not checked", section="sec-tau", scale="paper")]
