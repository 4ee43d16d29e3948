"""The training loss of K stacked gated RNNs with a hand-written backward (Part III's hot loop).

Online training (Zucchet et al. 2023, App. B.1) evaluates, at every step and for every member k
of a :class:`lib.gated.StackedGatedRNN`, the loss L_k = 1/2 mean_(b, t, i) (y_hat - y)^2 and its
gradient.  Written feature-major (every activation a matrix of neurons x columns, the columns
ordered (t, b), C = T B columns), the forward is

    z_m = W_in_m X,  z_x = W_in_x X,  h_t = lam * h_{t-1} + z_m * z_x,   lam = exp(-exp(nu))
    o = [W_out_m; W_out_x] h,         y_hat = D (o_m * o_x)

and the backward, by hand (no autograd graph):

    g_y = (y_hat - y) / (d_out C'),   g_p = D^T g_y,   dL/dD = g_y (o_m * o_x)^T
    g_o = (g_p * o_x ; g_p * o_m),    dL/dW_out = g_o h^T,   a = W_out^T g_o
    a_t += lam * a_{t+1}  (the adjoint of the recurrence, from the end),
    dL/dlam = sum_{t >= 1} a_t h_{t-1},   dL/dnu = -exp(nu) lam dL/dlam,
    dL/dW_in = (a * z_x ; a * z_m) X^T

(C' = C, or B when only the last step is read: in-context regression).  The three products with
the (2n x n) output-gate matrix are left to BLAS; everything else -- the layout change of the
batch, the input gates with their tiny inner dimension d + 1, the recurrence and its adjoint, the
readout with d_out rows and the loss -- is a pass of the C kernel ``lib/gated.c`` (z_m, z_x formed
in registers and recomputed in the backward rather than stored).  :func:`step` runs the forward
and the backward together; :func:`member_losses` wraps it for autograd, and
:func:`losses_into_grad` (the step :func:`lib.online.train_online` takes for a
:class:`lib.gated.StackedGatedRNN`, as the architecture registry :mod:`lib.architectures` declares)
writes the gradients straight into the parameters' ``.grad``, with no autograd graph at all.  The
Performance appendix measures the step against the autograd step of
:meth:`lib.gated.StackedGatedRNN.forward`; ``benchmarks/bench_kernels.py`` measures what the C
adds over the same passes written in torch.

Without the kernel (another device, another dtype, no compiler, ``RNNBOOK_KERNEL=0``) the same
loss is computed by the reference, :func:`lib.tasks.member_losses` through the model's autograd
forward; both agree to rounding (tests/test_online.py: losses and gradients to 1e-12 in float64).
"""
from __future__ import annotations

import ctypes

import torch

from .gated import StackedGatedRNN
from .kernels import CompiledKernel, for_dtype, per_type, same_loss_and_gradients
from .tasks import member_losses as objective

__all__ = ["member_losses", "losses_into_grad", "step", "kernel_available", "PASSES"]

_V, _L, _I = ctypes.c_void_p, ctypes.c_long, ctypes.c_int
# the kernel's passes (lib/gated.c) and their arguments; each exists for float32 and float64
PASSES = {
    "pack": [_V, _V, _L, _L, _L, _L, _L],
    "gates_scan": [_V] * 6 + [_L] * 5 + [_I],
    "readout_loss": [_V] * 7 + [_L] * 4 + [_I],
    "gates_scan_back": [_V] * 10 + [_L] * 5 + [_I],
}
_PARAMS = ("W_in_m", "W_in_x", "nu_log", "W_out_m", "W_out_x", "D")


def step(f, params, x: torch.Tensor, y: torch.Tensor, last_only: bool,
         grads=None, threads: int | None = None) -> torch.Tensor:
    """(K,) losses of the members; with ``grads`` (six contiguous tensors shaped like ``params``,
    in the order of ``_PARAMS``) dL_k/dparams of member k written into them (overwritten).
    ``f``: the passes of :data:`PASSES` for x's dtype (the kernel's, :func:`lib.kernels.for_dtype`,
    or the same passes written in torch, which ``benchmarks/bench_kernels.py`` measures against).

    x (K, B, T, d) and y (K, B, T, d_out) or (K, B, d_out) contiguous; params detached,
    contiguous, of x's dtype; ``threads``: the kernel's threads (default: torch's intra-op
    threads now).

    The members are independent. When every step is read, their step is taken one member after
    the other, each pass and product on one member's arrays: at the teacher setting (|h| = 100,
    T B = 2,048 columns a member) a working set a third the size of three members', and a
    student-step at K = 3 costs about what it costs at K = 1 (``benchmarks/bench_online_step.py``
    times both).  When only the last step is read (in-context regression), a member's products
    have B columns and its step is mostly per-call overhead, which the members share when each
    pass and product takes them all at once (``benchmarks/bench_training.py``, a stack of 8
    against 8 separate runs)."""
    K = x.shape[0]
    if K == 1 or last_only:                        # one member, or the small last-step products: all at once
        return _member_step(f, params, x, y, last_only, grads, threads)
    losses = x.new_empty(K)
    for k in range(K):
        one = slice(k, k + 1)                      # a leading slice of a contiguous tensor is contiguous
        losses[one] = _member_step(f, [p[one] for p in params], x[one], y[one], last_only,
                                   None if grads is None else [g[one] for g in grads], threads)
    return losses


def _member_step(f, params, x: torch.Tensor, y: torch.Tensor, last_only: bool,
                 grads=None, threads: int | None = None) -> torch.Tensor:
    """:func:`step` on all of the K members of ``x`` at once (each pass and product over the
    K members together): called with all of them when only the last step is read, else with one
    member at a time."""
    W_in_m, W_in_x, nu, W_out_m, W_out_x, D = params
    K, B, T, d = x.shape
    n, d_x, d_out = W_in_m.shape[1], W_in_m.shape[2], D.shape[1]
    C = T * B
    cols = B if last_only else C
    threads = max(1, torch.get_num_threads()) if threads is None else threads
    X = x.new_empty(K, d_x, C)                                        # feature-major, columns (t, b)
    f.pack(x, X, K, B, T, d, d_x)
    Y = x.new_empty(K, d_out, cols)
    f.pack(y, Y, K, B, 1 if last_only else T, d_out, d_out)
    lam, h = x.new_empty(K, n), x.new_empty(K, n, C)
    f.gates_scan(X, W_in_m, W_in_x, nu, lam, h, K, n, d_x, T, B, threads)
    W_out = torch.cat([W_out_m, W_out_x], 1)                          # (K, 2n, n)
    h_read = h[:, :, C - cols:]
    o = torch.bmm(W_out, h_read)                                      # (K, 2n, C')
    g_y, losses = x.new_empty(K, d_out, cols), x.new_empty(K)
    g_o = None if grads is None else torch.empty_like(o)
    f.readout_loss(o, D, Y, g_y, losses, g_o, None if grads is None else grads[5], K, n, d_out, cols, threads)
    if grads is None:
        return losses
    g_W_in_m, g_W_in_x, g_nu, g_W_out_m, g_W_out_x, _ = grads
    g_W_out_T = torch.bmm(h_read, g_o.transpose(1, 2))               # (dL/dW_out)^T = h g_o^T, (K, n, 2n):
    g_W_out_m.copy_(g_W_out_T[:, :, :n].transpose(1, 2))              # one product, faster here than
    g_W_out_x.copy_(g_W_out_T[:, :, n:].transpose(1, 2))              # g_o h^T in two
    if cols < C:                                                      # only the last step is read
        a = x.new_zeros(K, n, C)
        torch.bmm(W_out.transpose(1, 2), g_o, out=a[:, :, C - cols:])
    else:
        a = torch.bmm(W_out.transpose(1, 2), g_o)                     # dL/dh, (K, n, C)
    f.gates_scan_back(X, W_in_m, W_in_x, nu, lam, h, a, g_W_in_m, g_W_in_x, g_nu, K, n, d_x, T, B, threads)
    return losses


class _GatedLoss(torch.autograd.Function):
    """(K,) losses of the stacked members; the gradients are computed with the losses (for unit
    weights) and scaled by the incoming weights in the backward."""

    @staticmethod
    def forward(ctx, f, x, y, last_only, threads, *params):
        grads = [torch.empty_like(p) for p in params]
        losses = step(f, params, x, y, last_only, grads, threads)
        ctx.grads = grads
        return losses

    @staticmethod
    def backward(ctx, g_loss):
        return (None,) * 5 + tuple(g * g_loss.view(-1, *[1] * (g.ndim - 1)) for g in ctx.grads)


def _check(fns) -> bool:
    """The kernel's loss and gradients against the reference on a small stack (float64), on one
    thread and on several (the threads it will use, and at least two: a kernel wrong only when
    its threads share the rows is caught whatever the thread count is now)."""
    f = for_dtype(fns, torch.float64)
    g = torch.Generator().manual_seed(3)
    for last_only, threads in ((False, 1), (True, 1), (False, max(2, torch.get_num_threads())),
                               (True, max(2, torch.get_num_threads()))):
        stack = StackedGatedRNN(3, [5, 3], 2, [1, 2], dtype=torch.float64)
        x = torch.randn(2, 11, 6, 3, generator=g, dtype=torch.float64)
        y = torch.randn(2, 11, 2, generator=g, dtype=torch.float64) if last_only else \
            torch.randn(2, 11, 6, 2, generator=g, dtype=torch.float64)
        params = [getattr(stack, name) for name in _PARAMS]
        fast = _losses(f, stack, x, y, last_only, threads)
        ref = objective(stack, x, y, last_only)
        if not same_loss_and_gradients(fast, ref, torch.autograd.grad(fast.sum(), params),
                                       torch.autograd.grad(ref.sum(), params)):
            return False
    return True


KERNEL = CompiledKernel("gated", per_type(PASSES), _check,
                        "the gated RNN's training step uses its autograd forward instead (same results, slower)")
kernel_available = KERNEL.available   # True when the gated step's kernel is used (compiled on first use)



def _usable(stack, x: torch.Tensor, y: torch.Tensor):
    """The kernel's passes for x's dtype when they apply to this stack and batch (CPU, float32 /
    float64, one dtype, no gradient wanted for the data), else None."""
    if x.device.type != "cpu" or x.dtype not in (torch.float32, torch.float64) or stack.W_in_m.dtype != x.dtype \
            or y.dtype != x.dtype or x.requires_grad or y.requires_grad:
        return None
    return KERNEL.typed(x.dtype)


def _losses(f, stack, x: torch.Tensor, y: torch.Tensor, last_only: bool, threads: int | None = None) -> torch.Tensor:
    """The kernel step; ``threads``: the kernel's threads (default: torch's intra-op threads now)."""
    params = [getattr(stack, name) for name in _PARAMS]
    x, y = x.contiguous(), y.contiguous()
    if torch.is_grad_enabled() and any(p.requires_grad for p in params):
        return _GatedLoss.apply(f, x, y, last_only, threads, *params)
    return step(f, [p.detach().contiguous() for p in params], x, y, last_only, threads=threads)


def member_losses(stack, x: torch.Tensor, y: torch.Tensor, last_only: bool = False) -> torch.Tensor:
    """(K,) training losses of a :class:`lib.gated.StackedGatedRNN` on x (K, B, T, d_in) against
    y (K, B, T, d_out), or (K, B, d_out) with ``last_only``: the kernel step on CPU float32 /
    float64 tensors when the kernel is available, else :func:`lib.tasks.member_losses` through the
    model's autograd forward.

    Used by :func:`lib.online.train_online` (Chapter 11, section "sec-teacher-setup").
    No validation: the trainer checks shapes once.
    """
    f = _usable(stack, x, y)
    if f is not None:
        return _losses(f, stack, x, y, last_only)
    return objective(stack, x, y, last_only)


def losses_into_grad(stack, x: torch.Tensor, y: torch.Tensor, last_only: bool = False) -> torch.Tensor | None:
    """The training step of :func:`lib.online.train_online` for a :class:`lib.gated.StackedGatedRNN`
    (declared in :data:`lib.architectures.STEPS`), without autograd: the (K,) losses of
    :func:`member_losses` (detached), with the gradient of their sum written into every
    parameter's ``.grad`` (replacing what was there; allocated if None).  None, and nothing
    written, where the kernel does not apply (the caller then differentiates
    :func:`member_losses`).  No validation: the trainer checks shapes once.
    """
    f = _usable(stack, x, y)
    if f is None:
        return None
    params = [getattr(stack, name) for name in _PARAMS]
    if not all(p.is_contiguous() and (p.grad is None or p.grad.is_contiguous()) for p in params):
        return None
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    with torch.no_grad():
        return step(f, [p.detach() for p in params], x.contiguous(), y.contiguous(),
                     last_only, [p.grad for p in params])
