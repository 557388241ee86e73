"""symfast: read symmetries out of trained neural-network weights, fast.

Layout, each layer importing only from the layers below it: shared kernels in `symfast.ops` (one
folder per op: public function and dispatch, PyTorch reference, CPU and Triton kernels); geometry
in `symfast.groups` (O(2)/O(3) elements and groups) and `symfast.shapes`; Fourier encodings and
neural fields in `symfast.nn`; the three studies in `symfast.readout`, `symfast.layerwise` and
`symfast.schur`; the report in `symfast.report`; the command line in `symfast.commands`. The
public names below are re-exported here. `symfast.readout` is the readout study's package, and
calling it, `symfast.readout(ensemble)`, runs the readout (`symfast.readout.readout`), so every
import idiom (`import symfast.readout.plots as rp`, `from symfast.readout import plots`) works.

Imports are lazy: `import symfast` loads none of the subpackages (nor pandas, SciPy or
matplotlib); each name below is imported on first use. The `torch.ops.symfast.*` custom ops are
registered when their op package is imported (`import symfast.ops.fourier_mlp`), which every
function and module using them does, or on the first lookup of one through `torch.ops.symfast`
(so `torch.export.load` of a program holding them works after `import symfast`).
"""
import importlib as _importlib
import importlib.abc as _abc
import importlib.util as _util
import sys as _sys
import types as _types

from symfast._ext import cpp_available
from symfast._version import __version__
from symfast.ops import install_namespace as _install_ops_namespace

_install_ops_namespace()

# public name -> the module that defines it (a module's own name: the module itself)
_NAMES = {
    "groups": "symfast.groups", "shapes": "symfast.shapes", "nn": "symfast.nn", "readout": "symfast.readout",
    **dict.fromkeys(["Group", "O2Element", "cyclic", "dihedral", "identity", "o3", "orthogonal_group", "reflection",
                     "rotation", "rotation_sweep"], "symfast.groups"),
    **dict.fromkeys(["DyadicAxisPE", "Ensemble", "FourierPE", "MultiAxisPE", "RandomFourierPE", "TriAxisPE"],
                    "symfast.nn"),
    **dict.fromkeys(["fourier_mlp", "fourier_mlp_train_step", "fourier_mlp_jet", "fourier_mlp_eikonal_step"],
                   "symfast.ops.fourier_mlp"),
    **dict.fromkeys(["OrderedSchur", "ordered_schur", "ordschur"], "symfast.ops.ordered_schur"),
    "samplers": "symfast.shapes",
    **dict.fromkeys(["Readout", "fit_sdf", "sweeps"], "symfast.readout"),
    **dict.fromkeys(["MatchingScores", "matching_scores"], "symfast.readout.matching"),
    **dict.fromkeys(["GroupActions", "LatentActions", "LayerAction", "identifiable_submodel", "project_equivariant",
                     "recover_latent_actions"], "symfast.layerwise"),
    **dict.fromkeys(["rnn", "schur_ablation", "schur_ablation_summary", "SchurSettings", "SchurStudy", "schur_study"],
                    "symfast.schur"),
}
# `import symfast.o3` / `symfast.samplers` / `symfast.sweeps` / `symfast.rnn` keep working as short
# names for the modules they name.
_ALIASES = {"symfast.o3": "symfast.groups.o3", "symfast.samplers": "symfast.shapes.samplers",
            "symfast.sweeps": "symfast.readout.sweeps", "symfast.rnn": "symfast.schur.rnn"}


class _AliasFinder(_abc.MetaPathFinder, _abc.Loader):
    """Imports an alias as the module it names (the module replaces itself in sys.modules)."""

    def find_spec(self, name, path=None, target=None):
        return _util.spec_from_loader(name, self) if name in _ALIASES else None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        _sys.modules[module.__name__] = _importlib.import_module(_ALIASES[module.__name__])


if not any(isinstance(f, _AliasFinder) for f in _sys.meta_path):
    _sys.meta_path.append(_AliasFinder())


def __getattr__(name):
    if name not in _NAMES:
        raise AttributeError(f"module 'symfast' has no attribute {name!r}")
    module = _importlib.import_module(_NAMES[name])
    if module.__name__ == f"symfast.{name}":
        value = module
    else:  # a name the module defines, or one of its submodules
        value = getattr(module, name, None) or _importlib.import_module(f"{module.__name__}.{name}")
    globals()[name] = value
    return value


class _Symfast(_types.ModuleType):
    def __dir__(self):
        return sorted(set(super().__dir__()) | set(__all__))


_sys.modules[__name__].__class__ = _Symfast

__all__ = [
    "groups", "shapes", "samplers", "sweeps", "o3", "nn", "cpp_available",
    "FourierPE", "DyadicAxisPE", "TriAxisPE", "MultiAxisPE", "RandomFourierPE",
    "O2Element", "Group", "rotation", "reflection", "identity", "dihedral", "cyclic", "rotation_sweep",
    "orthogonal_group",
    "Ensemble", "fit_sdf", "readout", "Readout",
    "ordered_schur", "ordschur", "OrderedSchur", "schur_ablation", "schur_ablation_summary", "rnn",
    "SchurSettings", "SchurStudy", "schur_study",
    "recover_latent_actions", "matching_scores", "identifiable_submodel", "project_equivariant",
    "LatentActions", "LayerAction", "GroupActions", "MatchingScores",
    "fourier_mlp", "fourier_mlp_train_step", "fourier_mlp_jet", "fourier_mlp_eikonal_step",
]
