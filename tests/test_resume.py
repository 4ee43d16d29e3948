"""A run of lib.train_online that is interrupted and resumed from its checkpoint ends where the
uninterrupted run ends, bit for bit, for every architecture of the registry, in float32 on the
CPU as the stored runs train (the hand-written step and its C kernel where it applies); and a
checkpoint written by the code that trained the stored runs in progress (commit 9861af8,
``tests/data/checkpoint_9861af8.pt``) resumes under this code and ends where this code's
uninterrupted run ends."""
from pathlib import Path

import pytest
import torch

import lib
from lib import architectures
from tests.helpers import rel_err, stop_at

DATA = Path(__file__).resolve().parent / "data"
CASES = [(kind, layers, init) for kind, arch in architectures.ARCHITECTURES.items() for layers in arch.layers
         for init in (architectures.INITS if kind == "gated" else ["uniform"])]


@pytest.fixture(autouse=True)
def one_thread():
    """One thread, as the stored runs train (a process a core); the suite's setting restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _task(name):
    if name == "teacher":
        return lib.AttentionTeacherTask(*lib.lsa_teachers(4, [101, 102]), T=8, batch=8, x_std=0.5)
    return lib.ICLTask(K=2, T=6, d_x=3, d_y=3, batch=8)


def _setup(kind, layers, init, task_name):
    task = _task(task_name)
    return architectures.build(kind, layers, task.d_in, [6, 5], task.d_out, [1, 2], init=init), task


def _interrupted_then_resumed(fresh, tmp_path, **kw):
    """The run stopped after its log point at step 8 (its last checkpoint: step 5), then resumed
    in a fresh model and task, as a new process would."""
    ckpt = tmp_path / "ckpt.pt"
    model, task = fresh()
    with pytest.raises(KeyboardInterrupt):
        lib.train_online(model, task, checkpoint=ckpt, on_log=stop_at(8), **kw)
    assert torch.load(ckpt, weights_only=True)["step"] == 5
    model, task = fresh()
    return model, lib.train_online(model, task, checkpoint=ckpt, **kw)


def _same_run(model, out, ref_model, ref, rtol=0.0, loss_rtol=0.0):
    """The resumed run ends where the reference ends: bit for bit (``rtol``, ``loss_rtol`` 0), or
    within those relative errors (a checkpoint whose first steps another CPU kind computed)."""
    same = (torch.equal if rtol == 0 else lambda a, b: rel_err(a, b) <= rtol)
    same_loss = (torch.equal if loss_rtol == 0 else lambda a, b: rel_err(a, b) <= loss_rtol)
    assert out["resumed_from"] == 5
    assert all(same(a, b) for a, b in zip(model.state_dict().values(), ref_model.state_dict().values()))
    assert same_loss(out["loss"], ref["loss"]) and torch.equal(out["step"], ref["step"])
    assert sorted(out["snapshots"]) == sorted(ref["snapshots"])
    for s in ref["snapshots"]:
        assert all(same(out["snapshots"][s][k], v) for k, v in ref["snapshots"][s].items())


@pytest.mark.parametrize("task_name", ["teacher", "icl"])
@pytest.mark.parametrize("kind, layers, init", CASES, ids=[f"{k}-{n}-{i}" for k, n, i in CASES])
def test_every_architecture_resumes_bit_identical(kind, layers, init, task_name, tmp_path):
    kw = dict(steps=12, data_seeds=[11, 12], lr=1e-2, lr_min=1e-4, log_every=4, checkpoint_every=5,
              snapshots=[3, 11])
    ref_model, task = _setup(kind, layers, init, task_name)
    ref = lib.train_online(ref_model, task, **kw)
    model, out = _interrupted_then_resumed(lambda: _setup(kind, layers, init, task_name), tmp_path, **kw)
    _same_run(model, out, ref_model, ref)


def test_a_checkpoint_of_the_stored_runs_code_resumes(tmp_path):
    """The checkpoint was written by 9861af8's code (a gated group, float32, the LRU ring
    initialisation, bound to its group as ``make paper`` binds it) after 5 of 12 steps, on an AMD
    EPYC; resumed here it must be accepted (same settings, same state keys) and end as this code's
    uninterrupted run ends: bit for bit on that CPU kind, and elsewhere within float32 round-off
    grown over 12 steps (1e-5 relative), because the C kernels are built for the machine
    (-march=native) and another CPU kind rounds the first 5 steps' multiply-adds differently."""
    binding = {"run": "fixture", "group": 0, "kind": "gated", "layers": 1, "widths": [6, 5], "seeds": [1, 2],
               "data_seeds": [1001, 1002], "pool": None, "init": "lru_ring"}
    kw = dict(steps=12, data_seeds=[1001, 1002], lr=1e-2, lr_min=1e-4, log_every=4, checkpoint_every=5,
              snapshots=[3, 11], binding=binding)

    def fresh():
        return _setup("gated", 1, "lru_ring", "teacher")

    ref_model, task = fresh()
    ref = lib.train_online(ref_model, task, **kw)
    ckpt = tmp_path / "ckpt.pt"
    ckpt.write_bytes((DATA / "checkpoint_9861af8.pt").read_bytes())
    model, task = fresh()
    out = lib.train_online(model, task, checkpoint=ckpt, segment={"code": "now"}, **kw)
    exact = all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), ref_model.state_dict().values()))
    # the logged loss of the first block is the writer's (its mean was summed on the writer's CPU)
    _same_run(model, out, ref_model, ref, rtol=0.0 if exact else 1e-5,
              loss_rtol=0.0 if torch.equal(out["loss"], ref["loss"]) else 1e-5)
    assert [s["code"] for s in out["segments"]] == ["9861af8", "now"]
