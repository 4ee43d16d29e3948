"""The fused Krylov kernel (lib/krylov.c) equals the torch products it replaces (issue 3)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import lib
from lib import krylov

REL = 1e-12   # the two paths differ only in the order of summation


def torch_path(W, Q0, T, s, P0, add_Q=None, add_P=None):
    """The definition, one plain product per sequence and step."""
    Q = None if Q0 is None else [Q0]
    P = None if P0 is None else [P0]
    for j in range(1, T):
        if Q is not None:
            Q.append(Q[-1] @ W.mT * s + (0 if add_Q is None else add_Q[j]))
        if P is not None:
            P.append(P[-1] @ W * s + (0 if add_P is None else add_P[j]))
    return (None if Q is None else torch.stack(Q)), (None if P is None else torch.stack(P))


def rel(a, b):
    return float(torch.linalg.norm(a - b) / torch.linalg.norm(b))


def test_kernel_compiles_here():
    """CI installs a C compiler; a failed build must show up here, not as a silent slowdown."""
    if os.environ.get("RNNBOOK_KERNEL", "1") in ("0", "false", "no", "off"):
        pytest.skip("RNNBOOK_KERNEL=0 disables the kernel on purpose")
    assert krylov.kernel_available(), "lib/krylov.c did not compile or load (see the RuntimeWarning)"
    assert krylov.kernel_path().is_file()


@pytest.mark.parametrize("n", [1, 3, 4, 5, 37, 255, 256, 258, 1001])
@pytest.mark.parametrize("kq,kp", [(1, 1), (1, 0), (2, 3), (3, 1), (1, 2)])
def test_kernel_equals_torch_products(n, kq, kp):
    g = torch.Generator().manual_seed(n * 31 + kq * 7 + kp)
    W = torch.randn(n, n, generator=g, dtype=torch.float64)
    Q0 = torch.randn(kq, n, generator=g, dtype=torch.float64)
    P0 = torch.randn(kp, n, generator=g, dtype=torch.float64) if kp else None
    T, s = 9, 0.9 / n ** 0.5
    Q, P = krylov.krylov_rows(W, Q0, T, s, P0)
    Q_ref, P_ref = torch_path(W, Q0, T, s, P0)
    assert Q.shape == (T, kq, n) and rel(Q, Q_ref) <= REL
    if kp:
        assert P.shape == (T, kp, n) and rel(P, P_ref) <= REL
    else:
        assert P is None


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("n,kq,kp", [(7, 1, 2), (300, 2, 1), (301, 0, 3), (260, 2, 0)])
def test_affine_sequences_and_transposed_views(n, kq, kp, transposed):
    """add_Q / add_P (the adjoint recursion) and W given as a transposed view (the readout
    side of the Markov engine), which swaps the roles of the two sequences without a copy."""
    g = torch.Generator().manual_seed(n + kq + 10 * kp + transposed)
    U = torch.randn(n, n, generator=g, dtype=torch.float64)
    W = U.mT if transposed else U
    T, s = 6, 0.8 / n ** 0.5
    Q0 = torch.randn(kq, n, generator=g, dtype=torch.float64) if kq else None
    P0 = torch.randn(kp, n, generator=g, dtype=torch.float64) if kp else None
    add_Q = torch.randn(T, kq, n, generator=g, dtype=torch.float64) if kq else None
    add_P = torch.randn(T, kp, n, generator=g, dtype=torch.float64) if kp else None
    Q, P = krylov.krylov_rows(W, Q0, T, s, P0, add_Q=add_Q, add_P=add_P)
    Q_ref, P_ref = torch_path(W, Q0, T, s, P0, add_Q, add_P)
    for a, b in ((Q, Q_ref), (P, P_ref)):
        assert (a is None) == (b is None)
        if b is not None:
            assert rel(a, b) <= REL


def test_adjoint_rows_is_the_backward_recursion():
    g = torch.Generator().manual_seed(3)
    W = torch.randn(290, 290, generator=g, dtype=torch.float64)
    G = torch.randn(8, 2, 290, generator=g, dtype=torch.float64)
    s = 0.05
    V = krylov.adjoint_rows(W, G, s)
    ref = [G[-1]]
    for k in range(6, -1, -1):
        ref.append(s * ref[-1] @ W + G[k])
    assert rel(V, torch.stack(ref[::-1])) <= REL


def test_short_sequences_and_non_contiguous_W():
    g = torch.Generator().manual_seed(1)
    W = torch.randn(300, 300, generator=g, dtype=torch.float64).mT      # a transposed view
    Q0 = torch.randn(1, 300, generator=g, dtype=torch.float64)
    P0 = torch.randn(1, 300, generator=g, dtype=torch.float64)
    for T in (1, 2):
        Q, P = krylov.krylov_rows(W, Q0, T, 0.05, P0)
        Q_ref, P_ref = torch_path(W, Q0, T, 0.05, P0)
        assert rel(Q, Q_ref) <= REL and rel(P, P_ref) <= REL


def test_graph_inputs_take_the_differentiable_path():
    """With grad mode on and W requiring grad the kernel would cut the graph: torch path."""
    W = torch.randn(6, 6, dtype=torch.float64, requires_grad=True)
    Q0 = torch.randn(1, 6, dtype=torch.float64)
    Q, _ = krylov.krylov_rows(W, Q0, 4, 0.4)
    assert Q.requires_grad
    (gW,) = torch.autograd.grad(Q.sum(), W)
    Q_ref, _ = torch_path(W, Q0, 4, 0.4, None)
    (gW_ref,) = torch.autograd.grad(Q_ref.sum(), W)
    assert rel(gW, gW_ref) <= REL


@pytest.mark.parametrize("n,n_x,n_y", [(300, 1, 1), (257, 2, 3), (1000, 1, 1), (300, 3, 1),
                                       (260, 2, 2)])
def test_linear_rnn_gradients_through_the_kernel(n, n_x, n_y):
    """Sizes above the kernel's threading threshold (n >= 256), each side of the engine:
    fused (n_x == n_y), input side with the adjoint recursion (n_x < n_y), readout side on
    the transposed view of W (n_y < n_x)."""
    model = lib.LinearRNN(n, n_x, n_y, nu_W=0.6, nu_F=1.0, nu_C=1.0, seed=n)
    g = torch.Generator().manual_seed(2)
    x = torch.randn(7, 12, n_x, generator=g, dtype=torch.float64)
    y = torch.randn(7, 12, n_y, generator=g, dtype=torch.float64)
    params = list(model.parameters())
    grads = {}
    for engine in ("markov", "recurrence"):
        model.engine = engine
        grads[engine] = torch.autograd.grad(lib.loss_fn(model(x), y), params)
    for name, a, b in zip("WFC", grads["markov"], grads["recurrence"]):
        assert rel(a, b) <= 1e-10, name


def test_disabled_kernel_gives_the_same_numbers():
    """RNNBOOK_KERNEL=0 (or no compiler) falls back to torch products, same results."""
    code = (
        "import torch, lib; from lib import krylov\n"
        "assert not krylov.kernel_available()\n"
        "m = lib.LinearRNN(300, 1, 2, 0.5, 1.0, 1.0, seed=9)\n"
        "x = torch.randn(3, 10, 1, generator=torch.Generator().manual_seed(0), dtype=torch.float64)\n"
        "g = torch.autograd.grad(m(x).square().sum(), [m.W])[0]\n"
        "torch.save(g, 'g.pt')\n"
    )
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, RNNBOOK_KERNEL="0", PYTHONPATH=str(root))
    with __import__("tempfile").TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-c", code], cwd=tmp, env=env, check=True)
        g_torch = torch.load(Path(tmp) / "g.pt")
    m = lib.LinearRNN(300, 1, 2, 0.5, 1.0, 1.0, seed=9)
    x = torch.randn(3, 10, 1, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    g = torch.autograd.grad(m(x).square().sum(), [m.W])[0]
    assert rel(g, g_torch) <= 1e-10


def test_no_compiler_warns_and_falls_back(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/cc")
    monkeypatch.setenv("RNNBOOK_CACHE", str(Path(__import__("tempfile").mkdtemp())))
    monkeypatch.setattr(krylov, "_state", {})
    with pytest.warns(RuntimeWarning, match="compiling lib/krylov.c failed"):
        assert not krylov.kernel_available()
    W = torch.randn(5, 5, dtype=torch.float64)
    Q0 = torch.randn(1, 5, dtype=torch.float64)
    Q, _ = krylov.krylov_rows(W, Q0, 3, 0.5)
    assert rel(Q, torch_path(W, Q0, 3, 0.5, None)[0]) <= REL
