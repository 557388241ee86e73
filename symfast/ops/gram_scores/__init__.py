"""Readout scores of Gram observables for many models x many group elements at once.

    gram_scores(phi [M, d, d], lifts) -> [M, E]                          torch.ops.symfast.gram_scores
        s[m, e] = ||rho_e^T phi_m rho_e - phi_m||_F / ||phi_m||_F       (.._blockperm for BlockPermLift)

The Grams themselves (G = W W^T, torch.ops.symfast.gram) are the op `symfast.ops.gram`;
`gram` is re-exported here for compatibility.

Where things live:
  reference     symfast/ops/gram_scores/reference.py (chunked batched einsum)
  CPU kernel    csrc/gram_scores.cpp via cpu.py: exact lifts that are permutations of
                2x2 blocks are scored by gathers
                (`BlockPermLift`, O(d^2) per pair); other (dense,
                orthogonal) lifts by ||G rho - (G rho^T)^T|| with a fused register-blocked
                product kernel over all models, sharing G rho^T when rho^T is itself in the
                lift set (`lifts.transpose_pairs`)
  Triton        triton.py (CUDA, or CPU under TRITON_INTERPRET=1): one program per (element,
                model block), two tl.dot per pair; block-permutation lifts are densified
  tests         tests/ops/test_gram_scores.py
  benchmark     benchmarks/benchmarks/bench_gram_scores.py
None of the paths materialises [M, E, d, d]. Gradients to phi and dense lifts go through
the reference's autograd (recomputed in the backward).
"""
from __future__ import annotations

import numpy as np
import torch

from symfast import _ext
from symfast.ops import _checks, _dispatch
from symfast.ops.gram import gram  # re-exported for compatibility: the op lives in symfast.ops.gram
from symfast.ops.gram_scores import cpu, reference
from symfast.ops.gram_scores.lifts import ORTHO_TOL, BlockPermLift, blockperm_to_dense

__all__ = ["gram", "gram_scores", "BlockPermLift", "ORTHO_TOL"]

# Max |phi - phi^T| relative to max |phi| (fast paths read one triangle's worth of phi).
_SYM_RTOL = {torch.float64: 1e-12, torch.float32: 1e-4}


# ---- gram_scores ------------------------------------------------------------------------
def _normalize(asym: torch.Tensor, phi: torch.Tensor, normalize: bool) -> torch.Tensor:
    if normalize:
        asym = asym / phi.to(torch.float64).flatten(1).norm(dim=1)[:, None]
    return asym.to(phi.dtype)


def validate(phi, lifts=None, perm=None, blocks=None, dim=None) -> None:
    """Static checks of one op call (fake tensors too): phi [M, d, d] float32/float64; dense lifts
    [E, d, d] (any float dtype, on phi's device or the CPU), or a block permutation perm [E, m] int64,
    blocks [E, m, 2, 2] float64 with m = ceil(d / 2) and dim = d (on the CPU or phi's device)."""
    op = "gram_scores"
    _checks.tensor(op, "phi", phi)
    if phi.ndim != 3 or phi.shape[1] != phi.shape[2]:
        raise ValueError(f"{op}: phi must be [M, d, d], got {list(phi.shape)}")
    d = phi.shape[1]
    if lifts is not None:
        _checks.tensor(op, "lifts", lifts, (torch.float16, torch.bfloat16, *_checks.FLOATS))
        if lifts.ndim != 3 or lifts.shape[1:] != (d, d):
            raise ValueError(f"{op}: lifts must be [E, {d}, {d}] to match phi {list(phi.shape)}, got {list(lifts.shape)}")
        _checks.same_device(op, (("phi", phi), ("lifts", lifts)), allow_cpu=("lifts",))
        return
    m = (d + 1) // 2
    _checks.tensor(op, "perm", perm, (torch.int64,))
    _checks.tensor(op, "blocks", blocks, (torch.float64,))
    if perm.ndim != 2 or perm.shape[1] != m:
        raise ValueError(f"{op}: perm must be [E, m] with m = ceil(d / 2) = {m} for phi {list(phi.shape)}, "
                         f"got {list(perm.shape)}")
    E = perm.shape[0]
    if blocks.shape != (E, m, 2, 2):
        raise ValueError(f"{op}: blocks must be [E, m, 2, 2] = [{E}, {m}, 2, 2], got {list(blocks.shape)}")
    if dim != d:
        raise ValueError(f"{op}: dim must be phi's d = {d}, got {dim}")
    _checks.same_device(op, (("phi", phi), ("perm", perm), ("blocks", blocks)), allow_cpu=("perm", "blocks"))


def resolve_backend(backend: str, phi) -> str:
    """The backend that runs on phi's device ("auto": C++ on CPU, Triton on CUDA): the one rule for
    `gram_scores` and both ops' own "auto"."""
    return _dispatch.resolve("gram_scores", backend, phi.device, triton=True)


def _auto(phi, **_) -> str:
    return resolve_backend("auto", phi)


def _scores_reference(phi, lifts, normalize, backend):
    validate(phi, lifts)
    _check_values(phi, lifts, normalize)
    return reference.gram_scores(phi, lifts.to(phi.dtype), normalize=normalize)


def _scores_cpu(phi, lifts, normalize, backend):
    validate(phi, lifts)
    _check_values(phi, lifts, normalize)
    return _normalize(cpu.gram_scores_asym(phi, lifts.to(torch.float64).contiguous()), phi, normalize)


def _scores_triton(phi, lifts, normalize, backend):
    validate(phi, lifts)
    from symfast.ops.gram_scores import triton as tr

    _check_values(phi, lifts, normalize)
    return _normalize(tr.gram_scores_asym(phi, lifts.to(torch.float64)), phi, normalize)


@torch.library.custom_op("symfast::gram_scores", mutates_args=())
def gram_scores_op(phi: torch.Tensor, lifts: torch.Tensor, normalize: bool, backend: str) -> torch.Tensor:
    """phi: [M, d, d] symmetric, lifts: [E, d, d] orthogonal (phi's device, any float dtype) -> [M, E]."""
    return _scores_reference(phi, lifts, normalize, backend)


_dispatch.register_kernels(gram_scores_op, _scores_reference, {"cpu": _scores_cpu, "triton": _scores_triton}, _auto)


@gram_scores_op.register_fake
def _(phi, lifts, normalize, backend):
    _checks.backend("gram_scores", backend)
    validate(phi, lifts)
    return phi.new_empty(phi.shape[0], lifts.shape[0])


def _scores_setup(ctx, inputs, output):
    phi, lifts, normalize, _ = inputs
    ctx.save_for_backward(phi, lifts)
    ctx.normalize = normalize


def _scores_backward(ctx, grad):
    """Through the reference's autograd (recomputed: the fast forward keeps no [M, E, d, d])."""
    phi, lifts = ctx.saved_tensors
    need = ctx.needs_input_grad[:2]
    with torch.enable_grad():
        p = phi.detach().requires_grad_(need[0])
        r = lifts.detach().requires_grad_(need[1])
        s = reference.gram_scores(p, r.to(p.dtype), normalize=ctx.normalize)
        wrt = [t for t, n in zip((p, r), need) if n]
        gs = iter(torch.autograd.grad(s, wrt, grad, allow_unused=True))
    return (next(gs) if need[0] else None), (next(gs) if need[1] else None), None, None


gram_scores_op.register_autograd(_scores_backward, setup_context=_scores_setup)


def _bp_reference(phi, perm, blocks, dim, normalize, backend):
    validate(phi, perm=perm, blocks=blocks, dim=dim)
    _check_values(phi, None, normalize)
    lift = BlockPermLift(perm, blocks, dim)  # checks the values: permutations, finite orthogonal blocks
    rho = blockperm_to_dense(lift.perm, lift.blocks, dim).to(phi.device, phi.dtype)
    return reference.gram_scores(phi, rho, normalize=normalize)


def _bp_cpu(phi, perm, blocks, dim, normalize, backend):
    validate(phi, perm=perm, blocks=blocks, dim=dim)
    _check_values(phi, None, normalize)
    return _normalize(cpu.blockperm_asym(phi, BlockPermLift(perm, blocks, dim)), phi, normalize)


def _bp_triton(phi, perm, blocks, dim, normalize, backend):
    validate(phi, perm=perm, blocks=blocks, dim=dim)
    from symfast.ops.gram_scores import triton as tr

    _check_values(phi, None, normalize)
    return _normalize(tr.gram_scores_asym(phi, BlockPermLift(perm, blocks, dim)), phi, normalize)


@torch.library.custom_op("symfast::gram_scores_blockperm", mutates_args=())
def gram_scores_blockperm_op(phi: torch.Tensor, perm: torch.Tensor, blocks: torch.Tensor, dim: int,
                             normalize: bool, backend: str) -> torch.Tensor:
    """phi: [M, d, d]; perm: [E, m] int64 and blocks: [E, m, 2, 2] float64 (CPU) of a BlockPermLift."""
    return _bp_reference(phi, perm, blocks, dim, normalize, backend)


_dispatch.register_kernels(gram_scores_blockperm_op, _bp_reference, {"cpu": _bp_cpu, "triton": _bp_triton}, _auto)


@gram_scores_blockperm_op.register_fake
def _(phi, perm, blocks, dim, normalize, backend):
    _checks.backend("gram_scores_blockperm", backend)
    validate(phi, perm=perm, blocks=blocks, dim=dim)
    return phi.new_empty(phi.shape[0], perm.shape[0])


def _bp_setup(ctx, inputs, output):
    phi, perm, blocks, dim, normalize, _ = inputs
    ctx.save_for_backward(phi, perm, blocks)
    ctx.dim, ctx.normalize = dim, normalize


def _bp_backward(ctx, grad):
    phi, perm, blocks = ctx.saved_tensors
    rho = blockperm_to_dense(perm, blocks, ctx.dim)
    (g,) = _scores_backward_dense(phi, rho.to(phi.device), ctx.normalize, grad)
    return g, None, None, None, None, None


def _scores_backward_dense(phi, rho, normalize, grad):
    with torch.enable_grad():
        p = phi.detach().requires_grad_(True)
        s = reference.gram_scores(p, rho.to(p.dtype), normalize=normalize)
        return torch.autograd.grad(s, p, grad)


gram_scores_blockperm_op.register_autograd(_bp_backward, setup_context=_bp_setup)


def _check_phi(phi) -> None:
    """Shape and dtype (static: traced by torch.compile)."""
    if not isinstance(phi, torch.Tensor):
        raise ValueError(f"phi must be a torch.Tensor [M, d, d], got {type(phi).__name__}")
    if phi.ndim != 3 or phi.shape[1] != phi.shape[2]:
        raise ValueError(f"phi must be [M, d, d], got {list(phi.shape)}")
    if phi.dtype not in (torch.float32, torch.float64):
        raise ValueError(f"phi must be float32 or float64, got {phi.dtype}")


def _check_values(phi: torch.Tensor, lifts: torch.Tensor | None, normalize: bool) -> None:
    """Finite symmetric phi (no all-zero phi_m when normalising); finite orthogonal dense lifts.

    Runs inside the op's kernels, so it also guards compiled graphs; skipped under torch.func
    transforms (data-dependent checks cannot be batched)."""
    if phi.numel():
        p = phi.detach()
        if p.device.type == "cpu" and _ext.cpp_available():  # one pass in C++ (cheap next to scoring)
            fn = getattr(_ext.require_cpp(), "sym_stats_f32" if p.dtype == torch.float32 else "sym_stats_f64")
            asym, scale, bad = fn(p.contiguous().numpy(), _ext.num_threads())
        else:
            bad = int((~torch.isfinite(p)).sum())
            asym = float((p - p.transpose(1, 2)).abs().amax()) if not bad else 0.0
            scale = float(p.abs().amax()) if not bad else 0.0
        if bad:
            raise ValueError("phi contains NaN or Inf")
        if asym > _SYM_RTOL[p.dtype] * scale:
            raise ValueError(f"phi must be symmetric: max |phi - phi^T| = {asym:.3e} (max |phi| = {scale:.3e})")
        if normalize:
            zero = p.flatten(1).abs().amax(dim=1) == 0
            if bool(zero.any()):
                raise ValueError(f"phi[{int(zero.nonzero()[0])}] is all zero: its normalised score is 0/0; "
                                 f"pass normalize=False for absolute norms")
    if lifts is None or not lifts.shape[0]:
        return
    r = lifts.detach()
    if not bool(torch.isfinite(r).all()):
        raise ValueError("lifts contains NaN or Inf")
    r = r.to("cpu", torch.float64)
    err = (r.transpose(1, 2) @ r - torch.eye(r.shape[1], dtype=torch.float64)).abs().amax(dim=(1, 2))
    tol = ORTHO_TOL[torch.float64 if lifts.dtype == torch.float64 else torch.float32]
    if bool((err > tol).any()):
        e = int(err.argmax())
        raise ValueError(f"lift {e} is not orthogonal: max |rho^T rho - I| = {float(err[e]):.3e} > {tol:.0e}")


def _as_lifts(lifts, phi: torch.Tensor):
    """BlockPermLift (kept) or dense lifts [E, d, d] on phi's device (float32 stays float32 so the
    orthogonality tolerance follows the given precision; differentiable when given a tensor)."""
    d = phi.shape[1]
    if isinstance(lifts, BlockPermLift):
        if lifts.dim != d:
            raise ValueError(f"lifts are {lifts.dim} x {lifts.dim} but phi is [M, {d}, {d}]")
        return lifts
    if isinstance(lifts, torch.Tensor):
        if lifts.device.type != "cpu" and lifts.device != phi.device:
            raise ValueError(f"lifts are on {lifts.device} but phi is on {phi.device}")
        rho = lifts
    else:
        rho = torch.as_tensor(np.asarray(lifts))
    if rho.ndim != 3 or rho.shape[1:] != (d, d):
        raise ValueError(f"lifts must be [E, {d}, {d}] to match phi [M, {d}, {d}], got {list(rho.shape)}")
    if rho.dtype not in (torch.float32, torch.float64):
        raise ValueError(f"lifts must be float32 or float64, got {rho.dtype}")
    return rho.to(phi.device)


def gram_scores(phi: torch.Tensor, lifts, normalize: bool = True, backend: str = "auto") -> torch.Tensor:
    """Readout scores of many observables under many lifts.

    s[m, e] = ||rho_e^T phi_m rho_e - phi_m||_F / ||phi_m||_F (0 = phi_m invariant under rho_e).
    Differentiable in phi (and in dense lifts) on every backend; works under torch.compile
    (fullgraph) and torch.func transforms (those run the reference without the value checks).

    Args:
        phi: [M, d, d] symmetric observables (Grams, their seed mean, null differences), float32/float64.
            With normalize=True no phi_m may be all zero (its relative score 0/0 is undefined:
            ValueError; use normalize=False for the absolute norm).
        lifts: [E, d, d] orthogonal lifts (tensor or array, max |rho^T rho - I| <= `ORTHO_TOL`), or a
            `BlockPermLift`. Dense lifts that are exact block permutations are detected and gathered.
        normalize: divide by ||phi_m||_F; False returns the absolute norm.
        backend: "auto", "cpu", "triton" or "reference" (see `symfast.ops._dispatch`).

    Returns:
        [M, E] in phi's dtype, on phi's device.
    """
    _check_phi(phi)
    be = _dispatch.for_op(backend, resolve_backend(backend, phi))
    lifts = _as_lifts(lifts, phi)
    if _dispatch.under_functorch(phi, lifts if isinstance(lifts, torch.Tensor) else None):
        rho = lifts.to_dense() if isinstance(lifts, BlockPermLift) else lifts
        return reference.gram_scores(phi, rho.to(phi.device, phi.dtype), normalize=normalize)
    if isinstance(lifts, BlockPermLift):
        return gram_scores_blockperm_op(phi, lifts.perm, lifts.blocks, lifts.dim, normalize, be)
    return gram_scores_op(phi, lifts, normalize, be)
