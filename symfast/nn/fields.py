"""Neural fields as trainable nn.Modules on the fused kernels: `FourierMLPEnsemble` (B PE+MLP
models sharing one Fourier encoding) and `FourierMLP` (one model), initialised by `init_weights`.
Their plain-tensor form is `symfast.nn.Ensemble` (`symfast.nn.ensemble`: the data type the readout
reads and its file format); `module.to_ensemble()` and `Ensemble.to_module()` convert exactly.

- Pickling: modules and their shapes pickle, so `torch.save(module)`, `copy.deepcopy` and
  multiprocessing workers take them.
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
import math
import warnings

import torch
from torch import nn

from symfast.nn.encodings import FourierPE
from symfast.nn.ensemble import Ensemble, one_output
from symfast.nn.sequential import parse_sequential, stack_sequentials, to_sequential
from symfast.ops.fourier_mlp import (ACTIVATIONS, LOW_PRECISION, fourier_mlp, fourier_mlp_eikonal_step,
                                      fourier_mlp_train_step, mse_loss)

__all__ = ["FourierMLPEnsemble", "FourierMLP", "init_weights"]  # Ensemble is imported here too (its old home)

_WARNED: set = set()  # one-time warnings already given (by key)


def _warn_once(key: str, msg: str) -> None:
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(msg, RuntimeWarning, stacklevel=4)


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

    def to_ensemble(self, shapes=None, seeds=None, output: int | None = None) -> Ensemble:
        """This module as a `symfast.Ensemble`: its weights (detached copies), encoding (a copy that no
        longer requires grad: learned frequencies are read as they are now) and activation;
        `shapes`/`seeds` default to the module's own. An Ensemble holds one-output fields: with
        `out_features = K > 1`, `output=k` takes output k (0 <= k < K), and without it the module is
        refused. `Ensemble.from_module(module, ...)` is the same call."""
        weights, biases = one_output([w.detach().clone() for w in self.weights],
                                     [b.detach().clone() for b in self.biases], output, "Ensemble.from_module(module, ")
        shapes = self.shapes if shapes is None else list(shapes)
        if shapes is None:
            raise ValueError("this module does not know which shape each model was fitted to; pass shapes= "
                             "(one Shape per model) or set module.shapes")
        seeds = (self.seeds if self.seeds is not None else list(range(self.num_models))) \
            if seeds is None else list(seeds)
        pe = copy.deepcopy(self.pe).requires_grad_(False)
        return Ensemble(pe, weights, biases, self.activation, shapes, seeds)

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
