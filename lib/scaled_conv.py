"""The scaled 1-D convolution of Emami et al. (2021), eq. (6)-(8), and its weights rho_j (eq. 21).

    y_t = sum_{j=0}^{t} sqrt(rho_j) theta_j x_{t-j},      L_j = sqrt(rho_j) theta_j.

With rho_j = 1 for all j this is the plain ("unscaled") Conv-1D whose parameters are the taps
L_j themselves.  With the rho_j of eq. (21) it has, in the wide limit, the same tangent kernel
as the linear RNN (Theorems 3.2 and 3.3), so gradient descent on the two models coincides.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from ._checks import DTYPE, as_tensor, positive_int, positive_real, seed_int
from .linear_rnn import causal_conv

__all__ = ["rho", "rho_max", "ScaledConv"]


def rho(T: int, nu_W: float, nu_F: float, nu_C: float) -> torch.Tensor:
    """rho_j = nu_C (j nu_F nu_W^{j-1} + nu_W^j) + nu_F nu_W^j, j = 0..T-1 (eq. 21), float64.

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
    """rho_max = nu_C (T nu_F + 1) + nu_F of eq. (22), so that rho_j <= rho_max nu_W^{j-1}."""
    T = positive_int("T", T)
    return positive_real("nu_C", nu_C) * (T * positive_real("nu_F", nu_F) + 1) + nu_F


class ScaledConv(nn.Module):
    """Scaled convolution y_t = sum_j sqrt(rho_j) theta_j x_{t-j} (eq. 8).

    rho: (T,) positive scalings (``torch.ones(T)`` gives the unscaled Conv-1D).
    The parameter is ``theta`` of shape (T, n_y, n_x).  Initialisation: from given taps
    ``L0`` (theta = L0 / sqrt(rho), eq. 58: "the RNN's own initial impulse response"), or
    i.i.d. N(0, init_var) entries of theta from ``seed``.
    """

    def __init__(self, rho: torch.Tensor, n_x: int, n_y: int, *, L0: torch.Tensor | None = None,
                 seed: int = 0, init_var: float = 1.0, dtype=DTYPE):
        super().__init__()
        r = as_tensor("rho", rho, 1, dtype=dtype)
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
