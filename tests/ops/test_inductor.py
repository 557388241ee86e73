"""torch.compile with its default backend (inductor, which generates and compiles C++ on CPU)
over the ops in one graph: values and gradients against the reference by name.

The aot_eager tests in test_transforms.py check each op's registration cheaply; this one
checks that inductor accepts the ops as opaque custom ops inside a larger fused graph.
One compile (~20-40 s on 2 cores), so it is a single test.
"""
from __future__ import annotations

import shutil

import pytest
import torch

import symfast as sf
from symfast import _ext
from symfast.ops.fourier_features import reference as ff_ref
from symfast.ops.fourier_mlp import reference as mlp_ref
from symfast.ops.gram import gram, reference as gram_ref
from symfast.ops.gram_scores import gram_scores, reference as gs_ref
from symfast.testing import assert_close

pytestmark = [
    pytest.mark.skipif(not _ext.cpp_available(), reason="symfast._C not built"),
    pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                       reason="inductor needs a C++ compiler on CPU"),
]


def test_inductor_fullgraph_pe_mlp_and_scores_match_reference():
    g = torch.Generator().manual_seed(0)
    pe = sf.DyadicAxisPE(3)
    model = sf.nn.FourierMLPEnsemble(pe, (16, 16), num_models=3, activation="tanh", dtype=torch.float32,
                                     generator=g)
    rho, _ = torch.linalg.qr(torch.randn(3, 6, 6, generator=g, dtype=torch.float64))
    x = (torch.rand(64, 2, generator=g) * 2 - 1).requires_grad_(True)
    w = torch.randn(4, 6, 9, generator=g, dtype=torch.float64, requires_grad=True)

    def step(x, w):
        y = model(x)  # [B, N] fused PE + MLP
        return y.sin().sum() + y.pow(2).mean(), pe(x).cos(), gram_scores(gram(w), rho)

    def reference(x, w):
        f, p = pe.frequencies.float(), pe.phases.float()
        y = mlp_ref.fourier_mlp(x, f, p, list(model.weights), list(model.biases), model.activation)
        return (y.sin().sum() + y.pow(2).mean(), ff_ref.fourier_features(x, f, p).cos(),
                gs_ref.gram_scores(gram_ref.gram(w), rho))

    compiled = torch.compile(step, fullgraph=True)  # default backend: inductor
    outs, refs = compiled(x, w), reference(x, w)
    for name, r, o in zip(("loss", "phi", "scores"), refs, outs):
        assert_close(name, r, o)
    params = [x, w, *model.parameters()]
    names = ["dx", "dW", *(f"d{n}" for n, _ in model.named_parameters())]
    cot = [torch.ones_like(outs[0]), torch.randn_like(outs[1]), torch.randn_like(outs[2])]
    got = torch.autograd.grad(outs, params, cot, allow_unused=True)
    want = torch.autograd.grad(refs, params, cot, allow_unused=True)
    for name, r, o in zip(names, want, got):
        assert (r is None) == (o is None), name
        if r is not None:
            assert_close(name, r, o, rms=True)
