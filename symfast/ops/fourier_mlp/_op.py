"""torch.library registration of the fused PE+MLP ops (works under torch.compile).

Three custom ops, all taking a backend name: "auto" (resolved in the kernel by `resolve_backend`,
the rule of the public functions too), "cpu", "triton" or "reference" (see `symfast.ops._dispatch`):
  symfast::fourier_mlp(x, frequencies, phases, weights, biases, activation, backend) -> y [B, N]
      ([B, N, K] when the output layer has K > 1 outputs)
  symfast::fourier_mlp_backward(grad, ..., need_dx) -> [dx, *dW, *db]   (dx empty if not needed)
  symfast::fourier_mlp_train_step(x, targets, ...) -> [loss, *dW, *db]
Each op's default implementation is the reference (backward: the chain rule written out in
reference.fourier_mlp_vjp); "cpu" runs the C++ kernel, "triton" the Triton kernels
(`_dispatch.register_kernels`, the rule shared by every op). A call with no points (N = 0)
goes to the reference on every backend (empty outputs, zero gradients; the kernels are never
handed empty buffers); a model a kernel cannot run (`cpu.unsupported`, `triton.unsupported`:
hidden widths, K > 1) is refused with a ValueError naming backend='reference'.
The forward op's autograd saves only its inputs and recomputes the forward tile by tile
in the backward kernel (no [B, N, H] activations are kept). With create_graph=True (e.g. an
eikonal loss on torch.autograd.grad(f, x)), the C++ and Triton backends' dx comes from the fused
jet op (`_jet_op.py`: f, grad_x f and their fused double backward) and dW, db from the fused
backward op, whose own derivative, if ever taken, runs through the reference's autograd; the
reference backend takes the reference's autograd throughout.
"""
from __future__ import annotations

import torch

from symfast import _ext
from symfast.ops import _checks, _dispatch
from symfast.ops.fourier_features import input_dim
from symfast.ops.fourier_mlp import cpu, reference

_LIB = "symfast"
# measured on 2 CPU cores, 64x64 hidden, 2048 points, B = 1..64 models
REFERENCE_COST = "3-8x the fused train_step's time; 1-2x a forward + backward through autograd"


def resolve_backend(backend: str, device, dtype: torch.dtype, weights) -> str:
    """The backend that runs a field with these weights (shapes only: meta tensors will do) on
    `device` in `dtype`: the one rule for `fourier_mlp`, `fourier_mlp_train_step`, `fit_sdf` and
    every op of the family given backend="auto" (`auto`).
    "auto" falls back to the reference with a one-time RuntimeWarning when a kernel cannot take
    the model (widths above MAX_WIDTH on the C++ kernel, K > 1 outputs); an explicit kernel
    raises ValueError naming backend='reference'."""
    device = torch.device(device)
    problem = None
    if _ext.HAS_TRITON and (device.type == "cuda" or backend == "triton"):
        problem = _triton().unsupported(dtype, weights)
    return _dispatch.resolve("fourier_mlp", backend, device, triton=True, triton_problem=problem,
                             cpu_problem=cpu.unsupported(weights), reference_cost=REFERENCE_COST)


def auto(x, frequencies, phases, weights, biases, activation, **_) -> str:
    """What backend="auto" runs for an op of the family called with these arguments (`register_kernels`).
    The model is validated first: the rule reads its layer shapes, and a broken call must get the
    kernels' ValueError, not whatever reading them would raise."""
    validate(x, frequencies, phases, weights, biases, activation)
    return resolve_backend("auto", x.device, x.dtype, weights)


def validate(x, frequencies, phases, weights, biases, activation, targets=None, grad=None, pe_cast=False):
    """Shapes, dtypes and devices of one fused-MLP call, with messages naming the offender; returns (B, N).

    Static (runs on fake and meta tensors): every op's kernels *and* fake implementation call it,
    so a direct `torch.ops.symfast.*` call never reaches a kernel with mismatched buffers (layer
    chaining: fan-in = previous fan-out; biases [B, fan_out]; x holding B models and N >= 0 points,
    targets and grad shaped like the output, [B, N] or [B, N, K]). pe_cast: frequencies/phases will still be cast to x's
    dtype and device (the public functions), so theirs are not checked.
    """
    if activation not in reference.ACTIVATIONS:
        raise ValueError(f"unsupported activation {activation!r}; choose from {list(reference.ACTIVATIONS)}")
    if not isinstance(x, torch.Tensor) or x.dtype not in (torch.float32, torch.float64):
        raise ValueError(f"x must be a float32 or float64 tensor, got {getattr(x, 'dtype', type(x))}")
    if not (isinstance(weights, (list, tuple)) and isinstance(biases, (list, tuple))):
        raise ValueError("weights and biases must be lists of tensors")
    if len(weights) < 2 or len(weights) != len(biases):
        raise ValueError(f"need >= 1 hidden layer and one bias per weight: got {len(weights)} weights, "
                         f"{len(biases)} biases")
    for name, t in (("frequencies", frequencies), ("phases", phases), *[(f"weights[{l}]", w) for l, w in
                                                                        enumerate(weights)],
                    *[(f"biases[{l}]", b) for l, b in enumerate(biases)], ("targets", targets), ("grad", grad)):
        if t is not None and not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a tensor, got {type(t).__name__}")
    if x.ndim not in (2, 3):
        raise ValueError(f"x must be [B, N, D] or [N, D] (D = 2 or 3), got {list(x.shape)}")
    input_dim(x, frequencies, "[B, N, D] or [N, D]")
    if phases.shape != frequencies.shape[:1]:
        raise ValueError(f"phases must be [{frequencies.shape[0]}], got {list(phases.shape)}")
    if weights[0].ndim != 3 or weights[0].shape[0] < 1:
        raise ValueError(f"weights[0] must be [B, {2 * frequencies.shape[0]}, H1] with B >= 1, "
                         f"got {list(weights[0].shape)}")
    B = weights[0].shape[0]
    if x.ndim == 3 and x.shape[0] != B:
        raise ValueError(f"x must be [B, N, D] with B = {B} models, or [N, D]; got {list(x.shape)}")
    N = x.shape[-2]
    fan_in = 2 * frequencies.shape[0]
    for l, (w, b) in enumerate(zip(weights, biases)):
        if w.ndim != 3 or w.shape[0] != B or w.shape[1] != fan_in or w.shape[2] < 1:
            raise ValueError(f"weights[{l}] must be [B={B}, {fan_in}, fan_out], got {list(w.shape)} (fan_out >= 1)"
                             + (" (fan-in = the previous layer's fan-out)" if l else " (fan-in = 2m)"))
        if b.shape != (B, w.shape[2]):
            raise ValueError(f"biases[{l}] must be [{B}, {w.shape[2]}], got {list(b.shape)}")
        fan_in = w.shape[2]
    out = output_shape(B, N, weights)
    for name, t in (("targets", targets), ("grad", grad)):
        if t is not None and t.shape != out:
            raise ValueError(f"{name} must be [B={B}, N={N}{'' if len(out) == 2 else f', K={out[2]}'}], got "
                             f"{list(t.shape)} (shaped like the output)")
    named = [("x", x)] + [(f"weights[{l}]", w) for l, w in enumerate(weights)] + \
        [(f"biases[{l}]", b) for l, b in enumerate(biases)] + [("targets", targets), ("grad", grad)]
    pe = [] if pe_cast else [("frequencies", frequencies), ("phases", phases)]
    for name, t in named + pe:
        if t is not None and t.dtype != x.dtype:
            raise ValueError(f"{name} has dtype {t.dtype}, expected {x.dtype} (same as x)")
    if pe_cast:
        _checks.same_device("fourier_mlp", named + [("frequencies", frequencies), ("phases", phases)],
                            allow_cpu=("frequencies", "phases"))
    else:
        _checks.same_device("fourier_mlp", named + pe)
    return B, N


def output_shape(B: int, N: int, weights) -> tuple:
    """[B, N] for one output, [B, N, K] for K > 1."""
    K = weights[-1].shape[2]
    return (B, N) if K == 1 else (B, N, K)


def reference_instead(x, weights, backend: str) -> bool:
    """True when a kernel call has no points (the reference returns the empty result; the kernels
    are never handed empty buffers); ValueError when the kernel cannot run this model."""
    problem = cpu.unsupported(weights) if backend == "cpu" else _triton().unsupported(x.dtype, weights)
    if problem:
        raise ValueError(f"backend={backend!r} does not support this model ({problem}); "
                         f"use backend='reference'")
    return x.shape[-2] == 0


def check_finite(x: torch.Tensor, name: str) -> None:
    # The C++ kernel checks x and targets/gradients as it reads them; the Triton kernels do not.
    if not _checks.all_finite(x):
        raise ValueError(f"{name} contains NaN or Inf values; the fused kernel needs finite inputs")


def check_finite_params(weights, biases, frequencies=None, phases=None) -> None:
    """ValueError naming the first weight, bias, frequency or phase tensor with NaN or Inf values.
    Every backend calls it (with an Inf weight the kernels differ only in where 0 * Inf makes NaN;
    with an Inf frequency or phase the fused kernels' sin/cos would give 0 where the reference
    gives NaN; neither is meaningful)."""
    named = [(f"weights[{i}]", p) for i, p in enumerate(weights)] + [(f"biases[{i}]", p) for i, p in
                                                                     enumerate(biases)]
    named += [(n, t) for n, t in (("frequencies", frequencies), ("phases", phases)) if t is not None]
    for name, p in named:
        if _checks.has_values(p) and not _checks.all_finite(p):
            raise ValueError(f"{name} contains NaN or Inf values")


def _triton():
    from symfast.ops.fourier_mlp import triton as tri
    return tri


def triton_or_reference(op: str, run, reference):
    """run() on the Triton kernels; a model the GPU refuses at launch (`triton.DoesNotFit`: too large
    for its shared memory, known only once compiled for the GPU in hand) runs reference() instead,
    with a one-time RuntimeWarning naming the model."""
    try:
        return run()
    except _triton().DoesNotFit as e:
        _dispatch.warn_once(op, f"{e}; using the PyTorch reference")
        return reference()


def fused_kernels(op: str, check, reference, fused, finite, triton_module=None) -> dict:
    """The "cpu" and "triton" kernels of the family's op `op` (for `_dispatch.register_kernels`), each
    taking the op's arguments. check(*args) validates them and returns (x, weights); a call with no
    points runs reference(*args) (`reference_instead`); fused(impl, *args) runs the op on impl: the
    module `cpu`, or the Triton one, triton_module() (by default triton.py). The Triton kernels do not
    check their inputs as they read them (the C++ kernel does), so the (tensor, name) pairs of
    finite(*args) that are given must be finite first; a model the GPU refuses runs the reference."""
    def cpu_kernel(*args):
        x, weights = check(*args)
        if reference_instead(x, weights, "cpu"):
            return reference(*args)
        return fused(cpu, *args)

    def triton_kernel(*args):
        x, weights = check(*args)
        if reference_instead(x, weights, "triton"):
            return reference(*args)
        for t, name in finite(*args):
            if t is not None:
                check_finite(t, name)
        impl = (triton_module or _triton)()
        return triton_or_reference(op, lambda: fused(impl, *args), lambda: reference(*args))

    return {"cpu": cpu_kernel, "triton": triton_kernel}


def nan_past_overflow(bad: torch.Tensor, tensors) -> list:
    """`tensors` with model b's entries set to NaN wherever bad[b] (bad: [B] bool; each tensor's first
    dimension is the model, except a dx of points shared by all models, [N, D], which is all NaN
    when any model is bad). A model whose values overflowed (a loss, an output or an input gradient
    that is Inf or NaN from finite inputs) has no meaningful gradient, and the kernels and the
    reference would otherwise differ in where they give NaN, +-Inf or 0: the same rule on every
    backend makes them agree (the NaN fuzz, tests/test_nan_fuzz.py)."""
    tensors = list(tensors)
    if not bool(bad.any()):
        return tensors
    out = []
    for t in tensors:
        if t.numel():
            t = t.clone()
            if t.shape[:1] == bad.shape:
                t[bad] = float("nan")
            else:
                t.fill_(float("nan"))
        out.append(t)
    return out


def step_outputs(loss, dw, db, n_points: int) -> list:
    """[loss, *dW, *db] with the overflow rule applied (a model whose loss is not finite: all NaN). With
    no points the loss is NaN by definition (a mean of nothing) and the gradients stay zero."""
    bad = ~torch.isfinite(loss) if n_points else torch.zeros_like(loss, dtype=torch.bool)
    return nan_past_overflow(bad, [loss, *dw, *db])


# Each op's parts, one signature per op: the default implementation (any device) is the
# reference; `_dispatch.register_kernels` routes "cpu" / "triton" to the `fused_kernels`.

def _fwd_check(x, frequencies, phases, weights, biases, activation, backend):
    validate(x, frequencies, phases, weights, biases, activation)
    check_finite_params(weights, biases, frequencies, phases)
    return x, weights


def _fwd_reference(x, frequencies, phases, weights, biases, activation, backend):
    _fwd_check(x, frequencies, phases, weights, biases, activation, backend)
    return reference.fourier_mlp(x, frequencies, phases, weights, biases, activation)


def _fwd_fused(impl, x, frequencies, phases, weights, biases, activation, backend):
    return impl.fourier_mlp_fwd(x, frequencies, phases, weights, biases, activation)


@torch.library.custom_op(f"{_LIB}::fourier_mlp", mutates_args=())
def fourier_mlp_op(x: torch.Tensor, frequencies: torch.Tensor, phases: torch.Tensor,
                   weights: list[torch.Tensor], biases: list[torch.Tensor], activation: str,
                   backend: str) -> torch.Tensor:
    return _fwd_reference(x, frequencies, phases, weights, biases, activation, backend)


_dispatch.register_kernels(fourier_mlp_op, _fwd_reference, fused_kernels(
    "fourier_mlp", _fwd_check, _fwd_reference, _fwd_fused, lambda x, *_: [(x, "x")]), auto)


@fourier_mlp_op.register_fake
def _(x, frequencies, phases, weights, biases, activation, backend):
    _checks.backend("fourier_mlp", backend)
    B, N = validate(x, frequencies, phases, weights, biases, activation)
    return x.new_empty(output_shape(B, N, weights))


def backward_outputs(x, dx, dw, db):
    if dx is None:
        dx = x.new_empty(0)
    elif x.ndim == 2:  # x shared by all models: sum the per-model gradients in model order
        dx = dx.sum(0)
    return [dx, *dw, *db]


def _bwd_check(grad, x, frequencies, phases, weights, biases, activation, backend, need_dx):
    validate(x, frequencies, phases, weights, biases, activation, grad=grad)
    check_finite_params(weights, biases, frequencies, phases)
    return x, weights


def _bwd_reference(grad, x, frequencies, phases, weights, biases, activation, backend, need_dx):
    _bwd_check(grad, x, frequencies, phases, weights, biases, activation, backend, need_dx)
    return backward_outputs(x, *reference.fourier_mlp_vjp(grad, x, frequencies, phases, weights, biases,
                                                      activation, need_dx))


def _bwd_fused(impl, grad, x, frequencies, phases, weights, biases, activation, backend, need_dx):
    return backward_outputs(x, *impl.fourier_mlp_bwd(grad.contiguous(), x, frequencies, phases, weights, biases,
                                                 activation, need_dx))


@torch.library.custom_op(f"{_LIB}::fourier_mlp_backward", mutates_args=())
def fourier_mlp_backward_op(grad: torch.Tensor, x: torch.Tensor, frequencies: torch.Tensor,
                            phases: torch.Tensor, weights: list[torch.Tensor], biases: list[torch.Tensor],
                            activation: str, backend: str, need_dx: bool) -> list[torch.Tensor]:
    return _bwd_reference(grad, x, frequencies, phases, weights, biases, activation, backend, need_dx)


_dispatch.register_kernels(fourier_mlp_backward_op, _bwd_reference, fused_kernels(
    "fourier_mlp_backward", _bwd_check, _bwd_reference, _bwd_fused, lambda grad, *_: [(grad, "the incoming gradient")]),
    auto)


@fourier_mlp_backward_op.register_fake
def _(grad, x, frequencies, phases, weights, biases, activation, backend, need_dx):
    _checks.backend("fourier_mlp_backward", backend)
    validate(x, frequencies, phases, weights, biases, activation, grad=grad)
    dx = torch.empty_like(x) if need_dx else x.new_empty(0)
    return [dx, *[torch.empty_like(w) for w in weights], *[torch.empty_like(b) for b in biases]]


def _bwd_setup_context(ctx, inputs, output):
    grad, x, frequencies, phases, weights, biases, activation, backend, need_dx = inputs
    ctx.save_for_backward(grad, x, frequencies, phases, *weights, *biases)
    ctx.n_layers, ctx.activation, ctx.need_dx = len(weights), activation, need_dx


def _bwd_backward(ctx, grads):
    """Differentiating the first-order gradients (dx, dW, db) once more, through the reference's
    autograd: only reached when someone differentiates dW or db (an eikonal loss reaches the fused
    jet op instead, see `_backward`)."""
    grad, x, frequencies, phases, *wb = ctx.saved_tensors
    L = ctx.n_layers
    outer = torch.is_grad_enabled()
    with torch.enable_grad():
        leaves = [t if (outer and t.requires_grad) else t.detach().requires_grad_(True) for t in (grad, x, *wb)]
        g, xx, ws, bs = leaves[0], leaves[1], leaves[2:2 + L], leaves[2 + L:]
        y = reference.fourier_mlp(xx, frequencies, phases, ws, bs, ctx.activation)
        firsts = ([xx] if ctx.need_dx else []) + ws + bs
        cots = ([grads[0]] if ctx.need_dx else []) + list(grads[1:])
        first = torch.autograd.grad(y, firsts, g, create_graph=True)
        second = torch.autograd.grad(first, leaves, cots, allow_unused=True, create_graph=outer)
    second = [torch.zeros_like(t) if s is None else s for s, t in zip(second, leaves)]
    needs = ctx.needs_input_grad
    return ((second[0] if needs[0] else None), (second[1] if needs[1] else None), None, None,
            second[2:2 + L], second[2 + L:], None, None, None)


fourier_mlp_backward_op.register_autograd(_bwd_backward, setup_context=_bwd_setup_context)


def _setup_context(ctx, inputs, output):
    x, frequencies, phases, weights, biases, activation, backend = inputs
    ctx.save_for_backward(x, frequencies, phases, *weights, *biases)
    ctx.n_layers = len(weights)
    ctx.activation = activation
    ctx.backend = backend


def _backward(ctx, grad):
    x, frequencies, phases, *wb = ctx.saved_tensors
    L = ctx.n_layers
    weights, biases = wb[:L], wb[L:]
    need_dx = bool(ctx.needs_input_grad[0])
    if torch.is_grad_enabled():  # create_graph=True: gradients that can be differentiated again
        return _differentiable_backward(ctx, grad, x, frequencies, phases, list(weights), list(biases), need_dx)
    out = torch.ops.symfast.fourier_mlp_backward(grad, x, frequencies, phases, list(weights), list(biases),
                                                 ctx.activation, ctx.backend, need_dx)
    return (out[0] if need_dx else None), None, None, list(out[1:1 + L]), list(out[1 + L:]), None, None


def _differentiable_backward(ctx, grad, x, frequencies, phases, weights, biases, need_dx):
    """The first-order gradients as differentiable tensors (create_graph=True, e.g. an eikonal loss).
    On the C++ and Triton backends with one output, dx = grad * grad_x f from the fused jet op (whose
    backward is the fused double backward), and dW, db from the fused backward op (differentiated, if
    ever, through the reference); elsewhere all from the reference's autograd."""
    L = len(weights)
    backend = resolve_backend("auto", x.device, x.dtype, weights) if ctx.backend == "auto" else ctx.backend
    if backend in ("cpu", "triton") and weights[-1].shape[2] == 1:
        dx = None
        if need_dx:
            g = torch.ops.symfast.fourier_mlp_jet(x, frequencies, phases, weights, biases, ctx.activation,
                                                  ctx.backend)[1]
            dx = grad[..., None] * g
            dx = dx.sum(0) if x.ndim == 2 else dx
        if not any(t.requires_grad for t in weights + biases):
            return dx, None, None, None, None, None, None
        out = torch.ops.symfast.fourier_mlp_backward(grad, x, frequencies, phases, weights, biases,
                                                     ctx.activation, ctx.backend, False)
        return dx, None, None, list(out[1:1 + L]), list(out[1 + L:]), None, None
    cands = [x, *weights, *biases]
    want = [i for i, t in enumerate(cands) if t.requires_grad and (i > 0 or need_dx)]
    y = reference.fourier_mlp(x, frequencies, phases, weights, biases, ctx.activation)
    gs = torch.autograd.grad(y, [cands[i] for i in want], grad, create_graph=True, allow_unused=True)
    full = [None] * len(cands)
    for i, g in zip(want, gs):
        full[i] = torch.zeros_like(cands[i]) if g is None else g
    return full[0], None, None, full[1:1 + L], full[1 + L:], None, None


fourier_mlp_op.register_autograd(_backward, setup_context=_setup_context)


def _step_check(x, targets, frequencies, phases, weights, biases, activation, backend):
    validate(x, frequencies, phases, weights, biases, activation, targets=targets)
    check_finite_params(weights, biases, frequencies, phases)
    return x, weights


def _step_reference(x, targets, frequencies, phases, weights, biases, activation, backend):
    _step_check(x, targets, frequencies, phases, weights, biases, activation, backend)
    # The hand-written backward, not autograd: autograd does not record inside an op's kernel.
    y = reference.fourier_mlp(x, frequencies, phases, weights, biases, activation)
    _, dw, db = reference.fourier_mlp_vjp(2 * (y - targets) / y[0].numel(), x, frequencies, phases, weights,
                                          biases, activation, need_dx=False)
    return step_outputs(reference.mse_loss(y, targets), dw, db, x.shape[-2])


def _step_fused(impl, x, targets, frequencies, phases, weights, biases, activation, backend):
    return step_outputs(*impl.fourier_mlp_train_step(x, targets, frequencies, phases, weights, biases, activation),
                        x.shape[-2])


@torch.library.custom_op(f"{_LIB}::fourier_mlp_train_step", mutates_args=())
def fourier_mlp_train_step_op(x: torch.Tensor, targets: torch.Tensor, frequencies: torch.Tensor,
                              phases: torch.Tensor, weights: list[torch.Tensor], biases: list[torch.Tensor],
                              activation: str, backend: str) -> list[torch.Tensor]:
    return _step_reference(x, targets, frequencies, phases, weights, biases, activation, backend)


_dispatch.register_kernels(fourier_mlp_train_step_op, _step_reference, fused_kernels(
    "fourier_mlp_train_step", _step_check, _step_reference, _step_fused,
    lambda x, targets, *_: [(x, "x"), (targets, "targets")]), auto)


@fourier_mlp_train_step_op.register_fake
def _(x, targets, frequencies, phases, weights, biases, activation, backend):
    _checks.backend("fourier_mlp_train_step", backend)
    validate(x, frequencies, phases, weights, biases, activation, targets=targets)
    loss = x.new_empty(weights[0].shape[0])
    return [loss, *[torch.empty_like(w) for w in weights], *[torch.empty_like(b) for b in biases]]
