"""What reproduces: the papers' claims and slips, recorded by the chapters that check them.

The words of every claim of a paper that the book checks -- a theorem, a figure, a table entry,
a number the paper states -- and of every slip it finds stand in the paper's ledger,
``book/claims/PAPER.toml`` (:func:`ledger`): a table ``[claim.KEY]`` with ``what`` (the claim in
the book's words), ``published`` (the paper's value) and ``section`` (the label of the section
that shows the check), or ``[erratum.KEY]`` with ``where``, ``statement``, ``correction`` and
``section``.  A chapter records, where it makes the check, what it computed: :func:`claim` with
the key, its value and the verdict, :func:`erratum` with the key and the check.  A field that
formats a number the chapter holds (a published value kept in the chapter's ``PAPER``) is passed
by the chapter instead and left out of the ledger; each field has exactly one home, and a field
given twice or nowhere is an error.  Both store the completed record in the executed notebook
with myst-nb's ``glue`` (no visible output).  The fidelity appendix (``book/97_fidelity``) reads
the records back with :func:`collect`, shows them with :func:`claims_table` and
:func:`errata_table` (rendered by :func:`lib.book.notebook.table`), and requires that every ledger entry is recorded (:func:`unrecorded`); a
test compares the appendix with the chapters' records.

A record's values are strings formatted by the chapter (``f"{gap:.3f}"``) or plain numbers
(formatted with 4 significant digits); MyST math (``$\\eta^*$``) is allowed in every text field.
The appendix links to ``section`` with ``{ref}``, so a label that does not exist fails the strict
build.
"""
from __future__ import annotations

import json
import re
from numbers import Real
from pathlib import Path

from .notebook import check_scale
from .tables import MIME, inline_html

__all__ = ["PAPERS", "VERDICTS", "LEDGER", "ledger", "claim", "claim_record", "not_checked", "verdict_of", "erratum",
           "erratum_record", "unrecorded", "collect", "claims_table", "errata_table", "verdict_counts",
           "shown_tables", "appendix_disagreements"]

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
        inline_html(value, name)       # a role the appendix's tables cannot render fails here, by name
        return value
    raise TypeError(f"{name} must be a string or a real number{' or None' if allow_none else ''}, "
                    f"got {type(value).__name__}")


def _check_section(section) -> None:
    if not isinstance(section, str) or not _LABEL.match(section):
        raise ValueError(f"section must be the label of a section of the book, e.g. 'sec-width', got {section!r}")


def _glue(data: dict) -> None:
    try:
        from myst_nb import glue
    except ImportError:  # outside a notebook build there is nothing to glue into
        return
    glue(f"{GLUE_PREFIX}{data['kind']}-{data['paper']}-{data['key']}", _Record(data), display=False)


# The ledgers: one TOML file a paper (book/claims/PAPER.toml), a table [claim.KEY] or
# [erratum.KEY] an entry, holding the words of each record; the chapters supply the numbers.
LEDGER = Path(__file__).resolve().parents[2] / "book" / "claims"
TEXT_FIELDS = {"claim": ("what", "published", "section"),
               "erratum": ("where", "statement", "correction", "section")}


def ledger(folder=None) -> dict:
    """``{(kind, key): (paper, entry)}`` for every entry of the ledgers in ``folder`` (default
    :data:`LEDGER`), in the files' order: ``kind`` is "claim" or "erratum", ``entry`` the words the
    ledger gives (a subset of :data:`TEXT_FIELDS`). The fidelity appendix (Appendix
    "app-fidelity") lists them; a field outside :data:`TEXT_FIELDS` or a key in two ledgers is an error."""
    import tomllib

    folder = Path(LEDGER if folder is None else folder)
    entries, where = {}, {}
    for paper in PAPERS:
        path = folder / f"{paper}.toml"
        if not path.is_file():
            raise FileNotFoundError(f"the ledger of {paper} is missing: {path}")
        with path.open("rb") as f:
            data = tomllib.load(f)
        unknown = set(data) - set(TEXT_FIELDS)
        if unknown:
            raise ValueError(f"{path}: a ledger has only [claim.KEY] and [erratum.KEY] tables, got {sorted(unknown)}")
        for kind, table in data.items():
            for key, entry in table.items():
                extra = set(entry) - set(TEXT_FIELDS[kind])
                if extra:
                    raise ValueError(f"{path}: [{kind}.{key}] may give only {', '.join(TEXT_FIELDS[kind])}, "
                                     f"got {sorted(extra)}")
                if (kind, key) in entries:
                    raise ValueError(f"{kind} {key!r} stands in two ledgers: {where[kind, key]} and {path.name}")
                entries[kind, key], where[kind, key] = (paper, entry), path.name
    return entries


def _words(kind: str, key: str, given: dict, folder=None) -> tuple[str, dict]:
    """The paper of ``kind`` ``key`` and its text fields: each from the ledger entry or from the
    chapter's argument (``given``, None where not passed) -- exactly one of the two."""
    if not isinstance(key, str) or not _KEY.match(key):
        raise ValueError(f"key must be a lower-case slug (letters, digits, '_', '.', '-'), got {key!r}")
    entries = ledger(folder)
    if (kind, key) not in entries:
        raise ValueError(f"{kind} key {key!r} is in none of the ledgers ({', '.join(PAPERS)}.toml in "
                         f"{Path(LEDGER if folder is None else folder)}): add a table [{kind}.{key}] to the "
                         f"ledger of its paper")
    paper, entry = entries[kind, key]
    words = {}
    for field in TEXT_FIELDS[kind]:
        if field in entry and given[field] is not None:
            raise ValueError(f"{kind} {key}: {field} is given both by the ledger {paper}.toml and by the "
                             f"chapter; give it in one place")
        if field not in entry and given[field] is None:
            raise ValueError(f"{kind} {key}: {field} is missing: give it in [{kind}.{key}] of {paper}.toml "
                             f"or as the argument {field}=")
        words[field] = entry[field] if field in entry else given[field]
    return paper, words


def claim(key: str, *, book, verdict: str, scale: str = "book", paper_scale=None, what=None,
          published=None, section=None) -> None:
    """Record one quantitative claim of a paper and what the chapter found.

    The ledger entry ``[claim.KEY]`` of the paper (see :func:`ledger`) gives the claim's words:
    ``what`` (the claim in the book's words), ``published`` (the paper's value, or "not stated")
    and ``section`` (the label of the section that shows the check); a chapter passes one of them
    instead only where it formats a number it holds. ``book`` is the chapter's value at the scale
    it was executed at (``scale``), ``paper_scale`` the value computed from a stored paper-scale
    artefact (None: there is none), ``verdict`` one of :data:`VERDICTS`, computed by the chapter
    from its own outputs. Nothing is displayed (the record is glued); :func:`collect` reads it back
    for the fidelity appendix (Appendix "app-fidelity").
    """
    _glue(claim_record(key, book=book, verdict=verdict, scale=scale, paper_scale=paper_scale, what=what,
                       published=published, section=section))


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


def not_checked(key: str, *, scale: str = "book", what=None, published=None, section=None) -> None:
    """Record a claim that the book states but does not check (a cited result, a statement beyond
    what its computations reach): :func:`claim` with ``book`` = "—" and the verdict "not
    checked", so the appendix lists it beside the checked ones."""
    claim(key, book=NO_ARTEFACT, verdict="not checked", scale=scale, what=what, published=published,
          section=section)


def claim_record(key: str, *, book, verdict: str, scale: str = "book", paper_scale=None, what=None,
                 published=None, section=None, ledger_folder=None) -> dict:
    """The validated record that :func:`claim` glues (its values formatted as the appendix shows
    them, its words completed from the ledger in ``ledger_folder``, default :data:`LEDGER`)."""
    if verdict not in VERDICTS:
        raise ValueError(f"verdict must be one of {', '.join(repr(v) for v in VERDICTS)}, got {verdict!r}")
    check_scale(scale)
    paper, words = _words("claim", key, dict(what=what, published=published, section=section), ledger_folder)
    _check_section(words["section"])
    data = dict(kind="claim", paper=paper, key=key, what=_text("what", words["what"]),
                published=_text("published", words["published"]), book=_text("book", book),
                paper_scale=_text("paper_scale", paper_scale, allow_none=True),
                verdict=verdict, section=words["section"], scale=scale)
    if verdict == "not checked" and data["book"] != NO_ARTEFACT:
        raise ValueError(f"a claim that is 'not checked' has no book value: pass book={NO_ARTEFACT!r}, "
                         f"got {data['book']!r}")
    return data


def erratum(key: str, *, check: str, where=None, statement=None, correction=None, section=None) -> None:
    """Record a slip or gap in a paper: the ledger entry ``[erratum.KEY]`` gives ``where`` it is,
    the paper's ``statement``, the ``correction`` and the ``section`` that shows it (a chapter
    passes one of them instead only where it formats a number it holds); ``check`` is what the
    chapter computed that shows the slip."""
    _glue(erratum_record(key, check=check, where=where, statement=statement, correction=correction,
                         section=section))


def erratum_record(key: str, *, check: str, where=None, statement=None, correction=None, section=None,
                   ledger_folder=None) -> dict:
    """The validated record that :func:`erratum` glues."""
    paper, words = _words("erratum", key, dict(where=where, statement=statement, correction=correction,
                                               section=section), ledger_folder)
    _check_section(words["section"])
    return dict(kind="erratum", paper=paper, key=key, where=_text("where", words["where"]),
                statement=_text("statement", words["statement"]),
                correction=_text("correction", words["correction"]), check=_text("check", check),
                section=words["section"])


def unrecorded(records: list[dict], folder=None) -> list[str]:
    """The ledger entries (``folder``, default :data:`LEDGER`) that no record of ``records``
    (:func:`collect`) gives, as "kind paper:key": a claim whose words stand in a ledger but that
    no chapter checks. The fidelity appendix (Appendix "app-fidelity") requires none."""
    done = {(r["kind"], r["key"]) for r in records}
    return [f"{kind} {paper}:{key}" for (kind, key), (paper, _) in ledger(folder).items() if (kind, key) not in done]


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


CLAIMS_HEADER = ["claim", "paper", 'this book (`scale="book"`)', "paper-scale artefact", "verdict", "shown in"]
ERRATA_HEADER = ["paper", "where", "the paper says", "correction", "the check", "shown in"]


def claims_table(records: list[dict], paper: str) -> tuple[list[str], list[list[str]]]:
    """The table of ``paper``'s claims, in reading order: ``(header, rows)`` for
    :func:`lib.book.notebook.table` (the "shown in" cell links the section with ``{ref}``)."""
    rows = []
    for r in (r for r in records if r["kind"] == "claim" and r["paper"] == paper):
        book = r["book"] if r["scale"] == "book" else f"{r['book']} (`scale=\"{r['scale']}\"`)"
        rows.append([r["what"], r["published"], book, r["paper_scale"] or NO_ARTEFACT,
                     f"**{r['verdict']}**" if r["verdict"] != "reproduced" else r["verdict"],
                     f"{{ref}}`{r['section']}`"])
    return list(CLAIMS_HEADER), rows


def errata_table(records: list[dict]) -> tuple[list[str], list[list[str]]]:
    """The table of every erratum, paper by paper: ``(header, rows)``."""
    rows = [[paper.capitalize(), r["where"], r["statement"], r["correction"], r["check"], f"{{ref}}`{r['section']}`"]
            for paper in PAPERS for r in records if r["kind"] == "erratum" and r["paper"] == paper]
    return list(ERRATA_HEADER), rows


def verdict_counts(records: list[dict], paper: str) -> dict:
    """``{verdict: number of claims}`` for ``paper`` (every verdict present, zeros included)."""
    counts = dict.fromkeys(VERDICTS, 0)
    for r in records:
        if r["kind"] == "claim" and r["paper"] == paper:
            counts[r["verdict"]] += 1
    return counts


def shown_tables(path) -> list[dict]:
    """The results tables an executed notebook displays (:func:`lib.book.notebook.table`), as the
    data they were rendered from: ``{"header": [...], "rows": [[...], ...]}`` each, in order."""
    import nbformat

    nb = nbformat.read(Path(path), as_version=4)
    return [out["metadata"][MIME] for cell in nb.cells if cell.cell_type == "code"
            for out in cell.get("outputs", []) if MIME in out.get("metadata", {})]


def appendix_disagreements(appendix, records: list[dict]) -> list[str]:
    """What the executed appendix notebook ``appendix`` shows that differs from ``records`` (the
    chapters' records, :func:`collect`): a paper's claims table or the errata table that is not
    displayed exactly as the records give it, or a row of a claims or errata table of the
    appendix that no record gives.  Empty when the appendix and the chapters agree."""
    shown = shown_tables(appendix)
    problems = []
    expected = {"claims": set(), "errata": set()}

    def displayed(table) -> bool:
        header, rows = table
        return {"header": header, "rows": rows} in shown

    for paper in PAPERS:
        table = claims_table(records, paper)
        expected["claims"].update(map(tuple, table[1]))
        if not displayed(table):
            problems.append(f"the claims table of {paper} differs from the chapters' records")
    table = errata_table(records)
    expected["errata"].update(map(tuple, table[1]))
    if not displayed(table):
        problems.append("the errata table differs from the chapters' records")
    for t in shown:
        kind = "claims" if t["header"] == CLAIMS_HEADER else "errata" if t["header"] == ERRATA_HEADER else None
        for row in t["rows"] if kind else []:
            if tuple(row) not in expected[kind]:
                problems.append(f"a row of the appendix that no chapter records: {' | '.join(row)[:120]}")
    return problems
