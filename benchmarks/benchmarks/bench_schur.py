"""Recurrent Schur ablations: batched ordered Schur and fused rollouts vs their references.

OrderedSchur*: 256 matrices, n = 64; reference = scipy.linalg.schur + a Python loop of
dtrexc (symfast.ops.ordered_schur.reference), symfast = the C++ batch (csrc/schur.cpp).
Rollout*: 8 variants, H = 64, batch 256, T = 200 (I = 4, O = 3); reference =
torch.nn.RNN looped over the variants (+ readout), symfast = one fused C++ call.
"""
import numpy as np
import torch

import symfast as sf
from symfast.ops.rnn_rollout import rnn_rollout

try:
    from ._timing import ratio
except ImportError:  # run as a script
    from _timing import ratio


def _schur_data(m=256, n=64):
    return np.random.default_rng(0).standard_normal((m, n, n)) / np.sqrt(n)


def _rollout_data(A=8, H=64, B=256, T=200, I=4, O=3):
    g = torch.Generator().manual_seed(0)
    W = 1.1 * torch.randn(A, H, H, generator=g) / H ** 0.5
    U = torch.randn(H, I, generator=g)
    V = torch.randn(O, H, generator=g)
    x = torch.randn(B, T, I, generator=g)
    return W, U, V, x


def _torch_rnn_loop(W, U, V, x):
    rnn = torch.nn.RNN(U.shape[1], W.shape[1], batch_first=True, bias=False)
    rnn.weight_ih_l0.data.copy_(U)

    def run():
        with torch.no_grad():
            out = []
            for a in range(W.shape[0]):
                rnn.weight_hh_l0.data.copy_(W[a])
                h, _ = rnn(x)
                out.append(h @ V.T)
            return torch.stack(out)
    return run


class OrderedSchur:
    params = ["reference", "symfast"]
    param_names = ["impl"]

    def setup(self, impl):
        self.W = _schur_data()
        self.backend = "reference" if impl == "reference" else "cpu"
        sf.ordered_schur(self.W, backend=self.backend)  # warm-up (LAPACK handles, op registration)

    def time_ordered_schur(self, impl):
        sf.ordered_schur(self.W, backend=self.backend)


class OrderedSchurRatio:
    """scipy-loop reference / symfast time for 256 matrices n = 64 (goal >= 4x, 6x)."""

    def setup(self):
        self.W = _schur_data()

    def track_speedup(self):
        return ratio(lambda: sf.ordered_schur(self.W, backend="reference"),
                     lambda: sf.ordered_schur(self.W, backend="cpu"), repeat=3)

    track_speedup.unit = "x"


class Rollout:
    params = ["torch.nn.RNN", "reference", "symfast"]
    param_names = ["impl"]

    def setup(self, impl):
        W, U, V, x = _rollout_data()
        if impl == "torch.nn.RNN":
            self.fn = _torch_rnn_loop(W, U, V, x)
        else:
            backend = "reference" if impl == "reference" else "cpu"
            self.fn = lambda: rnn_rollout(W, U, V, x, backend=backend)
        self.fn()  # warm-up

    def time_rollout(self, impl):
        self.fn()


class RolloutRatio:
    """torch.nn.RNN looped over 8 variants / one fused symfast call (goal >= 3x)."""

    def setup(self):
        self.W, self.U, self.V, self.x = _rollout_data()

    def track_speedup(self):
        W, U, V, x = self.W, self.U, self.V, self.x
        return ratio(_torch_rnn_loop(W, U, V, x), lambda: rnn_rollout(W, U, V, x, backend="cpu"), repeat=5)

    track_speedup.unit = "x"


def _train_step_pair(H=64, B=64, T=100, I=3, O=3):
    """One Adam training step (masked MSE) of TanhRNN and of torch.nn.RNN + a linear readout."""
    from symfast.schur.rnn import TanhRNN
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(B, T, I, generator=g), torch.randn(B, T, O, generator=g)
    m = torch.ones_like(y)
    model = TanhRNN(I, H, O, recurrent="orthogonal", generator=g)
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    rnn = torch.nn.RNN(I, H, nonlinearity="tanh", bias=False, batch_first=True)
    lin = torch.nn.Linear(H, O, bias=False)
    opt_ref = torch.optim.Adam([*rnn.parameters(), *lin.parameters()], 1e-3)

    def step_model():
        loss = (((model(x) - y) ** 2) * m).sum() / m.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    def step_ref():
        loss = (((lin(rnn(x)[0]) - y) ** 2) * m).sum() / m.sum()
        opt_ref.zero_grad(set_to_none=True)
        loss.backward()
        opt_ref.step()
    return step_ref, step_model


class TrainStepRatio:
    """torch.nn.RNN + linear readout / symfast TanhRNN time for one Adam step, H = 64, B = 64,
    T = 100 (goal >= 1: TanhRNN's step is at least as fast)."""

    def setup(self):
        self.ref, self.model = _train_step_pair()

    def track_speedup(self):
        return ratio(self.ref, self.model, repeat=7)

    track_speedup.unit = "x"


if __name__ == "__main__":
    import time
    W = _schur_data()
    t = time.perf_counter(); sf.ordered_schur(W, backend="cpu"); ts = time.perf_counter() - t
    b = OrderedSchurRatio(); b.setup()
    print(f"ordered_schur 256 x n=64: symfast {b.track_speedup():.2f}x faster than scipy + dtrexc loop "
          f"(symfast {1e3 * ts / 256:.2f} ms/matrix, {torch.get_num_threads()} threads)")
    r = RolloutRatio(); r.setup()
    print(f"rollouts 8 x H=64, B=256, T=200: symfast {r.track_speedup():.2f}x faster than torch.nn.RNN looped")
    s = TrainStepRatio(); s.setup()
    print(f"TanhRNN training step H=64, B=64, T=100: {s.track_speedup():.2f}x the speed of torch.nn.RNN + readout")
