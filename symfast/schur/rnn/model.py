"""Single-layer tanh RNN without biases on `torch.nn.RNN`, with four recurrent constructions.

    h_t = tanh(W h_{t-1} + U x_t),  y_t = V h_t,  h_0 = 0

The recurrence is `torch.nn.RNN(nonlinearity="tanh", bias=False)` (its C++ time loop, no
Python loop per step); the readout V is a separate parameter. Constructions of W: [H, H]:
    "dense"       free matrix, PyTorch's nn.RNN default init U(-1/sqrt(H), 1/sqrt(H));
    "orthogonal"  free matrix, orthogonal init (the default for the neuroscience tasks);
    "normal"      free matrix, Gaussian init N(0, 1/H);
    "cayley"      W = (I + A)^{-1} (I - A) with A = P - P^T skew-symmetric, registered on
                  the RNN's `weight_hh_l0` through `torch.nn.utils.parametrize` (P is the
                  trained parameter). Orthogonal by construction, so normal: N = 0 in Schur
                  coordinates. For analysis the map is formed in float64
                  (`recurrent_weight(torch.float64)`): float32 leaves ||N||/||T|| ~ 4e-6,
                  enough to drive noise swaps in the ordered Schur form.
(`torch.nn.utils.parametrizations.orthogonal(orthogonal_map="cayley")` uses a different
generator layout and evaluates in the weight's dtype, hence the small module here.)
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn.utils import parametrize

__all__ = ["TanhRNN", "CONSTRUCTIONS", "cayley"]

CONSTRUCTIONS = ("dense", "orthogonal", "normal", "cayley")


def cayley(P: torch.Tensor) -> torch.Tensor:
    """Orthogonal W = (I + A)^{-1} (I - A), A = P - P^T; P: [H, H] or a batch [..., H, H], in the
    dtype it is given."""
    A = P - P.transpose(-1, -2)
    eye = torch.eye(P.shape[-1], dtype=P.dtype, device=P.device)
    return torch.linalg.solve(eye + A, eye - A)


class _Cayley(nn.Module):
    """Parametrization P -> cayley(P) for `torch.nn.utils.parametrize`."""

    def forward(self, P: torch.Tensor) -> torch.Tensor:
        return cayley(P)


class TanhRNN(nn.Module):
    """Tanh RNN `h_t = tanh(W h_{t-1} + U x_t)`, `y_t = V h_t` (no biases) on torch.nn.RNN.

    Args:
        n_in, n_hidden, n_out: sizes I, H, O.
        recurrent: one of "dense", "orthogonal", "normal", "cayley".
        generator: optional torch.Generator for a reproducible init.

    Shapes: forward(x [B, T, I]) -> y [B, T, O] (and h [B, T, H] with return_hidden).
    Parameters: `rnn` (torch.nn.RNN: U = weight_ih_l0 [H, I], W = weight_hh_l0 [H, H], or for
    Cayley its parametrization's original P [H, H]) and `readout` V [O, H].
    Views: `input_weight` (U), `W`, `P` (Cayley only).
    """

    def __init__(self, n_in: int, n_hidden: int, n_out: int, recurrent: str = "orthogonal",
                 generator: torch.Generator | None = None):
        super().__init__()
        if recurrent not in CONSTRUCTIONS:
            raise ValueError(f"recurrent must be one of {CONSTRUCTIONS}, got {recurrent!r}")
        for name, v in (("n_in", n_in), ("n_hidden", n_hidden), ("n_out", n_out)):
            if int(v) < 1:
                raise ValueError(f"{name} must be >= 1, got {v}")
        self.n_in, self.n_hidden, self.n_out, self.recurrent = int(n_in), int(n_hidden), int(n_out), recurrent
        H = self.n_hidden
        k = 1.0 / math.sqrt(H)
        g = generator
        U = (2 * torch.rand(H, self.n_in, generator=g) - 1) * k
        V = (2 * torch.rand(self.n_out, H, generator=g) - 1) * k
        if recurrent == "cayley":
            W = 0.1 * k * torch.randn(H, H, generator=g)  # the generator P
        elif recurrent == "dense":
            W = (2 * torch.rand(H, H, generator=g) - 1) * k
        elif recurrent == "orthogonal":
            Q, R = torch.linalg.qr(torch.randn(H, H, generator=g, dtype=torch.float64))
            W = (Q * torch.sign(torch.diagonal(R))).float()
        else:
            W = torch.randn(H, H, generator=g) * k
        self.rnn = nn.RNN(self.n_in, H, nonlinearity="tanh", bias=False, batch_first=True)
        with torch.no_grad():
            self.rnn.weight_ih_l0.copy_(U)
            self.rnn.weight_hh_l0.copy_(W)
        if recurrent == "cayley":
            parametrize.register_parametrization(self.rnn, "weight_hh_l0", _Cayley())  # original = P
        self.readout = nn.Parameter(V)

    @property
    def input_weight(self) -> torch.Tensor:
        """U: [H, I]."""
        return self.rnn.weight_ih_l0

    @property
    def W(self) -> torch.Tensor:
        """W: [H, H] in the parameters' dtype (for Cayley, the map evaluated in float32)."""
        return self.rnn.weight_hh_l0

    @property
    def P(self) -> torch.Tensor:
        """The Cayley generator P: [H, H] (Cayley construction only)."""
        if self.recurrent != "cayley":
            raise ValueError(f"P exists only for the cayley construction, not {self.recurrent!r}")
        return self.rnn.parametrizations.weight_hh_l0.original

    def config(self) -> dict:
        return {"n_in": self.n_in, "n_hidden": self.n_hidden, "n_out": self.n_out, "recurrent": self.recurrent}

    def recurrent_weight(self, dtype: torch.dtype | None = None) -> torch.Tensor:
        """W: [H, H]; the Cayley map is evaluated in `dtype` (float64 for analysis)."""
        if self.recurrent != "cayley":
            return self.W if dtype is None else self.W.to(dtype)
        return cayley(self.P if dtype is None else self.P.to(dtype))

    def step(self, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """One step tanh(W h + U x): h [..., H], x [..., I] -> [..., H], in h's dtype (W formed in it)."""
        W = self.recurrent_weight(h.dtype)
        return torch.tanh(h @ W.T + x.to(h.dtype) @ self.input_weight.to(h.dtype).T)

    def forward(self, x: torch.Tensor, return_hidden: bool = False):
        if x.ndim != 3 or x.shape[-1] != self.n_in:
            raise ValueError(f"x must be [B, T, {self.n_in}], got {list(x.shape)}")
        if x.dtype != self.readout.dtype:
            raise ValueError(f"x must be {self.readout.dtype} like the model, got {x.dtype}")
        hs, _ = self.rnn(x)
        y = torch.nn.functional.linear(hs, self.readout)
        return (y, hs) if return_hidden else y
