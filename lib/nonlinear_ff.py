"""From a single-hidden-layer tanh network to an RNN (Sperduti 2015, §3.2 "Nonlinear functions").

Shapes as in :mod:`lib.linear_ff` (sequences of ``(l_q, a)`` items, prefixes unrolled into rows
``xi`` of length ``a l``).

* :class:`FeedforwardNet` — the §2.2 network on the unrolled prefix (Chapter 9 converts small
  random ones and trains the §4 one).
* :class:`OneStepFF`, :func:`one_step_ff_to_rnn` — Definition 3.2 networks: H tanh units +
  ``rank H_{/[1,H]}`` linear units, or Theorem 3.1 applied to the feature sequences.
* :class:`MemoryRNN` — the RNN of the general case: a linear memory (optionally of
  ``beta tanh(z / beta)`` units, bounded in :mod:`lib.tanh_memory`), H tanh units, a tanh output.
* :func:`general_ff_to_rnn` — the general network: H tanh units fed by a linear memory of size
  ``rho~ = rank Y~`` (fast path through one SVD of ``Xi (I (x) S^{1/2})``;
  :func:`general_ff_to_rnn_reference` builds ``Y~`` literally).
* :func:`general_ff_to_rnn_forgetting` — the same with every unit's memory reduced by
  Theorem 3.1 (the paper's "trivially derived" bound on ``rho~``).

The tanh readout ``o = tanh(w_o^T tanh(net + b) + b_o)`` of hidden net inputs is written once
(``readout_z`` and ``output_unit``); the feedforward network, the RNNs, the protein network's sparse
path (:mod:`lib.protein`) and the scans of :mod:`lib.smallest_k` all call it.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch
from torch import nn

from ._checks import DTYPE, as_tensor, nonneg_real, positive_int, positive_real, seed_int
from .linear_ff import (LinearStateSpace, check_window, forgetting_memory, forgetting_size, forgetting_states,
                        lag_matrix, linear_ff_to_rnn, rank_and_timespan)
from .sequence_memory import (autoencoder_matrices, check_sequences, encode, pad_sequences,
                              shift_operators, state_matrix, thin_svd)

__all__ = [
    "FeedforwardNet",
    "OneStepFF",
    "one_step_ff_to_rnn",
    "MemoryRNN",
    "general_ff_to_rnn",
    "general_ff_to_rnn_reference",
    "general_ff_to_rnn_forgetting",
]


def readout_z(net: torch.Tensor, b: torch.Tensor, w_o: torch.Tensor, b_o) -> torch.Tensor:
    """The output unit's net input ``w_o^T tanh(net + b) + b_o`` for hidden net inputs ``net``
    ``(..., H)``: shape ``(...)``."""
    return torch.tanh(net + b) @ w_o + b_o


def output_unit(z: torch.Tensor, out_tanh: bool) -> torch.Tensor:
    """The output unit: ``tanh(z)``, or ``z`` for a linear output."""
    return torch.tanh(z) if out_tanh else z


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
        return output_unit(readout_z(xi @ self.W.T, self.b, self.w_o, self.b_o), self.out_tanh)


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
        return output_unit(state_matrix(feats, l) @ self.feature_weights(l) + self.b_o, self.out_tanh)


def one_step_ff_to_rnn(net: OneStepFF, sequences, reduced: bool = False, svd_rtol: float | None = None):
    """A linear system on the feature sequences ``h(x_t)`` whose output is the 1-time-step
    network's net input to its output unit (``o = tanh(run + b_o)``).

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
        return output_unit(readout_z(net, self.b, self.w_o, self.b_o), self.out_tanh)

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
        return state_matrix(seqs, l) @ self.markov_parameters(l).T

    def __call__(self, sequences, beta: float | None = None, markov: bool = False) -> torch.Tensor:
        """Outputs ``(N,)`` on every prefix."""
        net = self.net_inputs_markov(sequences) if (markov and beta is None) else self.net_inputs(sequences, beta)
        return self._out(net)


def _check_ff(W_hid, b, w_o, b_o, sequences):
    """The checked inputs of a general construction: ``(seqs, a, l, W_hid, b, w_o, b_o)``."""
    seqs = check_sequences(sequences)
    a = seqs[0].shape[1]
    W_hid = as_tensor("W_hid", W_hid, 2, dtype=DTYPE)
    if W_hid.shape[1] % a or W_hid.shape[1] == 0:
        raise ValueError(f"W_hid must be (H, a*l) with a = {a}, got {tuple(W_hid.shape)}")
    H = W_hid.shape[0]
    b = as_tensor("b", b, 1, dtype=DTYPE)
    w_o = as_tensor("w_o", w_o, 1, dtype=DTYPE)
    if b.shape[0] != H or w_o.shape[0] != H:
        raise ValueError(f"b and w_o must have H = {H} entries, got {b.shape[0]} and {w_o.shape[0]}")
    l = W_hid.shape[1] // a
    check_window("W_hid", l, seqs)
    return seqs, a, l, W_hid, b, w_o, torch.as_tensor(b_o, dtype=DTYPE)


BASES = ("orthonormal", "backward")


def _unit_bases(W_hid: torch.Tensor, a: int, rtol: float, basis: str = "orthonormal"):
    """Bases ``Bas_h`` ``(a, r_h)`` of the column spaces of the lag matrices W_h: ``"orthonormal"``
    (the leading left singular vectors of W_h) or ``"backward"``, the weight columns themselves as
    the proof of Thm 3.1 picks them: ``w_{t*}`` first, then ``w_{t*-1}``, ``w_{t*-2}``, ... each kept
    when it is independent of those kept before, until ``r_h`` columns."""
    if basis not in BASES:
        raise ValueError(f"basis must be one of {BASES}, got {basis!r}")
    bases = []
    for h in range(W_hid.shape[0]):
        Wh = lag_matrix(W_hid[h], a)
        Ub, sv, _ = torch.linalg.svd(Wh, full_matrices=False)
        tol = rtol * max(float(sv[0]), 1e-300) * max(Wh.shape)
        r = int((sv > tol).sum()) if float(sv[0]) > 0 else 0
        if basis == "orthonormal" or r == 0:
            bases.append(Ub[:, :r])
            continue
        cols, Q = [], torch.zeros(a, 0, dtype=DTYPE)
        for j in range(Wh.shape[1] - 1, -1, -1):                 # lags t*, t* - 1, ... (zero columns add nothing)
            res = Wh[:, j] - Q @ (Q.T @ Wh[:, j])
            if float(torch.linalg.norm(res)) > tol:
                cols.append(j)
                Q = torch.cat([Q, (res / torch.linalg.norm(res))[:, None]], 1)
                if len(cols) == r:
                    break
        bases.append(Wh[:, cols])
    return bases


def general_ff_to_rnn(W_hid, b, w_o, b_o, sequences, rank: int | None = None, rtol: float = 1e-12,
                      svd_rtol: float | None = None, out_tanh: bool = True, basis: str = "orthonormal") -> MemoryRNN:
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
    ``basis`` picks the bases ``Bas_h`` (:data:`BASES`); with another basis than the orthonormal one
    the same identities hold with ``S = sum_h Bas_h Bas_h^T``: the state size is unchanged, the
    order of the singular directions is not.
    """
    seqs, a, l, W_hid, b, w_o, b_o = _check_ff(W_hid, b, w_o, b_o, sequences)
    bases = _unit_bases(W_hid, a, rtol, basis)
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
    return MemoryRNN(A @ S_half, B, G, b, w_o, b_o, out_tanh, info)


def general_ff_to_rnn_reference(W_hid, b, w_o, b_o, sequences, rtol: float = 1e-12,
                                svd_rtol: float | None = None, out_tanh: bool = True,
                                basis: str = "orthonormal") -> MemoryRNN:
    """The literal §3.2 construction: build ``Y~ = [Z(1) ... Z(H)]`` ``(N, sum_h r_h l)``, take its
    thin SVD ``Y~ = V~ Lambda~ U~^T`` and set ``A = sum_h U~_(h)^T P Bas_h^T``,
    ``B = sum_h U~_(h)^T R U~_(h)``, ``G[h] = vec(Gamma_h)^T U~_(h)`` (reference for tests).

    Derived in Chapter 9, section "sec-general-ff", which checks :func:`general_ff_to_rnn` against
    it.
    """
    seqs, a, l, W_hid, b, w_o, b_o = _check_ff(W_hid, b, w_o, b_o, sequences)
    bases = _unit_bases(W_hid, a, rtol, basis)
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
        Gamma = torch.linalg.pinv(Bh) @ lag_matrix(W_hid[h], a)      # W_h = Bas_h Gamma_h
        G[h] = Gamma.T.reshape(-1) @ Uh
    info = dict(rho=rho, lam=lam, shape=tuple(Yt.shape))
    return MemoryRNN(A, B, G, b, w_o, b_o, out_tanh, info)


def general_ff_to_rnn_forgetting(W_hid, b, w_o, b_o, sequences, rtol: float = 1e-12,
                                 svd_rtol: float | None = None, out_tanh: bool = True) -> MemoryRNN:
    """The §3.2 RNN with each hidden unit's memory reduced as in Theorem 3.1 (the construction
    behind the paper's "trivially derived" bound on the state size of general networks).

    Unit h (rank ``r_h``, timespan ``t_h`` of its lag matrix) gets the forgetting state matrix
    ``Z_{/pi}(h)`` (``N x r_h t_h``, ``sum_i tau_{h,i}`` non-zero columns); the memory is the
    thin SVD of ``Y~_{/pi} = [Z_{/pi}(1) ... Z_{/pi}(H)]`` with the block-diagonal forgetting
    shift, so its size ``rho~_{/pi} = rank Y~_{/pi}`` obeys
    ``rho~_{/pi} <= min{N, sum_h [(1 + 2 t_h) r_h - r_h^2] / 2}`` (``info['bound']``) and
    ``rho~_{/pi} <= rho~`` of :func:`general_ff_to_rnn`.  Chapter 9, section "sec-rho-general".
    """
    seqs, a, l, W_hid, b, w_o, b_o = _check_ff(W_hid, b, w_o, b_o, sequences)
    rtol = nonneg_real("rtol", rtol)
    N = sum(s.shape[0] for s in seqs)
    Zs, Ps, Rs, cs, units = [], [], [], [], []
    for h in range(W_hid.shape[0]):
        r_h, t_h = rank_and_timespan(W_hid[h], a, rtol)
        if r_h == 0:
            units.append((0, 0, 0))
            Zs.append(torch.zeros(N, 0, dtype=DTYPE)); Ps.append(torch.zeros(0, a, dtype=DTYPE))
            Rs.append(torch.zeros(0, 0, dtype=DTYPE)); cs.append(torch.zeros(0, dtype=DTYPE))
            continue
        f = forgetting_memory(lag_matrix(W_hid[h], a), t_h, rtol)
        Zs.append(forgetting_states(seqs, f, l)); Ps.append(f.P @ f.Bas.T); Rs.append(f.R)
        cs.append(f.Gamma.T.reshape(-1))
        units.append((r_h, t_h, len(f.kept)))
    Yt = torch.cat(Zs, 1)
    _, lam, U = thin_svd(Yt, rtol=svd_rtol)
    A = U.T @ torch.cat(Ps, 0)
    B = U.T @ torch.block_diag(*Rs) @ U
    G = torch.zeros(W_hid.shape[0], U.shape[1], dtype=DTYPE)
    off = 0
    for h, c in enumerate(cs):
        G[h] = c @ U[off: off + c.shape[0]]
        off += c.shape[0]
    bound = min(N, sum(forgetting_size(r, t) for r, t, _ in units))
    info = dict(rho=U.shape[1], lam=lam, shape=tuple(Yt.shape), N=N, units=units,
                kept=sum(k for _, _, k in units), bound=bound)
    return MemoryRNN(A, B, G, b, w_o, b_o, out_tanh, info)
