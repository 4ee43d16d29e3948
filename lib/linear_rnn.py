"""Linear RNNs and 1-D convolutions (Emami et al. 2021, Section 2 and Appendix B.1).

The linear RNN of eq. (1),

    h_t = W h_{t-1} / sqrt(n) + F x_t,      y_t = C h_t / sqrt(n),      h_{-1} = 0,

maps an input sequence x = (x_0, ..., x_{T-1}) to y = (y_0, ..., y_{T-1}).  Unrolling it
gives the causal convolution y_t = sum_{j<=t} L_j x_{t-j} with Markov parameters
(impulse response) L_j = n^{-(j+1)/2} C W^j F (Prop. 2.1a).  Conversely any T taps L_j are
realised by an RNN with n = T n_x n_y units through a Vandermonde system (Prop. 2.1b).

The Markov parameters have one public name, ``markov_parameters`` (the fast engine below; on a
model, ``LinearRNN.markov_parameters(T)``); ``impulse_response`` is its plain reference
implementation (T matrix products, equal to rounding), the reference the fast path is tested
against.

Two exact engines compute the same function of (W, F, C):
    "markov"      (default) y = causal_conv(L, x) with the taps L from ``markov_parameters``, a
                  custom autograd Function: the forward pass computes the input-side Krylov
                  sequence A^j F and, when a gradient will be needed, the readout-side C A^j in
                  the same pass over W (``lib.krylov``); the backward pass then needs no
                  product with W at all, and the gradient with respect to W is ONE
                  (n x T n_y) by (T n_y x n) product with a block-Hankel matrix of cotangents;
    "recurrence"  the step-by-step recurrence of eq. (1) (``forward_recurrence``), the reference.
The recurrence costs O(N T n^2) per pass, the Markov engine O(T n^2 (n_x + n_y) + N T^2 n_x n_y).

Shapes (the convention of the whole library):
    x: (N, T, n_x)   y: (N, T, n_y)   L: (T, n_y, n_x)
    W: (n, n)        F: (n, n_x)      C: (n_y, n)
All computations are in float64 unless the caller passes another floating dtype.
"""
from __future__ import annotations

import functools
import math

import torch
from torch import nn

from ._checks import DTYPE, as_tensor, fits_in_memory, float_dtype, positive_int, positive_real, same_dtype, seed_int
from .krylov import adjoint_rows, krylov_rows

ENGINES = ("markov", "recurrence")

__all__ = [
    "LinearRNN",
    "ENGINES",
    "impulse_response",
    "markov_parameters",
    "causal_conv",
    "vandermonde_matrix",
    "vandermonde_realization",
    "chebyshev_nodes",
    "equispaced_nodes",
]


def _check_wfc(W: torch.Tensor, F: torch.Tensor, C: torch.Tensor):
    """(W, F, C) as tensors (lists become float64 tensors), checked to form one RNN; and n."""
    W = as_tensor("W", W, 2)
    F = as_tensor("F", F, 2)
    C = as_tensor("C", C, 2)
    same_dtype(W=W, F=F, C=C)
    n = W.shape[0]
    if W.shape != (n, n):
        raise ValueError(f"W must be square (n, n), got shape {tuple(W.shape)}")
    if F.shape[0] != n:
        raise ValueError(f"F must have shape (n, n_x) with n = {n} (from W), got {tuple(F.shape)}")
    if C.shape[1] != n:
        raise ValueError(f"C must have shape (n_y, n) with n = {n} (from W), got {tuple(C.shape)}")
    return W, F, C, n


def impulse_response(W: torch.Tensor, F: torch.Tensor, C: torch.Tensor, T: int) -> torch.Tensor:
    """Markov parameters L_j = n^{-(j+1)/2} C W^j F for j = 0, ..., T-1 (eq. 9): the reference.

    The plain implementation of the map that ``markov_parameters`` computes with the fast engine
    (the two agree to rounding, not bit for bit; the tests compare values, gradients and
    Jacobians).  Returns a tensor of shape (T, n_y, n_x).  Differentiable in (W, F, C) by plain
    autograd.  Cost: T matrix-matrix products of size (n, n) x (n, n_x).  Chapter 1 derives
    eq. (9) and checks it with this function; ``lib.ntk.markov_jacobian`` differentiates it.
    """
    W, F, C, n = _check_wfc(W, F, C)
    T = positive_int("T", T)
    scale = 1.0 / math.sqrt(n)
    G = F  # G_j = (W / sqrt n)^j F
    taps = []
    for j in range(T):
        if j > 0:
            G = (W @ G) * scale
        taps.append((C @ G) * scale)
    return torch.stack(taps)


def markov_parameters(W: torch.Tensor, F: torch.Tensor, C: torch.Tensor, T: int) -> torch.Tensor:
    """The Markov parameters L_j = n^{-(j+1)/2} C W^j F of eq. (9), through the fast engine.

    Derived in Chapter 1, section "sec-conv-prop" (Prop. 2.1(a)).

    The library's name for the map (W, F, C, T) -> L; ``LinearRNN.markov_parameters(T)`` is the
    same map on a model's own weights, and ``impulse_response`` its plain reference.
    Returns (T, n_y, n_x), equal to ``impulse_response(W, F, C, T)`` (to rounding) in the forward
    pass.  The engine works on the side with fewer vectors (C W^j when n_y < n_x) and, for
    n_x == n_y, fuses both Krylov sequences into one pass over W: O(T n^2 min(n_x, n_y)).
    The backward pass is hand-structured (see ``_MarkovFunction``): for n_x == n_y no
    product with W (the readout-side Krylov sequence comes from the forward pass, fused with
    the input side), otherwise one adjoint recursion on the smaller side; the W-gradient is a
    single GEMM, instead of T accumulated outer products.  It also has
    a forward-mode (jvp) rule and works under torch.func.vmap / jacrev / jvp.
    """
    W, F, C, _ = _check_wfc(W, F, C)
    T = positive_int("T", T)
    return _markov(W, F, C, T)


def _markov(W, F, C, T):
    """``markov_parameters`` without input validation (the model's hot path, this module only).

    Which Krylov sequences to compute depends on the shapes.  L_j(W, F, C) is also
    L_j(W^T, C^T, F^T)^T (the transposed system), so the engine always works on the side with
    fewer vectors: with n_y < n_x it runs on the transposed system, whose "input side" is the
    readout side C A^j of this one (``lib.krylov`` reads the transposed view of W without a
    copy).  When a gradient will be needed and n_x == n_y, both sequences are computed in the
    forward pass in one read of W per step (``adjoint``: the fused kernel), which leaves no
    product with W for the backward pass; otherwise the backward pass runs the adjoint
    recursion on the same side (n_x' = min(n_x, n_y) vectors per step in both passes).
    """
    n_x, n_y = F.shape[-1], C.shape[-2]
    if n_y < n_x:
        return _markov(W.mT, C.mT, F.mT, T).mT
    adjoint = (n_x == n_y and torch.is_grad_enabled()
               and (W.requires_grad or F.requires_grad or C.requires_grad))
    L, _, _ = _MarkovFunction.apply(W, F, C, T, adjoint)
    return L


class _MarkovFunction(torch.autograd.Function):
    """(W, F, C) -> (L, Qt, Pt) with A = s W (s = 1/sqrt n) and, as rows (``lib.krylov``),

        Qt_j = F^T (A^T)^j   (T, n_x, n)    the input-side Krylov sequence,  Q_j = A^j F
        Pt_a = C A^a         (T, n_y, n)    the readout-side Krylov sequence
        L_j  = s C Q_j = s Qt_j C^T  (transposed)                          (T, n_y, n_x)

    Pt is computed in the forward pass only when ``adjoint`` (a gradient will be needed and
    n_x == n_y, see ``_markov``), in the same pass over W as Qt (the fused kernel of
    ``lib.krylov``); Qt and Pt are returned (non-differentiable) only so that
    ``setup_context`` can save them.

    Backward, for cotangents G_j = dloss/dL_j.  Unrolling the adjoint recursion
    Vt_k = Vt_{k+1} A + s G_k^T C gives Vt_k = s sum_a G_{k+a}^T Pt_a, so NO product with W is
    left for the backward pass:
        dF = Vt_0^T = s (sum_a G_a^T Pt_a)^T,       dC = s sum_j G_j Qt_j,
        dW = s sum_k Vt_{k+1}^T Qt_k = s^2 Pt^T H Qt,   H[(a, y), (k, x)] = G_{a+k+1}[y, x]
    (H is the block-Hankel matrix of the cotangents, zero where a+k+1 > T-1), formed as ONE
    (n x (T-1) n_y) by ((T-1) n_y x n) product.  When Pt was not computed, the adjoint
    recursion runs (T-1 products of W with n_x vectors, ``lib.krylov.adjoint_rows``) and
    dW = s sum_k Vt_{k+1}^T Qt_k is again one product; when the backward itself must be
    differentiable (create_graph=True, Hessians) it runs in torch ops.  Every rule is written
    in torch ops outside the kernel, so torch.func transforms (vmap, jacrev, jvp) work through
    it (``generate_vmap_rule``; the kernel is skipped for their wrapped tensors).
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(W, F, C, T, adjoint):
        s = 1.0 / math.sqrt(W.shape[-1])
        Qt, Pt = krylov_rows(W, F.mT, T, s, P0=C if adjoint else None)
        L = (Qt @ C.mT).mT * s                  # (T, n_y, n_x)
        if Pt is None:
            Pt = W.new_empty(0)
        return L, Qt, Pt

    @staticmethod
    def setup_context(ctx, inputs, output):
        W, F, C, T, _ = inputs
        _, Qt, Pt = output
        ctx.mark_non_differentiable(Qt, Pt)
        ctx.save_for_backward(W, F, C, Qt, Pt)
        ctx.save_for_forward(W, F, C, Qt)

    @staticmethod
    def backward(ctx, gL, _gQ, _gP):
        W, F, C, Qt, Pt = ctx.saved_tensors
        T, n_x, n = Qt.shape
        n_y = gL.shape[1]
        s = 1.0 / math.sqrt(n)
        if torch.is_grad_enabled() or Pt.numel() == 0:
            return _MarkovFunction._backward_recursion(W, F, C, Qt, gL)
        gC = (gL.permute(1, 0, 2).reshape(n_y, T * n_x) * s) @ Qt.reshape(T * n_x, n)
        # Vt_0 = s sum_a G_a^T Pt_a : (n_x, T n_y) @ (T n_y, n)
        gF = ((gL.permute(2, 0, 1).reshape(n_x, T * n_y) * s) @ Pt.reshape(T * n_y, n)).mT
        if T == 1:
            return torch.zeros_like(W), gF, gC, None, None
        Gpad = torch.cat([gL, gL.new_zeros(T - 1, n_y, n_x)])          # G_j = 0 for j >= T
        H = Gpad[_index_matrix(T, "hankel")].permute(0, 2, 1, 3)       # [(a, y), (k, x)]
        H = H.reshape((T - 1) * n_y, (T - 1) * n_x)
        HQ = (H * (s * s)) @ Qt[:-1].reshape((T - 1) * n_x, n)        # ((T-1) n_y, n)
        gW = Pt[:-1].reshape((T - 1) * n_y, n).mT @ HQ
        return gW, gF, gC, None, None

    @staticmethod
    def _backward_recursion(W, F, C, Qt, gL):
        """The adjoint recursion (``lib.krylov.adjoint_rows``; torch ops, hence differentiable,
        when the backward pass itself is being recorded)."""
        T, n_y, n_x = gL.shape
        n = W.shape[-1]
        s = 1.0 / math.sqrt(n)
        if torch.is_grad_enabled():
            # a differentiable backward must see Q as a function of (W, F), not as the saved
            # constant: recompute it (T-1 products, the torch path since grad mode is on)
            Qt, _ = krylov_rows(W, F.mT, T, s)
        gC = (gL.permute(1, 0, 2).reshape(n_y, T * n_x) * s) @ Qt.reshape(T * n_x, n)
        Gt = (gL.mT @ C) * s                      # (T, n_x, n): s G_k^T C
        Vt = adjoint_rows(W, Gt, s)              # Vt_k = s Vt_{k+1} W + Gt_k   (T, n_x, n)
        gF = Vt[0].mT
        if T > 1:
            gW = (Vt[1:].reshape((T - 1) * n_x, n) * s).mT @ Qt[:-1].reshape((T - 1) * n_x, n)
        else:
            gW = torch.zeros_like(W)
        return gW, gF, gC, None, None

    @staticmethod
    def jvp(ctx, dW, dF, dC, _dT, _dadj):
        W, F, C, Qt = ctx.saved_tensors
        T, n_x, n = Qt.shape
        s = 1.0 / math.sqrt(n)
        dQt = [torch.zeros_like(Qt[0]) if dF is None else dF.mT]
        for j in range(1, T):
            step = (dQt[-1] @ W.mT) * s
            if dW is not None:
                step = step + (Qt[j - 1] @ dW.mT) * s
            dQt.append(step)
        dQt = torch.stack(dQt)
        dL = (dQt @ C.mT).mT * s
        if dC is not None:
            dL = dL + (Qt @ dC.mT).mT * s
        return dL, None, None


def causal_conv(L: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Causal 1-D convolution y_t = sum_{j=0}^{t} L_j x_{t-j} (eq. 5).

    Derived in Chapter 1, section "sec-conv-prop" (Prop. 2.1(a)).

    L: (T_L, n_y, n_x) filter taps; x: (N, T, n_x).  Taps beyond T_L are zero, so a
    filter shorter than the sequence is a finite impulse response.  Returns (N, T, n_y).
    """
    L = as_tensor("L", L, 3)
    x = as_tensor("x", x, 3)
    if L.shape[2] != x.shape[2]:
        raise ValueError(
            f"L has n_x = {L.shape[2]} input channels (shape (T, n_y, n_x) = {tuple(L.shape)}) "
            f"but x has n_x = {x.shape[2]} (shape (N, T, n_x) = {tuple(x.shape)})"
        )
    dt = torch.promote_types(L.dtype, x.dtype)
    L, x = L.to(dt), x.to(dt)
    N, T, _ = x.shape
    y = x.new_zeros(N, T, L.shape[1])
    for j in range(min(T, L.shape[0])):
        # every output time t >= j receives L_j x_{t-j}
        y[:, j:, :] = y[:, j:, :] + x[:, : T - j, :] @ L[j].T
    return y


@functools.lru_cache(maxsize=64)
def _index_matrix(T: int, kind: str) -> torch.Tensor:
    """Index tables of the hot path, made once per T (they are read-only).

    "toeplitz": [t, s] -> t - s for t >= s, else T (the zero tap appended at row T);
    "hankel":   [a, k] -> a + k + 1 for a, k < T - 1 (entries >= T hit zero padding).
    """
    i = torch.arange(T)
    if kind == "toeplitz":
        lag = i[:, None] - i[None, :]
        return torch.where(lag >= 0, lag, T)
    i = i[: T - 1]
    return i[:, None] + i[None, :] + 1


def _conv_fast(L: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``causal_conv`` for T_L == T as ONE matmul with the block-Toeplitz matrix of the taps.

    TL[(t, a), (s, b)] = L_{t-s}[a, b] for t >= s (0 otherwise) is gathered from the T n_y n_x
    taps (tiny), so the forward and its backward cost one (N, T n_x) x (T n_x, T n_y) product.
    No validation (the model's hot path).
    """
    N, T, n_x = x.shape
    n_y = L.shape[1]
    if T * T * n_x * n_y > 1 << 22:   # the Toeplitz matrix would exceed 32 MB: loop over lags
        return causal_conv(L, x)
    Lpad = torch.cat([L, L.new_zeros(1, n_y, n_x)])                   # row T is the zero tap
    TL = Lpad[_index_matrix(T, "toeplitz")]                            # [t, s] -> L_{t-s}
    TL = TL.permute(0, 2, 1, 3).reshape(T * n_y, T * n_x)              # [(t, a), (s, b)]
    return (x.reshape(N, T * n_x) @ TL.mT).reshape(N, T, n_y)


class LinearRNN(nn.Module):
    """The linear RNN of eq. (1) with the Gaussian initialisation of eq. (4).

    W_ij ~ N(0, nu_W), F_ij ~ N(0, nu_F), C_ki ~ N(0, nu_C), all independent, drawn from a
    ``torch.Generator`` seeded with ``seed``.  The 1/sqrt(n) factors live in the forward
    map, not in the parameters, exactly as in the paper.

    nu_W must lie in (0, 1): the spectral radius of W/sqrt(n) tends to sqrt(nu_W), so the
    random system is stable with probability -> 1 only for nu_W < 1 (see Chapter 1).
    Pass ``allow_unstable=True`` to study nu_W >= 1 deliberately.

    ``engine`` chooses how ``forward`` evaluates the (identical) map: ``"markov"`` (default,
    fast: the causal convolution with the Markov parameters, O(T n^2) per pass) or
    ``"recurrence"`` (the reference recurrence, O(N T n^2)).  It may be changed later by
    assigning ``model.engine``, or a model that shares the parameters but uses another engine
    obtained with ``with_engine``.  ``forward_recurrence`` is the reference whatever the engine.
    """

    def __init__(self, n: int, n_x: int, n_y: int, nu_W: float, nu_F: float, nu_C: float,
                 seed: int = 0, *, dtype=DTYPE, allow_unstable: bool = False,
                 engine: str = "markov"):
        super().__init__()
        self.engine = engine
        dtype = float_dtype("dtype", dtype)
        self.n = positive_int("n", n)
        fits_in_memory(f"LinearRNN with n = {self.n} (W and its gradient, {self.n}^2 entries each)",
                       2 * 8.0 * self.n * self.n)
        self.n_x = positive_int("n_x", n_x)
        self.n_y = positive_int("n_y", n_y)
        upper = None if allow_unstable else 1.0
        self.nu_W = positive_real("nu_W", nu_W, upper=upper,
                                  upper_name="stability: spectral radius of W/sqrt(n) -> sqrt(nu_W)")
        self.nu_F = positive_real("nu_F", nu_F)
        self.nu_C = positive_real("nu_C", nu_C)
        g = torch.Generator().manual_seed(seed_int("seed", seed))
        self.W = nn.Parameter(math.sqrt(self.nu_W) * torch.randn(self.n, self.n, generator=g, dtype=dtype))
        self.F = nn.Parameter(math.sqrt(self.nu_F) * torch.randn(self.n, self.n_x, generator=g, dtype=dtype))
        self.C = nn.Parameter(math.sqrt(self.nu_C) * torch.randn(self.n_y, self.n, generator=g, dtype=dtype))

    @classmethod
    def from_weights(cls, W: torch.Tensor, F: torch.Tensor, C: torch.Tensor) -> "LinearRNN":
        """An RNN with the given (W, F, C) in the eq. (1) parametrisation (no stability check).

        Built by ``__init__`` (whose random draw, from its own generator, is then replaced by
        copies of the given weights); ``nu_W``, ``nu_F``, ``nu_C`` are NaN (not drawn from eq. 4).
        Chapter 1 runs the Vandermonde realization of Prop. 2.1(b) through it.
        """
        W, F, C, n = _check_wfc(W, F, C)
        model = cls(n, F.shape[1], C.shape[0], 0.5, 1.0, 1.0, dtype=W.dtype)
        model._set_weights(nn.Parameter(W.detach().clone()), nn.Parameter(F.detach().clone()),
                           nn.Parameter(C.detach().clone()))
        return model

    def _set_weights(self, W: nn.Parameter, F: nn.Parameter, C: nn.Parameter) -> None:
        """Replace the parameters drawn by ``__init__`` (shapes as this model's; no nu_* apply)."""
        self.W, self.F, self.C = W, F, C
        self.nu_W = self.nu_F = self.nu_C = float("nan")

    def with_engine(self, engine: str) -> "LinearRNN":
        """This RNN evaluated by ``engine``: ``self`` when that is already its engine, otherwise a
        LinearRNN that shares this one's parameters (the same tensors, not copies, so training
        one trains the other) and has that engine.  ``with_engine("markov")`` is the RNN as the
        causal convolution with its own Markov parameters (Prop. 2.1a), the default engine and the
        fast forward through which Chapters 4-6 train the RNN.
        """
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
        if engine == self._engine:
            return self
        view = type(self)(self.n, self.n_x, self.n_y, 0.5, 1.0, 1.0, dtype=self.W.dtype, engine=engine)
        view._set_weights(self.W, self.F, self.C)
        view.nu_W, view.nu_F, view.nu_C = self.nu_W, self.nu_F, self.nu_C
        return view

    @property
    def engine(self) -> str:
        return self._engine

    @engine.setter
    def engine(self, value: str) -> None:
        if value not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, got {value!r}")
        self._engine = value

    def _check_input(self, x: torch.Tensor) -> torch.Tensor:
        x = as_tensor("x", x, 3, dtype=self.W.dtype)
        if x.shape[2] != self.n_x:
            raise ValueError(f"x must have shape (N, T, n_x) with n_x = {self.n_x}, got {tuple(x.shape)}")
        return x

    def markov_parameters(self, T: int) -> torch.Tensor:
        """The impulse response L_0..L_{T-1} of this RNN, shape (T, n_y, n_x): the module
        function ``markov_parameters(W, F, C, T)`` on this model's weights (fast engine).

        The weights were validated at construction, so only T is checked here (checking W for
        NaN costs as much as the taps themselves).
        """
        return _markov(self.W, self.F, self.C, positive_int("T", T))

    def forward_recurrence(self, x: torch.Tensor) -> torch.Tensor:
        """Reference forward pass: the step-by-step recurrence of eq. (1)."""
        x = self._check_input(x)
        N, T, _ = x.shape
        s = 1.0 / math.sqrt(self.n)
        h = x.new_zeros(N, self.n)
        ys = []
        for t in range(T):
            h = s * h @ self.W.T + x[:, t, :] @ self.F.T
            ys.append(s * h @ self.C.T)
        return torch.stack(ys, dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """y = f_RNN(x, (W, F, C)), x: (N, T, n_x) -> y: (N, T, n_y), by ``self.engine``."""
        if self._engine == "recurrence":
            return self.forward_recurrence(x)
        x = self._check_input(x)
        return _conv_fast(_markov(self.W, self.F, self.C, x.shape[1]), x)


# --------------------------------------------------------------------------------------
# Prop. 2.1(b): the Vandermonde realization of any T taps
# --------------------------------------------------------------------------------------

def chebyshev_nodes(T: int, dtype=DTYPE) -> torch.Tensor:
    """Chebyshev points of the first kind, cos((2k+1) pi / (2T)), k = 0..T-1, in (-1, 1).

    Used as the default nodes of the Vandermonde realization in Chapter 1, section
    "sec-vandermonde"; section "sec-conditioning" measures the conditioning they give.
    """
    T = positive_int("T", T)
    k = torch.arange(T, dtype=dtype)
    return torch.cos((2 * k + 1) * math.pi / (2 * T))


def equispaced_nodes(T: int, radius: float = 0.9, dtype=DTYPE) -> torch.Tensor:
    """T equispaced points on [-radius, radius] (a single point 0 when T = 1).

    Used in Chapter 1, section "sec-conditioning", to compare the conditioning of the Vandermonde
    matrix with that of Chebyshev nodes.
    """
    T = positive_int("T", T)
    radius = positive_real("radius", radius)
    if T == 1:
        return torch.zeros(1, dtype=dtype)
    return torch.linspace(-radius, radius, T, dtype=dtype)


def vandermonde_matrix(nodes: torch.Tensor, T: int | None = None) -> torch.Tensor:
    """V with V[k, t] = nodes[k] ** t, t = 0..T-1 (eq. 35 of App. B.1); T defaults to len(nodes).

    Derived in Chapter 1, section "sec-vandermonde"; section "sec-conditioning" measures its
    condition number.
    """
    nodes = as_tensor("nodes", nodes, 1)
    T = nodes.shape[0] if T is None else positive_int("T", T)
    t = torch.arange(T, dtype=nodes.dtype if nodes.is_floating_point() else DTYPE)
    return nodes[:, None] ** t[None, :]


def vandermonde_realization(L: torch.Tensor, nodes: torch.Tensor | None = None):
    """(W, F, C) of a linear RNN (eq. 1 parametrisation) whose impulse response is L.

    Prop. 2.1b; derived in Chapter 1, section "sec-vandermonde".

    L: (T, n_y, n_x).  ``nodes``: T distinct real eigenvalues for each block (default:
    Chebyshev nodes, the best-conditioned real choice; see Chapter 1).

    Construction (App. B.1): for every input/output pair (a, b) a block of T units with
    diagonal transition diag(nodes), input weights 1 from input b, and readout c_ab solving
    [L_0 .. L_{T-1}]_ab = c_ab V.  Blocks are ordered k = a * n_x + b, so n = T n_x n_y.
    Because eq. (1) divides by sqrt(n) at every step, the returned matrices carry the
    compensating factors: W = sqrt(n) blockdiag(diag(nodes)), C = sqrt(n) [c_ab], F = [1].
    """
    L = as_tensor("L", L, 3)
    T, n_y, n_x = L.shape
    if nodes is None:
        nodes = chebyshev_nodes(T, dtype=L.dtype)
    nodes = as_tensor("nodes", nodes, 1, dtype=L.dtype)
    if nodes.shape[0] != T:
        raise ValueError(f"nodes must hold T = {T} values (one per tap of L), got {nodes.shape[0]}")
    gaps = (nodes[:, None] - nodes[None, :]).abs() + torch.eye(T, dtype=L.dtype)
    if (gaps == 0).any():
        i, j = [int(v) for v in (gaps == 0).nonzero()[0]]
        raise ValueError(f"nodes must be distinct: nodes[{i}] == nodes[{j}] == {nodes[i].item()}; "
                         "the Vandermonde matrix is singular")
    V = vandermonde_matrix(nodes)  # (T, T): V[k, t] = nodes[k]^t
    # c V = l  <=>  V^T c^T = l^T, solved for all n_y * n_x pairs at once
    coeffs = torch.linalg.solve(V.T, L.reshape(T, n_y * n_x))  # (T nodes, n_y * n_x)
    n = T * n_x * n_y
    root_n = math.sqrt(n)
    W = torch.zeros(n, n, dtype=L.dtype)
    F = torch.zeros(n, n_x, dtype=L.dtype)
    C = torch.zeros(n_y, n, dtype=L.dtype)
    for a in range(n_y):
        for b in range(n_x):
            k = a * n_x + b
            rows = slice(k * T, (k + 1) * T)
            W[rows, rows] = root_n * torch.diag(nodes)
            F[rows, b] = 1.0
            C[a, rows] = root_n * coeffs[:, k]
    return W, F, C
