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

# Captions of the figures the study commands write (by file name).
FIGURE_CAPTIONS = {
    "filters_equivariant.png": "First-layer filters of the flip-equivariant classifier, grouped by the orbit of "
                               "the recovered hidden action.",
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
    captions = {"heatmap.png": "Scores per element (columns) and (shape, encoding) (rows); observed elements are "
                               "marked. Low score = the Gram is unchanged by the element's lift.",
                "sweep.png": "Rotation sweep: score against rotation angle per (shape, encoding)."}
    for name, caption in captions.items():
        if os.path.exists(os.path.join(sub, name)):
            section.figures.append((os.path.join(sub, name), caption))
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
                        else _schur_claims(sub) if name == "schur" else [])
        study_claims += read_claims(os.path.join(sub, "claims.csv"))
        if name not in ("readout", "readout3d"):
            section.preformatted = text.strip()[-40000:]
        shown = {os.path.abspath(f) for f, _ in section.figures}
        for fig in sorted(glob.glob(os.path.join(sub, "**", "*.png"), recursive=True)):
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
