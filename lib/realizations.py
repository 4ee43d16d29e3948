"""Realizations of a T-tap causal convolution as a linear RNN, side by side (Chapter 14).

Every constructor takes the taps ``L`` (T, n_y, n_x) -- the Markov parameters a linear RNN must
have -- and returns ``(W, F, C)`` in the book's parametrisation (eq. 1 of Emami et al.: state
``h_t = n^{-1/2} W h_{t-1} + F x_t``, output ``y_t = n^{-1/2} C h_t``), so that
``lib.impulse_response(W, F, C, T)`` gives back ``L`` and ``lib.LinearRNN.from_weights`` runs it.

    shift_register_realization(L)        the last T inputs as the state (Sperduti's linear
                                         feedforward network read through a shift register)
    rotation_realization(L, radius=1)    nodes radius * (T-th roots of unity), each conjugate
                                         pair a real 2 x 2 rotation block
    memory_realization(L, sequences, rank=None)
                                         Sperduti's SVD memory (the linear autoencoder of the
                                         sequences) with the convolution read out of its state

``lib.vandermonde_realization`` (Chapter 1) is the fourth: a diagonal recurrence with real nodes,
i.e. the diagonal linear RNN of Part III with input-independent gates.
"""
from __future__ import annotations

import math

import torch

from ._checks import DTYPE, as_tensor, positive_int, positive_real
from .sequence_memory import check_sequences, fit_sequence_autoencoder

__all__ = ["shift_register_realization", "rotation_realization", "memory_realization"]


def _taps(L) -> torch.Tensor:
    L = as_tensor("L", L, 3, dtype=DTYPE)
    if L.shape[0] < 1 or L.shape[1] < 1 or L.shape[2] < 1:
        raise ValueError(f"L must have shape (T, n_y, n_x) with every size >= 1, got {tuple(L.shape)}")
    return L


def _scaled(A: torch.Tensor, B: torch.Tensor, Cr: torch.Tensor):
    """(W, F, C) of eq. (1) for the plain state space s_t = A s_{t-1} + B x_t, y_t = Cr s_t."""
    root_n = math.sqrt(A.shape[0])
    return root_n * A, B, root_n * Cr


def shift_register_realization(L) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The state holds the last T inputs, ``s_t = [x_t; x_{t-1}; ...; x_{t-T+1}]`` (n = T n_x).

    A shifts the blocks down by one (nilpotent: A^T = 0), B writes x_t into the first block, and
    the readout is the row of taps ``[L_0, ..., L_{T-1}]``: y_t = sum_j L_j x_{t-j}, exactly, on
    sequences of any length.  The readout *is* the taps, so the map taps -> weights has condition
    number 1.  (Chapter 14, section "sec-realizations-four".)
    """
    L = _taps(L)
    T, n_y, n_x = L.shape
    n = T * n_x
    A = torch.zeros(n, n, dtype=DTYPE)
    if T > 1:
        A[n_x:, :-n_x] = torch.eye(n - n_x, dtype=DTYPE)
    B = torch.zeros(n, n_x, dtype=DTYPE)
    B[:n_x] = torch.eye(n_x, dtype=DTYPE)
    Cr = L.permute(1, 0, 2).reshape(n_y, n)          # [L_0, L_1, ..., L_{T-1}]
    return _scaled(A, B, Cr)


def rotation_realization(L, radius: float = 1.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Nodes ``radius * exp(2 pi i k / T)``, k = 0..T-1, realised with real blocks (n = T n_x n_y).

    Derived in Chapter 14, section "sec-realizations-four".

    For every input/output pair a block of T units: the real nodes (+radius, and -radius when T
    is even) are 1 x 1 blocks; each conjugate pair is the rotation block
    ``radius [[cos t, -sin t], [sin t, cos t]]`` acting on (Re z, Im z) of the complex state
    z_t = lambda z_{t-1} + x_t, read out as 2 Re(c z) = 2 Re(c) Re(z) - 2 Im(c) Im(z).  The
    complex readout solves c V = l with V[k, t] = lambda_k^t, and V / sqrt(T) is unitary at
    radius 1 (condition number 1; r^{-(T-1)} at radius r < 1).  The first T taps are exact; the
    later ones repeat the first scaled by radius^T (taps j + T = radius^T taps j): at radius 1 the
    realization is periodic, not a finite convolution, beyond T steps.  (Chapter 14.)
    """
    L = _taps(L)
    radius = positive_real("radius", radius)
    if radius > 1.0:
        raise ValueError(f"radius must lie in (0, 1] (a stable or marginally stable recurrence), got {radius}")
    T, n_y, n_x = L.shape
    k = torch.arange(T, dtype=DTYPE)
    theta = 2 * math.pi * k / T
    lam = radius * torch.polar(torch.ones(T, dtype=DTYPE), theta)            # (T,) complex
    V = lam[:, None] ** torch.arange(T, dtype=DTYPE)[None, :]                 # (T nodes, T)
    coeffs = torch.linalg.solve(V.T, L.reshape(T, n_y * n_x).to(lam.dtype))  # (T nodes, pairs)
    # nodes k and T - k are conjugate; keep k = 0 (real), k = T/2 (real, T even), 1 <= k < T/2 (pairs)
    half = (T - 1) // 2
    n_block = T
    n = n_block * n_x * n_y
    A = torch.zeros(n, n, dtype=DTYPE)
    B = torch.zeros(n, n_x, dtype=DTYPE)
    Cr = torch.zeros(n_y, n, dtype=DTYPE)
    for a in range(n_y):
        for b in range(n_x):
            p = a * n_x + b
            o = p * n_block
            c = coeffs[:, p]
            A[o, o] = radius
            B[o, b] = 1.0
            Cr[a, o] = c[0].real
            i = o + 1
            if T % 2 == 0:
                A[i, i] = -radius
                B[i, b] = 1.0
                Cr[a, i] = c[T // 2].real
                i += 1
            for m in range(1, half + 1):
                cs, sn = radius * math.cos(theta[m].item()), radius * math.sin(theta[m].item())
                A[i:i + 2, i:i + 2] = torch.tensor([[cs, -sn], [sn, cs]], dtype=DTYPE)
                B[i, b] = 1.0
                Cr[a, i] = 2 * c[m].real
                Cr[a, i + 1] = -2 * c[m].imag
                i += 2
    return _scaled(A, B, Cr)


def memory_realization(L, sequences, rank: int | None = None):
    """Sperduti's SVD memory of ``sequences`` with the convolution read out of its state.

    The linear autoencoder (``lib.fit_sequence_autoencoder`` with window l = T) encodes the
    reversed prefix r_t = [x_t; ...; x_{t-T+1}] as y_t = U^T r_t (U: a T x rho, orthonormal
    columns).  Since the convolution is y_t = [L_0 ... L_{T-1}] r_t, the readout
    ``[L_0 ... L_{T-1}] U`` is exact whenever r_t lies in the span of U -- on every sequence when
    rho = T n_x (U square: an orthogonal change of basis of the shift register), only on the
    sequences' span when the memory is compressed (``rank`` < T n_x, or data of lower rank).
    The sequences the memory is fitted on may have any lengths up to T (the window).
    Returns ``(W, F, C)`` with n = rho.  (Chapter 14, section "sec-realizations-four".)
    """
    L = _taps(L)
    T, n_y, n_x = L.shape
    seqs = check_sequences(sequences, features=n_x)
    longest = max(int(s.shape[0]) for s in seqs)
    if longest > T:
        raise ValueError(f"sequences must be at most T = {T} items long (the memory's window is the "
                         f"convolution's length), got one of length {longest}")
    if rank is not None:
        rank = positive_int("rank", rank)
    memory = fit_sequence_autoencoder(seqs, max_length=T, rank=rank)
    Cr = L.permute(1, 0, 2).reshape(n_y, T * n_x) @ memory.U
    return _scaled(memory.B, memory.A, Cr)
