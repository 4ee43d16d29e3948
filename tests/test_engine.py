"""The fast Markov-parameter engine of LinearRNN equals the reference recurrence."""
import math

import pytest
import torch
from hypothesis import given, settings, strategies as st

import lib
from lib.linear_rnn import markov_parameters
from tests.helpers import rel_err

REL = 1e-10


def close(a, b):
    """||a - b|| <= 1e-10 ||b|| (exact identity in float64); an exactly-zero b needs a == 0."""
    return float(torch.linalg.norm(a - b)) <= REL * float(torch.linalg.norm(b)) or torch.equal(a, b)


sizes = st.tuples(st.integers(1, 24), st.integers(1, 3), st.integers(1, 3), st.integers(1, 9),
                  st.integers(1, 5), st.integers(0, 10_000))


@settings(max_examples=40, deadline=None)
@given(sizes)
def test_forward_and_gradients_match_recurrence(size):
    n, n_x, n_y, T, N, seed = size
    model = lib.LinearRNN(n, n_x, n_y, nu_W=0.8, nu_F=1.3, nu_C=0.7, seed=seed)
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(N, T, n_x, generator=g, dtype=torch.float64)
    y = torch.randn(N, T, n_y, generator=g, dtype=torch.float64)
    params = list(model.parameters())
    out = {}
    for engine in lib.linear_rnn.ENGINES:
        model.engine = engine
        yhat = model(x)
        grads = torch.autograd.grad(lib.loss_fn(yhat, y), params)
        out[engine] = (yhat.detach(), grads)
    (y_f, g_f), (y_r, g_r) = out["markov"], out["recurrence"]
    assert close(y_f, y_r)
    for name, a, b in zip("WFC", g_f, g_r):
        assert close(a, b), name


@settings(max_examples=25, deadline=None)
@given(sizes)
def test_markov_parameters_value_grad_jvp_match_impulse_response(size):
    n, n_x, n_y, T, _, seed = size
    g = torch.Generator().manual_seed(seed)
    W, F, C = (torch.randn(*s, generator=g, dtype=torch.float64) for s in ((n, n), (n, n_x), (n_y, n)))
    L_ref = lib.impulse_response(W, F, C, T)
    assert close(markov_parameters(W, F, C, T), L_ref)
    cot = torch.randn(T, n_y, n_x, generator=g, dtype=torch.float64)
    tan = tuple(torch.randn_like(p) for p in (W, F, C))
    f_fast = lambda *p: markov_parameters(*p, T)
    f_ref = lambda *p: lib.impulse_response(*p, T)
    _, vjp_fast = torch.func.vjp(f_fast, W, F, C)
    _, vjp_ref = torch.func.vjp(f_ref, W, F, C)
    for a, b in zip(vjp_fast(cot), vjp_ref(cot)):
        assert close(a, b)
    _, jvp_fast = torch.func.jvp(f_fast, (W, F, C), tan)
    _, jvp_ref = torch.func.jvp(f_ref, (W, F, C), tan)
    assert close(jvp_fast, jvp_ref)


def test_engine_works_under_vmap_jacrev():
    model = lib.LinearRNN(6, 2, 2, 0.5, 1.0, 1.0, seed=3)
    W, F, C = (p.detach() for p in model.parameters())
    J_fast = torch.func.jacrev(lambda W: markov_parameters(W, F, C, 5))(W)
    J_ref = torch.func.jacrev(lambda W: lib.impulse_response(W, F, C, 5))(W)
    assert close(J_fast, J_ref)


def test_double_backward_matches():
    model = lib.LinearRNN(5, 1, 1, 0.5, 1.0, 1.0, seed=4)
    x = torch.randn(2, 4, 1, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    hv = {}
    for engine in lib.linear_rnn.ENGINES:
        model.engine = engine
        (gW,) = torch.autograd.grad((model(x) ** 2).sum(), [model.W], create_graph=True)
        (hW,) = torch.autograd.grad(gW.sum(), [model.W])
        hv[engine] = hW
    assert close(hv["markov"], hv["recurrence"])


def test_bad_inputs():
    with pytest.raises(ValueError, match="engine"):
        lib.LinearRNN(4, 1, 1, 0.5, 1.0, 1.0, engine="scan")
    model = lib.LinearRNN(4, 1, 1, 0.5, 1.0, 1.0)
    with pytest.raises(ValueError, match="engine"):
        model.engine = "fft"
    with pytest.raises(ValueError, match="n_x"):
        model(torch.zeros(2, 3, 2))
    with pytest.raises(ValueError, match="T"):
        markov_parameters(model.W, model.F, model.C, 0)
    with pytest.raises(ValueError, match="F must have shape"):
        markov_parameters(model.W, torch.zeros(3, 1), model.C, 2)
    with pytest.raises(ValueError, match="NaN"):
        markov_parameters(model.W * math.nan, model.F, model.C, 2)


def test_hessian_vector_product_matches():
    g = torch.Generator().manual_seed(5)
    W, F, C = (torch.randn(*s, generator=g, dtype=torch.float64) for s in ((5, 5), (5, 2), (1, 5)))
    v = torch.randn(5, 5, generator=g, dtype=torch.float64)
    loss = lambda f: (lambda W: (f(W, F, C, 4) ** 2).sum())
    hvp = {k: torch.func.jvp(torch.func.grad(loss(f)), (W,), (v,))[1]
           for k, f in (("fast", markov_parameters), ("ref", lib.impulse_response))}
    assert close(hvp["fast"], hvp["ref"])


def test_long_sequences_use_the_loop_and_agree():
    model = lib.LinearRNN(8, 1, 1, 0.5, 1.0, 1.0, seed=6)
    x = torch.randn(2, 2100, 1, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    with torch.no_grad():
        y_fast = model(x)
        model.engine = "recurrence"
        assert close(y_fast, model(x))


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 40), n_x=st.integers(1, 4), n_y=st.integers(1, 4), T=st.integers(1, 12),
       seed=st.integers(0, 10_000))
def test_markov_parameters_match_reference_values_and_gradients_for_any_shape(n, n_x, n_y, T, seed):
    """Every side of the engine (n_y < n_x: the transposed system; n_x == n_y: the fused pass;
    n_y > n_x: the adjoint recursion) against the plain reference, values and gradients."""
    g = torch.Generator().manual_seed(seed)
    W = (0.5 * torch.randn(n, n, generator=g, dtype=torch.float64)).requires_grad_()
    F = torch.randn(n, n_x, generator=g, dtype=torch.float64).requires_grad_()
    C = torch.randn(n_y, n, generator=g, dtype=torch.float64).requires_grad_()
    V = torch.randn(T, n_y, n_x, generator=g, dtype=torch.float64)
    a = markov_parameters(W, F, C, T)
    b = lib.impulse_response(W, F, C, T)
    assert rel_err(a.detach(), b.detach()) < 1e-10
    ga = torch.autograd.grad((a * V).sum(), [W, F, C], allow_unused=True)
    gb = torch.autograd.grad((b * V).sum(), [W, F, C], allow_unused=True)
    for x, y, p in zip(ga, gb, (W, F, C)):
        # T = 1: L_0 does not depend on W, so a path may return None (no gradient) for it
        x = torch.zeros_like(p) if x is None else x
        y = torch.zeros_like(p) if y is None else y
        assert float((x - y).norm()) <= 1e-10 * max(1.0, float(y.norm()))
