"""Old public names kept working with a DeprecationWarning, in one place.

`renamed(module_globals, {"old": "new"})` returns a module `__getattr__` that answers `module.old`
(and `from module import old`) with the object now named `new`, with a DeprecationWarning.
"""
from __future__ import annotations

import warnings

__all__ = ["renamed"]


def renamed(module_globals: dict, names: dict):
    """A module-level `__getattr__` resolving each old name in `names` to its new one, with a warning."""
    module = module_globals["__name__"]

    def __getattr__(name):
        if name in names:
            warnings.warn(f"{module}.{name} is renamed {names[name]}; the old name will be removed",
                          DeprecationWarning, stacklevel=2)
            return module_globals[names[name]]
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__

