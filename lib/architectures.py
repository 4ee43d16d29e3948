"""The architecture registry of Part III: every network kind the book trains, its constructor,
its label, its colour and its training step, declared once.

Chapter 13 (section "sec-fig4") compares, as Fig. 4 of Zucchet et al. (2023) does, the gated RNN
of eq. (2) with the LRU (GLU on the output; In+Out: GLU on input and output; In+Skip: input GLU,
output GLU's gate on the layer input), the LSTM and the GRU, at one or two layers.  The runner
(``tools/paper.py``), the loader of stored runs (:func:`lib.book.artefacts.load_run`) and the
chapter all build networks and name them through :func:`build` and :func:`label`, so adding an
architecture is one entry here (and, for Fig. 4, one line of the experiment registry).

    ARCHITECTURES      kind -> Architecture(kind, name, color, layers)
    INITS              name -> Init: the initialisations of the gated RNN that Chapter 11 compares
    build(kind, layers, d_in, widths, d_out, seeds, init="uniform")   the stack trained together
    label(kind, layers)                               "LSTM, 2 layers"
    STEPS              stack class -> its hand-written training step (training_step(model))

The models know nothing of their training: the hand-written steps (:mod:`lib.gated_step`,
:mod:`lib.recurrent_step`) sit above them, this registry above both, and
:func:`lib.online.train_online` above the registry.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from . import gated_step, recurrent_step
from ._checks import int_list, positive_int, seed_list
from .gated import StackedGatedRNN
from .recurrent_cells import RECURRENT_KINDS, ModuleStack, RecurrentNet

__all__ = ["Architecture", "ARCHITECTURES", "Init", "INITS", "PALETTE", "STEPS", "build", "label", "training_step"]

# The Okabe-Ito palette (colour-blind safe), declared once: the architectures' colours are taken
# from it here, and the book's figures (lib.book.plotting) cycle through it.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000")
_BLUE, _VERMILION, _GREEN, _PURPLE, _ORANGE, _SKY = PALETTE[:6]


@dataclass(frozen=True)
class Architecture:
    """A network kind: ``name`` for tables and legends, ``color`` for figures, the layer counts
    it can be built with."""

    kind: str
    name: str
    color: str
    layers: tuple[int, ...] = (1, 2)


ARCHITECTURES: dict[str, Architecture] = {a.kind: a for a in (
    Architecture("gated", "gated RNN (eq. 2)", _ORANGE, layers=(1,)),
    Architecture("lru", "LRU", _SKY),
    Architecture("lru_in_out", "LRU In+Out", _GREEN),
    Architecture("lru_in_skip", "LRU In+Skip", _PURPLE),
    Architecture("lstm", "LSTM", _BLUE),
    Architecture("gru", "GRU", _VERMILION),
)}
assert set(ARCHITECTURES) - {"gated"} == set(RECURRENT_KINDS)


@dataclass(frozen=True)
class Init:
    """An initialisation of the gated RNN of eq. (2), which the paper does not state (Chapter 11,
    section "sec-teacher-init"): the law of lam and its range, the LRU's input normalisation, the
    scale of the four gating matrices (arguments of :class:`lib.gated.GatedLinearRNN`)."""

    name: str
    label: str
    lam_init: tuple[float, float] = (0.0, 1.0)
    lam_law: str = "uniform"
    input_norm: bool = False
    gate_scale: float = 1.0

    def kwargs(self) -> dict:
        return {"lam_init": self.lam_init, "lam_law": self.lam_law, "input_norm": self.input_norm,
                "gate_scale": self.gate_scale}


INITS: dict[str, Init] = {i.name: i for i in (
    Init("uniform", "the book's: λ ~ U(0, 1), every matrix N(0, 1/fan-in)"),
    Init("lru", "LRU: |λ|² ~ U(0, 1), input normalised by √(1 − λ²)", (0.0, 1.0), "lru", True),
    Init("lru_ring", "LRU ring: |λ|² ~ U(0.9², 0.999²), input normalised by √(1 − λ²)", (0.9, 0.999), "lru", True),
    Init("small_gates", "small gates: λ ~ U(0, 1), the four gating matrices × 0.1", gate_scale=0.1),
)}


def _check(kind: str, layers: int) -> Architecture:
    if kind not in ARCHITECTURES:
        raise ValueError(f"kind must be one of {', '.join(ARCHITECTURES)}, got {kind!r}")
    arch = ARCHITECTURES[kind]
    layers = positive_int("layers", layers)
    if layers not in arch.layers:
        raise ValueError(f"{arch.name} is built with layers in {arch.layers}, got {layers}")
    return arch


def label(kind: str, layers: int) -> str:
    """The name of a network in tables and legends: "gated RNN (eq. 2)", "LSTM, 2 layers".

    Used in Chapter 13, section "sec-fig4-stored"."""
    arch = _check(kind, layers)
    return arch.name if kind == "gated" else f"{arch.name}, {layers} layer{'s' * (layers > 1)}"


def build(kind: str, layers: int, d_in: int, widths, d_out: int, seeds, *, init: str = "uniform",
          dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu"):
    """The networks of one group, stacked for :func:`lib.online.train_online`: member k has width
    ``widths[k]`` and initial weights from ``seeds[k]``.  A :class:`lib.gated.StackedGatedRNN` for
    ``kind="gated"``, else a :class:`lib.recurrent_cells.ModuleStack` of
    :class:`lib.recurrent_cells.RecurrentNet`.

    ``init``: a name of :data:`INITS` (the gated RNN only; the other kinds have their own).

    Used by ``tools/paper.py`` to train the runs of Chapter 13, section "sec-fig4", and by
    :func:`lib.book.artefacts.load_run` to rebuild them.
    """
    _check(kind, layers)
    if init not in INITS:
        raise ValueError(f"init must be one of {', '.join(INITS)}, got {init!r}")
    if init != "uniform" and kind != "gated":
        raise ValueError(f"init {init!r} is an initialisation of the gated RNN; {kind} has its own")
    widths, seeds = int_list("widths", widths, what="width"), seed_list("seeds", seeds)
    if not widths or len(widths) != len(seeds):
        raise ValueError(f"widths and seeds must be non-empty lists of equal length, got {len(widths)} and "
                         f"{len(seeds)}")
    if kind == "gated":
        return StackedGatedRNN(d_in, widths, d_out, seeds, **INITS[init].kwargs(), dtype=dtype, device=device)
    return ModuleStack([RecurrentNet(kind, d_in, w, d_out, layers=layers, seed=s, dtype=dtype)
                        for w, s in zip(widths, seeds)]).to(device)


# The hand-written training step of each kind of stack: step(stack, x, y, last_only) returns the
# (K,) losses with the gradient of their sum written into the parameters' .grad, or None where it
# does not apply (another device or dtype, no compiled kernel); the trainer then differentiates
# the objective (lib.tasks.member_losses) with autograd.
STEPS = {StackedGatedRNN: gated_step.losses_into_grad, ModuleStack: recurrent_step.losses_into_grad}


def training_step(model):
    """The hand-written training step of ``model``'s class (:data:`STEPS`), None for any other
    model (which :func:`lib.online.train_online` trains through autograd)."""
    return STEPS.get(type(model))
