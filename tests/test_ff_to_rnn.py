"""Tests of Sperduti's §3 constructions and what is built on them: lib.linear_ff (§3.1),
lib.nonlinear_ff (§3.2), lib.tanh_memory (tanh memory units) and lib.smallest_k (Fig. 5)."""
import math

import pytest
import torch
from hypothesis import given, settings, strategies as st

import lib
from tests.helpers import rel_err

TOL = 1e-10


@st.composite
def problems(draw, max_a=4, max_len=9, max_n=5):
    a = draw(st.integers(1, max_a))
    l = draw(st.integers(1, max_len))
    lengths = draw(st.lists(st.integers(1, l), min_size=1, max_size=max_n))
    r = draw(st.integers(1, a))
    t = draw(st.integers(1, l))
    seed = draw(st.integers(0, 2**31 - 1))
    g = torch.Generator().manual_seed(seed)
    seqs = [torch.randn(n, a, generator=g, dtype=torch.float64) for n in lengths]
    Gamma = torch.zeros(r, l, dtype=torch.float64)
    Gamma[:, :t] = torch.randn(r, t, generator=g, dtype=torch.float64)
    Gamma[:, t - 1] += 1.0  # timespan exactly t (almost surely)
    w = (torch.randn(a, r, generator=g, dtype=torch.float64) @ Gamma).T.reshape(-1)
    return seqs, w, g


def _ff_outputs(g, W, b_o, seqs):
    """Random hidden biases and output weights for the hidden weights W (H x a l), and the outputs
    of the feedforward network they make on every prefix of seqs."""
    H, al = W.shape
    l = max(s.shape[0] for s in seqs)
    b, w_o = torch.randn(H, generator=g, dtype=torch.float64), torch.randn(H, generator=g, dtype=torch.float64)
    net = lib.FeedforwardNet(al // l, l, H)
    with torch.no_grad():
        net.W.copy_(W); net.b.copy_(b); net.w_o.copy_(w_o); net.b_o.fill_(b_o)
        o = net(lib.state_matrix(seqs, l))
    return b, w_o, o


@settings(max_examples=40, deadline=None)
@given(problems())
def test_linear_constructions_exact_and_bounded(p):
    seqs, w, _ = p
    a = seqs[0].shape[1]
    N = sum(s.shape[0] for s in seqs)
    d = lib.linear_ff_outputs(w, seqs)
    r, t = lib.rank_and_timespan(w, a)
    full = lib.linear_ff_to_rnn(w, seqs)
    red = lib.linear_ff_to_rnn(w, seqs, reduced=True)
    scale = max(float(d.abs().max()), 1e-300)
    assert float((full.run(seqs) - d).abs().max()) <= TOL * scale * 10
    assert float((red.run(seqs) - d).abs().max()) <= TOL * scale * 10
    assert full.state_size <= min(N, r * (w.shape[0] // a))
    assert red.state_size <= min(N, red.info["kept"]) <= lib.theorem31_bound(N, r, t)


@settings(max_examples=25, deadline=None)
@given(problems(max_a=3, max_len=7, max_n=4), st.integers(1, 3), st.sampled_from(lib.nonlinear_ff.BASES))
def test_general_fast_equals_literal_and_ff(p, H, basis):
    seqs, _, g = p
    a = seqs[0].shape[1]
    l = max(s.shape[0] for s in seqs)
    ranks = [int(torch.randint(1, a + 1, (1,), generator=g)) for _ in range(H)]
    W = torch.stack([(torch.randn(a, r, generator=g, dtype=torch.float64)
                      @ torch.randn(r, l, generator=g, dtype=torch.float64)).T.reshape(-1) for r in ranks])
    b, w_o, o = _ff_outputs(g, W, 0.3, seqs)
    fast = lib.general_ff_to_rnn(W, b, w_o, 0.3, seqs, basis=basis)
    ref = lib.general_ff_to_rnn_reference(W, b, w_o, 0.3, seqs, basis=basis)
    assert fast.state_size == ref.state_size == lib.general_ff_to_rnn(W, b, w_o, 0.3, seqs).state_size
    assert rel_err(fast.info["lam"], ref.info["lam"]) <= TOL
    for out in (fast(seqs), fast(seqs, markov=True), ref(seqs),
                fast.outputs_from_states(fast.info["states"])):
        assert rel_err(out, o) <= TOL


@settings(max_examples=25, deadline=None)
@given(problems(max_a=3, max_len=8, max_n=4), st.lists(st.integers(1, 8), min_size=1, max_size=4))
def test_one_step_constructions_exact(p, slots):
    seqs, _, g = p
    a = seqs[0].shape[1]
    H = len(slots)
    net = lib.OneStepFF(torch.randn(H, a, generator=g, dtype=torch.float64), slots,
                        torch.randn(H, generator=g, dtype=torch.float64), b_o=-0.2)
    o = net(seqs)
    feats = net.features(seqs)
    for reduced in (False, True):
        rnn = lib.one_step_ff_to_rnn(net, seqs, reduced=reduced)
        assert rel_err(torch.tanh(rnn.run(feats) + net.b_o), o) <= TOL


def test_tanh_memory_error_below_bound():
    g = torch.Generator().manual_seed(3)
    seqs = [torch.randn(n, 2, generator=g, dtype=torch.float64) for n in (6, 4, 3)]
    W = torch.randn(3, 12, generator=g, dtype=torch.float64) / 3
    rnn = lib.general_ff_to_rnn(W, torch.zeros(3), torch.ones(3), 0.0, seqs)
    o = rnn(seqs)
    D = float(torch.cat(rnn.states(seqs)).pow(6).sum(1).sqrt().max())
    gain = float((rnn.w_o.abs() * torch.linalg.norm(rnn.G, dim=1)).sum())
    for eps in (1e-2, 1e-5):
        beta = lib.tanh_memory_beta(rnn.B, D, 6, gain, eps)
        assert float((rnn(seqs, beta=beta) - o).abs().max()) <= eps


def test_tanh_beta_star():
    for b, eps in [(1.0, 1e-3), (5.0, 1e-8)]:
        bs = lib.tanh_beta_star(b, eps)
        z = torch.linspace(-b, b, 1001, dtype=torch.float64)
        assert float((bs * torch.tanh(z / bs) - z).abs().max()) < eps
    assert math.isclose(lib.tanh_beta_star(3.0, 1.0), 3.0)


def test_truncation_equals_rank_k_construction():
    g = torch.Generator().manual_seed(5)
    seqs = [torch.randn(n, 2, generator=g, dtype=torch.float64) for n in (5, 5, 2)]
    W = torch.randn(2, 10, generator=g, dtype=torch.float64)
    rnn = lib.general_ff_to_rnn(W, torch.zeros(2), torch.ones(2), 0.0, seqs)
    k = rnn.state_size - 2
    direct = lib.general_ff_to_rnn(W, torch.zeros(2), torch.ones(2), 0.0, seqs, rank=k)
    t = rnn.truncated(k)
    assert t.state_size == k == direct.state_size
    assert rel_err(t(seqs), direct(seqs)) <= TOL
    assert rel_err(t(seqs, markov=True), t(seqs)) <= TOL
    with pytest.raises(ValueError, match="state size"):
        rnn.truncated(rnn.state_size + 1)


@pytest.mark.parametrize("call, match", [
    (lambda: lib.linear_ff_to_rnn(torch.zeros(6), [torch.ones(2, 3)]), "non-zero"),
    (lambda: lib.linear_ff_to_rnn(torch.ones(5), [torch.ones(2, 3)]), "multiple"),
    (lambda: lib.linear_ff_to_rnn(torch.ones(3), [torch.ones(2, 3)]), "longest"),
    (lambda: lib.linear_ff_to_rnn(torch.ones(6), [torch.ones(2, 3), torch.ones(2, 4)]), "features"),
    (lambda: lib.linear_ff_to_rnn(torch.ones(6), [torch.ones(0, 3)]), "empty"),
    (lambda: lib.tanh_beta_star(1.0, 0.0), "eps"),
    (lambda: lib.tanh_beta_star(1.0, -1.0), "eps"),
    (lambda: lib.tanh_memory_beta(torch.eye(2), 1.0, 3, 1.0, 0.0), "eps"),
    (lambda: lib.tanh_memory_state_bound(torch.eye(2), 1.0, 3, -2.0), "beta"),
    (lambda: lib.general_ff_to_rnn(torch.ones(2, 5), torch.zeros(2), torch.ones(2), 0.0, [torch.ones(2, 3)]), "W_hid"),
    (lambda: lib.general_ff_to_rnn(torch.ones(2, 6), torch.zeros(3), torch.ones(2), 0.0, [torch.ones(2, 3)]), "H = 2"),
    (lambda: lib.general_ff_to_rnn(torch.ones(2, 6), torch.zeros(2), torch.ones(2), 0.0, [torch.ones(2, 3)],
                                   basis="canonical"), "basis"),
    (lambda: lib.OneStepFF(torch.ones(2, 3), [0, 1], torch.ones(2)), "slots"),
    (lambda: lib.one_step_ff_to_rnn("net", [torch.ones(2, 3)]), "OneStepFF"),
])
def test_bad_input(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


# ------------------------------------- forgetting memories (Theorem 3.1, §3.2) and the smallest k

@settings(max_examples=40, deadline=None)
@given(problems())
def test_forgetting_shift_register_exact_on_any_sequence(p):
    """Theorem 3.1's memory before the SVD needs no data: exact on sequences it never saw, and
    its size is sum_i tau_i <= the bound (equal to the reduced construction's 'kept')."""
    seqs, w, g = p
    a = seqs[0].shape[1]
    l = w.shape[0] // a
    reg = lib.forgetting_shift_register(w, a)
    r, t = lib.rank_and_timespan(w, a)
    assert reg.state_size == reg.info["kept"] <= reg.info["bound"] == ((1 + 2 * t) * r - r * r) // 2
    assert reg.state_size == lib.linear_ff_to_rnn(w, seqs, reduced=True).info["kept"]
    fresh = [torch.randn(n, a, generator=g, dtype=torch.float64) for n in (l, max(1, l // 2), 1)]
    d = lib.linear_ff_outputs(w, fresh)
    assert float((reg.run(fresh) - d).abs().max()) <= TOL * max(float(d.abs().max()), 1e-300) * 10
    assert set(reg.B.unique().tolist()) <= {0.0, 1.0}


def _random_net(g, a, l, H, timespans):
    W = torch.zeros(H, a * l, dtype=torch.float64)
    for h, t in enumerate(timespans):
        r = int(torch.randint(1, min(a, t) + 1, (1,), generator=g))
        Gm = torch.zeros(r, l, dtype=torch.float64)
        Gm[:, :t] = torch.randn(r, t, generator=g, dtype=torch.float64)
        W[h] = (torch.randn(a, r, generator=g, dtype=torch.float64) @ Gm).T.reshape(-1)
    return W


@settings(max_examples=25, deadline=None)
@given(problems(max_a=3, max_len=8, max_n=5), st.lists(st.integers(1, 8), min_size=1, max_size=3))
def test_general_forgetting_exact_and_bounded(p, spans):
    seqs, _, g = p
    a = seqs[0].shape[1]
    l = max(s.shape[0] for s in seqs)
    spans = [min(t, l) for t in spans]
    H = len(spans)
    W = _random_net(g, a, l, H, spans)
    b, w_o, o = _ff_outputs(g, W, 0.1, seqs)
    red = lib.general_ff_to_rnn_forgetting(W, b, w_o, 0.1, seqs)
    full = lib.general_ff_to_rnn(W, b, w_o, 0.1, seqs)
    N = sum(s.shape[0] for s in seqs)
    assert rel_err(red(seqs), o) <= TOL
    rt = [lib.rank_and_timespan(W[h], a) for h in range(H)]
    paper = min(N, sum(((1 + 2 * t) * r - r * r) // 2 for r, t in rt))   # the bound, computed independently
    assert red.info["bound"] == paper
    assert red.state_size <= min(N, red.info["kept"]) <= paper
    assert red.state_size <= full.state_size <= min(N, a * l)


def _protein_like(seed=0, n=6, l=9, a=3, H=3):
    g = torch.Generator().manual_seed(seed)
    seqs = [torch.randn(m, a, generator=g, dtype=torch.float64) for m in [l] + [int(v) for v in torch.randint(1, l + 1, (n - 1,), generator=g)]]
    W = torch.randn(H, a * l, generator=g, dtype=torch.float64)
    rnn = lib.general_ff_to_rnn(W, 0.1 * torch.randn(H, generator=g, dtype=torch.float64),
                                torch.randn(H, generator=g, dtype=torch.float64), 0.05, seqs)
    return seqs, rnn


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_projected_scan_matches_direct_evaluation(seed):
    seqs, rnn = _protein_like(seed)
    Y = rnn.info["states"]
    o = rnn(seqs)
    ref = torch.where(o >= 0, 1.0, -1.0)
    nd, settle = lib.projected_scan(rnn, Y, ref, chunk=3)
    # direct: every k, one readout each
    direct = []
    signs = []
    for k in range(rnn.state_size + 1):
        o_k = rnn.outputs_from_states(Y[:, :k]) if k else rnn._out(torch.zeros(Y.shape[0], rnn.G.shape[0]))
        s_k = torch.where(o_k >= 0, 1.0, -1.0)
        signs.append(s_k)
        direct.append(float((s_k != ref).double().mean()))
    assert nd.tolist() == direct and nd[-1] == 0.0
    S = torch.stack(signs, 1) != ref[:, None]          # (N, rho + 1) disagreements at k = 0..rho
    want = torch.tensor([max([k + 1 for k in range(S.shape[1]) if S[n, k]], default=0) for n in range(S.shape[0])])
    assert torch.equal(settle, want)
    k_star, flipped = lib.smallest_kept_k(rnn, Y, ref, chunk=2)
    assert k_star == int(settle.max())
    if k_star:
        assert torch.equal(flipped, S[:, k_star - 1].nonzero().flatten())
    # k_min restricts the scan to k >= k_min
    nd2, settle2 = lib.projected_scan(rnn, Y, ref, k_min=2, chunk=5)
    assert nd2.tolist() == direct[2:] and torch.equal(settle2, settle.clamp_min(2))


def test_markov_parameters_give_the_net_inputs():
    seqs, rnn = _protein_like(4)
    l = max(s.shape[0] for s in seqs)
    K = rnn.markov_parameters(l)
    assert rel_err(lib.state_matrix(seqs, l) @ K.T, rnn.net_inputs(seqs)) <= TOL


@pytest.mark.parametrize("call, match", [
    (lambda: lib.forgetting_shift_register(torch.zeros(6), 3), "non-zero"),
    (lambda: lib.forgetting_shift_register(torch.ones(5), 3), "multiple"),
    (lambda: lib.forgetting_shift_register(torch.ones(6), 0), "a must"),
    (lambda: lib.general_ff_to_rnn_forgetting(torch.ones(2, 3), torch.zeros(2), torch.ones(2), 0.0,
                                              [torch.ones(2, 3)]), "longest"),
    (lambda: lib.projected_scan("rnn", torch.ones(2, 2), torch.ones(2)), "MemoryRNN"),
    (lambda: lib.projected_scan(_protein_like()[1], torch.ones(3, 2), torch.ones(3)), "exact states"),
    (lambda: lib.smallest_kept_k(_protein_like()[1], _protein_like()[1].info["states"], torch.zeros(
        _protein_like()[1].info["states"].shape[0])), "±1"),
    (lambda: lib.projected_scan(_protein_like()[1], _protein_like()[1].info["states"], torch.ones(
        _protein_like()[1].info["states"].shape[0]), k_min=10**6), "k_min"),
    (lambda: _protein_like()[1].markov_parameters(0), "l must"),
])
def test_bad_input_forgetting_and_scans(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()
