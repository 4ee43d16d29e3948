"""What every chapter does the same way: the scale rule, the agreement measure, the stored runs.

    by_scale   the scale rule: a parameter left at ``None`` takes the value of its ``scale`` column
    rel_err    ||a - b||_F / ||b||_F, the measure behind every "exact identity" check (float64)
    stored_chapter_run  a chapter's stored paper-scale run at scale="book", or a plain note that it is absent

Each chapter imports these three instead of defining its own copy, so a reader who wonders what
``scale="paper"`` changes, or what "relative error 3e-16" measures, finds it here once.
"""
from __future__ import annotations

import torch
from IPython.display import Markdown, display

from . import artefacts

SCALES = ("book", "paper")


def by_scale(scale: str, **knobs):
    """Fill the parameters that depend on ``scale``; an explicit value always wins.

    Each keyword is ``name=(value, book, paper)``: the parameter as the reader passed it (``None``
    when left at its default), then its value at ``scale="book"`` and at ``scale="paper"``. Returns
    the chosen values in the order of the keywords (one value for one keyword, else a tuple).
    """
    if scale not in SCALES:
        raise ValueError(f"scale must be 'book' or 'paper', got {scale!r}")
    if not knobs:
        raise ValueError("by_scale needs at least one knob=(value, book, paper)")
    column = 1 + SCALES.index(scale)
    chosen = []
    for name, triple in knobs.items():
        if not isinstance(triple, tuple) or len(triple) != 3:
            raise ValueError(f"{name} must be a tuple (value, book, paper), got {triple!r}")
        chosen.append(triple[0] if triple[0] is not None else triple[column])
    return chosen[0] if len(chosen) == 1 else tuple(chosen)


def rel_err(a, b) -> float:
    """||a - b|| / ||b|| in the Frobenius norm, computed in the inputs' precision (float64 in the book)."""
    a, b = torch.as_tensor(a), torch.as_tensor(b)
    if a.shape != b.shape:
        raise ValueError(f"rel_err needs a and b of one shape, got {tuple(a.shape)} and {tuple(b.shape)}")
    return float(torch.linalg.norm(a - b) / torch.linalg.norm(b))


def stored_chapter_run(chapter: str, scale: str):
    """The stored paper-scale run of ``chapter`` (``make paper EXP=chNN``), read at ``scale="book"``.

    Returns ``lib.artefacts.load_chapter_run(chapter)`` (checksums verified) at ``scale="book"`` and
    ``None`` at ``scale="paper"`` (the chapter has just computed those numbers itself). A run that is
    absent is said plainly on the page and gives ``None``: the book-scale results stand alone. A
    checksum mismatch is an error (``ValueError``), not a missing run.
    """
    if scale not in SCALES:
        raise ValueError(f"scale must be 'book' or 'paper', got {scale!r}")
    if scale == "paper":
        return None
    try:
        return artefacts.load_chapter_run(chapter)
    except FileNotFoundError as err:
        display(Markdown(f"**The stored paper-scale result is missing** ({err}); this page shows the book scale only."))
        return None
