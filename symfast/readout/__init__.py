"""Symmetry readout from neural-field weights.

Fourier-encoded MLPs fitted to signed distance functions; exact lifts of O(2)/O(3) elements
through the encoding; Gram observables of the weights; the hierarchy G_obs ⊆ G_lift ∩ G_true
(Chiba, Sugiyama, Uranishi, arXiv 2607.03108).

Modules: `training` (`fit_sdf`), `observables`, `decision` (the test behind "observed"),
`readout` (the three sets per shape and encoding), `result` (`Readout`), `matching` (the
matching observable beside the Gram scores), `calibration` (measured error rates), `budget`
(adaptive training rounds), `plots`, `plots3d`, `claims`, `sweeps` (grids of trainings).
Geometry, shapes and encodings live below the studies: `symfast.groups`, `symfast.shapes`,
`symfast.nn`. The package is callable: `symfast.readout(ensemble, ...)` is
`symfast.readout.readout(ensemble, ...)`.
"""
import importlib as _importlib
import inspect as _inspect
import sys as _sys
import types as _types
import warnings as _warnings

from symfast._optional import require as _require

_require("pandas", "the readout study (its tables)")  # one line naming the extra, before its modules import it
from symfast.readout.readout import readout
from symfast.readout.result import Readout
from symfast.readout.training import fit_sdf

__all__ = ["Readout", "readout", "fit_sdf"]

# Modules that lived here before geometry, shapes and encodings moved below the studies.
_MOVED = {"groups": "symfast.groups", "o3": "symfast.groups.o3", "shapes": "symfast.shapes",
          "solids": "symfast.shapes.solids", "samplers": "symfast.shapes.samplers",
          "encodings": "symfast.nn.encodings", "ensemble": "symfast.nn.ensemble"}


def __getattr__(name):
    if name in _MOVED:
        _warnings.warn(f"symfast.readout.{name} moved to {_MOVED[name]}", DeprecationWarning, stacklevel=2)
        return _importlib.import_module(_MOVED[name])
    raise AttributeError(f"module 'symfast.readout' has no attribute {name!r}")


class _CallablePackage(_types.ModuleType):
    """The package itself runs the readout when called, so `symfast.readout` is one object: the
    package for imports and attribute access, the readout function for a call."""

    def __call__(self, *args, **kwargs):
        return readout(*args, **kwargs)


__signature__ = _inspect.signature(readout)  # what help() and IDEs show for a call
_sys.modules[__name__].__class__ = _CallablePackage
