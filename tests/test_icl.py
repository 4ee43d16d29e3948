"""In-context linear regression: eta* (App. C.2), the optimal loss, Monte-Carlo consistency."""
import itertools
import math

import pytest
import sympy as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lib


def test_fourth_moment_and_trace_symbolic():
    """Tr E[XX^T XX^T] = n d_x s^4 (n + d_x - 1/5) by exact expansion for small n, d_x."""
    from sympy.stats import E, Uniform
    s2 = sp.Symbol("sigma2", positive=True)
    a = sp.sqrt(3 * s2)
    u = Uniform("u", -a, a)
    m2, m4 = sp.simplify(E(u**2)), sp.simplify(E(u**4))
    assert sp.simplify(m2 - s2) == 0 and sp.simplify(m4 - sp.Rational(9, 5) * s2**2) == 0
    for n, d_x in [(1, 1), (2, 2), (3, 2)]:
        X = sp.Matrix(d_x, n, lambda i, t: sp.Symbol(f"x{i}_{t}"))
        tr = sp.expand((X * X.T * X * X.T).trace())
        # replace each monomial by its expectation under i.i.d. centred entries
        total = 0
        for mono, c in sp.Poly(tr, *X).terms():
            e = 1
            for p in mono:
                e *= {0: 1, 1: 0, 2: m2, 3: 0, 4: m4}[p]
            total += c * e
        assert sp.simplify(total - n * d_x * s2**2 * (n + d_x - sp.Rational(1, 5))) == 0


@settings(max_examples=50, deadline=None)
@given(T=st.integers(1, 100), d_x=st.integers(1, 20), s2=st.floats(0.01, 10))
def test_eta_star_minimises_gd_loss(T, d_x, s2):
    eta = lib.eta_star(T, d_x, s2)
    L = lambda e: lib.gd_loss(e, T, d_x, s2, 0.7)
    assert L(eta) <= L(eta * 1.01) and L(eta) <= L(eta * 0.99)
    assert math.isclose(L(eta), lib.optimal_gd_loss(T, d_x, s2, 0.7), rel_tol=1e-10)


def test_paper_numbers():
    assert math.isclose(lib.eta_star(12, 3), 1 / 14.8, rel_tol=1e-15)
    assert abs(lib.eta_star(12, 3) - 6.76e-2) < 5e-5                   # Table 2
    assert abs(lib.optimal_gd_loss(12, 3, 1.0, 1 / 3) - 0.0946) < 5e-5


def test_monte_carlo_loss():
    """Monte-Carlo L(eta*) within 4 standard errors of the closed form."""
    g = torch.Generator().manual_seed(0)
    tok, y = lib.icl_batch(40_000, 12, 3, 3, sigma_w2=1 / 3, generator=g, dtype=torch.float64)
    err = 0.5 * ((lib.gd_predict(tok, 3, lib.eta_star(12, 3)) - y) ** 2).mean(dim=1)
    mean, se = float(err.mean()), float(err.std() / math.sqrt(err.numel()))
    assert abs(mean - lib.optimal_gd_loss(12, 3, 1.0, 1 / 3)) <= 4 * se


def test_batch_layout():
    tok, y = lib.icl_batch(5, 4, 2, 3, generator=torch.Generator().manual_seed(1))
    assert tok.shape == (5, 5, 5) and y.shape == (5, 3)
    assert torch.all(tok[:, -1, 2:] == 0)
    assert tok[:, :, :2].abs().max() <= math.sqrt(3)


def test_bad_input():
    with pytest.raises(ValueError, match="T"):
        lib.eta_star(0, 3)
    with pytest.raises(ValueError, match="sigma_x2"):
        lib.eta_star(12, 3, sigma_x2=-1.0)
    with pytest.raises(TypeError, match="d_x"):
        lib.eta_star(12, 3.0)
    with pytest.raises(ValueError, match="sigma_w2"):
        lib.optimal_gd_loss(12, 3, 1.0, 0.0)
    with pytest.raises(TypeError, match="generator"):
        lib.icl_batch(2, 3, 2, 2, generator=None)
