"""What a trained gated RNN (eq. 2) computes: its function read off its weights.

Used in Chapter 11, sections "sec-teacher-function", "sec-teacher-zeros" and "sec-teacher-b2".

A gated RNN's output is a quadratic form of its state, y_i = h^T S_i h with the symmetric
kernel S_i = sym(sum_o D_io W_out_m[o] W_out_x[o]^T) (App. B.2, eq. 20, over every row), and
each state is a sum of quadratic forms of the inputs, h_n,t = sum_s lam_n^(t-s) x~_s^T A_n x~_s
with A_n = sym(W_in_m[n] W_in_x[n]^T) and x~ = (x, 1).  Split the neurons into memory neurons
(lam near 1: h_n,t = sum_{s<=t} of the form) and input neurons (lam near 0: the form of x_t).
The part of y_i that multiplies the accumulated memory with the current input is then the
bilinear form

    y_i,t  ~  sum_{s<=t} mono(x_s)^T K_i mono(x_t),   K_i = 2 Phi_M^T S_i[M, Q] Phi_Q,

where mono(x) lists the P = (d+1)(d+2)/2 monomials of degree <= 2 of x (the quadratic
monomials of x~) and the rows of Phi are the neurons' forms in those monomials.  The teacher,
causal linear attention, has exactly this form with memory monomials of degree 2 (v k^T) and
input monomials of degree 1 (q): its K_i has a memory side of rank d(d+1)/2 and an input side
of rank d, the compact construction of Chapter 10.  The coefficients are unique, so K_i can be
compared with the teacher's without sampling.
"""
from __future__ import annotations

from itertools import combinations_with_replacement

import torch

from ._checks import as_tensor, positive_real
from .gated import GatedLinearRNN

__all__ = ["monomials", "form_coefficients", "gating_kernels", "neuron_groups", "function_kernels",
           "outside_share", "attention_function_kernel", "side_spectra", "numerical_rank", "degree_share", "kernel_distance",
           "compress_to_construction", "removal_changes", "removal_changes_reference", "zero_weights", "merge_test", "split_row", "gating_in_rows",
           "embed_in_student", "fine_tune",
           "FLOAT32_RANK_TOL", "ZERO"]

# A kernel direction of relative size sigma carries sigma^2 of the output's power; the students
# were trained in float32, whose unit round-off is 2^-24: a direction whose share of the power is
# below that, sigma < 2^-12 ~ 2.4e-4, is below what their float32 training could resolve.
FLOAT32_RANK_TOL = 2.0 ** -12
# "entirely zero" for weights trained in float32: below 1e-30, far under every weight that
# carries function (~1e-1) and near float32's underflow (normal numbers end at 1.2e-38)
ZERO = 1e-30


def _model(name: str, model) -> GatedLinearRNN:
    if not isinstance(model, GatedLinearRNN):
        raise TypeError(f"{name} must be a lib.GatedLinearRNN, got {type(model).__name__}")
    if not model.append_one:
        raise ValueError(f"{name} must append the constant 1 to its input (append_one=True): the input "
                         "neurons' degree-1 forms read it")
    return model


def monomials(d: int) -> tuple[list[tuple[int, int]], torch.Tensor]:
    """The quadratic monomials of x~ = (x, 1), x in R^d: index pairs (a, b), a <= b, in the order
    of ``combinations_with_replacement`` (index d is the constant 1), and their degree in x (2, 1
    or 0), a long tensor.  Chapter 11, section "sec-teacher-function"."""
    if isinstance(d, bool) or not isinstance(d, int) or d < 1:
        raise ValueError(f"d must be an int >= 1, got {d!r}")
    pairs = list(combinations_with_replacement(range(d + 1), 2))
    return pairs, torch.tensor([(a < d) + (b < d) for a, b in pairs])


def form_coefficients(A: torch.Tensor) -> torch.Tensor:
    """Monomial coefficients of the quadratic forms x~^T A_n x~: A (n, m, m) -> (n, P), P =
    m(m+1)/2 in the order of :func:`monomials` (x_a x_b, a < b, gets A_ab + A_ba).
    Chapter 11, section "sec-teacher-function"."""
    A = as_tensor("A", A, 3)
    n, m, m2 = A.shape
    if m != m2:
        raise ValueError(f"A must have shape (n, m, m), got {tuple(A.shape)}")
    pairs = list(combinations_with_replacement(range(m), 2))
    a = torch.tensor([p[0] for p in pairs])
    b = torch.tensor([p[1] for p in pairs])
    return torch.where(a == b, A[:, a, b], A[:, a, b] + A[:, b, a])


def gating_kernels(model) -> torch.Tensor:
    """S_i = sym(sum_o D_io W_out_m[o] W_out_x[o]^T): the output gating and readout as one
    symmetric kernel per output (App. B.2, eq. 20, over every row), (d_out, n, n), float64.
    Chapter 11, section "sec-teacher-function"."""
    model = _model("model", model)
    Wm, Wx, D = (w.detach().double() for w in (model.W_out_m, model.W_out_x, model.D))
    M = torch.einsum("io,oa,ob->iab", D, Wm, Wx)
    return 0.5 * (M + M.transpose(1, 2))


def neuron_groups(model, lam_one: float, lam_zero: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(memory, input): boolean masks of the neurons with lam >= lam_one and lam <= lam_zero.
    Chapter 11, section "sec-teacher-function"."""
    model = _model("model", model)
    lam_one = positive_real("lam_one", lam_one, upper=1.0, upper_name="1")
    lam_zero = positive_real("lam_zero", lam_zero, upper=1.0, upper_name="1")
    if not lam_zero < lam_one:
        raise ValueError(f"lam_zero must be below lam_one, got {lam_zero} and {lam_one}")
    lam = model.lam.detach()
    return lam >= lam_one, lam <= lam_zero


def function_kernels(model, memory: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
    """The memory x input kernels K_i = 2 Phi_M^T S_i[M, Q] Phi_Q (module docstring) of
    ``model`` for the disjoint neuron masks ``memory`` and ``inputs``: (d_out, P, P) float64, rows
    the memory monomials, columns the input monomials (:func:`monomials`).
    Chapter 11, section "sec-teacher-function"."""
    model = _model("model", model)
    memory, inputs = _masks(model, memory, inputs)
    a, b = model.W_in_m.detach().double(), model.W_in_x.detach().double()
    Phi = form_coefficients(0.5 * (a[:, :, None] * b[:, None, :] + b[:, :, None] * a[:, None, :]))   # (n, P)
    S = gating_kernels(model)
    return 2 * torch.einsum("np,inm,mq->ipq", Phi[memory], S[:, memory][:, :, inputs], Phi[inputs])


def _masks(model, memory, inputs):
    n = model.W_in_m.shape[0]
    for name, mask in (("memory", memory), ("inputs", inputs)):
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.shape != (n,):
            raise ValueError(f"{name} must be a boolean tensor of shape ({n},), got "
                             f"{getattr(mask, 'dtype', type(mask).__name__)} {tuple(getattr(mask, 'shape', ()))}")
    if (memory & inputs).any():
        raise ValueError("memory and inputs must be disjoint neuron masks")
    return memory, inputs


def outside_share(model, memory: torch.Tensor, inputs: torch.Tensor, x: torch.Tensor) -> float:
    """How much of the output on the sequences ``x`` is not memory x input: ||y - y_MQ|| / ||y||,
    with y_MQ,i = 2 h_M^T S_i[M, Q] h_Q the output with every other block of the gating kernels
    (memory x memory, input x input, anything touching a neuron of neither group) removed.
    Measured on data: the other blocks' coefficients are not unique (a quartic monomial has
    several products of quadratic ones), their function is.  Chapter 11, section "sec-teacher-function"."""
    model = _model("model", model)
    memory, inputs = _masks(model, memory, inputs)
    x = as_tensor("x", x, 3, dtype=model.W_in_m.dtype)
    with torch.no_grad():
        H = model.hidden_states(x).double()
        y = model(x).double()
        S = gating_kernels(model)
        y_mq = 2 * torch.einsum("btn,inm,btm->bti", H[..., memory], S[:, memory][:, :, inputs], H[..., inputs])
    return float((y - y_mq).norm() / y.norm())


def attention_function_kernel(W_V, W_K, W_Q) -> torch.Tensor:
    """K_i of causal linear self-attention y_t = sum_{s<=t} (W_V x_s)(W_K x_s)^T (W_Q x_t): the
    memory forms sym(W_V[i]^T W_K[j]) (degree 2) times the input forms W_Q[j] . x (degree 1),
    summed over j; (d, P, P) float64 in the monomials of :func:`monomials`.
    Chapter 11, section "sec-teacher-function"."""
    W_V, W_K, W_Q = (as_tensor(n, w, 2, dtype=torch.float64) for n, w in (("W_V", W_V), ("W_K", W_K), ("W_Q", W_Q)))
    d = W_V.shape[1]
    if W_K.shape[1] != d or W_Q.shape[1] != d or W_K.shape[0] != W_Q.shape[0]:
        raise ValueError(f"W_V, W_K, W_Q must read the same d inputs and W_K, W_Q have as many rows, got "
                         f"{tuple(W_V.shape)}, {tuple(W_K.shape)}, {tuple(W_Q.shape)}")
    m = d + 1
    V = torch.zeros(W_V.shape[0], m, dtype=torch.float64)
    V[:, :d] = W_V
    Kp = torch.zeros(W_K.shape[0], m, dtype=torch.float64)
    Kp[:, :d] = W_K
    Q = torch.zeros(W_Q.shape[0], m, dtype=torch.float64)
    Q[:, :d] = W_Q
    one = torch.zeros(m, dtype=torch.float64)
    one[d] = 1.0
    mem = torch.einsum("ia,jb->ijab", V, Kp)
    mem = form_coefficients((0.5 * (mem + mem.transpose(2, 3))).reshape(-1, m, m)).reshape(V.shape[0], Kp.shape[0], -1)
    inp = form_coefficients(0.5 * (Q[:, :, None] * one[None, None, :] + one[None, :, None] * Q[:, None, :]))
    return torch.einsum("ijp,jq->ipq", mem, inp)


def side_spectra(K: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Singular values of the memory side (rows: memory monomials; columns: output x input
    monomial) and of the input side of the kernels K (d_out, P, P), each divided by its largest.
    Chapter 11, section "sec-teacher-function"."""
    K = as_tensor("K", K, 3, dtype=torch.float64)
    d_out, P, P2 = K.shape
    if P != P2:
        raise ValueError(f"K must have shape (d_out, P, P), got {tuple(K.shape)}")
    mem = torch.linalg.svdvals(K.permute(1, 0, 2).reshape(P, -1))
    inp = torch.linalg.svdvals(K.permute(2, 0, 1).reshape(P, -1))
    if mem[0] == 0:                                   # no memory x input part at all: rank 0
        return mem, inp
    return mem / mem[0], inp / inp[0]


def numerical_rank(sv: torch.Tensor, tol: float = FLOAT32_RANK_TOL) -> int:
    """The number of relative singular values ``sv`` above ``tol`` (default
    :data:`FLOAT32_RANK_TOL`).  Chapter 11, section "sec-teacher-function"."""
    tol = positive_real("tol", tol, upper=1.0, upper_name="1")
    return int((as_tensor("sv", sv, 1) > tol).sum())


def degree_share(K: torch.Tensor, side: str, degree: int) -> float:
    """The norm of K outside the monomials of ``degree`` on ``side`` ("memory": rows, "input":
    columns), relative to the whole.  Chapter 11, section "sec-teacher-function"."""
    K = as_tensor("K", K, 3, dtype=torch.float64)
    if side not in ("memory", "input"):
        raise ValueError(f"side must be 'memory' or 'input', got {side!r}")
    if degree not in (0, 1, 2):
        raise ValueError(f"degree must be 0, 1 or 2, got {degree!r}")
    P = K.shape[1]
    d = next(d for d in range(1, P) if (d + 1) * (d + 2) // 2 == P)
    _, deg = monomials(d)
    off = deg != degree
    part = K[:, off, :] if side == "memory" else K[:, :, off]
    return float(part.norm() / K.norm()) if K.norm() > 0 else 1.0      # an empty kernel has no such degree


def kernel_distance(K: torch.Tensor, K_ref: torch.Tensor) -> float:
    """Mean over outputs of ||K_i - K_ref_i|| / ||K_ref_i||.  Chapter 11, section "sec-teacher-function"."""
    K = as_tensor("K", K, 3, dtype=torch.float64)
    K_ref = as_tensor("K_ref", K_ref, 3, dtype=torch.float64)
    if K.shape != K_ref.shape:
        raise ValueError(f"K and K_ref must have one shape, got {tuple(K.shape)} and {tuple(K_ref.shape)}")
    return float(((K - K_ref).flatten(1).norm(dim=1) / K_ref.flatten(1).norm(dim=1)).mean())


def compress_to_construction(K: torch.Tensor) -> GatedLinearRNN:
    """The exact compact network that computes the degree-2 x degree-1 part of the kernels K
    (d_out, P, P): d(d+1)/2 memory neurons with lam exactly 1, one per monomial x_a x_b
    (W_in_m = e_a, W_in_x = e_b), d input neurons with lam exactly 0 holding x_c (W_in_x reads the
    constant 1), and d_out * d output-gating rows, row (i, c) multiplying the memory neurons read
    with K_i[degree 2, x_c] by the input neuron c.  Every other part of K is dropped.
    Chapter 11, section "sec-teacher-function"."""
    K = as_tensor("K", K, 3, dtype=torch.float64)
    d_out, P, _ = K.shape
    d = next((d for d in range(1, P) if (d + 1) * (d + 2) // 2 == P), None)
    if d is None or K.shape[2] != P:
        raise ValueError(f"K must have shape (d_out, P, P) with P = (d+1)(d+2)/2, got {tuple(K.shape)}")
    pairs, deg = monomials(d)
    mem = [k for k in range(P) if deg[k] == 2]
    lin = [k for k in range(P) if deg[k] == 1]           # (c, d): x_c times the constant
    n_kv, n_h = len(mem), len(mem) + d
    W_in_m = torch.zeros(n_h, d + 1, dtype=torch.float64)
    W_in_x = torch.zeros(n_h, d + 1, dtype=torch.float64)
    lam = torch.zeros(n_h, dtype=torch.float64)
    for n, k in enumerate(mem):
        a, b = pairs[k]
        W_in_m[n, a], W_in_x[n, b], lam[n] = 1.0, 1.0, 1.0
    for c in range(d):
        W_in_m[n_kv + c, c], W_in_x[n_kv + c, d] = 1.0, 1.0
    W_out_m = torch.zeros(d_out * d, n_h, dtype=torch.float64)
    W_out_x = torch.zeros(d_out * d, n_h, dtype=torch.float64)
    D = torch.zeros(d_out, d_out * d, dtype=torch.float64)
    for i in range(d_out):
        for c, k in enumerate(lin):
            r = i * d + c
            W_out_m[r, :n_kv] = K[i, mem, k]
            W_out_x[r, n_kv + pairs[k][0]] = 1.0
            D[i, r] = 1.0
    return GatedLinearRNN.from_weights(W_in_m, W_in_x, lam, W_out_m, W_out_x, D)


def removal_changes(model, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The relative change of the output on the sequences ``x`` when each hidden neuron (its input
    gating rows zeroed) and each output-gating row (its readout column zeroed) is removed alone:
    (n_hidden,), (n_gate,) float64.  Chapter 11, sections "sec-teacher-scores" and "sec-teacher-zeros".

    The fast path: the states once, and each removal as its exact change of the readout (a neuron
    whose input is zero has h_n = 0 at every step, which changes the two output-gate products by
    rank-one terms); :func:`removal_changes_reference` rebuilds the network for each removal."""
    model = _model("model", model)
    x = as_tensor("x", x, 3, dtype=model.W_in_m.dtype)
    with torch.no_grad():
        H = model.hidden_states(x).double().reshape(-1, model.W_in_m.shape[0])      # (BT, n)
        Wm, Wx, D = (w.detach().double() for w in (model.W_out_m, model.W_out_x, model.D))
        o_m, o_x = H @ Wm.T, H @ Wx.T                                               # (BT, g)
        prod = o_m * o_x
        ref = (prod @ D.T).norm()
        # removing neuron n changes prod by h_n (h_n Wm[:, n] Wx[:, n] - o_x Wm[:, n] - o_m Wx[:, n]), and
        # the output by that times D^T: every n at once, (BT, n, d_out)
        g, n = Wm.shape
        A = (o_x @ (Wm[:, :, None] * D.T[:, None, :]).reshape(g, -1)).reshape(H.shape[0], n, -1)
        B = (o_m @ (Wx[:, :, None] * D.T[:, None, :]).reshape(g, -1)).reshape(H.shape[0], n, -1)
        C = (Wm * Wx).T @ D.T                                                       # (n, d_out)
        h = H[:, :, None]
        hidden = (h * (h * C[None] - A - B)).pow(2).sum((0, 2)).sqrt() / ref
        gate = prod.norm(dim=0) * D.norm(dim=0) / ref
    return hidden, gate


def removal_changes_reference(model, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`removal_changes` the plain way: the network rebuilt with each neuron or row removed,
    and its output compared with the original's.  Chapter 11, section "sec-teacher-zeros" (the
    reference its fast path is tested against)."""
    model = _model("model", model)
    x = as_tensor("x", x, 3, dtype=model.W_in_m.dtype)
    ws = [w.detach() for w in (model.W_in_m, model.W_in_x, model.lam, model.W_out_m, model.W_out_x, model.D)]
    with torch.no_grad():
        y_ref = model(x)
        ref = y_ref.norm()

        def change(kind, k):
            w = [t.clone() for t in ws]
            if kind == "h":
                w[0][k] = 0.0
            else:
                w[5][:, k] = 0.0
            return float((GatedLinearRNN.from_weights(*w)(x) - y_ref).norm() / ref)

        return (torch.tensor([change("h", k) for k in range(ws[0].shape[0])], dtype=torch.float64),
                torch.tensor([change("o", k) for k in range(ws[5].shape[1])], dtype=torch.float64))


def zero_weights(model, zero: float = ZERO) -> dict:
    """The paper's pruning test (§3.1: "neurons with input or output weights that are entirely
    zeros"), with |w| < ``zero`` as zero: a hidden neuron is removable when either input-gating
    row is entirely zero or both of its output-gating columns are; an output-gating row when
    either of its rows or its readout column is.  Returns the boolean masks ``hidden``,
    ``gate`` (removable) and the share of zero entries of each parameter group (``input
    gating``, ``output gating``, ``readout``).  Chapter 11, section "sec-teacher-zeros"."""
    model = _model("model", model)
    zero = positive_real("zero", zero)
    z = {k: getattr(model, k).detach().abs() < zero for k in ("W_in_m", "W_in_x", "W_out_m", "W_out_x", "D")}
    hidden = z["W_in_m"].all(1) | z["W_in_x"].all(1) | (z["W_out_m"].all(0) & z["W_out_x"].all(0))
    gate = z["W_out_m"].all(1) | z["W_out_x"].all(1) | z["D"].all(0)

    def share(*keys):
        return float(sum(int(z[k].sum()) for k in keys) / sum(z[k].numel() for k in keys))

    return {"hidden": hidden, "gate": gate,
            "shares": {"input gating": share("W_in_m", "W_in_x"), "output gating": share("W_out_m", "W_out_x"),
                       "readout": share("D")}}


def merge_test(model, rows, memory: torch.Tensor, inputs: torch.Tensor, tol: float = FLOAT32_RANK_TOL) -> dict:
    """App. B.2: do the output-gating ``rows`` of ``model`` merge into one row of the
    construction's form?  Their summed kernels S_i = sym(sum_{j in rows} D_ij W_out_m[j]
    W_out_x[j]^T) must (1) be proportional across the outputs (second singular value of the
    stacked kernels over the first), (2) lie in the memory x input blocks (share outside), and
    (3) be of rank one there (second singular value of the memory x input block over the first):
    then one row reading memory neurons times one reading input neurons computes them.
    Returns the three ratios, ``merges`` (all three at most ``tol``) and the merged row
    (``u`` on the memory neurons, ``w`` on the input neurons, readout column ``c``).
    Chapter 11, section "sec-teacher-b2"."""
    model = _model("model", model)
    tol = positive_real("tol", tol, upper=1.0, upper_name="1")
    rows = [int(r) for r in rows]
    n_g = model.D.shape[1]
    if not rows or any(r < 0 or r >= n_g for r in rows):
        raise ValueError(f"rows must be a non-empty list of output-gating rows in [0, {n_g}), got {rows}")
    Wm, Wx, D = (w.detach().double() for w in (model.W_out_m, model.W_out_x, model.D))
    M = torch.einsum("io,oa,ob->iab", D[:, rows], Wm[rows], Wx[rows])
    S = 0.5 * (M + M.transpose(1, 2))
    U, sv, Vh = torch.linalg.svd(S.flatten(1), full_matrices=False)
    proportional = float(sv[1] / sv[0]) if len(sv) > 1 else 0.0
    common = (sv[0] * Vh[0]).reshape(S.shape[1:])
    c = U[:, 0]
    cross = memory[:, None] & inputs[None, :]
    outside = float(common[~(cross | cross.T)].norm() / common.norm())
    B = 2 * common[memory][:, inputs]
    Ub, sb, Vbh = torch.linalg.svd(B, full_matrices=False)
    rank_one = float(sb[1] / sb[0]) if len(sb) > 1 else 0.0
    return {"proportional": proportional, "outside": outside, "rank_one": rank_one,
            "merges": max(proportional, outside, rank_one) <= tol,
            "u": Ub[:, 0] * sb[0], "w": Vbh[0], "c": c}


def split_row(model, row: int, parts: int, mix: torch.Tensor) -> GatedLinearRNN:
    """``model`` with its output-gating ``row`` replaced by ``parts`` rows that each read ``mix``
    (a vector over the hidden neurons) on top of the row's memory factor, with readout columns
    1/parts, the mixing summing to zero over the parts: the same function, rows that depart from
    the construction's form one by one (the positive control of App. B.2's merge).
    Chapter 11, section "sec-teacher-b2"."""
    model = _model("model", model)
    n_g, n_h = model.W_out_m.shape
    if isinstance(parts, bool) or not isinstance(parts, int) or parts < 2:
        raise ValueError(f"parts must be an int >= 2, got {parts!r}")
    if isinstance(row, bool) or not isinstance(row, int) or not 0 <= row < n_g:
        raise ValueError(f"row must be an int in [0, {n_g}), got {row!r}")
    mix = as_tensor("mix", mix, 1, dtype=torch.float64)
    if mix.shape != (n_h,):
        raise ValueError(f"mix must have shape ({n_h},), got {tuple(mix.shape)}")
    Wm, Wx, D = (w.detach().double().clone() for w in (model.W_out_m, model.W_out_x, model.D))
    coeffs = torch.ones(parts, dtype=torch.float64)                               # every part reads mix,
    coeffs[-1] = 1 - parts                                                        # and they sum to zero
    new_m = torch.stack([Wm[row] + a * mix for a in coeffs])
    new_x = Wx[row].expand(parts, -1)
    new_D = (D[:, row:row + 1] / parts).expand(-1, parts)
    keep = [r for r in range(n_g) if r != row]
    return GatedLinearRNN.from_weights(model.W_in_m.detach().double(), model.W_in_x.detach().double(),
                                       model.lam.detach().double(), torch.cat([Wm[keep], new_m]),
                                       torch.cat([Wx[keep], new_x]), torch.cat([D[:, keep], new_D], dim=1))


def gating_in_rows(model, rows: int, memory: torch.Tensor, inputs: torch.Tensor, gen: torch.Generator) -> GatedLinearRNN:
    """``model`` with its output gating rewritten in ``rows`` rows, for a model whose gating rows
    read memory neurons (W_out_m) times input neurons (W_out_x).  Its memory x input x output
    tensor T_aci = sum_o D_io W_out_m[o, a] W_out_x[o, c] is written as sum over the new rows of
    u_o (x) b_o (x) d_o: the input factors b_o are drawn at random, each readout direction d_o is
    chosen orthogonal to a random (|inputs| * outputs - rows)-dimensional set of (input, output)
    directions outside the row space of T's memory unfolding (so the rank-one factors b_o d_o^T
    span a ``rows``-dimensional space that contains T's), and the memory factors u_o are solved by
    least squares.  When the least squares closes, the result computes exactly the function of
    ``model`` (check it: the residual is not returned).  Used to place the paper's counts on a
    network that computes the teacher (Chapter 11, section "sec-teacher-zeros")."""
    model = _model("model", model)
    n_h = model.W_in_m.shape[0]
    for name, mask in (("memory", memory), ("inputs", inputs)):
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.shape != (n_h,):
            raise ValueError(f"{name} must be a boolean mask over the {n_h} hidden neurons")
    if bool((memory & inputs).any()):
        raise ValueError("memory and inputs must be disjoint sets of hidden neurons")
    if not isinstance(gen, torch.Generator):
        raise TypeError(f"gen must be a torch.Generator, got {type(gen).__name__}")
    width = int(inputs.sum()) * model.D.shape[0]
    if width == 0:
        raise ValueError("inputs must mark at least one hidden neuron (the gating reads memory x input neurons)")
    if isinstance(rows, bool) or not isinstance(rows, int) or not 1 <= rows <= width:
        raise ValueError(f"rows must be an int in [1, {width}] (input neurons x outputs), got {rows!r}")
    Wm, Wx, D = (w.detach().double() for w in (model.W_out_m, model.W_out_x, model.D))
    T = torch.einsum("io,oa,oc->aci", D, Wm[:, memory], Wx[:, inputs])
    F = T.reshape(T.shape[0], -1)                                            # memory x (input, output)
    N = torch.linalg.svd(F)[2][int(torch.linalg.matrix_rank(F)):]           # directions outside F's row space
    W = (torch.randn(F.shape[1] - rows, N.shape[0], generator=gen, dtype=torch.float64) @ N).reshape(-1, *T.shape[1:])
    B = torch.randn(rows, T.shape[1], generator=gen, dtype=torch.float64)
    Dn = torch.stack([torch.linalg.svd(torch.einsum("c,kci->ki", b, W))[2][-1] for b in B])
    U = torch.linalg.lstsq(torch.einsum("oc,oi->oci", B, Dn).reshape(rows, -1).T, F.T).solution
    new_m, new_x = (torch.zeros(rows, Wm.shape[1], dtype=torch.float64) for _ in range(2))
    new_m[:, memory], new_x[:, inputs] = U, B
    return GatedLinearRNN.from_weights(model.W_in_m.detach().double(), model.W_in_x.detach().double(),
                                       model.lam.detach().double(), new_m, new_x, Dn.T.contiguous())


def embed_in_student(model, n: int, gen: torch.Generator) -> GatedLinearRNN:
    """``model`` inside a student of ``n`` hidden and ``n`` output-gating neurons that computes
    the same function: the extra hidden neurons have zero input rows (as a trained student's
    unused ones), lam drawn uniformly in [0, 1), and output-gating columns of the initial scale
    1/sqrt(n); the extra gating rows have initial-scale rows and a zero readout column
    (Chapter 11, section "sec-teacher-zeros")."""
    model = _model("model", model)
    h, g = model.lam.shape[0], model.D.shape[1]
    if isinstance(n, bool) or not isinstance(n, int) or n < max(h, g):
        raise ValueError(f"n must be an int >= {max(h, g)} (the model's hidden and gating neurons), got {n!r}")
    if not isinstance(gen, torch.Generator):
        raise TypeError(f"gen must be a torch.Generator, got {type(gen).__name__}")
    W_in_m, W_in_x = (torch.cat([w, torch.zeros(n - h, w.shape[1], dtype=torch.float64)])
                      for w in (model.W_in_m.detach().double(), model.W_in_x.detach().double()))
    lam = torch.cat([model.lam.detach().double(), torch.rand(n - h, generator=gen, dtype=torch.float64)])
    W_out = []
    for w in (model.W_out_m.detach().double(), model.W_out_x.detach().double()):
        full = torch.randn(n, n, generator=gen, dtype=torch.float64) / n ** 0.5
        full[:g, :h] = w
        full[:g, h:] = torch.randn(g, n - h, generator=gen, dtype=torch.float64) / n ** 0.5
        W_out.append(full)
    D = torch.cat([model.D.detach().double(), torch.zeros(model.D.shape[0], n - g, dtype=torch.float64)], dim=1)
    return GatedLinearRNN.from_weights(W_in_m, W_in_x, lam, *W_out, D)


def fine_tune(model, teacher, *, steps: int, lr: float, x_std: float, T: int, batch: int, seed: int) -> GatedLinearRNN:
    """A copy of ``model`` fine-tuned on ``teacher`` (App. B.2's last sentence: a merged network's
    loss is recovered by fine-tuning): ``steps`` of Adam at rate ``lr`` on 1/2 the mean squared
    error over fresh sequences x_t ~ N(0, x_std^2 I) of length ``T``, ``batch`` a step, drawn from
    ``seed``; every weight trains and lambda stays as it is (a compressed network's lambda is exactly
    1 and 0, where its parametrisation has no finite gradient).  Chapter 11, section
    "sec-teacher-function"."""
    model = _model("model", model)
    if not callable(teacher):
        raise TypeError(f"teacher must be a callable network, got {type(teacher).__name__}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be an int >= 0, got {steps!r}")
    lr = positive_real("lr", lr)
    x_std = positive_real("x_std", x_std)
    for name, v in (("T", T), ("batch", batch)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    ws = [w.detach().double().clone() for w in (model.W_in_m, model.W_in_x, model.lam, model.W_out_m, model.W_out_x,
                                                 model.D)]
    tuned = GatedLinearRNN.from_weights(*ws, append_one=model.append_one)
    tuned.nu_log.requires_grad_(False)
    params = [tuned.W_in_m, tuned.W_in_x, tuned.W_out_m, tuned.W_out_x, tuned.D]
    opt = torch.optim.Adam(params, lr=lr)
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(batch, T, model.d_in, generator=g, dtype=torch.float64) * x_std
        with torch.no_grad():
            y = teacher(x)
        loss = 0.5 * ((tuned(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return tuned
