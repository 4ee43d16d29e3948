"""Inputs that would otherwise give a silent wrong answer (NaN out, a wrong shape, a negative
bound, an ignored setting): each gives a clear error naming the argument, or the right answer."""
import math

import numpy as np
import pytest
import torch

import lib
from lib import data
from lib.data import s1_sequences
from lib.scaled_conv import conv_features, rho_ridge
from lib.linear_teacher import add_output_noise, delay_taps, linear_teacher_dataset
from lib.training import r2_score, train_minibatch


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
    ("RecurrentNet nan input", lambda: lib.RecurrentNet("lstm", 3, 4, 2)(torch.full((1, 2, 3), float("nan"), dtype=torch.float32)),
     ValueError, ["x", "NaN"]),
    ("RecurrentNet wrong d_in", lambda: lib.RecurrentNet("gru", 3, 4, 2)(torch.randn(1, 2, 5, dtype=torch.float32)),
     ValueError, ["x", "d_in = 3"]),
    ("LinearRNN complex input",
     lambda: lib.LinearRNN(4, 2, 1, nu_W=0.5, nu_F=1.0, nu_C=1.0, seed=0)(torch.randn(1, 3, 2, dtype=torch.complex128)),
     TypeError, ["x", "complex", "imaginary"]),
    ("s1_sequences nan", lambda: s1_sequences(np.full((100, 3), np.nan), np.zeros((100, 2)), T=5),
     ValueError, ["spikes", "NaN"]),
]


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


_E, _x3 = torch.eye(3), torch.randn(2, 4, 3)


def _rnn():
    return lib.LinearRNN(4, 2, 1, nu_W=0.5, nu_F=1.0, nu_C=1.0, seed=0)


# every public module: one or more arguments out of range, each a named error before any work
ACROSS_MODULES = [
    # (id, call, exception, words the message must contain)
    ("conv_ntk rho length", lambda: lib.conv_ntk(torch.randn(2, 4, 1), torch.randn(2, 4, 1), torch.ones(3)), ValueError, ["rho"]),
    ("conv_ntk n_y 0", lambda: lib.conv_ntk(torch.randn(2, 4, 1), torch.randn(2, 4, 1), torch.ones(4), n_y=0), ValueError, ["n_y"]),
    ("conv_ntk_factor negative rho", lambda: lib.conv_ntk_factor(-torch.ones(3), 1, 1), ValueError, ["rho"]),
    ("factored_ntk M shape", lambda: lib.factored_ntk(torch.randn(2, 4, 1), torch.randn(2, 4, 1), torch.eye(5)), ValueError, ["M"]),
    ("empirical_ntk x1 dims", lambda: lib.empirical_ntk(torch.randn(4, 2), torch.randn(4, 2), _rnn()), ValueError, ["x1"]),
    ("markov_ntk_factor model type", lambda: lib.markov_ntk_factor(torch.nn.Linear(2, 2), 3), TypeError, ["model"]),
    ("markov_jacobian T", lambda: lib.markov_jacobian(_rnn(), 0), ValueError, ["T"]),
    ("ScaledConv rho dims", lambda: lib.ScaledConv(torch.ones(2, 2), 1, 1), ValueError, ["rho"]),
    ("ScaledConv n_x 0", lambda: lib.ScaledConv(torch.ones(3), 0, 1), ValueError, ["n_x"]),
    ("rho nu_W 1", lambda: lib.rho(3, 1.0, 1, 1), ValueError, ["nu_W"]),
    ("rho_max nu_F 0", lambda: lib.rho_max(3, 0.0, 1.0), ValueError, ["nu_F"]),
    ("loss_fn kind", lambda: lib.loss_fn(torch.zeros(2, 3, 1), torch.zeros(2, 3, 1), "l1"), ValueError, ["kind"]),
    ("loss_fn shapes", lambda: lib.loss_fn(torch.zeros(2, 3, 1), torch.zeros(2, 4, 1)), ValueError, ["shape"]),
    ("train_gd lr 0", lambda: lib.train_gd(_rnn(), torch.zeros(2, 3, 2), torch.zeros(2, 3, 1), lr=0.0, steps=1), ValueError, ["lr"]),
    ("train_online steps 0", lambda: lib.train_online(lib.StackedGatedRNN(2, [3], 2, [0]), lib.ICLTask(K=1, T=3, d_x=1, d_y=1, batch=2), steps=0, data_seeds=[0]), ValueError, ["steps"]),
    ("train_online seeds count", lambda: lib.train_online(lib.StackedGatedRNN(2, [3], 1, [0]), lib.ICLTask(K=1, T=3, d_x=1, d_y=1, batch=2), steps=2, data_seeds=[0, 1]), ValueError, ["data_seeds"]),
    ("cosine_lr step", lambda: lib.cosine_lr(5, 3, 1e-3, 1e-6), ValueError, ["step"]),
    ("ModuleStack empty", lambda: lib.ModuleStack([]), TypeError, ["members"]),
    ("ICLTask K 0", lambda: lib.ICLTask(K=0, T=3, d_x=1, d_y=1, batch=2), ValueError, ["K"]),
    ("AttentionTeacherTask shapes", lambda: lib.AttentionTeacherTask(torch.zeros(1, 2, 2), torch.zeros(1, 3, 3), torch.zeros(1, 2, 2), T=3, batch=2, x_std=1.0), ValueError, ["W_K"]),
    ("lsa_teachers d 0", lambda: lib.lsa_teachers(0, [1]), ValueError, ["d"]),
    ("lsa_teachers scale", lambda: lib.lsa_teachers(2, [1], scale=-1.0), ValueError, ["scale"]),
    ("load_run unknown", lambda: __import__("lib.book.artefacts").book.artefacts.load_run("nope"), FileNotFoundError, ["nope"]),
    ("StackedGatedRNN widths", lambda: lib.StackedGatedRNN(2, [0], 2, [0]), ValueError, ["widths"]),
    ("LinearRNN nu_W", lambda: lib.LinearRNN(4, 1, 1, nu_W=2.0, nu_F=1., nu_C=1.), ValueError, ["nu_W"]),
    ("LinearRNN x channels", lambda: _rnn()(torch.randn(1, 3, 5)), ValueError, ["x"]),
    ("causal_conv L dims", lambda: lib.causal_conv(torch.randn(3, 1), torch.randn(2, 3, 1)), ValueError, ["L"]),
    ("chebyshev T 0", lambda: lib.chebyshev_nodes(0), ValueError, ["T"]),
    ("vandermonde_matrix nodes dims", lambda: lib.vandermonde_matrix(torch.ones(2, 2)), ValueError, ["nodes"]),
    ("markov_parameters F rows", lambda: lib.markov_parameters(torch.eye(3), torch.ones(2, 1), torch.ones(1, 3), 3), ValueError, ["F"]),
    ("add_output_noise snr nan", lambda: add_output_noise(torch.randn(2, 3, 1), float('nan')), ValueError, ["snr_db"]),
    ("conv_features T_L", lambda: conv_features(torch.randn(2, 3, 1), T_L=0), ValueError, ["T_L"]),
    ("delay_taps delay", lambda: delay_taps(torch.randn(3, 1, 1), 5), ValueError, ["delay"]),
    ("r2_score shapes", lambda: r2_score(torch.zeros(2, 3), torch.zeros(3, 2)), ValueError, ["shape"]),
    ("rho_ridge lam", lambda: rho_ridge(torch.randn(4, 3, 1), torch.randn(4, 3, 1), torch.ones(3), -1.0), ValueError, ["lam"]),
    ("linear_teacher_dataset n_train", lambda: linear_teacher_dataset(torch.randn(3, 1, 1), 0, 2, 3), ValueError, ["n_train"]),
    ("train_minibatch epochs", lambda: train_minibatch(_rnn(), torch.zeros(4, 3, 2), torch.zeros(4, 3, 1), lr=0.1, epochs=-1), ValueError, ["epochs"]),
    ("s1_sequences fractions", lambda: s1_sequences(np.zeros((100, 3)), np.zeros((100, 2)), T=5, fractions=(0.5, 0.5, 0.5)), ValueError, ["fractions"]),
    ("autoencoder_matrices a", lambda: lib.autoencoder_matrices(torch.eye(4), 0), ValueError, ["a"]),
    ("shift_operators s", lambda: lib.shift_operators(2, 0), ValueError, ["s"]),
    ("thin_svd rank", lambda: lib.thin_svd(torch.eye(3), rank=4), ValueError, ["rank"]),
    ("thin_svd rtol", lambda: lib.thin_svd(torch.eye(3), rtol=-1.0), ValueError, ["rtol"]),
    ("encode B rows", lambda: lib.encode(torch.eye(3), torch.ones(2, 2), [torch.ones(2, 2)]), ValueError, ["B"]),
    ("fit_sequence_autoencoder rtol", lambda: lib.fit_sequence_autoencoder([torch.ones(2, 2)], rtol=-1.0), ValueError, ["rtol"]),
    ("state_matrix max_length", lambda: lib.state_matrix([torch.ones(3, 2)], max_length=2), ValueError, ["max_length"]),
    ("FeedforwardNet hidden", lambda: lib.FeedforwardNet(2, 3, 0), ValueError, ["hidden"]),
    ("lag_matrix a", lambda: lib.lag_matrix(torch.ones(6), 4), ValueError, ["a"]),
    ("linear_ff_outputs w", lambda: lib.linear_ff_outputs(torch.ones(2, 2), [torch.ones(3, 2)]), ValueError, ["w"]),
    ("rank_and_timespan rtol", lambda: lib.rank_and_timespan(torch.ones(4), 2, rtol=-1.0), ValueError, ["rtol"]),
    ("tanh_beta_star eps", lambda: lib.tanh_beta_star(1.0, 0.0), ValueError, ["eps"]),
    ("tanh_memory_beta gain", lambda: lib.tanh_memory_beta(torch.eye(2), 1.0, 3, 0.0, 0.1), ValueError, ["gain"]),
    ("LinearSelfAttention x dims", lambda: lib.LinearSelfAttention(_E, _E, _E)(torch.zeros(3, 3)), ValueError, ["dimensions"]),
    ("lsa_instantaneous_tensor shapes", lambda: lib.lsa_instantaneous_tensor(_E,  torch.eye(2), _E), ValueError, ["W_"]),
    ("GatedLinearRNN lam_init", lambda: lib.GatedLinearRNN(2, 3, 2, lam_init=(0.5, 1.5)), ValueError, ["lam_init"]),
    ("construction_size d", lambda: lib.construction_size(0), ValueError, ["d"]),
    ("instantaneous_tensor n_tokens", lambda: lib.instantaneous_tensor(lib.GatedLinearRNN(2, 3, 2), n_tokens=0), ValueError, ["n_tokens"]),
    ("polynomial_coefficients dims", lambda: lib.polynomial_coefficients(torch.ones(2)), ValueError, ["C"]),
    ("train_adamw steps", lambda: lib.train_adamw(lib.GatedLinearRNN(2, 3, 2), lambda g: (None, None), steps=0), ValueError, ["steps"]),
    ("eta_star T", lambda: lib.eta_star(0, 3), ValueError, ["T"]),
    ("gd_loss eta nan", lambda: lib.gd_loss(float('nan'), 3, 3), (TypeError, ValueError), ["eta"]),
    ("icl_batch generator", lambda: lib.icl_batch(2, 3, 3, 3, generator=None), TypeError, ["generator"]),
    ("optimal_gd_loss sigma_w2", lambda: lib.optimal_gd_loss(3, 3, 1.0, 0.0), ValueError, ["sigma_w2"]),
    ("LRULayer r_max", lambda: lib.LRULayer(3, r_max=1.0), ValueError, ["r_max"]),
    ("RecurrentNet kind", lambda: lib.RecurrentNet("rnn", 2, 3, 2), ValueError, ["kind"]),
    ("lstm_from_attention scale", lambda: lib.lstm_from_attention(_E, _E, _E, scale=0.0), ValueError, ["scale"]),
    ("glu_gating shapes", lambda: lib.glu_gating(torch.ones(2, 3), torch.ones(3, 3), 0.1), ValueError, ["W_m"]),
    ("lru_from_gated type", lambda: lib.lru_from_gated(torch.nn.Linear(2, 2), 0.1), TypeError, ["model"]),
    ("protein accuracy shapes", lambda: __import__("lib.protein").protein.accuracy(torch.zeros(3), torch.zeros(4)),
     ValueError, ["pred", "target"]),
    ("protein prefix_onehot symbols",
     lambda: __import__("lib.protein").protein.prefix_onehot([torch.tensor([0, 5])], 3, 2), ValueError, ["indices"]),
    ("protein amino_code dim", lambda: __import__("lib.protein").protein.amino_code(dim=0), ValueError, ["dim"]),
    ("krylov_rows T", lambda: __import__("lib.krylov").krylov.krylov_rows(torch.eye(3), torch.ones(1, 3), 0, 1.0),
     ValueError, ["T"]),
    ("data unknown file", lambda: data.locate("nope.txt"), ValueError, ["nope.txt"]),
    ("load_protein split", lambda: data.load_protein("validation"), ValueError, ["split"]),
]


ALL_CASES = ERRORS + EMPTY_AND_MIXED + ACROSS_MODULES


@pytest.mark.parametrize("call, exc, words", [c[1:] for c in ALL_CASES], ids=[c[0] for c in ALL_CASES])
def test_bad_input_is_a_clear_error(call, exc, words):
    """Each case: the exception type, and every word the message must contain (the argument)."""
    with pytest.raises(exc) as err:
        call()
    for w in words:
        assert w in str(err.value), (w, str(err.value))
