"""symfast in other people's code: pickling, learned frequencies, nn.Sequential models in the readout,
degree-named elements, short reprs and the meta device."""
import concurrent.futures
import copy
import io
import math
import multiprocessing
import pickle
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
