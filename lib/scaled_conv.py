"""The scaled 1-D convolution of Emami et al. (2021), eq. (6)-(8), and its weights rho_j (eq. 21).

    y_t = sum_{j=0}^{t} sqrt(rho_j) theta_j x_{t-j},      L_j = sqrt(rho_j) theta_j.

With rho_j = 1 for all j this is the plain ("unscaled") Conv-1D whose parameters are the taps
L_j themselves.  With the rho_j of eq. (21) it has, in the wide limit, the same tangent kernel
as the linear RNN (Theorems 3.2 and 3.3), so gradient descent on the two models coincides.

The model is linear in theta, so its training is known in closed form; that is the
kernel-regime (n -> infinity) limit of training the linear RNN:
    ``conv_features``     the design matrix of a causal convolution.
    ``rho_ridge``         the rho-weighted ridge / minimum-rho-norm least-squares solution.
    ``gd_path``           the closed-form gradient-descent (or gradient-flow) path.
and the memory a trained model has acquired, measured on its taps and predicted by that limit:
    ``learned_fraction``  per lag, how far training has moved the taps towards a target.
    ``white_input_memory``  the kernel-regime prediction of that fraction for white inputs.
    ``fit_memory_nu_W``   the nu_W whose predicted memory matches a measured one.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from ._checks import DTYPE, as_tensor, float_dtype, positive_int, positive_real, seed_int, sequence_pair
from .linear_rnn import causal_conv

__all__ = ["rho", "rho_max", "ScaledConv", "conv_features", "rho_ridge", "gd_path", "learned_fraction",
           "white_input_memory", "fit_memory_nu_W"]


def rho(T: int, nu_W: float, nu_F: float, nu_C: float) -> torch.Tensor:
    """rho_j = nu_C (j nu_F nu_W^{j-1} + nu_W^j) + nu_F nu_W^j, j = 0..T-1 (eq. 21), float64.

    Derived in Chapter 2, sections "sec-thm33" and "sec-tau" (the tau recursion); the bound it
    sets is Chapter 3, section "sec-thm41".

    nu_W must lie in (0, 1) (stability of the random RNN, Section 2); nu_F, nu_C > 0.
    """
    T = positive_int("T", T)
    nu_W = positive_real("nu_W", nu_W, upper=1.0, upper_name="stability requires nu_W < 1")
    nu_F = positive_real("nu_F", nu_F)
    nu_C = positive_real("nu_C", nu_C)
    j = torch.arange(T, dtype=DTYPE)
    # j nu_W^{j-1}: 0 at j = 0 (not 0 * nu_W^{-1}, which is 0 * inf = nan for a tiny nu_W)
    j_pow = torch.cat([torch.zeros(1, dtype=DTYPE), j[1:] * nu_W ** (j[1:] - 1)])
    return nu_C * (nu_F * j_pow + nu_W**j) + nu_F * nu_W**j


def rho_max(T: int, nu_F: float, nu_C: float) -> float:
    """rho_max = nu_C (T nu_F + 1) + nu_F of eq. (22), so that rho_j <= rho_max nu_W^{j-1}.

    Derived with sympy in Chapter 2, section "sec-tau" (the geometric bound, eq. 22); Chapter 3 uses
    it in sections "sec-thm41" (the dashed bounds of the rho_j figure) and "sec-gd-analysis" (the
    constant B_1 of the theorem).
    """
    T = positive_int("T", T)
    return positive_real("nu_C", nu_C) * (T * positive_real("nu_F", nu_F) + 1) + nu_F


class ScaledConv(nn.Module):
    """Scaled convolution y_t = sum_j sqrt(rho_j) theta_j x_{t-j} (eq. 8).

    Derived in Chapter 2, section "sec-thm32"; its initialisation from L0 is Chapter 3, section
    "sec-equiv-conv", and Chapters 4-6 train it beside the RNN (first in Chapter 4, section
    "sec-fig12-task").

    rho: (T,) positive scalings (``torch.ones(T)`` gives the unscaled Conv-1D).
    The parameter is ``theta`` of shape (T, n_y, n_x).  Initialisation: from given taps
    ``L0`` (theta = L0 / sqrt(rho), eq. 58: "the RNN's own initial impulse response"), or
    i.i.d. N(0, init_var) entries of theta from ``seed``.
    """

    def __init__(self, rho: torch.Tensor, n_x: int, n_y: int, *, L0: torch.Tensor | None = None,
                 seed: int = 0, init_var: float = 1.0, dtype=DTYPE):
        super().__init__()
        r = as_tensor("rho", rho, 1, dtype=float_dtype("dtype", dtype))
        if (r <= 0).any():
            raise ValueError(f"rho must be positive, got min {float(r.min())}")
        self.n_x = positive_int("n_x", n_x)
        self.n_y = positive_int("n_y", n_y)
        self.register_buffer("rho", r.clone())
        T = r.shape[0]
        if L0 is not None:
            L0 = as_tensor("L0", L0, 3, dtype=dtype)
            if L0.shape != (T, self.n_y, self.n_x):
                raise ValueError(f"L0 must have shape (T, n_y, n_x) = {(T, self.n_y, self.n_x)}, "
                                 f"got {tuple(L0.shape)}")
            theta = L0 / r.sqrt()[:, None, None]
        else:
            init_var = positive_real("init_var", init_var)
            g = torch.Generator().manual_seed(seed_int("seed", seed))
            theta = math.sqrt(init_var) * torch.randn(T, self.n_y, self.n_x, generator=g, dtype=dtype)
        self.theta = nn.Parameter(theta.detach().clone())

    @property
    def T(self) -> int:
        return self.rho.shape[0]

    def taps(self) -> torch.Tensor:
        """The impulse response L_j = sqrt(rho_j) theta_j, shape (T, n_y, n_x)."""
        return self.rho.sqrt()[:, None, None] * self.theta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = as_tensor("x", x, 3, dtype=self.theta.dtype)
        if x.shape[2] != self.n_x:
            raise ValueError(f"x must have shape (N, T, n_x) with n_x = {self.n_x}, got {tuple(x.shape)}")
        if x.shape[1] > self.T:
            raise ValueError(f"x has {x.shape[1]} time steps but the filter only T = {self.T} taps")
        return causal_conv(self.taps(), x)


# --------------------------------------------------------------------------------------
# Kernel-regime limit: rho-weighted least squares and the closed-form GD path
# --------------------------------------------------------------------------------------

def conv_features(x: torch.Tensor, T_L: int | None = None) -> torch.Tensor:
    """Design matrix Phi of the causal convolution: row (i, t) = [x_t, x_{t-1}, ..., x_{t-T_L+1}]
    of sequence i (zeros before the start), so that y_t = Phi L^flat with
    L^flat[j n_x + k, a] = (L_j)_{a k}.  x: (N, T, n_x) -> (N T, T_L n_x); T_L defaults to T.
    Chapter 6, section "The data" (the R^2 of whole gradient-flow paths as one product)."""
    x = as_tensor("x", x, 3)
    N, T, n_x = x.shape
    T_L = T if T_L is None else positive_int("T_L", T_L)
    cols = []
    for j in range(T_L):
        shifted = torch.zeros_like(x)
        if j < T:
            shifted[:, j:, :] = x[:, : T - j, :]
        cols.append(shifted)
    return torch.cat(cols, dim=2).reshape(N * T, T_L * n_x)


def _flat_to_taps(Lf: torch.Tensor, T_L: int, n_x: int) -> torch.Tensor:
    # Lf: (T_L n_x, n_y) -> (T_L, n_y, n_x)
    return Lf.reshape(T_L, n_x, -1).permute(0, 2, 1).contiguous()


def _taps_to_flat(L: torch.Tensor) -> torch.Tensor:
    return L.permute(0, 2, 1).reshape(L.shape[0] * L.shape[2], L.shape[1])


def _check_xy_rho(x, y, rho):
    x, y = sequence_pair(x, y)
    rho = as_tensor("rho", rho, 1, dtype=x.dtype)
    if (rho <= 0).any():
        raise ValueError(f"rho must be positive, got min {float(rho.min())}")
    return x, y, rho


def rho_ridge(x: torch.Tensor, y: torch.Tensor, rho: torch.Tensor, lam: float) -> torch.Tensor:
    """argmin_L 1/2 sum ||y - causal_conv(L, x)||^2 + lam/2 sum_j ||L_j||_F^2 / rho_j.

    x: (N, T, n_x), y: (N, T, n_y), rho: (T_L,) positive.  In the variables theta_j = L_j /
    sqrt(rho_j) this is ordinary ridge regression on features scaled by sqrt(rho_j): the
    scaled convolution's implicit penalty.  ``lam = 0`` gives the least-squares solution of
    minimum rho-weighted norm (the pseudo-inverse).  Returns taps (T_L, n_y, n_x).
    It is where ``gd_path`` from zero taps ends (t -> infinity, ``lam = 0``): the implicit bias
    of GD on the scaled convolution (Chapter 3, section "Gradient descent on the convolution,
    exactly"); the tests check that limit.
    """
    x, y, rho = _check_xy_rho(x, y, rho)
    if isinstance(lam, bool) or not isinstance(lam, (int, float)) or not math.isfinite(lam) or lam < 0:
        raise ValueError(f"lam must be a finite real number >= 0, got {lam!r}")
    T_L, n_x, n_y = rho.shape[0], x.shape[2], y.shape[2]
    Phi = conv_features(x, T_L) * rho.sqrt().repeat_interleave(n_x)[None, :]
    Y = y.reshape(-1, n_y)
    if lam == 0:
        theta = torch.linalg.pinv(Phi) @ Y
    else:
        A = Phi.T @ Phi + lam * torch.eye(Phi.shape[1], dtype=Phi.dtype)
        theta = torch.linalg.solve(A, Phi.T @ Y)
    return _flat_to_taps(theta * rho.sqrt().repeat_interleave(n_x)[:, None], T_L, n_x)


def gd_path(x: torch.Tensor, y: torch.Tensor, rho: torch.Tensor, L0: torch.Tensor, lr: float,
            steps, *, flow: bool = False) -> torch.Tensor:
    """Taps of the scaled convolution after ``steps`` GD steps on the 1/2-sum loss, in closed form.

    The model y = causal_conv(sqrt(rho) theta, x) is linear in theta, so full-batch GD with
    learning rate lr from theta_0 = L0 / sqrt(rho) is theta_l = theta_0 - U diag(c_l) U^T g_0
    with A = U diag(lam) U^T the Hessian Phi_rho^T Phi_rho, g_0 = A theta_0 - Phi_rho^T Y and
    c_l(lam) = (1 - (1 - lr lam)^l) / lam (-> lr l as lam -> 0).  ``flow=True`` gives the
    gradient flow at time lr * l instead, c(lam) = (1 - exp(-lr l lam)) / lam, the lr -> 0
    limit with lr * l fixed.  This is the kernel-regime (n -> infinity) limit of training the
    linear RNN (Theorems 3.2-3.3).

    steps: an int or a 1-D sequence of non-negative ints.  Returns (len(steps), T_L, n_y, n_x).
    The recursion is derived in Chapter 3, section "Gradient descent on the convolution,
    exactly"; Chapters 4 and 5 use the path as the wide-RNN limit (Chapter 5, section "The task,
    and what 'delay added to a true system' means", checks it against ``lib.train_gd``) and
    Chapter 6 its gradient flow (sections "The data", "The RNN's memory on S1 is set by nu_W").
    """
    x, y, rho = _check_xy_rho(x, y, rho)
    lr = positive_real("lr", lr)
    T_L, n_x, n_y = rho.shape[0], x.shape[2], y.shape[2]
    L0 = as_tensor("L0", L0, 3, dtype=x.dtype)
    if L0.shape != (T_L, n_y, n_x):
        raise ValueError(f"L0 must have shape (T_L, n_y, n_x) = {(T_L, n_y, n_x)}, got {tuple(L0.shape)}")
    step_list = [steps] if isinstance(steps, (int, np.integer)) and not isinstance(steps, bool) else list(steps)
    step_list = [positive_int("steps", int(s) if isinstance(s, np.integer) else s, minimum=0) for s in step_list]
    if not step_list:
        raise ValueError("steps must hold at least one step count")
    sq = rho.sqrt().repeat_interleave(n_x)
    Phi = conv_features(x, T_L) * sq[None, :]
    Y = y.reshape(-1, n_y)
    A = Phi.T @ Phi
    lam, U = torch.linalg.eigh(A)
    lam = lam.clamp_min(0)
    theta0 = _taps_to_flat(L0) / sq[:, None]
    g0 = U.T @ (A @ theta0 - Phi.T @ Y)
    out = []
    for s in step_list:
        if flow:
            t = lr * s
            c = torch.where(lam * t > 1e-12, -torch.expm1(-t * lam) / lam.clamp_min(1e-300), t * torch.ones_like(lam))
        else:
            if s > 0 and bool((lr * lam.max() >= 2)):
                raise ValueError(f"lr * lambda_max = {float(lr * lam.max()):.3g} >= 2: GD diverges; "
                                 "use a smaller lr or flow=True")
            q = 1 - lr * lam
            pos = q > 0  # 1 - q^s without cancellation where log1p applies
            c_pos = -torch.expm1(s * torch.log1p(-lr * lam.where(pos, torch.zeros_like(lam))))
            c = torch.where(pos, c_pos, 1 - q**s) / lam.clamp_min(1e-300)
            c = torch.where(lam * lr < 1e-14, lr * s * torch.ones_like(lam), c)
        theta = theta0 - U @ (c[:, None] * g0)
        out.append(_flat_to_taps(theta * sq[:, None], T_L, n_x))
    return torch.stack(out)


# --------------------------------------------------------------------------------------
# The memory a trained model has acquired (Chapters 5 and 6)
# --------------------------------------------------------------------------------------

def learned_fraction(L: torch.Tensor, L0: torch.Tensor, L_target: torch.Tensor) -> torch.Tensor:
    """Per lag j, the fraction of the way from the start L0_j to the target L_target_j that
    training has gone: f_j = <L_j - L0_j, D_j> / ||D_j||^2 with D_j = L_target_j - L0_j.

    L, L0, L_target: taps (T, n_y, n_x).  Returns (T,).  f_j = 1: lag j learned; f_j = 0: not
    moved towards the target (movement orthogonal to D_j, such as finite-width cross-talk from
    other lags, averages out of f_j).  With the target the true system this is the memory
    profile of Chapter 5 (section "Memory is set by nu_W"); with the target the kernel-regime
    taps it measures how far a model follows its kernel limit (Chapter 6, section "The RNN's
    memory on S1 is set by nu_W").
    """
    L = as_tensor("L", L, 3)
    L0 = as_tensor("L0", L0, 3, dtype=L.dtype)
    L_target = as_tensor("L_target", L_target, 3, dtype=L.dtype)
    if L0.shape != L.shape or L_target.shape != L.shape:
        raise ValueError(f"L, L0 and L_target must have the same shape (T, n_y, n_x); got {tuple(L.shape)}, "
                         f"{tuple(L0.shape)} and {tuple(L_target.shape)}")
    D = (L_target - L0).flatten(1)
    den = (D**2).sum(1)
    if (den == 0).any():
        j = int(torch.nonzero(den == 0)[0])
        raise ValueError(f"L_target equals L0 at lag {j}: the learned fraction is undefined there")
    return ((L - L0).flatten(1) * D).sum(1) / den


def white_input_memory(T: int, nu_W: float, nu_F: float, nu_C: float, lr: float, steps: int,
                       n_seq: int) -> torch.Tensor:
    """Kernel-regime prediction of ``learned_fraction`` for white inputs: lag j is learned like
    a decoupled coordinate with curvature lambda_j = n_seq (T - j) (the number of (sequence,
    time) pairs that see lag j, unit input variance) and kernel weight rho_j (eq. 21), so
    after ``steps`` GD steps with learning rate ``lr``

        f_j = 1 - exp(-lr * steps * lambda_j * rho_j(nu_W)).

    First order in the cross-lag couplings of a finite sample; returns (T,) float64.
    Chapter 5, section "Memory is set by nu_W".
    """
    T = positive_int("T", T)
    steps = positive_int("steps", steps)
    n_seq = positive_int("n_seq", n_seq)
    lr = positive_real("lr", lr)
    r = rho(T, nu_W, nu_F, nu_C)
    lam = n_seq * (T - torch.arange(T, dtype=DTYPE))
    return -torch.expm1(-lr * steps * lam * r)


def fit_memory_nu_W(f, T: int, nu_F: float, nu_C: float, lr: float, steps: int, n_seq: int, *,
                    lags) -> float:
    """The nu_W whose white-input memory profile (``white_input_memory``) learns, summed over the
    given ``lags``, as much as the measured learned fractions ``f`` (T,): the solution of
    sum_{j in lags} f_j(nu_W) = sum_{j in lags} f_j, the memory of a trained model read back as a
    nu_W.  The predicted sum increases with nu_W, so the solution is unique; the sum (rather
    than a fit lag by lag) keeps single lags whose fraction is pushed below zero by the
    finite-sample cross-talk between lags from breaking the estimate.

    ``lags``: a non-empty list of lag indices in [0, T) (choose them before looking at f, e.g.
    where the prediction at the nominal nu_W lies in (0.02, 0.9)).  Returns nu_W in
    (0.01, 0.99); raises ValueError when the measured sum lies outside what that range
    predicts.  Chapter 5, section "Memory is set by nu_W".
    """
    from scipy.optimize import brentq

    T = positive_int("T", T)
    f = as_tensor("f", f, 1)
    if f.shape[0] != T:
        raise ValueError(f"f must have shape (T,) = ({T},), got {tuple(f.shape)}")
    lags = [positive_int("lags entry", int(j) if isinstance(j, np.integer) else j, minimum=0) for j in lags]
    if not lags or max(lags) >= T:
        raise ValueError(f"lags must be a non-empty list of lags in [0, {T - 1}], got {lags}")
    positive_real("nu_F", nu_F), positive_real("nu_C", nu_C)
    positive_real("lr", lr), positive_int("steps", steps), positive_int("n_seq", n_seq)
    target = float(f[lags].sum())

    def excess(nu):
        return float(white_input_memory(T, nu, nu_F, nu_C, lr, steps, n_seq)[lags].sum()) - target

    lo, hi = excess(0.01), excess(0.99)
    if not lo <= 0 <= hi:
        raise ValueError(f"the measured memory sum {target:.4g} over lags {lags} lies outside the range "
                         f"predicted for nu_W in (0.01, 0.99) ({lo + target:.4g} to {hi + target:.4g})")
    return float(brentq(excess, 0.01, 0.99, xtol=1e-10))
