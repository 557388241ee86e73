"""NaN stays NaN: overflowing finite inputs (one argument scaled by 1e30 in float32, 1e200 in float64) run
through every registered op on the C++ kernel and on the reference. Each pair must refuse the call (a
one-line ValueError) or agree, output by output and element by element, on which values are NaN: a
kernel must never turn an overflow's NaN into a number (a float32 rational tanh gave -1) nor a number
into NaN. Where a kernel rounds an overflowing sum to +-Inf it is the correct float result, and the
references sum float32 in float64 as the kernels do, so they agree (`gram`, `gram_scores`).

The valid calls are the boundary fuzz's (`tests/test_op_boundaries.py`), loaded from that file."""
from __future__ import annotations

import importlib
import importlib.util
import random
from pathlib import Path

import pytest
import torch

from symfast import _ext

_spec = importlib.util.spec_from_file_location("op_boundaries", Path(__file__).with_name("test_op_boundaries.py"))
ob = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ob)
for _mod in ("fourier_features", "fourier_mlp", "gram", "gram_scores", "matching", "ordered_schur", "rnn_rollout",
             "rnn_train"):
    importlib.import_module(f"symfast.ops.{_mod}")

NOT_DATA = {"src", "sign", "perm", "clusters", "mask", "widths", "blocks"}  # labels, indices, masks: not scaled
SCALES = ((torch.float32, 1e30), (torch.float64, 1e200))
ROUNDS = 12


def _overflowing(args: dict, constraints: dict, name: str, dtype, scale: float) -> dict:
    """`args` in `dtype` where the op takes it, with argument `name` scaled by `scale`."""
    out = {}
    for k, v in args.items():
        ok = dtype in constraints.get(k, (None, None, (dtype,)))[2]
        if isinstance(v, list):
            v = [t.to(dtype) for t in v]
            out[k] = [t * scale for t in v] if k == name else v
        elif isinstance(v, torch.Tensor) and v.is_floating_point() and (ok or k not in NOT_DATA):
            v = v.to(dtype) if ok else v
            out[k] = v * scale if k == name else v
        else:
            out[k] = v
    return out


def _run(op, args, backend):
    try:
        return [t for t in ob._tensors(ob._call(op, args, backend)) if t.is_floating_point()]
    except ValueError as e:
        assert str(e).strip() and "\n" not in str(e).strip(), f"{op}[{backend}]: not a one-line error: {e!r}"
        return None


def _disagreements(family: str, rounds: int = ROUNDS) -> tuple[int, list[str]]:
    cases, found = 0, []
    torch.manual_seed(0)  # the builders draw tensors from torch's generator
    for make in ob.FAMILIES[family]:
        op, r = make.__name__, random.Random(f"nan-{make.__name__}")
        for _ in range(rounds):
            args, constraints = make(r)
            data = [k for k, v in args.items() if isinstance(v, list)
                    or (isinstance(v, torch.Tensor) and v.is_floating_point() and k not in NOT_DATA)]
            for dtype, scale in SCALES:
                if not any(dtype in constraints[k][2] for k in constraints if k in data):
                    continue  # a float64-only op is run at its own scale
                name = r.choice(data)
                a = _overflowing(args, constraints, name, dtype, scale)
                cases += 1
                got = {b: _run(op, a, b) for b in ("cpu", "reference")}
                if (got["cpu"] is None) != (got["reference"] is None):
                    refused = "cpu" if got["cpu"] is None else "reference"
                    found.append(f"{op} {dtype} {name} x{scale:g}: only {refused} refused")
                    continue
                if got["cpu"] is None:
                    continue
                for i, (c, ref) in enumerate(zip(got["cpu"], got["reference"])):
                    if c.shape != ref.shape or not torch.equal(c.isnan(), ref.isnan()):
                        diff = c.isnan() != ref.isnan() if c.shape == ref.shape else None
                        what = "shapes differ" if diff is None else \
                            f"kernel {c[diff][:3].tolist()} where the reference has {ref[diff][:3].tolist()}"
                        found.append(f"{op} {dtype} {name} x{scale:g}: output {i}: {what}")
    return cases, found


needs_cpp = pytest.mark.skipif(not _ext.cpp_available(), reason="compares the C++ kernels with the references")


@needs_cpp
@pytest.mark.parametrize("family", ["fourier_features", "fourier_mlp", "fourier_mlp_jet", "gram", "matching",
                                    "ordered_schur", "rnn"])
def test_overflowing_inputs_give_nan_where_the_reference_does(family):
    cases, found = _disagreements(family)
    assert cases >= ROUNDS, cases  # the fuzz ran
    assert not found, "\n".join(found)


@needs_cpp
def test_an_overflowing_training_loss_has_nan_gradients_in_every_backend():
    """A model whose loss overflows to Inf gets NaN gradients (the kernel gave 0 or +-Inf, the reference
    NaN); the other models of the call keep their finite gradients."""
    r = random.Random(3)
    args, _ = ob.rnn_train_step(r)
    while args["W"].shape[0] < 2:
        args, _ = ob.rnn_train_step(r)
    args = {k: (v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v) for k, v in args.items()}
    args["V"] = args["V"].clone()
    args["V"][0] *= 1e200
    for backend in ("cpu", "reference"):
        loss, *grads = ob._tensors(ob._call("rnn_train_step", args, backend))
        assert not torch.isfinite(loss[0]) and torch.isfinite(loss[1:]).all()
        for g in grads:
            if g.numel():
                assert g[0].isnan().all() and torch.isfinite(g[1:]).all()


@needs_cpp
@pytest.mark.parametrize("op", ["fourier_mlp_train_step", "fourier_mlp_eikonal_step"])
def test_an_overflowing_field_has_nan_loss_and_gradients_in_every_backend(op):
    """One model's weights scaled to overflow: that model's loss and every gradient are NaN on the C++
    kernel and on the reference; the other models keep finite values."""
    r = random.Random(5)
    make = getattr(ob, op)
    args, _ = make(r)
    while args["weights"][0].shape[0] < 2 or args["x"].shape[-2] < 2:
        args, _ = make(r)
    args["weights"] = [w.clone() for w in args["weights"]]
    args["weights"][-1][0] *= 1e30 if args["weights"][0].dtype == torch.float32 else 1e200
    args["weights"][0][0] *= 1e30 if args["weights"][0].dtype == torch.float32 else 1e200
    for backend in ("cpu", "reference"):
        loss, *grads = ob._tensors(ob._call(op, args, backend))
        assert loss[0].isnan().all() and torch.isfinite(loss[1:]).all(), (backend, loss)
        for g in grads:
            assert g[0].isnan().all() and torch.isfinite(g[1:]).all(), backend
