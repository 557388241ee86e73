"""torch.compile and torch.func over the ops and the modules built on them, against the reference.

Under torch.func transforms the ops run their PyTorch reference (symfast.ops._dispatch); these
tests pin that the results equal the reference's, on the default backend.
"""
from __future__ import annotations

import pytest
import torch
from torch.func import grad, jacrev, vmap

import symfast as sf
from symfast import _ext
from symfast.ops.fourier_features import reference as ff_ref
from symfast.ops.fourier_mlp import fourier_mlp, reference as mlp_ref
from symfast.ops.gram import gram, reference as gram_ref
from symfast.ops.gram_scores import gram_scores, reference as gs_ref
from symfast.testing import assert_close

needs_cpp = pytest.mark.skipif(not _ext.cpp_available(), reason="symfast._C not built")


def _model(ensemble=False, act="tanh", dtype=torch.float64):
    g = torch.Generator().manual_seed(0)
    pe = sf.DyadicAxisPE(3)
    if ensemble:
        return sf.nn.FourierMLPEnsemble(pe, (16, 16), num_models=3, activation=act, dtype=dtype, generator=g)
    return sf.nn.FourierMLP(pe, (16, 16), activation=act, dtype=dtype, generator=g)


def _ref_forward(m, x):
    f, p = m.pe.frequencies.to(x.dtype), m.pe.phases.to(x.dtype)
    return mlp_ref.fourier_mlp(x, f, p, list(m.weights), list(m.biases), m.activation)


def _points(n, dtype=torch.float64, seed=1):
    return torch.rand(n, 2, generator=torch.Generator().manual_seed(seed), dtype=dtype) * 2 - 1


@needs_cpp
def test_vmap_jacrev_sdf_normals_match_reference():
    """Per-point normals by vmap(jacrev(model)): the everyday neural-field pattern."""
    m = _model()
    x = _points(50)
    normals = vmap(jacrev(m))(x)  # [N, 2]
    xr = x.clone().requires_grad_(True)
    (ref,) = torch.autograd.grad(_ref_forward(m, xr[None].expand(1, -1, -1).reshape(-1, 2))[0].sum(), xr)
    assert_close("normals", ref, normals)


@needs_cpp
def test_grad_and_vmap_over_ensemble_match_reference():
    m = _model(ensemble=True)
    x = _points(20)
    y = vmap(lambda p: m(p[None]))(x)  # [N, B, 1]
    assert_close("vmap y", _ref_forward(m, x).T[..., None], y)
    params = {k: v.detach() for k, v in m.named_parameters()}

    def loss(params, x):
        return torch.func.functional_call(m, params, (x,)).pow(2).mean()

    g = grad(loss)(params, x)
    ref = torch.autograd.grad(_ref_forward(m, x).pow(2).mean(), list(m.parameters()))
    for (name, _), r in zip(m.named_parameters(), ref):
        assert_close(f"d{name}", r, g[name])


@needs_cpp
def test_vmap_jacrev_fourier_pe_matches_reference():
    pe = sf.DyadicAxisPE(3)
    x = _points(30)
    jac = vmap(jacrev(pe))(x)  # [N, d, 2]
    ref = vmap(jacrev(lambda p: ff_ref.fourier_features(p, pe.frequencies, pe.phases)))(x)
    assert_close("dphi/dx", ref, jac)
    assert_close("vmap phi", ff_ref.fourier_features(x, pe.frequencies, pe.phases), vmap(pe)(x))


@needs_cpp
def test_compile_fullgraph_fourier_pe_and_gradients():
    pe = sf.DyadicAxisPE(3)
    x = _points(40, torch.float32).requires_grad_(True)
    compiled = torch.compile(pe, backend="aot_eager", fullgraph=True)
    y = compiled(x)
    ref = ff_ref.fourier_features(x, pe.frequencies.float(), pe.phases.float())
    assert_close("phi", ref, y)
    cot = torch.randn_like(ref)
    assert_close("dx", torch.autograd.grad(ref, x, cot)[0], torch.autograd.grad(y, x, cot)[0])


@needs_cpp
def test_compile_fullgraph_gram_scores_and_gradients():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(4, 6, 9, generator=g, dtype=torch.float64, requires_grad=True)
    rho, _ = torch.linalg.qr(torch.randn(3, 6, 6, generator=g, dtype=torch.float64))

    def scores(w):
        return gram_scores(gram(w), rho)

    compiled = torch.compile(scores, backend="aot_eager", fullgraph=True)
    s = compiled(w)
    ref = gs_ref.gram_scores(gram_ref.gram(w), rho)
    assert_close("scores", ref, s)
    cot = torch.randn(4, 3, generator=g, dtype=torch.float64)
    assert_close("dW", torch.autograd.grad(ref, w, cot)[0], torch.autograd.grad(s, w, cot)[0])


@needs_cpp
def test_compile_fullgraph_fused_mlp_module():
    m = _model(ensemble=True, act="relu", dtype=torch.float32)
    x = _points(64, torch.float32)
    compiled = torch.compile(m, backend="aot_eager", fullgraph=True)
    y = compiled(x)
    assert_close("y", _ref_forward(m, x), y)
    gs = torch.autograd.grad(y.pow(2).sum(), list(m.parameters()))
    refs = torch.autograd.grad(_ref_forward(m, x).pow(2).sum(), list(m.parameters()))
    for (name, _), r, f in zip(m.named_parameters(), refs, gs):
        assert_close(f"d{name}", r, f, rms=True)


def _model_3d(dtype=torch.float64):
    """One 3D model as tensors: frequencies [6, 3], phases [6], weights 12 -> 16 -> 16 -> 1."""
    g = torch.Generator().manual_seed(3)
    f = torch.randn(6, 3, generator=g, dtype=dtype) * 3
    p = torch.rand(6, generator=g, dtype=dtype)
    dims = [12, 16, 16, 1]
    ws = [torch.randn(1, a, b, generator=g, dtype=dtype) / a ** 0.5 for a, b in zip(dims[:-1], dims[1:])]
    bs = [torch.randn(1, b, generator=g, dtype=dtype) * 0.3 for b in dims[1:]]
    return f, p, ws, bs


@needs_cpp
def test_vmap_jacrev_3d_normals_match_reference():
    """Per-point normals of a 3D field by vmap(jacrev(.)) over the public op (x [1, 3] per call)."""
    f, p, ws, bs = _model_3d()
    x = torch.rand(40, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 2 - 1
    normals = vmap(jacrev(lambda q: fourier_mlp(q[None], f, p, ws, bs, "tanh")[0, 0]))(x)  # [N, 3]
    xr = x.clone().requires_grad_(True)
    (ref,) = torch.autograd.grad(mlp_ref.fourier_mlp(xr, f, p, ws, bs, "tanh").sum(), xr)
    assert_close("3d normals", ref, normals)


@needs_cpp
def test_grad_over_3d_weights_matches_reference():
    f, p, ws, bs = _model_3d()
    x = torch.rand(30, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64) * 2 - 1

    def loss(ws):
        return fourier_mlp(x, f, p, ws, bs, "silu").pow(2).mean()

    g = grad(loss)(ws)
    wr = [w.clone().requires_grad_(True) for w in ws]
    ref = torch.autograd.grad(mlp_ref.fourier_mlp(x, f, p, wr, bs, "silu").pow(2).mean(), wr)
    for l, (r, k) in enumerate(zip(ref, g)):
        assert_close(f"3d dW{l}", r, k)


@needs_cpp
def test_vmap_jacrev_3d_fourier_features_is_analytic():
    """d/dx [sin u_j, cos u_j] = [cos u_j, -sin u_j] w_j with u = x . w_j + b_j, at D = 3."""
    from symfast.ops.fourier_features import fourier_features

    f, p, _, _ = _model_3d()
    x = torch.rand(25, 3, generator=torch.Generator().manual_seed(4), dtype=torch.float64) * 2 - 1
    jac = vmap(jacrev(lambda q: fourier_features(q, f, p)))(x)  # [N, 12, 3]
    u = x @ f.T + p
    ref = torch.stack((torch.cos(u)[..., None] * f, -torch.sin(u)[..., None] * f), dim=2).flatten(1, 2)
    assert_close("3d dphi/dx", ref, jac)
    assert_close("3d vmap phi", ff_ref.fourier_features(x, f, p), vmap(lambda q: fourier_features(q, f, p))(x))


def _pe_3d():
    """A FourierPE holding the 3D frequencies [6, 3] and phases of `_model_3d` (set on its buffers)."""
    import numpy as np

    pe = sf.FourierPE(np.ones((6, 2)), name="test3d")
    pe.frequencies, pe.phases = _model_3d()[:2]
    return pe


@needs_cpp
def test_vmap_jacrev_3d_fourier_mlp_module_matches_reference():
    """sf.nn.FourierMLP over 3D points: vmap(jacrev(model)) normals and a C++ train step vs the reference."""
    m = sf.nn.FourierMLP(_pe_3d(), (16, 16), activation="tanh", dtype=torch.float64,
                         generator=torch.Generator().manual_seed(0))
    x = torch.rand(30, 3, generator=torch.Generator().manual_seed(5), dtype=torch.float64) * 2 - 1
    normals = vmap(jacrev(m))(x)  # [N, 3]
    xr = x.clone().requires_grad_(True)
    (ref,) = torch.autograd.grad(_ref_forward(m, xr)[0].sum(), xr)
    assert_close("3d module normals", ref, normals)
    t = torch.randn(30, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    loss = m.train_step(x, t)
    rl, rw, rb = mlp_ref.fourier_mlp_train_step(x, t[None], m.pe.frequencies, m.pe.phases, list(m.weights),
                                                list(m.biases), "tanh")
    assert_close("3d module loss", rl[0], loss)
    for l, (r, p) in enumerate(zip(rw + rb, list(m.weights) + list(m.biases))):
        assert_close(f"3d module grad {l}", r, p.grad)
