"""Boundary fuzzing of every registered op, called directly (`torch.ops.symfast.<op>`).

The public functions validate their arguments, but the ops are public too: torch.compile and
other people's code call them. For every op a valid call is built (random small sizes, seeded)
and then broken one argument at a time, hundreds of ways:
    shape     one constrained dimension changed (batch sizes, fan-ins, lengths, square sides);
    ndim      a dimension added or dropped;
    dtype     a tensor cast to another dtype the op does not accept there;
    device    one tensor on the meta device, the rest real (the dispatcher would send the call
              to the fake implementation, which must refuse instead of returning uninitialised memory);
    values    NaN/Inf in a tensor the op must refuse, an index out of range;
    layers    fourier_mlp's lists shortened, a hidden width changed (layer chaining).
Every broken call must raise ValueError or RuntimeError with a message, on every backend
("cpu", "reference" and "auto", which the op resolves itself before its kernel's checks);
returning a result or dying is a failure. The valid call must succeed, and the same call with
every tensor on the meta device must return meta tensors (the fake path, no kernel).

Each op family runs in its own subprocess (this file run as a script), so a crash (SIGSEGV,
SIGABRT, bus error) is reported as that family's failed test, not a dead pytest run. The
sanitizer job in .ci/run runs this file against an ASan/UBSan build of the extension.
"""
from __future__ import annotations

import math
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import symfast

OPS = torch.ops.symfast
F32, F64, I64 = torch.float32, torch.float64, torch.int64


# ---- valid calls -----------------------------------------------------------------------
# A case: (op name, args dict (ordered as the op's schema), constraints). constraints maps a tensor
# argument's name to (constrained dims, free ndim?, accepted dtypes, values that must be refused?).
# The last is one kind or a tuple of kinds: True (NaN/Inf), "cpu" (NaN/Inf, C++ kernel only),
# "index" (an entry out of range), "permutation" (a row that repeats an index in range),
# "sign" (a finite entry other than +-1), "huge" (finite entries scaled by 1e300).

def _mlp_args(r: random.Random, dtype, need=None):
    B, N, D, m = r.randint(1, 3), r.randint(1, 40), r.choice([2, 3]), r.randint(1, 4)
    widths = [r.randint(1, 9) for _ in range(r.randint(1, 2))] + [1]
    x = torch.randn(B, N, D, dtype=dtype) if r.random() < 0.7 else torch.randn(N, D, dtype=dtype)
    args = dict(x=x)
    if need == "targets":
        args["targets"] = torch.randn(B, N, dtype=dtype)
    args.update(frequencies=torch.randn(m, D, dtype=dtype), phases=torch.randn(m, dtype=dtype))
    fan_in, ws, bs = 2 * m, [], []
    for w in widths:
        ws.append(torch.randn(B, fan_in, w, dtype=dtype) / fan_in ** 0.5)
        bs.append(torch.randn(B, w, dtype=dtype))
        fan_in = w
    args.update(weights=ws, biases=bs, activation=r.choice(["relu", "tanh", "silu", "sine"]))
    return args


def _orthogonal(n, dtype=F64):
    q, _ = torch.linalg.qr(torch.randn(n, n, dtype=F64))
    return q.to(dtype)


def fourier_features(r):
    dtype = r.choice([F32, F64])
    D, m = r.choice([2, 3]), r.randint(1, 5)
    lead = [r.randint(1, 4) for _ in range(r.randint(1, 2))]
    args = dict(x=torch.randn(*lead, D, dtype=dtype), frequencies=torch.randn(m, D, dtype=dtype),
                phases=torch.randn(m, dtype=dtype))
    fl = (F32, F64)
    return args, dict(x=((-1,), True, fl, False), frequencies=((0, 1), False, fl, False),
                      phases=((0,), False, fl, False))


def _mlp_constraints(args, dtype, finite_x=False):
    fl = (dtype,)
    c = {"x": ((0, -1) if args["x"].ndim == 3 else (-1,), True, fl, finite_x),  # [B, N, D] or [N, D]
         "frequencies": ((0, 1), False, fl, True), "phases": ((0,), False, fl, True)}
    for l in range(len(args["weights"])):
        c[f"weights[{l}]"] = ((0, 1, 2), False, fl, True)
        c[f"biases[{l}]"] = ((0, 1), False, fl, True)
    return c


def fourier_mlp(r):
    dtype = r.choice([F32, F64])
    args = _mlp_args(r, dtype)
    return args, _mlp_constraints(args, dtype, finite_x="cpu")


def fourier_mlp_backward(r):
    dtype = r.choice([F32, F64])
    a = _mlp_args(r, dtype)
    B, N = a["weights"][0].shape[0], a["x"].shape[-2]
    args = dict(grad=torch.randn(B, N, dtype=dtype), **a, need_dx=r.random() < 0.5)
    c = _mlp_constraints(a, dtype, finite_x="cpu")
    c["grad"] = ((0, 1), False, (dtype,), "cpu")
    return args, c


def fourier_mlp_train_step(r):
    dtype = r.choice([F32, F64])
    args = _mlp_args(r, dtype, need="targets")
    c = _mlp_constraints(args, dtype, finite_x="cpu")
    c["targets"] = ((0, 1), False, (dtype,), "cpu")
    return args, c


def fourier_mlp_jet(r):
    return fourier_mlp(r)


def fourier_mlp_jet_backward(r):
    dtype = r.choice([F32, F64])
    a = _mlp_args(r, dtype)
    B, N, D = a["weights"][0].shape[0], a["x"].shape[-2], a["x"].shape[-1]
    args = dict(cf=torch.randn(B, N, dtype=dtype), cg=torch.randn(B, N, D, dtype=dtype), **a,
                need_dx=r.random() < 0.5)
    c = _mlp_constraints(a, dtype, finite_x="cpu")
    c["cf"] = ((0, 1), False, (dtype,), "cpu")
    c["cg"] = ((0, 1, 2), False, (dtype,), "cpu")
    return args, c


def fourier_mlp_eikonal_step(r):
    dtype = r.choice([F32, F64])
    a = _mlp_args(r, dtype, need="targets")
    B, N, D = a["weights"][0].shape[0], a["x"].shape[-2], a["x"].shape[-1]
    normals = torch.randn(B, N, D, dtype=dtype) if r.random() < 0.5 else None
    args = dict(x=a.pop("x"), targets=a.pop("targets"), normals=normals, **a, eikonal=r.choice([0.0, 0.1, 1.0]),
                normal=0.0 if normals is None else 0.5)
    c = _mlp_constraints(args, dtype, finite_x="cpu")
    c["targets"] = ((0, 1), False, (dtype,), "cpu")
    if normals is not None:
        c["normals"] = ((0, 1, 2), False, (dtype,), "cpu")
    return args, c


def gram(r):
    args = dict(weights=torch.randn(r.randint(0, 3), r.randint(1, 6), r.randint(1, 9), dtype=r.choice([F32, F64])))
    return args, dict(weights=((), False, (F32, F64), True))


def gram_scores(r):
    dtype = r.choice([F32, F64])
    M, d, E = r.randint(1, 3), r.randint(1, 6), r.randint(1, 4)
    a = torch.randn(M, d, d, dtype=dtype)
    lifts = torch.stack([torch.eye(d, dtype=dtype)[torch.randperm(d)] for _ in range(E)])
    args = dict(phi=a + a.transpose(1, 2), lifts=lifts, normalize=r.random() < 0.5)
    return args, dict(phi=((1, 2), False, (F32, F64), True), lifts=((1, 2), False, (F32, F64), True))


def gram_scores_blockperm(r):
    M, m, E = r.randint(1, 3), r.randint(1, 3), r.randint(1, 4)
    d = 2 * m
    a = torch.randn(M, d, d, dtype=F64)
    perm = torch.stack([torch.randperm(m) for _ in range(E)])
    blocks = torch.eye(2, dtype=F64).expand(E, m, 2, 2).contiguous()
    args = dict(phi=a + a.transpose(1, 2), perm=perm, blocks=blocks, dim=d, normalize=r.random() < 0.5)
    return args, dict(phi=((1, 2), False, (F32, F64), True), perm=((1,), False, (I64,), "index"),
                      blocks=((0, 1, 2, 3), False, (F64,), True))


def assign(r):
    P, n = r.randint(1, 3), r.randint(1, 6)
    return dict(cost=torch.rand(P, n, n, dtype=F64)), dict(cost=((1, 2), False, (F64,), True))


def match_gram(r):
    P, n = r.randint(1, 3), r.randint(1, 6)
    dtype = r.choice([F32, F64])
    args = dict(gram=torch.randn(P, n, n, dtype=dtype), a2=torch.rand(P, n, dtype=F64) + 0.5,
                b2=torch.rand(P, n, dtype=F64) + 0.5, mode=r.randint(0, 2))
    return args, dict(gram=((1, 2), False, (F32, F64), True), a2=((0, 1), False, (F64,), True),
                      b2=((0, 1), False, (F64,), True))


def match_signed_lifts(r):
    M, H, k, G = r.randint(1, 3), r.randint(1, 5), r.randint(1, 5), r.randint(1, 3)
    src = torch.stack([torch.randperm(k) for _ in range(G)])
    sign = torch.where(torch.rand(G, k) < 0.5, -1.0, 1.0).to(F64)
    args = dict(W=torch.randn(M, H, k, dtype=r.choice([F32, F64])), src=src, sign=sign, mode=r.randint(0, 2))
    return args, dict(W=((2,), False, (F32, F64), True), src=((0, 1), False, (I64,), ("index", "permutation")),
                      sign=((0, 1), False, (F64,), (True, "sign")))


def ordered_schur(r):
    M, n = r.randint(1, 3), r.randint(1, 6)
    args = dict(W=torch.randn(M, n, n, dtype=F64), sector_alpha=0.9, tie_tol=1e-9)
    return args, dict(W=((1, 2), False, (F64,), (True, "huge")))


def ordschur(r):
    M, n = r.randint(1, 3), r.randint(1, 6)
    T = torch.triu(torch.randn(M, n, n, dtype=F64))
    U = torch.stack([_orthogonal(n) for _ in range(M)])
    clusters = torch.randint(0, 3, (M, n)).to(F64)
    args = dict(U=U, T=T, clusters=clusters)
    return args, dict(U=((0, 1, 2), False, (F64,), True), T=((0, 1, 2), False, (F64,), (True, "huge")),
                      clusters=((0, 1), False, (F64,), True))


def rnn_rollout(r):
    dtype = r.choice([F32, F64])
    A, H, I, O, B, T = (r.randint(1, 4) for _ in range(6))
    args = dict(W=torch.randn(A, H, H, dtype=dtype) / H, U=torch.randn(H, I, dtype=dtype),
                V=torch.randn(O, H, dtype=dtype), x=torch.randn(B, T, I, dtype=dtype),
                h0=torch.randn(B, H, dtype=dtype), return_hidden=r.random() < 0.5)
    fl = (dtype,)
    return args, dict(W=((1, 2), False, fl, "cpu"), U=((0, 1), False, fl, "cpu"), V=((1,), False, fl, "cpu"),
                      x=((0, 2), False, fl, "cpu"), h0=((0, 1), False, fl, "cpu"))


def _rnn_train_args(r):
    dtype = r.choice([F32, F64])
    B, H, I, O, S, T = (r.randint(1, 3) for _ in range(6))
    args = dict(W=torch.randn(B, H, H, dtype=dtype) / H, U=torch.randn(B, H, I, dtype=dtype),
                V=torch.randn(B, O, H, dtype=dtype), x=torch.randn(B, S, T, I, dtype=dtype),
                targets=torch.randn(B, S, T, O, dtype=dtype), mask=None, h0=torch.randn(B, S, H, dtype=dtype),
                widths=torch.randint(1, H + 1, (B,)))
    fl = (dtype,)
    c = dict(W=((0, 1, 2), False, fl, "cpu"), U=((0, 1, 2), False, fl, "cpu"), V=((0, 2), False, fl, "cpu"),
             x=((0,), False, fl, "cpu"), targets=((0, 1, 2, 3), False, fl, "cpu"), h0=((0, 1, 2), False, fl, "cpu"),
             widths=((0,), False, (I64,), False))
    return args, c


def rnn_train_step(r):
    args, c = _rnn_train_args(r)
    args.update(need_dx=r.random() < 0.5, need_dh0=r.random() < 0.5)
    return args, c


def rnn_train_loss(r):
    return _rnn_train_args(r)


FAMILIES = {
    "fourier_features": [fourier_features],
    "fourier_mlp": [fourier_mlp, fourier_mlp_backward, fourier_mlp_train_step],
    "fourier_mlp_jet": [fourier_mlp_jet, fourier_mlp_jet_backward, fourier_mlp_eikonal_step],
    "gram": [gram, gram_scores, gram_scores_blockperm],
    "matching": [assign, match_gram, match_signed_lifts],
    "ordered_schur": [ordered_schur, ordschur],
    "rnn": [rnn_rollout, rnn_train_step, rnn_train_loss],
}
BACKENDS = ("cpu", "reference", "auto")  # "auto": the op resolves it in its kernel
SHAPE_BREAKS = ("dim", "fewer", "only", "width", "fan-out")  # the C++ kernels' own checks cover these


def run_kernels(seed: int = 0, rounds: int = 4) -> tuple[int, list[str]]:
    """The C++ launchers called directly, past the ops' Python checks: the C++ boundary alone must
    refuse every shape mismatch (fourier_mlp's six modes, ordschur) and rnn_rollout every size past 32 bits."""
    from symfast import _ext
    from symfast.ops.fourier_mlp import cpu as mlp_cpu

    r = random.Random(f"kernels-{seed}")
    C = _ext.require_cpp()
    failures, cases = [], 0

    def expect_error(what, fn):
        nonlocal cases
        cases += 1
        try:
            fn()
        except (ValueError, TypeError, RuntimeError) as e:
            if not str(e).strip():
                failures.append(f"{what}: {type(e).__name__} without a message")
            return
        failures.append(f"{what}: returned")

    # each fourier_mlp mode's launcher, called with a broken call's arguments a and pe (the encoding and layers)
    launchers = {
        fourier_mlp: ("fourier_mlp_fwd", lambda a, pe: mlp_cpu.fourier_mlp_fwd(a["x"], *pe)),
        fourier_mlp_backward: ("fourier_mlp_bwd", lambda a, pe: mlp_cpu.fourier_mlp_bwd(a["grad"], a["x"], *pe,
                                                                                       a["need_dx"])),
        fourier_mlp_train_step: ("fourier_mlp_train_step",
                                 lambda a, pe: mlp_cpu.fourier_mlp_train_step(a["x"], a["targets"], *pe)),
        fourier_mlp_jet: ("fourier_mlp_jet", lambda a, pe: mlp_cpu.fourier_mlp_jet(a["x"], *pe)),
        fourier_mlp_jet_backward: ("fourier_mlp_jet_bwd", lambda a, pe: mlp_cpu.fourier_mlp_jet_bwd(
            a["cf"], a["cg"], a["x"], *pe, a["need_dx"])),
        fourier_mlp_eikonal_step: ("eikonal_train_step", lambda a, pe: mlp_cpu.eikonal_train_step(
            a["x"], a["targets"], *pe, a["eikonal"], a["normals"], a["normal"])),
    }
    for make, (name, launch) in launchers.items():
        for _ in range(rounds):
            args, constraints = make(r)
            for what, bad in broken_calls(r, args, constraints, "cpu"):
                if not any(k in what for k in SHAPE_BREAKS) or "meta" in what:
                    continue
                a = dict(bad)
                pe = (a["frequencies"], a["phases"], a["weights"], a["biases"], a["activation"])
                expect_error(f"{name} {what}", lambda: launch(a, pe))
    big = 2 ** 31 + 5  # sizes past 32 bits, in arrays with no elements (a cast to int would truncate them)
    for dtype, launch in ((np.float32, C.rnn_rollout_f32), (np.float64, C.rnn_rollout_f64)):
        z = lambda *shape: np.zeros(shape, dtype)  # noqa: E731
        for what, W, ux, V, h0 in (("T", z(1, 1, 1), z(0, big, 1), z(1, 1), z(0, 1)),
                                   ("A", z(big, 0, 0), z(1, 1, 0), z(1, 0), z(1, 0)),
                                   ("O", z(1, 0, 0), z(1, 1, 0), z(big, 0), z(1, 0)),
                                   ("B", z(1, 0, 0), z(big, 1, 0), z(1, 0), z(big, 0))):
            cases += 1
            try:
                launch(W, ux, V, h0, False, 1)
            except ValueError as e:
                if "32-bit" not in str(e) or what not in str(e):
                    failures.append(f"rnn_rollout {what} = {big}: the message does not name the size: {e}")
                continue
            except Exception as e:  # noqa: BLE001 - any other type is a failure to report
                failures.append(f"rnn_rollout {what} = {big}: {type(e).__name__}: {e}")
                continue
            failures.append(f"rnn_rollout {what} = {big}: returned (the size was truncated)")
    for _ in range(rounds):
        args, constraints = ordschur(r)
        for what, bad in broken_calls(r, args, constraints, "cpu"):
            if "dim" in what and "dropped" not in what and "extra" not in what:
                expect_error(f"ordschur_f64 {what}", lambda: C.ordschur_f64(
                    *(t.contiguous().numpy() for t in bad.values()), 2))
    return cases, failures


# ---- breaking a valid call ---------------------------------------------------------------
def _get(args, name):
    if "[" in name:
        key, i = name[:-1].split("[")
        return args[key][int(i)]
    return args[name]


def _set(args, name, t):
    args = {k: (list(v) if isinstance(v, list) else v) for k, v in args.items()}
    if "[" in name:
        key, i = name[:-1].split("[")
        args[key][int(i)] = t
    else:
        args[name] = t
    return args


def _resized(t, dim, delta):
    shape = list(t.shape)
    shape[dim] = max(0, shape[dim] + delta)
    if shape[dim] == t.shape[dim]:
        shape[dim] += 1
    if t.dtype == I64:
        return torch.zeros(shape, dtype=I64)
    return torch.randn(shape, dtype=t.dtype)


def broken_calls(r: random.Random, args: dict, constraints: dict, backend: str):
    """(description, args) pairs, each a call the op must refuse."""
    out = []
    for name, (dims, free_ndim, dtypes, values) in constraints.items():
        t = _get(args, name)
        for dim in dims:
            for delta in r.sample([-2, -1, 1, 3], 2):
                out.append((f"{name} dim {dim} {delta:+d}", _set(args, name, _resized(t, dim, delta))))
        if not free_ndim:
            out.append((f"{name} extra dim", _set(args, name, t.unsqueeze(0))))
            if t.ndim > 1:
                out.append((f"{name} dropped dim", _set(args, name, t[..., 0].contiguous())))
        for dt in (F32, F64, I64, torch.int32):
            if dt not in dtypes and dt != t.dtype:
                bad = t.to(dt) if dt.is_floating_point or t.dtype in (I64, torch.int32) else t.round().to(dt)
                out.append((f"{name} as {dt}", _set(args, name, bad)))
        if len(constraints) > 1:  # (a single tensor on meta is a valid all-meta call)
            out.append((f"{name} on meta", _set(args, name, t.to("meta"))))
        kinds = values if isinstance(values, tuple) else (values,)
        if any(k is True for k in kinds) or ("cpu" in kinds and backend == "cpu"):
            if t.numel():
                for v in (float("nan"), float("inf")):
                    bad = t.clone()
                    bad.view(-1)[r.randrange(t.numel())] = v
                    out.append((f"{name} with {v}", _set(args, name, bad)))
        if "index" in kinds and t.numel():
            bad = t.clone()
            bad.view(-1)[r.randrange(t.numel())] = r.choice([-1, 10 ** 6])
            out.append((f"{name} index out of range", _set(args, name, bad)))
        if "permutation" in kinds and t.ndim == 2 and t.shape[1] > 1:
            bad, g = t.clone(), r.randrange(t.shape[0])
            i, j = r.sample(range(t.shape[1]), 2)
            bad[g, i] = bad[g, j]  # in range, but the row is no longer a permutation
            out.append((f"{name} row not a permutation", _set(args, name, bad)))
        if "huge" in kinds and bool(t.ne(0).any()):  # finite, but its arithmetic overflows float64
            out.append((f"{name} scaled by 1e300", _set(args, name, t * 1e300)))
        if "sign" in kinds and t.numel():
            bad = t.clone()
            bad.view(-1)[r.randrange(t.numel())] = r.choice([0.0, 0.5, 2.0, -3.0])
            out.append((f"{name} entry not +-1", _set(args, name, bad)))
    if "biases" in args:  # fourier_mlp: layer lists and chaining
        L = len(args["weights"])
        out.append(("one weight fewer than biases", _set(args, "weights", args["weights"][:-1])))
        out.append(("one bias fewer than weights", _set(args, "biases", args["biases"][:-1])))
        out.append(("output layer only", {**args, "weights": args["weights"][-1:], "biases": args["biases"][-1:]}))
        w = args["weights"][0]
        out.append(("hidden width changed in weights[0] alone",
                    _set(args, "weights[0]", torch.randn(w.shape[0], w.shape[1], w.shape[2] + 3, dtype=w.dtype))))
        out.append(("unknown activation", {**args, "activation": "gelu"}))
        last = args["weights"][L - 1]
        out.append(("output fan-out 0", _set(args, f"weights[{L - 1}]",
                                              torch.randn(last.shape[0], last.shape[1], 0, dtype=last.dtype))))
        if backend == "cpu":  # the reference takes K > 1 outputs, the C++ kernel one
            out.append(("output fan-out 2", {**_set(args, f"weights[{L - 1}]", torch.randn(
                last.shape[0], last.shape[1], 2, dtype=last.dtype)), "biases": [*args["biases"][:-1], torch.randn(
                    last.shape[0], 2, dtype=last.dtype)]}))
    if "eikonal" in args:  # the second-order step's loss weights
        out.append(("eikonal weight negative", {**args, "eikonal": -0.1}))
        out.append(("eikonal weight NaN", {**args, "eikonal": float("nan")}))
        out.append(("normal weight Inf", {**args, "normal": float("inf")}))
        if args["normals"] is None:
            out.append(("normal weight > 0 without normals", {**args, "normal": 1.0}))
    if "mode" in args:
        out.append(("mode out of range", {**args, "mode": 7}))
    if "dim" in args:
        out.append(("dim wrong", {**args, "dim": args["dim"] + 2}))
    if "tie_tol" in args:
        out.append(("tie_tol NaN", {**args, "tie_tol": float("nan")}))
        out.append(("sector_alpha Inf", {**args, "sector_alpha": float("inf")}))
    return out


def _call(op, args, backend):
    fn = getattr(OPS, op)
    return fn(*args.values(), backend) if op not in ("fourier_mlp_backward", "fourier_mlp_jet_backward") else \
        fn(*[v for k, v in args.items() if k != "need_dx"], backend, args["need_dx"])


def _to_meta(v):
    if isinstance(v, torch.Tensor):
        return v.to("meta")
    if isinstance(v, list):
        return [_to_meta(t) for t in v]
    return v


def _tensors(out):
    return out if isinstance(out, (list, tuple)) else [out]


BAD_BACKENDS = ("bogus", "", "CPU", "cpp", "scipy", "reference ", "Auto")
def _backend_failures(op, args) -> list[str]:
    """Each unknown backend name, on real and on meta tensors, must raise a ValueError naming the valid ones."""
    failures = []
    for name in BAD_BACKENDS:
        calls = [("", args), (" (all on meta)", {k: _to_meta(v) for k, v in args.items()})]
        for where, a in calls:
            try:
                _call(op, a, name)
            except ValueError as e:
                if "backend" not in str(e) or "'reference'" not in str(e):
                    failures.append(f"{op}: backend {name!r}{where}: the message does not name the valid ones: {e}")
                continue
            except Exception as e:  # noqa: BLE001 - any other type is a failure to report
                failures.append(f"{op}: backend {name!r}{where}: {type(e).__name__}: {e}")
                continue
            failures.append(f"{op}: backend {name!r}{where}: ran instead of refusing the name")
    return failures


def run_family(family: str, seed: int = 0, rounds: int = 4) -> int:
    """Run every op of a family; print each failure; return the number of cases."""
    import importlib

    from symfast import _ext

    for mod in ("fourier_features", "fourier_mlp", "gram", "gram_scores", "matching", "ordered_schur",
                "rnn_rollout", "rnn_train"):
        importlib.import_module(f"symfast.ops.{mod}")  # registers the ops

    if family == "kernels":
        cases, failures = run_kernels(seed, rounds)
        for f in failures:
            print("FAIL", f)
        print(f"{family}: {cases} broken calls, {len(failures)} failures")
        return len(failures)
    backends = BACKENDS if _ext.cpp_available() else ("reference", "auto")
    r = random.Random(f"{family}-{seed}")
    torch.manual_seed(seed)
    failures, cases = [], 0
    for make in FAMILIES[family]:
        op = make.__name__
        for _ in range(rounds):
            args, constraints = make(r)
            for backend in backends:
                out = _call(op, args, backend)  # the valid call works
                meta = _call(op, {k: _to_meta(v) for k, v in args.items()}, backend)
                if not all(t.device.type == "meta" for t in _tensors(meta)):
                    failures.append(f"{op}[{backend}] all-meta call returned real tensors")
                del out, meta
                if backend == backends[0]:  # backend names an op must refuse (not run the reference silently)
                    cases += 2 * len(BAD_BACKENDS)
                    failures += _backend_failures(op, args)
                for what, bad in broken_calls(r, args, constraints, backend):
                    cases += 1
                    try:
                        res = _call(op, bad, backend)
                    except (ValueError, RuntimeError) as e:
                        if not str(e).strip():
                            failures.append(f"{op}[{backend}] {what}: {type(e).__name__} without a message")
                        continue
                    except Exception as e:  # noqa: BLE001 - any other type is a failure to report
                        failures.append(f"{op}[{backend}] {what}: {type(e).__name__}: {e}")
                        continue
                    shapes = [list(t.shape) for t in _tensors(res)]
                    failures.append(f"{op}[{backend}] {what}: returned a result {shapes}")
    for f in failures:
        print("FAIL", f)
    print(f"{family}: {cases} broken calls, {len(failures)} failures")
    return len(failures)


def _env_importing_this_symfast():
    """The environment for a subprocess that must import the symfast under test: the installed
    package in CI (the source tree there has no compiled _C), the source tree in a dev checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path(symfast.__file__).resolve().parents[1]),
                                                    env.get("PYTHONPATH", "")) if p)
    return env


def _families():
    from symfast import _ext
    return list(FAMILIES) + (["kernels"] if _ext.cpp_available() else [])


@pytest.fixture(scope="module")
def family_reports():
    """family -> (failures or None if the process died in it, its output). One subprocess runs the
    families in turn (importing torch and symfast once); when it dies, the family it was in is
    recorded as crashed and a fresh subprocess runs the rest."""
    env = _env_importing_this_symfast()
    env["PYTHONUNBUFFERED"] = "1"  # FAIL lines before a crash still arrive
    remaining, reports = _families(), {}
    while remaining:
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), *remaining], capture_output=True,
                              text=True, env=env, timeout=600)
        out, current, lines = proc.stdout + proc.stderr, None, {}
        for line in proc.stdout.splitlines():
            if line.startswith("START "):
                current = line.split()[1]
                lines[current] = []
            elif line.startswith("RESULT "):
                _, fam, n = line.split()
                reports[fam] = (int(n), "\n".join(lines[fam]))
                current = None
            elif current:
                lines[current].append(line)
        if current is None and proc.returncode != 0:
            current = remaining[0] if remaining[0] not in reports else None
        if current is not None:  # died inside this family
            reports[current] = (None, f"exit code {proc.returncode} (negative: killed by signal)\n{out[-6000:]}")
        remaining = [f for f in remaining if f not in reports]
    return reports


@pytest.mark.parametrize("family", _families())
def test_direct_op_calls_refuse_broken_arguments(family, family_reports):
    """Every broken direct call raises a clear error; a crash fails the family it happened in."""
    failures, report = family_reports[family]
    assert failures is not None, f"{family}: the process died: {report}"
    assert failures == 0, f"{family}: {failures} broken calls not refused:\n{report[-6000:]}"


# ---- regressions: direct calls that returned silently wrong results ----------------------
import symfast.ops.fourier_mlp  # noqa: E402,F401  (registers the ops for the tests below)
import symfast.ops.matching  # noqa: E402,F401
import symfast.ops.ordered_schur  # noqa: E402,F401
import symfast.ops.rnn_rollout  # noqa: E402,F401
import symfast.ops.rnn_train  # noqa: E402,F401
from symfast import _ext  # noqa: E402

AVAILABLE = ("cpu", "reference") if _ext.cpp_available() else ("reference",)


@pytest.mark.parametrize("backend", AVAILABLE)
def test_rnn_rollout_refuses_sizes_past_32_bits(backend):
    """A T or B above 2^31 (in an input with no elements) was cast to int by the C++ kernel; the
    reference looped over 2^31 empty steps. Both refuse it at the op's boundary, naming the size."""
    z = lambda *shape: torch.zeros(shape)  # noqa: E731
    big = 2 ** 31 + 5
    for what, W, U, V, x, h0 in (("T", z(1, 1, 1), z(1, 1), z(1, 1), z(0, big, 1), z(0, 1)),
                                 ("B", z(1, 0, 0), z(0, 1), z(1, 0), z(big, 0, 1), z(big, 0))):
        with pytest.raises(ValueError, match=f"{what} = {big} exceeds"):
            OPS.rnn_rollout(W, U, V, x, h0, False, backend)


@pytest.mark.parametrize("backend", AVAILABLE)
def test_rnn_rollout_refuses_meta_mixed_with_real(backend):
    """W on meta, the rest on the CPU reached the fake and returned uninitialised CPU memory."""
    args, _ = rnn_rollout(random.Random(1))
    for name in ("W", "x", "h0"):
        bad = {**args, name: args[name].to("meta")}
        with pytest.raises(ValueError, match=rf"rnn_rollout: {name} on meta but"):
            OPS.rnn_rollout(*bad.values(), backend)


@pytest.mark.parametrize("backend", AVAILABLE)
def test_rnn_train_refuses_widths_on_meta(backend):
    args, _ = rnn_train_step(random.Random(2))
    bad = {**args, "widths": args["widths"].to("meta")}
    with pytest.raises(ValueError, match="widths is on meta, expected cpu"):
        OPS.rnn_train_step(*bad.values(), backend)


@pytest.mark.parametrize("backend", AVAILABLE)
@pytest.mark.parametrize("where", ["frequencies", "phases"])
def test_fourier_mlp_refuses_nonfinite_frequencies_and_phases(backend, where):
    """An Inf phase or frequency gave 0.0 from the fused kernel (the reference: NaN)."""
    a = _mlp_args(random.Random(3), F64)
    a[where] = a[where].clone()
    a[where].view(-1)[0] = float("inf")
    pe = (a["frequencies"], a["phases"], a["weights"], a["biases"], a["activation"])
    with pytest.raises(ValueError, match=f"^{where} contains NaN or Inf"):
        OPS.fourier_mlp(a["x"], *pe, backend)
    B, N = a["weights"][0].shape[0], a["x"].shape[-2]
    with pytest.raises(ValueError, match=f"^{where} contains NaN or Inf"):
        OPS.fourier_mlp_train_step(a["x"], torch.zeros(B, N, dtype=F64), *pe, backend)
    with pytest.raises(ValueError, match=f"^{where} contains NaN or Inf"):
        OPS.fourier_mlp_backward(torch.ones(B, N, dtype=F64), a["x"], *pe, backend, False)
    with pytest.raises(ValueError, match=f"^{where} contains NaN or Inf"):
        symfast.fourier_mlp(a["x"], *pe, backend=backend)


@pytest.mark.parametrize("backend", AVAILABLE)
def test_fourier_mlp_backward_refuses_wrong_grad_shape(backend):
    """The backward op returned gradients for a cotangent of the wrong shape."""
    a = _mlp_args(random.Random(4), F32)
    B, N = a["weights"][0].shape[0], a["x"].shape[-2]
    pe = (a["x"], a["frequencies"], a["phases"], a["weights"], a["biases"], a["activation"])
    for shape in ((B, N + 1), (B + 1, N), (N,), (B, N, 1)):
        with pytest.raises(ValueError, match=rf"grad must be \[B={B}, N={N}\], got"):
            OPS.fourier_mlp_backward(torch.ones(shape), *pe, backend, True)


@pytest.mark.parametrize("backend", AVAILABLE)
def test_fourier_mlp_names_the_layer_that_breaks_the_chain(backend):
    """A fan-in that disagrees with the previous width crashed the C++ kernel (munmap_chunk, bus error)."""
    x, f, p = torch.rand(2, 9, 2), torch.randn(8, 2), torch.rand(8)
    ws = [torch.randn(2, 16, 32), torch.randn(2, 16, 4), torch.randn(2, 4, 1)]
    bs = [torch.zeros(2, 32), torch.zeros(2, 4), torch.zeros(2, 1)]
    with pytest.raises(ValueError, match=r"weights\[1\] must be \[B=2, 32, fan_out\], got \[2, 16, 4\]"):
        OPS.fourier_mlp(x, f, p, ws, bs, "relu", backend)
    bs[0] = torch.zeros(1, 32)  # fewer models than the weights
    ws[1] = torch.randn(2, 32, 4)
    with pytest.raises(ValueError, match=r"biases\[0\] must be \[2, 32\], got \[1, 32\]"):
        OPS.fourier_mlp(x, f, p, ws, bs, "relu", backend)


@pytest.mark.skipif(not _ext.cpp_available(), reason="needs symfast._C")
def test_fourier_mlp_kernel_checks_shapes_itself():
    """The C++ boundary alone (past the op's Python checks) names the argument and the shape."""
    from symfast.ops.fourier_mlp import cpu as mlp_cpu

    x, f, p = torch.rand(2, 9, 2), torch.randn(8, 2), torch.rand(8)
    ws = [torch.randn(2, 16, 32), torch.randn(2, 16, 4), torch.randn(2, 4, 1)]
    bs = [torch.zeros(2, 32), torch.zeros(2, 4), torch.zeros(2, 1)]
    with pytest.raises(ValueError, match=r"weights\[1\] must be \[B, 32, H\] with B = 2 .*got \[2, 16, 4\]"):
        mlp_cpu.fourier_mlp_fwd(x, f, p, ws, bs, "relu")
    ws[1] = torch.randn(2, 32, 4)
    with pytest.raises(ValueError, match=r"targets must be \[B, N\] = \[2, 9\], got \[2, 8\]"):
        mlp_cpu.fourier_mlp_train_step(x, torch.zeros(2, 8), f, p, ws, bs, "relu")
    with pytest.raises(ValueError, match=r"x must be \[B, N, D\] with B = 2"):
        mlp_cpu.fourier_mlp_fwd(torch.rand(1, 9, 2), f, p, ws, bs, "relu")


@pytest.mark.parametrize("backend", AVAILABLE)
def test_raw_ordered_schur_and_assign_refuse_nan(backend):
    """The raw ops returned a non-orthogonal U / a permutation for NaN input (the public functions refuse)."""
    W = torch.randn(2, 4, 4, dtype=F64)
    W[1, 2, 3] = float("nan")
    with pytest.raises(ValueError, match="ordered_schur: W contains NaN or Inf"):
        OPS.ordered_schur(W, 0.9, 1e-9, backend)
    cost = torch.rand(2, 3, 3, dtype=F64)
    cost[0, 1, 1] = float("nan")
    with pytest.raises(ValueError, match="assign: cost contains NaN or Inf"):
        OPS.assign(cost, backend)


@pytest.mark.parametrize("backend", AVAILABLE)
def test_schur_fakes_match_kernels_for_noncontiguous_input(backend):
    """opcheck failed on ordered_schur and ordschur for transposed input (fake strides != kernel strides)."""
    W = torch.randn(3, 4, 4, dtype=F64).transpose(1, 2)
    torch.library.opcheck(OPS.ordered_schur.default, (W, 0.9, 1e-9, backend))
    T = torch.triu(torch.randn(2, 4, 4, dtype=F64)).transpose(1, 2).contiguous().transpose(1, 2)
    U = torch.linalg.qr(torch.randn(2, 4, 4, dtype=F64))[0].transpose(1, 2)
    torch.library.opcheck(OPS.ordschur.default, (U, T, torch.randint(0, 3, (2, 4)).to(F64), backend))


def test_ordschur_accepts_a_schur_form_with_real_eigenvalues_only():
    """The Schur-form check failed on a T without 2x2 blocks (numpy reshape of an empty selection)."""
    T = torch.triu(torch.randn(2, 4, 4, dtype=F64))
    res = symfast.ordschur(torch.eye(4, dtype=F64).expand(2, 4, 4), T, torch.tensor([[0, 1, 0, 1]] * 2))
    assert torch.allclose(res.Q @ res.T @ res.Q.transpose(1, 2), T, atol=1e-10)


@pytest.mark.skipif(not _ext.cpp_available(), reason="needs symfast._C")
def test_ordered_schur_with_threads_prints_nothing(tmp_path):
    """n = 300 with 2 threads printed ~1500-1900 "OpenBLAS ... Detect OpenMP Loop" lines per call."""
    script = tmp_path / "flood.py"
    script.write_text("import torch, symfast.ops.ordered_schur\ntorch.set_num_threads(2)\n"
                      "torch.ops.symfast.ordered_schur(torch.randn(1, 300, 300, dtype=torch.float64), 0.9, 1e-9, 'cpu')\n")
    env = _env_importing_this_symfast()
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "OpenBLAS" not in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[:500]


if __name__ == "__main__":
    bad = 0
    for fam in sys.argv[1:]:
        print("START", fam, flush=True)
        n = run_family(fam)
        print("RESULT", fam, n, flush=True)
        bad += n
    sys.exit(1 if bad else 0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_finiteness_check_finds_every_non_finite_value(dtype, bad):
    from symfast.ops import _checks

    for shape, at in (((7,), (6,)), ((3, 4, 5), (2, 3, 4)), ((2, 3), (0, 0))):
        t = torch.linspace(-3, 3, math.prod(shape), dtype=torch.float64).reshape(shape).to(dtype)
        assert _checks.all_finite(t) and _checks.all_finite(-t)
        t[at] = bad
        assert not _checks.all_finite(t), (shape, at)
        with pytest.raises(ValueError, match="op: x contains NaN or Inf values"):
            _checks.finite("op", (("x", t),))
    _checks.finite("op", (("x", torch.empty(0, dtype=dtype)),))  # nothing to check
