"""The torch transcriptions of the training-step kernels (benchmarks/kernels_torch.py), which the
benchmark of what each kernel adds measures against, compute what the compiled passes compute:
the whole hand-written step with either set of passes gives the same losses and gradients
(float64, 1e-12), so the benchmark compares one algorithm written twice."""
import pytest
import torch

import lib
from benchmarks.kernels_torch import GatedPasses, RecurrentPasses
from lib import gated_step, recurrent_step
from tests.helpers import rel_err

F64 = torch.float64


@pytest.mark.skipif(not gated_step.kernel_available(), reason="the gated kernel is not available")
@pytest.mark.parametrize("last_only", [False, True])
@pytest.mark.parametrize("widths, T, B", [([7], 9, 5), ([5, 3], 6, 16), ([4], 1, 9)])
def test_gated_passes_in_torch_are_the_kernels(widths, T, B, last_only):
    K = len(widths)
    stack = lib.StackedGatedRNN(4, widths, 3, list(range(K)), dtype=F64)
    g = torch.Generator().manual_seed(T + B)
    x = torch.randn(K, B, T, 4, generator=g, dtype=F64)
    y = torch.randn(K, B, 3, generator=g, dtype=F64) if last_only else torch.randn(K, B, T, 3, generator=g, dtype=F64)
    params = [getattr(stack, n).detach() for n in ("W_in_m", "W_in_x", "nu_log", "W_out_m", "W_out_x", "D")]
    out = {}
    for name, f in (("C", gated_step.KERNEL.typed(F64)), ("torch", GatedPasses)):
        grads = [torch.full_like(p, 7.0) for p in params]
        out[name] = gated_step.step(f, params, x, y, last_only, grads), grads
    assert rel_err(out["torch"][0], out["C"][0]) <= 1e-12
    for a, b in zip(out["torch"][1], out["C"][1]):
        assert rel_err(a, b) <= 1e-12


@pytest.mark.skipif(not recurrent_step.kernel_available(), reason="the recurrent kernel is not available")
@pytest.mark.parametrize("kind", recurrent_step.KINDS)
@pytest.mark.parametrize("layers, last_only", [(1, True), (2, False)])
def test_recurrent_passes_in_torch_are_the_kernels(kind, layers, last_only):
    net = lib.RecurrentNet(kind, 4, 9, 3, layers=layers, seed=3, dtype=F64)
    g = torch.Generator().manual_seed(layers)
    x = torch.randn(6, 5, 4, generator=g, dtype=F64)
    y = torch.randn(6, 3, generator=g, dtype=F64) if last_only else torch.randn(6, 5, 3, generator=g, dtype=F64)
    out = {}
    for name, f in (("C", recurrent_step.KERNEL.typed(F64)), ("torch", RecurrentPasses)):
        grads = {p: torch.full_like(p, 5.0) for p in net.parameters()}
        out[name] = recurrent_step.net_step(f, net, x, y, last_only, grads.__getitem__), grads
    assert rel_err(out["torch"][0], out["C"][0]) <= 1e-12
    for p in net.parameters():
        assert rel_err(out["torch"][1][p], out["C"][1][p]) <= 1e-12
