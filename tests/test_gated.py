"""lib.GatedLinearRNN: scan == loop, validation, the LSTM / GLU constructions of App. A."""
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lib
from tests.helpers import rel_err


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 30), T=st.integers(1, 70), B=st.integers(1, 4), seed=st.integers(0, 10_000),
       exact=st.booleans())
def test_scan_equals_loop(n, T, B, seed, exact):
    g = torch.Generator().manual_seed(seed)
    lam = torch.rand(n, generator=g)
    if exact:  # lam in {0, 1} exactly, as in the construction
        lam = (lam > 0.5).double()
    u = torch.randn(B, T, n, generator=g)
    assert rel_err(lib.diagonal_scan(lam, u), lib.diagonal_scan_reference(lam, u)) <= 1e-10


@settings(max_examples=10, deadline=None)
@given(n=st.integers(1, 10), T=st.integers(1, 40), seed=st.integers(0, 10_000))
def test_complex_scan_equals_loop(n, T, seed):
    g = torch.Generator().manual_seed(seed)
    lam = torch.polar(torch.rand(n, generator=g), 6 * torch.rand(n, generator=g))
    u = torch.complex(torch.randn(2, T, n, generator=g), torch.randn(2, T, n, generator=g))
    assert rel_err(lib.diagonal_scan(lam, u), lib.diagonal_scan_reference(lam, u)) <= 1e-10


@settings(max_examples=25, deadline=None)
@given(d=st.integers(1, 6), n=st.integers(1, 40), n_g=st.integers(1, 40), T=st.integers(1, 50),
       seed=st.integers(0, 10_000), append_one=st.booleans())
def test_parallel_forward_equals_step(d, n, n_g, T, seed, append_one):
    m = lib.GatedLinearRNN(d, n, 3, n_g, append_one=append_one, seed=seed)
    x = torch.randn(2, T, d, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        assert rel_err(m(x), m(x, method="step")) <= 1e-10
        assert rel_err(m.hidden_states(x), m.hidden_states(x, method="step")) <= 1e-10


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 30), T=st.integers(1, 40), seed=st.integers(0, 10_000))
def test_differentiable_parallel_path_equals_step(n, T, seed):
    """With gradients on, the forward takes the log2(T) scan; values and gradients equal the loop's."""
    m = lib.GatedLinearRNN(3, n, 2, seed=seed)
    x = torch.randn(2, T, 3, generator=torch.Generator().manual_seed(seed))
    a, b = m(x), m(x, method="step")
    assert a.requires_grad and rel_err(a, b.detach()) <= 1e-10
    params = list(m.parameters())
    ga = torch.autograd.grad(a.square().sum(), params, allow_unused=True)  # T = 1: lam unused
    gb = torch.autograd.grad(b.square().sum(), params, allow_unused=True)
    for u, v, p in zip(ga, gb, params):
        u = torch.zeros_like(p) if u is None else u
        v = torch.zeros_like(p) if v is None else v
        assert float((u - v).norm()) <= 1e-10 * max(1.0, float(v.norm()))


def test_input_gradients_with_frozen_parameters_and_reused_buffers():
    """A graph through x alone must not take the buffered evaluation path (out= products
    cannot record it); without gradients, buffers are reused and re-made when shapes change."""
    m = lib.GatedLinearRNN(3, 6, 2, seed=2)
    for p in m.parameters():
        p.requires_grad_(False)
    x = torch.randn(2, 7, 3, generator=torch.Generator().manual_seed(3), requires_grad=True)
    (gx,) = torch.autograd.grad(m(x).square().sum(), x)
    (gx_ref,) = torch.autograd.grad(m(x, method="step").square().sum(), x)
    assert rel_err(gx, gx_ref) <= 1e-10
    with torch.no_grad():
        for B, T in ((2, 7), (2, 7), (5, 3)):
            xb = torch.randn(B, T, 3, generator=torch.Generator().manual_seed(B * T))
            assert rel_err(m(xb), m(xb, method="step")) <= 1e-10


def test_lam_parametrisation_and_from_weights():
    m = lib.GatedLinearRNN(2, 5, 2, seed=1)
    assert ((m.lam >= 0) & (m.lam <= 1)).all()
    lam = torch.tensor([0.0, 1.0, 0.5])
    m2 = lib.GatedLinearRNN.from_weights(torch.ones(3, 3), torch.ones(3, 3), lam, torch.ones(2, 3),
                                         torch.ones(2, 3), torch.ones(1, 2))
    assert torch.allclose(m2.lam, lam, atol=0, rtol=1e-15)


def test_lstm_construction_error_is_quadratic():
    g = torch.Generator().manual_seed(0)
    W = [torch.randn(3, 3, generator=g) / math.sqrt(3) for _ in range(3)]
    x = torch.randn(2, 10, 3, generator=g)
    y = lib.LinearSelfAttention(*W)(x).detach()
    errs = []
    scales = [0.04, 0.02, 0.01]
    for s in scales:
        lstm, R = lib.lstm_from_attention(*W, scale=s)
        with torch.no_grad():
            errs.append(rel_err(lstm(x)[0] @ R.T, y))
    slopes = [math.log(errs[i] / errs[i + 1]) / math.log(2) for i in range(2)]
    assert all(1.8 < s < 2.2 for s in slopes), slopes


def test_glu_gating_error_is_quadratic():
    g = torch.Generator().manual_seed(0)
    Wm, Wx, x = torch.randn(4, 3, generator=g), torch.randn(4, 3, generator=g), torch.randn(50, 3, generator=g)
    exact = (x @ Wm.T) * (x @ Wx.T)
    e1 = rel_err(lib.glu_gating(Wm, Wx, 1e-2)(x), exact)
    e2 = rel_err(lib.glu_gating(Wm, Wx, 5e-3)(x), exact)
    assert 3.5 < e1 / e2 < 4.5


@pytest.mark.parametrize("kind", lib.RECURRENT_KINDS)
def test_recurrent_net_shapes(kind):
    net = lib.RecurrentNet(kind, 3, 8, 2, layers=2, seed=0)
    assert net(torch.randn(4, 5, 3, dtype=torch.float32)).shape == (4, 5, 2)


def _recurrent_net_seeded_globally(kind, d_in, width, d_out, layers, seed, dtype):
    """The construction as it was written before it forked the generator: the global generator
    seeded with ``seed``, then embed, core and readout drawn from it in that order."""
    torch.manual_seed(seed)
    embed = torch.nn.Linear(d_in, width, dtype=dtype)
    if kind in ("lstm", "gru"):
        core = getattr(torch.nn, kind.upper())(width, width, num_layers=layers, batch_first=True, dtype=dtype)
    else:
        core = torch.nn.Sequential(*[lib.LRULayer(width, input_gate=kind in ("lru_in_out", "lru_in_skip"),
                                                  skip_gate=kind == "lru_in_skip", seed=seed * 100 + k, dtype=dtype)
                                     for k in range(layers)])
    readout = torch.nn.Linear(width, d_out, dtype=dtype)
    return [*embed.parameters(), *core.parameters(), *readout.parameters()]


@pytest.mark.parametrize("kind", lib.RECURRENT_KINDS)
def test_recurrent_net_leaves_the_global_generator_alone(kind):
    """Its weights are a function of its seed alone, the ones a globally seeded construction
    draws, and the caller's global random state is the same after the construction."""
    torch.manual_seed(123)
    before = torch.get_rng_state()
    net = lib.RecurrentNet(kind, 3, 6, 2, layers=2, seed=7, dtype=torch.float64)
    assert torch.equal(torch.get_rng_state(), before)
    ref = _recurrent_net_seeded_globally(kind, 3, 6, 2, 2, 7, torch.float64)
    got = list(net.parameters())
    assert len(got) == len(ref) and all(torch.equal(a, b) for a, b in zip(got, ref))
    again = lib.RecurrentNet(kind, 3, 6, 2, layers=2, seed=7, dtype=torch.float64)
    assert all(torch.equal(a, b) for a, b in zip(again.parameters(), got))


def test_bad_input():
    with pytest.raises(ValueError, match="n_hidden"):
        lib.GatedLinearRNN(2, 0, 2)
    with pytest.raises(TypeError, match="d_in"):
        lib.GatedLinearRNN(2.5, 3, 2)
    with pytest.raises(ValueError, match="lam_init"):
        lib.GatedLinearRNN(2, 3, 2, lam_init=(0.5, 1.5))
    m = lib.GatedLinearRNN(2, 3, 2)
    with pytest.raises(ValueError, match="x must have shape"):
        m(torch.zeros(1, 4, 3))
    with pytest.raises(ValueError, match="method"):
        m(torch.zeros(1, 4, 2), method="fft")
    with pytest.raises(ValueError, match="lam"):
        lib.GatedLinearRNN.from_weights(torch.ones(3, 3), torch.ones(3, 3), torch.tensor([0.0, 1.0, 1.5]),
                                        torch.ones(2, 3), torch.ones(2, 3), torch.ones(1, 2))
    with pytest.raises(ValueError, match="W_in_x"):
        lib.GatedLinearRNN.from_weights(torch.ones(3, 3), torch.ones(2, 3), torch.ones(3),
                                        torch.ones(2, 3), torch.ones(2, 3), torch.ones(1, 2))
    with pytest.raises(ValueError, match="scale"):
        lib.lstm_from_attention(torch.eye(2), torch.eye(2), torch.eye(2), scale=0.0)
    with pytest.raises(ValueError, match="eps"):
        lib.glu_gating(torch.eye(2), torch.eye(2), eps=-1.0)
    with pytest.raises(ValueError, match="kind"):
        lib.RecurrentNet("transformer", 2, 4, 2)
    with pytest.raises(ValueError, match="steps"):
        lib.train_adamw(m, lambda g: (torch.zeros(1, 2, 2), torch.zeros(1, 2, 2)), steps=0)


@settings(max_examples=15, deadline=None)
@given(d=st.integers(1, 3), n=st.integers(1, 6), L=st.integers(1, 3), seed=st.integers(0, 10_000))
def test_polynomial_tensor_evaluates_to_model_output(d, n, L, seed):
    """The exact tensor of the L-token map, contracted with w = (x_0..x_{L-1}, 1), is the output."""
    m = lib.GatedLinearRNN(d, n, 2, seed=seed)
    x = torch.randn(5, L, d, generator=torch.Generator().manual_seed(seed))
    C = lib.instantaneous_tensor(m, n_tokens=L)
    w = torch.cat([x.reshape(5, -1), torch.ones(5, 1)], dim=1)
    y_poly = torch.einsum("iabce,na,nb,nc,ne->ni", C, w, w, w, w)
    exps, coef = lib.polynomial_coefficients(C)
    y_mono = torch.stack([torch.stack([torch.prod(w[k, :-1] ** torch.tensor(e)) for e in exps]) for k in range(5)]) @ coef.T
    with torch.no_grad():
        y = m(x)[:, -1]
    assert rel_err(y_poly, y) <= 1e-10 and rel_err(y_mono, y) <= 1e-10


def test_two_lru_layers_implement_the_gated_rnn_to_second_order():
    """lib.lru_from_gated: two LRULayer (GLU) + readout equal the gated RNN up to O(eps^2)."""
    g = torch.Generator().manual_seed(4)
    m = lib.GatedLinearRNN(3, 5, 2, seed=3)
    x = torch.randn(2, 7, 3, generator=g)
    with torch.no_grad():
        y = m(x)
        xt = torch.cat([x, torch.ones(2, 7, 1)], dim=-1)
        errs = []
        for eps in (4e-3, 2e-3):
            layers, R = lib.lru_from_gated(m, eps)
            out = layers(torch.nn.functional.pad(xt, (0, layers[0].W_m.shape[0] - 4))) @ R.T
            errs.append(rel_err(out, y))
    assert 3.5 < errs[0] / errs[1] < 4.5, errs
    with pytest.raises(TypeError, match="GatedLinearRNN"):
        lib.lru_from_gated(torch.nn.Linear(2, 2), 0.1)


@pytest.mark.parametrize("skip", [False, True])
def test_one_lru_in_layer_implements_attention_to_second_order(skip):
    """lib.lru_in_from_attention: one LRU In+Out / In+Skip layer + readout = LSA up to O(eps^2)."""
    g = torch.Generator().manual_seed(5)
    W = [torch.randn(2, 3, generator=g), torch.randn(2, 3, generator=g), torch.randn(2, 3, generator=g)]
    W[0] = torch.randn(4, 3, generator=g)             # d_v = 4 != d_k = 2: the blocks must not overlap
    x = torch.randn(3, 9, 3, generator=g)
    with torch.no_grad():
        y = lib.LinearSelfAttention(*W)(x)
        errs = []
        for eps in (4e-3, 2e-3):
            layer, R = lib.lru_in_from_attention(*W, eps, skip=skip)
            assert layer.input_gate and layer.skip_gate == skip
            errs.append(rel_err(layer(torch.nn.functional.pad(x, (0, layer.W_m.shape[0] - 3))) @ R.T, y))
    assert errs[0] < 1e-4 and 3.5 < errs[0] / errs[1] < 4.5, errs
    with pytest.raises(ValueError, match="eps"):
        lib.lru_in_from_attention(*W, 0.0)


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 8), T=st.integers(1, 30), seed=st.integers(0, 10_000), cplx=st.booleans())
def test_diagonal_recurrence_equals_loop_with_its_gradients(n, T, seed, cplx):
    """lib.diagonal_recurrence (hand-written backward) = the loop, values and gradients, real or complex."""
    g = torch.Generator().manual_seed(seed)
    lam = torch.rand(n, generator=g)
    u = torch.randn(2, T, n, generator=g)
    if cplx:
        lam = torch.polar(lam, 6 * torch.rand(n, generator=g))
        u = torch.complex(u, torch.randn(2, T, n, generator=g))
    lam.requires_grad_(True)
    u.requires_grad_(True)
    w = torch.randn_like(u)
    h1, h2 = lib.diagonal_recurrence(lam, u), lib.diagonal_scan_reference(lam, u)
    assert rel_err(h1.detach(), h2.detach()) <= 1e-12
    g1 = torch.autograd.grad((h1 * w.conj()).real.sum(), (lam, u))
    g2 = torch.autograd.grad((h2 * w.conj()).real.sum(), (lam, u))
    assert all(float((a - b).norm()) <= 1e-12 * max(float(b.norm()), 1.0) for a, b in zip(g1, g2))  # T = 1: grad lam = 0


def test_lru_in_skip_layer():
    """In+Skip: the output GLU's sigmoid branch reads the layer input; it needs the input gate."""
    with pytest.raises(ValueError, match="skip_gate"):
        lib.LRULayer(4, skip_gate=True)
    layer = lib.LRULayer(4, input_gate=True, skip_gate=True, seed=1, dtype=torch.float64)
    x = torch.randn(2, 5, 4)
    with torch.no_grad():
        base = layer(x)
        layer.nu_log.fill_(50.0)             # recurrence off: y~ changes, the sigmoid branch must not
        ref = torch.sigmoid(x @ layer.W_m.T)
        xg = torch.sigmoid(x @ layer.Wi_m.T) * (x @ layer.Wi_x.T)
        Bu = torch.complex(xg @ layer.B_re.T, xg @ layer.B_im.T) * torch.exp(layer.gamma_log)
        h = lib.diagonal_scan_reference(layer.lam, Bu)
        y_tilde = h.real @ layer.C_re.T - h.imag @ layer.C_im.T + layer.D_skip * xg
        assert rel_err(layer(x), ref * (y_tilde @ layer.W_x.T)) <= 1e-12
        assert rel_err(base, layer(x)) > 1e-3


def test_evaluation_buffers_are_not_handed_out():
    """Without gradients the fast path writes into work buffers that the model reuses; what it
    returns (outputs and hidden states) must not be those buffers, or a second call would
    overwrite the first call's result."""
    m = lib.GatedLinearRNN(3, 8, 2, seed=1)
    x1 = torch.randn(4, 6, 3, generator=torch.Generator().manual_seed(2))
    x2 = torch.randn(4, 6, 3, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        h1, y1 = m.hidden_states(x1), m(x1)
        h1_copy, y1_copy = h1.clone(), y1.clone()
        m.hidden_states(x2), m(x2)
    assert torch.equal(h1, h1_copy) and torch.equal(y1, y1_copy)
    assert rel_err(h1, m.hidden_states(x1, method="step").detach()) <= 1e-12
    assert "_work" in m.__dict__ and len(m.__dict__["_work"]) == 4


def test_scan_core_and_in_place_loop_agree_with_the_reference():
    from lib.diagonal import recur_, scan_time_major
    g = torch.Generator().manual_seed(5)
    lam = torch.rand(7, generator=g, dtype=torch.float64)
    u = torch.randn(3, 9, 7, generator=g, dtype=torch.float64)          # (B, T, n)
    ref = lib.diagonal_scan_reference(lam, u)
    scanned = scan_time_major(lam, u.transpose(0, 1).contiguous()).transpose(0, 1)
    looped = recur_(u.transpose(0, 1).contiguous()[None], lam)[0].transpose(0, 1)
    assert rel_err(scanned, ref) <= 1e-14 and rel_err(looped, ref) <= 1e-14
    # lam = 0 keeps only the latest input, lam = 1 sums all inputs so far: exactly
    assert torch.equal(recur_(u.transpose(0, 1).contiguous()[None], torch.zeros(7, dtype=torch.float64))[0],
                       u.transpose(0, 1))
    assert torch.allclose(scan_time_major(torch.ones(7, dtype=torch.float64), u.transpose(0, 1).contiguous()),
                          u.transpose(0, 1).cumsum(0), rtol=0, atol=1e-13)
