"""Schur block ablations of a trained tanh RNN, with the controls that make them readable.

`schur_ablation(model, task)` rolls out, on one held-out batch, the trained model and, for each
alpha: the 7 block-ablated variants `W~ = Q (B + N~) Q^T` of "Task-Restricted Symmetries in
Recurrent Weight Space" (arXiv 2606.18457) in the modulus order; the same ablations in 1 + n_orders
other within-sector orders (`symfast.schur.orderings`); the ordering-invariant variants
(`symfast.schur.invariant`); and equal-norm random controls anywhere, in the ablated blocks' Schur
pattern and outside it (`symfast.schur.controls`). All variants go through one fused rollout call
(symfast.rnn_rollout). U and V stay fixed (the paper's default); `refit=True` adds a ridge refit of V
on the ablated dynamics as a separate column.

Other recurrent families (`symfast.schur.families`: linear state-space models, GRU, LSTM) go through
the same function: a model that defines `rollout_recurrent(W [S, H, H] float64, x, return_hidden)`
rolls out its own variants (every other weight fixed), and `recurrent_weight(dtype)` names the matrix
that is ablated (for the gated cells, one gate's slice of weight_hh).

Columns of the returned table (one row per alpha x subset):
    alpha, subset, n_blocks (how many blocks removed), n_R, n_near_cut (eigenvalues within
    `margin * rho` of the cut), fvu, dfvu = fvu - fvu(full) (modulus order, the paper's),
    removed_mass (||T - T~||_F), removed_rel_N (/ ||N||_F), removed_rel_T (/ ||T||_F), sensitivity
    (dfvu / removed_rel_T), nonadditivity (dfvu - sum of the single-block dfvu's in the subset),
    dep_rel (departure from normality of W / ||W||_F), dep_2x2_frac (share of it inside the 2x2
    blocks, never ablated), failed_swaps, d_D (rollout distance to the full model), noop_tol and
    stabiliser (no-op when removed_rel_T <= noop_tol, `blocks.noop_tolerance`; else eps-stabiliser
    when d_D <= epsilon, else fragile);
  over within-sector orderings (NaN at alphas without them):
    n_orders, order_failed_swaps, dfvu_order_min / _median / _max, dfvu_order_spread (max - min),
    order_dependent (`orderings.order_spread`'s rule; for copy also on the replay-accuracy drop);
    modulus_ties_R / _C (neighbouring blocks of a sector with moduli within
    `orderings.MODULUS_TIE_TOL` rho: where the paper's modulus order is ambiguous) and
    paper_order_ambiguous (1 when a sector this ablation touches has such a tie and the effect is
    order-dependent: only then does the paper's own rule leave the number open);
  the invariant variant:
    removed_rel_T_inv, fvu_inv, dfvu_inv, d_D_inv, stabiliser_inv, eigvec_cond_R, eigvec_cond_C;
  controls (n_random draws each, same Frobenius norm as the removed mass):
    rand_dfvu_mean / rand_dfvu_std / rand_ratio (anywhere: rand_dfvu_mean / dfvu),
    rand_pattern_dfvu_mean, rand_outside_dfvu_mean (NaN at alphas without them);
  copy task also: replay_acc, replay_acc_inv, replay_order_min / _max, rand_replay_acc,
    rand_pattern_replay_acc, rand_outside_replay_acc; with refit also fvu_refit.
"""
from __future__ import annotations

import functools
import math

import numpy as np
import pandas as pd
import torch

from symfast._progress import Progress, reporter
from symfast.ops.rnn_rollout import rnn_rollout
from symfast.schur.rnn.tasks import EVAL_SEED, Copy, Task, fvu
from symfast.schur.blocks import (NOOP_C, SUBSETS, ablate, departure_from_normality, noop_tolerance, schur_blocks,
                                  subset_name)
from symfast.schur.controls import CONTROLS, pattern_perturbations
from symfast.schur.invariant import invariant_ablate
from symfast.schur.orderings import modulus_ties, order_spread, within_sector_orderings
from symfast.schur.threads import kernel_threads

__all__ = ["schur_ablation", "summarize", "rollout_distance", "rollout_variants", "distinct_rollouts", "ALPHAS",
           "EPSILON"]

ALPHAS = (0.85, 0.9, 0.95)
EPSILON = 0.05  # default tolerance on d_D: 5% of the target variance
ACC_FLOOR = 0.01  # replay-accuracy spreads below 1 point are never "order-dependent"


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


def rollout_variants(model, W: torch.Tensor, x: torch.Tensor, return_hidden: bool = False, backend: str = "auto"):
    """Outputs of `model` with its ablated matrix replaced by each of W: [S, H, H] (float64), x [B, T, I].

    A model with `rollout_recurrent` (the families in `symfast.schur.families`) rolls out itself, in
    float64; a tanh RNN goes through the fused float32 kernel `rnn_rollout` with its U and V, once
    per distinct float32 matrix (`distinct_rollouts`; the outputs are those of every matrix).

    Returns:
        y [S, B, T, O] (and h [S, B, T, H] with return_hidden).
    """
    out, inv = distinct_rollouts(model, W, x, return_hidden=return_hidden, backend=backend)
    return tuple(o[inv] for o in out) if return_hidden else out[inv]


def distinct_rollouts(model, W: torch.Tensor, x: torch.Tensor, return_hidden: bool = False, backend: str = "auto"):
    """`rollout_variants` without repeats: (y [D, B, T, O] (and h), inv [S]) with y[inv] the outputs of W [S, H, H].

    The rollout kernels compute every sequence of every variant alone, in a fixed order, so equal
    float32 matrices (every ablation of a normal W, a control whose pattern is empty, neighbouring
    alphas with the same sectors) give equal outputs, and each distinct matrix is rolled out once
    (compared bit for bit: -0.0 and 0.0 apart). The reference backend (a batched torch loop, whose
    rounding may depend on the batch) and models with their own `rollout_recurrent` roll out every
    matrix (inv = 0..S-1).
    """
    if W.ndim != 3 or W.shape[1] != W.shape[2]:
        raise ValueError(f"W must be [S, H, H], got {list(W.shape)}")
    every = torch.arange(W.shape[0])
    own = getattr(model, "rollout_recurrent", None)
    if own is not None:
        return own(W, x, return_hidden=return_hidden), every
    with torch.no_grad():
        U = model.input_weight.detach().cpu().float()
        V = model.readout.detach().cpu().float()
    Wf = W.detach().float().contiguous()
    if backend == "reference":
        with kernel_threads():
            return rnn_rollout(Wf, U, V, x, return_hidden=return_hidden, backend=backend), every
    uniq, inv = torch.unique(Wf.reshape(len(Wf), -1).view(torch.int32), dim=0, return_inverse=True)
    with kernel_threads():
        out = rnn_rollout(uniq.view(torch.float32).reshape(-1, *Wf.shape[1:]), U, V, x,
                          return_hidden=return_hidden, backend=backend)
    return out, inv


def _ridge_readout(hs: torch.Tensor, y: torch.Tensor, m: torch.Tensor, lam: float) -> torch.Tensor:
    """V: [O, H] minimising sum_mask ||V h - y||^2 + lam ||V||^2 (hs [B, T, H], y, m [B, T, O])."""
    sel = m[..., 0] > 0
    Hm, Ym = hs[sel].double(), y[sel].double()
    G = Hm.T @ Hm + lam * torch.eye(Hm.shape[1], dtype=torch.float64)
    return torch.linalg.solve(G, Hm.T @ Ym).T.to(hs.dtype)


def schur_ablation(model, task: Task, alpha=0.9, n_eval: int = 256, eval_seed: int = EVAL_SEED,
                   n_random: int = 4, seed: int = 0, refit: bool = False, ridge: float = 1e-3,
                   margin: float = 0.01, tie_tol: float = 1e-9, epsilon: float = EPSILON,
                   backend: str = "auto", n_orders: int = 8, detail_alphas=None,
                   noop_c: float = NOOP_C, progress: Progress = False) -> pd.DataFrame:
    """All 8 Schur block ablations of `model` on `task`, with orderings, invariant variants and controls.

    Args:
        model: a symfast.schur.rnn.TanhRNN (or anything with recurrent_weight(dtype), input_weight [H, I]
            and readout [O, H]), or a model of `symfast.schur.families` (see `rollout_variants`).
        task: the task it was trained on (its held-out batch comes from `eval_seed`).
        alpha: sector cut, or a sequence of cuts (an alpha sweep, e.g. ALPHAS).
        n_eval: held-out sequences; n_random: random draws per ablation and control; seed: their seed
            (also seeds the random within-sector orders).
        refit: also report fvu with V refit by ridge regression (penalty `ridge`) on a
            separate batch of the ablated dynamics.
        margin: eigenvalues within margin * rho of the alpha * rho cut are counted in n_near_cut.
        epsilon: tolerance on d_D; a subset with d_D <= epsilon is an eps-stabiliser on the
            task's distribution, else fragile.
        backend: passed to rnn_rollout ("auto", "cpu", "reference").
        n_orders: random within-sector orders beside the modulus and reversed orders (>= 0).
        detail_alphas: the alphas at which the orderings and the pattern controls run (None: all).
        noop_c: safety factor of the no-op tolerance (`blocks.noop_tolerance`).
        progress: False (default), True (a tqdm bar over the alphas) or a callable given a line
            about every tenth of them (`symfast._progress`).

    Returns:
        pandas DataFrame, one row per (alpha, subset); see the module docstring.
    """
    if isinstance(model, torch.nn.RNNBase):  # a bare torch module: say how to read it, not AttributeError
        adapter = ("symfast.schur.families.GatedRNN.from_torch(rnn, readout, gate=...)"
                   if isinstance(model, (torch.nn.GRU, torch.nn.LSTM)) else
                   "symfast.schur.rnn.TanhRNN.from_torch(rnn, readout) (tanh, bias=False)")
        raise TypeError(f"schur_ablation takes a symfast RNN; wrap your torch.nn.{type(model).__name__} with its "
                        f"readout: {adapter}")
    alphas = [float(alpha)] if np.isscalar(alpha) else [float(a) for a in alpha]
    if n_random < 0 or n_eval < 1 or n_orders < 0:
        raise ValueError(f"n_random, n_orders must be >= 0 and n_eval >= 1, got {n_random}, {n_orders}, {n_eval}")
    if not (math.isfinite(epsilon) and epsilon >= 0):
        raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon}")
    detail = set(alphas if detail_alphas is None else [float(a) for a in detail_alphas])
    with torch.no_grad():
        W = model.recurrent_weight(torch.float64).detach().cpu()
    # the precision W is held in (float32 parameters; a Cayley W formed in float64 from P: float64)
    tol = noop_tolerance(W, noop_c)
    x, y, m = task.sample(n_eval, eval_seed)
    if refit:
        xf, yf, mf = task.sample(n_eval, eval_seed + 1)
    g = torch.Generator().manual_seed(int(seed))
    is_copy = isinstance(task, Copy)
    S = len(SUBSETS)
    rows = []
    bar = reporter(progress, "symfast.schur").bar(len(alphas), "schur ablation", unit="alpha")
    for a in alphas:
        sb = schur_blocks(W, alpha=a, tie_tol=tie_tol, margin=margin)
        W_ab, mass = ablate(sb, SUBSETS)
        W_inv, mass_inv = invariant_ablate(sb, SUBSETS)
        dep = departure_from_normality(sb)
        ties_R, ties_C = modulus_ties(sb)
        parts = {"paper": W_ab, "inv": W_inv[1:]}
        if a in detail:
            orders = within_sector_orderings(sb, n_orders, seed)[1:]
            parts["orders"] = torch.cat([ablate(o, SUBSETS[1:])[0] for _, o in orders])
        ctl = [pattern_perturbations(sb, SUBSETS[k], mass[k]["removed_mass"], n_random, g) for k in range(1, S)]
        kinds = CONTROLS if a in detail else ("anywhere",)
        for c in kinds:
            parts[c] = torch.cat([d[c] for d in ctl]) if n_random else W.new_zeros(0, *W.shape)
        sizes = {k: len(v) for k, v in parts.items()}
        if refit:
            _, hs_fit = rollout_variants(model, W_ab, xf, return_hidden=True, backend=backend)
            _, hs_ev = rollout_variants(model, W_ab, x, return_hidden=True, backend=backend)
        # each metric is computed per distinct rollout (a per-variant reduction: the same numbers) and
        # spread back to every variant
        yh, inv = distinct_rollouts(model, torch.cat(list(parts.values())), x, backend=backend)
        yd, y64 = yh.double(), y.double()  # converted once for FVU and d_D
        f_all = fvu(yd, y64, m)[inv]
        acc_all = task.replay_accuracy(yh, y)[inv] if is_copy else None
        dd_all = rollout_distance(yd, yd[inv[0]], y64, m)[inv]
        off, sl = 0, {}
        for k, nk in sizes.items():
            sl[k] = slice(off, off + nk)
            off += nk
        f0 = float(f_all[0])

        def per(kind, what):  # [S - 1, draws] of a metric for a part (drawn per non-empty subset)
            v = (f_all if what == "fvu" else acc_all if what == "acc" else dd_all)[sl[kind]]
            return v.view(S - 1, -1)

        f_ab = f_all[sl["paper"]]
        f_ord = f_all[sl["orders"]].view(-1, S - 1) if "orders" in sl else None
        acc_ord = acc_all[sl["orders"]].view(-1, S - 1) if "orders" in sl and is_copy else None
        single = {SUBSETS[k][0]: float(f_ab[k]) - f0 for k in range(1, S) if len(SUBSETS[k]) == 1}
        for k, sub in enumerate(SUBSETS):
            d = float(f_ab[k]) - f0
            rel_t = mass[k]["removed_rel_T"]
            dd = float(dd_all[k])
            row = {"alpha": a, "subset": subset_name(sub), "n_blocks": len(sub), "n_R": sb.n_R,
                   "n_near_cut": int(sb.near_cut.sum()), "fvu": float(f_ab[k]), "dfvu": d,
                   **{kk: v for kk, v in mass[k].items() if kk != "subset"},
                   "sensitivity": d / rel_t if rel_t > 0 else math.nan,
                   "nonadditivity": d - sum(single[b] for b in sub) if len(sub) > 1 else 0.0,
                   "dep_rel": dep["dep_rel"], "dep_2x2_frac": dep["dep_2x2"] / dep["dep"] if dep["dep"] > 0 else 0.0,
                   "failed_swaps": sb.failed_swaps, "d_D": dd, "noop_tol": tol,
                   "stabiliser": _classify(rel_t, dd, tol, epsilon)}
            inv = mass_inv[k]
            fi = f0 if k == 0 else float(f_all[sl["inv"]][k - 1])
            ddi = 0.0 if k == 0 else float(dd_all[sl["inv"]][k - 1])
            row.update({"removed_rel_T_inv": inv["removed_rel_T_inv"], "fvu_inv": fi, "dfvu_inv": fi - f0,
                        "d_D_inv": ddi, "stabiliser_inv": _classify(inv["removed_rel_T_inv"], ddi, tol, epsilon),
                        "eigvec_cond_R": inv["eigvec_cond_R"], "eigvec_cond_C": inv["eigvec_cond_C"]})
            row.update(_order_columns(k, d, f_ord, acc_ord, f0, acc_all, float(acc_all[k]) if is_copy else 0.0,
                                      orders if "orders" in sl else None))
            # the paper's own order is ambiguous for this ablation only where a sector it touches has
            # tied moduli (-T_C->R is the same in every order) and the effect moves with the order
            tied = ("T_RR" in sub and ties_R > 0) or ("T_CC" in sub and ties_C > 0)
            row.update({"modulus_ties_R": ties_R, "modulus_ties_C": ties_C,
                        "paper_order_ambiguous": float(tied and bool(row["order_dependent"]))
                        if row["n_orders"] else math.nan})
            for c, name in (("anywhere", "rand"), ("pattern", "rand_pattern"), ("outside", "rand_outside")):
                have = k > 0 and n_random and c in sl
                rd = per(c, "fvu")[k - 1] - f0 if have else None
                row[f"{name}_dfvu_mean"] = float(rd.mean()) if have else (0.0 if k == 0 else math.nan)
                if c == "anywhere":
                    row["rand_dfvu_std"] = float(rd.std()) if have and n_random > 1 else 0.0
                    row["rand_ratio"] = float(rd.mean()) / d if have and d != 0 else math.nan
                if is_copy:
                    row[f"{name}_replay_acc"] = (float(per(c, "acc")[k - 1].mean()) if have else
                                                 float(acc_all[k]) if k == 0 else math.nan)
            if is_copy:
                row["replay_acc"] = float(acc_all[k])
                row["replay_acc_inv"] = float(acc_all[0] if k == 0 else acc_all[sl["inv"]][k - 1])
            if refit:
                Vr = _ridge_readout(hs_fit[k], yf, mf, ridge)
                row["fvu_refit"] = float(fvu((hs_ev[k] @ Vr.T).double(), y.double(), m))
            rows.append(row)
        bar.update()
    bar.close()
    return pd.DataFrame(rows)


def _classify(rel_t: float, d_D: float, tol: float, epsilon: float) -> str:
    return "no-op" if rel_t <= tol else "eps-stabiliser" if d_D <= epsilon else "fragile"


def _order_columns(k: int, d: float, f_orders, acc_orders, f0: float, acc_all, acc_k, orders) -> dict:
    """The spread of subset k's effect over within-sector orderings (the modulus order first).

    f_orders, acc_orders: [n_other_orders, S - 1] FVU and replay accuracy of the other orderings' ablations.
    """
    nan = math.nan
    is_copy = acc_all is not None
    if orders is None:
        return {"n_orders": 0, "order_failed_swaps": nan, "dfvu_order_min": nan, "dfvu_order_median": nan,
                "dfvu_order_max": nan, "dfvu_order_spread": nan, "order_dependent": nan,
                **({"replay_order_min": nan, "replay_order_max": nan} if is_copy else {})}
    out = {"n_orders": 1 + len(orders), "order_failed_swaps": sum(o.failed_swaps for _, o in orders)}
    if k == 0:
        out.update({"dfvu_order_min": 0.0, "dfvu_order_median": 0.0, "dfvu_order_max": 0.0,
                    "dfvu_order_spread": 0.0, "order_dependent": False})
        if is_copy:
            out["replay_order_min"] = out["replay_order_max"] = float(acc_all[0])
        return out
    sp = order_spread([d] + [float(v) - f0 for v in f_orders[:, k - 1]])
    out.update({"dfvu_order_min": sp["min"], "dfvu_order_median": sp["median"], "dfvu_order_max": sp["max"],
                "dfvu_order_spread": sp["spread"], "order_dependent": sp["order_dependent"]})
    if is_copy:
        acc = [acc_k] + [float(v) for v in acc_orders[:, k - 1]]
        drop = order_spread([float(acc_all[0]) - v for v in acc], effect_floor=ACC_FLOOR)
        out.update({"replay_order_min": min(acc), "replay_order_max": max(acc),
                    "order_dependent": sp["order_dependent"] or drop["order_dependent"]})
    return out


@functools.lru_cache(maxsize=None)
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
