"""Triton rollout kernel vs the PyTorch reference, on CPU under TRITON_INTERPRET=1 (subprocess,
so the interpreter setting does not leak into other tests), and on CUDA when present."""
import textwrap

import pytest
import torch

from symfast import _ext

SCRIPT = textwrap.dedent("""
    import torch
    from symfast.ops.rnn_rollout import rnn_rollout
    from symfast.testing import assert_close
    for (A, B, T, H, O) in [(2, 5, 4, 16, 3), (1, 33, 3, 20, 1)]:
        g = torch.Generator().manual_seed(A + B)
        W = 0.9 * torch.randn(A, H, H, generator=g) / H ** 0.5
        U, V = torch.randn(H, 3, generator=g), torch.randn(O, H, generator=g)
        x, h0 = torch.randn(B, T, 3, generator=g), 0.3 * torch.randn(B, H, generator=g)
        y = rnn_rollout(W, U, V, x, h0, backend="triton")
        y_ref = rnn_rollout(W.double(), U.double(), V.double(), x.double(), h0.double(), backend="reference")
        assert_close("y", y_ref.float(), y, rms=True)
    print("ok")
""")


def test_triton_rollout_interpreter(run_interpreted):
    run_interpreted(SCRIPT, expect="ok")


@pytest.mark.skipif(not torch.cuda.is_available() or not _ext.HAS_TRITON, reason="needs CUDA and triton")
def test_triton_rollout_cuda():
    from symfast.ops.rnn_rollout import rnn_rollout
    from symfast.testing import assert_close
    g = torch.Generator().manual_seed(0)
    W = 0.9 * torch.randn(8, 64, 64, generator=g) / 8
    U, V, x = torch.randn(64, 4, generator=g), torch.randn(3, 64, generator=g), torch.randn(64, 50, 4, generator=g)
    y = rnn_rollout(W.cuda(), U.cuda(), V.cuda(), x.cuda())
    assert_close("y", rnn_rollout(W, U, V, x, backend="reference"), y.cpu(), rms=True)
