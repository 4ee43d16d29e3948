"""Gated diagonal linear RNNs (Zucchet et al. 2023, eq. 2) and their attention construction.

Index convention (the one of eq. 1): the output at step t uses the inputs up to and
including x_t, so eq. (2)'s ``h_{t+1} = lam * h_t + g_in(x_t), y_t = D g_out(h_t)`` is read as

    h_t = lam * h_{t-1} + g_in(x_t),   h_{-1} = 0,   y_t = D g_out(h_t),
    g(x) = (W_m x) * (W_x x)   (element-wise),

with the input optionally extended by a constant 1 (``append_one``; the paper has no biases).
``lam = exp(-exp(nu_log))`` lies in [0, 1] (the exponential parametrisation of App. B.1);
``nu_log = -inf`` gives lam = 1 and ``+inf`` gives lam = 0 exactly.

Two forwards that must agree: ``forward(x, method="parallel")``, the fast path (gates for all
steps at once, the diagonal recurrence of :mod:`lib.diagonal`, readout for all steps at once),
and ``method="step"``, the reference loop over t.
"""
from __future__ import annotations

import math
from itertools import combinations_with_replacement

import torch
from torch import nn

from ._checks import (as_tensor, finite, finite_output, float_dtype, int_list, positive_int, positive_real, seed_int,
                      seed_list, torch_device)
from .diagonal import DiagonalRecurrence, recur_, scan_time_major

__all__ = [
    "GatedLinearRNN",
    "StackedGatedRNN",
    "gated_rnn_from_attention",
    "construction_size",
    "instantaneous_tensor",
    "polynomial_coefficients",
]


def _lam_to_nu(lam: torch.Tensor) -> torch.Tensor:
    """Inverse of lam = exp(-exp(nu)) on [0, 1] (lam = 1 -> -inf, lam = 0 -> +inf)."""
    with torch.no_grad():
        return torch.log(-torch.log(lam))


class GatedLinearRNN(nn.Module):
    """The gated diagonal linear RNN of eq. (2).

    Derived in Chapter 10, section "sec-lsa-gated" (eq. 2 and its index convention); the student of
    Chapters 11 and 12.

    Args:
        d_in: input dimension d (the constant 1 is appended on top when ``append_one``).
        n_hidden: recurrent neurons |h|.
        n_gate: output-gating neurons (pre-readout), default ``n_hidden``.
        d_out: output dimension.
        append_one: extend every input x_t by a constant 1 (the paper's bias-free trick).
        lam_init: (low, high) of the initial distribution of lam (of |lam| for ``lam_law="lru"``).
        lam_law: "uniform" (lam ~ U(low, high), the book's) or "lru" (|lam|^2 ~ U(low^2, high^2),
            the LRU's initialisation, Orvieto et al. 2023, App. A.1's layer).
        input_norm: multiply each row of ``W_in_x`` by sqrt(1 - lam^2) at initialisation (the LRU's
            input normalisation gamma, folded into the input gate).
        gate_scale: factor on the four gating matrices at initialisation (1: variance 1/fan_in).
        seed: seed of the initial weights (Gaussian, variance 1/fan_in).
        dtype: parameter dtype (float64 for exact identities, float32 for training).
    Input ``x``: (B, T, d_in); output (B, T, d_out).  Parameters: ``W_in_m, W_in_x``
    (n_hidden, d_in + append_one), ``nu_log`` (n_hidden), ``W_out_m, W_out_x`` (n_gate,
    n_hidden), ``D`` (d_out, n_gate).
    """

    def __init__(self, d_in: int, n_hidden: int, d_out: int, n_gate: int | None = None, *,
                 append_one: bool = True, lam_init: tuple[float, float] = (0.0, 1.0),
                 lam_law: str = "uniform", input_norm: bool = False, gate_scale: float = 1.0,
                 seed: int = 0, dtype: torch.dtype = torch.float64):
        super().__init__()
        d_in = positive_int("d_in", d_in)
        n_hidden = positive_int("n_hidden", n_hidden)
        d_out = positive_int("d_out", d_out)
        n_gate = n_hidden if n_gate is None else positive_int("n_gate", n_gate)
        lo, hi = (float(v) for v in lam_init)
        if not 0.0 <= lo < hi <= 1.0:
            raise ValueError(f"lam_init must be (low, high) with 0 <= low < high <= 1, got {lam_init}")
        if lam_law not in ("uniform", "lru"):
            raise ValueError(f"lam_law must be 'uniform' or 'lru', got {lam_law!r}")
        if not isinstance(input_norm, bool):
            raise TypeError(f"input_norm must be True or False, got {input_norm!r}")
        gate_scale = positive_real("gate_scale", gate_scale)
        seed = seed_int("seed", seed)
        dtype = float_dtype("dtype", dtype)
        self.d_in, self.append_one = d_in, bool(append_one)
        d_x = d_in + int(append_one)
        g = torch.Generator().manual_seed(seed)

        def gauss(rows, cols):
            return torch.randn(rows, cols, generator=g, dtype=torch.float64) / math.sqrt(cols)

        u = torch.rand(n_hidden, generator=g, dtype=torch.float64)
        lam0 = lo + (hi - lo) * u if lam_law == "uniform" else torch.sqrt(lo ** 2 + (hi ** 2 - lo ** 2) * u)
        lam0 = lam0.clamp(1e-4, 1 - 1e-4)
        # the same draws in the same order whatever the law and the scales: two initialisations
        # of one seed differ only in lam's law and in those factors
        W_in_m, W_in_x = gauss(n_hidden, d_x), gauss(n_hidden, d_x)
        W_out_m, W_out_x, D = gauss(n_gate, n_hidden), gauss(n_gate, n_hidden), gauss(d_out, n_gate)
        if input_norm:
            W_in_x = W_in_x * torch.sqrt(1 - lam0 ** 2)[:, None]
        self.W_in_m = nn.Parameter((gate_scale * W_in_m).to(dtype))
        self.W_in_x = nn.Parameter((gate_scale * W_in_x).to(dtype))
        self.nu_log = nn.Parameter(_lam_to_nu(lam0).to(dtype))
        self.W_out_m = nn.Parameter((gate_scale * W_out_m).to(dtype))
        self.W_out_x = nn.Parameter((gate_scale * W_out_x).to(dtype))
        self.D = nn.Parameter(D.to(dtype))

    # -- construction from explicit weights
    @classmethod
    def from_weights(cls, W_in_m, W_in_x, lam, W_out_m, W_out_x, D, *, append_one: bool = True):
        """A model with the given weights (shapes as in the class docstring), lam in [0, 1]."""
        W_in_m = as_tensor("W_in_m", W_in_m, 2)
        W_in_x = as_tensor("W_in_x", W_in_x, 2, dtype=W_in_m.dtype)
        lam = as_tensor("lam", lam, 1, dtype=W_in_m.dtype)
        W_out_m = as_tensor("W_out_m", W_out_m, 2, dtype=W_in_m.dtype)
        W_out_x = as_tensor("W_out_x", W_out_x, 2, dtype=W_in_m.dtype)
        D = as_tensor("D", D, 2, dtype=W_in_m.dtype)
        n_h, d_x = W_in_m.shape
        if W_in_x.shape != (n_h, d_x):
            raise ValueError(f"W_in_x must have the shape of W_in_m {(n_h, d_x)}, got {tuple(W_in_x.shape)}")
        if lam.shape != (n_h,):
            raise ValueError(f"lam must have shape ({n_h},), got {tuple(lam.shape)}")
        if ((lam < 0) | (lam > 1)).any():
            raise ValueError("lam must lie in [0, 1] (the exponential parametrisation)")
        n_g = W_out_m.shape[0]
        if W_out_m.shape != (n_g, n_h) or W_out_x.shape != (n_g, n_h):
            raise ValueError(f"W_out_m and W_out_x must have shape (n_gate, {n_h}), got "
                             f"{tuple(W_out_m.shape)} and {tuple(W_out_x.shape)}")
        if D.shape[1] != n_g:
            raise ValueError(f"D must have shape (d_out, {n_g}), got {tuple(D.shape)}")
        d_in = d_x - int(append_one)
        if d_in < 1:
            raise ValueError("W_in_m has no input column besides the appended 1")
        model = cls(d_in, n_h, D.shape[0], n_g, append_one=append_one, dtype=W_in_m.dtype)
        with torch.no_grad():
            model.W_in_m.copy_(W_in_m)
            model.W_in_x.copy_(W_in_x)
            model.nu_log.copy_(_lam_to_nu(lam))
            model.W_out_m.copy_(W_out_m)
            model.W_out_x.copy_(W_out_x)
            model.D.copy_(D)
        return model

    @property
    def lam(self) -> torch.Tensor:
        """lam = exp(-exp(nu_log)) in [0, 1], shape (n_hidden,)."""
        return torch.exp(-torch.exp(self.nu_log))

    def _inputs(self, x):
        x = as_tensor("x", x, 3, dtype=self.W_in_m.dtype)
        if x.shape[-1] != self.d_in:
            raise ValueError(f"x must have shape (B, T, {self.d_in}), got {tuple(x.shape)}")
        if self.append_one:
            x = torch.cat([x, torch.ones_like(x[..., :1])], dim=-1)
        return x

    def gate_in(self, x: torch.Tensor) -> torch.Tensor:
        """g_in(x_t) = (W_in_m x~_t) * (W_in_x x~_t): (B, T, d_in) -> (B, T, n_hidden)."""
        x = self._inputs(x)
        return (x @ self.W_in_m.T) * (x @ self.W_in_x.T)

    def hidden_states(self, x: torch.Tensor, method: str = "parallel") -> torch.Tensor:
        """h_t for every t: (B, T, d_in) -> (B, T, n_hidden)."""
        if method not in ("parallel", "step"):
            raise ValueError(f"method must be 'parallel' or 'step', got {method!r}")
        if method == "parallel":
            return self._parallel(x, readout=False)
        return torch.stack(list(self._step_states(x)), dim=1)

    def _step_states(self, x: torch.Tensor):
        """The reference recurrence, one step at a time: yields h_t for t = 0, 1, ..."""
        x = self._inputs(x)
        lam = self.lam
        h = x.new_zeros(x.shape[0], lam.shape[0])
        for t in range(x.shape[1]):
            h = lam * h + (x[:, t] @ self.W_in_m.T) * (x[:, t] @ self.W_in_x.T)
            yield h

    def readout(self, h: torch.Tensor) -> torch.Tensor:
        """y_t = D g_out(h_t) = D ((W_out_m h_t) * (W_out_x h_t))."""
        return ((h @ self.W_out_m.T) * (h @ self.W_out_x.T)) @ self.D.T

    def forward(self, x: torch.Tensor, method: str = "parallel") -> torch.Tensor:
        """(B, T, d_in) -> (B, T, d_out); ``method`` "parallel" (scan) or "step" (loop).

        ``x`` is checked first (shape, finite; cast to the model's dtype), and the output after:
        the model is a degree-4 polynomial of its inputs, so finite inputs can still overflow
        (|x| ~ 1e77 in float64, ~ 1e10 in float32), which is an error naming x, not an inf."""
        if method not in ("parallel", "step"):
            raise ValueError(f"method must be 'parallel' or 'step', got {method!r}")
        if method == "step":   # the reference: state update and readout one step at a time
            y = torch.stack([self.readout(h) for h in self._step_states(x)], dim=1)
        else:
            y = self._parallel(x, readout=True)
        return _no_overflow(y, x, self)

    def _parallel(self, x: torch.Tensor, readout: bool) -> torch.Tensor:
        """The fast path, all time steps at once and time-major: gates -> recurrence -> readout.

        One fused product for both input gates; the diagonal recurrence, as the log2(T) scan of
        :func:`lib.diagonal.scan_time_major` when gradients are needed and otherwise in place
        (:func:`lib.diagonal.recur_`, T - 1 fused multiply-adds over (B, n) slices: T B n work
        instead of the scan's T B n log2(T), and no copies); one fused product for both output
        gates, then D.

        Without gradients the intermediates (T B x 2|h| gates, T B x |h| states, T B x 2 n_gate
        output gates) are written into work buffers that this model keeps while the shapes stay
        the same (:meth:`_buffer`). They are megabytes each at the book's sizes, and glibc serves
        a block that large by mapping fresh pages from the kernel (its mmap threshold adapts only
        to blocks strictly larger than ones already freed), so allocating them anew on every call
        costs ~2,400 page faults per forward at T = 32, B = 64, |h| = 100: more time than the
        products themselves.
        """
        x = self._inputs(x)
        B, T, d_x = x.shape
        n, g = self.W_in_m.shape[0], self.W_out_m.shape[0]
        W_in = torch.cat([self.W_in_m, self.W_in_x]).T
        W_out = torch.cat([self.W_out_m, self.W_out_x]).T
        lam = self.lam
        graph = torch.is_grad_enabled() and (x.requires_grad or W_in.requires_grad
                                             or W_out.requires_grad or lam.requires_grad
                                             or self.D.requires_grad)
        buf = (lambda name, *shape: None) if graph else self._buffer   # noqa: E731
        z = torch.matmul(x.transpose(0, 1).reshape(T * B, d_x), W_in, out=buf("z", T * B, 2 * n, x.dtype))
        h = torch.mul(z[:, :n], z[:, n:], out=buf("h", T * B, n, x.dtype)).view(T, B, n)
        if graph:
            h = scan_time_major(lam, h)
        else:
            recur_(h[None], lam)
        if not readout:
            return h.transpose(0, 1) if graph else h.transpose(0, 1).clone()   # the buffer is reused
        o = torch.matmul(h.reshape(T * B, n), W_out, out=buf("o", T * B, 2 * g, x.dtype))
        prod = torch.mul(o[:, :g], o[:, g:], out=buf("p", T * B, g, x.dtype))
        return (prod @ self.D.T).view(T, B, -1).transpose(0, 1)

    def _buffer(self, name: str, rows: int, cols: int, dtype: torch.dtype) -> torch.Tensor:
        """A (rows, cols) work buffer of this model, reused while its shape and dtype stay."""
        work = self.__dict__.setdefault("_work", {})
        b = work.get(name)
        if b is None or b.shape != (rows, cols) or b.dtype != dtype or b.device != self.W_in_m.device:
            b = work[name] = torch.empty(rows, cols, dtype=dtype, device=self.W_in_m.device)
        return b


def _no_overflow(y: torch.Tensor, x, model: nn.Module) -> torch.Tensor:
    """``y`` when it is finite; otherwise a ValueError naming the non-finite parameter of ``model``
    or, when every parameter is finite, x (itself checked finite: the output overflowed)."""
    return finite_output(y, x, model, ": the gates make the output a degree-4 polynomial of x, so x must be "
                                      "scaled down")


# ----------------------------------------------------------------------------- Fig. 1

def gated_rnn_from_attention(W_V, W_K, W_Q, compact: bool = False) -> GatedLinearRNN:
    """The gated RNN of Fig. 1 that computes the linear self-attention layer (W_V, W_K, W_Q).

    Derived in Chapter 10, sections "sec-construction" and "sec-compact".

    Input x~ = (x, 1).  ``compact=False``: d_v*d_k key-value neurons h_(i,j) accumulating
    (W_V x)_i (W_K x)_j with lam = 1, then d_k query neurons holding (W_Q x)_k with lam = 0;
    d_v*d_k output-gating neurons multiply KV_(i,j) by q_j and D sums over j.
    ``compact=True`` (square, invertible W_V, or W_K = W_V): reparametrise W_K <- W_V,
    W_Q <- W_V^{-T} W_K^T W_Q, and keep the d(d+1)/2 neurons v_i v_j, i <= j, of the
    symmetric key-value matrix.
    """
    from .attention import check_attention_weights

    W_V, W_K, W_Q = check_attention_weights(W_V, W_K, W_Q)
    d_v, d = W_V.shape
    d_k = W_K.shape[0]
    dt = W_V.dtype
    if compact:
        if d_v != d or d_k != d:
            raise ValueError(f"compact=True needs square d x d matrices, got W_V {tuple(W_V.shape)}, "
                             f"W_K {tuple(W_K.shape)}")
        if not torch.equal(W_K, W_V):
            # W_V^{-T} loses about cond(W_V) * eps of the dtype in relative accuracy: refuse what
            # leaves less than 1e-6 (float64: cond <= 1e10; float32: cond <= 8)
            cond = torch.linalg.cond(W_V.double())
            limit = 1e-6 / torch.finfo(dt).eps
            if not torch.isfinite(cond) or cond > limit:
                raise ValueError(f"compact=True needs a well-conditioned W_V: condition number "
                                 f"{float(cond):.2e} > {limit:.1e} for {dt} (the reparametrisation "
                                 f"W_V^-T W_K^T W_Q would lose more than 1e-6 relative accuracy); "
                                 f"use float64 or compact=False")
            # W_Q' = W_V^{-T} W_K^T W_Q, so that W_V^T W_Q' = W_K^T W_Q
            W_Q = torch.linalg.solve(W_V.T, W_K.T @ W_Q)
            W_K = W_V
        pairs = list(combinations_with_replacement(range(d), 2))
        kv_index = {}
        for n, (i, j) in enumerate(pairs):
            kv_index[(i, j)] = kv_index[(j, i)] = n
        n_kv = len(pairs)
    else:
        pairs = [(i, j) for i in range(d_v) for j in range(d_k)]
        kv_index = {p: n for n, p in enumerate(pairs)}
        n_kv = len(pairs)
    n_h = n_kv + d_k
    W_in_m = torch.zeros(n_h, d + 1, dtype=dt)
    W_in_x = torch.zeros(n_h, d + 1, dtype=dt)
    lam = torch.zeros(n_h, dtype=dt)
    for n, (i, j) in enumerate(pairs):                  # key-value neurons, lam = 1
        W_in_m[n, :d] = W_V[i]
        W_in_x[n, :d] = W_K[j]
        lam[n] = 1.0
    for k in range(d_k):                                # query neurons, lam = 0
        W_in_m[n_kv + k, :d] = W_Q[k]
        W_in_x[n_kv + k, d] = 1.0
    n_g = d_v * d_k
    W_out_m = torch.zeros(n_g, n_h, dtype=dt)
    W_out_x = torch.zeros(n_g, n_h, dtype=dt)
    D = torch.zeros(d_v, n_g, dtype=dt)
    for o, (i, j) in enumerate([(i, j) for i in range(d_v) for j in range(d_k)]):
        W_out_m[o, kv_index[(i, j)]] = 1.0
        W_out_x[o, n_kv + j] = 1.0
        D[i, o] = 1.0
    return GatedLinearRNN.from_weights(W_in_m, W_in_x, lam, W_out_m, W_out_x, D, append_one=True)


def construction_size(d: int, compact: bool = False) -> dict[str, int]:
    """Neurons and parameters of the Fig. 1 construction for a d x d attention layer.

    Derived in Chapter 10, section "sec-construction-size", which asserts its counts against the
    built models.

    ``nonzero`` counts the nonzero entries of every tensor of the built model, lam included: the
    key-value neurons' lam = 1 count, the query neurons' lam = 0 do not."""
    d = positive_int("d", d)
    n_kv = d * (d + 1) // 2 if compact else d * d
    n_h = n_kv + d
    n_g = d * d
    params = 2 * n_h * (d + 1) + n_h + 2 * n_g * n_h + d * n_g
    nonzero = (2 * d * n_kv + d * d + d) + n_kv + 2 * n_g + n_g
    return {"hidden": n_h, "key_value": n_kv, "query": d, "gate_out": n_g,
            "parameters": params, "nonzero": nonzero, "attention_parameters": 3 * d * d}


# ----------------------------------------------------------------------------- polynomials

def instantaneous_tensor(model: GatedLinearRNN, n_tokens: int = 1) -> torch.Tensor:
    """The output at the last step of an ``n_tokens``-step sequence as an exact 4-tensor.

    Used in Chapter 11, section "sec-teacher-scores" (the polynomial distance), and Chapter 12,
    section "sec-icl-polynomial" (Table 2; ``n_tokens=2`` for the two-token probe).

    The variables are the tokens concatenated, then a constant 1:
    w = (x_0, ..., x_{L-1}, 1), m = L * d_in + 1.  The last state is
    h_n = sum_t lam_n^{L-1-t} (a_n . x~_t)(b_n . x~_t) = w^T M_n w, a quadratic form in w, so
    y_i = sum_o D_io (w^T P_o w)(w^T Q_o w) = sum_{abce} C[i,a,b,c,e] w_a w_b w_c w_e with
    P_o = sum_n W_out_m[o,n] M_n (Q_o likewise).  ``n_tokens=1`` is the paper's instantaneous
    map D g_out(g_in(x~)).  Returns C (d_out, m, m, m, m), float64.
    """
    L = positive_int("n_tokens", n_tokens)
    d = model.d_in
    m = L * d + 1
    A, Bm = model.W_in_m.detach().double(), model.W_in_x.detach().double()
    lam = model.lam.detach().double()
    n_h = A.shape[0]
    M = torch.zeros(n_h, m, m, dtype=torch.float64)
    for t in range(L):
        a = torch.zeros(n_h, m, dtype=torch.float64)
        b = torch.zeros(n_h, m, dtype=torch.float64)
        a[:, t * d:(t + 1) * d], b[:, t * d:(t + 1) * d] = A[:, :d], Bm[:, :d]
        if model.append_one:
            a[:, -1], b[:, -1] = A[:, d], Bm[:, d]
        M += (lam ** (L - 1 - t))[:, None, None] * a[:, :, None] * b[:, None, :]
    P = torch.einsum("on,nab->oab", model.W_out_m.detach().double(), M)
    Q = torch.einsum("on,nab->oab", model.W_out_x.detach().double(), M)
    return torch.einsum("io,oab,oce->iabce", model.D.detach().double(), P, Q)


def polynomial_coefficients(C: torch.Tensor) -> tuple[list[tuple[int, ...]], torch.Tensor]:
    """Exact monomial coefficients of y_i = sum C[i,a,b,c,e] x~_a x~_b x~_c x~_e.

    Used in Chapter 11, section "sec-teacher-scores", and Chapter 12, section "sec-icl-polynomial",
    for the exact coefficients of the teacher's and the RNNs' polynomials.

    The last coordinate of x~ is the constant 1, so the homogeneous quartic in x~ is a
    polynomial of degree <= 4 in x.  Returns ``(exponents, coef)``: exponents[k] is the
    exponent tuple (length m - 1) of monomial k in x, coef (d_out, n_monomials).  Each
    coefficient is the sum of C over all index orderings of its monomial (exact, no sampling).
    """
    C = as_tensor("C", C, 5)
    m = C.shape[1]
    if C.shape[1:] != (m, m, m, m):
        raise ValueError(f"C must have shape (d_out, m, m, m, m), got {tuple(C.shape)}")
    monos = list(combinations_with_replacement(range(m), 4))
    index = {mono: k for k, mono in enumerate(monos)}
    grid = torch.cartesian_prod(*[torch.arange(m)] * 4)           # (m^4, 4)
    ids = torch.tensor([index[tuple(sorted(r))] for r in grid.tolist()])
    coef = torch.zeros(C.shape[0], len(monos), dtype=C.dtype)
    coef.index_add_(1, ids, C.reshape(C.shape[0], -1))
    exponents = [tuple(sum(1 for a in mono if a == v) for v in range(m - 1)) for mono in monos]
    return exponents, coef


# ----------------------------------------------------------------------------- stacked training

class StackedGatedRNN(nn.Module):
    """K independent gated RNNs of eq. (2) evaluated (and trained) as one batched model.

    Member k is a :class:`GatedLinearRNN` of width ``widths[k]`` (recurrent = output-gating
    neurons) zero-padded to the largest width: its padding rows and columns of ``W_in_m``,
    ``W_in_x``, ``W_out_m``, ``W_out_x`` and ``D`` are 0.  A padded hidden neuron then has
    g_in = 0, hence h = 0 for all t, hence zero gradient for every weight that touches it
    (each gradient is a product with h, with g_in, or with a zero weight); AdamW turns a
    zero gradient into a zero update and weight decay keeps 0 at 0, so the padding stays
    exactly 0 and member k computes exactly what the unpadded network computes.

    Parameters carry a leading member axis: ``W_in_m, W_in_x`` (K, n, d_x), ``nu_log`` (K, n),
    ``W_out_m, W_out_x`` (K, n, n), ``D`` (K, d_out, n).  Input (K, B, T, d_in); output
    (K, B, T, d_out), or (K, B, d_out) with ``last_only=True`` (the readout of the last step
    alone, what in-context regression needs).

    Every step read: the gates are batched products over all (t, b) rows and the diagonal
    recurrence runs in place over time with a hand-written backward (:class:`DiagonalRecurrence`).
    ``last_only``: h_{T-1} = sum_s lam^{T-1-s} g_s is one weighted sum with
    lam^k = exp(-k exp(nu)) (:meth:`_last_step`).  The reference is the member networks' own
    forward (:meth:`member`); derivation of the model in Chapter 10, its training in
    Chapters 11-12.
    """

    def __init__(self, d_in: int, widths, d_out: int, seeds, *, append_one: bool = True,
                 lam_init: tuple[float, float] = (0.0, 1.0), lam_law: str = "uniform", input_norm: bool = False,
                 gate_scale: float = 1.0, dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu"):
        super().__init__()
        d_in, d_out = positive_int("d_in", d_in), positive_int("d_out", d_out)
        widths = int_list("widths", widths, what="width")
        seeds = seed_list("seeds", seeds)
        if not widths or len(widths) != len(seeds):
            raise ValueError(f"widths and seeds must be non-empty lists of equal length, got "
                             f"{len(widths)} and {len(seeds)}")
        dtype, device = float_dtype("dtype", dtype), torch_device("device", device)
        members = [GatedLinearRNN(d_in, w, d_out, append_one=append_one, lam_init=lam_init, lam_law=lam_law,
                                  input_norm=input_norm, gate_scale=gate_scale, seed=s, dtype=torch.float64)
                   for w, s in zip(widths, seeds)]
        self._stack(members, dtype, device)

    @classmethod
    def from_members(cls, members, *, dtype: torch.dtype | None = None, device="cpu"):
        """Stack existing networks (same d_in, d_out, append_one; any widths).

        Built by ``__init__`` (whose members, drawn from their own generators, are then replaced by
        copies of ``members``), so a stack has one way of coming into being.
        """
        members = list(members)
        if not members or not all(isinstance(m, GatedLinearRNN) for m in members):
            raise TypeError("members must be a non-empty list of GatedLinearRNN")
        first, dtype = members[0], float_dtype("dtype", dtype or members[0].W_in_m.dtype)
        stack = cls(first.d_in, [m.W_in_m.shape[0] for m in members], first.D.shape[0], [0] * len(members),
                    append_one=first.append_one, dtype=dtype, device=device)
        stack._stack(members, dtype, device)
        return stack

    def _stack(self, members, dtype, device):
        d_in, append_one = members[0].d_in, members[0].append_one
        d_out = members[0].D.shape[0]
        for m in members:
            if (m.d_in, m.append_one, m.D.shape[0]) != (d_in, append_one, d_out):
                raise ValueError("members must share d_in, append_one and d_out")
            if m.W_out_m.shape[0] != m.W_in_m.shape[0]:
                raise ValueError("stacked members need n_gate == n_hidden")
        self.d_in, self.append_one, self.d_out = d_in, append_one, d_out
        self.widths = [m.W_in_m.shape[0] for m in members]
        K, n, d_x = len(members), max(self.widths), d_in + int(append_one)
        z = dict(dtype=torch.float64)
        W_in_m, W_in_x = torch.zeros(K, n, d_x, **z), torch.zeros(K, n, d_x, **z)
        nu, W_out_m, W_out_x = torch.zeros(K, n, **z), torch.zeros(K, n, n, **z), torch.zeros(K, n, n, **z)
        D = torch.zeros(K, d_out, n, **z)
        with torch.no_grad():
            for k, (m, w) in enumerate(zip(members, self.widths)):
                W_in_m[k, :w], W_in_x[k, :w] = m.W_in_m.double(), m.W_in_x.double()
                nu[k, :w] = m.nu_log.double().clamp(-50.0, 50.0)   # lam = 1 or 0 exactly in float64
                W_out_m[k, :w, :w], W_out_x[k, :w, :w] = m.W_out_m.double(), m.W_out_x.double()
                D[k, :, :w] = m.D.double()
        p = lambda t: nn.Parameter(t.to(dtype=dtype, device=device))  # noqa: E731
        self.W_in_m, self.W_in_x, self.nu_log = p(W_in_m), p(W_in_x), p(nu)
        self.W_out_m, self.W_out_x, self.D = p(W_out_m), p(W_out_x), p(D)

    @property
    def K(self) -> int:
        return len(self.widths)

    def member(self, k: int) -> GatedLinearRNN:
        """Member k as an unpadded float64 CPU :class:`GatedLinearRNN` (for analysis)."""
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < self.K:
            raise IndexError(f"member index must be in [0, {self.K}), got {k}")
        w = self.widths[k]
        c = lambda t: t.detach().double().cpu()  # noqa: E731
        lam = torch.exp(-torch.exp(c(self.nu_log[k, :w])))
        return GatedLinearRNN.from_weights(c(self.W_in_m[k, :w]), c(self.W_in_x[k, :w]), lam,
                                           c(self.W_out_m[k, :w, :w]), c(self.W_out_x[k, :w, :w]),
                                           c(self.D[k, :, :w]), append_one=self.append_one)

    def check_input(self, x) -> torch.Tensor:
        """x as the stack reads it: a finite (K, B, T, d_in) tensor of the parameters' dtype and
        device; a ValueError or TypeError naming x and the stack's side otherwise."""
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a tensor (K, B, T, d_in), got {type(x).__name__}")
        if x.ndim != 4 or x.shape[0] != self.K or x.shape[3] != self.d_in or x.numel() == 0:
            raise ValueError(f"x must have shape (K, B, T, d_in) = ({self.K}, B, T, {self.d_in}) with B, T >= 1, "
                             f"got {tuple(x.shape)}")
        p = self.W_in_m
        if x.dtype != p.dtype or x.device != p.device:
            raise TypeError(f"x is {x.dtype} on {x.device} but the stack's parameters are {p.dtype} on {p.device}")
        return finite("x", x)

    def forward(self, x: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        """(K, B, T, d_in) -> (K, B, T, d_out), or (K, B, d_out) with ``last_only``.

        x is checked first (:meth:`check_input`) and the output after (finite inputs can
        overflow a degree-4 polynomial); :meth:`forward_unchecked` is the same map without checks.
        """
        y = self.forward_unchecked(self.check_input(x), last_only)
        return _no_overflow(y, x, self)

    def forward_unchecked(self, x: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        """:meth:`forward` without validation (the training step's inner call: the trainer
        checks model and task once, before the first step):
        gates -> recurrence -> readout, each gate a batched matrix product over all time steps,
        the recurrence time-major.
        """
        K, B, T, d = x.shape
        n = self.W_in_m.shape[1]
        if last_only:
            return self._last_step(x)
        if self.append_one:
            x = torch.cat([x, x.new_ones(K, B, T, 1)], dim=-1)
        # two products per gate, not one product and two slices: the backward of a slice
        # writes a zero-filled copy of the whole product, which costs more than the product
        xt = x.transpose(1, 2).reshape(K, T * B, -1)                             # rows (t, b)
        g = (torch.bmm(xt, self.W_in_m.transpose(1, 2))
             * torch.bmm(xt, self.W_in_x.transpose(1, 2))).view(K, T, B, n)
        lam = torch.exp(-torch.exp(self.nu_log))[:, None, :]                    # (K, 1, n)
        h = DiagonalRecurrence.apply(lam, g).reshape(K, T * B, n)               # (K, T, B, n)
        o = torch.bmm(h, self.W_out_m.transpose(1, 2)) * torch.bmm(h, self.W_out_x.transpose(1, 2))
        y = torch.bmm(o, self.D.transpose(1, 2))
        return y.view(K, T, B, self.d_out).transpose(1, 2)

    def _last_step(self, x: torch.Tensor) -> torch.Tensor:
        """y at the last step only, feature-major (neurons x rows), (K, B, T, d) -> (K, B, d_out).

        h_{T-1} = sum_s lam^{T-1-s} g_s with lam^k = exp(-k exp(nu)): one weighted sum of the
        gates over time (a broadcast product, not T-long matrix-vector products, whose backward
        is a batch of outer products); the appended 1 enters as a bias column (``baddbmm``), so
        no input copy is made.
        """
        K, B, T, d = x.shape
        n = self.W_in_m.shape[1]
        xT = x.permute(0, 3, 2, 1).reshape(K, d, T * B)                          # (K, d, T B), columns (t, b)
        if self.append_one:
            zm = torch.baddbmm(self.W_in_m[:, :, d:], self.W_in_m[:, :, :d], xT)
            zx = torch.baddbmm(self.W_in_x[:, :, d:], self.W_in_x[:, :, :d], xT)
        else:
            zm, zx = torch.bmm(self.W_in_m, xT), torch.bmm(self.W_in_x, xT)
        g = (zm * zx).view(K, n, T, B)                                           # rows of B contiguous
        lags = torch.arange(T - 1, -1, -1, device=x.device, dtype=x.dtype)
        w = torch.exp(-torch.exp(self.nu_log)[:, :, None] * lags)                # (K, n, T)
        h = (g * w[..., None]).sum(dim=2)                                        # (K, n, B)
        o = torch.bmm(self.W_out_m, h) * torch.bmm(self.W_out_x, h)             # (K, n, B)
        return torch.bmm(self.D, o).transpose(1, 2)                             # (K, B, d_out)
