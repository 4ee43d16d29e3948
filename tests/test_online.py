"""lib.online (the online trainer and its flat AdamW) and lib.gated_step (the kernel step)."""
import pytest
import torch

import lib
from lib import gated_step, recurrent_step
from lib.online import FlatAdamW
from lib.tasks import member_losses
from tests.helpers import rel_err

F64 = torch.float64


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
        member_losses(a, x, y).sum().backward()
        ref.step()
        flat.step(member_losses(b, x, y).sum(), lr)
    for (n, p), q in zip(a.named_parameters(), b.parameters()):
        assert rel_err(q, p) <= 1e-12, n


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
        oa.step(member_losses(a, x, y).sum(), lr)
        ob.step(member_losses(b, x, y).sum(), torch.tensor(lr, dtype=F64))
    assert rel_err(ob.flat, oa.flat) <= 1e-12


needs_kernel = pytest.mark.skipif(not gated_step.kernel_available(), reason="the gated kernel is not available")


@needs_kernel
@pytest.mark.parametrize("last_only", [False, True])
@pytest.mark.parametrize("widths, T, B, d", [([7], 9, 5, 4), ([5, 3, 7], 6, 5, 4), ([1, 12], 1, 5, 4),
                                              ([4, 4], 17, 5, 4), ([6, 2], 5, 37, 4), ([3], 4, 16, 6),
                                              ([5], 3, 9, 9), ([2, 3], 41, 64, 2)])
def test_kernel_step_equals_autograd_step(widths, T, B, d, last_only):
    """Losses and every gradient of the kernel step equal the autograd forward's (float64, 1e-12),
    padded members included; batches that fill whole SIMD vectors and leave tails (B = 5, 9, 16,
    37, 64), an input width past the unrolled cases (d + 1 = 10), and T B = 2624 columns (two
    readout blocks)."""
    K = len(widths)
    stack = lib.StackedGatedRNN(d, widths, 3, list(range(K)), dtype=F64)
    g = torch.Generator().manual_seed(sum(widths) + T)
    x = torch.randn(K, B, T, d, generator=g, dtype=F64)
    y = torch.randn(K, B, 3, generator=g, dtype=F64) if last_only else torch.randn(K, B, T, 3, generator=g, dtype=F64)
    params = list(stack.parameters())
    fast = gated_step.member_losses(stack, x, y, last_only=last_only)
    ref = member_losses(stack, x, y, last_only)
    assert rel_err(fast, ref) <= 1e-12
    for name, a, b in zip([n for n, _ in stack.named_parameters()], torch.autograd.grad(fast.sum(), params),
                          torch.autograd.grad(ref.sum(), params)):
        assert rel_err(a, b) <= 1e-12, name


@needs_kernel
@pytest.mark.parametrize("last_only", [False, True])
def test_losses_into_grad_is_the_autograd_step(last_only):
    """The step without autograd (what train_online takes) writes into .grad the gradient of the
    losses' sum -- replacing what was there, allocating it where there was none -- and returns the
    losses: both as the autograd reference's (float64, 1e-12)."""
    stack = lib.StackedGatedRNN(4, [6, 9, 3], 3, [0, 1, 2], dtype=F64)
    g = torch.Generator().manual_seed(4)
    x = torch.randn(3, 19, 7, 4, generator=g, dtype=F64)
    y = torch.randn(3, 19, 3, generator=g, dtype=F64) if last_only else torch.randn(3, 19, 7, 3, generator=g, dtype=F64)
    ref = member_losses(stack, x, y, last_only)
    g_ref = torch.autograd.grad(ref.sum(), list(stack.parameters()))
    stack.W_in_m.grad = torch.full_like(stack.W_in_m, 7.0)            # stale: must be replaced
    losses = gated_step.losses_into_grad(stack, x, y, last_only)
    assert not losses.requires_grad and rel_err(losses, ref) <= 1e-12
    for (name, p), b in zip(stack.named_parameters(), g_ref):
        assert rel_err(p.grad, b) <= 1e-12, name


def test_losses_into_grad_declines_where_the_kernel_does_not_apply(monkeypatch):
    monkeypatch.setattr(gated_step.KERNEL, "load", lambda: None)
    stack = lib.StackedGatedRNN(3, [4], 2, [0], dtype=F64)
    assert gated_step.losses_into_grad(stack, torch.randn(1, 2, 5, 3, dtype=F64),
                                      torch.randn(1, 2, 5, 2, dtype=F64)) is None
    assert all(p.grad is None for p in stack.parameters())


def test_flat_adamw_eager_form_equals_fused_kernel():
    """The written-out update (the fallback where torch has no fused CPU AdamW) and torch's fused
    kernel give the same trajectory (float64, 1e-12)."""
    a = lib.StackedGatedRNN(3, [4, 2], 2, [1, 2], dtype=F64)
    b = lib.StackedGatedRNN(3, [4, 2], 2, [1, 2], dtype=F64)
    oa, ob = FlatAdamW(a, 1e-2, ("nu_log",)), FlatAdamW(b, 1e-2, ("nu_log",))
    ob._fused = None
    g = torch.Generator().manual_seed(2)
    for step in range(1, 21):
        x = torch.randn(2, 3, 4, 3, generator=g, dtype=F64)
        y = torch.randn(2, 3, 4, 2, generator=g, dtype=F64)
        lr = lib.cosine_lr(step, 20, 1e-2, 1e-4)
        oa.step(member_losses(a, x, y).sum(), lr)
        ob.step(member_losses(b, x, y).sum(), lr)
    assert oa._fused is not None or not hasattr(torch, "_fused_adamw_")
    assert rel_err(ob.flat, oa.flat) <= 1e-12 and rel_err(ob.exp_avg_sq, oa.exp_avg_sq) <= 1e-12


def test_teacher_output_is_causal_linear_self_attention():
    """The task's one-product teacher equals each member's lib.LinearSelfAttention (float64)."""
    W = lib.lsa_teachers(3, [0, 1])
    task = lib.AttentionTeacherTask(*W, T=6, batch=4, x_std=0.5, dtype=F64)
    x, y = task.sample([torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)])
    for k in range(2):
        ref = lib.LinearSelfAttention(W[0][k], W[1][k], W[2][k])(x[k])
        assert rel_err(y[k], ref) <= 1e-12


@needs_kernel
def test_kernel_step_float32_close_to_float64():
    stack = lib.StackedGatedRNN(4, [100], 4, [0], dtype=torch.float32)
    s64 = lib.StackedGatedRNN.from_members([stack.member(0)], dtype=F64)
    task = lib.AttentionTeacherTask(*lib.lsa_teachers(4, [0]), T=32, batch=64, x_std=0.5, dtype=F64)
    x, y = task.sample([torch.Generator().manual_seed(0)])
    g32 = torch.autograd.grad(gated_step.member_losses(stack, x.float(), y.float()).sum(), list(stack.parameters()))
    g64 = torch.autograd.grad(member_losses(s64, x, y).sum(), list(s64.parameters()))
    assert all(rel_err(a.double(), b) <= 1e-4 for a, b in zip(g32, g64))


def test_without_kernel_the_reference_is_used(monkeypatch):
    monkeypatch.setattr(gated_step.KERNEL, "load", lambda: None)
    stack = lib.StackedGatedRNN(3, [4], 2, [0], dtype=F64)
    x, y = torch.randn(1, 2, 5, 3, dtype=F64), torch.randn(1, 2, 5, 2, dtype=F64)
    assert torch.equal(gated_step.member_losses(stack, x, y), member_losses(stack, x, y))


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


lru_kernel = pytest.mark.skipif(not recurrent_step.kernel_available(), reason="the LRU kernel is not available")


@lru_kernel
@pytest.mark.parametrize("kind", ["lru", "lru_in_out", "lru_in_skip", "lstm", "gru"])
@pytest.mark.parametrize("layers, width, T, last_only, B", [(1, 5, 7, True, 6), (2, 12, 4, False, 6),
                                                            (2, 9, 1, True, 6), (1, 19, 13, False, 6),
                                                            (2, 33, 3, False, 15)])
def test_recurrent_step_equals_autograd(kind, layers, width, T, last_only, B):
    """The hand-written step of lib.recurrent_step gives the loss and every gradient of autograd
    through the network's forward (float64, 1e-12); widths that fill SIMD vectors and leave tails,
    batches of 6 and 15 rows (the recurrent GEMM's tiles of eight or six rows, four, two and one)."""
    net = lib.RecurrentNet(kind, 4, width, 3, layers=layers, seed=width + T, dtype=F64)
    g = torch.Generator().manual_seed(T)
    x = torch.randn(B, T, 4, generator=g, dtype=F64)
    y = torch.randn(B, 3, generator=g, dtype=F64) if last_only else torch.randn(B, T, 3, generator=g, dtype=F64)
    out = net.forward_unchecked(x)
    ref = 0.5 * ((out[:, -1] if last_only else out) - y).square().mean()
    g_ref = torch.autograd.grad(ref, list(net.parameters()))
    grads = {p: torch.full_like(p, 3.0) for p in net.parameters()}
    loss = recurrent_step.net_step(recurrent_step.KERNEL.typed(F64), net, x, y, last_only, grads.__getitem__)
    assert rel_err(loss, ref) <= 1e-12
    for (name, p), b in zip(net.named_parameters(), g_ref):
        assert rel_err(grads[p], b) <= 1e-12, name


@lru_kernel
def test_module_stack_step_mixes_lru_and_autograd_members():
    """The ModuleStack step (recurrent_step.losses_into_grad): the networks of lib.recurrent_step by
    the kernel step, another
    module by autograd; every .grad replaced by the gradient of the losses' sum, as autograd
    through the stack gives."""

    class Plain(torch.nn.Module):
        d_in, d_out = 4, 2                       # a stack's members declare their sides

        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 2, dtype=F64)

        def forward(self, x):
            return torch.tanh(self.lin(x)).cumsum(1)

    torch.manual_seed(0)
    stack = lib.ModuleStack([lib.RecurrentNet("lru_in_out", 4, 6, 2, layers=2, seed=1, dtype=F64), Plain(),
                             lib.RecurrentNet("gru", 4, 5, 2, seed=2, dtype=F64)])
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(3, 5, 6, 4, generator=g, dtype=F64), torch.randn(3, 5, 2, generator=g, dtype=F64)
    ref = 0.5 * (stack(x, last_only=True) - y).square().flatten(1).mean(dim=1)
    g_ref = torch.autograd.grad(ref.sum(), list(stack.parameters()))
    for p in stack.parameters():
        p.grad = torch.full_like(p, 5.0)
    losses = recurrent_step.losses_into_grad(stack, x, y, last_only=True)
    assert rel_err(losses, ref) <= 1e-12
    for (name, p), b in zip(stack.named_parameters(), g_ref):
        assert rel_err(p.grad, b) <= 1e-12, name
    plain_only = lib.ModuleStack([Plain()])
    assert recurrent_step.losses_into_grad(plain_only, x[:1], y[:1], last_only=True) is None


@lru_kernel
@pytest.mark.parametrize("kind", ["lru_in_out", "lstm", "gru"])
def test_recurrent_step_float32_close_to_float64(kind):
    """In float32 (sigmoid and tanh from a vectorised exp, libm's accuracy) the step's gradients are
    as close to the float64 reference as torch's own float32 step (both about 1e-6)."""
    net = lib.RecurrentNet(kind, 6, 32, 3, layers=2, seed=4, dtype=torch.float32)
    net64 = lib.RecurrentNet(kind, 6, 32, 3, layers=2, seed=4, dtype=F64)
    net64.load_state_dict({k: v.double() for k, v in net.state_dict().items()})
    x, y = lib.ICLTask(K=1, T=12, d_x=3, d_y=3, batch=64, dtype=F64).sample([torch.Generator().manual_seed(1)])
    out = net64.forward_unchecked(x[0])
    g64 = torch.autograd.grad(0.5 * (out[:, -1] - y[0]).square().mean(), list(net64.parameters()))
    grads = {p: torch.empty_like(p) for p in net.parameters()}
    recurrent_step.net_step(recurrent_step.KERNEL.typed(torch.float32), net, x[0].float(), y[0].float(), True,
                            grads.__getitem__)
    assert all(rel_err(grads[p].double(), b) <= 1e-5 for p, b in zip(net.parameters(), g64))


@lru_kernel
@needs_kernel
@pytest.mark.parametrize("kind", ["gated", "lru_in_out", "lstm"])
def test_train_online_fast_engine_follows_the_autograd_engine(kind):
    """train_online's two engines -- the hand-written step and autograd through the forward --
    give the same losses and weights after a few AdamW steps (float64, 1e-10: rounding
    differences pass through AdamW's division by the root of the second moment)."""
    if kind == "gated":
        W = lib.lsa_teachers(3, [0, 1])
        task = lib.AttentionTeacherTask(*W, T=5, batch=4, x_std=0.5, dtype=F64)
        build = lambda: lib.StackedGatedRNN(3, [6, 4], 3, [0, 1], dtype=F64)  # noqa: E731
    else:
        task = lib.ICLTask(K=2, T=5, d_x=2, d_y=2, batch=4, dtype=F64)
        build = lambda: lib.ModuleStack([lib.RecurrentNet(kind, 4, w, 2, layers=2, seed=w, dtype=F64)  # noqa: E731
                                         for w in (5, 8)])
    fast, ref = build(), build()
    out_fast = lib.train_online(fast, task, steps=6, data_seeds=[1, 2], log_every=2)
    out_ref = lib.train_online(ref, task, steps=6, data_seeds=[1, 2], log_every=2, engine="autograd")
    assert rel_err(out_fast["loss"], out_ref["loss"]) <= 1e-10
    for (name, a), b in zip(fast.named_parameters(), ref.parameters()):
        assert rel_err(a, b) <= 1e-10, name
    with pytest.raises(ValueError, match="engine"):
        lib.train_online(fast, task, steps=1, data_seeds=[1, 2], engine="compiled")


def test_fixed_batch_repeats_one_batch_of_the_task():
    """lib.tasks.FixedBatch: the task's batch of generators seeded seed + k, returned at every step,
    so that a run's data do not depend on its data seeds; a non-task is refused by name."""
    W = lib.lsa_teachers(3, [0, 1])
    task = lib.AttentionTeacherTask(*W, T=5, batch=4, x_std=0.5, dtype=F64)
    fixed = lib.tasks.FixedBatch(task, seed=11)
    x, y = task.sample([torch.Generator().manual_seed(11 + k) for k in range(2)])
    fx, fy = fixed.sample([torch.Generator().manual_seed(0)] * 2)
    assert torch.equal(fx, x) and torch.equal(fy, y)
    assert fixed.sample(None)[0] is fx
    runs = []
    for seeds in ([1, 2], [3, 4]):
        model = lib.StackedGatedRNN(3, [4, 2], 3, [5, 6], dtype=F64)
        out = lib.train_online(model, fixed, steps=4, data_seeds=seeds, log_every=2, lr=1e-2)
        runs.append((out["loss"], torch.cat([p.detach().flatten() for p in model.parameters()])))
    assert torch.equal(runs[0][0], runs[1][0]) and torch.equal(runs[0][1], runs[1][1])
    assert not torch.equal(runs[0][0][0], runs[0][0][-1])          # it trained
    with pytest.raises(TypeError, match="task must be a task"):
        lib.tasks.FixedBatch(object())
    with pytest.raises((TypeError, ValueError), match="seed"):
        lib.tasks.FixedBatch(task, seed=1.5)
