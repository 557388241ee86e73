"""Backend resolution for every op, written once.

Backends, the same names for every op:
  "auto"      the fastest kernel that fits the device (below), else the reference;
  "cpu"       the C++ kernel in `symfast._C` (CPU tensors);
  "triton"    the Triton kernel (CUDA, or CPU tensors under TRITON_INTERPRET=1);
  "reference" the plain PyTorch/SciPy implementation (`symfast/ops/<op>/reference.py`).
The old matching names "cpp" and "scipy" still mean "cpu" and "reference" (DeprecationWarning).

"auto" on a CPU tensor picks "cpu" when `_C` is built, on a CUDA tensor "triton" when
triton is installed and the op has a Triton kernel; where a kernel exists but cannot run
(CPU without `_C`, CUDA without triton, or inputs the kernel does not take: `cpu_problem`,
`triton_problem`) it warns once per op and reason and uses the reference.
Under torch.func transforms (vmap, grad, jacrev) every op takes the reference: the
kernels have no batching rules, and the reference is plain PyTorch that functorch
transforms exactly (cost: the reference's speed, see each op's docstring).

Per-device kernels are registered on each `torch.ops.symfast.<op>` with
`register_kernels`: the op's default implementation is the reference, and its CPU/CUDA
kernels route the backend name to the C++ or Triton launcher. The ops take "auto" too and
resolve it inside the kernel with the op's own rule (the one its public function uses), on the
tensors of the call; the public functions pass "auto" through when the caller did not pin a
backend (`for_op`), so a graph traced or exported with torch.export holds "auto", not the name
resolved on the machine that traced it.
"""
from __future__ import annotations

import warnings

import torch

from symfast import _ext
from symfast.ops import _checks

__all__ = ["BACKENDS", "resolve", "for_op", "under_functorch", "refuse_grad", "not_differentiable", "register_kernels"]

BACKENDS = ("auto", "cpu", "triton", "reference")
_ALIASES = {"cpp": "cpu", "scipy": "reference"}
_warned: set[tuple[str, str]] = set()


def warn_once(op: str, msg: str) -> None:
    if (op, msg) not in _warned:
        _warned.add((op, msg))
        warnings.warn(f"symfast.{op}: {msg}", RuntimeWarning, stacklevel=4)


def check_name(backend: str) -> str:
    """The canonical backend name; ValueError for an unknown one."""
    if backend in _ALIASES:
        new = _ALIASES[backend]
        warnings.warn(f"backend={backend!r} is deprecated; use {new!r}", DeprecationWarning, stacklevel=3)
        return new
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {list(BACKENDS)}, got {backend!r}")
    return backend


def under_functorch(*tensors) -> bool:
    """True when any tensor is wrapped by a torch.func transform (vmap, grad, jacrev, ...)."""
    if torch.compiler.is_compiling():  # dynamo traces the plain-tensor path
        return False
    return any(isinstance(t, torch.Tensor) and torch._C._functorch.is_functorch_wrapped_tensor(t)
               for t in tensors)


def resolve(op: str, backend: str, device: torch.device, *, cpu: bool = True, triton: bool = False,
            triton_problem: str | None = None, cpu_problem: str | None = None, reference_cost: str = "") -> str:
    """Resolve `backend` for an op on `device`.

    Args:
        op: op name for messages.
        backend: a name from `BACKENDS` (or a deprecated alias).
        device: the device of the op's main input.
        cpu: the op has a C++ kernel. triton: the op has a Triton kernel.
        triton_problem, cpu_problem: why the Triton / C++ kernel cannot take these inputs (None or
            "": it can). "auto" then runs the reference with a one-time warning; an explicit
            backend raises a ValueError naming backend='reference'.
        reference_cost: how much slower the reference is, for that warning.

    Returns:
        "cpu", "triton" or "reference". Raises ValueError when an explicit backend cannot run.
    """
    backend = check_name(backend)
    dev = torch.device(device)
    if backend == "reference":
        return backend
    if backend == "cpu":
        if not cpu:
            raise ValueError(f"{op} has no C++ kernel; use backend='auto' or 'reference'")
        if dev.type != "cpu":
            raise ValueError(f"backend='cpu' needs CPU tensors, got device {dev}")
        _ext.require_cpp()
        if cpu_problem:
            raise ValueError(f"backend='cpu' does not support these inputs: {cpu_problem}; use backend='reference'")
        return backend
    if backend == "triton":
        if not triton:
            raise ValueError(f"{op} has no Triton kernel; use backend='auto' or 'reference'")
        if not _ext.triton_usable(dev):
            raise ValueError(f"backend='triton' needs triton and a CUDA device (or TRITON_INTERPRET=1 on CPU); "
                             f"got device {dev}")
        if triton_problem:
            raise ValueError(f"backend='triton' does not support these inputs: {triton_problem}; "
                             f"use backend='reference'")
        return backend
    cost = f" ({reference_cost})" if reference_cost else ""
    if dev.type == "cpu" and cpu:
        if not _ext.cpp_available():
            warn_once(op, "symfast._C is not built; using the (slower) PyTorch reference")
        elif cpu_problem:
            warn_once(op, f"the C++ kernel takes {cpu_problem}; using the slower PyTorch reference{cost}")
        else:
            return "cpu"
    elif dev.type == "cuda" and triton:
        if not _ext.HAS_TRITON:
            warn_once(op, "triton is not installed; using the (slower) PyTorch reference on CUDA")
        elif triton_problem:
            warn_once(op, f"Triton kernel unavailable ({triton_problem}); using the slower PyTorch reference{cost}")
        else:
            return "triton"
    return "reference"


def refuse_grad(op: str, **tensors) -> None:
    """Raise when a non-differentiable op gets inputs that require grad (instead of detaching them)."""
    if not torch.is_grad_enabled():
        return
    names = [n for n, t in tensors.items() if isinstance(t, torch.Tensor) and t.requires_grad]
    if names:
        raise RuntimeError(f"{op} is not differentiable, but {', '.join(names)} require(s) grad; "
                           f"pass .detach() explicitly")


def register_kernels(op, reference, kernels: dict, auto) -> None:
    """Register per-device kernels on a custom op whose default implementation is the reference.

    Args:
        op: a `torch.library.custom_op` with an argument named `backend`.
        reference: the op's reference implementation (same signature).
        kernels: backend name ("cpu", "triton") -> implementation with the op's signature.
            The CPU kernel serves "cpu" and, under TRITON_INTERPRET=1, "triton"; the CUDA
            kernel serves "triton"; "reference" runs the reference. Any other name raises a
            ValueError naming the valid ones (`_checks.backend`; the fake implementations call it too).
        auto: the op's rule for "auto", the one its public function resolves with: called with the
            op's arguments by name (`auto(**args)`), returns "cpu", "triton" or "reference". It runs
            here, inside the kernel, on the tensors of the call, so a traced or exported graph keeps
            backend="auto" and picks the kernel of whatever device it later runs on.
    """
    names = [a.name for a in op._opoverload._schema.arguments]
    at = names.index("backend")
    name = op._opoverload._schema.name.split("::")[-1]
    valid = tuple(b for b in _checks.RESOLVED if b == "reference" or b in kernels)

    def route(*args):
        _checks.backend(name, args[at], ("auto", *valid))  # an unknown name must not run the reference silently
        if args[at] == "auto":
            resolved = auto(**dict(zip(names, args)))
            _checks.backend(name, resolved, valid)  # a rule naming a kernel this op lacks is a bug, not a fallback
            args = (*args[:at], resolved, *args[at + 1:])
        return kernels.get(args[at], reference)(*args)

    op.register_kernel("cpu")(route)
    if "triton" in kernels:
        op.register_kernel("cuda")(route)


def for_op(requested: str, resolved: str) -> str:
    """The backend name a public function hands its op: "auto" when the caller did not pin one (the
    op resolves it per call, so traced and exported graphs stay device-independent), else the
    resolved name (`resolve` has already refused one that cannot run)."""
    return "auto" if requested == "auto" else resolved


def not_differentiable(op) -> None:
    """Make a custom op raise when called on inputs that require grad (no detached result)."""
    name = op._qualname if hasattr(op, "_qualname") else str(op)

    def setup_context(ctx, inputs, output):
        raise RuntimeError(f"{name} is not differentiable, but an input requires grad; pass .detach() "
                           f"explicitly")

    def backward(ctx, *grads):  # never reached: setup_context raises first
        raise RuntimeError(f"{name} is not differentiable")

    op.register_autograd(backward, setup_context=setup_context)
