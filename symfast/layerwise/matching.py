"""Batched neuron matching: min over signed/scaled permutations P of ||A - P B||.

The core of latent-action recovery and of the readout's "matching" observable: for each
of M problems, rows a_i of A and b_j of B ([M, H, k]) are paired by a linear assignment on
the cost

    perm : ||a_i - b_j||^2                   = |a|^2 + |b|^2 - 2<a, b>
    sign : min_s ||a_i - s b_j||^2, s = +-1  = |a|^2 + |b|^2 - 2|<a, b>|
    scale: min_c ||a_i - c b_j||^2, c > 0    = |a|^2 - max(<a, b>, 0)^2 / |b|^2

All M cost matrices come from one batched matmul (no Python loop over neurons).

Ops (not differentiable: inputs that require grad raise; the public functions pass detached
costs and keep residuals differentiable where they are computed from the rows):
  torch.ops.symfast.assign(cost [P, n, n] f64) -> [P, n] int64
  torch.ops.symfast.match_gram(gram [P, n, n], a2 [P, n], b2 [P, n], mode) -> (index, scale f64)
  torch.ops.symfast.match_signed_lifts(W [M, H, k], src [G, k], sign [G, k], mode)
      -> (index [M, G, H], scale [M, G, H] f64, rel2 [M, G] f64)
Where things live:
  reference     SciPy's linear_sum_assignment per problem (the "reference" kernels here) and
                symfast/ops/matching/reference.py (the whole observable per model, for tests)
  CPU kernel    csrc/matching.cpp (shortest augmenting paths, OpenMP over problems; mode codes
                from symfast._C.MatchMode)
  Triton        none (assignment is sequential per problem)
  tests         tests/ops/test_matching.py, tests/layerwise/test_layerwise.py
  benchmark     benchmarks/benchmarks/bench_matching.py
Backends: "auto", "cpu", "reference" ("cpp"/"scipy" still accepted, deprecated).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

from symfast import _ext
from symfast.ops import _dispatch

__all__ = ["MODES", "mode_for_activation", "cost_matrices", "assign", "match_rows", "matching_scores", "MatchingScores"]

MODES = ("perm", "sign", "scale")
_ODD = {"tanh", "sine", "sin", "identity", "linear", "odd"}
_HOMOGENEOUS = {"relu", "leaky_relu", "leakyrelu"}


def mode_for_activation(activation: str) -> str:
    """The hidden-action family an activation commutes with.

    Odd activations (tanh, sine) commute with signed permutations ("sign"),
    positively homogeneous ones (ReLU, leaky ReLU) with positively scaled
    permutations ("scale"); anything else only with permutations ("perm").
    """
    if activation in MODES:
        return activation
    a = str(activation).lower()
    if a in _ODD:
        return "sign"
    if a in _HOMOGENEOUS:
        return "scale"
    return "perm"


def cost_matrices(A: torch.Tensor, B: torch.Tensor, mode: str):
    """Batched assignment costs.

    Args:
        A, B: [M, H, k] rows to pair (row i of A with row pi(i) of B).
        mode: "perm", "sign" or "scale".

    Returns:
        (cost [M, H, H] with cost[m, i, j] the squared residual of pairing a_i with b_j,
        gram [M, H, H] = <a_i, b_j>, a2 [M, H] = |a_i|^2, b2 [M, H] = |b_j|^2).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    gram = torch.matmul(A, B.transpose(-1, -2))
    a2 = A.pow(2).sum(-1)
    b2 = B.pow(2).sum(-1)
    if mode == "perm":
        cost = a2[..., :, None] + b2[..., None, :] - 2 * gram
    elif mode == "sign":
        cost = a2[..., :, None] + b2[..., None, :] - 2 * gram.abs()
    else:
        safe = torch.where(b2 > 0, b2, torch.ones_like(b2))
        cost = a2[..., :, None] - gram.clamp(min=0).pow(2) / safe[..., None, :]
    return cost.clamp(min=0), gram, a2, b2


def _mode_code(mode: str) -> int:
    """The kernel's code for a mode (symfast._C.MatchMode; the Python order when _C is absent)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return int(_ext._C.MatchMode.__members__[mode]) if _ext._C else MODES.index(mode)


def _resolve(backend: str) -> str:
    return _dispatch.resolve("matching", backend, "cpu")


# ---- ops --------------------------------------------------------------------------------
def _assign_reference(cost, backend):
    c = cost.numpy()
    out = np.empty(c.shape[:2], dtype=np.int64)
    for m in range(c.shape[0]):
        out[m] = linear_sum_assignment(c[m])[1]
    return torch.from_numpy(out)


def _assign_cpu(cost, backend):
    return torch.from_numpy(_ext.require_cpp().lsa_batched(cost.contiguous().numpy(), _ext.num_threads()))


@torch.library.custom_op("symfast::assign", mutates_args=())
def assign_op(cost: torch.Tensor, backend: str) -> torch.Tensor:
    """cost: [P, n, n] float64 CPU, finite -> [P, n] int64 column per row (an optimal assignment)."""
    return _assign_reference(cost, backend)


def _match_gram_reference(gram, a2, b2, mode, backend):
    safe = torch.where(b2 > 0, b2, torch.ones_like(b2))
    g64 = gram.to(torch.float64)
    name = MODES[mode] if not _ext._C else _ext._C.MatchMode(mode).name
    if name == "perm":
        cost = a2[..., :, None] + b2[..., None, :] - 2 * g64
    elif name == "sign":
        cost = a2[..., :, None] + b2[..., None, :] - 2 * g64.abs()
    else:
        cost = a2[..., :, None] - g64.clamp(min=0).pow(2) / safe[..., None, :]
    index = _assign_reference(cost.clamp(min=0).contiguous(), backend)
    g = torch.gather(g64, 2, index[..., None])[..., 0]
    bsel = torch.gather(b2, 1, index)
    ok = (g > 0) & (bsel > 0)
    if name == "perm":
        scale = torch.ones_like(g)
    elif name == "sign":
        scale = torch.where(g < 0, -torch.ones_like(g), torch.ones_like(g))
    else:  # a non-positive overlap leaves c = 0 optimal; keep 1 so the action stays invertible
        scale = torch.where(ok, g / torch.where(bsel > 0, bsel, torch.ones_like(bsel)), torch.ones_like(g))
    return [index, scale]


def _match_gram_cpu(gram, a2, b2, mode, backend):
    fn = getattr(_ext.require_cpp(), "match_gram_f32" if gram.dtype == torch.float32 else "match_gram_f64")
    idx, sc = fn(gram.contiguous().numpy(), a2.contiguous().numpy(), b2.contiguous().numpy(), mode,
                 _ext.num_threads())
    return [torch.from_numpy(idx), torch.from_numpy(sc)]


@torch.library.custom_op("symfast::match_gram", mutates_args=())
def match_gram_op(gram: torch.Tensor, a2: torch.Tensor, b2: torch.Tensor, mode: int,
                  backend: str) -> list[torch.Tensor]:
    """gram: [P, n, n] float32/float64 CPU, a2, b2: [P, n] float64 -> [index [P, n] int64, scale [P, n] f64]."""
    return _match_gram_reference(gram, a2, b2, mode, backend)


def _signed_lifts_reference(W, src, sign, mode, backend):
    W = W.double()  # the C++ kernel works in float64 whatever W's dtype (float32 squares may overflow)
    G, k = src.shape
    R = torch.zeros(G, k, k, dtype=W.dtype)
    R[torch.arange(G)[:, None], src, torch.arange(k)[None, :]] = sign.to(W.dtype)
    M, H, _ = W.shape
    name = MODES[mode] if not _ext._C else _ext._C.MatchMode(mode).name
    rel2, index, scale = [], [], []
    for c0 in range(0, M, 32):
        r, i, sc = _scores_chunk(W[c0:c0 + 32], R, True, name, "reference")
        rel2.append(r), index.append(i), scale.append(sc)
    return [torch.cat(index).reshape(M, G, H), torch.cat(scale).reshape(M, G, H).to(torch.float64),
            torch.cat(rel2).to(torch.float64)]


def _signed_lifts_cpu(W, src, sign, mode, backend):
    fn = getattr(_ext.require_cpp(), "match_signed_lifts_" + ("f32" if W.dtype == torch.float32 else "f64"))
    idx, sc, rel = fn(W.contiguous().numpy(), src.contiguous().numpy(), sign.contiguous().numpy(), mode,
                      _ext.num_threads())
    return [torch.from_numpy(idx), torch.from_numpy(sc), torch.from_numpy(rel)]


@torch.library.custom_op("symfast::match_signed_lifts", mutates_args=())
def match_signed_lifts_op(W: torch.Tensor, src: torch.Tensor, sign: torch.Tensor, mode: int,
                          backend: str) -> list[torch.Tensor]:
    """W: [M, H, k] float32/float64 CPU; lifts g as signed column permutations (W R_g)[:, t] =
    sign[g, t] W[:, src[g, t]] (src [G, k] int64, sign [G, k] f64) -> [index [M, G, H] int64,
    scale [M, G, H] f64, rel2 [M, G] f64 squared relative residuals]."""
    return _signed_lifts_reference(W, src, sign, mode, backend)


for _op, _ref, _cpu in ((assign_op, _assign_reference, _assign_cpu),
                        (match_gram_op, _match_gram_reference, _match_gram_cpu),
                        (match_signed_lifts_op, _signed_lifts_reference, _signed_lifts_cpu)):
    _dispatch.register_kernels(_op, _ref, {"cpu": _cpu})
    _dispatch.not_differentiable(_op)


@assign_op.register_fake
def _(cost, backend):
    return cost.new_empty(cost.shape[:2], dtype=torch.int64)


@match_gram_op.register_fake
def _(gram, a2, b2, mode, backend):
    return [a2.new_empty(a2.shape, dtype=torch.int64), a2.new_empty(a2.shape, dtype=torch.float64)]


@match_signed_lifts_op.register_fake
def _(W, src, sign, mode, backend):
    M, H, _ = W.shape
    G = src.shape[0]
    return [W.new_empty(M, G, H, dtype=torch.int64), W.new_empty(M, G, H, dtype=torch.float64),
            W.new_empty(M, G, dtype=torch.float64)]


# ---- public functions -------------------------------------------------------------------
def assign(cost, backend: str = "auto") -> np.ndarray:
    """Batched linear sum assignment: [P, n, n] costs -> [P, n] column index per row.

    backend: "cpu" (symfast._C.lsa_batched: shortest augmenting path from a row reduction, OpenMP
    over problems, torch's thread count), "reference" (SciPy's linear_sum_assignment per problem)
    or "auto" (cpu when built). Both return an optimal assignment; with ties they may pick
    different ones.
    """
    be = _resolve(backend)
    if isinstance(cost, torch.Tensor):
        _dispatch.refuse_grad("assign", cost=cost)
        cost = cost.detach().cpu().numpy()
    cost = np.ascontiguousarray(cost, dtype=np.float64)
    if cost.ndim != 3 or cost.shape[1] != cost.shape[2]:
        raise ValueError(f"cost must be [P, n, n], got {list(cost.shape)}")
    if not np.isfinite(cost).all():
        raise ValueError("cost has NaN or inf entries")
    return assign_op(torch.from_numpy(cost), be).numpy()


def _match_gram(gram: torch.Tensor, a2: torch.Tensor, b2: torch.Tensor, mode: str, backend: str):
    """Assignments from inner products gram [P, n, n], a2 [P, n], b2 [P, n] -> (index, scale, ok).

    ok [P, n]: the matched pair overlaps positively (for "scale": otherwise c = 0 would be optimal
    and the action keeps c = 1). The assignment is discrete: computed on detached inputs.
    """
    code = _mode_code(mode)
    for name, t in (("inner products", gram), ("row norms", a2), ("row norms", b2)):
        if not bool(torch.isfinite(t).all()):  # both kernels would otherwise assign on Inf/NaN costs
            raise ValueError(f"the weights' {name} are not finite (NaN/Inf weights, or float32 overflow: "
                             "pass float64 weights)")
    gc = gram.detach().cpu()
    if gc.dtype not in (torch.float32, torch.float64):
        gc = gc.double()
    index, scale = match_gram_op(gc.contiguous(), a2.detach().double().cpu().contiguous(),
                                 b2.detach().double().cpu().contiguous(), code, _resolve(backend))
    index = index.to(gram.device)
    scale = scale.to(gram.device, gram.dtype)
    g = torch.gather(gram, 2, index[..., None])[..., 0]
    return index, scale, (g > 0) & (torch.gather(b2, 1, index) > 0)


def match_rows(A: torch.Tensor, B: torch.Tensor, mode: str, backend: str = "auto"):
    """Pair the rows of A with those of B up to a signed / scaled permutation, for M problems at once.

    Args:
        A, B: [M, H, k] (or [H, k] for one problem).
        mode: "perm", "sign" or "scale" (see `mode_for_activation`).
        backend: assignment backend (see `assign`).

    Returns:
        (index [M, H] int64, scale [M, H], row_residual [M, H], total [M]):
        P B has rows scale_i * b_{index_i}; row_residual_i = ||a_i - scale_i b_{index_i}|| / ||a_i||
        (0 for a zero row); total = min_P ||A - P B||_F (unnormalised).
    """
    single = A.ndim == 2
    if single:
        A, B = A[None], B[None]
    gram = torch.matmul(A, B.transpose(-1, -2))
    index, scale, ok = _match_gram(gram, A.pow(2).sum(-1), B.pow(2).sum(-1), mode, backend)
    a2 = A.pow(2).sum(-1)
    # residuals from the rows themselves (no |a|^2 + |b|^2 - 2<a, b> cancellation): exact zeros stay ~1e-16
    bsel_rows = torch.gather(B, 1, index[..., None].expand(-1, -1, B.shape[-1]))
    diff = A - scale[..., None] * bsel_rows
    row = diff.pow(2).sum(-1)
    if mode == "scale":  # the optimum allows c = 0 for non-overlapping rows; the action keeps c = 1
        total = torch.where(ok, row, a2).sum(-1).sqrt()
    else:
        total = row.sum(-1).sqrt()
    row_res = row.sqrt() / torch.where(a2 > 0, a2, torch.ones_like(a2)).sqrt()
    if single:
        return index[0], scale[0], row_res[0], total[0]
    return index, scale, row_res, total


def _scores_chunk(Wm: torch.Tensor, R: torch.Tensor, orthogonal: bool, mode: str, backend: str):
    """Squared relative residuals [M, G], index and scale [M*G, H] for one chunk of models."""
    M, H, _ = Wm.shape
    G = R.shape[0]
    k = Wm.shape[-1]
    A = _apply_lifts(Wm, R).reshape(M, G * H, k)  # [M, G, H, k] = W1 rho(g)
    gram = torch.bmm(A, Wm.transpose(1, 2)).reshape(M * G, H, H)  # <a_i, b_j> per (model, lift)
    b2 = Wm.pow(2).sum(-1)  # [M, H]
    if orthogonal:  # all exact lifts: |a_i| = |w_i|
        a2 = b2.repeat_interleave(G, 0)
    else:
        a2 = A.pow(2).sum(-1).reshape(M * G, H)
    index, scale, ok = _match_gram(gram, a2, b2.repeat_interleave(G, 0), mode, backend)
    # residual |a_i - s_i b_pi(i)|^2 = |a|^2 + s^2 |b|^2 - 2 s <a, b> from the Gram (no pass over A) ...
    g = torch.gather(gram, 2, index[..., None])[..., 0]
    bsel = torch.gather(b2.repeat_interleave(G, 0), 1, index)
    row = (a2 + scale.pow(2) * bsel - 2 * scale * g).clamp(min=0)
    if mode == "scale":
        row = torch.where(ok, row, a2)
    norm2 = b2.sum(-1).repeat_interleave(G, 0)
    rel2 = row.sum(-1) / torch.where(norm2 > 0, norm2, torch.ones_like(norm2))
    # ... except where it cancels to round-off (near-exact symmetries): recompute those from the rows
    tiny = torch.nonzero(rel2 < 1e-6).flatten()
    if tiny.numel():
        mi, gi = tiny // G, tiny % G
        At = A.reshape(M, G, H, k)[mi, gi]
        Bt = torch.gather(Wm[mi], 1, index[tiny][..., None].expand(-1, H, k))
        rt = (At - scale[tiny][..., None] * Bt).pow(2).sum(-1)
        if mode == "scale":
            rt = torch.where(ok[tiny], rt, a2[tiny])
        rel2[tiny] = rt.sum(-1) / torch.where(norm2[tiny] > 0, norm2[tiny], torch.ones_like(norm2[tiny]))
    return rel2.reshape(M, G), index, scale


def _signed_permutation(R: torch.Tensor):
    """(src [G, k] int64, sign [G, k]) with (W R_g)[:, t] = sign[g, t] W[:, src[g, t]], or None."""
    nz = R != 0
    if not (bool((nz.sum(1) == 1).all()) and bool((R.abs()[nz] == 1).all())):
        return None
    src = nz.to(torch.int64).argmax(1)
    return src, torch.gather(R, 1, src[:, None, :])[:, 0, :]


def _apply_lifts(W: torch.Tensor, R: torch.Tensor) -> torch.Tensor:
    """W [M, H, k], R [G, k, k] -> W R_g for all g: [M, G, H, k].

    Signed-permutation lifts (every exact lift of a zero-phase PE) are a column gather with signs;
    general lifts one GEMM [M*H, k] @ [k, G*k].
    """
    M, H, k = W.shape
    G = R.shape[0]
    sp = _signed_permutation(R)
    if sp is not None:
        src, sign = sp
        A = torch.gather(W.transpose(1, 2).contiguous(), 1, src.reshape(1, G * k, 1).expand(M, G * k, H))
        A = A.reshape(M, G, k, H) * sign.to(W.dtype)[None, :, :, None]  # [M, G, k, H] = (W R_g)^T
        return A.transpose(2, 3).contiguous()
    A = (W.reshape(M * H, k) @ R.permute(1, 0, 2).reshape(k, G * k)).reshape(M, H, G, k)
    return A.permute(0, 2, 1, 3).contiguous()


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
    sp = _signed_permutation(R)
    be = _resolve(backend)
    if sp is not None and Wm.dtype in (torch.float32, torch.float64):  # the whole observable in one call
        idx, sc, rel = match_signed_lifts_op(Wm.cpu().contiguous(), sp[0], sp[1].double(), _mode_code(mode), be)
        per_model = np.sqrt(rel.numpy())
        return MatchingScores(names, per_model, per_model.mean(0), per_model.std(0), idx.numpy(), sc.numpy())
    rel2, index, scale = [], [], []
    for c0 in range(0, M, chunk):  # chunks of models keep the Gram matrices in cache
        r, i, sc = _scores_chunk(Wm[c0:c0 + chunk], R, orthogonal, mode, backend)
        rel2.append(r)
        index.append(i)
        scale.append(sc)
    rel2, index, scale = torch.cat(rel2), torch.cat(index), torch.cat(scale)
    per_model = rel2.sqrt().reshape(M, G).cpu().numpy()
    index, scale = index.reshape(M, G, H), scale.reshape(M, G, H)
    per_model = per_model.astype(np.float64)
    return MatchingScores(names, per_model, per_model.mean(0), per_model.std(0),
                          index.cpu().numpy(), scale.cpu().numpy())
