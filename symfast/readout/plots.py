"""Figures for readouts: score heatmaps and rotation-sweep curves (matplotlib; the caller's backend
is left as it is)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd


def heatmap(table: pd.DataFrame, path=None):
    """One panel per (pe, observable): shapes x elements coloured by score (best orthogonal lift)."""
    keys = list(dict.fromkeys(zip(table["pe"], table["observable"])))
    fig, axes = plt.subplots(len(keys), 1, figsize=(1.0 + 0.55 * table["element"].nunique(),
                                                    1.2 + 0.9 * table["shape"].nunique() * len(keys)),
                             squeeze=False)
    vmax = max(1e-12, float(np.nanmax(table["score"])))
    for ax, (pe, obs) in zip(axes[:, 0], keys):
        t = table[(table["pe"] == pe) & (table["observable"] == obs)]
        shapes = list(dict.fromkeys(t["shape"]))
        elems = list(dict.fromkeys(t["element"]))
        grid = t.pivot(index="shape", columns="element", values="score").loc[shapes, elems]
        im = ax.imshow(grid.values, cmap="viridis_r", vmin=0, vmax=vmax, aspect="auto")
        for _, r in t.iterrows():
            y, x = shapes.index(r["shape"]), elems.index(r["element"])
            approx = bool(r.get("approx_observed", False))
            mark = "o" if r["observed"] else ("~" if approx and not r["liftable"] else
                                              "x" if not r["liftable"] else "")
            if r["true_symmetry"] is True and r["liftable"]:
                ax.add_patch(plt.Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, ec="red", lw=1.2))
            if mark:
                ax.text(x, y, mark, ha="center", va="center", color="white" if mark == "o" else "grey")
        ax.set_xticks(range(len(elems)), elems, rotation=90)
        ax.set_yticks(range(len(shapes)), shapes)
        ax.set_title(f"{pe} / {obs}: o observed, x not liftable, ~ not liftable but passes under its best lift,"
                     " red box = liftable true symmetry", fontsize=8)
        fig.colorbar(im, ax=ax, label="score s(g)")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
        plt.close(fig)
    return fig


def sweep_curves(sweep: pd.DataFrame, path=None):
    """Normalised score vs rotation angle per encoding, one line per shape.

    The score is divided by its spectrum-matched null (`score_null`: the same lift on a random
    orthogonal conjugate of the observable, i.e. what the lift alone produces), so curves sit
    near 1 where there is no symmetry and dip where there is one, also near the identity where
    raw scores are small for every shape. The lift residual is dashed on the right axis."""
    pes = list(dict.fromkeys(sweep["pe"]))
    value = "score_norm" if "score_norm" in sweep else "score"
    fig, axes = plt.subplots(1, max(1, len(pes)), figsize=(5 * max(1, len(pes)), 3.6), squeeze=False)
    for ax, pe in zip(axes[0], pes):
        t = sweep[sweep["pe"] == pe]
        several = t["observable"].nunique() > 1
        for (shape, obs), ts in t.groupby(["shape", "observable"], sort=False):
            ax.plot(ts["angle_deg"], ts[value], label=f"{shape} ({obs})" if several else shape)
        if value == "score_norm":
            ax.axhline(1.0, color="grey", lw=0.6)
        first = t[(t["shape"] == t["shape"].iloc[0]) & (t["observable"] == t["observable"].iloc[0])]
        ax2 = ax.twinx()
        ax2.plot(first["angle_deg"], first["lift_residual"], "k--", lw=0.8, label="lift residual")
        ax2.set_ylabel("lift residual (dashed)")
        ax.set_xlabel("rotation angle (deg)")
        ax.set_ylabel("score / lift-only null" if value == "score_norm" else "score s(g)")
        ax.set_title(pe)
        ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
        plt.close(fig)
    return fig
