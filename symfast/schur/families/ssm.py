"""Linear state-space models, the linear member of the recurrent families.

    h_t = A h_{t-1} + B x_t,  y_t = C h_t,  h_0 = 0

Two structures of A: [H, H]:
    "dense"     a free matrix, init Gaussian rescaled to spectral radius r0 = 0.9 (a stable start: with
                radius > 1 a linear rollout grows geometrically); non-normal in general, so its Schur
                form has coupling blocks.
    "diagonal"  a diagonal complex A (the LRU / S4D family: "Resurrecting Recurrent Neural Networks
                for Long Sequences", arXiv 2303.06349), realised over the reals as H / 2 rotation-scaling
                blocks [[r cos t, -r sin t], [r sin t, r cos t]] on the diagonal, with r = exp(-exp(nu))
                in (0, 1) and t = exp(theta) (LRU's parametrisation: stable for any parameters). Each
                block is a scaled rotation, so A is normal by construction: its real Schur form is
                block-diagonal, the coupling N is zero up to rounding, and every Schur ablation of A is
                a no-op. H must be even.
B: [H, I] and C: [O, H] are real and trained with A. The model defines the interface of
`symfast.schur.ablation.schur_ablation` (`recurrent_weight`, `rollout_recurrent`) and of
`symfast.schur.fixedpoints` (`step`).
"""
from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["LinearSSM", "STRUCTURES", "rotation_blocks"]

STRUCTURES = ("dense", "diagonal")


def rotation_blocks(r: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """Block-diagonal [2K, 2K] with blocks r_k [[cos t_k, -sin t_k], [sin t_k, cos t_k]]; r, t: [K].

    Its eigenvalues are r_k exp(+-i t_k); it is normal (each block commutes with its transpose).
    """
    c, s = r * torch.cos(t), r * torch.sin(t)
    blocks = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)  # [K, 2, 2]
    return torch.block_diag(*blocks.unbind(0)) if len(blocks) else r.new_zeros(0, 0)


class LinearSSM(nn.Module):
    """Linear SSM `h_t = A h_{t-1} + B x_t`, `y_t = C h_t` with a dense or a normal (diagonal complex) A.

    Args:
        n_in, n_hidden, n_out: sizes I, H, O (H even for "diagonal").
        structure: "dense" or "diagonal".
        generator: optional torch.Generator for a reproducible init.
        r_min, r_max: the diagonal A's initial eigenvalue moduli, uniform on the ring r_min <= |lambda| <= r_max
            (LRU's init); max_phase: initial phases uniform in [0, max_phase].
        r0: the dense A's initial spectral radius.

    Shapes: forward(x [B, T, I]) -> y [B, T, O]; step(h [..., H], x [..., I]) -> h [..., H].
    Parameters: dense: `A` [H, H]; diagonal: `nu_log`, `theta_log` [H / 2]; both: `B` [H, I], `C` [O, H].
    """

    def __init__(self, n_in: int, n_hidden: int, n_out: int, structure: str = "dense",
                 generator: torch.Generator | None = None, r_min: float = 0.5, r_max: float = 0.99,
                 max_phase: float = math.pi, r0: float = 0.9):
        super().__init__()
        if structure not in STRUCTURES:
            raise ValueError(f"structure must be one of {STRUCTURES}, got {structure!r}")
        for name, v in (("n_in", n_in), ("n_hidden", n_hidden), ("n_out", n_out)):
            if int(v) < 1:
                raise ValueError(f"{name} must be >= 1, got {v}")
        if structure == "diagonal" and int(n_hidden) % 2:
            raise ValueError(f"a diagonal (complex) A is realised as 2x2 blocks: n_hidden must be even, got {n_hidden}")
        if not 0 < r_min <= r_max < 1:
            raise ValueError(f"need 0 < r_min <= r_max < 1, got r_min={r_min}, r_max={r_max}")
        self.n_in, self.n_hidden, self.n_out, self.structure = int(n_in), int(n_hidden), int(n_out), structure
        H, g = self.n_hidden, generator
        if structure == "dense":
            A = torch.randn(H, H, generator=g, dtype=torch.float64)
            self.A = nn.Parameter((A * (r0 / torch.linalg.eigvals(A).abs().max())).float())
        else:
            K = H // 2
            u = torch.rand(K, generator=g)
            r = torch.sqrt(u * (r_max ** 2 - r_min ** 2) + r_min ** 2)  # uniform on the ring's area
            t = torch.rand(K, generator=g) * max_phase
            self.nu_log = nn.Parameter(torch.log(-torch.log(r)))
            self.theta_log = nn.Parameter(torch.log(t.clamp_min(1e-4)))
        self.B = nn.Parameter(torch.randn(H, self.n_in, generator=g) / math.sqrt(self.n_in))
        self.C = nn.Parameter(torch.randn(self.n_out, H, generator=g) / math.sqrt(H))

    def config(self) -> dict:
        return {"n_in": self.n_in, "n_hidden": self.n_hidden, "n_out": self.n_out, "structure": self.structure}

    @property
    def family(self) -> str:
        return "ssm"

    def recurrent_weight(self, dtype: torch.dtype | None = None) -> torch.Tensor:
        """A: [H, H], the ablated matrix; the diagonal structure's blocks are formed in `dtype`."""
        if self.structure == "dense":
            return self.A if dtype is None else self.A.to(dtype)
        nu, th = (self.nu_log, self.theta_log) if dtype is None else (self.nu_log.to(dtype), self.theta_log.to(dtype))
        return rotation_blocks(torch.exp(-torch.exp(nu)), torch.exp(th))

    def step(self, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """One step A h + B x: h [..., H], x [..., I] -> [..., H] (in h's dtype)."""
        return self.step_recurrent(h, x, self.recurrent_weight(h.dtype))

    def step_recurrent(self, h: torch.Tensor, x: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
        """One step W h + B x with W: [H, H] in place of A (B fixed), in h's dtype."""
        H = self.n_hidden
        if not isinstance(W, torch.Tensor) or tuple(W.shape) != (H, H):
            raise ValueError(f"W must be [{H}, {H}], got "
                             f"{list(W.shape) if isinstance(W, torch.Tensor) else type(W).__name__}")
        return h @ W.to(h.dtype).T + x.to(h.dtype) @ self.B.to(h.dtype).T

    def forward(self, x: torch.Tensor, return_hidden: bool = False):
        y, hs = _rollout(self.recurrent_weight(x.dtype), self.B.to(x.dtype), self.C.to(x.dtype), _check_x(self, x))
        return (y, hs) if return_hidden else y

    def rollout_recurrent(self, W: torch.Tensor, x: torch.Tensor, return_hidden: bool = False):
        """Outputs with A replaced by each of W: [S, H, H], B and C fixed; float64.

        Returns:
            y [S, B, T, O] (and h [S, B, T, H] with return_hidden).
        """
        H = self.n_hidden
        if W.ndim != 3 or tuple(W.shape[1:]) != (H, H):
            raise ValueError(f"W must be [S, {H}, {H}], got {list(W.shape)}")
        with torch.no_grad():
            y, hs = _rollout(W.double(), self.B.double(), self.C.double(), _check_x(self, x).double())
        return (y, hs) if return_hidden else y


def _check_x(model, x: torch.Tensor) -> torch.Tensor:
    if x.ndim != 3 or x.shape[-1] != model.n_in:
        raise ValueError(f"x must be [B, T, {model.n_in}], got {list(x.shape)}")
    if not x.is_floating_point():
        raise ValueError(f"x must be a float tensor, got {x.dtype}")
    return x


def _rollout(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor, x: torch.Tensor):
    """y, h for A: [..., H, H] (a leading variant dim broadcasts against the batch), x [Bt, T, I]."""
    u = x @ B.T  # [Bt, T, H], shared by every variant
    lead = A.shape[:-2]
    h = u.new_zeros(*lead, u.shape[0], A.shape[-1])
    At = A.transpose(-1, -2)
    hs = []
    for t in range(u.shape[1]):
        h = h @ At + u[:, t]
        hs.append(h)
    hs = torch.stack(hs, -2)  # [..., Bt, T, H]
    return hs @ C.T, hs
