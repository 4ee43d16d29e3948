"""Diagonal linear recurrences h_t = lam * h_{t-1} + u_t (h_{-1} = 0), elementwise in lam.

The state update of every diagonal RNN of the book (the gated RNN of eq. (2) of Zucchet et al.,
the LRU of Chapter 13), computed three ways that must agree:

    diagonal_scan            a log2(T)-step Hillis-Steele scan, differentiable by autograd
                             (its time-major core, :func:`scan_time_major`, is the gated RNN's)
    diagonal_recurrence      the sequential loop in place, with the hand-written adjoint backward
                             of :class:`DiagonalRecurrence` (no graph of T nodes)
    diagonal_scan_reference  the plain loop, the reference both are tested against

:func:`recur_` is the in-place loop itself, shared by :class:`DiagonalRecurrence` and the gated
RNN's evaluation without gradients. Real or complex lam.
"""
from __future__ import annotations

import torch

from ._checks import as_tensor

__all__ = ["DiagonalRecurrence", "diagonal_recurrence", "diagonal_scan", "diagonal_scan_reference",
           "recur_", "recurrence_unchecked", "scan_time_major"]


def _lam_and_u(what: str, lam, u) -> tuple[torch.Tensor, torch.Tensor]:
    """lam (n,) and u (B, T, n), as tensors with data, finite, of matching n (a ValueError naming
    the argument otherwise: a 2-D ``u`` would be run along its first axis)."""
    lam = as_tensor("lam", lam, tuple(range(8)))
    u = as_tensor("u", u, tuple(range(8)))
    if lam.ndim != 1 or u.ndim != 3 or lam.shape[0] != u.shape[-1]:
        raise ValueError(f"{what} needs lam (n,) and u (B, T, n), got lam {tuple(lam.shape)} and u {tuple(u.shape)}")
    if lam.device != u.device:
        raise TypeError(f"lam is on {lam.device} but u is on {u.device}")
    return lam, u


def diagonal_scan(lam: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """h_t = lam * h_{t-1} + u_t (h_{-1} = 0) for all t at once, by a Hillis-Steele scan.

    Its time-major core is the log2(T)-step scan by which :class:`lib.GatedLinearRNN` runs eq. (2)
    (Chapter 10, section "sec-lsa-gated").

    ``lam``: (n,) (real or complex), ``u``: (B, T, n) (a ValueError otherwise: a 2-D ``u``
    would be scanned along its first axis).  After the step with offset k the
    state holds sum_{j < 2k} lam^j u_{t-j}; ceil(log2 T) vectorised steps, no division by lam
    (so lam = 0 is exact), powers lam^k by repeated squaring.  Returns (B, T, n).
    """
    lam, u = _lam_and_u("diagonal_scan", lam, u)
    return scan_time_major(lam, u.transpose(0, 1).contiguous()).transpose(0, 1)


def scan_time_major(lam: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """The scan of :func:`diagonal_scan` on time-major states ``h`` (T, ..., n), out of place.

    Step k adds lam^k h_{t-k} to h_t (one fused multiply-add per element) for t >= k, k = 1, 2,
    4, ...: differentiable by autograd, log2(T) steps. No argument checks (the callers' inner loop).
    """
    T = h.shape[0]
    pw, k = lam, 1
    while k < T:
        h = torch.cat([h[:k], torch.addcmul(h[k:], pw, h[:-k])], dim=0)
        pw = pw * pw
        k *= 2
    return h


def diagonal_recurrence(lam: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """h_t = lam * h_{t-1} + u_t (h_{-1} = 0), (B, T, n) -> (B, T, n), real or complex.

    The state update of :class:`lib.recurrent_cells.LRULayer` (Chapter 13, sections "sec-glu",
    "sec-lru-in" and "sec-fig4"); its :class:`DiagonalRecurrence` is the in-place recurrence of the
    Performance appendix, "What limits the training-step ratios".

    The sequential recurrence with a hand-written backward (:class:`DiagonalRecurrence`):
    T - 1 fused multiply-adds forward and backward and no autograd graph over time, which on a
    CPU is several times faster to differentiate than :func:`diagonal_scan` for short T.
    ``lam`` (n,) and ``u`` (B, T, n) are checked (a ValueError naming the argument otherwise).
    """
    return recurrence_unchecked(*_lam_and_u("diagonal_recurrence", lam, u))


def recurrence_unchecked(lam: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """:func:`diagonal_recurrence` without the checks of its arguments: a model's own forward
    pass (the LRU layer's), whose input was checked once, in a training step (no host sync)."""
    g = u.transpose(0, 1)[None]                                  # (1, T, B, n), time-major
    return DiagonalRecurrence.apply(lam.reshape(1, 1, -1), g.contiguous())[0].transpose(0, 1)


def diagonal_scan_reference(lam: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """The plain loop h_t = lam * h_{t-1} + u_t, (B, T, n) -> (B, T, n).

    The state update of eq. (2) (Chapter 10, section "sec-lsa-gated") step by step; the tests hold
    :func:`diagonal_scan` and :func:`diagonal_recurrence` to it.
    """
    lam, u = _lam_and_u("diagonal_scan_reference", lam, u)
    h = torch.zeros_like(u[:, 0])
    out = []
    for t in range(u.shape[1]):
        h = lam * h + u[:, t]
        out.append(h)
    return torch.stack(out, dim=1)


def recur_(h: torch.Tensor, lam: torch.Tensor) -> torch.Tensor:
    """h_t += lam * h_{t-1} over axis 1 of ``h`` (K, T, ..., n), in place; returns ``h``.

    ``lam`` broadcasts against one time slice h[:, t]. T - 1 fused multiply-adds, no copies.
    """
    for t in range(1, h.shape[1]):
        h[:, t].addcmul_(h[:, t - 1], lam)
    return h


class DiagonalRecurrence(torch.autograd.Function):
    """h_t = lam * h_{t-1} + g_t over axis 1 of g (K, T, B, n), lam (K, 1, n), in place.

    Forward: T - 1 fused multiply-adds on (K, B, n) slices.  Backward: the adjoint recurrence
    a_t = dL/dh_t + conj(lam) * a_{t+1} (reverse time) gives dL/dg_t = a_t and
    dL/dlam = sum_{t >= 1} a_t * conj(h_{t-1}).  Same T K B n work as the forward, no graph of
    T nodes; real or complex (torch's conjugate-Wirtinger convention; conj is a no-op for real
    tensors); checked against autograd through the plain loop in the tests.
    """

    @staticmethod
    def forward(ctx, lam, g):
        h = recur_(g.clone(), lam)
        ctx.save_for_backward(lam, h)
        return h

    @staticmethod
    def backward(ctx, grad_h):
        lam, h = ctx.saved_tensors
        a = grad_h.clone()
        lam_c = lam.conj()
        for t in range(a.shape[1] - 2, -1, -1):
            a[:, t].addcmul_(a[:, t + 1], lam_c)
        grad_lam = ((a[:, 1:] * h[:, :-1].conj()).sum(dim=(1, 2))[:, None, :]
                    if ctx.needs_input_grad[0] else None)
        return grad_lam, a
