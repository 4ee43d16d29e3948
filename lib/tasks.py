"""Online training tasks of Part III (Zucchet et al. 2023, App. B.1 and C.1), K streams at once.

A task draws, at every training step, one fresh batch for each of K models, each model from
its own ``torch.Generator`` (so member k of a stack sees exactly the data a separate run with
the same data seed would see), on the task's device and in the training dtype:

* :class:`AttentionTeacherTask` -- teacher-student (Section 3): x_t ~ N(0, x_std^2 I), targets the
  outputs of a fixed linear self-attention teacher (eq. 1), one teacher per member;
* :class:`ICLTask` -- in-context linear regression (Section 4, App. C.1): T pairs
  (x_t, W* x_t) with x uniform of variance sigma_x^2, W* ~ N(0, sigma_W^2), then the query
  (x_{T+1}, 0); the target is W* x_{T+1} and only the last step is read;
* :class:`FixedBatch` -- one batch of either, returned at every step (two trainers compared on
  the same data).

``sample(generators) -> (x, y)`` with x (K, B, T, d_in) and y (K, B, T, d_out) (teacher) or
(K, B, d_out) (ICL, ``last_only = True``).  Arguments are validated once, when the task is made.
Both tasks have one objective, :func:`member_losses`: each member's 1/2 mean squared error.
"""
from __future__ import annotations

import math

import torch

from ._checks import as_tensor, float_dtype, positive_int, positive_real, seed_int, seed_list, torch_device

__all__ = ["AttentionTeacherTask", "ICLTask", "FixedBatch", "lsa_teachers"]


def member_losses(model, x: torch.Tensor, y: torch.Tensor, last_only: bool = False) -> torch.Tensor:
    """The objective of App. B.1: the (K,) losses 1/2 mean (y_hat_k - y_k)^2 of the K members of a
    stack, each over its own batch, steps and outputs; y (K, B, T, d_out), or (K, B, d_out) with
    ``last_only`` (the last step's output alone).  Through the model's ``forward_unchecked``
    where it has one (the trainer checks model and task once, before its first step), for
    autograd: the reference every hand-written training step is held to, and the step of
    :func:`lib.online.train_online` where no hand-written one applies."""
    out = getattr(model, "forward_unchecked", model)(x, last_only=last_only)
    return 0.5 * (out - y).square().flatten(1).mean(dim=1)


def lsa_teachers(d: int, seeds, *, scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Teacher weights (W_V, W_K, W_Q), each (K, d, d), entries N(0, scale^2 / d), one seed each.

    Used in Chapter 11, section "sec-teacher-setup", to draw the teacher (entries N(0, 1/d)).

    For every seed the three matrices are drawn in the order W_V, W_K, W_Q from
    ``torch.Generator().manual_seed(seed)`` in float64.
    """
    d = positive_int("d", d)
    scale = positive_real("scale", scale)
    mats = []
    for s in seed_list("seeds", seeds):
        g = torch.Generator().manual_seed(s)
        mats.append([torch.randn(d, d, generator=g, dtype=torch.float64) * (scale / math.sqrt(d))
                     for _ in range(3)])
    if not mats:
        raise ValueError("seeds must name at least one teacher")
    return tuple(torch.stack([m[i] for m in mats]) for i in range(3))


def _check_generators(generators, K: int) -> None:
    """One generator (or None: the device's default generator, in a captured CUDA graph) per
    member; a plain length check, nothing that would synchronise the device."""
    try:
        n = len(generators)
    except TypeError:
        raise TypeError(f"generators must be a list of K = {K} torch.Generator, got "
                        f"{type(generators).__name__}") from None
    if n != K:
        raise ValueError(f"generators must hold one torch.Generator per member (K = {K}), got {n}")


class AttentionTeacherTask:
    """Teacher-student batches for K students: member k imitates teacher k.

    Used in Chapter 11, section "sec-teacher-setup", to train the student on fresh teacher
    sequences, and in Chapter 13, section "sec-fig4".

    Args:
        W_V, W_K, W_Q: (K, d, d) teacher weights (``lsa_teachers``).
        T: sequence length; batch: sequences per step and member; x_std: input scale.
        pool: ``None`` (default): every step draws fresh sequences.  An integer: the data
            protocol of App. B.1 -- a fixed training set of ``pool`` sequences a member (drawn
            once from ``torch.Generator().manual_seed(pool_seeds[k])``), gone through in epochs,
            each epoch a fresh permutation drawn from the member's generator; a final partial
            batch of an epoch is completed from the next epoch.
        pool_seeds: one seed a member for its pool (required with ``pool``).
    """

    last_only = False

    def __init__(self, W_V, W_K, W_Q, *, T: int, batch: int, x_std: float,
                 dtype: torch.dtype = torch.float32, device="cpu", pool: int | None = None, pool_seeds=None):
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
        self.dtype, self.device = float_dtype("dtype", dtype), torch_device("device", device)
        self.W_V, self.W_K, self.W_Q = (w.to(dtype=dtype, device=self.device) for w in (W_V, W_K, W_Q))
        self._W_qkv = torch.cat([self.W_Q, self.W_K, self.W_V], 1).transpose(1, 2).contiguous()   # (K, d, 3d)
        self.pool = None if pool is None else positive_int("pool", pool)
        self._pool = None                       # (x, y) of every member, made on first use
        if self.pool is not None:
            if pool_seeds is None or len(list(pool_seeds)) != self.K:
                raise ValueError(f"pool_seeds must give one seed a member ({self.K}) when pool is set")
            self.pool_seeds = [seed_int("pool_seeds entry", s) for s in pool_seeds]
            self._order = [None] * self.K       # the current epoch's permutation, a member
            self._pos = [0] * self.K            # sequences of it already used

    def astype(self, dtype: torch.dtype) -> "AttentionTeacherTask":
        """The same task drawing (and computing targets) in ``dtype``."""
        return AttentionTeacherTask(self.W_V, self.W_K, self.W_Q, T=self.T, batch=self.batch, x_std=self.x_std,
                                    dtype=dtype, device=self.device, pool=self.pool,
                                    pool_seeds=getattr(self, "pool_seeds", None))

    def teacher_output(self, x: torch.Tensor) -> torch.Tensor:
        """Causal linear self-attention of every member's teacher: (K, B, T, d) -> (K, B, T, d).

        y_t = sum_{s <= t} (q_t . k_s) v_s: queries, keys and values in one product with the
        stacked (W_Q; W_K; W_V), then the causal scores, masked in place, times the values
        (the same sums as three separate products; equal to them up to float rounding)."""
        K, B, T, d = x.shape
        qkv = torch.bmm(x.reshape(K, B * T, d), self._W_qkv).view(K * B, T, 3 * d)
        q, k, v = qkv[..., :d], qkv[..., d:2 * d], qkv[..., 2 * d:]
        scores = torch.bmm(q, k.transpose(1, 2)).tril_()            # (K B, T_query, T_key)
        return torch.bmm(scores, v).view(K, B, T, d)

    def shapes(self, n: int = 2) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The shapes of (x, y) of a batch of ``n`` sequences a member (no data is drawn)."""
        return (self.K, n, self.T, self.d), (self.K, n, self.T, self.d)

    def sample(self, generators):
        """(x, y) = ((K, B, T, d), (K, B, T, d)): one batch per member, member k drawn from
        ``generators[k]`` (exactly K of them)."""
        _check_generators(generators, self.K)
        if self.pool is not None:
            return self._sample_pool(generators)
        x = torch.empty(len(generators), self.batch, self.T, self.d, dtype=self.dtype, device=self.device)
        for k, g in enumerate(generators):
            torch.randn(self.batch, self.T, self.d, generator=g, dtype=self.dtype, device=self.device, out=x[k])
        x.mul_(self.x_std)
        return x, self.teacher_output(x)

    # -- the fixed training set of App. B.1
    def _make_pool(self):
        xs = []
        for s in self.pool_seeds:
            g = torch.Generator(device=self.device).manual_seed(s)
            xs.append(torch.randn(self.pool, self.T, self.d, generator=g, dtype=self.dtype, device=self.device))
        x = torch.stack(xs) * self.x_std                                   # (K, pool, T, d)
        y = torch.cat([self.teacher_output(x[:, i:i + 1024]) for i in range(0, self.pool, 1024)], dim=1)
        self._pool = (x, y)

    def _indices(self, k: int, g) -> torch.Tensor:
        out, need = [], self.batch
        while need:
            if self._order[k] is None or self._pos[k] == self.pool:
                self._order[k] = torch.randperm(self.pool, generator=g, device=self.device)
                self._pos[k] = 0
            take = min(need, self.pool - self._pos[k])
            out.append(self._order[k][self._pos[k]:self._pos[k] + take])
            self._pos[k] += take
            need -= take
        return torch.cat(out)

    def _sample_pool(self, generators):
        if self._pool is None:
            self._make_pool()
        x_pool, y_pool = self._pool
        idx = [self._indices(k, g) for k, g in enumerate(generators)]
        return (torch.stack([x_pool[k, i] for k, i in enumerate(idx)]),
                torch.stack([y_pool[k, i] for k, i in enumerate(idx)]))

    def state_dict(self) -> dict:
        """Where each member stands in its epoch (what a checkpoint needs to resume exactly)."""
        if self.pool is None:
            return {}
        return {"order": [None if o is None else o.cpu() for o in self._order], "pos": list(self._pos)}

    def load_state_dict(self, state: dict) -> None:
        if self.pool is None:
            return
        self._order = [None if o is None else o.to(self.device) for o in state["order"]]
        self._pos = list(state["pos"])


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
        self.d_in, self.d_out = self.d_x + self.d_y, self.d_y
        self.dtype, self.device = float_dtype("dtype", dtype), torch_device("device", device)

    def astype(self, dtype: torch.dtype) -> "ICLTask":
        """The same task drawing in ``dtype``."""
        return ICLTask(K=self.K, T=self.T, d_x=self.d_x, d_y=self.d_y, batch=self.batch, sigma_w2=self.sigma_w2,
                       sigma_x2=self.sigma_x2, dtype=dtype, device=self.device)

    def shapes(self, n: int = 2) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The shapes of (x, y) of a batch of ``n`` tasks a member (no data is drawn)."""
        return (self.K, n, self.T + 1, self.d_x + self.d_y), (self.K, n, self.d_y)

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
        """(tokens, target) = ((K, B, T+1, d_x + d_y), (K, B, d_y)): member k drawn from
        ``generators[k]`` (exactly K of them)."""
        _check_generators(generators, self.K)
        pairs = [self.draw(g) for g in generators]
        return torch.stack([p[0] for p in pairs]), torch.stack([p[1] for p in pairs])


class FixedBatch:
    """One batch of ``task``, returned by every ``sample``: a run on it repeats the same data at
    every step, so that two trainers whose data streams differ (the captured CUDA step draws from
    the device's generator, the eager and CPU steps from per-member generators) are compared on
    the same arithmetic alone (tests/test_cuda.py, benchmarks/bench_cuda_step.py).

    The batch is drawn once, member k from a generator on the task's device seeded ``seed + k``,
    and moved to ``device`` (default: the task's).  ``sample`` ignores its generators.
    """

    def __init__(self, task, device=None, *, seed: int = 7):
        missing = [a for a in ("K", "sample", "shapes", "last_only", "device", "dtype", "d_in", "d_out")
                   if not hasattr(task, a)]
        if missing:
            raise TypeError(f"task must be a task of lib.tasks (missing: {', '.join(missing)}), got {type(task).__name__}")
        seed = seed_int("seed", seed)
        self.device = task.device if device is None else torch_device("device", device)
        x, y = task.sample([torch.Generator(device=task.device).manual_seed(seed + k) for k in range(task.K)])
        self.x, self.y = x.to(self.device), y.to(self.device)
        self.K, self.last_only, self.dtype = task.K, task.last_only, task.dtype
        self.d_in, self.d_out, self.shapes = task.d_in, task.d_out, task.shapes

    def sample(self, generators):
        """The fixed batch (x, y), whatever the generators."""
        return self.x, self.y
