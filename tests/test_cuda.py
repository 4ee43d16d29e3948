"""The CUDA path of the Part III trainer: the captured step (one CUDA graph a step) against the
eager step and against the CPU step, and a captured run interrupted and resumed.  Skipped where
no CUDA device is present (the book builds and tests on a CPU); run on a GPU machine with
``pytest tests/test_cuda.py``."""
import pytest
import torch

import lib
from tools import paper
from tests.helpers import rel_err

F64 = torch.float64
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _case(kind, device):
    if kind == "gated":
        W = lib.lsa_teachers(3, [0, 1])
        task = lib.AttentionTeacherTask(*W, T=6, batch=4, x_std=0.5, dtype=F64)
        model = lib.StackedGatedRNN(3, [6, 4], 3, [0, 1], dtype=F64)
    else:
        task = lib.ICLTask(K=2, T=5, d_x=2, d_y=2, batch=4, dtype=F64)
        layers = 2 if kind.startswith("lru") else 1
        model = lib.ModuleStack([lib.RecurrentNet(kind, 4, w, 2, layers=layers, seed=w, dtype=F64) for w in (5, 8)])
    return lib.tasks.FixedBatch(task, device), model.to(device)


@pytest.mark.parametrize("kind", ["gated", "lru", "lru_in_out", "lru_in_skip", "lstm", "gru"])
def test_captured_step_equals_eager_and_cpu_step(kind):
    """Six AdamW steps on one fixed batch: the captured CUDA step, the eager CUDA step and the CPU
    step give the same losses and weights (float64, 1e-10: the same arithmetic up to rounding,
    which AdamW's division by the root of the second moment passes on)."""
    runs = {}
    for name, device, capture in (("captured", "cuda", "auto"), ("eager", "cuda", False), ("cpu", "cpu", "auto")):
        task, model = _case(kind, device)
        out = lib.train_online(model, task, steps=6, data_seeds=[1, 2], log_every=2, capture=capture)
        runs[name] = (out, [p.detach().cpu() for p in model.parameters()])
    assert runs["captured"][0]["captured"] and not runs["eager"][0]["captured"]
    for other in ("eager", "cpu"):
        assert rel_err(runs["captured"][0]["loss"], runs[other][0]["loss"]) <= 1e-10, other
        for a, b in zip(runs["captured"][1], runs[other][1]):
            assert rel_err(a, b) <= 1e-10, other


def test_captured_run_resumes_where_it_stopped(tmp_path):
    """A captured run on the teacher task (fresh data at every step from the device generator)
    interrupted after 15 of 20 steps resumes from its checkpoint at step 10 and ends where the
    uninterrupted run ends, bit for bit: the generator's state travels in the checkpoint."""
    W = lib.lsa_teachers(3, [0, 1])

    def train(**kw):
        task = lib.AttentionTeacherTask(*W, T=6, batch=4, x_std=0.5, dtype=F64, device="cuda")
        model = lib.StackedGatedRNN(3, [6, 4], 3, [0, 1], dtype=F64).cuda()
        out = lib.train_online(model, task, steps=20, data_seeds=[1, 2], log_every=5, **kw)
        return out, model

    def stop(step, losses):
        if step == 15:
            raise KeyboardInterrupt

    whole, m_whole = train()
    ckpt = tmp_path / "run.pt"
    with pytest.raises(KeyboardInterrupt):
        train(checkpoint=ckpt, checkpoint_every=10, on_log=stop)
    resumed, m_res = train(checkpoint=ckpt, checkpoint_every=10)
    assert resumed["resumed_from"] == 10 and resumed["captured"] and whole["captured"]
    assert torch.equal(resumed["loss"], whole["loss"])
    for a, b in zip(m_res.parameters(), m_whole.parameters()):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="captured CUDA run"):          # not resumable on the CPU
        task = lib.AttentionTeacherTask(*W, T=6, batch=4, x_std=0.5, dtype=F64)
        lib.train_online(lib.StackedGatedRNN(3, [6, 4], 3, [0, 1], dtype=F64), task, steps=20,
                         data_seeds=[1, 2], log_every=5, checkpoint=ckpt, checkpoint_every=10)


@pytest.mark.parametrize("group", [0, 4, 7])
def test_paper_run_group_on_cuda(tmp_path, group):
    """``python -m tools.paper run arch_teacher --device cuda`` trains a group with the captured
    step (gated RNN, LRU In+Out 2 layers, LSTM 2 layers) and writes a finished group file."""
    done = paper.run_group(paper.Run.of("arch_teacher", tmp_path), group, steps=40, device="cuda", log_every=20)
    part = torch.load(done, map_location="cpu", weights_only=True)
    assert part["captured"] and part["steps"] == 40
    assert torch.isfinite(part["history"]["loss"]).all()
    assert part["segments"][0]["device"] == torch.cuda.get_device_name()


def test_cuda_device_with_and_without_index_is_one_device():
    """The trainer takes a task on "cuda" and a model on "cuda:0" (the current device) as one."""
    from lib.online import _same_device
    here = torch.cuda.current_device()
    assert _same_device("cuda", f"cuda:{here}") and _same_device(f"cuda:{here}", "cuda")
    assert not _same_device("cuda", "cpu") and _same_device("cpu", "cpu")
