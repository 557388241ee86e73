"""gram_scores: every fast path against the PyTorch reference, by name (gram itself: test_gram.py)."""
import textwrap

import numpy as np
import pytest
import torch

import symfast as sf
from symfast.groups import union
from symfast.readout.observables import extend_lift
from symfast.ops.gram import reference as gram_ref
from symfast.ops.gram_scores import BlockPermLift, gram_scores, gram_scores_blockperm_op, gram_scores_op, reference
from symfast.ops.gram_scores.lifts import split_lifts, transpose_pairs
from symfast.testing import assert_close, opcheck

DTYPES = [torch.float64, torch.float32]
DT_IDS = ["f64", "f32"]


def _orth(E, d, seed):
    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(E, d, d, generator=g, dtype=torch.float64))
    return q


def _grams(M, d, dtype, seed=0, H=16):
    g = torch.Generator().manual_seed(seed)
    return gram_ref.gram(torch.randn(M, d, H, generator=g, dtype=torch.float64)).to(dtype)


def _exact_lifts(pe, kind="gram"):
    els = list(union([sf.dihedral(4), sf.dihedral(6)]))
    lifts = [extend_lift(r, kind) for r in (pe.lift(g) for g in els) if r is not None]
    return torch.tensor(np.stack(lifts))


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("M", [1, 3, 37])
@pytest.mark.parametrize("d", [4, 48])
@pytest.mark.parametrize("E", [1, 7])
def test_scores_dense_lifts(dtype, M, d, E):
    phi = _grams(M, d, dtype, seed=M * d + E)
    rho = _orth(E, d, seed=E + d)
    ref = reference.gram_scores(phi, rho.to(dtype))
    assert_close("scores", ref, gram_scores(phi, rho, backend="cpu"))
    assert_close("asym", reference.gram_scores(phi, rho.to(dtype), normalize=False),
                 gram_scores(phi, rho, normalize=False, backend="cpu"))
    assert_close("scores_auto", ref, gram_scores(phi, rho))


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
def test_scores_shared_products(dtype):
    """Transposed pairs, involutions and duplicates share products; results unchanged."""
    q = _orth(5, 9, seed=1)
    v = torch.randn(9, 1, dtype=torch.float64)
    house = torch.eye(9, dtype=torch.float64) - 2 * v @ v.T / (v.T @ v)  # involution: rho^T = rho
    rho = torch.cat([q, q[:3].transpose(1, 2), house[None], q[:2]])
    order, U, a, b, _ = transpose_pairs(rho)
    # 5 lifts + their 5 transposes (3 of which are elements too) + 1 involution; duplicates add nothing
    assert U.shape[0] == 5 * 2 + 1 and sorted(order.tolist()) == list(range(len(rho)))
    phi = _grams(37, 9, dtype)
    assert_close("scores_shared", reference.gram_scores(phi, rho.to(dtype)), gram_scores(phi, rho, backend="cpu"))


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("pe", [sf.TriAxisPE(), sf.DyadicAxisPE(), sf.RandomFourierPE(), sf.TriAxisPE(K=1)],
                         ids=["triaxis", "dyadic", "rff", "triaxis_K1"])
@pytest.mark.parametrize("kind", ["gram", "gram_bias"])
def test_scores_exact_lifts_gather(dtype, pe, kind):
    rho = _exact_lifts(pe, kind)
    d = rho.shape[-1]
    bp_idx, bp, dense_idx = split_lifts(rho)
    assert len(dense_idx) == 0 and torch.equal(bp.to_dense(), rho)
    phi = _grams(37, d, dtype, seed=d)
    ref = reference.gram_scores(phi, rho.to(dtype))
    assert_close("scores_gather", ref, gram_scores(phi, bp, backend="cpu"))
    assert_close("scores_gather_detected", ref, gram_scores(phi, rho, backend="cpu"))
    assert_close("scores_gather_reference_backend", ref, gram_scores(phi, bp, backend="reference"))


def test_scores_mixed_exact_and_lstsq():
    pe = sf.DyadicAxisPE(K=2)
    els = [sf.rotation(np.pi / 2), sf.rotation(np.pi / 3), sf.reflection(0.0), sf.rotation(0.3)]
    rho = torch.tensor(np.stack([pe.lift(g) if pe.lift(g) is not None else
                                 pe.lift_lstsq(g, num_samples=256, orthogonal=True)[0] for g in els]))
    bp_idx, _, dense_idx = split_lifts(rho)
    assert bp_idx.tolist() == [0, 2] and dense_idx.tolist() == [1, 3]
    phi = _grams(3, 8, torch.float64)
    assert_close("scores_mixed", reference.gram_scores(phi, rho), gram_scores(phi, rho, backend="cpu"))


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
def test_wide_d_generic_loop(dtype):
    """d > 64 takes the plain-loop product instead of the register-blocked kernel."""
    w = torch.randn(3, 67, 70, generator=torch.Generator().manual_seed(0), dtype=torch.float64).to(dtype)
    phi, rho = gram_ref.gram(w), _orth(2, 67, seed=2)
    assert_close("scores_wide", reference.gram_scores(phi, rho.to(dtype)), gram_scores(phi, rho, backend="cpu"))


def test_planted_invariant_scores_zero():
    # exact lifts (gather path): average a Gram over TriAxisPE's D6 lifts
    rho = _exact_lifts(sf.TriAxisPE())
    g0 = _grams(1, 48, torch.float64)[0]
    inv = (rho.transpose(1, 2) @ g0 @ rho).mean(0, keepdim=True)
    inv = (inv + inv.transpose(1, 2)) / 2
    for backend in ("cpu", "reference"):
        assert gram_scores(inv, rho, backend=backend).abs().max() <= 1e-12
    # dense path: a dense orthogonal rho of order 6 and the average over its powers
    q = _orth(1, 12, seed=3)[0]
    t = np.pi / 3
    rot = torch.block_diag(*[torch.tensor([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]])] * 6)
    r = q @ rot @ q.T
    powers = torch.stack([torch.linalg.matrix_power(r, k) for k in range(6)])
    g1 = _grams(1, 12, torch.float64)[0]
    inv = (powers.transpose(1, 2) @ g1 @ powers).mean(0, keepdim=True)
    inv = (inv + inv.transpose(1, 2)) / 2
    assert len(split_lifts(powers[1:])[2]) == 5  # all dense
    s = gram_scores(inv, powers[1:], backend="cpu")
    assert s.abs().max() <= 1e-12
    before = gram_scores(g1[None], powers[1:], backend="cpu")[0]
    assert before[[0, 1, 3, 4]].min() > 1e-3  # not invariant before averaging (power 3 is -I: always 0)


def _cpu_isas() -> list[str]:
    """The kernel instances (generic, avx2, avx512) this CPU runs."""
    from symfast.ops.gram_scores import cpu

    out = []
    for isa in ("generic", "avx2", "avx512"):
        try:
            cpu.dense_asym(torch.zeros(1, 4, 4, dtype=torch.float64), _orth(1, 4, 0), isa=isa)
            out.append(isa)
        except ValueError:
            pass
    return out


def _check_instances(name, ref, outs):
    """Every instance against the reference; AVX2 and AVX-512 (both fused multiply-adds, one
    summation order) bit for bit; the generic instance (separate multiply and add, same order)
    against them within the float64 tolerance of symfast.testing.TOLERANCES."""
    for isa, out in outs.items():
        assert_close(f"{name}[{isa}]", ref, out, rtol=1e-12, atol=1e-12)
    if "avx2" in outs and "avx512" in outs:
        assert torch.equal(outs["avx2"], outs["avx512"])
    for isa in ("avx2", "avx512"):
        if isa in outs:
            assert_close(f"{name}[generic] vs [{isa}]", outs[isa], outs["generic"])


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("d", [5, 16, 40, 48, 64])  # every column split: 16-wide chunks, an 8-wide rest, odd d
def test_dense_kernel_every_register_width_matches_reference_and_each_other(dtype, d):
    from symfast.ops.gram_scores import cpu

    phi = _grams(7, d, dtype, seed=d)
    rho = _orth(5, d, seed=d + 1)
    ref = reference.gram_scores(phi.double(), rho, normalize=False)
    isas = _cpu_isas()
    assert "generic" in isas
    _check_instances("asym", ref, {isa: cpu.dense_asym(phi, rho, isa=isa) for isa in isas})


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
def test_blockperm_kernel_every_instance_matches_reference_and_each_other(dtype):
    from symfast.ops.gram_scores import cpu

    phi = _grams(9, 48, dtype, seed=3)
    lifts = _exact_lifts(sf.TriAxisPE())
    bp_idx, bp, _ = split_lifts(lifts)
    assert bp is not None and len(bp_idx) == len(lifts)
    ref = reference.gram_scores(phi.double(), lifts, normalize=False)
    _check_instances("blockperm", ref, {isa: cpu.blockperm_asym(phi, bp, isa=isa) for isa in _cpu_isas()})


def test_cpu_deterministic_across_threads():
    phi = _grams(37, 48, torch.float64)
    rho = torch.cat([_orth(3, 48, seed=5), _exact_lifts(sf.TriAxisPE())])
    n = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = gram_scores(phi, rho, backend="cpu")
        torch.set_num_threads(2)
        two = gram_scores(phi, rho, backend="cpu")
    finally:
        torch.set_num_threads(n)
    assert torch.equal(one, two)


@pytest.mark.parametrize("dtype, normalize", [(torch.float64, True), (torch.float32, False)], ids=["f64", "f32"])
def test_opcheck(dtype, normalize):
    phi = _grams(3, 4, dtype).requires_grad_()
    rho = _orth(2, 4, seed=0).requires_grad_()
    bp = BlockPermLift.from_dense(_exact_lifts(sf.DyadicAxisPE(K=1)))
    # the full check (incl. tracing with dynamic shapes, ~5 s a call) once per backend in float64
    fast = dtype != torch.float64
    for backend in ("cpu", "reference", "auto"):
        opcheck(gram_scores_op, (phi, rho, normalize, backend), fast=fast or backend == "auto")
        opcheck(gram_scores_blockperm_op, (phi, bp.perm, bp.blocks, bp.dim, normalize, backend),
                fast=fast or backend == "auto")


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("lift_kind", ["dense", "blockperm", "exact_dense"])
def test_gradients_match_reference(dtype, lift_kind):
    """d/dphi (and d/dlifts for dense lifts) of the fast op against the reference's autograd."""
    phi = _grams(5, 4, dtype, seed=3).requires_grad_()
    exact = _exact_lifts(sf.DyadicAxisPE(K=1))
    rho = {"dense": _orth(3, 4, seed=1), "blockperm": exact, "exact_dense": exact}[lift_kind]
    rho = rho.clone().requires_grad_(lift_kind == "dense")
    lifts = BlockPermLift.from_dense(rho.detach()) if lift_kind == "blockperm" else rho
    cot = torch.randn(5, rho.shape[0], generator=torch.Generator().manual_seed(0), dtype=dtype)
    fast = gram_scores(phi, lifts, backend="cpu")
    ref = reference.gram_scores(phi, rho.to(dtype))
    assert_close("scores", ref, fast)
    wrt = [phi, rho] if rho.requires_grad else [phi]
    gf = torch.autograd.grad(fast, wrt, cot)
    gr = torch.autograd.grad(ref, wrt, cot)
    for name, r, f in zip(("dphi", "dlifts"), gr, gf):
        assert_close(name, r, f)


def test_zero_observable_raises_unless_absolute():
    phi = _grams(3, 4, torch.float64)
    phi[1] = 0
    rho = _orth(2, 4, seed=0)
    for backend in ("cpu", "reference"):
        with pytest.raises(ValueError, match=r"phi\[1\] is all zero"):
            gram_scores(phi, rho, backend=backend)
        absolute = gram_scores(phi, rho, normalize=False, backend=backend)
        assert torch.equal(absolute[1], torch.zeros(2, dtype=torch.float64))


def test_blockpermlift_rejects_non_orthogonal_blocks():
    with pytest.raises(ValueError, match="block 1 of lift 0 is not orthogonal"):
        BlockPermLift([[1, 0]], torch.tensor([[[[0.0, 1.0], [1.0, 0.0]], [[2.0, 0.0], [0.0, 1.0]]]]))


def test_blockpermlift_validation():
    rho = _exact_lifts(sf.DyadicAxisPE(K=1))
    bp = BlockPermLift.from_dense(rho)
    assert len(bp) == rho.shape[0] and torch.equal(bp[[1, 0]].to_dense(), rho[[1, 0]])
    with pytest.raises(ValueError, match="lift 0 is not a permutation of 2x2 blocks"):
        BlockPermLift.from_dense(_orth(2, 4, seed=0))
    with pytest.raises(ValueError, match="perm rows must be permutations"):
        BlockPermLift([[0, 0]], torch.zeros(1, 2, 2, 2))
    with pytest.raises(ValueError, match=r"blocks must be \[E, m, 2, 2\]"):
        BlockPermLift([[0, 1]], torch.zeros(1, 2, 2))
    with pytest.raises(ValueError, match="lifts are 4 x 4 but phi is"):
        gram_scores(_grams(2, 6, torch.float64), bp)


@pytest.mark.parametrize("phi, rho, msg", [
    (torch.zeros(2, 3, 4, dtype=torch.float64), _orth(1, 3, 0), r"phi must be \[M, d, d\], got \[2, 3, 4\]"),
    (torch.zeros(3, 3, dtype=torch.float64), _orth(1, 3, 0), r"phi must be \[M, d, d\], got \[3, 3\]"),
    (torch.zeros(2, 3, 3, dtype=torch.int64), _orth(1, 3, 0), "phi must be float32 or float64"),
    (torch.full((2, 3, 3), float("nan"), dtype=torch.float64), _orth(1, 3, 0), "phi contains NaN"),
    (torch.triu(torch.ones(1, 3, 3, dtype=torch.float64)), _orth(1, 3, 0), "phi must be symmetric"),
    (torch.eye(3, dtype=torch.float64)[None], _orth(1, 4, 0), r"lifts must be \[E, 3, 3\]"),
    (torch.eye(3, dtype=torch.float64)[None], 2 * _orth(1, 3, 0), "lift 0 is not orthogonal"),
    (torch.eye(3, dtype=torch.float64)[None], torch.full((1, 3, 3), float("nan"), dtype=torch.float64),
     "lifts contains NaN"),
    (torch.eye(3, dtype=torch.float64)[None], torch.empty(1, 3, 3, device="meta"), "lifts are on meta"),
])
def test_bad_inputs(phi, rho, msg):
    with pytest.raises(ValueError, match=msg):
        gram_scores(phi, rho)


def test_bad_backend():
    phi, rho = _grams(2, 4, torch.float64), _orth(1, 4, 0)
    with pytest.raises(ValueError, match="backend must be one of"):
        gram_scores(phi, rho, backend="gpu")
    if not sf._ext.triton_usable(phi.device):
        with pytest.raises(ValueError, match="backend='triton' needs"):
            gram_scores(phi, rho, backend="triton")


_TRITON_SCRIPT = textwrap.dedent("""
    import numpy as np, torch
    import symfast as sf
    from symfast.ops.gram_scores import BlockPermLift, gram_scores, gram_scores_op, reference
    from symfast.testing import assert_close, opcheck
    torch.manual_seed(0)
    phi = reference.gram(torch.randn(3, 4, 8, dtype=torch.float64)).requires_grad_()
    rho, _ = torch.linalg.qr(torch.randn(2, 4, 4, dtype=torch.float64))
    opcheck(gram_scores_op, (phi, rho, True, "triton"), fast=True)
    for dtype in (torch.float64, torch.float32):
        for M, d, E in ((1, 4, 1), (3, 6, 2), (9, 17, 3)):
            w = torch.randn(M, d, 8, dtype=torch.float64)
            phi = reference.gram(w).to(dtype)
            rho, _ = torch.linalg.qr(torch.randn(E, d, d, dtype=torch.float64))
            assert_close(f"triton_scores_{dtype}_{M}_{d}_{E}", reference.gram_scores(phi, rho.to(dtype)),
                         gram_scores(phi, rho, backend="triton"))
        pe = sf.DyadicAxisPE(K=1)
        lifts = np.stack([r for r in (pe.lift(g) for g in sf.dihedral(4)) if r is not None])
        phi = reference.gram(torch.randn(3, 4, 8, dtype=torch.float64)).to(dtype)
        assert_close(f"triton_gather_{dtype}", reference.gram_scores(phi, torch.tensor(lifts).to(dtype)),
                     gram_scores(phi, BlockPermLift.from_dense(lifts), backend="triton"))
    print("TRITON_OK")
""")


def test_triton_interpreter_matches_reference(run_interpreted):
    run_interpreted(_TRITON_SCRIPT, expect="TRITON_OK")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_triton_cuda_matches_reference():
    phi = _grams(37, 48, torch.float64).cuda()
    rho = torch.cat([_orth(7, 48, seed=1), _exact_lifts(sf.TriAxisPE())])
    assert_close("cuda_scores", reference.gram_scores(phi, rho.cuda()), gram_scores(phi, rho))
