"""Tangent kernels (lib/ntk.py): Thm 3.2 closed form, the M_n factorisation, bad inputs."""
import math

import pytest
import torch
from hypothesis import given, settings, strategies as st

import lib

REL = 1e-10


def close(a, b):
    """||a - b|| <= 1e-10 ||b||: an exact identity in float64."""
    return float(torch.linalg.norm(a - b)) <= REL * float(torch.linalg.norm(b))


def data(*shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64)


# (N1, N2, T, n_x, n_y, seed)
shapes = st.tuples(st.integers(1, 4), st.integers(1, 4), st.integers(1, 7), st.integers(1, 3),
                   st.integers(1, 3), st.integers(0, 10_000))


def test_toeplitz_is_eq_18():
    x = data(4, 2, seed=0)
    X = lib.toeplitz(x)
    assert X.shape == (8, 4)
    for j in range(4):
        for t in range(4):
            want = x[t - j] if t >= j else torch.zeros(2, dtype=torch.float64)
            assert torch.equal(X[2 * j:2 * j + 2, t], want)
    assert torch.equal(lib.toeplitz(x[None])[0], X)


@settings(max_examples=30, deadline=None)
@given(shapes)
def test_toeplitz_gives_the_convolution(shape):
    N, _, T, n_x, n_y, seed = shape
    x = data(N, T, n_x, seed=seed)
    L = data(T, n_y, n_x, seed=seed + 1)
    Lmat = L.permute(1, 0, 2).reshape(n_y, T * n_x)          # [L_0 ... L_{T-1}]
    y = torch.einsum("ar,irt->ita", Lmat, lib.toeplitz(x))
    assert close(y, lib.causal_conv(L, x))


@settings(max_examples=30, deadline=None)
@given(shapes)
def test_conv_ntk_equals_autograd_ntk_of_scaled_conv(shape):
    N1, N2, T, n_x, n_y, seed = shape
    rho = data(T, seed=seed).abs() + 0.1
    model = lib.ScaledConv(rho, n_x, n_y, seed=seed)
    x1, x2 = data(N1, T, n_x, seed=seed + 1), data(N2, T, n_x, seed=seed + 2)
    K = lib.conv_ntk(x1, x2, rho, n_y)
    assert K.shape == (N1 * T * n_y, N2 * T * n_y)
    assert close(K, lib.empirical_ntk(x1, x2, model))
    assert close(lib.factored_ntk(x1, x2, lib.conv_ntk_factor(rho, n_x, n_y)), K)


@settings(max_examples=25, deadline=None)
@given(shapes, st.integers(1, 12))
def test_rnn_ntk_factors_through_markov_gram(shape, n):
    N1, N2, T, n_x, n_y, seed = shape
    model = lib.LinearRNN(n, n_x, n_y, nu_W=0.6, nu_F=1.2, nu_C=0.8, seed=seed)
    x1, x2 = data(N1, T, n_x, seed=seed + 1), data(N2, T, n_x, seed=seed + 2)
    M = lib.markov_ntk_factor(model, T)
    assert close(M, lib.markov_ntk_factor_reference(model, T))
    K_fact = lib.factored_ntk(x1, x2, M)
    assert close(K_fact, lib.empirical_ntk(x1, x2, model))
    model.engine = "recurrence"
    assert close(K_fact, lib.empirical_ntk(x1, x2, model, chunk=3))


def test_ordering_sample_time_channel():
    # K[(i,t,a),(k,s,c)] = d y1[i,t,a] . d y2[k,s,c]; check one entry against autograd by hand
    model = lib.LinearRNN(5, 2, 3, 0.5, 1.0, 1.0, seed=1)
    x1, x2 = data(2, 3, 2, seed=1), data(2, 3, 2, seed=2)
    K = lib.empirical_ntk(x1, x2, model)
    i, t, a, k, s, c = 1, 2, 0, 0, 1, 2
    g1 = torch.autograd.grad(model(x1)[i, t, a], list(model.parameters()))
    g2 = torch.autograd.grad(model(x2)[k, s, c], list(model.parameters()))
    want = sum((u * v).sum() for u, v in zip(g1, g2))
    T, n_y = 3, 3
    assert torch.isclose(K[(i * T + t) * n_y + a, (k * T + s) * n_y + c], want, rtol=1e-12)


def test_limit_of_markov_gram_is_rho_diagonal():
    # Thm 3.3(b) in the factor: at large n, M_n is close to D(rho) (x) I (loose, statistical)
    T, nu = 4, (0.5, 1.0, 1.0)
    M = lib.markov_ntk_factor(lib.LinearRNN(2000, 1, 1, *nu, seed=0), T)
    D = lib.conv_ntk_factor(lib.rho(T, *nu), 1, 1)
    assert float(torch.linalg.norm(M - D) / torch.linalg.norm(D)) < 0.2


def test_bad_inputs():
    rho = torch.ones(3)
    x = torch.zeros(2, 3, 1)
    with pytest.raises(ValueError, match="n_x"):
        lib.conv_ntk(x, torch.zeros(2, 3, 2), rho)
    with pytest.raises(ValueError, match="length T"):
        lib.conv_ntk(x, torch.zeros(2, 4, 1), rho)
    with pytest.raises(ValueError, match="rho must hold"):
        lib.conv_ntk(x, x, torch.ones(4))
    with pytest.raises(ValueError, match="rho must be >= 0"):
        lib.conv_ntk(x, x, -rho)
    with pytest.raises(ValueError, match="n_y"):
        lib.conv_ntk(x, x, rho, n_y=0)
    with pytest.raises(ValueError, match="dimensions"):
        lib.conv_ntk(torch.zeros(3, 1), x, rho)
    model = lib.LinearRNN(4, 1, 1, 0.5, 1.0, 1.0)
    with pytest.raises(ValueError, match="n_x"):
        lib.empirical_ntk(torch.zeros(2, 3, 2), torch.zeros(2, 3, 2), model)
    with pytest.raises(TypeError, match="nn.Module"):
        lib.empirical_ntk(x, x, lambda x: x)
    with pytest.raises(ValueError, match="T must be"):
        lib.markov_ntk_factor(model, 0)
    with pytest.raises(TypeError, match="LinearRNN"):
        lib.markov_ntk_factor(lib.ScaledConv(rho, 1, 1), 3)
    with pytest.raises(ValueError, match="M must have shape"):
        lib.factored_ntk(x, x, torch.eye(4))                 # 4 is not a multiple of T n_x = 3
    with pytest.raises(ValueError, match="M must have shape"):
        lib.factored_ntk(x, x, torch.ones(3, 6))
    with pytest.raises(ValueError, match="nu_W"):
        lib.rho(3, 0.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="nu_F"):
        lib.rho(3, 0.5, -1.0, 1.0)
    with pytest.raises(ValueError, match="T"):
        lib.rho(0, 0.5, 1.0, 1.0)


@pytest.mark.parametrize("nu, seed0", [((0.6, 1.7, 0.4), 100), ((0.3, 0.5, 2.5), 200)])
def test_rho_is_the_wide_limit_of_the_tap_gradient_norms(nu, seed0):
    """Thm 3.3: diag(M_n) -> rho_j, with nu_F, nu_C != 1 (so how each enters rho_j is tested).

    An independent computation: the tap-Jacobian Gram diagonal of 8 random RNNs of width
    n = 1500, averaged; the mean must lie within 4.5 standard errors (of that mean, from the
    8 draws) of rho_j for every j.  The finite-width bias is O(1/n), below the standard error
    here.  Two plausible wrong formulas -- exponent j instead of j - 1, and nu_F dropped -- are
    rejected by the same criterion (asserted, so the test is known to have that power).
    """
    T, n, K = 5, 1500, 8
    D = torch.stack([torch.diagonal(lib.markov_ntk_factor(lib.LinearRNN(n, 1, 1, *nu, seed=seed0 + k), T))
                     for k in range(K)])
    mean, se = D.mean(0), D.std(0) / math.sqrt(K)
    z = lambda r: float(((mean - r) / se).abs().max())  # noqa: E731
    assert z(lib.rho(T, *nu)) <= 4.5, z(lib.rho(T, *nu))
    nu_W, nu_F, nu_C = nu
    j = torch.arange(T, dtype=torch.float64)
    wrong_exponent = nu_C * (j * nu_F * nu_W**j + nu_W**j) + nu_F * nu_W**j
    no_nu_F = nu_C * (j * torch.cat([torch.zeros(1), nu_W ** (j[1:] - 1)]) + nu_W**j) + nu_W**j
    assert z(wrong_exponent) > 4.5 and z(no_nu_F) > 4.5, (z(wrong_exponent), z(no_nu_F))


@pytest.mark.parametrize("T, nu_F, nu_C", [(6, 1.7, 0.4), (9, 0.5, 2.5)])
def test_rho_max_is_the_limit_of_rho_over_nu_w_powers(T, nu_F, nu_C):
    """Eq. (22): rho_j <= rho_max nu_W^{j-1}; rho_max = nu_C (T nu_F + 1) + nu_F is the limit
    nu_W -> 1 of rho_T / nu_W^{T-1} (an independent computation from lib.rho at j = T)."""
    nu_W1 = 1 - 1e-13
    r = lib.rho(T + 1, nu_W1, nu_F, nu_C)
    assert abs(float(r[T]) / nu_W1 ** (T - 1) / lib.rho_max(T, nu_F, nu_C) - 1) <= 1e-10
    for nu_W in (0.2, 0.6, 0.95):
        r = lib.rho(T, nu_W, nu_F, nu_C)
        j = torch.arange(1, T, dtype=torch.float64)
        assert bool((r[1:] <= lib.rho_max(T, nu_F, nu_C) * nu_W ** (j - 1)).all())


# ----------------------------------------------------------------------------- power_law_fit

def test_power_law_fit_recovers_an_exact_power_law():
    n = [40, 160, 640, 2560]
    mean = [3.0 * v ** -0.5 for v in n]
    fit = lib.ntk.power_law_fit(n, mean, [0.1 * m for m in mean])
    assert abs(fit["slope"] + 0.5) < 1e-12 and abs(math.exp(fit["intercept"]) - 3.0) < 1e-12
    assert fit["chi2"] < 1e-20 and fit["dof"] == 2
    # equal relative errors: slope_se = rel / sqrt(sum (log n - mean log n)^2)
    lx = [math.log(v) for v in n]
    sxx = sum((v - sum(lx) / 4) ** 2 for v in lx)
    assert abs(fit["slope_se"] - 0.1 / math.sqrt(sxx)) < 1e-12


def test_power_law_fit_standard_error_is_calibrated():
    # noisy means with known standard errors: the true exponent lies within 2 slope_se of the
    # fit in about 95 % of repetitions (binomial sd over 400 draws: 1.1 %)
    g = torch.Generator().manual_seed(5)
    n = torch.tensor([40.0, 160.0, 640.0])
    rel = torch.tensor([0.3, 0.2, 0.25])
    inside = 0
    for _ in range(400):
        mean = 2.0 * n ** -0.5 * torch.exp(rel * torch.randn(3, generator=g, dtype=torch.float64))
        fit = lib.ntk.power_law_fit(n.tolist(), mean.tolist(), (rel * mean).tolist())
        inside += abs(fit["slope"] + 0.5) <= 2 * fit["slope_se"]
    assert 0.91 <= inside / 400 <= 0.99, inside


@pytest.mark.parametrize("args, word", [
    (([10], [1.0], [0.1]), "two distinct"),
    (([10, 10], [1.0, 2.0], [0.1, 0.1]), "two distinct"),
    (([10, 20], [1.0, -2.0], [0.1, 0.1]), "mean"),
    (([10, 20], [1.0, 2.0], [0.1, 0.0]), "se"),
    (([10, 20], [1.0, 2.0, 3.0], [0.1, 0.1]), "same length"),
    (([[10, 20]], [1.0, 2.0], [0.1, 0.1]), "n must be 1-D"),
    (([10, float("nan")], [1.0, 2.0], [0.1, 0.1]), "n must hold finite"),
])
def test_power_law_fit_bad_input(args, word):
    with pytest.raises(ValueError, match=word):
        lib.ntk.power_law_fit(*args)
