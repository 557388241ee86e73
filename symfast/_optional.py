"""Optional dependencies, in one place: which extra installs each, and the one-line error without it.

The core install (torch, numpy, SciPy, tqdm) runs the ops, the encodings and the neural fields. The
studies' tables need pandas, figures need matplotlib, the layerwise study's bundled digits
scikit-learn and `report.html` markdown-it-py; `require` imports one of them where it is used and,
when it is missing, raises `MissingExtra` (an ImportError) naming the extra to install.
"""
from __future__ import annotations

import importlib

__all__ = ["EXTRAS", "MissingExtra", "require"]

# top-level module -> (pip package, extra that installs it)
EXTRAS = {
    "pandas": ("pandas", "analysis"),
    "sklearn": ("scikit-learn", "analysis"),
    "markdown_it": ("markdown-it-py", "analysis"),
    "matplotlib": ("matplotlib", "plot"),
}


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message says which extra installs it."""


def require(module: str, what: str):
    """`module` imported (e.g. "pandas", "matplotlib.pyplot"), or MissingExtra saying that `what`
    needs it and which extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError:
        top = module.split(".")[0]
        package, extra = EXTRAS[top]
        raise MissingExtra(f'{what} needs {package}, which is not installed: pip install "symfast[{extra}]"') from None
