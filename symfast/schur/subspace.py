"""Subspace or Schur coupling? Where the removed Schur directions sit relative to task activity.

The paper leaves open whether an ablation is harmless because it avoids the activity
directions the readout uses ("subspace" explanation) or because of the Schur coupling it
removes ("coupling" explanation). For each single-block ablation, with
dW = W - W~ = Q (T - T~) Q^T the removed part of W and h the hidden states of the full
model on held-out task inputs, `removed_direction_projections` measures
    pc_overlap        ||dW P_pc||_F / ||dW||_F, P_pc the top principal components of h
                      (fewest explaining `pc_var` of its variance): how much of the removed
                      operator acts on the dominant activity directions;
    readout_overlap   ||P_V dW||_F / ||dW||_F, P_V the projector onto the row space of the
                      readout V: how much of what it writes the readout sees;
    manifold_overlap  ||dW h||_F / (||dW||_F ||h||_F) over all visited states: the removed
                      operator on the task-conditioned activity itself (1/sqrt(H) for
                      isotropic states, up to ||dW||_2 / ||dW||_F);
    removed_rel_T     ||T - T~||_F / ||T||_F (the removed Schur mass).
`damage_predictors` ranks which of these predicts dFVU: Spearman correlations across
(task, seed, block) rows with bootstrap intervals.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from symfast.schur.rnn.tasks import EVAL_SEED
from symfast.schur.blocks import BLOCKS, ablate, schur_blocks, subset_name

__all__ = ["removed_direction_projections", "damage_predictors", "PREDICTORS"]

PREDICTORS = ("removed_rel_T", "pc_overlap", "readout_overlap", "manifold_overlap")


def removed_direction_projections(model, task, alpha: float = 0.9, n_eval: int = 256, eval_seed: int = EVAL_SEED,
                                  pc_var: float = 0.9) -> pd.DataFrame:
    """One row per single block (subset "-T_RR", "-T_C->R", "-T_CC"): the overlaps above.

    Args:
        model: a TanhRNN (recurrent_weight(dtype), readout [O, H], forward(x, return_hidden)).
        task: its task; the hidden states come from `n_eval` held-out sequences (`eval_seed`).
        alpha: sector cut. pc_var: variance fraction the principal subspace explains.

    Returns:
        DataFrame with columns alpha, subset, removed_rel_T, pc_overlap, readout_overlap,
        manifold_overlap, n_pc (NaN overlaps where nothing is removed).
    """
    if not 0 < pc_var <= 1:
        raise ValueError(f"pc_var must be in (0, 1], got {pc_var}")
    with torch.no_grad():
        W = model.recurrent_weight(torch.float64).detach().cpu()
        V = model.readout.detach().cpu().double()
        x, _, _ = task.sample(n_eval, eval_seed)
        _, hs = model(x, return_hidden=True)
    h = hs.reshape(-1, hs.shape[-1]).double()  # [B T, H]
    hc = h - h.mean(0)
    _, sv, Vt = torch.linalg.svd(hc, full_matrices=False)
    frac = torch.cumsum(sv ** 2, 0) / (sv ** 2).sum().clamp_min(1e-300)
    n_pc = int((frac < pc_var).sum()) + 1
    P_pc = Vt[:n_pc].T  # [H, n_pc]
    Qv, _ = torch.linalg.qr(V.T)  # [H, O]: row space of V
    sb = schur_blocks(W, alpha=alpha)
    singles = [(b,) for b in BLOCKS]
    W_ab, mass = ablate(sb, singles)
    rows = []
    for k, sub in enumerate(singles):
        dW = W - W_ab[k]
        nrm = float(dW.norm())
        ok = nrm > 1e-12 * float(W.norm())
        rows.append({"alpha": float(alpha), "subset": subset_name(sub), "removed_rel_T": mass[k]["removed_rel_T"],
                     "pc_overlap": float((dW @ P_pc).norm()) / nrm if ok else np.nan,
                     "readout_overlap": float((Qv.T @ dW).norm()) / nrm if ok else np.nan,
                     "manifold_overlap": float((h @ dW.T).norm()) / (nrm * float(h.norm())) if ok else np.nan,
                     "n_pc": n_pc})
    return pd.DataFrame(rows)


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman rho (Pearson correlation of average ranks); NaN when either side is constant."""
    from scipy.stats import rankdata
    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    return float(np.corrcoef(rankdata(a), rankdata(b))[0, 1])


def _bootstrap_spearman(a: np.ndarray, b: np.ndarray, rng: np.random.Generator, n_boot: int) -> list:
    """The finite `_spearman(a[i], b[i])` over n_boot resamples i = rng.integers(0, n, n), in draw order.

    Bit for bit what calling `_spearman` once per resample gives, batched: each resample is drawn
    by its own `rng.integers` call (the stream a loop of draws consumes); ranks are computed in two
    batched calls; the correlation repeats `np.corrcoef`'s arithmetic row by row (centre, sums of
    products times 1 / (n - 1), divide by each standard deviation in turn, clip to [-1, 1]).
    Average ranks are half-integers and so is their mean (n + 1) / 2, so every sum is exact and
    the summation order (BLAS in `np.corrcoef`, numpy's here) cannot change a bit.
    """
    from scipy.stats import rankdata
    n = len(a)
    if n_boot == 0 or n < 3:
        return []
    idx = np.stack([rng.integers(0, n, n) for _ in range(n_boot)])  # [n_boot, n]
    ra, rb = a[idx], b[idx]
    ok = (np.ptp(ra, axis=1) != 0) & (np.ptp(rb, axis=1) != 0)  # _spearman's NaN cases: a constant side
    ra, rb = rankdata(ra[ok], axis=1), rankdata(rb[ok], axis=1)
    ra -= ra.mean(axis=1, keepdims=True)
    rb -= rb.mean(axis=1, keepdims=True)
    f = np.true_divide(1, n - 1)
    r = ((ra * rb).sum(axis=1) * f) / np.sqrt((ra * ra).sum(axis=1) * f) / np.sqrt((rb * rb).sum(axis=1) * f)
    r = np.clip(r, -1, 1)
    return [float(v) for v in r if np.isfinite(v)]


def damage_predictors(df: pd.DataFrame, target: str = "dfvu", predictors=PREDICTORS, n_boot: int = 1000,
                      seed: int = 0, by: str | None = None) -> pd.DataFrame:
    """Spearman correlation of each predictor with `target`, with a 95% bootstrap interval.

    Args:
        df: rows (e.g. task x seed x block) holding `target` and the predictor columns. Only
            rows where the target and every predictor are finite are used, so all predictors
            are ranked on the same rows (an ablation that removes nothing, as on a Cayley W,
            has no overlaps and would otherwise favour the removed mass trivially).
        n_boot: bootstrap resamples of the rows. by: optional column to group by (e.g. "task").

    Returns:
        DataFrame: [by,] predictor, n, rho, rho_lo, rho_hi.
    """
    predictors = list(predictors)
    df = df[np.isfinite(df[[target, *predictors]].to_numpy(dtype=float)).all(1)]
    groups = [(None, df)] if by is None else list(df.groupby(by, sort=False))
    rng = np.random.default_rng(seed)
    out = []
    for key, g in groups:
        for p in predictors:
            sel = g[[p, target]].to_numpy(dtype=float)
            n = len(sel)
            rho = _spearman(sel[:, 0], sel[:, 1]) if n else float("nan")
            boots = _bootstrap_spearman(sel[:, 0], sel[:, 1], rng, n_boot if n >= 3 else 0)
            lo, hi = (np.percentile(boots, [2.5, 97.5]) if len(boots) > 10 else (np.nan, np.nan))
            row = {} if by is None else {by: key}
            out.append({**row, "predictor": p, "n": n, "rho": rho, "rho_lo": float(lo), "rho_hi": float(hi)})
    return pd.DataFrame(out)
