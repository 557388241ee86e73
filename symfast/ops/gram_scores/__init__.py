"""Gram observables and readout scores for many models x many group elements at once.

    gram(weights [M, d, H]) -> G = W W^T: [M, d, d]
    gram_scores(phi [M, d, d], lifts) -> s[m, e] = ||rho_e^T phi_m rho_e - phi_m||_F / ||phi_m||_F: [M, E]

Backends ("auto" picks the first that applies):
- "cpu" (CPU float32/float64, C++ built): exact lifts that are permutations of 2x2
  blocks are scored by gathers (`BlockPermLift`, O(d^2) per pair); other (dense,
  orthogonal) lifts by ||G rho - (G rho^T)^T|| with a fused register-blocked product
  kernel over all models, sharing G rho^T when rho^T is itself in the lift set (see
  `lifts.transpose_pairs`; `symfast.readout.observables.sweep_lifts` builds sweep lifts).
- "triton" (CUDA, or CPU under TRITON_INTERPRET=1): one program per (element,
  model block), two tl.dot per pair; block-permutation lifts are densified.
- "reference": chunked batched einsum (`reference.py`); used by "auto" when autograd
  needs a graph or no fast path applies.
None of them materialises [M, E, d, d].
"""
from __future__ import annotations

import numpy as np
import torch

from symfast import _ext
from symfast.ops.gram_scores import reference
from symfast.ops.gram_scores.lifts import BlockPermLift

__all__ = ["gram", "gram_scores", "BlockPermLift", "ORTHO_TOL"]

_BACKENDS = ("auto", "cpu", "triton", "reference")
# Max |rho^T rho - I| per lift dtype: the fast dense path relies on ||rho^T X rho|| = ||X||.
ORTHO_TOL = {torch.float64: 1e-8, torch.float32: 1e-5}
# Max |phi - phi^T| relative to max |phi| (fast paths read one triangle's worth of phi).
_SYM_RTOL = {torch.float64: 1e-12, torch.float32: 1e-4}


def _check_backend(backend: str) -> None:
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, _BACKENDS))}, got {backend!r}")


def _check_float(x: torch.Tensor, name: str) -> None:
    if x.dtype not in (torch.float32, torch.float64):
        raise ValueError(f"{name} must be float32 or float64, got {x.dtype}")
    if not torch.isfinite(x).all():
        raise ValueError(f"{name} contains NaN or Inf")


def gram(weights: torch.Tensor, backend: str = "auto") -> torch.Tensor:
    """First-layer Grams G = W W^T for a batch of models.

    Args:
        weights: [M, d, H] fan-in-first first-layer weights (as `Ensemble.weights[0]`), float32/float64.
        backend: "auto" (C++ on CPU without autograd, torch elsewhere), "cpu" or "reference".
            CUDA uses torch's batched GEMM ("reference"); "triton" is accepted and means the same.

    Returns:
        [M, d, d] in weights' dtype; the "cpu" result is exactly symmetric.
    """
    _check_backend(backend)
    if not isinstance(weights, torch.Tensor):
        raise ValueError(f"weights must be a torch.Tensor [M, d, H], got {type(weights).__name__}")
    if weights.ndim != 3:
        raise ValueError(f"weights must be [M, d, H], got {list(weights.shape)}")
    if weights.dtype not in (torch.float32, torch.float64):
        raise ValueError(f"weights must be float32 or float64, got {weights.dtype}")
    needs_grad = torch.is_grad_enabled() and weights.requires_grad
    on_cpu = weights.device.type == "cpu"
    if backend == "cpu" or (backend == "auto" and on_cpu and not needs_grad and _ext.cpp_available()):
        if not on_cpu:
            raise ValueError(f"backend='cpu' needs CPU weights, got device {weights.device}")
        from symfast.ops.gram_scores import cpu

        return cpu.gram(weights)  # checks NaN/Inf while it reads the weights
    _check_float(weights, "weights")
    return reference.gram(weights)


def _check_phi(phi) -> torch.Tensor:
    if not isinstance(phi, torch.Tensor):
        raise ValueError(f"phi must be a torch.Tensor [M, d, d], got {type(phi).__name__}")
    if phi.ndim != 3 or phi.shape[1] != phi.shape[2]:
        raise ValueError(f"phi must be [M, d, d], got {list(phi.shape)}")
    if phi.dtype not in (torch.float32, torch.float64):
        raise ValueError(f"phi must be float32 or float64, got {phi.dtype}")
    if not phi.numel():
        return phi
    if phi.device.type == "cpu" and _ext.cpp_available():  # one pass in C++ (cheap next to scoring)
        fn = getattr(_ext.require_cpp(), "sym_stats_f32" if phi.dtype == torch.float32 else "sym_stats_f64")
        asym, scale, bad = fn(phi.detach().contiguous().numpy(), _ext.num_threads())
    else:
        bad = int((~torch.isfinite(phi)).sum())
        asym = float((phi - phi.transpose(1, 2)).abs().amax()) if not bad else 0.0
        scale = float(phi.abs().amax()) if not bad else 0.0
    if bad:
        raise ValueError("phi contains NaN or Inf")
    if asym > _SYM_RTOL[phi.dtype] * scale:
        raise ValueError(f"phi must be symmetric: max |phi - phi^T| = {asym:.3e} (max |phi| = {scale:.3e})")
    return phi


def _check_lifts(lifts, phi: torch.Tensor):
    """BlockPermLift (kept) or dense lifts as a float64 CPU tensor [E, d, d], validated."""
    d = phi.shape[1]
    if isinstance(lifts, BlockPermLift):
        if lifts.dim != d:
            raise ValueError(f"lifts are {lifts.dim} x {lifts.dim} but phi is [M, {d}, {d}]")
        return lifts
    if isinstance(lifts, torch.Tensor):
        if lifts.device.type != "cpu" and lifts.device != phi.device:
            raise ValueError(f"lifts are on {lifts.device} but phi is on {phi.device}")
        rho = lifts.detach()
    else:
        rho = torch.as_tensor(np.asarray(lifts))
    if rho.ndim != 3 or rho.shape[1:] != (d, d):
        raise ValueError(f"lifts must be [E, {d}, {d}] to match phi [M, {d}, {d}], got {list(rho.shape)}")
    _check_float(rho, "lifts")
    tol = ORTHO_TOL[rho.dtype]
    rho = rho.to("cpu", torch.float64).contiguous()
    if rho.shape[0]:
        err = (rho.transpose(1, 2) @ rho - torch.eye(d, dtype=torch.float64)).abs().amax(dim=(1, 2))
        if (err > tol).any():
            e = int(err.argmax())
            raise ValueError(f"lift {e} is not orthogonal: max |rho^T rho - I| = {float(err[e]):.3e} > {tol:.0e}")
    return rho


def gram_scores(phi: torch.Tensor, lifts, normalize: bool = True, backend: str = "auto") -> torch.Tensor:
    """Readout scores of many observables under many lifts.

    s[m, e] = ||rho_e^T phi_m rho_e - phi_m||_F / ||phi_m||_F (0 = phi_m invariant under rho_e).

    Args:
        phi: [M, d, d] symmetric observables (Grams, their seed mean, null differences), float32/float64.
        lifts: [E, d, d] orthogonal lifts (tensor or array, max |rho^T rho - I| <= `ORTHO_TOL`), or a
            `BlockPermLift`. Dense lifts that are exact block permutations are detected and gathered.
        normalize: divide by ||phi_m||_F; False returns the absolute norm.
        backend: "auto", "cpu", "triton" or "reference" (see the module docstring).

    Returns:
        [M, E] in phi's dtype, on phi's device.
    """
    _check_backend(backend)
    phi = _check_phi(phi)
    lifts = _check_lifts(lifts, phi)
    needs_grad = torch.is_grad_enabled() and phi.requires_grad
    dev = phi.device
    if backend == "auto":
        if needs_grad:
            backend = "reference"
        elif dev.type == "cpu" and _ext.cpp_available():
            backend = "cpu"
        elif dev.type == "cuda" and _ext.triton_usable(dev):
            backend = "triton"
        else:
            backend = "reference"
    if backend == "reference":
        rho = lifts.to_dense() if isinstance(lifts, BlockPermLift) else lifts
        return reference.gram_scores(phi, rho.to(dev, phi.dtype), normalize=normalize)
    if backend == "cpu":
        if dev.type != "cpu":
            raise ValueError(f"backend='cpu' needs CPU phi, got device {dev}")
        from symfast.ops.gram_scores import cpu

        asym = cpu.gram_scores_asym(phi.detach(), lifts)
    else:
        if not _ext.triton_usable(dev):
            raise ValueError(f"backend='triton' needs triton and a CUDA device (or TRITON_INTERPRET=1 "
                             f"on CPU), got device {dev}")
        from symfast.ops.gram_scores import triton as tr

        asym = tr.gram_scores_asym(phi.detach(), lifts)
    if normalize:
        asym = asym / phi.detach().to(torch.float64).flatten(1).norm(dim=1)[:, None]
    return asym.to(phi.dtype)
