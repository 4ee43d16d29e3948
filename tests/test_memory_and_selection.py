"""Tests of the early-stopping and memory-profile helpers of lib.experiments (Chapters 5-6)."""
import math

import numpy as np
import pytest
import torch

import lib
from lib import experiments as E

torch.set_default_dtype(torch.float64)


# ----------------------------------------------------------------------------- select_by_validation

def test_select_by_validation_picks_best_mean_and_first_tie():
    val = np.array([[0.1, 0.3], [0.5, 0.1], [0.4, 0.4], [0.2, 0.6], [0.6, 0.2]])
    test = np.arange(10.0).reshape(5, 2)
    i, t = E.select_by_validation(val, test)
    # means 0.2, 0.3, 0.4, 0.4, 0.4: the first of the three maxima
    assert i == 2 and np.array_equal(t, test[2])
    i1, t1 = E.select_by_validation(val[:, 0], test[:, 0])
    assert i1 == 4 and t1 == test[4, 0]


def test_select_by_validation_ignores_test_scores():
    val = np.array([0.0, 1.0, 0.5])
    assert E.select_by_validation(val, np.array([9.0, -9.0, 9.0]))[0] == 1


@pytest.mark.parametrize("val, test, match", [
    (np.zeros((0, 2)), np.zeros((0, 2)), "val"),
    (np.zeros((3, 2, 2)), np.zeros(3), "val"),
    (np.zeros(3), np.zeros(4), "test"),
    (np.array([0.0, np.nan]), np.zeros(2), "finite"),
])
def test_select_by_validation_bad_input(val, test, match):
    with pytest.raises(ValueError, match=match):
        E.select_by_validation(val, test)


# ----------------------------------------------------------------------------- learned_fraction

def test_learned_fraction_exact_values():
    g = torch.Generator().manual_seed(0)
    L0 = torch.randn(6, 2, 3, generator=g)
    Ls = torch.randn(6, 2, 3, generator=g)
    a = torch.linspace(0, 1, 6)
    ortho = torch.randn(6, 2, 3, generator=g)
    D = (Ls - L0).flatten(1)
    o = ortho.flatten(1)
    o = o - (o * D).sum(1, keepdim=True) / (D * D).sum(1, keepdim=True) * D   # orthogonal to D_j
    L = L0 + a[:, None, None] * (Ls - L0) + o.reshape(6, 2, 3)
    f = E.learned_fraction(L, L0, Ls)
    assert torch.allclose(f, a, rtol=0, atol=1e-12)


@pytest.mark.parametrize("args, match", [
    ((torch.zeros(3, 1, 2), torch.zeros(3, 1, 3), torch.ones(3, 1, 2)), "same shape"),
    ((torch.zeros(3, 1, 2), torch.zeros(3, 1, 2), torch.zeros(3, 1, 2)), "lag 0"),
    ((torch.zeros(3, 2), torch.zeros(3, 2), torch.ones(3, 2)), "L must have 3"),
])
def test_learned_fraction_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        E.learned_fraction(*args)


# ----------------------------------------------------------------------------- white-input memory

def test_white_input_memory_formula():
    T, nu, lr, steps, N = 12, 0.4, 1e-3, 50, 7
    f = E.white_input_memory(T, nu, 1.0, 0.5, lr, steps, N)
    r = lib.rho(T, nu, 1.0, 0.5)
    j = torch.arange(T, dtype=torch.float64)
    expect = 1 - torch.exp(-lr * steps * N * (T - j) * r)
    assert torch.allclose(f, expect, rtol=1e-12, atol=0)
    assert bool((f[1:] < f[:-1]).all())          # memory falls with the lag


def test_white_input_memory_matches_decoupled_gd():
    """With orthogonal lag blocks (one input, one nonzero time per sequence and lag) GD on the
    scaled convolution learns each lag at rate lr * rho_j * lambda_j: the closed form's
    fraction agrees with 1 - (1 - lr rho_j lambda_j)^steps, whose exp form is the prediction."""
    T, nu, lr, steps = 6, 0.3, 1e-3, 40
    r = lib.rho(T, nu, 1.0, 1.0)
    # impulse inputs: sequence i has x_0 = e (n_x = 1), so lag j is seen only at time j
    N = 5
    x = torch.zeros(N, T, 1)
    x[:, 0, 0] = 1.0
    Ls = torch.randn(T, 1, 1, generator=torch.Generator().manual_seed(2))
    y = lib.causal_conv(Ls, x)
    L0 = torch.zeros(T, 1, 1)
    L = lib.gd_path(x, y, r, L0, lr, [steps])[0]
    f = E.learned_fraction(L, L0, Ls)
    assert torch.allclose(f, 1 - (1 - lr * N * r) ** steps, rtol=1e-10, atol=0)


def test_fit_memory_recovers_nu_from_its_own_profile():
    T, lr, steps, N = 20, 1e-4, 300, 10
    for nu in (0.2, 0.3, 0.5):
        f = E.white_input_memory(T, nu, 1.0, 1.0, lr, steps, N)
        lags = [j for j in range(T) if 0.02 <= float(f[j]) <= 0.9]
        assert abs(E.fit_memory_nu_W(f, T, 1.0, 1.0, lr, steps, N, lags=lags) - nu) < 1e-4
        # one lag pushed below zero does not break the estimate (the sum is fitted)
        h = f.clone()
        h[lags[-1]] = -0.01
        assert 0 < E.fit_memory_nu_W(h, T, 1.0, 1.0, lr, steps, N, lags=lags) < nu
        # a profile measured at another nu_W reads back as that nu_W, not as this one
        g = E.white_input_memory(T, nu * 1.3, 1.0, 1.0, lr, steps, N)
        assert abs(E.fit_memory_nu_W(g, T, 1.0, 1.0, lr, steps, N, lags=lags) - 1.3 * nu) < 1e-4


@pytest.mark.parametrize("kwargs, match", [
    (dict(lags=[]), "lags"),
    (dict(lags=[25]), "lags"),
    (dict(lags=[1, 2], f=-torch.ones(20)), "outside"),
    (dict(lags=[1, 2], f=torch.full((20,), 5.0)), "outside"),
    (dict(lags=[1, 2], f=torch.ones(19)), "shape"),
    (dict(lags=[1, 2], lr=-1.0), "lr"),
])
def test_fit_memory_bad_input(kwargs, match):
    args = dict(f=torch.full((20,), 0.5), T=20, nu_F=1.0, nu_C=1.0, lr=1e-4, steps=300, n_seq=10)
    args.update(kwargs)
    f = args.pop("f")
    with pytest.raises(ValueError, match=match):
        E.fit_memory_nu_W(f, **args)


def test_white_input_memory_bad_input():
    with pytest.raises(ValueError, match="nu_W"):
        E.white_input_memory(10, 1.2, 1.0, 1.0, 1e-4, 10, 5)
    with pytest.raises(TypeError, match="steps"):
        E.white_input_memory(10, 0.3, 1.0, 1.0, 1e-4, 2.5, 5)
