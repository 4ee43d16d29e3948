"""The smallest memory that keeps a network's predictions (Sperduti 2015, §4, Fig. 5).

The §3.2 RNN of the protein network has ``rho~`` memory units; the paper reads off the
smallest k for which the RNN built from the leading k singular values keeps every ±1
prediction of the feedforward network.  Reading (ii) of Chapter 9, section "sec-smallest-k":
the exact memory states projected on the leading k singular vectors, ``o_k = readout(Y[:, :k]
G[:, :k]^T)``.

* :func:`projected_scan` — the discrepancy at *every* k, and the k from which each prediction
  settles.
* :func:`smallest_kept_k` — the smallest k that keeps every prediction, found top-down.

Both accumulate the hidden net inputs one singular direction at a time and read them out with
the tanh readout of :mod:`lib.nonlinear_ff`.
"""
from __future__ import annotations

import torch

from ._checks import DTYPE, as_tensor, positive_int
from .nonlinear_ff import MemoryRNN, readout_z

__all__ = ["projected_scan", "smallest_kept_k"]


def _check_scan(rnn, Y, reference):
    if not isinstance(rnn, MemoryRNN):
        raise TypeError(f"rnn must be a MemoryRNN, got {type(rnn).__name__}")
    Y = as_tensor("Y", Y, 2, dtype=DTYPE)
    if Y.shape[1] != rnn.state_size:
        raise ValueError(f"Y must hold the exact states of all {rnn.state_size} memory units, got {Y.shape[1]} columns")
    reference = as_tensor("reference", reference, 1, dtype=DTYPE)
    if reference.shape[0] != Y.shape[0] or not bool((reference.abs() == 1).all()):
        raise ValueError(f"reference must hold one ±1 prediction per row of Y ({Y.shape[0]}), "
                         f"got shape {tuple(reference.shape)}")
    return Y, reference


def _z(rnn: MemoryRNN, net: torch.Tensor) -> torch.Tensor:
    """The output pre-activation of ``rnn`` for hidden net inputs ``net`` ``(..., H)``."""
    return readout_z(net, rnn.b, rnn.w_o, rnn.b_o)


def _projected_z(rnn: MemoryRNN, net0: torch.Tensor, Y: torch.Tensor, k0: int, k1: int) -> torch.Tensor:
    """Output pre-activations ``(N, k1 - k0)`` for k = k0+1..k1 given the net input at k0."""
    terms = Y[:, k0:k1, None] * rnn.G.T[None, k0:k1, :]
    return _z(rnn, net0[:, None, :] + terms.cumsum(1))


def _disagrees(z: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Where the sign of the output differs from the ±1 ``reference`` (broadcast against z)."""
    return torch.where(z >= 0, 1.0, -1.0) != reference


def projected_scan(rnn: MemoryRNN, Y: torch.Tensor, reference: torch.Tensor, k_min: int = 0,
                   chunk: int = 64):
    """Fig. 5, reading (ii), at *every* k: the outputs from the exact states projected on the
    leading k singular vectors, ``o_k = readout(Y[:, :k] G[:, :k]^T)``, for k = k_min..rho.

    ``Y`` ``(N, rho)`` are the exact memory states (``info['states']`` of
    :func:`lib.nonlinear_ff.general_ff_to_rnn`), ``reference`` ``(N,)`` the ±1 predictions to
    keep.  Returns ``nd`` ``(rho - k_min + 1,)``, the fraction of predictions whose sign differs
    at each k, and ``settle`` ``(N,)``: for each prediction the smallest k >= k_min from which
    its sign agrees with ``reference`` at every k up to rho.  The net inputs are accumulated one singular
    direction at a time (``chunk`` directions per batch), so the scan costs about one readout
    per k.  Chapter 9, section "sec-smallest-k".
    """
    Y, reference = _check_scan(rnn, Y, reference)
    rho = rnn.state_size
    k_min = positive_int("k_min", k_min, minimum=0)
    if k_min > rho:
        raise ValueError(f"k_min must be <= the state size {rho}, got {k_min}")
    chunk = positive_int("chunk", chunk)
    net = Y[:, :k_min] @ rnn.G[:, :k_min].T
    dis0 = _disagrees(_z(rnn, net), reference)
    nd = [float(dis0.double().mean())]
    last = torch.where(dis0, k_min, k_min - 1)
    for k0 in range(k_min, rho, chunk):
        k1 = min(rho, k0 + chunk)
        z = _projected_z(rnn, net, Y, k0, k1)
        dis = _disagrees(z, reference[:, None])
        nd.extend(dis.double().mean(0).tolist())
        ks = torch.arange(k0 + 1, k1 + 1)
        last = torch.maximum(last, torch.where(dis, ks, k_min - 1).amax(1))
        net = net + Y[:, k0:k1] @ rnn.G[:, k0:k1].T
    return torch.tensor(nd, dtype=DTYPE), last + 1


def smallest_kept_k(rnn: MemoryRNN, Y: torch.Tensor, reference: torch.Tensor, chunk: int = 32):
    """The smallest k from which reading (ii) keeps every prediction for all k up to rho,
    found top-down (only the k above the answer, plus one chunk, are evaluated).

    Returns ``(k_star, flipped)``: ``flipped`` holds the indices of the predictions that
    disagree with ``reference`` at ``k_star - 1`` (empty when ``k_star == 0``).  Same inputs as
    :func:`projected_scan`, which it agrees with (``k_star == settle.max()``).  Chapter 9,
    section "sec-smallest-k".
    """
    Y, reference = _check_scan(rnn, Y, reference)
    chunk = positive_int("chunk", chunk)
    k1 = rnn.state_size
    while k1 > 0:
        k0 = max(0, k1 - chunk)
        net = Y[:, :k0] @ rnn.G[:, :k0].T
        z = torch.cat([_z(rnn, net)[:, None], _projected_z(rnn, net, Y, k0, k1)], 1)
        dis = _disagrees(z, reference[:, None])   # columns k = k0..k1
        bad = dis.any(0).nonzero().flatten()
        if bad.numel():
            k_bad = k0 + int(bad[-1])
            return k_bad + 1, dis[:, k_bad - k0].nonzero().flatten()
        k1 = k0
    return 0, torch.zeros(0, dtype=torch.long)
