"""Tests of lib.experiments: data generation, fast RNN taps, mini-batch GD, R^2, kernel limit."""
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lib
from lib import experiments as E

torch.set_default_dtype(torch.float64)


def rel(a, b):
    return float((a - b).norm() / b.norm())


# ----------------------------------------------------------------------------- noise / SNR

@pytest.mark.parametrize("snr_db", [0.0, 10.0, 20.0, 35.0])
def test_noise_has_requested_snr(snr_db):
    y = torch.randn(200, 50, 2, generator=torch.Generator().manual_seed(1))
    noisy, s2 = E.add_output_noise(y, snr_db, seed=3)
    P = float((y**2).mean())
    assert s2 == pytest.approx(P / 10 ** (snr_db / 10), rel=1e-12)
    M = y.numel()
    measured = float(((noisy - y) ** 2).mean())
    # the sample variance of M Gaussian draws has relative standard deviation sqrt(2 / M)
    assert abs(measured / s2 - 1) < 4 * math.sqrt(2 / M)


def test_teacher_dataset_snr_and_shapes():
    L = lib.LinearRNN(4, 3, 2, 0.3, 1.0, 1.0, seed=0).markov_parameters(10).detach()
    D = E.teacher_dataset(L, 400, 300, 10, snr_db=20.0, seed=5)
    assert D["x_train"].shape == (400, 10, 3) and D["y_test"].shape == (300, 10, 2)
    assert torch.allclose(D["y_train_clean"], lib.causal_conv(L, D["x_train"]))
    P = float((D["y_train_clean"] ** 2).mean())
    assert D["noise_var"] == pytest.approx(P / 100, rel=1e-12)
    M = D["y_train"].numel()
    e2 = float(((D["y_train"] - D["y_train_clean"]) ** 2).mean())
    assert abs(e2 / D["noise_var"] - 1) < 4 * math.sqrt(2 / M)
    again = E.teacher_dataset(L, 400, 300, 10, snr_db=20.0, seed=5)
    assert torch.equal(again["y_test"], D["y_test"])


def test_noise_bad_input():
    y = torch.randn(3, 4, 1)
    with pytest.raises(ValueError, match="snr_db"):
        E.add_output_noise(y, float("nan"))
    with pytest.raises(TypeError, match="snr_db"):
        E.add_output_noise(y, "20")
    with pytest.raises(ValueError, match="zero"):
        E.add_output_noise(torch.zeros(3, 4, 1), 20.0)
    with pytest.raises(ValueError, match="signal_power"):
        E.add_output_noise(y, 20.0, signal_power=-1.0)
    with pytest.raises(TypeError, match="seed"):
        E.add_output_noise(y, 20.0, seed=1.5)
    L = torch.randn(5, 1, 2)
    with pytest.raises(ValueError, match="n_train"):
        E.teacher_dataset(L, 0, 3, 5)
    with pytest.raises(ValueError, match="L must have 3"):
        E.teacher_dataset(torch.randn(5, 2), 3, 3, 5)


# ----------------------------------------------------------------------------- delay

@settings(max_examples=25, deadline=None)
@given(T=st.integers(2, 12), n_x=st.integers(1, 3), n_y=st.integers(1, 3), data=st.data())
def test_delay_taps_shift_the_output(T, n_x, n_y, data):
    d = data.draw(st.integers(0, T - 1))
    g = torch.Generator().manual_seed(T * 100 + d)
    L = torch.randn(T, n_y, n_x, generator=g)
    x = torch.randn(3, T, n_x, generator=g)
    y = lib.causal_conv(L, x)
    yd = lib.causal_conv(E.delay_taps(L, d), x)
    assert torch.all(yd[:, :d] == 0)
    assert torch.allclose(yd[:, d:], y[:, : T - d], rtol=1e-12, atol=1e-12)


def test_delay_bad_input():
    L = torch.randn(5, 1, 1)
    with pytest.raises(ValueError, match="delay"):
        E.delay_taps(L, 5)
    with pytest.raises(ValueError, match="delay"):
        E.delay_taps(L, -1)
    with pytest.raises(TypeError, match="delay"):
        E.delay_taps(L, 1.0)


# ----------------------------------------------------------------------------- R^2

def test_r2_known_cases():
    y = torch.tensor([[1.0], [2.0], [3.0], [4.0]])
    assert float(E.r2_score(y, y)[0]) == 1.0
    assert float(E.r2_score(torch.full_like(y, 2.5), y)[0]) == pytest.approx(0.0, abs=1e-15)
    yhat = torch.tensor([[1.0], [2.0], [3.0], [5.0]])  # SSE 1, SST 5
    assert float(E.r2_score(yhat, y)[0]) == pytest.approx(0.8, rel=1e-14)
    # per channel, over samples and times
    y3 = torch.randn(4, 5, 2, generator=torch.Generator().manual_seed(0))
    p3 = y3 + 0.1
    r = E.r2_score(p3, y3)
    for c in range(2):
        yc = y3[..., c].reshape(-1)
        want = 1 - 0.01 * yc.numel() / float(((yc - yc.mean()) ** 2).sum())
        assert float(r[c]) == pytest.approx(want, rel=1e-12)


def test_r2_bad_input():
    y = torch.randn(4, 2)
    with pytest.raises(ValueError, match="shape"):
        E.r2_score(torch.randn(4, 3), y)
    with pytest.raises(ValueError, match="constant"):
        E.r2_score(y, torch.ones(4, 2))
    with pytest.raises(ValueError, match="dimensions"):
        E.r2_score(torch.randn(4), torch.randn(4))


# ----------------------------------------------------------------------------- fast taps

@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 40), n_x=st.integers(1, 4), n_y=st.integers(1, 4), T=st.integers(1, 12),
       seed=st.integers(0, 10_000))
def test_markov_taps_match_reference_values_and_gradients(n, n_x, n_y, T, seed):
    g = torch.Generator().manual_seed(seed)
    W = (0.5 * torch.randn(n, n, generator=g)).requires_grad_()
    F = torch.randn(n, n_x, generator=g).requires_grad_()
    C = torch.randn(n_y, n, generator=g).requires_grad_()
    V = torch.randn(T, n_y, n_x, generator=g)
    a = E.markov_taps(W, F, C, T)
    b = lib.impulse_response(W, F, C, T)
    assert rel(a.detach(), b.detach()) < 1e-10
    ga = torch.autograd.grad((a * V).sum(), [W, F, C], allow_unused=True)
    gb = torch.autograd.grad((b * V).sum(), [W, F, C], allow_unused=True)
    for x, y, p in zip(ga, gb, (W, F, C)):
        # T = 1: L_0 does not depend on W, so a path may return None (no gradient) for it
        x = torch.zeros_like(p) if x is None else x
        y = torch.zeros_like(p) if y is None else y
        assert float((x - y).norm()) <= 1e-10 * max(1.0, float(y.norm()))


def test_taps_rnn_matches_recurrence():
    rnn = lib.LinearRNN(60, 3, 2, 0.4, 1.0, 1.0, seed=2)
    x = torch.randn(5, 9, 3, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert rel(E.TapsRNN(rnn)(x), rnn.forward_recurrence(x)) < 1e-10
    assert set(E.TapsRNN(rnn).parameters()) == set(rnn.parameters())
    with pytest.raises(TypeError, match="LinearRNN"):
        E.TapsRNN(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="square"):
        E.markov_taps(torch.randn(3, 4), torch.randn(3, 1), torch.randn(1, 3), 4)


# ----------------------------------------------------------------------------- mini-batch GD

def _tiny():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(7, 6, 2, generator=g)
    y = torch.randn(7, 6, 1, generator=g)
    return x, y


def test_minibatch_with_one_batch_is_full_batch_gd():
    x, y = _tiny()
    r = lib.rho(6, 0.3, 1.0, 1.0)
    a = lib.ScaledConv(r, 2, 1, seed=1)
    b = lib.ScaledConv(r, 2, 1, seed=1)
    lib.train_gd(a, x, y, lr=1e-2, steps=20)
    E.train_minibatch(b, x, y, lr=1e-2, epochs=20, batch_size=100, seed=4)
    assert rel(b.taps().detach(), a.taps().detach()) < 1e-10


def test_minibatch_deterministic_and_evaluates():
    x, y = _tiny()
    r = torch.ones(6)
    runs = []
    for _ in range(2):
        m = lib.ScaledConv(r, 2, 1, seed=1)
        h = E.train_minibatch(m, x, y, lr=1e-2, epochs=3, batch_size=3, seed=9,
                              evaluate=lambda e, mm: e)
        runs.append(m.taps().detach())
        assert h == [0, 1, 2, 3]
    assert torch.equal(runs[0], runs[1])


def test_minibatch_bad_input():
    x, y = _tiny()
    m = lib.ScaledConv(torch.ones(6), 2, 1)
    with pytest.raises(ValueError, match="lr"):
        E.train_minibatch(m, x, y, lr=-1.0, epochs=1)
    with pytest.raises(ValueError, match="loss"):
        E.train_minibatch(m, x, y, lr=1e-3, epochs=1, loss="l1")
    with pytest.raises(ValueError, match="batch_size"):
        E.train_minibatch(m, x, y, lr=1e-3, epochs=1, batch_size=0)
    with pytest.raises(ValueError, match="same N and T"):
        E.train_minibatch(m, x, y[:3], lr=1e-3, epochs=1)


# ----------------------------------------------------------------------------- kernel limit

@settings(max_examples=15, deadline=None)
@given(N=st.integers(1, 6), T=st.integers(1, 6), n_x=st.integers(1, 3), n_y=st.integers(1, 2),
       seed=st.integers(0, 1000))
def test_conv_features_reproduce_causal_conv(N, T, n_x, n_y, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, T, n_x, generator=g)
    L = torch.randn(T, n_y, n_x, generator=g)
    Phi = E.conv_features(x)
    y = (Phi @ E._taps_to_flat(L)).reshape(N, T, n_y)
    assert torch.allclose(y, lib.causal_conv(L, x), rtol=1e-12, atol=1e-12)
    assert torch.equal(E._flat_to_taps(E._taps_to_flat(L), T, n_x), L)


@settings(max_examples=15, deadline=None)
@given(N=st.integers(1, 5), T=st.integers(2, 6), n_x=st.integers(1, 3), n_y=st.integers(1, 2),
       seed=st.integers(0, 1000), scaled=st.booleans())
def test_gd_path_equals_gradient_descent(N, T, n_x, n_y, seed, scaled):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, T, n_x, generator=g)
    y = torch.randn(N, T, n_y, generator=g)
    r = lib.rho(T, 0.3, 1.0, 1.0) if scaled else torch.ones(T)
    L0 = 0.3 * torch.randn(T, n_y, n_x, generator=g)
    lam_max = float(torch.linalg.eigvalsh((E.conv_features(x) * r.sqrt().repeat_interleave(n_x)) .T
                                          @ (E.conv_features(x) * r.sqrt().repeat_interleave(n_x))).max())
    lr = 1.0 / lam_max
    m = lib.ScaledConv(r, n_x, n_y, L0=L0)
    taps = []
    lib.train_gd(m, x, y, lr=lr, steps=12, callback=lambda s, mm: taps.append(mm.taps().detach().clone()))
    path = E.gd_path(x, y, r, L0, lr, [0, 5, 12])
    for k, s in enumerate([0, 5, 12]):
        assert float((path[k] - taps[s]).norm()) <= 1e-10 * max(1.0, float(taps[s].norm()))


def test_gradient_flow_limits():
    x, y = _tiny()
    r = lib.rho(6, 0.3, 1.0, 1.0)
    L0 = torch.zeros(6, 1, 2)
    # small steps: GD -> gradient flow at equal lr * steps, with an O(lr) difference
    a = E.gd_path(x, y, r, L0, 1e-4, [2000])[0]
    b = E.gd_path(x, y, r, L0, 1e-5, [20000])[0]
    f = E.gd_path(x, y, r, L0, 1e-4, [2000], flow=True)[0]
    assert rel(b, f) < rel(a, f) / 5
    # long time from zero: the least-squares solution of minimum rho^{-1}-weighted norm
    inf = E.gd_path(x, y, r, L0, 1.0, [10**9], flow=True)[0]
    assert rel(inf, E.rho_ridge(x, y, r, 0.0)) < 1e-8


def test_rho_ridge_is_stationary_point():
    x, y = _tiny()
    r = lib.rho(6, 0.3, 1.0, 1.0)
    lam = 0.7
    L = E.rho_ridge(x, y, r, lam).requires_grad_()
    obj = 0.5 * ((lib.causal_conv(L, x) - y) ** 2).sum() + 0.5 * lam * ((L**2).sum((1, 2)) / r).sum()
    (gL,) = torch.autograd.grad(obj, L)
    assert float(gL.norm()) < 1e-10 * float(L.detach().norm())


def test_kernel_limit_bad_input():
    x, y = _tiny()
    r = torch.ones(6)
    with pytest.raises(ValueError, match="lam"):
        E.rho_ridge(x, y, r, -1.0)
    with pytest.raises(ValueError, match="rho"):
        E.rho_ridge(x, y, -r, 1.0)
    with pytest.raises(ValueError, match="L0"):
        E.gd_path(x, y, r, torch.zeros(5, 1, 2), 1e-3, 3)
    with pytest.raises(ValueError, match="diverges"):
        E.gd_path(x, y, r, torch.zeros(6, 1, 2), 10.0, 3)
    with pytest.raises(ValueError, match="steps"):
        E.gd_path(x, y, r, torch.zeros(6, 1, 2), 1e-3, [-1])


# ----------------------------------------------------------------------------- S1 windows

def _fake_recording(bins=1000, neurons=4, seed=0):
    rng = np.random.default_rng(seed)
    return rng.poisson(2.0, size=(bins, neurons)).astype(np.uint8), rng.normal(size=(bins, 2))


def test_s1_sequences_split_windows_and_normalisation():
    spikes, vel = _fake_recording()
    S = E.s1_sequences(spikes, vel, T=15, fractions=(0.7, 0.1, 0.2))
    assert S["x_train"].shape == (700 // 15, 15, 4) and S["y_val"].shape == (100 // 15, 15, 2)
    assert S["x_test"].shape == (200 // 15, 15, 4)
    used = (spikes[:700 // 15 * 15] - S["x_mean"].numpy()) / S["x_std"].numpy()
    assert np.allclose(S["x_train"].reshape(-1, 4).numpy(), used)
    # statistics are those of the whole training block (the windows drop its last 10 bins)
    assert np.allclose(S["x_mean"].numpy(), spikes[:700].mean(0))
    # the test block is the end of the recording, in order
    last = (vel[800:800 + 200 // 15 * 15] - S["y_mean"].numpy()) / S["y_std"].numpy()
    assert np.allclose(S["y_test"].reshape(-1, 2).numpy(), last)
    # limited data: a stretch of the training block, normalised with its own statistics
    L = E.s1_sequences(spikes, vel, T=15, train_bins=300, train_offset=150)
    assert L["x_train"].shape == (20, 15, 4)
    assert np.allclose(L["y_mean"].numpy(), vel[150:450].mean(0))
    assert torch.allclose(L["y_train"].reshape(-1, 2).mean(0), torch.zeros(2), atol=1e-12)


def test_s1_sequences_bad_input():
    spikes, vel = _fake_recording()
    with pytest.raises(ValueError, match="same number of bins"):
        E.s1_sequences(spikes, vel[:-1])
    with pytest.raises(ValueError, match="fractions"):
        E.s1_sequences(spikes, vel, fractions=(0.5, 0.5, 0.5))
    with pytest.raises(ValueError, match="train_bins"):
        E.s1_sequences(spikes, vel, train_bins=800)
    with pytest.raises(ValueError, match="train_offset"):
        E.s1_sequences(spikes, vel, train_offset=3)
    with pytest.raises(ValueError, match="T"):
        E.s1_sequences(spikes, vel, T=0)
    with pytest.raises(ValueError, match="2-D"):
        E.s1_sequences(spikes.ravel(), vel)
