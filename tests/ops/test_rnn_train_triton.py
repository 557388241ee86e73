"""Triton RNN training kernel vs the PyTorch reference, on CPU under TRITON_INTERPRET=1 (a
subprocess, so the interpreter setting does not leak into other tests), and on CUDA when present."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from symfast import _ext

SCRIPT = textwrap.dedent("""
    import torch
    from symfast.ops.rnn_train import rnn_train_loss, rnn_train_step
    from symfast.testing import assert_close
    from test_rnn_train import NAMES, _data
    cases = [(2, 5, 3, 13, 2, 3, "full", None), (3, 35, 2, 20, 3, 1, "steps", [20, 7, 16]),
             (1, 3, 1, 5, 1, 2, "none", None)]
    for B, S, T, H, I, O, mask, widths in cases:
        args = _data(B, S, T, H, I, O, torch.float32, mask=mask)
        f64 = [None if a is None else a.double() for a in args]
        ref = rnn_train_step(*f64, widths=widths, need_dx=True, need_dh0=True, backend="reference")
        tri = rnn_train_step(*args, widths=widths, need_dx=True, need_dh0=True, backend="triton")
        for name, r, f in zip(NAMES, ref, tri):
            assert_close(name, r.float(), f, rms=name != "loss")
        assert_close("loss_forward_only", ref.loss.float(), rnn_train_loss(*args, widths=widths, backend="triton"))
        if widths:
            for name, g in (("dW", tri.dW[1, 7:]), ("dW_cols", tri.dW[1][:, 7:]), ("dV", tri.dV[1][:, 7:])):
                assert torch.equal(g, torch.zeros_like(g)), name
    bad = _data(1, 3, 2, 5, 1, 2, torch.float32)
    bad[3][0, 0, 0, 0] = float("nan")
    try:
        rnn_train_step(*bad, backend="triton")
        raise SystemExit("NaN accepted")
    except ValueError as e:
        assert "x contains NaN" in str(e)
    print("ok")
""")


def test_triton_rnn_train_interpreter(tmp_path):
    if not _ext.HAS_TRITON:
        pytest.skip("triton not installed")
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, TRITON_INTERPRET="1",
               PYTHONPATH=os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p))
    r = subprocess.run([sys.executable, "-c", SCRIPT], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout[-2000:] + r.stderr[-4000:]


@pytest.mark.skipif(not torch.cuda.is_available() or not _ext.HAS_TRITON, reason="needs CUDA and triton")
def test_triton_rnn_train_cuda():
    from symfast.ops.rnn_train import rnn_train_step
    from symfast.testing import assert_close
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from test_rnn_train import NAMES, _data  # the CPU test's data helper (same folder)
    args = _data(8, 64, 50, 64, 3, 3, torch.float32, mask="steps")
    widths = [64, 56, 64, 48, 60, 64, 64, 33]
    ref = rnn_train_step(*args, widths=widths, need_dx=True, need_dh0=True, backend="reference")
    out = rnn_train_step(*[None if a is None else a.cuda() for a in args], widths=widths, need_dx=True,
                         need_dh0=True)
    for name, r, f in zip(NAMES, ref, out):
        assert_close(name, r, f.cpu(), rms=name != "loss")
