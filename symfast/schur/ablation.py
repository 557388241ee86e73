"""Schur block ablations of a trained tanh RNN, with the controls that make them readable.

`schur_ablation(model, task)` rolls out, on one held-out batch, the trained model, the
7 block-ablated variants `W~ = Q (B + N~) Q^T` (symfast.schur), and for every ablation
`n_random` random perturbations of W with the same Frobenius norm (the control that
tells whether a dFVU is specific to the Schur direction); all variants go through one
fused rollout call (symfast.rnn_rollout). U and V stay fixed (the paper's default);
`refit=True` adds a ridge refit of V on the ablated dynamics as a separate column.

Columns of the returned table (one row per alpha x subset):
    alpha, subset, n_blocks (how many blocks removed), n_R, n_near_cut (eigenvalues
    within `margin * rho` of the cut), fvu, dfvu = fvu - fvu(full), removed_mass
    (||T - T~||_F), removed_rel_N (/ ||N||_F), removed_rel_T (/ ||T||_F), sensitivity
    (dfvu / removed_rel_T, dFVU per unit relative Schur mass), rand_dfvu_mean /
    rand_dfvu_std (equal-norm random control), rand_ratio (rand_dfvu_mean / dfvu),
    nonadditivity (dfvu - sum of the single-block dfvu's in the subset), dep_rel
    (departure from normality of W / ||W||_F), dep_2x2_frac (share of it inside the 2x2
    blocks, never ablated), failed_swaps; for the copy task also replay_acc and
    rand_replay_acc; with refit also fvu_refit.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from symfast.ops.rnn_rollout import rnn_rollout
from symfast.schur.rnn.tasks import EVAL_SEED, Copy, Task, fvu
from symfast.schur.blocks import SUBSETS, ablate, departure_from_normality, schur_blocks, subset_name

__all__ = ["schur_ablation", "summarize", "rollout_distance", "ALPHAS", "EPSILON"]

ALPHAS = (0.85, 0.9, 0.95)
EPSILON = 0.05  # default tolerance on d_D: 5% of the target variance


def rollout_distance(y_a: torch.Tensor, y_b: torch.Tensor, y: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """d_D(f_a, f_b) = E_mask||y_a - y_b||^2 / E_mask||y - mean y||^2: [..., B, T, O] -> [...].

    The squared distance between two networks' rollouts on the same held-out task inputs,
    over the scored (masked) entries, in units of the targets' variance, so d_D and FVU
    share a scale (d_D(f, target) = FVU).
    """
    return _sq(y_a - y_b, m) / _var(y, m)


def _sq(d: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    return ((d ** 2) * m).sum((-1, -2, -3))


def _var(y: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    mf = m.to(y.dtype)
    mu = (y * mf).sum((0, 1)) / mf.sum((0, 1)).clamp_min(1)
    return (((y - mu) ** 2) * mf).sum().clamp_min(1e-12)


def _ridge_readout(hs: torch.Tensor, y: torch.Tensor, m: torch.Tensor, lam: float) -> torch.Tensor:
    """V: [O, H] minimising sum_mask ||V h - y||^2 + lam ||V||^2 (hs [B, T, H], y, m [B, T, O])."""
    sel = m[..., 0] > 0
    Hm, Ym = hs[sel].double(), y[sel].double()
    G = Hm.T @ Hm + lam * torch.eye(Hm.shape[1], dtype=torch.float64)
    return torch.linalg.solve(G, Hm.T @ Ym).T.to(hs.dtype)


def schur_ablation(model, task: Task, alpha=0.9, n_eval: int = 256, eval_seed: int = EVAL_SEED,
                   n_random: int = 4, seed: int = 0, refit: bool = False, ridge: float = 1e-3,
                   margin: float = 0.01, tie_tol: float = 1e-9, epsilon: float = EPSILON,
                   backend: str = "auto") -> pd.DataFrame:
    """All 8 Schur block ablations of `model` on `task`, with the equal-norm random control.

    Args:
        model: a symfast.schur.rnn.TanhRNN (or anything with recurrent_weight(dtype), input_weight [H, I]
            and readout [O, H]).
        task: the task it was trained on (its held-out batch comes from `eval_seed`).
        alpha: sector cut, or a sequence of cuts (an alpha sweep, e.g. ALPHAS).
        n_eval: held-out sequences; n_random: random draws per ablation; seed: their seed.
        refit: also report fvu with V refit by ridge regression (penalty `ridge`) on a
            separate batch of the ablated dynamics.
        margin: eigenvalues within margin * rho of the alpha * rho cut are counted in n_near_cut.
        epsilon: tolerance on d_D; a subset with d_D <= epsilon is an eps-stabiliser on the
            task's distribution, else fragile.
        backend: passed to rnn_rollout ("auto", "cpu", "reference").

    Returns:
        pandas DataFrame, one row per (alpha, subset); see the module docstring.
    """
    alphas = [float(alpha)] if np.isscalar(alpha) else [float(a) for a in alpha]
    if n_random < 0 or n_eval < 1:
        raise ValueError(f"n_random must be >= 0 and n_eval >= 1, got {n_random}, {n_eval}")
    if not (math.isfinite(epsilon) and epsilon >= 0):
        raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon}")
    with torch.no_grad():
        W = model.recurrent_weight(torch.float64).detach().cpu()
        U = model.input_weight.detach().cpu().float()
        V = model.readout.detach().cpu().float()
    x, y, m = task.sample(n_eval, eval_seed)
    if refit:
        xf, yf, mf = task.sample(n_eval, eval_seed + 1)
    g = torch.Generator().manual_seed(int(seed))
    rows = []
    for a in alphas:
        sb = schur_blocks(W, alpha=a, tie_tol=tie_tol, margin=margin)
        W_ab, mass = ablate(sb, SUBSETS)
        dep = departure_from_normality(sb)
        S = len(SUBSETS)
        # equal-norm random perturbations for every non-empty subset
        rand = []
        for k in range(1, S):
            for _ in range(n_random):
                G = torch.randn(W.shape, generator=g, dtype=torch.float64)
                rand.append(W + mass[k]["removed_mass"] * G / G.norm())
        allW = torch.cat([W_ab, torch.stack(rand)]) if rand else W_ab
        if refit:
            Wf = W_ab.float()
            _, hs_fit = rnn_rollout(Wf, U, V, xf, return_hidden=True, backend=backend)
            _, hs_ev = rnn_rollout(Wf, U, V, x, return_hidden=True, backend=backend)
        yh = rnn_rollout(allW.float(), U, V, x, backend=backend)  # [S + 7 n_random, B, T, O]
        f = fvu(yh.double(), y.double(), m)
        dd = rollout_distance(yh[:S].double(), yh[0].double(), y.double(), m)
        acc = task.replay_accuracy(yh, y) if isinstance(task, Copy) else None
        f_ab = f[:S]
        f_rand = f[S:].view(S - 1, n_random) if n_random else None
        single = {SUBSETS[k][0]: float(f_ab[k] - f_ab[0]) for k in range(1, S) if len(SUBSETS[k]) == 1}
        for k, sub in enumerate(SUBSETS):
            d = float(f_ab[k] - f_ab[0])
            rel_t = mass[k]["removed_rel_T"]
            row = {"alpha": a, "subset": subset_name(sub), "n_blocks": len(sub), "n_R": sb.n_R,
                   "n_near_cut": int(sb.near_cut.sum()), "fvu": float(f_ab[k]), "dfvu": d, **{
                       kk: v for kk, v in mass[k].items() if kk != "subset"},
                   "sensitivity": d / rel_t if rel_t > 0 else math.nan,
                   "nonadditivity": d - sum(single[b] for b in sub) if len(sub) > 1 else 0.0,
                   "dep_rel": dep["dep_rel"], "dep_2x2_frac": dep["dep_2x2"] / dep["dep"] if dep["dep"] > 0 else 0.0,
                   "failed_swaps": sb.failed_swaps, "d_D": float(dd[k]),
                   "stabiliser": ("no-op" if mass[k]["removed_rel_T"] < 1e-12 else
                                  "eps-stabiliser" if float(dd[k]) <= epsilon else "fragile")}
            if k > 0 and n_random:
                rd = f_rand[k - 1] - f_ab[0]
                row["rand_dfvu_mean"] = float(rd.mean())
                row["rand_dfvu_std"] = float(rd.std()) if n_random > 1 else 0.0
                row["rand_ratio"] = float(rd.mean()) / d if d != 0 else math.nan
            else:
                row["rand_dfvu_mean"], row["rand_dfvu_std"], row["rand_ratio"] = 0.0, 0.0, math.nan
            if acc is not None:
                row["replay_acc"] = float(acc[k])
                row["rand_replay_acc"] = float(acc[S + (k - 1) * n_random: S + k * n_random].mean()) \
                    if k > 0 and n_random else float(acc[k])
            if refit:
                Vr = _ridge_readout(hs_fit[k], yf, mf, ridge)
                row["fvu_refit"] = float(fvu((hs_ev[k] @ Vr.T).double(), y.double(), m))
            rows.append(row)
    return pd.DataFrame(rows)


def _t95(n: int) -> float:
    if n < 2:
        return math.nan
    try:
        from scipy.stats import t
        return float(t.ppf(0.975, n - 1))
    except Exception:  # pragma: no cover
        return 1.96


def summarize(df: pd.DataFrame, by=("task", "construction", "alpha", "subset"),
              values=("fvu", "dfvu", "removed_rel_T", "sensitivity", "rand_dfvu_mean", "replay_acc")) -> pd.DataFrame:
    """Mean over seeds with 95% t-intervals: columns <v>_mean, <v>_lo, <v>_hi and n."""
    by = [b for b in by if b in df.columns]
    values = [v for v in values if v in df.columns]
    out = []
    for key, grp in df.groupby(by, sort=False):
        row = dict(zip(by, key if isinstance(key, tuple) else (key,)))
        row["n"] = len(grp)
        for v in values:
            x = grp[v].to_numpy(dtype=float)
            x = x[np.isfinite(x)]
            mu = float(x.mean()) if len(x) else math.nan
            half = _t95(len(x)) * float(x.std(ddof=1)) / math.sqrt(len(x)) if len(x) > 1 else math.nan
            row[f"{v}_mean"], row[f"{v}_lo"], row[f"{v}_hi"] = mu, mu - half, mu + half
        out.append(row)
    return pd.DataFrame(out)
