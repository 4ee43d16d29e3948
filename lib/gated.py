"""Gated diagonal linear RNNs (Zucchet et al. 2023, eq. 2) and their attention construction.

Index convention (the one of eq. 1): the output at step t uses the inputs up to and
including x_t, so eq. (2)'s ``h_{t+1} = lam * h_t + g_in(x_t), y_t = D g_out(h_t)`` is read as

    h_t = lam * h_{t-1} + g_in(x_t),   h_{-1} = 0,   y_t = D g_out(h_t),
    g(x) = (W_m x) * (W_x x)   (element-wise),

with the input optionally extended by a constant 1 (``append_one``; the paper has no biases).
``lam = exp(-exp(nu_log))`` lies in [0, 1] (the exponential parametrisation of App. B.1);
``nu_log = -inf`` gives lam = 1 and ``+inf`` gives lam = 0 exactly.

Two forwards that must agree: ``forward(x, method="parallel")`` runs the diagonal recurrence
as a log2(T)-step associative scan (:func:`diagonal_scan`), ``method="step"`` is the plain
loop over t.
"""
from __future__ import annotations

import math
from itertools import combinations_with_replacement
from typing import Callable

import torch
from torch import nn

from ._checks import as_tensor, positive_int, positive_real

__all__ = [
    "GatedLinearRNN",
    "diagonal_scan",
    "diagonal_scan_reference",
    "gated_rnn_from_attention",
    "construction_size",
    "instantaneous_tensor",
    "polynomial_coefficients",
    "train_adamw",
]


# ----------------------------------------------------------------------------- the recurrence

def diagonal_scan(lam: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """h_t = lam * h_{t-1} + u_t (h_{-1} = 0) for all t at once, by a Hillis-Steele scan.

    ``lam``: (n,) (real or complex), ``u``: (B, T, n).  After the step with offset k the
    state holds sum_{j < 2k} lam^j u_{t-j}; ceil(log2 T) vectorised steps, no division by lam
    (so lam = 0 is exact), powers lam^k by repeated squaring.  Returns (B, T, n).
    """
    h = u.transpose(0, 1).contiguous()          # time-first: contiguous slices per offset
    T = h.shape[0]
    pw, k = lam, 1
    while k < T:
        h = torch.cat([h[:k], h[k:] + pw * h[:-k]], dim=0)
        pw = pw * pw
        k *= 2
    return h.transpose(0, 1)


def diagonal_scan_reference(lam: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """The plain loop h_t = lam * h_{t-1} + u_t, (B, T, n) -> (B, T, n)."""
    h = torch.zeros_like(u[:, 0])
    out = []
    for t in range(u.shape[1]):
        h = lam * h + u[:, t]
        out.append(h)
    return torch.stack(out, dim=1)


def _lam_to_nu(lam: torch.Tensor) -> torch.Tensor:
    """Inverse of lam = exp(-exp(nu)) on [0, 1] (lam = 1 -> -inf, lam = 0 -> +inf)."""
    with torch.no_grad():
        return torch.log(-torch.log(lam))


class GatedLinearRNN(nn.Module):
    """The gated diagonal linear RNN of eq. (2).

    Args:
        d_in: input dimension d (the constant 1 is appended on top when ``append_one``).
        n_hidden: recurrent neurons |h|.
        n_gate: output-gating neurons (pre-readout), default ``n_hidden``.
        d_out: output dimension.
        append_one: extend every input x_t by a constant 1 (the paper's bias-free trick).
        lam_init: (low, high) of the uniform initial distribution of lam.
        seed: seed of the initial weights (Gaussian, variance 1/fan_in).
        dtype: parameter dtype (float64 for exact identities, float32 for training).
    Input ``x``: (B, T, d_in); output (B, T, d_out).  Parameters: ``W_in_m, W_in_x``
    (n_hidden, d_in + append_one), ``nu_log`` (n_hidden), ``W_out_m, W_out_x`` (n_gate,
    n_hidden), ``D`` (d_out, n_gate).
    """

    def __init__(self, d_in: int, n_hidden: int, d_out: int, n_gate: int | None = None, *,
                 append_one: bool = True, lam_init: tuple[float, float] = (0.0, 1.0),
                 seed: int = 0, dtype: torch.dtype = torch.float64):
        super().__init__()
        d_in = positive_int("d_in", d_in)
        n_hidden = positive_int("n_hidden", n_hidden)
        d_out = positive_int("d_out", d_out)
        n_gate = n_hidden if n_gate is None else positive_int("n_gate", n_gate)
        lo, hi = (float(v) for v in lam_init)
        if not 0.0 <= lo < hi <= 1.0:
            raise ValueError(f"lam_init must be (low, high) with 0 <= low < high <= 1, got {lam_init}")
        if not isinstance(seed, int):
            raise TypeError(f"seed must be an integer, got {seed!r}")
        self.d_in, self.append_one = d_in, bool(append_one)
        d_x = d_in + int(append_one)
        g = torch.Generator().manual_seed(seed)

        def gauss(rows, cols):
            return torch.randn(rows, cols, generator=g, dtype=torch.float64) / math.sqrt(cols)

        lam0 = lo + (hi - lo) * torch.rand(n_hidden, generator=g, dtype=torch.float64)
        lam0 = lam0.clamp(1e-4, 1 - 1e-4)
        self.W_in_m = nn.Parameter(gauss(n_hidden, d_x).to(dtype))
        self.W_in_x = nn.Parameter(gauss(n_hidden, d_x).to(dtype))
        self.nu_log = nn.Parameter(_lam_to_nu(lam0).to(dtype))
        self.W_out_m = nn.Parameter(gauss(n_gate, n_hidden).to(dtype))
        self.W_out_x = nn.Parameter(gauss(n_gate, n_hidden).to(dtype))
        self.D = nn.Parameter(gauss(d_out, n_gate).to(dtype))

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
        """(B, T, d_in) -> (B, T, d_out); ``method`` "parallel" (scan) or "step" (loop)."""
        if method == "step":   # the reference: state update and readout one step at a time
            return torch.stack([self.readout(h) for h in self._step_states(x)], dim=1)
        if method != "parallel":
            raise ValueError(f"method must be 'parallel' or 'step', got {method!r}")
        return self._parallel(x, readout=True)

    def _parallel(self, x: torch.Tensor, readout: bool) -> torch.Tensor:
        """All time steps at once, time-major: one fused matmul for both input gates, the
        diagonal recurrence (the log2(T) scan of :func:`diagonal_scan` when gradients are
        needed, an in-place elementwise pass otherwise), one fused matmul for both output
        gates, then D."""
        x = self._inputs(x)
        B, T, d_x = x.shape
        n = self.W_in_m.shape[0]
        W_in = torch.cat([self.W_in_m, self.W_in_x]).T
        W_out = torch.cat([self.W_out_m, self.W_out_x]).T
        g = self.W_out_m.shape[0]
        lam = self.lam
        graph = torch.is_grad_enabled() and (x.requires_grad or W_in.requires_grad
                                             or W_out.requires_grad or lam.requires_grad
                                             or self.D.requires_grad)
        if readout and not graph:
            return self._evaluate(x, W_in, lam, W_out, g)
        z = x.transpose(0, 1).reshape(T * B, d_x) @ W_in
        h = (z[:, :n] * z[:, n:]).view(T, B, n)
        if graph:
            # differentiable: the log2(T)-step scan, out of place (autograd-friendly)
            pw, k = lam, 1
            while k < T:
                h = torch.cat([h[:k], torch.addcmul(h[k:], pw, h[:-k])], dim=0)
                pw = pw * pw
                k *= 2
        else:
            # no gradients: the elementwise recurrence in place, T - 1 fused multiply-adds over
            # (B, n) slices; T B n work instead of the scan's T B n log2(T) and no copies
            for t in range(1, T):
                h[t].addcmul_(h[t - 1], lam)
        if not readout:
            return h.transpose(0, 1)
        o = h.reshape(T * B, n) @ W_out
        y = (o[:, :g] * o[:, g:]) @ self.D.T
        return y.view(T, B, -1).transpose(0, 1)

    def _evaluate(self, x, W_in, lam, W_out, g):
        """The output without gradients, written into reused work buffers.

        The intermediates (T B x 2|h| gates, T B x |h| states, T B x 2 n_gate output gates) are
        megabytes each at the book's sizes.  glibc serves a block that large by mapping fresh
        pages from the kernel (its mmap threshold adapts only to blocks strictly larger than
        ones already freed), so allocating them anew on every call costs ~2,400 page faults
        per forward at T = 32, B = 64, |h| = 100 and more time than the products themselves.
        Only the (small) output is a new tensor; the buffers belong to this model and are
        reused while the shapes stay the same (``_work``).
        """
        B, T, d_x = x.shape
        n = W_in.shape[1] // 2
        work = self.__dict__.setdefault("_work", {})

        def buf(name, *shape):
            b = work.get(name)
            if b is None or b.shape != shape or b.dtype != x.dtype:
                b = work[name] = x.new_empty(shape)
            return b

        z = torch.matmul(x.transpose(0, 1).reshape(T * B, d_x), W_in, out=buf("z", T * B, 2 * n))
        h = torch.mul(z[:, :n], z[:, n:], out=buf("h", T * B, n)).view(T, B, n)
        for t in range(1, T):
            h[t].addcmul_(h[t - 1], lam)
        o = torch.matmul(h.view(T * B, n), W_out, out=buf("o", T * B, 2 * g))
        prod = torch.mul(o[:, :g], o[:, g:], out=buf("p", T * B, g))
        return (prod @ self.D.T).view(T, B, -1).transpose(0, 1)


# ----------------------------------------------------------------------------- Fig. 1

def gated_rnn_from_attention(W_V, W_K, W_Q, compact: bool = False) -> GatedLinearRNN:
    """The gated RNN of Fig. 1 that computes the linear self-attention layer (W_V, W_K, W_Q).

    Input x~ = (x, 1).  ``compact=False``: d_v*d_k key-value neurons h_(i,j) accumulating
    (W_V x)_i (W_K x)_j with lam = 1, then d_k query neurons holding (W_Q x)_k with lam = 0;
    d_v*d_k output-gating neurons multiply KV_(i,j) by q_j and D sums over j.
    ``compact=True`` (square, invertible W_V, or W_K = W_V): reparametrise W_K <- W_V,
    W_Q <- W_V^{-T} W_K^T W_Q, and keep the d(d+1)/2 neurons v_i v_j, i <= j, of the
    symmetric key-value matrix.
    """
    from .attention import _square_weights

    W_V, W_K, W_Q = _square_weights(W_V, W_K, W_Q)
    d_v, d = W_V.shape
    d_k = W_K.shape[0]
    dt = W_V.dtype
    if compact:
        if d_v != d or d_k != d:
            raise ValueError(f"compact=True needs square d x d matrices, got W_V {tuple(W_V.shape)}, "
                             f"W_K {tuple(W_K.shape)}")
        if not torch.equal(W_K, W_V):
            cond = torch.linalg.cond(W_V)
            if not torch.isfinite(cond) or cond > 1e12:
                raise ValueError(f"compact=True needs an invertible W_V (condition number {float(cond):.2e})")
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
    """Neurons and parameters of the Fig. 1 construction for a d x d attention layer."""
    d = positive_int("d", d)
    n_kv = d * (d + 1) // 2 if compact else d * d
    n_h = n_kv + d
    n_g = d * d
    params = 2 * n_h * (d + 1) + n_h + 2 * n_g * n_h + d * n_g
    nonzero = (2 * d * n_kv + d * d + d) + n_h + 2 * n_g + n_g
    return {"hidden": n_h, "key_value": n_kv, "query": d, "gate_out": n_g,
            "parameters": params, "nonzero": nonzero, "attention_parameters": 3 * d * d}


# ----------------------------------------------------------------------------- polynomials

def instantaneous_tensor(model: GatedLinearRNN, n_tokens: int = 1) -> torch.Tensor:
    """The output at the last step of an ``n_tokens``-step sequence as an exact 4-tensor.

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


# ----------------------------------------------------------------------------- training

def train_adamw(model: nn.Module, batch: Callable[[torch.Generator], tuple[torch.Tensor, torch.Tensor]],
                *, steps: int, lr: float = 1e-3, lr_min: float = 1e-6, weight_decay: float = 1e-4,
                no_decay: tuple[str, ...] = ("nu_log",), seed: int = 0,
                loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
                predict: Callable[[nn.Module, torch.Tensor], torch.Tensor] | None = None,
                log_every: int = 100) -> dict[str, list]:
    """Online training of App. B.1: AdamW, cosine schedule lr -> lr_min over ``steps``.

    ``batch(generator) -> (x, y)`` draws a fresh batch every step (each sequence seen once);
    ``predict(model, x)`` (default ``model(x)``) gives what is compared with y by ``loss``
    (default 1/2 * mean squared error).  Parameters whose name ends with an entry of
    ``no_decay`` (the recurrent lam) get no weight decay.  Returns ``{"step", "loss"}``: the
    training loss averaged over each block of ``log_every`` steps.
    """
    steps = positive_int("steps", steps)
    lr = positive_real("lr", lr)
    lr_min = positive_real("lr_min", lr_min)
    if weight_decay < 0:
        raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
    loss = loss or (lambda yhat, y: 0.5 * ((yhat - y) ** 2).mean())
    predict = predict or (lambda mdl, x: mdl(x))
    decay, plain = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (plain if name.endswith(no_decay) else decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                             {"params": plain, "weight_decay": 0.0}], lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps, eta_min=lr_min)
    g = torch.Generator().manual_seed(seed)
    hist = {"step": [], "loss": []}
    acc, cnt = 0.0, 0
    for step in range(1, steps + 1):
        x, y = batch(g)
        value = loss(predict(model, x), y)
        opt.zero_grad(set_to_none=True)
        value.backward()
        opt.step()
        sched.step()
        acc += float(value.detach())
        cnt += 1
        if step % log_every == 0 or step == steps:
            hist["step"].append(step)
            hist["loss"].append(acc / cnt)
            acc, cnt = 0.0, 0
    return hist
