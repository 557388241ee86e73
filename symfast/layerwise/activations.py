"""Deprecated module name: the activations and their latent groups are `symfast.activations`, the
matching of a layer's neurons under them `symfast.layerwise.neuron_matching` (`match_rows` is now
`match_neurons`). Every old name still resolves, with a DeprecationWarning."""
from __future__ import annotations

import importlib
import warnings

_MOVED = {"Activation": "symfast.activations", "ACTIVATION_TABLE": "symfast.activations",
          "activation": "symfast.activations", "table_markdown": "symfast.activations",
          "MODES": "symfast.layerwise.neuron_matching", "post_action": "symfast.layerwise.neuron_matching",
          "best_scales": "symfast.layerwise.neuron_matching", "match_rows": "symfast.layerwise.neuron_matching"}


def __getattr__(name: str):
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    new = "match_neurons" if name == "match_rows" else name
    warnings.warn(f"symfast.layerwise.activations.{name} is deprecated; use {_MOVED[name]}.{new}",
                  DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module(_MOVED[name]), new)
