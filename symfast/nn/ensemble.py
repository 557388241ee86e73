"""`Ensemble`: B PE+MLP models sharing one Fourier encoding, as plain tensors (the package's one
PE+MLP data type), and its file format (`save` / `load`).

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
  nn.Module form on the fused kernels, in `symfast.nn.fields`; `FourierMLP` is its one-model
  case), and `to_sequential(i)` / `from_sequentials()` with `nn.Sequential(FourierPE, Linear,
  act, ..., Linear)`; `from_modules()` also reads other libraries' encoding layouts
  (`symfast.nn.layouts`). `symfast.readout` also accepts a `FourierMLPEnsemble` that knows its shapes.
- `save(path)` writes atomically (temp file + fsync + rename) a dict of tensors, numbers,
  strings and lists only: encoding config, weights, biases, activation, seeds, losses,
  training config and each shape as `Shape.to_dict()` (recipe such as polygon vertices,
  name and group elements). `load(path)` reads it with `torch.load(weights_only=True)`
  (no arbitrary unpickling) and validates every field; files of the first format, which
  stored shape names only, load with a warning and take the shapes from `symfast.shapes.by_name`.
- Pickling: Ensembles and their shapes pickle (shapes through their recipe, see
  `symfast.shapes.base`), so `copy.deepcopy` and multiprocessing workers take them;
  `save`/`load` remain the format to keep (validated, no code on load).
- Activations: an Ensemble stacked from `nn.Sequential` models may carry an activation the fused
  kernel lacks (any parameter-free pointwise module, e.g. nn.GELU()): the readout reads it as any
  other (the Gram observables use the weights only), `ens(x)` evaluates it in plain PyTorch
  through the module, `to_sequential(i)` gives it back; `to_module()` and `save()` refuse it.
"""
from __future__ import annotations

import copy
import hashlib
import warnings
from dataclasses import dataclass, field

import torch
from torch import nn

from symfast._io import atomic_save, safe_load
from symfast._optional import require
from symfast.nn.encodings import FourierPE
from symfast.nn.layouts import read_layout
from symfast.nn.sequential import activation_fn, activation_label, check_activation, stack_sequentials, to_sequential
from symfast.ops.fourier_mlp import fourier_mlp
from symfast.shapes import Shape, by_name

__all__ = ["Ensemble", "one_output", "FORMAT"]

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
        activation: hidden activation name (one of `symfast.ops.fourier_mlp.ACTIVATIONS`), or a
            parameter-free pointwise nn.Module the fused kernel lacks (nn.GELU(), ...; see the
            module docstring for what such an ensemble can do).
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
        check_activation(self.activation)
        self.targets = [_as_target(s) for s in self.shapes]
        self.shapes = [getattr(s, "name", s) for s in self.shapes]
        for t in self.targets:
            if t is not None and getattr(t, "dim", 2) != self.pe.input_dim:
                raise ValueError(f"shape {t.name!r} is {getattr(t, 'dim', 2)}D but the encoding {self.pe.name!r} "
                                 f"encodes {self.pe.input_dim}D points")

    def __repr__(self) -> str:
        counts = dict.fromkeys(self.shapes, 0)
        for name in self.shapes:
            counts[name] += 1
        shapes = ", ".join(f"{k} x{v}" for k, v in list(counts.items())[:6]) + (", ..." if len(counts) > 6 else "")
        return (f"Ensemble(B={len(self)}, pe={self.pe.name!r} (d={self.pe.dim}), hidden={self.hidden}, "
                f"activation={activation_label(self.activation)!r}, dtype={self.weights[0].dtype}, "
                f"shapes=[{shapes}], steps={self.losses.shape[0]})")

    # -- views --------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.weights[0].shape[0]

    @property
    def hidden(self) -> tuple:
        return tuple(w.shape[2] for w in self.weights[:-1])

    @property
    def members(self):
        """One row per model (a pandas DataFrame indexed by the model's position): shape, seed,
        final training loss."""
        pd = require("pandas", "Ensemble.members")  # on use: `import symfast.nn` stays light
        final = self.losses[-1].tolist() if self.losses.numel() else [float("nan")] * len(self)
        return pd.DataFrame({"shape": self.shapes, "seed": self.seeds, "final_loss": final})

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
                        [self.member_shape(i) for i in idx], [self.seeds[i] for i in idx],
                        self.losses[:, t] if self.losses.numel() else self.losses, dict(self.config))

    def member_shape(self, i: int):
        """Member i's Shape where it carries one, else its name (what a new Ensemble of it takes)."""
        return self.targets[i] if self.targets[i] is not None else self.shapes[i]

    @torch.no_grad()
    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Evaluate every member at x: [N, D] (shared) or [B, N, D] -> [B, N] (D = `pe.input_dim`)."""
        x = torch.as_tensor(x, dtype=self.weights[0].dtype)
        if not isinstance(self.activation, str):  # no fused form: plain PyTorch through the module
            return _plain_forward(self.pe, x, self.weights, self.biases, self.activation)
        return fourier_mlp(x, self.pe.frequencies, self.pe.phases, self.weights, self.biases, self.activation,
                           backend="reference")

    # -- interop with ordinary PyTorch ---------------------------------------------------------
    def to_module(self, backend: str = "auto"):
        """The ensemble as a trainable `symfast.nn.FourierMLPEnsemble` (parameters are copies;
        the module keeps `shapes` and `seeds`, so `module.to_ensemble()` gives this back)."""
        if not isinstance(self.activation, str):
            raise ValueError(f"the fused kernel has no activation {activation_label(self.activation)}; evaluate "
                             "this ensemble with ens(x) or use ens.to_sequential(i)")
        # Imported here: the module form (symfast.nn.fields) is built on this data type and imports
        # this module; this one call goes back up (the one ignored import in pyproject's contracts).
        from symfast.nn.fields import FourierMLPEnsemble
        return FourierMLPEnsemble.from_tensors(self.pe, self.weights, self.biases, self.activation, backend,
                                               shapes=[self.member_shape(i) for i in range(len(self))],
                                               seeds=list(self.seeds))

    @staticmethod
    def from_module(module, shapes=None, seeds=None, output: int | None = None) -> "Ensemble":
        """An Ensemble from a `symfast.nn.FourierMLPEnsemble` (or `FourierMLP`): its weights
        (detached copies), encoding (a copy that no longer requires grad: learned frequencies
        are read as they are now) and activation; `shapes`/`seeds` default to the module's own.
        An Ensemble holds one-output fields: for a module with `out_features = K > 1`, `output=k`
        takes output k (0 <= k < K), and without it the module is refused.
        Same as `module.to_ensemble(shapes, seeds, output)`, where the conversion lives."""
        if not _is_module_form(module):
            raise TypeError(f"expected a symfast.nn.FourierMLPEnsemble, got {type(module).__name__}")
        return module.to_ensemble(shapes, seeds, output=output)

    @staticmethod
    def coerce(obj, shapes=None) -> "Ensemble":
        """An Ensemble as is; a `FourierMLPEnsemble` converted by `from_module` (with `shapes` if
        given); an `nn.Sequential(encoding, Linear, act, ..., Linear)` or a list of them converted
        by `from_sequentials(models, shapes)` (`shapes` required: one Shape or name per model; the
        encoding a `FourierPE` or another library's, see `from_modules`)."""
        if isinstance(obj, Ensemble):
            if shapes is not None:
                raise ValueError("shapes= is for models that do not carry their shapes; an Ensemble carries its own")
            return obj
        if _is_module_form(obj):
            return Ensemble.from_module(obj, shapes)
        if isinstance(obj, nn.Sequential):
            obj = [obj]
        if isinstance(obj, (list, tuple)) and obj and all(isinstance(m, nn.Sequential) for m in obj):
            if shapes is None:
                raise ValueError(f"{len(obj)} nn.Sequential model(s) do not say which shape each was fitted to; pass "
                                 "shapes= (one Shape or shape name per model), as for "
                                 "symfast.Ensemble.from_sequentials(models, shapes)")
            return Ensemble.from_sequentials(list(obj), shapes)
        raise TypeError(f"expected a symfast.Ensemble, a symfast.nn.FourierMLPEnsemble, or a list of "
                        f"nn.Sequential(FourierPE, Linear, act, ..., Linear) models with shapes= (converted by "
                        f"symfast.Ensemble.from_sequentials(models, shapes)); got {type(obj).__name__}")

    def to_sequential(self, i: int) -> torch.nn.Sequential:
        """Member i as nn.Sequential(FourierPE, Linear, act, ..., Linear) (output [..., 1])."""
        if not 0 <= i < len(self):
            raise IndexError(f"member {i} out of range for an ensemble of {len(self)}")
        return to_sequential(self.pe, [w[i] for w in self.weights], [b[i] for b in self.biases], self.activation)

    @staticmethod
    def from_sequentials(models, shapes, seeds=None, output: int | None = None, frequencies=None,
                         phases=None) -> "Ensemble":
        """Stack nn.Sequential(encoding, Linear, act, ..., Linear) models (same encoding and
        architecture) into an Ensemble; `shapes` gives each model's target (Shape or name).
        The encoding is a `FourierPE` or another library's Fourier encoding, read exactly
        (see `from_modules`, which this is). A pointwise activation the fused kernel lacks
        (nn.GELU(), ...) is kept as the module. An Ensemble holds one-output fields: for models
        whose last Linear has K > 1 outputs, `output=k` takes output k (0 <= k < K; e.g. the SDF
        head), and without it they are refused."""
        return Ensemble.from_modules(models, shapes, seeds, output, frequencies, phases)

    @staticmethod
    def from_modules(models, shapes, seeds=None, output: int | None = None, frequencies=None,
                     phases=None) -> "Ensemble":
        """An Ensemble from models of any Fourier-encoding layout symfast reads (`symfast.nn.LAYOUTS`):
        symfast's `FourierPE`; all sines, then all cosines (NeRF, nerfstudio's `NeRFEncoding`);
        tiny-cuda-nn's Frequency encoding; or any encoding module with `frequencies=` ([m, D]) and
        `phases=` given, in either order. Each model converts exactly (the first Linear's columns
        permuted, padding features folded into its bias); the layout found is logged
        (logger "symfast.nn") and kept in `ens.config["layout"]`.

        Args:
            models: nn.Sequential(encoding, Linear, act, ..., Linear) models, or (encoding, mlp)
                pairs; same frequencies and architecture.
            shapes, seeds, output: as for `from_sequentials`.

        Raises:
            ValueError: an encoding that matches no layout (the message says what was expected).
        """
        models = list(models)
        if shapes is None or len(list(shapes)) != len(models):
            raise ValueError(f"shapes must give one Shape or name per model ({len(models)}), "
                             f"got {None if shapes is None else len(list(shapes))}")
        read = [read_layout(m, frequencies, phases) for m in models]
        pe, weights, biases, act = stack_sequentials([seq for seq, _ in read])
        weights, biases = one_output(weights, biases, output, "Ensemble.from_sequentials(models, shapes, ")
        pe = copy.deepcopy(pe).requires_grad_(False)
        seeds = list(range(len(models))) if seeds is None else list(seeds)
        layout = ",".join(sorted({name for _, name in read}))
        return Ensemble(pe, weights, biases, act, list(shapes), seeds, config={"layout": layout})

    # -- persistence ---------------------------------------------------------------------------
    def save(self, path) -> None:
        """Write the ensemble atomically (see the module docstring for what is stored)."""
        if not isinstance(self.activation, str):
            raise ValueError(f"save() stores fused activations only, this ensemble has "
                             f"{activation_label(self.activation)}; pickle it (torch.save(ens, path)) or save "
                             "its nn.Sequential models instead")
        d = {"format": FORMAT, "pe": self.pe.config(), "weights": [w.detach().cpu() for w in self.weights],
             "biases": [b.detach().cpu() for b in self.biases], "activation": self.activation,
             "shapes": [_shape_dict(t, n) for t, n in zip(self.targets, self.shapes)],
             "seeds": list(self.seeds), "losses": self.losses, "config": self.config}
        atomic_save({**d, "fingerprint": _fingerprint(d)}, path)

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
                              "symfast.shapes.by_name (save again to store the shapes themselves)")
                shapes = list(d["shapes"])
            else:
                shapes = [_shape_from_dict(s) for s in d["shapes"]]
            if "fingerprint" in d and d["fingerprint"] != _fingerprint(d):
                raise ValueError("its contents do not match the fingerprint stored with them (members, "
                                 "encoding, weights or settings were altered after saving)")
            ens = Ensemble(FourierPE.from_config(d["pe"]), d["weights"], d["biases"], d["activation"],
                           shapes, list(d["seeds"]), d["losses"], dict(d["config"]))
            _check_config(ens)
            return ens
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise ValueError(f"{path}: malformed symfast ensemble file ({type(e).__name__}: {e})") from None



def _is_module_form(obj) -> bool:
    """True for `symfast.nn.FourierMLPEnsemble` (and `FourierMLP`), recognised by the conversion it
    offers (`to_ensemble`) rather than by its class, which sits above this module."""
    return isinstance(obj, nn.Module) and callable(getattr(obj, "to_ensemble", None)) and hasattr(obj, "weights")


def _plain_forward(pe, x, weights, biases, act) -> torch.Tensor:
    """Every member at x: [N, D] or [B, N, D] -> [B, N], in plain PyTorch with the activation `act`."""
    h = pe(x)
    if h.ndim == 2:
        h = h.expand(weights[0].shape[0], *h.shape)
    fn = activation_fn(act)
    for l, (w, b) in enumerate(zip(weights, biases)):
        h = torch.baddbmm(b[:, None, :], h, w)
        if l < len(weights) - 1:
            h = fn(h)
    return h[..., 0]


def _fingerprint(d: dict) -> str:
    """sha256 over everything `save` stores except the fingerprint itself (tensors by their bytes)."""
    h = hashlib.sha256()

    def feed(x):
        if isinstance(x, torch.Tensor):
            t = x.detach().cpu().contiguous()
            h.update(f"T{t.dtype}{list(t.shape)}".encode())
            h.update(t.numpy().tobytes() if t.numel() else b"")
        elif isinstance(x, dict):
            h.update(b"{")
            for k in sorted(x, key=str):
                feed(str(k))
                feed(x[k])
            h.update(b"}")
        elif isinstance(x, (list, tuple)):
            h.update(b"[")
            for v in x:
                feed(v)
            h.update(b"]")
        else:
            h.update(f"{type(x).__name__}:{x!r};".encode())

    feed({k: v for k, v in d.items() if k != "fingerprint"})
    return h.hexdigest()


def _check_config(ens: "Ensemble") -> None:
    """The training settings stored with an ensemble agree with its members (where it says them)."""
    cfg = ens.config
    if cfg.get("pe") is not None and cfg["pe"] != ens.pe.name:
        raise ValueError(f"config says encoding {cfg['pe']!r}, the stored encoding is {ens.pe.name!r}")
    if cfg.get("activation") is not None and cfg["activation"] != ens.activation:
        raise ValueError(f"config says activation {cfg['activation']!r}, the members use {ens.activation!r}")
    if cfg.get("hidden") is not None and list(cfg["hidden"]) != list(ens.hidden):
        raise ValueError(f"config says hidden {cfg['hidden']}, the weights have {list(ens.hidden)}")
    names, seeds = cfg.get("shapes"), cfg.get("seeds")
    if isinstance(names, list) and isinstance(seeds, list):  # fit_sdf's order: shape-major
        if [s for s in names for _ in seeds] != ens.shapes or [sd for _ in names for sd in seeds] != ens.seeds:
            raise ValueError("the members' shapes and seeds are not the ones the config trained "
                             f"(shapes {names} x seeds {seeds}, shape-major)")


def _shape_dict(target: Shape | None, name: str) -> dict:
    return target.to_dict() if target is not None else {"name": name, "params": None, "group": None, "unknown": True}


def _shape_from_dict(d: dict):
    if isinstance(d, dict) and d.get("unknown"):
        return str(d["name"])  # a label without a known field or group
    return Shape.from_dict(d)


def one_output(weights, biases, output, call: str):
    """weights/biases ([B, fan_in, fan_out] / [B, fan_out] lists) with the last layer cut to output
    `output` (an int, 0 <= output < K); unchanged for K = 1 and output None or 0. The readout's
    data model (`Ensemble`) holds one-output fields, so K > 1 without `output` is refused, naming
    `call` + "output=k)"."""
    K = weights[-1].shape[-1]
    if output is None:
        if K == 1:
            return weights, biases
        raise ValueError(f"an Ensemble (and so the readout) holds single-output fields; these have "
                         f"out_features={K}: read output k with {call}output=k), 0 <= k < {K}, or build a "
                         f"module from the weights with the last layer sliced, weights[-1][..., k:k+1], "
                         f"biases[-1][:, k:k+1] (FourierMLPEnsemble.from_tensors)")
    if isinstance(output, bool) or not isinstance(output, int) or not 0 <= output < K:
        raise ValueError(f"output must be an integer in 0..{K - 1} (the fields have {K} output(s)), got {output!r}")
    return ([*weights[:-1], weights[-1][..., output:output + 1].contiguous()],
            [*biases[:-1], biases[-1][..., output:output + 1].contiguous()])
