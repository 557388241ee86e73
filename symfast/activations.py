"""The one table of activations: what each computes (numpy, torch, nn.Module, and the derivative
the fused kernels use) and its latent symmetry group. The fused op (`symfast.ops.fourier_mlp`),
the neural-field modules (`symfast.nn`) and the layerwise study (`symfast.layerwise`) derive theirs
from it.

"Identifiable Equivariant Networks are Layerwise Equivariant" (Shahverdi, Marchetti, Bökman, Kohn):
the hidden action of an identifiable equivariant network is, on the pre-activations z of a layer,
a permutation of neurons times a diagonal D drawn from the activation's scaling group; the
activation turns it into an (affine) action on the post-activations h = act(z):

    act(d z) = phi(d) act(z) + offset(d)          for every d in the scaling group.

| name                | scaling group of d (matching mode) | phi(d) | offset(d)   |
|---------------------|------------------------------------|--------|-------------|
| tanh, sine          | {+1, -1}            ("sign")       | d      | 0           |
| sigmoid             | {+1, -1}            ("sign")       | d      | (1 - d) / 2 |
| relu, leaky_relu    | d > 0               ("scale")      | d      | 0           |
| cube (z^3)          | d != 0 real         ("real_scale") | d^3    | 0           |
| square (z^2)        | d != 0 real         ("real_scale") | d^2    | 0           |
| odd_poly (z + z^3/3)| {+1, -1}            ("sign")       | d      | 0           |
| even_poly (z^2/2 + z^4/4) | {+1, -1}      ("sign")       | 1      | 0           |
| silu, identity...   | {1}                 ("perm")       | 1      | 0           |

The pre-activation action is the faithful one (an even activation forgets the sign on h, but the
filter still satisfies w rho = -w): symfast stores it (`LayerAction`) and derives the post-activation
action from this table (`post_action`). "real_scale" (a real non-zero scale per neuron) is not a mode
of the batched matching kernel; `symfast.layerwise.neuron_matching.match_neurons` builds it from the kernel's cost matrices and
assignment. Caveats (the `caveat` column) say where the identifiability assumption of the theorem
fails, so that a recovered action is one of several.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

__all__ = ["Activation", "ACTIVATION_TABLE", "FUSED", "activation", "Sine", "table_markdown"]


def _sigmoid(z):
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # no overflow for large |z|


class _Elementwise(torch.nn.Module):
    """An activation as an nn.Module, from its torch function (for nn.Sequential models)."""

    fn: Callable = staticmethod(lambda z: z)

    def forward(self, z):
        return self.fn(z)


class Sine(_Elementwise):
    """sin(z) as a module (the "sine" activation in nn.Sequential form)."""

    fn = staticmethod(torch.sin)


class _LeakyReLU(torch.nn.LeakyReLU):
    def __init__(self):
        super().__init__(0.01)


class _Cube(_Elementwise):
    fn = staticmethod(lambda z: z ** 3)


class _Square(_Elementwise):
    fn = staticmethod(lambda z: z ** 2)


class _OddPoly(_Elementwise):
    fn = staticmethod(lambda z: z + z ** 3 / 3.0)


class _EvenPoly(_Elementwise):
    fn = staticmethod(lambda z: z ** 2 / 2.0 + z ** 4 / 4.0)


@dataclass(frozen=True)
class Activation:
    """One activation and its latent scaling group.

    Attributes:
        name: table key; fn: float64 numpy function; torch_fn: torch function (for training);
        mode: matching mode on pre-activation rows ("perm", "sign", "scale", "real_scale");
        phi: d -> the post-activation scale; offset: d -> the post-activation offset (numpy [H] -> [H]);
        group: the hidden group in words; caveat: where identifiability fails;
        module: its nn.Module class (for nn.Sequential models);
        grad: act'(z) from z and a = act(z) (torch), for the fused PE+MLP op's hand-written
            backward; only the activations the fused kernels implement (`FUSED`) have one.
    """

    name: str
    fn: Callable
    torch_fn: Callable
    mode: str
    phi: Callable
    offset: Callable
    group: str
    caveat: str
    module: type
    grad: Callable | None = None

    @property
    def affine(self) -> bool:
        """True when the post-activation action has a non-zero offset for some group element."""
        return bool(np.any(self.offset(np.array([-1.0, 1.0])) != 0)) if self.mode == "sign" else False


_ID, _ONE, _ZERO = (lambda d: d), (lambda d: np.ones_like(d)), (lambda d: np.zeros_like(d))
_SIGNED = "signed permutations (h -> S P h)"

ACTIVATION_TABLE = {a.name: a for a in [
    Activation("tanh", np.tanh, torch.tanh, "sign", _ID, _ZERO, _SIGNED,
               "identifiable for generic weights; units in the near-linear range (abs(z) < 0.5) are not",
               torch.nn.Tanh, lambda z, a: 1 - a * a),
    Activation("sine", np.sin, torch.sin, "sign", _ID, _ZERO, _SIGNED,
               "bias shifts by pi (sin(z + pi) = -sin z) and 2 pi are further symmetries, not recovered",
               Sine, lambda z, a: torch.cos(z)),
    Activation("sigmoid", _sigmoid, torch.sigmoid, "sign", _ID, lambda d: (1.0 - d) / 2.0,
               "signed permutations with affine compensation: sigma(-z) = 1 - sigma(z), "
               "h -> S P h + (1 - s)/2, the next layer's bias absorbs the offset",
               "identifiable for generic weights (as tanh, of which it is an affine image)",
               torch.nn.Sigmoid),
    Activation("relu", lambda z: np.maximum(z, 0.0), torch.relu, "scale", _ID, _ZERO,
               "positively scaled permutations (h -> D P h, D > 0)",
               "identifiability is conjectured, proven only partially; dead units are removed first",
               torch.nn.ReLU, lambda z, a: (z > 0).to(z.dtype)),
    Activation("leaky_relu", lambda z: np.where(z > 0, z, 0.01 * z),
               lambda z: torch.nn.functional.leaky_relu(z, 0.01), "scale", _ID, _ZERO,
               "positively scaled permutations (h -> D P h, D > 0)", "as ReLU",
               _LeakyReLU),
    Activation("cube", lambda z: z ** 3, lambda z: z ** 3, "real_scale", lambda d: d ** 3, _ZERO,
               "permutations with real scalings: z -> D P z on pre-activations, h -> D^3 P h",
               "polynomial networks are identifiable only for widths small against the dimension of "
               "degree-3 forms; beyond that the parameters have continuous symmetries",
               _Cube),
    Activation("square", lambda z: z ** 2, lambda z: z ** 2, "real_scale", lambda d: d ** 2, _ZERO,
               "permutations with real scalings: z -> D P z, h -> D^2 P h (signs invisible on h)",
               "never identifiable: sum_i v_i (w_i . x)^2 is a quadratic form, preserved by any mixing of "
               "the rows that preserves it (orthogonal mixing of neurons with equal v_i)",
               _Square),
    Activation("odd_poly", lambda z: z + z ** 3 / 3.0, lambda z: z + z ** 3 / 3.0, "sign", _ID, _ZERO,
               _SIGNED, "identifiable only for widths small against the dimension of cubic forms",
               _OddPoly),
    Activation("even_poly", lambda z: z ** 2 / 2.0 + z ** 4 / 4.0, lambda z: z ** 2 / 2.0 + z ** 4 / 4.0, "sign",
               _ONE, _ZERO, "signed permutations on z, plain permutations on h (act(-z) = act(z))",
               "identifiable only for widths small against the dimension of quartic forms",
               _EvenPoly),
    Activation("silu", lambda z: z * _sigmoid(z), torch.nn.functional.silu, "perm", _ONE, _ZERO,
               "permutations", "silu(-z) = silu(z) - z is not a symmetry without a linear skip",
               torch.nn.SiLU, lambda z, a: torch.sigmoid(z) * (1 + z * (1 - torch.sigmoid(z)))),
    Activation("identity", lambda z: z, lambda z: z, "sign", _ID, _ZERO, _SIGNED + " (a subgroup)",
               "never identifiable: any invertible map of the hidden space is a symmetry of a linear layer",
               torch.nn.Identity),
]}

# The activations the fused PE+MLP kernels implement, in their kernel code order.
FUSED = ("relu", "tanh", "silu", "sine")
assert all(ACTIVATION_TABLE[n].grad is not None for n in FUSED)


def activation(name: str) -> Activation:
    """The table entry for `name` (case-insensitive; 'sin' = 'sine', 'leakyrelu' = 'leaky_relu')."""
    key = {"sin": "sine", "leakyrelu": "leaky_relu", "linear": "identity"}.get(str(name).lower(), str(name).lower())
    if key not in ACTIVATION_TABLE:
        raise ValueError(f"unknown activation {name!r}; choose from {sorted(ACTIVATION_TABLE)}")
    return ACTIVATION_TABLE[key]


def table_markdown() -> str:
    """The table as Markdown (for the user guide and reports)."""
    rows = ["| activation | matching mode | hidden group | identifiability caveat |", "|---|---|---|---|"]
    rows += [f"| {a.name} | {a.mode} | {a.group} | {a.caveat} |" for a in ACTIVATION_TABLE.values()]
    return "\n".join(rows)
