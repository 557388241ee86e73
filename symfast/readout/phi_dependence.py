"""Which observable Phi can see which element: the structural prediction, before any training.

The readout paper (Chiba, Sugiyama, Uranishi, arXiv 2607.03108) writes the observed set as
G_obs(theta; phi, Phi): what is visible depends on the encoding phi *and* the observable Phi. With
infinitely many seeds, a Gram-type observable (`symfast.readout.observables`: "gram", "prefixK",
"gram_bias") shows an exactly liftable element g exactly when its expected value is g-invariant.
That expectation is invariant under H = G_lift ∩ G_true, and it is g-invariant for *every* field
with group H exactly when every H-invariant observable is g-invariant (`readout.implied_by`, on the
observable's own lifts: rho for the Grams, diag(rho, 1) for the bias-augmented Gram). So the
predicted G_obs of an observable is H ∪ implied(Phi), and two observables see different groups
exactly where their implied sets differ. `predict` computes it per (shape, encoding, observable);
`differing` lists the elements where observables disagree.

What the prediction says for Fourier encodings (every `symfast.nn.encodings.FourierPE`): none.
An exact lift permutes the complex exponentials e^{i w.x}, w in ±W (up to phases), so an
H-invariant Gram is a function on H-orbits of *pairs* of frequencies, an H-invariant bias term
(the cross block W1 b1 of "gram_bias") one on H-orbits of frequencies. An element that maps every
orbit of pairs to itself maps the diagonal pairs (w, w), hence every orbit of frequencies, to
itself: Gram-implied elements are bias-implied too, and prefix Grams transform like the first-layer
Gram. The structural G_obs of "gram", "prefixK" and "gram_bias" is therefore the same for every
shape and Fourier encoding; differences between their readouts are differences of power at a finite
budget, not of what the lift structure lets them see. A lift that is not a permutation of
frequencies can separate them (rho(g) = -I fixes every Gram and negates every bias term);
`tests/readout/test_phi_dependence.py` plants one.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from symfast.readout.observables import extend_lift

__all__ = ["predict", "differing", "search", "KINDS"]

# The observables compared: the first-layer Gram, its bias-augmented form, and the deeper prefix Grams
# (which share the first-layer Gram's lifts, so "prefix2" stands for every K >= 2).
KINDS = ("gram", "gram_bias", "prefix2")


def predict(pe, shape, candidates, kinds=KINDS) -> pd.DataFrame:
    """Predicted visibility of each exactly liftable candidate under each observable kind.

    Args:
        pe: an encoding with `.name` and `.lift(g)` (a [d, d] array, or None when g has no exact lift).
        shape: a `Shape` (its `.group` is G_true) with `.name`.
        candidates: group elements to predict for (those without an exact lift are left out).
        kinds: observable kinds ("gram", "gram_bias", "prefixK").

    Returns:
        One row per (observable, liftable candidate): shape, pe, observable, element, true_symmetry,
        implied (every H-invariant observable of this kind is g-invariant, H = liftable true elements)
        and visible = true_symmetry or implied (the predicted G_obs at infinite seeds).
    """
    from symfast.readout.readout import implied_by

    lifted = [(g, pe.lift(g)) for g in candidates]
    lifted = [(g, r) for g, r in lifted if r is not None]
    if not lifted:
        return pd.DataFrame(columns=["shape", "pe", "observable", "element", "true_symmetry", "implied", "visible"])
    true = np.array([g in shape.group for g, _ in lifted], dtype=bool)
    rows, done = [], {}
    for kind in kinds:
        rho = torch.tensor(np.stack([extend_lift(np.asarray(r, dtype=np.float64), kind) for _, r in lifted]))
        key = rho.numpy().tobytes()  # kinds with the same lifts (the Grams) share one computation
        if key not in done:
            done[key] = implied_by(rho, true) & ~true
        implied = done[key]
        rows += [dict(shape=shape.name, pe=pe.name, observable=kind, element=g.name, true_symmetry=bool(t),
                      implied=bool(i), visible=bool(t or i)) for (g, _), t, i in zip(lifted, true, implied)]
    return pd.DataFrame(rows)


def differing(pred: pd.DataFrame) -> pd.DataFrame:
    """The (shape, pe, element) rows of `predict`'s output whose visibility differs across observables,
    one column per observable (empty when every observable is predicted to see the same group)."""
    if pred.empty:
        return pd.DataFrame()
    wide = pred.pivot_table(index=["shape", "pe", "element"], columns="observable", values="visible",
                            aggfunc="first")
    return wide[wide.nunique(axis=1) > 1].reset_index()


def search(shapes, encodings, candidates, kinds=KINDS) -> pd.DataFrame:
    """`predict` over every (shape, encoding) of matching input dimension; shapes with a continuous
    group (a circle, a ball) are skipped (membership of a sampled element is not a finite test)."""
    parts = [predict(pe, s, candidates, kinds) for pe in encodings for s in shapes
             if getattr(s, "dim", 2) == pe.input_dim and not getattr(s.group, "continuous", False)]
    return pd.concat(parts, ignore_index=True) if parts else predict(None, None, [], kinds)
