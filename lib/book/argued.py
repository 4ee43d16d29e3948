"""The settings a chapter's checks were argued for.

A chapter asserts each of its claims.  Some claims are exact identities and hold at every
parameter value; others -- "training reaches this loss", "this coefficient is within 10 % of
eta*" -- were argued for the settings the chapter runs at by default (its book and paper
scales).  :class:`ArguedSettings` asserts those at the settings they were argued for and, when a reader
re-executes the chapter with other values, prints whether each claim holds instead of
stopping the chapter, naming the settings that differ.
"""
from __future__ import annotations

import math

__all__ = ["ArguedSettings"]


def _same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        try:
            return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=0.0)
        except (TypeError, ValueError):
            return False
    return a == b


class ArguedSettings:
    """``ArguedSettings(argued, current)``: ``argued`` maps setting names to the values the claims were
    argued for, ``current`` is where the chapter's values live (e.g. ``globals()``).

    Used by Chapters 3-6, 9, 11 and 12 for the claims argued for their default settings (first in
    Chapter 3, section "sec-finite-width-excess"); Chapter 12, section "sec-icl-train", says in
    prose what it does.

    ``check(ok, what)`` asserts ``ok`` when every argued setting has its argued value, and
    otherwise prints ``what`` with "holds" or "does not hold" and the settings that differ.  It
    returns nothing, so a check that ends a notebook cell leaves no stray ``True`` on the page.
    """

    def __init__(self, argued: dict, current: dict):
        if not isinstance(argued, dict) or not argued:
            raise ValueError("argued must be a non-empty dict of setting names and values")
        missing = [k for k in argued if k not in current]
        if missing:
            raise ValueError(f"argued settings not defined in the chapter: {', '.join(missing)}")
        self.argued = dict(argued)
        self.differ = {k: current[k] for k, v in argued.items() if not _same(current[k], v)}

    @property
    def asserted(self) -> bool:
        """True when the chapter runs at the settings its claims were argued for."""
        return not self.differ

    def check(self, ok: bool, what: str) -> None:
        if self.asserted:
            assert ok, what
        else:
            changed = ", ".join(f"{k} = {v!r} (argued for {self.argued[k]!r})" for k, v in self.differ.items())
            print(f"[{'holds' if ok else 'does not hold'}; not asserted, since {changed}] {what}")
