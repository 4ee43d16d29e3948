"""Full-batch gradient descent, the training procedure of Emami et al. (2021), Section 4-5.

One loop for every model of Part I (``LinearRNN``, ``ScaledConv``), so the RNN and its
scaled convolution are trained by literally the same code.

Loss normalisation: ``"half_sum"`` is (1/2) sum over all samples, times and outputs of the
squared error -- the form in which Theorem 4.1's learning-rate condition eta < B_1 is stated
(eq. 58-60 of the long version); ``"mean"`` is the mean squared error per output entry.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from ._checks import as_tensor, positive_int, positive_real

__all__ = ["loss_fn", "train_gd"]


def loss_fn(yhat: torch.Tensor, y: torch.Tensor, kind: str = "half_sum") -> torch.Tensor:
    """Squared-error loss: ``"half_sum"`` = 0.5 * sum (yhat - y)^2, ``"mean"`` = mean (yhat - y)^2."""
    if yhat.shape != y.shape:
        raise ValueError(f"prediction shape {tuple(yhat.shape)} != target shape {tuple(y.shape)}")
    if kind == "half_sum":
        return 0.5 * ((yhat - y) ** 2).sum()
    if kind == "mean":
        return ((yhat - y) ** 2).mean()
    raise ValueError(f"loss kind must be 'half_sum' or 'mean', got {kind!r}")


def train_gd(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, lr: float, steps: int,
             loss: str = "half_sum", x_test: torch.Tensor | None = None,
             y_test: torch.Tensor | None = None,
             callback: Callable[[int, nn.Module], None] | None = None) -> dict[str, torch.Tensor]:
    """Plain full-batch gradient descent theta <- theta - lr * grad, ``steps`` times.

    Returns ``{"train": (steps+1,), "test": (steps+1,)}`` losses (``"mean"`` normalisation for
    reporting, whatever ``loss`` drives the updates), entry 0 at initialisation.
    ``callback(step, model)`` is called after every update (and with step 0 before the first),
    e.g. to record the impulse response for Theorem 4.1.
    """
    lr = positive_real("lr", lr)
    steps = positive_int("steps", steps, minimum=0)
    x = as_tensor("x", x, 3)
    y = as_tensor("y", y, 3)
    if x.shape[:2] != y.shape[:2]:
        raise ValueError(f"x (N, T, n_x) = {tuple(x.shape)} and y (N, T, n_y) = {tuple(y.shape)} "
                         "must have the same N and T")
    if (x_test is None) != (y_test is None):
        raise ValueError("give both x_test and y_test, or neither")
    params = [p for p in model.parameters() if p.requires_grad]
    train_hist, test_hist = [], []
    n_out = y.numel()

    def record_test():
        if x_test is not None:
            with torch.no_grad():
                test_hist.append(float(loss_fn(model(x_test), y_test, "mean")))

    # The training loss at the current parameters comes from the same forward pass that drives
    # the next update (one forward per step instead of two); only the final loss needs an
    # extra pass.  "mean" is recovered from the residual of that pass, not from ``objective``.
    record_test()
    if callback is not None:
        callback(0, model)
    for step in range(1, steps + 1):
        yhat = model(x)
        objective = loss_fn(yhat, y, loss)
        train_hist.append(float(((yhat.detach() - y) ** 2).sum()) / n_out)
        grads = torch.autograd.grad(objective, params)
        with torch.no_grad():
            for p, g in zip(params, grads):
                p.sub_(g, alpha=lr)
        record_test()
        if callback is not None:
            callback(step, model)
    with torch.no_grad():
        train_hist.append(float(loss_fn(model(x), y, "mean")))
    out = {"train": torch.tensor(train_hist)}
    if x_test is not None:
        out["test"] = torch.tensor(test_hist)
    return out
