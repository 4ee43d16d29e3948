"""Benchmark: parallel-in-time forward of lib.GatedLinearRNN against its step-by-step loop.

The parallel forward computes the input gating for all t in one matrix product, runs the
diagonal recurrence (in evaluation, as here: one in-place elementwise pass over time; with
gradients: the log2(T)-step scan of lib.diagonal_scan) and applies the output gating to all t
at once; the reference loops over t.  Sizes (those of the teacher-student task):
T = 32, batch 64, |h| = 100, float64, CPU.  Target: ratio >= 3, max relative error <= 1e-10.
Both paths do the same matrix products (about 90 MFLOP at that size), so the parallel path can
only win the loop's per-step dispatch overhead; where the products dominate (large |h|, a busy
machine with contended memory bandwidth) the ratio drops towards 1.  (The parallel evaluation
forward writes its intermediates into reused work buffers: fresh multi-megabyte blocks cost
~2,400 page faults per call, see the Performance appendix.)  The |h| = 16 row shows the
overhead-dominated regime.

    python benchmarks/bench_gated.py [--quick]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch


import lib  # noqa: E402
from benchmarks.run import alternating_ratio


def run(quick: bool = False) -> list[dict]:
    """One row per configuration: name, reference_s, fast_s, ratio, max_rel_err, target_ratio."""
    rounds = 4 if quick else 20       # alternating blocks of 3 calls each (run.alternating_ratio)
    # the teacher-student size first; |h| = 16 shows the regime where per-step overhead dominates the loop
    configs = [("GatedLinearRNN forward, T=32, B=64, |h|=100, float64", 32, 64, 100, 4),
               ("GatedLinearRNN forward, T=32, B=64, |h|=16, float64", 32, 64, 16, 4)]
    if not quick:
        configs.append(("GatedLinearRNN forward, T=128, B=64, |h|=100, float64", 128, 64, 100, 4))
    rows = []
    for name, T, B, n_h, d in configs:
        model = lib.GatedLinearRNN(d, n_h, d, seed=0, dtype=torch.float64)
        x = torch.randn(B, T, d, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
        with torch.no_grad():
            y_fast = model(x, method="parallel")
            y_ref = model(x, method="step")
            err = float((y_fast - y_ref).abs().max() / y_ref.abs().max())
            t_ref, t_fast, rr = alternating_ratio(lambda: model(x, method="step"),
                                                  lambda: model(x, method="parallel"), rounds)
        rows.append({"name": name, "reference_s": t_ref, "fast_s": t_fast, "ratio": t_ref / t_fast,
                     "max_rel_err": err, "target_ratio": 3.0, "round_ratios": rr})
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print(f"{'benchmark':58s} {'reference_s':>12s} {'fast_s':>10s} {'ratio':>7s} {'max_rel_err':>12s} {'target':>7s}")
    for r in run(quick=args.quick):
        print(f"{r['name']:58s} {r['reference_s']:12.3e} {r['fast_s']:10.3e} {r['ratio']:7.2f} "
              f"{r['max_rel_err']:12.2e} {r['target_ratio']:7.1f}")
