"""What reproduces: the papers' claims and slips, recorded by the chapters that check them.

The words of every claim of a paper that the book checks -- a theorem, a figure, a table entry,
a number the paper states -- and of every slip it finds stand in the paper's ledger,
``book/claims/PAPER.toml`` (:func:`ledger`): a table ``[claim.KEY]`` with ``what`` (the claim in
the book's words), ``published`` (the paper's value) and ``section`` (the label of the section
that shows the check), or ``[erratum.KEY]`` with ``where``, ``statement``, ``correction``,
``evidence`` ("demonstrated": the book computes the contradiction; "suspected": an inference
from missing or inconsistent information) and ``section``.  A chapter records, where it makes
the check, what it computed: :func:`claim` with the key, its value and the verdict,
:func:`erratum` with the key and the check.  The published numbers a chapter compares with stand
in its paper's ledger too, in a table ``[published."CHAPTER"]`` with where each stands in the paper
(or, for a number that is also one of the chapter's settings, a pointer to the experiment
registry, its one home); the chapter reads them with :func:`published` into its ``PAPER``.  A
field that formats a number the chapter holds (one of ``PAPER``'s) is passed by the chapter
instead and left out of the ledger; each field has exactly one home, and a field given twice or
nowhere is an error.
Both store the completed record in the executed notebook with myst-nb's ``glue`` (no visible
output).  The fidelity appendix (``book/97_fidelity``) reads the records back with
:func:`collect`, shows them with :func:`claims_table` and :func:`errata_table` (rendered by
:func:`lib.book.notebook.table`) and :func:`paper_summary`, and requires that every ledger entry is recorded (:func:`unrecorded`); a
test compares the appendix with the chapters' records.

Verdicts that survive their choices.  Where a paper leaves a choice open (a training budget, an
initialisation, an input code, a data split), the chapter evaluates the claim over the plausible
range of that choice, argued in its text before the numbers are seen, and passes the outcome as
a :func:`sweep`; :func:`verdict_over` turns sweeps (and single checks) into the verdict: *reproduced*
(holds over the whole range), *depends on <choice>* (holds for some settings only; the record
shows where it flips) or *differs*.  A check that would pass whatever the paper said is not a
reproduction: a chapter passes the check's outcome on a plausible wrong value (``wrong=``), and
a record whose check passes on it is refused; a statement that holds by the book's own
construction is recorded with :func:`by_construction`, listed but not counted.  One rule
decides whether two numbers *match* across the book: :func:`match_ratio`.

A record's values are strings formatted by the chapter (``f"{gap:.3f}"``) or plain numbers
(formatted with 4 significant digits); MyST math (``$\\eta^*$``) is allowed in every text field.
The appendix links to ``section`` with ``{ref}``, so a label that does not exist fails the strict
build.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from numbers import Real
from pathlib import Path

import numpy as np

from .experiments import experiment, toml_value
from .notebook import check_scale
from .tables import MIME, inline_html

__all__ = ["PAPERS", "VERDICTS", "COUNTED", "EVIDENCE", "MATCH_SD", "LEDGER", "ledger", "published", "claim",
           "claim_record",
           "not_checked", "by_construction", "verdict_of", "verdict_over", "open_settings_decide", "verdict_class", "sweep", "Sweep",
           "match_ratio", "erratum", "erratum_record", "unrecorded", "collect", "claims_table", "errata_table",
           "verdict_counts", "paper_summary", "NOT_RESOLVED", "STANDARDS", "ordering", "rate", "uncontrolled",
           "appendix_disagreements", "numbers_not_in_outputs", "notebook_summary", "match_sd",
           "notebook_outputs", "shown_tables", "CLAIMS_HEADER", "ERRATA_HEADER", "finding", "finding_record",
           "findings_table", "FINDINGS_HEADER", "BOOK", "two_look_bound"]

PAPERS = {
    "emami": "Emami et al. (2021), *Implicit bias of linear RNNs*",
    "sperduti": "Sperduti (2015), *Equivalence results between feedforward and recurrent neural networks for sequences*",
    "zucchet": "Zucchet et al. (2023), *Gated recurrent neural networks discover attention*",
}
# "depends on" is written with its choice: "depends on the training budget"
VERDICTS = ("reproduced", "depends on", "partially reproduced", "differs", "not resolved", "not checked",
            "by construction")
COUNTED = ("reproduced", "depends on", "partially reproduced", "differs")   # the verdicts of a test of the paper
# "not resolved" is written with what would resolve it: "not resolved at 10 epochs with 12 seeds" --
# a test that ran and whose spread cannot decide (too few repetitions); listed, not counted
NOT_RESOLVED = "not resolved"
# "differs" may name the setting it was measured at: "differs at the one initialisation tried" (counted as "differs")
DIFFERS = "differs"
# "not checked" may name where the claim is not checked and why: "not checked at the paper's recording length (the
# recording is not public; ...)" -- listed, not counted, with no book value (what was measured elsewhere goes in the words)
NOT_CHECKED = "not checked"
# "reproduced" may name, in parentheses, the range the book narrowed the claim to before the numbers:
# "reproduced (past the peak of rho_j, nu_W <= 0.7)" (counted as "reproduced")
REPRODUCED = "reproduced"
EVIDENCE = ("demonstrated", "suspected")
MATCH_SD = 2.0
GLUE_PREFIX = "fidelity-"
BOOK = "book"        # the "paper" of a finding: a result of the book's own, claimed by none of PAPERS
_KEY = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_:.-]*$")
NO_ARTEFACT = "—"
STORED_PAPER_SCALE = "stored paper-scale run"   # the appendix's name for a claim's stored artefact, by default
DEPENDS = "depends on "


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


# ----------------------------------------------------------------------------- one rule for "match"

def match_ratio(difference, spread, n_rep: int | None = None):
    """The book's one rule for "these two numbers match": their ``difference`` in units of
    :data:`MATCH_SD` standard deviations of the ``spread`` that the experiment's own repetitions
    show (the random draws the paper leaves open: initialisation, data, split), so that a ratio
    of at most 1 is a match.  A difference that small cannot be told apart from re-running the
    experiment.  Comparing one published value with the mean of ``n_rep`` repetitions, the
    spread of one repetition about that mean is ``spread * sqrt(1 + 1/n_rep)``.

    ``difference`` and ``spread`` are numbers or arrays (broadcast; the spread must be positive);
    returns ``|difference| / (MATCH_SD * spread * sqrt(1 + 1/n_rep))`` of the same shape (a float
    for numbers).  Used by Chapters 4-6 for every "match" they record."""
    d = np.abs(np.asarray(difference, dtype=float))
    s = np.asarray(spread, dtype=float)
    if not np.all(np.isfinite(s)) or np.any(s <= 0):
        raise ValueError(f"spread must be positive and finite, got {spread!r}")
    if n_rep is not None:
        if isinstance(n_rep, bool) or not isinstance(n_rep, (int, np.integer)) or n_rep < 2:
            raise ValueError(f"n_rep must be an int >= 2 (a spread needs two repetitions), got {n_rep!r}")
        s = s * math.sqrt(1 + 1 / n_rep)
    r = d / (MATCH_SD * s)
    return float(r) if r.ndim == 0 else r


def match_sd(k: int = 1) -> float:
    """The book's one rule for the largest of ``k`` matches judged together (the largest |z| over
    k statistics, every read-back of a sweep): each compared at the Bonferroni-corrected level of
    :data:`MATCH_SD`, so that the chance that the largest of k statistics of a true claim leaves
    the band is at most that of one statistic leaving ``MATCH_SD`` standard deviations.  Returns
    the number of standard deviations z with two-sided Gaussian tail ``2 (1 - Phi(z)) =
    2 (1 - Phi(MATCH_SD)) / k``; ``match_sd(1)`` is :data:`MATCH_SD`."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be an int >= 1 (the number of statistics judged together), got {k!r}")
    if k == 1:
        return MATCH_SD
    from statistics import NormalDist
    tail = 2 * (1 - NormalDist().cdf(MATCH_SD)) / int(k)
    return float(NormalDist().inv_cdf(1 - tail / 2))


# ----------------------------------------------------------------------------- sweeps and verdicts

@dataclass(frozen=True)
class Sweep:
    """A claim evaluated over the plausible range of one choice the paper leaves open: ``choice``
    names it ("the training budget"), ``outcomes`` pairs each setting (as the page writes it)
    with whether the claim holds there, in the order of the range."""

    choice: str
    outcomes: tuple[tuple[str, bool], ...]
    at: str | None = None        # where it was evaluated, e.g. "stored paper-scale run"

    @property
    def holds(self) -> list[str]:
        return [s for s, ok in self.outcomes if ok]

    @property
    def fails(self) -> list[str]:
        return [s for s, ok in self.outcomes if not ok]

    @property
    def status(self) -> str:
        """"holds" (at every setting), "fails" (at every setting) or "mixed"."""
        return "holds" if not self.fails else ("fails" if not self.holds else "mixed")

    def text(self) -> str:
        """How the page and the appendix write the sweep: the range and where the claim flips."""
        head = f"over {self.choice}" + (f" ({self.at})" if self.at else "")
        if self.status == "holds":
            return f"{head}: holds at every setting tried ({', '.join(self.holds)})"
        if self.status == "fails":
            return f"{head}: fails at every setting tried ({', '.join(self.fails)})"
        return f"{head}: holds at {', '.join(self.holds)}; fails at {', '.join(self.fails)}"


def sweep(choice: str, outcomes, at: str | None = None) -> Sweep:
    """The outcome of a claim over the plausible range of ``choice`` (argued in the chapter's text
    before the numbers are seen): ``outcomes`` maps each setting's label to whether the claim
    holds there (anything with a truth value; ``None``, a setting that was not computed, is left
    out).  At least one setting must have been computed.  ``at`` says where the sweep was
    evaluated when a record has more than one over the same choice ("stored paper-scale run")."""
    if not isinstance(choice, str) or not choice.strip() or choice != _text("choice", choice):
        raise ValueError(f"choice must name what the paper leaves open, e.g. 'the training budget', got {choice!r}")
    items = list(outcomes.items()) if isinstance(outcomes, dict) else list(outcomes)
    pairs = []
    for setting, ok in items:
        if ok is None:
            continue
        label = _text("a setting", setting)
        if "; " in label or ", " in label:
            raise ValueError(f"a setting's label may not contain ', ' or '; ' (it is listed with them), got {label!r}")
        pairs.append((label, bool(ok)))
    if not pairs:
        raise ValueError(f"a sweep over {choice} needs at least one setting that was computed")
    return Sweep(choice, tuple(pairs), None if at is None else _text("at", at))


def verdict_over(*checks) -> str:
    """The verdict of a claim from its sweeps (:func:`sweep`) and single checks (truth values;
    ``None``, a check that did not run, is left out): "depends on <choice>" when some sweep holds
    at some of its settings only (the choices of every such sweep, joined by "and"); otherwise
    "reproduced" when everything holds, "differs" when nothing does and "partially reproduced"
    in between (e.g. the book scale holds and the paper scale does not)."""
    ran = [c for c in checks if c is not None]
    if not ran:
        raise ValueError("verdict_over needs at least one sweep or check that ran")
    mixed = [c.choice for c in ran if isinstance(c, Sweep) and c.status == "mixed"]
    if mixed:
        return DEPENDS + " and ".join(dict.fromkeys(mixed))
    ok = [c.status == "holds" if isinstance(c, Sweep) else bool(c) for c in ran]
    return "reproduced" if all(ok) else ("partially reproduced" if any(ok) else "differs")


def open_settings_decide(choice: str, outcomes, open_settings, *checks) -> bool:
    """Whether settings of a swept choice that the runs could not decide (``open_settings``: their
    labels; a setting not computed, or one whose repetitions leave it undecided) could change the
    claim's verdict: :func:`verdict_over` with every open setting holding and with every one
    failing, beside the decided ``outcomes`` and any other ``checks``.  When the two differ, the
    verdict is "not resolved" (listed, not counted), naming the open settings; when they agree,
    the open settings are harmless and the decided ones give the verdict."""
    labels = [_text("an open setting", s) for s in open_settings]
    if not labels:
        raise ValueError("open_settings must name at least one setting the runs left undecided")
    items = list(outcomes.items()) if isinstance(outcomes, dict) else list(outcomes)
    decided = {_text("a setting", s) for s, ok in items if ok is not None}
    both = sorted(decided & set(labels))
    if both:
        raise ValueError(f"a setting is either decided or open, not both: {both}")
    verdicts = {verdict_over(sweep(choice, items + [(s, ok) for s in labels]), *checks) for ok in (True, False)}
    return len(verdicts) > 1


def verdict_of(*checks) -> str:
    """The verdict a chapter's checks give a claim: "reproduced" when every check holds,
    "partially reproduced" when some do, "differs" when none does.

    A check is anything with a truth value; ``None`` marks a check that did not run (the
    paper-scale one when no stored run is read) and is left out. At least one check must have run.
    (:func:`verdict_over` does the same with sweeps over the choices a paper leaves open.)
    """
    ran = [bool(c) for c in checks if c is not None]
    if not ran:
        raise ValueError("verdict_of needs at least one check that ran (every check given was None)")
    return "reproduced" if all(ran) else ("partially reproduced" if any(ran) else "differs")


def verdict_class(verdict: str) -> str:
    """The entry of :data:`VERDICTS` a record's verdict belongs to ("depends on the code" ->
    "depends on", "not resolved at 10 epochs with 12 seeds" -> "not resolved", "not checked at the
    paper's recording length (...)" -> "not checked"); a ValueError for anything else."""
    if isinstance(verdict, str) and verdict.startswith(DEPENDS) and verdict[len(DEPENDS):].strip():
        return "depends on"
    if isinstance(verdict, str) and verdict.startswith(NOT_RESOLVED + " ") and verdict[len(NOT_RESOLVED):].strip():
        return NOT_RESOLVED
    if isinstance(verdict, str) and verdict.startswith(DIFFERS + " ") and verdict[len(DIFFERS):].strip():
        return DIFFERS
    if isinstance(verdict, str) and verdict.startswith(NOT_CHECKED + " ") and verdict[len(NOT_CHECKED):].strip():
        return NOT_CHECKED
    if (isinstance(verdict, str) and verdict.startswith(REPRODUCED + " (") and verdict.endswith(")")
            and verdict[len(REPRODUCED) + 2:-1].strip()):
        return REPRODUCED
    if verdict in VERDICTS and verdict not in ("depends on", NOT_RESOLVED):
        return verdict
    raise ValueError(f"verdict must be one of "
                     f"{', '.join(repr(v) for v in VERDICTS if v not in ('depends on', NOT_RESOLVED))}, "
                     f"'depends on <the choice>', 'differs <at what>', 'not resolved <with what>' or 'not checked <where, why>', "
                     f"got {verdict!r}")


# ----------------------------------------------------------------------------- one standard per kind of claim

STANDARDS = {
    "identity": "an exact identity: the relative error in float64 at most 1e-10, or at most a bound computed "
                "from the round-off of the computation",
    "match": "a statistical match: match_ratio at most 1 -- the difference within MATCH_SD standard deviations "
             "of the spread the experiment's own repetitions show; the largest of k statistics judged together "
             "within match_sd(k), the same level Bonferroni-corrected for k",
    "limit": "a limit with a rate: the fitted exponent within MATCH_SD standard errors of the predicted one "
             "(a rate the paper does not state: an exponent MATCH_SD standard errors away from 0, or, where the "
             "book derives the rate, the derived exponent within MATCH_SD standard errors, provided MATCH_SD "
             "standard errors are below 1/4, so that a slower or faster law is told apart); for errors "
             "computed exactly in float64, which have no sampling spread, within a tolerance on the exponent that the "
             "chapter declares before the fit from the size of the neglected higher-order term",
    "ordering": "an ordering or ranking: holds when each adjacent pair is in the stated order by more than MATCH_SD "
                "standard errors of its difference; fails when some pair, adjacent or not, is reversed by more; not "
                "resolved otherwise; where the repetitions were raised once after a look at their outcome (the larger "
                "run containing the first), at the two-look bound in place of MATCH_SD (two_look_bound)",
    "existence": "existence: one instance computed (a construction, a counterexample, a trained network) and "
                 "checked as an identity, or, for a trained instance, by the rule its quantity takes (a match, a "
                 "threshold)",
    "magnitude": "a precision the paper reports as one value, in units it leaves open, against the book's "
                 "repetitions: every repetition's error at most MAGNITUDE_FACTOR times the published one -- "
                 "one-sided, since a smaller error is closer to the target -- judged at each setting of the "
                 "plausible range of the units; used where the repetitions spread over orders of magnitude, so that "
                 "a match within their spread would measure the spread and not the paper's value",
}

MAGNITUDE_FACTOR = 10.0


def magnitude(values, published, factor: float = MAGNITUDE_FACTOR) -> bool:
    """The book's one rule for a precision the paper reports as a single value in units it leaves
    open (:data:`STANDARDS` "magnitude"): True when every one of the book's ``values`` (one a
    repetition, e.g. a trained student) is at most ``factor`` times ``published``.  One-sided: an
    error below the paper's is closer to the target and passes."""
    v = np.asarray(values, dtype=float).ravel()
    if v.size < 1 or not np.all(np.isfinite(v)) or np.any(v < 0):
        raise ValueError(f"values must be one or more finite errors >= 0, got {values!r}")
    if not (np.isfinite(published) and published > 0) or not (np.isfinite(factor) and factor >= 1):
        raise ValueError(f"published must be a positive error and factor >= 1, got {published!r} and {factor!r}")
    return bool(np.all(v <= factor * published))


def ordering(values, errors, *, decreasing: bool = True, z: float = MATCH_SD) -> str:
    """The book's one rule for "these come in this order" (:data:`STANDARDS` "ordering"):
    ``values`` in the order the claim states (``decreasing``: each larger than the next), ``errors``
    the standard error of each (from its repetitions).  A pair is resolved when its difference
    exceeds :data:`MATCH_SD` standard errors of the difference (the errors added in quadrature).
    Returns "holds" (every adjacent pair resolved in the stated order, hence every pair), "fails"
    (some pair, adjacent or not, resolved in the reverse order: the stated order puts every pair
    in order, so one pair reversed refutes it, as a trend against it over several values does
    even where no adjacent step is resolved) or "not resolved" (otherwise: the repetitions cannot
    decide).  ``z`` replaces :data:`MATCH_SD` only where repetitions were added after a look at
    their outcome (:func:`two_look_bound`)."""
    if isinstance(z, bool) or not isinstance(z, Real) or not math.isfinite(z) or z < MATCH_SD:
        raise ValueError(f"z must be a finite number of standard errors >= MATCH_SD = {MATCH_SD:g}, got {z!r}")
    v = np.asarray(values, dtype=float)
    e = np.asarray(errors, dtype=float)
    if v.ndim != 1 or v.size < 2 or e.shape != v.shape:
        raise ValueError(f"values and errors must be two 1-d sequences of the same length >= 2, "
                         f"got shapes {v.shape} and {e.shape}")
    if not (np.all(np.isfinite(v)) and np.all(np.isfinite(e))) or np.any(e < 0):
        raise ValueError(f"values must be finite and errors finite and >= 0, got {values!r} and {errors!r}")
    i, j = np.triu_indices(v.size, 1)                       # every pair, the first before the second
    gap = (v[i] - v[j]) if decreasing else (v[j] - v[i])
    if np.any(gap < -z * np.hypot(e[i], e[j])):
        return "fails"
    step = (v[:-1] - v[1:]) if decreasing else (v[1:] - v[:-1])
    return "holds" if np.all(step > z * np.hypot(e[:-1], e[1:])) else NOT_RESOLVED


def _normal_cdf(x):
    return 0.5 * (1.0 + np.vectorize(math.erf)(np.asarray(x, dtype=float) / math.sqrt(2.0)))


def two_look_bound(first: int, second: int) -> float:
    """The number of standard errors that replaces :data:`MATCH_SD` when a count of repetitions is
    raised once, from ``first`` to ``second``, after a look at the outcome with the first (the
    larger run containing the first, as a sequential design's second look): the bound ``c`` at
    which two looks together -- ``|Z_1| > c`` at the first or ``|Z_2| > c`` at the second, the two
    statistics correlated by ``sqrt(first / second)`` -- decide wrongly as often as one look at
    ``MATCH_SD`` does, ``P(|Z| > MATCH_SD)`` (the constant-bound design of Pocock, 1977)."""
    for name, n in (("first", first), ("second", second)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 2:
            raise ValueError(f"{name} must be a whole count of repetitions >= 2, got {n!r}")
    if second <= first:
        raise ValueError(f"second must exceed first (the count was raised), got first={first}, second={second}")
    rho = math.sqrt(first / second)
    s = math.sqrt(1.0 - rho * rho)
    alpha = 2.0 * (1.0 - float(_normal_cdf(MATCH_SD)))        # one look's chance of a wrong decision

    def wrong(c):                                                # P(max(|Z1|, |Z2|) > c), Simpson's rule over Z1
        x = np.linspace(-c, c, 4001)
        inner = _normal_cdf((c - rho * x) / s) - _normal_cdf((-c - rho * x) / s)
        f = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi) * inner
        h = x[1] - x[0]
        return 1.0 - h / 3.0 * (f[0] + f[-1] + 4.0 * f[1:-1:2].sum() + 2.0 * f[2:-1:2].sum())

    lo, hi = MATCH_SD, MATCH_SD + 2.0
    for _ in range(60):                                          # bisection: wrong(c) decreases with c
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if wrong(mid) > alpha else (lo, mid)
    return 0.5 * (lo + hi)


def rate(slope, se, predicted=None) -> bool:
    """The book's one rule for a limit with a rate (:data:`STANDARDS` "limit"): the fitted exponent
    ``slope`` (with its standard error ``se``) within :data:`MATCH_SD` standard errors of the
    ``predicted`` one; with no prediction, an exponent resolved from 0 (the limit is approached)."""
    slope, se = float(slope), float(se)
    if not (math.isfinite(slope) and math.isfinite(se)) or se <= 0:
        raise ValueError(f"slope must be finite and se finite and > 0, got {slope!r} and {se!r}")
    if predicted is None:
        return abs(slope) > MATCH_SD * se
    return abs(slope - float(predicted)) <= MATCH_SD * se


# The ledgers: one TOML file a paper (book/claims/PAPER.toml), a table [claim.KEY] or
# [erratum.KEY] an entry, holding the words of each record; the chapters supply the numbers they
# compute, and read the paper's published numbers from its tables [published."CHAPTER"].
LEDGER = Path(__file__).resolve().parents[2] / "book" / "claims"
TEXT_FIELDS = {"claim": ("what", "published", "section"),
               "erratum": ("where", "statement", "correction", "evidence", "section")}


def ledger(folder=None) -> dict:
    """``{(kind, key): (paper, entry)}`` for every entry of the ledgers in ``folder`` (default
    :data:`LEDGER`), in the files' order: ``kind`` is "claim" or "erratum", ``entry`` the words the
    ledger gives (a subset of :data:`TEXT_FIELDS`). The fidelity appendix (Appendix
    "app-fidelity") lists them; a field outside :data:`TEXT_FIELDS`, a key in two ledgers or an
    erratum whose ``evidence`` is not one of :data:`EVIDENCE` is an error."""
    import tomllib

    folder = Path(LEDGER if folder is None else folder)
    entries, where = {}, {}
    for paper in PAPERS:
        path = folder / f"{paper}.toml"
        if not path.is_file():
            raise FileNotFoundError(f"the ledger of {paper} is missing: {path}")
        with path.open("rb") as f:
            data = tomllib.load(f)
        data.pop("published", None)                     # the published numbers: published()
        unknown = set(data) - set(TEXT_FIELDS)
        if unknown:
            raise ValueError(f"{path}: a ledger has only [claim.KEY], [erratum.KEY] and [published.CHAPTER] tables, "
                             f"got {sorted(unknown)}")
        for kind, table in data.items():
            for key, entry in table.items():
                extra = set(entry) - set(TEXT_FIELDS[kind])
                if extra:
                    raise ValueError(f"{path}: [{kind}.{key}] may give only {', '.join(TEXT_FIELDS[kind])}, "
                                     f"got {sorted(extra)}")
                if kind == "erratum" and entry.get("evidence") not in EVIDENCE:
                    raise ValueError(f"{path}: [erratum.{key}] needs evidence = 'demonstrated' (the book computes the "
                                     f"contradiction) or 'suspected' (an inference), got {entry.get('evidence')!r}")
                if (kind, key) in entries:
                    raise ValueError(f"{kind} {key!r} stands in two ledgers: {where[kind, key]} and {path.name}")
                entries[kind, key], where[kind, key] = (paper, entry), path.name
    return entries


def published(chapter: str, folder=None) -> dict:
    """The published numbers ``chapter`` compares with, ``{name: value}``: the table
    ``[published."CHAPTER"]`` of its paper's ledger (in ``folder``, default :data:`LEDGER`).  An
    entry is ``{ value = ..., where = "..." }`` (where the number stands in the paper; ``tuple =
    true`` makes a list a tuple, and arrays of arrays are lists of tuples), or ``{ setting =
    "NAME" }`` for a number that is also a setting of the chapter: the paper column of that
    setting in the experiment registry (:mod:`lib.book.experiments`), which holds it with where
    it stands.  A chapter with no such table, one in two ledgers, or an entry of another form is
    an error naming it."""
    import tomllib

    folder = Path(LEDGER if folder is None else folder)
    found = []
    for paper in PAPERS:
        path = folder / f"{paper}.toml"
        if path.is_file():
            with path.open("rb") as f:
                table = tomllib.load(f).get("published", {}).get(chapter)
            if table is not None:
                found.append((path, table))
    if len(found) != 1:
        raise ValueError(f"the published numbers of {chapter} must stand in one ledger's table "
                         f"[published.\"{chapter}\"] ({folder}), found {len(found)}")
    path, table = found[0]
    settings = experiment(chapter).settings
    numbers = {}
    for name, entry in table.items():
        keys = set(entry) if isinstance(entry, dict) else set()
        if keys == {"setting"} and entry["setting"] in settings:
            numbers[name] = settings[entry["setting"]].paper
        elif {"value", "where"} <= keys <= {"value", "where", "tuple"} and isinstance(entry["where"], str) \
                and entry["where"].strip():
            numbers[name] = toml_value(entry["value"], bool(entry.get("tuple", False)))
        else:
            raise ValueError(f"{path}: [published.\"{chapter}\"] {name} must be {{ value = ..., where = \"...\" }} "
                             f"or {{ setting = \"NAME\" }} naming a setting of {chapter} "
                             f"({', '.join(settings) or 'none declared'}), got {entry!r}")
    return numbers


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
        if field in entry and given.get(field) is not None:
            raise ValueError(f"{kind} {key}: {field} is given both by the ledger {paper}.toml and by the "
                             f"chapter; give it in one place")
        if field not in entry and given.get(field) is None:
            raise ValueError(f"{kind} {key}: {field} is missing: give it in [{kind}.{key}] of {paper}.toml "
                             f"or as the argument {field}=")
        words[field] = entry[field] if field in entry else given[field]
    return paper, words


def claim(key: str, *, book, verdict: str, scale: str = "book", paper_scale=None, sweeps=(), wrong=None,
          what=None, published=None, section=None, stored: str | None = None, standard=None) -> None:
    """Record one quantitative claim of a paper and what the chapter found.

    The ledger entry ``[claim.KEY]`` of the paper (see :func:`ledger`) gives the claim's words:
    ``what`` (the claim in the book's words), ``published`` (the paper's value, or "not stated")
    and ``section`` (the label of the section that shows the check); a chapter passes one of them
    instead only where it formats a number it holds. ``book`` is the chapter's value at the scale
    it was executed at (``scale``), ``paper_scale`` the value computed from a stored paper-scale
    artefact (None: there is none) and ``stored`` the words that name that artefact in the appendix
    (default :data:`STORED_PAPER_SCALE`; "stored run" for one trained for fewer steps than the
    paper's, whose ``paper_scale`` says how many; the record has none where no artefact is read), ``verdict`` one of :data:`VERDICTS` ("depends on <choice>"
    for the second), computed by the chapter from its own outputs (:func:`verdict_over`).

    ``sweeps``: the claim's :class:`Sweep` over each choice the paper leaves open (shown with the
    record; a verdict must agree with them: "depends on X" needs a sweep over X that flips, and a
    sweep that flips needs that verdict). ``wrong``: ``(value, holds)``, the check's outcome on a
    plausible wrong value of what the paper states (``value`` as the page writes it); a check
    that holds on it could not tell the paper from the wrong value and is refused. For a
    "differs" it is the outcome on a case where the claim does hold (the exact construction, the
    paper's own regime), which must hold: a check that fails there too is refused. ``standard``:
    the kind of claim, one of :data:`STANDARDS` (the rule its check applies). Nothing is
    displayed (the record is glued); :func:`collect` reads it back for the fidelity appendix
    (Appendix "app-fidelity").
    """
    _glue(claim_record(key, book=book, verdict=verdict, scale=scale, paper_scale=paper_scale, sweeps=sweeps,
                       wrong=wrong, what=what, published=published, section=section, stored=stored,
                       standard=standard))


def not_checked(key: str, *, scale: str = "book", what=None, published=None, section=None) -> None:
    """Record a claim that the book states but does not check (a cited result, a statement beyond
    what its computations reach): :func:`claim` with ``book`` = "—" and the verdict "not
    checked", so the appendix lists it beside the checked ones."""
    claim(key, book=NO_ARTEFACT, verdict="not checked", scale=scale, what=what, published=published,
          section=section)


def by_construction(key: str, *, book, scale: str = "book", what=None, published=None, section=None) -> None:
    """Record a statement of the paper that holds by the book's own construction -- a property of
    its input code, of the data it generated, of a window it chose -- so that checking it could
    not fail whatever the paper said: :func:`claim` with the verdict "by construction", listed
    in the appendix and left out of its counts. ``book`` says why it cannot fail."""
    claim(key, book=book, verdict="by construction", scale=scale, what=what, published=published, section=section)


def _check_sweeps(key: str, verdict: str, sweeps) -> list[Sweep]:
    sweeps = list(sweeps)
    if any(not isinstance(s, Sweep) for s in sweeps):
        raise TypeError(f"claim {key}: sweeps must be made by fidelity.sweep(choice, outcomes)")
    mixed = [s.choice for s in sweeps if s.status == "mixed"]
    if verdict.startswith(DEPENDS):
        named = verdict[len(DEPENDS):]
        if not mixed or named != " and ".join(dict.fromkeys(mixed)):
            raise ValueError(f"claim {key}: the verdict {verdict!r} needs a sweep over that choice that holds at some "
                             f"settings only; the sweeps that flip: {mixed or 'none'}")
    elif mixed and verdict_class(verdict) != NOT_RESOLVED:   # a claim left open by another choice keeps its sweeps
        raise ValueError(f"claim {key}: the sweep over {', '.join(mixed)} holds at some settings only, so the verdict "
                         f"is {DEPENDS + ' and '.join(dict.fromkeys(mixed))!r}, not {verdict!r} (fidelity.verdict_over)")
    elif verdict_class(verdict) == REPRODUCED and any(s.status == "fails" for s in sweeps):
        raise ValueError(f"claim {key}: 'reproduced' with a sweep that fails at every setting")
    elif verdict_class(verdict) == DIFFERS and any(s.status == "holds" for s in sweeps):
        raise ValueError(f"claim {key}: 'differs' with a sweep that holds at every setting")
    return sweeps


def claim_record(key: str, *, book, verdict: str, scale: str = "book", paper_scale=None, sweeps=(), wrong=None,
                 what=None, published=None, section=None, ledger_folder=None,
                 stored: str | None = None, standard=None) -> dict:
    """The validated record that :func:`claim` glues (its values formatted as the appendix shows
    them, its words completed from the ledger in ``ledger_folder``, default :data:`LEDGER`)."""
    cls = verdict_class(verdict)
    check_scale(scale)
    paper, words = _words("claim", key, dict(what=what, published=published, section=section), ledger_folder)
    _check_section(words["section"])
    sweeps = _check_sweeps(key, verdict, sweeps)
    if paper_scale is None and stored is not None:
        raise ValueError(f"claim {key}: stored names the artefact that paper_scale was computed from; with no "
                         f"paper_scale there is none, got stored={stored!r}")
    if cls in ("not checked", "by construction") and (sweeps or wrong is not None or standard is not None):
        raise ValueError(f"claim {key}: a claim that is {cls!r} is not tested, so it has no sweep, no wrong value "
                         f"and no standard")
    if standard is not None and standard not in STANDARDS:
        raise ValueError(f"claim {key}: standard must be one of {', '.join(STANDARDS)}, got {standard!r}")
    wrong_text = None
    if wrong is not None:
        if not (isinstance(wrong, tuple) and len(wrong) == 2):
            raise TypeError(f"claim {key}: wrong must be (value as the page writes it, outcome of the check on it)")
        value, holds = wrong
        value = _text("the wrong value", value)
        if cls == "differs":
            # a "differs" shows its check passing where the claim does hold (the exact construction, the
            # paper's own stated regime): a check that fails everywhere says nothing about the paper
            if not bool(holds):
                raise ValueError(f"claim {key}: a 'differs' needs its check to hold on a case where the claim does "
                                 f"hold; it fails on {value} too, so it cannot tell the paper from anything else")
            wrong_text = f"holds on {value}"
        elif bool(holds):
            raise ValueError(f"claim {key}: the check also holds on the plausible wrong value {value}: it cannot tell "
                             f"what the paper says from a wrong statement, so it is no test of the paper")
        else:
            wrong_text = f"fails on {value}"
    data = dict(kind="claim", paper=paper, key=key, what=_text("what", words["what"]),
                published=_text("published", words["published"]), book=_text("book", book),
                paper_scale=_text("paper_scale", paper_scale, allow_none=True), stored=None if paper_scale is None else _text("stored", STORED_PAPER_SCALE if stored is None else stored),
                verdict=verdict, section=words["section"], scale=scale,
                sweep=_text("sweep", "; ".join(s.text() for s in sweeps)) if sweeps else None, wrong=wrong_text,
                standard=standard)
    if cls == "not checked" and data["book"] != NO_ARTEFACT:
        raise ValueError(f"a claim that is 'not checked' has no book value: pass book={NO_ARTEFACT!r}, "
                         f"got {data['book']!r}")
    return data


def erratum(key: str, *, check: str, where=None, statement=None, correction=None, section=None) -> None:
    """Record a slip or gap in a paper: the ledger entry ``[erratum.KEY]`` gives ``where`` it is,
    the paper's ``statement``, the ``correction``, the ``evidence`` ("demonstrated" or
    "suspected") and the ``section`` that shows it (a chapter passes one of the first four
    instead only where it formats a number it holds); ``check`` is what the chapter computed
    that shows (or, for a suspected slip, suggests) the slip."""
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
                evidence=words["evidence"], section=words["section"])


def finding(key: str, *, what: str, book, section: str, control: tuple) -> None:
    """Record a result of the book's own -- one that joins the papers and that none of them
    claims (Part IV) -- where the chapter establishes it: ``what`` (the result in words),
    ``book`` (what the chapter computed), ``section`` (the label of the section that shows it)
    and ``control`` = ``(value, holds)``, the same check on a plausible wrong statement, which
    must fail.  The chapter asserts the check itself (a result that fails stops the build), so
    a finding has no verdict; it is listed in the fidelity appendix apart from the papers'
    claims and never counted among them (its ``paper`` is :data:`BOOK`)."""
    _glue(finding_record(key, what=what, book=book, section=section, control=control))


def finding_record(key: str, *, what: str, book, section: str, control: tuple) -> dict:
    """The validated record that :func:`finding` glues."""
    if not isinstance(key, str) or not _KEY.match(key):
        raise ValueError(f"key must be a lower-case slug (letters, digits, '_', '.', '-'), got {key!r}")
    _check_section(section)
    if not (isinstance(control, tuple) and len(control) == 2):
        raise TypeError(f"finding {key}: control must be (wrong statement as the page writes it, outcome of the "
                        f"check on it)")
    value, holds = control
    value = _text("the control", value)
    if bool(holds):
        raise ValueError(f"finding {key}: the check also holds on the wrong statement {value}: it cannot tell the "
                         f"result from a wrong one")
    return dict(kind="finding", paper=BOOK, key=key, what=_text("what", what), book=_text("book", book),
                section=section, control=f"fails on {value}")


FINDINGS_HEADER = ["result", "this book", "control"]


def findings_table(records: list[dict]) -> tuple[list[str], list[list[str]]]:
    """The table (``(header, rows)``) of the book's own results, in reading order: the result
    (with the section that shows it), what the chapter computed and the wrong statement its check
    fails on."""
    rows = [[f"{r['what']} ({{ref}}`{r['section']}`)", r["book"], r["control"]]
            for r in records if r["kind"] == "finding"]
    return list(FINDINGS_HEADER), rows


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
                data.setdefault("sweep", None)
                data.setdefault("wrong", None)
                data.setdefault("standard", None)
                records.append(dict(data, docname=path.stem))
    return records


def uncontrolled(records: list[dict]) -> list[str]:
    """The counted claims of ``records`` (verdicts in :data:`COUNTED`) that carry no control -- no
    outcome of their check on a plausible wrong value (``wrong=`` of :func:`claim`) -- as
    "paper:key".  Such a verdict could have been reached whatever the paper said."""
    return [f"{r['paper']}:{r['key']}" for r in records
            if r["kind"] == "claim" and verdict_class(r["verdict"]) in COUNTED and not r.get("wrong")]


CLAIMS_HEADER = ["claim", "paper", "this book", "verdict"]
ERRATA_HEADER = ["where", "the paper says", "correction", "the check"]


def _claims(records, paper):
    return [r for r in records if r["kind"] == "claim" and r["paper"] == paper]


def claims_table(records: list[dict], paper: str) -> tuple[list[str], list[list[str]]]:
    """The table of ``paper``'s claims, in reading order: ``(header, rows)`` for
    :func:`lib.book.notebook.table`, four columns narrow enough for the content column: the claim
    (with the section that shows the check), the paper's value, the book's (book scale; the stored
    paper-scale run; the wrong value its check fails on) and the verdict (with the range of each
    choice it was evaluated over, and where it flips)."""
    rows = []
    for r in _claims(records, paper):
        book = r["book"] if r["scale"] == "book" else f"{r['book']} (`scale=\"{r['scale']}\"`)"
        if r["paper_scale"]:
            book += f"; {r.get('stored', STORED_PAPER_SCALE)}: {r['paper_scale']}"
        if r.get("wrong"):
            book += f" (the check {r['wrong']})"
        verdict = r["verdict"] if verdict_class(r["verdict"]) == REPRODUCED else f"**{r['verdict']}**"
        if r.get("sweep"):
            verdict += f" — {r['sweep']}"
        if r.get("standard"):
            verdict += f" ({r['standard']})"
        rows.append([f"{r['what']} ({{ref}}`{r['section']}`)", r["published"], book, verdict])
    return list(CLAIMS_HEADER), rows


def errata_table(records: list[dict], evidence: str | None = None) -> tuple[list[str], list[list[str]]]:
    """The table (``(header, rows)``) of the errata of one class of ``evidence`` ("demonstrated",
    "suspected"; None: all), paper by paper, four columns: where (paper, place, the section that
    shows it), what the paper says, the correction and the book's check."""
    if evidence is not None and evidence not in EVIDENCE:
        raise ValueError(f"evidence must be one of {EVIDENCE} or None, got {evidence!r}")
    rows = [[f"{paper.capitalize()}, {r['where']} ({{ref}}`{r['section']}`)", r["statement"], r["correction"], r["check"]]
            for paper in PAPERS for r in records
            if r["kind"] == "erratum" and r["paper"] == paper and evidence in (None, r.get("evidence"))]
    return list(ERRATA_HEADER), rows


def verdict_counts(records: list[dict], paper: str) -> dict:
    """``{verdict: number of claims}`` for ``paper``, over :data:`VERDICTS` (zeros included;
    every "depends on <choice>" counts as "depends on")."""
    counts = dict.fromkeys(VERDICTS, 0)
    for r in _claims(records, paper):
        counts[verdict_class(r["verdict"])] += 1
    return counts


def _qualifier(verdict: str) -> str:
    """What a verdict adds to its class, as the summary prints it before the section:
    "depends on the seed" gives "the seed, ", "not resolved with 4 seeds" gives "with 4 seeds, ",
    a bare class gives ""."""
    for prefix in (DEPENDS, NOT_RESOLVED + " ", DIFFERS + " "):
        if verdict.startswith(prefix) and len(verdict) > len(prefix):
            return verdict[len(prefix):] + ", "
    return ""


def paper_summary(records: list[dict], paper: str) -> str:
    """A short paragraph on ``paper``'s claims, from the records alone: how many the book tests
    and how many reproduce, then the claims that depend on a choice the paper leaves open (with
    the choice) and those that reproduce in part or differ, each with the section that shows it."""
    rs = _claims(records, paper)
    c = verdict_counts(records, paper)
    tested = sum(c[v] for v in COUNTED)
    def n(count, one, many):   # "1 claim holds", "2 claims hold"
        return f"{count} {one if count == 1 else many}"

    head = (f"The book tests {n(tested, 'claim', 'claims')} of {PAPERS[paper]}: "
            f"{n(c['reproduced'], 'reproduces', 'reproduce')} over every setting tried, "
            f"{n(c['depends on'], 'depends', 'depend')} on a choice the paper leaves open, "
            f"{n(c['partially reproduced'], 'reproduces', 'reproduce')} in part and {n(c['differs'], 'differs', 'differ')}. "
            + (f"{n(c[NOT_RESOLVED], 'more is', 'more are')} not resolved by the repetitions computed, "
               if c[NOT_RESOLVED] else "") +
            f"{n(c['not checked'], 'more is', 'more are')} stated but not checked, and "
            f"{n(c['by construction'], 'holds', 'hold')} by the book's own construction (listed, not counted).")
    parts = [head]
    for label, pick in (("Depends on a choice", lambda r: verdict_class(r["verdict"]) == "depends on"),
                        ("Reproduces in part", lambda r: r["verdict"] == "partially reproduced"),
                        ("Differs", lambda r: verdict_class(r["verdict"]) == DIFFERS),
                        ("Not resolved", lambda r: verdict_class(r["verdict"]) == NOT_RESOLVED)):
        items = [r for r in rs if pick(r)]
        if items:
            parts.append(f"**{label}:** " + "; ".join(
                f"{r['what']} ({_qualifier(r['verdict'])}{{ref}}`{r['section']}`)" for r in items) + ".")
    return "\n\n".join(parts)


def _markdown_outputs(path) -> str:
    import nbformat

    nb = nbformat.read(Path(path), as_version=4)
    return "\n".join(out["data"]["text/markdown"] for cell in nb.cells if cell.cell_type == "code"
                     for out in cell.get("outputs", []) if "text/markdown" in out.get("data", {}))


def shown_tables(path) -> list[dict]:
    """The results tables an executed notebook displays (:func:`lib.book.notebook.table`), as the
    data they were rendered from: ``{"header": [...], "rows": [[...], ...]}`` each, in order (a
    table's caption and label are left out: the data is what the records must agree with)."""
    import nbformat

    nb = nbformat.read(Path(path), as_version=4)
    return [{"header": out["metadata"][MIME]["header"], "rows": out["metadata"][MIME]["rows"]}
            for cell in nb.cells if cell.cell_type == "code"
            for out in cell.get("outputs", []) if MIME in out.get("metadata", {})]


def appendix_disagreements(appendix, records: list[dict]) -> list[str]:
    """What the executed appendix notebook ``appendix`` shows that differs from ``records`` (the
    chapters' records, :func:`collect`): a paper's claims table or summary, or an errata table,
    that is not displayed exactly as the records give it, or a row of the appendix that no record
    gives.  Empty when the appendix and the chapters agree."""
    shown = shown_tables(appendix)
    text = _markdown_outputs(appendix)
    problems = []
    expected = {"claims": set(), "errata": set(), "findings": set()}

    def displayed(table) -> bool:
        header, rows = table
        return {"header": header, "rows": rows} in shown

    for paper in PAPERS:
        table = claims_table(records, paper)
        expected["claims"].update(map(tuple, table[1]))
        if not displayed(table):
            problems.append(f"the claims table of {paper} differs from the chapters' records")
        if paper_summary(records, paper) not in text:
            problems.append(f"the summary of {paper} differs from the chapters' records")
    for evidence in EVIDENCE:
        table = errata_table(records, evidence)
        expected["errata"].update(map(tuple, table[1]))
        if not displayed(table):
            problems.append(f"the table of {evidence} errata differs from the chapters' records")
    table = findings_table(records)
    expected["findings"].update(map(tuple, table[1]))
    if table[1] and not displayed(table):
        problems.append("the table of the book's own results differs from the chapters' records")
    kinds = {tuple(CLAIMS_HEADER): "claims", tuple(ERRATA_HEADER): "errata", tuple(FINDINGS_HEADER): "findings"}
    for t in shown:
        kind = kinds.get(tuple(t["header"]))
        for row in t["rows"] if kind else []:
            if tuple(row) not in expected[kind]:
                problems.append(f"a row of the appendix that no chapter records: {' | '.join(row)[:120]}")
    return problems


# ----------------------------------------------------------------------------- sentences tied to outputs

_ROLE = re.compile(r"\{[a-z:]+\}`[^`]*`")                  # {glue:text}`key`, {ref}`label`, {numref}`...`
_CODE = re.compile(r"`[^`]*`")
_REF_WORD = re.compile(r"(?:Figs?\.|Tables?|[Ee]qs?\.|Sec(?:tion)?s?\.?|§|Chapters?|App(?:endix)?\.?|Thm|Theorem|"
                       r"Prop(?:osition)?\.?|Lemma|Part)\s*\(?\d+(?:\.\d+)*(?:\([a-z]\))?\)?")
_EQ_NUMBER = re.compile(r"\(\d+[a-z]?\)")                 # "(30)": an equation number
_NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:[,\u2009\u202f]\d{3})+|\d+)(\.\d+)?(?=[eE][-+]?\d|(?![\w]))")


def _numbers(text: str) -> set[str]:
    """The numbers written in ``text``, thousands separators removed ("1,000" -> "1000")."""
    return {re.sub(r"[,\u2009\u202f]", "", m.group(1)) + (m.group(2) or "") for m in _NUMBER.finditer(text)}


def numbers_not_in_outputs(prose: str, outputs: str) -> list[str]:
    """The numbers that the Markdown ``prose`` (a chapter's summary) quotes and no text of
    ``outputs`` (the executed chapter's outputs, glued values included) contains: a summary may
    quote only numbers its chapter computed or printed.  Pasted values ({glue:text} roles),
    inline code, labels and references to a paper's figures, tables, equations, sections and
    chapters and bare equation numbers "(30)" are not quotes; "3.7e-04" in an output contains 3.7."""
    text = _EQ_NUMBER.sub(" ", _REF_WORD.sub(" ", _CODE.sub(" ", _ROLE.sub(" ", prose))))
    have = _numbers(outputs)
    return sorted(n for n in _numbers(text) if n not in have)


def notebook_summary(path) -> str:
    """The Markdown of the "## Summary" section of the executed notebook ``path`` (every markdown
    cell from the heading to the next heading of that level or the end; "" when there is none)."""
    import nbformat

    text, inside = [], False
    for cell in nbformat.read(Path(path), as_version=4).cells:
        if cell.cell_type != "markdown":
            continue
        src = cell.source
        if re.match(r"^##\s+Summary\s*$", src.splitlines()[0] if src else ""):
            inside = True
            text.append("\n".join(src.splitlines()[1:]))
            continue
        if inside:
            if re.match(r"^#{1,2}\s", src):
                break
            text.append(src)
    return "\n".join(text)


# a replacement field of a Python format string left unformatted in displayed text (a string that
# lost its f prefix): "{minutes:.1f}", "{PAPER['minutes']}", "{{ref}}" -- LaTeX's braces ("x_{t}",
# "\\frac{a}{b}") and MyST roles ("{ref}`label`") have neither a format spec, a subscript nor doubled braces
_RAW_FIELD = re.compile(r"\{\{\s*\w+\s*\}\}|\{[A-Za-z_]\w*(?:\[[^\]{}]*\])+(?:\.\w+)*(?::[^{}]*)?\}"
                        r"|\{[A-Za-z_][\w.]*:[<>^=+\- #0,_]*\d*(?:\.\d+)?[bcdeEfFgGnosxX%]\}")


def unformatted_fields(text: str) -> list[str]:
    """The replacement fields of a format string that ``text`` shows unformatted (see _RAW_FIELD)."""
    return sorted(set(_RAW_FIELD.findall(text)))


def notebook_outputs(path) -> str:
    """Every text the executed notebook ``path`` displays or glues: streams, text/plain and
    text/markdown outputs, glued values."""
    import nbformat

    parts = []
    for cell in nbformat.read(Path(path), as_version=4).cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if "text" in out:
                parts.append(out["text"] if isinstance(out["text"], str) else "".join(out["text"]))
            for mime, value in out.get("data", {}).items():
                if mime.endswith("text/plain") or mime.endswith("text/markdown"):
                    parts.append(value if isinstance(value, str) else "".join(value))
    return "\n".join(parts)
