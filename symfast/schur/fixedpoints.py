"""Fixed points and slow points of a recurrent map, and the ordered Schur form of its linearisation.

Following Sussillo & Barak 2013 ("Opening the black box: low-dimensional dynamics in
high-dimensional recurrent neural networks"), the points where a step map F (the state update
with the input held fixed) barely moves are the local minima of

    q(h) = 1/2 ||F(h) - h||^2,

found by descending q from states the network visits on its task. A minimum with q = 0 (to
rounding) is a fixed point, one with q > 0 a slow point. There the dynamics are linear to first
order, h_{t+1} - h* ~ J (h_t - h*) with J = dF/dh(h*) (`torch.func.jacrev`), and J's ordered real
Schur form (`symfast.schur.blocks.schur_blocks`) splits it into the slow sector R and the rest C
exactly as the recurrent matrix of a tanh RNN is split.

q is minimised by Levenberg-Marquardt on the residual r(h) = F(h) - h, every start at once in
float64: Gauss-Newton steps (J_r^T J_r + lambda I) d = -J_r^T r with J_r = J - I, the damping
lambda raised on a rejected step and lowered on an accepted one. Near a fixed point it converges
quadratically (to ~1e-15, where plain gradient descent on q stalls far earlier); at a slow point it
stops where the gradient J_r^T r vanishes. Distinct minima are then kept once each.

F: any function mapping states [K, D] to [K, D] row by row, written in differentiable torch ops
(`step_map` builds it for the tanh RNN, the linear SSM, the GRU and the LSTM, whose state is [h, c]).

`ablated_linearisation` asks how each single-block Schur ablation changes the local dynamics at a
point h* of the trained model: it linearises the ablated network's step map (the recurrent matrix
replaced by each block-ablated matrix of `symfast.schur.blocks.ablate`, every other weight fixed) at
the intact network's h*, and compares spectral radius, slow modes and their alignment with the readout.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from symfast.schur.blocks import BLOCKS, SchurBlocks, ablate, schur_blocks, subset_name

__all__ = ["FixedPoints", "find_fixed_points", "step_map", "visited_states", "jacobians", "AblatedLinearisation",
           "ablated_linearisation", "ablated_step_map", "slow_basis", "readout_alignment", "fixed_point_facts",
           "ablated_fixed_point_facts"]


@dataclass
class FixedPoints:
    """Distinct minima of q, sorted by q (fixed points first).

    Attributes:
        points: [K, D] float64 states h*; q: [K] the value of q there; grad_norm: [K] ||dq/dh||.
        jacobians: [K, D, D] dF/dh at each point; eigvals: [K, D] complex, sorted by modulus (non-increasing).
        is_fixed: [K] bool, q <= q_tol (the rest are slow points); q_tol: that threshold.
        n_starts: how many starts were descended; iterations: Levenberg-Marquardt iterations run.
    """

    points: torch.Tensor
    q: torch.Tensor
    grad_norm: torch.Tensor
    jacobians: torch.Tensor
    eigvals: torch.Tensor
    is_fixed: torch.Tensor
    q_tol: float
    n_starts: int
    iterations: int

    def __len__(self) -> int:
        return self.points.shape[0]

    def schur(self, k: int, alpha: float = 0.9, **kw) -> SchurBlocks:
        """Ordered real Schur form of the Jacobian at point k, split into sectors at cut alpha."""
        if not 0 <= k < len(self):
            raise IndexError(f"point {k} out of range: {len(self)} points")
        return schur_blocks(self.jacobians[k], alpha=alpha, **kw)


def _check_map(F, h: torch.Tensor) -> torch.Tensor:
    out = F(h)
    if not isinstance(out, torch.Tensor) or out.shape != h.shape:
        raise ValueError(f"F must map states [K, D] to [K, D]; given {list(h.shape)} it returned "
                         f"{list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__}")
    return out


def jacobians(F, h: torch.Tensor) -> torch.Tensor:
    """dF/dh at each row of h: [K, D] -> [K, D, D] (torch.func.jacrev, vmapped over the rows)."""
    from torch.func import jacrev, vmap

    def one(v):
        return F(v.unsqueeze(0)).squeeze(0)
    return vmap(jacrev(one))(h)


def find_fixed_points(F, starts, q_tol: float = 1e-24, grad_tol: float = 1e-13, max_iter: int = 200,
                      unique_tol: float = 1e-6, lam0: float = 1e-3) -> FixedPoints:
    """Minimise q(h) = 1/2 ||F(h) - h||^2 from each start; return the distinct minima and their linearisation.

    Args:
        F: step map, [K, D] -> [K, D] row by row (differentiable torch ops; evaluated in float64).
        starts: [K, D] initial states (e.g. `visited_states`).
        q_tol: q at or below it is a fixed point (else a slow point); the descent of a start also stops there.
        grad_tol: a start also stops when ||J_r^T r|| (the gradient of q) falls to it.
        max_iter: Levenberg-Marquardt iterations at most.
        unique_tol: minima closer than unique_tol * (1 + ||h||) are one point.
        lam0: initial damping.

    Returns:
        FixedPoints, sorted by q.
    """
    h = torch.as_tensor(starts).detach().to(torch.float64).clone()
    if h.ndim != 2 or h.shape[0] < 1 or h.shape[1] < 1:
        raise ValueError(f"starts must be [K, D] with K, D >= 1, got {list(h.shape)}")
    if not bool(torch.isfinite(h).all()):
        raise ValueError("starts contain NaN or Inf")
    for name, v in (("q_tol", q_tol), ("grad_tol", grad_tol), ("unique_tol", unique_tol), ("lam0", lam0)):
        if not v > 0:
            raise ValueError(f"{name} must be > 0, got {v}")
    if max_iter < 0:
        raise ValueError(f"max_iter must be >= 0, got {max_iter}")
    K, D = h.shape
    eye = torch.eye(D, dtype=torch.float64)

    def residual(v):
        with torch.no_grad():
            return _check_map(F, v) - v
    r = residual(h)
    q = 0.5 * (r ** 2).sum(-1)
    lam = torch.full((K,), float(lam0), dtype=torch.float64)
    active = torch.ones(K, dtype=torch.bool)
    it = 0
    for it in range(1, max_iter + 1):
        idx = active.nonzero().squeeze(1)
        if len(idx) == 0:
            it -= 1
            break
        Jr = jacobians(F, h[idx]).detach() - eye
        g = (Jr.transpose(1, 2) @ r[idx].unsqueeze(-1)).squeeze(-1)  # grad q
        JtJ = Jr.transpose(1, 2) @ Jr
        scale = torch.diagonal(JtJ, dim1=1, dim2=2).clamp_min(1e-12)
        A = JtJ + lam[idx].view(-1, 1, 1) * torch.diag_embed(scale)
        step = -torch.linalg.solve(A, g.unsqueeze(-1)).squeeze(-1)
        h_new = h[idx] + step
        r_new = residual(h_new)
        q_new = 0.5 * (r_new ** 2).sum(-1)
        ok = torch.isfinite(q_new) & (q_new <= q[idx])
        acc = idx[ok]
        h[acc], r[acc], q[acc] = h_new[ok], r_new[ok], q_new[ok]
        lam[idx] = torch.where(ok, lam[idx] / 3, lam[idx] * 4).clamp(1e-15, 1e15)
        small_step = step.norm(dim=-1) <= 1e-16 * (1 + h[idx].norm(dim=-1))
        done = (q[idx] <= q_tol) | (g.norm(dim=-1) <= grad_tol) | (small_step & ~ok) | (lam[idx] >= 1e15)
        active[idx[done]] = False
    J = jacobians(F, h).detach()
    grad = ((J - eye).transpose(1, 2) @ r.unsqueeze(-1)).squeeze(-1).norm(dim=-1)
    keep = _distinct(h, q, unique_tol)
    h, q, grad, J = h[keep], q[keep], grad[keep], J[keep]
    ev = torch.linalg.eigvals(J)
    ev = torch.gather(ev, 1, ev.abs().argsort(dim=1, descending=True, stable=True))
    return FixedPoints(points=h, q=q, grad_norm=grad, jacobians=J, eigvals=ev, is_fixed=q <= q_tol, q_tol=float(q_tol),
                       n_starts=K, iterations=it)


def _distinct(h: torch.Tensor, q: torch.Tensor, tol: float) -> torch.Tensor:
    """Indices of one representative per cluster (lowest q first), in order of q."""
    order = torch.argsort(q, stable=True)
    kept: list[int] = []
    for i in order.tolist():
        if all(float((h[i] - h[j]).norm()) > tol * (1 + float(h[j].norm())) for j in kept):
            kept.append(i)
    return torch.tensor(kept, dtype=torch.int64)


def step_map(model, x=None):
    """The model's step with the input held at x ([I]; default zeros, the autonomous dynamics): [K, D] -> [K, D].

    Works for any model with `step(state, x)` (TanhRNN, LinearSSM, GatedRNN; the LSTM's state is [h, c]).
    """
    if not hasattr(model, "step"):
        raise ValueError(f"{type(model).__name__} has no step(state, x): not a recurrent model of symfast.schur")
    x0 = _held_input(model, x)

    def F(h):
        return model.step(h, x0.expand(h.shape[0], -1))
    return F


def ablated_step_map(model, W: torch.Tensor, x=None):
    """`step_map` of `model` with its ablated matrix (`recurrent_weight`) replaced by W: [H, H].

    Works for any model with `step_recurrent(state, x, W)` (TanhRNN, LinearSSM, GatedRNN and its gate views).
    """
    if not hasattr(model, "step_recurrent"):
        raise ValueError(f"{type(model).__name__} has no step_recurrent(state, x, W): not a recurrent model of "
                         "symfast.schur")
    x0 = _held_input(model, x)
    W64 = torch.as_tensor(W).detach().to(torch.float64)

    def F(h):
        return model.step_recurrent(h, x0.expand(h.shape[0], -1), W64)
    return F


def _held_input(model, x) -> torch.Tensor:
    x0 = torch.zeros(model.n_in, dtype=torch.float64) if x is None else torch.as_tensor(x, dtype=torch.float64)
    if x0.shape != (model.n_in,):
        raise ValueError(f"x must be [{model.n_in}] (one input held fixed), got {list(x0.shape)}")
    return x0


def slow_basis(J: torch.Tensor, cut: float) -> torch.Tensor:
    """Orthonormal basis [D, n] of J's leading real invariant subspace: the span of the eigenvectors
    with |lambda| >= cut, read as the first n Schur vectors of J's ordered real Schur form
    (`schur_blocks` at alpha = cut / rho(J), i.e. its R sector). n = 0 when rho(J) < cut; every
    direction (the identity) when cut <= 0."""
    J = torch.as_tensor(J).detach().to(torch.float64)
    D = J.shape[-1]
    if cut <= 0:
        return torch.eye(D, dtype=torch.float64)
    rho = float(torch.linalg.eigvals(J).abs().max())
    if rho < cut:
        return J.new_zeros(D, 0)
    sb = schur_blocks(J, alpha=min(1.0, cut / rho))
    return sb.Q[:, :sb.n_R]


def readout_alignment(V: torch.Tensor, Q_s: torch.Tensor) -> float:
    """||V Q_s||_F / ||V||_F for a readout V: [O, D] and an orthonormal basis Q_s: [D, n]: the fraction of
    the readout's norm on span(Q_s) (1 when every row of V lies in it, 0 when V is orthogonal to it;
    NaN for V = 0)."""
    nV = float(torch.linalg.norm(V))
    return float(torch.linalg.norm(V @ Q_s)) / nV if nV > 0 else float("nan")


def _state_readout(model, D: int) -> torch.Tensor:
    """The readout as a map of the step's state, [O, D]: V (the SSM's C) padded with zeros beyond H (the
    LSTM's state is [h, c] and y = V h reads h only)."""
    V = getattr(model, "readout", None)
    V = model.C if V is None else V
    V = V.detach().to(torch.float64)
    return torch.cat([V, V.new_zeros(V.shape[0], D - V.shape[1])], 1)


@dataclass
class AblatedLinearisation:
    """The linearisation at h* of the intact model and of each single-block Schur ablation of it.

    Attributes:
        point: [D] the state h* (of the intact model); alpha: the sector cut; cut = alpha * rho(J),
            the one modulus cut for "slow" before and after every ablation.
        blocks: the ablated blocks, one per entry of the per-block lists; removed_rel_T: ||T - T~||_F / ||T||_F
            of each (0: an empty block, the ablated matrix is W).
        jacobian: [D, D] J = dF/dh(h*); jacobians_ablated: [len(blocks), D, D] dF~/dh(h*) of each ablated map.
        rho, rho_ablated: spectral radii of J and of each J~.
        n_slow, n_slow_ablated: eigenvalues with |lambda| >= cut (J's count is its R sector at alpha).
        alignment, alignment_ablated: `readout_alignment` of the readout with the slow subspace
            (`slow_basis` at `cut`) of J and of each J~.
    """

    point: torch.Tensor
    alpha: float
    cut: float
    blocks: tuple
    removed_rel_T: list
    jacobian: torch.Tensor
    jacobians_ablated: torch.Tensor
    rho: float
    rho_ablated: list
    n_slow: int
    n_slow_ablated: list
    alignment: float
    alignment_ablated: list


def ablated_linearisation(model, point, alpha: float = 0.9, x=None, blocks=BLOCKS) -> AblatedLinearisation:
    """J~ = dF~/dh at the intact model's point h* for each single-block ablation F~ of the model's step map F.

    Construction: W = model.recurrent_weight(float64) is split at alpha in ordered Schur coordinates
    (`schur_blocks`, defaults as in `schur_ablation`) and each block b of `blocks` is removed alone
    (`ablate`: W~_b = Q (B + N~) Q^T, exactly the matrices the behavioural ablation rolls out). F~_b is
    the model's step with W replaced by W~_b and every other weight fixed (`ablated_step_map`), and
    J~_b = dF~_b/dh(h*). h* is a fixed or slow point of F, not in general of F~_b: J~_b is the ablated
    network linearised at the intact network's point, i.e. how the removal changes the local dynamics
    around where the trained model sits, not the linearisation at a fixed point of the ablated map.
    For the tanh RNN F~_b(h) = tanh(W~_b h + U x), so J~_b = diag(1 - tanh(W~_b h* + U x)^2) W~_b, while
    J = diag(1 - h*^2) W at a fixed point.

    Per block it reports rho(J~_b), the slow modes |lambda| >= cut with the one cut = alpha * rho(J)
    for J and every J~_b (so a block whose removal shrinks the spectrum loses slow modes), and the
    readout alignment ||V Q_s||_F / ||V||_F, V the readout on the state ([O, D]; zeros on the LSTM's
    c) and Q_s an orthonormal basis of the leading real invariant subspace {|lambda| >= cut} of J
    (resp. J~_b), the R sector of its ordered real Schur form: the fraction of the readout's norm
    that the slow modes carry (1: the readout reads only slow directions; 0: none of them).

    Args:
        model: TanhRNN, LinearSSM, GatedRNN or a gate view `GatedRNN.at_gate(g)` (which gate's matrix is ablated).
        point: [D] h*, e.g. `find_fixed_points(step_map(model), ...).points[0]`.
        alpha: sector cut, in (0, 1]; x: the input held fixed ([I]; default zeros, as in `step_map`).
        blocks: block names of `symfast.schur.blocks.BLOCKS`, each ablated alone.
    """
    blocks = tuple(blocks)
    for b in blocks:
        if b not in BLOCKS:
            raise ValueError(f"unknown block {b!r}; expected one of {BLOCKS}")
    h = torch.as_tensor(point).detach().to(torch.float64)
    D = getattr(model, "state_size", None) or model.n_hidden
    if h.shape != (D,):
        raise ValueError(f"point must be one state [{D}], got {list(h.shape)}")
    with torch.no_grad():
        W = model.recurrent_weight(torch.float64).detach().cpu()
    sb = schur_blocks(W, alpha=alpha)
    W_ab, mass = ablate(sb, [(b,) for b in blocks])
    J = jacobians(ablated_step_map(model, W, x), h.unsqueeze(0))[0].detach()
    Jab = torch.stack([jacobians(ablated_step_map(model, Wb, x), h.unsqueeze(0))[0].detach() for Wb in W_ab]) \
        if blocks else J.new_zeros(0, D, D)
    V = _state_readout(model, D)
    sbJ = schur_blocks(J, alpha=alpha)
    cut = alpha * sbJ.rho
    slow = [slow_basis(Jb, cut) for Jb in Jab]
    return AblatedLinearisation(
        point=h, alpha=float(alpha), cut=float(cut), blocks=blocks, removed_rel_T=[m["removed_rel_T"] for m in mass],
        jacobian=J, jacobians_ablated=Jab, rho=sbJ.rho,
        rho_ablated=[float(torch.linalg.eigvals(Jb).abs().max()) for Jb in Jab],
        n_slow=sbJ.n_R, n_slow_ablated=[q.shape[1] for q in slow],
        alignment=readout_alignment(V, sbJ.Q[:, :sbJ.n_R]), alignment_ablated=[readout_alignment(V, q) for q in slow])


def visited_states(model, task, n: int, seed: int = 0, batch: int = 16) -> torch.Tensor:
    """n states the model visits on `task` (a batch from `seed`), drawn without replacement: [n, D] float64."""
    if n < 1 or batch < 1:
        raise ValueError(f"n and batch must be >= 1, got {n}, {batch}")
    x, _, _ = task.sample(batch, seed)
    D = getattr(model, "state_size", model.n_hidden)
    s = torch.zeros(batch, D, dtype=torch.float64)
    states = []
    with torch.no_grad():
        for t in range(x.shape[1]):
            s = model.step(s, x[:, t].double())
            states.append(s)
    allst = torch.cat(states)
    if n > len(allst):
        raise ValueError(f"asked for {n} states, the batch visits only {len(allst)} (batch {batch} x T {x.shape[1]})")
    pick = torch.randperm(len(allst), generator=torch.Generator().manual_seed(int(seed)))[:n]
    return allst[pick]


def fixed_point_facts(model, task, n_starts: int, seed: int, alpha: float) -> tuple:
    """Fixed/slow points of the model's autonomous map (input held at 0) from n_starts visited states,
    and the ordered Schur split of the Jacobian at the slowest.

    Returns:
        (facts, h*): facts = {"n_fixed", "n_slow", "q_min", "rho_J", "n_R_J", "N_over_T_J", "norm_h"}
        (one row of the study's fixed-point table), h* [D] the slowest point.
    """
    fp = find_fixed_points(step_map(model), visited_states(model, task, n_starts, seed=seed))
    sb = fp.schur(0, alpha=alpha)
    nN, nT = float(sb.N.norm()), float(sb.T.norm())
    return {"n_fixed": int(fp.is_fixed.sum()), "n_slow": int((~fp.is_fixed).sum()), "q_min": float(fp.q[0]),
            "rho_J": sb.rho, "n_R_J": sb.n_R, "N_over_T_J": nN / nT if nT > 0 else float("nan"),
            "norm_h": float(torch.linalg.norm(fp.points[0]))}, fp.points[0]


def ablated_fixed_point_facts(view, h_star, alpha: float, at) -> dict:
    """Per single-block ablation of the view's matrix: the ablated map linearised at the intact model's
    slowest point h* [D] (`ablated_linearisation`), next to the block's behavioural dFVU at the same
    alpha (`at`: the ablation table at that alpha, indexed by subset).

    Returns:
        {"align_J", and per block b: "rho_Jab_b", "n_slow_Jab_b", "align_Jab_b", "dfvu_b"}.
    """
    lin = ablated_linearisation(view, h_star, alpha=alpha)
    out = {"align_J": lin.alignment}
    for k, b in enumerate(lin.blocks):
        out.update({f"rho_Jab_{b}": lin.rho_ablated[k], f"n_slow_Jab_{b}": lin.n_slow_ablated[k],
                    f"align_Jab_{b}": lin.alignment_ablated[k], f"dfvu_{b}": float(at.loc[subset_name((b,)), "dfvu"])})
    return out
