"""GRU and LSTM members of the recurrent families, on torch.nn.GRU / torch.nn.LSTM, readout y_t = V h_t.

Which matrix is ablated: torch stacks the recurrent weights of all gates in `weight_hh_l0`
([3H, H] for the GRU, gates r, z, n; [4H, H] for the LSTM, gates i, f, g, o). A Schur ablation
acts on one gate's [H, H] slice, every other weight (the other gates, the input weights, the
biases, the readout) fixed:
    GRU   "n" (default): W_hn, the candidate state's recurrent matrix, inside
          n_t = tanh(W_in x_t + b_in + r_t * (W_hn h_{t-1} + b_hn)), h_t = (1 - z_t) n_t + z_t h_{t-1};
          "r", "z": the reset and update gates' W_hr, W_hz.
    LSTM  "g" (default): W_hg, the cell input's recurrent matrix, inside
          g_t = tanh(W_ig x_t + b_ig + W_hg h_{t-1} + b_hg), c_t = f_t c_{t-1} + i_t g_t, h_t = o_t tanh(c_t);
          "i", "f", "o": the input, forget and output gates' recurrent matrices.
`model.at_gate(gate)` is the same model seen with another gate ablated (parameters shared).
Training and `forward` run torch's own GRU / LSTM; the ablation's rollouts and `step` (the map
the fixed-point search linearises) run the same equations written out here, in float64, for
many variants at once; the two agree to rounding (tested).
"""
from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["GatedRNN", "GATES", "DEFAULT_GATE"]

GATES = {"gru": ("r", "z", "n"), "lstm": ("i", "f", "g", "o")}
DEFAULT_GATE = {"gru": "n", "lstm": "g"}


class GatedRNN(nn.Module):
    """A one-layer GRU or LSTM with a linear readout, with one gate's recurrent slice marked for ablation.

    Args:
        kind: "gru" or "lstm".
        n_in, n_hidden, n_out: sizes I, H, O.
        bias: with torch's biases (b_ih, b_hh) or without.
        gate: the ablated gate (default: the GRU's candidate "n", the LSTM's cell input "g").
        generator: optional torch.Generator for a reproducible init (torch's U(-1/sqrt(H), 1/sqrt(H))).

    Shapes: forward(x [B, T, I]) -> y [B, T, O]; the state of `step` is h [..., H] (GRU) or
    [h, c] concatenated, [..., 2H] (LSTM).
    """

    def __init__(self, kind: str, n_in: int, n_hidden: int, n_out: int, bias: bool = False, gate: str | None = None,
                 generator: torch.Generator | None = None):
        super().__init__()
        if kind not in GATES:
            raise ValueError(f"kind must be one of {tuple(GATES)}, got {kind!r}")
        for name, v in (("n_in", n_in), ("n_hidden", n_hidden), ("n_out", n_out)):
            if int(v) < 1:
                raise ValueError(f"{name} must be >= 1, got {v}")
        self.kind, self.n_in, self.n_hidden, self.n_out, self.bias = kind, int(n_in), int(n_hidden), int(n_out), bool(bias)
        self.gate = _check_gate(kind, DEFAULT_GATE[kind] if gate is None else gate)
        H = self.n_hidden
        cls = nn.GRU if kind == "gru" else nn.LSTM
        self.rnn = cls(self.n_in, H, bias=self.bias, batch_first=True)
        k = 1.0 / math.sqrt(H)
        with torch.no_grad():
            for p in self.rnn.parameters():
                p.copy_((2 * torch.rand(p.shape, generator=generator) - 1) * k)
        self.readout = nn.Parameter((2 * torch.rand(self.n_out, H, generator=generator) - 1) * k)

    @classmethod
    def from_torch(cls, rnn, readout, gate: str | None = None) -> "GatedRNN":
        """A GatedRNN with the weights of your own one-layer `torch.nn.GRU` or `torch.nn.LSTM` and linear
        readout (copied, biases included), for the Schur analysis of one gate's recurrent slice.

        Args:
            rnn: nn.GRU or nn.LSTM, one layer, one direction, no projection (batch_first either way).
            readout: nn.Linear(H, O) without bias (or with an all-zero bias), or its weight [O, H].
            gate: the gate to ablate (default: the GRU's candidate "n", the LSTM's cell input "g").

        Returns:
            GatedRNN computing the same y_t = V h_t.
        """
        kind = "gru" if isinstance(rnn, nn.GRU) else "lstm" if isinstance(rnn, nn.LSTM) else None
        if kind is None or rnn.num_layers != 1 or rnn.bidirectional or getattr(rnn, "proj_size", 0):
            raise ValueError(f"from_torch takes a one-layer, one-direction nn.GRU or nn.LSTM without projection; "
                             f"got {rnn!r}")
        if isinstance(readout, nn.Linear):
            if readout.bias is not None and bool(readout.bias.detach().abs().max() > 0):
                raise ValueError("the readout y_t = V h_t has no bias; this nn.Linear has a nonzero bias")
            V = readout.weight.detach()
        else:
            V = torch.as_tensor(readout).detach()
        H = rnn.hidden_size
        if V.ndim != 2 or V.shape[1] != H:
            raise ValueError(f"readout must be [O, H] = [O, {H}], got {list(V.shape)}")
        model = cls(kind, rnn.input_size, H, V.shape[0], bias=rnn.bias, gate=gate)
        with torch.no_grad():
            for name, p in model.rnn.named_parameters():
                p.copy_(getattr(rnn, name))
            model.readout.copy_(V)
        return model

    @property
    def family(self) -> str:
        return self.kind

    @property
    def state_size(self) -> int:
        """Size of the state `step` maps: H (GRU) or 2H (LSTM: h and c)."""
        return self.n_hidden * (2 if self.kind == "lstm" else 1)

    def config(self) -> dict:
        return {"kind": self.kind, "n_in": self.n_in, "n_hidden": self.n_hidden, "n_out": self.n_out,
                "bias": self.bias, "gate": self.gate}

    def at_gate(self, gate: str) -> "GateView":
        """This model with gate `gate`'s recurrent slice ablated (a view: parameters shared)."""
        return GateView(self, _check_gate(self.kind, gate))

    def recurrent_weight(self, dtype: torch.dtype | None = None, gate: str | None = None) -> torch.Tensor:
        """The ablated gate's recurrent matrix: [H, H], rows of weight_hh_l0 (see the module docstring)."""
        g = GATES[self.kind].index(self.gate if gate is None else _check_gate(self.kind, gate))
        H = self.n_hidden
        W = self.rnn.weight_hh_l0[g * H:(g + 1) * H]
        return W if dtype is None else W.to(dtype)

    def forward(self, x: torch.Tensor, return_hidden: bool = False):
        if x.ndim != 3 or x.shape[-1] != self.n_in:
            raise ValueError(f"x must be [B, T, {self.n_in}], got {list(x.shape)}")
        hs, _ = self.rnn(x.to(self.readout.dtype))
        y = hs @ self.readout.T
        return (y, hs) if return_hidden else y

    def weights(self, dtype=torch.float64) -> dict:
        """{"w_ih" [G H, I], "w_hh" [G H, H], "b_ih", "b_hh" [G H] (zeros when bias-free), "V" [O, H]}."""
        r = self.rnn
        w = {"w_ih": r.weight_ih_l0, "w_hh": r.weight_hh_l0, "V": self.readout}
        w = {k: v.detach().to(dtype) for k, v in w.items()}
        for name in ("b_ih", "b_hh"):
            p = getattr(r, f"bias_{name[2:]}_l0", None) if self.bias else None
            w[name] = p.detach().to(dtype) if p is not None else torch.zeros(w["w_hh"].shape[0], dtype=dtype)
        return w

    def step(self, state: torch.Tensor, x: torch.Tensor, w_hh: torch.Tensor | None = None) -> torch.Tensor:
        """One step of the cell (weights detached: a map of the state only): state [..., H] (GRU) or
        [..., 2H] (LSTM, h then c), x [..., I] -> same shape.

        Args:
            w_hh: optional replacement of weight_hh_l0, [G H, H], or [S, G H, H] for a state [S, B, .].
        """
        w = self.weights(state.dtype)
        if w_hh is not None:
            w["w_hh"] = w_hh
        return _cell(self.kind, w, state, x.to(state.dtype), self.n_hidden)

    def step_recurrent(self, state: torch.Tensor, x: torch.Tensor, W: torch.Tensor,
                       gate: str | None = None) -> torch.Tensor:
        """`step` with the ablated gate's slice of weight_hh_l0 replaced by W: [H, H] (every other weight fixed)."""
        H = self.n_hidden
        if not isinstance(W, torch.Tensor) or tuple(W.shape) != (H, H):
            raise ValueError(f"W must be [{H}, {H}], got "
                             f"{list(W.shape) if isinstance(W, torch.Tensor) else type(W).__name__}")
        g = GATES[self.kind].index(self.gate if gate is None else _check_gate(self.kind, gate))
        w_hh = self.weights(state.dtype)["w_hh"].clone()
        w_hh[g * H:(g + 1) * H] = W.to(state.dtype)
        return self.step(state, x, w_hh=w_hh)

    def rollout_recurrent(self, W: torch.Tensor, x: torch.Tensor, return_hidden: bool = False, gate: str | None = None):
        """Outputs with the ablated gate's slice replaced by each of W: [S, H, H]; float64.

        Returns:
            y [S, B, T, O] (and h [S, B, T, H] with return_hidden).
        """
        H = self.n_hidden
        if W.ndim != 3 or tuple(W.shape[1:]) != (H, H):
            raise ValueError(f"W must be [S, {H}, {H}], got {list(W.shape)}")
        if x.ndim != 3 or x.shape[-1] != self.n_in:
            raise ValueError(f"x must be [B, T, {self.n_in}], got {list(x.shape)}")
        g = GATES[self.kind].index(self.gate if gate is None else gate)
        with torch.no_grad():
            w = self.weights(torch.float64)
            w_hh = w["w_hh"].expand(W.shape[0], -1, -1).clone()
            w_hh[:, g * H:(g + 1) * H] = W.double()
            w["w_hh"] = w_hh  # [S, G H, H]: one matrix per variant, the batch rides along
            gi = (x.double() @ w["w_ih"].T + w["b_ih"]).unbind(1)  # the input part of every step, shared by all S
            w_hhT = w_hh.transpose(1, 2)
            h = gi[0].new_zeros(W.shape[0], x.shape[0], H)
            state = (h,) if self.kind == "gru" else (h, torch.zeros_like(h))
            hs = []
            for gi_t in gi:
                state = cell_from_gates(self.kind, gi_t, torch.baddbmm(w["b_hh"], state[0], w_hhT), *state)
                hs.append(state[0])
            hs = torch.stack(hs, -2)  # [S, B, T, H]
            y = hs @ w["V"].T
        return (y, hs) if return_hidden else y


class GateView:
    """A GatedRNN seen with another gate's recurrent slice ablated (what `schur_ablation` takes)."""

    def __init__(self, model: GatedRNN, gate: str):
        self.model, self.gate = model, gate

    def recurrent_weight(self, dtype: torch.dtype | None = None) -> torch.Tensor:
        return self.model.recurrent_weight(dtype, gate=self.gate)

    def rollout_recurrent(self, W: torch.Tensor, x: torch.Tensor, return_hidden: bool = False):
        return self.model.rollout_recurrent(W, x, return_hidden=return_hidden, gate=self.gate)

    def step_recurrent(self, state: torch.Tensor, x: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
        return self.model.step_recurrent(state, x, W, gate=self.gate)

    def step(self, state: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self.model.step(state, x)

    @property
    def n_in(self) -> int:
        return self.model.n_in

    @property
    def state_size(self) -> int:
        return self.model.state_size

    @property
    def readout(self) -> torch.Tensor:
        return self.model.readout


def _check_gate(kind: str, gate: str) -> str:
    if gate not in GATES[kind]:
        raise ValueError(f"unknown {kind} gate {gate!r}; expected one of {GATES[kind]}")
    return gate


def _mv(Wm: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """v [..., B, K] times Wm^T, Wm [M, K] or [..., M, K] -> [..., B, M] (a batched matmul per variant)."""
    return v @ Wm.transpose(-1, -2)


def _cell(kind: str, w: dict, state: torch.Tensor, x: torch.Tensor, H: int) -> torch.Tensor:
    """torch.nn.GRU / LSTM's step equations (gate order r, z, n / i, f, g, o)."""
    h = state[..., :H]
    gi, gh = _mv(w["w_ih"], x) + w["b_ih"], _mv(w["w_hh"], h) + w["b_hh"]
    if kind == "gru":
        return cell_from_gates(kind, gi, gh, h)[0]
    return torch.cat(cell_from_gates(kind, gi, gh, h, state[..., H:]), -1)


def cell_from_gates(kind: str, gi: torch.Tensor, gh: torch.Tensor, h: torch.Tensor, c: torch.Tensor | None = None):
    """One step from the gates' input part gi = W_i x + b_i and recurrent part gh = W_h h + b_h, [..., G H]:
    (h,) for the GRU, (h, c) for the LSTM. The gates are split with `chunk` (one op, and one in backward)."""
    if kind == "gru":
        ir, iz, i_n = gi.chunk(3, -1)
        hr, hz, hn = gh.chunk(3, -1)
        r, z = torch.sigmoid(ir + hr), torch.sigmoid(iz + hz)
        n = torch.tanh(i_n + r * hn)
        return ((1 - z) * n + z * h,)
    i, f, g, o = (gi + gh).chunk(4, -1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c
