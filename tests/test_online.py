"""lib.online (the online trainer and its flat AdamW) and lib.gated_step (the kernel step)."""
import pytest
import torch

import lib
from lib import gated_step
from lib.online import FlatAdamW

F64 = torch.float64


def _rel(a, b):
    return float((a - b).detach().norm() / b.detach().norm().clamp_min(1e-300))


def test_flat_adamw_is_torch_adamw():
    """Same trajectory as torch.optim.AdamW (single-tensor form, two groups: decay / no decay)."""
    def fresh():
        return lib.StackedGatedRNN(3, [4, 2], 2, [1, 2], dtype=F64)

    g = torch.Generator().manual_seed(0)
    batches = [(torch.randn(2, 3, 5, 3, generator=g, dtype=F64), torch.randn(2, 3, 5, 2, generator=g, dtype=F64))
               for _ in range(30)]
    a, b = fresh(), fresh()
    decay = [p for n, p in a.named_parameters() if not n.endswith("nu_log")]
    plain = [p for n, p in a.named_parameters() if n.endswith("nu_log")]
    ref = torch.optim.AdamW([{"params": decay, "weight_decay": 1e-2}, {"params": plain, "weight_decay": 0.0}],
                            lr=1e-2, foreach=False)
    flat = FlatAdamW(b, 1e-2, ("nu_log",))
    for step, (x, y) in enumerate(batches, 1):
        lr = lib.cosine_lr(step, 30, 1e-2, 1e-4)
        for group in ref.param_groups:
            group["lr"] = lr
        ref.zero_grad()
        lib.gated_step.member_losses_reference(a, x, y).sum().backward()
        ref.step()
        flat.step(lib.gated_step.member_losses_reference(b, x, y).sum(), lr)
    for (n, p), q in zip(a.named_parameters(), b.parameters()):
        assert _rel(q, p) <= 1e-12, n


def test_flat_adamw_capturable_form_equals_eager():
    """The tensor-lr form (what a CUDA graph replays) computes the eager update."""
    a = lib.StackedGatedRNN(3, [4], 2, [1], dtype=F64)
    b = lib.StackedGatedRNN(3, [4], 2, [1], dtype=F64)
    oa, ob = FlatAdamW(a, 1e-3, ("nu_log",)), FlatAdamW(b, 1e-3, ("nu_log",), capturable=True)
    g = torch.Generator().manual_seed(1)
    for step in range(1, 11):
        x = torch.randn(1, 3, 4, 3, generator=g, dtype=F64)
        y = torch.randn(1, 3, 4, 2, generator=g, dtype=F64)
        lr = lib.cosine_lr(step, 10, 1e-2, 1e-4)
        oa.step(gated_step.member_losses_reference(a, x, y).sum(), lr)
        ob.step(gated_step.member_losses_reference(b, x, y).sum(), torch.tensor(lr, dtype=F64))
    assert _rel(ob.flat, oa.flat) <= 1e-12


needs_kernel = pytest.mark.skipif(not gated_step.kernel_available(), reason="the gated kernel is not available")


@needs_kernel
@pytest.mark.parametrize("last_only", [False, True])
@pytest.mark.parametrize("widths, T", [([7], 9), ([5, 3, 7], 6), ([1, 12], 1), ([4, 4], 17)])
def test_kernel_step_equals_autograd_step(widths, T, last_only):
    """Losses and every gradient of the kernel step equal the autograd forward's (float64, 1e-12),
    padded members included."""
    K = len(widths)
    stack = lib.StackedGatedRNN(4, widths, 3, list(range(K)), dtype=F64)
    g = torch.Generator().manual_seed(sum(widths) + T)
    x = torch.randn(K, 5, T, 4, generator=g, dtype=F64)
    y = torch.randn(K, 5, 3, generator=g, dtype=F64) if last_only else torch.randn(K, 5, T, 3, generator=g, dtype=F64)
    params = list(stack.parameters())
    fast = stack.member_losses(x, y, last_only=last_only)
    ref = gated_step.member_losses_reference(stack, x, y, last_only)
    assert _rel(fast, ref) <= 1e-12
    for name, a, b in zip([n for n, _ in stack.named_parameters()], torch.autograd.grad(fast.sum(), params),
                          torch.autograd.grad(ref.sum(), params)):
        assert _rel(a, b) <= 1e-12, name


@needs_kernel
def test_kernel_step_float32_close_to_float64():
    stack = lib.StackedGatedRNN(4, [100], 4, [0], dtype=torch.float32)
    s64 = lib.StackedGatedRNN.from_members([stack.member(0)], dtype=F64)
    task = lib.AttentionTeacherTask(*lib.lsa_teachers(4, [0]), T=32, batch=64, x_std=0.5, dtype=F64)
    x, y = task.sample([torch.Generator().manual_seed(0)])
    g32 = torch.autograd.grad(stack.member_losses(x.float(), y.float()).sum(), list(stack.parameters()))
    g64 = torch.autograd.grad(gated_step.member_losses_reference(s64, x, y).sum(), list(s64.parameters()))
    assert all(_rel(a.double(), b) <= 1e-4 for a, b in zip(g32, g64))


def test_without_kernel_the_reference_is_used(monkeypatch):
    monkeypatch.setattr(gated_step.KERNEL, "load", lambda: None)
    stack = lib.StackedGatedRNN(3, [4], 2, [0], dtype=F64)
    x, y = torch.randn(1, 2, 5, 3, dtype=F64), torch.randn(1, 2, 5, 2, dtype=F64)
    assert torch.equal(stack.member_losses(x, y), gated_step.member_losses_reference(stack, x, y))


def test_snapshots_and_segments(tmp_path):
    W = lib.lsa_teachers(3, [0, 1])
    task = lib.AttentionTeacherTask(*W, T=5, batch=3, x_std=0.5, dtype=F64)
    stack = lib.StackedGatedRNN(3, [3, 4], 3, [0, 1], dtype=F64)
    out = lib.train_online(stack, task, steps=12, data_seeds=[1, 2], log_every=4, snapshots=[3, 8],
                           segment={"code": "x"})
    assert sorted(out["snapshots"]) == [3, 8]
    assert out["segments"] == [{"code": "x", "first_step": 1, "last_step": 12, "seconds": out["segments"][0]["seconds"]}]
    assert not torch.equal(out["snapshots"][3]["W_out_m"], out["snapshots"][8]["W_out_m"])
    with pytest.raises(ValueError, match="snapshots"):
        lib.train_online(stack, task, steps=5, data_seeds=[1, 2], snapshots=[6])


def test_output_and_target_must_have_one_shape():
    """A model whose output would broadcast against the target is refused before any work."""
    W = lib.lsa_teachers(4, [0])
    task = lib.AttentionTeacherTask(*W, T=5, batch=3, x_std=0.5, dtype=F64)
    narrow = lib.ModuleStack([lib.RecurrentNet("gru", 4, 3, 1, seed=0, dtype=F64)])
    before = [p.clone() for p in narrow.parameters()]
    with pytest.raises(ValueError, match="d_out|shape"):
        lib.train_online(narrow, task, steps=3, data_seeds=[0])
    assert all(torch.equal(p, q) for p, q in zip(before, narrow.parameters()))


def test_pool_protocol_goes_through_epochs_and_resumes_exactly(tmp_path):
    """App. B.1's protocol: a fixed set of sequences in shuffled epochs; an interrupted run resumes
    where its epoch stood (bit-identical on the CPU)."""
    W = lib.lsa_teachers(3, [0, 1])

    def task():
        return lib.AttentionTeacherTask(*W, T=4, batch=3, x_std=0.5, dtype=F64, pool=7, pool_seeds=[5, 6])

    t = task()
    g = [torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)]
    seen = torch.cat([t.sample(g)[0][0] for _ in range(7)])           # 21 sequences = 3 epochs of 7
    x_pool = t._pool[0][0]
    for e in range(3):
        epoch = seen[7 * e:7 * (e + 1)]
        assert all(any(torch.equal(s, p) for p in x_pool) for s in epoch)     # drawn from the pool
        assert len({tuple(s.flatten().tolist()) for s in epoch}) == 7          # each sequence once
    y_all = t.teacher_output(x_pool[None].expand(2, -1, -1, -1))[0]
    assert torch.allclose(t._pool[1][0], y_all)
    with pytest.raises(ValueError, match="pool_seeds"):
        lib.AttentionTeacherTask(*W, T=4, batch=3, x_std=0.5, pool=7)

    def stack():
        return lib.StackedGatedRNN(3, [3, 4], 3, [0, 1], dtype=F64)

    ref = lib.train_online(stack(), task(), steps=12, data_seeds=[1, 2], lr=1e-2, log_every=3)
    ckpt = tmp_path / "c.pt"

    def stop(step, losses):
        if step == 9:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        lib.train_online(stack(), task(), steps=12, data_seeds=[1, 2], lr=1e-2, log_every=3, checkpoint=ckpt,
                         checkpoint_every=5, on_log=stop)
    out = lib.train_online(stack(), task(), steps=12, data_seeds=[1, 2], lr=1e-2, log_every=3, checkpoint=ckpt,
                           checkpoint_every=5)
    assert out["resumed_from"] == 5 and torch.equal(out["loss"], ref["loss"])
