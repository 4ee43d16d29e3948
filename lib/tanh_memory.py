"""Linear memory units replaced by ``beta tanh(z / beta)`` units, with an error bound
(Sperduti 2015, §3.2: "linear units can be substituted by sigmoidal units incurring into a
predefined error").

* :func:`tanh_beta_star` — one unit: ``|beta tanh(z / beta) - z| < eps`` for ``|z| <= b``.
* :func:`tanh_memory_state_bound` — through the recurrence ``y_t = beta tanh((A x_t + B y_{t-1}) / beta)``.
* :func:`tanh_memory_beta` — the smallest beta that keeps a given output error.

:meth:`lib.nonlinear_ff.MemoryRNN.states` runs a memory with such units (its ``beta`` argument).
"""
from __future__ import annotations

import math

import torch

from ._checks import DTYPE, as_tensor, positive_int, positive_real

__all__ = ["tanh_beta_star", "tanh_memory_state_bound", "tanh_memory_beta"]


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
    ``sum_h |w_o[h]| ||G[h]||_2`` for the tanh readout of :class:`lib.nonlinear_ff.MemoryRNN`)."""
    eps = positive_real("eps", eps)
    gain = positive_real("gain", gain)
    return math.sqrt(gain * tanh_memory_state_bound(B, D, steps, 1.0) / eps)
