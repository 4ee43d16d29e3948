"""Benchmark: Part III's training step on a CUDA device -- the captured step (data draw,
forward, backward, AdamW and schedule in one CUDA graph, replayed; ``lib.train_online``'s
default on CUDA) against the same trainer's eager step on the same device (``capture=False``,
the reference), for every group of the stored run ``arch_teacher`` (Figs. 4A/5: four networks of
widths 16, 32, 64, 32 a group, teacher task d = 6, T = 32, batch 64, float32) and the gated RNN
of Table 1 (|h| = 100, K = 3 students).  Times are wall clock per step of the group (the mean
over a block of steps after the warm-up, the device synchronised at both ends), both sides in
one run.  Each row also gives the projected wall time of the paper's 781,250 steps for the group
alone on the device.  Informational rows (no target); no rows where no CUDA device is present.

max_rel_err: after six steps on one fixed float64 batch, the captured run's weights against the
eager run's (the same arithmetic: rounding only).

    python -m benchmarks.bench_cuda_step [--quick] [--concurrent]

``--concurrent`` also trains every group at once, one process a group on the one device, and
prints the steps per second each reaches and the wall time of the paper's steps at that rate.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import torch

import lib
from lib import architectures
from lib.book import experiments
from tools import paper

F32, F64 = torch.float32, torch.float64
_EXP, _SPEC = experiments.run_of("arch_teacher")
PAPER_STEPS = _SPEC.paper_steps(_EXP)        # the registry's: Figs. 4A/5 at the paper's steps


def _group(name: str, i: int, dtype, device="cuda"):
    run = paper.Run.of(name)
    cfg = run.config()
    group = run.spec.groups[i]
    d_in, d_out = run.spec.dims(run.exp)
    model = architectures.build(group.kind, group.layers, d_in, group.widths, d_out, group.seeds,
                                dtype=dtype, device=device)
    task = paper.make_task(cfg, group, dtype, device)
    return model, task, group, cfg


def _per_step(name: str, i: int, steps: int, capture) -> float:
    """Wall seconds a step of group ``i`` (the trainer's own loop after capture / warm-up)."""
    model, task, group, cfg = _group(name, i, F32)
    lib.train_online(model, task, steps=20, data_seeds=group.member_data_seeds, log_every=20, capture=capture)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = lib.train_online(model, task, steps=steps, data_seeds=group.member_data_seeds, lr=cfg["lr"],
                           lr_min=cfg["lr_min"], weight_decay=cfg["weight_decay"], log_every=steps, capture=capture)
    torch.cuda.synchronize()
    assert out["captured"] == (capture == "auto")
    return out["seconds"] / steps if capture == "auto" else (time.perf_counter() - t0) / steps


def _agreement(name: str, i: int) -> float:
    weights = []
    for capture in ("auto", False):
        model, task, group, cfg = _group(name, i, F64)
        lib.train_online(model, lib.tasks.FixedBatch(task), steps=6, data_seeds=group.member_data_seeds, log_every=3,
                         capture=capture)
        weights.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    return float((weights[0] - weights[1]).norm() / weights[1].norm())


def run(quick: bool = False) -> list[dict]:
    if not torch.cuda.is_available():
        return []
    rows = []
    steps = 300 if quick else 2000
    for name in ("arch_teacher", "teacher"):
        groups = experiments.run_of(name)[1].groups
        for i in range(len(groups) if name == "arch_teacher" else 1):
            t_fast = _per_step(name, i, steps, "auto")
            t_ref = _per_step(name, i, max(steps // 10, 50), False)
            g = groups[i]
            label = architectures.label(g.kind, g.layers) if name == "arch_teacher" else f"gated, |h| = {g.widths[0]}"
            rows.append({"name": f"{name} {label}, K = {len(g.widths)} [cuda]", "reference_s": t_ref,
                         "fast_s": t_fast, "ratio": t_ref / t_fast, "max_rel_err": _agreement(name, i),
                         "target_ratio": None,
                         "paper_hours": t_fast * PAPER_STEPS / 3600})
    return rows


def _one(name: str, i: int, steps: int) -> None:
    """Child of --concurrent: train group i for ``steps`` captured steps, print its rate."""
    rate = 1.0 / _per_step(name, i, steps, "auto")
    print(json.dumps({"group": i, "steps_per_s": rate}), flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--concurrent", action="store_true")
    ap.add_argument("--json", default=None, metavar="FILE",
                    help="also write the rows, the device, versions, commit and code digest to FILE")
    ap.add_argument("--child", nargs=3, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _one(args.child[0], int(args.child[1]), int(args.child[2]))
        return 0
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to measure")
        return 0
    print(torch.cuda.get_device_name(), "torch", torch.__version__, flush=True)
    rows = run(args.quick)
    if args.json:
        import platform
        from pathlib import Path
        from tools.common import code_digest, git_commit
        Path(args.json).write_text(json.dumps({
            "device": torch.cuda.get_device_name(), "command": "python -m benchmarks.bench_cuda_step "
            + " ".join(argv if argv is not None else sys.argv[1:]), "quick": args.quick,
            "versions": {"python": platform.python_version(), "torch": torch.__version__},
            "git_commit": git_commit(("lib", "tools", "benchmarks")), "code_sha256": code_digest(),
            "finished_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "paper_steps": PAPER_STEPS,
            "rows": rows}, indent=1) + "\n")
        from lib.book.artefacts import RESULTS
        from tools.common import update_manifest
        if Path(args.json).resolve().is_relative_to(RESULTS.resolve()):    # a stored measurement: checksummed
            update_manifest(RESULTS.resolve(), [Path(args.json).resolve()])
    for r in rows:
        print(f"{r['name']:<48} eager {r['reference_s'] * 1e3:8.2f} ms  captured {r['fast_s'] * 1e3:7.2f} ms  "
              f"ratio {r['ratio']:6.1f}  781,250 steps alone: {r['paper_hours']:5.2f} h  rel err {r['max_rel_err']:.1e}",
              flush=True)
    if args.concurrent:
        n = len(experiments.run_of("arch_teacher")[1].groups)
        steps = 1000 if args.quick else 5000
        t0 = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, "-m", "benchmarks.bench_cuda_step", "--child", "arch_teacher",
                                   str(i), str(steps)], stdout=subprocess.PIPE, text=True) for i in range(n)]
        rates = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
        wall = time.perf_counter() - t0
        for r in rates:
            print(f"concurrent: group {r['group']}: {r['steps_per_s']:.0f} steps/s -> 781,250 steps in "
                  f"{PAPER_STEPS / r['steps_per_s'] / 3600:.2f} h", flush=True)
        print(f"concurrent: {n} processes, {steps} steps each, {wall:.0f} s wall", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
