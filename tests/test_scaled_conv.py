"""lib.scaled_conv beyond the model: its closed-form training (design matrix, rho-weighted ridge,
the GD / gradient-flow path, the kernel-regime limit of the RNN) and the memory profile of
trained taps with its white-input prediction (Chapters 3, 5 and 6)."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lib
from lib import scaled_conv as S
from tests.helpers import rel_err


# ----------------------------------------------------------------------------- kernel limit

@settings(max_examples=15, deadline=None)
@given(N=st.integers(1, 6), T=st.integers(1, 6), n_x=st.integers(1, 3), n_y=st.integers(1, 2),
       seed=st.integers(0, 1000))
def test_conv_features_reproduce_causal_conv(N, T, n_x, n_y, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, T, n_x, generator=g)
    L = torch.randn(T, n_y, n_x, generator=g)
    Phi = lib.conv_features(x)
    y = (Phi @ S._taps_to_flat(L)).reshape(N, T, n_y)
    assert torch.allclose(y, lib.causal_conv(L, x), rtol=1e-12, atol=1e-12)
    assert torch.equal(S._flat_to_taps(S._taps_to_flat(L), T, n_x), L)


@settings(max_examples=15, deadline=None)
@given(N=st.integers(1, 5), T=st.integers(2, 6), n_x=st.integers(1, 3), n_y=st.integers(1, 2),
       seed=st.integers(0, 1000), scaled=st.booleans())
def test_gd_path_equals_gradient_descent(N, T, n_x, n_y, seed, scaled):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, T, n_x, generator=g)
    y = torch.randn(N, T, n_y, generator=g)
    r = lib.rho(T, 0.3, 1.0, 1.0) if scaled else torch.ones(T)
    L0 = 0.3 * torch.randn(T, n_y, n_x, generator=g)
    lam_max = float(torch.linalg.eigvalsh((lib.conv_features(x) * r.sqrt().repeat_interleave(n_x)) .T
                                          @ (lib.conv_features(x) * r.sqrt().repeat_interleave(n_x))).max())
    lr = 1.0 / lam_max
    m = lib.ScaledConv(r, n_x, n_y, L0=L0)
    taps = []
    lib.train_gd(m, x, y, lr=lr, steps=12, callback=lambda s, mm: taps.append(mm.taps().detach().clone()))
    path = lib.gd_path(x, y, r, L0, lr, [0, 5, 12])
    for k, s in enumerate([0, 5, 12]):
        assert float((path[k] - taps[s]).norm()) <= 1e-10 * max(1.0, float(taps[s].norm()))


def test_gradient_flow_limits(tiny_xy):
    x, y = tiny_xy
    r = lib.rho(6, 0.3, 1.0, 1.0)
    L0 = torch.zeros(6, 1, 2)
    # small steps: GD -> gradient flow at equal lr * steps, with an O(lr) difference
    a = lib.gd_path(x, y, r, L0, 1e-4, [2000])[0]
    b = lib.gd_path(x, y, r, L0, 1e-5, [20000])[0]
    f = lib.gd_path(x, y, r, L0, 1e-4, [2000], flow=True)[0]
    assert rel_err(b, f) < rel_err(a, f) / 5
    # long time from zero: the least-squares solution of minimum rho^{-1}-weighted norm
    inf = lib.gd_path(x, y, r, L0, 1.0, [10**9], flow=True)[0]
    assert rel_err(inf, lib.rho_ridge(x, y, r, 0.0)) < 1e-8


def test_rho_ridge_is_stationary_point(tiny_xy):
    x, y = tiny_xy
    r = lib.rho(6, 0.3, 1.0, 1.0)
    lam = 0.7
    L = lib.rho_ridge(x, y, r, lam).requires_grad_()
    obj = 0.5 * ((lib.causal_conv(L, x) - y) ** 2).sum() + 0.5 * lam * ((L**2).sum((1, 2)) / r).sum()
    (gL,) = torch.autograd.grad(obj, L)
    assert float(gL.norm()) < 1e-10 * float(L.detach().norm())


def test_kernel_limit_bad_input(tiny_xy):
    x, y = tiny_xy
    r = torch.ones(6)
    with pytest.raises(ValueError, match="lam"):
        lib.rho_ridge(x, y, r, -1.0)
    with pytest.raises(ValueError, match="rho"):
        lib.rho_ridge(x, y, -r, 1.0)
    with pytest.raises(ValueError, match="L0"):
        lib.gd_path(x, y, r, torch.zeros(5, 1, 2), 1e-3, 3)
    with pytest.raises(ValueError, match="diverges"):
        lib.gd_path(x, y, r, torch.zeros(6, 1, 2), 10.0, 3)
    with pytest.raises(ValueError, match="steps"):
        lib.gd_path(x, y, r, torch.zeros(6, 1, 2), 1e-3, [-1])


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
    f = lib.learned_fraction(L, L0, Ls)
    assert torch.allclose(f, a, rtol=0, atol=1e-12)


@pytest.mark.parametrize("args, match", [
    ((torch.zeros(3, 1, 2), torch.zeros(3, 1, 3), torch.ones(3, 1, 2)), "same shape"),
    ((torch.zeros(3, 1, 2), torch.zeros(3, 1, 2), torch.zeros(3, 1, 2)), "lag 0"),
    ((torch.zeros(3, 2), torch.zeros(3, 2), torch.ones(3, 2)), "L must have 3"),
])
def test_learned_fraction_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        lib.learned_fraction(*args)


# ----------------------------------------------------------------------------- white-input memory

def test_white_input_memory_formula():
    T, nu, lr, steps, N = 12, 0.4, 1e-3, 50, 7
    f = lib.white_input_memory(T, nu, 1.0, 0.5, lr, steps, N)
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
    f = lib.learned_fraction(L, L0, Ls)
    assert torch.allclose(f, 1 - (1 - lr * N * r) ** steps, rtol=1e-10, atol=0)


def test_fit_memory_recovers_nu_from_its_own_profile():
    T, lr, steps, N = 20, 1e-4, 300, 10
    for nu in (0.2, 0.3, 0.5):
        f = lib.white_input_memory(T, nu, 1.0, 1.0, lr, steps, N)
        lags = [j for j in range(T) if 0.02 <= float(f[j]) <= 0.9]
        assert abs(lib.fit_memory_nu_W(f, T, 1.0, 1.0, lr, steps, N, lags=lags) - nu) < 1e-4
        # one lag pushed below zero does not break the estimate (the sum is fitted)
        h = f.clone()
        h[lags[-1]] = -0.01
        assert 0 < lib.fit_memory_nu_W(h, T, 1.0, 1.0, lr, steps, N, lags=lags) < nu
        # a profile measured at another nu_W reads back as that nu_W, not as this one
        g = lib.white_input_memory(T, nu * 1.3, 1.0, 1.0, lr, steps, N)
        assert abs(lib.fit_memory_nu_W(g, T, 1.0, 1.0, lr, steps, N, lags=lags) - 1.3 * nu) < 1e-4


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
        lib.fit_memory_nu_W(f, **args)


def test_white_input_memory_bad_input():
    with pytest.raises(ValueError, match="nu_W"):
        lib.white_input_memory(10, 1.2, 1.0, 1.0, 1e-4, 10, 5)
    with pytest.raises(TypeError, match="steps"):
        lib.white_input_memory(10, 0.3, 1.0, 1.0, 1e-4, 2.5, 5)
