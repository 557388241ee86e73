"""Plain-MLP view used by the layerwise tools: a list of (W [out, in], b [out]) in float64.

h_0 = x, h_l = act(W_l h_{l-1} + b_l) for hidden layers, y = W_L h_{L-1} + b_L
(optionally followed by an output activation). Accepts an `nn.Sequential` of
Linear and activation modules or a list of (W, b) pairs (numpy or torch).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from symfast.activations import ACTIVATION_TABLE
from symfast.activations import activation as activation_entry

__all__ = ["MLP", "as_mlp", "ACTIVATIONS", "Act", "check_rho", "float_array"]

ACTIVATIONS = {k: a.fn for k, a in ACTIVATION_TABLE.items()}
_MODULES = {"Tanh": "tanh", "ReLU": "relu", "Sigmoid": "sigmoid", "SiLU": "silu", "Identity": "identity",
            "LeakyReLU": "leaky_relu"}


class Act(torch.nn.Module):
    """Any activation of the table as a module (for those torch has no module for, e.g. cube)."""

    def __init__(self, name: str):
        super().__init__()
        self.name = activation_entry(name).name

    def forward(self, z):
        return activation_entry(self.name).torch_fn(z)

    def extra_repr(self) -> str:
        return self.name


def _module_activation(mod) -> str | None:
    """The table name of an activation module, or None if it is not one."""
    if isinstance(mod, Act):
        return mod.name
    if isinstance(mod, torch.nn.LeakyReLU) and mod.negative_slope != 0.01:
        raise ValueError(f"LeakyReLU slope {mod.negative_slope} unsupported (the table's leaky_relu uses 0.01)")
    return _MODULES.get(type(mod).__name__)


def float_array(x, name: str) -> np.ndarray:
    """`x` (array or tensor) as a float64 numpy array; TypeError if complex, ValueError if any entry is
    NaN or inf (`name` says which input in the message)."""
    if x.is_complex() if isinstance(x, torch.Tensor) else np.iscomplexobj(x):
        raise TypeError(f"{name} must be real, got a complex array")
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().double().numpy()
    a = np.asarray(x, dtype=np.float64)
    if not np.isfinite(a).all():
        raise ValueError(f"{name} has NaN or inf entries")
    return a


@dataclass
class MLP:
    """An MLP as float64 numpy layers.

    Attributes:
        layers: list of (W [out, in], b [out]).
        activation: hidden activation name (see ACTIVATIONS).
        output_activation: applied after the last layer, or None.
    """

    layers: list
    activation: str = "tanh"
    output_activation: str | None = None
    sizes: list = field(init=False)

    def __post_init__(self):
        self.activation = activation_entry(self.activation).name
        if self.output_activation is not None and self.output_activation not in ACTIVATIONS:
            raise ValueError(f"unknown output activation {self.output_activation!r}")
        if len(self.layers) < 1:
            raise ValueError("the network has no layers")
        clean = []
        for l, layer in enumerate(self.layers):
            if not isinstance(layer, (tuple, list)) or len(layer) != 2:
                raise ValueError(f"layer {l} must be a (W, b) pair")
            W, b = float_array(layer[0], f"W[{l}]"), float_array(layer[1], f"b[{l}]")
            if W.ndim != 2:
                raise ValueError(f"W[{l}] must be [out, in], got shape {list(W.shape)}")
            if b.shape != (W.shape[0],):
                raise ValueError(f"b[{l}] must be [{W.shape[0]}], got shape {list(b.shape)}")
            if clean and clean[-1][0].shape[0] != W.shape[1]:
                raise ValueError(f"W[{l}] is {list(W.shape)} but layer {l - 1} has {clean[-1][0].shape[0]} outputs")
            clean.append((W, b))
        self.layers = clean
        self.sizes = [clean[0][0].shape[1]] + [W.shape[0] for W, _ in clean]

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def hidden(self, x, pre: bool = False) -> list:
        """Activations of every hidden layer on x: [N, d0] -> list of [N, H_l] (pre-activations if pre)."""
        h = float_array(x, "x")
        if h.ndim != 2 or h.shape[1] != self.sizes[0]:
            raise ValueError(f"x must be [N, {self.sizes[0]}], got shape {list(h.shape)}")
        act, out = ACTIVATIONS[self.activation], []
        for W, b in self.layers[:-1]:
            z = h @ W.T + b
            h = act(z)
            out.append(z if pre else h)
        return out

    def __call__(self, x) -> np.ndarray:
        """Forward pass: [N, d0] -> [N, d_out] float64."""
        hs = self.hidden(x)
        h = hs[-1] if hs else float_array(x, "x")
        W, b = self.layers[-1]
        y = h @ W.T + b
        return ACTIVATIONS[self.output_activation](y) if self.output_activation else y

    def with_layers(self, layers) -> "MLP":
        return MLP(layers, self.activation, self.output_activation)

    def to_sequential(self, dtype=torch.float32) -> torch.nn.Sequential:
        mods = []
        names = {v: k for k, v in _MODULES.items()}
        for l, (W, b) in enumerate(self.layers):
            lin = torch.nn.Linear(W.shape[1], W.shape[0], dtype=dtype)  # no float32 round trip
            with torch.no_grad():
                lin.weight.copy_(torch.as_tensor(W))
                lin.bias.copy_(torch.as_tensor(b))
            mods.append(lin)
            act = self.activation if l < len(self.layers) - 1 else self.output_activation
            if act is not None:
                mods.append(getattr(torch.nn, names[act])() if act in names else Act(act))
        return torch.nn.Sequential(*mods).to(dtype)


def as_mlp(layers, activation: str | None = None) -> MLP:
    """Normalise an `nn.Sequential`, an `MLP` or a list of (W, b) into an `MLP`.

    For a Sequential the activation is read from the modules (all hidden layers must
    share one); `activation` overrides/sets it for lists (default "tanh").
    """
    if isinstance(layers, MLP):
        return layers if activation is None else MLP(layers.layers, activation, layers.output_activation)
    if isinstance(layers, torch.nn.Sequential):
        pairs, acts = [], []
        for mod in layers:
            if isinstance(mod, torch.nn.Linear):
                b = mod.bias if mod.bias is not None else torch.zeros(mod.out_features)
                pairs.append((mod.weight, b))
                acts.append(None)
            elif _module_activation(mod) is not None:
                if not pairs or acts[-1] is not None:
                    raise ValueError(f"activation {type(mod).__name__} must follow a Linear layer")
                acts[-1] = _module_activation(mod)
            elif isinstance(mod, (torch.nn.Flatten, torch.nn.Dropout)):
                continue
            else:
                raise ValueError(f"unsupported module in Sequential: {type(mod).__name__}")
        hidden = {a for a in acts[:-1]}
        if None in hidden:
            raise ValueError("every hidden Linear layer must be followed by an activation")
        if len(hidden) > 1:
            raise ValueError(f"hidden layers use different activations {sorted(hidden)}")
        act = activation or (hidden.pop() if hidden else "tanh")
        return MLP(pairs, act, acts[-1])
    if not isinstance(layers, (list, tuple)):
        raise ValueError(f"layers must be an nn.Sequential or a list of (W, b), got {type(layers).__name__}")
    return MLP(list(layers), activation or "tanh")


def check_rho(rho, n: int, name: str, tol: float = 1e-6) -> np.ndarray:
    """Validate an orthogonal [n, n] representation matrix; returns float64 numpy."""
    r = float_array(rho, name)
    if r.shape != (n, n):
        raise ValueError(f"{name} must be [{n}, {n}], got shape {list(r.shape)}")
    err = np.abs(r.T @ r - np.eye(n)).max()
    if err > tol:
        raise ValueError(f"{name} is not orthogonal (max |rho^T rho - I| = {err:.2e})")
    return r
