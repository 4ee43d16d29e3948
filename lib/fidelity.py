"""What reproduces: the papers' claims and slips, recorded by the chapters that check them.

A chapter records each quantitative claim of a paper that it checks -- a theorem, a figure, a
table entry, a number the paper states -- with :func:`claim`, and each slip it finds in a paper
with :func:`erratum`.  Both store the record in the executed notebook with myst-nb's ``glue``
(no visible output), so every cell of a record is computed where the check is made.  The
fidelity appendix (``book/97_fidelity``) reads the records back from the executed chapters with
:func:`collect` and renders them with :func:`claims_table` and :func:`errata_table`; a test
compares the appendix with the chapters' records.

A record's values are strings formatted by the chapter (``f"{gap:.3f}"``) or plain numbers
(formatted with 4 significant digits); MyST math (``$\\eta^*$``) is allowed in every text field.
``section`` is the label of the section that shows the check (``"sec-width"``); the appendix
links to it with ``{ref}``, so a label that does not exist fails the strict build.
"""
from __future__ import annotations

import json
import re
from numbers import Real
from pathlib import Path

from .notebook import check_scale, markdown_table

__all__ = ["PAPERS", "VERDICTS", "claim", "claim_record", "not_checked", "verdict_of", "erratum", "collect", "claims_table", "errata_table",
           "verdict_counts", "appendix_disagreements"]

PAPERS = {
    "emami": "Emami et al. (2021), *Implicit bias of linear RNNs*",
    "sperduti": "Sperduti (2015), *Equivalence results between feedforward and recurrent neural networks for sequences*",
    "zucchet": "Zucchet et al. (2023), *Gated recurrent neural networks discover attention*",
}
VERDICTS = ("reproduced", "partially reproduced", "differs", "not checked")
GLUE_PREFIX = "fidelity-"
_KEY = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_:.-]*$")
NO_ARTEFACT = "—"


class _Record:
    """What ``glue`` stores: the record as JSON text (read back by :func:`collect`)."""

    def __init__(self, data: dict):
        self.data = data

    def __repr__(self) -> str:
        return json.dumps(self.data, ensure_ascii=False, sort_keys=True)


def _text(name: str, value, *, allow_none: bool = False) -> str | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool):
        raise TypeError(f"{name} must be a string or a real number, got the bool {value!r}")
    if isinstance(value, Real):
        return f"{float(value):.4g}"
    if isinstance(value, str):
        if not value.strip():
            raise ValueError(f"{name} must be a non-empty string, got {value!r}")
        if "|" in value.replace("\\|", "") or "\n" in value:
            raise ValueError(f"{name} must fit in one table cell (no '|' and no newline), got {value!r}")
        return value
    raise TypeError(f"{name} must be a string or a real number{' or None' if allow_none else ''}, "
                    f"got {type(value).__name__}")


def _common(paper: str, key: str, section: str) -> None:
    if paper not in PAPERS:
        raise ValueError(f"paper must be one of {', '.join(PAPERS)}, got {paper!r}")
    if not isinstance(key, str) or not _KEY.match(key):
        raise ValueError(f"key must be a lower-case slug (letters, digits, '_', '.', '-'), got {key!r}")
    if not isinstance(section, str) or not _LABEL.match(section):
        raise ValueError(f"section must be the label of a section of the book, e.g. 'sec-width', got {section!r}")


def _glue(data: dict) -> None:
    try:
        from myst_nb import glue
    except ImportError:  # outside a notebook build there is nothing to glue into
        return
    glue(f"{GLUE_PREFIX}{data['kind']}-{data['paper']}-{data['key']}", _Record(data), display=False)


def claim(paper: str, key: str, what: str, *, published, book, verdict: str, section: str,
          paper_scale=None, scale: str = "book") -> None:
    """Record one quantitative claim of ``paper`` and what the chapter found.

    ``what`` says the claim in the book's words; ``published`` is the paper's value (or
    "not stated"), ``book`` the chapter's value at the scale it was executed at (``scale``),
    ``paper_scale`` the value computed from a stored paper-scale artefact (None: there is
    none), ``verdict`` one of :data:`VERDICTS`, computed by the chapter from its own outputs.
    Nothing is displayed (the record is glued); :func:`collect` reads it back.
    """
    _glue(claim_record(paper, key, what, published=published, book=book, verdict=verdict,
                       section=section, paper_scale=paper_scale, scale=scale))


def verdict_of(*checks) -> str:
    """The verdict a chapter's checks give a claim: "reproduced" when every check holds,
    "partially reproduced" when some do, "differs" when none does.

    A check is anything with a truth value; ``None`` marks a check that did not run (the
    paper-scale one when no stored run is read) and is left out. At least one check must have run.
    """
    ran = [bool(c) for c in checks if c is not None]
    if not ran:
        raise ValueError("verdict_of needs at least one check that ran (every check given was None)")
    return "reproduced" if all(ran) else ("partially reproduced" if any(ran) else "differs")


def not_checked(paper: str, key: str, what: str, *, published, section: str, scale: str = "book") -> None:
    """Record a claim of ``paper`` that the book states but does not check (a cited result, a
    statement beyond what its computations reach): :func:`claim` with ``book`` = "—" and the
    verdict "not checked", so the appendix lists it beside the checked ones."""
    claim(paper, key, what, published=published, book=NO_ARTEFACT, verdict="not checked", section=section,
          scale=scale)


def claim_record(paper: str, key: str, what: str, *, published, book, verdict: str, section: str,
                 paper_scale=None, scale: str = "book") -> dict:
    """The validated record that :func:`claim` glues (its values formatted as the appendix shows them)."""
    _common(paper, key, section)
    if verdict not in VERDICTS:
        raise ValueError(f"verdict must be one of {', '.join(repr(v) for v in VERDICTS)}, got {verdict!r}")
    check_scale(scale)
    data = dict(kind="claim", paper=paper, key=key, what=_text("what", what),
                published=_text("published", published), book=_text("book", book),
                paper_scale=_text("paper_scale", paper_scale, allow_none=True),
                verdict=verdict, section=section, scale=scale)
    if verdict == "not checked" and data["book"] != NO_ARTEFACT:
        raise ValueError(f"a claim that is 'not checked' has no book value: pass book={NO_ARTEFACT!r}, "
                         f"got {data['book']!r}")
    return data


def erratum(paper: str, key: str, where: str, *, statement: str, correction: str, check: str,
            section: str) -> None:
    """Record a slip or gap in ``paper``: ``where`` it is, the paper's ``statement``, the
    ``correction``, and the ``check`` (computed by the chapter) that shows it."""
    _common(paper, key, section)
    _glue(dict(kind="erratum", paper=paper, key=key, where=_text("where", where),
               statement=_text("statement", statement), correction=_text("correction", correction),
               check=_text("check", check), section=section))


def collect(notebooks) -> list[dict]:
    """The records glued in the executed ``notebooks`` (paths, in reading order), each with
    ``docname`` (the notebook's stem) added.  A key recorded twice is an error."""
    import nbformat

    records, seen = [], {}
    for path in notebooks:
        path = Path(path)
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
                name = out.get("metadata", {}).get("scrapbook", {}).get("name", "")
                if not name.startswith(GLUE_PREFIX):
                    continue
                prefix = out["metadata"]["scrapbook"].get("mime_prefix", "")
                data = json.loads(out["data"][prefix + "text/plain"])
                ident = (data["kind"], data["paper"], data["key"])
                if ident in seen:
                    raise ValueError(f"{data['kind']} {data['paper']}:{data['key']} is recorded twice: "
                                     f"in {seen[ident]} and in {path.stem}")
                seen[ident] = path.stem
                records.append(dict(data, docname=path.stem))
    return records


def claims_table(records: list[dict], paper: str) -> str:
    """The Markdown table of ``paper``'s claims, in reading order."""
    rows = []
    for r in (r for r in records if r["kind"] == "claim" and r["paper"] == paper):
        book = r["book"] if r["scale"] == "book" else f"{r['book']} (`scale=\"{r['scale']}\"`)"
        rows.append([r["what"], r["published"], book, r["paper_scale"] or NO_ARTEFACT,
                     f"**{r['verdict']}**" if r["verdict"] != "reproduced" else r["verdict"],
                     f"{{ref}}`{r['section']}`"])
    return markdown_table(["claim", "paper", 'this book (`scale="book"`)', "paper-scale artefact", "verdict", "shown in"],
                          rows)


def errata_table(records: list[dict]) -> str:
    """The Markdown table of every erratum, paper by paper."""
    rows = [[paper.capitalize(), r["where"], r["statement"], r["correction"], r["check"], f"{{ref}}`{r['section']}`"]
            for paper in PAPERS for r in records if r["kind"] == "erratum" and r["paper"] == paper]
    return markdown_table(["paper", "where", "the paper says", "correction", "the check", "shown in"], rows)


def verdict_counts(records: list[dict], paper: str) -> dict:
    """``{verdict: number of claims}`` for ``paper`` (every verdict present, zeros included)."""
    counts = dict.fromkeys(VERDICTS, 0)
    for r in records:
        if r["kind"] == "claim" and r["paper"] == paper:
            counts[r["verdict"]] += 1
    return counts


def _markdown_outputs(path) -> str:
    import nbformat

    nb = nbformat.read(Path(path), as_version=4)
    return "\n".join(out["data"]["text/markdown"] for cell in nb.cells if cell.cell_type == "code"
                     for out in cell.get("outputs", []) if "text/markdown" in out.get("data", {}))


def appendix_disagreements(appendix, records: list[dict]) -> list[str]:
    """What the executed appendix notebook ``appendix`` shows that differs from ``records`` (the
    chapters' records, :func:`collect`): a paper's claims table or the errata table that is not
    displayed exactly as the records give it, or a row of the appendix that no record gives.
    Empty when the appendix and the chapters agree."""
    shown = _markdown_outputs(appendix)
    problems = []
    expected_rows = set()
    for paper in PAPERS:
        table = claims_table(records, paper)
        expected_rows.update(table.splitlines()[2:])
        if table not in shown:
            problems.append(f"the claims table of {paper} differs from the chapters' records")
    table = errata_table(records)
    expected_rows.update(table.splitlines()[2:])
    if table not in shown:
        problems.append("the errata table differs from the chapters' records")
    for line in shown.splitlines():
        if line.startswith("| ") and line.rstrip().endswith("` |") and "{ref}" in line and line not in expected_rows:
            problems.append(f"a row of the appendix that no chapter records: {line[:120]}")
    return problems
