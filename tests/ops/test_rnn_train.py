"""Fused RNN ensemble training step vs the PyTorch reference (every output and gradient by name),
padded widths, autograd through the op, opcheck, and bad input."""
import pytest
import torch

from symfast import _ext
from symfast.ops.rnn_train import reference, rnn_train_loss, rnn_train_step
from symfast.ops.rnn_train._op import rnn_train_loss_op, rnn_train_step_op
from symfast.testing import assert_close, opcheck

pytestmark = pytest.mark.skipif(not _ext.cpp_available(), reason="symfast._C not built")

NAMES = ("loss", "dW", "dU", "dV", "dx", "dh0")


def _data(B, S, T, H, I, O, dtype, seed=0, mask="full", h0=True):
    g = torch.Generator().manual_seed(seed)
    f64 = dict(generator=g, dtype=torch.float64)
    W = 0.9 * torch.randn(B, H, H, **f64) / H ** 0.5
    U = torch.randn(B, H, I, **f64)
    V = torch.randn(B, O, H, **f64) / H ** 0.5
    x = torch.randn(B, S, T, I, **f64)
    y = torch.randn(B, S, T, O, **f64)
    if mask == "full":
        m = (torch.rand(B, S, T, O, generator=g) < 0.7).double()
    elif mask == "steps":
        m = (torch.rand(B, S, T, generator=g) < 0.5).double()
    elif mask == "zero":  # one model with no unmasked entry at all (denominator clamps to 1)
        m = (torch.rand(B, S, T, O, generator=g) < 0.7).double()
        m[0] = 0
    else:
        m = None
    h = 0.5 * torch.randn(B, S, H, **f64) if h0 else None
    cast = lambda t: None if t is None else t.to(dtype)  # noqa: E731
    return [cast(t) for t in (W, U, V, x, y, m, h)]


def _compare(ref, fast, dtype, tag=""):
    for name, r, f in zip(NAMES, ref, fast):
        if r is None:
            assert f is None, name
            continue
        assert_close(name + tag, r, f, rms=dtype == torch.float32 and name != "loss")


SIZES = [(1, 1, 1, 1, 1, 1), (3, 5, 7, 13, 2, 3), (2, 4, 1, 17, 3, 1), (3, 9, 6, 33, 1, 2), (2, 7, 5, 72, 3, 3)]
SIZE_IDS = ["B1-T1-H1", "B3-H13", "T1-H17", "H33", "H72"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("mask", ["full", "steps", "zero", "none"])
@pytest.mark.parametrize("B,S,T,H,I,O", SIZES, ids=SIZE_IDS)
def test_step_matches_reference(B, S, T, H, I, O, mask, dtype):
    args = _data(B, S, T, H, I, O, dtype, mask=mask)
    ref = rnn_train_step(*args, need_dx=True, need_dh0=True, backend="reference")
    fast = rnn_train_step(*args, need_dx=True, need_dh0=True, backend="cpu")
    _compare(ref, fast, dtype)
    lean = rnn_train_step(*args, backend="cpu")  # no dx / dh0
    assert lean.dx is None and lean.dh0 is None
    _compare(ref[:4], lean[:4], dtype, "_lean")
    args[6] = None  # zero initial state
    _compare(rnn_train_step(*args, backend="reference"), rnn_train_step(*args, backend="cpu"), dtype, "_h0zero")


@pytest.mark.parametrize("mask", ["full", "steps", "none"])
def test_reference_bptt_matches_autograd(mask):
    """The reference's hand-written BPTT against autograd of its own loss (float64)."""
    W, U, V, x, y, m, h0 = _data(3, 4, 6, 11, 2, 3, torch.float64, mask=mask)
    widths = torch.tensor([11, 7, 3])
    leaves = [t.clone().requires_grad_() for t in (W, U, V, x, h0)]
    loss = reference.rnn_train_loss(leaves[0], leaves[1], leaves[2], leaves[3], y, m, leaves[4], widths)
    grads = torch.autograd.grad(loss.sum(), leaves)
    out = reference.rnn_train_step(W, U, V, x, y, m, h0, widths, need_dx=True, need_dh0=True)
    for name, a, b in zip(NAMES, [loss, *grads], out):
        assert_close(name, a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_padded_widths_equal_separate_models(dtype):
    """Models of widths 5, 12, 9 padded to 12 in one call: each equals its own unpadded call;
    padded entries (filled with garbage) are ignored and get exactly zero gradient."""
    widths = [5, 12, 9]
    S, T, I, O, Hm = 4, 6, 2, 3, 12
    parts = [_data(1, S, T, h, I, O, dtype, seed=k) for k, h in enumerate(widths)]
    g = torch.Generator().manual_seed(7)
    W = torch.randn(3, Hm, Hm, generator=g).to(dtype)
    U = torch.randn(3, Hm, I, generator=g).to(dtype)
    V = torch.randn(3, O, Hm, generator=g).to(dtype)
    h0 = torch.randn(3, S, Hm, generator=g).to(dtype)
    for b, (h, p) in enumerate(zip(widths, parts)):
        W[b, :h, :h], U[b, :h], V[b, :, :h], h0[b, :, :h] = p[0][0], p[1][0], p[2][0], p[6][0]
    x, y, m = (torch.cat([p[k] for p in parts]) for k in (3, 4, 5))
    for backend in ("reference", "cpu"):
        out = rnn_train_step(W, U, V, x, y, m, h0, widths=widths, need_dx=True, need_dh0=True, backend=backend)
        for b, (h, p) in enumerate(zip(widths, parts)):
            ref = rnn_train_step(*p, need_dx=True, need_dh0=True, backend="reference")
            sl = [out.loss[b:b + 1], out.dW[b:b + 1, :h, :h], out.dU[b:b + 1, :h], out.dV[b:b + 1, :, :h],
                  out.dx[b:b + 1], out.dh0[b:b + 1, :, :h]]
            _compare(ref, sl, dtype, f"_{backend}_model{b}")
            pad = torch.ones(Hm, dtype=torch.bool)
            pad[:h] = False
            for name, gr in (("dW_rows", out.dW[b, pad]), ("dW_cols", out.dW[b][:, pad]), ("dU", out.dU[b, pad]),
                             ("dV", out.dV[b][:, pad]), ("dh0", out.dh0[b][:, pad])):
                assert torch.equal(gr, torch.zeros_like(gr)), f"{backend} model {b} padded {name} not exactly zero"


def test_zero_padding_without_widths_stays_exactly_zero():
    """Zero-padded weights without `widths`: the padded units' states and gradients stay exactly 0."""
    W, U, V, x, y, m, _ = _data(2, 3, 5, 6, 2, 2, torch.float32)
    pad = lambda t, dims: torch.nn.functional.pad(t, dims)  # noqa: E731
    Wp, Up, Vp = pad(W, (0, 4, 0, 4)), pad(U, (0, 0, 0, 4)), pad(V, (0, 4))
    out = rnn_train_step(Wp, Up, Vp, x, y, m, backend="cpu")
    assert torch.equal(out.dW[:, 6:], torch.zeros(2, 4, 10)) and torch.equal(out.dW[:, :, 6:], torch.zeros(2, 10, 4))
    assert torch.equal(out.dU[:, 6:], torch.zeros(2, 4, 2)) and torch.equal(out.dV[:, :, 6:], torch.zeros(2, 2, 4))
    ref = rnn_train_step(W, U, V, x, y, m, backend="cpu")
    assert_close("loss_padded", ref.loss, out.loss)
    assert_close("dW_padded", ref.dW, out.dW[:, :6, :6], rms=True)


def test_threads_do_not_change_results():
    args = _data(5, 6, 9, 20, 3, 3, torch.float32)
    prev = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = rnn_train_step(*args, need_dx=True, need_dh0=True, backend="cpu")
        torch.set_num_threads(2)
        two = rnn_train_step(*args, need_dx=True, need_dh0=True, backend="cpu")
    finally:
        torch.set_num_threads(prev)
    for name, a, b in zip(NAMES, one, two):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("isa", ["generic", "avx2", "avx512"])
def test_every_isa_matches_reference(isa):
    from symfast.ops.rnn_train import cpu
    try:
        _ext._C.rnn_train_isa(isa)
    except ValueError:
        pytest.skip(f"CPU lacks {isa}")
    W, U, V, x, y, m, h0 = _data(2, 7, 5, 37, 3, 2, torch.float32)
    widths = torch.tensor([37, 20])
    ref = reference.rnn_train_step(W, U, V, x, y, m, h0, widths, True, True)
    fast = cpu.rnn_train(W, U, V, x, y, m, h0, widths, True, True, True, isa=isa)
    _compare(ref, fast, torch.float32, f"_{isa}")
    assert_close(f"loss_only_{isa}", ref[0], cpu.rnn_train(W, U, V, x, y, m, h0, widths, False, isa=isa))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_loss_autograd_matches_reference(dtype):
    """rnn_train_loss inside autograd with a random cotangent: every gradient by name."""
    W, U, V, x, y, m, h0 = _data(3, 4, 6, 10, 2, 3, dtype, mask="steps")
    cot = torch.randn(3, dtype=dtype)
    res = {}
    for backend in ("reference", "cpu"):
        leaves = [t.clone().requires_grad_() for t in (W, U, V, x, h0)]
        loss = rnn_train_loss(leaves[0], leaves[1], leaves[2], leaves[3], y, m, leaves[4], widths=[10, 4, 7],
                              backend=backend)
        res[backend] = [loss, *torch.autograd.grad(loss, leaves, cot)]
    for name, r, f in zip(NAMES, res["reference"], res["cpu"]):
        assert_close(name, r, f, rms=dtype == torch.float32 and name != "loss")


def test_cayley_parametrisation_through_autograd():
    """Gradients reach a Cayley generator P through W = cayley(P) (op inside autograd), and
    W.backward(step.dW) after the non-graph training step gives the same."""
    from symfast.schur.rnn.model import cayley
    W, U, V, x, y, m, h0 = _data(2, 3, 5, 8, 2, 2, torch.float64)
    P = (0.1 * torch.randn(2, 8, 8, dtype=torch.float64)).requires_grad_()
    cay = lambda P: torch.stack([cayley(p) for p in P])  # noqa: E731
    grads = {}
    for backend in ("reference", "cpu"):
        loss = rnn_train_loss(cay(P), U, V, x, y, m, h0, backend=backend)
        grads[backend] = torch.autograd.grad(loss.sum(), P)[0]
    assert_close("dP", grads["reference"], grads["cpu"])
    Wc = cay(P)
    step = rnn_train_step(Wc, U, V, x, y, m, h0, backend="cpu")
    assert_close("dP_via_step", grads["reference"], torch.autograd.grad(Wc, P, step.dW)[0])


def test_double_backward_through_reference():
    W, U, V, x, y, m, h0 = _data(2, 3, 4, 5, 2, 2, torch.float64)
    Wl = W.clone().requires_grad_()
    (gW,) = torch.autograd.grad(rnn_train_loss(Wl, U, V, x, y, m, h0, backend="cpu").sum(), Wl, create_graph=True)
    (hW,) = torch.autograd.grad(gW.pow(2).sum(), Wl)
    Wr = W.clone().requires_grad_()
    (gr,) = torch.autograd.grad(reference.rnn_train_loss(Wr, U, V, x, y, m, h0).sum(), Wr, create_graph=True)
    assert_close("d2W", torch.autograd.grad(gr.pow(2).sum(), Wr)[0], hW)


def test_opcheck_loss_and_step():
    W, U, V, x, y, m, h0 = _data(2, 3, 4, 6, 2, 3, torch.float32)
    widths = torch.tensor([6, 3])
    opcheck(rnn_train_step_op, (W, U, V, x, y, m, h0, widths, True, True, "cpu"))
    opcheck(rnn_train_step_op, (W, U, V, x, y, None, None, None, False, False, "reference"), fast=True)
    leaves = [t.clone().requires_grad_() for t in (W, U, V, x, h0)]
    opcheck(rnn_train_loss_op, (leaves[0], leaves[1], leaves[2], leaves[3], y, m, leaves[4], widths, "cpu"))
    opcheck(rnn_train_loss_op, (W, U, V, x, y, m[..., 0], None, None, "reference"), fast=True)
    opcheck(rnn_train_step_op, (W, U, V, x, y, m, h0, widths, True, True, "auto"), fast=True)
    opcheck(rnn_train_loss_op, (leaves[0], leaves[1], leaves[2], leaves[3], y, m, leaves[4], widths, "auto"),
            fast=True)


def test_torch_compile_training_step():
    W, U, V, x, y, m, h0 = _data(2, 3, 4, 6, 2, 3, torch.float32)

    def f(W, U, V):
        return rnn_train_loss(W, U, V, x, y, m, h0, backend="cpu").sum()

    Wl = W.clone().requires_grad_()
    torch.compile(f, fullgraph=True, backend="eager")(Wl, U, V).backward()
    assert_close("dW_compiled", rnn_train_step(W, U, V, x, y, m, h0, backend="reference").dW, Wl.grad, rms=True)


def test_under_vmap_falls_back_to_reference():
    W, U, V, x, y, m, h0 = _data(2, 3, 4, 6, 2, 3, torch.float64)
    f = lambda W: rnn_train_loss(W, U, V, x, y, m, h0)  # noqa: E731
    jac = torch.func.jacrev(f)(W)
    assert_close("jac_diag", rnn_train_step(W, U, V, x, y, m, h0, backend="reference").dW,
                 torch.stack([jac[b, b] for b in range(2)]))


# ---- bad input ----

def _good():
    return _data(2, 3, 4, 5, 2, 3, torch.float32)


BAD_SHAPES = [
    (0, torch.zeros(2, 5, 4), r"W must be \[B, H, H\]"),
    (1, torch.zeros(2, 5, 3), r"U must be \[B, H, I\] = \[2, 5, 2\]"),
    (2, torch.zeros(2, 3, 4), r"V must be \[B, O, H\]"),
    (3, torch.zeros(3, 3, 4, 2), r"x must be \[B=2, S, T, I\]"),
    (4, torch.zeros(2, 3, 4, 2), r"targets must be \[B, S, T, O\] = \[2, 3, 4, 3\]"),
    (5, torch.zeros(2, 3, 5), r"mask must be \[B, S, T\] or \[B, S, T, O\]"),
    (6, torch.zeros(2, 3, 4), r"h0 must be \[B, S, H\] = \[2, 3, 5\]"),
]


@pytest.mark.parametrize("k,bad,msg", BAD_SHAPES, ids=["W", "U", "V", "x", "targets", "mask", "h0"])
@pytest.mark.parametrize("entry", ["public", "op"])
def test_bad_shapes_raise(k, bad, msg, entry):
    args = _good()
    args[k] = bad
    with pytest.raises(ValueError, match=msg):
        if entry == "public":
            rnn_train_step(*args, backend="cpu")
        else:
            torch.ops.symfast.rnn_train_step(*args, None, False, False, "cpu")


@pytest.mark.parametrize("k,name", [(0, "W"), (1, "U"), (2, "V"), (3, "x"), (4, "targets"), (5, "mask"), (6, "h0")])
def test_nan_raises(k, name):
    args = _good()
    args[k] = args[k].clone()
    args[k].view(-1)[3] = float("nan")
    with pytest.raises(ValueError, match=f"{name} contains NaN or Inf"):
        rnn_train_step(*args, backend="cpu")
    with pytest.raises(ValueError, match=f"{name} contains NaN or Inf"):
        rnn_train_loss(*args, backend="cpu")


def test_bad_dtype_device_widths():
    args = _good()
    with pytest.raises(ValueError, match="U has dtype torch.float64, expected torch.float32"):
        rnn_train_step(args[0], args[1].double(), *args[2:], backend="cpu")
    with pytest.raises(ValueError, match="float32 or float64"):
        rnn_train_step(args[0].half(), *args[1:], backend="cpu")
    with pytest.raises(ValueError, match=r"widths must lie in \[1, H=5\]"):
        rnn_train_step(*args, widths=[5, 6], backend="cpu")
    with pytest.raises(ValueError, match=r"widths must be an int64 tensor \[B=2\]"):
        rnn_train_step(*args, widths=[5, 4, 3], backend="cpu")
    with pytest.raises(ValueError, match="V is on meta"):
        rnn_train_step(args[0], args[1], args[2].to("meta"), *args[3:], backend="reference")
    with pytest.raises(ValueError, match="not differentiable in targets"):
        rnn_train_loss(*args[:4], args[4].requires_grad_(), *args[5:], backend="cpu")


def test_direct_op_calls_cannot_overrun():
    """Direct torch.ops calls: meta tensors give fakes, mixed devices, mismatched or
    non-contiguous buffers and wrong widths raise before the kernel reads anything."""
    W, U, V, x, y, m, h0 = _good()
    out = torch.ops.symfast.rnn_train_step(*(t.to("meta") for t in (W, U, V, x, y, m, h0)), None, True, True, "cpu")
    assert out[0].device.type == "meta" and out[5].shape == (2, 3, 5)
    with pytest.raises((ValueError, RuntimeError)):
        torch.ops.symfast.rnn_train_step(W, U, V.to("meta"), x, y, m, h0, None, False, False, "cpu")
    with pytest.raises(ValueError, match=r"targets must be \[B, S, T, O\] = \[2, 2, 3, 3\]"):
        torch.ops.symfast.rnn_train_step(W, U, V, x[:, :, :2].transpose(1, 2), y, m, h0, None, False, False, "cpu")
    with pytest.raises(ValueError, match="widths"):
        torch.ops.symfast.rnn_train_step(W, U, V, x, y, m, h0, torch.tensor([5, 99]), False, False, "cpu")
    # non-contiguous (right shape) inputs are copied, not misread
    Wt = W.transpose(1, 2).contiguous().transpose(1, 2)
    assert not Wt.is_contiguous()
    a = torch.ops.symfast.rnn_train_step(Wt, U, V, x, y, m, h0, None, False, False, "cpu")
    b = torch.ops.symfast.rnn_train_step(W, U, V, x, y, m, h0, None, False, False, "cpu")
    assert all(torch.equal(p, q) for p, q in zip(a, b))


def test_cpp_boundary_rejects_bad_buffers():
    """The C++ entry point checks shapes, dtypes and contiguity itself (last line of defence)."""
    import numpy as np
    W, U, V, x, y, m, h0 = (t.numpy() for t in _good())
    fn = _ext._C.rnn_train_f32
    LOSS, GRADS = _ext._C.RnnTrainMode.loss, _ext._C.RnnTrainMode.gradients
    loss = np.zeros(2, np.float32)
    with pytest.raises(ValueError, match=r"U must be \[B, H, I\]"):
        fn(W, U[:, :4].copy(), V, x, y, m, h0, None, LOSS, loss, None, None, None, None, None)
    with pytest.raises(TypeError):
        fn(W.astype(np.float64), U, V, x, y, m, h0, None, LOSS, loss, None, None, None, None, None)
    with pytest.raises(TypeError):
        fn(W[:, ::-1], U, V, x, y, m, h0, None, LOSS, loss, None, None, None, None, None)
    with pytest.raises(ValueError, match=r"loss must be \[B\]"):
        fn(W, U, V, x, y, m, h0, None, LOSS, np.zeros(1, np.float32), None, None, None, None, None)
    with pytest.raises(ValueError, match=r"mask must be"):
        fn(W, U, V, x, y, m[:, :, :2].copy(), h0, None, LOSS, loss, None, None, None, None, None)
    with pytest.raises(ValueError, match=r"widths\[1\] = 0"):
        fn(W, U, V, x, y, m, h0, np.array([5, 0]), LOSS, loss, None, None, None, None, None)
    with pytest.raises(TypeError):
        fn(W, U, V, x, y, m, h0, None, GRADS, loss, np.zeros((2, 5, 5), np.float64), None, None, None, None)
    with pytest.raises(TypeError):  # the mode is the exported enum, never a bare int
        fn(W, U, V, x, y, m, h0, None, 7, loss, None, None, None, None, None)


# ---- property test: random sizes, widths and masks (float64, so agreement is to rounding) ----

from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=25, deadline=None)
@given(B=st.integers(1, 4), S=st.integers(1, 9), T=st.integers(1, 7), H=st.integers(1, 40), I=st.integers(1, 4),
       O=st.integers(1, 4), mask=st.sampled_from(["full", "steps", "zero", "none"]), h0=st.booleans(),
       data=st.data())
def test_fuzz_step_matches_reference(B, S, T, H, I, O, mask, h0, data):
    args = _data(B, S, T, H, I, O, torch.float64, seed=B * 1000 + S * 100 + T * 10 + H, mask=mask, h0=h0)
    widths = data.draw(st.none() | st.lists(st.integers(1, H), min_size=B, max_size=B))
    ref = rnn_train_step(*args, widths=widths, need_dx=True, need_dh0=h0, backend="reference")
    fast = rnn_train_step(*args, widths=widths, need_dx=True, need_dh0=h0, backend="cpu")
    _compare(ref, fast, torch.float64)
