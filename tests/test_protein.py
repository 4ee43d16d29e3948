"""Tests of lib.protein (the amino-acid code, the sparse prefix matrix, the network's outputs
through it) and of the network's training, lib.train_feedforward."""
import pytest
import torch
from hypothesis import given, settings, strategies as st

import lib
from lib import protein
from lib.data import ProteinSet


def test_a_balanced_code_has_ten_of_each_sign_in_every_component():
    C = protein.amino_code(balanced=True, seed=3)
    assert C.shape == (20, 12) and bool((C.sum(0) == 0).all()) and int(torch.linalg.matrix_rank(C)) == 12
    assert len({tuple(r) for r in C.tolist()}) == 20
    assert torch.equal(C, protein.amino_code(balanced=True, seed=3))
    assert not torch.equal(C, protein.amino_code(seed=3))


def test_amino_code_properties_and_determinism():
    C = protein.amino_code()
    assert C.shape == (20, 12) and set(C.unique().tolist()) == {-1.0, 1.0}
    dist = (C[:, None, :] != C[None, :, :]).sum(-1) + 12 * torch.eye(20, dtype=torch.long)
    assert int(dist.min()) >= 3 and int(torch.linalg.matrix_rank(C)) == 12
    assert torch.equal(C, protein.amino_code())
    assert not torch.equal(C, protein.amino_code(seed=1))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.text(alphabet=protein.AMINO_ACIDS, min_size=1, max_size=12), min_size=1, max_size=5),
       st.integers(0, 10))
def test_prefix_onehot_times_code_is_the_state_matrix(seqs, code_seed):
    data = ProteinSet(tuple(seqs), tuple("_" * len(s) for s in seqs))
    code = protein.amino_code(seed=code_seed)
    xs, ds = protein.protein_sequences(data, code)
    l = max(len(s) for s in seqs)
    E = protein.prefix_onehot(protein.amino_indices(data), 20, l)
    Xi = lib.state_matrix(xs, l)
    # Xi = E (I_l (x) C)
    assert torch.allclose(E.to_dense() @ torch.block_diag(*[code] * l), Xi, atol=0, rtol=0)
    assert all(bool((d == -1).all()) for d in ds)


def test_prefix_forward_is_the_dense_forward():
    data = ProteinSet(("ACDEFGHIK", "LMNPQ"), ("hhh___eee", "hh___"))
    code = protein.amino_code()
    xs, _ = protein.protein_sequences(data, code)
    l = 9
    E = protein.prefix_onehot(protein.amino_indices(data), 20, l)
    for out_tanh in (True, False):
        net = lib.FeedforwardNet(12, l, 4, seed=1, out_tanh=out_tanh)
        with torch.no_grad():
            net.b.normal_(generator=torch.Generator().manual_seed(2))
            o_dense = net(lib.state_matrix(xs, l))
            o_sparse = protein.prefix_forward(E, code)(net)
        assert torch.allclose(o_sparse, o_dense, rtol=1e-12, atol=1e-12)


def test_targets_are_helix_plus_one():
    data = ProteinSet(("ACD",), ("h_e",))
    _, ds = protein.protein_sequences(data)
    assert ds[0].tolist() == [1.0, -1.0, -1.0]


def test_training_reduces_loss_and_matches_dense_forward():
    data = ProteinSet(("ACDEFGHIK", "LMNPQ", "RSTVWYAC"), ("hhh___eee", "hh___", "__hhhh__"))
    code = protein.amino_code()
    xs, ds = protein.protein_sequences(data, code)
    d = torch.cat(ds)
    l = 9
    E = protein.prefix_onehot(protein.amino_indices(data), 20, l)
    net = lib.FeedforwardNet(12, l, 3, seed=0)
    hist = lib.train_feedforward(net, E, code, d, steps=60, lr=1e-2)
    assert hist[-1] < hist[0]
    with torch.no_grad():
        o = net(lib.state_matrix(xs, l))
        loss = float(((o - d) ** 2).mean())
    # the loss after the last step is below the last recorded one (recorded before that step)
    assert loss <= hist[-1] * 1.05
    assert 0.0 <= protein.accuracy(o, d) <= 1.0


def test_bad_input():
    with pytest.raises(TypeError, match="ProteinSet"):
        protein.protein_sequences(["ACD"])
    with pytest.raises(ValueError, match="20 rows"):
        protein.protein_sequences(ProteinSet(("A",), ("h",)), torch.ones(5, 12))
    with pytest.raises(ValueError, match="dim"):
        protein.amino_code(dim=3)
    with pytest.raises(ValueError, match="more than l"):
        protein.prefix_onehot([torch.tensor([1, 2, 3])], 20, 2)
    with pytest.raises(ValueError, match="non-empty"):
        protein.prefix_onehot([torch.tensor([], dtype=torch.long)], 20, 2)
    with pytest.raises(ValueError, match=r"\[0, 20\)"):
        protein.prefix_onehot([torch.tensor([25])], 20, 2)
    with pytest.raises(ValueError, match="do not fit"):
        E = protein.prefix_onehot([torch.tensor([1, 2])], 20, 2)
        lib.train_feedforward(lib.FeedforwardNet(12, 3, 2), E, protein.amino_code(), torch.ones(2), steps=1)


def test_amino_code_with_a_smaller_span():
    C = protein.amino_code(12, seed=0, span=11)
    assert C.shape == (20, 12) and set(C.unique().tolist()) == {-1.0, 1.0}
    assert int(torch.linalg.matrix_rank(C)) == 11 and torch.equal(C[:, 11], C[:, 0])
    dist = (C[:, None, :] != C[None, :, :]).sum(-1) + 12 * torch.eye(20, dtype=torch.long)
    assert int(dist.min()) >= 3
    assert torch.equal(protein.amino_code(12, seed=0, span=12), protein.amino_code(12, seed=0))
    assert int(torch.linalg.matrix_rank(protein.amino_code(12, seed=3, span=9))) == 9
    with pytest.raises(ValueError, match="span"):
        protein.amino_code(12, span=13)
    with pytest.raises(ValueError, match="span"):
        protein.amino_code(12, span=4)


def test_sgd_training_reduces_loss_and_bad_optimizer():
    data = ProteinSet(("ACDEFGHIK", "LMNPQ"), ("hhh___eee", "hh___"))
    code = protein.amino_code()
    d = torch.cat(protein.protein_sequences(data, code)[1])
    E = protein.prefix_onehot(protein.amino_indices(data), 20, 9)
    net = lib.FeedforwardNet(12, 9, 3, seed=0)
    hist = lib.train_feedforward(net, E, code, d, steps=40, lr=0.1, optimizer="sgd", momentum=0.5)
    assert hist[-1] < hist[0]
    with pytest.raises(ValueError, match="optimizer"):
        lib.train_feedforward(net, E, code, d, steps=1, optimizer="lbfgs")
    with pytest.raises(ValueError, match="momentum"):
        lib.train_feedforward(net, E, code, d, steps=1, optimizer="sgd", momentum=1.0)
