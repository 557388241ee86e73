"""Eigenvalues near the sector cut, and how the ablation table moves over a fine alpha grid.

The sectors of "Task-Restricted Symmetries in Recurrent Weight Space" (arXiv 2606.18457) are
R = {|lambda| >= alpha rho(W)} and C; an eigenvalue whose modulus sits near alpha rho changes
sector under a small change of alpha (or of W), and with it the blocks. `near_cut_eigenvalues`
lists them; `alpha_stability` reruns the single-block ablations (the paper's modulus-order
version and the ordering-invariant one, `symfast.schur.invariant`) over a fine alpha grid.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from symfast.schur.ablation import distinct_rollouts
from symfast.schur.blocks import BLOCKS, ablate, schur_blocks, subset_name
from symfast.schur.invariant import invariant_ablate
from symfast.schur.rnn.tasks import EVAL_SEED, Copy, fvu

__all__ = ["near_cut_eigenvalues", "alpha_stability", "ALPHA_GRID"]

ALPHA_GRID = tuple(round(0.85 + 0.01 * i, 2) for i in range(11))  # 0.85, 0.86, ..., 0.95


def near_cut_eigenvalues(W, alpha: float = 0.9, rel: float = 0.02) -> pd.DataFrame:
    """Eigenvalues with ||lambda| - alpha rho| <= rel * rho (rho = spectral radius).

    Args:
        W: [n, n] recurrent matrix. alpha: cut in (0, 1]. rel: relative distance (> 0).

    Returns:
        DataFrame (closest first): re, im, modulus, rel_dist = (|lambda| - alpha rho) / rho
        (signed: >= 0 in R), sector ("R" or "C").
    """
    if not 0 < alpha <= 1 or not rel > 0:
        raise ValueError(f"alpha must be in (0, 1] and rel > 0, got {alpha}, {rel}")
    Wt = torch.as_tensor(W).detach().cpu().double()
    if Wt.ndim != 2 or Wt.shape[0] != Wt.shape[1]:
        raise ValueError(f"W must be [n, n], got {list(Wt.shape)}")
    ev = np.linalg.eigvals(Wt.numpy())
    mod = np.abs(ev)
    rho = float(mod.max())
    d = (mod - alpha * rho) / rho if rho > 0 else np.zeros_like(mod)
    sel = np.abs(d) <= rel
    out = pd.DataFrame({"re": ev.real[sel], "im": ev.imag[sel], "modulus": mod[sel], "rel_dist": d[sel],
                        "sector": np.where(d[sel] >= 0, "R", "C")})
    return out.iloc[np.argsort(np.abs(out["rel_dist"].to_numpy()), kind="stable")].reset_index(drop=True)


def alpha_stability(model, task, alphas=ALPHA_GRID, n_eval: int = 64, eval_seed: int = EVAL_SEED,
                    backend: str = "auto") -> pd.DataFrame:
    """Per alpha: the sector size and each single-block effect, paper (modulus order) and invariant.

    Args:
        model: TanhRNN-like (recurrent_weight(dtype), input_weight [H, I], readout [O, H]).
        task: its task (`n_eval` held-out sequences from `eval_seed`; fewer than the main table's 256
            keep the grid cheap: 6 rollouts per alpha plus one).
        alphas: the grid (default 0.85, 0.86, ..., 0.95).

    Returns:
        DataFrame: alpha, n_R, subset, dfvu, dfvu_inv (+ replay_acc, replay_acc_inv on copy),
        and per subset over the grid dfvu_range / dfvu_inv_range (max - min).
    """
    alphas = [float(a) for a in alphas]
    if not alphas or any(not 0 < a <= 1 for a in alphas) or n_eval < 1:
        raise ValueError(f"alphas must be a non-empty list in (0, 1] and n_eval >= 1, got {alphas}, {n_eval}")
    with torch.no_grad():
        W = model.recurrent_weight(torch.float64).detach().cpu()
    x, y, m = task.sample(n_eval, eval_seed)
    singles = [(b,) for b in BLOCKS]
    mats, nR = [W], []
    for a in alphas:
        sb = schur_blocks(W, alpha=a)
        nR.append(sb.n_R)
        mats += [ablate(sb, singles)[0], invariant_ablate(sb, singles)[0]]
    # neighbouring alphas with the same sectors give the same matrices: each is rolled out and scored once
    yh, inv = distinct_rollouts(model, torch.cat([W[None]] + mats[1:]), x, backend=backend)
    f = fvu(yh.double(), y.double(), m)[inv]
    acc = task.replay_accuracy(yh, y)[inv] if isinstance(task, Copy) else None
    rows = []
    for i, a in enumerate(alphas):
        for j, s in enumerate(singles):
            p, q = 1 + 6 * i + j, 1 + 6 * i + 3 + j
            r = {"alpha": a, "n_R": nR[i], "subset": subset_name(s), "dfvu": float(f[p] - f[0]),
                 "dfvu_inv": float(f[q] - f[0])}
            if acc is not None:
                r["replay_acc"], r["replay_acc_inv"] = float(acc[p]), float(acc[q])
            rows.append(r)
    df = pd.DataFrame(rows)
    rng = df.groupby("subset")[["dfvu", "dfvu_inv"]].agg(lambda v: float(v.max() - v.min()))
    return df.merge(rng.add_suffix("_range"), left_on="subset", right_index=True)
