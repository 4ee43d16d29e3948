"""The fused Krylov kernel: the C kernel of lib/krylov.c against the same pass written for numba.

    python benchmarks/bench_krylov_numba.py [--quick]

``lib.krylov`` compiles a small C file on first use.  numba would give the same single pass over
W without a C compiler (``krylov_numba.py`` is the C kernel transcribed line for line, with the
same blocks of four rows and the same reassociation that lets the dot products use SIMD).  This
measures what choosing between them turns on, in one run on one machine:

1. the pass itself, n=1000, T=20, one Q and two P sequences (what a GD step of ``LinearRNN``
   needs), at one and at two threads: best call of each (``run.alternating_ratio``), numba's time
   over the C kernel's as the ratio;
2. the cost of a new process: from ``import`` to the first result of each kernel in a fresh
   Python process whose caches are already filled (every chapter, test subprocess and worker is
   such a process), median of ``starts`` processes each;
3. (full mode only) the first use on an empty cache: numba's compilation against the C
   compiler's, one process each.

Both kernels must agree with torch's products to <= 1e-10 relative (max over the cases).  The
targets say what keeping the C kernel requires: the pass no slower than numba's (ratio >= 0.9,
within the machine's noise), and a process start several times cheaper (>= 3x).
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent

from lib import krylov
from benchmarks.run import alternating_ratio

SIZE = dict(n=1000, T=20, kq=1, kp=2)

# one process: build the case, time import + first call of one kernel, print JSON
_START = r"""
import json, sys, time
import numpy as np, torch
n, T, kq, kp = 300, 8, 1, 2
g = torch.Generator().manual_seed(3)
W = torch.randn(n, n, generator=g, dtype=torch.float64) / n ** 0.5
Q0 = torch.randn(kq, n, generator=g, dtype=torch.float64)
P0 = torch.randn(kp, n, generator=g, dtype=torch.float64)
t0 = time.perf_counter()
if {which!r} == "C":
    from lib import krylov
    assert krylov.kernel_available()
    Q, P = krylov.krylov_rows(W, Q0, T, 1.0, P0)
    Q, P = Q.numpy(), P.numpy()
else:
    from benchmarks import krylov_numba
    Q = np.zeros((T, kq, n)); P = np.zeros((T, kp, n)); Q[0] = Q0.numpy(); P[0] = P0.numpy()
    krylov_numba.krylov_pair(W.numpy(), 1.0, T, Q, P, np.zeros_like(Q), np.zeros_like(P), 1)
dt = time.perf_counter() - t0
from lib import krylov as k
Qr, Pr = k.krylov_rows(W, Q0, T, 1.0, P0, kernel=False)
err = max(float(np.linalg.norm(Q - Qr.numpy()) / np.linalg.norm(Qr.numpy())),
          float(np.linalg.norm(P - Pr.numpy()) / np.linalg.norm(Pr.numpy())))
print(json.dumps(dict(seconds=dt, err=err)))
"""


def _case(n, T, kq, kp):
    g = torch.Generator().manual_seed(0)
    W = torch.randn(n, n, generator=g, dtype=torch.float64)
    Q0 = torch.randn(kq, n, generator=g, dtype=torch.float64)
    P0 = torch.randn(kp, n, generator=g, dtype=torch.float64)
    return W, Q0, P0, n ** -0.5


def _rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def bench_pass(threads: int, repeats: int) -> dict:
    import numba

    from benchmarks import krylov_numba
    W, Q0, P0, s = _case(**SIZE)
    T, kq, kp, n = SIZE["T"], SIZE["kq"], SIZE["kp"], SIZE["n"]
    zq, zp = np.zeros((T, kq, n)), np.zeros((T, kp, n))
    Wn = W.numpy()

    def with_numba():
        Q = np.empty((T, kq, n))
        P = np.empty((T, kp, n))
        Q[0], P[0] = Q0.numpy(), P0.numpy()
        krylov_numba.krylov_pair(Wn, s, T, Q, P, zq, zp, threads)
        return Q, P

    def with_c():
        return krylov.krylov_rows(W, Q0, T, s, P0)

    old_torch, old_numba = torch.get_num_threads(), numba.get_num_threads()
    torch.set_num_threads(threads)
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        if not krylov.kernel_available():
            raise RuntimeError("the C kernel is not in use here (see lib.krylov's warning); nothing to compare")
        Qr, Pr = krylov.krylov_rows(W, Q0, T, s, P0, kernel=False)
        (Qn, Pn), (Qc, Pc) = with_numba(), with_c()
        err = max(_rel(Qn, Qr.numpy()), _rel(Pn, Pr.numpy()), _rel(Qc.numpy(), Qr.numpy()), _rel(Pc.numpy(), Pr.numpy()))
        t_numba, t_c, rr = alternating_ratio(with_numba, with_c, repeats)
    finally:
        torch.set_num_threads(old_torch)
        numba.set_num_threads(old_numba)
    return dict(name=f"Krylov pass n={n} T={T}, {threads} thread(s): numba / C", reference_s=t_numba,
                fast_s=t_c, ratio=t_numba / t_c, max_rel_err=err, target_ratio=0.9, round_ratios=rr)


def _start(which: str, env: dict) -> dict:
    code = _START.format(which=which)
    env = dict(env, PYTHONPATH=str(HERE.parent) + os.pathsep + env.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        raise RuntimeError(f"the {which} start-up probe failed:\n{res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def bench_start(starts: int, empty_cache: bool) -> dict:
    """Median over ``starts`` fresh processes on the caches this process uses (filled first), or
    one process each on empty caches."""
    with tempfile.TemporaryDirectory(prefix="rnnbook-bench-") as tmp:
        env = dict(os.environ, OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
        env.pop("RNNBOOK_KERNEL", None)
        if empty_cache:
            env.update(RNNBOOK_CACHE=str(Path(tmp) / "c"), NUMBA_CACHE_DIR=str(Path(tmp) / "numba"))
            first = {w: _start(w, env) for w in ("numba", "C")}
            t = {w: first[w]["seconds"] for w in first}
            err = max(r["err"] for r in first.values())
            name = "first use on an empty cache (compile): numba / C"
        else:
            for w in ("numba", "C"):                      # make sure both caches are filled
                _start(w, env)
            runs = {w: [] for w in ("numba", "C")}
            for _ in range(starts):                       # alternate, as the in-process timings do
                for w in ("numba", "C"):
                    runs[w].append(_start(w, env))
            t = {w: statistics.median(r["seconds"] for r in runs[w]) for w in runs}
            err = max(r["err"] for rs in runs.values() for r in rs)
            name = f"new process to first result, warm cache (median of {starts}): numba / C"
    return dict(name=name, reference_s=t["numba"], fast_s=t["C"], ratio=t["numba"] / t["C"],
                max_rel_err=err, target_ratio=3.0 if not empty_cache else 1.0)


def run(quick: bool = False) -> list[dict]:
    rows = [bench_pass(1, 10 if quick else 20), bench_pass(2, 10 if quick else 20),
            bench_start(2 if quick else 7, empty_cache=False)]
    if not quick:
        rows.append(bench_start(1, empty_cache=True))
    return rows


if __name__ == "__main__":
    from benchmarks.run import format_table
    print(format_table(run(quick="--quick" in sys.argv)))
