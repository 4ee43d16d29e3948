"""The book's one plotting style.

Every chapter calls :func:`use_book_style` once, right after its imports; figures then
share fonts, sizes, colours and the colour-blind-safe cycle below.  Models have fixed
colours (:data:`MODEL_COLORS`) so the RNN is the same colour on every page.
A figure that several chapters draw alike is finished here once: :func:`finish_width_sweep`
(a quantity against the number of hidden neurons, with the sizes of the constructions marked).
"""
from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt

from .. import architectures
from ..architectures import ARCHITECTURES

# the Okabe-Ito palette (colour-blind safe) of lib.architectures, where the architectures take
# their colours from it
PALETTE = list(architectures.PALETTE)

MODEL_COLORS = {
    "rnn": PALETTE[0],
    "scaled_conv": PALETTE[1],
    "conv": PALETTE[2],
    "theory": PALETTE[7],                       # black
    "attention": PALETTE[3],
    "gated_rnn": ARCHITECTURES["gated"].color,
}

STYLE = {
    "figure.figsize": (6.4, 3.8),
    "figure.dpi": 110,
    "savefig.dpi": 110,
    "savefig.bbox": "tight",
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.prop_cycle": mpl.cycler(color=PALETTE),
    "legend.frameon": False,
    "legend.fontsize": 9,
    "lines.linewidth": 1.6,
    "lines.markersize": 4.5,
    "errorbar.capsize": 2.5,
    "image.cmap": "viridis",
}


def use_book_style() -> None:
    """Apply the book's matplotlib style (idempotent)."""
    mpl.rcParams.update(STYLE)


def subplots(*args, **kwargs):
    """``plt.subplots`` with the book style and ``constrained_layout`` on."""
    use_book_style()
    kwargs.setdefault("layout", "constrained")
    return plt.subplots(*args, **kwargs)


def finish_width_sweep(ax, constructions, *, ylabel=None, **legend_kw):
    """Finish a width sweep: a quantity plotted against the number of hidden neurons, on log-log
    axes, with a vertical line at the size of each construction it is compared with.

    Draw the sweep's own curves on ``ax`` first. ``constructions`` lists ``(neurons, linestyle,
    label)`` in the order to draw them: each becomes a grey (``"0.4"``) vertical line at
    ``neurons`` with that line style and legend label. Both axes are then put on a log scale,
    the x axis is labelled "hidden neurons", the y axis ``ylabel`` (left unlabelled if None),
    and the legend is drawn with ``legend_kw`` (e.g. ``fontsize=8``): the curves' labels first,
    then the constructions'.
    """
    for neurons, linestyle, label in constructions:
        ax.axvline(neurons, ls=linestyle, color="0.4", label=label)
    ax.set_xscale("log"); ax.set_yscale("log")
    ax.set_xlabel("hidden neurons")
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    ax.legend(**legend_kw)
