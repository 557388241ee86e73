"""Single-layer tanh RNN without biases, with four recurrent constructions ("Task-Restricted Symmetries in Recurrent Weight Space", arXiv 2606.18457).

    h_t = tanh(W h_{t-1} + U x_t),  y_t = V h_t,  h_0 = 0

Constructions of W: [H, H]:
    "dense"       free matrix, PyTorch's nn.RNN default init U(-1/sqrt(H), 1/sqrt(H));
    "orthogonal"  free matrix, orthogonal init (the paper's default for the
                  neuroscience tasks);
    "normal"      free matrix, Gaussian init N(0, 1/H);
    "cayley"      W = (I + A)^{-1} (I - A) with A = P - P^T skew-symmetric: orthogonal by
                  construction (so normal, N = 0 in Schur coordinates). For analysis the
                  Cayley map is formed in float64 (`recurrent_weight(torch.float64)`):
                  float32 leaves ||N||/||T|| ~ 4e-6, enough to drive noise swaps.
"""
from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["TanhRNN", "CONSTRUCTIONS"]

CONSTRUCTIONS = ("dense", "orthogonal", "normal", "cayley")


class TanhRNN(nn.Module):
    """Tanh RNN `h_t = tanh(W h_{t-1} + U x_t)`, `y_t = V h_t` (no biases).

    Args:
        n_in, n_hidden, n_out: sizes I, H, O.
        recurrent: one of "dense", "orthogonal", "normal", "cayley".
        generator: optional torch.Generator for a reproducible init.

    Shapes: forward(x [B, T, I]) -> y [B, T, O] (and h [B, T, H] with return_hidden).
    Parameters: U [H, I] (`input_weight`), V [O, H] (`readout`), and W [H, H] (`W`) or the
    Cayley generator P [H, H].
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
        self.input_weight = nn.Parameter((2 * torch.rand(H, n_in, generator=g) - 1) * k)
        self.readout = nn.Parameter((2 * torch.rand(n_out, H, generator=g) - 1) * k)
        if recurrent == "cayley":
            self.P = nn.Parameter(0.1 * k * torch.randn(H, H, generator=g))
        else:
            if recurrent == "dense":
                W = (2 * torch.rand(H, H, generator=g) - 1) * k
            elif recurrent == "orthogonal":
                Q, R = torch.linalg.qr(torch.randn(H, H, generator=g, dtype=torch.float64))
                W = (Q * torch.sign(torch.diagonal(R))).float()
            else:
                W = torch.randn(H, H, generator=g) * k
            self.W = nn.Parameter(W)

    def config(self) -> dict:
        return {"n_in": self.n_in, "n_hidden": self.n_hidden, "n_out": self.n_out, "recurrent": self.recurrent}

    def recurrent_weight(self, dtype: torch.dtype | None = None) -> torch.Tensor:
        """W: [H, H]; the Cayley map is evaluated in `dtype` (float64 for analysis)."""
        if self.recurrent != "cayley":
            return self.W if dtype is None else self.W.to(dtype)
        P = self.P if dtype is None else self.P.to(dtype)
        A = P - P.T
        eye = torch.eye(self.n_hidden, dtype=P.dtype, device=P.device)
        return torch.linalg.solve(eye + A, eye - A)

    def forward(self, x: torch.Tensor, return_hidden: bool = False):
        if x.ndim != 3 or x.shape[-1] != self.n_in:
            raise ValueError(f"x must be [B, T, {self.n_in}], got {list(x.shape)}")
        W = self.recurrent_weight().to(x.dtype)
        ux = x @ self.input_weight.to(x.dtype).T
        h = torch.zeros(x.shape[0], self.n_hidden, dtype=x.dtype, device=x.device)
        hs = []
        for t in range(x.shape[1]):
            h = torch.tanh(h @ W.T + ux[:, t])
            hs.append(h)
        hs = torch.stack(hs, 1)
        y = hs @ self.readout.to(x.dtype).T
        return (y, hs) if return_hidden else y
