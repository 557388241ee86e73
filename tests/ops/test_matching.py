"""Matching ops (assign, match_gram, match_signed_lifts): C++ vs the SciPy reference, opcheck, errors."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symfast as sf
from symfast import _ext
from symfast.readout.matching import matching_scores
from symfast.ops.matching import MODES, assign, assign_op, match_gram_op, match_rows, match_signed_lifts_op
from symfast.ops.matching.reference import matching_scores_reference
from symfast.testing import assert_close, opcheck

needs_cpp = pytest.mark.skipif(not _ext.cpp_available(), reason="symfast._C not built")


def _signed_lifts():
    pe = sf.DyadicAxisPE(2)
    return [r for r in (pe.lift(g) for g in sf.dihedral(4)) if r is not None]


@needs_cpp
@pytest.mark.parametrize("backend", ["cpu", "reference", "auto"])
def test_opcheck(backend):
    g = torch.Generator().manual_seed(0)
    cost = torch.rand(3, 5, 5, generator=g, dtype=torch.float64)
    opcheck(assign_op, (cost, backend))
    A, B = torch.randn(3, 5, 4, generator=g, dtype=torch.float64), torch.randn(3, 5, 4, generator=g, dtype=torch.float64)
    gram = A @ B.transpose(1, 2)
    for mode in MODES:
        code = int(_ext.require_cpp().MatchMode.__members__[mode])
        opcheck(match_gram_op, (gram, A.pow(2).sum(-1), B.pow(2).sum(-1), code, backend), fast=mode != "sign")
    W = torch.randn(2, 6, 4, generator=g, dtype=torch.float64)
    src = torch.tensor([[1, 0, 2, 3], [0, 1, 3, 2]])
    sign = torch.tensor([[1.0, -1.0, 1.0, 1.0], [1.0, 1.0, -1.0, 1.0]], dtype=torch.float64)
    opcheck(match_signed_lifts_op, (W, src, sign, 1, backend), fast=True)


@needs_cpp
@pytest.mark.parametrize("mode", MODES)
def test_signed_lift_kernel_matches_reference_kernel_and_per_model_reference(mode):
    rng = np.random.default_rng(1)
    W = rng.normal(size=(4, 12, 8))
    lifts = _signed_lifts()
    fast = matching_scores(W, lifts, mode=mode, backend="cpu")
    ref = matching_scores(W, lifts, mode=mode, backend="reference")
    assert_close("per_model", torch.as_tensor(ref.per_model), torch.as_tensor(fast.per_model))
    assert_close("per_model_vs_scipy", torch.as_tensor(matching_scores_reference(W, lifts, mode=mode)),
                 torch.as_tensor(fast.per_model))


@needs_cpp
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("mode", MODES)
def test_signed_lift_kernel_gives_the_same_bits_on_every_isa_instance(mode, dtype):
    from symfast.ops.matching import cpu

    order = ("generic", "avx2", "avx512")
    runnable = order[: order.index(_ext.require_cpp().cpu_isa()) + 1]
    g = torch.Generator().manual_seed(3)
    W = torch.randn(3, 13, 8, generator=g, dtype=torch.float64).to(dtype)  # 13: a ragged tail for every width
    src = torch.stack([torch.randperm(8, generator=g) for _ in range(5)])
    sign = torch.randint(0, 2, (5, 8), generator=g).double() * 2 - 1
    code = int(_ext.require_cpp().MatchMode.__members__[mode])
    outs = {isa: cpu.match_signed_lifts_fwd(W, src, sign, code, isa=isa) for isa in runnable}
    ref = match_signed_lifts_op(W, src, sign, code, "reference")
    for isa, out in outs.items():
        for name, a, b in zip(("index", "scale", "rel2"), outs["generic"], out):
            assert torch.equal(a, b), f"{name}: the {isa} instance differs from the generic one"
        # the observable against the reference (random W has near-ties, where an equally good
        # assignment may differ, so index and scale are compared across instances only)
        assert_close(f"rel2[{isa}]", ref[2], out[2])


@needs_cpp
@pytest.mark.parametrize("mode", MODES)
def test_match_rows_cpu_matches_reference(mode):
    g = torch.Generator().manual_seed(2)
    B = torch.randn(3, 9, 5, generator=g, dtype=torch.float64)
    perm = torch.stack([torch.randperm(9, generator=g) for _ in range(3)])
    A = torch.gather(B, 1, perm[..., None].expand(-1, -1, 5)) * (-1 if mode == "sign" else 2.0 if mode == "scale" else 1)
    out = {be: match_rows(A, B, mode, backend=be) for be in ("cpu", "reference")}
    for name, r, f in zip(("index", "scale", "row_residual", "total"), out["reference"], out["cpu"]):
        assert_close(name, r, f)
    assert torch.equal(out["cpu"][0], perm)


def test_backend_names_and_deprecated_aliases():
    cost = np.random.default_rng(0).random((2, 4, 4))
    with pytest.warns(DeprecationWarning, match="backend='scipy' is deprecated; use 'reference'"):
        old = assign(cost, "scipy")
    np.testing.assert_array_equal(old, assign(cost, "reference"))
    with pytest.raises(ValueError, match="backend must be one of"):
        assign(cost, "gpu")
    with pytest.raises(ValueError, match="matching has no Triton kernel"):
        assign(cost, "triton")


def test_requires_grad_raises():
    cost = torch.rand(2, 4, 4, dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="assign is not differentiable"):
        assign(cost)
    with pytest.raises(RuntimeError, match="symfast::assign is not differentiable"):
        assign_op(cost, "reference")
    # match_rows stays differentiable in its residuals (the assignment itself is discrete)
    A = torch.randn(2, 5, 3, dtype=torch.float64, requires_grad=True)
    total = match_rows(A, A.detach().flip(1), "perm")[3]
    total.sum().backward()
    assert A.grad is not None


@needs_cpp
@pytest.mark.parametrize("mode", ["sign", "perm"])
def test_float32_weights_whose_squares_overflow_agree(mode):
    """float32 rows of size 1e20: the C++ kernel works in float64; the reference now does too (its float32
    Gram overflowed to Inf and SciPy's assignment raised)."""
    W = torch.tensor([[[1e20], [-1.0]]], dtype=torch.float32)
    ref = sf.matching_scores(W, [torch.eye(1)], mode=mode, backend="reference").per_model
    fast = sf.matching_scores(W, [torch.eye(1)], mode=mode, backend="cpu").per_model
    assert_close("per_model", torch.from_numpy(ref), torch.from_numpy(fast))
    assert float(fast.max()) == 0.0


def test_nonfinite_gram_is_a_clear_error():
    A = torch.tensor([[[float("inf"), 1.0], [1.0, 2.0]]])
    with pytest.raises(ValueError, match="not finite"):
        match_rows(A, A, "sign", backend="reference")
