"""torch.ops.symfast.gram vs its PyTorch reference: output and gradient by name."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from symfast import _ext
from symfast.ops.gram import gram, gram_op, reference
from symfast.testing import assert_close, opcheck

DTYPES = [torch.float64, torch.float32]
DT_IDS = ["f64", "f32"]


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("M", [1, 3, 37])
@pytest.mark.parametrize("d", [4, 48])
def test_gram_matches_reference(dtype, M, d):
    w = torch.randn(M, d, 64, generator=torch.Generator().manual_seed(M + d), dtype=torch.float64).to(dtype)
    g = gram(w, backend="cpu")
    assert_close("gram", reference.gram(w), g)
    assert g.dtype == dtype and torch.equal(g, g.transpose(1, 2))


def _weights(M, d, H, dtype, seed=0, scale=1.0):
    w = torch.randn(M, d, H, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return (scale * w).to(dtype)


def _cpp_gram(w: torch.Tensor, num_threads: int = 1, isa: str = "auto") -> torch.Tensor:
    fn = getattr(_ext.require_cpp(), "gram_fwd_f64" if w.dtype == torch.float64 else "gram_fwd_f32")
    return torch.from_numpy(fn(w.numpy(), num_threads, isa))


def _cpu_isas() -> list[str]:
    """Instruction-set instances of the C++ gram kernel that this CPU (and build) runs."""
    out = []
    for isa in ("generic", "avx2", "avx512"):
        try:
            _cpp_gram(torch.zeros(1, 1, 1, dtype=torch.float64), isa=isa)
            out.append(isa)
        except ValueError:
            pass
    return out


# odd d (the register tiles' edges), d > 64, H not a multiple of 8 (zero-padded copy), empty dims
SHAPES = [(1, 1, 1), (2, 7, 9), (3, 9, 13), (2, 47, 64), (2, 48, 70), (2, 65, 64), (3, 67, 8), (1, 3, 0),
          (0, 4, 4), (2, 0, 5)]


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("M, d, H", SHAPES, ids=[f"{M}x{d}x{H}" for M, d, H in SHAPES])
def test_gram_shapes_match_reference(dtype, M, d, H):
    w = _weights(M, d, H, dtype, seed=d * H + M)
    g = gram(w, backend="cpu")
    assert g.shape == (M, d, d) and g.dtype == dtype and torch.equal(g, g.transpose(1, 2))
    assert_close("gram", reference.gram(w), g)


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
def test_gram_wide_d(dtype):
    """d = 67 > 64 with H = 70 (the wide case test_gram_scores used to check gram on)."""
    w = torch.randn(3, 67, 70, generator=torch.Generator().manual_seed(0), dtype=torch.float64).to(dtype)
    assert_close("gram_wide", reference.gram(w), gram(w, backend="cpu"))


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
def test_gram_isa_instances(dtype):
    """Every instruction-set instance this CPU runs against the reference. The AVX2 and AVX-512 ones
    (both fused multiply-adds, same lane order) agree bit for bit; in float32 all do (float32
    products are exact in float64)."""
    isas = _cpu_isas()
    assert "generic" in isas
    for M, d, H in ((2, 1, 3), (3, 9, 13), (2, 47, 64), (1, 65, 24)):
        w = _weights(M, d, H, dtype, seed=d + H)
        res = {isa: _cpp_gram(w, isa=isa) for isa in isas}
        for isa, g in res.items():
            assert_close(f"gram_{isa}", reference.gram(w), g)
            assert torch.equal(g, g.transpose(1, 2))
        if "avx2" in res and "avx512" in res:
            assert torch.equal(res["avx2"], res["avx512"])
        if dtype == torch.float32:
            assert all(torch.equal(res["generic"], g) for g in res.values())
    with pytest.raises(ValueError, match="isa must be auto, generic, avx2 or avx512"):
        _cpp_gram(w, isa="sse9")


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
def test_gram_thread_count_independent(dtype):
    """Each model's sums run in one fixed order: 1, 2 or more threads than models give the same bits."""
    for M in (64, 3):  # above and below the size that runs on one thread
        w = _weights(M, 48, 64, dtype, seed=M)
        one = _cpp_gram(w, 1)
        for n in (2, 5):
            assert torch.equal(one, _cpp_gram(w, n)), (M, n)
    n = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = gram(w, backend="cpu")
        torch.set_num_threads(2)
        assert torch.equal(one, gram(w, backend="cpu"))
    finally:
        torch.set_num_threads(n)


@settings(max_examples=30, deadline=None)
@given(M=st.integers(1, 3), d=st.integers(1, 70), H=st.integers(1, 40), f32=st.booleans(),
       scale=st.sampled_from([1e-3, 1.0, 1e3]), seed=st.integers(0, 2**31 - 1))
def test_gram_accumulates_in_float64(M, d, H, f32, scale, seed):
    """|G - G_exact| <= H eps64 |W_i| |W_j| (+ one float32 rounding of the result for float32
    weights), G_exact the float64 product of the same weights: float32 weights are not summed in float32."""
    dtype = torch.float32 if f32 else torch.float64
    w = _weights(M, d, H, dtype, seed=seed, scale=scale)
    g = gram(w, backend="cpu")
    assert g.dtype == dtype and torch.equal(g, g.transpose(1, 2))
    exact = reference.gram(w.double())
    norms = w.double().norm(dim=2)
    bound = 2 * H * 2.0**-53 * norms[:, :, None] * norms[:, None, :]
    if f32:
        bound = bound + 2.0**-24 * exact.abs()
    assert bool(((g.double() - exact).abs() <= bound).all())


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("where", [(0, 0, 0), (4, 46, 12), (2, 20, 6), (3, 0, 12)],
                         ids=["first", "last", "middle", "row0_tail"])
def test_gram_nonfinite_weights_raise(dtype, bad, where):
    w = _weights(5, 47, 13, dtype)
    w[where] = bad
    for backend in ("cpu", "reference"):
        with pytest.raises(ValueError, match="weights contains NaN or Inf"):
            gram(w, backend=backend)
    for isa in _cpu_isas():
        with pytest.raises(ValueError, match="weights contains NaN or Inf"):
            _cpp_gram(w, 2, isa)


@pytest.mark.parametrize("dtype, big", [(torch.float64, 1e200), (torch.float32, 1e20)], ids=DT_IDS)
def test_gram_overflow_of_finite_weights_is_inf_like_reference(dtype, big):
    """Finite weights whose Gram overflows the output dtype do not raise: G holds Inf where the
    reference's product does (the NaN/Inf check reads the diagonal, then scans the weights)."""
    w = torch.zeros(3, 2, 9, dtype=dtype)
    w[:, 0, 0] = big
    w[:, 1, 3] = 2.0
    w[1, 1, 0] = 1.0
    g = gram(w, backend="cpu")
    assert torch.isinf(g[:, 0, 0]).all() and torch.equal(g, reference.gram(w))
    for isa in _cpu_isas():
        assert torch.equal(_cpp_gram(w, 1, isa), g)


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("backend", ["cpu", "reference", "auto"])
def test_opcheck(dtype, backend):
    fast = dtype != torch.float64  # the full check once per backend
    for M, grad in ((1, False), (3, True)):
        w = torch.randn(M, 5, 7, dtype=dtype, requires_grad=grad)
        opcheck(gram_op, (w, backend), fast=fast)


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("backend", ["auto", "cpu"])
def test_gradient_matches_reference(dtype, backend):
    g = torch.Generator().manual_seed(0)
    w = torch.randn(4, 6, 9, generator=g, dtype=dtype, requires_grad=True)
    cot = torch.randn(4, 6, 6, generator=g, dtype=dtype)
    fast = gram(w, backend=backend)
    assert fast.requires_grad
    ref = reference.gram(w)
    assert_close("gram", ref, fast)
    assert_close("dW", torch.autograd.grad(ref, w, cot)[0], torch.autograd.grad(fast, w, cot)[0])


def test_bad_inputs():
    with pytest.raises(ValueError, match=r"weights must be \[M, d, H\], got \[4, 4\]"):
        gram(torch.zeros(4, 4))
    for backend in ("cpu", "reference"):
        with pytest.raises(ValueError, match="weights contains NaN"):
            gram(torch.full((1, 2, 3), float("inf")), backend=backend)
    with pytest.raises(ValueError, match="gram has no Triton kernel"):
        gram(torch.zeros(1, 2, 3), backend="triton")
    with pytest.raises(ValueError, match="float32 or float64"):
        gram(torch.zeros(1, 2, 3, dtype=torch.int64))
