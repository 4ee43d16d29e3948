"""Property tests over shapes and dtypes of the public entry points that train or evaluate a
model: for any combination drawn, the call either returns the documented result or raises an
error that names the argument -- never a result computed from broadcast shapes or a silently
mixed precision."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lib
from lib import architectures

F32, F64 = torch.float32, torch.float64
DTYPES = st.sampled_from([F32, F64, torch.int64, torch.complex64, torch.float16])
FLOAT = st.sampled_from([F32, F64])
ERRORS = (ValueError, TypeError)
SETTINGS = settings(max_examples=15, deadline=None)


def _raises_naming(call, *names):
    """The error of ``call``; it must name one of ``names``."""
    with pytest.raises(ERRORS) as err:
        call()
    assert any(n in str(err.value) for n in names), (names, str(err.value))


def _data(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(*shape, generator=g, dtype=F64)
    return t.round() .to(dtype) if not dtype.is_floating_point and not dtype.is_complex else t.to(dtype)


@SETTINGS
@given(n_x=st.integers(1, 3), n_y=st.integers(1, 3), dx=st.integers(1, 3), dy=st.integers(1, 3),
       N=st.integers(1, 3), T=st.integers(1, 4), model_dtype=FLOAT, data_dtype=DTYPES,
       loop=st.sampled_from(["gd", "minibatch"]))
def test_gd_loops_train_the_documented_objective_or_name_the_argument(n_x, n_y, dx, dy, N, T, model_dtype,
                                                                     data_dtype, loop):
    model = lib.LinearRNN(4, n_x, n_y, 0.5, 1.0, 1.0, seed=0, dtype=model_dtype)
    x, y = _data((N, T, dx), data_dtype), _data((N, T, dy), data_dtype, 1)
    # as documented, integer data are read as float64 (lib._checks.as_tensor); nothing else converts
    effective = F64 if not (data_dtype.is_floating_point or data_dtype.is_complex) else data_dtype
    train = (lambda: lib.train_gd(model, x, y, lr=1e-3, steps=2)) if loop == "gd" else \
        (lambda: lib.train_minibatch(model, x, y, lr=1e-3, epochs=1, batch_size=2))
    if dx == n_x and dy == n_y and effective == model_dtype:
        out = train()
        if loop == "gd":
            assert out["train"].shape == (3,) and torch.isfinite(out["train"]).all()
    else:
        _raises_naming(train, "x", "y")


@SETTINGS
@given(d_in=st.integers(1, 3), d_out=st.integers(1, 3), dx=st.integers(1, 3), dy=st.integers(1, 3),
       last=st.booleans(), model_dtype=FLOAT, data_dtype=DTYPES)
def test_train_adamw_trains_the_documented_objective_or_names_the_argument(d_in, d_out, dx, dy, last, model_dtype,
                                                                          data_dtype):
    model = lib.GatedLinearRNN(d_in, 3, d_out, dtype=model_dtype)
    x, y = _data((2, 4, dx), data_dtype), _data((2, 4, dy), data_dtype, 1)
    if last:
        y = y[:, -1]
    train = lambda: lib.train_adamw(model, lambda g: (x, y), steps=2, log_every=1)  # noqa: E731
    if dx == d_in and dy == d_out and data_dtype == model_dtype and not last:
        out = train()
        assert out["loss"].shape == (2,) and torch.isfinite(out["loss"]).all()
    else:
        _raises_naming(train, "x", "y", "shape")


@SETTINGS
@given(d_in=st.integers(1, 4), d_out=st.integers(1, 4), K=st.integers(1, 2), K_task=st.integers(1, 2),
       d=st.integers(1, 4), kind=st.sampled_from(["gated", "gru", "lru"]), task_kind=st.sampled_from(["teacher", "icl"]),
       model_dtype=FLOAT, task_dtype=FLOAT)
def test_train_online_trains_the_documented_objective_or_names_the_mismatch(d_in, d_out, K, K_task, d, kind,
                                                                           task_kind, model_dtype, task_dtype):
    model = architectures.build(kind, 1, d_in, [3] * K, d_out, list(range(K)), dtype=model_dtype)
    if task_kind == "teacher":
        task = lib.AttentionTeacherTask(*lib.lsa_teachers(d, list(range(K_task))), T=3, batch=2, x_std=0.5,
                                        dtype=task_dtype)
    else:
        task = lib.ICLTask(K=K_task, T=3, d_x=d, d_y=1, batch=2, dtype=task_dtype)
    train = lambda: lib.train_online(model, task, steps=2, data_seeds=list(range(K)), log_every=1)  # noqa: E731
    if (task.d_in, task.d_out, task.K, task.dtype) == (d_in, d_out, K, model_dtype):
        out = train()
        assert out["loss"].shape == (2, K) and torch.isfinite(out["loss"]).all()
    else:
        _raises_naming(train, "d_in", "d_out", "members", "dtype")


@SETTINGS
@given(ndim=st.integers(2, 5), last=st.integers(1, 4), K=st.integers(1, 3), dtype=DTYPES, model_dtype=FLOAT,
       which=st.sampled_from(["gated", "gru", "lstm"]))
def test_stack_forward_gives_the_documented_shape_or_names_x(ndim, last, K, dtype, model_dtype, which):
    model = architectures.build(which, 1, 2, [3, 3], 2, [0, 1], dtype=model_dtype)
    shape = (K, 2, 3, last)[-ndim:] if ndim <= 4 else (1, K, 2, 3, last)
    x = _data(shape, dtype)
    if ndim == 4 and K == 2 and last == 2 and dtype == model_dtype:
        assert model(x).shape == (2, 2, 3, 2) and model(x, last_only=True).shape == (2, 2, 2)
    else:
        _raises_naming(lambda: model(x), "x")


@SETTINGS
@given(ndim=st.integers(1, 4), last=st.integers(1, 4), dtype=DTYPES, model_dtype=FLOAT,
       which=st.sampled_from(["GatedLinearRNN", "LinearRNN", "RecurrentNet"]))
def test_model_forward_gives_the_documented_shape_or_names_x(ndim, last, dtype, model_dtype, which):
    model = {"GatedLinearRNN": lambda: lib.GatedLinearRNN(2, 3, 2, dtype=model_dtype),
             "LinearRNN": lambda: lib.LinearRNN(4, 2, 2, 0.5, 1.0, 1.0, dtype=model_dtype),
             "RecurrentNet": lambda: lib.RecurrentNet("lstm", 2, 3, 2, dtype=model_dtype)}[which]()
    x = _data((2, 3, last)[-ndim:] if ndim <= 3 else (1, 2, 3, last), dtype)
    # GatedLinearRNN and LinearRNN read any real x in their own dtype (documented); RecurrentNet
    # (a torch module inside) takes x in its own dtype only
    casts = which != "RecurrentNet" and not dtype.is_complex
    if ndim == 3 and last == 2 and (dtype == model_dtype or casts):
        y = model(x)
        assert y.shape == (2, 3, 2) and y.dtype == model_dtype
    else:
        _raises_naming(lambda: model(x), "x")


@SETTINGS
@given(dtype=DTYPES, which=st.sampled_from(["teacher", "icl", "icl_batch"]), K=st.integers(1, 3))
def test_tasks_draw_in_a_float_dtype_or_name_it(dtype, which, K):
    def make():
        if which == "teacher":
            task = lib.AttentionTeacherTask(*lib.lsa_teachers(2, list(range(K))), T=3, batch=2, x_std=1.0, dtype=dtype)
        elif which == "icl":
            task = lib.ICLTask(K=K, T=3, d_x=2, d_y=1, batch=2, dtype=dtype)
        else:
            return lib.icl_batch(2, 3, 2, 1, generator=torch.Generator().manual_seed(0), dtype=dtype)
        return task.sample([torch.Generator().manual_seed(k) for k in range(K)])

    if dtype in (F32, F64, torch.float16):
        x, y = make()
        assert x.dtype == y.dtype == dtype and torch.isfinite(x).all() and x.abs().sum() > 0
    else:
        _raises_naming(make, "dtype")
