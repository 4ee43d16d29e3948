"""Krylov sequences of a dense matrix, the hot loop of the Markov-parameter engine.

The Markov parameters of a linear RNN and their gradients need two Krylov sequences of the
scaled recurrent matrix A = s W (s = 1/sqrt n), both kept as rows:

    Q_j = Q_{j-1} A^T   (row r of Q_j is (A^j q_r)^T;  Q_0 = F^T, the input side)
    P_j = P_{j-1} A     (row r of P_j is ((A^T)^j p_r)^T;  P_0 = C, the readout side)

for j = 1 .. T-1.  Each step is a product of W with a few vectors, which is limited by the
memory traffic of streaming the n^2 entries of W, not by arithmetic.  ``krylov_rows`` computes
both sequences with ONE read of W per step: a small C kernel (``krylov.c``, compiled on first
use with the system C compiler and cached) takes each row w_i of W once and forms the i-th
entry w_i . q of every A q and adds p_i w_i to every A^T p.  At n = 1000 one fused step costs
less than one BLAS matrix-vector product (Performance appendix).

numba gives the same single pass without a C compiler, at the same speed, but a process that
uses it starts several times later (import and code loading); the Performance appendix measures
both (benchmarks/bench_krylov_numba.py) and says why the kernel stays in C.

Without a C compiler (or with ``RNNBOOK_KERNEL=0``/``false``/``no``/``off``, any case) the same
sequences are computed with torch products, one per sequence and step; both paths give the
same numbers up to the order of summation (tests/test_krylov.py).  The kernel is used only for
float64, contiguous CPU tensors outside torch.func transforms; everything else takes the torch
path.  The kernel is compiled, checked and loaded by :class:`lib.kernels.CompiledKernel` (a build
whose checksum does not match, or that kills a child process loading it, is rebuilt; one that
does not reproduce the torch path at n = 9 and at n = 256, on one thread and on several, is
removed).  Any failure falls back to the torch path with one warning.

    krylov_rows(W, Q0, T, s, P0=None, add_Q=None, add_P=None) -> (Q, P)
                                 Q: (T, k_q, n), P: (T, k_p, n); either may be None
    adjoint_rows(W, G, s) -> V   the backward recursion V_k = s V_{k+1} W + G_k
    kernel_available() -> bool   whether the compiled kernel is in use
"""
from __future__ import annotations

import ctypes

import torch

from .kernels import CompiledKernel, kernel_enabled

__all__ = ["krylov_rows", "adjoint_rows", "kernel_available", "kernel_enabled", "kernel_path", "rows_times"]


def _agrees_with_torch(fns) -> bool:
    """The loaded kernel on affine cases against the torch path: n = 9 on one thread, and
    n = 256 (``krylov_rows`` splits rows from n = 256) on one thread and on several -- the
    threads it will use, and at least two, so that a kernel wrong only when its threads share
    the work is caught even in a process that starts with one thread and adds more later."""
    g = torch.Generator().manual_seed(1)
    for n, threads in ((9, 1), (256, 1), (256, max(2, torch.get_num_threads()))):
        T, kq, kp, s = 5, 2, 3, 0.7
        W = torch.randn(n, n, generator=g, dtype=torch.float64) / n ** 0.5
        Q0 = torch.randn(kq, n, generator=g, dtype=torch.float64)
        P0 = torch.randn(kp, n, generator=g, dtype=torch.float64)
        aQ = torch.randn(T, kq, n, generator=g, dtype=torch.float64)
        aP = torch.randn(T, kp, n, generator=g, dtype=torch.float64)
        Q = torch.empty(T, kq, n, dtype=torch.float64)
        P = torch.empty(T, kp, n, dtype=torch.float64)
        Q[0], P[0] = Q0, P0
        if fns.krylov_pair(W.data_ptr(), n, s, T, Q.data_ptr(), kq, P.data_ptr(), kp, aQ.data_ptr(),
                           aP.data_ptr(), threads) != 0:
            return False
        Q_ref, P_ref = _torch_rows(W, Q0, T, s, True, aQ), _torch_rows(W, P0, T, s, False, aP)
        if not (torch.allclose(Q, Q_ref, rtol=1e-12, atol=1e-12) and torch.allclose(P, P_ref, rtol=1e-12, atol=1e-12)):
            return False
    return True


KERNEL = CompiledKernel(
    "krylov",
    {"krylov_pair": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_long, ctypes.c_double, ctypes.c_long,
                                    ctypes.c_void_p, ctypes.c_long, ctypes.c_void_p, ctypes.c_long,
                                    ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int])},
    _agrees_with_torch,
    "the Markov engine uses torch products instead (same results, about 2x slower at n = 1000)")


def _load():
    """The kernel's ctypes function, or None (no kernel)."""
    fns = KERNEL.load()
    return None if fns is None else fns.krylov_pair


def kernel_available() -> bool:
    """True when the compiled fused kernel is used (compiles it on the first call)."""
    return KERNEL.available()


def kernel_path():
    """Where the compiled kernel lives (None when it is not in use)."""
    return KERNEL.path()


def _plain(t: torch.Tensor, grad_mode: bool) -> bool:
    """A tensor the kernel may read: float64, dense, on the CPU, not a torch.func wrapper, and
    not part of a graph that autograd would have to record (the kernel is invisible to it)."""
    return (t.dtype == torch.float64 and t.device.type == "cpu" and t.layout == torch.strided
            and not (grad_mode and t.requires_grad)
            and not torch._C._functorch.is_functorch_wrapped_tensor(t))


# --------------------------------------------------------------------------------------
# the torch path
# --------------------------------------------------------------------------------------
def _row_blocks(n: int) -> int:
    """How many row blocks ``rows_times`` splits W into (1 = a plain product)."""
    if n < 256:
        return 1
    for nb in (4, 2):
        if n % nb == 0:
            return nb
    return 1


def rows_times(W: torch.Tensor, transpose: bool):
    """A function R -> R @ W.T (transpose=True) or R @ W, for a few rows R (k, n), W (n, n).

    A product of W with a handful of vectors streams W from memory once and is limited by that
    traffic, and BLAS runs it on one core.  Splitting the inner dimension into blocks and
    calling ONE batched product (bmm) lets both cores stream their share of W.  Exact up to
    the order of summation.  The block views of W are made once per Krylov sequence.
    """
    n = W.shape[-1]
    nb = _row_blocks(n)
    if nb == 1:
        Wm = W.mT if transpose else W
        return lambda R: R @ Wm
    Wb = W.reshape(n, nb, n // nb).permute(1, 2, 0) if transpose else W.reshape(nb, n // nb, n)
    m = n // nb
    return lambda R: torch.bmm(R.reshape(R.shape[0], nb, m).transpose(0, 1), Wb).sum(0)


def _torch_rows(W, X0, T, s, transpose, add=None):
    times = rows_times(W, transpose=transpose)
    X = [X0]
    for j in range(1, T):
        nxt = times(X[-1] * s)
        X.append(nxt if add is None else nxt + add[j])
    return torch.stack(X)


# --------------------------------------------------------------------------------------
# the entry points
# --------------------------------------------------------------------------------------
def krylov_rows(W: torch.Tensor, Q0: torch.Tensor | None, T: int, s: float,
                P0: torch.Tensor | None = None, *, add_Q: torch.Tensor | None = None,
                add_P: torch.Tensor | None = None, kernel: bool = True):
    """The two sequences, for j = 1 .. T-1, stacked with their first rows Q0, P0:

        Q_j = s Q_{j-1} W^T + add_Q[j]     (T, k_q, n)   (None when Q0 is None)
        P_j = s P_{j-1} W   + add_P[j]     (T, k_p, n)   (None when P0 is None)

    W: (n, n), Q0: (k_q, n), P0: (k_p, n); the optional addends (T, k, n) make a sequence
    affine (row 0 is ignored).  A transposed view W = U^T is handled without a copy: the
    Q-sequence of U^T is the P-sequence of U and vice versa.  No validation: this is the
    engine's hot path and its callers have checked the shapes.  Differentiable through the
    torch path only: the kernel runs on plain tensors, and callers that need a graph through
    the sequences, or torch.func transforms, get the torch path automatically.
    ``kernel=False`` forces the torch path (the Performance appendix compares the two).
    """
    if not isinstance(T, int) or T < 1:          # the one check of the hot path: it costs nothing
        raise ValueError(f"T must be an integer >= 1, got {T!r}")
    if W.dim() == 2 and not W.is_contiguous() and W.mT.is_contiguous():
        P, Q = krylov_rows(W.mT, P0, T, s, Q0, add_Q=add_P, add_P=add_Q, kernel=kernel)
        return Q, P
    present = [t for t in (W, Q0, P0, add_Q, add_P) if t is not None]
    grad_mode = torch.is_grad_enabled()
    usable = kernel and W.dim() == 2 and all(_plain(t, grad_mode) for t in present)
    fn = _load() if usable else None
    if fn is None:
        Q = None if Q0 is None else _torch_rows(W, Q0, T, s, True, add_Q)
        P = None if P0 is None else _torch_rows(W, P0, T, s, False, add_P)
        return Q, P
    n = W.shape[-1]
    Wc = W.contiguous()
    kq = 0 if Q0 is None else Q0.shape[0]
    kp = 0 if P0 is None else P0.shape[0]
    Q = W.new_empty(T, kq, n)
    P = W.new_empty(T, kp, n)
    if kq:
        Q[0] = Q0
    if kp:
        P[0] = P0
    add_Q = None if add_Q is None or not kq else add_Q.contiguous()
    add_P = None if add_P is None or not kp else add_P.contiguous()
    threads = 1 if n < 256 else max(1, torch.get_num_threads())
    status = fn(Wc.data_ptr(), n, float(s), T, Q.data_ptr(), kq, P.data_ptr(), kp,
                 None if add_Q is None else add_Q.data_ptr(),
                 None if add_P is None else add_P.data_ptr(), threads)
    if status != 0:
        raise MemoryError(f"lib.krylov: no memory for the kernel's scratch ({threads} x {kp} x {n})")
    return (Q if kq else None), (P if kp else None)


def adjoint_rows(W: torch.Tensor, G: torch.Tensor, s: float) -> torch.Tensor:
    """The backward (adjoint) recursion V_{T-1} = G_{T-1}, V_k = s V_{k+1} W + G_k, as rows.

    G: (T, k, n); returns V (T, k, n).  It is the affine P-sequence of ``krylov_rows`` run
    from the end, so it takes the kernel (or the torch path) on the same terms.
    """
    T = G.shape[0]
    G_rev = G.flip(0)
    _, V_rev = krylov_rows(W, None, T, s, G_rev[0], add_P=G_rev)
    return V_rev.flip(0)
