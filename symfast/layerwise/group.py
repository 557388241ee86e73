"""Latent actions of several group elements and the homomorphism check.

Relations are read off the given input/output representations: whenever
rho_in(a) rho_in(b) = rho_in(c) (and the same for rho_out) the recovered
hidden actions must satisfy rho_l(a) rho_l(b) = rho_l(c); whenever rho(a)^k = I
(the order of a), rho_l(a)^k must be the identity too.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from symfast._optional import require
from symfast.layerwise.layer_action import LayerAction

__all__ = ["GroupActions", "HomomorphismReport", "as_named", "homomorphism_check"]


def as_named(rhos, name: str) -> dict:
    """dict / list / [K, d, d] array -> dict name -> [d, d] float64."""
    if isinstance(rhos, dict):
        items = list(rhos.items())
    else:
        if isinstance(rhos, torch.Tensor):
            rhos = rhos.detach().cpu().numpy()
        items = [(f"g{i}", r) for i, r in enumerate(rhos)]
    if not items:
        raise ValueError(f"{name} is empty")
    out = {}
    for k, r in items:
        if r is None:
            out[str(k)] = None
            continue
        out[str(k)] = np.asarray(r.detach().cpu() if isinstance(r, torch.Tensor) else r, dtype=np.float64)
    return out


@dataclass
class HomomorphismReport:
    """Checked relations: each a dict(relation, layer, error, scale_error, ok); `ok` when all hold."""

    relations: list
    tol: float

    @property
    def ok(self) -> bool:
        return all(r["ok"] for r in self.relations)

    @property
    def failures(self) -> list:
        return [r for r in self.relations if not r["ok"]]

    def __repr__(self) -> str:
        return (f"<HomomorphismReport {'ok' if self.ok else 'FAILED'}: {len(self.relations)} relation checks, "
                f"{len(self.failures)} failures>")


def _close(a: np.ndarray, b: np.ndarray, tol: float = 1e-8) -> bool:
    return a.shape == b.shape and np.abs(a - b).max() <= tol


def _compare(P: np.ndarray, T: np.ndarray):
    """(fraction of neurons whose index or sign differ, max |log|scale_P| - log|scale_T||)."""
    a, b = LayerAction.from_matrix(P), LayerAction.from_matrix(T)
    struct = float(np.mean((a.index != b.index) | (np.sign(a.scale) != np.sign(b.scale))))
    same = a.index == b.index
    scale = float(np.abs(np.log(np.abs(a.scale[same])) - np.log(np.abs(b.scale[same]))).max()) if same.any() else 0.0
    return struct, scale


def homomorphism_check(elements: dict, tol: float = 1e-6, max_order: int = 24,
                       scale_tol: float = 0.5) -> HomomorphismReport:
    """Check that recovered hidden actions compose like the input/output representations.

    Permutations and signs must compose exactly (`error`: fraction of neurons where they do not);
    positive (ReLU) scales, estimated from noisy weights, only up to `scale_tol` in log scale
    (`scale_error`).

    Args:
        elements: name -> LatentActions (as in `GroupActions.elements`).
        tol: tolerance on the structural mismatch fraction (0 = exact).
        max_order: largest element order searched for the relation a^k = e.
        scale_tol: tolerance on max |log scale_(ab) - log scale_c|.
    """
    names = list(elements)
    rel = []
    chains = {k: elements[k].chain() for k in names}
    for a in names:  # orders
        ca = chains[a]
        P = [np.eye(m.shape[0]) for m in ca]
        for k in range(1, max_order + 1):
            P = [p @ m for p, m in zip(P, ca)]
            if _close(P[0], np.eye(P[0].shape[0])) and _close(P[-1], np.eye(P[-1].shape[0])):
                for l, p in enumerate(P[1:-1]):
                    err, se = _compare(p, np.eye(p.shape[0]))
                    rel.append({"relation": f"{a}^{k}=e", "layer": l + 1, "error": err, "scale_error": se,
                                "ok": err <= tol and se <= scale_tol})
                break
    for a in names:  # products among the given elements
        for b in names:
            ca, cb = chains[a], chains[b]
            pin, pout = ca[0] @ cb[0], ca[-1] @ cb[-1]
            target = next((c for c in names if _close(chains[c][0], pin) and _close(chains[c][-1], pout)), None)
            if target is None:
                if a == b:  # a^2 = e is already an order relation
                    continue
                if _close(pin, np.eye(pin.shape[0])) and _close(pout, np.eye(pout.shape[0])):
                    tc = [np.eye(m.shape[0]) for m in ca]
                    label = f"{a}*{b}=e"
                else:
                    continue
            else:
                tc = chains[target]
                label = f"{a}*{b}={target}"
            for l in range(1, len(ca) - 1):
                err, se = _compare(ca[l] @ cb[l], tc[l])
                rel.append({"relation": label, "layer": l, "error": err, "scale_error": se,
                            "ok": err <= tol and se <= scale_tol})
    return HomomorphismReport(rel, tol)


@dataclass
class GroupActions:
    """Recovered actions for several elements.

    Attributes:
        elements: name -> LatentActions.
        homomorphism: HomomorphismReport (relations found among the given elements).
    """

    elements: dict
    homomorphism: HomomorphismReport = None

    def __post_init__(self):
        if self.homomorphism is None:
            self.homomorphism = homomorphism_check(self.elements)

    @property
    def names(self) -> list:
        return list(self.elements)

    @property
    def actions(self) -> dict:
        """name -> list of LayerAction (one per hidden layer)."""
        return {k: v.actions for k, v in self.elements.items()}

    @property
    def errors(self) -> np.ndarray:
        """[K, L] per-element, per-layer relative equivariance errors."""
        return np.stack([v.errors for v in self.elements.values()])

    @property
    def baseline(self) -> np.ndarray:
        return np.stack([v.baseline for v in self.elements.values()])

    def counts(self, threshold: float | None = None):
        """One row per (element, hidden layer): the columns of `LatentActions.counts`. The dict of
        earlier versions (`counts()["g0"]`: a list per element) still answers element names, with a
        DeprecationWarning; write `counts().query("element == 'g0'")`."""
        pd = require("pandas", "a GroupActions table")

        from symfast.layerwise.tables import compat_frame

        parts = [v.counts(threshold) for v in self.elements.values()]
        old = {k: v.count_list(threshold) for k, v in self.elements.items()}
        rows = pd.concat([pd.DataFrame(p) for p in parts], ignore_index=True).to_dict("records")
        return compat_frame(rows, list(parts[0].columns), old_items=old, old_what="counts()",
                            hint="counts() is a DataFrame with one row per element and hidden layer; "
                                 "select an element's rows by its 'element' column")

    def __getitem__(self, name) -> "object":
        return self.elements[name]

    @property
    def table(self):
        """`LatentActions.table` of every element, stacked (column `element` first). The
        homomorphism check is `.homomorphism`; `report()` (or `str()`) gives both as text.
        Calling it as in earlier versions (`table()`) returns that text, with a DeprecationWarning."""
        pd = require("pandas", "a GroupActions table")

        from symfast.layerwise.tables import compat_frame

        parts = [pd.DataFrame(v.table) for v in self.elements.values()]
        t = pd.concat(parts, ignore_index=True)
        f = compat_frame(t.to_dict("records"), list(t.columns), old_text=self.report, old_what="table",
                         hint="table is a DataFrame attribute; use report() (or str()) for the text")
        for c, dt in t.dtypes.items():
            f[c] = f[c].astype(dt)
        return f

    def report(self) -> str:
        """Each element's `LatentActions.report()`, then the homomorphism check and its failures."""
        parts = [v.report() for v in self.elements.values()]
        parts.append(repr(self.homomorphism))
        for f in self.homomorphism.failures[:10]:
            parts.append(f"  fails: {f['relation']} at layer {f['layer']} (error {f['error']:.3g})")
        return "\n".join(parts)

    def __str__(self) -> str:
        return self.report()
