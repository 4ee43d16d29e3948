"""From feedforward networks over unrolled prefixes to recurrent networks (Sperduti 2015, §3).

Conventions (shapes): sequences are lists of ``(l_q, a)`` tensors; ``l`` is the window of the
feedforward network (>= the longest sequence); a prefix ``(q, t)`` is fed to the feedforward
network as the row ``xi = [x_t, x_{t-1}, ..., x_1, 0, ...]`` of :func:`state_matrix` (length
``a l``).  A linear network is a weight vector ``w`` ``(a l,)`` whose lag-``k`` block
``w_k = w[(k-1)a : k a]`` multiplies ``x_{t-k+1}``.

* :func:`linear_ff_to_rnn` — Section 3.1: ``W = B Gamma``, the matrix ``Z`` and the linear RNN
  ``y_t = A B^T x_t + B y_{t-1}``, ``o_t = vec(Gamma)^T U y_t`` (state ``rho = rank Z``), or,
  with ``reduced=True``, the forgetting construction of Theorem 3.1 (state
  ``<= min{N, [(1 + 2t*) r* - r*^2] / 2}``).
* :func:`general_ff_to_rnn` — Section 3.2, general single-hidden-layer tanh network: H tanh
  units fed by a linear memory of size ``rho~ = rank Y~`` (fast path through one SVD of
  ``Xi (I (x) S^{1/2})``; :func:`general_ff_to_rnn_reference` builds ``Y~`` literally).
* :func:`one_step_ff_to_rnn` — Definition 3.2 networks: H tanh units + ``rank H_{/[1,H]}``
  linear units.
* :func:`tanh_memory_beta`, :func:`tanh_memory_state_bound` — replacing linear memory units by
  ``beta tanh(z / beta)`` with a rigorous error bound.
* :func:`forgetting_shift_register` — Theorem 3.1's memory before the SVD (no data needed).
* :func:`general_ff_to_rnn_forgetting` — §3.2 with every unit's memory reduced by Theorem 3.1.
* :func:`projected_scan`, :func:`smallest_kept_k` — Fig. 5's discrepancy at every k (projected
  reading) and the smallest k that keeps every prediction.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn

from ._checks import DTYPE, as_tensor, nonneg_real, positive_int, positive_real, seed_int
from .sequence_memory import (autoencoder_matrices, check_sequences, encode, pad_sequences,
                              shift_operators, state_matrix, thin_svd)

__all__ = [
    "LinearStateSpace",
    "linear_ff_outputs",
    "lag_matrix",
    "rank_and_timespan",
    "theorem31_bound",
    "linear_ff_to_rnn",
    "FeedforwardNet",
    "MemoryRNN",
    "general_ff_to_rnn",
    "general_ff_to_rnn_reference",
    "OneStepFF",
    "one_step_ff_to_rnn",
    "tanh_memory_beta",
    "tanh_memory_state_bound",
    "tanh_beta_star",
    "forgetting_shift_register",
    "general_ff_to_rnn_forgetting",
    "projected_scan",
    "smallest_kept_k",
]


# ------------------------------------------------------------------------------------- linear

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


def theorem31_bound(N: int, r: int, t: int) -> int:
    """``min{N, [(1 + 2 t*) r* - r*^2] / 2}`` (Theorem 3.1).

    Derived with sympy in Chapter 8, section "sec-theorem31".

    N >= 1 (total length of the sequences), t = t* >= 0 (timespan), 0 <= r = r* <= t* (the
    rank of W, whose t* columns are w_1..w_t*).  r (1 + 2t - r) is even (its two factors sum
    to the odd 1 + 2t), so the halving is exact.
    """
    N = positive_int("N", N)
    t = positive_int("t", t, minimum=0)
    r = positive_int("r", r, minimum=0)
    if r > t:
        raise ValueError(f"r (the rank r* of W) must be <= t (its timespan t*, the number of its "
                         f"columns), got r={r}, t={t}")
    return min(N, ((1 + 2 * t) * r - r * r) // 2)


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
    if l < max(s.shape[0] for s in seqs):
        raise ValueError(f"w covers l = {l} lags but the longest sequence has {max(s.shape[0] for s in seqs)} items")
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
    Bas, tau, Gamma = _backward_basis(W, t_star, rtol)
    r = Bas.shape[1]
    xi = [s @ Bas for s in seqs]
    Z = state_matrix(xi, max(l, 1))[:, : r * t_star].clone()
    forget = [(k - 1) * r + i for k in range(1, t_star + 1) for i in range(r) if k > int(tau[i])]
    Z[:, forget] = 0.0
    _, lam, U = thin_svd(Z, rtol=svd_rtol)
    P, R = shift_operators(r, r * t_star, forget)
    A = U.T @ P
    B = U.T @ R @ U
    c = U.T @ Gamma.T.reshape(-1)
    info.update(rho=U.shape[1], lam=lam, tau=tau.tolist(), kept=int(tau.sum()), columns=r * t_star)
    return LinearStateSpace(A @ Bas.T, B, c, info)


# ---------------------------------------------------------------------------------- nonlinear

class FeedforwardNet(nn.Module):
    """Single-hidden-layer tanh network on the unrolled prefix ``xi`` ``(..., a l)`` (§2.2):
    ``o = tanh(w_o^T tanh(W xi + b) + b_o)``.  W ``(H, a l)``, b ``(H,)``, w_o ``(H,)``, b_o scalar.
    ``out_tanh=False`` leaves the output linear.

    Used in Chapter 9, sections "sec-general-ff" (small random networks, converted) and
    "sec-protein" (the §4 network, trained).
    """

    def __init__(self, a: int, l: int, hidden: int, seed: int = 0, init_scale: float = 1.0,
                 out_tanh: bool = True, dtype=DTYPE):
        super().__init__()
        a, l, hidden = positive_int("a", a), positive_int("l", l), positive_int("hidden", hidden)
        init_scale = positive_real("init_scale", init_scale)
        g = torch.Generator().manual_seed(seed_int("seed", seed))
        self.a, self.l, self.out_tanh = a, l, out_tanh
        self.W = nn.Parameter(torch.randn(hidden, a * l, generator=g, dtype=dtype) * init_scale / math.sqrt(a * l))
        self.b = nn.Parameter(torch.zeros(hidden, dtype=dtype))
        self.w_o = nn.Parameter(torch.randn(hidden, generator=g, dtype=dtype) * init_scale / math.sqrt(hidden))
        self.b_o = nn.Parameter(torch.zeros((), dtype=dtype))

    def hidden(self, xi: torch.Tensor) -> torch.Tensor:
        return torch.tanh(xi @ self.W.T + self.b)

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        z = self.hidden(xi) @ self.w_o + self.b_o
        return torch.tanh(z) if self.out_tanh else z


@dataclass
class MemoryRNN:
    """RNN of §3.2: a linear memory ``y_t = A_in x_t + B y_{t-1}`` (``rho`` units), H tanh units
    ``h_t = tanh(G y_t + b)`` and the output ``o_t = tanh(w_o^T h_t + b_o)``.

    Derived in Chapter 9, sections "sec-general-ff" and "sec-rho-general" (the RNNs built there);
    section "sec-tanh-memory" runs it with ``beta``, section "sec-smallest-k" truncates its memory.

    A_in ``(rho, a)``, B ``(rho, rho)``, G ``(H, rho)``, b ``(H,)``, w_o ``(H,)``, b_o scalar.
    ``beta`` (optional) replaces the linear memory units by ``beta tanh(z / beta)`` units.
    """

    A_in: torch.Tensor
    B: torch.Tensor
    G: torch.Tensor
    b: torch.Tensor
    w_o: torch.Tensor
    b_o: torch.Tensor
    out_tanh: bool = True
    info: dict = field(default_factory=dict)

    @property
    def state_size(self) -> int:
        return int(self.B.shape[0])

    @property
    def hidden_units(self) -> int:
        return int(self.G.shape[0]) + self.state_size

    def truncated(self, k: int) -> "MemoryRNN":
        """The RNN with the memory cut to its first k state units.

        For the SVD constructions (state = leading right singular vectors) this *is* the RNN
        built from the first k singular values: ``A = U_k^T P``, ``B = U_k^T R U_k`` and
        ``G = W U_k`` are the leading rows / block / columns of the full ones.
        """
        k = positive_int("k", k, minimum=0)
        if k > self.state_size:
            raise ValueError(f"k must be <= the state size {self.state_size}, got {k}")
        return MemoryRNN(self.A_in[:k], self.B[:k, :k], self.G[:, :k], self.b, self.w_o, self.b_o,
                         self.out_tanh, dict(self.info, rho=k))

    def outputs_from_states(self, Y: torch.Tensor) -> torch.Tensor:
        """Outputs ``(N,)`` for given memory states ``Y`` ``(N, k)``, k <= rho (the first k units)."""
        Y = as_tensor("Y", Y, 2, dtype=DTYPE)
        if Y.shape[1] > self.state_size:
            raise ValueError(f"Y must have at most {self.state_size} columns, got {Y.shape[1]}")
        return self._out(Y @ self.G[:, : Y.shape[1]].T)

    def _out(self, net: torch.Tensor) -> torch.Tensor:
        z = torch.tanh(net + self.b) @ self.w_o + self.b_o
        return torch.tanh(z) if self.out_tanh else z

    def states(self, sequences, beta: float | None = None) -> list[torch.Tensor]:
        """Memory states ``(l_q, rho)`` per sequence (linear, or ``beta tanh(./beta)`` units)."""
        if beta is None:
            return encode(self.A_in, self.B, sequences)
        beta = positive_real("beta", beta)
        X, _ = pad_sequences(check_sequences(sequences, features=self.A_in.shape[1]))
        inp = X @ self.A_in.T
        y = torch.zeros(X.shape[0], self.state_size, dtype=DTYPE)
        Y = torch.empty(X.shape[0], X.shape[1], self.state_size, dtype=DTYPE)
        for t in range(X.shape[1]):
            y = beta * torch.tanh((inp[:, t] + y @ self.B.T) / beta)
            Y[:, t] = y
        return [Y[q, :s.shape[0]] for q, s in enumerate(sequences)]

    def net_inputs(self, sequences, beta: float | None = None) -> torch.Tensor:
        """Hidden net inputs ``G y_t`` on every prefix ``(N, H)`` by running the recurrence."""
        return torch.cat(self.states(sequences, beta)) @ self.G.T

    def markov_parameters(self, l: int) -> torch.Tensor:
        """``[K_0 K_1 ... K_{l-1}]`` ``(H, a l)`` with ``K_j = G B^j A_in``: the hidden net input
        on a prefix is ``K xi`` when the memory forgets everything older than l items (the
        full-window feedforward view; Chapter 9 checks ``B^l A_in = 0`` for the held-out proteins)."""
        l = positive_int("l", l)
        L = self.G.clone()
        K = []
        for _ in range(l):
            K.append(L @ self.A_in)
            L = L @ self.B
        return torch.cat(K, 1)

    def net_inputs_markov(self, sequences) -> torch.Tensor:
        """Same as :meth:`net_inputs` (linear memory) through the Markov parameters
        ``K_j = G B^j A_in`` ``(H, a)``: ``net = Xi [K_0 K_1 ...]^T`` — H-row products
        instead of a batch of state products (fast path)."""
        seqs = check_sequences(sequences, features=self.A_in.shape[1])
        l = max(s.shape[0] for s in seqs)
        L = self.G.clone()
        K = []
        for _ in range(l):
            K.append(L @ self.A_in)
            L = L @ self.B
        return state_matrix(seqs, l) @ torch.cat(K, 1).T

    def __call__(self, sequences, beta: float | None = None, markov: bool = False) -> torch.Tensor:
        """Outputs ``(N,)`` on every prefix."""
        net = self.net_inputs_markov(sequences) if (markov and beta is None) else self.net_inputs(sequences, beta)
        return self._out(net)


def _check_ff(W_hid, b, w_o, a):
    W_hid = as_tensor("W_hid", W_hid, 2, dtype=DTYPE)
    if W_hid.shape[1] % a or W_hid.shape[1] == 0:
        raise ValueError(f"W_hid must be (H, a*l) with a = {a}, got {tuple(W_hid.shape)}")
    H = W_hid.shape[0]
    b = as_tensor("b", b, 1, dtype=DTYPE)
    w_o = as_tensor("w_o", w_o, 1, dtype=DTYPE)
    if b.shape[0] != H or w_o.shape[0] != H:
        raise ValueError(f"b and w_o must have H = {H} entries, got {b.shape[0]} and {w_o.shape[0]}")
    return W_hid, b, w_o


def _unit_bases(W_hid: torch.Tensor, a: int, rtol: float):
    """Orthonormal bases ``Bas_h`` ``(a, r_h)`` of the column spaces of the lag matrices W_h."""
    bases = []
    for h in range(W_hid.shape[0]):
        Wh = lag_matrix(W_hid[h], a)
        Ub, sv, _ = torch.linalg.svd(Wh, full_matrices=False)
        r = int((sv > rtol * max(float(sv[0]), 1e-300) * max(Wh.shape)).sum()) if float(sv[0]) > 0 else 0
        bases.append(Ub[:, :r])
    return bases


def general_ff_to_rnn(W_hid, b, w_o, b_o, sequences, rank: int | None = None, rtol: float = 1e-12,
                      svd_rtol: float | None = None, out_tanh: bool = True) -> MemoryRNN:
    """The §3.2 RNN of a general single-hidden-layer network (fast path, one SVD).

    Derived in Chapter 9 (sections "sec-general-ff" and "sec-rho-general").

    Per hidden unit h: ``W_h = Bas_h Gamma_h`` (orthonormal ``Bas_h``), ``Z(h) = Xi (I_l (x) Bas_h)``
    and ``Y~ = [Z(1) ... Z(H)]``.  Since ``Y~ Y~^T = Xi (I (x) S) Xi^T`` with
    ``S = sum_h Bas_h Bas_h^T`` ``(a, a)``, the thin SVD of ``Y~`` follows from that of
    ``M = Xi (I (x) S^{1/2})`` ``(N, a l)``: the same singular values, and
    ``U~_(h) = (I (x) Bas_h^T S^{+1/2}) U_M``.  The memory is then the autoencoder of the
    sequences ``S^{1/2} x_t``: ``A_in = U_M[:a]^T S^{1/2}``, ``B = U_M^T R U_M``, and
    ``G = W_hid (I (x) S^{+1/2}) U_M`` ``(H, rho~)``.  ``rank`` truncates to the leading k
    singular vectors (the RNNs of Fig. 5).  ``info['timing']`` holds the SVD's wall time and
    ``info['states']`` ``(N, rho~)`` the exact memory states ``V Lambda`` of all prefixes,
    ``info['U']`` and ``info['S_ihalf']`` the right singular vectors ``U_M`` and ``S^{+1/2}``.
    """
    import time

    seqs = check_sequences(sequences)
    a = seqs[0].shape[1]
    W_hid, b, w_o = _check_ff(W_hid, b, w_o, a)
    l = W_hid.shape[1] // a
    bases = _unit_bases(W_hid, a, rtol)
    S = sum(Bh @ Bh.T for Bh in bases)
    ev, Q = torch.linalg.eigh(S)
    keep = ev > ev.max() * a * torch.finfo(DTYPE).eps
    S_half = (Q[:, keep] * ev[keep].sqrt()) @ Q[:, keep].T
    S_ihalf = (Q[:, keep] / ev[keep].sqrt()) @ Q[:, keep].T
    Xi_t = state_matrix([s @ S_half for s in seqs], l)  # M = Xi (I (x) S^{1/2})  (S^{1/2} symmetric)
    t0 = time.perf_counter()
    V, lam, U = thin_svd(Xi_t, rank=rank, rtol=svd_rtol)
    t_svd = time.perf_counter() - t0
    A, B = autoencoder_matrices(U, a)
    # G = W_hid (I (x) S^{+1/2}) U: apply S^{+1/2} to each lag block of every hidden weight vector
    W_t = (W_hid.reshape(-1, l, a) @ S_ihalf).reshape(W_hid.shape[0], -1)
    G = W_t @ U
    info = dict(rho=U.shape[1], lam=lam, ranks=[int(Bh.shape[1]) for Bh in bases], shape=tuple(Xi_t.shape),
                timing=t_svd, N=Xi_t.shape[0], states=V * lam,  # states: the exact memory states M U = V Lambda
                U=U, S_ihalf=S_ihalf)
    return MemoryRNN(A @ S_half, B, G, b, w_o, torch.as_tensor(b_o, dtype=DTYPE), out_tanh, info)


def general_ff_to_rnn_reference(W_hid, b, w_o, b_o, sequences, rtol: float = 1e-12,
                                svd_rtol: float | None = None, out_tanh: bool = True) -> MemoryRNN:
    """The literal §3.2 construction: build ``Y~ = [Z(1) ... Z(H)]`` ``(N, sum_h r_h l)``, take its
    thin SVD ``Y~ = V~ Lambda~ U~^T`` and set ``A = sum_h U~_(h)^T P Bas_h^T``,
    ``B = sum_h U~_(h)^T R U~_(h)``, ``G[h] = vec(Gamma_h)^T U~_(h)`` (reference for tests).

    Derived in Chapter 9, section "sec-general-ff", which checks :func:`general_ff_to_rnn` against
    it.
    """
    seqs = check_sequences(sequences)
    a = seqs[0].shape[1]
    W_hid, b, w_o = _check_ff(W_hid, b, w_o, a)
    l = W_hid.shape[1] // a
    bases = _unit_bases(W_hid, a, rtol)
    Zs = [state_matrix([s @ Bh for s in seqs], l) for Bh in bases]
    Yt = torch.cat(Zs, 1)
    _, lam, U = thin_svd(Yt, rtol=svd_rtol)
    rho = U.shape[1]
    A = torch.zeros(rho, a, dtype=DTYPE)
    B = torch.zeros(rho, rho, dtype=DTYPE)
    G = torch.zeros(W_hid.shape[0], rho, dtype=DTYPE)
    off = 0
    for h, Bh in enumerate(bases):
        r = Bh.shape[1]
        Uh = U[off: off + r * l]
        off += r * l
        if r == 0:
            continue
        P, R = shift_operators(r, r * l)
        A += Uh.T @ P @ Bh.T
        B += Uh.T @ R @ Uh
        Gamma = Bh.T @ lag_matrix(W_hid[h], a)
        G[h] = Gamma.T.reshape(-1) @ Uh
    info = dict(rho=rho, lam=lam, shape=tuple(Yt.shape))
    return MemoryRNN(A, B, G, b, w_o, torch.as_tensor(b_o, dtype=DTYPE), out_tanh, info)


class OneStepFF:
    """A feedforward network with the 1-time-step property (Def. 3.2).

    Derived in Chapter 9, section "sec-one-step".

    Unit h (``W_u[h]`` ``(a,)``) reads only the item at lag ``slots[h]`` (1-based):
    ``o(prefix) = tanh(b_o + sum_h w_o[h] tanh(W_u[h]^T x_{t - slots[h] + 1}))``, the sum over
    units whose lag lies inside the prefix (zero padding: ``tanh(W_u 0) = 0``; a bias is a
    constant-1 input feature, which padded items lack).
    """

    def __init__(self, W_u, slots, w_o, b_o=0.0, out_tanh: bool = True):
        self.W_u = as_tensor("W_u", W_u, 2, dtype=DTYPE)
        H = self.W_u.shape[0]
        self.slots = torch.as_tensor(slots, dtype=torch.long)
        if self.slots.shape != (H,) or (self.slots < 1).any():
            raise ValueError(f"slots must hold H = {H} lags >= 1, got {slots!r}")
        self.w_o = as_tensor("w_o", w_o, 1, dtype=DTYPE)
        if self.w_o.shape[0] != H:
            raise ValueError(f"w_o must have H = {H} entries, got {self.w_o.shape[0]}")
        self.b_o = float(b_o)
        self.out_tanh = out_tanh

    @property
    def l(self) -> int:
        return int(self.slots.max())

    def feature_weights(self, l: int) -> torch.Tensor:
        """``w~`` ``(H l,)``: lag block k holds ``w_o[h]`` at the units of slot k, zeros elsewhere."""
        H = self.W_u.shape[0]
        wt = torch.zeros(l, H, dtype=DTYPE)
        for h in range(H):
            if int(self.slots[h]) <= l:
                wt[int(self.slots[h]) - 1, h] = self.w_o[h]
        return wt.reshape(-1)

    def features(self, sequences) -> list[torch.Tensor]:
        """The sequences of ``h(x_t) = tanh(W_u x_t)`` ``(l_q, H)``."""
        return [torch.tanh(s @ self.W_u.T) for s in check_sequences(sequences, features=self.W_u.shape[1])]

    def __call__(self, sequences) -> torch.Tensor:
        """Outputs on every prefix ``(N,)`` (direct evaluation over the unrolled prefix)."""
        feats = self.features(sequences)
        l = max(max(f.shape[0] for f in feats), self.l)
        z = state_matrix(feats, l) @ self.feature_weights(l) + self.b_o
        return torch.tanh(z) if self.out_tanh else z


def one_step_ff_to_rnn(net: OneStepFF, sequences, reduced: bool = False, svd_rtol: float | None = None):
    """RNN for a 1-time-step network; returns ``(memory, readout)``.

    Derived in Chapter 9, section "sec-one-step".

    ``reduced=False`` (§3.2 as printed): the memory is the autoencoder of ``H_{/[1,H]}`` (the
    feature state matrix without its first H columns), state ``rank H_{/[1,H]}``, fed by
    ``h(x_{t-1})``; the output is ``tanh(b_o + w~_1^T h(x_t) + w~_{/1}^T U y~_{t-1})``.
    Returned as a :class:`LinearStateSpace` on the feature sequences whose state is
    ``[h(x_t); y~_{t-1}]`` flattened into one linear system (H + rho units).

    ``reduced=True``: Theorem 3.1 applied to the linear map ``w~`` on the feature sequences.
    """
    if not isinstance(net, OneStepFF):
        raise TypeError(f"net must be a OneStepFF, got {type(net).__name__}")
    feats = net.features(sequences)
    H = net.W_u.shape[0]
    l = max(max(f.shape[0] for f in feats), net.l)
    wt = net.feature_weights(l)
    if reduced:
        return linear_ff_to_rnn(wt, feats, reduced=True, svd_rtol=svd_rtol)
    Hm = state_matrix(feats, l)
    N = Hm.shape[0]
    if l == 1:
        U = torch.zeros(0, 0, dtype=DTYPE)
        rho = 0
    else:
        _, _, U = thin_svd(Hm[:, H:], rtol=svd_rtol)
        rho = U.shape[1]
    # state [h_t (H) ; y~_{t-1} (rho)]:  h_t = I x_t ;  y~_t = A h_{t} + B y~_{t-1} is y~ one step
    # later, so the joint system is  s_t = [I; 0] x_t + [[0, 0], [A, B]] s_{t-1}
    A_in = torch.zeros(H + rho, H, dtype=DTYPE)
    A_in[:H] = torch.eye(H, dtype=DTYPE)
    Bj = torch.zeros(H + rho, H + rho, dtype=DTYPE)
    c = torch.zeros(H + rho, dtype=DTYPE)
    c[:H] = wt[:H]
    if rho:
        A, B = autoencoder_matrices(U, H)
        Bj[H:, :H] = A
        Bj[H:, H:] = B
        c[H:] = U.T @ wt[H:]
    return LinearStateSpace(A_in, Bj, c, dict(rho=rho, N=N, H=H, units=H + rho))


# ------------------------------------------------------------------------------ tanh memory

def tanh_beta_star(b: float, eps: float) -> float:
    """``beta* = sqrt(b^3 / (3 eps))``: for ``beta >= beta*`` and ``|z| <= b``,
    ``|beta tanh(z / beta) - z| <= |z|^3 / (3 beta^2) < eps`` (strict for z != 0).

    Derived in Chapter 9, section "sec-tanh-linear".
    """
    b = positive_real("b", b)
    eps = positive_real("eps", eps)
    return math.sqrt(b ** 3 / (3 * eps))


def tanh_memory_state_bound(B: torch.Tensor, D: float, steps: int, beta: float) -> float:
    """Bound on ``||y^beta_t - y_t||_2`` for ``t <= steps`` when the linear memory
    ``y_t = A x_t + B y_{t-1}`` is replaced by ``y_t = beta tanh((A x_t + B y_{t-1}) / beta)``.

    Derived in Chapter 9, section "sec-tanh-linear" (its part "Through a recurrence"); section
    "sec-tanh-memory" checks it against the measured error.

    ``D >= max_t (sum_i y_{t,i}^6)^{1/2}`` over the exact linear states.  With
    ``|tanh u - u| <= |u|^3/3`` and tanh 1-Lipschitz:
    ``e_t <= ||B||_2 e_{t-1} + D / (3 beta^2)``, so ``e_t <= D/(3 beta^2) sum_{j<t} ||B||_2^j``.
    """
    B = as_tensor("B", B, 2, dtype=DTYPE)
    beta = positive_real("beta", beta)
    steps = positive_int("steps", steps)
    if isinstance(D, bool) or not isinstance(D, (int, float)) or not math.isfinite(D) or D < 0:
        raise ValueError(f"D must be a finite real number >= 0, got {D!r}")
    nb = float(torch.linalg.matrix_norm(B, 2)) if B.numel() else 0.0
    if nb == 1.0:
        geo = float(steps)
    else:                                              # sum_{j < steps} nb^j in closed form
        try:
            geo = (1.0 - nb ** steps) / (1.0 - nb)
        except OverflowError:                          # nb > 1 and steps large: the bound is infinite
            geo = math.inf
    return D * geo / (3 * beta ** 2)


def tanh_memory_beta(B: torch.Tensor, D: float, steps: int, gain: float, eps: float) -> float:
    """Smallest beta for which ``gain * tanh_memory_state_bound(B, D, steps, beta) <= eps``.

    Derived in Chapter 9, section "sec-tanh-linear" (its part "Through a recurrence"); used in
    sections "sec-tanh-memory" and "sec-smallest-k".

    ``gain`` converts a state error into an output error (``||c||_2`` for a linear readout,
    ``sum_h |w_o[h]| ||G[h]||_2`` for the tanh readout of :class:`MemoryRNN`)."""
    eps = positive_real("eps", eps)
    gain = positive_real("gain", gain)
    return math.sqrt(gain * tanh_memory_state_bound(B, D, steps, 1.0) / eps)


# ------------------------------------------------- additions: shift register, forgetting, scans

def forgetting_shift_register(w: torch.Tensor, a: int, rtol: float = 1e-12) -> LinearStateSpace:
    """The forgetting construction of Theorem 3.1 *before* its SVD: a linear system that needs
    no data and is exact on every input sequence.

    With the basis chosen backwards from ``w_{t*}`` (lags ``tau_1 = t* > tau_2 > ...``), the
    state holds component i of ``xi_{t-k+1} = Bas^T x_{t-k+1}`` for the lags ``k <= tau_i``:
    ``sum_i tau_i <= [(1 + 2t*) r* - r*^2] / 2`` coordinates, updated by the 0/1 forgetting
    shift ``R_{r, r t*/pi}`` restricted to the kept coordinates; ``o_t = vec(Gamma)^T z_t``.
    ``w`` ``(a l,)``, ``a`` the item size.  Chapter 8, "Two realizations of the same map".
    """
    a = positive_int("a", a)
    w = _check_w(w, a)
    rtol = nonneg_real("rtol", rtol)
    r_star, t_star = rank_and_timespan(w, a, rtol)
    if r_star == 0:
        raise ValueError("w must be non-zero (its rank and timespan are 0)")
    Bas, tau, Gamma = _backward_basis(lag_matrix(w, a), t_star, rtol)
    r = Bas.shape[1]
    kept = [(k - 1) * r + i for k in range(1, t_star + 1) for i in range(r) if k <= int(tau[i])]
    forget = sorted(set(range(r * t_star)) - set(kept))
    P, R = shift_operators(r, r * t_star, forget)
    A_in = P[kept] @ Bas.T
    B = R[kept][:, kept]
    c = Gamma.T.reshape(-1)[kept]
    info = dict(a=a, l=w.shape[0] // a, r_star=r_star, t_star=t_star, tau=tau.tolist(), kept=len(kept),
                bound=((1 + 2 * t_star) * r_star - r_star ** 2) // 2)
    return LinearStateSpace(A_in, B, c, info)


def general_ff_to_rnn_forgetting(W_hid, b, w_o, b_o, sequences, rtol: float = 1e-12,
                                 svd_rtol: float | None = None, out_tanh: bool = True) -> MemoryRNN:
    """The §3.2 RNN with each hidden unit's memory reduced as in Theorem 3.1 (the construction
    behind the paper's "trivially derived" bound on the state size of general networks).

    Unit h (rank ``r_h``, timespan ``t_h`` of its lag matrix) gets the forgetting state matrix
    ``Z_{/pi}(h)`` (``N x r_h t_h``, ``sum_i tau_{h,i}`` non-zero columns); the memory is the
    thin SVD of ``Y~_{/pi} = [Z_{/pi}(1) ... Z_{/pi}(H)]`` with the block-diagonal forgetting
    shift, so its size ``rho~_{/pi} = rank Y~_{/pi}`` obeys
    ``rho~_{/pi} <= min{N, sum_h [(1 + 2 t_h) r_h - r_h^2] / 2}`` (``info['bound']``) and
    ``rho~_{/pi} <= rho~`` of :func:`general_ff_to_rnn`.  Chapter 9, "General feedforward networks".
    """
    seqs = check_sequences(sequences)
    a = seqs[0].shape[1]
    W_hid, b, w_o = _check_ff(W_hid, b, w_o, a)
    rtol = nonneg_real("rtol", rtol)
    l = W_hid.shape[1] // a
    N = sum(s.shape[0] for s in seqs)
    if l < max(s.shape[0] for s in seqs):
        raise ValueError(f"W_hid covers l = {l} lags but the longest sequence has {max(s.shape[0] for s in seqs)} items")
    Zs, Ps, Rs, cs, units = [], [], [], [], []
    for h in range(W_hid.shape[0]):
        r_h, t_h = rank_and_timespan(W_hid[h], a, rtol)
        if r_h == 0:
            units.append((0, 0, 0))
            Zs.append(torch.zeros(N, 0, dtype=DTYPE)); Ps.append(torch.zeros(0, a, dtype=DTYPE))
            Rs.append(torch.zeros(0, 0, dtype=DTYPE)); cs.append(torch.zeros(0, dtype=DTYPE))
            continue
        Bas, tau, Gamma = _backward_basis(lag_matrix(W_hid[h], a), t_h, rtol)
        r = Bas.shape[1]
        Z = state_matrix([s @ Bas for s in seqs], l)[:, : r * t_h].clone()
        forget = [(k - 1) * r + i for k in range(1, t_h + 1) for i in range(r) if k > int(tau[i])]
        Z[:, forget] = 0.0
        P, R = shift_operators(r, r * t_h, forget)
        Zs.append(Z); Ps.append(P @ Bas.T); Rs.append(R); cs.append(Gamma.T.reshape(-1))
        units.append((r_h, t_h, int(tau.sum())))
    Yt = torch.cat(Zs, 1)
    _, lam, U = thin_svd(Yt, rtol=svd_rtol)
    A = U.T @ torch.cat(Ps, 0)
    B = U.T @ torch.block_diag(*Rs) @ U
    G = torch.zeros(W_hid.shape[0], U.shape[1], dtype=DTYPE)
    off = 0
    for h, c in enumerate(cs):
        G[h] = c @ U[off: off + c.shape[0]]
        off += c.shape[0]
    bound = min(N, sum(((1 + 2 * t) * r - r * r) // 2 for r, t, _ in units))
    info = dict(rho=U.shape[1], lam=lam, shape=tuple(Yt.shape), N=N, units=units,
                kept=sum(k for _, _, k in units), bound=bound)
    return MemoryRNN(A, B, G, b, w_o, torch.as_tensor(b_o, dtype=DTYPE), out_tanh, info)


def _check_scan(rnn, Y, reference):
    if not isinstance(rnn, MemoryRNN):
        raise TypeError(f"rnn must be a MemoryRNN, got {type(rnn).__name__}")
    Y = as_tensor("Y", Y, 2, dtype=DTYPE)
    if Y.shape[1] != rnn.state_size:
        raise ValueError(f"Y must hold the exact states of all {rnn.state_size} memory units, got {Y.shape[1]} columns")
    reference = as_tensor("reference", reference, 1, dtype=DTYPE)
    if reference.shape[0] != Y.shape[0] or not bool((reference.abs() == 1).all()):
        raise ValueError(f"reference must hold one ±1 prediction per row of Y ({Y.shape[0]}), "
                         f"got shape {tuple(reference.shape)}")
    return Y, reference


def _projected_z(rnn: MemoryRNN, net0: torch.Tensor, Y: torch.Tensor, k0: int, k1: int) -> torch.Tensor:
    """Output pre-activations ``(N, k1 - k0)`` for k = k0+1..k1 given the net input at k0."""
    terms = Y[:, k0:k1, None] * rnn.G.T[None, k0:k1, :]
    nets = net0[:, None, :] + terms.cumsum(1)
    return torch.tanh(nets + rnn.b) @ rnn.w_o + rnn.b_o


def projected_scan(rnn: MemoryRNN, Y: torch.Tensor, reference: torch.Tensor, k_min: int = 0,
                   chunk: int = 64):
    """Fig. 5, reading (ii), at *every* k: the outputs from the exact states projected on the
    leading k singular vectors, ``o_k = readout(Y[:, :k] G[:, :k]^T)``, for k = k_min..rho.

    ``Y`` ``(N, rho)`` are the exact memory states (``info['states']`` of
    :func:`general_ff_to_rnn`), ``reference`` ``(N,)`` the ±1 predictions to keep.  Returns
    ``nd`` ``(rho - k_min + 1,)``, the fraction of predictions whose sign differs at each k, and
    ``settle`` ``(N,)``: for each prediction the smallest k >= k_min from which its sign agrees
    with ``reference`` at every k up to rho.  The net inputs are accumulated one singular
    direction at a time (``chunk`` directions per batch), so the scan costs about one readout
    per k.  Chapter 9, "The smallest k".
    """
    Y, reference = _check_scan(rnn, Y, reference)
    rho = rnn.state_size
    k_min = positive_int("k_min", k_min, minimum=0)
    if k_min > rho:
        raise ValueError(f"k_min must be <= the state size {rho}, got {k_min}")
    chunk = positive_int("chunk", chunk)
    net = Y[:, :k_min] @ rnn.G[:, :k_min].T
    z0 = torch.tanh(net + rnn.b) @ rnn.w_o + rnn.b_o
    dis0 = torch.where(z0 >= 0, 1.0, -1.0) != reference
    nd = [float(dis0.double().mean())]
    last = torch.where(dis0, k_min, k_min - 1)
    for k0 in range(k_min, rho, chunk):
        k1 = min(rho, k0 + chunk)
        z = _projected_z(rnn, net, Y, k0, k1)
        dis = torch.where(z >= 0, 1.0, -1.0) != reference[:, None]
        nd.extend(dis.double().mean(0).tolist())
        ks = torch.arange(k0 + 1, k1 + 1)
        last = torch.maximum(last, torch.where(dis, ks, k_min - 1).amax(1))
        net = net + Y[:, k0:k1] @ rnn.G[:, k0:k1].T
    return torch.tensor(nd, dtype=DTYPE), last + 1


def smallest_kept_k(rnn: MemoryRNN, Y: torch.Tensor, reference: torch.Tensor, chunk: int = 32):
    """The smallest k from which reading (ii) keeps every prediction for all k up to rho,
    found top-down (only the k above the answer, plus one chunk, are evaluated).

    Returns ``(k_star, flipped)``: ``flipped`` holds the indices of the predictions that
    disagree with ``reference`` at ``k_star - 1`` (empty when ``k_star == 0``).  Same inputs as
    :func:`projected_scan`, which it agrees with (``k_star == settle.max()``).  Chapter 9,
    "The smallest k".
    """
    Y, reference = _check_scan(rnn, Y, reference)
    chunk = positive_int("chunk", chunk)
    k1 = rnn.state_size
    while k1 > 0:
        k0 = max(0, k1 - chunk)
        net = Y[:, :k0] @ rnn.G[:, :k0].T
        z = torch.cat([(torch.tanh(net + rnn.b) @ rnn.w_o + rnn.b_o)[:, None], _projected_z(rnn, net, Y, k0, k1)], 1)
        dis = torch.where(z >= 0, 1.0, -1.0) != reference[:, None]   # columns k = k0..k1
        bad = dis.any(0).nonzero().flatten()
        if bad.numel():
            k_bad = k0 + int(bad[-1])
            return k_bad + 1, dis[:, k_bad - k0].nonzero().flatten()
        k1 = k0
    return 0, torch.zeros(0, dtype=torch.long)
