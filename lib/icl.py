"""In-context linear regression (Zucchet et al. 2023, Section 4 and App. C).

A task is a matrix W* (d_y x d_x) with i.i.d. N(0, sigma_W^2) entries; the sequence shows
n = T pairs (x_t, W* x_t), t = 1..T, then the query (x_{T+1}, 0); the network's output at the
last step is regressed on y_{T+1} = W* x_{T+1}.  Inputs are i.i.d. centred uniform with
variance sigma_x^2, i.e. U(-sqrt(3 sigma_x^2), sqrt(3 sigma_x^2)).

One step of gradient descent from W_0 = 0 predicts  y_hat = eta * Y X^T x  (eq. 4).  Its
optimal learning rate (App. C.2, eq. 36) and optimal loss are closed forms:

    eta* = 1 / (sigma_x^2 (n + d_x - 1/5)),
    L(eta*) per output coordinate = 1/2 sigma_W^2 sigma_x^2 d_x (d_x - 1/5) / (n + d_x - 1/5).
"""
from __future__ import annotations

import math

import torch

from ._checks import finite, float_dtype, positive_int, positive_real

__all__ = ["eta_star", "gd_loss", "optimal_gd_loss", "icl_batch", "gd_predict"]


def _check(T, d_x, sigma_x2):
    return positive_int("T", T), positive_int("d_x", d_x), positive_real("sigma_x2", sigma_x2)


def eta_star(T: int, d_x: int, sigma_x2: float = 1.0) -> float:
    """Optimal one-step-GD learning rate 1 / (sigma_x^2 (T + d_x - 1/5)) (eq. 36, n = T).

    Derived with sympy in Chapter 12, section "sec-eta-star" (the paper's eq. 34 drops d_x).
    """
    T, d_x, sigma_x2 = _check(T, d_x, sigma_x2)
    return 1.0 / (sigma_x2 * (T + d_x - 0.2))


def gd_loss(eta: float, T: int, d_x: int, sigma_x2: float = 1.0, sigma_w2: float = 1.0) -> float:
    """L(eta) = 1/2 E||y - eta Y X^T x||^2 per output coordinate (uniform inputs):

    1/2 sigma_W^2 sigma_x^2 (d_x - 2 eta T d_x sigma_x^2 + eta^2 T d_x sigma_x^4 (T + d_x - 1/5)).

    Derived with sympy in Chapter 12, section "sec-eta-star" (divided by d_y), and checked there by
    Monte Carlo.
    """
    T, d_x, sigma_x2 = _check(T, d_x, sigma_x2)
    sigma_w2 = positive_real("sigma_w2", sigma_w2)
    if not isinstance(eta, (int, float)) or not math.isfinite(eta):
        raise TypeError(f"eta must be a finite real number, got {eta!r}")
    quad = T * d_x * sigma_x2**2 * (T + d_x - 0.2)
    return 0.5 * sigma_w2 * sigma_x2 * (d_x - 2 * eta * T * d_x * sigma_x2 + eta**2 * quad)


def optimal_gd_loss(T: int, d_x: int, sigma_x2: float = 1.0, sigma_w2: float = 1.0) -> float:
    """L(eta*) per output coordinate = 1/2 sigma_W^2 sigma_x^2 d_x (d_x - 1/5) / (T + d_x - 1/5).

    Derived with sympy in Chapter 12, section "sec-eta-star".
    """
    T, d_x, sigma_x2 = _check(T, d_x, sigma_x2)
    sigma_w2 = positive_real("sigma_w2", sigma_w2)
    return 0.5 * sigma_w2 * sigma_x2 * d_x * (d_x - 0.2) / (T + d_x - 0.2)


def icl_batch(batch: int, T: int, d_x: int, d_y: int, *, sigma_w2: float = 1 / 3,
              sigma_x2: float = 1.0, generator: torch.Generator,
              dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of in-context regression sequences.

    The task of Chapter 12, section "sec-icl-task"; sections "sec-eta-star" (Monte Carlo) and
    "sec-icl-train" (evaluation) draw from it.

    Returns ``tokens`` (batch, T + 1, d_x + d_y): rows (x_t, W* x_t) for t < T and the query
    row (x_{T+1}, 0); and ``target`` (batch, d_y) = W* x_{T+1}.
    """
    batch = positive_int("batch", batch)
    T, d_x, sigma_x2 = _check(T, d_x, sigma_x2)
    d_y = positive_int("d_y", d_y)
    sigma_w2 = positive_real("sigma_w2", sigma_w2)
    if not isinstance(generator, torch.Generator):
        raise TypeError("generator must be a torch.Generator (every draw from an explicit seed)")
    dtype = float_dtype("dtype", dtype)
    a = math.sqrt(3 * sigma_x2)
    x = (2 * torch.rand(batch, T + 1, d_x, generator=generator, dtype=torch.float64) - 1) * a
    W = torch.randn(batch, d_y, d_x, generator=generator, dtype=torch.float64) * math.sqrt(sigma_w2)
    y = torch.einsum("byx,btx->bty", W, x)
    tokens = torch.cat([x, y], dim=-1)
    tokens[:, T, d_x:] = 0.0
    return tokens.to(dtype), y[:, T].to(dtype)


def gd_predict(tokens: torch.Tensor, d_x: int, eta: float) -> torch.Tensor:
    """One GD step from W_0 = 0 (eq. 4): y_hat = eta sum_t y_t x_t^T x_query, (B, d_y).

    Derived in Chapter 12, section "sec-icl-task"; section "sec-eta-star" checks the loss of its
    predictions by Monte Carlo.
    """
    d_x = positive_int("d_x", d_x)
    if isinstance(eta, bool) or not isinstance(eta, (int, float)) or not math.isfinite(eta):
        raise ValueError(f"eta must be a finite real number, got {eta!r}")
    if not isinstance(tokens, torch.Tensor) or tokens.ndim != 3 or tokens.shape[-1] <= d_x:
        raise ValueError(f"tokens must be a tensor of shape (B, T+1, d_x + d_y) with d_x = {d_x}, got "
                         f"{tuple(tokens.shape) if isinstance(tokens, torch.Tensor) else type(tokens).__name__}")
    finite("tokens", tokens)
    if tokens[:, -1, d_x:].abs().max() != 0:
        raise ValueError(f"the query row's last {tokens.shape[-1] - d_x} entries (its y part) must be 0; "
                         f"is d_x = {d_x} the tokens' input dimension?")
    X, Y = tokens[:, :-1, :d_x], tokens[:, :-1, d_x:]
    xq = tokens[:, -1, :d_x]
    return eta * torch.einsum("bty,btx,bx->by", Y, X, xq)
