"""Neural fields: B PE+MLP models sharing one Fourier encoding, as plain tensors (`Ensemble`, the
package's one PE+MLP data type) and as trainable nn.Modules on the fused kernels
(`FourierMLPEnsemble`, and `FourierMLP` for one model).

Data model:
- `symfast.fit_sdf` returns an `Ensemble`; `symfast.readout` reads one (or a list).
- An `Ensemble` holds plain tensors, fan-in first as the batched kernels use them:
  weights[l]: [B, fan_in, fan_out], biases[l]: [B, fan_out]. Member b of the paper's
  convention has first-layer matrix `W1 = weights[0][b].T` (`[H, d]`).
- Each member carries the `Shape` it was fitted to (`targets[b]`; `shapes[b]` is its name)
  and its seed. The readout takes G_true from these Shape objects (declared group, or the
  group `Shape.symmetries` finds when none was declared), never from a name lookup.
- Conversions, all exact (same tensors, same activation):
  `to_module()` / `from_module()` with `FourierMLPEnsemble` (the trainable
  nn.Module form on the fused kernels; `FourierMLP` is its one-model case), and
  `to_sequential(i)` / `from_sequentials()` with `nn.Sequential(FourierPE, Linear, act, ...,
  Linear)`. `symfast.readout` also accepts a `FourierMLPEnsemble` that knows its shapes.
- `save(path)` writes atomically (temp file + fsync + rename) a dict of tensors, numbers,
  strings and lists only: encoding config, weights, biases, activation, seeds, losses,
  training config and each shape as `Shape.to_dict()` (recipe such as polygon vertices,
  name and group elements). `load(path)` reads it with `torch.load(weights_only=True)`
  (no arbitrary unpickling) and validates every field; files of the first format, which
  stored shape names only, load with a warning and take the shapes from `symfast.shapes.by_name`.
- Pickling: Ensembles, modules and their shapes pickle (shapes through their recipe, see
  `symfast.shapes.base`), so `torch.save(module)`, `copy.deepcopy` and multiprocessing workers
  take them; `save`/`load` remain the format to keep (validated, no code on load).
- Activations: an Ensemble stacked from `nn.Sequential` models may carry an activation the fused
  kernel lacks (any parameter-free pointwise module, e.g. nn.GELU()): the readout reads it as any
  other (the Gram observables use the weights only), `ens(x)` evaluates it in plain PyTorch
  through the module, `to_sequential(i)` gives it back; `to_module()` and `save()` refuse it.
- Learned frequencies: a module whose `pe.frequencies` (or phases) require grad trains through
  the PyTorch reference, the fused kernel having no frequency gradients (a one-time
  RuntimeWarning says so); `to_ensemble()` and the readout take the current values, detached.
- Meta device: modules built with `device="meta"` or under `with torch.device("meta")` run
  forward and `train_step` on meta tensors (shapes only, through the reference).
- Other people's inputs (conventions of `symfast.fourier_mlp`): bfloat16/float16 points are
  computed in float32 and the output returned in their dtype (under torch.autocast: in the
  autocast dtype); a batch of N = 0 points gives empty outputs and zero gradients; the reference
  backend takes any hidden width; `out_features=K > 1` gives [B, N, K] outputs (fused kernels: one
  output, so "auto" runs the reference and warns once); the readout reads one-output fields.
"""
from __future__ import annotations

import copy
import hashlib
import math
import warnings
from dataclasses import dataclass, field

import torch
from torch import nn

from symfast._io import atomic_save, safe_load
from symfast.nn.encodings import FourierPE
from symfast.nn.sequential import (activation_fn, activation_label, check_activation, parse_sequential,
                                   stack_sequentials, to_sequential)
from symfast.ops.fourier_mlp import (ACTIVATIONS, LOW_PRECISION, fourier_mlp, fourier_mlp_eikonal_step,
                                      fourier_mlp_train_step, mse_loss)
from symfast.shapes import Shape, by_name

__all__ = ["Ensemble", "FourierMLPEnsemble", "FourierMLP", "init_weights"]

FORMAT = "symfast.Ensemble/2"
_WARNED: set = set()  # one-time warnings already given (by key)


def _warn_once(key: str, msg: str) -> None:
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(msg, RuntimeWarning, stacklevel=4)
_OLD_FORMAT = "symfast.Ensemble/1"  # shapes by name only


def init_weights(seeds: list[int], dims: list[int], dtype=torch.float32) -> tuple[list, list]:
    """nn.Linear's default init (U(-1/sqrt(fan_in), 1/sqrt(fan_in))) per model, from its seed: the one
    initialisation of `fit_sdf` and of `FourierMLPEnsemble`. Returns weights [B, fan_in, fan_out] and
    biases [B, fan_out] per layer (float64 draws, cast to `dtype`)."""
    weights = [torch.empty(len(seeds), a, b, dtype=dtype) for a, b in zip(dims[:-1], dims[1:])]
    biases = [torch.empty(len(seeds), b, dtype=dtype) for b in dims[1:]]
    for i, seed in enumerate(seeds):
        g = torch.Generator().manual_seed(seed)
        for w, b in zip(weights, biases):
            bound = 1.0 / math.sqrt(w.shape[1])
            w[i] = (torch.rand(w.shape[1:], generator=g, dtype=torch.float64) * 2 - 1).mul_(bound)
            b[i] = (torch.rand(b.shape[1:], generator=g, dtype=torch.float64) * 2 - 1).mul_(bound)
    return weights, biases


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
        import pandas as pd  # on use: `import symfast.nn` stays light
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
                        [self._shape_arg(i) for i in idx], [self.seeds[i] for i in idx],
                        self.losses[:, t] if self.losses.numel() else self.losses, dict(self.config))

    def _shape_arg(self, i: int):
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
        return FourierMLPEnsemble.from_tensors(self.pe, self.weights, self.biases, self.activation, backend,
                                               shapes=[self._shape_arg(i) for i in range(len(self))],
                                               seeds=list(self.seeds))

    @staticmethod
    def from_module(module, shapes=None, seeds=None, output: int | None = None) -> "Ensemble":
        """An Ensemble from a `symfast.nn.FourierMLPEnsemble` (or `FourierMLP`): its weights
        (detached copies), encoding (a copy that no longer requires grad: learned frequencies
        are read as they are now) and activation; `shapes`/`seeds` default to the module's own.
        An Ensemble holds one-output fields: for a module with `out_features = K > 1`, `output=k`
        takes output k (0 <= k < K), and without it the module is refused."""
        if not isinstance(module, FourierMLPEnsemble):
            raise TypeError(f"expected a symfast.nn.FourierMLPEnsemble, got {type(module).__name__}")
        weights, biases = _one_output([w.detach().clone() for w in module.weights],
                                     [b.detach().clone() for b in module.biases], output, "Ensemble.from_module(module, ")
        shapes = module.shapes if shapes is None else list(shapes)
        if shapes is None:
            raise ValueError("this module does not know which shape each model was fitted to; pass shapes= "
                             "(one Shape per model) or set module.shapes")
        seeds = (module.seeds if module.seeds is not None else list(range(module.num_models))) \
            if seeds is None else list(seeds)
        pe = copy.deepcopy(module.pe).requires_grad_(False)
        return Ensemble(pe, weights, biases, module.activation, shapes, seeds)

    @staticmethod
    def coerce(obj, shapes=None) -> "Ensemble":
        """An Ensemble as is; a `FourierMLPEnsemble` converted by `from_module` (with `shapes` if
        given); an `nn.Sequential(FourierPE, Linear, act, ..., Linear)` or a list of them converted
        by `from_sequentials(models, shapes)` (`shapes` required: one Shape or name per model)."""
        if isinstance(obj, Ensemble):
            if shapes is not None:
                raise ValueError("shapes= is for models that do not carry their shapes; an Ensemble carries its own")
            return obj
        if isinstance(obj, FourierMLPEnsemble):
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
    def from_sequentials(models, shapes, seeds=None, output: int | None = None) -> "Ensemble":
        """Stack nn.Sequential(FourierPE, Linear, act, ..., Linear) models (same encoding and
        architecture) into an Ensemble; `shapes` gives each model's target (Shape or name).
        A pointwise activation the fused kernel lacks (nn.GELU(), ...) is kept as the module.
        An Ensemble holds one-output fields: for models whose last Linear has K > 1 outputs,
        `output=k` takes output k (0 <= k < K; e.g. the SDF head), and without it they are refused."""
        models = list(models)
        if shapes is None or len(list(shapes)) != len(models):
            raise ValueError(f"shapes must give one Shape or name per model ({len(models)}), "
                             f"got {None if shapes is None else len(list(shapes))}")
        pe, weights, biases, act = stack_sequentials(models)
        weights, biases = _one_output(weights, biases, output, "Ensemble.from_sequentials(models, shapes, ")
        pe = copy.deepcopy(pe).requires_grad_(False)
        seeds = list(range(len(models))) if seeds is None else list(seeds)
        return Ensemble(pe, weights, biases, act, list(shapes), seeds)

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


class FourierMLPEnsemble(nn.Module):
    """B independent PE + MLP models trained and evaluated together by the fused kernels.

    Args:
        pe: the Fourier encoding shared by all models (d = pe.dim features).
        hidden: hidden widths, e.g. (64, 64) for d -> 64 -> 64 -> 1.
        num_models: B.
        activation: "relu", "tanh", "silu" or "sine".
        backend: "auto", "cpu", "triton" or "reference" (see `symfast.fourier_mlp`).
        dtype, device: of the parameters. Initialised like nn.Linear (U(+-1/sqrt(fan_in))) by
            `init_weights`, from `seeds` when given (as `fit_sdf` does), else from seeds drawn
            with `generator`.
        shapes, seeds: optional, the Shape each model is fitted to and its seed (length B),
            carried into `to_ensemble()` (and so into `symfast.readout(module)`).
        out_features: K, outputs per model (e.g. an SDF and a colour). The fused kernels have one
            output: with K > 1 "auto" runs the PyTorch reference (a one-time warning says so), and
            the readout, which reads single-output fields, refuses the module.

    Parameters: weights[l]: [B, fan_in, fan_out], biases[l]: [B, fan_out].
    Dtypes: bfloat16/float16 inputs are computed in float32 and returned in their dtype; under
    torch.autocast the output is in the autocast dtype (see `symfast.fourier_mlp`).
    """

    def __init__(self, pe: FourierPE, hidden=(64, 64), num_models: int = 1, activation: str = "relu",
                 backend: str = "auto", dtype=torch.float32, device=None, generator=None,
                 shapes=None, seeds=None, out_features: int = 1):
        super().__init__()
        self.shapes = None if shapes is None else list(shapes)
        self.seeds = None if seeds is None else list(seeds)
        for name, v in (("shapes", self.shapes), ("seeds", self.seeds)):
            if v is not None and len(v) != num_models:
                raise ValueError(f"{name} must have one entry per model ({num_models}), got {len(v)}")
        if not isinstance(activation, str) or activation not in ACTIVATIONS:
            raise ValueError(f"unsupported activation {activation!r}; the fused kernel has {list(ACTIVATIONS)} (models "
                             "with another pointwise activation are read out as an Ensemble: "
                             "symfast.Ensemble.from_sequentials(models, shapes))")
        if not isinstance(pe, FourierPE):
            raise ValueError(f"pe must be a symfast FourierPE, got {type(pe).__name__}")
        dims = [pe.dim, *[int(h) for h in hidden], int(out_features)]
        if len(dims) < 3 or min(dims) < 1 or num_models < 1:
            raise ValueError(f"need >= 1 hidden layer of positive width, out_features >= 1 and num_models >= 1, "
                             f"got hidden={hidden}, out_features={out_features}")
        self.pe, self.activation, self.backend = pe, activation, backend
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        init_seeds = self.seeds if self.seeds is not None else \
            torch.randint(2**62, (num_models,), generator=generator, device="cpu").tolist()
        ws, bs = init_weights(init_seeds, dims, dtype)
        for w, bb in zip(ws, bs):
            self.weights.append(nn.Parameter(w.to(device)))
            self.biases.append(nn.Parameter(bb.to(device)))

    @property
    def num_models(self) -> int:
        return self.weights[0].shape[0]

    @property
    def out_features(self) -> int:
        return self.weights[-1].shape[2]

    @classmethod
    def from_tensors(cls, pe, weights, biases, activation: str = "relu", backend: str = "auto",
                     shapes=None, seeds=None) -> "FourierMLPEnsemble":
        """A module holding copies of weights[l]: [B, fan_in, fan_out] and biases[l]: [B, fan_out]."""
        ws, bs = list(weights), list(biases)
        m = cls.__new__(cls)
        FourierMLPEnsemble.__init__(m, copy.deepcopy(pe), [w.shape[2] for w in ws[:-1]], ws[0].shape[0], activation,
                                    backend, dtype=ws[0].dtype, device=ws[0].device, shapes=shapes, seeds=seeds,
                                    out_features=ws[-1].shape[2])
        with torch.no_grad():
            for l, (w, b) in enumerate(zip(ws, bs)):
                if m.weights[l].shape != w.shape or m.biases[l].shape != b.shape:
                    raise ValueError(f"layer {l}: weights {list(w.shape)} / biases {list(b.shape)} do not chain")
                m.weights[l].copy_(w)
                m.biases[l].copy_(b)
        return m

    def to_ensemble(self, shapes=None, seeds=None):
        """This module as a `symfast.Ensemble` (copies); shapes/seeds default to the module's."""
        return Ensemble.from_module(self, shapes, seeds)

    def _pe_args(self, x):
        dtype = self.weights[0].dtype  # not x's: a bfloat16 x is computed in float32, its frequencies too
        return self.pe.frequencies.to(x.device, dtype), self.pe.phases.to(x.device, dtype)

    def _as_input(self, x, name: str = "x") -> torch.Tensor:
        """Tensors pass through; numpy arrays and lists become tensors of the parameters' dtype/device."""
        if not isinstance(x, torch.Tensor):
            try:
                x = torch.as_tensor(x, dtype=self.weights[0].dtype, device=self.weights[0].device)
            except (TypeError, ValueError, RuntimeError) as e:
                raise TypeError(f"{name} must be a tensor or numeric array, got {type(x).__name__}: {e}") from None
        return x.contiguous()

    def _learned_pe(self) -> bool:
        """True (after a one-time warning) when the encoding's frequencies or phases require grad."""
        if not (self.pe.frequencies.requires_grad or self.pe.phases.requires_grad):
            return False
        _warn_once("learned-frequencies", "symfast.nn: the encoding's frequencies/phases require grad; the fused "
                   "kernel has no frequency gradients, so this module runs the slower PyTorch reference "
                   "(symfast.ops.fourier_mlp.reference, forward and backward, ~6x the fused training step). "
                   "Freeze them (pe.requires_grad_(False)) to use the fused kernel.")
        return True

    def _check_meta(self, x: torch.Tensor) -> None:
        """Shape and dtype checks without reading values (meta tensors have none)."""
        B, D = self.num_models, self.pe.input_dim
        if x.ndim not in (2, 3) or x.shape[-1] != D or (x.ndim == 3 and x.shape[0] != B):
            raise ValueError(f"x must be [B={B}, N, {D}] or [N, {D}], got {list(x.shape)}")
        if x.dtype != self.weights[0].dtype and x.dtype not in LOW_PRECISION:
            raise ValueError(f"x has dtype {x.dtype}, the parameters {self.weights[0].dtype}")

    def _on_meta(self, x) -> bool:
        return x.device.type == "meta" or self.weights[0].device.type == "meta"

    def _backend(self, x) -> str:
        return "reference" if self._on_meta(x) else self.backend

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [B, N, D] (per model) or [N, D] (shared) -> [B, N] ([B, N, K] for out_features K > 1;
        D: the encoding's input dimension)."""
        x = self._as_input(x)
        f, p = self._pe_args(x)
        if self._on_meta(x):  # the reference on meta tensors: output shapes and autograd, no values
            self._check_meta(x)
        elif torch.is_grad_enabled():
            self._learned_pe()
        return fourier_mlp(x, f, p, list(self.weights), list(self.biases), self.activation, self._backend(x))

    def train_step(self, x: torch.Tensor, targets: torch.Tensor, grad_sync: str = "auto", eikonal: float = 0.0,
                   normals: torch.Tensor | None = None, normal: float = 0.0) -> torch.Tensor:
        """Fused forward + per-model MSE + backward; sets p.grad (replacing it) and returns loss [B].

        x: [B, N, D] or [N, D]; targets: shaped like the output, [B, N] (or [B, N, K]); the loss is
        the mean over points (and outputs). Follow with optimizer.step().
        eikonal, normals, normal: add eikonal * mean (|grad_x f| - 1)^2 and normal * mean
        |grad_x f - normals|^2 (normals [B, N, D]) to each model's loss, through the fused
        second-order step (`symfast.ops.fourier_mlp.fourier_mlp_eikonal_step`; one output, fixed
        encoding).
        With trainable frequencies/phases (they require grad) it runs forward and backward through
        the PyTorch reference instead (one-time warning) and sets their .grad too.

        Distributed data parallel: the step sets gradients itself, past DistributedDataParallel's
        backward hooks, so it averages them across ranks itself. grad_sync "auto" (default):
        all-reduce the mean over the default process group when torch.distributed is initialised
        with more than one rank (what DDP does for a backward), else nothing; "none": keep each
        rank's own gradients (e.g. when ranks train different models).
        """
        if grad_sync not in ("auto", "none"):
            raise ValueError(f"grad_sync must be 'auto' or 'none', got {grad_sync!r}")
        x, targets = self._as_input(x), self._as_input(targets, "targets")
        f, p = self._pe_args(x)
        params = list(self.weights) + list(self.biases)
        meta = self._on_meta(x)
        if meta:  # shapes only: the reference on meta tensors, below
            self._check_meta(x)
        second_order = eikonal != 0 or normal != 0 or normals is not None
        if second_order and not meta:
            if self._learned_pe():
                raise ValueError("train_step's eikonal/normal terms keep the encoding fixed; to learn frequencies "
                                 "or phases, use torch.autograd.grad(model(x), x, create_graph=True) in your loop")
            loss, _, dw, db = fourier_mlp_eikonal_step(x, targets, f, p, list(self.weights), list(self.biases),
                                                       self.activation, eikonal=eikonal, normals=normals,
                                                       normal=normal, backend=self._backend(x))
            grads = dw + db
        elif not meta and self._learned_pe():
            params += [t for t in (self.pe.frequencies, self.pe.phases) if t.requires_grad]
            with torch.enable_grad():
                y = FourierMLPEnsemble.forward(self, x)
                if targets.shape != y.shape:
                    raise ValueError(f"targets must be {list(y.shape)}, got {list(targets.shape)}")
                loss = mse_loss(y, targets)
                grads = torch.autograd.grad(loss.sum(), params)
            loss = loss.detach()
        else:
            loss, dw, db = fourier_mlp_train_step(x, targets, f, p, list(self.weights), list(self.biases),
                                                  self.activation, self._backend(x))
            grads = dw + db
        if grad_sync == "auto" and not meta:
            grads = _mean_across_ranks(grads)
        for param, g in zip(params, grads):
            param.grad = g.contiguous()  # PyTorch's fused Adam mis-steps on gradients strided unlike the parameter
        return loss

    def __getitem__(self, i: int) -> "FourierMLP":
        """Model i as a standalone FourierMLP (a copy, with its shape and seed if known)."""
        m = FourierMLP._from_params(self.pe, [w[i].detach() for w in self.weights],
                                    [b[i].detach() for b in self.biases], self.activation, self.backend)
        m.shapes = None if self.shapes is None else [self.shapes[i]]
        m.seeds = None if self.seeds is None else [self.seeds[i]]
        return m

    def to_sequential(self, i: int) -> nn.Sequential:
        """Model i as nn.Sequential(pe, Linear, act, ..., Linear) (output [..., out_features])."""
        return to_sequential(self.pe, [w[i].detach() for w in self.weights],
                              [b[i].detach() for b in self.biases], self.activation)

    @classmethod
    def from_sequentials(cls, seqs, backend: str = "auto") -> "FourierMLPEnsemble":
        """Stack same-architecture nn.Sequential(pe, Linear, act, ..., Linear) models into one ensemble."""
        pe, ws, bs, act = stack_sequentials(seqs)
        return FourierMLPEnsemble.from_tensors(pe, ws, bs, act, backend)


class FourierMLP(FourierMLPEnsemble):
    """One PE + MLP model on the fused kernels: x [..., D] -> [...], or [..., K] for out_features K > 1
    (an ensemble of size 1)."""

    def __init__(self, pe: FourierPE, hidden=(64, 64), activation: str = "relu", backend: str = "auto",
                 dtype=torch.float32, device=None, generator=None, shapes=None, seeds=None, out_features: int = 1):
        super().__init__(pe, hidden, 1, activation, backend, dtype, device, generator, shapes, seeds, out_features)

    @classmethod
    def _from_params(cls, pe, ws, bs, activation, backend):
        """One model from ws[l]: [fan_in, fan_out], bs[l]: [fan_out]."""
        return cls.from_tensors(pe, [w[None] for w in ws], [b[None] for b in bs], activation, backend)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [..., D] (D: the encoding's input dimension, 2 or 3) -> [...] ([..., K] for K > 1 outputs)."""
        x = self._as_input(x)
        y = super().forward(x.reshape(-1, x.shape[-1]))[0]
        return y.reshape(x.shape[:-1] + y.shape[1:])

    def train_step(self, x: torch.Tensor, targets: torch.Tensor, grad_sync: str = "auto", eikonal: float = 0.0,
                   normals: torch.Tensor | None = None, normal: float = 0.0) -> torch.Tensor:
        """x: [N, D], targets: [N] (or [N, K]) -> scalar loss; sets p.grad (grad_sync and the second-order
        terms eikonal, normals [N, D], normal as for the ensemble)."""
        x, targets = self._as_input(x), self._as_input(targets, "targets")
        K = [self.out_features] if self.out_features > 1 else []
        if normals is not None:
            normals = self._as_input(normals, "normals").reshape(1, -1, x.shape[-1])
        return super().train_step(x.reshape(-1, x.shape[-1]), targets.reshape(1, -1, *K), grad_sync, eikonal,
                                  normals, normal)[0]

    def to_sequential(self, i: int = 0) -> nn.Sequential:
        return super().to_sequential(i)

    @classmethod
    def from_sequential(cls, seq: nn.Sequential, backend: str = "auto") -> "FourierMLP":
        pe, ws, bs, act = parse_sequential(seq)
        return cls._from_params(pe, ws, bs, act, backend)


def _mean_across_ranks(grads):
    """Gradients averaged over the default process group (one flat all-reduce), as DDP averages a
    backward's; unchanged without torch.distributed or with a single rank."""
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return grads
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    flat /= dist.get_world_size()
    out, at = [], 0
    for g in grads:
        out.append(flat[at:at + g.numel()].view_as(g))
        at += g.numel()
    return out


def _one_output(weights, biases, output, call: str):
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
