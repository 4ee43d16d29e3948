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
The executor (``make chapter``, ``tools/render.py``) checks every value the reader gives with
:func:`check_parameters` before the kernel starts -- the name, the type hint and the range -- and
names the parameter and its range when one is outside.  The parameters cell is read as papermill
reads it (:func:`declared`).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from tools import sources

__all__ = ["Range", "RangeError", "parse", "split_comment", "declared", "declared_parameters",
           "declared_types", "declared_ranges", "conforms", "check_parameters", "parameters_table"]


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


# ------------------------------------------------------------------- a chapter's parameters cell

def declared(nb_path: Path) -> dict:
    """The ``parameters`` cell as papermill reads it (``papermill.inspect_notebook``): name ->
    {"default": source text, "inferred_type_name": the type hint, "help": the comment}.  Chapters
    write one ``name: type = value  # help`` per line, so nothing is lost in this reading
    (tests/test_book_tool.py compares it with the names the cell really defines)."""
    import nbformat
    import papermill

    nb = nbformat.read(nb_path, as_version=4)
    if not any(c.cell_type == "code" and "parameters" in c.metadata.get("tags", []) for c in nb.cells):
        raise sources.BookError(f"{nb_path.name}: no cell tagged 'parameters' (every chapter needs one)")
    return papermill.inspect_notebook(str(nb_path))


def declared_parameters(nb_path: Path) -> dict:
    """Name -> default expression (source text) of every parameter."""
    return {name: p["default"] for name, p in declared(nb_path).items()}


def declared_types(nb_path: Path) -> dict:
    """Name -> type hint as written ("int", "list[float]", "Optional[int]", ...); parameters
    without a hint are absent."""
    return {name: p["inferred_type_name"] for name, p in declared(nb_path).items()
            if p["inferred_type_name"] not in (None, "None")}


def conforms(value, annotation: str) -> bool:
    """Whether ``value`` fits a parameter's type hint: int, float (an int is a float), str, bool,
    list / tuple (optionally list[X] or tuple[X, ...]) and Optional[X]."""
    a = annotation.replace(" ", "")
    if a.startswith("Optional[") and a.endswith("]"):
        return value is None or conforms(value, a[len("Optional["):-1])
    if a == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if a == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if a == "str":
        return isinstance(value, str)
    if a == "bool":
        return isinstance(value, bool)
    for kind in ("list", "tuple"):
        if a == kind:
            return isinstance(value, (list, tuple))
        if a.startswith(kind + "[") and a.endswith("]"):
            inner = a[len(kind) + 1:-1].split(",")
            if not isinstance(value, (list, tuple)):
                return False
            if kind == "list" or len(inner) == 1:
                return all(conforms(v, inner[0]) for v in value)
            return len(value) == len(inner) and all(conforms(v, t) for v, t in zip(value, inner))
    return True   # a hint this checker does not know: not checked


def check_parameter_types(src: Path, parameters: dict, types: dict) -> None:
    """A BookError naming the first parameter whose value does not fit its type hint."""
    for name, value in parameters.items():
        if name in types and not conforms(value, types[name]):
            raise sources.BookError(f"{src.name}: parameter {name} must be {types[name]}, got {value!r} "
                            f"({type(value).__name__})")


def declared_ranges(nb_path: Path) -> dict:
    """Name -> :class:`tools.parameters.Range` of every parameter whose comment declares its
    accepted range (``name: int = 3  # ≥ 1: what it is``, grammar in ``tools/parameters.py``)."""
    out = {}
    for name, p in declared(nb_path).items():
        rng, _ = split_comment(p.get("help") or "")
        if rng is not None:
            out[name] = rng
    return out


def check_parameters(src: Path, parameters: dict, nb_path: Path) -> None:
    """Every check a reader's values get before a kernel starts, each a BookError naming the
    parameter: a name the parameters cell does not declare, a value of the wrong type, a value
    outside the parameter's declared range (``None`` passes where the type is Optional)."""
    known = declared(nb_path)
    unknown = sorted(set(parameters) - set(known))
    if unknown:
        raise sources.BookError(f"{src.name}: unknown parameter(s) {', '.join(unknown)}; "
                        f"the parameters cell declares: {', '.join(known)}")
    check_parameter_types(src, parameters, declared_types(nb_path))
    ranges = declared_ranges(nb_path)
    for name, value in parameters.items():
        if value is None or name not in ranges:
            continue
        problem = ranges[name].problem(value, base=sources.BOOK)
        if problem:
            raise sources.BookError(f"{src.name}: parameter {name} {problem}, got {value!r} "
                            f"(declared: {known[name].get('help')})")


def parameters_table(src: Path) -> str:
    """The chapter's parameters as a reader reads them: name, type, default, range, meaning."""
    with sources.as_notebook(src, "check") as work:
        cell = declared(work)
    rows = [("name", "type", "default", "accepted", "what it is")]
    for name, p in cell.items():
        rng, what = split_comment(p.get("help") or "")
        kind = p["inferred_type_name"] or ""
        rows.append((name, kind, p["default"], rng.text if rng else ("True or False" if "bool" in kind else "—"),
                     what))
    widths = [max(len(r[j]) for r in rows) for j in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:4], widths)) + "  " + r[4] for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    return (f"{src.stem}: {sources.title(src)}\n" + "\n".join(lines)
            + "\nNone takes the chapter's default for its scale (scale=\"book\" or \"paper\").")
