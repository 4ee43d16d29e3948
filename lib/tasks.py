"""Online training tasks of Part III (Zucchet et al. 2023, App. B.1 and C.1), K streams at once.

A task draws, at every training step, one fresh batch for each of K models, each model from
its own ``torch.Generator`` (so member k of a stack sees exactly the data a separate run with
the same data seed would see), on the task's device and in the training dtype:

* :class:`AttentionTeacherTask` -- teacher-student (Section 3): x_t ~ N(0, x_std^2 I), targets the
  outputs of a fixed linear self-attention teacher (eq. 1), one teacher per member;
* :class:`ICLTask` -- in-context linear regression (Section 4, App. C.1): T pairs
  (x_t, W* x_t) with x uniform of variance sigma_x^2, W* ~ N(0, sigma_W^2), then the query
  (x_{T+1}, 0); the target is W* x_{T+1} and only the last step is read.

``sample(generators) -> (x, y)`` with x (K, B, T, d_in) and y (K, B, T, d_out) (teacher) or
(K, B, d_out) (ICL, ``last_only = True``).  Arguments are validated once, when the task is made.
"""
from __future__ import annotations

import math

import torch

from ._checks import as_tensor, positive_int, positive_real, seed_int

__all__ = ["AttentionTeacherTask", "ICLTask", "lsa_teachers"]


def lsa_teachers(d: int, seeds, *, scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Teacher weights (W_V, W_K, W_Q), each (K, d, d), entries N(0, scale^2 / d), one seed each.

    Used in Chapter 11, section "sec-teacher-setup", to draw the teacher (entries N(0, 1/d)).

    For every seed the three matrices are drawn in the order W_V, W_K, W_Q from
    ``torch.Generator().manual_seed(seed)`` in float64.
    """
    d = positive_int("d", d)
    scale = positive_real("scale", scale)
    mats = []
    for s in seeds:
        g = torch.Generator().manual_seed(seed_int("seeds entry", s))
        mats.append([torch.randn(d, d, generator=g, dtype=torch.float64) * (scale / math.sqrt(d))
                     for _ in range(3)])
    if not mats:
        raise ValueError("seeds must name at least one teacher")
    return tuple(torch.stack([m[i] for m in mats]) for i in range(3))


class AttentionTeacherTask:
    """Teacher-student batches for K students: member k imitates teacher k.

    Used in Chapter 11, section "sec-teacher-setup", to train the student on fresh teacher
    sequences, and in Chapter 13, section "sec-fig4".

    Args:
        W_V, W_K, W_Q: (K, d, d) teacher weights (``lsa_teachers``).
        T: sequence length; batch: sequences per step and member; x_std: input scale.
    """

    last_only = False

    def __init__(self, W_V, W_K, W_Q, *, T: int, batch: int, x_std: float,
                 dtype: torch.dtype = torch.float32, device="cpu"):
        W_V = as_tensor("W_V", W_V, 3)
        if W_V.shape[1] != W_V.shape[2]:
            raise ValueError(f"W_V must have shape (K, d, d), got {tuple(W_V.shape)}")
        W_K = as_tensor("W_K", W_K, 3)
        W_Q = as_tensor("W_Q", W_Q, 3)
        if W_K.shape != W_V.shape or W_Q.shape != W_V.shape:
            raise ValueError(f"W_V, W_K, W_Q must have one shape (K, d, d), got {tuple(W_V.shape)}, "
                             f"{tuple(W_K.shape)}, {tuple(W_Q.shape)}")
        self.T, self.batch = positive_int("T", T), positive_int("batch", batch)
        self.x_std = positive_real("x_std", x_std)
        self.K, self.d = W_V.shape[0], W_V.shape[1]
        self.d_in = self.d_out = self.d
        self.dtype, self.device = dtype, torch.device(device)
        self.W_V, self.W_K, self.W_Q = (w.to(dtype=dtype, device=self.device) for w in (W_V, W_K, W_Q))

    def astype(self, dtype: torch.dtype) -> "AttentionTeacherTask":
        """The same task drawing (and computing targets) in ``dtype``."""
        return AttentionTeacherTask(self.W_V, self.W_K, self.W_Q, T=self.T, batch=self.batch, x_std=self.x_std,
                           dtype=dtype, device=self.device)

    def teacher_output(self, x: torch.Tensor) -> torch.Tensor:
        """Causal linear self-attention of every member's teacher: (K, B, T, d) -> (K, B, T, d)."""
        K, B, T, d = x.shape
        xf = x.reshape(K, B * T, d)
        v = torch.bmm(xf, self.W_V.transpose(1, 2)).view(K, B, T, d)
        k = torch.bmm(xf, self.W_K.transpose(1, 2)).view(K, B, T, d)
        q = torch.bmm(xf, self.W_Q.transpose(1, 2)).view(K, B, T, d)
        scores = (q @ k.transpose(-1, -2)).tril()                    # (K, B, T_query, T_key)
        return scores @ v

    def sample(self, generators):
        x = torch.stack([torch.randn(self.batch, self.T, self.d, generator=g, dtype=self.dtype,
                                     device=self.device) for g in generators]) * self.x_std
        return x, self.teacher_output(x)


class ICLTask:
    """In-context linear regression batches (App. C.1) for K models, last step read only.

    Used in Chapter 12, section "sec-icl-train", to train the gated RNN on the task of section
    "sec-icl-task", and in Chapter 13, section "sec-fig4".
    """

    last_only = True

    def __init__(self, *, K: int, T: int, d_x: int, d_y: int, batch: int, sigma_w2: float = 1 / 3,
                 sigma_x2: float = 1.0, dtype: torch.dtype = torch.float32, device="cpu"):
        self.K = positive_int("K", K)
        self.T, self.d_x, self.d_y = positive_int("T", T), positive_int("d_x", d_x), positive_int("d_y", d_y)
        self.batch = positive_int("batch", batch)
        self.sigma_w2 = positive_real("sigma_w2", sigma_w2)
        self.sigma_x2 = positive_real("sigma_x2", sigma_x2)
        self.d_in, self.d_out = d_x + d_y, d_y
        self.dtype, self.device = dtype, torch.device(device)

    def astype(self, dtype: torch.dtype) -> "ICLTask":
        """The same task drawing in ``dtype``."""
        return ICLTask(K=self.K, T=self.T, d_x=self.d_x, d_y=self.d_y, batch=self.batch, sigma_w2=self.sigma_w2,
                       sigma_x2=self.sigma_x2, dtype=dtype, device=self.device)

    def draw(self, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """One model's batch: tokens (B, T+1, d_x + d_y) with the query's y zeroed, target (B, d_y)."""
        B, T, d_x, d_y = self.batch, self.T, self.d_x, self.d_y
        opts = dict(generator=g, dtype=self.dtype, device=self.device)
        a = math.sqrt(3 * self.sigma_x2)
        tokens = torch.empty(B, T + 1, d_x + d_y, dtype=self.dtype, device=self.device)
        x = tokens[..., :d_x]
        x.uniform_(-a, a, generator=g)                                 # x ~ U(-a, a), variance sigma_x^2
        W = torch.randn(B, d_y, d_x, **opts).mul_(math.sqrt(self.sigma_w2))
        y = torch.bmm(x, W.transpose(1, 2))                            # (B, T+1, d_y)
        tokens[..., d_x:] = y
        tokens[:, T, d_x:] = 0.0
        return tokens, y[:, T]

    def sample(self, generators):
        pairs = [self.draw(g) for g in generators]
        return torch.stack([p[0] for p in pairs]), torch.stack([p[1] for p in pairs])
