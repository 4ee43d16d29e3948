"""lib.linear_teacher: Part I's teacher-student data -- output noise at the requested SNR, the teacher
data set, and the delayed teacher (Chapters 4 and 5)."""
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lib


# ----------------------------------------------------------------------------- noise / SNR

@pytest.mark.parametrize("snr_db", [0.0, 10.0, 20.0, 35.0])
def test_noise_has_requested_snr(snr_db):
    y = torch.randn(200, 50, 2, generator=torch.Generator().manual_seed(1))
    noisy, s2 = lib.add_output_noise(y, snr_db, seed=3)
    P = float((y**2).mean())
    assert s2 == pytest.approx(P / 10 ** (snr_db / 10), rel=1e-12)
    M = y.numel()
    measured = float(((noisy - y) ** 2).mean())
    # the sample variance of M Gaussian draws has relative standard deviation sqrt(2 / M)
    assert abs(measured / s2 - 1) < 4 * math.sqrt(2 / M)


def test_teacher_dataset_snr_and_shapes():
    L = lib.LinearRNN(4, 3, 2, 0.3, 1.0, 1.0, seed=0).markov_parameters(10).detach()
    D = lib.linear_teacher_dataset(L, 400, 300, 10, snr_db=20.0, seed=5)
    assert D["x_train"].shape == (400, 10, 3) and D["y_test"].shape == (300, 10, 2)
    assert torch.allclose(D["y_train_clean"], lib.causal_conv(L, D["x_train"]))
    P = float((D["y_train_clean"] ** 2).mean())
    assert D["noise_var"] == pytest.approx(P / 100, rel=1e-12)
    M = D["y_train"].numel()
    e2 = float(((D["y_train"] - D["y_train_clean"]) ** 2).mean())
    assert abs(e2 / D["noise_var"] - 1) < 4 * math.sqrt(2 / M)
    again = lib.linear_teacher_dataset(L, 400, 300, 10, snr_db=20.0, seed=5)
    assert torch.equal(again["y_test"], D["y_test"])


def test_noise_bad_input():
    y = torch.randn(3, 4, 1)
    with pytest.raises(ValueError, match="snr_db"):
        lib.add_output_noise(y, float("nan"))
    with pytest.raises(TypeError, match="snr_db"):
        lib.add_output_noise(y, "20")
    with pytest.raises(ValueError, match="zero"):
        lib.add_output_noise(torch.zeros(3, 4, 1), 20.0)
    with pytest.raises(ValueError, match="signal_power"):
        lib.add_output_noise(y, 20.0, signal_power=-1.0)
    with pytest.raises(TypeError, match="seed"):
        lib.add_output_noise(y, 20.0, seed=1.5)
    L = torch.randn(5, 1, 2)
    with pytest.raises(ValueError, match="n_train"):
        lib.linear_teacher_dataset(L, 0, 3, 5)
    with pytest.raises(ValueError, match="L must have 3"):
        lib.linear_teacher_dataset(torch.randn(5, 2), 3, 3, 5)


# ----------------------------------------------------------------------------- delay

@settings(max_examples=25, deadline=None)
@given(T=st.integers(2, 12), n_x=st.integers(1, 3), n_y=st.integers(1, 3), data=st.data())
def test_delay_taps_shift_the_output(T, n_x, n_y, data):
    d = data.draw(st.integers(0, T - 1))
    g = torch.Generator().manual_seed(T * 100 + d)
    L = torch.randn(T, n_y, n_x, generator=g)
    x = torch.randn(3, T, n_x, generator=g)
    y = lib.causal_conv(L, x)
    yd = lib.causal_conv(lib.delay_taps(L, d), x)
    assert torch.all(yd[:, :d] == 0)
    assert torch.allclose(yd[:, d:], y[:, : T - d], rtol=1e-12, atol=1e-12)


def test_delay_bad_input():
    L = torch.randn(5, 1, 1)
    with pytest.raises(ValueError, match="delay"):
        lib.delay_taps(L, 5)
    with pytest.raises(ValueError, match="delay"):
        lib.delay_taps(L, -1)
    with pytest.raises(TypeError, match="delay"):
        lib.delay_taps(L, 1.0)
