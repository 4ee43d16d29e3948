"""Inputs that used to give a silent wrong answer (NaN out, a wrong shape, a negative bound,
an ignored setting): each now gives a clear error naming the argument, or the right answer."""
import math

import numpy as np
import pytest
import torch

import lib
from lib import data
from lib.experiments import s1_sequences

torch.set_default_dtype(torch.float64)


def _cond_matrix(cond: float, d: int = 3, dtype=torch.float64) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    U, _ = torch.linalg.qr(torch.randn(d, d, generator=g))
    V, _ = torch.linalg.qr(torch.randn(d, d, generator=g))
    s = torch.logspace(0, -math.log10(cond), d)
    return (U @ torch.diag(s) @ V.T).to(dtype)


ERRORS = [
    # (id, call, exception, words the message must contain)
    ("theorem31 negative N", lambda: lib.theorem31_bound(-5, 2, 3), ValueError, ["N", ">= 1"]),
    ("theorem31 rank above timespan", lambda: lib.theorem31_bound(100, 10, 1), ValueError, ["r", "t"]),
    ("theorem31 negative t", lambda: lib.theorem31_bound(10, 0, -1), ValueError, ["t", ">= 0"]),
    ("tanh bound D nan", lambda: lib.tanh_memory_state_bound(torch.eye(2) * 0.5, float("nan"), 3, 1.0),
     ValueError, ["D", "finite"]),
    ("tanh bound D negative", lambda: lib.tanh_memory_state_bound(torch.eye(2), -1.0, 3, 1.0), ValueError, ["D"]),
    ("compact float32 cond 1e4",
     lambda: lib.gated_rnn_from_attention(_cond_matrix(1e4, dtype=torch.float32), torch.eye(3, dtype=torch.float32),
                                          torch.eye(3, dtype=torch.float32), compact=True),
     ValueError, ["condition number", "float32"]),
    ("compact float64 cond 1e11",
     lambda: lib.gated_rnn_from_attention(_cond_matrix(1e11), torch.eye(3), torch.eye(3), compact=True),
     ValueError, ["condition number", "float64"]),
    ("diagonal_scan 2-D u", lambda: lib.diagonal_scan(torch.rand(4), torch.randn(4, 4)), ValueError, ["u", "(B, T, n)"]),
    ("diagonal_scan lam size", lambda: lib.diagonal_scan(torch.rand(3), torch.randn(2, 4, 4)), ValueError, ["lam"]),
    ("gd_predict wrong d_x",
     lambda: lib.gd_predict(lib.icl_batch(4, 5, 3, 2, generator=torch.Generator().manual_seed(0))[0], 2, 0.1),
     ValueError, ["d_x"]),
    ("gd_predict eta nan",
     lambda: lib.gd_predict(lib.icl_batch(4, 5, 3, 2, generator=torch.Generator().manual_seed(0))[0], 3, float("nan")),
     ValueError, ["eta"]),
    ("gd_predict tokens nan", lambda: lib.gd_predict(torch.full((2, 4, 5), float("nan")), 3, 0.1),
     ValueError, ["tokens", "NaN"]),
    ("RecurrentNet nan input", lambda: lib.RecurrentNet("lstm", 3, 4, 2)(torch.full((1, 2, 3), float("nan"))),
     ValueError, ["x", "NaN"]),
    ("RecurrentNet wrong d_in", lambda: lib.RecurrentNet("gru", 3, 4, 2)(torch.randn(1, 2, 5, dtype=torch.float32)),
     ValueError, ["x", "d_in = 3"]),
    ("LinearRNN complex input",
     lambda: lib.LinearRNN(4, 2, 1, nu_W=0.5, nu_F=1.0, nu_C=1.0, seed=0)(torch.randn(1, 3, 2, dtype=torch.complex128)),
     TypeError, ["x", "complex", "imaginary"]),
    ("s1_sequences nan", lambda: s1_sequences(np.full((100, 3), np.nan), np.zeros((100, 2)), T=5),
     ValueError, ["spikes", "NaN"]),
]


@pytest.mark.parametrize("call, exc, words", [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_bad_input_is_a_clear_error(call, exc, words):
    with pytest.raises(exc) as err:
        call()
    for w in words:
        assert w in str(err.value), (w, str(err.value))


def test_rho_with_a_tiny_nu_w_is_finite_and_right():
    """rho_j = nu_C (j nu_F nu_W^{j-1} + nu_W^j) + nu_F nu_W^j; at j = 0 the first term is 0."""
    nu_W, nu_F, nu_C = 1e-310, 2.0, 3.0
    r = lib.rho(4, nu_W, nu_F, nu_C)
    assert torch.isfinite(r).all()
    assert float(r[0]) == nu_C + nu_F and float(r[1]) == nu_C * (nu_F + nu_W) + nu_F * nu_W


def test_tanh_bound_sums_in_closed_form():
    """sum_{j<steps} ||B||^j without a loop: a billion steps answer at once, exactly."""
    b = lib.tanh_memory_state_bound(torch.eye(2) * 0.5, 3.0, 10**9, 1.0)
    assert b == pytest.approx(3.0 * 2.0 / 3.0, rel=1e-15)
    assert lib.tanh_memory_state_bound(torch.eye(2), 3.0, 7, 1.0) == pytest.approx(7.0)
    assert lib.tanh_memory_state_bound(torch.eye(2) * 2, 3.0, 10**9, 1.0) == math.inf
    assert lib.tanh_memory_state_bound(torch.eye(2) * 0.9, 3.0, 5, 2.0) == pytest.approx(
        3.0 * sum(0.9**j for j in range(5)) / 12.0, rel=1e-14)


def test_theorem31_bound_values():
    assert lib.theorem31_bound(100, 3, 5) == (11 * 3 - 9) // 2 == 12
    assert lib.theorem31_bound(10, 3, 5) == 10
    assert lib.theorem31_bound(10, 0, 0) == 0


@pytest.mark.parametrize("setup", ["missing", "empty"])
def test_rnnbook_data_that_holds_nothing_is_an_error(setup, tmp_path, monkeypatch):
    folder = tmp_path / "data"
    if setup == "empty":
        folder.mkdir()
    monkeypatch.setenv("RNNBOOK_DATA", str(folder))
    with pytest.raises(data.DataError, match="RNNBOOK_DATA"):
        data.load_protein("train", download=False)


def test_unreadable_data_file_is_a_data_error(tmp_path, monkeypatch):
    f = tmp_path / "protein-secondary-structure.train"
    f.write_text("x")
    monkeypatch.setattr(data, "sha256", lambda p: (_ for _ in ()).throw(PermissionError(13, "Permission denied")))
    with pytest.raises(data.DataError, match="cannot be read"):
        data.load_protein("train", path=tmp_path)


EMPTY_AND_MIXED = [
    ("LinearRNN T = 0", lambda: lib.LinearRNN(4, 2, 1, nu_W=0.5, nu_F=1.0, nu_C=1.0, seed=0)(torch.zeros(1, 0, 2)),
     ValueError, ["x", "empty"]),
    ("GatedLinearRNN T = 0", lambda: lib.GatedLinearRNN(2, 3, 2)(torch.zeros(1, 0, 2)), ValueError, ["x", "empty"]),
    ("conv_ntk T = 0", lambda: lib.conv_ntk(torch.zeros(2, 0, 1), torch.zeros(2, 0, 1), torch.ones(1)),
     ValueError, ["x1", "empty"]),
    ("toeplitz T = 0", lambda: lib.toeplitz(torch.zeros(2, 0, 1)), ValueError, ["x", "empty"]),
    ("train_gd N = 0",
     lambda: lib.train_gd(lib.LinearRNN(4, 1, 1, nu_W=0.5, nu_F=1.0, nu_C=1.0, seed=0), torch.zeros(0, 3, 1),
                          torch.zeros(0, 3, 1), lr=0.1, steps=2), ValueError, ["x", "empty"]),
    ("impulse_response mixed dtypes",
     lambda: lib.impulse_response(torch.eye(2, dtype=torch.float32), torch.ones(2, 1), torch.ones(1, 2), 3),
     TypeError, ["W: float32", "F: float64"]),
    ("LinearRNN larger than memory", lambda: lib.LinearRNN(10**6, 1, 1, nu_W=0.5, nu_F=1.0, nu_C=1.0, seed=0),
     MemoryError, ["n = 1000000", "GiB"]),
]


@pytest.mark.parametrize("call, exc, words", [c[1:] for c in EMPTY_AND_MIXED], ids=[c[0] for c in EMPTY_AND_MIXED])
def test_empty_mixed_and_oversized_inputs(call, exc, words):
    with pytest.raises(exc) as err:
        call()
    for w in words:
        assert w in str(err.value), (w, str(err.value))
