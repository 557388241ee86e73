"""`Readout`: the result of `symfast.readout` (tables of scores and decisions per shape, encoding,
observable and element) and its summaries, reports and plots."""
from __future__ import annotations

import html

import numpy as np
import pandas as pd

from symfast.groups import Group, as_element

__all__ = ["Readout"]


class Readout:
    """Result of `symfast.readout.readout`: `.table` (one row per shape, pe, observable, element),
    `.sweep` (rotation-sweep rows), `.observed(shape)`, `.violations`, plots."""

    def __init__(self, table: pd.DataFrame, sweep: pd.DataFrame, elements: dict | None = None):
        self.table = table
        self.sweep = sweep
        # name -> element of the candidates read (3D names carry axes to 4 digits, so parsing a name
        # back gives the element only to ~1e-4; these are the exact ones)
        self.elements = dict(elements or {})

    def __repr__(self) -> str:
        """One line per (shape, encoding, observable): G_obs against G_lift ∩ G_true, sizes only."""
        if self.table.empty:
            return "Readout(empty)"
        lines = [f"Readout: {self.table['shape'].nunique()} shape(s) x {self.table['pe'].nunique()} encoding(s) x "
                 f"{self.table['observable'].nunique()} observable(s), {self.table['element'].nunique()} candidates; "
                 f"{len(self.violations)} violation(s) of G_obs ⊆ G_lift ∩ G_true"]
        for _, r in self.counts().iterrows():
            lines.append(f"  {r['shape']} / {r['pe']} / {r['observable']}: |G_obs| = {r['G_obs']}, "
                         f"|G_lift ∩ G_true| = {r['G_lift_and_true']}" + ("" if r["match"] else " (differ)"))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """Notebook view: the summary table (the hierarchy's sets by element names per row)."""
        head = self.__repr__().splitlines()[0]
        return f"<p>{html.escape(head)}</p>" + self.summary().to_html(index=False)

    @property
    def dim(self) -> int:
        """2 when the candidates are elements of O(2), 3 for O(3) (read from their matrices)."""
        g = next(iter(self.elements.values()), None)
        if g is None:
            g = as_element(self.table["element"].iloc[0])
        return g.matrix.shape[0]

    def observed(self, shape, pe: str | None = None, observable: str | None = None) -> Group:
        """G_obs for a shape (object or name); pe/observable select when several were read."""
        name = getattr(shape, "name", shape)
        t = self.table[self.table["shape"] == name]
        if t.empty:
            raise ValueError(f"shape {name!r} is not in this readout; have {sorted(self.table['shape'].unique())}")
        for col, val in (("pe", pe), ("observable", observable)):
            if val is not None:
                t = t[t[col] == val]
            elif t[col].nunique() > 1:
                raise ValueError(f"this readout has several values of {col!r}: {sorted(t[col].unique())}; pass {col}=")
        return Group([self.elements.get(e) or as_element(e) for e in t.loc[t["observed"], "element"]],
                     name=f"G_obs({name})")

    @property
    def violations(self) -> pd.DataFrame:
        """Rows observed but not in G_lift ∩ G_true (the hierarchy says there should be none)."""
        t = self.table
        return t[t["observed"] & ~(t["liftable"] & t["true_symmetry"])]

    def summary(self) -> pd.DataFrame:
        """One row per (shape, pe, observable): the hierarchy's sets by element names.

        Columns: G_obs; G_lift_and_true; true_not_liftable (G_true minus G_lift among the
        candidates); passes_best_lift (those that the same test accepts under their best
        orthogonal lift); hidden_under_best_lift (those it rejects: hidden by the encoding, not
        only by the exact-lift requirement); violations (observed outside G_lift ∩ G_true);
        approx_violations (passing under the best lift but not a true symmetry)."""
        rows = []
        for key, t in self.table.groupby(["shape", "pe", "observable"], sort=False):
            true = t["true_symmetry"].astype("boolean").fillna(False).astype(bool)
            lift, obs, approx = t["liftable"].astype(bool), t["observed"], t["approx_observed"]

            def names(mask):
                return " ".join(t.loc[mask, "element"])

            rows.append(dict(zip(["shape", "pe", "observable"], key), G_obs=names(obs),
                             G_lift_and_true=names(lift & true), true_not_liftable=names(true & ~lift),
                             passes_best_lift=names(true & ~lift & approx),
                             hidden_under_best_lift=names(true & ~lift & ~approx),
                             violations=int((obs & ~(lift & true)).sum()),
                             approx_violations=int((approx & ~true).sum())))
        return pd.DataFrame(rows)

    def counts(self) -> pd.DataFrame:
        """One row per (shape, pe, observable): sizes of the hierarchy's sets among the candidates.

        Columns: candidates; G_true; G_lift; G_lift_and_true (the expected G_obs); G_obs; match
        (G_obs == G_lift ∩ G_true as sets); true_not_liftable; passes_best_lift; hidden_under_best_lift;
        liftable_false (liftable non-symmetries, which the rule must reject); liftable_false_rejected;
        implied (liftable non-symmetries that no Gram-type observable can tell from G_lift ∩ G_true,
        see `implied_by`); match_with_implied (G_obs == (G_lift ∩ G_true) ∪ implied); violations
        (observed outside G_lift ∩ G_true)."""
        rows = []
        for key, t in self.table.groupby(["shape", "pe", "observable"], sort=False):
            true = t["true_symmetry"].astype("boolean").fillna(False).astype(bool)
            lift, obs, approx = t["liftable"].astype(bool), t["observed"].astype(bool), t["approx_observed"]
            implied = t["implied"].astype(bool) if "implied" in t else pd.Series(False, index=t.index)
            rows.append(dict(zip(["shape", "pe", "observable"], key), candidates=len(t), G_true=int(true.sum()),
                             G_lift=int(lift.sum()), G_lift_and_true=int((lift & true).sum()), G_obs=int(obs.sum()),
                             match=bool((obs == (lift & true)).all()), true_not_liftable=int((true & ~lift).sum()),
                             passes_best_lift=int((true & ~lift & approx).sum()),
                             hidden_under_best_lift=int((true & ~lift & ~approx).sum()),
                             liftable_false=int((lift & ~true).sum()),
                             liftable_false_rejected=int((lift & ~true & ~obs).sum()),
                             implied=int(implied.sum()),
                             match_with_implied=bool((obs == ((lift & true) | implied)).all()),
                             violations=int((obs & ~(lift & true)).sum())))
        return pd.DataFrame(rows)

    def report(self, max_names: int = 16) -> str:
        """The hierarchy in words, one paragraph per (shape, pe, observable), for reports.

        Sets of more than `max_names` elements (3D groups have up to 120) are given by their size."""
        t = self.table
        rotating = t[t["liftable"].astype(bool) & ~t["lift_permutation"].astype(bool)] \
            .groupby(["shape", "pe", "observable"])["element"].apply(list)
        lines = []
        for _, r in self.summary().iterrows():
            head = f"{r['shape']} / {r['pe']} / {r['observable']}"

            def fmt(col):
                names = r[col].split()
                return f"{{{r[col]}}}" if len(names) <= max_names else f"{len(names)} elements"

            lines.append(f"- {head}: G_obs = {fmt('G_obs')}, G_lift ∩ G_true = {fmt('G_lift_and_true')}"
                         + (f", {r['violations']} violation(s)" if r["violations"] else ""))
            names = rotating.get((r["shape"], r["pe"], r["observable"]), [])
            if names:
                lines.append(f"  exact lift not a signed permutation: {{{' '.join(names)}}}; Adam training does "
                             f"not respect it, so its decision tests an approximate symmetry")
            if r["true_not_liftable"]:
                hidden, passing = r["hidden_under_best_lift"], r["passes_best_lift"]
                lines.append(f"  true but not liftable: {fmt('true_not_liftable')}; "
                             + (f"hidden even under their best orthogonal lift: {fmt('hidden_under_best_lift')}"
                                if hidden else "none stays hidden under its best orthogonal lift")
                             + (f"; passes under its best lift: {fmt('passes_best_lift')}" if passing and hidden
                                else ""))
        return "\n".join(lines)

    def separation(self) -> pd.DataFrame:
        """Which observable separates true from false liftable elements best, per encoding.

        Gap per (shape, pe, observable): the smallest z (null-sd units above the null mean) of a
        liftable false element minus the largest z of a liftable true one; the row per (pe,
        observable) keeps the worst shape. Larger is better; `best` marks the maximum per pe."""
        rows = []
        for (pe, obs), t in self.table.groupby(["pe", "observable"], sort=False):
            gaps = []
            for _, ts in t[t["liftable"].astype(bool)].groupby("shape"):
                true = ts["true_symmetry"].astype("boolean").fillna(False).astype(bool)
                if true.any() and (~true).any():
                    gaps.append(ts.loc[~true, "z"].min() - ts.loc[true, "z"].max())
            rows.append(dict(pe=pe, observable=obs, min_gap_z=min(gaps) if gaps else np.nan,
                             n_shapes=len(gaps)))
        out = pd.DataFrame(rows)
        if not out.empty:
            out["best"] = out["min_gap_z"] == out.groupby("pe")["min_gap_z"].transform("max")
        return out

    def plot_heatmap(self, path=None, axes=None):
        """The decision per (shape, element) and encoding (`symfast.readout.plots.plot_heatmap`; O(3) candidates:
        `symfast.readout.plots3d.plot_score_heatmap`); returns the figure."""
        if self.dim == 3:  # O(3) elements: ~144 columns
            from symfast.readout.plots3d import plot_score_heatmap

            return plot_score_heatmap(self.table, path)
        from symfast.readout.plots import plot_heatmap

        return plot_heatmap(self.table, path, axes=axes)

    def plot_sweep(self, path=None, axes=None):
        """Score and lift residual against rotation angle, per encoding, with the decision threshold of
        the candidates' test; returns the figure."""
        if self.sweep.empty:
            raise ValueError("this readout has no rotation sweep (it was read with sweep=0); "
                             "read again with sweep=360 (or any positive number of angles) to plot it")
        from symfast.readout.plots import plot_sweep_curves

        return plot_sweep_curves(self.sweep, path, axes=axes, table=self.table)
