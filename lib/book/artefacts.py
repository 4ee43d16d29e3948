"""Paper-scale results stored in the repository (results/), read back with their checksums.

``tools/paper.py`` trains and writes them; the chapters only read them.  ``load_run(name)``
checks every file of the run against ``results/MANIFEST.sha256`` before loading and returns
the trained networks in float64 (gated RNNs as :class:`lib.gated.GatedLinearRNN`, the other
architectures as :class:`lib.recurrent_cells.RecurrentNet`), ready to be re-evaluated on CPU.

Chapters whose paper scale is a whole notebook execution (Part I) store what that execution
glued: executed at ``scale="paper"`` they call :func:`glue_json` on the numbers and small arrays
of their paper-scale result, ``tools/paper.py chapter NN`` collects those glue outputs into
``results/chNN_NAME/glued.json`` beside a ``meta.json``, and at ``scale="book"`` the chapter reads
them back with :func:`load_chapter_run`, which verifies both files against the manifest.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from ..data import sha256 as sha256_of
from ..storage import load_tensors

__all__ = ["load_run", "load_finished_groups", "work_folder", "load_chapter_run", "load_measurement", "at_steps",
           "recorded", "chapter_folder", "glue_json", "jsonable", "RESULTS", "sha256_of", "manifest_path",
           "read_manifest", "verify", "group_binding", "check_group", "joining_folder", "previous_folder",
           "JOURNAL", "interrupted_join", "same_run", "check_checkpoint"]

RESULTS = Path(__file__).resolve().parents[2] / "results"


def manifest_path(root: Path | None = None) -> Path:
    return (root or RESULTS) / "MANIFEST.sha256"


def read_manifest(root: Path | None = None) -> dict[str, str]:
    """``results/MANIFEST.sha256`` as {path relative to the results folder: SHA-256} ({} when absent);
    a malformed line is a ValueError naming the file and the line."""
    path = manifest_path(root)
    lines = {}
    if path.is_file():
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            parts = line.split(None, 1)
            if len(parts) != 2 or len(parts[0]) != 64 or any(c not in "0123456789abcdef" for c in parts[0]):
                raise ValueError(f"{path}, line {n}: expected '<sha256>  <path>', got {line!r}")
            lines[parts[1].strip()] = parts[0]
    return lines


def verify(files, root: Path, command: str) -> None:
    """Check every file in ``files`` against the manifest of ``root``: ``FileNotFoundError``
    (naming the command that writes it) for a missing file, ``ValueError`` for a file the
    manifest does not list or whose SHA-256 differs."""
    manifest = manifest_path(root)
    for f in [manifest, *files]:
        if not f.is_file():
            raise FileNotFoundError(f"{f} is missing: write it with `{command}`")
    expected = read_manifest(root)
    for f in files:
        try:
            rel = f.relative_to(root).as_posix()
        except ValueError:
            raise ValueError(f"{f} is not under the results folder {root}: only files of it are checked "
                             "against its manifest") from None
        if rel not in expected:
            raise ValueError(f"{rel} is not listed in {manifest}")
        got = sha256_of(f)
        if got != expected[rel]:
            raise ValueError(f"checksum mismatch for {f}: expected {expected[rel]}, got {got}")


def _name(what: str, value) -> str:
    """A run or chapter name: a non-empty string naming one folder of results/ (no path)."""
    if not isinstance(value, str) or not value or value in (".", "..") or "/" in value or "\\" in value:
        raise ValueError(f"{what} must be the name of one folder of results/ (a non-empty string without "
                         f"'/'), got {value!r}")
    return value


def _root(root) -> Path:
    if root is None:
        return RESULTS
    if not isinstance(root, (str, Path)):
        raise TypeError(f"root must be a folder (str or pathlib.Path), got {type(root).__name__}")
    return Path(root)


def chapter_folder(stem: str) -> str:
    """The results folder of chapter ``stem`` ("04_training_dynamics" -> "ch04_training_dynamics")."""
    return "ch" + _name("stem", stem)


def load_chapter_run(stem: str, root: str | Path | None = None) -> dict:
    """The stored paper-scale execution of chapter ``stem`` (e.g. "04_training_dynamics"),
    verified against the manifest: ``{"meta": dict, "glued": {name: value}}``.

    Raises ``FileNotFoundError`` naming the missing file and the command that writes it, and
    ``ValueError`` if a checksum does not match.
    """
    root = _root(root)
    folder = root / chapter_folder(stem)
    files = [folder / "glued.json", folder / "meta.json"]
    verify(files, root, f"make paper EXP=ch{stem[:2]}")
    meta = json.loads(files[1].read_text())
    if meta.get("experiment", folder.name) != folder.name:
        raise ValueError(f"{files[1]} describes the run {meta['experiment']!r}, not {folder.name!r}: the stored "
                         "files were moved between runs")
    return {"meta": meta, "glued": json.loads(files[0].read_text())}


def at_steps(meta: dict) -> str:
    """How a stored run's length reads beside the paper's, from its ``meta``: "the paper's 781,250
    steps", or "200,000 of the paper's 781,250 steps" (a complete cosine schedule over the shorter
    run).  Used by every chapter that reports a stored run, so that a run is called the paper's
    only where it has the paper's steps."""
    steps, paper = meta["steps"], meta["paper_steps"]
    if steps >= paper:
        return f"the paper's {paper:,} steps"
    return f"{steps:,} of the paper's {paper:,} steps"


def recorded(meta: dict, key: str) -> list[str]:
    """The values of ``key`` (``"device"``, ``"git_commit"``, ``"code_sha256"``) over every segment
    of a stored training run's groups, in order of first appearance: a run whose groups were
    resumed under another commit or on another machine has several, while the top level of its
    ``meta`` records only its first segment's.  A run without segments gives the one value of its
    ``meta``."""
    segments = [seg for group in meta.get("group_segments", []) for seg in group] or [meta]
    return list(dict.fromkeys(seg.get(key, "?") for seg in segments))


def load_measurement(name: str, root: str | Path | None = None) -> dict:
    """A measurement stored from another machine, ``results/NAME/bench.json`` (e.g. ``bench_cuda``:
    the CUDA training step timed on a GPU by ``python -m benchmarks.bench_cuda_step --json``),
    verified against the manifest: the dict it holds (rows, device, versions, commit, code digest).

    Raises ``FileNotFoundError`` naming the missing file and the command that writes it, and
    ``ValueError`` if its checksum does not match.
    """
    root = _root(root)
    f = root / _name("name", name) / "bench.json"
    verify([f], root, f"python -m benchmarks.bench_{name.removeprefix('bench_')}_step --json {f} (on a CUDA machine)")
    return json.loads(f.read_text())


def jsonable(value, digits: int = 6):
    """``value`` as plain JSON types: numpy arrays and tensors become (nested) lists, numpy
    scalars Python numbers, tuples lists, dict keys strings; floats keep ``digits``
    significant digits (enough for every number a chapter prints, and a small file)."""
    import numpy as np

    if isinstance(value, dict):
        return {str(k): jsonable(v, digits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v, digits) for v in value]
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist(), digits)
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if not np.isfinite(v) else float(f"{v:.{digits}g}")
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"cannot store {type(value).__name__} as JSON")


def same_run(name: str, meta: dict, data: dict, folder: Path) -> None:
    """run.pt and meta.json of ``folder`` describe the run ``name`` and each other: the
    experiment named in both, and the groups of run.pt (kind, layers, widths, seeds, in order)
    those of meta.json's configuration."""
    named = {"meta.json": meta.get("experiment", name), "run.pt": data.get("name", name)}
    for where, value in named.items():
        if value != name:
            raise ValueError(f"{folder / where} belongs to the run {value!r}, not {name!r}: the stored files "
                             "were moved or swapped between runs")
    configured = (meta.get("config") or {}).get("groups")
    if configured is None:
        return
    stored = [(g.get("kind", "gated"), g.get("layers", 1), list(g["widths"]), list(g["seeds"])) for g in data["groups"]]
    declared = [(g.get("kind", "gated"), g.get("layers", 1), list(g["widths"]), list(g["seeds"])) for g in configured]
    if stored != declared:
        raise ValueError(f"{folder}: the groups of run.pt (kind, layers, widths, seeds) {stored} are not those "
                         f"meta.json records {declared}: run.pt and meta.json come from different runs")


class _JSONText:
    """What :func:`glue_json` glues: its text form is the JSON of the value."""

    def __init__(self, value):
        self.value = value

    def __repr__(self) -> str:
        return json.dumps(self.value, allow_nan=True)


def glue_json(name: str, value, digits: int = 6):
    """Glue ``value`` (made :func:`jsonable`) under ``name`` with no visible output; the glued
    text/plain is its JSON, read back with ``json.loads``.  Returns the stored value."""
    from myst_nb import glue

    value = jsonable(value, digits)
    glue(name, _JSONText(value), display=False)
    return value


def load_run(name: str, root: str | Path | None = None, replaced: bool = False) -> dict:
    """The artefact of experiment ``name``, verified against the manifest; with ``replaced``, the
    run it replaced (``NAME/replaced/``, kept by ``python -m tools.paper run NAME --replace``).

    Used in Chapter 11, section "sec-teacher-paper", Chapter 12, section "sec-icl-paper", and
    Chapter 13, section "sec-fig4-stored", to load the stored paper-scale runs, and in Chapter 13,
    section "sec-fig4-paper-steps", to load the run a joined run replaced.

    Returns ``{"meta": dict, "task": dict, "groups": [{"kind", "layers", "widths", "seeds", "pool",
    "history", "snapshots", "segments", "model", "members"}]}`` with float64 models: for gated groups a StackedGatedRNN
    whose members are GatedLinearRNN, otherwise a ModuleStack of RecurrentNet members.
    Raises ``FileNotFoundError`` (naming the file and the command that writes it) if the run is
    missing, and ``ValueError`` if a checksum does not match or the two files do not describe
    this run (meta.json names another experiment, or run.pt's groups are not the ones meta.json
    records: files moved or swapped between runs).  run.pt is read as tensors and plain containers
    only (:func:`lib.storage.load_tensors`): a file that would run code when unpickled is refused
    naming it, even when its manifest line was recomputed.  While a join of the run is under way
    or was interrupted, the error says so and what the next ``python -m tools.paper run NAME``
    does (:func:`interrupted_join`).  The chapters that read a training run analyse it
    throughout, so a missing run fails them.
    """
    name = _name("name", name)
    root = _root(root)
    folder = root / name / "replaced" if replaced else root / name
    files = [folder / "run.pt", folder / "meta.json"]
    try:
        verify(files, root, f"python -m tools.paper run {name} --replace" if replaced else f"make paper EXP={name}")
    except (FileNotFoundError, ValueError) as exc:
        state = interrupted_join(name, root)
        if state is None:
            raise
        raise type(exc)(f"{exc}: {state}") from None
    meta = json.loads(files[1].read_text())
    data = load_tensors(files[0], "stored run", advice=f"it is listed in {manifest_path(root)} with its checksum, "
                                                       "so it was written or edited by hand: restore it from git")
    same_run(name, meta, data, folder)
    return {"meta": meta, "task": data["task"], "groups": [_group(g, data["d_in"], data["d_out"]) for g in data["groups"]]}


def _group(g: dict, d_in: int, d_out: int) -> dict:
    """One stored group with its networks rebuilt in float64 (a stacked model and its members)."""
    from ..architectures import build

    kind, layers = g.get("kind", "gated"), g.get("layers", 1)
    model = build(kind, layers, d_in, g["widths"], d_out, g["seeds"], dtype=torch.float64)
    model.load_state_dict({k: v.double() for k, v in g["state"].items()})
    return {"kind": kind, "layers": layers, "widths": g["widths"], "seeds": g["seeds"], "pool": g.get("pool"),
            "history": g["history"], "seconds": g["seconds"], "model": model,
            "snapshots": g.get("snapshots", {}), "segments": g.get("segments", []),
            "members": [model.member(k) for k in range(model.K)]}


def work_folder(name: str, root: str | Path | None = None) -> Path:
    """Where a run in progress keeps its groups, ``results/runs/NAME``: one checkpoint per group
    while it trains, one finished file per group when it is done (``tools/paper.py`` writes them
    and joins the finished groups into ``results/NAME`` when all are done)."""
    return _root(root) / "runs" / _name("name", name)


def group_binding(name: str, i: int, group) -> dict:
    """What group ``i`` of the declared run ``name`` is, as its checkpoint's settings and its
    finished file carry it: the run, the group's index, architecture (kind, layers), widths,
    model seeds, data seeds, training pool and initialisation of ``group`` (its
    :class:`~lib.book.experiments.Group` in the registry; ``tools/paper.py`` passes the binding to
    :func:`lib.online.train_online` as ``binding``)."""
    return {"run": name, "group": i, "kind": group.kind, "layers": group.layers, "widths": list(group.widths),
            "seeds": list(group.seeds), "data_seeds": group.member_data_seeds, "pool": group.pool,
            "init": group.init}


# what a group file written before a field existed holds in its place
_GROUP_DEFAULTS = {"kind": "gated", "layers": 1, "pool": None, "init": "uniform"}


def check_group(data, f: Path, binding: dict) -> dict:
    """``data`` (read from the finished group file ``f``) when it is the group ``binding``
    describes (:func:`group_binding`): every field the same -- the run and the index where the
    file records them (files written before they were recorded do not).  A ValueError naming the
    file and both descriptions otherwise."""
    if not isinstance(data, dict) or not {"state", "widths", "seeds", "steps"} <= set(data):
        raise ValueError(f"{f} is not a finished group file of tools/paper.py (it holds "
                         f"{sorted(data) if isinstance(data, dict) else type(data).__name__})")
    stored = {k: (list(data[k]) if isinstance(data.get(k), (list, tuple)) else data.get(k, _GROUP_DEFAULTS.get(k)))
              for k in binding if k in data or k not in ("run", "group")}
    expect = {k: binding[k] for k in stored}
    if stored != expect:
        differ = ", ".join(f"{k} {stored[k]!r} in the file, {expect[k]!r} declared" for k in stored
                           if stored[k] != expect[k])
        raise ValueError(f"{f} is not group {binding['group']} of the run {binding['run']!r} as the registry "
                         f"declares it ({differ}): files moved between runs or groups; move it back, or delete it "
                         f"to train group {binding['group']} again")
    return data


def check_checkpoint(state, f: Path, binding: dict) -> dict:
    """A checkpoint in the place of group ``binding['group']``: its settings' binding must be it."""
    if not isinstance(state, dict) or not isinstance(state.get("config"), dict) or "step" not in state:
        raise ValueError(f"{f} is not a checkpoint of train_online (no training settings)")
    written = state["config"].get("group")
    if written is not None and written != binding:
        differ = ", ".join(f"{k} {written.get(k)!r} in the checkpoint, {binding.get(k)!r} declared"
                           for k in sorted(set(written) | set(binding)) if written.get(k) != binding.get(k))
        raise ValueError(f"{f} is not a checkpoint of group {binding['group']} of the run {binding['run']!r} as the "
                         f"registry declares it ({differ}): files moved between runs or groups; move it back, or "
                         f"delete it to start group {binding['group']} afresh")
    return state


JOURNAL = "JOIN.json"


def joining_folder(name: str, root: str | Path | None = None) -> Path:
    """Where ``tools/paper.py`` assembles a joined run before it is swapped in, ``results/NAME.joining``."""
    return _root(root) / f"{_name('name', name)}.joining"


def previous_folder(name: str, root: str | Path | None = None) -> Path:
    """Where the stored run stands aside while a join swaps the new one in, ``results/NAME.previous``."""
    return _root(root) / f"{_name('name', name)}.previous"


def interrupted_join(name: str, root: str | Path | None = None) -> str | None:
    """A sentence describing the join of ``name`` that was interrupted (or is under way), or
    None: the folders a join leaves while it works, and what the next ``python -m tools.paper
    run NAME`` does with them (it completes a join whose new run was swapped in, and undoes one
    whose was not)."""
    root = _root(root)
    out, staging, previous = root / _name("name", name), joining_folder(name, root), previous_folder(name, root)
    if (out / JOURNAL).is_file():
        return (f"a join of {name} swapped its new run into {out} but did not finish (its record "
                f"{out / JOURNAL} is still there: the manifest may still list the earlier files); run "
                f"`python -m tools.paper run {name}` to complete it")
    if previous.is_dir() and not out.exists():
        return (f"a join of {name} was interrupted while swapping: the stored run stands aside in {previous}; "
                f"run `python -m tools.paper run {name}` to put it back and join again")
    if staging.is_dir():
        return (f"a join of {name} was interrupted (or is under way) before its new run was swapped in: {out} "
                f"is untouched and {staging} holds a partial copy, which the next `python -m tools.paper run "
                f"{name}` removes")
    return None


def load_finished_groups(name: str, root: str | Path | None = None) -> dict:
    """The state of run ``name`` while it trains group by group: its groups that are finished in
    :func:`work_folder`, with float64 networks as in :func:`load_run`, and how far the others are.

    Returns ``{"paper_steps": int, "n_groups": int, "finished": [group], "training": [{"index",
    "kind", "layers", "step", "steps", "segments", "seconds"}]}`` (a group in training: the step
    of its checkpoint and the segments of training that reached it), each finished group as in
    :func:`load_run` plus its
    ``"index"`` in the registry, its ``"steps"`` and ``"data_seeds"``; both lists are empty when
    no run of ``name`` is in progress (the folder is absent: not started, or already joined).
    A finished group's file is the one ``tools/paper.py`` writes, committed with the repository,
    and carries its provenance (every segment's commit, code digest, device and steps); it is not
    in the manifest, which lists joined runs.  Every file is read as tensors only.  Raises
    ``ValueError`` naming the file if it cannot be read (truncated, half-written), holds anything
    but tensors and plain containers, or is not the group the registry declares at its index
    (:func:`check_group`: run, architecture, widths, seeds, data seeds, pool or initialisation
    differ; for a checkpoint, the binding of its settings).
    """
    from . import experiments

    name = _name("name", name)
    exp, spec = experiments.run_of(name)
    d_in, d_out = spec.dims(exp)
    folder = work_folder(name, root)
    finished, training = [], []
    for i in range(len(spec.groups)):
        done, ckpt = folder / f"group-{i}.pt", folder / f"group-{i}.checkpoint.pt"
        if not (done.is_file() or ckpt.is_file()):
            continue
        binding = group_binding(name, i, spec.groups[i])
        if done.is_file():
            data = check_group(load_tensors(done, "finished group file", advice=f"delete it to train group {i} "
                                            "again"), done, binding)
            finished.append({**_group(data, d_in, d_out), "index": i, "steps": data["steps"],
                             "data_seeds": list(data["data_seeds"])})
        else:
            data = check_checkpoint(load_tensors(ckpt, "checkpoint of train_online", advice="delete it to start "
                                                  f"group {i} afresh"), ckpt, binding)
            segments = list(data.get("segments", []))
            training.append({"index": i, "kind": binding["kind"], "layers": binding["layers"],
                             "step": int(data["step"]), "steps": int(data["config"]["steps"]),
                             "segments": segments, "seconds": sum(seg.get("seconds", 0.0) for seg in segments)})
    return {"paper_steps": spec.paper_steps(exp), "n_groups": len(spec.groups), "finished": finished,
            "training": training}
