"""Training: every loop of the library, the losses they minimise and the scores they report.

Gradient descent, written out (Part I, Emami et al. 2021, Sections 4-5):
    ``train_gd``          full-batch GD theta <- theta - lr grad, one loop for every model of
                          Part I (``LinearRNN``, ``ScaledConv``), so the RNN and its scaled
                          convolution are trained by literally the same code.
    ``train_minibatch``   mini-batch GD with a seeded shuffle (the S1 decoder, Section 5.2).
torch optimisers:
    ``train_feedforward`` full-batch Adam (or SGD with momentum) on the protein network of
                          Sperduti (2015, §4), through the sparse prefix matrix.
    ``train_adamw``       the online training of Zucchet et al. (2023), App. B.1 (AdamW, cosine
                          schedule, a fresh batch every step) for one model: the plain reference of
    ``train_online``      the same for K models at once (a :class:`lib.gated.StackedGatedRNN` or a
                          :class:`ModuleStack`), each with its own data stream, on any device,
                          resumable from checkpoints; on CUDA the whole step is captured in a
                          CUDA graph.
Losses and scores:
    ``loss_fn``, ``cosine_lr`` (the schedule of App. B.1), ``r2_score`` and
    ``select_by_validation`` (early stopping on a validation block).

One loop shape: every loop validates its arguments before any work with the same checks
(``lib._checks``: sizes, rates, seeds, paired sequences; the loss kinds and AdamW settings
here), collects the trainable parameters the same way, and takes a step in one of two ways --
a written-out GD update (``_gd_step``) or a torch optimizer step (``_optimizer_step``).  The
histories differ where the chapters read them differently (per-step losses, per-epoch
evaluations, block means); ``train_adamw`` and ``train_online`` share theirs.

Loss normalisation: ``"half_sum"`` is (1/2) sum over all samples, times and outputs of the
squared error -- the form in which Theorem 4.1's learning-rate condition eta < B_1 is stated
(eq. 58-60 of the long version); ``"mean"`` is the mean squared error per output entry.
"""
from __future__ import annotations

import math
import os
import time
import warnings
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from torch import nn

from ._checks import DTYPE, as_tensor, positive_int, positive_real, seed_int, sequence_pair
from .protein import prefix_forward

__all__ = ["loss_fn", "train_gd", "train_minibatch", "train_feedforward", "train_adamw", "train_online",
           "cosine_lr", "ModuleStack", "r2_score", "select_by_validation"]

LOSS_KINDS = ("half_sum", "mean")


# ----------------------------------------------------------------------------- shared pieces

def _trainable(model: nn.Module) -> list[nn.Parameter]:
    """The parameters a loop updates: those that require a gradient, in ``parameters()`` order."""
    return [p for p in model.parameters() if p.requires_grad]


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


def _check_adamw(lr, lr_min, weight_decay, no_decay) -> tuple[float, float, float, tuple[str, ...]]:
    """The settings of App. B.1's AdamW: 0 < lr_min <= lr, weight_decay in [0, 1), and the
    parameter-name endings that get no weight decay (a string or a sequence of strings)."""
    lr = positive_real("lr", lr)
    lr_min = positive_real("lr_min", lr_min)
    if lr_min > lr:
        raise ValueError(f"lr_min must be <= lr, got lr_min={lr_min}, lr={lr}")
    if not isinstance(weight_decay, (int, float)) or not 0 <= weight_decay < 1 or weight_decay != weight_decay:
        raise ValueError(f"weight_decay must be a real number in [0, 1), got {weight_decay!r}")
    no_decay = (no_decay,) if isinstance(no_decay, str) else tuple(no_decay)
    return lr, lr_min, weight_decay, no_decay


def _adamw(model: nn.Module, lr, weight_decay, no_decay: tuple[str, ...], **options) -> torch.optim.AdamW:
    """AdamW with two parameter groups: weight decay for every trainable parameter except those
    whose name ends with an entry of ``no_decay`` (the recurrent lam), which get none."""
    decay, plain = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (plain if name.endswith(no_decay) else decay).append(p)
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": plain, "weight_decay": 0.0}], lr=lr, **options)


def _is_log_step(step: int, log_every: int, steps: int) -> bool:
    """Whether a block mean of the loss is recorded after update ``step`` (1-based)."""
    return step % log_every == 0 or step == steps


# ----------------------------------------------------------------------------- gradient descent

def loss_fn(yhat: torch.Tensor, y: torch.Tensor, kind: str = "half_sum") -> torch.Tensor:
    """Squared-error loss: ``"half_sum"`` = 0.5 * sum (yhat - y)^2, ``"mean"`` = mean (yhat - y)^2.

    Used by ``train_gd`` and ``train_minibatch``; Chapter 4, section "sec-fig12-task", explains the
    two kinds: the 1/2-sum is the normalisation the kernel theory is stated in, the mean is what the
    error curves report.
    """
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
    e.g. to record the impulse response for Theorem 4.1.  Chapter 3 (section "Gradient descent
    on the convolution, exactly") checks it against the closed form; Chapters 4 and 5 train
    the RNN and the convolutions with it.
    """
    lr = positive_real("lr", lr)
    steps = positive_int("steps", steps, minimum=0)
    x, y = sequence_pair(x, y)
    _check_loss_kind(loss)
    if (x_test is None) != (y_test is None):
        raise ValueError("give both x_test and y_test, or neither")
    params = _trainable(model)
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
        _gd_step(objective, params, lr, fused=True)
        record_test()
        if callback is not None:
            callback(step, model)
    with torch.no_grad():
        train_hist.append(float(loss_fn(model(x), y, "mean")))
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
    params = _trainable(model)
    g = torch.Generator().manual_seed(seed)
    hist = []
    if evaluate is not None:
        hist.append(evaluate(0, model))
    N = x.shape[0]
    for epoch in range(1, epochs + 1):
        perm = torch.randperm(N, generator=g)
        for start in range(0, N, batch_size):
            idx = perm[start:start + batch_size]
            _gd_step(loss_fn(model(x[idx]), y[idx], loss), params, lr, fused=False)
        if evaluate is not None:
            hist.append(evaluate(epoch, model))
    return hist


# ----------------------------------------------------------------------------- torch optimisers

def train_feedforward(model: nn.Module, E: torch.Tensor, code: torch.Tensor, d: torch.Tensor, *,
                      steps: int, lr: float = 1e-2, optimizer: str = "adam", momentum: float = 0.9) -> list[float]:
    """Full-batch Adam (or SGD) on ``mean (o - d)^2`` over all prefixes; returns the loss history.

    ``optimizer``: ``"adam"`` (torch's Adam, default betas) or ``"sgd"`` (gradient descent with
    heavy-ball ``momentum`` in [0, 1)); Chapter 9's smallest-k study compares the two.

    ``model`` is a :class:`lib.ff_to_rnn.FeedforwardNet` with ``a = code.shape[1]``;
    ``E`` the :func:`lib.protein.prefix_onehot` matrix; the outputs come from
    :func:`lib.protein.prefix_forward` (the hidden net inputs ``Xi W^T + b`` as
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
        _optimizer_step(opt, loss)
        hist.append(loss.item())
    return hist


# ----------------------------------------------------------------------------- online AdamW

def cosine_lr(step: int, steps: int, lr: float, lr_min: float) -> float:
    """Learning rate of update ``step`` (1-based) of ``steps``: cosine from lr to lr_min (App. B.1).

    Used in Chapter 11, section "sec-teacher-fig2-paper", to compute exactly how far decoupled
    weight decay shrinks a weight over the schedule.

    Update 1 uses ``lr``; the rate after the last update would be ``lr_min``
    (torch's ``CosineAnnealingLR`` with ``T_max = steps``, in closed form).
    """
    if not (isinstance(step, int) and isinstance(steps, int) and 1 <= step <= steps):
        raise ValueError(f"step must be an integer in 1..steps = {steps!r}, got {step!r}")
    return lr_min + 0.5 * (lr - lr_min) * (1.0 + math.cos(math.pi * (step - 1) / steps))


class ModuleStack(nn.Module):
    """K independent modules trained together by :func:`train_online` (one step, K data streams).

    Used in Chapter 13, section "sec-fig4", to train the LRU, LSTM and GRU networks with
    :func:`train_online`; :func:`lib.artefacts.load_run` returns the stored ones of section
    "sec-fig4-stored" in it.

    ``forward(x)`` with x (K, B, T, d) runs member k on x[k] (its ``forward_unchecked`` where it
    has one: the trainer has checked the shapes once); ``last_only`` keeps the last step.
    The general (unbatched) counterpart of :class:`lib.gated.StackedGatedRNN`, for any
    (B, T, d) -> (B, T, d_out) network such as :class:`lib.recurrent_cells.RecurrentNet`.
    """

    def __init__(self, members):
        super().__init__()
        members = list(members)
        if not members or not all(isinstance(m, nn.Module) for m in members):
            raise TypeError("members must be a non-empty list of torch.nn.Module")
        self.members = nn.ModuleList(members)

    @property
    def K(self) -> int:
        return len(self.members)

    def member(self, k: int) -> nn.Module:
        return self.members[k]

    def forward(self, x: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        outs = [getattr(m, "forward_unchecked", m)(x[k]) for k, m in enumerate(self.members)]
        return torch.stack([o[:, -1] for o in outs] if last_only else outs)


def _keep_freed_memory() -> None:
    """Ask glibc's malloc to keep freed blocks instead of unmapping them (CPU training).

    The step's intermediates are ~1 MB each; glibc serves such blocks with fresh mmap'ed pages
    and returns them on free, so every step faults in its memory anew (~800 page faults per
    teacher-student step at the paper's sizes, a quarter of its time).  Raising the mmap and
    trim thresholds keeps the pages; a no-op where glibc is not the allocator.
    """
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 256 << 20)        # M_MMAP_THRESHOLD
        libc.mallopt(-1, 1 << 30)          # M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        pass


def _member_losses(yhat: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """1/2 mean squared error of every member: (K, ...) -> (K,)."""
    return 0.5 * (yhat - y).square().flatten(1).mean(dim=1)


def _save_atomic(obj, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


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
    lr, lr_min, weight_decay, no_decay = _check_adamw(lr, lr_min, weight_decay, no_decay)
    seed = seed_int("seed", seed)
    log_every = positive_int("log_every", log_every)
    loss = loss or (lambda yhat, y: 0.5 * ((yhat - y) ** 2).mean())
    predict = predict or (lambda mdl, x: mdl(x))
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
        if _is_log_step(step, log_every, steps):
            hist_step.append(step)
            hist_loss.append(acc / cnt)
            acc, cnt = 0.0, 0
    return {"step": torch.tensor(hist_step, dtype=torch.long), "loss": torch.tensor(hist_loss, dtype=torch.float64)}


def train_online(model: nn.Module, task, *, steps: int, data_seeds, lr: float = 1e-3,
                 lr_min: float = 1e-6, weight_decay: float = 1e-4,
                 no_decay: tuple[str, ...] = ("nu_log", "theta_log"), log_every: int = 1000,
                 checkpoint: str | Path | None = None, checkpoint_every: int | None = None,
                 progress: bool = False, capture: str | bool = "auto",
                 on_log: Callable[[int, torch.Tensor], None] | None = None) -> dict:
    """Online AdamW training of App. B.1 for the K members of ``model``, one step for all.

    Used in Chapter 11, section "sec-teacher-setup" (which describes the App. B.1 optimisation),
    Chapter 12, section "sec-icl-train", and Chapter 13, section "sec-fig4".

    Every step draws one fresh batch per member (``task.sample``; member k from
    ``torch.Generator`` seeded with ``data_seeds[k]``), computes each member's loss
    (1/2 mean squared error; ``task.last_only``: the last step alone), back-propagates their
    sum (the members share no parameter, so each gets its own gradient) and takes an AdamW
    step with the cosine schedule :func:`cosine_lr`; parameters whose name ends with an entry
    of ``no_decay`` (the recurrent lam) get no weight decay.  Member k therefore follows
    exactly the trajectory of a run of member k alone (tested to 1e-12 in float64).

    ``checkpoint``: a file; every ``checkpoint_every`` steps the parameters, optimizer state,
    data generators, loss history and step are written to it atomically, and a call whose
    checkpoint exists resumes from it (its settings must match) -- on the CPU the resumed run
    ends bit-identical to an uninterrupted one.  ``capture``: on CUDA ("auto") the whole step
    (data draw, forward, backward, AdamW, schedule) is captured once in a CUDA graph and
    replayed; the data then come from the device's default generator (seeded with
    ``data_seeds[0]``).  If capture fails the eager step is used, with a warning.
    ``on_log(step, losses)`` is called at every log point (losses: (K,) block means).

    Returns ``{"step": (n_log,), "loss": (n_log, K) float64 block means of the training loss,
    "seconds": wall time of this call, "resumed_from": step or 0, "captured": bool}``.
    """
    steps = positive_int("steps", steps)
    lr, lr_min, weight_decay, no_decay = _check_adamw(lr, lr_min, weight_decay, no_decay)
    log_every = positive_int("log_every", log_every)
    K = getattr(model, "K", None)
    if not isinstance(K, int):
        raise TypeError("model must be a stack of K members (lib.StackedGatedRNN or lib.ModuleStack)")
    if getattr(task, "K", K) != K:
        raise ValueError(f"task has {task.K} members (teachers), model has {K}")
    data_seeds = [seed_int("data_seeds entry", s) for s in data_seeds]
    if len(data_seeds) != K:
        raise ValueError(f"data_seeds must have one seed per member ({K}), got {len(data_seeds)}")
    if checkpoint is not None:
        checkpoint = Path(checkpoint)
        checkpoint_every = positive_int("checkpoint_every", checkpoint_every or log_every)
    if capture not in ("auto", True, False):
        raise ValueError(f"capture must be 'auto', True or False, got {capture!r}")
    param = next(model.parameters())
    device, dtype = param.device, param.dtype
    if getattr(task, "device", device) != device or getattr(task, "dtype", dtype) != dtype:
        raise ValueError(f"task ({task.device}, {task.dtype}) and model ({device}, {dtype}) must "
                         "share device and dtype")
    use_graph = device.type == "cuda" and capture in ("auto", True)
    if device.type == "cpu":
        _keep_freed_memory()

    lr_value = torch.tensor(lr, device=device) if use_graph else lr
    opt = _adamw(model, lr_value, weight_decay, no_decay, capturable=use_graph, fused=True)
    if use_graph:
        torch.cuda.manual_seed(data_seeds[0])
        gens = [None] * K
    else:
        gens = [torch.Generator(device=device).manual_seed(s) for s in data_seeds]
    config = {"steps": steps, "lr": lr, "lr_min": lr_min, "weight_decay": weight_decay,
              "data_seeds": data_seeds, "log_every": log_every, "K": K,
              "shapes": {n: tuple(p.shape) for n, p in model.named_parameters()}}
    hist_step, hist_loss = [], []
    acc = torch.zeros(K, dtype=torch.float64, device=device)
    cnt, start = 0, 0
    if checkpoint is not None and checkpoint.is_file():
        state = torch.load(checkpoint, map_location=device, weights_only=False)
        if state.get("config") != config:
            raise ValueError(f"checkpoint {checkpoint} was written with other settings "
                             f"({state.get('config')}); delete it or use the same settings")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        if not use_graph:
            for g, s in zip(gens, state["generators"]):
                g.set_state(s)
        hist_step, hist_loss = state["hist_step"], state["hist_loss"]
        acc.copy_(state["acc"])
        cnt, start = state["cnt"], state["step"]

    def one_step():
        x, y = task.sample(gens)
        losses = _member_losses(model(x, last_only=task.last_only), y)
        _optimizer_step(opt, losses.sum(), set_to_none=not use_graph)  # a captured graph needs static gradients
        return losses.detach()

    graph = None
    if use_graph and start < steps:
        graph = _capture_step(one_step, opt, acc, steps, lr, lr_min, start, capture)
    t0 = time.perf_counter()
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=steps, initial=start, desc=type(task).__name__, unit="step",
                   mininterval=2.0, smoothing=0.05)
    for step in range(start + 1, steps + 1):
        if graph is not None:
            graph.replay()
        else:
            for group in opt.param_groups:
                group["lr"] = cosine_lr(step, steps, lr, lr_min)
            acc += one_step()
        cnt += 1
        if _is_log_step(step, log_every, steps):
            block = (acc / cnt).cpu()
            hist_step.append(step)
            hist_loss.append(block)
            acc.zero_()
            cnt = 0
            if bar is not None:
                bar.update(step - bar.n)
                bar.set_postfix(loss=f"{float(block.mean()):.3e}")
            if on_log is not None:
                on_log(step, block)
        if checkpoint is not None and (step % checkpoint_every == 0 or step == steps):
            _save_atomic({"config": config, "step": step, "model": model.state_dict(),
                          "optimizer": opt.state_dict(),
                          "generators": [g.get_state() for g in gens] if not use_graph else [],
                          "hist_step": hist_step, "hist_loss": hist_loss, "acc": acc.cpu(),
                          "cnt": cnt}, checkpoint)
    if bar is not None:
        bar.close()
    return {"step": torch.tensor(hist_step, dtype=torch.long),
            "loss": torch.stack(hist_loss).double() if hist_loss else torch.zeros(0, K, dtype=torch.float64),
            "seconds": time.perf_counter() - t0, "resumed_from": start, "captured": graph is not None}


def _capture_step(one_step, opt, acc, steps, lr, lr_min, start, capture):
    """Capture data draw + forward + backward + AdamW + schedule + loss accumulation in one
    CUDA graph (the PyTorch whole-network capture recipe: warm-up on a side stream, static
    tensors, ``capturable`` AdamW with a tensor learning rate).  Returns the graph, or None
    after a warning if capture is impossible; the eager loop then runs."""
    device = acc.device
    counter = torch.full((), float(start), device=device)       # updates done so far

    def scheduled_step():
        rate = lr_min + 0.5 * (lr - lr_min) * (1.0 + torch.cos(math.pi * counter / steps))
        for group in opt.param_groups:
            group["lr"].copy_(rate)
        acc.add_(one_step())
        counter.add_(1.0)

    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        snapshot = {k: v.clone() for k, v in _params_of(opt).items()}
        opt_state = {id(p): {k: (v.clone() if torch.is_tensor(v) else v) for k, v in s.items()}
                     for p, s in opt.state.items()}
        acc_before = acc.clone()
        with torch.cuda.stream(side):          # warm-up (builds AdamW state, autograd caches)
            for _ in range(3):
                scheduled_step()
        torch.cuda.current_stream().wait_stream(side)
        # undo the warm-up: the captured graph replays from the state before it
        with torch.no_grad():
            for p, v in zip(_params_of(opt).values(), snapshot.values()):
                p.copy_(v)
            for p, s in opt.state.items():
                before = opt_state.get(id(p))
                for k, v in s.items():
                    if torch.is_tensor(v):
                        v.copy_(before[k] if before is not None else torch.zeros_like(v))
        acc.copy_(acc_before)
        counter.fill_(float(start))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            scheduled_step()
        return graph
    except Exception as exc:  # noqa: BLE001 - any capture failure falls back to the eager step
        if capture is True:
            raise
        warnings.warn(f"CUDA graph capture failed ({exc!r}); training with the eager step", stacklevel=3)
        for group in opt.param_groups:
            group["lr"] = float(lr)
        return None


def _params_of(opt):
    return {i: p for i, p in enumerate(p for g in opt.param_groups for p in g["params"])}


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
