"""Linear autoencoders for sequences (Sperduti 2015, Section 2.1).

A set of sequences ``s^q = (x_1^q, ..., x_{l_q}^q)``, ``x_t^q in R^a``, is held as a list of
tensors of shape ``(l_q, a)``.  With ``l = max_q l_q`` and ``s = a l``:

* :func:`state_matrix` builds the data matrix Xi ``(N, s)``, ``N = sum_q l_q``, whose row for
  prefix ``(q, t)`` is the reversed, zero-padded prefix ``[x_t, x_{t-1}, ..., x_1, 0, ..., 0]``;
* :func:`shift_operators` gives ``P_{a,s}`` ``(s, a)`` and ``R_{a,s}`` ``(s, s)`` (optionally
  with forgotten components, the ``R_{a,s/pi}`` of Section 3.1);
* :func:`thin_svd` is the rank-revealing thin SVD ``M = V diag(lam) U^T`` (torch.linalg.svd);
* :func:`fit_sequence_autoencoder` returns the encoder ``y_t = A x_t + B y_{t-1}`` with
  ``A = U^T P_{a,s}`` ``(rho, a)`` and ``B = U^T R_{a,s} U`` ``(rho, rho)``, ``rho = rank Xi``,
  and the decoder ``[x_t; y_{t-1}] = [A^T; B^T] y_t``.

Everything is float64.  Each fast path has a plain reference beside it
(:func:`state_matrix_reference`, :func:`encode_reference`).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ._checks import DTYPE, as_tensor, nonneg_real, positive_int

__all__ = [
    "check_sequences",
    "state_matrix",
    "state_matrix_reference",
    "shift_operators",
    "autoencoder_matrices",
    "thin_svd",
    "SequenceAutoencoder",
    "fit_sequence_autoencoder",
    "encode",
    "encode_reference",
    "pad_sequences",
]


def check_sequences(sequences, name: str = "sequences", features: int | None = None) -> list[torch.Tensor]:
    """Validate a non-empty list of ``(l_q, a)`` tensors with one common ``a`` (and ``l_q >= 1``).

    The sequence sets are those of Chapter 7, section "sec-ae-system"; every function of this module,
    of :mod:`lib.linear_ff` and of :mod:`lib.nonlinear_ff` that takes sequences (Chapters 7-9)
    checks them with it first.

    Returns them as float64 tensors.  ``features`` (if given) is the required ``a``.
    """
    if isinstance(sequences, torch.Tensor):
        if sequences.ndim != 3:
            raise ValueError(f"{name} as one tensor must have shape (n, l, a), got {tuple(sequences.shape)}")
        sequences = list(sequences)
    if not isinstance(sequences, (list, tuple)) or len(sequences) == 0:
        raise ValueError(f"{name} must be a non-empty list of (l_q, a) tensors, got {type(sequences).__name__} "
                         f"of length {len(sequences) if hasattr(sequences, '__len__') else '?'}")
    out = []
    for q, s in enumerate(sequences):
        s = as_tensor(f"{name}[{q}]", s, 2, dtype=DTYPE)
        if s.shape[0] == 0:
            raise ValueError(f"{name}[{q}] is an empty sequence (length 0); every sequence needs >= 1 item")
        if features is None:
            features = s.shape[1]
        if s.shape[1] != features or features == 0:
            raise ValueError(f"{name}[{q}] has {s.shape[1]} features per item, expected {features} "
                             f"(all items of all sequences must share one size a >= 1)")
        out.append(s)
    return out


def _lengths(seqs: list[torch.Tensor]) -> list[int]:
    return [int(s.shape[0]) for s in seqs]


def state_matrix(sequences, max_length: int | None = None) -> torch.Tensor:
    """Xi ``(N, a*l)``: one row per prefix, ``[x_t, x_{t-1}, ..., x_1, 0, ...]``, sequences stacked.

    Derived in Chapter 7, section "sec-ae-system" (the data matrix Xi); section "sec-ae-reconstruct"
    checks it against :func:`state_matrix_reference`.

    ``max_length`` (l) defaults to the longest sequence and must be >= it.  Fast path: one
    vectorised copy per lag over all sequences at once (l copies in all).
    """
    seqs = check_sequences(sequences)
    lens = _lengths(seqs)
    l = max(lens) if max_length is None else positive_int("max_length", max_length)
    if l < max(lens):
        raise ValueError(f"max_length must be >= the longest sequence ({max(lens)}), got {l}")
    a = seqs[0].shape[1]
    X = torch.cat(seqs)  # (N, a)
    N = X.shape[0]
    pos = torch.cat([torch.arange(n) for n in lens])  # position t-1 of each row in its sequence
    Xi = torch.zeros(N, a * l, dtype=DTYPE)
    rows = torch.arange(N)
    for k in range(max(lens)):
        m = pos >= k
        Xi[m, k * a:(k + 1) * a] = X[rows[m] - k]
    return Xi


def state_matrix_reference(sequences, max_length: int | None = None) -> torch.Tensor:
    """Plain loop version of :func:`state_matrix` (row by row, item by item).

    Used in Chapter 7, section "sec-ae-reconstruct", to check :func:`state_matrix`.
    """
    seqs = check_sequences(sequences)
    l = max(_lengths(seqs)) if max_length is None else max_length
    a = seqs[0].shape[1]
    rows = []
    for s in seqs:
        for t in range(s.shape[0]):
            r = torch.zeros(a * l, dtype=DTYPE)
            for k in range(t + 1):
                r[k * a:(k + 1) * a] = s[t - k]
            rows.append(r)
    return torch.stack(rows)


def shift_operators(a: int, s: int, forget=()) -> tuple[torch.Tensor, torch.Tensor]:
    """``P_{a,s}`` ``(s, a)`` and ``R_{a,s}`` ``(s, s)``; with ``forget``, ``R_{a,s/pi}``.

    Derived in Chapter 7, sections "sec-ae-system" and "sec-ae-operators"; the forgetting shift
    R_{a,s/pi} is Chapter 8, section "sec-theorem31".

    ``P x`` puts ``x`` in the first a components; ``R v`` shifts ``v`` down by a positions
    (``(R v)_i = v_{i-a}``, zeros in the first a).  ``forget`` lists 0-based components of the
    shifted vector that ``R_{a,s/pi}`` additionally annihilates (the paper's
    ``R_{a,s} - 1^{p+a,p}`` for each forgotten ``p + a``).
    """
    a = positive_int("a", a)
    s = positive_int("s", s)
    if s % a != 0:
        raise ValueError(f"s must be a multiple of a = {a}, got s = {s}")
    P = torch.zeros(s, a, dtype=DTYPE)
    P[:a] = torch.eye(a, dtype=DTYPE)
    R = torch.zeros(s, s, dtype=DTYPE)
    if s > a:
        R[a:, :-a] = torch.eye(s - a, dtype=DTYPE)
    for i in forget:
        if not 0 <= int(i) < s:
            raise ValueError(f"forget indices must lie in [0, {s}), got {i}")
        R[int(i)] = 0.0
    return P, R


def thin_svd(M: torch.Tensor, rank: int | None = None, rtol: float | None = None):
    """Thin SVD ``M = V diag(lam) U^T`` truncated to the numerical rank (or to ``rank``).

    The thin SVD Xi = V Lambda U^T of Chapter 7, section "sec-ae-system"; Chapter 9, section
    "sec-protein", checks its rank threshold on the protein network.

    Returns ``(V (m, rho), lam (rho,), U (n, rho))``.  The numerical rank counts singular
    values above ``rtol * lam_max`` with ``rtol = max(m, n) * eps`` by default (numpy's
    ``matrix_rank`` rule).  ``rank`` overrides it (truncation to the first ``rank`` values).
    """
    M = as_tensor("M", M, 2, dtype=DTYPE)
    if M.numel() == 0:
        raise ValueError(f"M must be non-empty, got shape {tuple(M.shape)}")
    V, lam, Uh = torch.linalg.svd(M, full_matrices=False)
    if rtol is not None:
        rtol = nonneg_real("rtol", rtol)
    if rank is None:
        tol = (max(M.shape) * torch.finfo(DTYPE).eps if rtol is None else float(rtol)) * float(lam[0])
        rank = int((lam > tol).sum())
    else:
        rank = positive_int("rank", rank, minimum=0)
        if rank > lam.shape[0]:
            raise ValueError(f"rank must be <= min(M.shape) = {lam.shape[0]}, got {rank}")
    return V[:, :rank], lam[:rank], Uh[:rank].T


@dataclass
class SequenceAutoencoder:
    """The linear autoencoder of eqs. (1)-(2): encoder ``y_t = A x_t + B y_{t-1}``, decoder
    ``[x_t; y_{t-1}] = [A^T; B^T] y_t``.

    Derived in Chapter 7, sections "sec-ae-system" and "sec-ae-reconstruct".

    A ``(rho, a)``, B ``(rho, rho)``, U ``(a*l, rho)`` (the right singular vectors, Omega = U),
    lam ``(rho,)`` the singular values of Xi; ``a``, ``l`` the item size and window length.
    """

    A: torch.Tensor
    B: torch.Tensor
    U: torch.Tensor
    lam: torch.Tensor
    a: int
    l: int

    @property
    def state_size(self) -> int:
        return int(self.A.shape[0])

    def encode(self, sequences) -> list[torch.Tensor]:
        """States ``(l_q, rho)`` of every sequence (y_0 = 0)."""
        return encode(self.A, self.B, sequences)

    def decode(self, y: torch.Tensor, steps: int) -> torch.Tensor:
        """Run the decoder ``steps`` times from a state ``y`` ``(rho,)``: returns ``(steps, a)``
        holding ``x_t, x_{t-1}, ..., x_{t-steps+1}`` (the reversed prefix)."""
        y = as_tensor("y", y, 1, dtype=DTYPE)
        if y.shape[0] != self.state_size:
            raise ValueError(f"y must have {self.state_size} entries (the state size), got {y.shape[0]}")
        steps = positive_int("steps", steps)
        out = []
        for _ in range(steps):
            out.append(self.A.T @ y)
            y = self.B.T @ y
        return torch.stack(out)


def fit_sequence_autoencoder(sequences, max_length: int | None = None, rank: int | None = None,
                             rtol: float | None = None) -> SequenceAutoencoder:
    """The closed-form linear autoencoder of a set of sequences (Sperduti 2006; 2015, §2.1).

    Derived in Chapter 7, sections "sec-ae-system" and "sec-ae-reconstruct".

    Xi = V Lambda U^T (thin, numerical rank rho), A = U^T P_{a,s}, B = U^T R_{a,s} U.
    ``rank`` < rho truncates to the leading singular vectors (an approximate memory).
    """
    seqs = check_sequences(sequences)
    Xi = state_matrix(seqs, max_length)
    a = seqs[0].shape[1]
    l = Xi.shape[1] // a
    _, lam, U = thin_svd(Xi, rank=rank, rtol=rtol)
    A, B = autoencoder_matrices(U, a)
    return SequenceAutoencoder(A, B, U, lam, a, l)


def autoencoder_matrices(U: torch.Tensor, a: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``A = U^T P_{a,s}`` and ``B = U^T R_{a,s} U`` without forming P or R (U is ``(s, rho)``).

    Chapter 7, section "sec-ae-operators" says what P and R do.
    """
    U = as_tensor("U", U, 2, dtype=DTYPE)
    a = positive_int("a", a)
    if U.shape[0] % a:
        raise ValueError(f"U must have a multiple of a = {a} rows, got {U.shape[0]}")
    A = U[:a].T.clone()
    RU = torch.zeros_like(U)
    RU[a:] = U[:-a]
    return A, U.T @ RU


def pad_sequences(sequences) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack ``(l_q, a)`` sequences into ``(n, l, a)`` zero padded, and the ``(n, l)`` bool mask.

    Used in Chapter 8, section "sec-vandermonde-vs-sperduti", to run the Vandermonde RNN on
    sequences of different lengths (the mask picks the real items).
    """
    seqs = check_sequences(sequences)
    lens = _lengths(seqs)
    X = torch.zeros(len(seqs), max(lens), seqs[0].shape[1], dtype=DTYPE)
    mask = torch.zeros(len(seqs), max(lens), dtype=torch.bool)
    for q, s in enumerate(seqs):
        X[q, :lens[q]] = s
        mask[q, :lens[q]] = True
    return X, mask


def encode(A: torch.Tensor, B: torch.Tensor, sequences) -> list[torch.Tensor]:
    """Run ``y_t = A x_t + B y_{t-1}`` (y_0 = 0) on all sequences at once (batched over sequences).

    Derived in Chapter 7, section "sec-ae-system" (the encoder); section "sec-ae-reconstruct" checks
    its states against Xi U.

    A ``(rho, a)``, B ``(rho, rho)``; returns a list of ``(l_q, rho)`` state tensors.
    """
    A = as_tensor("A", A, 2, dtype=DTYPE)
    B = as_tensor("B", B, 2, dtype=DTYPE)
    if B.shape != (A.shape[0], A.shape[0]):
        raise ValueError(f"B must be ({A.shape[0]}, {A.shape[0]}) to match A {tuple(A.shape)}, got {tuple(B.shape)}")
    seqs = check_sequences(sequences, features=A.shape[1])
    X, _ = pad_sequences(seqs)
    n, l, _ = X.shape
    Y = torch.zeros(n, l, A.shape[0], dtype=DTYPE)
    y = torch.zeros(n, A.shape[0], dtype=DTYPE)
    inp = X @ A.T
    for t in range(l):
        y = inp[:, t] + y @ B.T
        Y[:, t] = y
    return [Y[q, :s.shape[0]] for q, s in enumerate(seqs)]


def encode_reference(A: torch.Tensor, B: torch.Tensor, sequences) -> list[torch.Tensor]:
    """Plain per-sequence, per-step loop version of :func:`encode`.

    Used in Chapter 7, section "sec-ae-reconstruct", to check :func:`encode`.
    """
    seqs = check_sequences(sequences, features=A.shape[1])
    out = []
    for s in seqs:
        y = torch.zeros(A.shape[0], dtype=DTYPE)
        ys = []
        for x in s:
            y = A @ x + B @ y
            ys.append(y)
        out.append(torch.stack(ys))
    return out


def random_sequences(n: int, max_len: int, a: int, generator: torch.Generator) -> list[torch.Tensor]:
    """``n`` sequences of standard Gaussian ``a``-dimensional items, lengths uniform on 1..max_len.

    The first sequence has the full length ``max_len``, so the set always reaches it (the state
    matrices of Chapters 8 and 9 then have ``a * max_len`` columns). Lengths and items are drawn
    from ``generator`` in that order: lengths first, then each sequence's items (float64).
    """
    n, max_len, a = positive_int("n", n), positive_int("max_len", max_len), positive_int("a", a)
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    lengths = [int(v) for v in torch.randint(1, max_len + 1, (n,), generator=generator)]
    lengths[0] = max_len
    return [torch.randn(m, a, generator=generator, dtype=DTYPE) for m in lengths]
