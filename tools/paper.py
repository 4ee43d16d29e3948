"""Paper-scale runs, written as checksummed artefacts under results/.

    python tools/paper.py list                      (make paper)
    python tools/paper.py run NAME [--steps N] [--device cuda] [--progress]
                                                     (make paper EXP=NAME ARGS="--steps N")
    python tools/paper.py chapter NN [-p NAME VALUE ...]
                                                     (make paper EXP=chNN)

``chapter NN`` executes chapter NN (Part I) with papermill at ``scale="paper"`` and stores what
it glued (``lib.artefacts.glue_json``) as results/chNN_NAME/glued.json, with meta.json (command,
git commit, device, versions, wall time, date, parameters) beside it and both checksums in
results/MANIFEST.sha256; the chapter reads them back at ``scale="book"`` with
``lib.artefacts.load_chapter_run``.  ``-p`` overrides other parameters (for a quick trial
into another folder with ``--results``).

Each experiment trains one or more stacks of networks with ``lib.train_online`` -- gated RNNs
(``lib.StackedGatedRNN``) or, for the architecture comparison, ``lib.RecurrentNet`` members
(LSTM, GRU, LRU variants) in a ``lib.ModuleStack`` -- with the settings of Zucchet et al.
(2023), App. B.1 / C.1, and writes

    results/NAME/run.pt      trained weights (one state dict per stack), loss histories, and
                             everything needed to re-evaluate a model without re-training it
                             (teacher weights, input distribution, task sizes)
    results/NAME/meta.json   configuration, seeds, command, git commit, device, library
                             versions, steps (run and published), wall time, date
    results/MANIFEST.sha256  SHA-256 of every artefact file (``lib.load_run`` verifies it)

Training resumes from results/NAME/checkpoint-*.pt if a run is interrupted (the checkpoints
are deleted when the experiment is complete).  ``--steps`` runs a complete cosine schedule
over fewer steps than the paper's; the artefact records both numbers.
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
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import lib  # noqa: E402
import lib.artefacts  # noqa: E402
from lib.artefacts import RESULTS, manifest_path, sha256_of  # noqa: E402

# one stack per group; widths within a gated group are zero-padded to the group's largest.
# A group's "kind" is "gated" (default) or a lib.RECURRENT_KINDS entry with "layers".
# Architecture comparison (Figs. 4, 5): every architecture at widths 16, 32, 64 (seed a) and a
# second seed at width 32; member j of every group sees the same data stream (data seed 1000 + j
# in every group), so architectures are compared on identical training data.
ARCHS = [dict(kind="gated", layers=1), dict(kind="lru", layers=1), dict(kind="lru", layers=2),
         dict(kind="lru_in_out", layers=1), dict(kind="lru_in_out", layers=2),
         dict(kind="lru_in_skip", layers=1), dict(kind="lstm", layers=1), dict(kind="lstm", layers=2),
         dict(kind="gru", layers=1), dict(kind="gru", layers=2)]
ARCH_WIDTHS, ARCH_SEEDS = [16, 32, 64, 32], [1, 2, 3, 4]
ARCH_GROUPS = [dict(**a, widths=ARCH_WIDTHS, seeds=[100 * i + s for s in ARCH_SEEDS], data_seeds=[1000 + s for s in ARCH_SEEDS])
               for i, a in enumerate(ARCHS)]
# weights kept along the way (log-spaced), for the structure-against-steps figure of Chapter 11
TEACHER_SNAPSHOTS = (1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 300_000, 400_000, 500_000,
                     600_000, 700_000)
EXPERIMENTS = {
    "teacher": dict(
        what="Table 1, Fig. 2: students of 100 neurons on three d = 4 attention teachers",
        task="teacher", d=4, T=32, batch=64, x_std=0.5, teacher_scale=1.0,
        teacher_seeds=[101, 102, 103], groups=[dict(widths=[100, 100, 100], seeds=[1, 2, 3])],
        paper_steps=781_250, lr=1e-3, lr_min=1e-6, weight_decay=1e-4, snapshots=TEACHER_SNAPSHOTS),
    "teacher_width": dict(
        what="Fig. 3A: students of 8-128 neurons on one d = 6 attention teacher",
        task="teacher", d=6, T=32, batch=64, x_std=0.5, teacher_scale=1.0, teacher_seeds=[201],
        groups=[dict(widths=[8, 16, 24, 32], seeds=[11, 12, 13, 14]),
                dict(widths=[48, 64], seeds=[15, 16]), dict(widths=[96], seeds=[17]),
                dict(widths=[128], seeds=[18])],
        paper_steps=781_250, lr=1e-3, lr_min=1e-6, weight_decay=1e-4, snapshots=(10_000, 50_000, 200_000, 400_000)),
    "icl": dict(
        what="Table 2, Sec. 4.2: gated RNNs of 80 neurons on in-context linear regression, 4 seeds",
        task="icl", T=12, d_x=3, d_y=3, batch=64, sigma_w2=1 / 3, sigma_x2=1.0,
        groups=[dict(widths=[80, 80, 80, 80], seeds=[21, 22, 23, 24])],
        paper_steps=300_000, lr=1e-3, lr_min=1e-6, weight_decay=1e-4),
    "icl_width": dict(
        what="Fig. 3B: gated RNNs of 2-80 neurons on in-context linear regression",
        task="icl", T=12, d_x=3, d_y=3, batch=64, sigma_w2=1 / 3, sigma_x2=1.0,
        groups=[dict(widths=[2, 4, 6, 8, 12, 16], seeds=[31, 32, 33, 34, 35, 36]),
                dict(widths=[24, 32, 48], seeds=[37, 38, 39]), dict(widths=[64], seeds=[40])],
        paper_steps=300_000, lr=1e-3, lr_min=1e-6, weight_decay=1e-4),
    "arch_teacher": dict(
        what="Figs. 4A, 5: gated RNN, LRU (Out, In+Out, In+Skip), LSTM, GRU at 1-2 layers on one d = 6 teacher",
        task="teacher", d=6, T=32, batch=64, x_std=0.5, teacher_scale=1.0, teacher_seeds=[201],
        groups=ARCH_GROUPS, paper_steps=781_250, lr=1e-3, lr_min=1e-6, weight_decay=1e-4),
    "arch_icl": dict(
        what="Figs. 4B, 5: gated RNN, LRU (Out, In+Out, In+Skip), LSTM, GRU at 1-2 layers on in-context regression",
        task="icl", T=12, d_x=3, d_y=3, batch=64, sigma_w2=1 / 3, sigma_x2=1.0,
        groups=ARCH_GROUPS, paper_steps=300_000, lr=1e-3, lr_min=1e-6, weight_decay=1e-4),
}


def make_model(group: dict, d_in: int, d_out: int, dtype, device):
    """The stack of one group: a StackedGatedRNN, or a ModuleStack of RecurrentNet members."""
    kind = group.get("kind", "gated")
    if kind == "gated":
        return lib.StackedGatedRNN(d_in, group["widths"], d_out, group["seeds"], dtype=dtype, device=device)
    return lib.ModuleStack([lib.RecurrentNet(kind, d_in, w, d_out, layers=group["layers"], seed=s, dtype=dtype)
                            for w, s in zip(group["widths"], group["seeds"])]).to(device)


def make_task(cfg: dict, group: dict, dtype, device):
    """The training task of one group (member k's teacher: teacher k, or the only teacher)."""
    K = len(group["widths"])
    if cfg["task"] == "teacher":
        W = lib.lsa_teachers(cfg["d"], cfg["teacher_seeds"], scale=cfg["teacher_scale"])
        if W[0].shape[0] == 1:
            W = tuple(w.expand(K, -1, -1) for w in W)
        elif W[0].shape[0] != K:
            raise ValueError("one teacher per member, or one teacher for all")
        return lib.TeacherTask(*W, T=cfg["T"], batch=cfg["batch"], x_std=cfg["x_std"], dtype=dtype,
                               device=device)
    return lib.ICLTask(K=K, T=cfg["T"], d_x=cfg["d_x"], d_y=cfg["d_y"], batch=cfg["batch"],
                       sigma_w2=cfg["sigma_w2"], sigma_x2=cfg["sigma_x2"], dtype=dtype, device=device)


def _git_commit(paths=("lib", "tools")) -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", *paths], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
        return sha + (f"+uncommitted changes in {' or '.join(str(p) for p in paths)}" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _code_digest() -> str:
    """SHA-256 over lib/*.py, lib/*.c and tools/paper.py (names and contents), as they are now."""
    h = hashlib.sha256()
    for f in sorted([*(ROOT / "lib").glob("*.py"), *(ROOT / "lib").glob("*.c"), ROOT / "tools" / "paper.py"]):
        h.update(f.relative_to(ROOT).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    sys.path.insert(0, str(ROOT / "tools"))
    import book  # noqa: PLC0415  (tools/book.py: the executor of the book)

    return f"CPU: {book.cpu_model()}, {torch.get_num_threads()} thread(s)"


def _utc() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _dims(cfg: dict) -> tuple[int, int]:
    if cfg["task"] == "teacher":
        return cfg["d"], cfg["d"]
    return cfg["d_x"] + cfg["d_y"], cfg["d_y"]


def work_folder(name: str, root: Path | None = None) -> Path:
    """Where a run in progress keeps its groups: one checkpoint per group while it trains (committed,
    so that a later session resumes it), one finished file per group when it is done."""
    return (Path(root) if root is not None else RESULTS) / "runs" / name


def run_group(name: str, i: int, steps: int, device: str, progress: bool, log_every: int,
              root: Path | None = None) -> Path:
    """Train group ``i`` of experiment ``name`` for ``steps`` steps (resuming from its checkpoint)
    and write it to ``runs/NAME/group-i.pt``; returns that file."""
    cfg = EXPERIMENTS[name]
    group = cfg["groups"][i]
    work = work_folder(name, root)
    work.mkdir(parents=True, exist_ok=True)
    done = work / f"group-{i}.pt"
    device = torch.device(device)
    dtype = torch.float32
    d_in, d_out = _dims(cfg)
    task = make_task(cfg, group, dtype, device)
    model = make_model(group, d_in, d_out, dtype, device)
    data_seeds = group.get("data_seeds", [1000 + s for s in group["seeds"]])
    segment = {"git_commit": _git_commit(), "code_sha256": _code_digest(), "device": _device_name(device),
               "command": "python tools/paper.py " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
               "started_utc": _utc()}
    snapshots = [s for s in cfg.get("snapshots", ()) if s < steps]
    hist = lib.train_online(model, task, steps=steps, data_seeds=data_seeds, lr=cfg["lr"], lr_min=cfg["lr_min"],
                            weight_decay=cfg["weight_decay"], log_every=log_every,
                            checkpoint=work / f"group-{i}.checkpoint.pt",
                            checkpoint_every=max(log_every, steps // 100), snapshots=snapshots,
                            segment=segment, progress=progress)
    hist["segments"][-1]["finished_utc"] = _utc()
    result = {"kind": group.get("kind", "gated"), "layers": group.get("layers", 1), "widths": group["widths"],
              "seeds": group["seeds"], "data_seeds": data_seeds, "steps": steps,
              "state": {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()},
              "history": {"step": hist["step"], "loss": hist["loss"]},
              "snapshots": hist["snapshots"], "segments": hist["segments"],
              "seconds": sum(seg.get("seconds", 0.0) for seg in hist["segments"]), "captured": hist["captured"]}
    tmp = done.with_name(done.name + ".tmp")
    torch.save(result, tmp)
    os.replace(tmp, done)
    (work / f"group-{i}.checkpoint.pt").unlink(missing_ok=True)
    print(f"[paper] {name}: group {i + 1}/{len(cfg['groups'])} {result['kind']} x{result['layers']}, widths "
          f"{group['widths']} done ({steps:,} steps, {result['seconds']:.0f} s); final block loss "
          f"{hist['loss'][-1].tolist()}", flush=True)
    return done


def assemble(name: str, steps: int, root: Path | None = None, replace: bool = False) -> Path:
    """Join the finished groups of ``runs/NAME`` into the artefact ``NAME/run.pt`` + ``meta.json``.

    A stored run is replaced only with ``replace=True`` (``--replace``), and the replaced run is
    named; the manifest gets both checksums, and ``runs/NAME`` is removed."""
    cfg = EXPERIMENTS[name]
    root = Path(root) if root is not None else RESULTS
    work = work_folder(name, root)
    parts = [torch.load(work / f"group-{i}.pt", map_location="cpu", weights_only=False)
             for i in range(len(cfg["groups"]))]
    if any(p["steps"] != steps for p in parts):
        raise SystemExit(f"{work}: the groups were trained for {sorted({p['steps'] for p in parts})} steps, "
                         f"not {steps:,}")
    out = root / name
    if (out / "run.pt").exists():
        old = json.loads((out / "meta.json").read_text()) if (out / "meta.json").is_file() else {}
        what = f"{out} ({old.get('steps', '?'):,} steps, finished {old.get('finished_utc', '?')})" \
            if isinstance(old.get("steps"), int) else str(out)
        if not replace:
            raise SystemExit(f"{what} is a stored run; the new run stays in {work}. "
                             "Pass --replace to replace the stored run with it.")
        print(f"[paper] replacing {what}", flush=True)
    out.mkdir(parents=True, exist_ok=True)
    d_in, d_out = _dims(cfg)
    task_info = {k: v for k, v in cfg.items() if k not in ("groups", "what", "paper_steps", "snapshots")}
    if cfg["task"] == "teacher":
        task_info["teachers"] = [w.clone() for w in lib.lsa_teachers(cfg["d"], cfg["teacher_seeds"],
                                                                      scale=cfg["teacher_scale"])]
    groups = [{k: v for k, v in p.items() if k != "steps"} for p in parts]
    tmp = out / "run.pt.tmp"
    torch.save({"name": name, "task": task_info, "groups": groups, "d_in": d_in, "d_out": d_out}, tmp)
    os.replace(tmp, out / "run.pt")
    segments = [seg for p in parts for seg in p["segments"]]
    meta = {
        "experiment": name, "what": cfg["what"], "config": {k: v for k, v in cfg.items() if k != "what"},
        "steps": steps, "paper_steps": cfg["paper_steps"],
        "schedule": f"cosine from {cfg['lr']:g} to {cfg['lr_min']:g} over {steps:,} steps"
                    + (" (the paper's)" if steps == cfg["paper_steps"] else f" (the paper's: {cfg['paper_steps']:,})"),
        "command": segments[0]["command"],
        "git_commit": segments[0]["git_commit"], "code_sha256": segments[0]["code_sha256"],
        "device": segments[0]["device"],
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "numpy": __import__("numpy").__version__},
        "wall_seconds": sum(p["seconds"] for p in parts), "group_seconds": [p["seconds"] for p in parts],
        "group_segments": [p["segments"] for p in parts],
        "finished_utc": max(seg.get("finished_utc", "") for seg in segments),
        "dtype": "float32",
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    _update_manifest(root, [out / "run.pt", out / "meta.json"])
    shutil.rmtree(work)
    return out


def run(name: str, steps: int | None, device: str, progress: bool, log_every: int,
        results: Path | None = None, groups: list[int] | None = None, replace: bool = False) -> Path:
    """Train the groups of ``name`` (all, or those listed) that are not finished, then join them
    into the stored run once every group is finished."""
    if name not in EXPERIMENTS:
        raise SystemExit(f"unknown experiment {name!r}; choose one of {', '.join(EXPERIMENTS)}")
    cfg = EXPERIMENTS[name]
    steps = steps or cfg["paper_steps"]
    n = len(cfg["groups"])
    todo = list(range(n)) if groups is None else groups
    bad = [i for i in todo if not 0 <= i < n]
    if bad:
        raise SystemExit(f"--group must be in 0..{n - 1} for {name}, got {bad}")
    work = work_folder(name, results)
    for i in todo:
        done = work / f"group-{i}.pt"
        if done.is_file() and torch.load(done, map_location="cpu", weights_only=False)["steps"] == steps:
            print(f"[paper] {name}: group {i} already finished in {done}", flush=True)
            continue
        run_group(name, i, steps, device, progress, log_every, results)
    if all((work / f"group-{i}.pt").is_file() for i in range(n)):
        return assemble(name, steps, results, replace)
    return work


def _update_manifest(root: Path, files) -> None:
    path = manifest_path(root)
    lines = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.strip():
                digest, rel = line.split(None, 1)
                lines[rel.strip()] = digest
    for f in files:
        lines[f.relative_to(root).as_posix()] = sha256_of(f)
    path.write_text("".join(f"{d}  {r}\n" for r, d in sorted(lines.items())))


CHAPTERS = ("04", "05", "06")    # Part I chapters whose paper scale is stored


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


def run_chapter(number: str, overrides: dict | None = None, results: Path | None = None) -> Path:
    sys.path.insert(0, str(ROOT / "tools"))
    import book  # noqa: PLC0415  (tools/book.py: the executor of the book)

    srcs = sorted(book.BOOK.glob(f"{number}_*.md"))
    if number not in CHAPTERS or len(srcs) != 1:
        raise SystemExit(f"unknown chapter {number!r}; choose one of {', '.join(CHAPTERS)}")
    src = srcs[0]
    commit, code = _git_commit(("lib", "tools", src.relative_to(ROOT).as_posix())), _code_digest()
    source = hashlib.sha256(src.read_bytes()).hexdigest()    # the text this execution runs
    parameters = {"scale": "paper", **(overrides or {})}
    root = Path(results) if results is not None else RESULTS
    out = root / lib.artefacts.chapter_folder(src.stem)
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
        "experiment": out.name, "chapter": src.name,
        "what": f"Chapter {number} ({src.stem}) executed at scale=\"paper\": what it glued",
        "scale": "paper", "parameters": parameters,
        "command": "python tools/paper.py " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
        "git_commit": commit, "code_sha256": code,
        "source_sha256": source,
        "device": _device_name(torch.device("cpu")).rsplit(",", 1)[0] + ", OMP_NUM_THREADS="
                  + __import__("os").environ.get("OMP_NUM_THREADS", "unset"),
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "numpy": __import__("numpy").__version__},
        "wall_seconds": wall,
        "finished_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    _update_manifest(root, [out / "glued.json", out / "meta.json"])
    return out


def _value(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd")
    sub.add_parser("list", help="the experiments and their artefacts")
    r = sub.add_parser("run", help="run one experiment and write its artefact")
    r.add_argument("name")
    r.add_argument("--steps", type=int, default=None, help="training steps (default: the paper's)")
    r.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    r.add_argument("--progress", action="store_true", help="a tqdm bar with loss and steps/s")
    r.add_argument("--log-every", type=int, default=1000)
    r.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    r.add_argument("--results", default=None, help="results folder (default: results/ of the repository)")
    r.add_argument("--group", type=int, action="append", default=None,
                   help="train only this group (repeatable); the run is stored once every group is finished")
    r.add_argument("--replace", action="store_true", help="replace the stored run of this experiment")
    c = sub.add_parser("chapter", help="execute a Part I chapter at scale='paper' and store what it glued")
    c.add_argument("number", help="chapter number: " + ", ".join(CHAPTERS))
    c.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                   help="override a parameter (VALUE as JSON, else a string)")
    c.add_argument("--results", default=None, help="results folder (default: results/ of the repository)")
    args = parser.parse_args(argv)
    if args.cmd == "chapter":
        number = args.number.removeprefix("ch").zfill(2)
        overrides = {k: _value(v) for k, v in args.p}
        print(f"[paper] wrote {run_chapter(number, overrides, args.results)}", flush=True)
        return 0
    if args.cmd == "run":
        if args.steps is not None and args.steps < 1:
            raise SystemExit("--steps must be a positive integer")
        if args.threads:
            torch.set_num_threads(args.threads)
        print(f"[paper] wrote {run(args.name, args.steps, args.device, args.progress, args.log_every, args.results, args.group, args.replace)}")
        return 0
    for name, cfg in EXPERIMENTS.items():
        meta = RESULTS / name / "meta.json"
        have = json.loads(meta.read_text()) if meta.is_file() else None
        state = (f"artefact: {have['steps']:,} steps on {have['device']}, {have['wall_seconds'] / 60:.0f} min"
                 if have else "no artefact yet")
        print(f"{name:14s} {cfg['what']}\n{'':14s} paper: {cfg['paper_steps']:,} steps; {state}")
    for number in CHAPTERS:
        src = sorted((ROOT / "book").glob(f"{number}_*.md"))
        meta = RESULTS / lib.artefacts.chapter_folder(src[0].stem) / "meta.json" if src else None
        have = json.loads(meta.read_text()) if meta is not None and meta.is_file() else None
        state = (f"artefact: {have['finished_utc']}, {have['wall_seconds'] / 60:.0f} min" if have else "no artefact yet")
        print(f"{'ch' + number:14s} Chapter {number} at scale=\"paper\"; {state}")
    print("\nrun one with:  make paper EXP=NAME [ARGS=\"--steps N --progress\"]  (chapters: EXP=chNN)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
