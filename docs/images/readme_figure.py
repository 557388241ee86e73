"""Draw docs/images/readout.png from a `symfast reproduce --quick` run.

Usage: python docs/images/readme_figure.py results/reproduce/readout docs/images/readout.png
"""
import sys

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

import symfast as sf


def field(ax, ens, shape_name, title):
    """Fitted SDF of the first member trained on `shape_name`, its zero level and the true one."""
    n = 200
    g = torch.linspace(-1, 1, n, dtype=torch.float64)
    xy = torch.stack(torch.meshgrid(g, g, indexing="xy"), -1).reshape(-1, 2)
    i = ens.indices(shape_name)[0]
    fit = ens.subset([i])(xy)[0].reshape(n, n).numpy()
    true = sf.shapes.by_name(shape_name).sdf(xy).reshape(n, n).numpy()
    lim = np.abs(fit).max()
    im = ax.imshow(fit, extent=(-1, 1, -1, 1), origin="lower", cmap="RdBu_r", vmin=-lim, vmax=lim)
    ax.contour(g, g, true, levels=[0], colors="k", linestyles="--", linewidths=1.2)
    ax.contour(g, g, fit, levels=[0], colors="gold", linewidths=1.5)
    ax.set_title(title, fontsize=9)
    ax.set_xticks([-1, 0, 1]); ax.set_yticks([-1, 0, 1])
    plt.colorbar(im, ax=ax, fraction=0.046, pad=0.04).set_label("fitted SDF", fontsize=8)


def scores(ax, table, shape, pe):
    t = table[(table["shape"] == shape) & (table["pe"] == pe)]
    colors = np.where(t["observed"], "tab:green", np.where(t["liftable"], "tab:gray", "lightgray"))
    pos = np.arange(len(t))
    ax.bar(pos, t["score"], color=colors)
    ax.hlines(t["threshold"], pos - 0.4, pos + 0.4, color="tab:red", lw=1.5)
    handles = [Patch(color="tab:green", label="observed"), Patch(color="tab:gray", label="liftable, not observed"),
               Patch(color="lightgray", label="not liftable"),
               Line2D([], [], color="tab:red", lw=1.5, label="threshold (seed noise)")]
    ax.legend(handles=handles, fontsize=7, loc="upper center", ncol=2, frameon=False)
    ax.set_ylim(0, 1.25 * t["score"].max())
    ax.set_xticks(pos, t["element"], rotation=90, fontsize=7)
    ax.set_ylabel("score  ||ρᵀΦρ − Φ|| / ||Φ||", fontsize=8)
    ax.set_title(f"readout of the triangle, TriAxisPE ({t['score'].size} candidates)", fontsize=9)


def main(run_dir, out):
    table = pd.read_csv(f"{run_dir}/readout.csv")
    table = table[table["observable"] == "gram"]
    tri = sf.Ensemble.load(f"{run_dir}/ensemble_triaxis.pt")
    dy = sf.Ensemble.load(f"{run_dir}/ensemble_dyadic.pt")
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.4), gridspec_kw={"width_ratios": [1, 1, 1.4]})
    field(axes[0], tri, "triangle", "triangle, TriAxisPE (gold: fit, dashed: true)")
    field(axes[1], dy, "square", "square, DyadicAxisPE (gold: fit, dashed: true)")
    scores(axes[2], table, "triangle", "triaxis")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main(*sys.argv[1:3])
