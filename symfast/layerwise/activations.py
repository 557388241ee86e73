"""The latent symmetry group of each supported activation, written once.

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
of the batched matching kernel; `match_rows` here builds it from the kernel's cost matrices and
assignment. Caveats (the `caveat` column) say where the identifiability assumption of the theorem
fails, so that a recovered action is one of several.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from symfast.ops.matching import assign, cost_matrices
from symfast.ops.matching import match_rows as _match_rows_kernel

__all__ = ["Activation", "ACTIVATION_TABLE", "activation", "MODES", "match_rows", "post_action", "best_scales",
           "table_markdown"]

MODES = ("perm", "sign", "scale", "real_scale")


def _sigmoid(z):
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # no overflow for large |z|


@dataclass(frozen=True)
class Activation:
    """One activation and its latent scaling group.

    Attributes:
        name: table key; fn: float64 numpy function; torch_fn: torch function (for training);
        mode: matching mode on pre-activation rows ("perm", "sign", "scale", "real_scale");
        phi: d -> the post-activation scale; offset: d -> the post-activation offset (numpy [H] -> [H]);
        group: the hidden group in words; caveat: where identifiability fails.
    """

    name: str
    fn: Callable
    torch_fn: Callable
    mode: str
    phi: Callable
    offset: Callable
    group: str
    caveat: str

    @property
    def affine(self) -> bool:
        """True when the post-activation action has a non-zero offset for some group element."""
        return bool(np.any(self.offset(np.array([-1.0, 1.0])) != 0)) if self.mode == "sign" else False


_ID, _ONE, _ZERO = (lambda d: d), (lambda d: np.ones_like(d)), (lambda d: np.zeros_like(d))
_SIGNED = "signed permutations (h -> S P h)"

ACTIVATION_TABLE = {a.name: a for a in [
    Activation("tanh", np.tanh, torch.tanh, "sign", _ID, _ZERO, _SIGNED,
               "identifiable for generic weights; units in the near-linear range (abs(z) < 0.5) are not"),
    Activation("sine", np.sin, torch.sin, "sign", _ID, _ZERO, _SIGNED,
               "bias shifts by pi (sin(z + pi) = -sin z) and 2 pi are further symmetries, not recovered"),
    Activation("sigmoid", _sigmoid, torch.sigmoid, "sign", _ID, lambda d: (1.0 - d) / 2.0,
               "signed permutations with affine compensation: sigma(-z) = 1 - sigma(z), "
               "h -> S P h + (1 - s)/2, the next layer's bias absorbs the offset",
               "identifiable for generic weights (as tanh, of which it is an affine image)"),
    Activation("relu", lambda z: np.maximum(z, 0.0), torch.relu, "scale", _ID, _ZERO,
               "positively scaled permutations (h -> D P h, D > 0)",
               "identifiability is conjectured, proven only partially; dead units are removed first"),
    Activation("leaky_relu", lambda z: np.where(z > 0, z, 0.01 * z),
               lambda z: torch.nn.functional.leaky_relu(z, 0.01), "scale", _ID, _ZERO,
               "positively scaled permutations (h -> D P h, D > 0)", "as ReLU"),
    Activation("cube", lambda z: z ** 3, lambda z: z ** 3, "real_scale", lambda d: d ** 3, _ZERO,
               "permutations with real scalings: z -> D P z on pre-activations, h -> D^3 P h",
               "polynomial networks are identifiable only for widths small against the dimension of "
               "degree-3 forms; beyond that the parameters have continuous symmetries"),
    Activation("square", lambda z: z ** 2, lambda z: z ** 2, "real_scale", lambda d: d ** 2, _ZERO,
               "permutations with real scalings: z -> D P z, h -> D^2 P h (signs invisible on h)",
               "never identifiable: sum_i v_i (w_i . x)^2 is a quadratic form, preserved by any mixing of "
               "the rows that preserves it (orthogonal mixing of neurons with equal v_i)"),
    Activation("odd_poly", lambda z: z + z ** 3 / 3.0, lambda z: z + z ** 3 / 3.0, "sign", _ID, _ZERO,
               _SIGNED, "identifiable only for widths small against the dimension of cubic forms"),
    Activation("even_poly", lambda z: z ** 2 / 2.0 + z ** 4 / 4.0, lambda z: z ** 2 / 2.0 + z ** 4 / 4.0, "sign",
               _ONE, _ZERO, "signed permutations on z, plain permutations on h (act(-z) = act(z))",
               "identifiable only for widths small against the dimension of quartic forms"),
    Activation("silu", lambda z: z * _sigmoid(z), torch.nn.functional.silu, "perm", _ONE, _ZERO,
               "permutations", "silu(-z) = silu(z) - z is not a symmetry without a linear skip"),
    Activation("identity", lambda z: z, lambda z: z, "sign", _ID, _ZERO, _SIGNED + " (a subgroup)",
               "never identifiable: any invertible map of the hidden space is a symmetry of a linear layer"),
]}


def activation(name: str) -> Activation:
    """The table entry for `name` (case-insensitive; 'sin' = 'sine', 'leakyrelu' = 'leaky_relu')."""
    key = {"sin": "sine", "leakyrelu": "leaky_relu", "linear": "identity"}.get(str(name).lower(), str(name).lower())
    if key not in ACTIVATION_TABLE:
        raise ValueError(f"unknown activation {name!r}; choose from {sorted(ACTIVATION_TABLE)}")
    return ACTIVATION_TABLE[key]


def post_action(index: np.ndarray, scale: np.ndarray, act: Activation):
    """Post-activation action of the pre-activation action (z -> scale * z[index]).

    Returns:
        (R [H, H] with R[i, index_i] = phi(scale_i), offset [H]): act(z') = R act(z) + offset.
    """
    H = len(index)
    R = np.zeros((H, H))
    R[np.arange(H), index] = act.phi(np.asarray(scale, dtype=np.float64))
    return R, act.offset(np.asarray(scale, dtype=np.float64))


def best_scales(A: np.ndarray, B: np.ndarray, mode: str) -> np.ndarray:
    """Per row i, the scale c in the mode's set minimising ||A_i - c B_i|| ([H, k] each -> [H])."""
    g = (A * B).sum(1)
    b2 = (B ** 2).sum(1)
    safe = np.where(b2 > 0, b2, 1.0)
    if mode == "sign":
        return np.where(g < 0, -1.0, 1.0)
    if mode == "scale":
        return np.where((g > 0) & (b2 > 0), g / safe, 1.0)
    if mode == "real_scale":
        return np.where((g != 0) & (b2 > 0), g / safe, 1.0)
    if mode == "perm":
        return np.ones(len(A))
    raise ValueError(f"mode must be one of {MODES}, got {mode!r}")


def match_rows(A: torch.Tensor, B: torch.Tensor, mode: str):
    """Pair rows of A ([H, k]) with rows of B up to a permutation with scales from `mode`.

    "perm", "sign" and "scale" go to the batched matching kernel; "real_scale" (c any non-zero real:
    cost |a|^2 - <a, b>^2 / |b|^2) is built here from its cost matrices and assignment.

    Returns:
        (index [H] int64, scale [H], row_residual [H] = ||a_i - c_i b_index_i|| / ||a_i||).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if mode != "real_scale":
        idx, sc, res, _ = _match_rows_kernel(A, B, mode)
        return idx.numpy(), sc.numpy().astype(np.float64), res.numpy().astype(np.float64)
    _, gram, a2, b2 = cost_matrices(A[None], B[None], "perm")
    safe = torch.where(b2 > 0, b2, torch.ones_like(b2))
    cost = (a2[..., :, None] - gram.pow(2) / safe[..., None, :]).clamp(min=0)
    idx = assign(cost.detach().cpu().numpy())[0]
    An, Bn = A.detach().cpu().double().numpy(), B.detach().cpu().double().numpy()
    sc = best_scales(An, Bn[idx], "real_scale")
    diff = np.linalg.norm(An - sc[:, None] * Bn[idx], axis=1)
    an = np.linalg.norm(An, axis=1)
    return idx.astype(np.int64), sc, diff / np.where(an > 0, an, 1.0)


def table_markdown() -> str:
    """The table as Markdown (for the user guide and reports)."""
    rows = ["| activation | matching mode | hidden group | identifiability caveat |", "|---|---|---|---|"]
    rows += [f"| {a.name} | {a.mode} | {a.group} | {a.caveat} |" for a in ACTIVATION_TABLE.values()]
    return "\n".join(rows)
