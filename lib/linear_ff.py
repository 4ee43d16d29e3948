"""From a linear feedforward network to a linear RNN (Sperduti 2015, §3.1 "Linear functions").

Conventions (shapes), shared by :mod:`lib.nonlinear_ff`: sequences are lists of ``(l_q, a)``
tensors; ``l`` is the window of the feedforward network (>= the longest sequence); a prefix
``(q, t)`` is fed to the feedforward network as the row ``xi = [x_t, x_{t-1}, ..., x_1, 0, ...]``
of :func:`state_matrix` (length ``a l``).  A linear network is a weight vector ``w`` ``(a l,)``
whose lag-``k`` block ``w_k = w[(k-1)a : k a]`` multiplies ``x_{t-k+1}``.

* :class:`LinearStateSpace` — the linear system every construction here returns.
* :func:`lag_matrix`, :func:`rank_and_timespan` — ``W = [w_1 ... w_l]`` and Definition 3.1.
* :func:`linear_ff_to_rnn` — ``W = B Gamma``, the matrix ``Z`` and the linear RNN
  ``y_t = A B^T x_t + B y_{t-1}``, ``o_t = vec(Gamma)^T U y_t`` (state ``rho = rank Z``), or,
  with ``reduced=True``, the forgetting construction of Theorem 3.1.
* :func:`theorem31_bound` — Theorem 3.1's ``min{N, [(1 + 2t*) r* - r*^2] / 2}``.
* :func:`forgetting_shift_register` — Theorem 3.1's memory before the SVD (no data needed).

The forgetting memory of one lag matrix (basis chosen backwards, kept and forgotten
coordinates, the shifts ``P`` and ``R_{/pi}``) is built once here, by ``forgetting_memory``; the §3.2
construction with forgetting units (:func:`lib.nonlinear_ff.general_ff_to_rnn_forgetting`) uses
it for every hidden unit.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from ._checks import DTYPE, as_tensor, nonneg_real, positive_int
from .sequence_memory import (autoencoder_matrices, check_sequences, encode, shift_operators, state_matrix,
                              thin_svd)

__all__ = [
    "LinearStateSpace",
    "lag_matrix",
    "linear_ff_outputs",
    "rank_and_timespan",
    "theorem31_bound",
    "linear_ff_to_rnn",
    "forgetting_shift_register",
]


@dataclass
class LinearStateSpace:
    """``y_t = A_in x_t + B y_{t-1}``, ``o_t = c^T y_t`` (y_0 = 0).

    Derived in Chapter 8, sections "sec-linear-construction" and "sec-theorem31"; Chapter 9, section
    "sec-one-step", returns the 1-time-step RNN in this form.

    A_in ``(rho, a)``, B ``(rho, rho)``, c ``(rho,)``; ``info`` holds the construction's
    diagnostics (ranks, timespan, bounds).
    """

    A_in: torch.Tensor
    B: torch.Tensor
    c: torch.Tensor
    info: dict = field(default_factory=dict)

    @property
    def state_size(self) -> int:
        return int(self.B.shape[0])

    def run(self, sequences) -> torch.Tensor:
        """Outputs on every prefix, concatenated over sequences: ``(N,)``."""
        if self.state_size == 0:
            seqs = check_sequences(sequences, features=self.A_in.shape[1])
            return torch.zeros(sum(s.shape[0] for s in seqs), dtype=DTYPE)
        return torch.cat(encode(self.A_in, self.B, sequences)) @ self.c


def _check_w(w, a: int) -> torch.Tensor:
    w = as_tensor("w", w, 1, dtype=DTYPE)
    if w.shape[0] == 0 or w.shape[0] % a:
        raise ValueError(f"w must have length a*l (a multiple of a = {a}, > 0), got {w.shape[0]}")
    return w


def check_window(name: str, l: int, seqs) -> None:
    """The feedforward window ``l`` of the weights ``name`` must cover the longest sequence."""
    longest = max(s.shape[0] for s in seqs)
    if l < longest:
        raise ValueError(f"{name} covers l = {l} lags but the longest sequence has {longest} items")


def lag_matrix(w: torch.Tensor, a: int) -> torch.Tensor:
    """``W = [w_1 w_2 ... w_l]`` ``(a, l)``: column k-1 is the weight block of lag k.

    Derived in Chapter 8, section "sec-linear-construction", which factors it as W = B Gamma.
    """
    a = positive_int("a", a)
    w = _check_w(w, a)
    return w.reshape(-1, a).T


def linear_ff_outputs(w: torch.Tensor, sequences) -> torch.Tensor:
    """The linear network ``o = w^T xi`` on every prefix: ``Xi w`` ``(N,)``.

    Used in Chapter 8, sections "sec-linear-construction", "sec-theorem31" and
    "sec-vandermonde-vs-sperduti", for the feedforward outputs d that the RNNs must reproduce.
    """
    seqs = check_sequences(sequences)
    a = seqs[0].shape[1]
    w = _check_w(w, a)
    return state_matrix(seqs, w.shape[0] // a) @ w


def rank_and_timespan(w: torch.Tensor, a: int, rtol: float = 1e-12) -> tuple[int, int]:
    """Definition 3.1: ``r* = rank W`` and ``t*`` = the largest lag with ``w_{t*} != 0``.

    Chapter 8, section "sec-theorem31".
    """
    rtol = nonneg_real("rtol", rtol)
    W = lag_matrix(w, a)
    scale = float(W.abs().max())
    if scale == 0:
        return 0, 0
    nz = (W.abs().amax(0) > rtol * scale).nonzero()
    sv = torch.linalg.svdvals(W)
    return int((sv > rtol * sv[0] * max(W.shape)).sum()), int(nz[-1]) + 1


def forgetting_size(r: int, t: int) -> int:
    """``[(1 + 2t) r - r^2] / 2``, the most coordinates a forgetting memory of rank r and timespan
    t keeps.  ``r (1 + 2t - r)`` is even (its two factors sum to the odd 1 + 2t), so the halving
    is exact."""
    return ((1 + 2 * t) * r - r * r) // 2


def theorem31_bound(N: int, r: int, t: int) -> int:
    """``min{N, [(1 + 2 t*) r* - r*^2] / 2}`` (Theorem 3.1).

    Derived with sympy in Chapter 8, section "sec-theorem31".

    N >= 1 (total length of the sequences), t = t* >= 0 (timespan), 0 <= r = r* <= t* (the
    rank of W, whose t* columns are w_1..w_t*).
    """
    N = positive_int("N", N)
    t = positive_int("t", t, minimum=0)
    r = positive_int("r", r, minimum=0)
    if r > t:
        raise ValueError(f"r (the rank r* of W) must be <= t (its timespan t*, the number of its "
                         f"columns), got r={r}, t={t}")
    return min(N, forgetting_size(r, t))


def _backward_basis(W: torch.Tensor, t_star: int, rtol: float):
    """Columns of W chosen from lag t* backwards whenever independent of those already chosen.

    Returns the basis ``(a, r)``, the lags ``tau`` (1-based, decreasing) of the chosen columns,
    and Gamma ``(r, t*)`` with ``Gamma[i, k-1] = 0`` whenever ``k > tau_i`` (``W = Basis Gamma``).
    """
    scale = float(torch.linalg.norm(W))
    chosen: list[int] = []
    Q = torch.zeros(W.shape[0], 0, dtype=DTYPE)
    for k in range(t_star, 0, -1):
        v = W[:, k - 1]
        res = v - Q @ (Q.T @ v)
        res = res - Q @ (Q.T @ res)  # re-orthogonalise (Gram-Schmidt twice)
        if float(torch.linalg.norm(res)) > rtol * scale:
            chosen.append(k)
            Q = torch.cat([Q, (res / torch.linalg.norm(res))[:, None]], 1)
    Bas = W[:, [k - 1 for k in chosen]]
    tau = torch.tensor(chosen)
    Gamma = torch.zeros(len(chosen), t_star, dtype=DTYPE)
    for k in range(1, t_star + 1):
        idx = (tau >= k).nonzero().flatten()
        sol = torch.linalg.lstsq(Bas[:, idx], W[:, k - 1:k]).solution
        Gamma[idx, k - 1] = sol[:, 0]
    return Bas, tau, Gamma


class ForgettingMemory(NamedTuple):
    """Theorem 3.1's forgetting memory of one lag matrix (see :func:`forgetting_memory`)."""

    Bas: torch.Tensor      # (a, r) basis chosen backwards from w_{t*}
    tau: torch.Tensor      # (r,) the lag at which each basis column entered
    Gamma: torch.Tensor    # (r, t*) W = Bas Gamma
    kept: list             # state coordinates (k-1) r + i with k <= tau_i
    forget: list           # the others: pi, annihilated by R_{r, r t*/pi}
    P: torch.Tensor        # (r t*, r)    P_{r, r t*}
    R: torch.Tensor        # (r t*, r t*) R_{r, r t*/pi}


def forgetting_memory(W: torch.Tensor, t_star: int, rtol: float) -> ForgettingMemory:
    """The forgetting memory of the lag matrix ``W`` (timespan ``t_star``): the state
    ``[xi_t; xi_{t-1}; ...; xi_{t-t*+1}]`` with ``xi = Bas^T x``, whose coordinate
    ``(k-1) r + i`` (component i at lag k) is kept for ``k <= tau_i`` and forgotten after."""
    Bas, tau, Gamma = _backward_basis(W, t_star, rtol)
    r = Bas.shape[1]
    kept, forget = [], []
    for k in range(1, t_star + 1):
        for i in range(r):
            (kept if k <= int(tau[i]) else forget).append((k - 1) * r + i)
    P, R = shift_operators(r, r * t_star, forget)
    return ForgettingMemory(Bas, tau, Gamma, kept, forget, P, R)


def forgetting_states(seqs, f: ForgettingMemory, l: int) -> torch.Tensor:
    """``Z_{/pi}`` ``(N, r t*)``: the state matrix of the sequences ``Bas^T x_t`` cut to the first
    t* lags, with the forgotten columns set to zero."""
    Z = state_matrix([s @ f.Bas for s in seqs], l)[:, : f.P.shape[0]].clone()
    Z[:, f.forget] = 0.0
    return Z


def linear_ff_to_rnn(w: torch.Tensor, sequences, reduced: bool = False, rtol: float = 1e-12,
                     svd_rtol: float | None = None) -> LinearStateSpace:
    """A linear RNN equal to the linear network ``w`` on every prefix of ``sequences``.

    Derived in Chapter 8 (sections "sec-linear-construction" and "sec-theorem31").

    ``reduced=False`` (§3.1): orthonormal basis ``W = Bas Gamma`` (``Bas`` ``(a, r)``),
    ``xi_t = Bas^T x_t``, ``Z`` = state matrix of the xi-sequences ``(N, r l)``, thin SVD
    ``Z = V Lambda U^T``; ``A_in = U^T P_{r,rl} Bas^T``, ``B = U^T R_{r,rl} U``,
    ``c = U^T vec(Gamma)``; state ``rho = rank Z``.

    ``reduced=True`` (Theorem 3.1): basis chosen backwards from ``w_{t*}``; component i of
    ``xi`` is kept only for lags ``k <= tau_i`` (the forgetting shift ``R_{r, r t*/pi}``);
    state ``rho_{/pi} = rank Z_{/pi} <= min{N, sum tau_i} <= theorem31_bound``.
    """
    seqs = check_sequences(sequences)
    a = seqs[0].shape[1]
    w = _check_w(w, a)
    l = w.shape[0] // a
    N = sum(s.shape[0] for s in seqs)
    check_window("w", l, seqs)
    W = lag_matrix(w, a)
    r_star, t_star = rank_and_timespan(w, a, rtol)
    if r_star == 0:
        raise ValueError("w must be non-zero (its rank and timespan are 0)")
    info = dict(N=N, a=a, l=l, r_star=r_star, t_star=t_star, bound=theorem31_bound(N, r_star, t_star))
    if not reduced:
        Ub, sv, _ = torch.linalg.svd(W, full_matrices=False)
        Bas = Ub[:, :r_star]
        Gamma = Bas.T @ W  # (r, l)
        xi = [s @ Bas for s in seqs]
        Z = state_matrix(xi, l)
        _, lam, U = thin_svd(Z, rtol=svd_rtol)
        A, B = autoencoder_matrices(U, r_star)
        c = U.T @ Gamma.T.reshape(-1)
        info.update(rho=U.shape[1], lam=lam, columns=Z.shape[1])
        return LinearStateSpace(A @ Bas.T, B, c, info)
    f = forgetting_memory(W, t_star, rtol)
    Z = forgetting_states(seqs, f, l)
    _, lam, U = thin_svd(Z, rtol=svd_rtol)
    A = U.T @ f.P
    B = U.T @ f.R @ U
    c = U.T @ f.Gamma.T.reshape(-1)
    info.update(rho=U.shape[1], lam=lam, tau=f.tau.tolist(), kept=len(f.kept), columns=Z.shape[1])
    return LinearStateSpace(A @ f.Bas.T, B, c, info)


def forgetting_shift_register(w: torch.Tensor, a: int, rtol: float = 1e-12) -> LinearStateSpace:
    """The forgetting construction of Theorem 3.1 *before* its SVD: a linear system that needs
    no data and is exact on every input sequence.

    With the basis chosen backwards from ``w_{t*}`` (lags ``tau_1 = t* > tau_2 > ...``), the
    state holds component i of ``xi_{t-k+1} = Bas^T x_{t-k+1}`` for the lags ``k <= tau_i``:
    ``sum_i tau_i <= [(1 + 2t*) r* - r*^2] / 2`` coordinates, updated by the 0/1 forgetting
    shift ``R_{r, r t*/pi}`` restricted to the kept coordinates; ``o_t = vec(Gamma)^T z_t``.
    ``w`` ``(a l,)``, ``a`` the item size.  Chapter 8, section "sec-vandermonde-vs-sperduti"
    ("Two realizations of the same map").
    """
    a = positive_int("a", a)
    w = _check_w(w, a)
    rtol = nonneg_real("rtol", rtol)
    r_star, t_star = rank_and_timespan(w, a, rtol)
    if r_star == 0:
        raise ValueError("w must be non-zero (its rank and timespan are 0)")
    f = forgetting_memory(lag_matrix(w, a), t_star, rtol)
    A_in = f.P[f.kept] @ f.Bas.T
    B = f.R[f.kept][:, f.kept]
    c = f.Gamma.T.reshape(-1)[f.kept]
    info = dict(a=a, l=w.shape[0] // a, r_star=r_star, t_star=t_star, tau=f.tau.tolist(), kept=len(f.kept),
                bound=forgetting_size(r_star, t_star))
    return LinearStateSpace(A_in, B, c, info)
