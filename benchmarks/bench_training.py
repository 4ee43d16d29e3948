"""Benchmark: the online training step of lib.train_online against lib.train_adamw.

At the paper's sizes (Zucchet et al. 2023, App. B.1 / C.1; float32, as trained):

* in-context regression, |h| = 80, B = 64, T + 1 = 13 tokens, readout of the last step only
  (lib.StackedGatedRNN with ``last_only``: the last state is one weighted sum over time), at
  two threads and at one (the stored CPU runs use one thread per run);
* teacher-student, |h| = 100, d = 4, B = 64, T = 32 (every step read: the recurrence runs
  in place with a hand-written backward, the gates are separate products);
* a stack of K = 8 in-context networks in one step against 8 separate runs.

Each timed call is ``steps`` training steps (optimizer built once per call on both sides).
max_rel_err: the fast path's loss gradient against the reference model's on one float64 batch
(the same weights; for the stack, member 3 against the separate network), i.e. the step
computes the same update.  Targets: ICL >= 3x, teacher-student >= 1.3x, stack >= 1.5x.

    python benchmarks/bench_training.py [--quick]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch


import lib  # noqa: E402
from benchmarks.run import alternating_ratio

F32, F64 = torch.float32, torch.float64


def _grad_error(stack: "lib.StackedGatedRNN", task, k: int = 0) -> float:
    """Relative difference of d(loss_k)/d(weights) between the stack (float64 copy) and member k
    as a lib.GatedLinearRNN evaluated by its own (reference) forward, on one float64 batch."""
    s64 = lib.StackedGatedRNN.from_members([stack.member(j) for j in range(stack.K)], dtype=F64)
    ref = stack.member(k)
    x, y = task.astype(F64).sample([torch.Generator().manual_seed(5) for _ in range(stack.K)])
    if task.last_only:
        out_s, out_r = s64(x, last_only=True)[k], ref(x[k], method="step")[:, -1]
    else:
        out_s, out_r = s64(x)[k], ref(x[k], method="step")
    g_s = torch.autograd.grad(0.5 * (out_s - y[k]).square().mean(), [s64.W_out_m, s64.D])
    g_r = torch.autograd.grad(0.5 * (out_r - y[k]).square().mean(), [ref.W_out_m, ref.D])
    w = ref.W_out_m.shape[0]
    pairs = [(g_s[0][k, :w, :w], g_r[0]), (g_s[1][k, :, :w], g_r[1])]
    return max(float((a - b).norm() / b.norm()) for a, b in pairs)


def run(quick: bool = False) -> list[dict]:
    torch.set_num_threads(2)
    steps, rounds = (10, 2) if quick else (50, 5)
    rows = []

    # in-context regression: reference = train_adamw on a GatedLinearRNN, prediction m(x)[:, -1]
    icl_ref_model = lib.GatedLinearRNN(6, 80, 3, seed=0, dtype=F32)
    icl_batch = lambda g: lib.icl_batch(64, 12, 3, 3, generator=g)            # noqa: E731
    icl_task = lib.ICLTask(K=1, T=12, d_x=3, d_y=3, batch=64)
    icl_stack = lib.StackedGatedRNN(6, [80], 3, [0])
    # at torch's two threads (the other benchmarks' setting) and at one thread, the setting of
    # the stored CPU runs (tools/paper.py --threads 1, one run per core)
    for threads in (2, 1):
        torch.set_num_threads(threads)
        t_ref, t_fast, rr = alternating_ratio(
            lambda: lib.train_adamw(icl_ref_model, icl_batch, steps=steps, predict=lambda m, x: m(x)[:, -1],
                                    log_every=steps),
            lambda: lib.train_online(icl_stack, icl_task, steps=steps, data_seeds=[0], log_every=steps), rounds)
        rows.append({"name": f"AdamW step, ICL, |h|=80, B=64, T=13, last step, {threads} thread{'s' * (threads > 1)}",
                     "reference_s": t_ref / steps, "fast_s": t_fast / steps, "ratio": t_ref / t_fast,
                     "max_rel_err": _grad_error(icl_stack, icl_task), "target_ratio": 3.0, "round_ratios": rr})
    torch.set_num_threads(2)

    # teacher-student
    W = lib.lsa_teachers(4, [0])
    teacher = lib.LinearSelfAttention(W[0][0], W[1][0], W[2][0])

    def ts_batch(g):
        x = torch.randn(64, 32, 4, generator=g, dtype=F64) * 0.5
        with torch.no_grad():
            return x.float(), teacher(x).float()

    ts_ref_model = lib.GatedLinearRNN(4, 100, 4, seed=0, dtype=F32)
    ts_task = lib.AttentionTeacherTask(*W, T=32, batch=64, x_std=0.5)
    ts_stack = lib.StackedGatedRNN(4, [100], 4, [0])
    ts_steps = max(steps // 2, 5)
    t_ref, t_fast, rr = alternating_ratio(
        lambda: lib.train_adamw(ts_ref_model, ts_batch, steps=ts_steps, log_every=ts_steps),
        lambda: lib.train_online(ts_stack, ts_task, steps=ts_steps, data_seeds=[0], log_every=ts_steps),
        rounds)
    rows.append({"name": "AdamW step, teacher, |h|=100, B=64, T=32", "reference_s": t_ref / ts_steps,
                 "fast_s": t_fast / ts_steps, "ratio": t_ref / t_fast,
                 "max_rel_err": _grad_error(ts_stack, ts_task), "target_ratio": 1.3, "round_ratios": rr})

    # a stack of 8 against 8 separate runs
    K = 8
    stack8 = lib.StackedGatedRNN(6, [80] * K, 3, list(range(K)))
    task8 = lib.ICLTask(K=K, T=12, d_x=3, d_y=3, batch=64)
    singles = [lib.StackedGatedRNN(6, [80], 3, [k]) for k in range(K)]

    def separate():
        for k, m in enumerate(singles):
            lib.train_online(m, icl_task, steps=steps, data_seeds=[k], log_every=steps)

    t_ref, t_fast, rr = alternating_ratio(
        separate, lambda: lib.train_online(stack8, task8, steps=steps, data_seeds=list(range(K)), log_every=steps),
        max(rounds - 1, 1))
    rows.append({"name": f"stack of K={K} vs {K} runs, ICL, |h|=80", "reference_s": t_ref / steps,
                 "fast_s": t_fast / steps, "ratio": t_ref / t_fast,
                 "max_rel_err": _grad_error(stack8, task8, k=3), "target_ratio": 1.5, "round_ratios": rr})
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print(f"{'benchmark':50s} {'reference_s':>12s} {'fast_s':>10s} {'ratio':>7s} {'max_rel_err':>12s} {'target':>7s}")
    for r in run(quick=args.quick):
        print(f"{r['name']:50s} {r['reference_s']:12.3e} {r['fast_s']:10.3e} {r['ratio']:7.2f} "
              f"{r['max_rel_err']:12.2e} {r['target_ratio']:7.1f}")
