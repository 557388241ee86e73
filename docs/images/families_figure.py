"""Draw a figure of several recurrent families side by side from `symfast schur --family ...` runs:
every converged model's eigenvalues of the ablated matrix and its coupling-block masses
(`symfast.schur.plots.plot_spectra_and_masses`), one column per family, construction and gate.

Usage: python docs/images/families_figure.py OUT.png ALPHA RUN_DIR [RUN_DIR ...]

Each RUN_DIR is a run's --out directory: its models come from RUN_DIR/ckpt, and which of them converged
from RUN_DIR/schur_<family>_models.csv (the ablated gates listed there are drawn).
"""
import glob
import os
import sys

import pandas as pd
import torch

from symfast.schur import plots, schur_blocks
from symfast.schur.blocks import BLOCKS
from symfast.schur.families.checkpoint import load_family_checkpoint


def groups_of(run: str, alpha: float) -> dict:
    groups = {}
    for facts in glob.glob(os.path.join(run, "schur_*_models.csv")):
        f = pd.read_csv(facts)
        for _, r in f[f.converged].iterrows():
            path = os.path.join(run, "ckpt", f"{r.family}_{r.task}_{r.construction}_H{r.hidden}_s{r.seed}.pt")
            model = load_family_checkpoint(path)[0]
            view = model if r.gate == "A" else model.at_gate(r.gate[-1])
            sb = schur_blocks(view.recurrent_weight(torch.float64), alpha=alpha)
            norms = sb.block_norms()
            mass = {b: norms[b] / norms["T"] if norms["T"] > 0 else 0.0 for b in BLOCKS}
            label = f"{r.task} / {r.family} {r.construction}, {r.gate}"
            groups.setdefault(label, []).append((sb.eigvals.numpy(), sb.rho, mass))
    return groups


if __name__ == "__main__":
    out, alpha, runs = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
    groups = {}
    for run in runs:
        groups.update(groups_of(run, alpha))
    plots.plot_spectra_and_masses(groups, alpha, out)
    print(f"wrote {out}: " + ", ".join(f"{k} ({len(v)} models)" for k, v in groups.items()))
