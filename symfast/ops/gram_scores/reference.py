"""PyTorch reference for symfast.ops.gram_scores.gram_scores()."""
from __future__ import annotations

import torch

from symfast.ops.gram.reference import gram  # noqa: F401  (the Grams these scores read; importable here as before)

# Bytes per chunk of [Mc, Ec, d, d] intermediates; einsum keeps about four alive (< ~1 GB).
_CHUNK_BYTES = 1 << 28


def gram_scores(phi: torch.Tensor, lifts: torch.Tensor, normalize: bool = True) -> torch.Tensor:
    """Scores s[m, e] = ||rho_e^T phi_m rho_e - phi_m||_F / ||phi_m||_F, chunked batched einsum.

    Args:
        phi: [M, d, d] observables.
        lifts: [E, d, d] lifts rho_e (phi's dtype and device).
        normalize: divide by ||phi_m||_F (False: the absolute norm).

    Returns:
        [M, E] in phi's dtype.
    """
    M, d, _ = phi.shape
    E = lifts.shape[0]
    per_pair = max(1, d * d * phi.element_size())
    budget = max(1, _CHUNK_BYTES // per_pair)  # (model, element) pairs per chunk
    Ec = max(1, min(E, budget // max(M, 1)))
    Mc = max(1, min(M, budget // Ec))
    out = torch.empty(M, E, dtype=phi.dtype, device=phi.device)
    rt = lifts.transpose(1, 2)
    for m0 in range(0, M, Mc):
        p = phi[m0:m0 + Mc]
        for e0 in range(0, E, Ec):
            t = torch.einsum("eij,sjk,ekl->seil", rt[e0:e0 + Ec], p, lifts[e0:e0 + Ec]) - p[:, None]
            out[m0:m0 + Mc, e0:e0 + Ec] = t.flatten(2).double().norm(dim=2)  # float64 sums: no float32 overflow
    if normalize:  # in float64, as the C++ kernel: a float32 phi near 1e30 has a finite score, not inf / inf
        out = (out.double() / phi.flatten(1).double().norm(dim=1)[:, None]).to(phi.dtype)
    return out
