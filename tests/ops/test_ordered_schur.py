"""Ordered real Schur and ordschur: properties, C++ vs SciPy reference, bad input."""
import numpy as np
import pytest
import scipy.linalg as sla
import torch

import symfast as sf
from symfast.ops.ordered_schur import ordered_schur_op, ordschur_op, reference
from symfast.testing import opcheck


def _matrices(kind: str, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "random":
        return rng.standard_normal((n, n)) / np.sqrt(n)
    if kind == "near_degenerate":  # eigenvalues 1, 1 + 1e-13, ... in a random basis
        Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
        d = 1.0 + 1e-13 * rng.standard_normal(n)
        d[: n // 2] *= 0.5
        return Q @ (np.diag(d) + 1e-3 * np.triu(rng.standard_normal((n, n)), 1)) @ Q.T
    if kind == "defective":  # Jordan blocks in a random basis
        J = np.diag(np.full(n, 0.7)) + np.diag(np.ones(n - 1), 1)
        S = rng.standard_normal((n, n))
        return S @ J @ np.linalg.inv(S)
    if kind == "orthogonal":
        Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
        return Q
    if kind == "normal":  # Q diag-of-rotations Q^T
        Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
        B = np.zeros((n, n))
        for i in range(0, n - 1, 2):
            r, th = rng.uniform(0.2, 1.5), rng.uniform(0, np.pi)
            B[i:i + 2, i:i + 2] = r * np.array([[np.cos(th), -np.sin(th)], [np.sin(th), np.cos(th)]])
        if n % 2:
            B[-1, -1] = rng.uniform(-1, 1)
        return Q @ B @ Q.T
    if kind == "zero":
        return np.zeros((n, n))
    raise KeyError(kind)


def _check_form(res, W, tie_tol=1e-9):
    Q, T, ev = np.asarray(res.Q), np.asarray(res.T), np.asarray(res.eigvals)
    n = W.shape[-1]
    assert np.linalg.norm(Q @ T @ Q.T - W) <= 1e-12 * max(1.0, np.linalg.norm(W)) * n
    assert np.linalg.norm(Q.T @ Q - np.eye(n)) <= 1e-12 * n
    assert np.all(np.tril(T, -2) == 0)
    for i, s in res.blocks():
        if s == 2:  # standard form: equal diagonal, opposite-sign off-diagonal
            a, b, c, d = T[i, i], T[i, i + 1], T[i + 1, i], T[i + 1, i + 1]
            assert abs(a - d) <= 1e-12 * max(1, abs(a)) and b * c < 0
            assert ev[i].imag > 0 and np.isclose(ev[i], np.conj(ev[i + 1]))
    # eigenvalues are those of W (as a multiset)
    ref = np.sort_complex(np.linalg.eigvals(T))
    assert np.allclose(np.sort_complex(ev), ref, atol=1e-8)
    mod = np.abs(ev)
    rho = mod.max()
    if int(res.failed_swaps) == 0:
        assert np.all(np.diff(mod) <= tie_tol * rho + 1e-12 * max(rho, 1)), mod


KINDS = ["random", "near_degenerate", "defective", "orthogonal", "normal", "zero"]


@pytest.mark.parametrize("n", [1, 2, 7, 24], ids=lambda n: f"n{n}")
@pytest.mark.parametrize("kind", KINDS)
def test_ordered_schur_properties(kind, n):
    W = np.stack([_matrices(kind, n, s) for s in range(3)])
    res = sf.ordered_schur(W)
    assert res.Q.shape == (3, n, n) and res.eigvals.shape == (3, n)
    for m in range(3):
        sub = type(res)(*(getattr(res, f)[m] for f in res.__dataclass_fields__))
        _check_form(sub, W[m])
        assert int(res.sector_failures[m]) == 0


@pytest.mark.parametrize("kind", ["random", "normal", "defective"])
def test_cpp_matches_scipy_reference(kind):
    W = np.stack([_matrices(kind, 16, s) for s in range(4)])
    fast = sf.ordered_schur(W, backend="cpu")
    ref = sf.ordered_schur(W, backend="reference")
    for name in ["T", "Q", "eigvals"]:
        np.testing.assert_allclose(getattr(fast, name), getattr(ref, name), atol=1e-10, err_msg=name)
    np.testing.assert_array_equal(fast.n_R, ref.n_R)
    np.testing.assert_array_equal(fast.block_start, ref.block_start)


def test_ties_do_not_swap_orthogonal():
    """All |lambda| = 1: the tie tolerance keeps LAPACK's order, so T is scipy's unsorted T."""
    W = _matrices("orthogonal", 20, 3)
    res = sf.ordered_schur(W)
    T0, _ = sla.schur(W, output="real")
    np.testing.assert_allclose(res.T, np.triu(T0, -1), atol=1e-13)
    # with no tolerance rounding noise reorders the blocks
    res0 = sf.ordered_schur(W, tie_tol=0.0, sector_alpha=0.0)
    assert not np.allclose(res0.T, np.triu(T0, -1), atol=1e-13)


def test_torch_float32_batch_dims_and_sector():
    W = torch.randn(2, 3, 10, 10, generator=torch.Generator().manual_seed(0))
    res = sf.ordered_schur(W, sector_alpha=0.8)
    assert isinstance(res.Q, torch.Tensor) and res.Q.dtype == torch.float64 and res.Q.shape == (2, 3, 10, 10)
    mod = res.eigvals.abs()
    rho = mod.max(-1, keepdim=True).values
    nR = (mod >= 0.8 * rho).sum(-1)
    assert torch.equal(nR, res.n_R)
    recon = res.Q @ res.T @ res.Q.transpose(-1, -2)
    assert torch.allclose(recon, W.double(), atol=1e-12)


def test_ordschur_multi_cluster():
    rng = np.random.default_rng(5)
    W = rng.standard_normal((4, 12, 12))
    s = sf.ordered_schur(W)
    lab = rng.integers(0, 4, (4, 12))
    lab = np.take_along_axis(lab, np.asarray(s.block_start), axis=1)  # a pair shares a label
    for backend in ["cpu", "reference"]:
        r = sf.ordschur(s.Q, s.T, lab, backend=backend)
        assert np.abs(r.Q @ r.T @ np.swapaxes(r.Q, 1, 2) - W).max() < 1e-12
        for m in range(4):
            # eigenvalue -> label map is preserved, and labels are non-increasing down the diagonal
            new_lab = np.empty(12, np.int64)
            for j, e in enumerate(r.eigvals[m]):
                k = int(np.argmin(np.abs(s.eigvals[m] - e)))
                new_lab[j] = lab[m, k]
            assert np.all(np.diff(new_lab) <= 0), new_lab
    with pytest.raises(ValueError, match="2x2"):
        bad = lab.copy()
        i = next(i for i, sz in s.blocks(0) if sz == 2)
        bad[0, i + 1] = bad[0, i] + 1
        sf.ordschur(s.Q, s.T, bad)


@pytest.mark.parametrize("bad, match", [
    (np.full((3, 3), np.nan), "NaN"),
    (np.ones((3, 4)), "square"),
    (np.ones(3), "square"),
    (np.ones((3, 3), dtype=np.int64), "float32 or float64"),
    (np.array([[np.inf]]), "NaN or Inf"),
])
def test_bad_input(bad, match):
    with pytest.raises(ValueError, match=match):
        sf.ordered_schur(bad)


@pytest.mark.parametrize("backend", ["cpu", "reference", "auto"])
def test_opcheck(backend):
    rng = np.random.default_rng(0)
    W = torch.from_numpy(rng.standard_normal((3, 5, 5)))
    opcheck(ordered_schur_op, (W, 0.9, 1e-9, backend))
    s = sf.ordered_schur(W)
    lab = torch.from_numpy(np.take_along_axis(rng.integers(0, 3, (3, 5)), s.block_start.numpy(), 1).astype(np.float64))
    opcheck(ordschur_op, (s.Q, s.T, lab, backend))


def test_inputs_requiring_grad_raise():
    W = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="ordered_schur is not differentiable, but W require"):
        sf.ordered_schur(W)
    s = sf.ordered_schur(W.detach())
    with pytest.raises(RuntimeError, match="ordschur is not differentiable, but U require"):
        sf.ordschur(s.Q.requires_grad_(), s.T, np.zeros(4, np.int64))
    with torch.no_grad():  # explicitly outside autograd: fine
        assert sf.ordered_schur(W).T.shape == (4, 4)


@pytest.mark.parametrize("backend", ["cpu", "reference"])
@pytest.mark.parametrize("tie_tol", [-1e-3, float("nan"), float("inf")])
def test_bad_tie_tol_raises_on_both_backends(backend, tie_tol):
    with pytest.raises(ValueError, match="tie_tol must be"):
        sf.ordered_schur(np.eye(3), tie_tol=tie_tol, backend=backend)
    with pytest.raises(ValueError, match="sector_alpha must be finite"):
        sf.ordered_schur(np.eye(3), sector_alpha=float("nan"), backend=backend)


@pytest.mark.parametrize("backend", ["cpu", "reference"])
@pytest.mark.parametrize("scale", [1e-200, 1e200, 1e300])
def test_extreme_scales_factorise(backend, scale):
    W = np.random.default_rng(1).standard_normal((6, 6))
    res = sf.ordered_schur(scale * W, backend=backend)
    ref = sf.ordered_schur(W, backend=backend)
    np.testing.assert_allclose(res.T / scale, ref.T, rtol=0, atol=1e-12 * np.abs(ref.T).max())
    np.testing.assert_allclose(res.Q, ref.Q, atol=1e-12)
    np.testing.assert_allclose(np.abs(res.eigvals) / scale, np.abs(ref.eigvals), rtol=1e-12)
    assert res.recon_err < 1e-12
    r2 = sf.ordschur(res.Q, res.T, np.arange(6)[::-1].copy() * 0, backend=backend)
    assert r2.recon_err < 1e-12


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_ordschur_rejects_t_not_in_schur_form(backend):
    s = sf.ordered_schur(np.random.default_rng(2).standard_normal((6, 6)))
    lab = np.zeros(6, np.int64)
    U = s.Q
    bad = np.triu(np.random.default_rng(3).standard_normal((6, 6)), -1)  # full subdiagonal
    with pytest.raises(ValueError, match="two consecutive non-zero subdiagonal"):
        sf.ordschur(U, bad, lab, backend=backend)
    real_pair = np.triu(np.ones((6, 6)))
    real_pair[1, 0] = 1.0  # a 2x2 block [[1, 1], [1, 1]]: real eigenvalues, not standard form
    with pytest.raises(ValueError, match="not a complex pair in standard form"):
        sf.ordschur(U, real_pair, lab, backend=backend)
    with pytest.raises(ValueError, match="quasi-upper-triangular"):
        sf.ordschur(U, np.ones((6, 6)), lab, backend=backend)


def test_reference_block_helpers():
    T = np.array([[1.0, 2, 3], [-1, 1, 4], [0, 0, 0.5]])
    assert reference.block_structure(T) == [(0, 2), (2, 1)]
    np.testing.assert_allclose(reference.block_eigvals(T), [1 + 1.4142135623730951j, 1 - 1.4142135623730951j, 0.5])


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 12), scale=st.sampled_from([1e-8, 1.0, 1e6]), seed=st.integers(0, 2**31 - 1),
       alpha=st.sampled_from([0.0, 0.5, 0.9]))
def test_ordered_schur_hypothesis(n, scale, seed, alpha):
    rng = np.random.default_rng(seed)
    W = scale * rng.standard_normal((n, n))
    if seed % 3 == 0:  # repeated eigenvalues: a symmetric matrix with a doubled spectrum
        D = np.repeat(rng.standard_normal((n + 1) // 2), 2)[:n]
        Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
        W = scale * Q @ np.diag(D) @ Q.T
    res = sf.ordered_schur(W, sector_alpha=alpha)
    _check_form(res, W)
    np.testing.assert_allclose(res.T, sf.ordered_schur(W, sector_alpha=alpha, backend="reference").T,
                               atol=1e-9 * scale * max(1, n))


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_orthogonal_matrix_at_alpha_one_is_all_R(backend):
    """Every |lambda| of an orthogonal W equals rho up to rounding: at sector_alpha = 1 all of them are
    in R on both backends (the cut takes the tie tolerance; before, rounding decided, 1 vs 3 of 3)."""
    q = np.linalg.qr(np.random.default_rng(3).standard_normal((2, 3, 3)))[0]
    res = sf.ordered_schur(torch.from_numpy(q), 1.0, backend=backend)
    assert np.asarray(res.n_R).tolist() == [3, 3]
