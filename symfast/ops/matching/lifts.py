"""Lifts applied to batches of first layers, and the matching residual of a chunk of models.

Plain PyTorch shared by the public path (`symfast.ops.matching.lift_residuals`, used by the
layerwise study's `matching_scores` for lifts that are not signed permutations) and by the
reference of torch.ops.symfast.match_signed_lifts (`_op.py`); the assignment itself is the
`match` function passed in (the match_gram op on a resolved backend).
"""
from __future__ import annotations

import torch


def signed_permutation(R: torch.Tensor):
    """(src [G, k] int64, sign [G, k]) with (W R_g)[:, t] = sign[g, t] W[:, src[g, t]], or None."""
    nz = R != 0
    if not (bool((nz.sum(1) == 1).all()) and bool((R.abs()[nz] == 1).all())):
        return None
    src = nz.to(torch.int64).argmax(1)
    return src, torch.gather(R, 1, src[:, None, :])[:, 0, :]


def apply_lifts(W: torch.Tensor, R: torch.Tensor) -> torch.Tensor:
    """W [M, H, k], R [G, k, k] -> W R_g for all g: [M, G, H, k].

    Signed-permutation lifts (every exact lift of a zero-phase PE) are a column gather with signs;
    general lifts one GEMM [M*H, k] @ [k, G*k].
    """
    M, H, k = W.shape
    G = R.shape[0]
    sp = signed_permutation(R)
    if sp is not None:
        src, sign = sp
        A = torch.gather(W.transpose(1, 2).contiguous(), 1, src.reshape(1, G * k, 1).expand(M, G * k, H))
        A = A.reshape(M, G, k, H) * sign.to(W.dtype)[None, :, :, None]  # [M, G, k, H] = (W R_g)^T
        return A.transpose(2, 3).contiguous()
    A = (W.reshape(M * H, k) @ R.permute(1, 0, 2).reshape(k, G * k)).reshape(M, H, G, k)
    return A.permute(0, 2, 1, 3).contiguous()


def lift_residuals(Wm: torch.Tensor, R: torch.Tensor, orthogonal: bool, mode: str, match):
    """Squared relative residuals [M, G], index and scale [M*G, H] for one chunk of models.

    Args:
        Wm: [M, H, k] first layers (rows = neurons); R: [G, k, k] lifts (orthogonal: all exact lifts,
            so |a_i| = |w_i|); mode: "perm", "sign" or "scale".
        match: (gram [P, n, n], a2 [P, n], b2 [P, n], mode) -> (index, scale, ok) [P, n], the assignment.
    """
    M, H, _ = Wm.shape
    G = R.shape[0]
    k = Wm.shape[-1]
    A = apply_lifts(Wm, R).reshape(M, G * H, k)  # [M, G, H, k] = W1 rho(g)
    gram = torch.bmm(A, Wm.transpose(1, 2)).reshape(M * G, H, H)  # <a_i, b_j> per (model, lift)
    b2 = Wm.pow(2).sum(-1)  # [M, H]
    if orthogonal:  # all exact lifts: |a_i| = |w_i|
        a2 = b2.repeat_interleave(G, 0)
    else:
        a2 = A.pow(2).sum(-1).reshape(M * G, H)
    index, scale, ok = match(gram, a2, b2.repeat_interleave(G, 0), mode)
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
