"""The benchmark's JAX peer of the fused RNN training step computes what symfast computes: the same
per-model losses and gradients as the PyTorch reference for the same weights and data, and an
Adam step matching symfast's (`benchmarks/benchmarks/bench_rnn_jax_peer.py`). Skips without jax."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from symfast.ops.rnn_train import reference
from symfast.testing import assert_close

jax = pytest.importorskip("jax")
pytest.importorskip("optax")

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "benchmarks" / "bench_rnn_jax_peer.py"


@pytest.fixture(scope="module")
def peer():
    if not BENCH.exists():
        pytest.skip("benchmarks/ not in this checkout")
    spec = importlib.util.spec_from_file_location("bench_rnn_jax_peer", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _data(B, S, T, H, I, O, seed=0):
    g = torch.Generator().manual_seed(seed)
    W = 0.9 * torch.randn(B, H, H, generator=g) / H ** 0.5
    U = torch.randn(B, H, I, generator=g)
    V = torch.randn(B, O, H, generator=g) / H ** 0.5
    x = torch.randn(B, S, T, I, generator=g)
    y = torch.randn(B, S, T, O, generator=g)
    m = (torch.rand(B, S, T, O, generator=g) < 0.7).float()
    m[0, 0] = 0  # a whole masked-out sequence
    return W, U, V, x, y, m


@pytest.mark.parametrize("B,S,T,H,I,O", [(1, 1, 1, 1, 1, 1), (3, 4, 7, 5, 2, 3)], ids=["ones", "B3-T7-H5"])
def test_jax_step_matches_reference(peer, B, S, T, H, I, O):
    """Losses and gradients of the JAX step (float32) vs the float64 reference's BPTT, same inputs."""
    args = _data(B, S, T, H, I, O)
    loss, dW, dU, dV, _, _ = reference.rnn_train_step(*[t.double() for t in args])
    jl, (jW, jU, jV), _ = peer.jax_step(*args)()
    for name, ref, got in (("loss", loss, jl), ("dW", dW, jW), ("dU", dU, jU), ("dV", dV, jV)):
        assert_close(name, ref.float(), torch.from_numpy(np.asarray(got)))


def test_jax_single_model_loss_is_the_reference_loss(peer):
    """The per-model loss function the peer vmaps, called on one model, is the reference's loss."""
    W, U, V, x, y, m = _data(2, 3, 6, 4, 2, 2, seed=1)
    ref = reference.rnn_train_loss(W.double(), U.double(), V.double(), x.double(), y.double(), m.double())
    for b in range(2):
        got = peer.jax_rnn_loss(tuple(jax.numpy.asarray(t[b].numpy()) for t in (W, U, V)),
                                *[jax.numpy.asarray(t[b].numpy()) for t in (x, y, m)])
        assert_close(f"loss[{b}]", ref[b].float(), torch.tensor(float(got)))


def test_jax_adam_step_matches_symfast_step(peer):
    """One full step on each side (loss, gradients, Adam): parameters after it agree to 5% of lr
    (Adam's first update lr * g / (|g| + eps) amplifies float32 rounding of gradients near eps)."""
    args = _data(2, 4, 5, 6, 3, 2, seed=2)
    err = peer.agreement_of(*args)
    assert err["grad"] < 1e-4 and err["update"] < 0.05, err
