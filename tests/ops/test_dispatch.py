"""Backend resolution (symfast.ops._dispatch): one set of names, clear errors, one-time fallback warning."""
import warnings

import pytest
import torch

from symfast import _ext
from symfast.ops import _dispatch
from symfast.ops.fourier_features import fourier_features, reference
from symfast.testing import assert_close


def test_names_and_errors():
    cpu = torch.device("cpu")
    assert _dispatch.resolve("op", "reference", cpu) == "reference"
    with pytest.raises(ValueError, match=r"backend must be one of \['auto', 'cpu', 'triton', 'reference'\]"):
        _dispatch.resolve("op", "cuda", cpu)
    with pytest.raises(ValueError, match="op has no C\\+\\+ kernel"):
        _dispatch.resolve("op", "cpu", cpu, cpu=False)
    with pytest.raises(ValueError, match="op has no Triton kernel"):
        _dispatch.resolve("op", "triton", cpu)
    with pytest.warns(DeprecationWarning, match="'cpp' is deprecated; use 'cpu'"):
        _dispatch.check_name("cpp")
    if _ext.cpp_available():
        assert _dispatch.resolve("op", "auto", cpu) == "cpu"
    assert _dispatch.resolve("op", "auto", cpu, cpu=False) == "reference"


def test_cpu_without_extension_warns_once_and_uses_reference(monkeypatch):
    monkeypatch.setattr(_ext, "cpp_available", lambda: False)
    monkeypatch.setattr(_dispatch, "_warned", set())
    x, w, b = torch.rand(5, 2), torch.randn(3, 2), torch.zeros(3)
    with pytest.warns(RuntimeWarning, match="symfast._C is not built; using the \\(slower\\) PyTorch reference"):
        out = fourier_features(x, w, b)
    assert_close("features", reference.fourier_features(x, w, b), out)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fourier_features(x, w, b)  # warned once per op


def test_cuda_without_triton_warns_once(monkeypatch):
    monkeypatch.setattr(_ext, "HAS_TRITON", False)
    monkeypatch.setattr(_dispatch, "_warned", set())
    with pytest.warns(RuntimeWarning, match="triton is not installed"):
        assert _dispatch.resolve("gram_scores", "auto", torch.device("cuda"), triton=True) == "reference"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _dispatch.resolve("gram_scores", "auto", torch.device("cuda"), triton=True)


@pytest.mark.skipif(not _ext.cpp_available(), reason="symfast._C not built")
@pytest.mark.parametrize("call", [
    lambda C, a: C.gram_fwd_f64(a),
    lambda C, a: C.sym_stats_f64(a),
    lambda C, a: C.ordered_schur_f64(a, 0.9, 1e-9),
    lambda C, a: C.lsa_batched(a),
], ids=["gram", "sym_stats", "ordered_schur", "lsa"])
def test_cpp_kernels_refuse_arrays_they_would_copy(call):
    """The C++ entry points take arrays as they are (pybind11 `noconvert`): a wrong dtype or a
    non-contiguous view is a TypeError, never a silent converted copy."""
    import numpy as np

    C = _ext.require_cpp()
    good = np.zeros((2, 3, 3))
    call(C, good)  # the exact dtype and layout is accepted
    for bad in (good.astype(np.float32), np.zeros((2, 3, 6))[:, :, ::2]):
        with pytest.raises(TypeError):
            call(C, bad)
