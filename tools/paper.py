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
import hashlib
import json
import os
import platform
import shlex
import shutil
import sys
import time
from pathlib import Path

import torch

import lib
from lib import architectures
from lib.book import artefacts, experiments
from lib.book.artefacts import RESULTS, work_folder
from tools.common import ROOT, code_digest, device_name, git_commit, parse_value, update_manifest

__all__ = ["run", "run_group", "assemble", "run_chapter", "glued_values", "work_folder", "main"]


def _utc() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _command() -> str:
    return "python -m tools.paper " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def _versions() -> dict:
    import numpy

    return {"python": platform.python_version(), "torch": torch.__version__, "numpy": numpy.__version__}


def config(name: str) -> dict:
    """The settings of run ``name``: its chapter's paper column under the run's keys, and the task."""
    exp, spec = experiments.run_of(name)
    return {"task": spec.task, **spec.config(exp)}


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


def run_group(name: str, i: int, steps: int, device: str, progress: bool = False, log_every: int | None = None,
              root: Path | None = None) -> Path:
    """Train group ``i`` of run ``name`` for ``steps`` steps (resuming from its checkpoint) and write
    it to ``runs/NAME/group-i.pt``; returns that file.  Every call is one segment of the run,
    recorded with its commit, code digest, device and steps.  ``log_every``: the steps a logged
    loss block averages (default: the group's declared value, ``OnlineRun.log_every_of``)."""
    exp, spec = experiments.run_of(name)
    cfg = config(name)
    group = spec.groups[i]
    log_every = spec.log_every_of(i) if log_every is None else log_every
    work = work_folder(name, root)
    work.mkdir(parents=True, exist_ok=True)
    done = work / f"group-{i}.pt"
    device = torch.device(device)
    d_in, d_out = spec.dims(exp)
    task = make_task(cfg, group, torch.float32, device)
    model = architectures.build(group.kind, group.layers, d_in, group.widths, d_out, group.seeds,
                                init=group.init, dtype=torch.float32, device=device)
    binding = {"run": name, "group": i, "kind": group.kind, "layers": group.layers, "widths": list(group.widths),
               "seeds": list(group.seeds), "data_seeds": group.member_data_seeds, "pool": group.pool,
               "init": group.init}
    segment = {"git_commit": git_commit(), "code_sha256": code_digest(), "device": device_name(device),
               "command": _command(), "started_utc": _utc()}
    hist = lib.train_online(model, task, steps=steps, data_seeds=group.member_data_seeds, lr=cfg["lr"],
                            lr_min=cfg["lr_min"], weight_decay=cfg["weight_decay"], log_every=log_every,
                            checkpoint=work / f"group-{i}.checkpoint.pt",
                            checkpoint_every=max(log_every, steps // 100),
                            snapshots=[s for s in spec.snapshots if s < steps], segment=segment, progress=progress,
                            binding=binding)
    hist["segments"][-1]["finished_utc"] = _utc()
    result = {"kind": group.kind, "layers": group.layers, "widths": list(group.widths), "seeds": list(group.seeds),
              "data_seeds": group.member_data_seeds, "pool": group.pool, "init": group.init, "steps": steps,
              "state": {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()},
              "history": {"step": hist["step"], "loss": hist["loss"]},
              "snapshots": hist["snapshots"], "segments": hist["segments"],
              "seconds": sum(seg.get("seconds", 0.0) for seg in hist["segments"]), "captured": hist["captured"]}
    tmp = done.with_name(done.name + ".tmp")
    torch.save(result, tmp)
    os.replace(tmp, done)
    (work / f"group-{i}.checkpoint.pt").unlink(missing_ok=True)
    print(f"[paper] {name}: group {i + 1}/{len(spec.groups)} {architectures.label(group.kind, group.layers)}, "
          f"widths {list(group.widths)} done ({steps:,} steps, {result['seconds']:.0f} s); final block loss "
          f"{hist['loss'][-1].tolist()}", flush=True)
    return done


def _finished(work: Path, i: int, steps: int) -> bool:
    f = work / f"group-{i}.pt"
    return f.is_file() and torch.load(f, map_location="cpu", weights_only=True)["steps"] == steps


def assemble(name: str, steps: int, root: Path | None = None, replace: bool = False) -> Path:
    """Join the finished groups of ``runs/NAME`` into the stored run ``NAME/run.pt`` + ``meta.json``.

    A stored run is replaced only with ``replace=True`` (``--replace``); the replaced run is
    named and kept, with its checksums, in ``NAME/replaced/`` (a chapter can then show what the
    new run changed; an earlier replaced run there is overwritten).  The manifest gets the
    checksums, and ``runs/NAME`` is removed."""
    exp, spec = experiments.run_of(name)
    cfg = config(name)
    root = Path(root) if root is not None else RESULTS
    work = work_folder(name, root)
    parts = [torch.load(work / f"group-{i}.pt", map_location="cpu", weights_only=True)
             for i in range(len(spec.groups))]
    if any(p["steps"] != steps for p in parts):
        raise SystemExit(f"{work}: the groups were trained for {sorted({p['steps'] for p in parts})} steps, "
                         f"not {steps:,}")
    out = root / name
    if (out / "run.pt").exists():
        old = json.loads((out / "meta.json").read_text()) if (out / "meta.json").is_file() else {}
        what = f"{out} ({old['steps']:,} steps, finished {old.get('finished_utc', '?')})" \
            if isinstance(old.get("steps"), int) else str(out)
        if not replace:
            raise SystemExit(f"{what} is a stored run; the new run stays in {work}. "
                             "Pass --replace to replace the stored run with it.")
        print(f"[paper] replacing {what}; it is kept in {out / 'replaced'}", flush=True)
    out.mkdir(parents=True, exist_ok=True)
    d_in, d_out = spec.dims(exp)
    task_info = {k: v for k, v in cfg.items() if k != "steps"}
    if cfg["task"] == "teacher":
        task_info["teachers"] = [w.clone() for w in lib.lsa_teachers(cfg["d"], cfg["teacher_seeds"],
                                                                      scale=cfg["teacher_scale"])]
    groups = [{k: v for k, v in p.items() if k != "steps"} for p in parts]
    tmp = out / "run.pt.tmp"
    torch.save({"name": name, "task": task_info, "groups": groups, "d_in": d_in, "d_out": d_out}, tmp)
    if (out / "run.pt").exists():                                     # replace=True: keep the replaced run
        kept = out / "replaced"
        kept.mkdir(exist_ok=True)
        for f in ("run.pt", "meta.json"):
            if (out / f).is_file():
                os.replace(out / f, kept / f)
        update_manifest(root, [f for f in (kept / "run.pt", kept / "meta.json") if f.is_file()])
    os.replace(tmp, out / "run.pt")
    segments = [seg for p in parts for seg in p["segments"]]
    paper_steps = spec.paper_steps(exp)
    meta = {
        "experiment": name, "chapter": exp.chapter, "what": spec.what,
        "config": {**cfg, "groups": [{"kind": g.kind, "layers": g.layers, "widths": list(g.widths),
                                      "seeds": list(g.seeds), "data_seeds": g.member_data_seeds, "pool": g.pool,
                                      "init": g.init}
                                     for g in spec.groups], "snapshots": list(spec.snapshots)},
        "steps": steps, "paper_steps": paper_steps,
        "schedule": f"cosine from {cfg['lr']:g} to {cfg['lr_min']:g} over {steps:,} steps"
                    + (" (the paper's)" if steps == paper_steps else f" (the paper's: over {paper_steps:,})"),
        "command": segments[0]["command"], "git_commit": segments[0]["git_commit"],
        "code_sha256": segments[0]["code_sha256"], "device": segments[0]["device"], "versions": _versions(),
        "wall_seconds": sum(p["seconds"] for p in parts), "group_seconds": [p["seconds"] for p in parts],
        "group_segments": [p["segments"] for p in parts],
        "finished_utc": max(seg.get("finished_utc", "") for seg in segments), "dtype": "float32",
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    update_manifest(root, [out / "run.pt", out / "meta.json"])
    shutil.rmtree(work)
    return out


def job_limit(executor: str, threads: int | None, jobs: int | None, n: int) -> int:
    """How many groups run at once: ``jobs`` when given; else, on local processes, one process for
    every ``threads`` cores (one thread each: a process a core; more would fight over the cores),
    and on SLURM all ``n`` (the scheduler queues them)."""
    if jobs is not None:
        return jobs
    if executor == "local":
        return max(1, (os.cpu_count() or 1) // (threads or 1))
    return max(1, n)


def _submit(name: str, todo: list[int], steps: int, device: str, log_every: int | None, root, executor: str,
            threads: int | None, jobs: int | None = None, poll_s: float = 2.0) -> None:
    """Every group in ``todo`` as one job of submitit (local processes or SLURM), at most
    :func:`job_limit` at a time (the next one starts when one finishes), waited for; a failed job
    is raised when it is seen, after which no new job starts."""
    try:
        import submitit
    except ImportError:
        raise SystemExit("--executor needs submitit: pip install submitit "
                         "(make setup installs it with the test extra)") from None
    logs = work_folder(name, root) / "jobs"
    ex = submitit.AutoExecutor(folder=logs, cluster=None if executor == "slurm" else "local")
    ex.update_parameters(timeout_min=7 * 24 * 60, cpus_per_task=threads or 1,
                         **({"gpus_per_node": 1} if device == "cuda" else {}))
    limit = job_limit(executor, threads, jobs, len(todo))
    print(f"[paper] {name}: {len(todo)} job(s) ({executor}), at most {limit} at a time; logs in {logs}", flush=True)
    pending, running = list(todo), []
    while pending or running:
        while pending and len(running) < limit:
            running.append(ex.submit(_job, name, pending.pop(0), steps, device, log_every,
                                     None if root is None else str(root), threads))
        done = [job for job in running if job.done()]
        for job in done:
            running.remove(job)
            job.result()                          # a failed group raises here
        if not done:
            time.sleep(poll_s)


def _job(name, i, steps, device, log_every, root, threads) -> str:
    if threads:
        torch.set_num_threads(threads)
    return str(run_group(name, i, steps, device, False, log_every, None if root is None else Path(root)))


def _check_resumable(name: str, work: Path, todo: list[int], log_every: int | None) -> None:
    """Refuse, before any training, a group whose checkpoint was written with another logging
    block than the one it would resume with (``--log-every``, else its declared value): the
    trainer resumes only with the settings a checkpoint was written with."""
    spec = experiments.run_of(name)[1]
    for i in todo:
        ckpt = work / f"group-{i}.checkpoint.pt"
        if not ckpt.is_file():
            continue
        try:
            written = torch.load(ckpt, map_location="cpu", weights_only=True)["config"]["log_every"]
        except Exception:  # noqa: BLE001 - an unreadable checkpoint is named by the trainer itself
            continue
        want = spec.log_every_of(i) if log_every is None else log_every
        if written != want:
            given = f"--log-every {log_every}" if log_every is not None else \
                f"the declared log_every {want} of {name} group {i} (book/experiments)"
            raise SystemExit(f"{ckpt} was written logging every {written} steps, and {given} differs: "
                             f"resume it with --log-every {written}, or delete it to start group {i} afresh")


def run(name: str, steps: int | None = None, device: str = "cpu", progress: bool = False,
        log_every: int | None = None, results: Path | None = None, groups: list[int] | None = None,
        replace: bool = False, executor: str | None = None, threads: int | None = None,
        jobs: int | None = None) -> Path:
    """Train the groups of run ``name`` (all, or those listed) that are not finished, then join them
    into the stored run once every group is finished.  With ``executor`` each group is a job,
    ``jobs`` of them at a time (see :func:`job_limit`).  ``log_every``: every group's logging
    block (default: each group's declared value); a group's checkpoint must have been written with
    it (checked before any training)."""
    exp, spec = experiments.run_of(name)
    steps = steps or config(name)["steps"]
    n = len(spec.groups)
    todo = list(range(n)) if groups is None else groups
    bad = [i for i in todo if not 0 <= i < n]
    if bad:
        raise SystemExit(f"--group must be in 0..{n - 1} for {name}, got {bad}")
    work = work_folder(name, results)
    todo = [i for i in todo if not _finished(work, i, steps)]
    _check_resumable(name, work, todo, log_every)
    if executor is not None:
        _submit(name, todo, steps, device, log_every, results, executor, threads, jobs)
    else:
        for i in todo:
            run_group(name, i, steps, device, progress, log_every, results)
    if all(_finished(work, i, steps) for i in range(n)):
        return assemble(name, steps, results, replace)
    return work


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
    from tools import book

    exp = _stored_chapter(number)
    src = book.BOOK / f"{exp.chapter}.md"
    commit, code = git_commit(("lib", "tools", src.relative_to(ROOT).as_posix())), code_digest()
    source = hashlib.sha256(src.read_bytes()).hexdigest()    # the text this execution runs
    parameters = {"scale": "paper", **(overrides or {})}
    root = Path(results) if results is not None else RESULTS
    out = root / artefacts.chapter_folder(src.stem)
    # the executed notebook (not stored; a trial into another results folder keeps its own)
    executed = (book.BUILD / "paper" if results is None else root) / f"{src.stem}.ipynb"
    t0 = time.time()
    book.run_papermill(src, executed, parameters)
    wall = time.time() - t0
    glued = glued_values(executed)
    if not glued:
        raise SystemExit(f"{src.name} glued nothing at scale='paper'")
    out.mkdir(parents=True, exist_ok=True)
    (out / "glued.json").write_text(json.dumps(glued, sort_keys=True, allow_nan=True) + "\n")
    meta = {
        "experiment": out.name, "chapter": src.name, "what": exp.what, "scale": "paper", "parameters": parameters,
        "command": _command(), "git_commit": commit, "code_sha256": code, "source_sha256": source,
        "device": device_name("cpu").rsplit(",", 1)[0] + ", OMP_NUM_THREADS=" + os.environ.get("OMP_NUM_THREADS",
                                                                                                "unset"),
        "versions": _versions(), "wall_seconds": wall, "finished_utc": _utc(),
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
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


def list_runs() -> None:
    for name, (exp, spec) in experiments.RUNS.items():
        meta = RESULTS / name / "meta.json"
        have = json.loads(meta.read_text()) if meta.is_file() else None
        state = (f"stored: {have['steps']:,} steps on {have['device']}, {have['wall_seconds'] / 60:.0f} min"
                 if have else "nothing stored yet")
        work = work_folder(name)
        if work.is_dir():
            state += f"; in progress in {work.relative_to(ROOT)}: " + _progress_line(name)
        steps, paper = config(name)["steps"], spec.paper_steps(exp)
        length = f"paper: {paper:,} steps" if steps == paper else f"{steps:,} steps (the paper's run: {paper:,})"
        print(f"{name:14s} {spec.what}\n{'':14s} {length}; {state}")
    for exp in experiments.stored_chapters():
        meta = RESULTS / artefacts.chapter_folder(exp.chapter) / "meta.json"
        have = json.loads(meta.read_text()) if meta.is_file() else None
        state = f"stored: {have['finished_utc']}, {have['wall_seconds'] / 60:.0f} min" if have else "nothing stored yet"
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
        out = run(args.name, args.steps, args.device, args.progress, args.log_every, args.results, args.group,
                  args.replace, args.executor, args.threads, args.jobs)
        print(f"[paper] wrote {out}")
        return 0
    list_runs()
    return 0


if __name__ == "__main__":
    sys.exit(main())
