"""Benchmark: what each C kernel adds over the same algorithm written in torch.

A kernel costs a C compiler at run time, a loader guarded against damaged builds
(``lib/kernels.py``) and code fewer readers can check; it earns that only if the path it serves
is clearly faster with it than with the same algorithm in torch.  Target: **1.5x** on every
row (decided before measuring: below it the path's time falls by less than a third).  A
kernel whose rows miss the target on both machines the book's runs were measured on is retired
(its torch form takes its place, results unchanged to rounding).  Each row times one path twice,
the two sides differing in the kernel's passes alone (``--quick``, the Performance appendix's run:
the Krylov pair at one thread and the one-layer groups only):

* ``krylov.c`` -- the two Krylov sequences of the Markov engine (``lib.krylov.krylov_rows``,
  n = 1000, T = 20, float64): the fused pass reading W once a step against the same sequences
  with torch products (``kernel=False``), at one and at two threads;
* ``gated.c`` -- the gated RNN's hand-written step (``lib.gated_step.step``) with the kernel's
  passes against the same passes written in torch (``benchmarks/kernels_torch.GatedPasses``):
  the teacher setting of Chapter 11 (|h| = 100, d = 4, batch 64, T = 32, one student) and the
  in-context setting of Chapter 12 (|h| = 80, 12 examples and the query, the last step read),
  float32 as trained, one thread;
* ``recurrent.c`` -- the LRU, LSTM and GRU networks' hand-written step
  (``lib.recurrent_step.net_step``) with the kernel's passes against ``RecurrentPasses``: one
  group of ``arch_teacher`` (Fig. 4A: four networks of widths 16, 32, 64, 32 on the d = 6
  teacher, T = 32, batch 64), every architecture and depth it trains, float32, one thread.

Times are the calling thread's CPU time at one thread (``time.thread_time``), wall time at two,
the best call of alternating rounds (``run.alternating_ratio``), both sides in one process.
max_rel_err: the two sides' losses and gradients in float64 on the row's setting (the Krylov
rows: the sequences).

    python -m benchmarks.bench_kernels [--quick]
"""
from __future__ import annotations

import sys
import time

import torch

import lib
from benchmarks.kernels_torch import GatedPasses, RecurrentPasses
from benchmarks.run import alternating_ratio
from lib import architectures, gated_step, krylov, recurrent_step
from lib.book.experiments import run_of

TARGET = 1.5
F32, F64 = torch.float32, torch.float64


def _rel(a, b) -> float:
    return float((a - b).double().norm() / b.double().norm().clamp_min(1e-300))


def _row(name, kernel, ref_fn, fast_fn, rounds, timer, err) -> dict:
    t_ref, t_fast, rr = alternating_ratio(ref_fn, fast_fn, rounds, timer=timer)
    return {"name": name, "reference_s": t_ref, "fast_s": t_fast, "ratio": t_ref / t_fast, "max_rel_err": err,
            "target_ratio": TARGET, "round_ratios": rr, "kernel": kernel}


def _krylov_rows(quick: bool) -> list[dict]:
    n, T = 1000, 20
    g = torch.Generator().manual_seed(0)
    W = torch.randn(n, n, dtype=F64, generator=g) / n ** 0.5
    Q0, C = torch.randn(1, n, dtype=F64, generator=g), torch.randn(1, n, dtype=F64, generator=g)

    def both(kernel):
        return krylov.krylov_rows(W, Q0, T, n ** -0.5, C, kernel=kernel)

    (Qk, Pk), (Qt, Pt) = both(True), both(False)
    err = max(_rel(Qk, Qt), _rel(Pk, Pt))
    rows = []
    for threads, timer in ((1, time.thread_time),) + (() if quick else ((2, time.perf_counter),)):
        torch.set_num_threads(threads)
        rows.append(_row(f"krylov.c pair n={n} T={T}, {threads} thread{'s' * (threads > 1)}",
                         "krylov", lambda: both(False), lambda: both(True), 3 if quick else 8, timer, err))
    return rows


def _gated_setting(name: str, dtype):
    """(stack, x, y, last_only) of one student at the setting of the run ``name``."""
    exp, spec = run_of(name)
    cfg, (d_in, d_out) = spec.config(exp), spec.dims(exp)
    gens = [torch.Generator().manual_seed(7)]
    if spec.task == "teacher":
        task = lib.AttentionTeacherTask(*lib.lsa_teachers(cfg["d"], spec.teacher_seeds[:1]), T=cfg["T"],
                                        batch=cfg["batch"], x_std=cfg["x_std"], dtype=dtype)
    else:
        task = lib.ICLTask(K=1, T=cfg["T"], d_x=cfg["d_x"], d_y=cfg["d_y"], batch=cfg["batch"], dtype=dtype)
    stack = architectures.build("gated", 1, d_in, spec.groups[0].widths[:1], d_out, [1], dtype=dtype)
    x, y = task.sample(gens)
    return stack, x, y, task.last_only


def _gated_step(passes, stack, x, y, last_only):
    params = [getattr(stack, n).detach() for n in ("W_in_m", "W_in_x", "nu_log", "W_out_m", "W_out_x", "D")]
    grads = [torch.empty_like(p) for p in params]
    return lambda: gated_step.step(passes, params, x, y, last_only, grads), grads


def _gated_rows(quick: bool) -> list[dict]:
    rows = []
    for run, what in (("teacher", "teacher |h|=100 T=32"), ("icl", "in-context |h|=80")):
        m64 = _gated_setting(run, F64)
        out = {}
        for side, passes in (("C", gated_step.KERNEL.typed(F64)), ("torch", GatedPasses)):
            fn, grads = _gated_step(passes, *m64)
            out[side] = fn(), grads
        err = max([_rel(out["torch"][0], out["C"][0])] + [_rel(a, b) for a, b in zip(out["torch"][1], out["C"][1])])
        m32 = _gated_setting(run, F32)
        fast, _ = _gated_step(gated_step.KERNEL.typed(F32), *m32)
        ref, _ = _gated_step(GatedPasses, *m32)
        rows.append(_row(f"gated.c step, {what}", "gated", ref, fast,
                         3 if quick else 8, time.thread_time, err))
    return rows


def _group(kind: str, layers: int, dtype):
    """The networks of the arch_teacher group of ``kind`` at ``layers``, and one batch a network."""
    exp, spec = run_of("arch_teacher")
    cfg, (d_in, d_out) = spec.config(exp), spec.dims(exp)
    group = next(g for g in spec.groups if (g.kind, g.layers) == (kind, layers))
    stack = architectures.build(kind, layers, d_in, group.widths, d_out, group.seeds, dtype=dtype)
    task = lib.AttentionTeacherTask(*lib.lsa_teachers(cfg["d"], spec.teacher_seeds * stack.K), T=cfg["T"],
                                    batch=cfg["batch"], x_std=cfg["x_std"], dtype=dtype)
    x, y = task.sample([torch.Generator().manual_seed(s) for s in group.member_data_seeds])
    return list(stack.members), x, y


def _group_step(passes, nets, x, y):
    grads = [{p: torch.empty_like(p) for p in net.parameters()} for net in nets]
    return (lambda: [recurrent_step.net_step(passes, net, x[k], y[k], False, grads[k].__getitem__)
                     for k, net in enumerate(nets)]), grads


def _recurrent_rows(quick: bool) -> list[dict]:
    exp, spec = run_of("arch_teacher")
    rows = []
    for group in spec.groups:
        if group.kind == "gated" or (quick and group.layers > 1):     # quick: the one-layer groups
            continue
        nets, x, y = _group(group.kind, group.layers, F64)
        out = {}
        for side, passes in (("C", recurrent_step.KERNEL.typed(F64)), ("torch", RecurrentPasses)):
            fn, grads = _group_step(passes, nets, x, y)
            out[side] = fn(), grads
        err = max([_rel(a, b) for a, b in zip(out["torch"][0], out["C"][0])]
                  + [_rel(out["torch"][1][k][p], out["C"][1][k][p]) for k, net in enumerate(nets)
                     for p in net.parameters()])
        nets, x, y = _group(group.kind, group.layers, F32)
        fast, _ = _group_step(recurrent_step.KERNEL.typed(F32), nets, x, y)
        ref, _ = _group_step(RecurrentPasses, nets, x, y)
        rows.append(_row(f"recurrent.c 4A group, {architectures.label(group.kind, group.layers)}",
                         "recurrent", ref, fast, 2 if quick else 5, time.thread_time, err))
    return rows


def run(quick: bool = False) -> list[dict]:
    missing = [k.stem for k in (krylov.KERNEL, gated_step.KERNEL, recurrent_step.KERNEL) if not k.available()]
    if missing:
        raise RuntimeError(f"the kernels {', '.join(missing)} are not available (no C compiler, or RNNBOOK_KERNEL=0): "
                           "nothing to measure")
    old_threads = torch.get_num_threads()
    try:
        rows = _krylov_rows(quick)
        torch.set_num_threads(1)
        rows += _gated_rows(quick) + _recurrent_rows(quick)
    finally:
        torch.set_num_threads(old_threads)
    return rows


def decisions(rows: list[dict]) -> list[str]:
    """Per kernel: the rows' ratios against the target, and whether the kernel keeps its place on
    this machine (some row meets the target) or misses it here (every row misses)."""
    out = []
    for kernel in ("krylov", "gated", "recurrent"):
        mine = [r for r in rows if r.get("kernel") == kernel]
        met = [r for r in mine if r["ratio"] >= r["target_ratio"]]
        ratios = ", ".join(f"{r['ratio']:.2f}x" for r in mine)
        out.append(f"{kernel}.c: {ratios} (target {TARGET:g}x): "
                   + ("meets it here" + ("" if len(met) == len(mine) else f" on {len(met)} of {len(mine)} rows")
                      if met else "misses it on every row here"))
    return out


if __name__ == "__main__":
    from benchmarks.run import format_table

    rows = run(quick="--quick" in sys.argv[1:])
    print(format_table(rows) + "\n" + "\n".join(decisions(rows)))
