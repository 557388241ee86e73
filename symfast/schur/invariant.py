"""Ordering-invariant within-sector ablations: replace a sector's operator by its normal part.

"Task-Restricted Symmetries in Recurrent Weight Space" (arXiv 2606.18457) removes T_RR by zeroing
the strictly block-upper part of the R sector of an ordered real Schur form; which entries that
is depends on the order of the blocks inside R (`symfast.schur.orderings`). This module defines
versions that depend only on W and alpha.

Sectors as operators. With W = Q T Q^T ordered so that R comes first, span Q_R (the first n_R
Schur vectors) is the unique W-invariant subspace of the R eigenvalues and span Q_C its orthogonal
complement; both are functions of W and alpha. The sector operators

    A_R = Q_R^T W Q_R   (W restricted to its R-invariant subspace)
    A_C = Q_C^T W Q_C   (W compressed to the complement; eigenvalues: the C ones)

change as A -> Z^T A Z under any orthogonal change of basis Z inside the sector, which includes
every within-sector reordering of the Schur form.

Normal part. For a diagonalisable A = X diag(lambda) X^{-1} with unit-norm eigenvectors
(columns of X), let X = U H be the polar decomposition (U unitary, H Hermitian positive definite;
U is the Loewdin/symmetric orthonormalisation of the eigenvectors: the unitary matrix closest to
X in Frobenius norm). The normal part is

    nu(A) = U diag(lambda) U^*

a normal matrix with A's eigenvalues whose orthonormal eigenvectors are, in least squares, the
closest to A's own. It is canonical: it does not depend on the order of the eigenvalues
(X -> X Pi gives U -> U Pi), on the phases of the eigenvectors (X -> X D, |D| = 1, gives U -> U D,
and D commutes with diag(lambda)), or on the basis (A -> Z^T A Z gives X -> Z^T X, U -> Z^T U), so
nu(Z^T A Z) = Z^T nu(A) Z. It is real for real A (conjugate eigenvectors stay conjugate), and
nu(A) = A when A is normal with distinct eigenvalues. It is undefined for a defective A (X
singular); near that, it is ill-conditioned (`eigvec_cond` reports cond(X)).

The invariant ablations (suffix "inv" in the tables) build
    T~ = [[nu(A_R) or A_R, 0 or T_RC], [0, nu(A_C) or A_C]]   in the basis Q = [Q_R, Q_C],
replacing A_R for "-T_RR", A_C for "-T_CC", zeroing T_RC = Q_R^T W Q_C for "-T_C->R" (the paper's
-T_C->R, already invariant). Unlike the paper's -T_RR it also removes the non-normality inside
2x2 blocks (`departure_from_normality`'s dep_2x2 part): what remains of a sector is normal.
"""
from __future__ import annotations

import numpy as np
import torch

from symfast.schur.blocks import SUBSETS, SchurBlocks, subset_name

__all__ = ["normal_part", "invariant_ablate", "invariant_ablate_basis"]

COND_MAX = 1e12  # eigenvector matrices more ill-conditioned than this count as defective


def normal_part(A) -> tuple[torch.Tensor, float]:
    """nu(A) = U diag(lambda) U^*, U the polar factor of A's unit-norm eigenvector matrix.

    Args:
        A: [m, m] real (float64), m >= 0.

    Returns:
        (nu(A): [m, m] float64, cond(X): condition number of the eigenvector matrix; 1 for m = 0).

    Raises:
        ValueError: A is not square, not finite, or (numerically) defective: cond(X) > 1e12.
    """
    a = np.asarray(torch.as_tensor(A).detach().cpu().double())
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"A must be [m, m], got {list(a.shape)}")
    if a.shape[0] == 0:
        return torch.zeros(0, 0, dtype=torch.float64), 1.0
    if not np.isfinite(a).all():
        raise ValueError("A contains NaN or Inf")
    lam, X = np.linalg.eig(a)
    X = X / np.linalg.norm(X, axis=0, keepdims=True)
    u, s, vh = np.linalg.svd(X)
    cond = float(s[0] / s[-1]) if s[-1] > 0 else float("inf")
    if not cond <= COND_MAX:
        raise ValueError(f"A is (numerically) defective: its eigenvector matrix has condition number {cond:.3g} "
                         f"> {COND_MAX:g}; its normal part is not defined")
    U = u @ vh
    nu = (U * lam) @ U.conj().T
    scale = max(float(np.abs(a).max()), 1e-300)
    if float(np.abs(nu.imag).max()) > 1e-8 * scale * cond:
        raise RuntimeError(f"normal part of a real matrix came out complex (imag {np.abs(nu.imag).max():.2e})")
    return torch.from_numpy(np.ascontiguousarray(nu.real)), cond


def invariant_ablate_basis(Q: torch.Tensor, T: torch.Tensor, n_R: int, subsets=SUBSETS):
    """Invariant ablations from any orthogonal Q and T = Q^T W Q with T[n_R:, :n_R] = 0.

    Args:
        Q: [n, n] orthogonal, first n_R columns spanning W's R-invariant subspace; T: [n, n]
            (need not be quasi-triangular inside the sectors); n_R: size of R.
        subsets: tuples of block names (default: all 8).

    Returns:
        W_ablated: [S, n, n] float64, rows: per subset {"subset", "removed_mass_inv",
        "removed_rel_T_inv", "eigvec_cond_R", "eigvec_cond_C"}.
    """
    Q, T = torch.as_tensor(Q).double(), torch.as_tensor(T).double()
    n = T.shape[0]
    if Q.shape != (n, n) or T.shape != (n, n) or not 0 <= n_R <= n:
        raise ValueError(f"Q, T must be [n, n] and 0 <= n_R <= n, got {list(Q.shape)}, {list(T.shape)}, {n_R}")
    lower = float(T[n_R:, :n_R].abs().max()) if 0 < n_R < n else 0.0
    if lower > 1e-9 * max(float(T.abs().max()), 1e-300):
        raise ValueError(f"T[n_R:, :n_R] must vanish (span Q_R invariant under W), got max {lower:.3g}")
    nuR, cR = normal_part(T[:n_R, :n_R])
    nuC, cC = normal_part(T[n_R:, n_R:])
    subsets = list(subsets)
    Tt = T.unsqueeze(0).repeat(len(subsets), 1, 1)
    Tt[:, n_R:, :n_R] = 0.0
    for k, s in enumerate(subsets):
        for b in s:
            if b == "T_RR":
                Tt[k, :n_R, :n_R] = nuR
            elif b == "T_CC":
                Tt[k, n_R:, n_R:] = nuC
            elif b == "T_C->R":
                Tt[k, :n_R, n_R:] = 0.0
            else:
                raise ValueError(f"unknown block {b!r}; expected one of ('T_RR', 'T_C->R', 'T_CC')")
    W_ab = Q @ Tt @ Q.T
    nT = float(T.norm())
    rows = []
    for k, s in enumerate(subsets):
        m = float((T - Tt[k]).norm())
        rows.append({"subset": subset_name(s), "removed_mass_inv": m,
                     "removed_rel_T_inv": m / nT if nT > 0 else 0.0, "eigvec_cond_R": cR, "eigvec_cond_C": cC})
    return W_ab, rows


def invariant_ablate(sb: SchurBlocks, subsets=SUBSETS):
    """`invariant_ablate_basis(sb.Q, sb.T, sb.n_R, subsets)`: the same result for every within-sector
    ordering of sb (see the module docstring)."""
    return invariant_ablate_basis(sb.Q, sb.T, sb.n_R, subsets)
