"""Benchmarks of the linear-RNN engine: Markov-parameter engine vs the recurrence.

    python benchmarks/bench_linear_rnn.py [--quick]

1. One full-batch GD step (loss + gradient with respect to W, F, C) of ``lib.LinearRNN`` at
   n=1000, T=20, N=50, n_x=n_y=1: engine="markov" vs engine="recurrence".  Target >= 25x,
   gradients equal to <= 1e-10 relative.
2. The empirical NTK at n=1000, T=10, N=50 (x1 = x2): ``factored_ntk(x, x, markov_ntk_factor)``
   vs per-output autograd through the recurrence (``lib.empirical_ntk`` on the model with
   engine="recurrence").  Target >= 50x, kernels equal to <= 1e-10 relative.

float64, torch.set_num_threads(2), each timing the best of several runs (the GD-step pair in
``repeats`` alternating blocks of 3 calls each, see ``run.alternating_ratio``).  ``quick=True``
(the Performance appendix) keeps the GD-step benchmark at full size (it takes about a second)
and runs the NTK benchmark at n=200, N=20, where the reference takes seconds instead of
minutes; the targets are the same.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import torch


import lib  # noqa: E402
from benchmarks.run import alternating_ratio

SIZES = {
    # the GD-step pair takes ~0.15 s per repeat; the full NTK reference ~80 s per run
    False: dict(gd=dict(n=1000, T=20, N=50, repeats=15), ntk=dict(n=1000, T=10, N=50, repeats=3)),
    True: dict(gd=dict(n=1000, T=20, N=50, repeats=10), ntk=dict(n=200, T=10, N=20, repeats=3)),
}


def _best(fn, repeats):
    out, best = None, float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return out, best


def _rel(a, b):
    return float(torch.linalg.norm(a - b) / torch.linalg.norm(b))


def bench_gd_step(n, T, N, repeats):
    """forward + half-sum loss + gradient + in-place update, each engine on the same model."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N, T, 1, generator=g, dtype=torch.float64)
    y = torch.randn(N, T, 1, generator=g, dtype=torch.float64)
    model = lib.LinearRNN(n, 1, 1, nu_W=0.5, nu_F=1.0, nu_C=1.0, seed=1)
    params = list(model.parameters())
    start = [p.detach().clone() for p in params]
    lr = 1e-6

    def gradient(engine):
        model.engine = engine
        return torch.autograd.grad(lib.loss_fn(model(x), y), params)

    def gd_step(engine):
        def run():
            grads = gradient(engine)
            with torch.no_grad():
                for p, gr in zip(params, grads):
                    p.sub_(gr, alpha=lr)
        return run

    # exactness at the initial parameters, then timings (parameters restored afterwards)
    g_ref = torch.cat([gr.reshape(-1) for gr in gradient("recurrence")])
    g_fast = torch.cat([gr.reshape(-1) for gr in gradient("markov")])
    t_ref, t_fast, rr = alternating_ratio(gd_step("recurrence"), gd_step("markov"), repeats)
    with torch.no_grad():
        for p, p0 in zip(params, start):
            p.copy_(p0)
    model.engine = "markov"
    return dict(name=f"GD step, n={n}, T={T}, N={N}", reference_s=t_ref, fast_s=t_fast,
                ratio=t_ref / t_fast, max_rel_err=_rel(g_fast, g_ref), target_ratio=25.0, round_ratios=rr)


def bench_ntk(n, T, N, repeats):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N, T, 1, generator=g, dtype=torch.float64)
    model = lib.LinearRNN(n, 1, 1, nu_W=0.5, nu_F=1.0, nu_C=1.0, seed=1)

    def ref():
        model.engine = "recurrence"
        return lib.empirical_ntk(x, x, model)

    def fast():
        return lib.factored_ntk(x, x, lib.markov_ntk_factor(model, T))

    K_ref, t_ref = _best(ref, max(1, repeats - 1))
    K_fast, t_fast = _best(fast, repeats)
    model.engine = "markov"
    return dict(name=f"empirical NTK, n={n}, T={T}, N={N}", reference_s=t_ref, fast_s=t_fast,
                ratio=t_ref / t_fast, max_rel_err=_rel(K_fast, K_ref), target_ratio=50.0)


def run(quick: bool = False) -> list[dict]:
    """Both benchmarks; a list of rows with keys name, reference_s, fast_s, ratio,
    max_rel_err, target_ratio."""
    torch.set_num_threads(2)
    s = SIZES[bool(quick)]
    return [bench_gd_step(**s["gd"]), bench_ntk(**s["ntk"])]


if __name__ == "__main__":
    from benchmarks.run import format_table

    rows = run(quick="--quick" in sys.argv[1:])
    print(format_table(rows))
