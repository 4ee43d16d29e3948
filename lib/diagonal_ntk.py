"""The tangent kernel of a diagonal linear RNN in Markov-parameter space (Chapter 15).

The network is ``h_t = lam * h_{t-1} + B x_t``, ``y_t = C h_t / sqrt(n)`` with a real diagonal
recurrence ``lam`` (n,) -- the recurrence of the gated RNN of Zucchet et al. (eq. 2) and of the
LRU family with the phase set to 0 -- and Gaussian ``B`` (n, n_x), ``C`` (n_y, n).  Its Markov
parameters are ``L_j = C diag(lam^j) B / sqrt(n)``.  The three ways ``lam`` enters training
(``param``):

* ``"direct"``: lam itself is a parameter;
* ``"exp"``:    lam = exp(-exp(nu)) with nu the parameter (App. A.1 / B.1 of Zucchet et al.);
* ``"frozen"``: lam is fixed, only B and C train.

As n -> infinity the tap Gram matrix M_n = J J^T (J = d vec(L) / d theta, taps ordered
(j, a, b), as :func:`lib.ntk.markov_ntk_factor`) converges to ``K ⊗ I_{n_y n_x}`` with the T x T
matrix (Chapter 15, section "sec-diag-kernel")

    K_jk = nu_B E[g lam^{j+k}] + nu_C E[lam^{j+k}] + j k nu_B nu_C E[g lam^{j+k-2} (dlam/dtheta)^2],

g = 1 - lam^2 with the LRU's input normalisation (B scaled by sqrt(1 - lam^2)), else 1; the
last term is absent for ``"frozen"``.  It is a Hankel matrix of moments of the law of lam, not
a diagonal one.  The laws (``law``) are those of :data:`lib.architectures.INITS`:
``"uniform"`` (lam ~ U(low, high)) and ``"lru"`` (lam^2 ~ U(low^2, high^2)).

    lam_moment(p, law, lam_range, log_power)        E[lam^p (log lam)^q], q in {0, 2}, closed form
    diagonal_ntk_limit(T, ...)                      K (T, T), the wide limit
    DiagonalLinearRNN(n, n_x, n_y, ...)             the network (Markov fast path + plain loop)
    diagonal_ntk_factor(model, T)                   M_n at finite width, closed form
    diagonal_ntk_factor_reference(model, T)         M_n = J J^T with torch.func.jacrev
    kernel_gd_path(x, y, M, L0, lr, steps)          full-batch GD in tap space with tap kernel M
    InputGatedDiagonalRNN, input_gated_ntk_limit    the input gating of eq. (2): the same lag kernel
                                                    on the quadratic features x_t ⊗ x_t
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from ._checks import DTYPE, as_tensor, float_dtype, int_list, positive_int, positive_real, seed_int
from .ntk import toeplitz

__all__ = ["LAWS", "PARAMS", "lam_moment", "diagonal_ntk_limit", "DiagonalLinearRNN", "diagonal_ntk_factor",
           "diagonal_ntk_factor_reference", "kernel_gd_path", "quadratic_features", "input_gated_ntk_limit",
           "InputGatedDiagonalRNN"]

LAWS = ("uniform", "lru")
PARAMS = ("direct", "exp", "frozen")
_EPS = 1e-12     # draws of lam are kept in [eps, 1 - eps]: exp(-exp(nu)) needs 0 < lam < 1


def _check_law(law: str, lam_range) -> tuple[float, float]:
    if law not in LAWS:
        raise ValueError(f"law must be one of {', '.join(LAWS)}, got {law!r}")
    try:
        lo, hi = (float(v) for v in lam_range)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"lam_range must be (low, high), two real numbers, got {lam_range!r}") from exc
    if not 0.0 <= lo < hi <= 1.0:
        raise ValueError(f"lam_range must be (low, high) with 0 <= low < high <= 1, got {lam_range!r}")
    return lo, hi


def _check_param(param: str) -> str:
    if param not in PARAMS:
        raise ValueError(f"param must be one of {', '.join(PARAMS)}, got {param!r}")
    return param


def _power_log_integral(p: np.ndarray, q: int, a: float, b: float) -> np.ndarray:
    """int_a^b lam^p (log lam)^q dlam for p > -1 and q in {0, 2} (0 <= a < b <= 1)."""
    p1 = p + 1.0

    def F(x):     # an antiderivative, with F(0) = 0
        if x == 0.0:
            return np.zeros_like(p1)
        xp, lg = x ** p1, math.log(x)
        if q == 0:
            return xp / p1
        return xp * (lg**2 / p1 - 2 * lg / p1**2 + 2 / p1**3)

    return F(b) - F(a)


def lam_moment(p, law: str = "uniform", lam_range=(0.0, 1.0), log_power: int = 0) -> np.ndarray:
    """E[lam^p (log lam)^q] for lam of the law ``law`` on ``lam_range``, q = ``log_power``.

    ``"uniform"``: lam ~ U(low, high), density 1 / (high - low); ``"lru"``: lam^2 ~
    U(low^2, high^2), density 2 lam / (high^2 - low^2).  ``p``: real powers > -1 (array-like);
    ``log_power``: 0 or 2.  Closed forms (Chapter 15, section "sec-diag-moments", derives them
    with sympy): int_0^1 lam^p dlam = 1 / (p + 1), int_0^1 lam^p log^2 lam dlam = 2 / (p + 1)^3.
    Returns a float64 numpy array of the shape of ``p``.
    """
    lo, hi = _check_law(law, lam_range)
    if log_power not in (0, 2):
        raise ValueError(f"log_power must be 0 or 2, got {log_power!r}")
    p = np.asarray(p, dtype=float)
    if not np.all(np.isfinite(p)) or np.any(p <= -1):
        raise ValueError(f"p must hold finite powers > -1, got {p.tolist()}")
    if law == "uniform":
        return _power_log_integral(p, log_power, lo, hi) / (hi - lo)
    return 2.0 * _power_log_integral(p + 1.0, log_power, lo, hi) / (hi**2 - lo**2)


def diagonal_ntk_limit(T: int, *, law: str = "uniform", lam_range=(0.0, 1.0), input_norm: bool = False,
                       param: str = "exp", nu_B: float = 1.0, nu_C: float = 1.0) -> torch.Tensor:
    """The wide-limit tap kernel K (T, T) of :class:`DiagonalLinearRNN` (float64).

    K_jk = nu_B E[g lam^{j+k}] + nu_C E[lam^{j+k}] + j k nu_B nu_C E[g lam^{j+k-2} (dlam/dtheta)^2]
    with g = 1 - lam^2 when ``input_norm`` (else 1); dlam/dtheta = 1 (``"direct"``),
    lam log lam (``"exp"``), and no third term for ``"frozen"``.  The full limit of M_n is
    ``torch.kron(K, eye(n_y * n_x))`` in the tap ordering (j, a, b).  Chapter 15, section
    "sec-diag-kernel".
    """
    T = positive_int("T", T)
    _check_law(law, lam_range)
    param = _check_param(param)
    if not isinstance(input_norm, bool):
        raise TypeError(f"input_norm must be True or False, got {input_norm!r}")
    nu_B, nu_C = positive_real("nu_B", nu_B), positive_real("nu_C", nu_C)
    j = np.arange(T, dtype=float)
    p = j[:, None] + j[None, :]

    def E(power, q=0, g=False):     # E[g lam^power (log lam)^q]
        m = lam_moment(power, law, lam_range, q)
        return m - lam_moment(power + 2, law, lam_range, q) if g else m

    K = nu_B * E(p, g=input_norm) + nu_C * E(p)
    jk = j[:, None] * j[None, :]
    if param == "direct":
        both = jk > 0                      # j k = 0: the term is zero (and lam^{-1} is not integrable)
        third = np.zeros_like(p)
        third[both] = E(p[both] - 2, g=input_norm)
        K = K + nu_B * nu_C * jk * third
    elif param == "exp":
        K = K + nu_B * nu_C * jk * E(p, 2, g=input_norm)
    return torch.from_numpy(K)


class _Recurrence(nn.Module):
    """The diagonal recurrence lam of a network, carried as ``self.param`` says: "exp" (the
    parameter nu with lam = exp(-exp(nu)), App. A.1/B.1), "direct" (lam itself) or "frozen" (a buffer)."""

    def _set_recurrence(self, lam: torch.Tensor) -> None:
        if self.param == "exp":
            self.nu = nn.Parameter(torch.log(-torch.log(lam)))
        elif self.param == "direct":
            self.lam = nn.Parameter(lam)
        else:
            self.register_buffer("lam", lam)

    def recurrence(self) -> torch.Tensor:
        """lam (n,), through the parametrisation."""
        return torch.exp(-torch.exp(self.nu)) if self.param == "exp" else self.lam


class DiagonalLinearRNN(_Recurrence):
    """h_t = lam * h_{t-1} + B x_t, y_t = C h_t / sqrt(n): a diagonal linear RNN (Chapter 15).

    Args:
        n: hidden units; n_x, n_y: input and output channels.
        law, lam_range: the law of lam at initialisation (``"uniform"``: lam ~ U(low, high);
            ``"lru"``: lam^2 ~ U(low^2, high^2)), as :data:`lib.architectures.INITS`.
        input_norm: scale row i of B by sqrt(1 - lam_i^2) at initialisation (the LRU's).
        param: ``"direct"`` (lam trained), ``"exp"`` (nu trained, lam = exp(-exp(nu))) or
            ``"frozen"`` (lam fixed).
        nu_B, nu_C: variances of the entries of B and C.
        seed: seed of every draw; dtype: parameter dtype.
    Input x: (N, T, n_x); output (N, T, n_y).  Parameters ``B``, ``C`` and ``lam`` or ``nu``.
    """

    def __init__(self, n: int, n_x: int, n_y: int, *, law: str = "uniform", lam_range=(0.0, 1.0),
                 input_norm: bool = False, param: str = "exp", nu_B: float = 1.0, nu_C: float = 1.0,
                 seed: int = 0, dtype: torch.dtype = DTYPE):
        super().__init__()
        self.n, self.n_x, self.n_y = positive_int("n", n), positive_int("n_x", n_x), positive_int("n_y", n_y)
        lo, hi = _check_law(law, lam_range)
        self.param = _check_param(param)
        if not isinstance(input_norm, bool):
            raise TypeError(f"input_norm must be True or False, got {input_norm!r}")
        nu_B, nu_C = positive_real("nu_B", nu_B), positive_real("nu_C", nu_C)
        g = torch.Generator().manual_seed(seed_int("seed", seed))
        dtype = float_dtype("dtype", dtype)
        u = torch.rand(self.n, generator=g, dtype=DTYPE)
        lam = lo + (hi - lo) * u if law == "uniform" else torch.sqrt(lo**2 + (hi**2 - lo**2) * u)
        lam = lam.clamp(_EPS, 1 - _EPS)
        B = math.sqrt(nu_B) * torch.randn(self.n, self.n_x, generator=g, dtype=DTYPE)
        C = math.sqrt(nu_C) * torch.randn(self.n_y, self.n, generator=g, dtype=DTYPE)
        if input_norm:
            B = B * torch.sqrt(1 - lam**2)[:, None]
        self.B, self.C = nn.Parameter(B.to(dtype)), nn.Parameter(C.to(dtype))
        self._set_recurrence(lam.to(dtype))

    def markov_parameters(self, T: int) -> torch.Tensor:
        """L_j = C diag(lam^j) B / sqrt(n), j < T: (T, n_y, n_x)."""
        T = positive_int("T", T)
        lam = self.recurrence()
        powers = torch.cat([torch.ones_like(lam)[None], torch.cumprod(lam.expand(T - 1, -1), 0)])   # (T, n)
        return torch.einsum("an,jn,nb->jab", self.C, powers, self.B) / math.sqrt(self.n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The fast path: the causal convolution with the T Markov parameters."""
        x = as_tensor("x", x, 3, dtype=self.B.dtype)
        if x.shape[2] != self.n_x:
            raise ValueError(f"x must have n_x = {self.n_x} channels (shape (N, T, n_x)), got {tuple(x.shape)}")
        L = self.markov_parameters(x.shape[1])
        X = toeplitz(x).reshape(x.shape[0], x.shape[1], self.n_x, x.shape[1])       # [i, j, b, t]
        return torch.einsum("ijbt,jab->ita", X, L)

    def forward_reference(self, x: torch.Tensor) -> torch.Tensor:
        """The plain recurrence h_t = lam h_{t-1} + B x_t, y_t = C h_t / sqrt(n), one step at a time."""
        x = as_tensor("x", x, 3, dtype=self.B.dtype)
        lam, h, ys = self.recurrence(), torch.zeros(x.shape[0], self.n, dtype=x.dtype), []
        for t in range(x.shape[1]):
            h = lam * h + x[:, t] @ self.B.T
            ys.append(h @ self.C.T / math.sqrt(self.n))
        return torch.stack(ys, 1)


def _check_model(model) -> DiagonalLinearRNN:
    if not isinstance(model, DiagonalLinearRNN):
        raise TypeError(f"model must be a DiagonalLinearRNN, got {type(model).__name__}")
    return model


def diagonal_ntk_factor(model: DiagonalLinearRNN, T: int) -> torch.Tensor:
    """M_n = J J^T (T n_y n_x square, taps ordered (j, a, b)) of ``model``, in closed form.

    With P_ji = lam_i^j and S_ji = d lam_i^j / d theta_i (j lam^{j-1} direct, j lam^j log lam
    through nu, 0 frozen): M[(j,a,b),(k,c,d)] = (1/n) sum_i [delta_ac P_ji P_ki B_ib B_id +
    delta_bd P_ji P_ki C_ai C_ci + S_ji S_ki C_ai B_ib C_ci B_id].  O(T^2 n) with no Jacobian.
    Chapter 15, section "sec-diag-width".
    """
    model = _check_model(model)
    T = positive_int("T", T)
    with torch.no_grad():
        lam = model.recurrence().to(DTYPE)
        B, C = model.B.to(DTYPE), model.C.to(DTYPE)
        j = torch.arange(T, dtype=DTYPE)[:, None]
        P = lam[None] ** j
        if model.param == "direct":
            S = j * torch.where(j > 0, lam[None] ** (j - 1).clamp(min=0), torch.zeros_like(P))
        elif model.param == "exp":
            S = j * P * torch.log(lam)[None]
        else:
            S = torch.zeros_like(P)
        n_x, n_y, n = model.n_x, model.n_y, model.n
        eye_y, eye_x = torch.eye(n_y, dtype=DTYPE), torch.eye(n_x, dtype=DTYPE)
        t1 = torch.einsum("jn,kn,nb,nd->jbkd", P, P, B, B)
        t2 = torch.einsum("jn,kn,an,cn->jakc", P, P, C, C)
        CB = C[:, :, None] * B[None]                           # [a, n, b]
        t3 = torch.einsum("jn,kn,anb,cnd->jabkcd", S, S, CB, CB)
        M = (t1[:, None, :, :, None, :] * eye_y[None, :, None, None, :, None]
             + t2[:, :, None, :, :, None] * eye_x[None, None, :, None, None, :] + t3)
        return M.reshape(T * n_y * n_x, T * n_y * n_x) / n


def diagonal_ntk_factor_reference(model: DiagonalLinearRNN, T: int) -> torch.Tensor:
    """M_n = J J^T with J = d vec(L) / d theta from ``torch.func.jacrev`` of the Markov parameters
    (the plain reference of :func:`diagonal_ntk_factor`)."""
    from torch.func import jacrev

    model = _check_model(model)
    T = positive_int("T", T)
    params = {k: v.detach().to(DTYPE) for k, v in model.named_parameters()}
    buffers = {k: v.to(DTYPE) for k, v in model.named_buffers()}

    def taps(p):
        return _taps_of(model, {**p, **buffers}, T)

    jac = jacrev(taps)(params)
    J = torch.cat([v.reshape(T * model.n_y * model.n_x, -1) for v in jac.values()], 1)
    return J @ J.T


def _taps_of(model: DiagonalLinearRNN, tensors: dict, T: int) -> torch.Tensor:
    """L_j of ``model`` with its parameters and buffers replaced by ``tensors`` (for jacrev)."""
    lam = torch.exp(-torch.exp(tensors["nu"])) if model.param == "exp" else tensors["lam"]
    powers = torch.cat([torch.ones_like(lam)[None], torch.cumprod(lam.expand(T - 1, -1), 0)])
    return torch.einsum("an,jn,nb->jab", tensors["C"], powers, tensors["B"]) / math.sqrt(model.n)


def kernel_gd_path(x: torch.Tensor, y: torch.Tensor, M: torch.Tensor, L0: torch.Tensor, lr: float, steps) -> torch.Tensor:
    """Taps after full-batch GD on the 1/2-sum loss, linearised with the tap kernel ``M``.

    The kernel regime of any model whose output is the causal convolution with its taps L:
    vec(L_{l+1}) = vec(L_l) - lr M (G vec(L_l) - r), with G = Phi^T Phi and r = Phi^T Y the
    normal equations of the convolution (Phi: the Toeplitz design of x).  With M = D(rho) ⊗ I
    this is :func:`lib.gd_path` of the scaled convolution; with the limit of
    :func:`diagonal_ntk_limit` the wide diagonal RNN.  x: (N, T, n_x), y: (N, T, n_y), L0:
    (T, n_y, n_x).  ``M``: the full kernel (T n_y n_x square, ordered (j, a, b)), or the kernel of
    one output channel (T n_x square, ordered (j, b)) when it is the same for every channel and
    the channels do not couple (M_full = M_channel ⊗ I_{n_y} up to the ordering, as every limit
    here); the second is n_y^3 times cheaper.  ``steps``: ints >= 0 (a sequence).  Returns
    (len(steps), T, n_y, n_x).  Chapter 15, section "sec-diag-delay".
    """
    x = as_tensor("x", x, 3)
    y = as_tensor("y", y, 3, dtype=x.dtype)
    N, T, n_x = x.shape
    if y.shape[:2] != (N, T):
        raise ValueError(f"y must have shape (N, T, n_y) = ({N}, {T}, n_y), got {tuple(y.shape)}")
    n_y = y.shape[2]
    m, mc = T * n_y * n_x, T * n_x
    M = as_tensor("M", M, 2, dtype=x.dtype)
    if M.shape not in ((m, m), (mc, mc)):
        raise ValueError(f"M must have shape (T n_y n_x, T n_y n_x) = ({m}, {m}) or, one output channel's, "
                         f"(T n_x, T n_x) = ({mc}, {mc}); got {tuple(M.shape)}")
    L0 = as_tensor("L0", L0, 3, dtype=x.dtype)
    if L0.shape != (T, n_y, n_x):
        raise ValueError(f"L0 must have shape (T, n_y, n_x) = ({T}, {n_y}, {n_x}), got {tuple(L0.shape)}")
    lr = positive_real("lr", lr)
    steps = int_list("steps", [steps] if isinstance(steps, int) else steps, minimum=0)
    X = toeplitz(x).reshape(N, T, n_x, T)                                    # [i, j, b, t]
    A = torch.einsum("ijbt,ikdt->jbkd", X, X).reshape(mc, mc)                # Phi^T Phi over (lag, channel)
    r = torch.einsum("ijbt,ita->jab", X, y)                                  # (T, n_y, n_x)
    if M.shape == (mc, mc):      # every output channel a: a column of V (T n_x, n_y)
        E, c = torch.eye(mc, dtype=x.dtype) - lr * M @ A, lr * M @ r.permute(0, 2, 1).reshape(mc, n_y)
        v = L0.permute(0, 2, 1).reshape(mc, n_y).clone()
        unpack = lambda v: v.reshape(T, n_x, n_y).permute(0, 2, 1)
    else:
        # M G with G = Phi^T Phi on every output channel (G[(j,a,b),(k,c,d)] = A[(j,b),(k,d)] delta_ac),
        # contracted blockwise: n_y times cheaper than forming G
        MG = torch.einsum("pjcb,jbkd->pkcd", M.reshape(m, T, n_y, n_x), A.reshape(T, n_x, T, n_x)).reshape(m, m)
        E, c = torch.eye(m, dtype=x.dtype) - lr * MG, lr * M @ r.reshape(m)
        v = L0.reshape(m).clone()
        unpack = lambda v: v.reshape(T, n_y, n_x)
    got, done = {}, 0
    for s in sorted(set(steps)):
        for _ in range(s - done):
            v = E @ v + c
        done = s
        got[s] = unpack(v.clone())
    return torch.stack([got[s] for s in steps])


def quadratic_features(x: torch.Tensor) -> torch.Tensor:
    """x_t ⊗ x_t of every step: (N, T, n_x) -> (N, T, n_x^2), so that (a ⊗ a) . (b ⊗ b) = (a . b)^2."""
    x = as_tensor("x", x, 3)
    return torch.einsum("ntb,ntd->ntbd", x, x).reshape(x.shape[0], x.shape[1], -1)


def input_gated_ntk_limit(T: int, *, law: str = "uniform", lam_range=(0.0, 1.0), param: str = "exp",
                          nu_G: float = 1.0, nu_C: float = 1.0) -> torch.Tensor:
    """The wide-limit lag kernel Kg (T, T) of :class:`InputGatedDiagonalRNN`.

    With the input gate phi(x) = (W^m x) * (W^x x) (entries of W^m, W^x with variance nu_G) the
    NTK is ``lib.factored_ntk(q(x1), q(x2), kron(Kg, I))`` with q = :func:`quadratic_features` and
    Kg_jk = (nu_G^2 + 2 nu_C nu_G) E[lam^{j+k}] + nu_C nu_G^2 E[s_j s_k]: the lags enter through the
    same moments as for the linear input (:func:`diagonal_ntk_limit`), the input through (x . x')^2.
    Chapter 15, section "sec-diag-gated".
    """
    nu_G, nu_C = positive_real("nu_G", nu_G), positive_real("nu_C", nu_C)
    frozen = diagonal_ntk_limit(T, law=law, lam_range=lam_range, param="frozen", nu_B=0.5, nu_C=0.5)   # E[lam^{j+k}]
    ss = diagonal_ntk_limit(T, law=law, lam_range=lam_range, param=param) - 2 * frozen                 # E[s_j s_k]
    return (nu_G**2 + 2 * nu_C * nu_G) * frozen + nu_C * nu_G**2 * ss


class InputGatedDiagonalRNN(_Recurrence):
    """h_t = lam * h_{t-1} + (W^m x_t) * (W^x x_t), y_t = C h_t / sqrt(n): the input gating of eq. (2)
    of Zucchet et al. with a linear readout (Chapter 15, section "sec-diag-gated").

    Args: n, n_x, n_y; law, lam_range (as :class:`DiagonalLinearRNN`); param "direct", "exp" or
    "frozen"; nu_G: variance of the entries of W^m and W^x; nu_C: of C; seed; dtype.
    Input x: (N, T, n_x); output (N, T, n_y).
    """

    def __init__(self, n: int, n_x: int, n_y: int, *, law: str = "uniform", lam_range=(0.0, 1.0),
                 param: str = "exp", nu_G: float = 1.0, nu_C: float = 1.0, seed: int = 0, dtype: torch.dtype = DTYPE):
        super().__init__()
        self.n, self.n_x, self.n_y = positive_int("n", n), positive_int("n_x", n_x), positive_int("n_y", n_y)
        lo, hi = _check_law(law, lam_range)
        self.param = _check_param(param)
        nu_G, nu_C = positive_real("nu_G", nu_G), positive_real("nu_C", nu_C)
        g = torch.Generator().manual_seed(seed_int("seed", seed))
        dtype = float_dtype("dtype", dtype)
        u = torch.rand(self.n, generator=g, dtype=DTYPE)
        lam = (lo + (hi - lo) * u if law == "uniform" else torch.sqrt(lo**2 + (hi**2 - lo**2) * u)).clamp(_EPS, 1 - _EPS)
        self.W_m = nn.Parameter((math.sqrt(nu_G) * torch.randn(self.n, self.n_x, generator=g, dtype=DTYPE)).to(dtype))
        self.W_x = nn.Parameter((math.sqrt(nu_G) * torch.randn(self.n, self.n_x, generator=g, dtype=DTYPE)).to(dtype))
        self.C = nn.Parameter((math.sqrt(nu_C) * torch.randn(self.n_y, self.n, generator=g, dtype=DTYPE)).to(dtype))
        self._set_recurrence(lam.to(dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = as_tensor("x", x, 3, dtype=self.C.dtype)
        if x.shape[2] != self.n_x:
            raise ValueError(f"x must have n_x = {self.n_x} channels (shape (N, T, n_x)), got {tuple(x.shape)}")
        lam, phi = self.recurrence(), (x @ self.W_m.T) * (x @ self.W_x.T)
        h, ys = torch.zeros(x.shape[0], self.n, dtype=x.dtype), []
        for t in range(x.shape[1]):
            h = lam * h + phi[:, t]
            ys.append(h @ self.C.T / math.sqrt(self.n))
        return torch.stack(ys, 1)
