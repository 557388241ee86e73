"""Bridge to the neural-field readout: the matching observable next to the Gram scores.

The Gram W1^T W1 forgets which neuron is which; the matching observable asks the
stronger, layerwise question directly: is W1 rho(g) = P W1 for a
signed permutation P of the hidden neurons? `compare_observables` puts both side
by side per element, for one shape's models of an `Ensemble`, so the readout can
check which one separates true from false symmetries better.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from symfast.layerwise.matching import matching_scores

__all__ = ["first_layer", "compare_observables", "separation"]


def first_layer(ensemble, idx=None, with_bias: bool = False):
    """Paper-convention first layers of an Ensemble: W1 [M, H, d] (and b1 [M, H] with with_bias)."""
    w = ensemble.weights[0] if idx is None else ensemble.weights[0][torch.as_tensor(list(idx))]
    W1 = w.detach().double().transpose(1, 2)
    if not with_bias:
        return W1
    b = ensemble.biases[0] if idx is None else ensemble.biases[0][torch.as_tensor(list(idx))]
    return W1, b.detach().double()


def _gram_scores(W1: torch.Tensor, rho: torch.Tensor):
    """Per-model and ensemble-mean Gram scores: ([M, G], [G])."""
    G = W1.transpose(1, 2) @ W1  # [M, d, d]
    t = torch.einsum("eji,mjk,ekl->meil", rho, G, rho) - G[:, None]
    per = t.flatten(2).norm(dim=2) / G.flatten(1).norm(dim=1)[:, None]
    Gm = G.mean(0)
    tm = torch.einsum("eji,jk,ekl->eil", rho, Gm, rho) - Gm
    return per, tm.flatten(1).norm(dim=1) / Gm.norm()


def compare_observables(ensemble, shape: str, elements, modes=("sign", "scale"), with_bias: bool = True):
    """Matching vs Gram scores for one shape's models, one row per exactly liftable element.

    Args:
        ensemble: a `symfast.Ensemble` (weights[0]: [B, d, H]).
        shape: shape name; its models are `ensemble.indices(shape)`; its group gives "true".
        elements: candidate O(2) elements (e.g. `sf.dihedral(6)`); non-liftable ones are skipped.
        modes: matching families ("sign" = signed permutations; "scale" = the ReLU
            hidden action, positively scaled permutations; "perm").
        with_bias: also report matching on [W1 | b1] (a layerwise action must fix b1 too).

    Returns:
        DataFrame with element, true_symmetry, gram_model (mean per-model Gram score),
        gram_ensemble (score of the ensemble-mean Gram), match_<mode> (mean per-model matching
        residual) and its std, match_<mode>_bias, and match_<mode>_init: the same score for freshly
        initialised first layers (an element-specific null: lifts with fixed points score lower
        even at init).
    """
    from symfast.readout.shapes import by_name

    idx = ensemble.indices(shape)
    group = by_name(shape).group
    lifts = {g.name: ensemble.pe.lift(g) for g in elements}
    lifts = {k: v for k, v in lifts.items() if v is not None}
    if not lifts:
        raise ValueError("no candidate element is exactly liftable by this encoding")
    W1, b1 = first_layer(ensemble, idx, with_bias=True)
    rho = torch.as_tensor(np.stack(list(lifts.values())))
    gm, ge = _gram_scores(W1, rho)
    names = list(lifts)
    df = pd.DataFrame({"element": names, "true_symmetry": [n in group for n in names],
                       "gram_model": gm.mean(0).numpy(), "gram_model_std": gm.std(0).numpy(),
                       "gram_ensemble": ge.numpy()})
    from symfast.readout.training import init_weights

    w0, _ = init_weights([1000 + i for i in range(len(idx))], [ensemble.pe.dim, W1.shape[1], 1], torch.float64)
    for mode in modes:
        s = matching_scores(W1, lifts, layout="HD", mode=mode)
        df[f"match_{mode}_init"] = matching_scores(w0[0], lifts, layout="DH", mode=mode).mean
        df[f"match_{mode}"] = s.mean
        df[f"match_{mode}_std"] = s.std
        if with_bias:
            df[f"match_{mode}_bias"] = matching_scores(W1, lifts, layout="HD", mode=mode, biases=b1).mean
    return df


def separation(df: pd.DataFrame, column: str, spread: str | None = None, n_models: int | None = None) -> float:
    """How well a score column separates true from false symmetries (identity excluded).

    Without `spread`: (min over false - max over true) / max over false (> 0 separates; scale-free).
    With `spread` (a per-model std column) and n_models: the same gap in units of the standard error
    of the mean score, (min false - max true) / (max std / sqrt(n_models)).
    """
    d = df[df["element"] != "r0"]
    t, f = d.loc[d["true_symmetry"], column], d.loc[~d["true_symmetry"], column]
    if t.empty or f.empty:
        return float("nan")
    gap = float(f.min() - t.max())
    if spread is None:
        return gap / float(f.max())
    se = float(d[spread].max()) / max(n_models or 1, 1) ** 0.5
    return gap / se if se > 0 else float("inf")
