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
the (2n x n) output-gate matrix are left to BLAS; everything else -- the input gates with their
tiny inner dimension d + 1, the recurrence and its adjoint, the readout with d_out rows -- is one
pass of the C kernel ``lib/gated.c`` over each neuron's row (z_m, z_x recomputed in the backward
rather than stored).  The Performance appendix measures the step against the autograd step of
:meth:`lib.gated.StackedGatedRNN.forward` and says why the kernel is in C.

Without the kernel (another device, another dtype, no compiler, ``RNNBOOK_KERNEL=0``) the same
loss is computed by the reference, the model's autograd forward; both agree to rounding
(tests/test_gated_step.py: gradients to 1e-12 in float64).
"""
from __future__ import annotations

import ctypes

import torch

from .kernels import CompiledKernel

__all__ = ["member_losses", "member_losses_reference", "kernel_available"]

_V, _L, _I = ctypes.c_void_p, ctypes.c_long, ctypes.c_int
_SIGNATURES = {
    "gates_scan": [_V, _V, _V, _V, _L, _L, _L, _L, _L, _I],
    "gates_scan_back": [_V, _V, _V, _V, _V, _V, _V, _L, _L, _L, _L, _L, _I],
    "readout": [_V, _V, _V, _L, _L, _L, _L, _I],
    "readout_back": [_V, _V, _V, _V, _V, _L, _L, _L, _L, _I],
}
_FUNCTIONS = {f"{name}_{suffix}": (_I, args) for name, args in _SIGNATURES.items() for suffix in ("f32", "f64")}
_SUFFIX = {torch.float32: "f32", torch.float64: "f64"}


def _call(fns, name: str, dtype: torch.dtype, *args) -> None:
    if getattr(fns, f"{name}_{_SUFFIX[dtype]}")(*args) != 0:
        raise MemoryError(f"lib.gated_step: no memory for the {name} kernel's scratch rows")


def _p(t: torch.Tensor) -> int:
    return t.data_ptr()


class _GatedLoss(torch.autograd.Function):
    """(K,) losses of the stacked members from feature-major inputs X (K, d_x, C) and targets
    Y (K, d_out, C') (C' = C, or the last B columns); gradients for the six weights."""

    @staticmethod
    def forward(ctx, fns, X, Y, W_in_m, W_in_x, nu_log, W_out_m, W_out_x, D, T, threads):
        K, d_x, C = X.shape
        n, d_out, cols, dt = W_in_m.shape[1], D.shape[1], Y.shape[2], X.dtype
        B = C // T
        W_in = torch.cat([W_in_m, W_in_x], 1)                         # (K, 2n, d_x)
        lam = torch.exp(-torch.exp(nu_log))                           # (K, n)
        h = X.new_empty(K, n, C)
        _call(fns, "gates_scan", dt, _p(X), _p(W_in), _p(lam), _p(h), K, n, d_x, T, B, threads)
        W_out = torch.cat([W_out_m, W_out_x], 1)                      # (K, 2n, n)
        o = torch.bmm(W_out, h[:, :, C - cols:])                      # (K, 2n, C')
        D = D.contiguous()
        r = X.new_empty(K, d_out, cols)
        _call(fns, "readout", dt, _p(o), _p(D), _p(r), K, n, d_out, cols, threads)
        r.sub_(Y)                                                     # y_hat - y
        ctx.save_for_backward(X, W_in, lam, h, o, W_out, D, nu_log, r)
        ctx.fns, ctx.T, ctx.threads = fns, T, threads
        return 0.5 * r.square().mean(dim=(1, 2))

    @staticmethod
    def backward(ctx, g_loss):
        X, W_in, lam, h, o, W_out, D, nu_log, r = ctx.saved_tensors
        fns, T, threads = ctx.fns, ctx.T, ctx.threads
        K, d_x, C = X.shape
        n, d_out, cols, dt = lam.shape[1], D.shape[1], r.shape[2], X.dtype
        g_y = r * (g_loss / (d_out * cols))[:, None, None]
        g_o, g_D = torch.empty_like(o), torch.empty_like(D)
        _call(fns, "readout_back", dt, _p(o), _p(D), _p(g_y), _p(g_o), _p(g_D), K, n, d_out, cols, threads)
        g_W_out = torch.bmm(g_o, h[:, :, C - cols:].transpose(1, 2))  # (K, 2n, n)
        if cols < C:                                                  # only the last step is read
            a = X.new_zeros(K, n, C)
            torch.bmm(W_out.transpose(1, 2), g_o, out=a[:, :, C - cols:])
        else:
            a = torch.bmm(W_out.transpose(1, 2), g_o)                 # dL/dh, (K, n, C)
        g_W_in, g_lam = torch.empty_like(W_in), torch.empty_like(lam)
        _call(fns, "gates_scan_back", dt, _p(X), _p(W_in), _p(lam), _p(h), _p(a), _p(g_W_in), _p(g_lam),
              K, n, d_x, T, C // T, threads)
        g_nu = g_lam.mul_(lam).mul_(-torch.exp(nu_log))
        return (None, None, None, g_W_in[:, :n], g_W_in[:, n:], g_nu, g_W_out[:, :n], g_W_out[:, n:], g_D,
                None, None)


def _check(fns) -> bool:
    """The kernel's loss and gradients against the reference on a small stack (float64), on one
    thread and on several (the threads it will use, and at least two: a kernel wrong only when
    its threads share the rows is caught whatever the thread count is now)."""
    from .gated import StackedGatedRNN  # noqa: PLC0415  (gated imports this module)

    g = torch.Generator().manual_seed(3)
    for last_only, threads in ((False, 1), (True, 1), (False, max(2, torch.get_num_threads())),
                               (True, max(2, torch.get_num_threads()))):
        stack = StackedGatedRNN(3, [5, 3], 2, [1, 2], dtype=torch.float64)
        x = torch.randn(2, 4, 6, 3, generator=g, dtype=torch.float64)
        y = torch.randn(2, 4, 2, generator=g, dtype=torch.float64) if last_only else \
            torch.randn(2, 4, 6, 2, generator=g, dtype=torch.float64)
        params = list(stack.parameters())
        fast = _losses(fns, stack, x, y, last_only, threads)
        ref = member_losses_reference(stack, x, y, last_only)
        g_fast = torch.autograd.grad(fast.sum(), params)
        g_ref = torch.autograd.grad(ref.sum(), params)
        if not torch.allclose(fast, ref, rtol=1e-12, atol=0.0):
            return False
        if not all(torch.allclose(a, b, rtol=1e-10, atol=1e-14) for a, b in zip(g_fast, g_ref)):
            return False
    return True


KERNEL = CompiledKernel("gated", _FUNCTIONS, _check,
                        "the gated RNN's training step uses its autograd forward instead (same results, slower)")


def kernel_available() -> bool:
    """True when the compiled kernel of the gated training step is used (compiles it on first use)."""
    return KERNEL.available()


def _losses(fns, stack, x: torch.Tensor, y: torch.Tensor, last_only: bool, threads: int | None = None) -> torch.Tensor:
    """The kernel step; ``threads``: the kernel's threads (default: torch's intra-op threads now)."""
    threads = max(1, torch.get_num_threads()) if threads is None else threads
    K, B, T, d = x.shape
    X = x.new_empty(K, d + int(stack.append_one), T * B)              # feature-major, columns (t, b)
    X[:, :d].view(K, d, T, B).copy_(x.permute(0, 3, 2, 1))
    if stack.append_one:
        X[:, d].fill_(1.0)
    Y = y.transpose(1, 2) if last_only else y.permute(0, 3, 2, 1).reshape(K, y.shape[-1], T * B)
    return _GatedLoss.apply(fns, X, Y.contiguous(), stack.W_in_m, stack.W_in_x, stack.nu_log, stack.W_out_m,
                            stack.W_out_x, stack.D, T, threads)


def member_losses_reference(stack, x: torch.Tensor, y: torch.Tensor, last_only: bool = False) -> torch.Tensor:
    """1/2 mean squared error of every member through the model's autograd forward: (K,)."""
    return 0.5 * (stack.forward_unchecked(x, last_only=last_only) - y).square().flatten(1).mean(dim=1)


def member_losses(stack, x: torch.Tensor, y: torch.Tensor, last_only: bool = False) -> torch.Tensor:
    """(K,) training losses of a :class:`lib.gated.StackedGatedRNN` on x (K, B, T, d_in) against
    y (K, B, T, d_out), or (K, B, d_out) with ``last_only``: the kernel step on CPU float32 /
    float64 tensors when the kernel is available, else :func:`member_losses_reference`.

    Used by :func:`lib.training.train_online` (Chapter 11, section "sec-teacher-setup").
    No validation: the trainer checks shapes once.
    """
    if x.device.type == "cpu" and x.dtype in _SUFFIX and stack.W_in_m.dtype == x.dtype:
        fns = KERNEL.load()
        if fns is not None:
            return _losses(fns, stack, x, y, last_only)
    return member_losses_reference(stack, x, y, last_only)
