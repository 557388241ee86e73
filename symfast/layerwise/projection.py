"""Projection onto the layerwise-equivariant subspace (group averaging).

Given actions rho_l(g) on every layer (input, hidden, output) for the elements
of a finite group, the Reynolds operator

    [W_l, b_l] <- 1/|G| sum_g rho_l(g)^{-1} [W_l R_{l-1}(g), W_l c_{l-1}(g) + b_l]

(rho_l the action on layer l's pre-activations, h -> R h + c the action it induces on the
activations, affine for sigmoid) is a projection onto weights with W_l R_{l-1}(g) = rho_l(g) W_l
and W_l c_{l-1}(g) + b_l = rho_l(g) b_l for all g (orthogonal when every action is a signed
permutation without offset). The group is the closure of the given chains under composition.
"""
from __future__ import annotations

import numpy as np
import torch

from symfast._progress import Progress, reporter
from symfast.groups import closure as generate
from symfast.layerwise.recovery import LatentActions, transformed_rows
from symfast.activations import activation as activation_entry
from symfast.layerwise.neuron_matching import post_action
from symfast.layerwise.group import GroupActions
from symfast.layerwise.layer_action import LayerAction
from symfast.layerwise.network import MLP, as_mlp

__all__ = ["closure", "project_equivariant", "equivariance_error", "projection_report", "repair_chain",
           "normalise_scales"]


def _same(a, b, tol: float = 1e-8) -> bool:
    return all(np.abs(x - y).max() <= tol for x, y in zip(a, b))


class _Chain(tuple):
    """A chain [rho_in, rho_1, ..., rho_out] as a group element: composed layer by layer, equal to tolerance."""

    def __mul__(self, other):
        return _Chain(x @ y for x, y in zip(self, other))

    def __eq__(self, other):
        return _same(self, other)

    __hash__ = tuple.__hash__  # not used for bucketing (`closure` gets a constant key)


def closure(chains: list, max_size: int = 512) -> list:
    """Close a set of chains [rho_in, rho_1, ..., rho_out] (matrices) under composition.

    The identity chain is included (first). Raises ValueError when more than `max_size` elements
    appear (the actions do not generate a small finite group).
    """
    if not chains:
        raise ValueError("no actions given")
    ident = _Chain(np.eye(m.shape[0]) for m in chains[0])
    try:
        group = generate([_Chain(c) for c in chains], ident, max_size, key=lambda _: 0)
    except ValueError:
        raise ValueError(f"the actions generate more than {max_size} elements; "
                         "they are not a representation of a small finite group") from None
    return [list(c) for c in group]


def _chains(actions) -> list:
    if isinstance(actions, LatentActions):
        return [actions.chain()]
    if isinstance(actions, GroupActions):
        return [v.chain() for v in actions.elements.values()]
    if isinstance(actions, (list, tuple)) and actions and isinstance(actions[0], LatentActions):
        return [a.chain() for a in actions]
    if isinstance(actions, (list, tuple)) and actions and isinstance(actions[0], (list, tuple)):
        return [[np.asarray(m, dtype=np.float64) for m in c] for c in actions]
    raise ValueError("actions must be LatentActions, GroupActions, or a list of chains [rho_in, ..., rho_out]")


def _order(a: np.ndarray, b: np.ndarray, max_order: int = 64) -> int | None:
    Pa, Pb = a.copy(), b.copy()
    for k in range(1, max_order + 1):
        if np.abs(Pa - np.eye(len(a))).max() < 1e-8 and np.abs(Pb - np.eye(len(b))).max() < 1e-8:
            return k
        Pa, Pb = Pa @ a, Pb @ b
    return None


def repair_chain(chain: list) -> list:
    """Make one element's hidden actions satisfy rho_l^k = I, k the order of (rho_in, rho_out).

    Uses `LayerAction.restricted_to_order` (unmatched cycles of the wrong length become fixed neurons,
    ReLU scales are normalised per cycle), so the chain generates a cyclic group of order k.
    """
    k = _order(chain[0], chain[-1])
    if k is None:
        raise ValueError("rho_in / rho_out have no finite order <= 64; cannot repair the hidden actions")
    hidden = [LayerAction.from_matrix(m).restricted_to_order(k).matrix for m in chain[1:-1]]
    return [chain[0]] + hidden + [chain[-1]]


def normalise_scales(chains: list) -> list:
    """Replace positive scales by a common conjugation: R_g -> D sign(R_g) D^{-1} on every hidden layer.

    Recovered ReLU scales are estimates; products of them do not close exactly, so the group they
    generate is infinite. Picking one positive diagonal D per layer (d_i = |s_i| d_{pi(i)} along a
    spanning forest of the orbits of all given elements) and conjugating the bare signed permutations
    by it keeps the structure and makes the actions a representation when the permutations are one.
    """
    out = [[c[0]] for c in chains]
    for l in range(1, len(chains[0]) - 1):
        acts = [LayerAction.from_matrix(c[l]) for c in chains]
        H = acts[0].size
        d = np.full(H, np.nan)
        for root in range(H):
            if not np.isnan(d[root]):
                continue
            d[root] = 1.0
            stack = [root]
            while stack:
                j = stack.pop()
                for a in acts:  # edges i -> pi(i) with (R h)_i = s_i h_pi(i): d_i = |s_i| d_pi(i)
                    for i in np.flatnonzero(a.index == j):
                        if np.isnan(d[i]):
                            d[i] = abs(a.scale[i]) * d[j]
                            stack.append(int(i))
                    i = a.index[j]
                    if np.isnan(d[i]):
                        d[i] = d[j] / abs(a.scale[j])
                        stack.append(int(i))
        for c, a in zip(out, acts):
            R = np.zeros((H, H))
            R[np.arange(H), a.index] = np.sign(a.scale) * d / d[a.index]
            c.append(R)
    for c, full in zip(out, chains):
        c.append(full[-1])
    return out


def project_equivariant(layers, actions, activation: str | None = None, max_group: int = 512,
                        repair: bool = True, progress: Progress = False) -> MLP:
    """Project an MLP's weights onto the subspace equivariant under the given layer actions.

    Args:
        layers: nn.Sequential / list of (W, b) / MLP.
        actions: LatentActions (one element; its powers are used), GroupActions, or a list of
            chains [rho_in, rho_1, ..., rho_{L-1}, rho_out].
        activation: hidden activation for a list of layers.
        repair: for a single element, first make its hidden actions have the order of the input
            action (`repair_chain`): recovered ReLU scales and unmatched cycles otherwise generate
            a huge (or infinite) group; for several elements, replace the estimated scales by one
            common conjugation (`normalise_scales`).
        progress: False (default), True (a tqdm bar over the layers) or a callable given a line about
            every tenth of them (`symfast._progress`).

    Returns:
        The projected MLP (float64). Exactly layerwise equivariant under the generated group.
    """
    net = as_mlp(layers, activation)
    chains = _chains(actions)
    for c in chains:
        if len(c) != net.num_layers + 1 or any(m.shape[0] != n for m, n in zip(c, net.sizes)):
            raise ValueError(f"action sizes {[m.shape[0] for m in c]} do not match the layer sizes {net.sizes}")
    if repair and len(chains) == 1:
        chains = [repair_chain(chains[0])]
    elif repair:
        chains = normalise_scales(chains)
    group = closure(chains, max_group)
    ent = activation_entry(net.activation)
    out = []
    bar = reporter(progress, "symfast.layerwise").bar(net.num_layers, f"projection ({len(group)} elements)",
                                                      unit="layer")
    for l, (W, b) in enumerate(net.layers):
        Wp, bp = np.zeros_like(W), np.zeros_like(b)
        for g in group:  # T_g [W, b] = rho_l(g)^-1 [W, b] A_{l-1}(g), A the (affine) action on the layer input
            if l == 0:
                R, c = g[0], np.zeros(g[0].shape[0])
            else:
                a = LayerAction.from_matrix(g[l])
                R, c = post_action(a.index, a.scale, ent)
            A, Ab = transformed_rows(W, b, R, c)
            Rinv = np.linalg.inv(g[l + 1])
            Wp += Rinv @ A
            bp += Rinv @ Ab
        out.append((Wp / len(group), bp / len(group)))
        bar.update()
    bar.close()
    return net.with_layers(out)


def equivariance_error(layers, x, rho_in, rho_out=None, activation: str | None = None) -> float:
    """End-to-end error ||f(x rho_in^T) - f(x) rho_out^T||_F / ||f(x)||_F on data x: [N, d0]."""
    net = as_mlp(layers, activation)
    x = np.asarray(x.detach().cpu() if isinstance(x, torch.Tensor) else x, dtype=np.float64)
    ro = np.eye(net.sizes[-1]) if rho_out is None else np.asarray(rho_out, dtype=np.float64)
    y = net(x)
    return float(np.linalg.norm(net(x @ np.asarray(rho_in).T) - y @ ro.T) / max(np.linalg.norm(y), 1e-300))


def _random_chains(chains: list, rng) -> list:
    """Random hidden actions forming a representation of the same group as `chains`."""
    eye = [np.eye(m.shape[0]) for m in chains[0]]
    involution = len(chains) == 1 and all(np.abs(a @ a - e).max() < 1e-8 for a, e in
                                          zip([chains[0][0], chains[0][-1]], [eye[0], eye[-1]]))
    if involution:  # a random fixed-point-free pairing on every hidden layer
        c = [chains[0][0]]
        for m in chains[0][1:-1]:
            H = m.shape[0]
            p = rng.permutation(H)
            R = np.eye(H)
            for i, j in zip(p[0:H - 1:2], p[1:H:2]):
                R[[i, j]] = R[[j, i]]
            c.append(R)
        return [c + [chains[0][-1]]]
    perms = [rng.permutation(m.shape[0]) for m in chains[0][1:-1]]  # shared: keeps the group structure
    return [[c[0]] + [m[np.ix_(p, p)] for m, p in zip(c[1:-1], perms)] + [c[-1]] for c in chains]


def projection_report(layers, actions, x, rho_in, rho_out=None, loss_fn=None, activation: str | None = None,
                      random_control: bool = True, seed: int = 0) -> dict:
    """Project onto the recovered actions and report what changed.

    Args:
        layers: the trained network; actions: as for `project_equivariant`.
        x: [N, d0] data; rho_in/rho_out: the end-to-end representation to check.
        loss_fn: optional callable(outputs [N, d_out] numpy) -> float (task loss / accuracy).
        random_control: also project onto random hidden actions of the same group (for one involution:
            random pairings of the neurons; otherwise random relabellings of the recovered actions), the
            control that shows the recovered ones are not arbitrary.

    Returns:
        dict with equivariance_before/after (and _random), loss_before/after (and _random),
        weight_change (relative Frobenius change of all weights), and the projected MLP.
    """
    net = as_mlp(layers, activation)
    proj = project_equivariant(net, actions)
    out = {"projected": proj,
           "equivariance_before": equivariance_error(net, x, rho_in, rho_out),
           "equivariance_after": equivariance_error(proj, x, rho_in, rho_out)}
    num = sum(np.linalg.norm(W - Wp) ** 2 for (W, _), (Wp, _) in zip(net.layers, proj.layers))
    den = sum(np.linalg.norm(W) ** 2 for W, _ in net.layers)
    out["weight_change"] = float(np.sqrt(num / den))
    if loss_fn is not None:
        out["loss_before"] = float(loss_fn(net(x)))
        out["loss_after"] = float(loss_fn(proj(x)))
    if random_control:
        rng = np.random.default_rng(seed)
        rand = _random_chains(_chains(actions), rng)
        rproj = project_equivariant(net, rand)
        out["equivariance_random"] = equivariance_error(rproj, x, rho_in, rho_out)
        if loss_fn is not None:
            out["loss_random"] = float(loss_fn(rproj(x)))
    return out
