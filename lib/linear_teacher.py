"""Teacher-student data of Part I (Emami et al. 2021, Section 5.1): a linear system's outputs.

    ``linear_teacher_dataset``   i.i.d. Gaussian inputs through a teacher's taps, plus output noise at
                          a given SNR in dB (``add_output_noise``).
    ``delay_taps``        a teacher's impulse response shifted by ``delay`` steps (the Fig. 3 task).

The teacher is any causal convolution with taps L (T_L, n_y, n_x), e.g. a teacher RNN's
``markov_parameters(T)``.  Chapters 4 (section "The task and the two students") and 5 (section
"The task, and what 'delay added to a true system' means") draw their data here.  (The online teacher tasks of
Part III, a linear self-attention teacher, are :class:`lib.tasks.AttentionTeacherTask`.)

Shapes follow the library convention: x (N, T, n_x), y (N, T, n_y), taps L (T, n_y, n_x).
"""
from __future__ import annotations

import math

import torch

from ._checks import as_tensor, finite_real, positive_int, positive_real, seed_int
from .linear_rnn import causal_conv

__all__ = ["add_output_noise", "linear_teacher_dataset", "delay_taps"]


def add_output_noise(y: torch.Tensor, snr_db: float, seed: int = 0,
                     signal_power: float | None = None) -> tuple[torch.Tensor, float]:
    """y + e with e i.i.d. N(0, s2), s2 = P / 10^(snr_db / 10), P the mean of y^2.

    ``signal_power`` overrides P (so that train and test share one noise level).
    Returns (noisy y, noise variance s2).  y: any shape; the SNR is 10 log10(P / s2) dB.
    Chapter 4, section "The task and the two students".
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


def linear_teacher_dataset(L: torch.Tensor, n_train: int, n_test: int, T: int, *, snr_db: float = 20.0,
                    seed: int = 0) -> dict[str, torch.Tensor | float]:
    """Inputs x ~ N(0, I) i.i.d., clean outputs causal_conv(L, x), plus output noise at ``snr_db``.

    Derived in Chapter 4, section "sec-fig12-task" (the noise variance from the clean training
    outputs); Chapter 5, section "sec-delay-task", uses it for the delayed teachers.

    L: (T_L, n_y, n_x) teacher taps (e.g. a teacher RNN's ``markov_parameters(T)``).
    One noise variance for both sets, from the clean *training* outputs' mean power.
    Returns dict with x_train (n_train, T, n_x), y_train, y_train_clean, x_test, y_test,
    y_test_clean, and ``noise_var`` (a float).  Chapters 4 and 5 (the teacher-student tasks
    of Section 5.1).
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
    Chapter 5, section "The task, and what 'delay added to a true system' means".
    """
    L = as_tensor("L", L, 3)
    delay = positive_int("delay", delay, minimum=0)
    if delay >= L.shape[0]:
        raise ValueError(f"delay must be in [0, T_L - 1] = [0, {L.shape[0] - 1}], got {delay}")
    out = torch.zeros_like(L)
    out[delay:] = L[: L.shape[0] - delay]
    return out
