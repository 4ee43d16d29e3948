"""The accepted range of a chapter's parameter, declared beside it, and the check of a value:
one home for the executor (``tools/book.py``, ``make chapter``) and for the notebook itself.

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
The notebook checks them again, in the cell after ``parameters`` (:func:`check`, which
:meth:`lib.book.experiments.Experiment.fill` calls first), so that plain papermill, JupyterLab
and a downloaded notebook refuse a bad value by name before any work: the declarations are read
from the chapter's source ``book/NN_subject.md``, the values from the notebook's namespace.

Relations between parameters (``low_dim <= a``) are declared in the experiment registry
(``relations = [{ rule = "...", why = "..." }]`` in ``book/experiments/PAPER.toml``) and checked
by :class:`Relation` -- by the executor before the kernel starts and by the notebook after the
scale rule has filled the settings.
"""
from __future__ import annotations

import ast
import io
import math
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Declared", "ParameterError", "Range", "RangeError", "Relation", "check", "conforms", "declared",
           "declared_in_source", "parse", "split_comment"]

BOOK = Path(__file__).resolve().parents[2] / "book"     # the chapters' folder (where they execute)


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


# ----------------------------------------------------------------------------- types

def conforms(value, annotation: str) -> bool:
    """Whether ``value`` fits a parameter's type hint: int, float (an int is a float), str, bool,
    list / tuple (optionally list[X] or tuple[X, ...]) and Optional[X]."""
    a = annotation.replace(" ", "").strip("\"'")
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


# ----------------------------------------------------------------------------- the parameters cell

class ParameterError(ValueError):
    """A parameter's value that its declaration refuses (named, with the accepted range)."""


@dataclass(frozen=True)
class Declared:
    """One line ``name: type = default  # RANGE: what`` of a parameters cell."""

    name: str
    type: str | None
    default: str
    range: Range | None
    what: str
    comment: str


def declared_in_source(code: str) -> dict[str, Declared]:
    """The parameters a ``parameters`` cell's ``code`` declares, in order."""
    comments = {}
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string[1:].strip()
    out = {}
    for node in ast.parse(code).body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            name, ann = node.target.id, node.annotation
            kind = ann.value if isinstance(ann, ast.Constant) and isinstance(ann.value, str) else ast.unparse(ann)
            value = ast.unparse(node.value) if node.value is not None else "None"
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, kind, value = node.targets[0].id, None, ast.unparse(node.value)
        else:
            continue
        comment = comments.get(node.end_lineno, comments.get(node.lineno, ""))
        rng, what = split_comment(comment)
        out[name] = Declared(name, kind, value, rng, what, comment)
    return out


_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n:tags: \[(?P<tags>[^\]]*)\]\n(?P<body>.*?)^```", re.M | re.S)


def declared(chapter: str, book: Path = BOOK) -> dict[str, Declared]:
    """The parameters that chapter ``chapter`` ("07_sequence_autoencoders") declares in the
    ``parameters`` cell of its source ``book/NN_subject.md``."""
    src = Path(book) / f"{chapter}.md"
    if not src.is_file():
        raise FileNotFoundError(f"the chapter's source {src} is missing: a notebook checks its parameters against "
                                "the declarations of its .md (run it in a clone of the repository)")
    for m in _CELL.finditer(src.read_text()):
        if "parameters" in [t.strip() for t in m["tags"].split(",")]:
            return declared_in_source(m["body"])
    raise ValueError(f"{src}: no cell tagged 'parameters' (every chapter needs one)")


def injected_names(namespace: dict) -> list[str]:
    """The names papermill's injected-parameters cell (``# Parameters``) assigned, when this
    kernel ran one (read from IPython's input history ``In``); empty otherwise."""
    for code in reversed(list(namespace.get("In", []) or [])):
        if isinstance(code, str) and code.lstrip().startswith("# Parameters"):
            try:
                tree = ast.parse(code)
            except SyntaxError:
                return []
            return [t.id for node in tree.body if isinstance(node, ast.Assign)
                    for t in node.targets if isinstance(t, ast.Name)]
    return []


def problem_of(d: Declared, value, base: Path | None = BOOK) -> str | None:
    """What is wrong with ``value`` for the declared parameter ``d`` (its type, then its range),
    or None.  ``None`` passes where the type is Optional (the scale rule fills it)."""
    if d.type and not conforms(value, d.type):
        return f"must be {d.type}, got {value!r} ({type(value).__name__})"
    if value is None or d.range is None:
        return None
    p = d.range.problem(value, base=base)
    return f"{p}, got {value!r}" if p else None


def check(chapter: str, namespace: dict, book: Path = BOOK) -> None:
    """Check the chapter's parameters in ``namespace`` (its ``globals()``) against the
    declarations of its parameters cell, before any work: a name papermill injected that the
    cell does not declare, a value of the wrong type, a value outside its declared range -- each
    a :class:`ParameterError` naming the parameter and what it accepts."""
    decl = declared(chapter, book)
    unknown = [n for n in injected_names(namespace) if n not in decl]
    if unknown:
        raise ParameterError(f"unknown parameter(s) {', '.join(unknown)} of {chapter}; its parameters cell "
                             f"declares: {', '.join(decl)}")
    for name, d in decl.items():
        if name not in namespace:
            raise ParameterError(f"parameter {name} of {chapter} is not defined: execute the parameters cell first")
        p = problem_of(d, namespace[name], base=Path(book))
        if p:
            raise ParameterError(f"parameter {name} {p} (declared: {d.comment})")


# ----------------------------------------------------------------------------- relations

_FUNCS = {"min": min, "max": max, "len": len}     # the calls a relation may make, on one list parameter
_OPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}


@dataclass(frozen=True)
class Relation:
    """A relation between a chapter's parameters, declared in the experiment registry: ``rule``
    is a comparison of arithmetic in the parameters' names and numbers (``low_dim <= a``,
    ``2 * n_fit <= T * long_factor``), where ``min``, ``max`` and ``len`` of a list parameter may
    stand for a name (``max(delays) < T``); ``why`` says what breaks otherwise."""

    rule: str
    why: str

    def __post_init__(self):
        try:
            tree = ast.parse(self.rule, mode="eval").body
        except SyntaxError as exc:
            raise ValueError(f"relation {self.rule!r} is not an expression ({exc.msg})") from None
        if not isinstance(tree, ast.Compare):
            raise ValueError(f"relation {self.rule!r} must be a comparison (<, <=, >, >=, ==, !=)")
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                if not (isinstance(node.func, ast.Name) and node.func.id in _FUNCS and len(node.args) == 1
                        and not node.keywords and isinstance(node.args[0], ast.Name)):
                    raise ValueError(f"relation {self.rule!r}: a call must be min, max or len of one parameter")
            elif not isinstance(node, (ast.Compare, ast.BinOp, ast.UnaryOp, ast.Name, ast.Constant, ast.Load,
                                       ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow,
                                       ast.USub, *_OPS)):
                raise ValueError(f"relation {self.rule!r}: only names, numbers, + - * / // % **, min, max, len "
                                 "and comparisons")

    @property
    def names(self) -> list[str]:
        return sorted({n.id for n in ast.walk(ast.parse(self.rule, mode="eval"))
                       if isinstance(n, ast.Name) and n.id not in _FUNCS})

    def problem(self, values: dict) -> str | None:
        """None when the relation holds for ``values``; otherwise it, the values and why.  A
        relation with a parameter left at None (or not given) is not checked."""
        if any(values.get(n) is None for n in self.names):
            return None
        env = {n: values[n] for n in self.names}
        if eval(compile(ast.parse(self.rule, mode="eval"), "<relation>", "eval"), {"__builtins__": {}, **_FUNCS}, env):
            return None
        shown = ", ".join(f"{n} = {v!r}" for n, v in env.items())
        return f"the parameters must satisfy {self.rule} ({self.why}), got {shown}"
