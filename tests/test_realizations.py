"""The realizations of Chapter 14 reproduce the taps they are built from, behave after T steps as
their constructions say, and refuse bad input by name."""
import math

import pytest
import torch

import lib
from tests.helpers import rel_err

REL = 1e-10


def taps(T, n_y=1, n_x=1, seed=0):
    return torch.randn(T, n_y, n_x, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("T,n_y,n_x", [(1, 1, 1), (2, 1, 1), (5, 2, 3), (8, 1, 2), (16, 1, 1)])
def test_shift_register_is_the_convolution_on_long_sequences(T, n_y, n_x):
    L = taps(T, n_y, n_x)
    W, F, C = lib.shift_register_realization(L)
    assert W.shape[0] == T * n_x
    h = lib.impulse_response(W, F, C, 3 * T)
    assert rel_err(h[:T], L) <= REL and float(h[T:].abs().max()) == 0.0
    x = torch.randn(4, 3 * T, n_x, generator=torch.Generator().manual_seed(1))
    rnn = lib.LinearRNN.from_weights(W, F, C)
    rnn.engine = "recurrence"
    with torch.no_grad():
        assert rel_err(rnn(x), lib.causal_conv(L, x)) <= REL


@pytest.mark.parametrize("T", [2, 3, 4, 7, 8, 16])
@pytest.mark.parametrize("radius", [1.0, 0.8])
def test_rotation_taps_exact_then_repeat_scaled_by_radius_to_the_T(T, radius):
    L = taps(T, 2, 1, seed=T)
    W, F, C = lib.rotation_realization(L, radius=radius)
    h = lib.impulse_response(W, F, C, 2 * T)
    assert rel_err(h[:T], L) <= REL
    assert rel_err(h[T:], radius ** T * L) <= REL            # the period-T repetition, damped by r^T
    A = W / math.sqrt(W.shape[0])
    assert abs(float(torch.linalg.eigvals(A).abs().max()) - radius) <= 1e-12


def test_rotation_blocks_are_rotations():
    W, F, C = lib.rotation_realization(taps(6))
    A = W / math.sqrt(W.shape[0])
    assert torch.allclose(A.T @ A, torch.eye(6), atol=1e-14)      # orthogonal at radius 1


def test_full_rank_memory_is_an_orthogonal_shift_register_and_compressed_memory_is_not_exact():
    T = 10
    L = taps(T)
    seqs = [torch.randn(T, 1, generator=torch.Generator().manual_seed(s)) for s in range(12)]
    W, F, C = lib.memory_realization(L, seqs)
    assert W.shape[0] == T
    h = lib.impulse_response(W, F, C, 3 * T)
    assert rel_err(h[:T], L) <= REL and float(h[T:].abs().max()) <= 1e-12
    Wk, Fk, Ck = lib.memory_realization(L, seqs, rank=4)
    assert Wk.shape[0] == 4
    assert rel_err(lib.impulse_response(Wk, Fk, Ck, T), L) > 1e-3


def test_memory_of_shorter_sequences_is_exact_on_their_span_only():
    """Sequences of length 3 span the first three lags only: taps beyond them are lost."""
    T = 6
    L = taps(T)
    seqs = [torch.randn(3, 1, generator=torch.Generator().manual_seed(s)) for s in range(5)]
    W, F, C = lib.memory_realization(L, seqs)
    assert W.shape[0] == 3
    h = lib.impulse_response(W, F, C, T)
    assert rel_err(h[:3], L[:3]) <= REL and float(h[3:].abs().max()) <= 1e-12


@pytest.mark.parametrize("call,words", [
    (lambda: lib.shift_register_realization(torch.randn(4, 1)), ["L"]),
    (lambda: lib.shift_register_realization(torch.zeros(0, 1, 1)), ["L", "empty"]),
    (lambda: lib.rotation_realization(taps(4), radius=1.5), ["radius", "(0, 1]"]),
    (lambda: lib.rotation_realization(taps(4), radius=0.0), ["radius"]),
    (lambda: lib.rotation_realization(taps(4), radius=float("nan")), ["radius"]),
    (lambda: lib.memory_realization(taps(4), [torch.randn(6, 1)]), ["sequences", "T = 4"]),
    (lambda: lib.memory_realization(taps(4), [torch.randn(3, 2)]), ["sequences"]),
    (lambda: lib.memory_realization(taps(4), [torch.randn(3, 1)], rank=0), ["rank"]),
])
def test_bad_input_is_named(call, words):
    with pytest.raises((ValueError, TypeError)) as info:
        call()
    assert all(w in str(info.value) for w in words), str(info.value)
