"""Tests of lib.sequence_memory: the linear autoencoder for sequences (Sperduti 2015, §2.1)."""
import pytest
import torch
from hypothesis import given, settings, strategies as st

import lib
from tests.helpers import rel_err

TOL = 1e-10


@st.composite
def sequence_sets(draw, max_a=4, max_n=5, max_len=9):
    a = draw(st.integers(1, max_a))
    lengths = draw(st.lists(st.integers(1, max_len), min_size=1, max_size=max_n))
    seed = draw(st.integers(0, 2**31 - 1))
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(n, a, generator=g, dtype=torch.float64) for n in lengths]


@settings(max_examples=40, deadline=None)
@given(sequence_sets())
def test_state_matrix_fast_equals_reference(seqs):
    assert torch.equal(lib.state_matrix(seqs), lib.state_matrix_reference(seqs))


@settings(max_examples=40, deadline=None)
@given(sequence_sets())
def test_autoencoder_states_decoder_and_rank(seqs):
    ae = lib.fit_sequence_autoencoder(seqs)
    Xi = lib.state_matrix(seqs)
    assert ae.state_size == int(torch.linalg.matrix_rank(Xi))
    Y = ae.encode(seqs)
    assert rel_err(torch.cat(Y), Xi @ ae.U) <= TOL
    for y1, y2 in zip(Y, lib.encode_reference(ae.A, ae.B, seqs)):
        assert rel_err(y1, y2) <= TOL
    for s, Ys in zip(seqs, Y):
        for t in range(s.shape[0]):
            assert rel_err(ae.decode(Ys[t], t + 1), s[: t + 1].flip(0)) <= TOL
    # Omega = U (the paper's claim, true because the row space is invariant under the up-shift)
    blocks, BkA = [], ae.A
    for _ in range(ae.l):
        blocks.append(BkA.T)
        BkA = ae.B @ BkA
    # U comes from an SVD: its columns carry an error of about u * sigma_max / sigma_min (Wedin),
    # which the l products B^k A can amplify l-fold; near-rank-deficient draws (sigma_min / sigma_max
    # ~ 1e-9, found by hypothesis) sit above 1e-10 for that reason alone, while a wrong Omega is O(1)
    kappa = float(ae.lam[0] / ae.lam[-1])
    assert rel_err(torch.cat(blocks), ae.U) <= TOL + 10 * ae.l * torch.finfo(torch.float64).eps * kappa


def test_shift_operators_act_as_documented():
    P, R = lib.shift_operators(2, 6)
    v = torch.arange(1.0, 7.0, dtype=torch.float64)
    assert torch.equal(R @ v, torch.tensor([0, 0, 1, 2, 3, 4], dtype=torch.float64))
    assert torch.equal(P @ torch.tensor([7.0, 8.0], dtype=torch.float64), torch.tensor([7, 8, 0, 0, 0, 0], dtype=torch.float64))
    _, Rf = lib.shift_operators(2, 6, forget=[3])
    assert torch.equal(Rf @ v, torch.tensor([0, 0, 1, 0, 3, 4], dtype=torch.float64))


def test_autoencoder_matrices_match_explicit_operators():
    g = torch.Generator().manual_seed(0)
    U = torch.linalg.qr(torch.randn(12, 5, generator=g, dtype=torch.float64))[0]
    P, R = lib.shift_operators(3, 12)
    A, B = lib.autoencoder_matrices(U, 3)
    assert rel_err(A, U.T @ P) <= TOL and rel_err(B, U.T @ R @ U) <= TOL


def test_thin_svd_rank_and_truncation():
    g = torch.Generator().manual_seed(1)
    M = torch.randn(20, 3, generator=g, dtype=torch.float64) @ torch.randn(3, 15, generator=g, dtype=torch.float64)
    V, lam, U = lib.thin_svd(M)
    assert lam.shape == (3,) and rel_err(V @ torch.diag(lam) @ U.T, M) <= TOL
    assert lib.thin_svd(M, rank=2)[1].shape == (2,)


@pytest.mark.parametrize("bad, match", [
    ([], "non-empty"),
    ([torch.zeros(0, 3)], "empty"),
    ([torch.zeros(3, 2), torch.zeros(2, 3)], "features"),
    ([torch.zeros(3)], "dimensions"),
    ("abc", "non-empty list"),
])
def test_bad_sequences(bad, match):
    with pytest.raises((ValueError, TypeError), match=match):
        lib.state_matrix(bad)


def test_bad_arguments():
    with pytest.raises(ValueError, match="max_length"):
        lib.state_matrix([torch.zeros(4, 2)], max_length=3)
    with pytest.raises(ValueError, match="multiple"):
        lib.shift_operators(2, 5)
    with pytest.raises(ValueError, match="forget"):
        lib.shift_operators(2, 4, forget=[9])
    with pytest.raises(ValueError, match="rank"):
        lib.thin_svd(torch.ones(3, 3), rank=7)
    ae = lib.fit_sequence_autoencoder([torch.ones(3, 2)])
    with pytest.raises(ValueError, match="state size"):
        ae.decode(torch.zeros(ae.state_size + 1), 1)
    with pytest.raises(ValueError, match="features"):
        ae.encode([torch.ones(3, 5)])
