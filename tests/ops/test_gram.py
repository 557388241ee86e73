"""torch.ops.symfast.gram vs its PyTorch reference: output and gradient by name."""
import pytest
import torch

from symfast.ops.gram_scores import gram, gram_op, reference
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


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("backend", ["cpu", "reference"])
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
