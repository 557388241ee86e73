"""Channel-wise latent actions of CNNs equivariant to horizontal flips of the image.

A CNN here: valid (unpadded) stride-1 convolutions with an activation of the table, global
average pooling, a linear head. Valid convolutions commute with the flip F exactly
(conv(W, F h) = F conv(flip_w W, h)) and keep a constant map constant, so sigmoid's offset
passes through; pooling is linear and flip invariant. The latent action on layer l's feature maps
is z -> F (D P z) on pre-activations, i.e. a spatial flip combined with a channel permutation
scaled by the activation's group (`activations`), and on the activations h -> F (R h + c).

Recovery is the MLP recovery with rows = output channels' flattened kernels: layer l is
equivariant iff [flip_w(W_l x_in R_{l-1}), b_l + W_l . c_{l-1}] = rho_l [W_l, b_l].
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from symfast.layerwise.recovery import LatentActions, relative_error
from symfast.activations import activation as activation_entry
from symfast.layerwise.neuron_matching import best_scales, match_neurons, post_action
from symfast.layerwise.layer_action import DEFAULT_THRESHOLD, LayerAction, check_threshold
from symfast.layerwise.network import float_array

__all__ = ["CNN", "ConvNet", "as_cnn", "recover_conv_actions", "conv_data_errors", "project_conv",
           "planted_cnn", "conv_equivariance_error"]


@dataclass
class CNN:
    """A flip-equivariance-ready CNN as float64 numpy arrays.

    Attributes:
        convs: list of (W [C_out, C_in, k, k], b [C_out]) valid convolutions, stride 1.
        head: (W [d_out, C_last], b [d_out]) after global average pooling.
        activation: hidden activation (table name).
    """

    convs: list
    head: tuple
    activation: str = "tanh"
    channels: list = field(init=False)

    def __post_init__(self):
        self.activation = activation_entry(self.activation).name
        if not self.convs:
            raise ValueError("a CNN needs at least one convolution")
        clean = []
        for l, (W, b) in enumerate(self.convs):
            W, b = float_array(W, f"conv W[{l}]"), float_array(b, f"conv b[{l}]")
            if W.ndim != 4 or b.shape != (W.shape[0],):
                raise ValueError(f"conv {l}: W must be [C_out, C_in, k, k] and b [C_out], got "
                                 f"{list(W.shape)}, {list(b.shape)}")
            if clean and clean[-1][0].shape[0] != W.shape[1]:
                raise ValueError(f"conv {l} has {W.shape[1]} input channels, previous has {clean[-1][0].shape[0]}")
            clean.append((W, b))
        self.convs = clean
        Wh, bh = float_array(self.head[0], "head W"), float_array(self.head[1], "head b")
        if Wh.ndim != 2 or Wh.shape[1] != clean[-1][0].shape[0] or bh.shape != (Wh.shape[0],):
            raise ValueError(f"head must be ([d_out, {clean[-1][0].shape[0]}], [d_out]), got "
                             f"{list(Wh.shape)}, {list(bh.shape)}")
        self.head = (Wh, bh)
        self.channels = [clean[0][0].shape[1]] + [W.shape[0] for W, _ in clean]

    def _check(self, x) -> torch.Tensor:
        x = torch.as_tensor(float_array(x, "x"))
        if x.ndim != 4 or x.shape[1] != self.channels[0]:
            raise ValueError(f"x must be [N, {self.channels[0]}, H, W], got {list(x.shape)}")
        return x

    def hidden(self, x, pre: bool = False) -> list:
        """Feature maps of every conv layer: [N, C_l, H_l, W_l] numpy (pre-activations if pre)."""
        h = self._check(x)
        fn, out = activation_entry(self.activation).torch_fn, []
        for W, b in self.convs:
            z = torch.nn.functional.conv2d(h, torch.as_tensor(W), torch.as_tensor(b))
            h = fn(z)
            out.append((z if pre else h).numpy())
        return out

    def __call__(self, x) -> np.ndarray:
        """[N, C, H, W] -> [N, d_out] float64."""
        h = self.hidden(x)[-1].mean((2, 3))
        return h @ self.head[0].T + self.head[1]

    def with_weights(self, convs, head) -> "CNN":
        return CNN(convs, head, self.activation)


class ConvNet(torch.nn.Module):
    """Trainable torch version of `CNN` (valid convs, activation, global average pool, linear head)."""

    def __init__(self, channels, kernel: int = 3, num_classes: int = 10, activation: str = "tanh"):
        super().__init__()
        self.activation = activation_entry(activation).name
        self.convs = torch.nn.ModuleList(torch.nn.Conv2d(a, b, kernel) for a, b in zip(channels[:-1], channels[1:]))
        self.head = torch.nn.Linear(channels[-1], num_classes)

    def forward(self, x):
        fn = activation_entry(self.activation).torch_fn
        for conv in self.convs:
            x = fn(conv(x))
        return self.head(x.mean((2, 3)))


def as_cnn(net) -> CNN:
    """A `CNN` from a `ConvNet` (or a CNN)."""
    if isinstance(net, CNN):
        return net
    if isinstance(net, ConvNet):
        return CNN([(c.weight, c.bias) for c in net.convs], (net.head.weight, net.head.bias), net.activation)
    raise ValueError(f"expected a CNN or ConvNet, got {type(net).__name__}")


def conv_transformed_rows(W: np.ndarray, b: np.ndarray, R_prev: np.ndarray, c_prev: np.ndarray):
    """Kernels seen through the input action h -> F (R h + c): (flip_w(W x_in R), b + W . c)."""
    A = np.einsum("oikl,ij->ojkl", W, R_prev)[..., ::-1]
    return np.ascontiguousarray(A), b + np.einsum("oikl,i->o", W, c_prev)


def recover_conv_actions(net, rho_in=None, rho_out=None, threshold: float = DEFAULT_THRESHOLD,
                         random_draws: int = 8, seed: int = 0) -> LatentActions:
    """Recover the channel actions that make each layer of a CNN flip-equivariant.

    Args:
        net: CNN or ConvNet.
        rho_in: [C0, C0] action on the input channels that goes with the flip (None = identity).
        rho_out: [d_out, d_out] output representation (None = identity: an invariant classifier).

    Returns:
        LatentActions: one LayerAction per conv layer (channel permutation with scales, on
        pre-activations; the spatial flip is implied), per-layer weight errors (last = head), biases,
        random-permutation baseline.
    """
    threshold = check_threshold(threshold)
    net = as_cnn(net)
    ent = activation_entry(net.activation)
    C0, dL = net.channels[0], net.head[0].shape[0]
    rho_in = np.eye(C0) if rho_in is None else float_array(rho_in, "rho_in")
    rho_out = np.eye(dL) if rho_out is None else float_array(rho_out, "rho_out")
    if rho_in.shape != (C0, C0) or rho_out.shape != (dL, dL):
        raise ValueError(f"rho_in must be [{C0}, {C0}] and rho_out [{dL}, {dL}]")
    rng = np.random.default_rng(seed)
    prev, c_prev = rho_in, np.zeros(C0)
    actions, errors, berr, base = [], [], [], []
    for W, b in net.convs:
        A, Ab = conv_transformed_rows(W, b, prev, c_prev)
        Af, Wf = A.reshape(len(A), -1), W.reshape(len(W), -1)
        Aaug, Baug = np.concatenate([Af, Ab[:, None]], 1), np.concatenate([Wf, b[:, None]], 1)
        idx, sc, res = match_neurons(torch.as_tensor(Aaug), torch.as_tensor(Baug), ent.mode)
        act = LayerAction(idx, sc, res)
        actions.append(act)
        R = act.matrix
        errors.append(relative_error(Af - R @ Wf, Wf))
        berr.append(relative_error(Ab - R @ b, b))
        draws = []
        for _ in range(random_draws):
            pi = rng.permutation(len(W))
            s = best_scales(Aaug, Baug[pi], ent.mode)
            draws.append(relative_error(Af - s[:, None] * Wf[pi], Wf))
        base.append(float(np.mean(draws)))
        prev, c_prev = post_action(act.index, act.scale, ent)
    Wh, bh = net.head
    A, Ab = Wh @ prev, Wh @ c_prev + bh
    errors.append(relative_error(A - rho_out @ Wh, Wh))
    berr.append(relative_error(Ab - rho_out @ bh, bh))
    vals = []
    for _ in range(random_draws):
        H = Wh.shape[1]
        s = rng.choice([-1.0, 1.0], H) if ent.mode in ("sign", "real_scale") else np.ones(H)
        P, _ = post_action(rng.permutation(H), s, ent)
        vals.append(relative_error(Wh @ P - rho_out @ Wh, Wh))
    base.append(float(np.mean(vals)))
    return LatentActions("flip", rho_in, rho_out, actions, np.array(errors), np.array(berr), np.array(base),
                         ent.mode, threshold, activation=ent.name)


def _flip(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x[..., ::-1])


def conv_data_errors(net, result: LatentActions, x) -> np.ndarray:
    """Per conv layer ||h_l(F x) - F (R h_l(x) + c)|| / ||h_l(x)|| on images x [N, C, H, W]; last = output."""
    net = as_cnn(net)
    x = net._check(x).numpy()
    xg = np.einsum("ij,njhw->nihw", result.rho_in, _flip(x))
    hx, hg = net.hidden(x), net.hidden(xg)
    out = []
    for h, g, (R, c) in zip(hx, hg, result.post_actions()):
        pred = _flip(np.einsum("ij,njhw->nihw", R, h)) + c[None, :, None, None]
        out.append(relative_error(g - pred, h))
    y = net(x)
    out.append(relative_error(net(xg) - y @ result.rho_out.T, y))
    return np.array(out)


def conv_equivariance_error(net, x, rho_in=None, rho_out=None) -> float:
    """End-to-end ||f(flip x) - rho_out f(x)|| / ||f(x)|| on images x [N, C, H, W]."""
    net = as_cnn(net)
    x = net._check(x).numpy()
    ri = np.eye(net.channels[0]) if rho_in is None else np.asarray(rho_in, float)
    ro = np.eye(net.head[0].shape[0]) if rho_out is None else np.asarray(rho_out, float)
    y = net(x)
    return relative_error(net(np.einsum("ij,njhw->nihw", ri, _flip(x))) - y @ ro.T, y)


def project_conv(net, actions) -> CNN:
    """Project a CNN onto the weights equivariant under {e, g}, g the flip with the given channel actions.

    The hidden actions are first restricted to order 2 (`LayerAction.restricted_to_order`; the flip
    is an involution), so T_g [W, b] = rho_l^-1 [conv-transformed rows] is an involution and
    (M + T_g M) / 2 the projection. rho_in and rho_out must be involutions too.
    """
    net = as_cnn(net)
    if not isinstance(actions, LatentActions):
        raise ValueError("actions must be the LatentActions of recover_conv_actions")
    ent = activation_entry(net.activation)
    for name, r in (("rho_in", actions.rho_in), ("rho_out", actions.rho_out)):
        if np.abs(r @ r - np.eye(len(r))).max() > 1e-8:
            raise ValueError(f"{name} must be an involution (the flip has order 2)")
    hidden = [a.restricted_to_order(2) for a in actions.actions]
    if len(hidden) != len(net.convs):
        raise ValueError(f"{len(hidden)} actions for {len(net.convs)} conv layers")
    prev, c_prev = actions.rho_in, np.zeros(net.channels[0])
    convs = []
    for (W, b), act in zip(net.convs, hidden):
        A, Ab = conv_transformed_rows(W, b, prev, c_prev)
        Rinv = np.linalg.inv(act.matrix)
        convs.append(((W + np.einsum("oj,jikl->oikl", Rinv, A)) / 2, (b + Rinv @ Ab) / 2))
        prev, c_prev = post_action(act.index, act.scale, ent)
    Wh, bh = net.head
    Rinv = np.linalg.inv(actions.rho_out)
    head = ((Wh + Rinv @ Wh @ prev) / 2, (bh + Rinv @ (Wh @ c_prev + bh)) / 2)
    return net.with_weights(convs, head)


def planted_cnn(channels, activation: str = "tanh", kernel: int = 3, num_classes: int = 3, seed: int = 0):
    """A random flip-invariant CNN with planted channel actions (pairs, symmetric and antisymmetric
    channels, relabelled, scaled per the activation's group).

    Returns:
        (CNN, actions): actions[l] is the planted LayerAction of conv layer l (pre-activations).
    """
    rng = np.random.default_rng(seed)
    ent = activation_entry(activation)
    acts = []
    for C in channels[1:]:
        idx, sc = np.arange(C), np.ones(C)
        n_pairs = C // 3
        for p in range(n_pairs):
            idx[2 * p], idx[2 * p + 1] = 2 * p + 1, 2 * p
        for j in range(2 * n_pairs, C):  # fixed channels, every other one antisymmetric when allowed
            if ent.mode in ("sign", "real_scale") and (j - 2 * n_pairs) % 2:
                sc[j] = -1.0
        perm = rng.permutation(C)
        a = LayerAction(np.arange(C), np.ones(C))
        R = LayerAction(idx, sc).matrix[np.ix_(perm, perm)]
        if ent.mode in ("scale", "real_scale"):
            D = rng.uniform(0.5, 2.0, C) * (rng.choice([-1.0, 1.0], C) if ent.mode == "real_scale" else 1.0)
            R = D[:, None] * R / D[None, :]
        a = LayerAction.from_matrix(R)
        acts.append(a)
    convs = [(rng.normal(0, 1 / np.sqrt(a * kernel ** 2), (b, a, kernel, kernel)), rng.normal(0, 0.3, b))
             for a, b in zip(channels[:-1], channels[1:])]
    head = (rng.normal(0, 1 / np.sqrt(channels[-1]), (num_classes, channels[-1])), rng.normal(0, 0.3, num_classes))
    net = CNN(convs, head, activation)
    fake = LatentActions("flip", np.eye(channels[0]), np.eye(num_classes), acts, np.zeros(0), np.zeros(0),
                         np.zeros(0), ent.mode, activation=ent.name)
    return project_conv(net, fake), acts
