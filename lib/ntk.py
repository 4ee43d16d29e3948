"""Neural tangent kernels of Part I (Emami et al. 2021, Section 3, Theorems 3.2 and 3.3).

For a model y = f(x, theta) mapping (N, T, n_x) -> (N, T, n_y), the NTK is

    K(x, x')[(i, t, a), (k, s, c)] = < d y_{i,t,a} / d theta ,  d y'_{k,s,c} / d theta >.

**Interface (every kernel in this module).** A kernel is a function ``K(x1, x2, ...)`` of the
two input batches first, then what defines the model (rho, a tap Gram matrix M, a module), with
the sizes N1, N2, T, n_x read from the inputs and n_y from M or the module where they fix it.
**Ordering.** Rows are ordered (sample i, time t, output
channel a) with the output channel fastest, columns (sample k, time s, output channel c)
likewise; a kernel of x1: (N1, T, n_x) and x2: (N2, T, n_x) has shape (N1 T n_y, N2 T n_y),
i.e. it is ``K6.reshape(N1*T*n_y, N2*T*n_y)`` of the 6-D tensor K6[i, t, a, k, s, c].

Every linear-in-x sequence model is a causal convolution with taps L_j (T, n_y, n_x), so its
tangent kernel factors through the Toeplitz matrix 𝒯(x) of eq. (18):

    K(x, x') = 𝒯(x)^T  M  𝒯(x')        (n_y, n_x blocks understood),

where M = J J^T is the Gram matrix of the Jacobian J of the taps with respect to the
parameters.  M is a (T n_y n_x) x (T n_y n_x) matrix ordered (tap j, output a, input b),
which is ``L.reshape(-1)``'s order.  For the scaled convolution (Thm 3.2) M = D(rho) ⊗ I,
exactly; for the linear RNN, M_n -> D(rho) ⊗ I with rho of eq. (21) as n -> infinity (Thm 3.3).
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from ._checks import DTYPE, as_tensor, positive_int
from .krylov import krylov_rows
from .linear_rnn import LinearRNN, impulse_response

__all__ = [
    "toeplitz",
    "conv_ntk",
    "factored_ntk",
    "empirical_ntk",
    "markov_jacobian",
    "markov_ntk_factor",
    "markov_ntk_factor_reference",
    "conv_ntk_factor",
    "power_law_fit",
]


def _pair(x1, x2):
    x1 = as_tensor("x1", x1, 3)
    x2 = as_tensor("x2", x2, 3)
    if x1.shape[2] != x2.shape[2]:
        raise ValueError(f"x1 and x2 must have the same n_x (shape (N, T, n_x)); got x1 "
                         f"{tuple(x1.shape)} and x2 {tuple(x2.shape)}")
    if x1.shape[1] != x2.shape[1]:
        raise ValueError(f"x1 and x2 must have the same length T (shape (N, T, n_x)); got x1 "
                         f"{tuple(x1.shape)} and x2 {tuple(x2.shape)}")
    dt = torch.promote_types(x1.dtype, x2.dtype)
    return x1.to(dt), x2.to(dt)


def toeplitz(x: torch.Tensor) -> torch.Tensor:
    """The block Toeplitz matrix 𝒯(x) of eq. (18).

    Derived in Chapter 2, section "sec-thm32" (eq. 18); Chapter 3 builds from it the data operator A
    of section "sec-gd-analysis".

    x: (T, n_x) -> (T n_x, T), or a batch x: (N, T, n_x) -> (N, T n_x, T), with
    𝒯(x)[(j, b), t] = x_{t-j}[b] for t >= j and 0 otherwise (row index j*n_x + b).
    Then the convolution y_t = sum_j L_j x_{t-j} reads y[:, t] = [L_0 ... L_{T-1}] 𝒯(x)[:, t].
    """
    x = as_tensor("x", x, (2, 3))
    single = x.ndim == 2
    if single:
        x = x[None]
    N, T, n_x = x.shape
    # shifted[i, j, t, b] = x[i, t - j, b] (0 for t < j): pad T-1 zeros in front, take windows
    padded = torch.cat([x.new_zeros(N, T - 1, n_x), x], dim=1)          # (N, 2T-1, n_x)
    idx = (torch.arange(T)[None, :] - torch.arange(T)[:, None]) + (T - 1)  # [j, t] -> t - j + T-1
    shifted = padded[:, idx, :]                                          # (N, T_j, T_t, n_x)
    out = shifted.permute(0, 1, 3, 2).reshape(N, T * n_x, T)
    return out[0] if single else out


def _check_rho(rho, T: int) -> torch.Tensor:
    rho = as_tensor("rho", rho, 1)
    if rho.shape[0] != T:
        raise ValueError(f"rho must hold one scale per time step, T = {T}, got {rho.shape[0]}")
    if (rho < 0).any():
        raise ValueError(f"rho must be >= 0 (they are variances), got min {float(rho.min())}")
    return rho


def conv_ntk_factor(rho: torch.Tensor, n_x: int, n_y: int) -> torch.Tensor:
    """D(rho) ⊗ I in the tap ordering (j, a, b): diag(rho_j) of size (T n_y n_x)^2 (Thm 3.2).

    D(rho) is eq. (19) of Chapter 2, section "sec-thm32"; section "sec-convergence" measures the
    finite-width M_n against this matrix (M_n -> D(rho) ⊗ I, section "sec-finite-width").
    """
    rho = as_tensor("rho", rho, 1)
    if (rho < 0).any():
        raise ValueError(f"rho must be >= 0, got min {float(rho.min())}")
    n_x = positive_int("n_x", n_x)
    n_y = positive_int("n_y", n_y)
    return torch.diag(rho.repeat_interleave(n_y * n_x))


def conv_ntk(x1: torch.Tensor, x2: torch.Tensor, rho: torch.Tensor, n_y: int = 1) -> torch.Tensor:
    """NTK of the scaled convolution (8), Theorem 3.2: K = 𝒯(x1)^T D(rho) 𝒯(x2) ⊗ I_{n_y}.

    Derived in Chapter 2, section "sec-thm32".

    x1: (N1, T, n_x), x2: (N2, T, n_x), rho: (T,) >= 0; n_y output channels (the one size the
    inputs do not fix: the kernel is the same for every channel, ⊗ I_{n_y}).  Returns
    (N1 T n_y, N2 T n_y), ordered (sample, time, output channel) on both sides.  The same
    function is the wide-limit NTK of the linear RNN with rho = lib.rho(T, nu_W, nu_F, nu_C)
    (Theorem 3.3).  Entry: K[(i,t,a),(k,s,c)] = delta_ac sum_j rho_j x1_i[t-j] . x2_k[s-j].
    """
    x1, x2 = _pair(x1, x2)
    N1, T, n_x = x1.shape
    N2 = x2.shape[0]
    rho = _check_rho(rho, T).to(x1.dtype)
    n_y = positive_int("n_y", n_y)
    X1 = toeplitz(x1).reshape(N1, T, n_x, T)   # [i, j, b, t]
    X2 = toeplitz(x2).reshape(N2, T, n_x, T)
    K0 = torch.einsum("ijbt,j,kjbs->itks", X1, rho, X2)                 # (N1, T, N2, T)
    eye = torch.eye(n_y, dtype=x1.dtype)
    K = K0[:, :, None, :, :, None] * eye[None, None, :, None, None, :]  # [i, t, a, k, s, c]
    return K.reshape(N1 * T * n_y, N2 * T * n_y)


def factored_ntk(x1: torch.Tensor, x2: torch.Tensor, M: torch.Tensor) -> torch.Tensor:
    """K = 𝒯(x1)^T M 𝒯(x2) for a tap Gram matrix M ordered (j, a, b) (see module docstring).

    x1: (N1, T, n_x), x2: (N2, T, n_x); M: (T n_y n_x, T n_y n_x) (e.g. ``markov_ntk_factor``),
    from whose size n_y is read.  Returns (N1 T n_y, N2 T n_y) ordered (sample, time, output
    channel).  K[(i,t,a),(k,s,c)] = sum_{j,b,J,d} x1_i[t-j, b] M[(j,a,b),(J,c,d)] x2_k[s-J, d].
    Chapter 2, section "The finite-width kernel factors exactly", checks it against
    ``empirical_ntk`` and uses it for the kernels of section "Empirical kernel against the limit".
    """
    x1, x2 = _pair(x1, x2)
    N1, T, n_x = x1.shape
    N2 = x2.shape[0]
    M = as_tensor("M", M, 2).to(x1.dtype)
    m = M.shape[0]
    if M.shape != (m, m) or m % (T * n_x) != 0:
        raise ValueError(f"M must have shape (T n_y n_x, T n_y n_x), a square matrix whose size is a "
                         f"multiple of T n_x = {T * n_x} (T = {T}, n_x = {n_x}, from x1); got {tuple(M.shape)}")
    n_y = m // (T * n_x)
    M6 = M.reshape(T, n_y, n_x, T, n_y, n_x)
    X1 = toeplitz(x1).reshape(N1, T, n_x, T)
    X2 = toeplitz(x2).reshape(N2, T, n_x, T)
    left = torch.einsum("ijbt,jabJcd->itaJcd", X1, M6)                   # (N1, T, n_y, T, n_y, n_x)
    K = torch.einsum("itaJcd,kJds->itaksc", left, X2)
    return K.reshape(N1 * T * n_y, N2 * T * n_y)


def empirical_ntk(x1: torch.Tensor, x2: torch.Tensor, model: nn.Module, *,
                  chunk: int | None = None) -> torch.Tensor:
    """Finite-width NTK of any nn.Module mapping (N, T, n_x) -> (N, T, n_y), by torch.func.

    Derived in Chapter 2, section "sec-ntk-def"; sections "sec-thm32" and "sec-finite-width" check
    ``conv_ntk`` and ``factored_ntk`` against it.

    K[(i,t,a),(k,s,c)] = sum over all parameters of d y1[i,t,a]/d theta * d y2[k,s,c]/d theta,
    returned as (N1 T n_y, N2 T n_y) in (sample, time, output channel) order.  Computed as
    NTK-vector products: for a chunk of outputs of x2, ``vmap(vjp)`` gives their parameter
    gradients and ``vmap(jvp)`` of f(x1) along them gives those columns of K; memory stays
    O(chunk * #parameters).  ``chunk`` defaults to about 2^25 / #parameters columns.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    x1, x2 = _pair(x1, x2)
    n_x_model = getattr(model, "n_x", None)
    if n_x_model is not None and x1.shape[2] != n_x_model:
        raise ValueError(f"x1, x2 must have n_x = {n_x_model} input channels (the model's), got "
                         f"{x1.shape[2]}")
    params = {k: v.detach() for k, v in model.named_parameters() if v.requires_grad}
    if not params:
        raise ValueError("model has no trainable parameters")
    n_params = sum(v.numel() for v in params.values())
    if chunk is None:
        chunk = max(1, (1 << 25) // n_params)
    chunk = positive_int("chunk", chunk)
    buffers = {k: v for k, v in model.named_buffers()}

    def f(p, x):
        return torch.func.functional_call(model, (p, buffers), (x,)).reshape(-1)

    with torch.no_grad():
        m1 = f(params, x1).numel()
    y2, vjp_fn = torch.func.vjp(lambda p: f(p, x2), params)
    m2 = y2.numel()
    eye = torch.eye(m2, dtype=y2.dtype)
    cols = []
    for start in range(0, m2, chunk):
        (grads,) = torch.func.vmap(vjp_fn)(eye[start:start + chunk])      # each (c, *p.shape)
        jvp_one = lambda tangent: torch.func.jvp(lambda p: f(p, x1), (params,), (tangent,))[1]
        cols.append(torch.func.vmap(jvp_one)(grads).T)                     # (m1, c)
    K = torch.cat(cols, dim=1)
    assert K.shape == (m1, m2)
    return K


def markov_jacobian(model: LinearRNN, T: int) -> torch.Tensor:
    """J = d vec(L) / d (W, F, C) of the RNN's taps L (T, n_y, n_x), by torch.func.jacrev.

    The J of Chapter 2, section "sec-finite-width" (M_n = J J^T); that section checks
    ``markov_ntk_factor`` against J J^T through ``markov_ntk_factor_reference``.

    Rows ordered (j, a, b) as ``L.reshape(-1)``; columns W (row-major), then F, then C.
    Shape (T n_y n_x, n^2 + n n_x + n_y n).  The plain reference for ``markov_ntk_factor``;
    it stores J, so it is only for moderate n.
    """
    if not isinstance(model, LinearRNN):
        raise TypeError(f"model must be a lib.LinearRNN, got {type(model).__name__}")
    T = positive_int("T", T)
    p = (model.W.detach(), model.F.detach(), model.C.detach())
    jac = torch.func.jacrev(lambda W, F, C: impulse_response(W, F, C, T).reshape(-1),
                            argnums=(0, 1, 2))(*p)
    m = T * model.n_y * model.n_x
    return torch.cat([j.reshape(m, -1) for j in jac], dim=1)


def markov_ntk_factor_reference(model: LinearRNN, T: int) -> torch.Tensor:
    """M_n = J J^T from the explicit Jacobian ``markov_jacobian`` (reference, moderate n).

    Used in Chapter 2, section "sec-finite-width", to check ``markov_ntk_factor`` against J J^T.
    """
    J = markov_jacobian(model, T)
    return J @ J.T


def markov_ntk_factor(model: LinearRNN, T: int) -> torch.Tensor:
    """M_n = J J^T, the Gram matrix of the tap Jacobian of a LinearRNN (T n_y n_x square).

    Derived in Chapter 2, section "sec-finite-width" (eq. `eq-factor`); its limit is section "sec-mn".

    Ordered (j, a, b) on both sides, so that the finite-width NTK is exactly
    ``factored_ntk(x1, x2, M_n)`` (K_n = 𝒯(x)^T M_n 𝒯(x')), and M_n -> D(rho) ⊗ I as
    n -> infinity (Thm 3.3).  With A = W / sqrt(n), s = 1/sqrt(n), Q_k = A^k F (n, n_x),
    P_m = C A^m (n_y, n) and L_j = s C A^j F, the three parameter blocks give

        C:  delta_ac s^2 (Q_j^T Q_J)[b, d]
        F:  delta_bd s^2 (P_j P_J^T)[a, c]
        W:  s^4 sum_{m<j, m'<J} (P_m P_m'^T)[a, c] (Q_{j-1-m}^T Q_{J-1-m'})[b, d]

    so M_n costs O(T n^2 (n_x + n_y)) for the Krylov blocks plus O(T^2 n (n_x + n_y)) for
    their Gram matrices -- J itself (T n_y n_x by ~n^2) is never formed.
    """
    if not isinstance(model, LinearRNN):
        raise TypeError(f"model must be a lib.LinearRNN, got {type(model).__name__}")
    T = positive_int("T", T)
    with torch.no_grad():
        W, F, C = model.W, model.F, model.C
        n, n_x, n_y = model.n, model.n_x, model.n_y
        s = 1.0 / math.sqrt(n)
        # both sequences in one pass over W per step (lib.krylov); Qt_k = Q_k^T as rows
        Qt, P = krylov_rows(W, F.mT, T, s, P0=C)           # (T, n_x, n), (T, n_y, n)
        GQ = torch.einsum("jbn,Jdn->jbJd", Qt, Qt)         # Q_j^T Q_J   (T, n_x, T, n_x)
        GP = torch.einsum("jan,Jcn->jaJc", P, P)           # P_j P_J^T   (T, n_y, T, n_y)
        eye_x = torch.eye(n_x, dtype=W.dtype)
        eye_y = torch.eye(n_y, dtype=W.dtype)
        M = s**2 * (torch.einsum("ac,jbJd->jabJcd", eye_y, GQ)
                    + torch.einsum("bd,jaJc->jabJcd", eye_x, GP))
        if T > 1:
            # W block: S[j, J] = sum_{m<j, m'<J} GP[m, m'] ⊗ GQ[j-1-m, J-1-m'].  With
            # k = j-1-m this is a sum over (m, m') with the GQ index shifted, done as one
            # einsum over a "lag" tensor GQs[m, j, ...] = GQ[j-1-m] (zero when j-1-m < 0).
            idx = torch.arange(T)
            lag = idx[None, :] - 1 - idx[:, None]          # [m, j] -> j-1-m
            valid = (lag >= 0).to(W.dtype)
            lag = lag.clamp(min=0)
            # GQs[m, j, b, m', J, d] = GQ[j-1-m, b, J-1-m', d]
            GQs = GQ[lag][:, :, :, lag]                    # (T_m, T_j, n_x, T_m', T_J, n_x)
            GQs = GQs * valid[:, :, None, None, None, None] * valid[None, None, None, :, :, None]
            MW = torch.einsum("maMc,mjbMJd->jabJcd", GP, GQs)
            M = M + s**4 * MW
        m = T * n_y * n_x
        return M.reshape(m, m)


def power_law_fit(n, mean, se) -> dict:
    """Weighted least-squares fit of ``mean ~ a * n**b`` on log scales, errors from ``se``.

    The finite-width rates of Part I: the RNN-vs-kernel training gap (Chapter 4, "Figure 4: how
    wide must the RNN be?") and the long-lag excess of the finite-width RNN (Chapter 3, "At
    finite width the long lags move faster").  ``n``: the widths (> 0, at least two distinct);
    ``mean``: the per-width means (> 0); ``se``: their standard errors (> 0), e.g. the spread
    over seeds / sqrt(seeds).  On the log scale each point has standard error se / mean (delta
    method); the fit weights by its inverse and the returned ``slope_se`` comes from those
    errors alone (not rescaled by the residuals), so it is the exponent's uncertainty implied
    by the seeds.  Returns dict(slope, slope_se, intercept, chi2, dof) with
    log(mean) ~ intercept + slope * log(n) and chi2 the weighted residual sum on dof = #n - 2.
    """
    arrays = {}
    for name, v in (("n", n), ("mean", mean), ("se", se)):
        try:
            a = np.asarray(v, dtype=float)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name} must be a 1-D sequence of real numbers, got {type(v).__name__}") from exc
        if a.ndim != 1:
            raise ValueError(f"{name} must be 1-D, got shape {a.shape}")
        if not np.all(np.isfinite(a)) or not np.all(a > 0):
            raise ValueError(f"{name} must hold finite values > 0, got {a.tolist()}")
        arrays[name] = a
    if not (len(arrays["n"]) == len(arrays["mean"]) == len(arrays["se"])):
        raise ValueError(f"n, mean and se must have the same length, got {len(arrays['n'])}, "
                         f"{len(arrays['mean'])}, {len(arrays['se'])}")
    if len(np.unique(arrays["n"])) < 2:
        raise ValueError(f"n must hold at least two distinct widths, got {arrays['n'].tolist()}")
    lx, ly = np.log(arrays["n"]), np.log(arrays["mean"])
    sy = arrays["se"] / arrays["mean"]
    w = 1.0 / sy**2
    xbar = float((w * lx).sum() / w.sum())
    sxx = float((w * (lx - xbar) ** 2).sum())
    slope = float((w * (lx - xbar) * ly).sum() / sxx)
    intercept = float((w * ly).sum() / w.sum()) - slope * xbar
    chi2 = float((w * (ly - intercept - slope * lx) ** 2).sum())
    return dict(slope=slope, slope_se=math.sqrt(1.0 / sxx), intercept=intercept, chi2=chi2,
                dof=len(lx) - 2)
