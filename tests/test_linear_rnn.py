"""Chapter 1's library: the RNN is the causal convolution with its Markov parameters
(Prop. 2.1a), the Vandermonde realization reproduces any taps (Prop. 2.1b), and bad input
raises a ValueError that names the problem."""
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import lib
from tests.helpers import rel_err

DT = torch.float64


def naive_conv(L, x):
    """y_t = sum_{j<=t} L_j x_{t-j}, written as the double loop of the definition."""
    N, T, _ = x.shape
    y = torch.zeros(N, T, L.shape[1], dtype=DT)
    for t in range(T):
        for j in range(t + 1):
            y[:, t] += x[:, t - j] @ L[j].T
    return y


sizes = st.tuples(st.integers(1, 30), st.integers(1, 4), st.integers(1, 4), st.integers(1, 12),
                  st.integers(1, 4), st.integers(0, 2**31 - 1))


@settings(max_examples=60, deadline=None)
@given(sizes, st.floats(0.05, 0.95))
def test_rnn_equals_convolution_with_its_markov_parameters(size, nu_W):
    n, n_x, n_y, T, N, seed = size
    model = lib.LinearRNN(n, n_x, n_y, nu_W=nu_W, nu_F=1.0, nu_C=1.0, seed=seed)
    x = torch.randn(N, T, n_x, dtype=DT, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        y_rec = model.forward_recurrence(x)
        L = lib.impulse_response(model.W, model.F, model.C, T)
        y_conv = lib.causal_conv(L, x)
    assert L.shape == (T, n_y, n_x)
    assert y_rec.shape == (N, T, n_y)
    assert rel_err(y_conv, y_rec) <= 1e-10
    assert rel_err(naive_conv(L, x), y_rec) <= 1e-10


def test_impulse_response_is_the_closed_form():
    """L_j = n^{-(j+1)/2} C W^j F, computed here with matrix_power."""
    model = lib.LinearRNN(7, 2, 3, 0.5, 1.2, 0.8, seed=3)
    W, F, C = (p.detach() for p in (model.W, model.F, model.C))
    L = lib.impulse_response(W, F, C, 6)
    for j in range(6):
        want = 7 ** (-(j + 1) / 2) * C @ torch.linalg.matrix_power(W, j) @ F
        assert rel_err(L[j], want) <= 1e-12


def test_impulse_response_is_the_response_to_an_impulse():
    """Feeding e_b at t = 0 returns column b of every L_j."""
    model = lib.LinearRNN(9, 3, 2, 0.6, 1.0, 1.0, seed=11)
    T = 8
    x = torch.zeros(3, T, 3, dtype=DT)
    for b in range(3):
        x[b, 0, b] = 1.0
    with torch.no_grad():
        y = model.forward_recurrence(x)  # (3, T, n_y)
        L = model.markov_parameters(T)
    assert rel_err(y.permute(1, 2, 0), L) <= 1e-12


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 10), st.integers(1, 3), st.integers(1, 3), st.integers(0, 10_000),
       st.sampled_from(["chebyshev", "equispaced"]))
def test_vandermonde_realization_reproduces_random_taps(T, n_x, n_y, seed, kind):
    L = torch.randn(T, n_y, n_x, dtype=DT, generator=torch.Generator().manual_seed(seed))
    nodes = lib.chebyshev_nodes(T) if kind == "chebyshev" else lib.equispaced_nodes(T)
    W, F, C = lib.vandermonde_realization(L, nodes)
    n = T * n_x * n_y
    assert W.shape == (n, n) and F.shape == (n, n_x) and C.shape == (n_y, n)
    assert rel_err(lib.impulse_response(W, F, C, T), L) <= 1e-8
    # the realised RNN, run as a recurrence, computes the convolution with L
    x = torch.randn(2, T, n_x, dtype=DT, generator=torch.Generator().manual_seed(seed + 1))
    with torch.no_grad():
        y = lib.LinearRNN.from_weights(W, F, C).forward_recurrence(x)
    assert rel_err(y, lib.causal_conv(L, x)) <= 1e-8


def test_vandermonde_matrix_and_determinant():
    nodes = torch.tensor([0.3, -0.5, 0.9, 0.1], dtype=DT)
    V = lib.vandermonde_matrix(nodes)
    assert torch.equal(V[:, 0], torch.ones(4, dtype=DT))
    assert rel_err(V[:, 3], nodes**3) <= 1e-15
    det = math.prod(float(nodes[j] - nodes[i]) for i in range(4) for j in range(i + 1, 4))
    assert abs(float(torch.linalg.det(V)) - det) <= 1e-12 * abs(det)


def test_chebyshev_nodes():
    nodes = lib.chebyshev_nodes(5)
    assert float(torch.cos(5 * torch.arccos(nodes)).abs().max()) <= 1e-12  # roots of T_5
    assert float(nodes.abs().max()) < 1


def test_spectral_radius_tends_to_sqrt_nu_W():
    """Circular law: the eigenvalues of W/sqrt(n) fill the disc of radius sqrt(nu_W)
    (the paper's Section 2 says nu_W).  At n = 400 the edge fluctuates by O(n^{-1/2})."""
    nu_W = 0.5
    model = lib.LinearRNN(400, 1, 1, nu_W, 1.0, 1.0, seed=0)
    r = float(torch.linalg.eigvals(model.W.detach() / 20.0).abs().max())
    assert abs(r - math.sqrt(nu_W)) < 0.1 * math.sqrt(nu_W)
    assert abs(r - nu_W) > 0.1


# ----------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("kwargs, match", [
    (dict(n=0), "n must be an integer >= 1"),
    (dict(n_x=0), "n_x"),
    (dict(n_y=-1), "n_y"),
    (dict(nu_W=-0.1), "nu_W must be a finite real number > 0"),
    (dict(nu_F=-1.0), "nu_F must be a finite real number > 0"),
    (dict(nu_C=0.0), "nu_C"),
    (dict(nu_F=float("nan")), "nu_F"),
    (dict(nu_W=1.0), "nu_W must be < 1"),
    (dict(nu_W=1.5), "stability"),
])
def test_linear_rnn_rejects_bad_hyperparameters(kwargs, match):
    args = dict(n=4, n_x=1, n_y=1, nu_W=0.5, nu_F=1.0, nu_C=1.0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        lib.LinearRNN(**args)


def test_non_integer_sizes_are_type_errors():
    with pytest.raises(TypeError, match="n must be an integer"):
        lib.LinearRNN(2.5, 1, 1, 0.5, 1.0, 1.0)


def test_unstable_nu_W_only_on_request():
    model = lib.LinearRNN(4, 1, 1, 1.5, 1.0, 1.0, allow_unstable=True)
    assert model.nu_W == 1.5


def test_forward_rejects_wrong_input_shapes():
    model = lib.LinearRNN(4, 2, 1, 0.5, 1.0, 1.0)
    with pytest.raises(ValueError, match="n_x = 2"):
        model(torch.zeros(3, 5, 3, dtype=DT))
    with pytest.raises(ValueError, match="x must have 3 dimensions"):
        model(torch.zeros(5, 2, dtype=DT))
    with pytest.raises(ValueError, match="NaN"):
        model(torch.full((1, 3, 2), float("nan"), dtype=DT))


def test_impulse_response_rejects_bad_arguments():
    W, F, C = torch.zeros(3, 3, dtype=DT), torch.zeros(3, 2, dtype=DT), torch.zeros(1, 3, dtype=DT)
    with pytest.raises(ValueError, match="T must be an integer >= 1"):
        lib.impulse_response(W, F, C, 0)
    with pytest.raises(ValueError, match="W must be square"):
        lib.impulse_response(torch.zeros(3, 4, dtype=DT), F, C, 2)
    with pytest.raises(ValueError, match="F must have shape"):
        lib.impulse_response(W, torch.zeros(4, 2, dtype=DT), C, 2)
    with pytest.raises(ValueError, match="C must have shape"):
        lib.impulse_response(W, F, torch.zeros(1, 4, dtype=DT), 2)


def test_causal_conv_rejects_mismatched_shapes():
    L = torch.zeros(4, 1, 2, dtype=DT)
    with pytest.raises(ValueError):
        lib.causal_conv(L, torch.zeros(3, 4, 3, dtype=DT))   # n_x mismatch
    with pytest.raises(ValueError):
        lib.causal_conv(torch.zeros(4, 2, dtype=DT), torch.zeros(3, 4, 2, dtype=DT))  # L not 3-D


def test_vandermonde_realization_rejects_repeated_or_missing_nodes():
    L = torch.randn(3, 1, 1, dtype=DT)
    with pytest.raises(ValueError, match="distinct"):
        lib.vandermonde_realization(L, torch.tensor([0.1, 0.5, 0.1], dtype=DT))
    with pytest.raises(ValueError, match="T = 3 values"):
        lib.vandermonde_realization(L, torch.tensor([0.1, 0.5], dtype=DT))
    with pytest.raises(ValueError, match="L must have 3 dimensions"):
        lib.vandermonde_realization(torch.randn(3, 2, dtype=DT))


def test_node_constructors_reject_T_below_one():
    for f in (lib.chebyshev_nodes, lib.equispaced_nodes):
        with pytest.raises(ValueError, match="T must be an integer >= 1"):
            f(0)


def test_the_default_engine_is_the_rnn_through_its_markov_parameters():
    rnn = lib.LinearRNN(60, 3, 2, 0.4, 1.0, 1.0, seed=2)
    x = torch.randn(5, 9, 3, generator=torch.Generator().manual_seed(0), dtype=DT)
    assert rnn.engine == "markov" and rnn.with_engine("markov") is rnn
    with torch.no_grad():
        assert rel_err(rnn(x), rnn.forward_recurrence(x)) < 1e-10
        assert rel_err(rnn(x), lib.causal_conv(rnn.markov_parameters(9), x)) < 1e-10
    with pytest.raises(ValueError, match="square"):
        lib.markov_parameters(torch.randn(3, 4), torch.randn(3, 1), torch.randn(1, 3), 4)


def test_with_engine_shares_the_parameters():
    ref = lib.LinearRNN(20, 2, 1, 0.4, 1.0, 1.0, seed=3, engine="recurrence")
    fast = ref.with_engine("markov")
    assert fast is not ref and fast.engine == "markov" and ref.engine == "recurrence"
    assert [id(p) for p in fast.parameters()] == [id(p) for p in ref.parameters()]
    assert ref.with_engine("recurrence") is ref
    x = torch.randn(4, 7, 2, generator=torch.Generator().manual_seed(1), dtype=DT)
    with torch.no_grad():
        assert rel_err(fast(x), ref(x)) < 1e-10
    lib.train_gd(fast, x, torch.zeros(4, 7, 1, dtype=DT), lr=1e-3, steps=2)   # trains ref as well
    with torch.no_grad():
        assert rel_err(fast(x), ref(x)) < 1e-10
    assert (fast.nu_W, fast.nu_F, fast.nu_C) == (ref.nu_W, ref.nu_F, ref.nu_C)
    with pytest.raises(ValueError, match="engine"):
        ref.with_engine("scan")


def test_from_weights_copies_the_weights():
    W, F, C = (torch.randn(*s, generator=torch.Generator().manual_seed(k), dtype=DT)
               for k, s in enumerate(((5, 5), (5, 2), (3, 5))))
    rnn = lib.LinearRNN.from_weights(W, F, C)
    assert (rnn.n, rnn.n_x, rnn.n_y, rnn.engine) == (5, 2, 3, "markov")
    assert torch.equal(rnn.W, W) and torch.equal(rnn.F, F) and torch.equal(rnn.C, C)
    assert rnn.W.data_ptr() != W.data_ptr()                      # copies, not views
    assert all(math.isnan(v) for v in (rnn.nu_W, rnn.nu_F, rnn.nu_C))
    assert [n for n, _ in rnn.named_parameters()] == ["W", "F", "C"]
    W32 = W.float()
    assert lib.LinearRNN.from_weights(W32, F.float(), C.float()).W.dtype == torch.float32


def test_seeds_are_checked_alike():
    """One seed check for every seeded constructor and function: ints (numpy ints too)."""
    calls = [lambda s: lib.LinearRNN(3, 1, 1, 0.5, 1.0, 1.0, seed=s),
             lambda s: lib.ScaledConv(torch.ones(3), 1, 1, seed=s),
             lambda s: lib.GatedLinearRNN(2, 3, 2, seed=s),
             lambda s: lib.FeedforwardNet(2, 3, 2, seed=s),
             lambda s: lib.LRULayer(3, seed=s),
             lambda s: lib.RecurrentNet("gru", 2, 3, 2, seed=s),
             lambda s: lib.lsa_teachers(2, [s]),
             lambda s: lib.add_output_noise(torch.ones(3), 10.0, seed=s)]
    for call in calls:
        call(np.int64(4))
        for bad in (1.5, True, "1"):
            with pytest.raises(TypeError, match="seed"):
                call(bad)
        with pytest.raises(ValueError, match="seed"):
            call(2**64)
