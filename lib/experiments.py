"""The experiments of Emami et al. (2021), Section 5: data, training loops, scores, kernel limit.

Synthetic data (Section 5.1)
    ``teacher_dataset``   i.i.d. Gaussian inputs through a teacher's taps, plus output noise
                          at a given SNR in dB (``add_output_noise``).
    ``delay_taps``        shift a teacher's impulse response by ``delay`` steps (Fig. 3 task).
Real data (Section 5.2)
    ``s1_sequences``      the S1 recording cut into contiguous train / validation / test blocks,
                          normalised with training statistics, windowed into length-T sequences.
Training and scores
    ``TapsRNN``           a ``LinearRNN`` evaluated through its Markov parameters (fast forward).
    ``train_minibatch``   mini-batch gradient descent with a seeded shuffle (S1, batch 128).
    ``r2_score``          coefficient of determination per output channel.
Kernel-regime limit (Section 3-4)
    ``conv_features``     the design matrix of a causal convolution.
    ``rho_ridge``         the rho-weighted ridge / minimum-rho-norm least-squares solution.
    ``gd_path``           closed-form gradient-descent (or gradient-flow) path of the scaled
                          convolution: the wide-RNN limit of GD training.

Shapes follow the library convention: x (N, T, n_x), y (N, T, n_y), taps L (T, n_y, n_x).
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch
from torch import nn

from ._checks import DTYPE, as_tensor, finite_real, positive_int, positive_real, seed_int
from .linear_rnn import LinearRNN, _conv_fast, _markov, causal_conv, markov_parameters
from .training import loss_fn

__all__ = [
    "add_output_noise",
    "teacher_dataset",
    "delay_taps",
    "s1_sequences",
    "markov_taps",
    "TapsRNN",
    "train_minibatch",
    "r2_score",
    "conv_features",
    "rho_ridge",
    "gd_path",
    "select_by_validation",
    "learned_fraction",
    "white_input_memory",
    "fit_memory_nu_W",
]


# --------------------------------------------------------------------------------------
# Synthetic data (Section 5.1)
# --------------------------------------------------------------------------------------

def add_output_noise(y: torch.Tensor, snr_db: float, seed: int = 0,
                     signal_power: float | None = None) -> tuple[torch.Tensor, float]:
    """y + e with e i.i.d. N(0, s2), s2 = P / 10^(snr_db / 10), P the mean of y^2.

    ``signal_power`` overrides P (so that train and test share one noise level).
    Returns (noisy y, noise variance s2).  y: any shape; the SNR is 10 log10(P / s2) dB.
    """
    y = as_tensor("y", y, (1, 2, 3))
    snr_db = finite_real("snr_db", snr_db)
    seed = seed_int("seed", seed)
    P = float((y**2).mean()) if signal_power is None else positive_real("signal_power", signal_power)
    if P <= 0:
        raise ValueError("y is identically zero: the SNR of its noise is undefined; pass signal_power")
    s2 = P / 10 ** (snr_db / 10)
    g = torch.Generator().manual_seed(seed)
    e = math.sqrt(s2) * torch.randn(y.shape, generator=g, dtype=y.dtype)
    return y + e, s2


def teacher_dataset(L: torch.Tensor, n_train: int, n_test: int, T: int, *, snr_db: float = 20.0,
                    seed: int = 0) -> dict[str, torch.Tensor | float]:
    """Inputs x ~ N(0, I) i.i.d., clean outputs causal_conv(L, x), plus output noise at ``snr_db``.

    L: (T_L, n_y, n_x) teacher taps (e.g. a teacher RNN's ``markov_parameters(T)``).
    One noise variance for both sets, from the clean *training* outputs' mean power.
    Returns dict with x_train (n_train, T, n_x), y_train, y_train_clean, x_test, y_test,
    y_test_clean, and ``noise_var`` (a float).
    """
    L = as_tensor("L", L, 3)
    n_train = positive_int("n_train", n_train)
    n_test = positive_int("n_test", n_test)
    T = positive_int("T", T)
    snr_db = finite_real("snr_db", snr_db)
    seed = seed_int("seed", seed)
    n_x = L.shape[2]
    g = torch.Generator().manual_seed(seed)
    x_tr = torch.randn(n_train, T, n_x, generator=g, dtype=L.dtype)
    x_ts = torch.randn(n_test, T, n_x, generator=g, dtype=L.dtype)
    c_tr, c_ts = causal_conv(L, x_tr), causal_conv(L, x_ts)
    P = float((c_tr**2).mean())
    if P <= 0:
        raise ValueError("the teacher's outputs are identically zero on the training inputs")
    y_tr, s2 = add_output_noise(c_tr, snr_db, seed=seed + 1, signal_power=P)
    y_ts, _ = add_output_noise(c_ts, snr_db, seed=seed + 2, signal_power=P)
    return dict(x_train=x_tr, y_train=y_tr, y_train_clean=c_tr, x_test=x_ts, y_test=y_ts,
                y_test_clean=c_ts, noise_var=s2)


def delay_taps(L: torch.Tensor, delay: int) -> torch.Tensor:
    """Taps of the system delayed by ``delay`` steps: L'_j = L_{j - delay} (0 for j < delay).

    The length T_L is kept (taps shifted past the end are dropped), so the delayed system's
    output is y'_t = y_{t - delay} on sequences of length <= T_L.  0 <= delay < T_L.
    """
    L = as_tensor("L", L, 3)
    delay = positive_int("delay", delay, minimum=0)
    if delay >= L.shape[0]:
        raise ValueError(f"delay must be in [0, T_L - 1] = [0, {L.shape[0] - 1}], got {delay}")
    out = torch.zeros_like(L)
    out[delay:] = L[: L.shape[0] - delay]
    return out


# --------------------------------------------------------------------------------------
# The S1 recording (Section 5.2)
# --------------------------------------------------------------------------------------

def _windows(a: np.ndarray, T: int) -> np.ndarray:
    """Non-overlapping length-T windows of a (bins, d) array -> (bins // T, T, d)."""
    m = (a.shape[0] // T) * T
    return a[:m].reshape(-1, T, a.shape[1])


def s1_sequences(spikes, vel, T: int = 15, *, fractions=(0.7, 0.1, 0.2), train_bins: int | None = None,
                 train_offset: int = 0) -> dict[str, torch.Tensor]:
    """Cut the S1 recording into train / validation / test sequences of length T.

    spikes: (bins, n_neurons) counts; vel: (bins, 2) hand velocity.
    The recording is split in time into three contiguous blocks with the given ``fractions``
    (train, validation, test; in that order, so no window straddles two blocks and the test
    block lies after everything the model saw).  ``train_bins`` keeps only that many bins of
    the training block starting at ``train_offset`` (the paper's "limited data": 5400 bins =
    4.5 min at 50 ms).  Inputs and outputs are z-scored per channel with the mean and standard
    deviation of the bins actually used for training.  Each block is cut into non-overlapping
    windows of T bins (the remainder is dropped); every window starts from a zero state.

    Returns float64 tensors x_train (N, T, n_neurons), y_train (N, T, 2), x_val, y_val,
    x_test, y_test, and the normalisation x_mean, x_std, y_mean, y_std.
    """
    spikes = np.asarray(spikes, dtype=np.float64)
    vel = np.asarray(vel, dtype=np.float64)
    if spikes.ndim != 2 or vel.ndim != 2:
        raise ValueError(f"spikes and vel must be 2-D (bins, channels), got {spikes.shape} and {vel.shape}")
    if not (np.isfinite(spikes).all() and np.isfinite(vel).all()):
        raise ValueError("spikes and vel must be finite (they contain NaN or infinite entries)")
    if spikes.shape[0] != vel.shape[0]:
        raise ValueError(f"spikes ({spikes.shape[0]} bins) and vel ({vel.shape[0]} bins) must have "
                         "the same number of bins")
    T = positive_int("T", T)
    fr = [float(f) for f in fractions]
    if len(fr) != 3 or any(f <= 0 for f in fr) or abs(sum(fr) - 1) > 1e-12:
        raise ValueError(f"fractions must be three positive numbers summing to 1, got {fractions!r}")
    n = spikes.shape[0]
    cut1, cut2 = int(round(fr[0] * n)), int(round((fr[0] + fr[1]) * n))
    blocks = {"train": slice(0, cut1), "val": slice(cut1, cut2), "test": slice(cut2, n)}
    train_offset = positive_int("train_offset", train_offset, minimum=0)
    if train_bins is not None:
        train_bins = positive_int("train_bins", train_bins, minimum=T)
        if train_offset + train_bins > cut1:
            raise ValueError(f"train_offset + train_bins must be <= the training block's {cut1} bins, "
                             f"got {train_offset} + {train_bins}")
        blocks["train"] = slice(train_offset, train_offset + train_bins)
    elif train_offset != 0:
        raise ValueError("train_offset is only meaningful together with train_bins")
    for k, s in blocks.items():
        if s.stop - s.start < T:
            raise ValueError(f"the {k} block has {s.stop - s.start} bins, fewer than T = {T}")
    xs, ys = spikes[blocks["train"]], vel[blocks["train"]]
    x_mean, x_std = xs.mean(0), xs.std(0)
    y_mean, y_std = ys.mean(0), ys.std(0)
    x_std[x_std == 0] = 1.0  # a silent neuron stays at zero after centring
    out: dict[str, torch.Tensor] = {}
    for k, s in blocks.items():
        out[f"x_{k}"] = torch.from_numpy(_windows((spikes[s] - x_mean) / x_std, T).copy())
        out[f"y_{k}"] = torch.from_numpy(_windows((vel[s] - y_mean) / y_std, T).copy())
    out.update(x_mean=torch.from_numpy(x_mean), x_std=torch.from_numpy(x_std),
               y_mean=torch.from_numpy(y_mean), y_std=torch.from_numpy(y_std))
    return out


# --------------------------------------------------------------------------------------
# Fast RNN forward through its Markov parameters
# --------------------------------------------------------------------------------------

def markov_taps(W: torch.Tensor, F: torch.Tensor, C: torch.Tensor, T: int) -> torch.Tensor:
    """L_j = n^{-(j+1)/2} C W^j F, j < T, shape (T, n_y, n_x): the same as ``impulse_response``
    (the plain reference), computed by the Markov engine ``lib.linear_rnn.markov_parameters``,
    which works on the side with fewer vectors (C W^j when n_y < n_x) and, for n_x == n_y,
    fuses both Krylov sequences into one pass over W.  Cost O(T n^2 min(n_x, n_y)) per pass.
    Differentiable in W, F, C (reverse and forward mode, torch.func transforms).
    """
    return markov_parameters(W, F, C, T)


class TapsRNN(nn.Module):
    """A ``LinearRNN`` evaluated as the causal convolution with its own Markov parameters.

    Same parameters (the wrapped RNN's W, F, C, shared, not copied), same map (Prop. 2.1a),
    computed in O(T n^2 min(n_x, n_y)) instead of O(N T n^2) per forward pass.
    ``forward_recurrence`` keeps the plain step-by-step reference.
    """

    def __init__(self, rnn: LinearRNN):
        super().__init__()
        if not isinstance(rnn, LinearRNN):
            raise TypeError(f"rnn must be a lib.LinearRNN, got {type(rnn).__name__}")
        self.rnn = rnn

    def taps(self, T: int) -> torch.Tensor:
        return markov_taps(self.rnn.W, self.rnn.F, self.rnn.C, T)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.rnn._check_input(x)
        return _conv_fast(_markov(self.rnn.W, self.rnn.F, self.rnn.C, x.shape[1]), x)

    def forward_recurrence(self, x: torch.Tensor) -> torch.Tensor:
        return self.rnn.forward_recurrence(x)


# --------------------------------------------------------------------------------------
# Mini-batch training and R^2
# --------------------------------------------------------------------------------------

def r2_score(yhat: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Coefficient of determination per output channel, 1 - SSE / SST over all samples and times.

    yhat, y: (N, T, n_y) or (M, n_y).  SST is taken about the mean of ``y`` itself.
    Returns (n_y,).  R^2 = 1 for a perfect prediction, 0 for predicting the mean.
    """
    y = as_tensor("y", y, (2, 3))
    yhat = as_tensor("yhat", yhat, (2, 3))
    if yhat.shape != y.shape:
        raise ValueError(f"yhat shape {tuple(yhat.shape)} != y shape {tuple(y.shape)}")
    y2, p2 = y.reshape(-1, y.shape[-1]), yhat.reshape(-1, y.shape[-1])
    if y2.shape[0] < 2:
        raise ValueError("r2_score needs at least 2 samples")
    sst = ((y2 - y2.mean(0)) ** 2).sum(0)
    if (sst == 0).any():
        raise ValueError("y is constant in some channel: R^2 is undefined")
    return 1 - ((y2 - p2) ** 2).sum(0) / sst


def train_minibatch(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, lr: float, epochs: int,
                    batch_size: int = 128, seed: int = 0, loss: str = "half_sum",
                    evaluate: Callable[[int, nn.Module], dict] | None = None) -> list[dict]:
    """Mini-batch gradient descent: each epoch visits a fresh seeded permutation of the N
    sequences in batches of ``batch_size`` (the last batch may be smaller), one step each.

    ``loss`` is the per-batch objective (``"half_sum"`` or ``"mean"``, as in ``train_gd``).
    With ``"half_sum"`` the batch losses add up to the full-data loss, so one epoch is, to
    first order in lr, one full-batch GD step with the same lr.  ``evaluate(epoch, model)``
    is called at epoch 0 (initialisation) and after every epoch; its dicts are returned.
    """
    lr = positive_real("lr", lr)
    epochs = positive_int("epochs", epochs, minimum=0)
    batch_size = positive_int("batch_size", batch_size)
    seed = seed_int("seed", seed)
    x = as_tensor("x", x, 3)
    y = as_tensor("y", y, 3)
    if x.shape[:2] != y.shape[:2]:
        raise ValueError(f"x (N, T, n_x) = {tuple(x.shape)} and y (N, T, n_y) = {tuple(y.shape)} "
                         "must have the same N and T")
    if loss not in ("half_sum", "mean"):
        raise ValueError(f"loss must be 'half_sum' or 'mean', got {loss!r}")
    params = [p for p in model.parameters() if p.requires_grad]
    g = torch.Generator().manual_seed(seed)
    hist = []
    if evaluate is not None:
        hist.append(evaluate(0, model))
    N = x.shape[0]
    for epoch in range(1, epochs + 1):
        perm = torch.randperm(N, generator=g)
        for start in range(0, N, batch_size):
            idx = perm[start:start + batch_size]
            objective = loss_fn(model(x[idx]), y[idx], loss)
            grads = torch.autograd.grad(objective, params)
            with torch.no_grad():
                for p, gr in zip(params, grads):
                    p.sub_(lr * gr)
        if evaluate is not None:
            hist.append(evaluate(epoch, model))
    return hist


# --------------------------------------------------------------------------------------
# Kernel-regime limit: rho-weighted least squares and the closed-form GD path
# --------------------------------------------------------------------------------------

def conv_features(x: torch.Tensor, T_L: int | None = None) -> torch.Tensor:
    """Design matrix Phi of the causal convolution: row (i, t) = [x_t, x_{t-1}, ..., x_{t-T_L+1}]
    of sequence i (zeros before the start), so that y_t = Phi L^flat with
    L^flat[j n_x + k, a] = (L_j)_{a k}.  x: (N, T, n_x) -> (N T, T_L n_x); T_L defaults to T."""
    x = as_tensor("x", x, 3)
    N, T, n_x = x.shape
    T_L = T if T_L is None else positive_int("T_L", T_L)
    cols = []
    for j in range(T_L):
        shifted = torch.zeros_like(x)
        if j < T:
            shifted[:, j:, :] = x[:, : T - j, :]
        cols.append(shifted)
    return torch.cat(cols, dim=2).reshape(N * T, T_L * n_x)


def _flat_to_taps(Lf: torch.Tensor, T_L: int, n_x: int) -> torch.Tensor:
    # Lf: (T_L n_x, n_y) -> (T_L, n_y, n_x)
    return Lf.reshape(T_L, n_x, -1).permute(0, 2, 1).contiguous()


def _taps_to_flat(L: torch.Tensor) -> torch.Tensor:
    return L.permute(0, 2, 1).reshape(L.shape[0] * L.shape[2], L.shape[1])


def _check_xy_rho(x, y, rho):
    x = as_tensor("x", x, 3)
    y = as_tensor("y", y, 3)
    if x.shape[:2] != y.shape[:2]:
        raise ValueError(f"x (N, T, n_x) = {tuple(x.shape)} and y (N, T, n_y) = {tuple(y.shape)} "
                         "must have the same N and T")
    rho = as_tensor("rho", rho, 1, dtype=x.dtype)
    if (rho <= 0).any():
        raise ValueError(f"rho must be positive, got min {float(rho.min())}")
    return x, y, rho


def rho_ridge(x: torch.Tensor, y: torch.Tensor, rho: torch.Tensor, lam: float) -> torch.Tensor:
    """argmin_L 1/2 sum ||y - causal_conv(L, x)||^2 + lam/2 sum_j ||L_j||_F^2 / rho_j.

    x: (N, T, n_x), y: (N, T, n_y), rho: (T_L,) positive.  In the variables theta_j = L_j /
    sqrt(rho_j) this is ordinary ridge regression on features scaled by sqrt(rho_j): the
    scaled convolution's implicit penalty.  ``lam = 0`` gives the least-squares solution of
    minimum rho-weighted norm (the pseudo-inverse).  Returns taps (T_L, n_y, n_x).
    """
    x, y, rho = _check_xy_rho(x, y, rho)
    if isinstance(lam, bool) or not isinstance(lam, (int, float)) or not math.isfinite(lam) or lam < 0:
        raise ValueError(f"lam must be a finite real number >= 0, got {lam!r}")
    T_L, n_x, n_y = rho.shape[0], x.shape[2], y.shape[2]
    Phi = conv_features(x, T_L) * rho.sqrt().repeat_interleave(n_x)[None, :]
    Y = y.reshape(-1, n_y)
    if lam == 0:
        theta = torch.linalg.pinv(Phi) @ Y
    else:
        A = Phi.T @ Phi + lam * torch.eye(Phi.shape[1], dtype=Phi.dtype)
        theta = torch.linalg.solve(A, Phi.T @ Y)
    return _flat_to_taps(theta * rho.sqrt().repeat_interleave(n_x)[:, None], T_L, n_x)


def gd_path(x: torch.Tensor, y: torch.Tensor, rho: torch.Tensor, L0: torch.Tensor, lr: float,
            steps, *, flow: bool = False) -> torch.Tensor:
    """Taps of the scaled convolution after ``steps`` GD steps on the 1/2-sum loss, in closed form.

    The model y = causal_conv(sqrt(rho) theta, x) is linear in theta, so full-batch GD with
    learning rate lr from theta_0 = L0 / sqrt(rho) is theta_l = theta_0 - U diag(c_l) U^T g_0
    with A = U diag(lam) U^T the Hessian Phi_rho^T Phi_rho, g_0 = A theta_0 - Phi_rho^T Y and
    c_l(lam) = (1 - (1 - lr lam)^l) / lam (-> lr l as lam -> 0).  ``flow=True`` gives the
    gradient flow at time lr * l instead, c(lam) = (1 - exp(-lr l lam)) / lam, the lr -> 0
    limit with lr * l fixed.  This is the kernel-regime (n -> infinity) limit of training the
    linear RNN (Theorems 3.2-3.3).

    steps: an int or a 1-D sequence of non-negative ints.  Returns (len(steps), T_L, n_y, n_x).
    """
    x, y, rho = _check_xy_rho(x, y, rho)
    lr = positive_real("lr", lr)
    T_L, n_x, n_y = rho.shape[0], x.shape[2], y.shape[2]
    L0 = as_tensor("L0", L0, 3, dtype=x.dtype)
    if L0.shape != (T_L, n_y, n_x):
        raise ValueError(f"L0 must have shape (T_L, n_y, n_x) = {(T_L, n_y, n_x)}, got {tuple(L0.shape)}")
    step_list = [steps] if isinstance(steps, (int, np.integer)) and not isinstance(steps, bool) else list(steps)
    step_list = [positive_int("steps", int(s) if isinstance(s, np.integer) else s, minimum=0) for s in step_list]
    if not step_list:
        raise ValueError("steps must hold at least one step count")
    sq = rho.sqrt().repeat_interleave(n_x)
    Phi = conv_features(x, T_L) * sq[None, :]
    Y = y.reshape(-1, n_y)
    A = Phi.T @ Phi
    lam, U = torch.linalg.eigh(A)
    lam = lam.clamp_min(0)
    theta0 = _taps_to_flat(L0) / sq[:, None]
    g0 = U.T @ (A @ theta0 - Phi.T @ Y)
    out = []
    for s in step_list:
        if flow:
            t = lr * s
            c = torch.where(lam * t > 1e-12, -torch.expm1(-t * lam) / lam.clamp_min(1e-300), t * torch.ones_like(lam))
        else:
            if s > 0 and bool((lr * lam.max() >= 2)):
                raise ValueError(f"lr * lambda_max = {float(lr * lam.max()):.3g} >= 2: GD diverges; "
                                 "use a smaller lr or flow=True")
            q = 1 - lr * lam
            pos = q > 0  # 1 - q^s without cancellation where log1p applies
            c_pos = -torch.expm1(s * torch.log1p(-lr * lam.where(pos, torch.zeros_like(lam))))
            c = torch.where(pos, c_pos, 1 - q**s) / lam.clamp_min(1e-300)
            c = torch.where(lam * lr < 1e-14, lr * s * torch.ones_like(lam), c)
        theta = theta0 - U @ (c[:, None] * g0)
        out.append(_flat_to_taps(theta * sq[:, None], T_L, n_x))
    return torch.stack(out)


# --------------------------------------------------------------------------------------
# Early stopping and the memory a trained model has acquired (Chapters 5 and 6)
# --------------------------------------------------------------------------------------

def select_by_validation(val, test) -> tuple[int, np.ndarray]:
    """Early stopping: the budget with the best validation score, and the test score there.

    val: (B,) or (B, k) validation scores (higher is better; k columns are averaged, e.g. the
    R^2 of the x and y velocity), one row per training budget; test: (B, ...) test scores on
    the same budgets.  Returns (index of the best validation row, test[index]).  The first
    maximum wins, so a flat validation curve selects the shortest budget.  Used in
    Chapter 6 (section "Table 1"), where the budget is chosen on a validation block the
    test never sees.
    """
    v = np.asarray(val, dtype=np.float64)
    t = np.asarray(test, dtype=np.float64)
    if v.ndim not in (1, 2) or v.shape[0] < 1 or v.size == 0:
        raise ValueError(f"val must have shape (B,) or (B, k) with B >= 1, got {v.shape}")
    if t.ndim < 1 or t.shape[0] != v.shape[0]:
        raise ValueError(f"test must have one row per budget (B = {v.shape[0]}), got shape {t.shape}")
    if not (np.isfinite(v).all() and np.isfinite(t).all()):
        raise ValueError("val and test must be finite (they contain NaN or infinite entries)")
    score = v if v.ndim == 1 else v.mean(1)
    best = int(np.argmax(score))
    return best, t[best]


def learned_fraction(L: torch.Tensor, L0: torch.Tensor, L_target: torch.Tensor) -> torch.Tensor:
    """Per lag j, the fraction of the way from the start L0_j to the target L_target_j that
    training has gone: f_j = <L_j - L0_j, D_j> / ||D_j||^2 with D_j = L_target_j - L0_j.

    L, L0, L_target: taps (T, n_y, n_x).  Returns (T,).  f_j = 1: lag j learned; f_j = 0: not
    moved towards the target (movement orthogonal to D_j, such as finite-width cross-talk from
    other lags, averages out of f_j).  With the target the true system this is the memory
    profile of Chapter 5 (section "Memory is set by nu_W"); with the target the kernel-regime
    taps it measures how far a model follows its kernel limit (Chapter 6).
    """
    L = as_tensor("L", L, 3)
    L0 = as_tensor("L0", L0, 3, dtype=L.dtype)
    L_target = as_tensor("L_target", L_target, 3, dtype=L.dtype)
    if L0.shape != L.shape or L_target.shape != L.shape:
        raise ValueError(f"L, L0 and L_target must have the same shape (T, n_y, n_x); got {tuple(L.shape)}, "
                         f"{tuple(L0.shape)} and {tuple(L_target.shape)}")
    D = (L_target - L0).flatten(1)
    den = (D**2).sum(1)
    if (den == 0).any():
        j = int(torch.nonzero(den == 0)[0])
        raise ValueError(f"L_target equals L0 at lag {j}: the learned fraction is undefined there")
    return ((L - L0).flatten(1) * D).sum(1) / den


def white_input_memory(T: int, nu_W: float, nu_F: float, nu_C: float, lr: float, steps: int,
                       n_seq: int) -> torch.Tensor:
    """Kernel-regime prediction of ``learned_fraction`` for white inputs: lag j is learned like
    a decoupled coordinate with curvature lambda_j = n_seq (T - j) (the number of (sequence,
    time) pairs that see lag j, unit input variance) and kernel weight rho_j (eq. 21), so
    after ``steps`` GD steps with learning rate ``lr``

        f_j = 1 - exp(-lr * steps * lambda_j * rho_j(nu_W)).

    First order in the cross-lag couplings of a finite sample; returns (T,) float64.
    Chapter 5, section "Memory is set by nu_W".
    """
    T = positive_int("T", T)
    steps = positive_int("steps", steps)
    n_seq = positive_int("n_seq", n_seq)
    lr = positive_real("lr", lr)
    from .scaled_conv import rho as _rho
    r = _rho(T, nu_W, nu_F, nu_C)
    lam = n_seq * (T - torch.arange(T, dtype=DTYPE))
    return -torch.expm1(-lr * steps * lam * r)


def fit_memory_nu_W(f, T: int, nu_F: float, nu_C: float, lr: float, steps: int, n_seq: int, *,
                    lags) -> float:
    """The nu_W whose white-input memory profile (``white_input_memory``) learns, summed over the
    given ``lags``, as much as the measured learned fractions ``f`` (T,): the solution of
    sum_{j in lags} f_j(nu_W) = sum_{j in lags} f_j, the memory of a trained model read back as a
    nu_W.  The predicted sum increases with nu_W, so the solution is unique; the sum (rather
    than a fit lag by lag) keeps single lags whose fraction is pushed below zero by the
    finite-sample cross-talk between lags from breaking the estimate.

    ``lags``: a non-empty list of lag indices in [0, T) (choose them before looking at f, e.g.
    where the prediction at the nominal nu_W lies in (0.02, 0.9)).  Returns nu_W in
    (0.01, 0.99); raises ValueError when the measured sum lies outside what that range
    predicts.  Chapter 5, section "Memory is set by nu_W".
    """
    from scipy.optimize import brentq

    T = positive_int("T", T)
    f = as_tensor("f", f, 1)
    if f.shape[0] != T:
        raise ValueError(f"f must have shape (T,) = ({T},), got {tuple(f.shape)}")
    lags = [positive_int("lags entry", int(j) if isinstance(j, np.integer) else j, minimum=0) for j in lags]
    if not lags or max(lags) >= T:
        raise ValueError(f"lags must be a non-empty list of lags in [0, {T - 1}], got {lags}")
    positive_real("nu_F", nu_F), positive_real("nu_C", nu_C)
    positive_real("lr", lr), positive_int("steps", steps), positive_int("n_seq", n_seq)
    target = float(f[lags].sum())

    def excess(nu):
        return float(white_input_memory(T, nu, nu_F, nu_C, lr, steps, n_seq)[lags].sum()) - target

    lo, hi = excess(0.01), excess(0.99)
    if not lo <= 0 <= hi:
        raise ValueError(f"the measured memory sum {target:.4g} over lags {lags} lies outside the range "
                         f"predicted for nu_W in (0.01, 0.99) ({lo + target:.4g} to {hi + target:.4g})")
    return float(brentq(excess, 0.01, 0.99, xtol=1e-10))
