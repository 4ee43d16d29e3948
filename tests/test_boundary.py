"""Type confusions and non-finite values at the public boundary: a battery of bad inputs, each
made from a good call of a public function the book calls by spoiling one argument.

For every tensor argument of every entry below, the battery passes instead

    a list          the same numbers as nested Python lists (accepted and the same result, or
                    refused naming the argument)
    meta            a tensor on the ``meta`` device (no data: refused naming the argument)
    NaN, inf        one entry not finite (refused naming the argument)
    a dimension fewer   the first index dropped, e.g. 2-D where 3-D input is expected (refused
                    naming the argument; never broadcast into another computation)

and for an argument that is a list of seeds or sizes, one integer instead; for an integer
argument, 2.5 and "3".  ``tests/test_fault_injection.py`` classifies every case (named,
documented, obscure, silent) in its table; here none may be obscure or silent.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

import lib
from lib import architectures

F64 = torch.float64
NAN, INF = float("nan"), float("inf")


def _g(seed=0):
    return torch.Generator().manual_seed(seed)


def _r(*shape, seed=0):
    return torch.randn(*shape, generator=_g(seed), dtype=F64)


def _rnn():
    return lib.LinearRNN(4, 2, 1, nu_W=0.5, nu_F=1.0, nu_C=1.0, seed=0)


def _seqs():
    return [_r(3, 2, seed=1), _r(2, 2, seed=2)]


def _lsa():
    return tuple(0.5 * _r(3, 3, seed=s) for s in (1, 2, 3))


def _W():
    return 0.3 * _r(4, 4, seed=3)


# entry, function of keyword arguments, the good arguments, and the kind of each argument spoilt:
# "tensor" (a tensor the function computes with), "any shape" (one it takes in any shape), "sizes" (a
# list of integers), "int"
ENTRIES = [
    ("causal_conv", lib.causal_conv, lambda: dict(L=_r(3, 1, 2), x=_r(2, 3, 2)), {"L": "tensor", "x": "tensor"}),
    ("markov_parameters", lib.markov_parameters, lambda: dict(W=_W(), F=_r(4, 2), C=_r(1, 4), T=3),
     {"W": "tensor", "F": "tensor", "C": "tensor", "T": "int"}),
    ("impulse_response", lib.impulse_response, lambda: dict(W=_W(), F=_r(4, 2), C=_r(1, 4), T=3),
     {"W": "tensor", "F": "tensor", "C": "tensor"}),
    ("vandermonde_matrix", lib.vandermonde_matrix, lambda: dict(nodes=torch.tensor([0.1, 0.5, -0.3], dtype=F64), T=3),
     {"nodes": "tensor", "T": "int"}),
    ("vandermonde_realization", lib.vandermonde_realization, lambda: dict(L=_r(3, 1, 1)), {"L": "tensor"}),
    ("shift_register_realization", lib.shift_register_realization, lambda: dict(L=_r(3, 1, 2)), {"L": "tensor"}),
    ("rotation_realization", lib.rotation_realization, lambda: dict(L=_r(3, 1, 1)), {"L": "tensor"}),
    ("memory_realization", lib.memory_realization, lambda: dict(L=_r(3, 1, 2), sequences=_seqs()), {"L": "tensor"}),
    ("conv_ntk", lib.conv_ntk, lambda: dict(x1=_r(2, 3, 2), x2=_r(2, 3, 2, seed=1),
                                            rho=torch.tensor([1.0, 0.5, 0.25], dtype=F64)),
     {"x1": "tensor", "x2": "tensor", "rho": "tensor"}),
    ("conv_ntk_factor", lib.conv_ntk_factor, lambda: dict(rho=torch.tensor([1.0, 0.5], dtype=F64), n_x=2, n_y=1),
     {"rho": "tensor", "n_x": "int"}),
    ("factored_ntk", lib.factored_ntk, lambda: dict(x1=_r(2, 3, 2), x2=_r(2, 3, 2, seed=1), M=torch.eye(6, dtype=F64)),
     {"x1": "tensor", "x2": "tensor", "M": "tensor"}),
    ("empirical_ntk", lib.empirical_ntk, lambda: dict(x1=_r(2, 3, 2), x2=_r(2, 3, 2, seed=1), model=_rnn()),
     {"x1": "tensor", "x2": "tensor"}),
    ("toeplitz", lib.toeplitz, lambda: dict(x=_r(3, 2)), {"x": "tensor"}),
    ("markov_ntk_factor", lib.markov_ntk_factor, lambda: dict(model=_rnn(), T=3), {"T": "int"}),
    ("ScaledConv", lib.ScaledConv, lambda: dict(rho=torch.tensor([1.0, 0.5, 0.2], dtype=F64), n_x=2, n_y=1),
     {"rho": "tensor", "n_x": "int"}),
    ("ScaledConv.forward", lambda x: lib.ScaledConv(torch.tensor([1.0, 0.5, 0.2], dtype=F64), 2, 1)(x),
     lambda: dict(x=_r(2, 3, 2)), {"x": "tensor"}),
    ("loss_fn", lib.loss_fn, lambda: dict(yhat=_r(2, 3, 1), y=_r(2, 3, 1, seed=1)), {"yhat": "tensor", "y": "tensor"}),
    ("r2_score", lib.r2_score, lambda: dict(yhat=_r(2, 3, 1), y=_r(2, 3, 1, seed=1)), {"yhat": "tensor", "y": "tensor"}),
    ("gd_path", lib.gd_path, lambda: dict(x=_r(2, 3, 2), y=_r(2, 3, 1, seed=1), rho=torch.tensor([1.0, 0.5, 0.2], dtype=F64),
                                          L0=_r(3, 1, 2, seed=2), lr=0.01, steps=[1, 2]),
     {"x": "tensor", "y": "tensor", "rho": "tensor", "L0": "tensor"}),
    ("rho_ridge", lib.rho_ridge, lambda: dict(x=_r(2, 3, 2), y=_r(2, 3, 1, seed=1),
                                              rho=torch.tensor([1.0, 0.5, 0.2], dtype=F64), lam=0.1),
     {"x": "tensor", "y": "tensor", "rho": "tensor"}),
    ("conv_features", lib.conv_features, lambda: dict(x=_r(2, 3, 2)), {"x": "tensor"}),
    ("delay_taps", lib.delay_taps, lambda: dict(L=_r(3, 1, 2), delay=1), {"L": "tensor", "delay": "int"}),
    ("learned_fraction", lib.learned_fraction, lambda: dict(L=_r(3, 1, 2), L0=_r(3, 1, 2, seed=1),
                                                            L_target=_r(3, 1, 2, seed=2)),
     {"L": "tensor", "L0": "tensor", "L_target": "tensor"}),
    ("add_output_noise", lib.add_output_noise, lambda: dict(y=_r(2, 3, 1), snr_db=10.0), {"y": "any shape"}),
    ("linear_teacher_dataset", lib.linear_teacher_dataset, lambda: dict(L=_r(3, 1, 1), n_train=2, n_test=2, T=3),
     {"L": "tensor", "n_train": "int"}),
    ("lsa_teachers", lib.lsa_teachers, lambda: dict(d=3, seeds=[0, 1]), {"seeds": "sizes", "d": "int"}),
    ("StackedGatedRNN", lib.StackedGatedRNN, lambda: dict(d_in=3, widths=[2, 3], d_out=3, seeds=[0, 1]),
     {"widths": "sizes", "seeds": "sizes", "d_in": "int"}),
    ("architectures.build", architectures.build,
     lambda: dict(kind="gru", layers=1, d_in=3, widths=[2, 3], d_out=3, seeds=[0, 1]),
     {"widths": "sizes", "seeds": "sizes", "layers": "int"}),
    ("AttentionTeacherTask", lambda W_V, W_K, W_Q: lib.AttentionTeacherTask(W_V, W_K, W_Q, T=3, batch=2, x_std=0.5),
     lambda: dict(zip(("W_V", "W_K", "W_Q"), (w[None] for w in _lsa()))),
     {"W_V": "tensor", "W_K": "tensor", "W_Q": "tensor"}),
    ("LinearSelfAttention", lib.LinearSelfAttention, lambda: dict(zip(("W_V", "W_K", "W_Q"), _lsa())),
     {"W_V": "tensor", "W_K": "tensor", "W_Q": "tensor"}),
    ("LinearSelfAttention.forward", lambda x: lib.LinearSelfAttention(*_lsa())(x), lambda: dict(x=_r(2, 4, 3)),
     {"x": "tensor"}),
    ("lsa_instantaneous_tensor", lib.lsa_instantaneous_tensor, lambda: dict(zip(("W_V", "W_K", "W_Q"), _lsa())),
     {"W_V": "tensor", "W_K": "tensor", "W_Q": "tensor"}),
    ("gated_rnn_from_attention", lib.gated_rnn_from_attention, lambda: dict(zip(("W_V", "W_K", "W_Q"), _lsa())),
     {"W_V": "tensor", "W_K": "tensor", "W_Q": "tensor"}),
    ("lstm_from_attention", lambda W_V, W_K, W_Q: lib.lstm_from_attention(W_V, W_K, W_Q, 0.01),
     lambda: dict(zip(("W_V", "W_K", "W_Q"), _lsa())), {"W_V": "tensor", "W_K": "tensor", "W_Q": "tensor"}),
    ("lru_in_from_attention", lambda W_V, W_K, W_Q: lib.lru_in_from_attention(W_V, W_K, W_Q, 0.01),
     lambda: dict(zip(("W_V", "W_K", "W_Q"), _lsa())), {"W_V": "tensor", "W_K": "tensor", "W_Q": "tensor"}),
    ("glu_gating", lambda W_m, W_x: lib.glu_gating(W_m, W_x, 0.01), lambda: dict(W_m=_r(2, 3), W_x=_r(2, 3, seed=1)),
     {"W_m": "tensor", "W_x": "tensor"}),
    ("polynomial_coefficients", lib.polynomial_coefficients,
     lambda: dict(C=lib.lsa_instantaneous_tensor(*(w[:2, :2] for w in _lsa()))), {"C": "tensor"}),
    ("diagonal_scan", lib.diagonal_scan, lambda: dict(lam=torch.tensor([0.5, 0.9], dtype=F64), u=_r(2, 3, 2)),
     {"lam": "tensor", "u": "tensor"}),
    ("diagonal_recurrence", lib.diagonal_recurrence, lambda: dict(lam=torch.tensor([0.5, 0.9], dtype=F64), u=_r(2, 3, 2)),
     {"lam": "tensor", "u": "tensor"}),
    ("diagonal_scan_reference", lib.diagonal_scan_reference,
     lambda: dict(lam=torch.tensor([0.5, 0.9], dtype=F64), u=_r(2, 3, 2)), {"lam": "tensor", "u": "tensor"}),
    ("GatedLinearRNN.forward", lambda x: lib.GatedLinearRNN(2, 3, 2)(x), lambda: dict(x=_r(2, 3, 2)), {"x": "tensor"}),
    ("StackedGatedRNN.forward", lambda x: lib.StackedGatedRNN(3, [2, 3], 2, [0, 1], dtype=F64)(x),
     lambda: dict(x=_r(2, 2, 3, 3)), {"x": "tensor"}),
    ("RecurrentNet.forward", lambda x: lib.RecurrentNet("lstm", 3, 4, 2, dtype=F64)(x), lambda: dict(x=_r(2, 3, 3)),
     {"x": "tensor"}),
    ("ModuleStack.forward", lambda x: architectures.build("gru", 1, 3, [2, 3], 2, [0, 1], dtype=F64)(x),
     lambda: dict(x=_r(2, 2, 3, 3)), {"x": "tensor"}),
    ("LRULayer.forward", lambda x: lib.LRULayer(3, dtype=F64)(x), lambda: dict(x=_r(2, 3, 3)), {"x": "tensor"}),
    ("LinearRNN.forward", lambda x: _rnn()(x), lambda: dict(x=_r(2, 3, 2)), {"x": "tensor"}),
    ("LinearRNN.from_weights", lib.LinearRNN.from_weights, lambda: dict(W=_W(), F=_r(4, 2), C=_r(1, 4)),
     {"W": "tensor", "F": "tensor", "C": "tensor"}),
    ("gd_predict", lib.gd_predict, lambda: dict(tokens=_r(2, 4, 3), d_x=2, eta=0.1), {"tokens": "tensor", "d_x": "int"}),
    ("icl_batch", lambda batch, T: lib.icl_batch(batch, T, 2, 1, generator=_g()), lambda: dict(batch=2, T=3),
     {"batch": "int", "T": "int"}),
    ("thin_svd", lib.thin_svd, lambda: dict(M=_r(4, 3)), {"M": "tensor"}),
    ("state_matrix", lib.state_matrix, lambda: dict(sequences=_seqs()), {}),
    ("encode", lib.encode, lambda: dict(A=_r(2, 2), B=0.5 * _r(2, 2, seed=1), sequences=_seqs()),
     {"A": "tensor", "B": "tensor"}),
    ("autoencoder_matrices", lib.autoencoder_matrices,
     lambda: dict(U=torch.linalg.qr(_r(4, 2))[0], a=2), {"U": "tensor", "a": "int"}),
    ("linear_ff_outputs", lib.linear_ff_outputs, lambda: dict(w=_r(6), sequences=_seqs()), {"w": "tensor"}),
    ("rank_and_timespan", lib.rank_and_timespan, lambda: dict(w=_r(6), a=2), {"w": "tensor", "a": "int"}),
    ("lag_matrix", lib.lag_matrix, lambda: dict(w=_r(6), a=2), {"w": "tensor", "a": "int"}),
    ("linear_ff_to_rnn", lib.linear_ff_to_rnn, lambda: dict(w=_r(4), sequences=_seqs()), {"w": "tensor"}),
    ("forgetting_shift_register", lib.forgetting_shift_register, lambda: dict(w=_r(6), a=2), {"w": "tensor"}),
    ("tanh_memory_state_bound", lib.tanh_memory_state_bound,
     lambda: dict(B=0.5 * torch.eye(2, dtype=F64), D=1.0, steps=3, beta=2.0), {"B": "tensor", "steps": "int"}),
    ("tanh_memory_beta", lib.tanh_memory_beta,
     lambda: dict(B=0.5 * torch.eye(2, dtype=F64), D=1.0, steps=3, gain=1.0, eps=0.1), {"B": "tensor"}),
    ("train_gd", lambda x, y: lib.train_gd(_rnn(), x, y, lr=0.01, steps=1), lambda: dict(x=_r(2, 3, 2), y=_r(2, 3, 1)),
     {"x": "tensor", "y": "tensor"}),
    ("cosine_lr", lib.cosine_lr, lambda: dict(step=1, steps=10, lr=1e-3, lr_min=1e-6), {"steps": "int"}),
    ("eta_star", lib.eta_star, lambda: dict(T=3, d_x=2), {"T": "int", "d_x": "int"}),
    ("construction_size", lib.construction_size, lambda: dict(d=3), {"d": "int"}),
    ("chebyshev_nodes", lib.chebyshev_nodes, lambda: dict(T=3), {"T": "int"}),
    ("rho", lib.rho, lambda: dict(T=3, nu_W=0.5, nu_F=1.0, nu_C=1.0), {"T": "int"}),
    ("s1_sequences", lambda spikes, vel: lib.s1_sequences(spikes, vel, T=5),
     lambda: dict(spikes=torch.from_numpy(np.random.default_rng(0).poisson(2.0, (200, 3)).astype(float)),
                  vel=torch.from_numpy(np.random.default_rng(1).normal(size=(200, 2)))),
     {"spikes": "tensor", "vel": "tensor"}),
]


def _meta(t):
    return torch.empty(t.shape, dtype=t.dtype, device="meta")


def _spoil(t, value):
    t = t.clone(memory_format=torch.contiguous_format)
    t.view(-1)[0] = value
    return t


def _same(a, b) -> bool:
    """The results of a call with a list and with a tensor are one result (tensors to float64
    round-off: a threaded BLAS reduction may differ in its last bits from one call to the next)."""
    if isinstance(a, torch.Tensor):
        if not isinstance(b, torch.Tensor) or a.shape != b.shape or a.dtype != b.dtype:
            return False
        if not a.is_floating_point() and not a.is_complex():
            return bool(torch.equal(a, b))
        scale = float(a.detach().abs().max()) if a.numel() else 0.0
        return bool(((a - b).detach().abs() <= 1e-12 * max(1.0, scale)).all())
    if isinstance(a, torch.nn.Module):
        return isinstance(b, torch.nn.Module) and all(torch.equal(p, q) for p, q in zip(a.state_dict().values(),
                                                                                          b.state_dict().values()))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if dataclasses.is_dataclass(a):
        return type(a) is type(b) and all(_same(getattr(a, f.name), getattr(b, f.name))
                                          for f in dataclasses.fields(a))
    if callable(a) and callable(b) and not hasattr(a, "__dict__"):
        return True
    if hasattr(a, "__dict__") and not isinstance(a, type):
        return type(a) is type(b) and _same(vars(a), vars(b))
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return type(a) is type(b) and a == b


def _call(fn, good, name, value):
    def call():
        kw = good()
        kw[name] = value(kw[name])
        return fn(**kw)
    return call


def _as_list_documented(fn, good):
    def check(result):
        return _same(fn(**good()), result)
    return check


def cases():
    """(id, call, words the message must contain, documented result check or None)."""
    out = []
    for entry, fn, good, kinds in ENTRIES:
        for name, kind in kinds.items():
            if kind in ("tensor", "any shape"):
                ndim = good()[name].ndim if kind == "tensor" else 0
                out.append((f"{entry}: {name} a list", _call(fn, good, name, lambda t: t.tolist()), [name],
                            _as_list_documented(fn, good)))
                out.append((f"{entry}: {name} on the meta device", _call(fn, good, name, _meta), [name, "meta"], None))
                out.append((f"{entry}: {name} with NaN", _call(fn, good, name, lambda t: _spoil(t, NAN)),
                            [name, "NaN"], None))
                out.append((f"{entry}: {name} with inf", _call(fn, good, name, lambda t: _spoil(t, INF)),
                            [name, "infinite"], None))
                if ndim >= 2:
                    out.append((f"{entry}: {name} {ndim - 1}-D, not {ndim}-D", _call(fn, good, name, lambda t: t[0]),
                                [name], None))
            elif kind == "sizes":
                out.append((f"{entry}: {name} an int, not a list", _call(fn, good, name, lambda v: v[0]), [name], None))
            elif kind == "int":
                out.append((f"{entry}: {name} 2.5", _call(fn, good, name, lambda v: 2.5), [name], None))
                out.append((f"{entry}: {name} '3'", _call(fn, good, name, lambda v: "3"), [name], None))
    return out


def classify(call, words, documented=None) -> tuple[str, str]:
    errors = (ValueError, TypeError, IndexError, MemoryError, FileNotFoundError)
    try:
        result = call()
    except errors as exc:
        missing = [w for w in words if w not in str(exc)]
        msg = f"{type(exc).__name__}: {exc}"
        return ("obscure", f"{msg}  [does not name {missing}]") if missing else ("named", msg)
    except Exception as exc:  # noqa: BLE001
        return "obscure", f"{type(exc).__name__}: {exc}"
    if documented is not None and documented(result):
        return "documented", "accepted, the same result as with a tensor"
    return "silent", f"returned {type(result).__name__}"


def test_every_bad_input_is_a_plain_error_naming_its_argument():
    rows = [(case, *classify(call, words, documented)) for case, call, words, documented in cases()]
    assert len(rows) >= 300, len(rows)
    bad = [f"{case}: {kind}: {what[:300]}" for case, kind, what in rows if kind in ("obscure", "silent")]
    assert not bad, f"{len(bad)} of {len(rows)}:\n" + "\n".join(bad)


if __name__ == "__main__":
    rows = [(case, *classify(call, words, documented)) for case, call, words, documented in cases()]
    for case, kind, what in rows:
        print(f"{kind:<10}  {case:<60}  {what[:160]}")
    print(len(rows), {k: sum(r[1] == k for r in rows) for k in ("named", "documented", "obscure", "silent")})
