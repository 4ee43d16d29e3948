"""Linear self-attention and the Fig. 1 construction (Zucchet et al. 2023, eq. 1, §2)."""
import pytest
import sympy as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lib
from tests.helpers import rel_err


def _weights(d, seed, d_k=None):
    g = torch.Generator().manual_seed(seed)
    d_k = d if d_k is None else d_k
    return torch.randn(d, d, generator=g), torch.randn(d_k, d, generator=g), torch.randn(d_k, d, generator=g)


@settings(max_examples=30, deadline=None)
@given(d=st.integers(1, 8), T=st.integers(1, 64), seed=st.integers(0, 10_000))
def test_parallel_equals_fast_weight_recurrence(d, T, seed):
    att = lib.LinearSelfAttention(*_weights(d, seed))
    x = torch.randn(3, T, d, generator=torch.Generator().manual_seed(seed + 1))
    with torch.no_grad():
        assert rel_err(att(x), att.forward_step(x)) <= 1e-10


@settings(max_examples=30, deadline=None)
@given(d=st.integers(1, 8), T=st.integers(1, 64), seed=st.integers(0, 10_000), compact=st.booleans())
def test_construction_equals_attention(d, T, seed, compact):
    W = _weights(d, seed)
    x = torch.randn(2, T, d, generator=torch.Generator().manual_seed(seed + 1))
    with torch.no_grad():
        y = lib.LinearSelfAttention(*W)(x)
        model = lib.gated_rnn_from_attention(*W, compact=compact)
        assert rel_err(model(x), y) <= 1e-10
        assert rel_err(model(x, method="step"), y) <= 1e-10
    n_kv = d * (d + 1) // 2 if compact else d * d
    assert model.lam.numel() == n_kv + d
    assert torch.equal(model.lam[:n_kv], torch.ones(n_kv)) and torch.equal(model.lam[n_kv:], torch.zeros(d))


@settings(max_examples=15, deadline=None)
@given(d=st.integers(1, 5), d_k=st.integers(1, 5), seed=st.integers(0, 10_000))
def test_rectangular_keys(d, d_k, seed):
    W = _weights(d, seed, d_k)
    x = torch.randn(2, 7, d, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        assert rel_err(lib.gated_rnn_from_attention(*W)(x), lib.LinearSelfAttention(*W)(x)) <= 1e-10


def test_construction_sympy_d2_T2():
    """The construction's outputs are the attention polynomial (symbolic weights and inputs)."""
    d, T = 2, 2
    WV, WK, WQ = (sp.Matrix(d, d, lambda i, j, n=n: sp.Symbol(f"{n}{i}{j}")) for n in "vkq")
    xs = [sp.Matrix(d, 1, lambda i, _, t=t: sp.Symbol(f"x{t}{i}")) for t in range(T)]
    # evaluate lib's (numeric) weights layout symbolically: the layout is index-only, so
    # rebuild it with sympy entries by substituting basis matrices
    model = lib.gated_rnn_from_attention(torch.eye(d), torch.eye(d), torch.eye(d))
    n_h = model.lam.numel()
    lam = [int(v) for v in model.lam.detach()]
    Wm = sp.zeros(n_h, d + 1); Wx = sp.zeros(n_h, d + 1)
    for n in range(d * d):
        i, j = divmod(n, d)
        Wm[n, :d], Wx[n, :d] = WV[i, :], WK[j, :]
    for k in range(d):
        Wm[d * d + k, :d], Wx[d * d + k, d] = WQ[k, :], 1
    Wom, Wox, D = (sp.Matrix(getattr(model, n).detach().numpy().astype(int)) for n in ("W_out_m", "W_out_x", "D"))
    h = sp.zeros(n_h, 1); Wff = sp.zeros(d, d)
    for t in range(T):
        xt = xs[t].col_join(sp.Matrix([[1]]))
        h = sp.Matrix([lam[n] * h[n] for n in range(n_h)]) + (Wm * xt).multiply_elementwise(Wx * xt)
        Wff += (WV * xs[t]) * (WK * xs[t]).T
        assert ((D * (Wom * h).multiply_elementwise(Wox * h)) - Wff * WQ * xs[t]).applyfunc(sp.expand) == sp.zeros(d, 1)


@settings(max_examples=20, deadline=None)
@given(d=st.integers(1, 4), seed=st.integers(0, 10_000))
def test_instantaneous_polynomial_of_construction(d, seed):
    W = _weights(d, seed)
    _, c_att = lib.polynomial_coefficients(lib.lsa_instantaneous_tensor(*W))
    _, c_rnn = lib.polynomial_coefficients(lib.instantaneous_tensor(lib.gated_rnn_from_attention(*W)))
    assert rel_err(c_rnn, c_att) <= 1e-10


def test_polynomial_coefficients_against_sympy():
    g = torch.Generator().manual_seed(3)
    model = lib.GatedLinearRNN(2, 3, 2, seed=4)
    exps, coef = lib.polynomial_coefficients(lib.instantaneous_tensor(model))
    x = sp.symbols("x0:2")
    xt = sp.Matrix([*x, 1])
    f = lambda M: sp.Matrix(M.detach().numpy())
    h = (f(model.W_in_m) * xt).multiply_elementwise(f(model.W_in_x) * xt)
    y = f(model.D) * (f(model.W_out_m) * h).multiply_elementwise(f(model.W_out_x) * h)
    for i in range(2):
        poly = sp.Poly(sp.expand(y[i]), *x)
        for e, c in zip(exps, coef[i].tolist()):
            assert abs(float(poly.coeff_monomial(x[0] ** e[0] * x[1] ** e[1])) - c) <= 1e-10 * (1 + abs(c))
    del g


def test_bad_input():
    with pytest.raises(ValueError, match="W_K"):
        lib.LinearSelfAttention(torch.eye(3), torch.eye(2), torch.eye(3))
    with pytest.raises(ValueError, match="x must have shape"):
        lib.LinearSelfAttention(torch.eye(3), torch.eye(3), torch.eye(3))(torch.zeros(1, 4, 2))
    with pytest.raises(ValueError, match="dimensions"):
        lib.LinearSelfAttention(torch.eye(3), torch.eye(3), torch.eye(3))(torch.zeros(4, 3))
    with pytest.raises(ValueError, match="well-conditioned W_V"):
        lib.gated_rnn_from_attention(torch.zeros(3, 3), torch.eye(3), torch.eye(3), compact=True)
    with pytest.raises(ValueError, match="square"):
        lib.gated_rnn_from_attention(torch.eye(3), torch.ones(2, 3), torch.ones(2, 3), compact=True)
    with pytest.raises(TypeError):
        lib.LinearSelfAttention("abc", torch.eye(3), torch.eye(3))


@pytest.mark.parametrize("d", [2, 3, 5])
@pytest.mark.parametrize("compact", [False, True])
def test_construction_size_counts_the_built_construction(d, compact):
    """lib.construction_size equals the neurons, parameters and nonzero weights of the network
    lib.gated_rnn_from_attention actually builds (random weights: no accidental zeros)."""
    g = torch.Generator().manual_seed(d)
    W = [torch.randn(d, d, generator=g, dtype=torch.float64) for _ in range(3)]
    m = lib.gated_rnn_from_attention(*W, compact=compact)
    size = lib.construction_size(d, compact=compact)
    params = [m.W_in_m, m.W_in_x, m.lam, m.W_out_m, m.W_out_x, m.D]
    assert size["hidden"] == m.W_in_m.shape[0] == size["key_value"] + size["query"]
    assert size["gate_out"] == m.W_out_m.shape[0]
    assert size["parameters"] == sum(p.numel() for p in params)
    # the nonzero entries of every tensor built, lam included (the query neurons' lam = 0 are zeros)
    assert size["nonzero"] == sum(int((p.detach() != 0).sum()) for p in params)
    assert int((m.lam.detach() != 0).sum()) == size["key_value"]
    assert size["attention_parameters"] == 3 * d * d
