"""Inputs that used to pass validation and then crash or give silent wrong numbers."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symfast as sf
from symfast import _ext
from symfast._io import atomic_save
from symfast.readout.sweeps import load_spec
from symfast.readout.sweeps.spec import SweepSpec
from symfast.readout.training import MAX_SEED

PE = sf.DyadicAxisPE(K=2)
TINY = dict(steps=2, points=8, hidden=(4,), progress=False)


# -- fit_sdf arguments ------------------------------------------------------------------------
@pytest.mark.parametrize("seeds", [[0.5, 1.7], True, [True, 2], "01", [-1], [MAX_SEED + 1], [2**62]])
def test_fit_sdf_rejects_non_integer_or_unusable_seeds(seeds):
    with pytest.raises(ValueError, match="seeds"):
        sf.fit_sdf("square", PE, seeds=seeds, **TINY)


def test_fit_sdf_trains_the_largest_seed():
    ens = sf.fit_sdf("square", PE, seeds=[MAX_SEED], **TINY)
    assert ens.seeds == [MAX_SEED]


@pytest.mark.parametrize("hidden", [(8.7,), (True,), "8", (0,)])
def test_fit_sdf_rejects_non_integer_widths(hidden):
    with pytest.raises(ValueError, match="hidden"):
        sf.fit_sdf("square", PE, seeds=1, **{**TINY, "hidden": hidden})


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_fit_sdf_cuda_without_cuda_is_a_clear_error():
    with pytest.raises(ValueError, match="no CUDA device"):
        sf.fit_sdf("square", PE, seeds=1, device="cuda", **TINY)


def _damage_adam(ck, how):
    st = ck["opt"]["state"][0]
    if how == "nan":
        st["exp_avg_sq"][0, 0, 0] = float("nan")
    elif how == "negative":
        st["exp_avg_sq"].neg_().sub_(1.0)
    elif how == "shape":
        st["exp_avg"] = st["exp_avg"][:, :1]
    elif how == "lr":
        ck["opt"]["param_groups"][0]["lr"] = 10.0
    elif how == "step":
        st["step"] = torch.tensor(float("inf"))


@pytest.mark.parametrize("how", ["nan", "negative", "shape", "lr", "step"])
def test_fit_sdf_checkpoint_with_damaged_adam_state_is_refused(tmp_path, how):
    path = tmp_path / "ck.pt"
    sf.fit_sdf("square", PE, seeds=2, checkpoint=path, **TINY)
    ck = torch.load(path, weights_only=True)
    _damage_adam(ck, how)
    atomic_save(ck, path)
    with pytest.raises(ValueError, match=f"checkpoint {path} is damaged: optimiser"):
        sf.fit_sdf("square", PE, seeds=2, checkpoint=path, **{**TINY, "steps": 3})


# -- encodings ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_fourier_pe_on_half_precision_points_is_accurate(dtype):
    pe = sf.DyadicAxisPE()  # frequencies up to 2^11 pi
    x = (torch.rand(256, 2, generator=torch.Generator().manual_seed(0)) * 2 - 1).to(dtype)
    out = pe(x)
    assert out.dtype == dtype
    exact = pe(x.double())  # the same (rounded) points, encoded exactly
    tol = 1e-2 if dtype == torch.float16 else 2e-2  # the features' own rounding to x's dtype
    assert (out.double() - exact).abs().max() < tol


@pytest.mark.parametrize("kw", [dict(K=100_000_000), dict(K=2.5), dict(K=float("inf"))])
def test_absurd_octave_counts_are_refused(kw):
    with pytest.raises(ValueError, match="K"):
        sf.DyadicAxisPE(**kw)


# -- sweep specs ----------------------------------------------------------------------------------
def _spec(tmp_path, text):
    p = tmp_path / "spec.toml"
    p.write_text('shapes = ["square"]\nencodings = ["dyadic"]\nsteps = 2\npoints = 8\n' + text)
    return p


@pytest.mark.skipif(not _ext.cpp_available(), reason="the width limit is the C++ kernel's")
def test_sweep_width_beyond_the_kernel_fails_before_training_on_the_kernel(tmp_path, capsys, monkeypatch):
    from symfast.cli import main
    from symfast.ops import _dispatch
    from symfast.ops.fourier_mlp import MAX_WIDTH

    spec = _spec(tmp_path, f"hidden = [[{MAX_WIDTH + 1}]]\nseeds = 1\n")
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out"), "--quiet", "--backend", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "hidden" in err and str(MAX_WIDTH) in err and "Traceback" not in err
    assert not (tmp_path / "out" / "batches").exists() or not list((tmp_path / "out" / "batches").iterdir())
    load_spec(spec).check_backend("reference", "cpu")  # the reference trains any width
    monkeypatch.setattr(_dispatch, "_warned", set())
    with pytest.warns(RuntimeWarning, match="reference"):  # and "auto" falls back to it
        load_spec(spec).check_backend("auto", "cpu")


def test_sweep_seed_beyond_training_range_is_refused(tmp_path):
    with pytest.raises(ValueError, match="seeds"):
        load_spec(_spec(tmp_path, "hidden = [[4]]\nseeds = [4611686018427387904]\n"))
    assert SweepSpec(shapes=["square"], encodings=["dyadic"], seeds=[MAX_SEED]).seed_list == [MAX_SEED]


@pytest.mark.parametrize("depth", [9, 5000])
def test_deeply_nested_spec_is_one_error(tmp_path, depth):
    with pytest.raises(ValueError, match="nested too deeply"):
        load_spec(_spec(tmp_path, "hidden = " + "[" * depth + "4" + "]" * depth + "\nseeds = 1\n"))


def test_spec_with_huge_octave_count_is_one_error(tmp_path):
    p = tmp_path / "spec.toml"
    p.write_text('shapes = ["square"]\nhidden = [[4]]\nseeds = 1\n[[encodings]]\nname = "dyadic"\nK = 100000000\n')
    with pytest.raises(ValueError, match="K must be at most"):
        load_spec(p)


# -- layerwise .npz data -------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["huge", "negative", "float", "nan", "object", "2d-labels"])
def test_layerwise_npz_with_bad_labels_or_images_is_one_error(tmp_path, case):
    from symfast.layerwise.data import load_npz

    images, labels = np.random.default_rng(0).random((4, 3, 3)), np.arange(4)
    if case == "huge":
        labels = np.array([0, 1, 2, 2**48])
    elif case == "negative":
        labels = np.array([0, -1, 2, 3])
    elif case == "float":
        labels = np.array([0.0, 1.5, 2.0, 3.0])
    elif case == "nan":
        images[1, 1, 1] = np.nan
    elif case == "object":
        images = images.astype(complex)
    else:
        labels = labels.reshape(2, 2)
    path = tmp_path / "data.npz"
    np.savez(path, images=images, labels=labels)
    with pytest.raises(ValueError, match="data.npz"):
        load_npz(str(path))


# -- meshes -------------------------------------------------------------------------------------------
def _cube():
    v = np.array([[x, y, z] for x in (-0.5, 0.5) for y in (-0.5, 0.5) for z in (-0.5, 0.5)])
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    f = [t for a, b, c, d in quads for t in ((a, b, c), (a, c, d))]
    return v, np.array(f)


def test_mesh_with_a_zero_area_component_keeps_the_outside_sign():
    from symfast.shapes.meshes import _mesh_shape, winding_number

    v, f = _cube()
    line = np.array([[0.8, 0.0, 0.0], [0.8, 0.1, 0.0], [0.8, 0.2, 0.0], [0.8, 0.3, 0.0]])  # collapsed tetrahedron
    tet = np.array([[0, 1, 2], [0, 3, 1], [0, 2, 3], [1, 3, 2]]) + len(v)
    shape = _mesh_shape(np.concatenate([v, line]), np.concatenate([f, tet]), "cube+flat")
    x = torch.tensor([[0.8, 0.15, 0.05], [0.85, 0.0, 0.0], [0.0, 0.0, 0.0], [0.7, 0.1, 0.0]], dtype=torch.float64)
    d = shape.sdf(x)
    cube_tri = torch.as_tensor(np.concatenate([v, line])[f])
    assert winding_number(x[:2], cube_tri).abs().max() < 1e-9
    assert (d[:2] > 0).all() and d[2] < 0 and d[3] > 0, d
    assert torch.allclose(d, _mesh_shape(v, f, "cube").sdf(x))


def test_mesh_with_a_zero_area_face_in_a_solid_part_is_refused():
    from symfast.shapes.meshes import _mesh_shape

    v, f = _cube()
    v = np.concatenate([v, [[-0.5, -0.5, 0.0]]])  # vertex 8 on the edge 0-1
    # face (0, 5, 1) split at 8, and the zero-area face (1, 0, 8) closing the split edge
    f = np.array([t for t in f.tolist() if t != [0, 5, 1]] + [[0, 5, 8], [8, 5, 1], [1, 0, 8]])
    with pytest.raises(ValueError, match="zero-area"):
        _mesh_shape(v, f, "sliver")


# -- command-line sizes: refused in one line, with the bound, before anything is allocated ---------
@pytest.mark.parametrize("argv,words", [
    (["schur", "--hidden", "1000000000"], ["--hidden", "1..4096"]),
    (["schur", "--hidden", "8,,8"], ["--hidden", "no empty items"]),
    (["schur", "--alpha-grid", "0:1:1e-12"], ["--alpha-grid", "at most 200 values"]),
    (["schur", "--alpha-grid", "0.85:inf:0.01"], ["--alpha-grid", "at most 200 values"]),
    (["schur", "--batch", "1000000000000"], ["--batch", "1..65536"]),
    (["schur", "--n-eval", "1000000000000"], ["--n-eval", "1..65536"]),
    (["schur", "--task", "copy", "--copy-length", "1000000000"], ["--copy-length", "1..4096"]),
    (["schur", "--task", "copy", "--copy-symbols", "1000000000"], ["--copy-symbols", "1..1024"]),
    (["schur", "--task", "copy", "--copy-delay", "1000000000"], ["--copy-delay", "0..65536"]),
    (["readout", "--sweep", "1000000000"], ["--sweep", "0..36000"]),
    (["readout", "--hidden", "8,,8"], ["--hidden", "no empty items"]),
    (["readout", "--hidden", "8,"], ["--hidden", "no empty items"]),
    (["layerwise", "--steps", "1000000000000"], ["--steps", "1..1000000"]),
    (["layerwise", "--seeds", "1000000000"], ["--seeds", "1..1000"]),
    (["layerwise", "--batch", "1000000000000"], ["--batch", "1..1048576"]),
    (["layerwise", "--patches", "--patch-count", "1000000000000"], ["--patch-count", "1..1000000"]),
    (["layerwise", "--exactness", "--polish-history", "1000000000"], ["--polish-history", "1..10000"]),
])
def test_absurd_command_line_sizes_are_one_line_with_the_bound(tmp_path, capsys, argv, words):
    import time

    from symfast.cli import main

    t = time.perf_counter()
    rc = main([*argv, "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and err.strip().count("\n") == 0, err
    assert all(w in err for w in words), err
    assert time.perf_counter() - t < 30  # refused before planning, allocating or training
