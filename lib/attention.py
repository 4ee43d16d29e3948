"""Causal linear self-attention (Zucchet et al. 2023, eq. 1).

    y_t = ( sum_{t' <= t} (W_V x_t') (W_K x_t')^T ) (W_Q x_t)

The output at step t uses the inputs up to *and including* x_t.  Two forwards:
``forward`` (parallel: a causally masked T x T score matrix) and ``forward_step`` (the
recurrent form W^ff_t = W^ff_{t-1} + v_t k_t^T, y_t = W^ff_t q_t), which must agree.
"""
from __future__ import annotations

import torch
from torch import nn

from ._checks import as_tensor

__all__ = ["LinearSelfAttention", "lsa_instantaneous_tensor", "check_attention_weights"]


def check_attention_weights(W_V, W_K, W_Q):
    """The value, key and query matrices of a linear self-attention layer, checked and promoted
    to one dtype: W_V (d_v, d), W_K and W_Q (d_k, d), all reading the same input dimension d.
    The input check of everything built from an attention layer (here, the gated-RNN
    construction of ``lib.gated`` and the LSTM / LRU constructions of ``lib.recurrent_cells``).
    """
    W_V = as_tensor("W_V", W_V, 2)
    W_K = as_tensor("W_K", W_K, 2)
    W_Q = as_tensor("W_Q", W_Q, 2)
    d_out, d = W_V.shape
    if W_K.shape[1] != d or W_Q.shape[1] != d:
        raise ValueError(f"W_V, W_K, W_Q must read the same input dimension, got shapes "
                         f"{tuple(W_V.shape)}, {tuple(W_K.shape)}, {tuple(W_Q.shape)}")
    if W_K.shape != W_Q.shape:
        raise ValueError(f"W_K (d_k, d) and W_Q (d_k, d) must have the same shape, got "
                         f"{tuple(W_K.shape)} and {tuple(W_Q.shape)}")
    dtype = torch.promote_types(torch.promote_types(W_V.dtype, W_K.dtype), W_Q.dtype)
    return W_V.to(dtype), W_K.to(dtype), W_Q.to(dtype)


class LinearSelfAttention(nn.Module):
    """One causal linear self-attention head with fixed weights.

    Derived in Chapter 10, section "sec-lsa-gated" (eq. 1); the teacher of Chapter 11, section
    "sec-teacher-setup".

    Args:
        W_V: (d_v, d) value matrix; W_K, W_Q: (d_k, d) key and query matrices (square d x d
            in the paper; rectangular ones work as well).
    Input ``x``: (B, T, d); output: (B, T, d_v).
    """

    def __init__(self, W_V, W_K, W_Q):
        super().__init__()
        W_V, W_K, W_Q = check_attention_weights(W_V, W_K, W_Q)
        self.W_V = nn.Parameter(W_V.clone())
        self.W_K = nn.Parameter(W_K.clone())
        self.W_Q = nn.Parameter(W_Q.clone())

    @property
    def d(self) -> int:
        return self.W_V.shape[1]

    def _check(self, x):
        x = as_tensor("x", x, 3, dtype=self.W_V.dtype)
        if x.shape[-1] != self.d:
            raise ValueError(f"x must have shape (B, T, {self.d}), got {tuple(x.shape)}")
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Parallel form: y = (causal_mask * (Q K^T)) V, shapes (B, T, d) -> (B, T, d_v)."""
        x = self._check(x)
        v, k, q = x @ self.W_V.T, x @ self.W_K.T, x @ self.W_Q.T
        T = x.shape[1]
        scores = q @ k.transpose(1, 2)                       # (B, T_query, T_key)
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        return scores.masked_fill(~mask, 0.0) @ v

    def forward_step(self, x: torch.Tensor) -> torch.Tensor:
        """Reference: the fast-weight recurrence W^ff_t = W^ff_{t-1} + v_t k_t^T, y_t = W^ff_t q_t."""
        x = self._check(x)
        B, T, _ = x.shape
        W_ff = x.new_zeros(B, self.W_V.shape[0], self.W_K.shape[0])
        out = []
        for t in range(T):
            v, k, q = x[:, t] @ self.W_V.T, x[:, t] @ self.W_K.T, x[:, t] @ self.W_Q.T
            W_ff = W_ff + v[:, :, None] * k[:, None, :]
            out.append((W_ff @ q[:, :, None])[:, :, 0])
        return torch.stack(out, dim=1)

    def cumulative_key_values(self, x: torch.Tensor) -> torch.Tensor:
        """sum_{t'<=t} v_t' k_t'^T flattened row-major: (B, T, d_v * d_k)."""
        x = self._check(x)
        v, k = x @ self.W_V.T, x @ self.W_K.T
        kv = (v[..., :, None] * k[..., None, :]).flatten(-2)
        return kv.cumsum(dim=1)

    def queries(self, x: torch.Tensor) -> torch.Tensor:
        """q_t = W_Q x_t: (B, T, d_k)."""
        x = self._check(x)
        return x @ self.W_Q.T


def lsa_instantaneous_tensor(W_V, W_K, W_Q) -> torch.Tensor:
    """The instantaneous map x -> (W_V x)(W_K x)^T(W_Q x) as a 4-tensor on x~ = (x, 1).

    Used in Chapter 11, section "sec-teacher-scores", for the polynomial distance between teacher
    and student.

    Returns C of shape (d_v, d+1, d+1, d+1, d+1) with
    y_i = sum_{abce} C[i,a,b,c,e] x~_a x~_b x~_c x~_e, where x~_d = 1 (the homogenising
    coordinate), so that it is directly comparable with a gated RNN's degree-4 polynomial
    (``lib.gated.instantaneous_tensor``).
    """
    W_V, W_K, W_Q = check_attention_weights(W_V, W_K, W_Q)
    d = W_V.shape[1]
    M = W_K.T @ W_Q                                         # x^T M x = k . q
    C = torch.zeros(W_V.shape[0], d + 1, d + 1, d + 1, d + 1, dtype=W_V.dtype)
    C[:, :d, :d, :d, d] = W_V[:, :, None, None] * M[None, None, :, :]
    return C
