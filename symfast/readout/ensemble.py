"""The trained-model data type of the readout study: B PE+MLP neural fields sharing one encoding.

Data model:
- `symfast.fit_sdf` returns an `Ensemble`; `symfast.readout` reads one (or a list).
- An `Ensemble` holds plain tensors, fan-in first as the batched kernels use them:
  weights[l]: [B, fan_in, fan_out], biases[l]: [B, fan_out]. Member b of the paper's
  convention has first-layer matrix `W1 = weights[0][b].T` (`[H, d]`).
- Each member carries the `Shape` it was fitted to (`targets[b]`; `shapes[b]` is its name)
  and its seed. The readout takes G_true from these Shape objects (declared group, or the
  group `Shape.symmetries` finds when none was declared), never from a name lookup.
- Conversions, all exact (same tensors, same activation):
  `to_module()` / `from_module()` with `symfast.nn.FourierMLPEnsemble` (the trainable
  nn.Module form on the fused kernels; `FourierMLP` is its one-model case), and
  `to_sequential(i)` / `from_sequentials()` with `nn.Sequential(FourierPE, Linear, act, ...,
  Linear)`. `symfast.readout` also accepts a `FourierMLPEnsemble` that knows its shapes.
- `save(path)` writes atomically (temp file + fsync + rename) a dict of tensors, numbers,
  strings and lists only: encoding config, weights, biases, activation, seeds, losses,
  training config and each shape as `Shape.to_dict()` (recipe such as polygon vertices,
  name and group elements). `load(path)` reads it with `torch.load(weights_only=True)`
  (no arbitrary unpickling) and validates every field; files of the first format, which
  stored shape names only, load with a warning and take the shapes from `shapes.by_name`.
"""
from __future__ import annotations

import copy
import os
import warnings
from dataclasses import dataclass, field

import pandas as pd
import torch

from symfast._io import atomic_save
from symfast.readout.encodings import FourierPE
from symfast.readout.shapes import Shape, by_name
from symfast.ops.fourier_mlp.reference import ACTIVATIONS, fourier_mlp

__all__ = ["Ensemble"]

FORMAT = "symfast.Ensemble/2"
_OLD_FORMAT = "symfast.Ensemble/1"  # shapes by name only


def _as_target(s) -> Shape | None:
    """A member's Shape: given, or the library shape of that name; None for an unknown name."""
    if isinstance(s, Shape):
        return s
    if not isinstance(s, str):
        raise ValueError(f"shapes must be Shape objects or names, got {type(s).__name__}")
    try:
        return by_name(s)
    except ValueError:
        return None  # a label without a known field: G_true unknown (NaN in the readout)


@dataclass
class Ensemble:
    """B independent PE+MLP models sharing one encoding.

    Attributes:
        pe: the shared Fourier encoding.
        weights, biases: lists of [B, fan_in, fan_out] and [B, fan_out] tensors.
        activation: hidden activation name (a key of `symfast.ops.fourier_mlp.reference.ACTIVATIONS`).
        shapes: per-member shape name (length B). The constructor takes Shape objects or
            names; `targets` keeps the Shape objects (None for a name it does not know).
        seeds: per-member seed (length B).
        losses: [steps, B] training loss per step (float32; empty if imported).
        config: the training settings (see `symfast.fit_sdf`).
    """

    pe: FourierPE
    weights: list
    biases: list
    activation: str
    shapes: list
    seeds: list
    losses: torch.Tensor = field(default_factory=lambda: torch.zeros(0, 0))
    config: dict = field(default_factory=dict)
    targets: list = field(init=False, repr=False)

    def __post_init__(self):
        self.weights, self.biases = list(self.weights), list(self.biases)
        if not self.weights or len(self.weights) != len(self.biases):
            raise ValueError("weights and biases must be non-empty lists with the same number of layers")
        B = self.weights[0].shape[0]
        if self.weights[0].shape[1] != self.pe.dim:
            raise ValueError(f"weights[0] must be [B, {self.pe.dim}, H] for this encoding, "
                             f"got {list(self.weights[0].shape)}")
        for l, (w, b) in enumerate(zip(self.weights, self.biases)):
            if w.ndim != 3 or w.shape[0] != B or b.shape != (B, w.shape[2]) or \
                    (l and w.shape[1] != self.weights[l - 1].shape[2]):
                raise ValueError(f"layer {l}: weights [B, fan_in, fan_out] and biases [B, fan_out] do not "
                                 f"chain, got {list(w.shape)} and {list(b.shape)}")
        if self.weights[-1].shape[2] != 1:
            raise ValueError(f"the last layer must have one output, got {list(self.weights[-1].shape)}")
        if len(self.shapes) != B or len(self.seeds) != B:
            raise ValueError(f"shapes and seeds must have one entry per model (B = {B})")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {self.activation!r}; choose from {sorted(ACTIVATIONS)}")
        self.targets = [_as_target(s) for s in self.shapes]
        self.shapes = [getattr(s, "name", s) for s in self.shapes]
        for t in self.targets:
            if t is not None and getattr(t, "dim", 2) != self.pe.input_dim:
                raise ValueError(f"shape {t.name!r} is {getattr(t, 'dim', 2)}D but the encoding {self.pe.name!r} "
                                 f"encodes {self.pe.input_dim}D points")

    # -- views --------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.weights[0].shape[0]

    @property
    def hidden(self) -> tuple:
        return tuple(w.shape[2] for w in self.weights[:-1])

    @property
    def members(self) -> pd.DataFrame:
        """One row per model: index, shape, seed, final training loss."""
        final = self.losses[-1].tolist() if self.losses.numel() else [float("nan")] * len(self)
        return pd.DataFrame({"index": range(len(self)), "shape": self.shapes, "seed": self.seeds,
                             "final_loss": final})

    def indices(self, shape) -> list[int]:
        """Member indices trained on `shape` (a Shape or its name)."""
        name = getattr(shape, "name", shape)
        idx = [i for i, s in enumerate(self.shapes) if s == name]
        if not idx:
            raise ValueError(f"no member trained on shape {name!r}; have {sorted(set(self.shapes))}")
        return idx

    def true_group(self, shape, candidates):
        """G_true of the members named `shape` (a Shape or its name), from their Shape objects:
        the declared group, or the candidates the field is invariant under when none was
        declared; None when the members carry no Shape. Raises if members that share the name
        carry shapes with different groups (give them distinct names)."""
        targets = [self.targets[i] for i in self.indices(shape)]
        if any(t is None for t in targets):
            return None
        groups = {id(t): t.true_group(candidates) for t in targets}
        first = next(iter(groups.values()))
        for g in groups.values():
            if g.continuous != first.continuous or set(g) != set(first):
                raise ValueError(f"members named {getattr(shape, 'name', shape)!r} carry shapes with different "
                                 "symmetry groups; give the shapes distinct names")
        return first

    def subset(self, idx) -> "Ensemble":
        idx = list(idx)
        t = torch.as_tensor(idx, dtype=torch.long)
        return Ensemble(self.pe, [w[t] for w in self.weights], [b[t] for b in self.biases], self.activation,
                        [self._shape_arg(i) for i in idx], [self.seeds[i] for i in idx],
                        self.losses[:, t] if self.losses.numel() else self.losses, dict(self.config))

    def _shape_arg(self, i: int):
        return self.targets[i] if self.targets[i] is not None else self.shapes[i]

    @torch.no_grad()
    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Evaluate every member at x: [N, D] (shared) or [B, N, D] -> [B, N] (D = `pe.input_dim`)."""
        x = torch.as_tensor(x, dtype=self.weights[0].dtype)
        return fourier_mlp(x, self.pe.frequencies, self.pe.phases, self.weights, self.biases, self.activation)

    # -- interop with ordinary PyTorch ---------------------------------------------------------
    def to_module(self, backend: str = "auto"):
        """The ensemble as a trainable `symfast.nn.FourierMLPEnsemble` (parameters are copies;
        the module keeps `shapes` and `seeds`, so `module.to_ensemble()` gives this back)."""
        from symfast.nn import FourierMLPEnsemble

        return FourierMLPEnsemble.from_tensors(self.pe, self.weights, self.biases, self.activation, backend,
                                               shapes=[self._shape_arg(i) for i in range(len(self))],
                                               seeds=list(self.seeds))

    @staticmethod
    def from_module(module, shapes=None, seeds=None) -> "Ensemble":
        """An Ensemble from a `symfast.nn.FourierMLPEnsemble` (or `FourierMLP`): its weights
        (detached copies) and activation; `shapes`/`seeds` default to the module's own."""
        from symfast.nn import FourierMLPEnsemble

        if not isinstance(module, FourierMLPEnsemble):
            raise TypeError(f"expected a symfast.nn.FourierMLPEnsemble, got {type(module).__name__}")
        shapes = module.shapes if shapes is None else list(shapes)
        if shapes is None:
            raise ValueError("this module does not know which shape each model was fitted to; pass shapes= "
                             "(one Shape per model) or set module.shapes")
        seeds = (module.seeds if module.seeds is not None else list(range(module.num_models))) \
            if seeds is None else list(seeds)
        return Ensemble(copy.deepcopy(module.pe), [w.detach().clone() for w in module.weights], [b.detach().clone() for b in module.biases],
                        module.activation, shapes, seeds)

    @staticmethod
    def coerce(obj) -> "Ensemble":
        """An Ensemble as is; a `FourierMLPEnsemble` converted by `from_module`."""
        if isinstance(obj, Ensemble):
            return obj
        return Ensemble.from_module(obj)

    def to_sequential(self, i: int) -> torch.nn.Sequential:
        """Member i as nn.Sequential(FourierPE, Linear, act, ..., Linear) (output [..., 1])."""
        from symfast.nn import _to_sequential

        if not 0 <= i < len(self):
            raise IndexError(f"member {i} out of range for an ensemble of {len(self)}")
        return _to_sequential(self.pe, [w[i] for w in self.weights], [b[i] for b in self.biases], self.activation)

    @staticmethod
    def from_sequentials(models, shapes, seeds=None) -> "Ensemble":
        """Stack nn.Sequential(FourierPE, Linear, act, ..., Linear) models (same encoding and
        architecture) into an Ensemble; `shapes` gives each model's target (Shape or name)."""
        from symfast.nn import _stack_sequentials

        pe, weights, biases, act = _stack_sequentials(models)
        seeds = list(range(len(models))) if seeds is None else list(seeds)
        return Ensemble(pe, weights, biases, act, list(shapes), seeds)

    # -- persistence ---------------------------------------------------------------------------
    def save(self, path) -> None:
        """Write the ensemble atomically (see the module docstring for what is stored)."""
        atomic_save({"format": FORMAT, "pe": self.pe.config(), "weights": [w.detach().cpu() for w in self.weights],
                     "biases": [b.detach().cpu() for b in self.biases], "activation": self.activation,
                     "shapes": [_shape_dict(t, n) for t, n in zip(self.targets, self.shapes)],
                     "seeds": list(self.seeds), "losses": self.losses, "config": self.config}, path)

    @staticmethod
    def load(path) -> "Ensemble":
        """Read an ensemble written by `save`.

        Raises:
            ValueError: naming the file, when it is truncated, corrupt, not an ensemble file,
                malformed in any field, or has NaN/Inf weights.
        """
        d = safe_load(path, "symfast ensemble")
        if not isinstance(d, dict) or d.get("format") not in (FORMAT, _OLD_FORMAT):
            raise ValueError(f"{path} is not a symfast ensemble file")
        try:
            for kind in ("weights", "biases"):
                if not isinstance(d[kind], list) or not all(isinstance(t, torch.Tensor) for t in d[kind]):
                    raise ValueError(f"{kind} must be a list of tensors")
                for l, t in enumerate(d[kind]):
                    if not torch.isfinite(t).all():
                        raise ValueError(f"{kind}[{l}] contains NaN or Inf")
            if not isinstance(d["losses"], torch.Tensor) or not isinstance(d["config"], dict):
                raise ValueError("losses must be a tensor and config a dict")
            if d["format"] == _OLD_FORMAT:
                warnings.warn(f"{path}: old ensemble format with shape names only; taking each shape from "
                              "symfast.readout.shapes.by_name (save again to store the shapes themselves)")
                shapes = list(d["shapes"])
            else:
                shapes = [_shape_from_dict(s) for s in d["shapes"]]
            return Ensemble(FourierPE.from_config(d["pe"]), d["weights"], d["biases"], d["activation"],
                            shapes, list(d["seeds"]), d["losses"], dict(d["config"]))
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise ValueError(f"{path}: malformed symfast ensemble file ({type(e).__name__}: {e})") from None


def _shape_dict(target: Shape | None, name: str) -> dict:
    return target.to_dict() if target is not None else {"name": name, "params": None, "group": None, "unknown": True}


def _shape_from_dict(d: dict):
    if isinstance(d, dict) and d.get("unknown"):
        return str(d["name"])  # a label without a known field or group
    return Shape.from_dict(d)


def safe_load(path, what: str):
    """torch.load(weights_only=True) on CPU; a truncated or corrupt file raises ValueError naming it."""
    path = os.fspath(path)
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except Exception as e:  # EOFError, RuntimeError (zip), UnpicklingError, ...: all mean "not readable"
        raise ValueError(f"{path}: cannot read {what} file; it is truncated, corrupt or not such a file "
                         f"({type(e).__name__}: {e})") from None
