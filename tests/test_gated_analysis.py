"""lib.gated_analysis: the function of a gated RNN read off its weights (Chapter 11)."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lib
from lib import gated_analysis as ga
from tests.helpers import rel_err


def _attention(d, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(d, d, generator=g, dtype=torch.float64) / d ** 0.5 for _ in range(3)]


def _bilinear(K, x):
    """sum_{s<=t} mono(x_s)^T K_i mono(x_t) for every t: the function K stands for, computed directly."""
    d = x.shape[-1]
    pairs, _ = ga.monomials(d)
    xt = torch.cat([x, torch.ones_like(x[..., :1])], dim=-1)
    mono = torch.stack([xt[..., a] * xt[..., b] for a, b in pairs], dim=-1)      # (B, T, P)
    memory = mono.cumsum(1)
    return torch.einsum("btp,ipq,btq->bti", memory, K, mono)


@settings(max_examples=15, deadline=None)
@given(d=st.integers(1, 5), seed=st.integers(0, 10_000), compact=st.booleans())
def test_the_construction_has_the_teachers_kernel(d, seed, compact):
    """An identity (float64): the exact construction's memory x input kernel is attention's."""
    W = _attention(d, seed)
    net = lib.gated_rnn_from_attention(*W, compact=compact)
    memory, inputs = ga.neuron_groups(net, 0.9, 0.1)
    K = ga.function_kernels(net, memory, inputs)
    assert rel_err(K, ga.attention_function_kernel(*W)) <= 1e-10
    x = torch.randn(3, 7, d, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
    with torch.no_grad():
        assert rel_err(_bilinear(K, x), net(x)) <= 1e-10                     # the kernel is the whole function
    assert ga.outside_share(net, memory, inputs, x) <= 1e-12


@settings(max_examples=15, deadline=None)
@given(d=st.integers(1, 5), d_out=st.integers(1, 4), seed=st.integers(0, 10_000))
def test_compressed_network_computes_the_degree_2_by_1_kernel(d, d_out, seed):
    pairs, deg = ga.monomials(d)
    P = len(pairs)
    K = torch.randn(d_out, P, P, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    net = ga.compress_to_construction(K)
    n_kv = d * (d + 1) // 2
    assert net.W_in_m.shape[0] == n_kv + d and net.D.shape[1] == d_out * d
    lam = net.lam.detach()
    assert torch.equal(lam[:n_kv], torch.ones(n_kv, dtype=lam.dtype)) and torch.equal(lam[n_kv:], torch.zeros(d, dtype=lam.dtype))
    K_proj = torch.zeros_like(K)
    keep = (deg == 2)[:, None] & (deg == 1)[None, :]
    K_proj[:, keep] = K[:, keep]
    x = torch.randn(2, 6, d, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
    with torch.no_grad():
        assert rel_err(net(x), _bilinear(K_proj, x)) <= 1e-10
    memory, inputs = ga.neuron_groups(net, 0.9, 0.1)
    assert rel_err(ga.function_kernels(net, memory, inputs), K_proj) <= 1e-10     # read back: the same kernel


def test_ranks_and_degrees_separate_the_construction_from_an_untrained_network():
    W = _attention(4, 3)
    sv_m, sv_i = ga.side_spectra(ga.attention_function_kernel(*W))
    assert (ga.numerical_rank(sv_m), ga.numerical_rank(sv_i)) == (10, 4)
    K_t = ga.attention_function_kernel(*W)
    assert ga.degree_share(K_t, "memory", 2) == 0.0 and ga.degree_share(K_t, "input", 1) == 0.0
    net = lib.GatedLinearRNN(4, 100, 4, seed=1)
    memory, inputs = ga.neuron_groups(net, 0.9, 0.1)
    K = ga.function_kernels(net, memory, inputs)
    sv_m, sv_i = ga.side_spectra(K)
    assert ga.degree_share(K, "memory", 2) > 0.1 and ga.degree_share(K, "input", 1) > 0.1
    assert ga.kernel_distance(K, K_t) > 0.5
    assert ga.kernel_distance(K_t, K_t) == 0.0


def test_split_row_keeps_the_function_and_the_merge_test_can_pass_and_fail():
    W = _attention(3, 5)
    net = lib.gated_rnn_from_attention(*W, compact=True)
    groups = ga.neuron_groups(net, 0.9, 0.1)
    n_rows, n_h = net.D.shape[1], net.W_in_m.shape[0]
    mix = torch.zeros(n_h, dtype=torch.float64)
    mix[6:] = torch.tensor([0.3, -1.0, 0.7], dtype=torch.float64)                # reads the query neurons
    split = ga.split_row(net, 0, 3, mix)
    assert (split.W_out_m.detach()[-3:, 6:] != 0).all()                     # every part departs from the form
    x = torch.randn(2, 5, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    with torch.no_grad():
        assert rel_err(split(x), net(x)) <= 1e-10
    assert ga.merge_test(split, range(n_rows - 1, n_rows + 2), *groups)["merges"]
    both = ga.split_row(split, 4, 3, mix)                                    # rows of two outputs together
    result = ga.merge_test(both, range(n_rows - 2, n_rows + 4), *groups)
    assert not result["merges"] and result["proportional"] > 0.1
    one_row = ga.merge_test(net, [0], *groups)                               # one construction row: merges
    assert one_row["merges"]


def test_zero_weights_counts_rows_below_the_threshold_only():
    net = lib.GatedLinearRNN(2, 5, 2, 4, seed=0)
    with torch.no_grad():
        net.W_in_x[1].zero_()
        net.W_in_m[2].fill_(1e-20)                # small, not zero
        net.W_out_m[:, 3].zero_()
        net.W_out_x[:, 3].zero_()
        net.D[:, 0].fill_(1e-35)
        net.W_in_m[4, 0] = 0.0                   # one zero entry is not a zero row
        net.W_out_x[2, 1] = 0.0
    z = ga.zero_weights(net)
    assert z["hidden"].tolist() == [False, True, False, True, False]
    assert z["gate"].tolist() == [True, False, False, False]
    assert z["shares"]["readout"] == pytest.approx(2 / 8)
    assert ga.zero_weights(net, zero=1e-10)["hidden"][2]


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 12), n_g=st.integers(1, 12), d=st.integers(1, 4), seed=st.integers(0, 10_000))
def test_removal_fast_path_equals_rebuilding_the_network(n, n_g, d, seed):
    net = lib.GatedLinearRNN(d, n, 3, n_g, seed=seed)
    x = torch.randn(3, 9, d, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
    fast, ref = ga.removal_changes(net, x), ga.removal_changes_reference(net, x)
    for a, b in zip(fast, ref):
        assert a.shape == b.shape and (a - b).abs().max() <= 1e-10 * max(1.0, float(b.abs().max()))


def test_removal_changes_are_zero_for_a_dead_neuron():
    net = lib.GatedLinearRNN(2, 4, 2, 3, seed=2)
    with torch.no_grad():
        net.W_in_m[1].zero_()
    x = torch.randn(3, 6, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    ch_h, ch_o = ga.removal_changes(net, x)
    assert ch_h.shape == (4,) and ch_o.shape == (3,)
    assert ch_h[1] == 0.0 and (ch_h[[0, 2, 3]] > 0).all()


def test_gating_in_rows_and_embedding_keep_the_function_and_only_the_right_row_count_closes():
    """An identity (float64): the construction (d = 3: 9 gating rows, a memory unfolding of rank 6) with
    its gating rewritten in 7 rows, inside a wider student, computes the same function; 2 rows, below
    the rank, cannot hold the tensor and the least squares leaves a residual -- the rewrite can fail."""
    W = _attention(3, 7)
    net = lib.gated_rnn_from_attention(*W, compact=True)
    groups = ga.neuron_groups(net, 0.9, 0.1)
    x = torch.randn(2, 6, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    rows = 7
    wide = ga.gating_in_rows(net, rows, *groups, torch.Generator().manual_seed(2))
    assert wide.D.shape[1] == rows
    student = ga.embed_in_student(wide, 30, torch.Generator().manual_seed(3))
    assert student.W_in_m.shape[0] == 30 and student.D.shape[1] == 30
    assert bool((student.W_in_m.detach()[net.lam.shape[0]:] == 0).all())        # unused neurons: zero input rows
    with torch.no_grad():
        assert rel_err(wide(x), net(x)) <= 1e-10
        assert rel_err(student(x), net(x)) <= 1e-10
        narrow = ga.gating_in_rows(net, 2, *groups, torch.Generator().manual_seed(2))
        assert rel_err(narrow(x), net(x)) > 1e-3


@pytest.mark.parametrize("call, match", [
    (lambda n: ga.numerical_rank(torch.ones(3), tol=0.0), "tol"),
    (lambda n: ga.numerical_rank(torch.ones(3), tol=2.0), "tol"),
    (lambda n: ga.split_row(n, 0, 1, torch.zeros(4)), "parts"),
    (lambda n: ga.split_row(n, 9, 2, torch.zeros(4)), "row"),
    (lambda n: ga.split_row(n, 0, 2, torch.zeros(3)), "mix"),
    (lambda n: ga.merge_test(n, [], *ga.neuron_groups(n, 0.9, 0.1)), "rows"),
    (lambda n: ga.degree_share(torch.ones(1, 6, 6), "both", 2), "side"),
    (lambda n: ga.degree_share(torch.ones(1, 6, 6), "memory", 3), "degree"),
    (lambda n: ga.neuron_groups(n, 0.1, 0.9), "lam_zero"),
    (lambda n: ga.function_kernels(n, torch.ones(4, dtype=torch.bool), torch.ones(4, dtype=torch.bool)), "disjoint"),
    (lambda n: ga.function_kernels(n, torch.ones(3, dtype=torch.bool), torch.zeros(4, dtype=torch.bool)), "memory"),
    (lambda n: ga.zero_weights(n, zero=-1.0), "zero"),
    (lambda n: ga.monomials(0), "d"),
    (lambda n: ga.gating_kernels(torch.nn.Linear(2, 2)), "model"),
    (lambda n: ga.gating_in_rows(n, 0, torch.zeros(4, dtype=torch.bool), torch.ones(4, dtype=torch.bool),
                                 torch.Generator()), "rows"),
    (lambda n: ga.gating_in_rows(n, 1, torch.ones(4, dtype=torch.bool), torch.zeros(4, dtype=torch.bool),
                                 torch.Generator()), "inputs"),
    (lambda n: ga.gating_in_rows(n, 2, torch.ones(3, dtype=torch.bool), torch.zeros(4, dtype=torch.bool),
                                 torch.Generator()), "memory"),
    (lambda n: ga.gating_in_rows(n, 1, *ga.neuron_groups(n, 0.9, 0.1), 0), "gen"),
    (lambda n: ga.embed_in_student(n, 2, torch.Generator()), "n"),
    (lambda n: ga.embed_in_student(n, 8, None), "gen"),
])
def test_bad_input_is_refused_by_name(call, match):
    net = lib.GatedLinearRNN(1, 4, 1, 3, seed=0)
    with pytest.raises((ValueError, TypeError), match=match):
        call(net)


def test_fine_tuning_lowers_the_loss_and_keeps_lambda():
    W = _attention(2, 4)
    teacher = lib.LinearSelfAttention(*W)
    exact = lib.gated_rnn_from_attention(*W, compact=True)
    K = ga.function_kernels(exact, *ga.neuron_groups(exact, 0.9, 0.1))
    damaged = ga.compress_to_construction(K * (1 + 0.05 * torch.randn(K.shape, generator=torch.Generator().manual_seed(0),
                                                                         dtype=torch.float64)))
    x = torch.randn(64, 8, 2, generator=torch.Generator().manual_seed(3), dtype=torch.float64)

    def rel(net):
        with torch.no_grad():
            return float(((net(x) - teacher(x)) ** 2).mean() / (teacher(x) ** 2).mean())

    tuned = ga.fine_tune(damaged, teacher, steps=200, lr=1e-2, x_std=1.0, T=8, batch=32, seed=1)
    assert rel(tuned) < 0.1 * rel(damaged)
    assert torch.equal(tuned.lam, damaged.lam)
    assert ga.fine_tune(damaged, teacher, steps=0, lr=1e-2, x_std=1.0, T=8, batch=32, seed=1).W_out_m.equal(damaged.W_out_m)
    with pytest.raises(ValueError, match="steps"):
        ga.fine_tune(damaged, teacher, steps=-1, lr=1e-2, x_std=1.0, T=8, batch=32, seed=1)
