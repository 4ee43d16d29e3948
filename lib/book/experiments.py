"""The experiment registry: every setting of every chapter that depends on the scale, that a
check is argued for, or that a stored run uses -- declared once, with where it stands in the paper.

The declarations are data, one file a paper: ``book/experiments/{emami,sperduti,zucchet}.toml``.
A chapter's table holds a :class:`Setting` for each such knob -- its value at ``scale="book"``
and at ``scale="paper"`` (or one ``value`` for both) and ``where`` the paper states it, or why
the book chose it -- and the chapter's stored paper-scale runs (``[CHAPTER.run.NAME]``).
Settings shared by several chapters stand once under ``[common.NAME]`` and are taken in with
``include``; a paper value may be ``{ widths_of = [runs] }`` (the widths of those runs) or
``{ range = [start, stop, step] }``.  Everything else derives from the registry:

* the chapter's parameters cell leaves these knobs at ``None``, and the cell after it fills them
  with :meth:`Experiment.fill` (the scale rule: an explicit value always wins), which first checks
  every parameter of the chapter against its declared type and range
  (:func:`lib.book.parameters.check`), then prints the value each took and where it comes from,
  then checks the relations between parameters the chapter declares
  (``relations = [{ rule = "low_dim <= a", why = "..." }]``);
* :meth:`Experiment.argued` gives the settings a group of the chapter's checks was argued for,
  which :class:`lib.book.argued.ArguedSettings` compares with the chapter's values;
* ``tools/paper.py`` (``make paper``) trains the Part III runs (:class:`OnlineRun`) with the
  paper column of their chapter's settings, and executes the Part I chapters whose paper scale
  is stored (``stored_chapter = true``) at ``scale="paper"``; the stored run's meta and the
  Reproducibility appendix read the same objects.

Networks are built by the architecture registry, :mod:`lib.architectures`.

Importing this module reads nothing: the registry files are read on the first use of
:func:`experiment`, :func:`run_of`, :func:`stored_chapters`, ``EXPERIMENTS`` or ``RUNS``, from
the book's folder ``book/experiments`` of the checkout (:data:`REGISTRY`).  The science (``lib``)
never imports this package, so it runs without any of the book's files; the book's machinery
lives beside it in ``lib.book`` only so that chapters, tools and tests import one installed
package.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lib.architectures import INITS

from . import parameters as _parameters

__all__ = ["Setting", "Group", "OnlineRun", "Experiment", "EXPERIMENTS", "RUNS", "REGISTRY", "SCALES",
           "check_scale", "experiment", "run_of", "stored_chapters", "load", "toml_value"]

SCALES = ("book", "paper")
REGISTRY = Path(__file__).resolve().parents[2] / "book" / "experiments"
# the settings a run of each task takes from its chapter (same name, or renamed in its `uses`)
RUN_KEYS = {"teacher": ("d", "T", "batch", "x_std", "steps", "lr", "lr_min", "weight_decay"),
            "icl": ("T", "d_x", "d_y", "batch", "sigma_w2", "sigma_x2", "steps", "lr", "lr_min", "weight_decay")}


def check_scale(scale: str) -> str:
    """``scale`` itself when it is "book" or "paper"; otherwise a ValueError that names both: the
    one check of a chapter's ``scale`` switch."""
    if scale not in SCALES:
        raise ValueError(f"scale must be 'book' or 'paper', got {scale!r}")
    return scale


@dataclass(frozen=True)
class Setting:
    """One knob: its value at ``scale="book"`` and at ``scale="paper"``, and where the paper
    states it (or, for a knob the paper leaves open, the book's reason)."""

    book: Any
    paper: Any
    where: str

    def at(self, scale: str):
        return self.book if check_scale(scale) == "book" else self.paper


def fixed(value, where: str) -> Setting:
    """A setting that is the same at both scales."""
    return Setting(value, value, where)


def _check_log_every(what: str, value, none_ok: bool = False) -> None:
    if value is None and none_ok:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be an integer >= 1 (steps a logged loss block averages), got {value!r}")


@dataclass(frozen=True)
class Group:
    """Networks trained together in one stacked step (Part III): an architecture of
    :mod:`lib.architectures` (``kind``, ``layers``), one width and one model seed a member; member
    k draws its data from ``data_seeds[k]`` (default ``1000 + seeds[k]``)."""

    widths: tuple[int, ...]
    seeds: tuple[int, ...]
    kind: str = "gated"
    layers: int = 1
    data_seeds: tuple[int, ...] | None = None
    pool: int | None = None       # None: fresh sequences every step; n: App. B.1's fixed set of n in epochs
    log_every: int | None = None  # steps a logged loss block averages; None: the run's ``log_every``
    init: str = "uniform"         # the gated RNN's initialisation, a name of lib.architectures.INITS

    def __post_init__(self):
        if len(self.widths) != len(self.seeds) or not self.widths:
            raise ValueError(f"a group needs one seed per width, got {self.widths} and {self.seeds}")
        if self.init not in INITS:
            raise ValueError(f"a group's init must be one of {', '.join(INITS)}, got {self.init!r}")
        if self.data_seeds is not None and len(self.data_seeds) != len(self.seeds):
            raise ValueError("data_seeds must have one seed per member")
        _check_log_every("a group's log_every", self.log_every, none_ok=True)

    @property
    def member_data_seeds(self) -> list[int]:
        return list(self.data_seeds) if self.data_seeds is not None else [1000 + s for s in self.seeds]


@dataclass(frozen=True)
class OnlineRun:
    """A Part III paper-scale run, trained once by ``make paper EXP=name`` and stored in
    ``results/name``: its task and sizes are the *paper* column of the chapter's settings (the
    setting of the same name as each run key, or the one ``uses`` names), its networks the
    ``groups``."""

    name: str
    what: str
    task: str                                   # "teacher" or "icl"
    groups: tuple[Group, ...]
    uses: dict[str, str] = field(default_factory=dict)
    teacher_seeds: tuple[int, ...] = ()
    teacher_scale: float = 1.0
    snapshots: tuple[int, ...] = ()             # steps at which the weights are kept as well
    paper_steps_of: str | None = None           # the setting with the paper's step count, for a run that is
    # deliberately shorter than the paper's (a check of a choice); None: the run's own steps are the paper's
    log_every: int = 1000                       # the training loss is logged as the mean of each block of
    # this many steps (a group may declare its own); a checkpoint resumes only with the value it was written with

    def __post_init__(self):
        _check_log_every(f"run {self.name}: log_every", self.log_every)

    def log_every_of(self, i: int) -> int:
        """The logging block of group ``i``: its own ``log_every``, else the run's."""
        return self.groups[i].log_every or self.log_every

    def setting_of(self, key: str) -> str:
        return self.uses.get(key, key)

    def config(self, exp: "Experiment") -> dict:
        """The run's settings: the chapter's paper column under the run's own keys."""
        cfg = {key: exp.settings[self.setting_of(key)].paper for key in RUN_KEYS[self.task]}
        if self.task == "teacher":
            cfg.update(teacher_seeds=list(self.teacher_seeds), teacher_scale=self.teacher_scale)
        return cfg

    def dims(self, exp: "Experiment") -> tuple[int, int]:
        """(d_in, d_out) of the run's networks: the teacher's dimension twice, or, in context,
        the tokens' d_x + d_y and the prediction's d_y."""
        cfg = self.config(exp)
        if self.task == "teacher":
            return cfg["d"], cfg["d"]
        return cfg["d_x"] + cfg["d_y"], cfg["d_y"]

    def paper_steps(self, exp: "Experiment") -> int:
        """The paper's step count for what this run trains (its own steps unless ``paper_steps_of``
        names another setting)."""
        return exp.settings[self.paper_steps_of or self.setting_of("steps")].paper

    @property
    def widths(self) -> list[int]:
        return [w for g in self.groups for w in g.widths]


@dataclass(frozen=True)
class Experiment:
    """The declared settings of one chapter, and its stored runs."""

    chapter: str
    settings: dict[str, Setting]
    runs: tuple[OnlineRun, ...] = ()
    stored_chapter: bool = False     # Part I: the chapter executed at scale="paper" is stored
    what: str = ""
    source: str = ""                 # the registry file that declares it
    relations: tuple = ()            # lib.book.parameters.Relation: what the parameters must satisfy together

    def value(self, name: str, scale: str):
        if name not in self.settings:
            raise KeyError(f"{self.chapter} declares no setting {name!r}; it declares: {', '.join(self.settings)}")
        return self.settings[name].at(scale)

    def fill(self, scale: str, namespace: dict) -> None:
        """The scale rule, applied to a chapter's parameters in ``namespace`` (its ``globals()``):
        every declared setting left at ``None`` takes its ``scale`` column; one the reader set
        keeps its value.  Prints each value with its source -- the column it came from (and the
        other column where they differ), or the reader -- and where it stands in the paper.
        ``scale`` is checked first, then every parameter of the chapter against the type and range
        its parameters cell declares (:func:`lib.book.parameters.check`: the same grammar the
        executor uses, so plain papermill, JupyterLab and a downloaded notebook refuse a bad value
        by name), and a declared setting that is not a parameter of the chapter is an error, all
        before anything is filled; the relations between parameters are checked once the settings
        are filled."""
        check_scale(scale)
        if (_parameters.BOOK / f"{self.chapter}.md").is_file():     # a chapter of the book (not a test's table)
            _parameters.check(self.chapter, namespace)
        if not self.settings:
            self.check_relations(namespace)
            return
        missing = [n for n in self.settings if n not in namespace]
        if missing:
            raise ValueError(f"{self.chapter} declares {', '.join(missing)} in {self.source or 'the registry'}, "
                             "but its parameters cell does not: add each as a parameter left at None")
        lines = [f"The settings of this execution (scale={scale!r}), as {self.source or 'the registry'} "
                 "declares them:"]
        for name, setting in self.settings.items():
            given = namespace[name]
            namespace[name] = setting.at(scale) if given is None else given
            lines.append(_described(name, namespace[name], setting, scale, given is not None))
        print("\n".join(lines))
        self.check_relations(namespace)

    def check_relations(self, values: dict, scale: str | None = None) -> None:
        """A :class:`lib.book.parameters.ParameterError` for the first declared relation that
        ``values`` break.  With ``scale``, a setting left at None first takes its column."""
        if scale is not None:
            values = {**values, **{n: s.at(scale) for n, s in self.settings.items() if values.get(n) is None}}
        for relation in self.relations:
            problem = relation.problem(values)
            if problem:
                raise _parameters.ParameterError(f"{self.chapter}: {problem}")

    def argued(self, scale: str, *names: str) -> dict:
        """``{name: value at scale}`` for the named settings: what a group of checks was argued for."""
        if not names:
            raise ValueError("argued() needs the names of the settings the checks were argued for")
        return {n: self.value(n, scale) for n in names}


def _described(name: str, value, setting: Setting, scale: str, given: bool, width: int = 96) -> str:
    """One printed line of :meth:`Experiment.fill` (wrapped at ``width``): the value, its source
    and where it stands in the paper."""
    import textwrap

    other = "paper" if scale == "book" else "book"
    if given:
        source = f"set for this execution; {scale}: {setting.at(scale)!r}"
    elif setting.book == setting.paper:
        source = "both scales"
    elif len(repr(setting.at(other))) <= 40:
        source = f"{scale}; {other}: {setting.at(other)!r}"
    else:
        source = f"{scale}; the {other} column differs"
    return textwrap.fill(f"{name} = {value!r} ({source}) -- {setting.where}", width,
                         initial_indent="  ", subsequent_indent="      ", break_on_hyphens=False)


# ----------------------------------------------------------------------------- reading the files

def toml_value(raw, tuple_: bool):
    """A TOML value as the chapters use it: arrays of arrays are lists of tuples; ``tuple = true``
    makes the value itself a tuple (the settings here and the published numbers of the claims
    ledgers, :func:`lib.book.fidelity.published`)."""
    if isinstance(raw, list) and raw and all(isinstance(r, list) for r in raw):
        raw = [tuple(r) for r in raw]
    return tuple(raw) if tuple_ else raw


def _setting(where_from: str, name: str, raw: dict) -> Setting:
    keys = set(raw)
    if not isinstance(raw, dict) or "where" not in keys or not (keys >= {"book", "paper"} or "value" in keys) \
            or keys - {"book", "paper", "value", "where", "tuple"}:
        raise ValueError(f"{where_from}: setting {name} must be {{ book = ..., paper = ..., where = ... }} or "
                         f"{{ value = ..., where = ... }}, got {raw!r}")
    t = bool(raw.get("tuple", False))
    if "value" in raw:
        return fixed(toml_value(raw["value"], t), raw["where"])
    return Setting(toml_value(raw["book"], t), raw["paper"] if isinstance(raw["paper"], dict) else toml_value(raw["paper"], t),
                   raw["where"])


def _run(where_from: str, name: str, raw: dict) -> OnlineRun:
    groups = tuple(Group(tuple(g["widths"]), tuple(g["seeds"]), g.get("kind", "gated"), g.get("layers", 1),
                         tuple(g["data_seeds"]) if "data_seeds" in g else None, g.get("pool"), g.get("log_every"),
                         g.get("init", "uniform"))
                   for g in raw["groups"])
    if raw["task"] not in RUN_KEYS:
        raise ValueError(f"{where_from}: run {name} has task {raw['task']!r}; tasks: {', '.join(RUN_KEYS)}")
    return OnlineRun(name, raw["what"], raw["task"], groups, dict(raw.get("uses", {})),
                     tuple(raw.get("teacher_seeds", ())), float(raw.get("teacher_scale", 1.0)),
                     tuple(raw.get("snapshots", ())), raw.get("paper_steps"), raw.get("log_every", 1000))


def load(folder: Path = REGISTRY) -> dict[str, Experiment]:
    """Every chapter's :class:`Experiment`, read from the registry files of ``folder``."""
    tables, common = {}, {}
    for path in sorted(folder.glob("*.toml")):
        data = tomllib.loads(path.read_text())
        for name, table in data.pop("common", {}).items():
            common[name] = {k: _setting(f"{path.name} [common.{name}]", k, v) for k, v in table.items()}
        for chapter, table in data.items():
            if chapter in tables:
                raise ValueError(f"{chapter} is declared twice (again in {path.name})")
            tables[chapter] = (path.name, table)
    experiments, widths = {}, {}
    for chapter, (src, table) in tables.items():
        table = dict(table)
        what, stored = table.pop("what", ""), bool(table.pop("stored_chapter", False))
        relations = []
        for i, r in enumerate(table.pop("relations", [])):
            if not isinstance(r, dict) or set(r) != {"rule", "why"}:
                raise ValueError(f"{src} [{chapter}]: relations[{i}] must be {{ rule = \"...\", why = \"...\" }}, got {r!r}")
            relations.append(_parameters.Relation(r["rule"], r["why"]))
        settings = {}
        for name in table.pop("include", []):
            if name not in common:
                raise ValueError(f"{src} [{chapter}]: include {name!r} names no [common] table")
            settings.update(common[name])
        runs = tuple(_run(f"{src} [{chapter}]", n, r) for n, r in table.pop("run", {}).items())
        settings.update({k: _setting(f"{src} [{chapter}]", k, v) for k, v in table.items()})
        experiments[chapter] = Experiment(chapter, settings, runs, stored, what, f"book/experiments/{src}",
                                          tuple(relations))
        widths.update({r.name: r.widths for r in runs})
    for exp in experiments.values():                       # paper values that refer to runs or ranges
        for name, s in list(exp.settings.items()):
            if isinstance(s.paper, dict):
                if set(s.paper) == {"widths_of"}:
                    value = sorted({w for run in s.paper["widths_of"] for w in widths[run]})
                elif set(s.paper) == {"range"}:
                    value = list(range(*s.paper["range"]))
                else:
                    raise ValueError(f"{exp.chapter}: paper value of {name} must be a value, "
                                     f"{{ widths_of = [...] }} or {{ range = [...] }}, got {s.paper!r}")
                exp.settings[name] = Setting(s.book, value, s.where)
        for run in exp.runs:
            missing = [run.setting_of(k) for k in RUN_KEYS[run.task] if run.setting_of(k) not in exp.settings]
            missing += [run.paper_steps_of] if run.paper_steps_of and run.paper_steps_of not in exp.settings else []
            if missing:
                raise ValueError(f"{exp.chapter}: run {run.name} needs the settings {', '.join(missing)}")
    return experiments


_READ: dict = {}


def _registry() -> dict:
    """``{"EXPERIMENTS": ..., "RUNS": ...}``, read from :data:`REGISTRY` on first use."""
    if not _READ:
        experiments = load()
        _READ["RUNS"] = {r.name: (e, r) for e in experiments.values() for r in e.runs}
        _READ["EXPERIMENTS"] = experiments
    return _READ


def __getattr__(name: str):
    """``EXPERIMENTS`` (chapter -> :class:`Experiment`) and ``RUNS`` (run name -> (experiment,
    :class:`OnlineRun`)): the registry, read on first use."""
    if name in ("EXPERIMENTS", "RUNS"):
        return _registry()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def experiment(chapter: str) -> Experiment:
    """The declared experiment of ``chapter`` ("11_learning_attention_teacher"); a chapter with no
    table in the registry has no declared setting."""
    return _registry()["EXPERIMENTS"].get(chapter, Experiment(chapter, {}))


def run_of(name: str) -> tuple[Experiment, OnlineRun]:
    """The stored Part III run ``name`` and the experiment it belongs to."""
    runs = _registry()["RUNS"]
    if name not in runs:
        raise KeyError(f"unknown stored run {name!r}; declared: {', '.join(runs)}")
    return runs[name]


def stored_chapters() -> list[Experiment]:
    """The Part I experiments whose paper scale is a stored execution of the chapter."""
    return [e for e in _registry()["EXPERIMENTS"].values() if e.stored_chapter]
