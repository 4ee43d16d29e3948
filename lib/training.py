"""Training: every loop of the library, the losses they minimise and the scores they report.

Gradient descent, written out (Part I, Emami et al. 2021, Sections 4-5):
    ``train_gd``          full-batch GD theta <- theta - lr grad, one loop for every model of
                          Part I (``LinearRNN``, ``ScaledConv``), so the RNN and its scaled
                          convolution are trained by literally the same code.
    ``train_minibatch``   mini-batch GD with a seeded shuffle (the S1 decoder, Section 5.2).
torch optimisers:
    ``train_adamw``       the online training of Zucchet et al. (2023), App. B.1 (AdamW, cosine
                          schedule, a fresh batch every step) for one model, with torch's AdamW
                          and scheduler: the plain reference of :func:`lib.online.train_online`.
Losses and scores:
    ``loss_fn``, ``r2_score`` and
    ``select_by_validation`` (early stopping on a validation block).

One loop shape: every loop validates its arguments before any work with the same checks
(``lib._checks``: sizes, rates, seeds, paired sequences; the loss kinds and AdamW settings
here), collects the trainable parameters the same way, and takes a step in one of two ways --
a written-out GD update (``_gd_step``) or a torch optimizer step (``_optimizer_step``).  The
histories differ where the chapters read them differently (per-step losses, per-epoch
evaluations, block means); ``train_adamw`` and ``lib.online.train_online`` share theirs.

Loss normalisation: ``"half_sum"`` is (1/2) sum over all samples, times and outputs of the
squared error -- the form in which Theorem 4.1's learning-rate condition eta < B_1 is stated
(eq. 58-60 of the long version); ``"mean"`` is the mean squared error per output entry.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch
from torch import nn

from ._checks import (DTYPE, as_tensor, check_output, data_matches_model, finite, model_dtype_device,
                      positive_int, positive_real, seed_int, sequence_pair)
from .online import check_adamw, is_log_step

__all__ = ["loss_fn", "train_gd", "train_minibatch", "train_adamw", "r2_score",
           "select_by_validation"]

LOSS_KINDS = ("half_sum", "mean")


# ----------------------------------------------------------------------------- shared pieces

def _trainable(model: nn.Module) -> list[nn.Parameter]:
    """The parameters a loop updates: those that require a gradient, in ``parameters()`` order."""
    return [p for p in model.parameters() if p.requires_grad]


def _check_callable(name: str, value, optional: bool = True):
    if value is None and optional:
        return None
    if not callable(value):
        raise TypeError(f"{name} must be callable, got {type(value).__name__}")
    return value


def _check_model(model) -> list[nn.Parameter]:
    """The trainable parameters of a model (a TypeError naming ``model`` if it has none)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    model_dtype_device(model)
    params = _trainable(model)
    if not params:
        raise ValueError("model has no trainable parameter (every parameter has requires_grad=False)")
    for name, p in model.named_parameters():
        finite(f"model parameter {name}", p.detach())
    return params


def _check_objective(model: nn.Module, x: torch.Tensor, y: torch.Tensor, x_name: str, y_name: str) -> None:
    """Before any update: the data in the model's dtype and device, and the model's output on one
    sequence of ``x`` of the shape of that sequence's target (no broadcasting)."""
    data_matches_model(model, **{x_name: x, y_name: y})
    with torch.no_grad():
        out = model(x[:1])
    check_output(f"the model's output on {x_name}", out, y[:1], f"{y_name} (its target)")


def _check_loss_kind(loss: str) -> str:
    if loss not in LOSS_KINDS:
        raise ValueError(f"loss must be 'half_sum' or 'mean', got {loss!r}")
    return loss


def _gd_step(objective: torch.Tensor, params: list[nn.Parameter], lr: float, *, fused: bool) -> None:
    """One gradient-descent update p <- p - lr * d objective / dp of every parameter, in place.

    ``fused=True``: ``p.sub_(g, alpha=lr)`` (torch's multiply-add, one rounding), the update of
    ``train_gd``; ``fused=False``: ``p.sub_(lr * g)`` (lr * g rounded first), the update of
    ``train_minibatch``.  The two differ in the last bit, and each loop keeps its own so that
    the chapters' numbers stay those of the runs they were argued on.
    """
    grads = torch.autograd.grad(objective, params)
    with torch.no_grad():
        for p, g in zip(params, grads):
            if fused:
                p.sub_(g, alpha=lr)
            else:
                p.sub_(lr * g)


def _optimizer_step(opt: torch.optim.Optimizer, objective: torch.Tensor, set_to_none: bool = True) -> None:
    """One step of a torch optimizer on ``objective``: clear the gradients, back-propagate, step."""
    opt.zero_grad(set_to_none=set_to_none)
    objective.backward()
    opt.step()


def _adamw(model: nn.Module, lr, weight_decay, no_decay: tuple[str, ...], **options) -> torch.optim.AdamW:
    """AdamW with two parameter groups: weight decay for every trainable parameter except those
    whose name ends with an entry of ``no_decay`` (the recurrent lam), which get none."""
    decay, plain = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (plain if name.endswith(no_decay) else decay).append(p)
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": plain, "weight_decay": 0.0}], lr=lr, **options)


# ----------------------------------------------------------------------------- gradient descent

def loss_fn(yhat: torch.Tensor, y: torch.Tensor, kind: str = "half_sum") -> torch.Tensor:
    """Squared-error loss: ``"half_sum"`` = 0.5 * sum (yhat - y)^2, ``"mean"`` = mean (yhat - y)^2.

    Used by ``train_gd`` and ``train_minibatch``; Chapter 4, section "sec-fig12-task", explains the
    two kinds: the 1/2-sum is the normalisation the kernel theory is stated in, the mean is what the
    error curves report.
    """
    if kind not in LOSS_KINDS:
        raise ValueError(f"loss kind must be 'half_sum' or 'mean', got {kind!r}")
    yhat = as_tensor("yhat", yhat, tuple(range(1, 8)))
    y = as_tensor("y", y, tuple(range(1, 8)))
    if yhat.shape != y.shape:
        raise ValueError(f"prediction yhat has shape {tuple(yhat.shape)} but the target y has shape "
                         f"{tuple(y.shape)}: they must be equal (a broadcast would compute another loss)")
    if yhat.device != y.device:
        raise TypeError(f"yhat is on {yhat.device} but y is on {y.device}")
    return _loss(yhat, y, kind)


def _loss(yhat: torch.Tensor, y: torch.Tensor, kind: str) -> torch.Tensor:
    """:func:`loss_fn` without its checks (the training loops' inner call, on checked data)."""
    if kind == "half_sum":
        return 0.5 * ((yhat - y) ** 2).sum()
    return ((yhat - y) ** 2).mean()


def train_gd(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, lr: float, steps: int,
             loss: str = "half_sum", x_test: torch.Tensor | None = None,
             y_test: torch.Tensor | None = None,
             callback: Callable[[int, nn.Module], None] | None = None) -> dict[str, torch.Tensor]:
    """Plain full-batch gradient descent theta <- theta - lr * grad, ``steps`` times.

    Returns ``{"train": (steps+1,), "test": (steps+1,)}`` losses (``"mean"`` normalisation for
    reporting, whatever ``loss`` drives the updates), entry 0 at initialisation.
    ``callback(step, model)`` is called after every update (and with step 0 before the first),
    e.g. to record the impulse response for Theorem 4.1.  Chapter 3 (section "Gradient descent
    on the convolution, exactly") checks it against the closed form; Chapters 4 and 5 train
    the RNN and the convolutions with it.
    """
    lr = positive_real("lr", lr)
    steps = positive_int("steps", steps, minimum=0)
    x, y = sequence_pair(x, y)
    _check_loss_kind(loss)
    _check_callable("callback", callback)
    if (x_test is None) != (y_test is None):
        raise ValueError("give both x_test and y_test, or neither")
    params = _check_model(model)
    _check_objective(model, x, y, "x", "y")
    if x_test is not None:
        x_test, y_test = sequence_pair(x_test, y_test, names=("x_test", "y_test"))
        if x_test.shape[2] != x.shape[2] or y_test.shape[2] != y.shape[2]:
            raise ValueError(f"x_test {tuple(x_test.shape)} and y_test {tuple(y_test.shape)} must have the "
                             f"channels of x ({x.shape[2]}) and y ({y.shape[2]})")
        _check_objective(model, x_test, y_test, "x_test", "y_test")
    train_hist, test_hist = [], []
    n_out = y.numel()

    def record_test():
        if x_test is not None:
            with torch.no_grad():
                test_hist.append(float(_loss(model(x_test), y_test, "mean")))

    # The training loss at the current parameters comes from the same forward pass that drives
    # the next update (one forward per step instead of two); only the final loss needs an
    # extra pass.  "mean" is recovered from the residual of that pass, not from ``objective``.
    record_test()
    if callback is not None:
        callback(0, model)
    for step in range(1, steps + 1):
        yhat = model(x)
        objective = _loss(yhat, y, loss)
        train_hist.append(float(((yhat.detach() - y) ** 2).sum()) / n_out)
        _gd_step(objective, params, lr, fused=True)
        record_test()
        if callback is not None:
            callback(step, model)
    with torch.no_grad():
        train_hist.append(float(_loss(model(x), y, "mean")))
    out = {"train": torch.tensor(train_hist)}
    if x_test is not None:
        out["test"] = torch.tensor(test_hist)
    return out


def train_minibatch(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, lr: float, epochs: int,
                    batch_size: int = 128, seed: int = 0, loss: str = "half_sum",
                    evaluate: Callable[[int, nn.Module], object] | None = None) -> list:
    """Mini-batch gradient descent: each epoch visits a fresh seeded permutation of the N
    sequences in batches of ``batch_size`` (the last batch may be smaller), one step each.

    ``loss`` is the per-batch objective (``"half_sum"`` or ``"mean"``, as in ``train_gd``).
    With ``"half_sum"`` the batch losses add up to the full-data loss, so one epoch is, to
    first order in lr, one full-batch GD step with the same lr.  ``evaluate(epoch, model)``
    is called at epoch 0 (initialisation) and after every epoch; what it returns is returned,
    one entry per call.  Chapter 6 (sections "The data" and "The RNN's memory on S1 is set by
    nu_W") trains the S1 decoders with it.
    """
    lr = positive_real("lr", lr)
    epochs = positive_int("epochs", epochs, minimum=0)
    batch_size = positive_int("batch_size", batch_size)
    seed = seed_int("seed", seed)
    x, y = sequence_pair(x, y)
    _check_loss_kind(loss)
    _check_callable("evaluate", evaluate)
    params = _check_model(model)
    _check_objective(model, x, y, "x", "y")
    g = torch.Generator().manual_seed(seed)
    hist = []
    if evaluate is not None:
        hist.append(evaluate(0, model))
    N = x.shape[0]
    for epoch in range(1, epochs + 1):
        perm = torch.randperm(N, generator=g)
        for start in range(0, N, batch_size):
            idx = perm[start:start + batch_size]
            _gd_step(_loss(model(x[idx]), y[idx], loss), params, lr, fused=False)
        if evaluate is not None:
            hist.append(evaluate(epoch, model))
    return hist


# ----------------------------------------------------------------------------- torch optimisers

# ----------------------------------------------------------------------------- online AdamW

def train_adamw(model: nn.Module, batch: Callable[[torch.Generator], tuple[torch.Tensor, torch.Tensor]],
                *, steps: int, lr: float = 1e-3, lr_min: float = 1e-6, weight_decay: float = 1e-4,
                no_decay: tuple[str, ...] = ("nu_log",), seed: int = 0,
                loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
                predict: Callable[[nn.Module, torch.Tensor], torch.Tensor] | None = None,
                log_every: int = 100) -> dict[str, torch.Tensor]:
    """Online training of App. B.1 for one model: AdamW, cosine schedule lr -> lr_min over ``steps``.

    Not used by the chapters, which train with :func:`train_online`; Chapter 11, section
    "sec-teacher-setup", describes the App. B.1 optimisation that both implement.

    ``batch(generator) -> (x, y)`` draws a fresh batch every step (each sequence seen once) from
    a ``torch.Generator`` seeded with ``seed``; ``predict(model, x)`` (default ``model(x)``)
    gives what is compared with y by ``loss`` (default 1/2 * mean squared error).  Parameters
    whose name ends with an entry of ``no_decay`` (the recurrent lam) get no weight decay.  The
    schedule is torch's ``CosineAnnealingLR``.  The plain reference of :func:`train_online`
    (the Performance appendix, "What limits the training-step ratios", and
    ``benchmarks/bench_training.py``).

    Returns ``{"step": (n_log,) long, "loss": (n_log,) float64}``: the training loss averaged
    over each block of ``log_every`` steps (the history of ``train_online`` for one model).
    """
    steps = positive_int("steps", steps)
    if not isinstance(no_decay, str) and not all(isinstance(n, str) for n in no_decay):
        raise TypeError(f"no_decay must be a parameter-name ending or a sequence of them (strings), got {no_decay!r}")
    lr, lr_min, weight_decay, no_decay = check_adamw(lr, lr_min, weight_decay, no_decay)
    seed = seed_int("seed", seed)
    log_every = positive_int("log_every", log_every)
    _check_callable("batch", batch, optional=False)
    _check_callable("loss", loss)
    _check_callable("predict", predict)
    _check_model(model)
    own_loss = loss is not None
    loss = loss or (lambda yhat, y: 0.5 * ((yhat - y) ** 2).mean())
    predict = predict or (lambda mdl, x: mdl(x))
    _check_batch(model, batch, seed, predict, loss, own_loss)
    opt = _adamw(model, lr, weight_decay, no_decay)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps, eta_min=lr_min)
    g = torch.Generator().manual_seed(seed)
    hist_step, hist_loss = [], []
    acc, cnt = 0.0, 0
    for step in range(1, steps + 1):
        x, y = batch(g)
        value = loss(predict(model, x), y)
        _optimizer_step(opt, value)
        sched.step()
        acc += float(value.detach())
        cnt += 1
        if is_log_step(step, log_every, steps):
            hist_step.append(step)
            hist_loss.append(acc / cnt)
            acc, cnt = 0.0, 0
    return {"step": torch.tensor(hist_step, dtype=torch.long), "loss": torch.tensor(hist_loss, dtype=torch.float64)}


def _check_batch(model, batch, seed, predict, loss, own_loss: bool) -> None:
    """One batch drawn from a throw-away generator with the run's seed (the run's own draws are
    unchanged): a pair of finite tensors in the model's dtype and device, a prediction of the
    target's shape (the default loss; a loss of the caller's may compare other shapes) and a
    scalar loss -- all before the first step."""
    pair = batch(torch.Generator().manual_seed(seed))
    if not (isinstance(pair, (tuple, list)) and len(pair) == 2
            and all(isinstance(t, torch.Tensor) for t in pair)):
        raise TypeError(f"batch(generator) must return a pair of tensors (x, y), got "
                        f"{type(pair).__name__}")
    x, y = pair
    for name, t in (("x", x), ("y", y)):
        if not t.is_floating_point():
            raise TypeError(f"batch(generator) returned {name} of dtype {t.dtype}; it must be floating point")
        finite(f"batch(generator)'s {name}", t)
    data_matches_model(model, **{"batch(generator)'s x": x, "batch(generator)'s y": y})
    with torch.no_grad():
        out = predict(model, x)
        if not own_loss:
            check_output("predict(model, x)", out, y, "the target y of batch(generator)")
        value = loss(out, y)
    if not isinstance(value, torch.Tensor) or value.numel() != 1:
        raise ValueError(f"loss(prediction, y) must return a scalar tensor, got "
                         f"{tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__}")


# ----------------------------------------------------------------------------- scores

def r2_score(yhat: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Coefficient of determination per output channel, 1 - SSE / SST over all samples and times.

    yhat, y: (N, T, n_y) or (M, n_y).  SST is taken about the mean of ``y`` itself.
    Returns (n_y,).  R^2 = 1 for a perfect prediction, 0 for predicting the mean.
    The score of the S1 decoders, Chapter 6 (sections "The data" and "Table 1").
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
