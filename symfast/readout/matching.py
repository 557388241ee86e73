"""The matching observable of the readout, next to the Gram scores.

The Gram W1^T W1 forgets which neuron is which; the matching observable asks the
stronger, layerwise question directly: is W1 rho(g) = P W1 for a
signed permutation P of the hidden neurons? `matching_scores` turns first-layer weights (either
layout, optional biases) and exact lifts into per-model normalised residuals, `MatchingScores`.
The kernels live in `symfast.ops.matching`: signed-permutation lifts in one call of
torch.ops.symfast.match_signed_lifts (C++, whole observable per (model, lift) in cache), other
lifts by batched Gram matrices and torch.ops.symfast.match_gram
(`symfast.ops.matching.lift_residuals`); the per-model SciPy reference is
`symfast.ops.matching.reference.matching_scores_reference`. `compare_observables` puts matching
and Gram scores side by side per element, for one shape's models of an `Ensemble`, so the
readout can check which one separates true from false symmetries better.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from symfast.nn.fields import init_weights
from symfast.ops import _dispatch
from symfast.ops.gram import gram
from symfast.ops.gram_scores import gram_scores
from symfast.ops.matching import (MODES, lift_residuals, match_signed_lifts_op, mode_code, resolve_backend,
                                  signed_permutation)

__all__ = ["matching_scores", "MatchingScores", "first_layer", "compare_observables", "separation"]

# Seeds of the freshly initialised first layers that give each element's null at init
# (`compare_observables`'s match_<mode>_init): disjoint from the seeds models are trained with.
INIT_NULL_FIRST_SEED = 1000


@dataclass
class MatchingScores:
    """Result of `matching_scores`.

    Attributes:
        names: element names, one per lift.
        per_model: [M, G] normalised residual min_P ||W1 rho(g) - P W1||_F / ||W1||_F.
        mean: [G] mean over the ensemble; std: [G] standard deviation over it.
        index, scale: [M, G, H] the matching permutation and signs.
    """

    names: list
    per_model: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    index: np.ndarray
    scale: np.ndarray

    def as_dict(self) -> dict:
        return {n: float(v) for n, v in zip(self.names, self.mean)}

    def table(self) -> str:
        rows = [f"{'element':>10}  {'mean':>8}  {'std':>8}"]
        rows += [f"{n:>10}  {m:8.4f}  {s:8.4f}" for n, m, s in zip(self.names, self.mean, self.std)]
        return "\n".join(rows)


def _lifts_to_tensor(lifts, d: int, dtype):
    if isinstance(lifts, dict):
        names, mats = [str(k) for k in lifts], list(lifts.values())
    elif isinstance(lifts, (list, tuple)):
        names, mats = [f"g{i}" for i in range(len(lifts))], list(lifts)
    else:
        arr = np.asarray(lifts.detach().cpu() if isinstance(lifts, torch.Tensor) else lifts)
        arr = arr[None] if arr.ndim == 2 else arr
        names, mats = [f"g{i}" for i in range(arr.shape[0])], list(arr)
    if not mats:
        raise ValueError("lifts is empty")
    out = []
    for name, m in zip(names, mats):
        if m is None:
            raise ValueError(f"lift {name!r} is None (element not liftable); drop it before calling")
        t = torch.as_tensor(np.asarray(m.detach().cpu() if isinstance(m, torch.Tensor) else m), dtype=dtype)
        if t.shape != (d, d):
            raise ValueError(f"lift {name!r} must be [{d}, {d}], got {list(t.shape)}")
        if not torch.isfinite(t).all():
            raise ValueError(f"lift {name!r} has NaN or inf entries")
        out.append(t)
    return names, torch.stack(out)


def matching_scores(weights_first_layer, lifts, layout: str = "auto", biases=None,
                    mode: str = "sign", backend: str = "auto", chunk: int = 32) -> MatchingScores:
    """Matching observable: does W1 rho(g) = P W1 for a signed permutation P?

    For each model m and lift rho(g), the normalised residual
        r_m(g) = min_P ||W1 rho(g) - P W1||_F / ||W1||_F
    over signed permutations P of the hidden neurons (0 = exactly symmetric first layer).
    W1 is [H, d] (paper convention, row = neuron filter). Cost matrices for all M x G
    problems come from one batched matmul.

    Args:
        weights_first_layer: [M, H, d] (paper) or [M, d, H] (fan-in first, symfast's batched
            MLP `weights[0]`), or a single [H, d] / [d, H] matrix; numpy or torch.
        lifts: dict name -> [d, d], a list of [d, d], or a [G, d, d] array of exact lifts.
        layout: "auto" (the axis equal to d is the input axis), "HD" ([M, H, d]) or "DH" ([M, d, H]).
            "auto" raises when H == d.
        biases: optional [M, H] first-layer biases; appended as a column (rho extended by 1).
        mode: "sign" (signed permutations, default), "perm" or "scale".
        backend: assignment backend, "auto" (C++ when built), "cpu" or "reference".
        chunk: models per batched step (bounds memory: chunk x G Gram matrices of [H, H]).

    Returns:
        MatchingScores with per_model [M, G], mean [G], std [G].
    """
    W = weights_first_layer
    W = W.detach() if isinstance(W, torch.Tensor) else torch.as_tensor(np.asarray(W))
    if not W.is_floating_point():
        W = W.double()
    if W.ndim == 2:
        W = W[None]
    if W.ndim != 3:
        raise ValueError(f"weights_first_layer must be [M, H, d] or [M, d, H], got {list(W.shape)}")
    if int(chunk) != chunk or chunk < 1:
        raise ValueError(f"chunk must be a positive integer, got {chunk}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if not torch.isfinite(W).all():
        raise ValueError("weights_first_layer has NaN or inf entries")
    first = lifts[next(iter(lifts))] if isinstance(lifts, dict) else (
        lifts[0] if isinstance(lifts, (list, tuple)) or np.ndim(lifts) == 3 else lifts)
    d = int(np.shape(first)[-1])
    if layout == "auto":
        if W.shape[1] == W.shape[2] == d:
            raise ValueError(f"weights_first_layer is [M, {d}, {d}] with H == d: pass layout='HD' or 'DH'")
        if W.shape[2] == d:
            layout = "HD"
        elif W.shape[1] == d:
            layout = "DH"
        else:
            raise ValueError(f"weights_first_layer {list(W.shape)} has no axis of size d = {d} (the lifts' size)")
    if layout == "DH":
        W = W.transpose(1, 2)
    elif layout != "HD":
        raise ValueError(f"layout must be 'auto', 'HD' or 'DH', got {layout!r}")
    if W.shape[2] != d:
        raise ValueError(f"first-layer input size {W.shape[2]} != lift size {d}")
    names, R = _lifts_to_tensor(lifts, d, torch.float64)
    R = R.to(W.device)
    M, H, _ = W.shape
    G = R.shape[0]
    Wm = W
    if biases is not None:
        b = biases.detach() if isinstance(biases, torch.Tensor) else torch.as_tensor(np.asarray(biases))
        b = b.to(W)
        if b.shape != (M, H):
            raise ValueError(f"biases must be [{M}, {H}], got {list(b.shape)}")
        Wm = torch.cat([W, b[..., None]], -1)  # [M, H, d+1]; rho extended by 1 on the constant
        R = torch.stack([torch.block_diag(r, torch.ones(1, 1, dtype=r.dtype, device=r.device)) for r in R])
    eye = torch.eye(R.shape[-1], dtype=R.dtype, device=R.device)
    orthogonal = bool((R @ R.transpose(1, 2) - eye).abs().max() < 1e-12)
    R = R.to(W.dtype)
    sp = signed_permutation(R)
    be = _dispatch.for_op(backend, resolve_backend(backend))  # refuses a backend that cannot run
    if sp is not None and Wm.dtype in (torch.float32, torch.float64):  # the whole observable in one call
        idx, sc, rel = match_signed_lifts_op(Wm.cpu().contiguous(), sp[0], sp[1].double(), mode_code(mode), be)
        per_model = np.sqrt(rel.numpy())
        return MatchingScores(names, per_model, per_model.mean(0), per_model.std(0), idx.numpy(), sc.numpy())
    rel2, index, scale = [], [], []
    for c0 in range(0, M, chunk):  # chunks of models keep the Gram matrices in cache
        r, i, sc = lift_residuals(Wm[c0:c0 + chunk], R, orthogonal, mode, backend)
        rel2.append(r)
        index.append(i)
        scale.append(sc)
    rel2, index, scale = torch.cat(rel2), torch.cat(index), torch.cat(scale)
    per_model = rel2.sqrt().reshape(M, G).cpu().numpy()
    index, scale = index.reshape(M, G, H), scale.reshape(M, G, H)
    per_model = per_model.astype(np.float64)
    return MatchingScores(names, per_model, per_model.mean(0), per_model.std(0),
                          index.cpu().numpy(), scale.cpu().numpy())


def first_layer(ensemble, idx=None, with_bias: bool = False):
    """Paper-convention first layers of an Ensemble: W1 [M, H, d] (and b1 [M, H] with with_bias)."""
    w = ensemble.weights[0] if idx is None else ensemble.weights[0][torch.as_tensor(list(idx))]
    W1 = w.detach().double().transpose(1, 2)
    if not with_bias:
        return W1
    b = ensemble.biases[0] if idx is None else ensemble.biases[0][torch.as_tensor(list(idx))]
    return W1, b.detach().double()


def _gram_scores(ensemble, idx, rho: torch.Tensor):
    """Per-model and ensemble-mean Gram scores of the members idx: ([M, G], [G])."""
    G = gram(ensemble.weights[0][torch.as_tensor(list(idx))].detach().double())  # [M, d, d] = W1^T W1
    return gram_scores(G, rho), gram_scores(G.mean(0, keepdim=True), rho)[0]


def compare_observables(ensemble, shape: str, elements, modes=("sign", "scale"), with_bias: bool = True):
    """Matching vs Gram scores for one shape's models, one row per exactly liftable element.

    Args:
        ensemble: a `symfast.Ensemble` (weights[0]: [B, d, H]).
        shape: a Shape or its name; its models are `ensemble.indices(shape)`; "true" is the
            members' G_true (`ensemble.true_group`: their Shape's declared group, or the
            elements the field is invariant under when none was declared).
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
    idx = ensemble.indices(shape)
    group = ensemble.true_group(shape, elements)
    if group is None:
        raise ValueError(f"the members trained on {getattr(shape, 'name', shape)!r} carry no Shape, so their "
                         "true group is unknown")
    lifts = {g.name: ensemble.pe.lift(g) for g in elements}
    lifts = {k: v for k, v in lifts.items() if v is not None}
    if not lifts:
        raise ValueError("no candidate element is exactly liftable by this encoding")
    W1, b1 = first_layer(ensemble, idx, with_bias=True)
    rho = torch.as_tensor(np.stack(list(lifts.values())))
    gm, ge = _gram_scores(ensemble, idx, rho)
    names = list(lifts)
    df = pd.DataFrame({"element": names, "true_symmetry": [n in group for n in names],
                       "gram_model": gm.mean(0).numpy(), "gram_model_std": gm.std(0).numpy(),
                       "gram_ensemble": ge.numpy()})
    w0, _ = init_weights([INIT_NULL_FIRST_SEED + i for i in range(len(idx))], [ensemble.pe.dim, W1.shape[1], 1], torch.float64)
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
