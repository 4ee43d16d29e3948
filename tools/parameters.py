"""A chapter's parameters cell as the executor reads it, and the check of a reader's values.

The grammar of a parameter's accepted range (``name: type = default  # RANGE: what it is``) and
the check of a value against it live in :mod:`lib.book.parameters` (one home, which a chapter's
notebook imports too); they are re-exported here.  This module reads the ``parameters`` cell as
papermill reads it (:func:`declared`) and checks every value a reader gives to ``make chapter``
(:func:`check_parameters`) before the kernel starts -- the name, the type hint, the range and the
relations the chapter's registry table declares -- naming the parameter and its range when one is
outside.  (``lib.book.parameters.declared`` reads a chapter's source by its name; :func:`declared`
here reads a notebook file, as papermill does.)
"""
from __future__ import annotations

from pathlib import Path

from lib.book.parameters import (Declared, ParameterError, Range, RangeError, Relation, check,  # noqa: F401
                                 conforms, declared_in_source, parse, split_comment)
from tools import sources

__all__ = ["Range", "RangeError", "ParameterError", "Relation", "parse", "split_comment", "conforms", "check",
           "declared_in_source", "declared", "declared_parameters", "declared_types", "declared_ranges",
           "check_parameters", "check_relations", "parameters_table"]


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
    check_relations(src, parameters, known)


def check_relations(src: Path, parameters: dict, known: dict) -> None:
    """The relations between parameters the chapter declares in its registry table
    (``relations`` in ``book/experiments/*.toml``), for the reader's values over the defaults,
    with the settings left at None taking their column of the chosen scale."""
    import ast

    from lib.book.experiments import experiment

    exp = experiment(src.stem)
    if not exp.relations:
        return
    values = {}
    for name, p in known.items():
        try:
            values[name] = ast.literal_eval(p["default"])
        except (ValueError, SyntaxError):
            values[name] = None
    values.update(parameters)
    try:
        exp.check_relations(values, scale=values.get("scale") or "book")
    except ParameterError as exc:
        raise sources.BookError(f"{src.name}: {str(exc).split(': ', 1)[-1]}") from None


def parameters_table(src: Path) -> str:
    """The chapter's parameters as a reader reads them: name, type, default, range, meaning; for a
    setting of the experiment registry its book and paper values and where it stands in the
    paper; the relations the parameters must satisfy."""
    from lib.book.experiments import experiment

    with sources.as_notebook(src, "check") as work:
        cell = declared(work)
    exp = experiment(src.stem)

    def short(v) -> str:
        t = repr(v)
        return t if len(t) <= 24 else t[:21] + "..."

    rows = [("name", "type", "default", "book", "paper", "accepted", "what it is")]
    wheres = {}
    for name, p in cell.items():
        rng, what = split_comment(p.get("help") or "")
        kind = p["inferred_type_name"] or ""
        s = exp.settings.get(name)
        book_v, paper_v = (short(s.book), short(s.paper)) if s else ("", "")
        if s:
            wheres[name] = s.where
        rows.append((name, kind, p["default"], book_v, paper_v,
                     rng.text if rng else ("True or False" if "bool" in kind else "—"), what))
    widths = [max(len(r[j]) for r in rows) for j in range(6)]
    lines = []
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r[:6], widths)) + "  " + r[6])
        if r[0] in wheres:
            lines.append(" " * (widths[0] + 2) + f"in the paper: {wheres[r[0]]}")
    lines.insert(1, "-" * len(lines[0]))
    out = [f"{src.stem}: {sources.title(src)}", *lines,
           "None takes the column of the chosen scale (scale=\"book\" or \"paper\"): book and paper above, "
           f"declared in {exp.source or 'book/experiments/*.toml'}."]
    for r in exp.relations:
        out.append(f"The parameters must satisfy {r.rule}: {r.why}.")
    return "\n".join(out)
