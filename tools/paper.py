"""Paper-scale runs, written as checksummed artefacts under results/ (``make paper``).

    python -m tools.paper list                       the runs the registry declares, and what is stored
    python -m tools.paper run NAME [--steps N] [--group I ...] [--device cuda] [--executor local|slurm]
                                  [--jobs N] [--replace] [--threads N] [--progress]
    python -m tools.paper chapter NN [-p NAME VALUE ...]

Every run is declared once, in the experiment registry (``lib/book/experiments.py``):

* a Part III run (``teacher``, ``teacher_width``, ``icl``, ``icl_width``, ``arch_teacher``,
  ``arch_icl``) is an :class:`~lib.book.experiments.OnlineRun`: its task and sizes are the paper
  column of its chapter's settings, its networks groups of :mod:`lib.architectures`.  ``run``
  trains the groups with :func:`lib.online.train_online` into ``results/runs/NAME/`` -- one
  checkpoint per group while it trains (written every 1 % of the steps; committed, a run in
  another checkout resumes it), one file per finished group -- and, when every group is finished, joins
  them into ``results/NAME/run.pt`` (trained weights, loss histories, weight snapshots, teacher
  weights and task settings) and ``results/NAME/meta.json`` (settings, seeds, every segment of
  the run with its commit, code digest, device and steps, versions, wall time), and records both
  checksums in ``results/MANIFEST.sha256``.  A stored run is replaced only with ``--replace``.
  Groups are independent jobs: ``--group I`` trains one (one process a core on a CPU), and
  ``--executor local|slurm`` submits every unfinished group as a job through submitit (local
  processes, or a SLURM cluster), ``--jobs N`` of them at a time (local default: one a core for
  ``--threads 1``), then joins them;
* a Part I chapter whose paper scale is stored (``ch04``, ``ch05``, ``ch06``) is executed at
  ``scale="paper"`` by ``chapter NN``; what it glued is stored in ``results/chNN_NAME/glued.json``
  beside its meta.

``--steps`` runs a complete cosine schedule over fewer steps than the paper's; the artefact
records both numbers.
"""
from __future__ import annotations

import argparse
import datetime as dt
import errno
import hashlib
import json
import os
import platform
import shlex
import shutil
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import torch

import lib
from lib import architectures, storage
from lib.book import artefacts, experiments
from lib.book.artefacts import RESULTS, sha256_of, work_folder
from lib.storage import FileLock, LockHeld
from tools.common import ROOT, check_manifest, code_digest, device_name, git_commit, parse_value, update_manifest

__all__ = ["Run", "run", "run_group", "assemble", "run_chapter", "glued_values", "work_folder", "main"]


def _utc() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _command() -> str:
    return "python -m tools.paper " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def _versions() -> dict:
    import numpy

    return {"python": platform.python_version(), "torch": torch.__version__, "numpy": numpy.__version__}


@dataclass(frozen=True)
class Run:
    """A declared run as the runner works on it: its registry entry (looked up once, by name) and
    the results folder it is stored in; every step of the runner takes this object."""

    name: str
    exp: experiments.Experiment
    spec: experiments.OnlineRun
    root: Path

    @classmethod
    def of(cls, name: str, root: str | Path | None = None) -> "Run":
        exp, spec = experiments.run_of(name)
        return cls(name, exp, spec, Path(root) if root is not None else RESULTS)

    @property
    def n(self) -> int:
        return len(self.spec.groups)

    @property
    def work(self) -> Path:
        """``runs/NAME``: the groups while they train (checkpoints, finished group files)."""
        return work_folder(self.name, self.root)

    @property
    def out(self) -> Path:
        """``NAME``: the stored run (run.pt, meta.json, replaced/)."""
        return self.root / self.name

    def config(self) -> dict:
        """The run's settings: its chapter's paper column under the run's keys, and the task."""
        return {"task": self.spec.task, **self.spec.config(self.exp)}

    def binding(self, i: int) -> dict:
        """What group ``i`` is (:func:`lib.book.artefacts.group_binding`): its checkpoint and its
        finished file carry it, and are refused in any other group's place."""
        return artefacts.group_binding(self.name, i, self.spec.groups[i])

    def group_lock(self, i: int) -> FileLock:
        return FileLock(self.work / f"group-{i}.lock", f"the training of {self.name} group {i}")

    def join_lock(self) -> FileLock:
        return FileLock(self.root / ".locks" / f"{self.name}.join.lock", f"the join of {self.name}")


def make_task(cfg: dict, group, dtype, device):
    """The training task of one group (member k's teacher: teacher k, or the only one); with the
    group's ``pool``, App. B.1's fixed training set (member k's from seed 10,000 + its data seed)."""
    K = len(group.widths)
    if cfg["task"] == "teacher":
        W = lib.lsa_teachers(cfg["d"], cfg["teacher_seeds"], scale=cfg["teacher_scale"])
        if W[0].shape[0] == 1:
            W = tuple(w.expand(K, -1, -1) for w in W)
        elif W[0].shape[0] != K:
            raise ValueError("one teacher per member, or one teacher for all")
        pool_seeds = [10_000 + s for s in group.member_data_seeds] if group.pool else None
        return lib.AttentionTeacherTask(*W, T=cfg["T"], batch=cfg["batch"], x_std=cfg["x_std"], dtype=dtype,
                                        device=device, pool=group.pool, pool_seeds=pool_seeds)
    if group.pool:
        raise ValueError("a fixed training set (pool) is implemented for the teacher task only")
    return lib.ICLTask(K=K, T=cfg["T"], d_x=cfg["d_x"], d_y=cfg["d_y"], batch=cfg["batch"],
                       sigma_w2=cfg["sigma_w2"], sigma_x2=cfg["sigma_x2"], dtype=dtype, device=device)


def run_group(run: Run, i: int, steps: int, device: str, progress: bool = False, log_every: int | None = None) -> Path:
    """Train group ``i`` of ``run`` for ``steps`` steps (resuming from its checkpoint) and write
    it to ``runs/NAME/group-i.pt``; returns that file.  Every call is one segment of the run,
    recorded with its commit, code digest, device and steps.  ``log_every``: the steps a logged
    loss block averages (default: the group's declared value, ``OnlineRun.log_every_of``).

    The group's lock (``runs/NAME/group-i.lock``) is held throughout: a second process training
    the same group is refused with a line naming this one.  The checkpoint and the finished file
    carry the group's binding (:meth:`Run.binding`), so that neither is taken for another group's."""
    cfg = run.config()
    group = run.spec.groups[i]
    log_every = run.spec.log_every_of(i) if log_every is None else log_every
    run.work.mkdir(parents=True, exist_ok=True)
    done = run.work / f"group-{i}.pt"
    device = torch.device(device)
    d_in, d_out = run.spec.dims(run.exp)
    binding = run.binding(i)
    with run.group_lock(i):
        for f in (done, run.work / f"group-{i}.checkpoint.pt"):       # left by a training killed mid-write
            storage.remove_temporaries(f)
        task = make_task(cfg, group, torch.float32, device)
        model = architectures.build(group.kind, group.layers, d_in, group.widths, d_out, group.seeds,
                                    init=group.init, dtype=torch.float32, device=device)
        segment = {"git_commit": git_commit(), "code_sha256": code_digest(), "device": device_name(device),
                   "command": _command(), "started_utc": _utc()}
        hist = lib.train_online(model, task, steps=steps, data_seeds=group.member_data_seeds, lr=cfg["lr"],
                                lr_min=cfg["lr_min"], weight_decay=cfg["weight_decay"], log_every=log_every,
                                checkpoint=run.work / f"group-{i}.checkpoint.pt",
                                checkpoint_every=max(log_every, steps // 100),
                                snapshots=[s for s in run.spec.snapshots if s < steps], segment=segment,
                                progress=progress, binding=binding)
        hist["segments"][-1]["finished_utc"] = _utc()
        result = {**binding, "steps": steps,
                  "state": {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()},
                  "history": {"step": hist["step"], "loss": hist["loss"]},
                  "snapshots": hist["snapshots"], "segments": hist["segments"],
                  "seconds": sum(seg.get("seconds", 0.0) for seg in hist["segments"]), "captured": hist["captured"]}
        storage.save(done, result)
        (run.work / f"group-{i}.checkpoint.pt").unlink(missing_ok=True)
    print(f"[paper] {run.name}: group {i + 1}/{run.n} {architectures.label(group.kind, group.layers)}, "
          f"widths {list(group.widths)} done ({steps:,} steps, {result['seconds']:.0f} s); final block loss "
          f"{hist['loss'][-1].tolist()}", flush=True)
    return done


def _group_file(run: Run, i: int) -> dict | None:
    """The finished file of group ``i`` (None when there is none), read as tensors only and
    checked to be that group: a file that cannot be read, holds more than tensors, or is another
    group's is refused naming it, before any group trains."""
    f = run.work / f"group-{i}.pt"
    if not f.is_file():
        return None
    try:
        data = storage.load_tensors(f, "finished group file", advice=f"delete it to train {run.name} group {i} again")
        return artefacts.check_group(data, f, run.binding(i))
    except ValueError as exc:
        raise SystemExit(str(exc)) from None


def _group_locks(run: Run) -> ExitStack:
    """Every group's lock of ``run`` (while its groups are joined, none trains), when it has a
    folder of groups in training."""
    stack = ExitStack()
    try:
        if run.work.is_dir():
            for i in range(run.n):
                stack.enter_context(run.group_lock(i))
    except BaseException:
        stack.close()
        raise
    return stack


def _finished(run: Run, i: int, steps: int) -> bool:
    part = _group_file(run, i)
    return part is not None and part["steps"] == steps


# ----------------------------------------------------------------------------- the join
#
# A join never changes a stored run in place.  It assembles the new run in NAME.joining (run.pt
# and meta.json, and, when it replaces a stored run, that run's two files in replaced/), verifies
# it, records what it holds in NAME.joining/JOIN.json, then swaps it in (NAME -> NAME.previous,
# NAME.joining -> NAME: two renames), updates the manifest from the record and removes, in this
# order, NAME.previous, runs/NAME and the record.  The next run of the command finishes a join
# whose record stands in NAME (the swap happened) and undoes any other (the stored run is put
# back and the join done again): whenever it is killed, the stored and the replaced run are
# each whole, or the next command makes them whole.

def _no_space(exc: OSError) -> str:
    """A full disk in words that name the file (lib.storage's own messages do; the system's
    carry the file, if at all, as ``filename``)."""
    if exc.strerror and "no space left on the device" in exc.strerror:
        return exc.strerror
    where = f" while writing {exc.filename}" if exc.filename else ""
    return f"no space left on the device{where} ({exc})"


def _record_of(folder: Path) -> dict:
    """A join's record (NAME/JOIN.json or NAME.joining/JOIN.json)."""
    try:
        return json.loads((folder / artefacts.JOURNAL).read_text())
    except (OSError, ValueError) as exc:
        raise SystemExit(f"{folder / artefacts.JOURNAL} cannot be read ({exc}): the join of {folder.name} was "
                         f"interrupted while its record was written; delete {folder / artefacts.JOURNAL} only "
                         "after checking that the folder's run.pt and meta.json are the stored run, then run "
                         "again") from None


def _finish_join(run: Run) -> None:
    """The steps of a join after the swap (each may be done again): the manifest from the
    record, then NAME.previous, runs/NAME and the record removed."""
    record = _record_of(run.out)
    for rel, digest in record["lines"].items():
        got = sha256_of(run.root / rel)
        if got != digest:
            raise SystemExit(f"{run.root / rel} is not the file the join of {run.name} recorded (SHA-256 {got}, "
                             f"recorded {digest}): the folder was changed after the swap; restore it from git")
    try:
        update_manifest(run.root, lines=record["lines"], drop=record["drop"])
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
        raise SystemExit(f"{_no_space(exc)}. The join of {run.name} is half done: its new run is in {run.out} and "
                         f"{run.out / artefacts.JOURNAL} records what is left; run `python -m tools.paper run "
                         f"{run.name}` again once there is space") from None
    previous = artefacts.previous_folder(run.name, run.root)
    if previous.exists():
        shutil.rmtree(previous)
    if run.work.exists():
        shutil.rmtree(run.work)
    (run.out / artefacts.JOURNAL).unlink()
    storage.fsync_folder(run.out)


def _recover(run: Run) -> bool:
    """Finish or undo a join of ``run`` that was interrupted (under its join lock); True when a
    join was finished (the run is stored and its groups are gone)."""
    out, staging = run.out, artefacts.joining_folder(run.name, run.root)
    previous = artefacts.previous_folder(run.name, run.root)
    if (out / artefacts.JOURNAL).is_file():
        print(f"[paper] {run.name}: completing the join interrupted after its new run was swapped in", flush=True)
        _finish_join(run)
        return True
    if previous.exists():
        if out.exists():
            raise SystemExit(f"{previous} is left from an interrupted join beside the stored run {out}, and no "
                             "record says which is the newer: compare the two (load_run reads only "
                             f"{out}) and remove the one that is not the stored run, then run again")
        print(f"[paper] {run.name}: undoing a join interrupted while swapping: {previous} goes back to {out}",
              flush=True)
        os.rename(previous, out)
        storage.fsync_folder(run.root)
    if staging.exists():
        print(f"[paper] {run.name}: removing {staging}, left by a join interrupted before its swap ({out} is "
              "untouched)", flush=True)
        shutil.rmtree(staging)
    return False


def _stored_state(run: Run) -> str | None:
    """None when the stored run of ``run`` is whole (both files there, each matching the
    manifest); otherwise what is wrong with it."""
    files = [run.out / "run.pt", run.out / "meta.json"]
    try:
        artefacts.verify(files, run.root, f"make paper EXP={run.name}")
        json.loads(files[1].read_text())
    except (FileNotFoundError, ValueError) as exc:
        return str(exc).splitlines()[0]
    return None


def _describe_stored(run: Run) -> str:
    try:
        old = json.loads((run.out / "meta.json").read_text())
    except (OSError, ValueError):
        old = {}
    return f"{run.out} ({old['steps']:,} steps, finished {old.get('finished_utc', '?')})" \
        if isinstance(old.get("steps"), int) else str(run.out)


def _link_or_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        storage.write_bytes(dst, src.read_bytes())


def _meta(run: Run, steps: int, parts: list[dict]) -> dict:
    cfg = run.config()
    segments = [seg for p in parts for seg in p["segments"]]
    paper_steps = run.spec.paper_steps(run.exp)
    return {
        "experiment": run.name, "chapter": run.exp.chapter, "what": run.spec.what,
        "config": {**cfg, "groups": [{"kind": g.kind, "layers": g.layers, "widths": list(g.widths),
                                      "seeds": list(g.seeds), "data_seeds": g.member_data_seeds, "pool": g.pool,
                                      "init": g.init}
                                     for g in run.spec.groups], "snapshots": list(run.spec.snapshots)},
        "steps": steps, "paper_steps": paper_steps,
        "schedule": f"cosine from {cfg['lr']:g} to {cfg['lr_min']:g} over {steps:,} steps"
                    + (" (the paper's)" if steps == paper_steps else f" (the paper's: over {paper_steps:,})"),
        "command": segments[0]["command"], "git_commit": segments[0]["git_commit"],
        "code_sha256": segments[0]["code_sha256"], "device": segments[0]["device"], "versions": _versions(),
        "wall_seconds": sum(p["seconds"] for p in parts), "group_seconds": [p["seconds"] for p in parts],
        "group_segments": [p["segments"] for p in parts],
        "finished_utc": max(seg.get("finished_utc", "") for seg in segments), "dtype": "float32",
    }


def assemble(run: Run, steps: int, replace: bool = False) -> Path:
    """Join the finished groups of ``runs/NAME`` into the stored run ``NAME/run.pt`` + ``meta.json``.

    A stored run is replaced only with ``replace=True`` (``--replace``), and only when it is whole
    (both files there and matching the manifest; otherwise the join is refused, saying what is
    wrong and how to recover); the replaced run is named and kept, with its checksums, in
    ``NAME/replaced/`` (a chapter can then show what the new run changed; an earlier replaced run
    there is dropped).  The manifest gets the checksums, and ``runs/NAME`` is removed.  The join
    holds its lock (a second join is refused naming this one) and every group's (no group trains
    while its files are joined); it is assembled in ``NAME.joining`` and swapped in last, so a
    crash or a full disk at any point leaves the stored run whole or for the next command to
    finish (see the comment above)."""
    with run.join_lock(), _group_locks(run):
        if _recover(run):
            return run.out
        check_manifest(run.root)
        parts = [_group_file(run, i) for i in range(run.n)]
        missing = [i for i, p in enumerate(parts) if p is None]
        if missing:
            raise SystemExit(f"{run.work}: groups {missing} of {run.name} are not finished; nothing joined")
        if any(p["steps"] != steps for p in parts):
            raise SystemExit(f"{run.work}: the groups were trained for {sorted({p['steps'] for p in parts})} steps, "
                             f"not {steps:,}")
        out, staging = run.out, artefacts.joining_folder(run.name, run.root)
        stored = (out / "run.pt").exists() or (out / "meta.json").exists()
        if stored and not replace:
            raise SystemExit(f"{_describe_stored(run)} is a stored run; the new run stays in {run.work}. "
                             "Pass --replace to replace the stored run with it.")
        if stored:
            wrong = _stored_state(run)
            if wrong is not None:
                raise SystemExit(
                    f"{out} is not a whole stored run ({wrong}), so it cannot be kept in {out / 'replaced'}; the "
                    f"new run stays in {run.work}. Restore the stored run (git checkout -- {out.name} "
                    f"MANIFEST.sha256 in {run.root}) and run again; or, to drop it, remove {out} and its lines "
                    "from the manifest first")
            print(f"[paper] replacing {_describe_stored(run)}; it is kept in {out / 'replaced'}", flush=True)
        try:
            _stage(run, staging, steps, parts, stored)
        except BaseException as exc:                 # nothing swapped: the stored run is untouched
            shutil.rmtree(staging, ignore_errors=True)
            if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
                raise SystemExit(f"{_no_space(exc)}. Nothing was joined: {out} is untouched and the new run stays "
                                 f"in {run.work}; free some space and run again") from None
            raise
        previous = artefacts.previous_folder(run.name, run.root)
        if out.exists():
            os.rename(out, previous)
        os.rename(staging, out)
        storage.fsync_folder(run.root)
        _finish_join(run)
    return run.out


def _stage(run: Run, staging: Path, steps: int, parts: list[dict], replacing: bool) -> None:
    """Assemble the joined run in ``staging`` (run.pt, meta.json, and with ``replacing`` the
    stored run's two files in replaced/), verify it, and write its record: the manifest lines
    it sets and those it drops."""
    staging.mkdir(parents=True)
    d_in, d_out = run.spec.dims(run.exp)
    cfg = run.config()
    task_info = {k: v for k, v in cfg.items() if k != "steps"}
    if cfg["task"] == "teacher":
        task_info["teachers"] = [w.clone() for w in lib.lsa_teachers(cfg["d"], cfg["teacher_seeds"],
                                                                      scale=cfg["teacher_scale"])]
    groups_data = [{k: v for k, v in p.items() if k != "steps"} for p in parts]
    storage.save(staging / "run.pt", {"name": run.name, "task": task_info, "groups": groups_data,
                                      "d_in": d_in, "d_out": d_out})
    storage.write_bytes(staging / "meta.json", (json.dumps(_meta(run, steps, parts), indent=1) + "\n").encode())
    if replacing:
        for f in ("run.pt", "meta.json"):
            _link_or_copy(run.out / f, staging / "replaced" / f)
    lines = {f"{run.name}/{f.relative_to(staging).as_posix()}": sha256_of(f)
             for f in sorted(staging.rglob("*")) if f.is_file()}
    _verify_staging(run, staging, lines, replacing)
    drop = [] if replacing else [f"{run.name}/replaced/run.pt", f"{run.name}/replaced/meta.json"]
    storage.write_bytes(staging / artefacts.JOURNAL,
                        json.dumps({"run": run.name, "steps": steps, "lines": lines, "drop": drop}, indent=1).encode())


def _verify_staging(run: Run, staging: Path, lines: dict, replacing: bool) -> None:
    """The assembled run reads back as the run it is (tensors only, both files naming it, its
    groups those meta.json records), and the run it keeps in replaced/ is, byte for byte, the
    stored run the manifest lists."""
    meta = json.loads((staging / "meta.json").read_text())
    data = storage.load_tensors(staging / "run.pt", "stored run")
    artefacts.same_run(run.name, meta, data, staging)
    if replacing:
        listed = artefacts.read_manifest(run.root)
        for f in ("run.pt", "meta.json"):
            if lines[f"{run.name}/replaced/{f}"] != listed.get(f"{run.name}/{f}"):
                raise SystemExit(f"{staging / 'replaced' / f} is not the stored {run.out / f} the manifest lists: "
                                 "the stored run changed during the join; nothing was replaced")


def job_limit(executor: str, threads: int | None, jobs: int | None, n: int) -> int:
    """How many groups run at once: ``jobs`` when given; else, on local processes, one process for
    every ``threads`` cores (one thread each: a process a core; more would fight over the cores),
    and on SLURM all ``n`` (the scheduler queues them)."""
    if jobs is not None:
        return jobs
    if executor == "local":
        return max(1, (os.cpu_count() or 1) // (threads or 1))
    return max(1, n)


def _submit(run: Run, todo: list[int], steps: int, device: str, log_every: int | None, executor: str,
            threads: int | None, jobs: int | None = None, poll_s: float = 2.0) -> None:
    """Every group in ``todo`` as one job of submitit (local processes or SLURM), at most
    :func:`job_limit` at a time (the next one starts when one finishes), waited for; a failed job
    is raised when it is seen, after which no new job starts."""
    try:
        import submitit
    except ImportError:
        raise SystemExit("--executor needs submitit: pip install submitit "
                         "(make setup installs it with the test extra)") from None
    logs = run.work / "jobs"
    ex = submitit.AutoExecutor(folder=logs, cluster=None if executor == "slurm" else "local")
    ex.update_parameters(timeout_min=7 * 24 * 60, cpus_per_task=threads or 1,
                         **({"gpus_per_node": 1} if device == "cuda" else {}))
    limit = job_limit(executor, threads, jobs, len(todo))
    print(f"[paper] {run.name}: {len(todo)} job(s) ({executor}), at most {limit} at a time; logs in {logs}",
          flush=True)
    pending, running = list(todo), []
    while pending or running:
        while pending and len(running) < limit:
            running.append(ex.submit(_job, run.name, pending.pop(0), steps, device, log_every, str(run.root), threads))
        done = [job for job in running if job.done()]
        for job in done:
            running.remove(job)
            job.result()                          # a failed group raises here
        if not done:
            time.sleep(poll_s)


def _job(name, i, steps, device, log_every, root, threads) -> str:
    """One group as a job (a process of its own: the run is looked up there again)."""
    if threads:
        torch.set_num_threads(threads)
    return str(run_group(Run.of(name, root), i, steps, device, False, log_every))


def _check_resumable(run: Run, todo: list[int], log_every: int | None) -> None:
    """Refuse, before any training, a group whose checkpoint cannot be read, belongs to another
    group (:func:`lib.book.artefacts.check_checkpoint`), or was written with another logging block
    than the one it would resume with (``--log-every``, else its declared value): the trainer
    resumes only with the settings a checkpoint was written with."""
    for i in todo:
        ckpt = run.work / f"group-{i}.checkpoint.pt"
        if not ckpt.is_file():
            continue
        try:
            state = artefacts.check_checkpoint(
                storage.load_tensors(ckpt, "checkpoint of train_online", advice=f"delete it to start group {i} "
                                     "afresh"), ckpt, run.binding(i))
        except ValueError as exc:
            raise SystemExit(str(exc)) from None
        written = state["config"].get("log_every")
        want = run.spec.log_every_of(i) if log_every is None else log_every
        if written != want:
            given = f"--log-every {log_every}" if log_every is not None else \
                f"the declared log_every {want} of {run.name} group {i} (book/experiments)"
            raise SystemExit(f"{ckpt} was written logging every {written} steps, and {given} differs: "
                             f"resume it with --log-every {written}, or delete it to start group {i} afresh")


def _check_free(run: Run, todo: list[int]) -> None:
    """Refuse, before any training, a group another process is training (its lock is held)."""
    for i in todo:
        if run.work.is_dir():
            with run.group_lock(i):
                pass


def run(name: str, steps: int | None = None, device: str = "cpu", progress: bool = False,
        log_every: int | None = None, results: Path | None = None, groups: list[int] | None = None,
        replace: bool = False, executor: str | None = None, threads: int | None = None,
        jobs: int | None = None) -> Path:
    """Train the groups of run ``name`` (all, or those listed) that are not finished, then join them
    into the stored run once every group is finished.  With ``executor`` each group is a job,
    ``jobs`` of them at a time (see :func:`job_limit`).  ``log_every``: every group's logging
    block (default: each group's declared value); a group's checkpoint must have been written with
    it (checked before any training).  A join that was interrupted is finished or undone first."""
    run_ = Run.of(name, results)
    steps = steps or run_.config()["steps"]
    todo = list(range(run_.n)) if groups is None else groups
    bad = [i for i in todo if not 0 <= i < run_.n]
    if bad:
        raise SystemExit(f"--group must be in 0..{run_.n - 1} for {name}, got {bad}")
    if artefacts.interrupted_join(name, run_.root) is not None:
        with run_.join_lock(), _group_locks(run_):
            if _recover(run_):
                return run_.out
    finished = [_finished(run_, i, steps) for i in range(run_.n)]     # every group file checked first
    todo = [i for i in todo if not finished[i]]
    _check_resumable(run_, todo, log_every)
    _check_free(run_, todo)
    if executor is not None:
        _submit(run_, todo, steps, device, log_every, executor, threads, jobs)
    else:
        for i in todo:
            run_group(run_, i, steps, device, progress, log_every)
    if all(_finished(run_, i, steps) for i in range(run_.n)):
        return assemble(run_, steps, replace)
    return run_.work


# ----------------------------------------------------------------------------- Part I chapters

def glued_values(nb_path: Path) -> dict:
    """Every myst-nb glue output of an executed notebook: name -> value (JSON text read back
    with json.loads; any other text kept as the string)."""
    nb = json.loads(Path(nb_path).read_text())
    out = {}
    for cell in nb.get("cells", []):
        for o in cell.get("outputs", []):
            sb = o.get("metadata", {}).get("scrapbook")
            if not sb or "name" not in sb:
                continue
            text = o.get("data", {}).get(sb.get("mime_prefix", "") + "text/plain")
            if text is None:
                continue
            text = "".join(text) if isinstance(text, list) else text
            try:
                out[sb["name"]] = json.loads(text)
            except ValueError:
                out[sb["name"]] = text
    return out


def forms() -> str:
    """Every form ``make paper`` takes, with the names each accepts (printed with every error
    about what to run)."""
    runs = ", ".join(experiments.RUNS)
    chapters = ", ".join(f"ch{e.chapter[:2]}" for e in experiments.stored_chapters())
    return ("make paper takes these forms:\n"
            "  make paper                                   list the runs and what is stored\n"
            f"  make paper EXP=NAME [ARGS=\"--steps N ...\"]   train and store a run; NAME: {runs}\n"
            f"  make paper EXP=chNN [ARGS=\"-p NAME VALUE\"]   execute a chapter at scale=\"paper\" and store "
            f"what it glued; chNN: {chapters}")


def _stored_chapter(number: str):
    known = {e.chapter[:2]: e for e in experiments.stored_chapters()}
    if number not in known:
        raise SystemExit(f"unknown chapter {number!r}; the chapters whose paper scale is stored: "
                         + ", ".join(f"ch{k}" for k in known) + "\n" + forms())
    return known[number]


def run_chapter(number: str, overrides: dict | None = None, results: Path | None = None) -> Path:
    """Execute the chapter at ``scale="paper"`` and store what it glued, with its provenance."""
    from tools import kernel, sources

    exp = _stored_chapter(number)
    src = sources.BOOK / f"{exp.chapter}.md"
    commit, code = git_commit(("lib", "tools", src.relative_to(ROOT).as_posix())), code_digest()
    source = hashlib.sha256(src.read_bytes()).hexdigest()    # the text this execution runs
    parameters = {"scale": "paper", **(overrides or {})}
    root = Path(results) if results is not None else RESULTS
    out = root / artefacts.chapter_folder(src.stem)
    # the executed notebook (not stored; a trial into another results folder keeps its own)
    executed = (sources.BUILD / "paper" if results is None else root) / f"{src.stem}.ipynb"
    t0 = time.time()
    kernel.run_papermill(src, executed, parameters)
    wall = time.time() - t0
    glued = glued_values(executed)
    if not glued:
        raise SystemExit(f"{src.name} glued nothing at scale='paper'")
    out.mkdir(parents=True, exist_ok=True)
    storage.write_bytes(out / "glued.json", (json.dumps(glued, sort_keys=True, allow_nan=True) + "\n").encode())
    meta = {
        "experiment": out.name, "chapter": src.name, "what": exp.what, "scale": "paper", "parameters": parameters,
        "command": _command(), "git_commit": commit, "code_sha256": code, "source_sha256": source,
        "device": device_name("cpu").rsplit(",", 1)[0] + ", OMP_NUM_THREADS=" + os.environ.get("OMP_NUM_THREADS",
                                                                                                "unset"),
        "versions": _versions(), "wall_seconds": wall, "finished_utc": _utc(),
    }
    storage.write_bytes(out / "meta.json", (json.dumps(meta, indent=1) + "\n").encode())
    update_manifest(root, [out / "glued.json", out / "meta.json"])
    return out


# ----------------------------------------------------------------------------- command line

def _progress_line(name: str, root: Path | None = None) -> str:
    """How far a run in progress is, group by group (``artefacts.load_finished_groups``, which
    refuses a file that is not its declared group): finished, training at a step, not started."""
    state = artefacts.load_finished_groups(name, root)
    started = {g["index"] for g in state["finished"]} | {t["index"] for t in state["training"]}
    waiting = [i for i in range(state["n_groups"]) if i not in started]
    parts = [f"{len(state['finished'])} of {state['n_groups']} groups finished"]
    if state["training"]:
        parts.append("training: " + ", ".join(f"group {t['index']} at {t['step']:,} of {t['steps']:,} steps"
                                              for t in state["training"]))
    if waiting:
        parts.append("not started: " + ", ".join(map(str, waiting)))
    return "; ".join(parts)


def _stored_meta(folder: Path) -> dict | None:
    """A stored run's meta.json for the listing (None: nothing stored); an unreadable one is
    shown as such, never a traceback."""
    meta = folder / "meta.json"
    if not meta.is_file():
        return None
    try:
        return json.loads(meta.read_text())
    except (OSError, ValueError) as exc:
        return {"unreadable": f"{meta} cannot be read ({exc})"}


def list_runs() -> None:
    for name, (exp, spec) in experiments.RUNS.items():
        run_ = Run(name, exp, spec, RESULTS)
        have = _stored_meta(run_.out)
        state = ("nothing stored yet" if have is None else have["unreadable"] if "unreadable" in have else
                 f"stored: {have['steps']:,} steps on {have['device']}, {have['wall_seconds'] / 60:.0f} min")
        if run_.work.is_dir():
            try:
                progress = _progress_line(name)
            except ValueError as exc:
                progress = str(exc)
            state += f"; in progress in {run_.work.relative_to(ROOT)}: " + progress
        interrupted = artefacts.interrupted_join(name, RESULTS)
        if interrupted:
            state += f"; {interrupted}"
        steps, paper = run_.config()["steps"], spec.paper_steps(exp)
        length = f"paper: {paper:,} steps" if steps == paper else f"{steps:,} steps (the paper's run: {paper:,})"
        print(f"{name:14s} {spec.what}\n{'':14s} {length}; {state}")
    for exp in experiments.stored_chapters():
        have = _stored_meta(RESULTS / artefacts.chapter_folder(exp.chapter))
        state = ("nothing stored yet" if have is None else have["unreadable"] if "unreadable" in have else
                 f"stored: {have['finished_utc']}, {have['wall_seconds'] / 60:.0f} min")
        print(f"{'ch' + exp.chapter[:2]:14s} {exp.what} (Chapter {exp.chapter[:2]} at scale=\"paper\"); {state}")
    print("\n" + forms())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.paper", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd")
    sub.add_parser("list", help="the declared runs and what is stored")
    r = sub.add_parser("run", help="train one declared run and store it")
    r.add_argument("name", help="one of: " + ", ".join(experiments.RUNS))
    r.add_argument("--steps", type=int, default=None, help="training steps (default: the paper's)")
    r.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    r.add_argument("--progress", action="store_true", help="a tqdm bar with loss and steps/s")
    r.add_argument("--log-every", type=int, default=None,
                   help="steps a logged loss block averages (default: the run's declared value)")
    r.add_argument("--threads", type=int, default=None, help="torch CPU threads (one a process: 1)")
    r.add_argument("--results", default=None, help="results folder (default: results/ of the repository)")
    r.add_argument("--group", type=int, action="append", default=None,
                   help="train only this group (repeatable); the run is stored once every group is finished")
    r.add_argument("--executor", choices=("local", "slurm"), default=None,
                   help="submit every unfinished group as a job through submitit")
    r.add_argument("--jobs", type=int, default=None,
                   help="with --executor: groups at a time (default: local, one a core per --threads; slurm, all)")
    r.add_argument("--replace", action="store_true", help="replace the stored run of this name")
    c = sub.add_parser("chapter", help="execute a Part I chapter at scale='paper' and store what it glued")
    c.add_argument("number", help="chapter: " + ", ".join(e.chapter[:2] for e in experiments.stored_chapters()))
    c.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                   help="override a parameter (read as papermill reads -p values)")
    c.add_argument("--results", default=None, help="results folder (default: results/ of the repository)")
    args = parser.parse_args(argv)
    if args.cmd == "chapter":
        number = args.number.removeprefix("ch").zfill(2)
        overrides = {k: parse_value(v) for k, v in args.p}
        print(f"[paper] wrote {run_chapter(number, overrides, args.results)}", flush=True)
        return 0
    if args.cmd == "run":
        if args.name not in experiments.RUNS:
            raise SystemExit(f"unknown run {args.name!r}; the declared runs: {', '.join(experiments.RUNS)}; "
                             "Part I chapters: " + ", ".join(f"ch{e.chapter[:2]}" for e in experiments.stored_chapters())
                             + "\n" + forms())
        if args.steps is not None and args.steps < 1:
            raise SystemExit("--steps must be a positive integer")
        if args.device.startswith("cuda") and not torch.cuda.is_available():
            raise SystemExit(f"--device {args.device}: no CUDA device is available here; use --device cpu")
        if args.log_every is not None and args.log_every < 1:
            raise SystemExit(f"--log-every must be a positive integer, got {args.log_every}")
        if args.threads is not None and args.threads < 1:
            raise SystemExit("--threads must be a positive integer")
        if args.jobs is not None and (args.jobs < 1 or args.executor is None):
            raise SystemExit("--jobs must be a positive integer, and is used with --executor local|slurm "
                             f"(without it the groups run one after another in this process), got {args.jobs}")
        if args.threads:
            torch.set_num_threads(args.threads)
        try:
            out = run(args.name, args.steps, args.device, args.progress, args.log_every, args.results, args.group,
                      args.replace, args.executor, args.threads, args.jobs)
        except LockHeld as exc:                     # another process: one line naming it
            raise SystemExit(str(exc)) from None
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
            raise SystemExit(_no_space(exc)) from None
        print(f"[paper] wrote {out}")
        return 0
    list_runs()
    return 0


if __name__ == "__main__":
    sys.exit(main())
