"""torch.library registration of the matching ops (works under torch.compile).

Three custom ops, all taking a backend name ("auto" resolved in the kernel by `resolve_backend`, the
public functions' rule; see `symfast.ops._dispatch`);
none is differentiable (inputs that require grad raise):
  symfast::assign(cost [P, n, n] f64, backend) -> [P, n] int64
  symfast::match_gram(gram [P, n, n], a2 [P, n], b2 [P, n], mode, backend) -> [index, scale f64]
  symfast::match_signed_lifts(W [M, H, k], src [G, k], sign [G, k], mode, backend)
      -> [index [M, G, H], scale [M, G, H] f64, rel2 [M, G] f64]
`mode` is the kernel's code (symfast._C.MatchMode, `cpu.mode_code`). Each op's default
implementation is the reference; "cpu" runs the C++ kernel (`_dispatch.register_kernels`).
`match_gram` below is match_gram_op on any tensors: validation, transfer and the `ok` mask.
"""
from __future__ import annotations

import functools

import torch

from symfast.ops import _checks, _dispatch
from symfast.ops.matching import cpu, lifts, reference


def resolve_backend(backend: str) -> str:
    """The backend that runs: "auto" is "cpu" when symfast._C is built, else "reference" (no Triton kernel).
    The one rule for the public functions and the ops' own "auto"."""
    return _dispatch.resolve("matching", backend, "cpu")


def _mode(op: str, mode) -> None:
    n = len(reference.MODES)
    if not isinstance(mode, int) or not 0 <= mode < n:
        raise ValueError(f"{op}: mode must be a MatchMode code in [0, {n}), got {mode!r}")


def _index_range(op: str, name: str, t: torch.Tensor, hi: int) -> None:
    if _checks.has_values(t) and t.numel() and not bool(((t >= 0) & (t < hi)).all()):
        raise ValueError(f"{op}: {name} entries must lie in [0, {hi}), got min {int(t.min())}, max {int(t.max())}")


# ---- assign -----------------------------------------------------------------------------
def validate_assign(cost) -> None:
    """cost: [P, n, n] float64 (static; the fake implementation runs it too)."""
    _checks.tensor("assign", "cost", cost, (torch.float64,))
    if cost.ndim != 3 or cost.shape[1] != cost.shape[2]:
        raise ValueError(f"assign: cost must be [P, n, n] (square problems), got {list(cost.shape)}")


def _assign_reference(cost, backend):
    validate_assign(cost)
    _checks.finite("assign", (("cost", cost),))
    return reference.assign(cost)


def _assign_cpu(cost, backend):
    validate_assign(cost)
    _checks.finite("assign", (("cost", cost),))
    return cpu.assign_fwd(cost)


@torch.library.custom_op("symfast::assign", mutates_args=())
def assign_op(cost: torch.Tensor, backend: str) -> torch.Tensor:
    """cost: [P, n, n] float64 CPU, finite -> [P, n] int64 column per row (an optimal assignment)."""
    return _assign_reference(cost, backend)


# ---- match_gram -------------------------------------------------------------------------
def validate_match_gram(gram, a2, b2, mode) -> None:
    """gram [P, n, n] float32/float64, a2, b2 [P, n] float64, one device, a valid mode (static)."""
    op = "match_gram"
    _checks.tensor(op, "gram", gram)
    _checks.tensor(op, "a2", a2, (torch.float64,))
    _checks.tensor(op, "b2", b2, (torch.float64,))
    if gram.ndim != 3 or gram.shape[1] != gram.shape[2]:
        raise ValueError(f"{op}: gram must be [P, n, n], got {list(gram.shape)}")
    P, n = gram.shape[0], gram.shape[1]
    for name, t in (("a2", a2), ("b2", b2)):
        if t.shape != (P, n):
            raise ValueError(f"{op}: {name} must be [P, n] = [{P}, {n}] (gram's), got {list(t.shape)}")
    _checks.same_device(op, (("gram", gram), ("a2", a2), ("b2", b2)))
    _mode(op, mode)


def _match_gram_values(gram, a2, b2):
    _checks.finite("match_gram", (("gram", gram), ("a2", a2), ("b2", b2)))


def _match_gram_reference(gram, a2, b2, mode, backend):
    validate_match_gram(gram, a2, b2, mode)
    _match_gram_values(gram, a2, b2)
    return reference.match_gram(gram, a2, b2, cpu.mode_name(mode))


def _match_gram_cpu(gram, a2, b2, mode, backend):
    validate_match_gram(gram, a2, b2, mode)
    _match_gram_values(gram, a2, b2)
    return cpu.match_gram_fwd(gram, a2, b2, mode)


@torch.library.custom_op("symfast::match_gram", mutates_args=())
def match_gram_op(gram: torch.Tensor, a2: torch.Tensor, b2: torch.Tensor, mode: int,
                  backend: str) -> list[torch.Tensor]:
    """gram: [P, n, n] float32/float64 CPU, a2, b2: [P, n] float64 -> [index [P, n] int64, scale [P, n] f64]."""
    return _match_gram_reference(gram, a2, b2, mode, backend)


def match_gram(gram: torch.Tensor, a2: torch.Tensor, b2: torch.Tensor, mode: str, backend: str):
    """Assignments from inner products gram [P, n, n], a2 [P, n], b2 [P, n] -> (index, scale, ok).

    ok [P, n]: the matched pair overlaps positively (for "scale": otherwise c = 0 would be optimal
    and the action keeps c = 1). The assignment is discrete: computed on detached inputs.
    """
    code = cpu.mode_code(mode)
    for name, t in (("inner products", gram), ("row norms", a2), ("row norms", b2)):
        if not _checks.all_finite(t):  # both kernels would otherwise assign on Inf/NaN costs
            raise ValueError(f"the weights' {name} are not finite (NaN/Inf weights, or float32 overflow: "
                             "pass float64 weights)")
    gc = gram.detach().cpu()
    if gc.dtype not in (torch.float32, torch.float64):
        gc = gc.double()
    index, scale = match_gram_op(gc.contiguous(), a2.detach().double().cpu().contiguous(),
                                 b2.detach().double().cpu().contiguous(), code,
                                 _dispatch.for_op(backend, resolve_backend(backend)))
    index = index.to(gram.device)
    scale = scale.to(gram.device, gram.dtype)
    g = torch.gather(gram, 2, index[..., None])[..., 0]
    return index, scale, (g > 0) & (torch.gather(b2, 1, index) > 0)


# ---- match_signed_lifts -----------------------------------------------------------------
def validate_signed_lifts(W, src, sign, mode) -> None:
    """W [M, H, k] float32/float64, src [G, k] int64, sign [G, k] float64, one device, a valid mode (static)."""
    op = "match_signed_lifts"
    _checks.tensor(op, "W", W)
    _checks.tensor(op, "src", src, (torch.int64,))
    _checks.tensor(op, "sign", sign, (torch.float64,))
    if W.ndim != 3:
        raise ValueError(f"{op}: W must be [M, H, k], got {list(W.shape)}")
    k = W.shape[2]
    if src.ndim != 2 or src.shape[1] != k:
        raise ValueError(f"{op}: src must be [G, k] with k = W.shape[2] = {k}, got {list(src.shape)}")
    if sign.shape != src.shape:
        raise ValueError(f"{op}: sign must be [G, k] = {list(src.shape)} (src's), got {list(sign.shape)}")
    _checks.same_device(op, (("W", W), ("src", src), ("sign", sign)))
    _mode(op, mode)


def _signed_lifts_values(W, src, sign):
    """Value checks of both backends: a lift is a signed permutation, so each row of src must be a
    permutation of 0..k-1 and each sign +-1 (otherwise the kernel and the reference disagree)."""
    op = "match_signed_lifts"
    _checks.finite(op, (("W", W), ("sign", sign)))
    _index_range(op, "src", src, W.shape[2])
    if _checks.has_values(src) and src.numel():
        k = src.shape[1]
        bad = (src.sort(dim=1).values != torch.arange(k, dtype=src.dtype, device=src.device)).any(dim=1).nonzero()
        if bad.numel():
            g = int(bad[0, 0])
            raise ValueError(f"{op}: src rows must be permutations of 0..{k - 1} (src [G, k] = {list(src.shape)}); "
                             f"row {g} is {src[g].tolist()[:16]}")
    if _checks.has_values(sign) and sign.numel():
        bad = (sign.abs() != 1).nonzero()
        if bad.numel():
            g, t = (int(v) for v in bad[0])
            raise ValueError(f"{op}: sign entries must be +1 or -1 (sign [G, k] = {list(sign.shape)}); "
                             f"sign[{g}, {t}] = {float(sign[g, t])!r}")


def _signed_lifts_reference(W, src, sign, mode, backend):
    """match_gram's reference on the Gram matrices of the lifted rows, 32 models at a time."""
    validate_signed_lifts(W, src, sign, mode)
    _signed_lifts_values(W, src, sign)
    W = W.double()  # the C++ kernel works in float64 whatever W's dtype (float32 squares may overflow)
    G, k = src.shape
    R = torch.zeros(G, k, k, dtype=W.dtype)
    R[torch.arange(G)[:, None], src, torch.arange(k)[None, :]] = sign.to(W.dtype)
    M, H, _ = W.shape
    name = cpu.mode_name(mode)
    match = functools.partial(match_gram, backend="reference")
    rel2, index, scale = [], [], []
    for c0 in range(0, M, 32):
        r, i, sc = lifts.lift_residuals(W[c0:c0 + 32], R, True, name, match)
        rel2.append(r), index.append(i), scale.append(sc)
    return [torch.cat(index).reshape(M, G, H), torch.cat(scale).reshape(M, G, H).to(torch.float64),
            torch.cat(rel2).to(torch.float64)]


def _signed_lifts_cpu(W, src, sign, mode, backend):
    validate_signed_lifts(W, src, sign, mode)
    _signed_lifts_values(W, src, sign)
    return cpu.match_signed_lifts_fwd(W, src, sign, mode)


@torch.library.custom_op("symfast::match_signed_lifts", mutates_args=())
def match_signed_lifts_op(W: torch.Tensor, src: torch.Tensor, sign: torch.Tensor, mode: int,
                          backend: str) -> list[torch.Tensor]:
    """W: [M, H, k] float32/float64 CPU; lifts g as signed column permutations (W R_g)[:, t] =
    sign[g, t] W[:, src[g, t]] (src [G, k] int64, sign [G, k] f64) -> [index [M, G, H] int64,
    scale [M, G, H] f64, rel2 [M, G] f64 squared relative residuals]."""
    return _signed_lifts_reference(W, src, sign, mode, backend)


for _op, _ref, _cpu in ((assign_op, _assign_reference, _assign_cpu),
                        (match_gram_op, _match_gram_reference, _match_gram_cpu),
                        (match_signed_lifts_op, _signed_lifts_reference, _signed_lifts_cpu)):
    _dispatch.register_kernels(_op, _ref, {"cpu": _cpu}, lambda **_: resolve_backend("auto"))
    _dispatch.not_differentiable(_op)


@assign_op.register_fake
def _(cost, backend):
    _checks.backend("assign", backend)
    validate_assign(cost)
    return cost.new_empty(cost.shape[:2], dtype=torch.int64)


@match_gram_op.register_fake
def _(gram, a2, b2, mode, backend):
    _checks.backend("match_gram", backend)
    validate_match_gram(gram, a2, b2, mode)
    return [a2.new_empty(a2.shape, dtype=torch.int64), a2.new_empty(a2.shape, dtype=torch.float64)]


@match_signed_lifts_op.register_fake
def _(W, src, sign, mode, backend):
    _checks.backend("match_signed_lifts", backend)
    validate_signed_lifts(W, src, sign, mode)
    M, H, _ = W.shape
    G = src.shape[0]
    return [W.new_empty(M, G, H, dtype=torch.int64), W.new_empty(M, G, H, dtype=torch.float64),
            W.new_empty(M, G, dtype=torch.float64)]
