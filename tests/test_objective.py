"""The training objective is the one asked for: a model whose output would broadcast against its
target is refused before any parameter moves, by every training function, even when the model
declares no output size; the stacked losses are each member's own.

Self-contained (the library only), so that tests/test_mutants.py can run it against mutated
copies of lib/."""
import pytest
import torch
from torch import nn

import lib
from lib import architectures

F64 = torch.float64


class _Plain(nn.Module):
    """A network that declares no d_in / d_out: only its output's shape can tell."""

    def __init__(self, d_in, d_out, seed):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.W = nn.Parameter(torch.randn(d_out, d_in, generator=g, dtype=F64))

    def forward(self, x):
        return x @ self.W.T


def _params(model):
    return [p.detach().clone() for p in model.parameters()]


def _unchanged(model, before):
    return all(torch.equal(a, b) for a, b in zip(_params(model), before))


@pytest.mark.parametrize("d_out", [1, 2])
def test_train_online_refuses_a_broadcasting_output_of_a_model_that_declares_no_size(d_out):
    task = lib.AttentionTeacherTask(*lib.lsa_teachers(3, [0]), T=4, batch=2, x_std=0.5, dtype=F64)
    model = lib.ModuleStack([_Plain(3, d_out, 0)])
    before = _params(model)
    with pytest.raises(ValueError, match="shape"):
        lib.train_online(model, task, steps=2, data_seeds=[0])
    assert _unchanged(model, before)


def test_train_online_trains_a_plain_network_of_the_right_size():
    task = lib.AttentionTeacherTask(*lib.lsa_teachers(3, [0]), T=4, batch=2, x_std=0.5, dtype=F64)
    model = lib.ModuleStack([_Plain(3, 3, 0)])
    out = lib.train_online(model, task, steps=2, data_seeds=[0], log_every=1)
    assert out["loss"].shape == (2, 1) and torch.isfinite(out["loss"]).all()


@pytest.mark.parametrize("y_shape", [(2, 5, 1), (2, 1, 2), (5, 2)])
def test_train_adamw_refuses_a_target_that_would_broadcast(y_shape):
    model = lib.GatedLinearRNN(2, 3, 2, dtype=F64)
    x, y = torch.randn(2, 5, 2, dtype=F64), torch.randn(*y_shape, dtype=F64)
    before = _params(model)
    with pytest.raises(ValueError, match=r"shape .*\(2, 5, 2\)"):
        lib.train_adamw(model, lambda g: (x, y), steps=2)
    assert _unchanged(model, before)


@pytest.mark.parametrize("loop", ["train_gd", "train_minibatch"])
def test_gd_loops_refuse_a_target_that_would_broadcast_and_name_it(loop):
    model = lib.LinearRNN(4, 2, 1, 0.5, 1.0, 1.0, seed=0)
    x, y = torch.randn(3, 4, 2, dtype=F64), torch.randn(3, 4, 2, dtype=F64)   # n_y 2 for a 1-output model
    before = _params(model)
    kw = dict(steps=1) if loop == "train_gd" else dict(epochs=1)
    with pytest.raises(ValueError, match=r"y \(its target\)"):
        getattr(lib, loop)(model, x, y, lr=1e-3, **kw)
    assert _unchanged(model, before)
    with pytest.raises(ValueError, match="y_test"):
        lib.train_gd(model, x, y[..., :1], lr=1e-3, steps=1, x_test=x, y_test=y)
    with pytest.raises(TypeError, match="x_test is float32"):        # evaluated in another precision
        lib.train_gd(model, x, y[..., :1], lr=1e-3, steps=1, x_test=x.float(), y_test=y[..., :1].float())


@pytest.mark.parametrize("kind", ["gated", "gru"])
def test_each_member_loss_is_its_own(kind):
    """(K,) member losses: member k's 1/2 mean squared error against its own target, nothing mixed."""
    stack = architectures.build(kind, 1, 3, [4, 4], 2, [0, 1], dtype=F64)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 5, 3, generator=g, dtype=F64)
    y = torch.randn(2, 3, 5, 2, generator=g, dtype=F64)
    losses = lib.tasks.member_losses(stack, x, y)
    for k in range(2):
        mk = stack.member(k)
        out = mk(x[k])
        assert torch.allclose(losses[k], 0.5 * (out - y[k]).square().mean(), rtol=1e-12, atol=0), k
