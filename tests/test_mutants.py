"""Mutation check of the closed forms the book rests on.

Each mutant is a plausible slip in one formula (a dropped term, an exponent off by one, the
paper's eq. (34) without its d_x, ...).  The test copies lib/ and the listed test files into a
temporary folder, applies the mutant there, runs those tests against the mutated copy and
requires that at least one of them fails.  A formula change that the tests would not notice
therefore fails this module.
"""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# (id, file, original text, mutated text, test files that must catch it)
MUTANTS = [
    ("rho: nu_F dropped from the j term", "lib/scaled_conv.py",
     "return nu_C * (nu_F * j_pow + nu_W**j) + nu_F * nu_W**j",
     "return nu_C * (j_pow + nu_W**j) + nu_F * nu_W**j", ["test_ntk.py"]),
    ("rho: exponent j instead of j - 1", "lib/scaled_conv.py",
     "j[1:] * nu_W ** (j[1:] - 1)", "j[1:] * nu_W ** j[1:]", ["test_ntk.py"]),
    ("rho: last term without nu_F", "lib/scaled_conv.py",
     "return nu_C * (nu_F * j_pow + nu_W**j) + nu_F * nu_W**j",
     "return nu_C * (nu_F * j_pow + nu_W**j) + nu_W**j", ["test_ntk.py"]),
    ("rho_max: + nu_F dropped", "lib/scaled_conv.py",
     'return positive_real("nu_C", nu_C) * (T * positive_real("nu_F", nu_F) + 1) + nu_F',
     'return positive_real("nu_C", nu_C) * (T * positive_real("nu_F", nu_F) + 1)', ["test_ntk.py"]),
    ("eta*: the 1/5 dropped", "lib/icl.py",
     "return 1.0 / (sigma_x2 * (T + d_x - 0.2))", "return 1.0 / (sigma_x2 * (T + d_x))", ["test_icl.py"]),
    ("GD loss: the quadratic coefficient without d_x (eq. 34 as printed)", "lib/icl.py",
     "quad = T * d_x * sigma_x2**2 * (T + d_x - 0.2)", "quad = T * sigma_x2**2 * (T + d_x - 0.2)",
     ["test_icl.py"]),
    ("optimal GD loss: d_x - 1/5 replaced by d_x", "lib/icl.py",
     "return 0.5 * sigma_w2 * sigma_x2 * d_x * (d_x - 0.2) / (T + d_x - 0.2)",
     "return 0.5 * sigma_w2 * sigma_x2 * d_x * d_x / (T + d_x - 0.2)", ["test_icl.py"]),
    ("Markov parameters: 1/n instead of 1/sqrt(n)", "lib/linear_rnn.py",
     "    scale = 1.0 / math.sqrt(n)\n    G = F", "    scale = 1.0 / n\n    G = F", ["test_linear_rnn.py"]),
    ("Vandermonde realization: W without sqrt(n)", "lib/linear_rnn.py",
     "root_n = math.sqrt(n)", "root_n = 1.0", ["test_linear_rnn.py"]),
    ("Theorem 3.1 bound: the - r^2 term dropped", "lib/linear_ff.py",
     "return ((1 + 2 * t) * r - r * r) // 2", "return ((1 + 2 * t) * r) // 2",
     ["test_ff_to_rnn.py", "test_bad_input.py"]),
    ("construction size: compact key-values d^2", "lib/gated.py",
     "n_kv = d * (d + 1) // 2 if compact else d * d", "n_kv = d * d", ["test_attention.py"]),
    ("construction size: one query neuron too few", "lib/gated.py",
     "    n_h = n_kv + d\n    n_g = d * d\n    params", "    n_h = n_kv + d - 1\n    n_g = d * d\n    params",
     ["test_attention.py"]),
    # what a trained gated RNN computes (Chapter 11): its kernels, removals, zeros and merges
    ("function kernels: the cross monomials' coefficient not doubled", "lib/gated_analysis.py",
     "return torch.where(a == b, A[:, a, b], A[:, a, b] + A[:, b, a])", "return A[:, a, b]",
     ["test_gated_analysis.py"]),
    ("function kernels: the cross block without its factor 2", "lib/gated_analysis.py",
     'return 2 * torch.einsum("np,inm,mq->ipq"', 'return torch.einsum("np,inm,mq->ipq"', ["test_gated_analysis.py"]),
    ("removal: the product term of a removed neuron dropped", "lib/gated_analysis.py",
     "hidden = (h * (h * C[None] - A - B))", "hidden = (h * (-A - B))", ["test_gated_analysis.py"]),
    ("zero weights: a row with one zero entry counts as entirely zero", "lib/gated_analysis.py",
     'hidden = z["W_in_m"].all(1) | z["W_in_x"].all(1)', 'hidden = z["W_in_m"].any(1) | z["W_in_x"].any(1)',
     ["test_gated_analysis.py"]),
    ("merge: proportionality across outputs not tested", "lib/gated_analysis.py",
     '"merges": max(proportional, outside, rank_one) <= tol', '"merges": max(outside, rank_one) <= tol',
     ["test_gated_analysis.py"]),
    # the training objective: a target that broadcasts against the output
    ("objective: train_online's output-shape check skipped", "lib/online.py",
     "    if tuple(out.shape) != tuple(y_shape):", "    if False:", ["test_objective.py"]),
    ("objective: the shared output-against-target check skipped", "lib/_checks.py",
     "    if tuple(out.shape) != tuple(target.shape):", "    if False:", ["test_objective.py"]),
    ("objective: train_adamw's first batch not checked", "lib/training.py",
     "    _check_batch(model, batch, seed, predict, loss, own_loss)\n", "", ["test_objective.py"]),
    ("objective: train_gd's x_test / y_test not checked", "lib/training.py",
     "        _check_objective(model, x_test, y_test, \"x_test\", \"y_test\")\n", "", ["test_objective.py"]),
    ("objective: a stack's member losses averaged over all members", "lib/tasks.py",
     "return 0.5 * (out - y).square().flatten(1).mean(dim=1)",
     "return 0.5 * (out - y).square().mean().expand(x.shape[0])", ["test_objective.py"]),
    # the stored-run loader: a swapped member, a skipped checksum, files of another run
    ("stored runs: members handed back in reverse order", "lib/book/artefacts.py",
     '"members": [model.member(k) for k in range(model.K)]',
     '"members": [model.member(model.K - 1 - k) for k in range(model.K)]', ["test_stored_runs.py"]),
    ("stored runs: a checksum that differs is let through", "lib/book/artefacts.py",
     "        if got != expected[rel]:", "        if False:", ["test_stored_runs.py"]),
    ("stored runs: only the first file verified", "lib/book/artefacts.py",
     "    for f in files:\n        try:", "    for f in files[:1]:\n        try:", ["test_stored_runs.py"]),
    ("stored runs: load_run verifies nothing", "lib/book/artefacts.py",
     '    verify(files, root, f"python -m tools.paper run {name} --replace" if replaced else f"make paper EXP={name}")',
     "    files[0].stat()", ["test_stored_runs.py"]),
    ("stored runs: load_chapter_run verifies nothing", "lib/book/artefacts.py",
     '    verify(files, root, f"make paper EXP=ch{stem[:2]}")', "", ["test_stored_runs.py"]),
    ("stored runs: the run's name is not checked", "lib/book/artefacts.py",
     "        if value != name:", "        if False:", ["test_stored_runs.py"]),
    ("stored runs: run.pt's groups not checked against meta.json", "lib/book/artefacts.py",
     "    if stored != declared:", "    if False:", ["test_stored_runs.py"]),
]


@pytest.mark.parametrize("path, old, new, tests", [m[1:] for m in MUTANTS], ids=[m[0] for m in MUTANTS])
def test_mutant_is_caught(tmp_path, path, old, new, tests):
    src = (ROOT / path).read_text()
    assert src.count(old) == 1, f"{path}: the original text must occur once (was the formula edited?)"
    shutil.copytree(ROOT / "lib", tmp_path / "lib", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "tests").mkdir()
    for name in ["conftest.py", "helpers.py", *tests]:
        shutil.copy(ROOT / "tests" / name, tmp_path / "tests" / name)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / path).write_text(src.replace(old, new))
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(Path.home()),
           "OMP_NUM_THREADS": "1", "RNNBOOK_KERNEL": "0"}
    res = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                          *[f"tests/{t}" for t in tests]], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 1, f"mutant survived (pytest exit {res.returncode}):\n{res.stdout[-1500:]}"
