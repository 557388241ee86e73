"""Single-layer tanh RNN without biases on `torch.nn.RNN`, with four recurrent constructions.

    h_t = tanh(W h_{t-1} + U x_t),  y_t = V h_t,  h_0 = 0

The recurrence is `torch.nn.RNN(nonlinearity="tanh", bias=False)` (its C++ time loop, no
Python loop per step); the readout V is a separate parameter. Constructions of W: [H, H]:
    "dense"       free matrix, PyTorch's nn.RNN default init U(-1/sqrt(H), 1/sqrt(H));
    "orthogonal"  free matrix, orthogonal init (the default for the neuroscience tasks);
    "normal"      free matrix, Gaussian init N(0, 1/H);
    "cayley"      W = (I + A)^{-1} (I - A) D with A = P - P^T skew-symmetric, registered on
                  the RNN's `weight_hh_l0` through `torch.nn.utils.parametrize` (P is the
                  trained parameter). Orthogonal by construction, so normal: N = 0 in Schur
                  coordinates. For analysis the map is formed in float64
                  (`recurrent_weight(torch.float64)`): float32 leaves ||N||/||T|| ~ 4e-6,
                  enough to drive noise swaps in the ordered Schur form.
                  D = I (`cayley_neg=0`, the default) is the paper's plain Cayley map, which
                  never has the eigenvalue -1 (it would need an infinite A). `cayley_neg=k`
                  is the scaled Cayley transform of "Orthogonal Recurrent Neural Networks with
                  Scaled Cayley Transform" (arXiv 1707.09520): D a fixed diagonal of +-1 with k
                  entries -1, at positions drawn from the model's generator after every other
                  init draw (so k = 0 draws exactly what it drew before), kept as the buffer
                  `d` of the parametrization and never trained. det W = (-1)^k, so an odd k
                  keeps an eigenvalue exactly -1 throughout training; at P = 0, W = D has k.
                  Init of P (`cayley_init`): "identity" (the default) P = 0.1/sqrt(H) randn, so W
                  starts near I with every eigenvalue near +1; "spread" (`spread_generator`) W
                  starts as rotations by angles drawn uniformly in (-SPREAD pi, SPREAD pi) in a
                  random orthonormal basis, so its eigenvalues start spread over the unit circle;
                  "lattice" the same with the angles drawn from the multiples of 2 pi / LATTICE inside
                  (-SPREAD pi, SPREAD pi): the angles a period-LATTICE oscillator needs (the cyclic
                  copy task replays 8 symbols), which converged orthogonal copy models approach.
(`torch.nn.utils.parametrizations.orthogonal(orthogonal_map="cayley")` uses a different
generator layout and evaluates in the weight's dtype, hence the small module here.)
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn.utils import parametrize

__all__ = ["TanhRNN", "CONSTRUCTIONS", "CAYLEY_INITS", "SPREAD", "LATTICE", "cayley", "spread_generator"]

CONSTRUCTIONS = ("dense", "orthogonal", "normal", "cayley")
CAYLEY_INITS = ("identity", "spread", "lattice")
# The "spread" init's widest angle as a fraction of pi: below 1 so that tan(theta / 2), the size of
# the generator A, stays bounded (tan(0.45 pi) = 6.3).
SPREAD = 0.9
# The "lattice" init's angles are multiples of 2 pi / LATTICE: the copy task's replay period.
LATTICE = 8


def cayley(P: torch.Tensor, d: torch.Tensor | None = None) -> torch.Tensor:
    """Orthogonal W = (I + A)^{-1} (I - A) D, A = P - P^T, D = diag(d) (default: I); P: [H, H] or a
    batch [..., H, H], d: [H] of +-1 (the scaled Cayley transform), in P's dtype."""
    A = P - P.transpose(-1, -2)
    eye = torch.eye(P.shape[-1], dtype=P.dtype, device=P.device)
    W = torch.linalg.solve(eye + A, eye - A)
    return W if d is None else W * d.to(P.dtype)  # right-multiplying by D scales column j by d_j


def spread_generator(H: int, generator: torch.Generator | None = None, spread: float = SPREAD,
                     lattice: int | None = None):
    """(P [H, H] float64, theta [H // 2]) with cayley(P) = Q R(theta) Q^T: R block-diagonal with 2 x 2
    rotations [[cos t, -sin t], [sin t, cos t]] by the angles theta ~ U(-spread pi, spread pi) (and a 1
    for odd H), Q orthonormal from the QR of a Gaussian matrix. W's eigenvalues are exp(+-i theta_j)
    (and 1 for odd H). With `lattice` = n, each angle is instead drawn uniformly from the multiples
    k 2 pi / n with |k 2 pi / n| < spread pi.

    Cayley maps the skew block [[0, t], [-t, 0]] to the rotation by 2 arctan(t), so A0 has those
    blocks with t = tan(theta / 2), A = Q A0 Q^T, and P = A / 2 (so P - P^T = A). Draws theta, then Q,
    from `generator`."""
    if int(H) < 1 or not 0 < spread < 1 or (lattice is not None and int(lattice) < 2):
        raise ValueError(f"spread_generator: need H >= 1, 0 < spread < 1 and lattice None or >= 2, got H={H}, "
                         f"spread={spread}, lattice={lattice}")
    g, f64 = generator, torch.float64
    if lattice is None:
        theta = (2 * torch.rand(H // 2, generator=g, dtype=f64) - 1) * spread * math.pi
    else:  # the multiples k 2 pi / n strictly inside (-spread pi, spread pi)
        kmax = math.ceil(spread * lattice / 2) - 1
        k = torch.randint(-kmax, kmax + 1, (H // 2,), generator=g)
        theta = k.to(f64) * (2 * math.pi / lattice)
    t = torch.tan(theta / 2)
    A0 = torch.zeros(H, H, dtype=f64)
    i = torch.arange(0, 2 * (H // 2), 2)
    A0[i, i + 1], A0[i + 1, i] = t, -t
    Q, R = torch.linalg.qr(torch.randn(H, H, generator=g, dtype=f64))
    Q = Q * torch.sign(torch.diagonal(R))
    return Q @ A0 @ Q.T / 2, theta


class _Cayley(nn.Module):
    """Parametrization P -> cayley(P, d) for `torch.nn.utils.parametrize`; d (the diagonal of the
    scaled Cayley transform's D) is a buffer, absent for the plain map."""

    def __init__(self, d: torch.Tensor | None = None):
        super().__init__()
        self.register_buffer("d", d)  # None: no entry in the state dict (plain-map checkpoints unchanged)

    def forward(self, P: torch.Tensor) -> torch.Tensor:
        return cayley(P, self.d)


class TanhRNN(nn.Module):
    """Tanh RNN `h_t = tanh(W h_{t-1} + U x_t)`, `y_t = V h_t` (no biases) on torch.nn.RNN.

    Args:
        n_in, n_hidden, n_out: sizes I, H, O.
        recurrent: one of "dense", "orthogonal", "normal", "cayley".
        generator: optional torch.Generator for a reproducible init.
        cayley_neg: number k of -1 entries of the scaled Cayley map's D, 0..H ("cayley" only;
            0: the plain map).
        cayley_init: "identity" (default: W near I), "spread" (W's eigenvalue angles spread over
            (-SPREAD pi, SPREAD pi), `spread_generator`) or "lattice" (the same on the multiples of
            2 pi / LATTICE); "cayley" only.

    Shapes: forward(x [B, T, I]) -> y [B, T, O] (and h [B, T, H] with return_hidden).
    Parameters: `rnn` (torch.nn.RNN: U = weight_ih_l0 [H, I], W = weight_hh_l0 [H, H], or for
    Cayley its parametrization's original P [H, H]) and `readout` V [O, H].
    Views: `input_weight` (U), `W`, `P` and `cayley_d` (Cayley only).
    """

    def __init__(self, n_in: int, n_hidden: int, n_out: int, recurrent: str = "orthogonal",
                 generator: torch.Generator | None = None, cayley_neg: int = 0, cayley_init: str = "identity"):
        super().__init__()
        if recurrent not in CONSTRUCTIONS:
            raise ValueError(f"recurrent must be one of {CONSTRUCTIONS}, got {recurrent!r}")
        for name, v in (("n_in", n_in), ("n_hidden", n_hidden), ("n_out", n_out)):
            if int(v) < 1:
                raise ValueError(f"{name} must be >= 1, got {v}")
        if isinstance(cayley_neg, bool) or int(cayley_neg) != cayley_neg or not 0 <= cayley_neg <= n_hidden:
            raise ValueError(f"cayley_neg must be an integer in 0..n_hidden ({n_hidden}), got {cayley_neg!r}")
        if cayley_neg and recurrent != "cayley":
            raise ValueError(f"cayley_neg applies to the cayley construction only, not {recurrent!r}")
        if cayley_init not in CAYLEY_INITS:
            raise ValueError(f"cayley_init must be one of {CAYLEY_INITS}, got {cayley_init!r}")
        if cayley_init != "identity" and recurrent != "cayley":
            raise ValueError(f"cayley_init applies to the cayley construction only, not {recurrent!r}")
        self.n_in, self.n_hidden, self.n_out, self.recurrent = int(n_in), int(n_hidden), int(n_out), recurrent
        self.cayley_neg, self.cayley_init = int(cayley_neg), cayley_init
        H = self.n_hidden
        k = 1.0 / math.sqrt(H)
        g = generator
        U = (2 * torch.rand(H, self.n_in, generator=g) - 1) * k
        V = (2 * torch.rand(self.n_out, H, generator=g) - 1) * k
        if recurrent == "cayley" and cayley_init != "identity":
            W = spread_generator(H, g, lattice=LATTICE if cayley_init == "lattice" else None)[0].float()  # P
        elif recurrent == "cayley":
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
            d = None
            if self.cayley_neg:  # drawn last, so the plain map's init is unchanged
                d = torch.ones(H)
                d[torch.randperm(H, generator=g)[:self.cayley_neg]] = -1.0
            parametrize.register_parametrization(self.rnn, "weight_hh_l0", _Cayley(d))  # original = P
        self.readout = nn.Parameter(V)

    @classmethod
    def from_torch(cls, rnn: nn.RNN, readout) -> "TanhRNN":
        """A TanhRNN with the weights of your own `torch.nn.RNN` and linear readout (copied, recurrent
        construction "dense"), so the Schur analysis (`schur_ablation`, `ordered_schur` of
        `recurrent_weight()`) reads a model trained elsewhere exactly.

        Args:
            rnn: nn.RNN(I, H, nonlinearity="tanh", bias=False), one layer, one direction (batch_first
                either way: the weights do not depend on it).
            readout: nn.Linear(H, O) without bias (or with an all-zero bias), or its weight [O, H].

        Returns:
            TanhRNN computing the same h_t = tanh(W h_{t-1} + U x_t), y_t = V h_t.
        """
        if not isinstance(rnn, nn.RNN) or rnn.nonlinearity != "tanh" or rnn.num_layers != 1 or rnn.bidirectional:
            raise ValueError("from_torch takes a one-layer, one-direction nn.RNN(..., nonlinearity='tanh'); got "
                             f"{rnn!r}")
        if rnn.bias and any(bool(getattr(rnn, n).detach().abs().max() > 0) for n in ("bias_ih_l0", "bias_hh_l0")):
            raise ValueError("the study's RNN has no biases (h_t = tanh(W h_{t-1} + U x_t)); this nn.RNN has "
                             "nonzero biases: train with bias=False")
        if rnn.proj_size:
            raise ValueError("nn.RNN with proj_size is not a plain tanh RNN")
        if isinstance(readout, nn.Linear):
            if readout.bias is not None and bool(readout.bias.detach().abs().max() > 0):
                raise ValueError("the readout y_t = V h_t has no bias; this nn.Linear has a nonzero bias")
            V = readout.weight.detach()
        else:
            V = torch.as_tensor(readout)
        H, I = rnn.hidden_size, rnn.input_size
        if V.ndim != 2 or V.shape[1] != H:
            raise ValueError(f"readout must be [O, H] = [O, {H}], got {list(V.shape)}")
        model = cls(I, H, V.shape[0], recurrent="dense")
        with torch.no_grad():
            model.rnn.weight_ih_l0.copy_(rnn.weight_ih_l0)
            model.rnn.weight_hh_l0.copy_(rnn.weight_hh_l0)
            model.readout.copy_(V)
        return model

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

    @property
    def cayley_d(self) -> torch.Tensor | None:
        """The diagonal of the scaled Cayley map's D: [H] of +-1; None for the plain map and the other
        constructions."""
        return self.rnn.parametrizations.weight_hh_l0[0].d if self.recurrent == "cayley" else None

    def config(self) -> dict:
        """The constructor's arguments (cayley_neg only when nonzero and cayley_init only when not
        "identity", so the configs of plain-map, identity-init models are unchanged)."""
        return {"n_in": self.n_in, "n_hidden": self.n_hidden, "n_out": self.n_out, "recurrent": self.recurrent,
                **({"cayley_neg": self.cayley_neg} if self.cayley_neg else {}),
                **({"cayley_init": self.cayley_init} if self.cayley_init != "identity" else {})}

    def recurrent_weight(self, dtype: torch.dtype | None = None) -> torch.Tensor:
        """W: [H, H]; the Cayley map is evaluated in `dtype` (float64 for analysis)."""
        if self.recurrent != "cayley":
            return self.W if dtype is None else self.W.to(dtype)
        return cayley(self.P if dtype is None else self.P.to(dtype), self.cayley_d)

    def step(self, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """One step tanh(W h + U x): h [..., H], x [..., I] -> [..., H], in h's dtype (W formed in it)."""
        return self.step_recurrent(h, x, self.recurrent_weight(h.dtype))

    def step_recurrent(self, h: torch.Tensor, x: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
        """One step tanh(W h + U x) with W: [H, H] in place of the recurrent matrix (U fixed), in h's dtype."""
        W = _check_square(W, self.n_hidden)
        return torch.tanh(h @ W.to(h.dtype).T + x.to(h.dtype) @ self.input_weight.to(h.dtype).T)

    def forward(self, x: torch.Tensor, return_hidden: bool = False):
        if x.ndim != 3 or x.shape[-1] != self.n_in:
            raise ValueError(f"x must be [B, T, {self.n_in}], got {list(x.shape)}")
        if x.dtype != self.readout.dtype:
            raise ValueError(f"x must be {self.readout.dtype} like the model, got {x.dtype}")
        hs, _ = self.rnn(x)
        y = torch.nn.functional.linear(hs, self.readout)
        return (y, hs) if return_hidden else y


def _check_square(W: torch.Tensor, H: int) -> torch.Tensor:
    if not isinstance(W, torch.Tensor) or tuple(W.shape) != (H, H):
        raise ValueError(f"W must be [{H}, {H}], got "
                         f"{list(W.shape) if isinstance(W, torch.Tensor) else type(W).__name__}")
    return W
