"""`symfast reproduce [--quick]`: the three studies, and a report that answers.

Runs `symfast readout`, `symfast schur` and `symfast layerwise` into subfolders of --out
and writes report.md and report.html: run details, one verdict table (each checked claim
of the papers: expected, measured, held / missed / not comparable), then per study a short
explanation, its summary tables with a column glossary, and its figures. Full tables stay
as CSV beside it. A study that fails is reported as failed (the others still run) and the
command exits non-zero.
"""
from __future__ import annotations

import contextlib
import glob
import io
import os
import sys
import time

from symfast.commands import UsageError

NAME = "reproduce"
HELP = "run the three studies (readout, Schur ablations, layerwise actions) and write report.md / report.html"

# (study, title, argv for --quick, argv for the full run, what the study does); --out is appended.
STUDIES = [
    ("readout", "Symmetry readout from neural-field weights",
     ["readout", "--shapes", "triangle,square", "--pe", "dyadic,triaxis,rff", "--seeds", "16", "--steps", "400",
      "--points", "1024", "--sweep", "72", "--observable", "prefixes", "--quiet"],
     ["readout", "--observable", "prefixes", "--quiet"],
     "Seed ensembles of Fourier-encoded MLPs are fitted to the signed distance functions of shapes with known "
     "symmetry groups (Chiba, Sugiyama, Uranishi, arXiv 2607.03108). "
     "For every candidate element g of O(2) the readout scores how much the seed-mean first-layer Gram "
     "W1ᵀW1 changes under the exact lift ρ(g) of g through the encoding, and compares the score with a "
     "split-half noise floor of the seeds. G_obs (observed) must lie inside G_lift ∩ G_true: elements the "
     "encoding lifts exactly and that are true symmetries of the shape."),
    # readout3d: the same readout on solids (O(3) candidates O_h ∪ I_h); --quick is sized to ~1 minute on 2 cores.
    ("readout3d", "Symmetry readout on solids (3D)",
     ["readout", "--dim", "3", "--seeds", "6", "--steps", "120", "--points", "512", "--hidden", "32,32", "--sweep", "24",
      "--quiet"],
     ["readout", "--dim", "3", "--quiet"],
     "The readout on 3D neural fields: seed ensembles fitted to the SDFs of the cube, tetrahedron, octahedron and "
     "icosahedron under four encodings of R³ (dyadic3: x, y, z axes; cube4: the cube's four three-fold axes; "
     "ico6: the icosahedron's six five-fold axes; rff3: random features). Candidates are the 144 elements of "
     "O_h ∪ I_h. The expected G_obs per (solid, encoding) is G_lift ∩ G_true, computed from the exact lifts and "
     "the solid's declared group; e.g. a dyadic PE lifts O_h only, so it structurally hides the icosahedron's "
     "five-fold rotations, as it hides the triangle's 120° rotations in 2D."),
    # schur: the full run is the paper's experiment (45 models at 30 x 128 batches; about 65 min of one
    # idle core, extrapolated from one measured model per task); --quick trains 16 small-budget models and
    # keeps unconverged ones, labelled, so that the tables are not empty.
    ("schur", "Schur ablations of recurrent weights",
     ["schur", "--task", "all", "--hidden", "64", "--construction", "orthogonal,cayley", "--seeds", "2",
      "--epochs", "6", "--batches", "64", "--include-unconverged", "--quiet"],
     ["schur", "--task", "all", "--quiet"],
     "Tanh RNNs are trained on four tasks; the recurrent matrix is put into ordered real Schur form "
     "W = Q T Qᵀ, its eigenvalues split into a leading sector R (|λ| ≥ α ρ(W)) and the rest C, and the "
     "coupling blocks T_RR, T_C→R and T_CC of the strictly block-upper part are zeroed, alone and together, "
     "with input and readout weights fixed (\"Task-Restricted Symmetries in Recurrent Weight Space\", "
     "arXiv 2606.18457). ΔFVU is the change in the fraction of variance unexplained; the random control "
     "perturbs W by a random matrix of the same Frobenius norm."),
    ("layerwise", "Layerwise equivariance: latent actions of MLPs, CNNs and attention",
     ["layerwise", "--suite", "--quick"],
     ["layerwise", "--suite", "--steps", "1500"],
     "Networks trained to be invariant or equivariant to a horizontal flip of their input images should carry, "
     "when their parameters are identifiable, a group action on every hidden layer that makes each layer "
     "equivariant (\"Identifiable Equivariant Networks are Layerwise Equivariant\", Shahverdi, Marchetti, "
     "Bökman, Kohn). The action is recovered layer by layer as a signed (tanh) or positively scaled (ReLU) "
     "permutation of neurons by linear assignment; its weight-level error is read against random permutations."),
]

READOUT_GLOSSARY = {
    "G_obs": "elements whose score passes the decision rule (observed in the weights)",
    "G_lift_and_true": "elements the encoding lifts exactly and that are true symmetries of the shape",
    "match": "whether G_obs equals G_lift ∩ G_true",
    "violations": "observed elements outside G_lift ∩ G_true",
    "true_not_liftable": "true symmetries of the shape that the encoding cannot lift exactly",
    "passes_best_lift": "elements that pass the same test under their best orthogonal (Procrustes) lift",
    "hidden_under_best_lift": "true, non-liftable elements that fail even under their best orthogonal lift: "
                              "hidden by the encoding, not only by the exact-lift requirement",
    "approx_violations": "elements passing under their best lift that are not true symmetries",
    "observable": "prefixK: Gram of the weight prefix W_K ... W_1 (prefix1 is the first-layer Gram)",
}

READOUT3D_GLOSSARY = {
    "G_true": "declared symmetries of the solid among the candidates", "G_lift": "elements the encoding lifts exactly",
    "G_lift_and_true": "the expected G_obs", "G_obs": "elements observed (decision rule, exact lifts)",
    "match": "G_obs equals G_lift ∩ G_true", "true_not_liftable": "true symmetries without an exact lift",
    "hidden_under_best_lift": "of those, failing even under their best orthogonal lift",
    "liftable_false": "liftable non-symmetries", "liftable_false_rejected": "of those, rejected",
}

# Captions of the figures (by file name), in the order they are shown; figures not listed follow.
_FILTERS = ("grouped by the orbit of the recovered flip action on the first hidden layer; 's+' / 's−' is the "
            "sign with which the flip maps a unit to its partner (symmetric: s+, antisymmetric: s−); grey "
            "pixels are never lit by the data.")
FIGURE_CAPTIONS = {
    # readout
    "summary_grid.png": "Observed vs expected over the whole grid: per shape and (encoding, observable), how many "
                        "of the expected elements (G_lift ∩ G_true) were observed, which were missed, and any "
                        "extra (a violation of G_obs ⊆ G_lift ∩ G_true).",
    "heatmap.png": "The decision per element: colour = Holm-adjusted p-value of 'g is a symmetry of the weights', "
                   "the colour bar's black line is the level alpha (above: observed). Amber boxes mark true symmetries; "
                   "hatching marks elements without an exact lift, so a hatched box is a true symmetry the "
                   "encoding hides.",
    "sweep.png": "Rotation sweep: score over its lift-only null against the rotation angle (dips = symmetries); "
                 "dashed: residual of the least-squares lift (0 where the encoding lifts the rotation exactly).",
    "fields.png": "Fitted zero-level sets f = 0 of the first members (dashed) beside the true boundary (black), "
                  "per shape and encoding: what the weights being read actually represent.",
    "loss.png": "Readout training loss per (encoding, shape): median over the ensemble's members, band = min to max.",
    # schur
    "schur_ablation.png": "Effect of zeroing each coupling block, for every alpha, with 95% intervals over seeds "
                          "and single seeds as dots, next to the equal-norm random control (open squares); "
                          "right: eigenvalues of every seed over rho(W) with the cuts alpha rho. Notes state "
                          "empty sectors and exactly normal matrices (every ablation a no-op).",
    "schur_T.png": "|entries| of the ordered real Schur form T (first seed per setting); blue lines separate the "
                   "R sector (|lambda| >= alpha rho) from C, so T_RR is the upper triangle of the top-left "
                   "block, T_C->R the top-right block and T_CC the upper triangle of the bottom-right block.",
    "schur_loss.png": "RNN training loss per (task, construction, H): median over seeds of a running mean, "
                      "band = min to max.",
    "schur_stabilisers.png": "Share of seeds where each ablation is an eps-stabiliser (behaviour kept), per "
                             "alpha; grey: no-op (nothing removed).",
    "schur_subspace.png": "Which predictor ranks the damage of an ablation: Spearman correlation with ΔFVU "
                          "(95% bootstrap) and the scatter behind each.",
    # layerwise
    "filters_equivariant.png": "First-layer filters of the flip-equivariant MLP classifier, " + _FILTERS,
    "filters_control.png": "First-layer filters of the control MLP (no equivariance loss), " + _FILTERS,
    "filters_cnn_equivariant.png": "First-layer kernels of the flip-equivariant CNN, " + _FILTERS,
    "filters_cnn_control.png": "First-layer kernels of the control CNN, " + _FILTERS,
    "regimes.png": "Autoencoders with the equivariance loss: layer-1 error of the recovered action against the "
                   "near-linear fraction of tanh units, and the units per orbit type, per input scale s and "
                   "weight decay wd.",
}


def add_arguments(p) -> None:
    p.add_argument("--quick", action="store_true", help="small settings: a few minutes on 2 CPU cores (longer on a busy machine)")
    p.add_argument("--out", default="results/reproduce", help="output directory")
    p.add_argument("--only", default=None, help="comma-separated subset of: readout,readout3d,schur,layerwise")


def _readout_section(sub: str, section):
    """Summary table, verdicts and figures of `symfast readout` from the files it wrote."""
    import pandas as pd

    from symfast.readout.claims import readout_claims

    table_path, summary_path = os.path.join(sub, "readout.csv"), os.path.join(sub, "summary.csv")
    if not (os.path.exists(table_path) and os.path.exists(summary_path)):
        return []
    table = pd.read_csv(table_path)
    summary = pd.read_csv(summary_path, keep_default_na=False)
    if {"G_obs", "G_lift_and_true"} <= set(summary.columns):
        summary["match"] = [set(a.split()) == set(b.split()) for a, b in zip(summary["G_obs"],
                                                                              summary["G_lift_and_true"])]
    section.tables.append(("Observed vs expected symmetries per (shape, encoding)", summary,
                           {k: v for k, v in READOUT_GLOSSARY.items() if k in summary.columns}))
    _readout_figures(sub, summary)
    for name in ("summary_grid.png", "heatmap.png", "sweep.png", "fields.png", "loss.png"):
        if os.path.exists(os.path.join(sub, name)):
            section.figures.append((os.path.join(sub, name), FIGURE_CAPTIONS[name]))
    section.text.append("Full per-element table: `readout.csv` (score, p-value, threshold, margin, best-lift score, "
                        "lift residual per observable).")
    kinds = list(dict.fromkeys(table["observable"])) if "observable" in table.columns else []
    if len(kinds) > 1:  # the verdicts are read on the first-layer Gram, the readout's default observable
        main = "gram" if "gram" in kinds else kinds[0]
        section.text.append(f"Verdicts are read on `{main}`; the other observables ({', '.join(kinds[1:])}) are "
                            "in the tables.")
        table = table[table["observable"] == main]
    return readout_claims(table)


def _readout3d_section(sub: str, section):
    """Counts of the hierarchy's sets per (solid, encoding), verdicts and figures of `symfast readout --dim 3`."""
    import pandas as pd

    from symfast.readout.claims import readout3d_claims
    from symfast.readout.readout import Readout

    table_path = os.path.join(sub, "readout.csv")
    if not os.path.exists(table_path):
        return []
    table = pd.read_csv(table_path)
    counts = Readout(table, pd.DataFrame()).counts()
    section.tables.append(("Sizes of the hierarchy's sets per (solid, encoding) among the 144 candidates", counts,
                           READOUT3D_GLOSSARY))
    for name, caption in (("heatmap3d.png", "Scores per element of O_h ∪ I_h (columns) and solid (rows), per "
                                            "encoding; dots: observed; x: not liftable; red ticks: the expected G_obs."),
                          ("level_sets.png", "Fitted zero-level set (one model) beside the true solid."),
                          ("sdf_slices.png", "SDF slice z = 0: true, fitted, difference."),
                          ("sweep.png", "Rotation sweep about the z axis: score against angle.")):
        if os.path.exists(os.path.join(sub, name)):
            section.figures.append((os.path.join(sub, name), caption))
    section.text.append("Full per-element table: `readout.csv`; per-set element names: `summary.csv`.")
    return readout3d_claims(table[table["observable"] == table["observable"].iloc[0]])
def _readout_figures(sub: str, summary) -> None:
    """The grid summary, fitted zero-level sets and loss curves, from the files `symfast readout` wrote."""
    from symfast.readout import plots
    from symfast.readout.ensemble import Ensemble

    if {"G_obs", "G_lift_and_true"} <= set(summary.columns):
        plots.sweep_summary(summary, os.path.join(sub, "summary_grid.png"))
    paths = [os.path.join(sub, f"ensemble_{pe}.pt") for pe in dict.fromkeys(summary.get("pe", []))]
    ensembles = [Ensemble.load(p) for p in paths if os.path.exists(p)]
    if ensembles:
        plots.zero_level_sets(ensembles, os.path.join(sub, "fields.png"))
        plots.loss_curves(ensembles, os.path.join(sub, "loss.png"))


def _layerwise_claims(sub: str) -> list:
    """The layerwise suite's numbers (`results.json`) as verdict rows."""
    import json

    from symfast.layerwise.claims import layerwise_claims

    path = os.path.join(sub, "results.json")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return layerwise_claims(json.load(f))


def _schur_claims(sub: str) -> list:
    """The Schur study's comparison with the paper (`schur_paper_comparison.csv`) as verdict rows; the
    settings this run did not cover are counted in one row instead of listed."""
    import math

    import pandas as pd

    from symfast.report import Claim

    path = os.path.join(sub, "schur_paper_comparison.csv")
    if not os.path.exists(path):
        return []
    cmp = pd.read_csv(path)
    out, skipped = [], cmp[cmp["verdict"] == "not comparable"]
    for r in cmp[cmp["verdict"] != "not comparable"].itertuples(index=False):
        paper = "" if math.isnan(r.paper) else f"paper {r.paper:.3g}"
        ours = f"{r.ours:.3g}" + (f" [{r.lo:.3g}, {r.hi:.3g}]" if math.isfinite(r.lo) and math.isfinite(r.hi) else "")
        out.append(Claim("schur", f"{r.table}: {r.setting}, {r.subset}, {r.metric}", paper or f"{r.subset} first",
                         f"{ours}, n = {r.n}", "held" if r.verdict == "held" else "missed", str(r.reason)))
    if len(skipped):
        untrained = skipped["reason"].astype(str).str.startswith("no converged model")
        parts = [f"{int(untrained.sum())} without a converged model at their settings"] if untrained.any() else []
        if (~untrained).any():
            parts.append(f"{int((~untrained).sum())} whose intervals are too wide or rankings unresolved")
        out.append(Claim("schur", f"{len(skipped)} further numbers and claims of the paper", "paper values",
                         "; ".join(parts), "not comparable",
                         "see schur_paper_comparison.csv; the full run trains the paper's settings and seeds"))
    return out


def run(args) -> int:
    from symfast.cli import main as cli_main
    from symfast.commands.readout import _check_out
    from symfast.report import Section, read_claims, run_details, write_report

    _check_out(args.out)
    names = [s[0] for s in STUDIES]
    only = names if not args.only else [n.strip() for n in args.only.split(",") if n.strip()]
    for n in only:
        if n not in names:
            raise UsageError(f"unknown study {n!r}; choose from {', '.join(names)}")
    sections, claims, failed = [], [], []
    t_all = time.perf_counter()
    for name, title, quick, full, intro in STUDIES:
        if name not in only:
            continue
        sub = os.path.join(args.out, name)
        argv = (quick if args.quick else full) + ["--out", sub]
        print(f"== {name}: symfast {' '.join(argv)}", file=sys.stderr)
        buf = io.StringIO()
        t = time.perf_counter()
        try:
            with contextlib.redirect_stdout(buf):
                rc = cli_main(argv)
        except Exception as e:  # a failed study must not lose the others' results
            rc, buf = 1, io.StringIO(buf.getvalue() + f"\n{type(e).__name__}: {e}\n")
        seconds = time.perf_counter() - t
        text = buf.getvalue()
        os.makedirs(sub, exist_ok=True)
        with open(os.path.join(sub, "stdout.txt"), "w") as f:
            f.write(text)
        if rc != 0:
            failed.append(name)
        section = Section(title, [intro], command=f"symfast {' '.join(argv)}", seconds=seconds, ok=rc == 0)
        study_claims = (_readout_section(sub, section) if name == "readout"
                        else _readout3d_section(sub, section) if name == "readout3d"
                        else _schur_claims(sub) if name == "schur"
                        else _layerwise_claims(sub) if name == "layerwise" else [])
        study_claims += read_claims(os.path.join(sub, "claims.csv"))
        if name not in ("readout", "readout3d"):
            section.preformatted = text.strip()[-40000:]
        shown = {os.path.abspath(f) for f, _ in section.figures}
        order = {n: k for k, n in enumerate(FIGURE_CAPTIONS)}
        for fig in sorted(glob.glob(os.path.join(sub, "**", "*.png"), recursive=True),
                          key=lambda f: (order.get(os.path.basename(f), len(order)), f)):
            if os.path.abspath(fig) not in shown:
                section.figures.append((fig, FIGURE_CAPTIONS.get(os.path.basename(fig), os.path.basename(fig))))
        claims += study_claims
        sections.append(section)
        print(f"   {name}: {'ok' if rc == 0 else 'FAILED'} in {seconds:.0f}s", file=sys.stderr)
    details = run_details(time.perf_counter() - t_all)
    details["settings"] = "--quick" if args.quick else "full"
    md, page = write_report(args.out, f"symfast reproduce{' --quick' if args.quick else ''}", details, claims,
                            sections)
    print(f"report: {md} and {page}" + (f" (failed: {', '.join(failed)})" if failed else ""))
    return 1 if failed else 0
