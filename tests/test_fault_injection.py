"""Fault injection: bad inputs against the public API, and faults of the executor, the stored runs
and the compiled kernels, each with the behaviour it must have.

Every bad input is classified by what the call did:

    named       an error (ValueError, TypeError, IndexError, MemoryError, FileNotFoundError,
                lib.data.DataError) whose message contains every word the case lists -- the
                argument, and for a mismatch both sides;
    documented  no error, and the result is the documented one (the case says how to check it);
    obscure     an error that does not name the argument (or a bare torch RuntimeError);
    silent      no error and no documented result: a wrong answer nobody is told about.

The test requires no silent case at all, at most five obscure ones, and at least 150 cases
(``tests/test_bad_input.py``'s cases are included, and the battery of type confusions and
non-finite values of ``tests/test_boundary.py``, which itself allows no obscure case).  The
faults of the executor and of the kernels are tests of their own below, one per fault; those of
the stored runs are ``tests/test_stored_runs.py`` (changed, missing or swapped files) and
``tests/test_storage_faults.py`` (crafted, truncated and foreign files, a full disk, a second
process, a join killed at each of its writes), and those of the executor with two workers are
``tests/test_executor_faults.py`` (a second build or ``make chapter`` of a chapter under way, a
chapter failing beside a running one, Ctrl-C during two chapters, a truncated timings file, a
chapter without a record); this table prints their rows after the bad inputs.

    python -m tests.test_fault_injection     prints the table and its totals (from the repository's root)
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import lib
from lib import architectures
from lib import data as libdata
from lib.book import artefacts, experiments, notebook
from lib.online import check_adamw
from lib.training import loss_fn, r2_score, train_minibatch

ROOT = Path(__file__).resolve().parent.parent

F32, F64 = torch.float32, torch.float64
NAN, INF = float("nan"), float("inf")
ERRORS = (ValueError, TypeError, IndexError, MemoryError, FileNotFoundError, libdata.DataError)


def _g(seed=0):
    return torch.Generator().manual_seed(seed)


def _rnn(dtype=F64):
    return lib.LinearRNN(4, 2, 1, nu_W=0.5, nu_F=1.0, nu_C=1.0, seed=0, dtype=dtype)


def _x(N=3, T=4, n=2, dtype=F64, fill=None):
    x = torch.randn(N, T, n, generator=_g(), dtype=dtype)
    if fill is not None:
        x[0, 0, 0] = fill
    return x


def _teacher(d=3, K=1, dtype=F64, **kw):
    return lib.AttentionTeacherTask(*lib.lsa_teachers(d, list(range(K))), T=4, batch=2, x_std=0.5, dtype=dtype, **kw)


def _icl(K=1, dtype=F64, d_x=2, d_y=1):
    return lib.ICLTask(K=K, T=3, d_x=d_x, d_y=d_y, batch=2, dtype=dtype)


def _stack(d_in=3, d_out=3, K=1, dtype=F64):
    return lib.StackedGatedRNN(d_in, [3] * K, d_out, list(range(K)), dtype=dtype)


def _modstack(kind="gru", d_in=3, d_out=3, K=1, dtype=F64):
    return lib.ModuleStack([lib.RecurrentNet(kind, d_in, 4, d_out, seed=k, dtype=dtype) for k in range(K)])


def _resume_with(**kw):
    """Train 2 steps logging every step, checkpointed, then resume that checkpoint with ``kw``."""
    ckpt = _tmpdir("resume") / "ckpt.pt"
    ckpt.unlink(missing_ok=True)
    _online(_stack(), _teacher(), steps=2, log_every=1, checkpoint=ckpt)
    return _online(_stack(), _teacher(), steps=2, checkpoint=ckpt, **{"log_every": 1, **kw})


def _online(model, task, **kw):
    kw.setdefault("steps", 2)
    kw.setdefault("data_seeds", list(range(getattr(model, "K", 1))))
    return lib.train_online(model, task, **kw)


def _adamw(model=None, pair=None, **kw):
    model = model or lib.GatedLinearRNN(2, 3, 2)
    x = torch.randn(2, 5, 2, dtype=F64)
    y = torch.randn(2, 5, 2, dtype=F64)
    return lib.train_adamw(model, (lambda g: pair) if pair is not None else (lambda g: (x, y)), steps=2, **kw)


def _gd(model=None, x=None, y=None, **kw):
    model = model or _rnn()
    x = _x() if x is None else x
    y = torch.randn(3, 4, 1, generator=_g(1), dtype=F64) if y is None else y
    kw.setdefault("lr", 0.01)
    kw.setdefault("steps", 2)
    return lib.train_gd(model, x, y, **kw)


def _mb(model=None, x=None, y=None, **kw):
    model = model or _rnn()
    x = _x() if x is None else x
    y = torch.randn(3, 4, 1, generator=_g(1), dtype=F64) if y is None else y
    kw.setdefault("lr", 0.01)
    kw.setdefault("epochs", 1)
    return train_minibatch(model, x, y, **kw)


def _gated_x(B=2, T=3, d=2, dtype=F64, fill=None):
    x = torch.randn(B, T, d, generator=_g(), dtype=dtype)
    if fill is not None:
        x[0, 0, 0] = fill
    return x


def _stack_x(K=1, d=3, dtype=F64, fill=None):
    x = torch.randn(K, 2, 3, d, generator=_g(), dtype=dtype)
    if fill is not None:
        x[0, 0, 0, 0] = fill
    return x


def _s1(vel_const=False, **kw):
    spikes = np.random.default_rng(0).poisson(2.0, size=(200, 3)).astype(float)
    vel = np.random.default_rng(1).normal(size=(200, 2))
    if vel_const:
        vel[:, 1] = 0.7
    return libdata.s1_sequences(spikes, vel, T=5, **kw)


def _manifest(tmp: Path, text: str):
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "MANIFEST.sha256").write_text(text)
    return artefacts.read_manifest(tmp)


def _tmpdir(name: str) -> Path:
    import tempfile
    d = Path(tempfile.mkdtemp(prefix=f"fault-{name}-"))
    return d


def _sigs():
    return lib.lsa_teachers(3, [0])


# (id, entry point, call, words every message must contain[, check of a documented result])
CASES = [
    # ---- the objective: output against target, members, dimensions, dtypes (train_online)
    ("train_online: d_out 1 model, 3-output teacher", "train_online",
     lambda: _online(_stack(3, 1), _teacher(3)), ["d_out"]),
    ("train_online: d_in 2 model, d 3 teacher", "train_online", lambda: _online(_stack(2, 3), _teacher(3)), ["d_in"]),
    ("train_online: GRU stack d_out 1, 3-output teacher", "train_online",
     lambda: _online(_modstack(d_out=1), _teacher(3)), ["d_out"]),
    ("train_online: GRU stack d_in 2, d 3 teacher", "train_online",
     lambda: _online(_modstack(d_in=2), _teacher(3)), ["d_in"]),
    ("train_online: LSTM stack d_out 3 on ICL (d_y 1)", "train_online",
     lambda: _online(_modstack("lstm", d_in=3, d_out=3), _icl()), ["d_out"]),
    ("train_online: gated d_out 2 on ICL (d_y 1)", "train_online", lambda: _online(_stack(3, 2), _icl()), ["d_out"]),
    ("train_online: float32 model, float64 task", "train_online",
     lambda: _online(_stack(dtype=F32), _teacher()), ["dtype", "float32", "float64"]),
    ("train_online: float64 model, float32 task", "train_online",
     lambda: _online(_stack(), _teacher(dtype=F32)), ["dtype"]),
    ("train_online: 2 members, 1 teacher", "train_online", lambda: _online(_stack(K=2), _teacher(K=1)), ["members"]),
    ("train_online: 1 member, 2 ICL streams", "train_online", lambda: _online(_stack(4, 1), _icl(K=2, d_x=3)),
     ["members"]),
    ("train_online: a GatedLinearRNN (no stack)", "train_online",
     lambda: lib.train_online(lib.GatedLinearRNN(3, 3, 3), _teacher(), steps=1, data_seeds=[0]), ["stack"]),
    ("train_online: data_seeds a float", "train_online", lambda: _online(_stack(), _teacher(), data_seeds=[0.5]),
     ["data_seeds"]),
    ("train_online: data_seeds an int", "train_online", lambda: _online(_stack(), _teacher(), data_seeds=3),
     ["data_seeds"]),
    ("train_online: data_seeds too many", "train_online", lambda: _online(_stack(), _teacher(), data_seeds=[0, 1]),
     ["data_seeds"]),
    ("train_online: steps 2.5", "train_online", lambda: _online(_stack(), _teacher(), steps=2.5), ["steps"]),
    ("train_online: steps True", "train_online", lambda: _online(_stack(), _teacher(), steps=True), ["steps"]),
    ("train_online: lr nan", "train_online", lambda: _online(_stack(), _teacher(), lr=NAN), ["lr"]),
    ("train_online: lr inf", "train_online", lambda: _online(_stack(), _teacher(), lr=INF), ["lr"]),
    ("train_online: lr 0", "train_online", lambda: _online(_stack(), _teacher(), lr=0.0), ["lr"]),
    ("train_online: lr_min > lr", "train_online", lambda: _online(_stack(), _teacher(), lr=1e-4, lr_min=1e-3),
     ["lr_min"]),
    ("train_online: lr_min nan", "train_online", lambda: _online(_stack(), _teacher(), lr_min=NAN), ["lr_min"]),
    ("train_online: weight_decay nan", "train_online", lambda: _online(_stack(), _teacher(), weight_decay=NAN),
     ["weight_decay"]),
    ("train_online: weight_decay 1.5", "train_online", lambda: _online(_stack(), _teacher(), weight_decay=1.5),
     ["weight_decay"]),
    ("train_online: no_decay of ints", "train_online", lambda: _online(_stack(), _teacher(), no_decay=(1,)),
     ["no_decay"]),
    ("train_online: log_every 0", "train_online", lambda: _online(_stack(), _teacher(), log_every=0), ["log_every"]),
    ("train_online: snapshot after the last step", "train_online",
     lambda: _online(_stack(), _teacher(), snapshots=[3]), ["snapshots"]),
    ("train_online: snapshot 0", "train_online", lambda: _online(_stack(), _teacher(), snapshots=[0]), ["snapshots"]),
    ("train_online: capture 'yes'", "train_online", lambda: _online(_stack(), _teacher(), capture="yes"),
     ["capture"]),
    ("train_online: checkpoint_every 0", "train_online",
     lambda: _online(_stack(), _teacher(), checkpoint_every=-1), ["checkpoint_every"]),
    ("train_online: a checkpoint written with another log_every", "train_online",
     lambda: _resume_with(log_every=2), ["log_every 1 in the checkpoint, 2 now"]),
    ("OnlineRun: log_every 0", "OnlineRun",
     lambda: experiments.OnlineRun("x", "x", "teacher", (experiments.Group((4,), (1,)),), log_every=0), ["log_every"]),
    ("Group: log_every 2.5", "Group", lambda: experiments.Group((4,), (1,), log_every=2.5), ["log_every"]),
    ("train_online: a task that is not one", "train_online", lambda: _online(_stack(), object()), ["task"]),
    ("train_online: a model with NaN weights", "train_online", lambda: _online(_nan_weights(_stack()), _teacher()),
     ["W_in_m", "NaN"]),
    ("train_online: a GRU stack with NaN weights", "train_online",
     lambda: _online(_nan_weights(_modstack()), _teacher()), ["embed.weight", "NaN"]),
    ("ModuleStack: NaN weights", "ModuleStack.forward",
     lambda: _nan_weights(_modstack("lru"))(_stack_x()), ["embed.weight", "NaN"]),
    ("StackedGatedRNN: NaN weights", "StackedGatedRNN.forward", lambda: _nan_weights(_stack())(_stack_x()),
     ["W_in_m", "NaN"]),
    ("GatedLinearRNN: inf weights", "GatedLinearRNN.forward",
     lambda: _nan_weights(lib.GatedLinearRNN(2, 3, 2), INF)(_gated_x()), ["W_in_m", "infinite"]),
    # ---- train_adamw
    ("train_adamw: (2,5,1) target for a (2,5,2) prediction", "train_adamw",
     lambda: _adamw(pair=(torch.randn(2, 5, 2, dtype=F64), torch.randn(2, 5, 1, dtype=F64))),
     ["shape", "(2, 5, 2)", "(2, 5, 1)"]),
    ("train_adamw: (5,2) target for a (2,5,2) prediction", "train_adamw",
     lambda: _adamw(pair=(torch.randn(2, 5, 2, dtype=F64), torch.randn(5, 2, dtype=F64))), ["shape"]),
    ("train_adamw: float32 data, float64 model", "train_adamw",
     lambda: _adamw(pair=(torch.randn(2, 5, 2, dtype=F32), torch.randn(2, 5, 2, dtype=F32))), ["float32", "float64"]),
    ("train_adamw: target with NaN", "train_adamw",
     lambda: _adamw(pair=(torch.randn(2, 5, 2, dtype=F64), torch.full((2, 5, 2), NAN, dtype=F64))), ["y", "NaN"]),
    ("train_adamw: input with inf", "train_adamw",
     lambda: _adamw(pair=(torch.full((2, 5, 2), INF, dtype=F64), torch.zeros(2, 5, 2, dtype=F64))), ["x"]),
    ("train_adamw: batch returns one tensor", "train_adamw",
     lambda: lib.train_adamw(lib.GatedLinearRNN(2, 3, 2), lambda g: torch.zeros(2, 5, 2), steps=1), ["batch"]),
    ("train_adamw: batch not callable", "train_adamw",
     lambda: lib.train_adamw(lib.GatedLinearRNN(2, 3, 2), [1, 2], steps=1), ["batch"]),
    ("train_adamw: integer targets", "train_adamw",
     lambda: _adamw(pair=(torch.randn(2, 5, 2, dtype=F64), torch.ones(2, 5, 2, dtype=torch.int64))), ["y", "dtype"]),
    ("train_adamw: lr nan", "train_adamw", lambda: _adamw(lr=NAN), ["lr"]),
    ("train_adamw: no_decay of ints", "train_adamw", lambda: _adamw(no_decay=(1,)), ["no_decay"]),
    ("train_adamw: seed 0.5", "train_adamw", lambda: _adamw(seed=0.5), ["seed"]),
    ("train_adamw: log_every 0", "train_adamw", lambda: _adamw(log_every=0), ["log_every"]),
    ("train_adamw: loss not callable", "train_adamw", lambda: _adamw(loss="mse"), ["loss"]),
    ("train_adamw: loss returns a vector", "train_adamw",
     lambda: _adamw(loss=lambda a, b: (a - b).square().mean(dim=(1, 2))), ["loss", "scalar"]),
    ("train_adamw: predict not callable", "train_adamw", lambda: _adamw(predict=3), ["predict"]),
    ("train_adamw: predict returns the last step only", "train_adamw",
     lambda: _adamw(predict=lambda m, x: m(x)[:, -1]), ["shape"]),
    ("train_adamw: model with NaN weights", "train_adamw",
     lambda: _adamw(model=_nan_weights(lib.GatedLinearRNN(2, 3, 2))), ["W_in_m", "NaN"]),
    # ---- train_gd / train_minibatch
    ("train_gd: y with 2 outputs for a 1-output model", "train_gd",
     lambda: _gd(y=torch.zeros(3, 4, 2, dtype=F64)), ["shape", "y"]),
    ("train_gd: x with 3 channels for n_x 2", "train_gd", lambda: _gd(x=_x(n=3)), ["x", "n_x"]),
    ("train_gd: x and y of other N", "train_gd", lambda: _gd(y=torch.zeros(2, 4, 1, dtype=F64)), ["x", "y", "N"]),
    ("train_gd: x NaN", "train_gd", lambda: _gd(x=_x(fill=NAN)), ["x", "NaN"]),
    ("train_gd: y inf", "train_gd", lambda: _gd(y=torch.full((3, 4, 1), INF, dtype=F64)), ["y"]),
    ("train_gd: float32 model, float64 data", "train_gd", lambda: _gd(model=_rnn(F32)), ["x", "float64", "float32"]),
    ("train_gd: x_test with 3 channels", "train_gd",
     lambda: _gd(x_test=_x(n=3), y_test=torch.zeros(3, 4, 1, dtype=F64)), ["x_test"]),
    ("train_gd: y_test with 2 outputs", "train_gd",
     lambda: _gd(x_test=_x(), y_test=torch.zeros(3, 4, 2, dtype=F64)), ["y_test"]),
    ("train_gd: x_test 2-D", "train_gd", lambda: _gd(x_test=torch.zeros(4, 2, dtype=F64), y_test=torch.zeros(4, 1)),
     ["x_test"]),
    ("train_gd: x_test NaN", "train_gd", lambda: _gd(x_test=_x(fill=NAN), y_test=torch.zeros(3, 4, 1, dtype=F64)),
     ["x_test", "NaN"]),
    ("train_gd: y_test without x_test", "train_gd", lambda: _gd(y_test=torch.zeros(3, 4, 1)), ["x_test", "y_test"]),
    ("train_gd: lr -1", "train_gd", lambda: _gd(lr=-1.0), ["lr"]),
    ("train_gd: lr nan", "train_gd", lambda: _gd(lr=NAN), ["lr"]),
    ("train_gd: steps 1.5", "train_gd", lambda: _gd(steps=1.5), ["steps"]),
    ("train_gd: loss 'l2'", "train_gd", lambda: _gd(loss="l2"), ["loss"]),
    ("train_gd: callback not callable", "train_gd", lambda: _gd(callback=5), ["callback"]),
    ("train_gd: model not a Module", "train_gd", lambda: _gd(model=lambda x: x), ["model"]),
    ("train_gd: model frozen", "train_gd", lambda: _gd(model=_rnn().requires_grad_(False)), ["model", "trainable"]),
    ("train_gd: model with NaN weights", "train_gd", lambda: _gd(model=_nan_weights(_rnn())), ["W", "NaN"]),
    ("train_minibatch: y with 2 outputs", "train_minibatch", lambda: _mb(y=torch.zeros(3, 4, 2, dtype=F64)),
     ["shape", "y"]),
    ("train_minibatch: batch_size 0", "train_minibatch", lambda: _mb(batch_size=0), ["batch_size"]),
    ("train_minibatch: seed 1.5", "train_minibatch", lambda: _mb(seed=1.5), ["seed"]),
    ("train_minibatch: evaluate not callable", "train_minibatch", lambda: _mb(evaluate="r2"), ["evaluate"]),
    ("train_minibatch: float32 model", "train_minibatch", lambda: _mb(model=_rnn(F32)), ["float32"]),
    ("train_minibatch: x NaN", "train_minibatch", lambda: _mb(x=_x(fill=NAN)), ["x", "NaN"]),
    ("train_minibatch: lr inf", "train_minibatch", lambda: _mb(lr=INF), ["lr"]),
    ("loss_fn: (2,3,1) against (2,3,2)", "loss_fn", lambda: loss_fn(torch.zeros(2, 3, 1), torch.zeros(2, 3, 2)),
     ["shape"]),
    # ---- schedules
    ("cosine_lr: lr < lr_min", "cosine_lr", lambda: lib.cosine_lr(1, 10, 1e-6, 1e-3), ["lr_min"]),
    ("cosine_lr: lr nan", "cosine_lr", lambda: lib.cosine_lr(1, 10, NAN, 1e-6), ["lr"]),
    ("cosine_lr: lr_min nan", "cosine_lr", lambda: lib.cosine_lr(1, 10, 1e-3, NAN), ["lr_min"]),
    ("cosine_lr: lr inf", "cosine_lr", lambda: lib.cosine_lr(1, 10, INF, 1e-6), ["lr"]),
    ("cosine_lr: step 0", "cosine_lr", lambda: lib.cosine_lr(0, 10, 1e-3, 1e-6), ["step"]),
    ("cosine_lr: step 1.0", "cosine_lr", lambda: lib.cosine_lr(1.0, 10, 1e-3, 1e-6), ["step"]),
    ("cosine_lr: steps 0", "cosine_lr", lambda: lib.cosine_lr(1, 0, 1e-3, 1e-6), ["step"]),
    ("cosine_lr: lr_min negative", "cosine_lr", lambda: lib.cosine_lr(1, 10, 1e-3, -1e-6), ["lr_min"]),
    ("check_adamw: no_decay of ints", "check_adamw", lambda: check_adamw(1e-3, 1e-6, 1e-4, (1, 2)), ["no_decay"]),
    ("check_adamw: weight_decay True", "check_adamw", lambda: check_adamw(1e-3, 1e-6, True, ()), ["weight_decay"]),
    # ---- tasks
    ("AttentionTeacherTask: dtype int64", "AttentionTeacherTask", lambda: _teacher(dtype=torch.int64), ["dtype"]),
    ("AttentionTeacherTask: dtype complex64", "AttentionTeacherTask", lambda: _teacher(dtype=torch.complex64),
     ["dtype"]),
    ("AttentionTeacherTask: dtype 'float32'", "AttentionTeacherTask", lambda: _teacher(dtype="float32"), ["dtype"]),
    ("AttentionTeacherTask: device 'gpu0'", "AttentionTeacherTask", lambda: _teacher(device="gpu0"), ["device"]),
    ("AttentionTeacherTask: W_V with NaN", "AttentionTeacherTask",
     lambda: lib.AttentionTeacherTask(torch.full((1, 2, 2), NAN), torch.eye(2)[None], torch.eye(2)[None], T=3,
                                      batch=2, x_std=1.0), ["W_V", "NaN"]),
    ("AttentionTeacherTask: W_V not square", "AttentionTeacherTask",
     lambda: lib.AttentionTeacherTask(torch.zeros(1, 2, 3), torch.zeros(1, 2, 3), torch.zeros(1, 2, 3), T=3,
                                      batch=2, x_std=1.0), ["W_V"]),
    ("AttentionTeacherTask: no teacher (K = 0)", "AttentionTeacherTask",
     lambda: lib.AttentionTeacherTask(torch.zeros(0, 2, 2), torch.zeros(0, 2, 2), torch.zeros(0, 2, 2), T=3,
                                      batch=2, x_std=1.0), ["W_V", "empty"]),
    ("AttentionTeacherTask: T 0", "AttentionTeacherTask",
     lambda: lib.AttentionTeacherTask(*_sigs(), T=0, batch=2, x_std=1.0), ["T"]),
    ("AttentionTeacherTask: x_std inf", "AttentionTeacherTask",
     lambda: lib.AttentionTeacherTask(*_sigs(), T=3, batch=2, x_std=INF), ["x_std"]),
    ("AttentionTeacherTask: batch 2.0", "AttentionTeacherTask",
     lambda: lib.AttentionTeacherTask(*_sigs(), T=3, batch=2.0, x_std=1.0), ["batch"]),
    ("AttentionTeacherTask.sample: 2 generators for 1 teacher", "AttentionTeacherTask.sample",
     lambda: _teacher().sample([_g(0), _g(1)]), ["generators", "K = 1"]),
    ("AttentionTeacherTask.sample: a generator, not a list", "AttentionTeacherTask.sample",
     lambda: _teacher().sample(_g(0)), ["generators"]),
    ("ICLTask: dtype int64", "ICLTask", lambda: _icl(dtype=torch.int64), ["dtype"]),
    ("ICLTask: dtype bool", "ICLTask", lambda: _icl(dtype=torch.bool), ["dtype"]),
    ("ICLTask: d_x 0", "ICLTask", lambda: lib.ICLTask(K=1, T=3, d_x=0, d_y=1, batch=2), ["d_x"]),
    ("ICLTask: sigma_w2 -1", "ICLTask", lambda: lib.ICLTask(K=1, T=3, d_x=1, d_y=1, batch=2, sigma_w2=-1.0),
     ["sigma_w2"]),
    ("ICLTask: sigma_x2 nan", "ICLTask", lambda: lib.ICLTask(K=1, T=3, d_x=1, d_y=1, batch=2, sigma_x2=NAN),
     ["sigma_x2"]),
    ("ICLTask: K True", "ICLTask", lambda: lib.ICLTask(K=True, T=3, d_x=1, d_y=1, batch=2), ["K"]),
    ("ICLTask: device 3.5", "ICLTask", lambda: lib.ICLTask(K=1, T=3, d_x=1, d_y=1, batch=2, device=3.5), ["device"]),
    ("ICLTask.sample: no generators", "ICLTask.sample", lambda: _icl().sample([]), ["generators"]),
    ("icl_batch: dtype int64 (tokens would truncate)", "icl_batch",
     lambda: lib.icl_batch(4, 3, 2, 1, generator=_g(), dtype=torch.int64), ["dtype"]),
    ("icl_batch: dtype complex128", "icl_batch",
     lambda: lib.icl_batch(4, 3, 2, 1, generator=_g(), dtype=torch.complex128), ["dtype"]),
    ("icl_batch: batch 0", "icl_batch", lambda: lib.icl_batch(0, 3, 2, 1, generator=_g()), ["batch"]),
    ("icl_batch: sigma_x2 inf", "icl_batch", lambda: lib.icl_batch(2, 3, 2, 1, generator=_g(), sigma_x2=INF),
     ["sigma_x2"]),
    ("lsa_teachers: no seeds", "lsa_teachers", lambda: lib.lsa_teachers(2, []), ["seeds"]),
    ("lsa_teachers: seed 1.5", "lsa_teachers", lambda: lib.lsa_teachers(2, [1.5]), ["seeds"]),
    ("lsa_teachers: scale nan", "lsa_teachers", lambda: lib.lsa_teachers(2, [1], scale=NAN), ["scale"]),
    # ---- gated models
    ("GatedLinearRNN: dtype int32", "GatedLinearRNN", lambda: lib.GatedLinearRNN(2, 3, 2, dtype=torch.int32),
     ["dtype"]),
    ("GatedLinearRNN: x with NaN", "GatedLinearRNN.forward", lambda: lib.GatedLinearRNN(2, 3, 2)(_gated_x(fill=NAN)),
     ["x", "NaN"]),
    ("GatedLinearRNN: x with 1e200 (overflow)", "GatedLinearRNN.forward",
     lambda: lib.GatedLinearRNN(2, 3, 2)(_gated_x(fill=1e200)), ["x", "overflow"]),
    ("GatedLinearRNN: step method, x with 1e200", "GatedLinearRNN.forward",
     lambda: lib.GatedLinearRNN(2, 3, 2)(_gated_x(fill=1e200), method="step"), ["x", "overflow"]),
    ("GatedLinearRNN: float32, x with 1e30 (overflow)", "GatedLinearRNN.forward",
     lambda: lib.GatedLinearRNN(2, 3, 2, dtype=F32)(_gated_x(dtype=F32, fill=1e30)), ["x", "overflow"]),
    ("GatedLinearRNN: x with 3 channels for d_in 2", "GatedLinearRNN.forward",
     lambda: lib.GatedLinearRNN(2, 3, 2)(_gated_x(d=3)), ["x"]),
    ("GatedLinearRNN: x 2-D", "GatedLinearRNN.forward", lambda: lib.GatedLinearRNN(2, 3, 2)(torch.zeros(3, 2)),
     ["x", "dimensions"]),
    ("GatedLinearRNN: method 'fast'", "GatedLinearRNN.forward",
     lambda: lib.GatedLinearRNN(2, 3, 2)(_gated_x(), method="fast"), ["method"]),
    ("GatedLinearRNN.from_weights: lam 1.5", "GatedLinearRNN.from_weights",
     lambda: lib.GatedLinearRNN.from_weights(torch.ones(2, 3), torch.ones(2, 3), torch.full((2,), 1.5),
                                             torch.ones(2, 2), torch.ones(2, 2), torch.ones(1, 2)), ["lam"]),
    ("StackedGatedRNN: dtype int64", "StackedGatedRNN", lambda: _stack(dtype=torch.int64), ["dtype"]),
    ("StackedGatedRNN: device 'tpu'", "StackedGatedRNN",
     lambda: lib.StackedGatedRNN(2, [3], 2, [0], device="tpu"), ["device"]),
    ("StackedGatedRNN: x NaN", "StackedGatedRNN.forward", lambda: _stack()(_stack_x(fill=NAN)), ["x", "NaN"]),
    ("StackedGatedRNN: x 1e200 (overflow)", "StackedGatedRNN.forward",
     lambda: _stack()(_stack_x(fill=1e200)), ["x", "overflow"]),
    ("StackedGatedRNN: x 1e200, last step only", "StackedGatedRNN.forward",
     lambda: _stack()(_stack_x(fill=1e200), last_only=True), ["x", "overflow"]),
    ("StackedGatedRNN: x float64 into a float32 stack", "StackedGatedRNN.forward",
     lambda: _stack(dtype=F32)(_stack_x()), ["x", "float64", "float32"]),
    ("StackedGatedRNN: x for 2 members into 1", "StackedGatedRNN.forward", lambda: _stack()(_stack_x(K=2)),
     ["x", "K"]),
    ("StackedGatedRNN: x with d 2 for d_in 3", "StackedGatedRNN.forward", lambda: _stack()(_stack_x(d=2)),
     ["x", "d_in"]),
    ("StackedGatedRNN: x 3-D", "StackedGatedRNN.forward", lambda: _stack()(torch.zeros(2, 3, 3, dtype=F64)), ["x"]),
    ("StackedGatedRNN: x a list", "StackedGatedRNN.forward", lambda: _stack()([[1.0]]), ["x"]),
    ("StackedGatedRNN.member: 5 of 1", "StackedGatedRNN.member", lambda: _stack().member(5), ["member"]),
    ("StackedGatedRNN.member: 0.0", "StackedGatedRNN.member", lambda: _stack().member(0.0), ["member"]),
    ("StackedGatedRNN.from_members: dtype int", "StackedGatedRNN.from_members",
     lambda: lib.StackedGatedRNN.from_members([lib.GatedLinearRNN(2, 3, 2)], dtype=torch.int64), ["dtype"]),
    ("RecurrentNet: x float64 into float32 net", "RecurrentNet.forward",
     lambda: lib.RecurrentNet("lstm", 3, 4, 2)(torch.zeros(1, 2, 3, dtype=F64)), ["x", "float64", "float32"]),
    ("RecurrentNet: dtype int64", "RecurrentNet", lambda: lib.RecurrentNet("gru", 3, 4, 2, dtype=torch.int64),
     ["dtype"]),
    ("RecurrentNet: x empty (T = 0)", "RecurrentNet.forward",
     lambda: lib.RecurrentNet("gru", 3, 4, 2)(torch.zeros(1, 0, 3)), ["x"]),
    ("RecurrentNet: width 0", "RecurrentNet", lambda: lib.RecurrentNet("lru", 3, 0, 2), ["width"]),
    ("RecurrentNet: layers 0", "RecurrentNet", lambda: lib.RecurrentNet("lru", 3, 4, 2, layers=0), ["layers"]),
    ("RecurrentNet: seed 0.5", "RecurrentNet", lambda: lib.RecurrentNet("lru", 3, 4, 2, seed=0.5), ["seed"]),
    ("LRULayer: dtype float16 ok, int8 not", "LRULayer", lambda: lib.LRULayer(3, dtype=torch.int8), ["dtype"]),
    ("LRULayer: skip_gate without input_gate", "LRULayer", lambda: lib.LRULayer(3, skip_gate=True), ["skip_gate"]),
    ("ModuleStack: members of other d_in", "ModuleStack",
     lambda: lib.ModuleStack([lib.RecurrentNet("gru", 3, 4, 2), lib.RecurrentNet("gru", 2, 4, 2)]), ["d_in"]),
    ("ModuleStack: x with d 2 for d_in 3", "ModuleStack.forward",
     lambda: _modstack()(torch.zeros(1, 2, 3, 2, dtype=F64)), ["x", "d_in"]),
    ("ModuleStack: x NaN", "ModuleStack.forward",
     lambda: _modstack()(torch.full((1, 2, 3, 3), NAN, dtype=F64)), ["x", "NaN"]),
    ("ModuleStack: x for 2 members into 1", "ModuleStack.forward",
     lambda: _modstack()(torch.zeros(2, 2, 3, 3, dtype=F64)), ["x", "K"]),
    ("ModuleStack: x float32 into float64 members", "ModuleStack.forward",
     lambda: _modstack()(torch.zeros(1, 2, 3, 3, dtype=F32)), ["x", "float32", "float64"]),
    ("ModuleStack.member: -1", "ModuleStack.member", lambda: _modstack().member(-1), ["member"]),
    ("LinearRNN: dtype int64", "LinearRNN", lambda: _rnn(dtype=torch.int64), ["dtype"]),
    ("LinearRNN: x with inf", "LinearRNN.forward", lambda: _rnn()(_x(fill=INF)), ["x"]),
    ("LinearRNN: integer x is read as float64", "LinearRNN.forward",
     lambda: _rnn()(torch.ones(1, 3, 2, dtype=torch.int64)), ["x"],
     lambda out: out.dtype == F64 and torch.allclose(out, _rnn()(torch.ones(1, 3, 2, dtype=F64)))),
    ("ScaledConv: dtype int64", "ScaledConv", lambda: lib.ScaledConv(torch.ones(3), 1, 1, dtype=torch.int64),
     ["dtype"]),
    ("ScaledConv: rho with NaN", "ScaledConv", lambda: lib.ScaledConv(torch.tensor([1.0, NAN]), 1, 1), ["rho"]),
    ("ScaledConv: x longer than the filter", "ScaledConv.forward",
     lambda: lib.ScaledConv(torch.ones(2), 1, 1)(torch.zeros(1, 3, 1)), ["x", "taps"]),
    ("LinearSelfAttention: x NaN", "LinearSelfAttention.forward",
     lambda: lib.LinearSelfAttention(torch.eye(2), torch.eye(2), torch.eye(2))(torch.full((1, 2, 2), NAN)),
     ["x", "NaN"]),
    # ---- data
    ("s1_sequences: constant vel channel (targets 0/0)", "s1_sequences", lambda: _s1(vel_const=True),
     ["vel", "constant"]),
    ("s1_sequences: train_bins < T", "s1_sequences", lambda: _s1(train_bins=3), ["train_bins"]),
    ("s1_sequences: train_offset without train_bins", "s1_sequences", lambda: _s1(train_offset=5), ["train_offset"]),
    ("s1_sequences: vel inf", "s1_sequences",
     lambda: libdata.s1_sequences(np.ones((100, 3)), np.full((100, 2), INF), T=5), ["vel"]),
    ("s1_sequences: spikes 1-D", "s1_sequences", lambda: libdata.s1_sequences(np.ones(100), np.ones((100, 2)), T=5),
     ["spikes"]),
    ("r2_score: constant target", "r2_score", lambda: r2_score(torch.randn(5, 1), torch.ones(5, 1)), ["constant"]),
    ("r2_score: prediction NaN", "r2_score", lambda: r2_score(torch.full((5, 1), NAN), torch.randn(5, 1)),
     ["yhat", "NaN"]),
    # ---- stored runs and the book's machinery
    ("load_run(5)", "load_run", lambda: artefacts.load_run(5), ["name"]),
    ("load_run('../teacher')", "load_run", lambda: artefacts.load_run("../teacher"), ["name"]),
    ("load_run('')", "load_run", lambda: artefacts.load_run(""), ["name"]),
    ("load_run: root an int", "load_run", lambda: artefacts.load_run("teacher", 3), ["root"]),
    ("load_run: a run that is not stored", "load_run", lambda: artefacts.load_run("no_such_run"),
     ["no_such_run", "make paper"]),
    ("load_chapter_run(4)", "load_chapter_run", lambda: artefacts.load_chapter_run(4), ["stem"]),
    ("load_chapter_run: a chapter not stored", "load_chapter_run",
     lambda: artefacts.load_chapter_run("77_nothing"), ["77_nothing", "make paper"]),
    ("read_manifest: a line without a path", "read_manifest",
     lambda: _manifest(_tmpdir("manifest"), "ab" * 32 + "\n"), ["line 1"]),
    ("read_manifest: a short checksum", "read_manifest",
     lambda: _manifest(_tmpdir("manifest"), "abc  icl/run.pt\n"), ["line 1"]),
    ("verify: a file outside the results folder", "verify",
     lambda: artefacts.verify([Path("/etc/hostname")], artefacts.RESULTS, "x"), ["not under"]),
    ("stored_chapter_run: scale 'full'", "stored_chapter_run",
     lambda: notebook.stored_chapter_run("04_training_dynamics", "full"), ["scale"]),
    ("stored_chapter_run: book_only 1", "stored_chapter_run",
     lambda: notebook.stored_chapter_run("04_training_dynamics", "book", book_only=1), ["book_only"]),
    ("check_scale('Book')", "check_scale", lambda: notebook.check_scale("Book"), ["scale"]),
    ("rel_err: shapes that would broadcast", "rel_err", lambda: notebook.rel_err(torch.ones(3, 1), torch.ones(3)),
     ["shape"]),
    ("table: an unformatted float", "table",
     lambda: notebook.table(["a"], [[0.1234]]), ["rows[0][0]"]),
    # ---- the rest of the library
    ("diagonal_scan: u 2-D", "diagonal_scan", lambda: lib.diagonal_scan(torch.rand(3), torch.zeros(4, 3)), ["u"]),
    ("causal_conv: x channels against L", "causal_conv",
     lambda: lib.causal_conv(torch.zeros(3, 1, 2), torch.zeros(1, 3, 3)), ["x"]),
    ("markov_parameters: W not square", "markov_parameters",
     lambda: lib.markov_parameters(torch.zeros(3, 2), torch.zeros(3, 1), torch.zeros(1, 3), 3), ["W"]),
    ("empirical_ntk: x of the wrong n_x", "empirical_ntk",
     lambda: lib.empirical_ntk(_x(n=3), _x(n=3), _rnn()), ["n_x"]),
    ("conv_ntk: rho with NaN", "conv_ntk",
     lambda: lib.conv_ntk(torch.zeros(2, 3, 1), torch.zeros(2, 3, 1), torch.tensor([1.0, NAN, 1.0])), ["rho"]),
    ("linear_teacher_dataset: snr_db nan", "linear_teacher_dataset",
     lambda: lib.linear_teacher_dataset(torch.randn(3, 1, 1), 2, 2, 3, snr_db=NAN), ["snr_db"]),
    ("gd_predict: tokens int64", "gd_predict",
     lambda: lib.gd_predict(torch.ones(2, 3, 3, dtype=torch.int64), 2, 0.1), ["tokens"],
     lambda out: out.shape == (2, 1) and bool((out == 0).all())),
    ("vandermonde_realization: L with NaN", "vandermonde_realization",
     lambda: lib.vandermonde_realization(torch.tensor([[[1.0]], [[NAN]]])), ["L"]),
]


def _nan_weights(model, value=NAN):
    with torch.no_grad():
        next(model.parameters())[0].fill_(value)
    return model


def classify(call, words, documented=None) -> tuple[str, str]:
    """('named' | 'documented' | 'obscure' | 'silent', what happened)."""
    try:
        result = call()
    except ERRORS as exc:
        msg = f"{type(exc).__name__}: {exc}"
        missing = [w for w in words if w not in str(exc)]
        return ("obscure", f"{msg}  [does not name {missing}]") if missing else ("named", msg)
    except Exception as exc:  # noqa: BLE001 - a bare RuntimeError from torch and the like
        return "obscure", f"{type(exc).__name__}: {exc}"
    if documented is not None and documented(result):
        return "documented", f"returned the documented result ({type(result).__name__})"
    return "silent", f"returned {type(result).__name__}"


def _sibling(name: str):
    """The test module ``tests/NAME.py`` (tests/ is no package: pytest imports its files by name,
    ``python -m tests.test_fault_injection`` as a namespace package; the same module either way)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


def all_cases():
    """This module's cases, tests/test_bad_input.py's and the battery of type confusions of
    tests/test_boundary.py (id, entry, call, words, documented)."""
    test_bad_input = _sibling("test_bad_input")
    test_boundary = _sibling("test_boundary")

    out = [(c[0], c[1], c[2], c[3], c[4] if len(c) > 4 else None) for c in CASES]
    out += [(f"[bad_input] {c[0]}", c[0].split()[0], c[1], c[3], None) for c in test_bad_input.ALL_CASES]
    out += [(f"[boundary] {case}", case.split(":")[0], call, words, documented)
            for case, call, words, documented in test_boundary.cases()]
    return out


def table():
    rows = []
    for case_id, entry, call, words, documented in all_cases():
        kind, what = classify(call, words, documented)
        rows.append({"case": case_id, "entry": entry, "outcome": kind, "what": what})
    return rows


def test_bad_inputs_are_refused_by_name():
    """>= 150 bad inputs: none returns a wrong result silently, at most five fail obscurely."""
    rows = table()
    counts = {k: sum(r["outcome"] == k for r in rows) for k in ("named", "documented", "obscure", "silent")}
    silent = [f"{r['case']}: {r['what']}" for r in rows if r["outcome"] == "silent"]
    obscure = [f"{r['case']}: {r['what'][:300]}" for r in rows if r["outcome"] == "obscure"]
    assert len(rows) >= 150, len(rows)
    assert not silent, "silent wrong results:\n" + "\n".join(silent)
    assert len(obscure) <= 5, f"{len(obscure)} obscure errors:\n" + "\n".join(obscure)
    assert counts["named"] + counts["documented"] + counts["obscure"] == len(rows)


# --------------------------------------------------------------------------------------------------
# the executor (tools/book.py): the record binds what it publishes
# --------------------------------------------------------------------------------------------------
_CHAPTER = """---
kernelspec:
  name: python3
  display_name: Python 3
  language: python
---

# A chapter

```{code-cell} ipython3
:tags: [parameters]

scale = "book"
fail = False
interrupt = False
```

```{code-cell} ipython3
x = 1
```
"""


def _complete_notebook(text="1") -> dict:
    return {"cells": [{"cell_type": "code", "source": "x = 1", "execution_count": 1, "metadata": {},
                       "outputs": [{"output_type": "stream", "name": "stdout", "text": text}]}],
            "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def _point_executor_at(tmp_path, monkeypatch, srcs):
    """The executor's paths and table of contents moved to a book under tmp_path."""
    from tools import execute, sources

    monkeypatch.setattr(sources, "ROOT", tmp_path)
    monkeypatch.setattr(sources, "BOOK", tmp_path / "book")
    monkeypatch.setattr(sources, "BUILD", tmp_path / "build")
    monkeypatch.setattr(sources, "EXEC", tmp_path / "build" / "exec")
    monkeypatch.setattr(sources, "LOCKS", tmp_path / "build" / "locks")
    monkeypatch.setattr(sources, "TIMINGS", tmp_path / "build" / "timings.json")
    monkeypatch.setattr(sources, "EXECUTOR", tmp_path / "build" / "executor.json")
    monkeypatch.setattr(sources, "chapters", lambda: list(srcs))
    monkeypatch.setattr(execute, "_REPORTED", set())


@pytest.fixture
def fake_book(tmp_path, monkeypatch):
    """tools/book.py on a one-chapter book under tmp_path, with papermill replaced by a function
    that writes a complete notebook (and counts its calls)."""
    from tools import book, kernel

    (tmp_path / "book").mkdir()
    src = tmp_path / "book" / "50_fake.md"
    src.write_text(_CHAPTER)
    _point_executor_at(tmp_path, monkeypatch, [src])
    calls = []

    def papermill(src_, out, parameters=None, threads=None):
        calls.append(parameters)
        if (parameters or {}).get("fail"):
            out.write_text(json.dumps({**_complete_notebook(), "cells": [{
                "cell_type": "code", "source": "1/0", "execution_count": 1, "metadata": {},
                "outputs": [{"output_type": "error", "ename": "ZeroDivisionError", "evalue": "", "traceback": []}]}]}))
            raise RuntimeError("a cell failed")
        if (parameters or {}).get("interrupt"):
            out.write_text(json.dumps(_complete_notebook()))
            raise KeyboardInterrupt
        out.write_text(json.dumps(_complete_notebook(f"run {len(calls)}")))
        return 0.01

    monkeypatch.setattr(kernel, "run_papermill", papermill)
    return book, src, tmp_path / "book" / "50_fake.ipynb", tmp_path / "build" / "exec" / "50_fake.json", calls


def test_executor_keeps_an_unchanged_notebook_and_binds_it_in_its_record(fake_book):
    book, src, out, record, calls = fake_book
    assert book.execute() == ["50_fake"] and book.execute() == []
    rec = json.loads(record.read_text())
    assert rec["notebook_sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()


@pytest.mark.parametrize("fault", ["edited output", "notebook from elsewhere"])
def test_executor_re_executes_a_notebook_its_record_did_not_publish(fake_book, capsys, fault):
    book, src, out, record, calls = fake_book
    book.execute()
    nb = json.loads(out.read_text())
    if fault == "edited output":
        nb["cells"][0]["outputs"][0]["text"] = "a number nobody computed"
    else:
        nb = _complete_notebook("from another checkout")
    out.write_text(json.dumps(nb))
    assert book.incomplete_cells(out) == []                          # complete, yet not published
    assert book.execute() == ["50_fake"]
    assert "not the notebook its record published" in capsys.readouterr().out
    assert json.loads(out.read_text())["cells"][0]["outputs"][0]["text"] == "run 2"


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", ""])
def test_a_corrupt_record_is_reported_in_one_line_and_treated_as_absent(fake_book, capsys, content):
    book, src, out, record, calls = fake_book
    book.execute()
    record.write_text(content)
    assert book.execute() == ["50_fake"]                             # executed again, no traceback
    err = capsys.readouterr().err
    assert len([line for line in err.splitlines() if "treated as absent" in line]) == 1, err
    assert json.loads(record.read_text())["notebook_sha256"]         # rewritten
    assert book.execute() == []


@pytest.mark.parametrize("content", ["{truncated", "null", "", '{"chapters": {"50_fake": {"seconds": 0.1}}}'])
def test_a_corrupt_or_false_timings_file_is_rebuilt_from_the_records(fake_book, content):
    """Whatever timings.json holds -- garbage, nothing, or a number nobody measured -- the build
    rewrites it from the chapters' records alone."""
    from tools import sources

    book, src, out, record, calls = fake_book
    book.execute()
    measured = json.loads(record.read_text())["seconds"]
    sources.TIMINGS.write_text(content)
    assert book.execute() == []                                       # nothing to execute; rebuilt still
    timings = json.loads(sources.TIMINGS.read_text())
    assert timings["chapters"]["50_fake"]["seconds"] == measured and timings["missing"] == []
    assert out.is_file() and record.is_file()


def test_a_failed_execution_publishes_nothing(fake_book, capsys):
    from tools import kernel, sources

    book, src, out, record, calls = fake_book
    book.execute()
    monkey_calls = calls.copy()
    papermill = kernel.run_papermill
    kernel.run_papermill = lambda s, o, p=None, threads=None: papermill(s, o, {"fail": True})
    try:
        with pytest.raises(book.BookError, match="failed to execute"):
            book.execute(force=True)
    finally:
        kernel.run_papermill = papermill
    assert not out.exists() and not record.exists()
    assert (sources.BUILD / "failed" / out.name).is_file()
    assert len(calls) == len(monkey_calls) + 1


def _fake_page():
    from tools import sources

    def build(src, nb, params):
        staging = sources.BUILD / "chapters" / (src.stem + ".building")
        page = staging / "_build" / "html" / "book" / (src.stem + ".html")
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(f"page of {hashlib.sha256(nb.read_bytes()).hexdigest()} with {params}")
        return staging
    return build


@pytest.mark.parametrize("fault", ["fail", "interrupt"])
def test_make_chapter_replaces_notebook_and_page_only_from_a_complete_run(fake_book, monkeypatch, fault):
    from tools import render, sources

    book, src, out, record, calls = fake_book
    monkeypatch.setattr(render, "build_chapter_page", _fake_page())
    nb = book.run_chapter("50", {})
    rec_path = sources.BUILD / "chapters" / "50_fake.json"
    page = sources.BUILD / "chapters" / "50_fake" / "_build" / "html" / "book" / "50_fake.html"
    rec = json.loads(rec_path.read_text())
    sha = hashlib.sha256(nb.read_bytes()).hexdigest()
    assert rec["notebook_sha256"] == sha and sha in page.read_text() and rec["parameters"] == {}
    before = (nb.read_bytes(), page.read_text(), rec_path.read_text())
    if fault == "fail":
        with pytest.raises(book.BookError, match="failed.*previous result .* is unchanged"):
            book.run_chapter("50", {"fail": True})
    else:
        with pytest.raises(KeyboardInterrupt):
            book.run_chapter("50", {"interrupt": True})
    assert (nb.read_bytes(), page.read_text(), rec_path.read_text()) == before   # the previous pair, intact
    assert (sources.BUILD / "chapters" / "failed" / "50_fake.ipynb").is_file()
    assert not (sources.BUILD / "chapters" / "50_fake.running.ipynb").exists()


def test_socket_folders_of_dead_executions_are_removed(tmp_path, monkeypatch):
    """A folder whose process is gone goes, with its dead kernel's socket files; one whose process
    is alive stays; of the earlier versions' folders only empty ones older than an hour go."""
    import socket
    import tempfile

    from tools import book

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    gone, alive = tmp_path / f"rnnbook-ipc-{dead}-ab", tmp_path / f"rnnbook-ipc-{os.getpid()}-cd"
    other = tmp_path / f"rnnbook-ipc-{dead}-ef"                        # holds a file that is not a socket
    old_empty, new_empty, busy = (tmp_path / "rnnbook-kernel-old", tmp_path / "rnnbook-kernel-new",
                                  tmp_path / "rnnbook-kernel-x")
    for f in (gone, alive, other, old_empty, new_empty, busy):
        f.mkdir()
    for f in (gone, alive):
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(f / "kernel-1"))
        s.close()
    (other / "notes.txt").write_text("keep")
    (busy / "gated-1.so").write_text("a private kernel build")
    long_ago = time.time() - 7200
    for f in (old_empty, busy):
        os.utime(f, (long_ago, long_ago))
    assert book.remove_stale_ipc_folders() == 2
    assert not gone.exists() and not old_empty.exists()
    assert alive.exists() and other.exists() and new_empty.exists() and busy.exists()


def test_a_chapter_execution_leaves_no_socket_folder(tmp_path):
    """The kernel's IPC folder (in the temporary folder) is removed when papermill returns."""
    code = ("import tempfile, sys; tempfile.tempdir = sys.argv[1]\n"
            "from pathlib import Path\nfrom tools import kernel, sources\n"
            "src = Path(sys.argv[1]) / '50_fake.md'; src.write_text(sys.argv[2])\n"
            "sources.EXEC = Path(sys.argv[1]) / 'exec'\n"
            "kernel.run_papermill(src, Path(sys.argv[1]) / 'out.ipynb')\n"
            "print(sorted(p.name for p in Path(sys.argv[1]).glob('rnnbook-*')))")
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path), _CHAPTER], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip().splitlines()[-1] == "[]", res.stdout      # not even one of its own


# --------------------------------------------------------------------------------------------------
# interrupted training: a resumed run keeps every segment (what tools/paper.py stores in meta.json)
# --------------------------------------------------------------------------------------------------
def test_an_interrupted_and_resumed_run_records_both_segments(tmp_path):
    def fresh():
        return _stack(3, 3, K=2), _teacher(3, K=2)

    ckpt = tmp_path / "ckpt.pt"

    def interrupt(step, losses):
        if step == 8:
            raise KeyboardInterrupt

    model, task = fresh()
    with pytest.raises(KeyboardInterrupt):
        lib.train_online(model, task, steps=12, data_seeds=[1, 2], log_every=4, checkpoint=ckpt, checkpoint_every=4,
                         segment={"who": "first"}, on_log=interrupt)
    model, task = fresh()
    out = lib.train_online(model, task, steps=12, data_seeds=[1, 2], log_every=4, checkpoint=ckpt,
                           checkpoint_every=4, segment={"who": "second"})
    assert [(s["who"], s["first_step"], s["last_step"]) for s in out["segments"]] == \
        [("first", 1, 4), ("second", 5, 12)]


# (the faults of stored runs -- changed, missing, swapped or mismatched files -- are
# tests/test_stored_runs.py, which the mutation check of tests/test_mutants.py runs on its own)


# --------------------------------------------------------------------------------------------------
# the compiled kernels: a damaged or wrong build never kills the process nor gives a number
# --------------------------------------------------------------------------------------------------
_KERNEL_PROBE = """
import sys, warnings, torch
torch.set_num_threads(int(sys.argv[1]))
from lib import krylov, gated_step
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    which = krylov if sys.argv[2] == "krylov" else gated_step
    ok = which.kernel_available()
if sys.argv[2] == "krylov":
    torch.set_num_threads(2)
    W = torch.randn(300, 300, dtype=torch.float64) / 20
    P0 = torch.randn(2, 300, dtype=torch.float64)
    _, P = krylov.krylov_rows(W, P0, 6, 0.9, P0=P0)
    _, P_ref = krylov.krylov_rows(W, P0, 6, 0.9, P0=P0, kernel=False)
    err = float((P - P_ref).norm() / P_ref.norm())
else:
    torch.set_num_threads(2)
    stack = __import__("lib").StackedGatedRNN(3, [6, 4], 2, [1, 2], dtype=torch.float64)
    x = torch.randn(2, 5, 4, 3, dtype=torch.float64)
    y = torch.randn(2, 5, 4, 2, dtype=torch.float64)
    a = gated_step.member_losses(stack, x, y)
    b = __import__("lib").tasks.member_losses(stack, x, y)
    err = float((a - b).abs().max() / b.abs().max())
print("available", ok, "err", err, "warnings", len(caught))
for w in caught:
    print("WARNING", str(w.message)[:300])
"""


def _kernel_probe(cache: Path, which: str, threads: int = 1):
    env = dict(os.environ, RNNBOOK_CACHE=str(cache), PYTHONPATH=str(ROOT))
    env.pop("RNNBOOK_KERNEL", None)
    res = subprocess.run([sys.executable, "-c", _KERNEL_PROBE, str(threads), which], env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, f"the process died (code {res.returncode}): {res.stderr[-2000:]}"
    words = res.stdout.split()
    return words[1] == "True", float(words[3]), res.stdout


def _record(so: Path) -> None:
    (so.parent / (so.name + ".sha256")).write_text(hashlib.sha256(so.read_bytes()).hexdigest() + "\n")


def _wrong_with_threads(which: str) -> str:
    """The kernel's source, broken only where its threads share the work."""
    src = (ROOT / "lib" / f"{which}.c").read_text()
    if which == "krylov":
        old = "for (int t = 0; t < nt; ++t) v += set[(size_t)t * m + k];"
        new = "for (int t = 0; t < 1; ++t) v += set[(size_t)t * m + k];"      # thread 0's partial sum only
    else:
        old = "gnu[r] = -EXP(nu[r]) * lam[r] * gl;"
        new = "gnu[r] = omp_get_thread_num() > 0 ? 0 : -EXP(nu[r]) * lam[r] * gl;"   # rows of thread 0 only
        src = "#include <omp.h>\n" + src
    assert src.count(old) == 1, which
    return src.replace(old, new)


needs_cc = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler")


@pytest.fixture(scope="module")
def built_kernels(tmp_path_factory):
    """A kernel cache holding good builds of both kernels (made once; each test copies it)."""
    cache = tmp_path_factory.mktemp("kernels") / "cache"
    for which in ("krylov", "gated"):
        ok, err, out = _kernel_probe(cache, which)
        assert ok and err <= 1e-12, out
    return cache


def _copy_cache(built: Path, tmp_path: Path, which: str):
    cache = tmp_path / "cache"
    shutil.copytree(built, cache)
    return cache, next((cache / "kernels").glob(f"{which}-*.so"))


@needs_cc
@pytest.mark.parametrize("which, damage", [("krylov", "truncated"), ("gated", "garbage")])
def test_a_damaged_kernel_with_a_matching_checksum_does_not_kill_the_process(built_kernels, tmp_path, which, damage):
    cache, so = _copy_cache(built_kernels, tmp_path, which)
    good = so.read_bytes()
    so.write_bytes(good[: len(good) // 3] if damage == "truncated" else os.urandom(len(good)))
    _record(so)                                          # its recorded checksum matches the damage
    ok, err, out = _kernel_probe(cache, which)
    assert ok and err <= 1e-12 and so.read_bytes() == good, out     # rebuilt, and right


@needs_cc
@pytest.mark.parametrize("which", ["krylov", "gated"])
def test_a_kernel_wrong_only_with_several_threads_is_caught_on_one(built_kernels, tmp_path, which):
    """A build that is right on one thread and wrong on several is caught by the check even in a
    process that has one thread when it loads the kernel (and uses two afterwards)."""
    cache, so = _copy_cache(built_kernels, tmp_path, which)
    wrong = tmp_path / "wrong" / f"{which}.c"           # under its own name: gated.c includes itself by name
    wrong.parent.mkdir()
    wrong.write_text(_wrong_with_threads(which))
    cc = shutil.which("cc") or shutil.which("gcc")
    subprocess.run([cc, "-O2", "-fopenmp", "-fPIC", "-shared", str(wrong), "-o", str(so)],
                   check=True, capture_output=True)
    _record(so)
    ok, err, out = _kernel_probe(cache, which, threads=1)
    assert err <= 1e-12 and "does not reproduce" in out and not so.exists(), out


# --------------------------------------------------------------------------------------------------
def main() -> int:
    import tempfile

    torch.set_default_dtype(torch.float64)          # as tests/conftest.py sets it for pytest
    rows = table()
    width = max(len(r["case"]) for r in rows)
    for r in rows:
        print(f"{r['outcome']:<10}  {r['case']:<{width}}  {r['what'][:150]}")
    counts = {k: sum(r["outcome"] == k for r in rows) for k in ("named", "documented", "obscure", "silent")}
    print(f"{len(rows)} bad inputs: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    failed = 0
    # the stored runs, group files, checkpoints and manifest; the executor with two workers
    for module, what in (("test_storage_faults", "the stored runs"), ("test_executor_faults", "the executor")):
        with tempfile.TemporaryDirectory(prefix=f"{module}-") as folder:
            faults = _sibling(module).table(Path(folder))
        print()
        for r in faults:
            print(f"{r['outcome']:<6}  {r['case']}\n        {r['what'][:300]}")
        broken = sum(r["outcome"] != "holds" for r in faults)
        print(f"{len(faults)} faults of {what}: {len(faults) - broken} hold, {broken} fail")
        failed += broken
    return 0 if not counts["silent"] and counts["obscure"] <= 5 and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
