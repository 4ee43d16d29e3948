"""The accepted range of a chapter's parameter, declared beside it, and the check of a value.

Every line of a chapter's ``parameters`` cell reads ``name: type = default  # RANGE: what it is``.
The comment starts with the parameter's accepted range, in this small grammar:

    ≥ 1        > 0        ≤ 10        < 0              a bound (>= and <= also read)
    in [1, 64]     in (0, 1)     in [0, 1)             an interval; "inf" (or ∞) as an end
    real                                               any finite number
    "book" or "paper"     "adam", "sgd" or "lbfgs"     one of these strings
    (≥ 0, in [1, 12], "adam" or "sgd")                 a row: one range a position
    each RANGE                                         a non-empty list, every item in RANGE
    an existing folder     an existing file            a path (relative to book/, where chapters run)

A ``bool`` needs no range (its type is its range); every other parameter must declare one
(tests/test_book_tool.py).  ``None`` is accepted where the type is ``Optional[...]``: it takes
the default the chapter documents (for a registry setting, its value at the chosen scale).
The executor (``tools/book.py``, ``make chapter``) checks every value the reader gives against
its range before the kernel starts, and names the parameter and its range when one is outside.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Range", "RangeError", "parse", "split_comment"]


class RangeError(ValueError):
    """A range that does not follow the grammar above."""


_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf|[-+]?∞"
_BOUND = re.compile(rf"^(≥|>=|>|≤|<=|<)\s*({_NUM})$")
_INTERVAL = re.compile(rf"^in\s*([\[(])\s*({_NUM})\s*,\s*({_NUM})\s*([\])])$")
_STRING = re.compile(r'^"([^"]*)"$')


def _number(text: str) -> float:
    return float(text.replace("∞", "inf"))


def _fmt(x: float) -> str:
    if math.isinf(x):
        return "∞" if x > 0 else "-∞"
    return f"{x:g}"


def _split_top(text: str, sep: str = ",") -> list[str]:
    """``text`` split at ``sep`` outside brackets and quotes."""
    out, depth, quoted, cur = [], 0, False, ""
    for ch in text:
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch in "([":
            depth += 1
        elif not quoted and ch in ")]":
            depth -= 1
        if ch == sep and depth == 0 and not quoted:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [p.strip() for p in out]


@dataclass(frozen=True)
class Range:
    """A parsed range: ``kind`` is "bound", "interval", "real", "choice", "row", "each" or
    "path"; ``text`` is how the chapter wrote it (used in messages)."""

    kind: str
    text: str
    low: float = -math.inf
    high: float = math.inf
    low_closed: bool = True
    high_closed: bool = True
    choices: tuple = ()
    items: tuple = ()           # row: one Range a position; each: (item Range,)
    path_kind: str = ""

    def problem(self, value, base: Path | None = None) -> str | None:
        """None when ``value`` is in the range; otherwise what is wrong, in words."""
        if self.kind == "each":
            if not isinstance(value, (list, tuple)) or not value:
                return f"must be a non-empty list, each item {self.items[0].text}"
            for i, v in enumerate(value):
                p = self.items[0].problem(v, base)
                if p:
                    return f"item {i} ({v!r}) {p}"
            return None
        if self.kind == "row":
            if not isinstance(value, (list, tuple)) or len(value) != len(self.items):
                return f"must be a row of {len(self.items)} values {self.text}"
            for i, (r, v) in enumerate(zip(self.items, value)):
                p = r.problem(v, base)
                if p:
                    return f"position {i} ({v!r}) {p}"
            return None
        if self.kind == "choice":
            return None if value in self.choices else f"must be {self.text}"
        if self.kind == "path":
            if not isinstance(value, str):
                return f"must be {self.text} (a path)"
            p = Path(value)
            if not p.is_absolute() and base is not None:
                p = base / p
            ok = p.is_dir() if self.path_kind == "folder" else p.is_file()
            return None if ok else f"must be {self.text}; {p} is not one"
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return f"must be a finite number {self.text}" if self.kind != "real" else "must be a finite number"
        if self.kind == "real":
            return None
        lo_ok = value >= self.low if self.low_closed else value > self.low
        hi_ok = value <= self.high if self.high_closed else value < self.high
        return None if lo_ok and hi_ok else f"must be {self.text}"


def parse(text: str) -> Range:
    """The :class:`Range` that ``text`` declares; a :class:`RangeError` when it follows no rule."""
    t = text.strip()
    if t.startswith("each "):
        return Range("each", t, items=(parse(t[5:]),))
    if t == "real":
        return Range("real", t)
    if t in ("an existing folder", "an existing file"):
        return Range("path", t, path_kind=t.rsplit(" ", 1)[1])
    m = _BOUND.match(t)
    if m:
        op, x = m[1].replace(">=", "≥").replace("<=", "≤"), _number(m[2])
        if op in ("≥", ">"):
            return Range("bound", t, low=x, low_closed=op == "≥")
        return Range("bound", t, high=x, high_closed=op == "≤")
    m = _INTERVAL.match(t)
    if m:
        lo, hi = _number(m[2]), _number(m[3])
        if not lo < hi:
            raise RangeError(f"empty interval {t!r}")
        return Range("interval", t, low=lo, high=hi, low_closed=m[1] == "[", high_closed=m[4] == "]")
    if t.startswith("(") and t.endswith(")"):
        return Range("row", t, items=tuple(parse(p) for p in _split_top(t[1:-1])))
    if t.startswith('"'):
        head, sep, last = t.rpartition(" or ")
        parts = (_split_top(head) if sep else []) + [last]
        values = [_STRING.match(p) for p in parts]
        if all(values):
            return Range("choice", t, choices=tuple(v[1] for v in values))
    raise RangeError(f"{text!r} is not a range (≥ 1, > 0, in [a, b], real, \"a\" or \"b\", (…), each …, "
                     f"an existing folder / file)")


def split_comment(comment: str) -> tuple[Range | None, str]:
    """A parameter's comment split into its range (None when it declares none) and the rest."""
    head, sep, rest = (comment or "").partition(": ")
    for candidate, description in ((head, rest), (comment or "", "")):
        try:
            return parse(candidate), description.strip()
        except RangeError:
            continue
    return None, (comment or "").strip()
