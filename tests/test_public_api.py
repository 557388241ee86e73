"""The names users import keep working across the package layout, and the layout's own rules hold."""
import importlib
import warnings

import numpy as np
import pytest

import symfast as sf

# name -> attributes that must exist on it
PUBLIC = {
    "symfast": ["fit_sdf", "readout", "Readout", "Ensemble", "FourierPE", "DyadicAxisPE", "TriAxisPE", "MultiAxisPE",
                "RandomFourierPE", "O2Element", "Group", "rotation", "reflection", "identity", "dihedral", "cyclic",
                "rotation_sweep", "orthogonal_group", "ordered_schur", "ordschur", "OrderedSchur", "schur_ablation",
                "schur_ablation_summary", "SchurSettings", "SchurStudy", "schur_study", "recover_latent_actions", "matching_scores", "MatchingScores",
                "identifiable_submodel", "project_equivariant", "LatentActions", "LayerAction", "GroupActions",
                "fourier_mlp", "fourier_mlp_train_step", "fourier_mlp_jet", "fourier_mlp_eikonal_step", "cpp_available",
                "__version__",
                "shapes", "o3", "nn", "rnn", "samplers", "sweeps", "groups"],
    "symfast.shapes": ["Shape", "circle", "square", "rectangle", "ellipse", "regular_polygon", "triangle", "pentagon",
                       "hexagon", "star", "polygon", "by_name", "NAMES", "NAMES_3D", "sphere", "box", "cube",
                       "tetrahedron", "octahedron", "icosahedron", "dodecahedron", "polyhedron", "cylinder", "torus",
                       "mesh"],
    "symfast.o3": ["O3Element", "rotation", "reflection", "inversion", "identity", "rotoreflection", "from_name",
                   "octahedral", "tetrahedral", "icosahedral", "dihedral", "cyclic", "rotations_only",
                   "rotation_sweep", "orthogonal_group", "cylindrical_group", "closure", "PHI"],
    "symfast.nn": ["FourierMLP", "FourierMLPEnsemble", "Sine", "ACTIVATION_MODULES", "FourierPE", "Ensemble", "LAYOUTS",
                   "read_layout", "from_sin_then_cos", "nerf_frequencies", "tcnn_frequencies",
                   "encoding_by_name"],
    "symfast.nn.ensemble": ["Ensemble", "FORMAT"],
    "symfast.ops": ["OPS", "OP_MODULES", "register_all", "install_namespace"],
    "symfast.nn.fields": ["Ensemble", "FourierMLPEnsemble", "FourierMLP", "init_weights"],  # Ensemble's old home
    "symfast.rnn": ["TanhRNN", "make_task", "TASKS"],
    "symfast.schur": ["SchurSettings", "SchurStudy", "schur_study", "schur_ablation", "rnn"],
    "symfast.schur.study": ["SchurSettings", "SchurStudy", "schur_study", "CheckpointError", "copy_family_settings",
                            "train_tanh_models", "analyse_model", "stabiliser_table", "fixed_point_facts"],
    "symfast.samplers": ["sample_disk", "sample_ball", "sample_box", "sample_near_surface"],
    "symfast.readout": ["readout", "Readout", "fit_sdf"],
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_public_names_import(module):
    mod = importlib.import_module(module)
    missing = [n for n in PUBLIC[module] if not hasattr(mod, n)]
    assert not missing, f"{module} lost {missing}"


def test_readout_is_one_object_the_package_that_runs_the_readout_when_called():
    import inspect
    import subprocess
    import sys

    import symfast.readout as study
    import symfast.readout.plots as rp  # the most common idiom: the package, not a function
    from symfast.readout import budget

    assert sf.readout is study is sys.modules["symfast.readout"] and callable(sf.readout)
    assert rp is sys.modules["symfast.readout.plots"] and budget.adaptive_readout is not None
    assert list(inspect.signature(sf.readout).parameters) == list(inspect.signature(study.readout).parameters)
    assert sf.shapes.by_name("triangle").group.name == "D3"
    assert sf.o3.octahedral().name == "Oh"
    # the same in a fresh interpreter, where nothing else has imported the package first
    code = "import symfast.readout.plots as rp, symfast as sf; assert callable(sf.readout); print(rp.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "symfast.readout.plots"


def test_calling_the_readout_package_is_the_readout_function(monkeypatch):
    import sys

    impl = sys.modules["symfast.readout.readout"]  # the module (its name is shadowed by the function)
    calls = []
    monkeypatch.setattr(sf.readout, "readout", lambda *a, **k: calls.append((a, k)) or "result")
    assert sf.readout("ens", candidates=[]) == "result" and calls == [(("ens",), {"candidates": []})]
    assert sf.readout.readout is not impl.readout  # the patched name is the one a call runs


@pytest.mark.parametrize("old, new", [("groups", "symfast.groups"), ("o3", "symfast.groups.o3"),
                                      ("shapes", "symfast.shapes"), ("encodings", "symfast.nn.encodings"),
                                      ("ensemble", "symfast.nn.ensemble")])
def test_moved_readout_modules_warn_and_resolve(old, new):
    study = importlib.import_module("symfast.readout")
    with pytest.warns(DeprecationWarning, match=f"symfast.readout.{old} moved to {new}"):
        got = getattr(study, old)
    assert got is importlib.import_module(new)
    with pytest.raises(AttributeError):
        study.no_such_module


def test_o3_kind_read_from_the_matrix_agrees_with_the_name():
    letter = {"rotation": "re", "reflection": "m", "inversion": "i", "rotoreflection": "s"}
    for g in list(sf.o3.octahedral()) + list(sf.o3.icosahedral()):
        assert g.name[0] in letter[g.kind], (g.name, g.kind)
        assert np.isclose(np.linalg.det(g.matrix), 1.0 if g.kind == "rotation" else -1.0)


def test_lift_cache_is_bounded_and_returns_the_lifts(monkeypatch):
    from symfast.nn import encodings

    monkeypatch.setattr(encodings, "LIFT_CACHE_SIZE", 3)
    monkeypatch.setattr(encodings, "_LIFT_CACHE", type(encodings._LIFT_CACHE)())
    pe = sf.TriAxisPE(4)
    for g in sf.dihedral(6):
        rho, exact, res = pe.best_lift(g)
        assert exact and res == 0.0 and np.array_equal(rho, pe.lift(g))
        assert not rho.flags.writeable
    assert len(encodings._LIFT_CACHE) == 3
    rho, exact, res = pe.best_lift(sf.rotation(0.3))  # not liftable: the orthogonal least-squares lift
    assert not exact and res > 0 and np.allclose(rho @ rho.T, np.eye(pe.dim), atol=1e-10)


def test_no_warnings_on_import():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        importlib.reload(importlib.import_module("symfast.groups"))


def test_one_activation_table():
    """The fused op's activations, the C++ kernel's codes, the Triton codes and the nn.Module forms all
    come from symfast.activations (the table), in one order."""
    import torch

    from symfast.activations import ACTIVATION_TABLE, FUSED
    from symfast.nn import ACTIVATION_MODULES
    from symfast.ops.fourier_mlp import ACTIVATIONS, reference
    from symfast.ops.fourier_mlp.triton import ACT_CODES

    assert tuple(ACTIVATIONS) == FUSED == tuple(ACTIVATION_MODULES)
    assert ACT_CODES == {n: i for i, n in enumerate(FUSED)}
    if sf.cpp_available():
        C = sf._ext.require_cpp()
        assert {n: int(v) for n, v in C.Activation.__members__.items()} == ACT_CODES
    z = torch.linspace(-3, 3, 13, dtype=torch.float64, requires_grad=True)
    for n in FUSED:
        a = reference.ACTIVATIONS[n](z)
        (g,) = torch.autograd.grad(a.sum(), z)
        assert torch.allclose(reference.ACTIVATION_GRADS[n](z, a), g), n  # the backward's derivative is right
        assert torch.equal(ACTIVATION_MODULES[n]()(z), ACTIVATION_TABLE[n].torch_fn(z))


def test_bad_thresholds_and_empty_candidates_are_clear_errors():
    from symfast.layerwise.layer_action import check_threshold

    for bad in (float("nan"), float("inf"), -0.1, "x", None, True):
        with pytest.raises(ValueError, match="threshold"):
            check_threshold(bad)
    assert check_threshold(0.25) == 0.25
    W = [(np.eye(4), np.zeros(4)), (np.ones((1, 4)), np.zeros(1))]
    with pytest.raises(ValueError, match="threshold"):
        sf.recover_latent_actions(W, np.eye(4), threshold=float("nan"))
    import torch

    ens = sf.Ensemble(sf.DyadicAxisPE(2), [torch.randn(2, 8, 4), torch.randn(2, 4, 1)],
                      [torch.zeros(2, 4), torch.zeros(2, 1)], "relu", ["square", "square"], [0, 1])
    with pytest.raises(ValueError, match="at least one group element"):
        sf.readout(ens, candidates=[])


# The public entry points' parameters, in order: a change here is a change users see. One convention
# set across the studies: progress= on every long-running entry point; backend= wherever a kernel
# runs; seeds= (a count or a list) where several models are trained, seed= for one model or one
# random stream (null draws, controls, check inputs).
SIGNATURES = {
    "symfast.fit_sdf": ["shapes", "pe", "seeds", "hidden", "activation", "steps", "points", "lr", "device", "backend",
                        "sampler", "radius", "dtype", "checkpoint", "checkpoint_every", "progress", "eikonal", "normals"],
    "symfast.readout": ["ensembles", "candidates", "observable", "aggregate", "sweep", "num_null", "seed", "alpha",
                        "sweep_axis", "shapes", "backend", "progress"],
    "symfast.schur_ablation": ["model", "task", "alpha", "n_eval", "eval_seed", "n_random", "seed", "refit", "ridge",
                               "margin", "tie_tol", "epsilon", "backend", "n_orders", "detail_alphas", "noop_c",
                               "progress"],
    "symfast.schur_study": ["settings", "checkpoint_dir", "progress", "log"],
    "symfast.recover_latent_actions": ["layers", "rho_in", "rho_out", "activation", "data", "threshold",
                                       "random_draws", "seed", "backend", "progress"],
    "symfast.identifiable_submodel": ["layers", "data", "activation", "tol", "check_inputs", "seed", "progress"],
    "symfast.project_equivariant": ["layers", "actions", "activation", "max_group", "repair", "progress"],
    "symfast.matching_scores": ["weights_first_layer", "lifts", "layout", "biases", "mode", "backend", "chunk"],
    "symfast.ordered_schur": ["W", "sector_alpha", "tie_tol", "backend"],
    "symfast.rnn.train": ["task", "n_hidden", "recurrent", "cfg", "checkpoint", "progress", "seed"],
    "symfast.rnn.train_seeds": ["task", "seeds", "n_hidden", "recurrent", "cfg", "checkpoints", "progress"],
    "symfast.Ensemble.from_modules": ["models", "shapes", "seeds", "output", "frequencies", "phases"],
    "symfast.Ensemble.from_sequentials": ["models", "shapes", "seeds", "output", "frequencies", "phases"],
    "symfast.nn.read_layout": ["model", "frequencies", "phases", "name"],
}


def _resolve(path: str):
    obj = sf
    for part in path.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize("path", sorted(SIGNATURES))
def test_public_signatures(path):
    import inspect

    assert list(inspect.signature(_resolve(path)).parameters) == SIGNATURES[path]


# Figure functions are named plot_*; the names they had before still answer, with a warning.
PLOT_MODULES = {"symfast.readout.plots": {"heatmap", "sweep_curves", "sweep_summary", "zero_level_sets", "loss_curves"},
                "symfast.readout.plots3d": {"level_sets", "sdf_slices", "score_heatmap"},
                "symfast.schur.plots": {"ablation_figure", "schur_form", "spectra_and_masses", "stabilisers", "predictors", "loss_curves",
                                        "copy_family"},
                "symfast.layerwise.plots": set()}
NOT_FIGURES = {"pvalue_norm", "panel_pvalues", "pvalue_colorbar", "noop_line", "orbit_groups", "counts_text", "unit_label", "lit_pixels"}


@pytest.mark.parametrize("module", sorted(PLOT_MODULES))
def test_figure_functions_are_named_plot_and_old_names_warn(module):
    import inspect

    mod = importlib.import_module(module)
    public = [n for n, f in vars(mod).items() if inspect.isfunction(f) and f.__module__ == module
              and not n.startswith("_")]
    assert public and all(n.startswith("plot_") or n in NOT_FIGURES for n in public), public
    for old in PLOT_MODULES[module]:
        with pytest.warns(DeprecationWarning, match=f"{module}.{old} is renamed plot_"):
            fn = getattr(mod, old)
        assert fn.__name__.startswith("plot_") and fn is getattr(mod, fn.__name__)
    for old in sorted(PLOT_MODULES[module])[:1]:  # the import idiom reaches the old name too
        with pytest.warns(DeprecationWarning, match="is renamed plot_"):
            exec(f"from {module} import {old}", {})
    with pytest.raises(AttributeError):
        getattr(mod, "no_such_plot")
