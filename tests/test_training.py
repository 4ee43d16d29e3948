"""lib.training: the gradient-descent loops (mini-batch against full batch), the shared
argument checks of every loop, the scores (R^2) and early stopping by validation."""
import numpy as np
import pytest
import torch

import lib
from tests.helpers import rel_err


# ----------------------------------------------------------------------------- mini-batch GD

def test_minibatch_with_one_batch_is_full_batch_gd(tiny_xy):
    x, y = tiny_xy
    r = lib.rho(6, 0.3, 1.0, 1.0)
    a = lib.ScaledConv(r, 2, 1, seed=1)
    b = lib.ScaledConv(r, 2, 1, seed=1)
    lib.train_gd(a, x, y, lr=1e-2, steps=20)
    lib.train_minibatch(b, x, y, lr=1e-2, epochs=20, batch_size=100, seed=4)
    assert rel_err(b.taps().detach(), a.taps().detach()) < 1e-10


def test_minibatch_deterministic_and_evaluates(tiny_xy):
    x, y = tiny_xy
    r = torch.ones(6)
    runs = []
    for _ in range(2):
        m = lib.ScaledConv(r, 2, 1, seed=1)
        h = lib.train_minibatch(m, x, y, lr=1e-2, epochs=3, batch_size=3, seed=9,
                                evaluate=lambda e, mm: e)
        runs.append(m.taps().detach())
        assert h == [0, 1, 2, 3]
    assert torch.equal(runs[0], runs[1])


def test_minibatch_bad_input(tiny_xy):
    x, y = tiny_xy
    m = lib.ScaledConv(torch.ones(6), 2, 1)
    with pytest.raises(ValueError, match="lr"):
        lib.train_minibatch(m, x, y, lr=-1.0, epochs=1)
    with pytest.raises(ValueError, match="loss"):
        lib.train_minibatch(m, x, y, lr=1e-3, epochs=1, loss="l1")
    with pytest.raises(ValueError, match="batch_size"):
        lib.train_minibatch(m, x, y, lr=1e-3, epochs=1, batch_size=0)
    with pytest.raises(ValueError, match="same N and T"):
        lib.train_minibatch(m, x, y[:3], lr=1e-3, epochs=1)


def test_gd_loops_share_their_checks(tiny_xy):
    """Both GD loops reject the same bad arguments with the same messages, before any work."""
    x, y = tiny_xy
    m = lib.ScaledConv(torch.ones(6), 2, 1)
    calls = {"train_gd": lambda **kw: lib.train_gd(m, steps=1, **kw),
             "train_minibatch": lambda **kw: lib.train_minibatch(m, epochs=1, **kw)}
    seen = []
    for call in calls.values():
        messages = []
        for kw, exc in ((dict(x=x, y=y[:3], lr=1e-3), ValueError), (dict(x=x, y=y, lr=1e-3, loss="l1"), ValueError),
                        (dict(x=x, y=y, lr=0.0), ValueError), (dict(x=x[0], y=y, lr=1e-3), ValueError)):
            with pytest.raises(exc) as err:
                call(**kw)
            messages.append(str(err.value))
        seen.append(messages)
    assert seen[0] == seen[1]
    # the loss kind is checked before the callback sees the model
    with pytest.raises(ValueError, match="loss"):
        lib.train_gd(m, x, y, lr=1e-3, steps=1, loss="l1", callback=lambda s, mm: pytest.fail("callback ran"))


# ----------------------------------------------------------------------------- AdamW

def _adamw_batch(g):
    x = torch.randn(8, 5, 2, generator=g)
    return x, x.cumsum(1)[..., :1]


def test_train_adamw_history_is_that_of_train_online():
    m = lib.GatedLinearRNN(2, 4, 1, seed=0)
    h = lib.train_adamw(m, _adamw_batch, steps=25, lr=1e-2, log_every=10, no_decay="nu_log")
    assert h["step"].tolist() == [10, 20, 25] and h["step"].dtype == torch.long
    assert h["loss"].shape == (3,) and h["loss"].dtype == torch.float64
    again = lib.train_adamw(lib.GatedLinearRNN(2, 4, 1, seed=0), _adamw_batch, steps=25, lr=1e-2,
                            log_every=10, no_decay=("nu_log",))
    assert torch.equal(again["loss"], h["loss"])          # no_decay as a string or a tuple
    assert h["loss"][-1] < h["loss"][0]


@pytest.mark.parametrize("kw, exc, match", [
    (dict(lr=1e-3, lr_min=1e-2), ValueError, "lr_min"),
    (dict(weight_decay=1.0), ValueError, "weight_decay"),
    (dict(weight_decay=-1e-4), ValueError, "weight_decay"),
    (dict(seed=1.0), TypeError, "seed"),
    (dict(log_every=0), ValueError, "log_every"),
])
def test_adamw_loops_share_their_checks(kw, exc, match):
    with pytest.raises(exc, match=match):
        lib.train_adamw(lib.GatedLinearRNN(2, 4, 1), _adamw_batch, steps=3, **kw)
    if "seed" not in kw:
        stack = lib.StackedGatedRNN(2, [4], 1, [0], dtype=torch.float64)
        task = lib.ICLTask(K=1, T=3, d_x=1, d_y=1, batch=2, dtype=torch.float64)
        with pytest.raises(exc, match=match):
            lib.train_online(stack, task, steps=3, data_seeds=[0], **kw)


# ----------------------------------------------------------------------------- R^2

def test_r2_known_cases():
    y = torch.tensor([[1.0], [2.0], [3.0], [4.0]])
    assert float(lib.r2_score(y, y)[0]) == 1.0
    assert float(lib.r2_score(torch.full_like(y, 2.5), y)[0]) == pytest.approx(0.0, abs=1e-15)
    yhat = torch.tensor([[1.0], [2.0], [3.0], [5.0]])  # SSE 1, SST 5
    assert float(lib.r2_score(yhat, y)[0]) == pytest.approx(0.8, rel=1e-14)
    # per channel, over samples and times
    y3 = torch.randn(4, 5, 2, generator=torch.Generator().manual_seed(0))
    p3 = y3 + 0.1
    r = lib.r2_score(p3, y3)
    for c in range(2):
        yc = y3[..., c].reshape(-1)
        want = 1 - 0.01 * yc.numel() / float(((yc - yc.mean()) ** 2).sum())
        assert float(r[c]) == pytest.approx(want, rel=1e-12)


def test_r2_bad_input():
    y = torch.randn(4, 2)
    with pytest.raises(ValueError, match="shape"):
        lib.r2_score(torch.randn(4, 3), y)
    with pytest.raises(ValueError, match="constant"):
        lib.r2_score(y, torch.ones(4, 2))
    with pytest.raises(ValueError, match="dimensions"):
        lib.r2_score(torch.randn(4), torch.randn(4))


# ----------------------------------------------------------------------------- select_by_validation

def test_select_by_validation_picks_best_mean_and_first_tie():
    val = np.array([[0.1, 0.3], [0.5, 0.1], [0.4, 0.4], [0.2, 0.6], [0.6, 0.2]])
    test = np.arange(10.0).reshape(5, 2)
    i, t = lib.select_by_validation(val, test)
    # means 0.2, 0.3, 0.4, 0.4, 0.4: the first of the three maxima
    assert i == 2 and np.array_equal(t, test[2])
    i1, t1 = lib.select_by_validation(val[:, 0], test[:, 0])
    assert i1 == 4 and t1 == test[4, 0]


def test_select_by_validation_ignores_test_scores():
    val = np.array([0.0, 1.0, 0.5])
    assert lib.select_by_validation(val, np.array([9.0, -9.0, 9.0]))[0] == 1


@pytest.mark.parametrize("val, test, match", [
    (np.zeros((0, 2)), np.zeros((0, 2)), "val"),
    (np.zeros((3, 2, 2)), np.zeros(3), "val"),
    (np.zeros(3), np.zeros(4), "test"),
    (np.array([0.0, np.nan]), np.zeros(2), "finite"),
])
def test_select_by_validation_bad_input(val, test, match):
    with pytest.raises(ValueError, match=match):
        lib.select_by_validation(val, test)
