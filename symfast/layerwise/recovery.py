"""Recover the hidden-layer actions that make each layer of an MLP equivariant.

Given rho_in (and rho_out) for a group element g, layer by layer find rho_l, a
permutation of neurons with the scalings the activation allows (`activations`: signs for
tanh / sigmoid / sine, positive scalings for ReLU, real ones for monomials), minimising
||[W_l R_{l-1}, W_l c_{l-1} + b_l] - rho_l [W_l, b_l]|| by linear assignment on the transformed
weight rows, where h -> R h + c is the action rho_{l-1} induces on the activations (c != 0 only
for sigmoid: sigmoid(-z) = 1 - sigmoid(z)). Errors are read against a random-permutation
baseline; counts of symmetric filters only below a residual threshold, since the
assignment always returns *some* permutation (read errors next to the data-level ones).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from symfast._progress import Progress, reporter
from symfast.layerwise.group import GroupActions, as_named, homomorphism_check
from symfast.layerwise.layer_action import DEFAULT_THRESHOLD, LayerAction, check_threshold
from symfast.layerwise.network import MLP, as_mlp, check_rho
from symfast.activations import activation as activation_entry
from symfast.layerwise.neuron_matching import best_scales, match_neurons, post_action

# the columns of `LatentActions.counts()` and `.table` (and of `GroupActions`' tables)
COUNT_COLUMNS = ["element", "layer", "fixed", "antisymmetric", "cycled", "cycles", "unmatched"]
TABLE_COLUMNS = ["element", "layer", "error", "baseline", "bias_error", "data_error", *COUNT_COLUMNS[2:]]


def compat_frame(*args, **kwargs):
    from symfast.layerwise.tables import compat_frame as make  # pandas on first use

    return make(*args, **kwargs)

__all__ = ["LayerAction", "LatentActions", "recover_latent_actions", "data_errors", "relative_error",
           "DEFAULT_THRESHOLD"]



def relative_error(x: np.ndarray, ref: np.ndarray) -> float:
    """|x| / |ref| (Frobenius norms); |x| itself when ref is 0."""
    n = np.linalg.norm(ref)
    return float(np.linalg.norm(x) / n) if n > 0 else float(np.linalg.norm(x))


@dataclass
class LatentActions:
    """Recovered hidden actions for one group element.

    Attributes:
        name: element name; rho_in: [d0, d0]; rho_out: [dL, dL].
        actions: one LayerAction per hidden layer.
        errors: [L] ||W_l rho_{l-1} - rho_l W_l||_F / ||W_l||_F per layer (last = output layer).
        bias_errors: [L] ||b_l - rho_l b_l|| / ||b_l||.
        baseline: [L] the same error with a random permutation (best signs/scales) in place of the
            recovered action at that layer (for the output layer: at its input), mean over draws.
        mode: matching mode of the activation ("sign", "scale", "real_scale", "perm");
        threshold: residual threshold used by `counts`.
        table: (property) the per-layer DataFrame; `report()` / `str()`: the same as text.
        activation: the hidden activation's table name (actions are stored on pre-activations;
            `post_actions` gives the induced, possibly affine, action on the activations).
        data_errors: [L] data-level errors (when data was given, see `data_errors`).
        data_residuals: per hidden layer [H] data-level neuron residuals
            ||h_i(gx) - s_i h_{pi(i)}(x)|| / ||h_i(gx)|| over the data.
    """

    name: str
    rho_in: np.ndarray
    rho_out: np.ndarray
    actions: list
    errors: np.ndarray
    bias_errors: np.ndarray
    baseline: np.ndarray
    mode: str
    threshold: float = DEFAULT_THRESHOLD
    data_errors: np.ndarray | None = field(default=None)
    data_residuals: list | None = field(default=None)
    activation: str = "tanh"

    @property
    def matrices(self) -> list:
        """[rho_1, ..., rho_{L-1}] as [H_l, H_l] matrices (on pre-activations)."""
        return [a.matrix for a in self.actions]

    def post_actions(self) -> list:
        """Per hidden layer (R [H, H], offset [H]): act(rho_l z) = R act(z) + offset."""
        ent = activation_entry(self.activation)
        return [post_action(a.index, a.scale, ent) for a in self.actions]

    def chain(self) -> list:
        """[rho_in, rho_1, ..., rho_{L-1}, rho_out]."""
        return [self.rho_in] + self.matrices + [self.rho_out]

    @property
    def homomorphism(self):
        """HomomorphismReport for this element alone: if rho_in^k = I and rho_out^k = I, so must rho_l^k."""
        return homomorphism_check({self.name: self})

    def count_list(self, threshold: float | None = None, level: str = "weight") -> list:
        """Per hidden layer, a dict of neuron counts (fixed, antisymmetric, cycled, unmatched) at
        `threshold` (default: the recovery's), from the weight or the data residuals (`level`)."""
        t = self.threshold if threshold is None else threshold
        if level == "data":
            if self.data_residuals is None:
                raise ValueError("no data-level residuals: pass data= to recover_latent_actions")
            return [a.counts(t, r) for a, r in zip(self.actions, self.data_residuals)]
        if level != "weight":
            raise ValueError(f"level must be 'weight' or 'data', got {level!r}")
        return [a.counts(t) for a in self.actions]

    def counts(self, threshold: float | None = None, level: str = "weight"):
        """One row per hidden layer: neurons fixed / antisymmetric / cycled (in `cycles` cycles) /
        unmatched (see LayerAction.counts), as a DataFrame with columns element, layer (1-based),
        fixed, antisymmetric, cycled, cycles, unmatched.

        level="data" uses the data-level neuron residuals (needs data at recovery). The list
        index of earlier versions (`counts()[0]`: layer 1's dict) still works, with a
        DeprecationWarning; write `counts().iloc[0]`.
        """
        old = self.count_list(threshold, level)
        rows = [{"element": self.name, "layer": l + 1, **c} for l, c in enumerate(old)]
        return compat_frame(rows, COUNT_COLUMNS, old_text=None, old_items=old, old_what="counts()",
                            hint="counts() is a DataFrame with one row per hidden layer; "
                                 "select a layer's row with .iloc or .loc")

    @property
    def table(self):
        """One row per layer (the last is the output layer), as a DataFrame: element, layer,
        error, baseline (random-permutation error), bias_error, data_error (NaN without data),
        and the counts of the hidden layers (fixed, antisymmetric, cycled, cycles, unmatched;
        missing for the output layer). `report()` (or `str(result)`) is the same as text.

        Calling it as in earlier versions (`table()`) returns that text, with a DeprecationWarning."""
        cnt = self.count_list() + [{}]
        rows = []
        for l, (e, r, be) in enumerate(zip(self.errors, self.baseline, self.bias_errors)):
            de = float("nan") if self.data_errors is None else float(self.data_errors[l])
            rows.append({"element": self.name, "layer": l + 1, "error": float(e), "baseline": float(r),
                         "bias_error": float(be), "data_error": de, **cnt[l]})
        f = compat_frame(rows, TABLE_COLUMNS, old_text=self.report, old_what="table",
                         hint="table is a DataFrame attribute; use report() (or str()) for the text")
        for c in COUNT_COLUMNS[2:]:
            f[c] = f[c].astype("Int64")
        return f

    def report(self) -> str:
        """The per-layer table as text: errors, random baseline, bias (and data) errors, and the
        fixed/antisymmetric/cycled/unmatched counts of each hidden layer."""
        head = f"{'layer':>5} {'error':>8} {'random':>8} {'bias':>8}"
        if self.data_errors is not None:
            head += f" {'data':>8}"
        head += "  fixed/anti/cycled/unmatched"
        rows = [f"[{self.name}]", head]
        cnt = self.count_list() + [None]
        for l, (e, r, be) in enumerate(zip(self.errors, self.baseline, self.bias_errors)):
            s = f"{l + 1:>5} {e:8.4f} {r:8.4f} {be:8.4f}"
            if self.data_errors is not None:
                s += f" {self.data_errors[l]:8.4f}"
            c = cnt[l]
            s += "  output" if c is None else f"  {c['fixed']}/{c['antisymmetric']}/{c['cycled']}/{c['unmatched']}"
            rows.append(s)
        return "\n".join(rows)

    def __str__(self) -> str:
        return self.report()

    def __repr__(self) -> str:  # short: the dataclass default would print every matrix
        errs = ", ".join(f"{e:.3g}" for e in np.asarray(self.errors).tolist())
        return (f"LatentActions(element={self.name!r}, hidden layers={len(self.actions)}, mode={self.mode!r}, "
                f"errors per layer=[{errs}])")

    def _repr_html_(self) -> str:
        return f"<p>{self.__repr__()}</p>" + self.table.to_html(index=False)


def _random_baseline(A: np.ndarray, Bw: np.ndarray, Baug: np.ndarray, Aaug: np.ndarray, mode: str,
                     rng: np.random.Generator, draws: int) -> float:
    """Mean over random permutations pi of ||A - S P B|| / ||A|| with the best S given pi."""
    errs = []
    for _ in range(draws):
        pi = rng.permutation(Bw.shape[0])
        s = best_scales(Aaug, Baug[pi], mode)
        errs.append(relative_error(A - s[:, None] * Bw[pi], Bw))
    return float(np.mean(errs))


def transformed_rows(W: np.ndarray, b: np.ndarray, R_prev: np.ndarray, c_prev: np.ndarray):
    """Rows of the layer seen through the previous layer's action h -> R h + c: (W R, W c + b)."""
    return W @ R_prev, W @ c_prev + b


def _recover_one(net: MLP, rho_in, rho_out, name, threshold, draws, seed, backend="auto") -> LatentActions:
    rng = np.random.default_rng(seed)
    ent = activation_entry(net.activation)
    mode = ent.mode
    prev, c_prev = rho_in, np.zeros(rho_in.shape[0])
    actions, errors, berr, base = [], [], [], []
    for l, (W, b) in enumerate(net.layers):
        A, Ab = transformed_rows(W, b, prev, c_prev)
        if l == net.num_layers - 1:
            R = rho_out
        else:
            Aaug, Baug = np.concatenate([A, Ab[:, None]], 1), np.concatenate([W, b[:, None]], 1)
            idx, sc, res = match_neurons(torch.as_tensor(Aaug), torch.as_tensor(Baug), mode, backend)
            act = LayerAction(idx, sc, res)
            actions.append(act)
            R = act.matrix
            base.append(_random_baseline(A, W, Baug, Aaug, mode, rng, draws))
        errors.append(relative_error(A - R @ W, W))
        berr.append(relative_error(Ab - R @ b, b))
        if l == net.num_layers - 1:  # output layer: a random action at its input
            H = W.shape[1]
            if l == 0:
                base.append(float("nan"))
            else:
                vals = []
                for _ in range(draws):
                    pi = rng.permutation(H)
                    s = rng.choice([-1.0, 1.0], H) if mode in ("sign", "real_scale") else np.ones(H)
                    P, cp = post_action(pi, s, ent)
                    vals.append(relative_error(W @ P - R @ W, W))
                base.append(float(np.mean(vals)))
        else:
            prev, c_prev = post_action(act.index, act.scale, ent)
    return LatentActions(name, rho_in, rho_out, actions, np.array(errors), np.array(berr), np.array(base),
                         mode, threshold, activation=ent.name)


def data_errors(net, result: LatentActions, x, neuron_residuals: bool = False):
    """Data-level error per layer: ||h_l(g x) - rho_l h_l(x)||_F / ||h_l(x)||_F on data x: [N, d0].

    The last entry is the output (||f(gx) - rho_out f(x)|| / ||f(x)||). It can be much smaller than
    the weight-level error when the data never excites many weight directions.

    Returns:
        [L] errors; with neuron_residuals also the per-hidden-layer [H] residuals
        ||h_i(gx) - (rho_l h(x))_i|| / ||h_i(gx)||.
    """
    net = as_mlp(net)
    x = np.asarray(x.detach().cpu() if isinstance(x, torch.Tensor) else x, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != net.sizes[0]:
        raise ValueError(f"data must be [N, {net.sizes[0]}], got shape {list(x.shape)}")
    if not np.isfinite(x).all():
        raise ValueError("data has NaN or inf entries")
    hx, hgx = net.hidden(x), net.hidden(x @ result.rho_in.T)
    post = result.post_actions()
    out = [relative_error(hg - h @ R.T - c, h) for h, hg, (R, c) in zip(hx, hgx, post)]
    out.append(relative_error(net(x @ result.rho_in.T) - net(x) @ result.rho_out.T, net(x)))
    if not neuron_residuals:
        return np.array(out)
    res = []
    for h, hg, (R, c) in zip(hx, hgx, post):
        n = np.linalg.norm(hg, axis=0)
        res.append(np.linalg.norm(hg - h @ R.T - c, axis=0) / np.where(n > 0, n, 1.0))
    return np.array(out), res


def recover_latent_actions(layers, rho_in, rho_out=None, activation: str | None = None, data=None,
                           threshold: float = DEFAULT_THRESHOLD, random_draws: int = 8, seed: int = 0,
                           backend: str = "auto", progress: Progress = False):
    """Find, layer by layer, the hidden action making each layer of an MLP equivariant.

    Args:
        layers: `nn.Sequential` (Linear + activation modules) or a list of (W [out, in], b [out]).
        rho_in: [d0, d0] orthogonal input representation of g; or several elements as a dict
            name -> [d0, d0], a list, or a [K, d0, d0] array (e.g. all of D4, or generators).
        rho_out: [dL, dL] output representation(s), same structure as rho_in; None = identity
            (an invariant network, e.g. a classifier).
        activation: hidden activation for a list of layers (a name of
            `symfast.activations.ACTIVATION_TABLE`); read from the modules for a Sequential.
            The table says which scalings the matching allows (signs for tanh / sine / sigmoid, with an
            affine offset for sigmoid; positive scalings for ReLU; real ones for monomials).
        data: optional [N, d0] inputs; adds data-level errors (`data_errors`).
        threshold: per-neuron residual threshold for counts of fixed / antisymmetric / cycled neurons.
        random_draws: random permutations averaged in the baseline; seed: their seed.
        backend: of the row-matching kernel ("auto", "cpu", "reference"; `symfast.ops.matching`).
        progress: False (default), True (a tqdm bar over the group elements) or a callable given a
            line about every tenth of them (`symfast._progress`).

    Returns:
        `LatentActions` for a single rho_in; `GroupActions` (with a homomorphism check) for several.
    """
    threshold = check_threshold(threshold)
    net = as_mlp(layers, activation)
    d0, dL = net.sizes[0], net.sizes[-1]
    multi = isinstance(rho_in, (dict, list, tuple)) or np.ndim(rho_in) == 3
    if not multi:
        ri = check_rho(rho_in, d0, "rho_in")
        ro = np.eye(dL) if rho_out is None else check_rho(rho_out, dL, "rho_out")
        res = _recover_one(net, ri, ro, "g", threshold, random_draws, seed, backend)
        if data is not None:
            res.data_errors, res.data_residuals = data_errors(net, res, data, True)
        return res
    ins = as_named(rho_in, "rho_in")
    outs = {k: None for k in ins} if rho_out is None else as_named(rho_out, "rho_out")
    if list(outs) != list(ins):
        raise ValueError(f"rho_out must name the same elements as rho_in ({list(ins)}), got {list(outs)}")
    elems = {}
    bar = reporter(progress, "symfast.layerwise").bar(len(ins), "latent actions", unit="element")
    for k in ins:
        ri = check_rho(ins[k], d0, f"rho_in[{k}]")
        ro = np.eye(dL) if outs[k] is None else check_rho(outs[k], dL, f"rho_out[{k}]")
        elems[k] = _recover_one(net, ri, ro, k, threshold, random_draws, seed, backend)
        if data is not None:
            elems[k].data_errors, elems[k].data_residuals = data_errors(net, elems[k], data, True)
        bar.update()
    bar.close()
    return GroupActions(elems)
