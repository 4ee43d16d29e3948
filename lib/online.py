"""Online training of App. B.1 (Zucchet et al. 2023) for K networks at once: Part III's trainer.

The paper trains every network of Part III the same way: at each step a fresh batch, the mean
squared error, one AdamW step, a cosine learning rate from 1e-3 to 1e-6.  :func:`train_online`
is that loop, for the K members of a stack (a :class:`lib.gated.StackedGatedRNN` or a
:class:`lib.recurrent_cells.ModuleStack`), each with its own data stream:

    for step in 1 .. steps:
        x, y   = task.sample(generators)                 # sample: one fresh batch per member
        losses = member_losses(model, x, y)              # loss: 1/2 mean squared error, (K,)
        opt.step(losses.sum(), lr=cosine_lr(step, ...))  # step + schedule: AdamW, cosine
        log(step, losses)                                # block means, snapshots, checkpoint

(the loss and its gradients by the model's hand-written step where the architecture registry
declares one, :func:`lib.architectures.training_step`).  The parts around it are small and
separate:

* :class:`FlatAdamW` -- AdamW (torch's update, decoupled weight decay) on ONE flat buffer of all
  parameters (the model's parameters become views into it): a step is eight element-wise passes
  over one vector instead of a Python loop over parameters and groups;
* :class:`Checkpoint` -- the whole state (weights, optimizer, data generators, history,
  snapshots, the segments run so far) written atomically every ``checkpoint_every`` steps; a run
  whose checkpoint exists resumes from it and, on the CPU, ends bit-identical to an
  uninterrupted one;
* ``snapshots`` -- copies of the weights at chosen steps (the structure-against-steps figure of
  Chapter 11);
* :func:`_checked_settings`, :func:`_resume` -- the arguments checked before any work, and the
  run's state read back from its checkpoint;
* :func:`_capture` -- on CUDA, the whole step captured once in a CUDA graph and replayed.
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import torch
from torch import nn

from . import architectures, storage
from ._checks import positive_int, positive_real, seed_int
from .tasks import member_losses

__all__ = ["train_online", "cosine_lr", "FlatAdamW", "check_adamw", "is_log_step"]


def cosine_lr(step: int, steps: int, lr: float, lr_min: float) -> float:
    """Learning rate of update ``step`` (1-based) of ``steps``: cosine from lr to lr_min (App. B.1).

    Used in Chapter 11, section "sec-teacher-fig2-paper", to compute exactly how far decoupled
    weight decay shrinks a weight over the schedule.

    Update 1 uses ``lr``; the rate after the last update would be ``lr_min``
    (torch's ``CosineAnnealingLR`` with ``T_max = steps``, in closed form).
    """
    if not (isinstance(step, int) and isinstance(steps, int) and 1 <= step <= steps):
        raise ValueError(f"step must be an integer in 1..steps = {steps!r}, got {step!r}")
    for name, value in (("lr", lr), ("lr_min", lr_min)):
        if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{name} must be a finite positive number, got {value!r}")
    if lr_min > lr:
        raise ValueError(f"lr_min must be <= lr, got lr_min={lr_min}, lr={lr}")
    return _cosine(step - 1, steps, lr, lr_min)


def _cosine(done, steps: int, lr: float, lr_min: float, cos=math.cos):
    """The schedule itself, written once: the rate after ``done`` of ``steps`` updates (a number;
    or, in the captured CUDA step, a device tensor with ``cos=torch.cos``)."""
    return lr_min + 0.5 * (lr - lr_min) * (1.0 + cos(math.pi * done / steps))


def check_adamw(lr, lr_min, weight_decay, no_decay) -> tuple[float, float, float, tuple[str, ...]]:
    """The settings of App. B.1's AdamW: 0 < lr_min <= lr, weight_decay in [0, 1), and the
    parameter-name endings that get no weight decay (a string or a sequence of strings)."""
    lr = positive_real("lr", lr)
    lr_min = positive_real("lr_min", lr_min)
    if lr_min > lr:
        raise ValueError(f"lr_min must be <= lr, got lr_min={lr_min}, lr={lr}")
    if not isinstance(weight_decay, (int, float)) or not 0 <= weight_decay < 1 or weight_decay != weight_decay:
        raise ValueError(f"weight_decay must be a real number in [0, 1), got {weight_decay!r}")
    if isinstance(no_decay, str):
        no_decay = (no_decay,)
    try:
        no_decay = tuple(no_decay)
    except TypeError:
        raise TypeError(f"no_decay must be a string or a sequence of strings, got {no_decay!r}") from None
    if not all(isinstance(n, str) for n in no_decay):
        raise TypeError(f"no_decay must be a string or a sequence of strings (parameter-name endings), got {no_decay!r}")
    return lr, lr_min, weight_decay, no_decay


class FlatAdamW:
    """AdamW on one flat buffer holding every trainable parameter of ``model``.

    The optimizer of :func:`train_online` (Chapter 11, section "sec-teacher-setup", describes the
    App. B.1 optimisation it implements).

    The parameters (decayed ones first, then those whose name ends with an entry of
    ``no_decay``) are copied into one vector and re-bound as views of it, their gradients as
    views of a second vector, so that :meth:`step` is a few element-wise passes over whole
    vectors.  The update is torch's AdamW (``torch.optim.AdamW``, single-tensor form) written
    out: p <- p (1 - lr wd) for the decayed part, m <- lerp(m, g, 1 - b1),
    v <- b2 v + (1 - b2) g^2, p <- p - lr / (1 - b1^t) * m / (sqrt(v / (1 - b2^t)) + eps)
    (tests/test_online.py holds it to torch's to 1e-12 in float64).  With ``capturable``
    the learning rate and the step count are device tensors (a CUDA graph replays the step).
    """

    def __init__(self, model: nn.Module, weight_decay: float, no_decay: tuple[str, ...] = (),
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, capturable: bool = False):
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        if not named:
            raise ValueError("model has no trainable parameter")
        decay = [p for n, p in named if not n.endswith(no_decay)]
        plain = [p for n, p in named if n.endswith(no_decay)]
        first = named[0][1]
        if any(p.dtype != first.dtype or p.device != first.device for _, p in named):
            raise ValueError("all parameters must share one dtype and device")
        self.params = decay + plain
        self.n_decay = sum(p.numel() for p in decay)
        self.flat = torch.empty(sum(p.numel() for p in self.params), dtype=first.dtype, device=first.device)
        self.grad = torch.zeros_like(self.flat)
        offset = 0
        with torch.no_grad():
            for p in self.params:
                k = p.numel()
                self.flat[offset:offset + k].copy_(p.reshape(-1))
                p.data = self.flat[offset:offset + k].view_as(p)
                p.grad = self.grad[offset:offset + k].view_as(p)
                offset += k
        self.exp_avg = torch.zeros_like(self.flat)
        self.exp_avg_sq = torch.zeros_like(self.flat)
        self.betas, self.eps, self.weight_decay = betas, eps, weight_decay
        self.capturable = capturable
        self.t = torch.zeros((), dtype=torch.float64 if first.dtype == torch.float64 else torch.float32,
                             device=first.device) if capturable else 0
        # torch's fused AdamW kernel (the one torch.optim.AdamW(fused=True) runs): the update of
        # the eager form below in one pass over the four vectors instead of eight passes
        self._fused = None if capturable or first.device.type != "cpu" else getattr(torch, "_fused_adamw_", None)
        self._fused_t = torch.zeros((), dtype=torch.float32)

    def step(self, objective: torch.Tensor, lr) -> None:
        """Gradients of ``objective`` (into the flat gradient), then one AdamW update at ``lr``."""
        self.grad.zero_()
        objective.backward()
        self.update(lr)

    @torch.no_grad()
    def update(self, lr) -> None:
        """One AdamW update from the gradients now in ``self.grad``."""
        b1, b2 = self.betas
        p, g, m, v = self.flat, self.grad, self.exp_avg, self.exp_avg_sq
        if self.capturable:
            self.t.add_(1)
            p[:self.n_decay].mul_(1 - lr * self.weight_decay)
            m.lerp_(g, 1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            bc1, bc2 = 1 - torch.pow(b1, self.t), 1 - torch.pow(b2, self.t)
            denom = (v.sqrt() / bc2.sqrt()).add_(self.eps)
            p.sub_(m / denom * (lr / bc1))
            return
        self.t += 1
        if self.weight_decay:
            p[:self.n_decay].mul_(1 - lr * self.weight_decay)
        if self._fused is not None:
            try:
                self._fused_t.fill_(self.t)
                self._fused([p], [g], [m], [v], [], [self._fused_t], lr=lr, beta1=b1, beta2=b2, weight_decay=0.0,
                            eps=self.eps, amsgrad=False, maximize=False)
                return
            except (RuntimeError, TypeError):       # a torch without the CPU kernel: the eager form
                self._fused = None
        m.lerp_(g, 1 - b1)
        v.mul_(b2).addcmul_(g, g, value=1 - b2)
        bc1, bc2 = 1 - b1 ** self.t, 1 - b2 ** self.t
        denom = (v.sqrt() / math.sqrt(bc2)).add_(self.eps)
        p.addcdiv_(m, denom, value=-lr / bc1)

    def state_dict(self) -> dict:
        t = self.t.item() if torch.is_tensor(self.t) else self.t
        return {"t": int(round(t)), "exp_avg": self.exp_avg.clone(), "exp_avg_sq": self.exp_avg_sq.clone()}

    def load_state_dict(self, state: dict) -> None:
        self.exp_avg.copy_(state["exp_avg"])
        self.exp_avg_sq.copy_(state["exp_avg_sq"])
        if torch.is_tensor(self.t):
            self.t.fill_(float(state["t"]))
        else:
            self.t = int(state["t"])


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


def _differences(written: dict, now: dict, limit: int = 4) -> str:
    """The settings in which a checkpoint's ``written`` config differs from the run's ``now``,
    named one by one (``log_every 500 in the checkpoint, 1000 now``); parameter shapes by name."""
    out = []
    for key in sorted(set(written) | set(now), key=str):
        a, b = written.get(key, "absent"), now.get(key, "absent")
        if a == b:
            continue
        if key == "shapes" and isinstance(a, dict) and isinstance(b, dict):
            names = sorted(n for n in set(a) | set(b) if a.get(n) != b.get(n))
            out.append(f"parameter shapes of {', '.join(names[:limit])}" + (f" and {len(names) - limit} more"
                                                                             if len(names) > limit else ""))
        else:
            out.append(f"{key} {a!r} in the checkpoint, {b!r} now")
    return "; ".join(out)


class Checkpoint:
    """The file a run resumes from: written atomically and durably (:func:`lib.storage.write_bytes`:
    a uniquely named temporary file, fsync, rename), read as tensors only, and held by one
    training at a time (an ``fcntl`` lock on ``PATH.lock``, taken when the training starts and
    let go with its last checkpoint; a second process is refused with a line naming the holder)."""

    def __init__(self, path: str | Path | None, every: int):
        self.path = None if path is None else Path(path)
        self.every = every
        self.lock = None if self.path is None else \
            storage.FileLock(self.path.with_name(self.path.name + ".lock"), f"a training from the checkpoint "
                             f"{self.path}", take_over=True)

    def load(self, config: dict, device) -> dict | None:
        if self.path is None:
            return None
        if not self.lock.held:
            self.lock.acquire()
        if not self.path.is_file():
            return None
        state = storage.load_tensors(self.path, "checkpoint of train_online", map_location=device,
                                     advice="delete it to start the run afresh")
        if not isinstance(state, dict) or not isinstance(state.get("config"), dict):
            raise ValueError(f"checkpoint {self.path} holds no training settings (not a checkpoint of "
                             "train_online); delete it to start the run afresh")
        if state["config"] != config:
            raise ValueError(f"checkpoint {self.path} was written with other settings: "
                             f"{_differences(state['config'], config)}; resume with the settings it was written "
                             "with, or delete it to start the run afresh")
        return state

    def due(self, step: int, steps: int) -> bool:
        return self.path is not None and (step % self.every == 0 or step == steps)

    def save(self, state: dict) -> None:
        """Write ``state``; a full disk is an OSError naming the file ("no space left on the
        device"), the previous checkpoint intact.  The last step's checkpoint lets the lock go."""
        storage.save(self.path, state)
        if state.get("step") == state.get("config", {}).get("steps"):
            self.lock.release()


def is_log_step(step: int, log_every: int, steps: int) -> bool:
    """Whether a block mean of the loss is recorded after update ``step`` (1-based): every
    ``log_every`` updates and after the last (also the rule of :func:`lib.training.train_adamw`)."""
    return step % log_every == 0 or step == steps


def _same_device(a, b) -> bool:
    """One device, whether or not its index is written ("cuda" is "cuda:0" when 0 is current)."""
    a, b = torch.device(a), torch.device(b)
    if a.type != b.type:
        return False
    if a.type != "cuda" or (a.index is not None and b.index is not None):
        return a.index == b.index
    current = torch.cuda.current_device()
    return (a.index if a.index is not None else current) == (b.index if b.index is not None else current)


def _check_model_and_task(model: nn.Module, task, K: int):
    """Model and task agree before any work: members, device, dtype, and the model's output
    shape against the target's, on a batch of zeros of the task's input shape (no data drawn)."""
    missing = [a for a in ("sample", "shapes", "last_only") if not hasattr(task, a)]
    if missing:
        raise TypeError(f"task must be a training task (lib.AttentionTeacherTask or lib.ICLTask), got "
                        f"{type(task).__name__} without {', '.join(missing)}")
    if getattr(task, "K", K) != K:
        raise ValueError(f"task has {task.K} members (teachers), model has {K}")
    param = next(model.parameters())
    device, dtype = param.device, param.dtype
    if not dtype.is_floating_point:
        raise ValueError(f"model parameters must be floating point, got {dtype}")
    if not _same_device(getattr(task, "device", device), device) or getattr(task, "dtype", dtype) != dtype:
        raise ValueError(f"task ({task.device}, {task.dtype}) and model ({device}, {dtype}) must "
                         "share device and dtype")
    for side in ("d_in", "d_out"):
        m, t = getattr(model, side, None), getattr(task, side, None)
        if m is not None and t is not None and m != t:
            raise ValueError(f"model {side} = {m} but task {side} = {t}")
    x_shape, y_shape = task.shapes(2)
    with torch.no_grad():
        out = model(torch.zeros(x_shape, dtype=dtype, device=device), last_only=task.last_only)
    if tuple(out.shape) != tuple(y_shape):
        raise ValueError(f"model output shape {tuple(out.shape)} != task target shape {tuple(y_shape)} "
                         "(no broadcasting: the loss would train another objective)")
    return device, dtype


def train_online(model: nn.Module, task, *, steps: int, data_seeds, lr: float = 1e-3,
                 lr_min: float = 1e-6, weight_decay: float = 1e-4,
                 no_decay: tuple[str, ...] = ("nu_log", "theta_log"), log_every: int = 1000,
                 checkpoint: str | Path | None = None, checkpoint_every: int | None = None,
                 snapshots: Sequence[int] = (), segment: dict | None = None,
                 progress: bool = False, capture: str | bool = "auto", engine: str = "fast",
                 on_log: Callable[[int, torch.Tensor], None] | None = None, binding: dict | None = None) -> dict:
    """Online AdamW training of App. B.1 for the K members of ``model``, one step for all.

    Used in Chapter 11, section "sec-teacher-setup" (which describes the App. B.1 optimisation),
    Chapter 12, section "sec-icl-train", and Chapter 13, section "sec-fig4".

    Every step draws one fresh batch per member (``task.sample``; member k from a
    ``torch.Generator`` seeded with ``data_seeds[k]``), computes each member's loss
    (1/2 mean squared error, :func:`lib.tasks.member_losses`; ``task.last_only``: the last step
    alone), back-propagates their sum (the members share no parameter, so each gets its own
    gradient) and takes an AdamW step (:class:`FlatAdamW`) with the cosine schedule
    :func:`cosine_lr`; parameters whose name ends with an entry of ``no_decay`` (the recurrent
    lam) get no weight decay.  Member k therefore follows exactly the trajectory of a run of
    member k alone (tested to 1e-12 in float64).  Model and task are checked against each other
    first (members, device, dtype, output shape against target shape).

    ``checkpoint``: a file; every ``checkpoint_every`` steps the whole state is written to it
    atomically, and a call whose checkpoint exists resumes from it (its settings must match).
    ``snapshots``: steps at which a copy of the weights is kept (returned, and carried by the
    checkpoint).  ``segment``: a dict describing this call (code version, device, ...) appended,
    with its first and last step and wall time, to the run's list of segments (one per resume).
    ``capture``: on CUDA ("auto") the whole step is captured once in a CUDA graph and replayed;
    the data then come from the device's default generator (seeded with ``data_seeds[0]``; its
    state goes into the checkpoint, so a resumed run draws what the uninterrupted run draws).
    ``engine``: "fast" (default) takes the hand-written step that the architecture registry
    declares for the model's class (:func:`lib.architectures.training_step`:
    :mod:`lib.gated_step`, :mod:`lib.recurrent_step`; the gradients written straight into the
    optimiser's flat buffer, no autograd graph) where it applies, else autograd; "autograd"
    differentiates the objective through the model's forward at every step (the plain reference
    the fast step is tested and measured against; same losses and gradients up to rounding).
    ``on_log(step, losses)`` is called at every log point (losses: (K,) block means).
    ``binding``: what the checkpoint belongs to (a stored run's name, group index, kind, seeds,
    data seeds, training pool, initialisation), kept in its settings: a checkpoint of another
    group is refused, naming both.

    Returns ``{"step": (n_log,), "loss": (n_log, K) float64 block means of the training loss,
    "snapshots": {step: state dict}, "segments": [...], "seconds": wall time of this call,
    "resumed_from": step or 0, "captured": bool}``.
    """
    s = _checked_settings(model, task, steps=steps, data_seeds=data_seeds, lr=lr, lr_min=lr_min,
                          weight_decay=weight_decay, no_decay=no_decay, log_every=log_every,
                          checkpoint_every=checkpoint_every, snapshots=snapshots, capture=capture,
                          engine=engine, binding=binding)
    if s.device.type == "cpu":
        _keep_freed_memory()
    opt = FlatAdamW(model, s.weight_decay, s.no_decay, capturable=s.captured)
    gens = [None] * s.K if s.captured else [torch.Generator(device=s.device).manual_seed(d) for d in s.data_seeds]
    ckpt = Checkpoint(checkpoint, s.checkpoint_every)
    run, cuda_rng = _resume(ckpt, s, model, opt, gens, task, segment)
    start = run["step"]
    step_at = _training_step(model, task, opt, gens, engine)     # sample, loss, gradients, AdamW at a rate
    graph = _capture(step_at, opt, run["acc"], s, start, capture, cuda_rng) if s.captured and start < s.steps else None
    t0, bar = time.perf_counter(), _progress_bar(progress, s.steps, start, type(task).__name__)
    for step in range(start + 1, s.steps + 1):
        if graph is not None:
            graph.replay()                                       # the step below, schedule included, captured
        else:
            run["acc"] += step_at(_cosine(step - 1, s.steps, s.lr, s.lr_min))   # schedule, then the step
        _log(run, step, s, model, bar, on_log)                   # counts, snapshots, block means
        if ckpt.due(step, s.steps):
            run["segments"][-1].update(last_step=step, seconds=time.perf_counter() - t0)
            ckpt.save(_checkpoint_state(run, s, model, opt, gens, graph, task))
    if bar is not None:
        bar.close()
    seconds = time.perf_counter() - t0
    run["segments"][-1].update(last_step=s.steps, seconds=seconds)
    hist_loss = run["hist_loss"]
    return {"step": torch.tensor(run["hist_step"], dtype=torch.long),
            "loss": torch.stack(hist_loss).double() if hist_loss else torch.zeros(0, s.K, dtype=torch.float64),
            "snapshots": run["snapshots"], "segments": run["segments"],
            "seconds": seconds, "resumed_from": start, "captured": graph is not None}


def _training_step(model: nn.Module, task, opt: FlatAdamW, gens, engine: str) -> Callable:
    """One step of App. B.1 for all members, as a function of its learning rate: a fresh batch a
    member (sample), the members' losses (loss), their gradients and the AdamW update (step);
    returns the (K,) losses.  With ``engine="fast"`` the loss and its gradients come from the
    hand-written step of the model's class (:func:`lib.architectures.training_step`) wherever it
    applies, else from autograd through the objective :func:`lib.tasks.member_losses`."""
    hand_written = architectures.training_step(model) if engine == "fast" else None

    def step_at(rate):
        x, y = task.sample(gens)
        losses = None if hand_written is None else hand_written(model, x, y, task.last_only)
        if losses is not None:                              # the gradients are in opt.grad already
            opt.update(rate)
            return losses
        losses = member_losses(model, x, y, task.last_only)
        opt.step(losses.sum(), rate)
        return losses.detach()
    return step_at


@dataclass(frozen=True)
class _Settings:
    """The checked arguments of :func:`train_online`, and ``config``: what its checkpoint must
    have been written with to be resumed."""

    K: int
    steps: int
    lr: float
    lr_min: float
    weight_decay: float
    no_decay: tuple[str, ...]
    log_every: int
    checkpoint_every: int
    data_seeds: list[int]
    snapshots: list[int]
    device: torch.device
    captured: bool
    config: dict


def _checked_settings(model: nn.Module, task, *, steps, data_seeds, lr, lr_min, weight_decay, no_decay,
                      log_every, checkpoint_every, snapshots, capture, engine, binding) -> _Settings:
    """Every argument of :func:`train_online` checked, and model and task against each other,
    before any work: a ValueError or TypeError naming the argument and its accepted range."""
    steps = positive_int("steps", steps)
    lr, lr_min, weight_decay, no_decay = check_adamw(lr, lr_min, weight_decay, no_decay)
    log_every = positive_int("log_every", log_every)
    K = getattr(model, "K", None)
    if not isinstance(K, int):
        raise TypeError("model must be a stack of K members (lib.StackedGatedRNN or lib.ModuleStack)")
    if isinstance(data_seeds, (str, bytes)) or not hasattr(data_seeds, "__iter__"):
        raise TypeError(f"data_seeds must be a sequence of one integer seed per member, got {data_seeds!r}")
    data_seeds = [seed_int("data_seeds entry", s) for s in data_seeds]
    if len(data_seeds) != K:
        raise ValueError(f"data_seeds must have one seed per member ({K}), got {len(data_seeds)}")
    snapshots = sorted({positive_int("snapshots entry", s) for s in snapshots})
    if snapshots and snapshots[-1] > steps:
        raise ValueError(f"snapshots must lie in 1..steps = {steps}, got {snapshots[-1]}")
    if capture not in ("auto", True, False):
        raise ValueError(f"capture must be 'auto', True or False, got {capture!r}")
    if engine not in ("fast", "autograd"):
        raise ValueError(f"engine must be 'fast' or 'autograd', got {engine!r}")
    checkpoint_every = positive_int("checkpoint_every", checkpoint_every or log_every)
    device, _ = _check_model_and_task(model, task, K)
    config = {"steps": steps, "lr": lr, "lr_min": lr_min, "weight_decay": weight_decay,
              "data_seeds": data_seeds, "log_every": log_every, "K": K,
              "shapes": {n: tuple(p.shape) for n, p in model.named_parameters()}}
    if binding is not None:
        if not isinstance(binding, dict):
            raise TypeError(f"binding must be a dict (what the checkpoint belongs to), got {type(binding).__name__}")
        config["group"] = dict(binding)
    return _Settings(K, steps, lr, lr_min, weight_decay, no_decay, log_every, checkpoint_every, data_seeds,
                     snapshots, device, device.type == "cuda" and capture in ("auto", True), config)


def _resume(ckpt: Checkpoint, s: _Settings, model: nn.Module, opt: FlatAdamW, gens, task, segment):
    """The run's state: a fresh one, or the one its checkpoint holds (weights, optimiser, data
    generators, loss history, snapshots, segments, the task's place in its epoch) loaded into
    ``model``, ``opt``, ``gens`` and ``task``; this call appended to its segments.  Returns
    (run, the captured step's device-generator state to resume from, or None)."""
    run = {"hist_step": [], "hist_loss": [], "acc": torch.zeros(s.K, dtype=torch.float64, device=s.device),
           "cnt": 0, "step": 0, "snapshots": {}, "segments": []}
    state = ckpt.load(s.config, s.device)
    cuda_rng = None
    if state is not None:
        if s.captured:
            cuda_rng = state.get("cuda_rng")
            if cuda_rng is None and state["step"] > 0:
                raise ValueError(f"checkpoint {ckpt.path} was written by an eager run (per-member generators); "
                                 "resume it with capture=False")
        elif state.get("cuda_rng") is not None:
            raise ValueError(f"checkpoint {ckpt.path} was written by a captured CUDA run (one device "
                             "generator); resume it on CUDA with capture='auto'")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        for g, saved in zip(gens, state["generators"]):
            if g is not None:
                g.set_state(saved)
        run.update({k: state[k] for k in ("hist_step", "cnt", "step", "segments")})
        # the history and the snapshots live on the CPU (the checkpoint was loaded onto the device)
        run["hist_loss"] = [h.cpu() for h in state["hist_loss"]]
        run["snapshots"] = {k: {n: v.cpu() for n, v in w.items()} for k, w in state["snapshots"].items()}
        run["acc"].copy_(state["acc"])
        if hasattr(task, "load_state_dict"):
            task.load_state_dict(state.get("task", {}))
    run["segments"] = list(run["segments"]) + [{**(segment or {}), "first_step": run["step"] + 1}]
    return run, cuda_rng


def _checkpoint_state(run: dict, s: _Settings, model: nn.Module, opt: FlatAdamW, gens, graph, task) -> dict:
    """What the checkpoint holds after an update: everything :func:`_resume` reads back."""
    return {"config": s.config, "model": model.state_dict(), "optimizer": opt.state_dict(),
            "generators": [g.get_state() for g in gens] if not s.captured else [],
            "cuda_rng": torch.cuda.get_rng_state(s.device) if graph is not None else None,
            **{k: run[k] for k in ("hist_step", "hist_loss", "cnt", "step", "snapshots", "segments")},
            "acc": run["acc"].cpu(), "task": task.state_dict() if hasattr(task, "state_dict") else {}}


def _log(run: dict, step: int, s: _Settings, model: nn.Module, bar, on_log) -> None:
    """After update ``step``: count it, keep a copy of the weights where a snapshot is due, and at
    a log point (:func:`is_log_step`) record the block mean of the loss."""
    run["cnt"] += 1
    run["step"] = step
    if step in s.snapshots:
        run["snapshots"][step] = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
    if is_log_step(step, s.log_every, s.steps):
        _log_block(run, step, bar, on_log)


def _progress_bar(progress: bool, steps: int, start: int, desc: str):
    if not progress:
        return None
    from tqdm.auto import tqdm
    return tqdm(total=steps, initial=start, desc=desc, unit="step", mininterval=2.0, smoothing=0.05)


def _log_block(run: dict, step: int, bar, on_log) -> None:
    """Record the block mean of the training loss since the last log point."""
    block = (run["acc"] / run["cnt"]).cpu()
    run["hist_step"].append(step)
    run["hist_loss"].append(block)
    run["acc"].zero_()
    run["cnt"] = 0
    if bar is not None:
        bar.update(step - bar.n)
        bar.set_postfix(loss=f"{float(block.mean()):.3e}")
    if on_log is not None:
        on_log(step, block)


def _capture(step_at, opt: FlatAdamW, acc, s: _Settings, start: int, capture, rng_state=None):
    """Capture data draw + forward + backward + AdamW + schedule + loss accumulation in one
    CUDA graph (the PyTorch whole-network capture recipe: warm-up on a side stream, static
    tensors, a tensor learning rate and step count).  The device generator starts from
    ``rng_state`` (a resumed run) or is seeded with the first data seed; each replay advances it.
    Returns the graph, or None after a warning if capture is impossible; the eager loop then runs."""
    device = acc.device
    counter = torch.full((), float(start), dtype=opt.flat.dtype, device=device)      # updates done so far

    def start_generator():
        if rng_state is None:
            with torch.cuda.device(device):
                torch.cuda.manual_seed(s.data_seeds[0])
        else:
            torch.cuda.set_rng_state(rng_state.cpu(), device)

    def scheduled_step():
        acc.add_(step_at(_cosine(counter, s.steps, s.lr, s.lr_min, torch.cos)))
        counter.add_(1.0)

    try:
        start_generator()
        before = (opt.flat.clone(), opt.exp_avg.clone(), opt.exp_avg_sq.clone(), opt.t.clone(), acc.clone())
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):          # warm-up (autograd caches, kernel selection)
            for _ in range(3):
                scheduled_step()
        torch.cuda.current_stream().wait_stream(side)
        with torch.no_grad():                  # undo the warm-up: the graph replays from the state before it
            for now, then in zip((opt.flat, opt.exp_avg, opt.exp_avg_sq, opt.t, acc), before):
                now.copy_(then)
        counter.fill_(float(start))
        start_generator()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            scheduled_step()
        # every tensor the graph reads that was allocated outside it must live as long as the
        # graph: freed, its memory would be handed to the next allocation between two replays
        graph.inputs = (counter,)
        return graph
    except Exception as exc:  # noqa: BLE001 - any capture failure falls back to the eager step
        if capture is True:
            raise
        warnings.warn(f"CUDA graph capture failed ({exc!r}); training with the eager step", stacklevel=3)
        opt.capturable = False
        opt.t = int(round(float(opt.t)))
        return None
