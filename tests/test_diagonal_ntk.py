"""The tap kernel of the diagonal linear RNN (lib/diagonal_ntk.py): moments, the finite-width
factor against torch.func, the wide limit, kernel-regime GD, bad inputs."""
import math

import numpy as np
import pytest
import torch
from scipy import integrate

import lib
from lib.diagonal_ntk import (DiagonalLinearRNN, diagonal_ntk_factor, diagonal_ntk_factor_reference,
                             diagonal_ntk_limit, kernel_gd_path, lam_moment)

REL = 1e-10
CONFIGS = [dict(law="uniform", lam_range=(0.0, 1.0), input_norm=False),
           dict(law="lru", lam_range=(0.0, 1.0), input_norm=True),
           dict(law="lru", lam_range=(0.9, 0.999), input_norm=True),
           dict(law="uniform", lam_range=(0.2, 0.7), input_norm=False)]


def rel(a, b):
    a, b = a.detach(), b.detach()
    return float(torch.linalg.norm(a - b) / torch.linalg.norm(b))


def data(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("law,lam_range", [("uniform", (0.0, 1.0)), ("uniform", (0.3, 0.8)),
                                           ("lru", (0.0, 1.0)), ("lru", (0.9, 0.999))])
@pytest.mark.parametrize("q", [0, 2])
def test_moments_match_quadrature(law, lam_range, q):
    lo, hi = lam_range

    def density(x):
        return 1 / (hi - lo) if law == "uniform" else 2 * x / (hi**2 - lo**2)

    for p in (0.0, 1.0, 3.0, 7.5, 20.0):
        want, _ = integrate.quad(lambda x: x**p * math.log(x) ** q * density(x), lo, hi, epsabs=1e-14, epsrel=1e-13)
        got = float(lam_moment(p, law, lam_range, q))
        assert abs(got - want) <= 1e-9 * max(abs(want), 1e-12), (p, got, want)


def test_uniform_moments_are_hilbert_entries():
    p = np.arange(10.0)
    assert np.allclose(lam_moment(p), 1 / (p + 1), rtol=1e-14, atol=0)
    assert np.allclose(lam_moment(p, log_power=2), 2 / (p + 1) ** 3, rtol=1e-13, atol=0)


@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize("param", ["direct", "exp", "frozen"])
def test_factor_is_jacobian_gram_and_factors_the_ntk(cfg, param):
    model = DiagonalLinearRNN(40, 2, 3, param=param, seed=3, **cfg)
    T = 5
    M = diagonal_ntk_factor(model, T)
    assert rel(M, diagonal_ntk_factor_reference(model, T)) <= REL
    x1, x2 = data(2, T, 2, seed=1), data(3, T, 2, seed=2)
    assert rel(lib.factored_ntk(x1, x2, M), lib.empirical_ntk(x1, x2, model)) <= REL


def test_forward_fast_path_is_the_recurrence():
    for param in ("direct", "exp", "frozen"):
        model = DiagonalLinearRNN(30, 2, 2, param=param, seed=0)
        x = data(4, 9, 2, seed=5)
        assert rel(model(x), model.forward_reference(x)) <= REL


def test_exp_parametrisation_reproduces_lam():
    a = DiagonalLinearRNN(20, 1, 1, param="exp", seed=7)
    b = DiagonalLinearRNN(20, 1, 1, param="direct", seed=7)
    assert rel(a.recurrence().detach(), b.recurrence().detach()) <= REL
    assert rel(a.markov_parameters(6).detach(), b.markov_parameters(6).detach()) <= REL


@pytest.mark.parametrize("param", ["direct", "exp", "frozen"])
def test_wide_factor_approaches_the_limit(param):
    """The finite-width factor is an average over units: far from the limit at n = 30, within a
    few n^{-1/2} of it at n = 30000 (and the wrong limit with nu_B and nu_C doubled is not)."""
    T = 6
    K = torch.kron(diagonal_ntk_limit(T, param=param), torch.eye(1))
    errs = [np.mean([rel(diagonal_ntk_factor(DiagonalLinearRNN(n, 1, 1, param=param, seed=s), T), K)
                     for s in range(4)]) for n in (30, 30_000)]
    assert errs[1] < errs[0] / 5
    assert errs[1] < 0.1
    wrong = diagonal_ntk_limit(T, param=param, nu_B=2.0, nu_C=2.0)
    assert np.mean([rel(diagonal_ntk_factor(DiagonalLinearRNN(30_000, 1, 1, param=param, seed=s), T), wrong)
                    for s in range(2)]) > 0.3


def test_frozen_limit_is_a_hankel_moment_matrix():
    K = diagonal_ntk_limit(5, param="frozen", nu_B=0.5, nu_C=1.5).numpy()
    j = np.arange(5)
    assert np.allclose(K, 2.0 / (j[:, None] + j[None, :] + 1), rtol=1e-14, atol=0)


def test_kernel_gd_path_with_diagonal_kernel_is_the_scaled_convolution():
    T, n_x, n_y = 6, 2, 2
    x, y = data(5, T, n_x, seed=1), data(5, T, n_y, seed=2)
    rho = lib.rho(T, 0.4, 1.0, 1.0)
    L0 = data(T, n_y, n_x, seed=3) * 0.1
    got = kernel_gd_path(x, y, lib.conv_ntk_factor(rho, n_x, n_y), L0, 1e-3, [0, 7, 40])
    want = lib.gd_path(x, y, rho, L0, 1e-3, [0, 7, 40])
    assert rel(got, want) <= REL


def test_kernel_gd_path_per_channel_is_the_full_kernel():
    T, n_x, n_y = 5, 2, 3
    x, y = data(4, T, n_x, seed=1), data(4, T, n_y, seed=2)
    K = diagonal_ntk_limit(T)
    L0 = data(T, n_y, n_x, seed=3)
    full = kernel_gd_path(x, y, torch.kron(K, torch.eye(n_y * n_x, dtype=torch.float64)), L0, 1e-3, [3, 50])
    per_channel = kernel_gd_path(x, y, torch.kron(K, torch.eye(n_x, dtype=torch.float64)), L0, 1e-3, [3, 50])
    assert rel(per_channel, full) <= REL


def test_kernel_gd_path_is_the_linearised_model():
    """One GD step on the tap vector through the kernel is one GD step of a linear model whose
    tap Jacobian is J, for a small learning rate: first-order agreement with the network."""
    T = 5
    model = DiagonalLinearRNN(200, 1, 1, param="exp", seed=1)
    x, y = data(4, T, 1, seed=2), data(4, T, 1, seed=3)
    L0 = model.markov_parameters(T).detach()
    M = diagonal_ntk_factor(model, T)
    lr = 1e-4
    pred = kernel_gd_path(x, y, M, L0, lr, [1])[0]
    lib.train_gd(model, x, y, lr=lr, steps=1, loss="half_sum")
    moved = model.markov_parameters(T).detach() - L0
    assert rel(moved, pred - L0) <= 1e-3


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="law"):
        DiagonalLinearRNN(4, 1, 1, law="gaussian")
    with pytest.raises(ValueError, match="lam_range"):
        diagonal_ntk_limit(4, lam_range=(0.5, 1.5))
    with pytest.raises(ValueError, match="param"):
        diagonal_ntk_limit(4, param="log")
    with pytest.raises(ValueError, match="nu_B"):
        diagonal_ntk_limit(4, nu_B=-1.0)
    with pytest.raises(ValueError, match="log_power"):
        lam_moment(1.0, log_power=1)
    with pytest.raises(ValueError, match="p must"):
        lam_moment(-1.0)
    with pytest.raises(ValueError, match="T must"):
        diagonal_ntk_limit(0)
    with pytest.raises(TypeError, match="model"):
        diagonal_ntk_factor(lib.LinearRNN(4, 1, 1, 0.5, 1.0, 1.0), 3)
    x, y = data(2, 4, 1, seed=0), data(2, 4, 1, seed=1)
    with pytest.raises(ValueError, match="M must"):
        kernel_gd_path(x, y, torch.eye(3, dtype=torch.float64), torch.zeros(4, 1, 1, dtype=torch.float64), 0.1, [1])
    with pytest.raises(ValueError, match="lr"):
        kernel_gd_path(x, y, torch.eye(4, dtype=torch.float64), torch.zeros(4, 1, 1, dtype=torch.float64), 0.0, [1])


def test_input_gated_network_approaches_its_kernel_on_quadratic_features():
    """Far from the limit at n = 30, within a few n^{-1/2} at n = 30000; the linear network's
    kernel on x is no limit of it."""
    from lib.diagonal_ntk import InputGatedDiagonalRNN, input_gated_ntk_limit, quadratic_features

    T = 5
    x = data(2, T, 2, seed=4)
    q = quadratic_features(x)
    assert torch.allclose((q[0, 1] @ q[1, 2]), (x[0, 1] @ x[1, 2]) ** 2)
    K = lib.factored_ntk(q, q, torch.kron(input_gated_ntk_limit(T, nu_G=0.5), torch.eye(4, dtype=torch.float64)))
    errs = [np.mean([rel(lib.empirical_ntk(x, x, InputGatedDiagonalRNN(n, 2, 1, nu_G=0.5, seed=s)), K)
                     for s in range(3)]) for n in (30, 30_000)]
    assert errs[1] < errs[0] / 5 and errs[1] < 0.1
    linear = lib.factored_ntk(x, x, torch.kron(diagonal_ntk_limit(T), torch.eye(2, dtype=torch.float64)))
    assert rel(lib.empirical_ntk(x, x, InputGatedDiagonalRNN(30_000, 2, 1, nu_G=0.5, seed=0)), linear) > 0.3
    with pytest.raises(ValueError, match="nu_G"):
        input_gated_ntk_limit(T, nu_G=0.0)
