"""What every chapter does the same way: the scale switch, the agreement measure, the stored runs,
the results tables.  (The scale rule itself -- a setting left at ``None`` takes its ``scale``
column -- is :meth:`lib.book.experiments.Experiment.fill`, beside the declared settings.)

    check_scale  the one check of the ``scale`` switch ("book" or "paper"), of lib.book.experiments
    rel_err    ||a - b||_F / ||b||_F, the measure behind every "exact identity" check (float64)
    stored_chapter_run  a chapter's stored paper-scale run at scale="book" (a missing one is an error
               unless the reader asked for the book scale only, ``book_only=True``)
    table      a results table, rendered from its cells (lib.book.tables)

Each chapter imports these instead of defining its own copy, so a reader who wonders what
``scale="paper"`` changes, or what "relative error 3e-16" measures, finds it here once.
"""
from __future__ import annotations

import torch
from IPython.display import Markdown, display

from . import artefacts
from .experiments import check_scale
from .tables import Table

__all__ = ["check_scale", "rel_err", "stored_chapter_run", "table"]


def rel_err(a, b) -> float:
    """||a - b|| / ||b|| in the Frobenius norm, computed in the inputs' precision (float64 in the book)."""
    a, b = torch.as_tensor(a), torch.as_tensor(b)
    if a.shape != b.shape:
        raise ValueError(f"rel_err needs a and b of one shape, got {tuple(a.shape)} and {tuple(b.shape)}")
    return float(torch.linalg.norm(a - b) / torch.linalg.norm(b))


def stored_chapter_run(chapter: str, scale: str, *, book_only: bool = False):
    """The stored paper-scale run of ``chapter`` (``make paper EXP=chNN``), read at ``scale="book"``.

    Returns ``lib.artefacts.load_chapter_run(chapter)`` (checksums verified) at ``scale="book"`` and
    shows where it came from (command, finish time, duration, device, commit, torch, parameters).
    At ``scale="paper"`` it returns ``None`` and says so: this execution is the one that produces the
    stored result. A run that is absent fails the chapter (``FileNotFoundError`` naming the file,
    the command that writes it and the switch below), as does a checksum mismatch (``ValueError``):
    a page never drops its paper-scale section silently.

    ``book_only=True`` (the chapters' parameter of that name) is the reader's explicit choice of the
    book scale only: the stored run is not read, the page says so, and ``None`` is returned.
    """
    check_scale(scale)
    if not isinstance(book_only, bool):
        raise TypeError(f"book_only must be True or False, got {book_only!r}")
    if scale == "paper":
        print("executed at scale='paper': the stored paper-scale result is being produced by this run")
        return None
    if book_only:
        display(Markdown("**Book scale only** (executed with `book_only=True`): the stored paper-scale "
                         "result is not read, and this section's paper-scale checks are left out."))
        return None
    try:
        run = artefacts.load_chapter_run(chapter)
    except FileNotFoundError as err:
        raise FileNotFoundError(f"the stored paper-scale result of {chapter} is missing ({err}); write it with "
                                f"`make paper EXP=ch{chapter[:2]}`, or execute the chapter with `-p book_only True` "
                                "for the book scale only") from None
    meta = run["meta"]
    display(Markdown(
        f"Stored run: `{meta['command']}`, finished {meta['finished_utc']} after "
        f"{meta['wall_seconds'] / 60:.0f} min on {meta['device']} (commit `{meta['git_commit'][:10]}`, "
        f"torch {meta['versions']['torch']}); parameters {meta['parameters']}."))
    return run


def table(header, rows, *, caption: str | None = None, label: str | None = None, before: str = "",
          after: str = "") -> None:
    """Display a results table: a ``header`` row of column titles, then ``rows``, one cell per
    column, each text the chapter has formatted (an ``int`` is written as it is; a float is
    refused, so that every number carries the precision its chapter chose).  The table is
    rendered from these data by :mod:`lib.book.tables` (each cell on its own, as inline MyST
    Markdown: nothing in a cell can break a row), with optional Markdown paragraphs ``before`` it
    (what was run) and ``after`` it (what the reader should take from it).

    ``caption`` (inline MyST Markdown, ``$math$`` included: what the reader should see) is the
    table's own caption: the book numbers it "Table N.k" like a figure; ``label`` (a MyST label,
    ``tab-...``) lets the prose refer to it with ``{numref}`tab-...```.  Every table of the book
    has a caption (the browser check, ``tools/browser_check.py``, refuses one without)."""
    shown = Table(header, rows, caption, label)   # checks every cell before anything is displayed
    if before:
        display(Markdown(before))
    display(shown)
    if after:
        display(Markdown(after))
