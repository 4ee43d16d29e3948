"""The protein experiment of Sperduti (2015, §4) on the Qian-Sejnowski data.

* :data:`AMINO_ACIDS` and :func:`amino_code` — each of the 20 amino acids as a 12-dimensional
  ±1 vector.  The paper does not give its code; ours is a fixed pseudo-random code
  (``numpy.random.default_rng(seed)``), redrawn until the 20 code words are pairwise at
  Hamming distance >= ``min_distance`` and span ``span`` dimensions (12 by default; with
  ``span = 11`` one component repeats another).  Any injective code lets a network separate
  the amino acids; the code's span changes the numerical ranks of §4.
* :func:`protein_sequences` — the inputs ``(l_q, 12)`` and the ±1 helix targets ``(l_q,)``.
* :func:`prefix_onehot` and :func:`prefix_forward` — the reversed, zero-padded prefixes as a
  sparse one-hot matrix, and the outputs of the feedforward network of §4 (10 tanh hidden units
  over the 12 x 159 prefix) computed through it: the fast path of
  :func:`train_feedforward`, which trains that network.
"""
from __future__ import annotations

import warnings

import numpy as np
import torch

from ._checks import DTYPE, as_tensor, positive_int, positive_real, seed_int
from .data import AMINO_ACIDS, ProteinSet
from .nonlinear_ff import output_unit, readout_z

__all__ = ["train_feedforward", "AMINO_ACIDS", "amino_code", "amino_indices", "protein_sequences", "prefix_onehot",
           "prefix_forward", "accuracy"]


def amino_code(dim: int = 12, seed: int = 0, min_distance: int = 3, max_tries: int = 10_000,
               span: int | None = None, balanced: bool = False) -> torch.Tensor:
    """``(20, dim)`` ±1 code, row i for ``AMINO_ACIDS[i]``; deterministic in ``seed``.

    ``span`` (default ``dim``) is the dimension spanned by the 20 code words.  With
    ``span < dim`` the last ``dim - span`` components are copies of the first ones (a ±1 code
    with ``dim - span`` linear dependencies among its components); the draw is the same as for
    ``span = dim`` and is repeated until the code has rank ``span`` and minimum Hamming
    distance ``min_distance``.  ``balanced=True`` draws every component with ten +1 and ten
    -1 (each component a random permutation of them).  Chapter 9, "The protein experiment",
    evaluates the state size over these codes: the paper states 12 components ±1 and no more.
    """
    dim = positive_int("dim", dim)
    min_distance = positive_int("min_distance", min_distance, minimum=0)
    if dim < 5:
        raise ValueError(f"dim must be >= 5 so that 20 distinct ±1 code words exist with room to spare, got {dim}")
    span = dim if span is None else positive_int("span", span)
    if not 5 <= span <= dim:
        raise ValueError(f"span must lie in [5, dim = {dim}] (the code words span at most dim dimensions), got {span}")
    max_tries = positive_int("max_tries", max_tries)
    rng = np.random.default_rng(seed_int("seed", seed))
    for _ in range(max_tries):
        C = (np.stack([rng.permutation(np.repeat([-1.0, 1.0], 10)) for _ in range(dim)], axis=1) if balanced
             else rng.choice([-1.0, 1.0], size=(20, dim)))
        if span < dim:
            C[:, span:] = C[:, : dim - span]
        dist = (C[:, None, :] != C[None, :, :]).sum(-1) + dim * np.eye(20, dtype=int)
        if dist.min() >= min_distance and np.linalg.matrix_rank(C) == min(20, span):
            return torch.tensor(C, dtype=DTYPE)
    raise ValueError(f"no code with min_distance = {min_distance} found in {max_tries} draws; lower it")


def protein_sequences(data: ProteinSet, code: torch.Tensor | None = None):
    """Inputs (list of ``(l_q, dim)``) and targets (list of ``(l_q,)``, +1 helix ``h``, -1 else)."""
    if not isinstance(data, ProteinSet):
        raise TypeError(f"data must be a lib.data.ProteinSet, got {type(data).__name__}")
    code = amino_code() if code is None else as_tensor("code", code, 2, dtype=DTYPE)
    if code.shape[0] != 20:
        raise ValueError(f"code must have 20 rows (one per amino acid), got {code.shape[0]}")
    idx = {c: i for i, c in enumerate(AMINO_ACIDS)}
    xs = [code[torch.tensor([idx[c] for c in s])] for s in data.sequences]
    ds = [torch.tensor([1.0 if c == "h" else -1.0 for c in lab], dtype=DTYPE) for lab in data.labels]
    return xs, ds


def accuracy(pred: torch.Tensor, target: torch.Tensor) -> float:
    """Fraction of prefixes where ``sign(pred) == target`` (targets ±1)."""
    if not (isinstance(pred, torch.Tensor) and isinstance(target, torch.Tensor)) or pred.shape != target.shape:
        raise ValueError(f"pred and target must be tensors of the same shape, got "
                         f"{getattr(pred, 'shape', type(pred).__name__)} and {getattr(target, 'shape', type(target).__name__)}")
    return float((torch.where(pred >= 0, 1.0, -1.0) == target).double().mean())


def amino_indices(data: ProteinSet) -> list[torch.Tensor]:
    """Each sequence as the ``(l_q,)`` indices of its residues in :data:`AMINO_ACIDS`."""
    idx = {c: i for i, c in enumerate(AMINO_ACIDS)}
    return [torch.tensor([idx[c] for c in s]) for s in data.sequences]


def prefix_onehot(indices: list[torch.Tensor], n_symbols: int, l: int) -> torch.Tensor:
    """Sparse one-hot reversed-prefix matrix E ``(N, l * n_symbols)`` (CSR).

    Row (q, t), column ``k * n_symbols + i`` is 1 when the item at lag k+1 is symbol i; with a
    code matrix C ``(n_symbols, a)``, ``Xi = E (I_l (x) C)`` — so ``Xi W^T = E T`` with the
    ``(l n_symbols, H)`` table ``T = (I (x) C) W^T``: about 60 non-zeros a row instead of 1908
    dense columns (the fast path of training).
    """
    n_symbols, l = positive_int("n_symbols", n_symbols), positive_int("l", l)
    rows, cols = [], []
    r0 = 0
    for q, s in enumerate(indices):
        s = torch.as_tensor(s, dtype=torch.long)
        if s.ndim != 1 or s.numel() == 0:
            raise ValueError(f"indices[{q}] must be a non-empty 1-D index tensor, got shape {tuple(s.shape)}")
        if s.numel() > l:
            raise ValueError(f"indices[{q}] has {s.numel()} items, more than l = {l}")
        if (s < 0).any() or (s >= n_symbols).any():
            raise ValueError(f"indices[{q}] must lie in [0, {n_symbols})")
        n = s.numel()
        t, k = torch.tril_indices(n, n)  # row t, lag k <= t
        rows.append(r0 + t)
        cols.append(k * n_symbols + s[t - k])
        r0 += n
    idx = torch.stack([torch.cat(rows), torch.cat(cols)])
    E = torch.sparse_coo_tensor(idx, torch.ones(idx.shape[1], dtype=DTYPE), (r0, l * n_symbols),
                                check_invariants=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "sparse CSR support is in beta"
        return E.coalesce().to_sparse_csr()


class _SparseMatmul(torch.autograd.Function):
    """``E @ T`` for a fixed CSR ``E`` with the gradient ``E^T @ grad`` (a second CSR product)."""

    @staticmethod
    def forward(ctx, E, Et, T):
        ctx.Et = Et
        return E @ T

    @staticmethod
    def backward(ctx, grad):
        return None, None, ctx.Et @ grad


def prefix_forward(E: torch.Tensor, code: torch.Tensor):
    """The outputs of a feedforward network on every prefix row of ``E``, as a function of the network.

    ``E`` is the :func:`prefix_onehot` matrix ``(N, l n_symbols)``, ``code`` ``(n_symbols, a)``
    the code (float64).  Returns ``forward(model) -> o (N,)`` for a
    :class:`lib.nonlinear_ff.FeedforwardNet` with ``a = code.shape[1]``: the hidden net inputs
    ``Xi W^T + b`` with ``Xi = E (I_l (x) C)`` are computed as ``E [(I (x) C) W^T] + b``
    (identical, see :func:`prefix_onehot`), two sparse products a step (the second, with the
    transpose of E formed once here, in the backward pass), then ``model``'s tanh output.
    The fast path of :func:`lib.training.train_feedforward` (Chapter 9, section "The protein
    experiment (§4)").
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        Et = E.to_sparse_coo().t().coalesce().to_sparse_csr()
    a = code.shape[1]

    def forward(model: torch.nn.Module) -> torch.Tensor:
        T = (model.W.reshape(-1, model.l, a) @ code.T).reshape(model.W.shape[0], -1).T
        net = _SparseMatmul.apply(E, Et, T)                  # Xi W^T: the hidden net inputs
        return output_unit(readout_z(net, model.b, model.w_o, model.b_o), model.out_tanh)

    return forward


def train_feedforward(model: nn.Module, E: torch.Tensor, code: torch.Tensor, d: torch.Tensor, *,
                      steps: int, lr: float = 1e-2, optimizer: str = "adam", momentum: float = 0.9) -> list[float]:
    """Full-batch Adam (or SGD) on ``mean (o - d)^2`` over all prefixes; returns the loss history.

    ``optimizer``: ``"adam"`` (torch's Adam, default betas) or ``"sgd"`` (gradient descent with
    heavy-ball ``momentum`` in [0, 1)); Chapter 9's smallest-k study compares the two.

    ``model`` is a :class:`lib.ff_to_rnn.FeedforwardNet` with ``a = code.shape[1]``;
    ``E`` the :func:`prefix_onehot` matrix; the outputs come from
    :func:`prefix_forward` (the hidden net inputs ``Xi W^T + b`` as
    ``E [(I (x) C) W^T] + b``, two sparse products a step).  d ``(N,)``.  Returns the loss
    before each step, one float per step.  Chapter 9, section "The protein experiment (§4)".
    """
    steps = positive_int("steps", steps)
    lr = positive_real("lr", lr)
    if optimizer not in ("adam", "sgd"):
        raise ValueError(f"optimizer must be 'adam' or 'sgd', got {optimizer!r}")
    if isinstance(momentum, bool) or not isinstance(momentum, (int, float)) or not 0 <= momentum < 1:
        raise ValueError(f"momentum must be a real number in [0, 1), got {momentum!r}")
    code = as_tensor("code", code, 2, dtype=DTYPE)
    d = as_tensor("d", d, 1, dtype=DTYPE)
    n_sym, a = code.shape
    if E.shape[0] != d.shape[0] or E.shape[1] != model.l * n_sym or model.a != a:
        raise ValueError(f"E {tuple(E.shape)}, d {tuple(d.shape)}, code {tuple(code.shape)} and the "
                         f"model (a = {model.a}, l = {model.l}) do not fit together")
    if optimizer == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=lr)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=float(momentum))
    forward = prefix_forward(E, code)
    hist = []
    for _ in range(steps):
        loss = ((forward(model) - d) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        hist.append(loss.item())
    return hist
