"""Benchmark: Part III's training step, ``lib.train_online`` with its hand-written step
(``engine="fast"``, the default) against the same trainer through autograd
(``engine="autograd"``, the reference), and the step against the floor set by its matrix
products.  One thread a process, the setting of the stored runs (one single-thread process a
core); times are the calling thread's CPU time (``time.thread_time``: the waits of a machine
that other processes share are left out), the minimum over repeats, both sides in one run.

* Gated RNN, teacher-student at the paper's sizes (Zucchet et al. 2023, App. B.1, Chapter 11:
  |h| = 100 recurrent and output-gating neurons, d = 4, batch 64, T = 32, float32 as trained),
  at K = 1 and K = 3 students a step, per student-step.  The fast step is the forward and
  backward of ``lib.gated_step`` (C kernel ``lib/gated.c`` for the input gates, the scan and its
  adjoint, the readout and the loss; the three products with the (2n x n) output-gate matrix in
  BLAS), the gradients written straight into the flat buffer of ``lib.online.FlatAdamW``.  The
  reference differentiates the model's forward with autograd; both take the same AdamW update.
  Target: >= 1.5x at both K, decided by the best calls' ratio; the ratio of each round of
  ``run.alternating_ratio`` is kept as well, and where those samples fall on both sides of the
  target the reading says so (``run.target_reading``).
* The floor: the step's three products with the output-gate matrix alone (forward o = W_out h,
  weight gradient g_o h^T, input gradient W_out^T g_o; 2 * 2n * n * TB flops each), as plain
  GEMMs on the same shapes, member after member as the step takes them.  The row gives the
  achieved GFLOP/s of both (the step's flops counted by ``step_flops``) and the step's time over
  the GEMMs' (informational).
* The networks of Fig. 4 on in-context regression (T + 1 = 13 tokens, d = 6, batch 64; a group
  of four networks of widths 16, 32, 64, 32, as the paper's runs train them): the same two
  engines of ``lib.train_online``, per step of the group (informational: one row an
  architecture; the gated row shows the last-step readout, the others ``lib.recurrent_step``).
* (full mode only) one process a core: two single-thread processes training one gated student
  each, against one process with two threads training the two as one stack (student-steps per
  second of the machine; informational: it depends on what else the machine is running).

max_rel_err: the fast step's gradients against autograd through the model's forward, on one
float64 batch, the same weights.

    python -m benchmarks.bench_online_step [--quick]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import torch

import lib
from lib import architectures
from benchmarks.run import alternating_best, alternating_ratio, target_reading

F32, F64 = torch.float32, torch.float64
D, N, T, B = 4, 100, 32, 64                   # the Chapter 11 teacher setting
KS = (1, 3)
TARGET = 1.5
ARCH_WIDTHS = [16, 32, 64, 32]
ARCHS = [("gated", 1), ("lru", 1), ("lru_in_out", 1), ("lru_in_skip", 1), ("lstm", 1), ("gru", 1)]


def _setup(K: int, dtype=F32):
    W = lib.lsa_teachers(D, list(range(101, 101 + K)))
    task = lib.AttentionTeacherTask(*W, T=T, batch=B, x_std=0.5, dtype=dtype)
    return lib.StackedGatedRNN(D, [N] * K, D, list(range(1, K + 1)), dtype=dtype), task


def gemm_flops(K: int = 1) -> int:
    """Flops of the step's three output-gate products: 3 x 2 (2n) n C, C = T B columns."""
    return 3 * 2 * (2 * N) * N * T * B * K


def step_flops(K: int = 1) -> int:
    """Flops of one training step of K students (multiply and add counted apart), d_x = d + 1:
    input gates 2 (2n) d_x C forward, recomputed and differentiated (3x); the recurrence, its
    adjoint and dL/dlam (6 n C); the output-gate GEMMs; readout, loss and their backward
    (2 n C + 6 d_out n C + 4 d_out C)."""
    C, dx = T * B, D + 1
    rest = 3 * 2 * (2 * N) * dx * C + 6 * N * C + 2 * N * C + 6 * D * N * C + 4 * D * C
    return gemm_flops(K) + K * rest


def _grad_error(model, task, K: int) -> float:
    """Largest relative difference of any weight's gradient, the fast step (the model's hand-written
    step, :func:`lib.architectures.training_step`) against autograd through the model's forward
    (float64 batch, same weights)."""
    x, y = task.astype(F64).sample([torch.Generator().manual_seed(7 + k) for k in range(K)])
    params = list(model.parameters())
    ref = 0.5 * (model(x, last_only=task.last_only) - y).square().flatten(1).mean(dim=1)
    g_ref = torch.autograd.grad(ref.sum(), params)
    for p in params:
        p.grad = None
    architectures.training_step(model)(model, x, y, task.last_only)
    return max(float((p.grad - b).norm() / b.norm().clamp_min(1e-300)) for p, b in zip(params, g_ref))


def _gemm_floor(K: int, reps: int) -> float:
    """Thread seconds (min over ``reps``) of the step's three output-gate products alone (float32)."""
    C = T * B
    g = torch.Generator().manual_seed(0)
    W = torch.randn(K, 2 * N, N, generator=g)
    h = torch.randn(K, N, C, generator=g)
    go = torch.randn(K, 2 * N, C, generator=g)
    o, gW, a = torch.empty(K, 2 * N, C), torch.empty(K, 2 * N, N), torch.empty(K, N, C)

    def products():                                     # member by member, as the step takes them
        for k in range(K):
            one = slice(k, k + 1)
            torch.bmm(W[one], h[one], out=o[one])                       # forward: o = W_out h
            torch.bmm(go[one], h[one].transpose(1, 2), out=gW[one])     # dL/dW_out = g_o h^T
            torch.bmm(W[one].transpose(1, 2), go[one], out=a[one])      # dL/dh = W_out^T g_o

    products()
    best = float("inf")
    for _ in range(reps):
        t0 = time.thread_time()
        products()
        best = min(best, time.thread_time() - t0)
    return best


def _gated_rows(quick: bool) -> list[dict]:
    steps, rounds = (8, 3) if quick else (30, 6)
    rows = []
    for K in KS:
        fast_model, task = _setup(K)
        ref_model, _ = _setup(K)
        seeds = list(range(K))
        t_ref, t_fast, rr = alternating_ratio(
            lambda: lib.train_online(ref_model, task, steps=steps, data_seeds=seeds, log_every=steps,
                                     engine="autograd"),
            lambda: lib.train_online(fast_model, task, steps=steps, data_seeds=seeds, log_every=steps),
            rounds, timer=time.thread_time)
        per_ref, per_fast = t_ref / steps / K, t_fast / steps / K
        m64, t64 = _setup(K, F64)
        rows.append({"name": f"Part III step, teacher |h|=100, K={K}, 1 thread (per student-step)",
                     "reference_s": per_ref, "fast_s": per_fast, "ratio": per_ref / per_fast,
                     "max_rel_err": _grad_error(m64, t64, K), "target_ratio": TARGET,
                     "round_ratios": rr, "K": K, "kind": "step"})
        floor = _gemm_floor(K, rounds * 6)
        step_s = t_fast / steps
        rows.append({"name": f"  K={K}: step {step_flops(K) / step_s / 1e9:.1f} GFLOP/s, its 3 GEMMs alone "
                             f"{gemm_flops(K) / floor / 1e9:.1f} GFLOP/s (step time / GEMM time)",
                     "reference_s": step_s, "fast_s": floor, "ratio": step_s / floor, "max_rel_err": 0.0,
                     "target_ratio": None, "K": K, "kind": "floor",
                     "step_gflops": step_flops(K) / step_s / 1e9, "gemm_gflops": gemm_flops(K) / floor / 1e9})
    return rows


def _arch_rows(quick: bool) -> list[dict]:
    steps, rounds = (3, 1) if quick else (10, 5)
    K = len(ARCH_WIDTHS)
    task = lib.ICLTask(K=K, T=12, d_x=3, d_y=3, batch=64)
    seeds, data_seeds = list(range(1, K + 1)), list(range(K))
    rows = []
    for kind, layers in ARCHS:
        build = lambda dtype=F32: architectures.build(kind, layers, 6, ARCH_WIDTHS, 3, seeds, dtype=dtype)  # noqa: E731
        fast_model, ref_model = build(), build()
        t_ref, t_fast = alternating_best(
            lambda: lib.train_online(ref_model, task, steps=steps, data_seeds=data_seeds, log_every=steps,
                                     engine="autograd"),
            lambda: lib.train_online(fast_model, task, steps=steps, data_seeds=data_seeds, log_every=steps),
            rounds, timer=time.thread_time)
        rows.append({"name": f"Fig. 4 step, ICL, {architectures.label(kind, layers)}, widths 16-64 (4 nets)",
                     "reference_s": t_ref / steps, "fast_s": t_fast / steps, "ratio": t_ref / t_fast,
                     "max_rel_err": _grad_error(build(F64), task.astype(F64), K), "target_ratio": None,
                     "kind": "arch", "label": architectures.label(kind, layers)})
    return rows


_WORKER = """
import sys, time, torch
torch.set_num_threads(int(sys.argv[2]))
from benchmarks.bench_online_step import _setup
import lib
K, steps = int(sys.argv[1]), int(sys.argv[3])
model, task = _setup(K)
lib.train_online(model, task, steps=5, data_seeds=list(range(K)), log_every=5)
t0 = time.perf_counter()
lib.train_online(model, task, steps=steps, data_seeds=list(range(K)), log_every=steps)
print(K * steps / (time.perf_counter() - t0))
"""


def _processes(steps: int) -> dict:
    """Student-steps per second of the machine: two single-thread processes at once (one student
    each) against one two-thread process (two students stacked)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-c", _WORKER]
    procs = [subprocess.Popen(cmd + ["1", "1", str(steps)], stdout=subprocess.PIPE, text=True, env=env, cwd=root)
             for _ in range(2)]
    per_core = sum(float(p.communicate()[0].split()[-1]) for p in procs)
    one = float(subprocess.run(cmd + ["2", "2", str(steps)], capture_output=True, text=True, env=env, cwd=root,
                               check=True).stdout.split()[-1])
    return {"name": "campaign: 2 processes x 1 thread / 1 process x 2 threads (student-steps/s)",
            "reference_s": 1 / one, "fast_s": 1 / per_core, "ratio": per_core / one, "max_rel_err": 0.0,
            "target_ratio": None, "kind": "processes"}


def targets_met(rows: list[dict]) -> list[str]:
    """One line a target row: its ratio (best call against best call), the range of the rounds'
    ratios, the target and the reading of ``run.target_reading``."""
    return [f"{r['name']}: {r['ratio']:.2f}x (rounds {min(r['round_ratios']):.2f}-{max(r['round_ratios']):.2f}x; "
            f"target >= {r['target_ratio']:g}x): {target_reading(r)}"
            for r in rows if r.get("target_ratio") is not None]


def run(quick: bool = False) -> list[dict]:
    old_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        rows = _gated_rows(quick) + _arch_rows(quick)
    finally:
        torch.set_num_threads(old_threads)
    if not quick:
        rows.append(_processes(200))
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    from benchmarks.run import format_table

    result = run(quick=args.quick)
    print(format_table(result))
    print("\n".join(targets_met(result)))
