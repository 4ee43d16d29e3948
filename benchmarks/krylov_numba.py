"""The fused Krylov kernel of ``lib/krylov.c`` written for numba, line for line: the candidate
that ``bench_krylov_numba.py`` measures against the C kernel (``lib.krylov``'s docstring has the
maths and the contract).

Given W (n x n, float64, C order), the step factor s and the first rows Q[0] (kq x n) and
P[0] (kp x n), ``krylov_pair`` fills, for j = 1 .. T-1,

    Q[j][r] = s * W   Q[j-1][r] + BQ[j][r]     (the Krylov sequence of W,   as rows)
    P[j][r] = s * W^T P[j-1][r] + BP[j][r]     (the Krylov sequence of W^T, as rows)

reading W ONCE per step for both sequences: row i of W gives the i-th entry of every W q (a dot
product) and adds p_i * (row i) to every W^T p (an axpy).  A product of W with a few vectors is
limited by the traffic of streaming W, so one pass instead of two halves its cost.  Rows are taken
four at a time (four dot products share one read of q, and each W^T p accumulator is read and
written once per four rows).  ``nchunks`` threads split the rows; each accumulates its own partial
W^T p, summed after the parallel loop.  ``fastmath`` allows only reassociation and contraction,
which is what lets the dot products use SIMD: the result differs from a plain product by the
order of summation only (tests/test_krylov.py checks 1e-12).

Importing this module needs numba; ``cache=True`` keeps the machine code in numba's cache folder
(``NUMBA_CACHE_DIR``, else ``__pycache__`` beside this file).
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

_FAST = {"reassoc", "contract"}


@njit(fastmath=_FAST, cache=True, inline="always")
def _rows(W, s, lo, hi, q, qn, bq, p, z):  # pragma: no cover - compiled
    n = W.shape[1]
    kq = q.shape[0]
    kp = p.shape[0]
    i = lo
    while i + 4 <= hi:
        w0, w1, w2, w3 = W[i], W[i + 1], W[i + 2], W[i + 3]
        r0 = 0
        if kq >= 1 and kp >= 1:             # the first q and the first p share the pass
            a0 = a1 = a2 = a3 = 0.0
            c0, c1, c2, c3 = s * p[0, i], s * p[0, i + 1], s * p[0, i + 2], s * p[0, i + 3]
            x0 = q[0]
            z0 = z[0]
            for k in range(n):
                x = x0[k]
                a0 += w0[k] * x
                a1 += w1[k] * x
                a2 += w2[k] * x
                a3 += w3[k] * x
                z0[k] += c0 * w0[k] + c1 * w1[k] + c2 * w2[k] + c3 * w3[k]
            qn[0, i] = s * a0 + bq[0, i]
            qn[0, i + 1] = s * a1 + bq[0, i + 1]
            qn[0, i + 2] = s * a2 + bq[0, i + 2]
            qn[0, i + 3] = s * a3 + bq[0, i + 3]
            r0 = 1
        for r in range(r0, kq):
            a0 = a1 = a2 = a3 = 0.0
            x0 = q[r]
            for k in range(n):
                x = x0[k]
                a0 += w0[k] * x
                a1 += w1[k] * x
                a2 += w2[k] * x
                a3 += w3[k] * x
            qn[r, i] = s * a0 + bq[r, i]
            qn[r, i + 1] = s * a1 + bq[r, i + 1]
            qn[r, i + 2] = s * a2 + bq[r, i + 2]
            qn[r, i + 3] = s * a3 + bq[r, i + 3]
        for r in range(r0, kp):
            c0, c1, c2, c3 = s * p[r, i], s * p[r, i + 1], s * p[r, i + 2], s * p[r, i + 3]
            zr = z[r]
            for k in range(n):
                zr[k] += c0 * w0[k] + c1 * w1[k] + c2 * w2[k] + c3 * w3[k]
        i += 4
    while i < hi:                           # the rows left over after the blocks of four
        w = W[i]
        for r in range(kq):
            a = 0.0
            x0 = q[r]
            for k in range(n):
                a += w[k] * x0[k]
            qn[r, i] = s * a + bq[r, i]
        for r in range(kp):
            c = s * p[r, i]
            zr = z[r]
            for k in range(n):
                zr[k] += c * w[k]
        i += 1


@njit(parallel=True, fastmath=_FAST, cache=True)
def krylov_pair(W, s, T, Q, P, BQ, BP, nchunks):  # pragma: no cover - compiled
    """Fill Q[1:T], P[1:T] in place (shapes (T, kq, n), (T, kp, n); BQ, BP the same shapes)."""
    n = W.shape[0]
    kp = P.shape[1]
    part = np.zeros((nchunks, kp, n))
    nblk = n // 4
    for j in range(1, T):
        part[:] = 0.0
        for c in prange(nchunks):
            lo = nblk * c // nchunks * 4
            hi = n if c == nchunks - 1 else nblk * (c + 1) // nchunks * 4
            _rows(W, s, lo, hi, Q[j - 1], Q[j], BQ[j], P[j - 1], part[c])
        for r in range(kp):
            for k in prange(n):
                v = BP[j, r, k]
                for c in range(nchunks):
                    v += part[c, r, k]
                P[j, r, k] = v
