"""The matching observable of the layerwise study: does W1 rho(g) = P W1 for a signed permutation P?

`matching_scores` turns first-layer weights (either layout, optional biases) and exact lifts
into per-model normalised residuals, `MatchingScores`. The kernels live in
`symfast.ops.matching`: signed-permutation lifts in one call of torch.ops.symfast.match_signed_lifts
(C++, whole observable per (model, lift) in cache), other lifts by batched Gram matrices and
torch.ops.symfast.match_gram (`symfast.ops.matching.lift_residuals`). The per-model SciPy
reference is `symfast.ops.matching.reference.matching_scores_reference`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from symfast.ops.matching import (MODES, lift_residuals, match_signed_lifts_op, mode_code, resolve_backend,
                                  signed_permutation)

__all__ = ["matching_scores", "MatchingScores"]


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
    be = resolve_backend(backend)
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
