"""symfast in other people's code: pickling, learned frequencies, nn.Sequential models in the readout,
degree-named elements, short reprs, the meta device, low-precision inputs and autocast, empty batches,
wide layers, several outputs, and what `import symfast` loads."""
import concurrent.futures
import contextlib
import copy
import io
import math
import multiprocessing
import os
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import symfast as sf
from symfast.nn import fields
from symfast.ops.fourier_mlp import reference
from symfast.testing import assert_close

X = torch.rand(16, 2, generator=torch.Generator().manual_seed(0))


def _module(pe=None, act="tanh"):
    shapes = [sf.shapes.square()] * 2 + [sf.shapes.triangle()] * 2
    return sf.nn.FourierMLPEnsemble(pe or sf.DyadicAxisPE(3), hidden=(8,), num_models=4, activation=act,
                                    backend="reference", shapes=shapes, seeds=list(range(4)))


def _read(obj, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # small budgets warn
        return sf.readout(obj, sweep=0, num_null=8, **kw)


def _eval_in_worker(module, x):  # runs in a spawned process: everything it gets was pickled
    return module(x).detach(), sf.shapes.cube().sdf(x.double().repeat(1, 2)[:, :3])


# -- 1. pickling -------------------------------------------------------------------------------

def test_every_shape_pickles_through_its_recipe():
    shapes = [sf.shapes.by_name(n) for n in sf.shapes.NAMES + sf.shapes.NAMES_3D]
    shapes.append(sf.shapes.polygon([[0.0, 0.5], [-0.5, -0.4], [0.45, -0.3]], name="tri"))
    for s in shapes:
        t = pickle.loads(pickle.dumps(s))
        x = torch.rand(32, s.dim, dtype=torch.float64) * 2 - 1
        assert t.name == s.name and t.params == s.params and set(t.group) == set(s.group), s.name
        assert torch.equal(t.sdf(x), s.sdf(x)), s.name
    assert pickle.loads(pickle.dumps(sf.shapes.Shape("label", None, sf.dihedral(3)))).group.name == "D3"


def test_a_shape_from_a_lambda_says_why_it_cannot_pickle_but_still_copies():
    blob = sf.shapes.Shape("blob", lambda x: x.norm(dim=-1) - 0.3)
    with pytest.raises(TypeError, match="cannot pickle shape 'blob'.*module-level function"):
        pickle.dumps(blob)
    assert copy.deepcopy(blob).sdf(torch.zeros(1, 2)).item() == pytest.approx(-0.3)


def test_ensembles_modules_and_readouts_round_trip_through_pickle_and_torch_save():
    module = _module()
    ens = module.to_ensemble()
    for obj, out in ((module, lambda m: m(X)), (ens, lambda e: e(X)), (module[0], lambda m: m(X)),
                     (sf.shapes.cube(), lambda s: s.sdf(torch.rand(8, 3, generator=torch.Generator())))):
        got = pickle.loads(pickle.dumps(obj))
        buf = io.BytesIO()
        torch.save(obj, buf)
        buf.seek(0)
        loaded = torch.load(buf, weights_only=False)
        if isinstance(obj, sf.shapes.Shape):
            x = torch.rand(8, 3, dtype=torch.float64)
            assert torch.equal(got.sdf(x), obj.sdf(x)) and torch.equal(loaded.sdf(x), obj.sdf(x))
            continue
        assert_close(f"pickle {type(obj).__name__}", out(obj), out(got))
        assert_close(f"torch.save {type(obj).__name__}", out(obj), out(loaded))
    assert [t.name for t in pickle.loads(pickle.dumps(ens)).targets] == ens.shapes
    r = _read(ens)
    r2 = pickle.loads(pickle.dumps(r))
    assert r2.table.equals(r.table) and set(r2.observed("square")) == set(r.observed("square"))


def test_a_spawned_worker_evaluates_a_pickled_module(monkeypatch):
    module = _module()
    ctx = multiprocessing.get_context("spawn")
    # the worker unpickles `_eval_in_worker` by importing this test module: spawn hands the parent's
    # sys.path to the child, so the project root goes last (symfast itself still resolves to the
    # installed package, as it does here)
    monkeypatch.setattr(sys, "path", [*sys.path, str(Path(__file__).resolve().parents[1])])
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
        y, d = pool.submit(_eval_in_worker, module, X).result(timeout=120)
    assert_close("worker forward", module(X).detach(), y)
    assert_close("worker cube sdf", sf.shapes.cube().sdf(X.double().repeat(1, 2)[:, :3]), d)


# -- 2. learned frequencies --------------------------------------------------------------------

def test_readout_uses_the_current_detached_frequencies():
    module = _module(sf.DyadicAxisPE(3))  # 6 frequencies, lifts D4
    module.pe.frequencies.requires_grad_(True)
    assert _read(module).table.query("liftable")["element"].nunique() == 8
    # "training" moved the frequencies onto the tri-axis set (also 6): G_lift follows them
    module.pe.frequencies = nn.Parameter(sf.TriAxisPE(2).frequencies.clone())
    liftable = set(_read(module).table.query("liftable")["element"])
    assert liftable == {g.name for g in sf.dihedral(6)}
    assert module.pe.lift(sf.rotation(deg=60)) is not None and module.pe.lift(sf.rotation(deg=90)) is None


def test_trainable_frequencies_train_through_the_reference_with_one_warning(monkeypatch):
    monkeypatch.setattr(fields, "_WARNED", set())
    module = _module()
    module.pe.frequencies = nn.Parameter(module.pe.frequencies.clone())
    x, t = torch.rand(4, 10, 2), torch.rand(4, 10)
    with pytest.warns(RuntimeWarning, match="no frequency gradients.*PyTorch reference") as record:
        loss = module.train_step(x, t)
        module(x).sum().backward()
    assert sum("frequency gradients" in str(w.message) for w in record) == 1
    f = module.pe.frequencies.detach().requires_grad_(True)
    ws = [w.detach().requires_grad_(True) for w in module.weights]
    ref = reference.fourier_mlp(x, f.float(), module.pe.phases.float(), ws, [b.detach() for b in module.biases],
                                "tanh")
    ref_loss = (ref - t).square().mean(-1)
    ref_loss.sum().backward()
    assert_close("loss", ref_loss.detach(), loss)
    assert module.pe.frequencies.grad.dtype == torch.float64
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the second time: silent
        module.train_step(x, t)
    assert_close("dW0", ws[0].grad, module.weights[0].grad)
    assert_close("dfrequencies", f.grad, module.pe.frequencies.grad, rtol=1e-4, atol=1e-5)


def test_fit_sdf_keeps_frequencies_that_require_grad_fixed_and_says_so():
    pe = sf.DyadicAxisPE(2)
    pe.frequencies.requires_grad_(True)
    with pytest.warns(UserWarning, match="keeps the frequencies"):
        ens = sf.fit_sdf([sf.shapes.square()], pe, seeds=2, hidden=(8,), steps=2, points=32)
    assert ens.pe.lift(sf.rotation(deg=90)) is not None


# -- 3. the user's nn.Sequential models ----------------------------------------------------------

def test_readout_takes_a_list_of_sequentials_with_shapes():
    module = _module()
    seqs = [module.to_sequential(i) for i in range(4)]
    with pytest.raises(ValueError, match="shapes=.*Ensemble.from_sequentials"):
        _read(seqs)
    with pytest.raises(TypeError, match="Ensemble.from_sequentials"):
        _read([nn.Linear(2, 1)])
    got = _read(seqs, shapes=module.shapes).table
    want = _read(module).table
    assert got[["element", "score", "observed"]].equals(want[["element", "score", "observed"]])


@pytest.mark.parametrize("act", [nn.GELU(), nn.Softplus()], ids=["gelu", "softplus"])
def test_pointwise_activations_the_kernel_lacks_are_read_out(act):
    pe = sf.DyadicAxisPE(2)
    torch.manual_seed(0)
    seqs = [nn.Sequential(pe, nn.Linear(8, 16), copy.deepcopy(act), nn.Linear(16, 1)) for _ in range(4)]
    shapes = [sf.shapes.square()] * 4
    ens = sf.Ensemble.from_sequentials(seqs, shapes)
    assert_close("ensemble forward", torch.stack([s(X)[:, 0] for s in seqs]).detach(), ens(X))
    assert_close("to_sequential", seqs[2](X).detach(), ens.to_sequential(2)(X).detach())
    assert _read(seqs, shapes=shapes).table["element"].nunique() == 16
    with pytest.raises(ValueError, match="no activation.*to_sequential"):
        ens.to_module()
    with pytest.raises(ValueError, match="pickle it"):
        ens.save("unused.pt")
    with pytest.raises(ValueError, match="has parameters"):
        sf.Ensemble.from_sequentials([nn.Sequential(pe, nn.Linear(8, 4), nn.PReLU(), nn.Linear(4, 1))], shapes[:1])


# -- 4. conventions ------------------------------------------------------------------------------

def test_ensemble_repr_is_short():
    ens = sf.nn.FourierMLPEnsemble(sf.DyadicAxisPE(), hidden=(64, 64), num_models=8).to_ensemble(
        shapes=["square"] * 4 + ["circle"] * 4)
    text = repr(ens)
    assert len(text) < 300 and "B=8" in text and "square x4" in text


def test_elements_in_degrees_and_their_names_round_trip():
    assert sf.rotation(deg=120) == sf.rotation(2 * math.pi / 3) and sf.rotation(deg=120).name == "r120"
    assert sf.reflection(deg=30) == sf.reflection(math.pi / 6) and sf.reflection(deg=30).name == "m30"
    for g in (sf.rotation(deg=120), sf.reflection(deg=30), sf.rotation(deg=-45)):
        assert sf.groups.as_element(g.name) == g
    with pytest.warns(UserWarning, match=r"rotation\(deg=120\)"):
        sf.rotation(120)
    with pytest.raises(TypeError, match="exactly one"):
        sf.rotation(1.0, deg=30)
    with pytest.raises(TypeError, match="exactly one"):
        sf.reflection()


# -- 5. meta device ------------------------------------------------------------------------------

def test_modules_build_and_run_on_the_meta_device():
    one = sf.nn.FourierMLP(sf.DyadicAxisPE(2), hidden=(8,), device="meta")
    assert one(torch.zeros(5, 2, device="meta")).shape == (5,)
    with pytest.raises(ValueError, match=r"x must be \[B=1, N, 2\]"):
        one(torch.zeros(5, 3, device="meta"))
    with torch.device("meta"):
        ens = sf.nn.FourierMLPEnsemble(sf.DyadicAxisPE(2), hidden=(8, 8), num_models=3)
        x = torch.zeros(3, 7, 2)
        y = ens(x)
        y.sum().backward()
        loss = ens.train_step(x, torch.zeros(3, 7))
    assert y.shape == (3, 7) and y.device.type == "meta" and ens.weights[1].grad.shape == (3, 8, 8)
    assert loss.shape == (3,)
    ens.to_empty(device="cpu")  # the encoding is data: its frequencies survive
    assert_close("frequencies", sf.DyadicAxisPE(2).frequencies, ens.pe.frequencies)
    assert ens.pe.lift(sf.rotation(deg=90)) is not None and np.isfinite(ens.pe.lift("r90")).all()


# -- 6. dtypes, empty batches, wide layers, several outputs --------------------------------------

from symfast import _ext  # noqa: E402
from symfast.ops import _dispatch  # noqa: E402

OPS = torch.ops.symfast
KERNELS = ["reference"] + (["cpu"] if _ext.cpp_available() else [])


def _ref_grads(module, x, cot, dtype):
    """Output, dx and every parameter gradient of the plain-PyTorch reference on x upcast to float32,
    the output cast to `dtype`: the convention for low-precision inputs."""
    xs = x.detach().clone().requires_grad_(True)
    ws = [w.detach().clone().requires_grad_(True) for w in module.weights]
    bs = [b.detach().clone().requires_grad_(True) for b in module.biases]
    y = reference.fourier_mlp(xs.float(), module.pe.frequencies.float(), module.pe.phases.float(), ws, bs,
                              module.activation).to(dtype)
    y.backward(cot)
    return {"y": y.detach(), "dx": xs.grad, **{f"dW{l}": w.grad for l, w in enumerate(ws)},
            **{f"db{l}": b.grad for l, b in enumerate(bs)}}


def _module_grads(module, x, cot, context=contextlib.nullcontext):
    module.zero_grad()
    xs = x.detach().clone().requires_grad_(True)
    with context():
        y = module(xs)
    y.backward(cot)  # outside autocast, as PyTorch recommends
    return {"y": y.detach(), "dx": xs.grad, **{f"dW{l}": w.grad for l, w in enumerate(module.weights)},
            **{f"db{l}": b.grad for l, b in enumerate(module.biases)}}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("backend", KERNELS)
def test_low_precision_inputs_are_computed_in_float32_and_keep_their_dtype(dtype, backend):
    module = sf.nn.FourierMLPEnsemble(sf.DyadicAxisPE(3), hidden=(16, 16), num_models=3, activation="tanh",
                                      backend=backend, seeds=[0, 1, 2])
    g = torch.Generator().manual_seed(1)
    x = (torch.rand(3, 37, 2, generator=g) * 2 - 1).to(dtype)
    cot = torch.randn(3, 37, generator=g).to(dtype)
    got, ref = _module_grads(module, x, cot), _ref_grads(module, x, cot, dtype)
    assert got["y"].dtype == dtype and got["dx"].dtype == dtype and got["dW0"].dtype == torch.float32
    for name in ref:
        assert_close(name, ref[name], got[name])
    one = sf.nn.FourierMLP(sf.DyadicAxisPE(3), hidden=(16,), backend=backend)
    assert one(torch.rand(4, 2, dtype=dtype)).dtype == dtype
    # the training step takes low-precision points and targets; loss and gradients in float32
    loss = module.train_step(x, cot.float().to(dtype))
    ref_loss, *_ = reference.fourier_mlp_train_step(
        x.float(), cot.float().to(dtype).float(), module.pe.frequencies.float(), module.pe.phases.float(),
        list(module.weights), list(module.biases), "tanh")
    assert loss.dtype == torch.float32
    assert_close("loss", ref_loss, loss)


@pytest.mark.parametrize("backend", KERNELS)
def test_autocast_computes_in_float32_and_returns_the_autocast_dtype(backend):
    module = sf.nn.FourierMLPEnsemble(sf.DyadicAxisPE(3), hidden=(16,), num_models=2, backend=backend,
                                      seeds=[0, 1])
    x = torch.rand(2, 21, 2, generator=torch.Generator().manual_seed(2))
    cot = torch.randn(2, 21, generator=torch.Generator().manual_seed(3))
    got = _module_grads(module, x, cot.bfloat16(), lambda: torch.autocast("cpu", dtype=torch.bfloat16))
    ref = _ref_grads(module, x, cot.bfloat16(), torch.bfloat16)  # float32 x: computed in float32, cast
    assert got["y"].dtype == torch.bfloat16 and got["dx"].dtype == torch.float32
    for name in ref:
        assert_close(name, ref[name], got[name])


@pytest.mark.parametrize("backend, out", [(b, 1) for b in KERNELS + ["auto"]] + [("reference", 3), ("auto", 3)])
def test_empty_batches_give_empty_outputs_and_zero_gradients(backend, out):
    module = sf.nn.FourierMLPEnsemble(sf.DyadicAxisPE(2), hidden=(8,), num_models=2, backend=backend,
                                      out_features=out)
    K = [out] if out > 1 else []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # out_features > 1 on "auto" warns once
        for x in (torch.rand(0, 2, requires_grad=True), torch.rand(2, 0, 2, requires_grad=True)):
            y = module(x)
            assert y.shape == (2, 0, *K)
            y.sum().backward()
            assert x.grad.shape == x.shape and all(not w.grad.any() for w in module.weights)
        loss = module.train_step(torch.rand(0, 2), torch.rand(2, 0, *K))
        assert loss.shape == (2,) and loss.isnan().all()  # the mean over no points, as torch's
        assert all(w.grad is not None and not w.grad.any() for w in module.weights)
        one = sf.nn.FourierMLP(sf.DyadicAxisPE(2), hidden=(8,), backend=backend, out_features=out)
        assert one(torch.rand(0, 2)).shape == (0, *K) and one(torch.rand(3, 0, 2)).shape == (3, 0, *K)


@pytest.mark.parametrize("backend", ["cpu", "reference", "triton"])
def test_registered_ops_take_empty_batches_without_reaching_a_kernel(backend, monkeypatch):
    from symfast.ops.fourier_mlp import cpu, triton as tri

    def never(*args, **kw):
        raise AssertionError("a kernel was called with no points")

    for mod in (cpu, tri):
        for name in ("fourier_mlp_fwd", "fourier_mlp_bwd", "fourier_mlp_train_step"):
            monkeypatch.setattr(mod, name, never, raising=False)
    if backend == "triton":
        monkeypatch.setattr(tri, "unsupported", lambda dtype, weights: "")  # as if triton could run this model
    B, d, H = 2, 4, 5
    ws = [torch.randn(B, d, H, dtype=torch.float64), torch.randn(B, H, 1, dtype=torch.float64)]
    bs = [torch.randn(B, H, dtype=torch.float64), torch.randn(B, 1, dtype=torch.float64)]
    f, p = sf.DyadicAxisPE(1).frequencies, sf.DyadicAxisPE(1).phases
    for x in (torch.rand(0, 2, dtype=torch.float64), torch.rand(B, 0, 2, dtype=torch.float64)):
        y = OPS.fourier_mlp(x, f, p, ws, bs, "relu", backend)
        assert y.shape == (B, 0)
        dx, dw0, dw1, db0, db1 = OPS.fourier_mlp_backward(torch.zeros(B, 0, dtype=torch.float64), x, f, p, ws, bs,
                                                          "relu", backend, True)
        assert dx.shape == x.shape and dw0.shape == ws[0].shape and not dw0.any() and not db1.any()
        loss, *grads = OPS.fourier_mlp_train_step(x, torch.zeros(B, 0, dtype=torch.float64), f, p, ws, bs,
                                                  "relu", backend)
        assert loss.shape == (B,) and all(not g.any() for g in grads)
        meta = OPS.fourier_mlp(x.to("meta"), f.to("meta"), p.to("meta"), [w.to("meta") for w in ws],
                               [b.to("meta") for b in bs], "relu", backend)
        assert meta.shape == (B, 0)


def test_the_reference_has_no_width_limit_and_the_kernel_names_it(monkeypatch):
    monkeypatch.setattr(_dispatch, "_warned", set())
    wide = sf.nn.FourierMLP(sf.DyadicAxisPE(3), hidden=(2048,), backend="reference")
    x = torch.rand(9, 2, generator=torch.Generator().manual_seed(4))
    seq = wide.to_sequential()
    assert_close("y (reference, width 2048)", seq(x)[:, 0].detach(), wide(x).detach())
    if not _ext.cpp_available():
        return
    auto = sf.nn.FourierMLP.from_sequential(seq)
    with pytest.warns(RuntimeWarning, match="hidden widths up to 1024, got 2048.*reference.*train_step"):
        assert_close("y (auto, width 2048)", seq(x)[:, 0].detach(), auto(x).detach())
    auto.backend = "cpu"
    with pytest.raises(ValueError, match="backend='cpu'.*hidden widths up to 1024, got 2048.*backend='reference'"):
        auto(x)
    ws, bs = [w.detach() for w in auto.weights], [b.detach() for b in auto.biases]
    with pytest.raises(ValueError, match="hidden widths up to 1024.*backend='reference'"):
        OPS.fourier_mlp(x, auto.pe.frequencies.float(), auto.pe.phases.float(), ws, bs, "relu", "cpu")


def test_several_outputs_match_the_reference_and_warn_once_on_the_fused_backends(monkeypatch):
    monkeypatch.setattr(_dispatch, "_warned", set())
    g = torch.Generator().manual_seed(5)
    module = sf.nn.FourierMLPEnsemble(sf.DyadicAxisPE(3), hidden=(16, 16), num_models=3, activation="silu",
                                      out_features=4, seeds=[0, 1, 2])
    x, cot, targets = torch.rand(3, 29, 2, generator=g), torch.randn(3, 29, 4, generator=g), \
        torch.randn(3, 29, 4, generator=g)
    seqs = [module.to_sequential(i) for i in range(3)]
    ref = {"y": torch.stack([s(x[i]) for i, s in enumerate(seqs)]).detach()}  # ordinary nn.Sequential models
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        got = _module_grads(module, x, cot)
        loss = module.train_step(x, targets)
    fused = [w for w in record if "one output (out_features = 1), got 4" in str(w.message)]
    assert len(fused) == (1 if _ext.cpp_available() else 0)
    assert all("train_step's time" in str(w.message) for w in fused)  # the warning gives the cost
    assert got["y"].shape == (3, 29, 4)
    assert_close("y", ref["y"], got["y"])
    ref.update(_ref_grads(module, x, cot, torch.float32))
    for name in ref:
        assert_close(name, ref[name], got[name])
    ref_loss, dw, db = reference.fourier_mlp_train_step(x, targets, module.pe.frequencies.float(),
                                                        module.pe.phases.float(), list(module.weights),
                                                        list(module.biases), "silu")
    assert_close("loss", ((ref["y"] - targets) ** 2).mean((1, 2)), loss)
    assert_close("loss (reference step)", ref_loss, loss)
    for l, w in enumerate(module.weights):
        assert_close(f"train_step dW{l}", dw[l], w.grad)
    one = sf.nn.FourierMLP(sf.DyadicAxisPE(3), hidden=(8,), out_features=2, backend="reference")
    assert one(torch.rand(5, 2)).shape == (5, 2) and one(torch.rand(4, 5, 2)).shape == (4, 5, 2)
    assert one.train_step(torch.rand(5, 2), torch.rand(5, 2)).shape == ()
    assert sf.nn.FourierMLP(sf.DyadicAxisPE(3), hidden=(8,))(torch.rand(5, 2)).shape == (5,)
    if _ext.cpp_available():
        one.backend = "cpu"
        with pytest.raises(ValueError, match="one output.*backend='reference'"):
            one(torch.rand(5, 2))


def test_the_readout_refuses_several_outputs_and_says_how_to_read_one():
    module = sf.nn.FourierMLPEnsemble(sf.DyadicAxisPE(3), hidden=(8,), num_models=2, out_features=2,
                                      backend="reference", shapes=[sf.shapes.square()] * 2)
    with pytest.raises(ValueError, match="out_features=2.*weights\\[-1\\]\\[..., k:k\\+1\\]"):
        _read(module)
    k = 1
    head = sf.nn.FourierMLPEnsemble.from_tensors(
        module.pe, [*module.weights[:-1], module.weights[-1][..., k:k + 1]],
        [*module.biases[:-1], module.biases[-1][:, k:k + 1]], module.activation, shapes=module.shapes)
    assert_close("head 1", module(X)[..., k].detach(), head(X).detach())
    assert _read(head).table["element"].nunique() == 16


def test_multi_output_sequentials_convert_and_the_ensemble_takes_one_head():
    pe = sf.DyadicAxisPE(3)
    gen = torch.Generator().manual_seed(7)
    seqs = []
    for _ in range(2):
        seq = nn.Sequential(pe, nn.Linear(pe.dim, 8), nn.SiLU(), nn.Linear(8, 3))
        for p in seq.parameters():
            if p.requires_grad:
                p.data = torch.randn(p.shape, generator=gen) * 0.5
        seqs.append(seq)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # out_features > 1 on "auto" warns once
        one = sf.nn.FourierMLP.from_sequential(seqs[0])
        assert one.out_features == 3
        assert_close("FourierMLP.from_sequential, 3 outputs", seqs[0](X).detach(), one(X).detach())
        both = sf.nn.FourierMLPEnsemble.from_sequentials(seqs)
        assert_close("FourierMLPEnsemble.from_sequentials", torch.stack([s(X) for s in seqs]).detach(),
                     both(X).detach())
        assert_close("to_sequential round trip", seqs[1](X).detach(), both.to_sequential(1)(X).detach())
    shapes = [sf.shapes.square()] * 2
    with pytest.raises(ValueError, match=r"out_features=3.*Ensemble.from_sequentials\(models, shapes, output=k\)"):
        sf.Ensemble.from_sequentials(seqs, shapes)
    with pytest.raises(ValueError, match=r"out_features=3.*output=k"):
        _read(seqs, shapes=shapes)  # the readout names the same converter
    with pytest.raises(ValueError, match=r"out_features=3.*Ensemble.from_module\(module, output=k\)"):
        sf.Ensemble.from_module(both, shapes)
    for bad in (3, -1, True, 1.0):
        with pytest.raises(ValueError, match="output must be an integer in 0..2"):
            sf.Ensemble.from_sequentials(seqs, shapes, output=bad)
    ens = sf.Ensemble.from_sequentials(seqs, shapes, output=1)
    assert_close("head 1", torch.stack([s(X)[:, 1] for s in seqs]).detach(), ens(X))
    assert_close("from_module head 1", ens(X), sf.Ensemble.from_module(both, shapes, output=1)(X))
    assert _read(ens).table["element"].nunique() == 16


# -- 7. import cost ------------------------------------------------------------------------------

LAZY_SCRIPT = """
import sys
import torch
import symfast as sf
heavy = ("pandas", "scipy", "matplotlib")
assert not [m for m in heavy if m in sys.modules], [m for m in heavy if m in sys.modules]
loaded = sorted(m for m in sys.modules if m.startswith("symfast."))
assert set(loaded) <= {"symfast._C", "symfast._ext", "symfast._version", "symfast.ops"}, loaded  # ops: the namespace only
m = sf.nn.FourierMLP(sf.DyadicAxisPE(3), hidden=(8,))  # a neural field needs none of them either
m.train_step(torch.rand(5, 2), torch.rand(5))
m(torch.rand(5, 2)).sum().backward()
assert not [m for m in heavy if m in sys.modules], [m for m in heavy if m in sys.modules]
import symfast.readout.sweeps  # the package import does not rebind sf.readout, the function
import symfast.o3
assert callable(sf.readout) and sf.o3 is sys.modules["symfast.groups.o3"] and sf.Group.__name__ == "Group"
print("ok")
"""


def test_import_symfast_loads_no_pandas_scipy_or_matplotlib():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(Path(sf.__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")) if p))
    proc = subprocess.run([sys.executable, "-c", LAZY_SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]


# -- 8. the guide's examples ---------------------------------------------------------------------

def _guide_block(heading: str) -> str:
    """The first python block under `heading` in docs/guide/your-code.md."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "guide" / "your-code.md").read_text()
    section = page[page.index(f"\n## {heading}"):]
    return section[section.index("```python\n") + 10:section.index("\n```", section.index("```python"))]


@pytest.mark.parametrize("heading", ["Precision, empty batches, wide layers", "Several outputs: an SDF and a colour",
                                     "Other libraries' Fourier encodings", "One convention across the studies"])
def test_the_guide_examples_run(heading, capsys):
    ns = {"torch": torch, "sf": sf}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the examples ask for the reference: no fallback warning
        exec(compile(_guide_block(heading), f"your-code.md: {heading}", "exec"), ns)
    out = capsys.readouterr().out
    if heading.startswith("Other"):
        assert out.split() == ["sin_then_cos", "True"]
        return
    if heading.startswith("One"):
        assert out.splitlines() == ["latent actions: 2/2 True", "schur ablation: 1/1 8"]
        return
    if heading.startswith("Several"):
        assert "torch.Size([8, 4]) True" in out
        x = torch.rand(6, 2)
        assert_close("sdf head", ns["field"](x)[:, 0].detach(), ns["sdf_head"](x)[0].detach())
    else:
        assert out.split() == ["torch.bfloat16", "torch.bfloat16", "torch.Size([0])"]


def test_the_guide_page_runs_top_to_bottom(capsys, monkeypatch):
    """Every python block of docs/guide/your-code.md in order, in one namespace, as a reader runs
    them (the training loop with a scheduler and bf16 autocast included). torch.compile is left
    out here (identity): compiling the fields is tested in tests/ops/test_inductor.py, and here it
    would cost most of a minute of the suite."""
    monkeypatch.setattr(torch, "compile", lambda model, *a, **k: model)
    page = (Path(__file__).resolve().parents[1] / "docs" / "guide" / "your-code.md").read_text()
    blocks = [b.split("\n```", 1)[0] for b in page.split("```python\n")[1:]]
    assert len(blocks) >= 5, "the guide lost its examples"
    ns: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the small training budgets warn; the blocks' own checks decide
        for i, block in enumerate(blocks):
            exec(compile(block, f"your-code.md block {i}", "exec"), ns)
    out = capsys.readouterr().out
    assert "square" in out and "triangle" in out  # the training loop's readout table was printed
    assert ns["pred"].dtype == torch.bfloat16      # the loop ran its forward under autocast


def test_python_sweep_specs_accept_the_scalars_toml_specs_accept(tmp_path):
    from symfast.readout.sweeps.spec import SweepSpec, load_spec
    py = SweepSpec(shapes=["square"], encodings=["dyadic"], steps=20, lr=1e-3, points=64, activation="tanh", seeds=2)
    (tmp_path / "s.toml").write_text('shapes = ["square"]\nencodings = ["dyadic"]\nsteps = 20\nlr = 1e-3\n'
                                     'points = 64\nactivation = "tanh"\nseeds = 2\n')
    toml = load_spec(tmp_path / "s.toml")
    assert (py.steps, py.lr, py.points, py.activation) == ([20], [1e-3], [64], ["tanh"])
    assert py == toml
    with pytest.raises(ValueError, match="steps"):
        SweepSpec(steps=2.5)  # a scalar is still type-checked


def test_result_objects_print_short_summaries_and_have_a_notebook_view():
    """Readout, OrderedSchur and LatentActions print a few lines, never whole arrays or an address;
    Readout and LatentActions render an HTML table in a notebook."""
    import warnings

    import numpy as np

    from symfast.layerwise.recovery import recover_latent_actions

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # small budget
        ens = sf.fit_sdf(["triangle", "square"], sf.TriAxisPE(2), seeds=3, steps=5, points=32, hidden=(8,))
        r = sf.readout(ens, sweep=0, num_null=8)
    text = repr(r)
    assert text.startswith("Readout: 2 shape(s) x 1 encoding(s) x 1 observable(s)") and "object at 0x" not in text
    assert text.splitlines()[1].startswith("  triangle / triaxis / gram: |G_obs| = ")
    assert len(text.splitlines()) == 3 and "<table" in r._repr_html_()
    with pytest.raises(ValueError, match="no rotation sweep .* sweep=0"):
        r.plot_sweep()
    assert list(ens.members.columns) == ["shape", "seed", "final_loss"] and list(ens.members.index) == list(range(6))

    res = sf.ordered_schur(torch.randn(3, 40, 40, dtype=torch.float64))
    text = repr(res)
    assert text.startswith("OrderedSchur(n=40, batch=(3,), n_R=") and len(text) < 200 and "tensor" not in text
    from symfast.schur.blocks import schur_blocks

    text = repr(schur_blocks(torch.randn(40, 40, dtype=torch.float64) / 8, alpha=0.9))
    assert text.startswith("SchurBlocks(n=40, alpha=0.9, n_R=") and "||T_C->R||/||T|| = " in text
    assert "tensor" not in text and len(text) < 250

    layers = [(np.eye(4), np.zeros(4)), (np.ones((1, 4)), np.zeros(1))]
    one = recover_latent_actions(layers, np.eye(4)[[1, 0, 2, 3]], rho_out=None)
    text = repr(one)
    assert text.startswith("LatentActions(element=") and "array" not in text and len(text) < 300
    assert "<table" in one._repr_html_()


def _symfast_backends(graph) -> list:
    """The backend argument of every symfast op node of an exported graph."""
    return [n.args[-1] for n in graph.nodes if n.op == "call_function" and str(n.target).startswith("symfast.")]


@pytest.mark.parametrize("module", ["FourierMLP", "FourierMLPEnsemble"])
def test_an_exported_program_loads_in_a_fresh_process_after_import_symfast(tmp_path, module):
    """torch.export of a fused module, saved, and loaded in a new process: refused until symfast is
    imported, then (a plain `import symfast`, no op module imported by hand) the same outputs. The
    program holds backend "auto" (saved and loaded), resolved when it runs: with the C++ kernel
    reported missing in that process it runs the reference instead (the one-time warning), as a
    program exported on one machine runs on another."""
    import subprocess
    import sys

    cls = getattr(sf.nn, module)
    m = cls(sf.DyadicAxisPE(3), hidden=(8,), **({"num_models": 2} if module == "FourierMLPEnsemble" else {}))
    x = torch.rand(*((2,) if module == "FourierMLPEnsemble" else ()), 16, 2, generator=torch.Generator().manual_seed(0))
    ep = torch.export.export(m, (x,))
    assert _symfast_backends(ep.graph) == ["auto"]
    path = tmp_path / "field.pt2"
    torch.export.save(ep, str(path))
    torch.save(x, tmp_path / "x.pt")
    torch.save(m(x).detach(), tmp_path / "y.pt")
    script = f"""
import warnings
import torch
try:
    torch.export.load({str(path)!r})
    print("loaded-unregistered")
except Exception:
    print("refused-unregistered")
import sys, symfast
print("lazy" if "symfast.ops.fourier_mlp" not in sys.modules else "eager")
ep = torch.export.load({str(path)!r})
print(*[n.args[-1] for n in ep.graph.nodes if n.op == "call_function" and str(n.target).startswith("symfast.")])
x, y = torch.load({str(tmp_path / 'x.pt')!r}), torch.load({str(tmp_path / 'y.pt')!r})
print("same" if torch.equal(ep.module()(x), y) else "differ")
symfast._ext.cpp_available = lambda: False  # as on a machine without the C++ kernel
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    y2 = ep.module()(x)
print("reference" if any("symfast._C is not built" in str(w.message) for w in seen) else "no-fallback",
      "close" if torch.allclose(y2, y, rtol=1e-5, atol=1e-6) else "far")
"""
    out = subprocess.run([sys.executable, "-P", "-c", script], capture_output=True, text=True,
                         timeout=300)  # -P: the symfast under test, not a source tree in the cwd
    assert out.stdout.split() == ["refused-unregistered", "lazy", "auto", "same", "reference", "close"], \
        out.stdout + out.stderr[-3000:]


def test_an_exported_program_keeps_a_pinned_backend():
    """A module built with backend="cpu" exports the op with "cpu": the caller's choice is kept."""
    if not sf.cpp_available():
        pytest.skip("symfast._C not built")
    m = sf.nn.FourierMLP(sf.DyadicAxisPE(3), hidden=(8,), backend="cpu")
    ep = torch.export.export(m, (torch.rand(16, 2),))
    assert _symfast_backends(ep.graph) == ["cpu"]


def test_torch_ops_symfast_after_a_plain_import_costs_nothing_until_used():
    """`import symfast` loads no op module; the first lookup of an op through torch.ops.symfast
    registers it (its folder only); every op listed in symfast.ops.OPS resolves so, and no other
    symfast op exists; an unknown name is still an AttributeError."""
    import subprocess
    import sys

    script = """
import sys, torch, symfast
before = sorted(m for m in sys.modules if m.startswith("symfast.ops."))
import symfast.ops
packet = torch.ops.symfast.gram_scores
after = {m for m in sys.modules if m.startswith("symfast.ops.")}
x = torch.eye(3, dtype=torch.float64)[None]
print(before, packet.default.name(), "symfast.ops.gram_scores" in after, "symfast.ops.ordered_schur" in after)
print(torch.ops.symfast.gram_scores(x, x, True, "reference").shape)
try:
    torch.ops.symfast.no_such_op
except AttributeError as e:
    print("AttributeError")
print(all(getattr(torch.ops.symfast, name).default.name() == "symfast::" + name for name in symfast.ops.OPS))
registered = {n.split("::")[1].split(".")[0] for n in torch._C._dispatch_get_all_op_names() if n.startswith("symfast::")}
print(registered == set(symfast.ops.OPS) or sorted(registered ^ set(symfast.ops.OPS)))
"""
    out = subprocess.run([sys.executable, "-P", "-c", script], capture_output=True, text=True, timeout=300)
    assert out.stdout.splitlines() == ["[] symfast::gram_scores True False", "torch.Size([1, 1])", "AttributeError",
                                       "True", "True"], out.stdout + out.stderr
