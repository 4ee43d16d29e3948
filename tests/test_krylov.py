"""The fused Krylov kernel (lib/krylov.c) equals the torch products it replaces; a kernel that
cannot be built, is truncated or computes wrong numbers is never used."""
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import lib
from lib import krylov
from tests.helpers import rel_err

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


def test_kernel_compiles_here():
    """CI installs a C compiler; a failed build must show up here, not as a silent slowdown."""
    if not krylov.kernel_enabled():
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
    assert Q.shape == (T, kq, n) and rel_err(Q, Q_ref) <= REL
    if kp:
        assert P.shape == (T, kp, n) and rel_err(P, P_ref) <= REL
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
            assert rel_err(a, b) <= REL


def test_adjoint_rows_is_the_backward_recursion():
    g = torch.Generator().manual_seed(3)
    W = torch.randn(290, 290, generator=g, dtype=torch.float64)
    G = torch.randn(8, 2, 290, generator=g, dtype=torch.float64)
    s = 0.05
    V = krylov.adjoint_rows(W, G, s)
    ref = [G[-1]]
    for k in range(6, -1, -1):
        ref.append(s * ref[-1] @ W + G[k])
    assert rel_err(V, torch.stack(ref[::-1])) <= REL


def test_short_sequences_and_non_contiguous_W():
    g = torch.Generator().manual_seed(1)
    W = torch.randn(300, 300, generator=g, dtype=torch.float64).mT      # a transposed view
    Q0 = torch.randn(1, 300, generator=g, dtype=torch.float64)
    P0 = torch.randn(1, 300, generator=g, dtype=torch.float64)
    for T in (1, 2):
        Q, P = krylov.krylov_rows(W, Q0, T, 0.05, P0)
        Q_ref, P_ref = torch_path(W, Q0, T, 0.05, P0)
        assert rel_err(Q, Q_ref) <= REL and rel_err(P, P_ref) <= REL


def test_graph_inputs_take_the_differentiable_path():
    """With grad mode on and W requiring grad the kernel would cut the graph: torch path."""
    W = torch.randn(6, 6, dtype=torch.float64, requires_grad=True)
    Q0 = torch.randn(1, 6, dtype=torch.float64)
    Q, _ = krylov.krylov_rows(W, Q0, 4, 0.4)
    assert Q.requires_grad
    (gW,) = torch.autograd.grad(Q.sum(), W)
    Q_ref, _ = torch_path(W, Q0, 4, 0.4, None)
    (gW_ref,) = torch.autograd.grad(Q_ref.sum(), W)
    assert rel_err(gW, gW_ref) <= REL


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
        assert rel_err(a, b) <= 1e-10, name


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
    assert rel_err(g, g_torch) <= 1e-10


def test_no_compiler_warns_and_falls_back(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/cc")
    monkeypatch.setenv("RNNBOOK_CACHE", str(Path(__import__("tempfile").mkdtemp())))
    krylov.KERNEL.reset()
    with pytest.warns(RuntimeWarning, match="no usable kernel"):
        assert not krylov.kernel_available()
    W = torch.randn(5, 5, dtype=torch.float64)
    Q0 = torch.randn(1, 5, dtype=torch.float64)
    Q, _ = krylov.krylov_rows(W, Q0, 3, 0.5)
    assert rel_err(Q, torch_path(W, Q0, 3, 0.5, None)[0]) <= REL


# -------------------------------------------------------------------- faults of the compiled kernel
_PROBE = """
import warnings, torch
from lib import krylov
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    ok = krylov.kernel_available()
W = torch.randn(300, 300, dtype=torch.float64) / 20
Q0 = torch.randn(2, 300, dtype=torch.float64)
Q, _ = krylov.krylov_rows(W, Q0, 6, 0.9)
Q_ref, _ = krylov.krylov_rows(W, Q0, 6, 0.9, kernel=False)
err = float((Q - Q_ref).norm() / Q_ref.norm())
print("available", ok, "err", err, "path", krylov.kernel_path(), "warnings", len(caught))
for w in caught:
    print("WARNING", w.message)
"""


def _probe(cache, **env):
    root = Path(__file__).resolve().parent.parent
    full = dict(os.environ, RNNBOOK_CACHE=str(cache), PYTHONPATH=str(root), **env)
    full.pop("RNNBOOK_KERNEL", None) if "RNNBOOK_KERNEL" not in env else None
    res = subprocess.run([sys.executable, "-c", _PROBE], env=full, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, f"the process died (code {res.returncode}): {res.stderr[-2000:]}"
    words = res.stdout.split()
    return words[1] == "True", float(words[3]), res.stdout


needs_cc = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                              reason="no C compiler")


@needs_cc
def test_uncreatable_cache_folder_falls_back_to_a_private_build(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    ok, err, out = _probe(blocker / "cache")            # mkdir under a file fails, even as root
    assert ok and err <= 1e-12, out
    assert "rnnbook-kernel-" in out and "cannot" not in out.split("warnings")[0]


@needs_cc
def test_truncated_and_replaced_kernels_are_never_used(tmp_path):
    cache = tmp_path / "cache"
    ok, err, out = _probe(cache)
    assert ok and err <= 1e-12, out
    so = next((cache / "kernels").glob("krylov-*.so"))
    good = so.read_bytes()
    so.write_bytes(good[: len(good) // 2])                 # truncated: rebuilt, not loaded
    ok, err, out = _probe(cache)
    assert ok and err <= 1e-12 and len(so.read_bytes()) > len(good) // 2, out
    # a wrong kernel whose recorded checksum matches: the check case catches it
    src = (Path(krylov.__file__).with_name("krylov.c")).read_text()
    wrong = src.replace("a0 += w0[k] * x", "a0 -= w0[k] * x")
    assert wrong != src
    (tmp_path / "wrong.c").write_text(wrong)
    cc = shutil.which("cc") or shutil.which("gcc")
    subprocess.run([cc, "-O2", "-fopenmp", "-fPIC", "-shared", str(tmp_path / "wrong.c"), "-o", str(so)],
                   check=True, capture_output=True)
    (so.parent / (so.name + ".sha256")).write_text(hashlib.sha256(so.read_bytes()).hexdigest() + "\n")
    ok, err, out = _probe(cache)
    assert err <= 1e-12 and "does not reproduce the torch path" in out, out   # caught, with a warning
    assert f"path {so} " not in out and not so.exists(), out                  # never used, removed
    ok, err, out = _probe(cache)                          # the next process rebuilds it
    assert ok and err <= 1e-12 and so.is_file() and "warnings 0" in out, out


@pytest.mark.parametrize("value", ["False", "OFF", " no ", "0"])
def test_rnnbook_kernel_off_in_any_case(tmp_path, value):
    ok, err, out = _probe(tmp_path / "cache", RNNBOOK_KERNEL=value)
    assert not ok and err <= 1e-12 and "warnings 0" in out, out
