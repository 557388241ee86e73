"""Conventions shared by every symfast figure: where a figure comes from, how it is saved, where
legends go, and the smallest font. The library never switches the matplotlib backend (only the
`symfast` command line selects Agg); a plot function draws into the caller's axes when given,
else into a new pyplot figure, and returns the figure."""
from __future__ import annotations

from symfast._optional import require

plt = require("matplotlib.pyplot", "plotting")

__all__ = ["FONT", "SMALL", "DPI", "axes_or_new", "finish", "legend_outside"]

FONT = 9  # axis labels and titles (pt)
SMALL = 8  # tick labels, legends, annotations: never smaller, so a figure reads at 100% zoom
DPI = 120


def axes_or_new(ax=None, figsize=(6.0, 4.0)):
    """(figure, axes, created): the caller's axes and its figure, or a new pyplot figure with one axes."""
    if ax is not None:
        return ax.figure, ax, False
    fig, ax = plt.subplots(figsize=figsize)
    return fig, ax, True


def finish(fig, path=None, created: bool = True):
    """Save `fig` to `path` (if given) and return it; a figure this library created is closed after
    saving (so loops do not pile up open figures); a caller's figure is left open."""
    if path is not None:
        fig.savefig(path, dpi=DPI, bbox_inches="tight")
        if created:
            plt.close(fig)
    return fig


def legend_outside(ax, where: str = "right", **kw):
    """A legend beside ("right") or below ("below") the axes, never over the data."""
    kw.setdefault("fontsize", SMALL)
    kw.setdefault("frameon", False)
    if where == "right":
        kw.setdefault("bbox_to_anchor", (1.01, 1.0))
        return ax.legend(loc="upper left", borderaxespad=0.0, **kw)
    if where == "below":
        kw.setdefault("ncol", 3)
        kw.setdefault("bbox_to_anchor", (0.5, -0.2))
        return ax.legend(loc="upper center", **kw)
    raise ValueError(f"where must be 'right' or 'below', got {where!r}")
