"""`symfast reproduce [--quick]`: the three studies, and a report that answers.

Runs `symfast readout`, `symfast schur` and `symfast layerwise` into subfolders of --out (and,
after a study, its `FOLLOW_UPS` into subfolders of the study's folder: the full run adds the
layerwise exactness sweeps, MLP and attention, and the identifiability sweep) and writes report.md and report.html: run details, one verdict table (each checked claim
of the papers: expected, measured, held / missed / not comparable), then per study a short
explanation, its summary tables with a column glossary, and its figures. Full tables stay
as CSV beside it. Rows from models that did not converge (or from budgets below a study's
calibrated range) are never held or missed: they are "not comparable", with the reason; the
header of a --quick report says what it can and cannot test (`QUICK_SCOPE`). A study that fails is reported as failed (the others still run) and the
command exits 1. Ctrl-C ends the run as an interruption, not a failure: the report is written with
the finished studies' verdicts, the interrupted study is marked "interrupted", and the command exits
130; rerunning the same command resumes from the studies' checkpoints.
"""
from __future__ import annotations

import contextlib
import glob
import io
import os
import sys
import time

from symfast.commands import UsageError
from symfast.report.texts import (FIGURE_CAPTIONS, GLOSSARY, INTROS, LAYERWISE_GLOSSARY, MISSING_FIGURES, QUICK_SCOPE,
                                  READOUT3D_CAPTIONS, READOUT3D_GLOSSARY, READOUT_GLOSSARY, SCHUR_GLOSSARY)

NAME = "reproduce"
INTERRUPTED = 130  # exit status of Ctrl-C (128 + SIGINT), as every symfast command
HELP = "run the three studies (readout, Schur ablations, layerwise actions) and write report.md / report.html"

# (study, argv for --quick, argv for the full run): argv[0] is the command, --out is appended. Titles
# and introductions: `symfast.report.texts.INTROS`.
STUDIES = [
    ("readout",
     ["readout", "--shapes", "triangle,square", "--pe", "dyadic,triaxis,rff", "--seeds", "16", "--steps", "400",
      "--points", "1024", "--sweep", "72", "--observable", "prefixes", "--quiet"],
     ["readout", "--observable", "prefixes", "--quiet"]),
    # readout3d: the same readout on solids (O(3) candidates O_h ∪ I_h); --quick is sized to ~1 minute on 2 cores.
    ("readout3d",
     ["readout", "--dim", "3", "--seeds", "6", "--steps", "120", "--points", "512", "--hidden", "32,32", "--sweep",
      "24", "--quiet"],
     ["readout", "--dim", "3", "--quiet"]),
    # schur: the full run is the paper's grid at 14 seeds (210 models: a paper number is tested only on
    # symfast.schur.paper.SCHUR_MIN_SEEDS = 10 converged seeds, and sine and context converge in about 4 of 5),
    # trained with the default recipe "converge"
    # (symfast.schur.recipes; "--recipe paper" is the paper's 30 x 128 batches, about 65 min of one idle core,
    # extrapolated from one measured model per task); --quick trains 16 small-budget models and
    # keeps unconverged ones, labelled, so that the tables are not empty (their rows are "not comparable");
    # 2 within-sector orders and a 3-point alpha grid keep the ordering analysis small.
    ("schur",
     ["schur", "--task", "all", "--hidden", "64", "--construction", "orthogonal,cayley", "--seeds", "2", "--epochs",
      "6", "--batches", "64", "--include-unconverged", "--n-orders", "2", "--alpha-grid", "0.85:0.95:0.05",
      "--recipe", "paper", "--quiet"],
     ["schur", "--task", "all", "--seeds", "14", "--quiet"]),
    ("layerwise",
     ["layerwise", "--suite", "--quick"],
     ["layerwise", "--suite", "--steps", "1500", "--seed-offset", "1000"]),  # fresh seeds: the bars of
    # `symfast.layerwise.claims` were fixed on the pilot seed 0, which no verdict reads (REPLICATE_SEED)
]

# Runs after a study, into a subfolder of its --out, whose verdict rows (claims.csv) join the study's:
# study -> [(subfolder, argv for --quick or None, argv for the full run, why --quick skips it)].
# The exactness sweep's verdicts are read on held-out seeds (1000, 1001, ...). `layerwise --exactness
# --quick` took 82 s (51 s CPU) on 2 busy cores, more than the quick reproduce should grow by, and its
# rows could only say "not comparable: not converged"; so --quick skips it and the report says so. The same
# holds for the attention sweep (`layerwise --exactness --model attention --quick`: 202 s, 41 s CPU, on 2 busy cores)
# and for the identifiability sweeps (`layerwise --identifiability --quick`: 47 s, 18 s CPU, on 2 busy cores;
# the matched one, `--identifiability --matched`, about 6 min of CPU per activation at full size).
FOLLOW_UPS = {
    # the MLP sweep with the 1000-pair L-BFGS polish: the run whose errors span 4 decades (about 40 min
    # of CPU per activation on the 2-core AVX2 machine, four activations)
    "layerwise": [("exactness", None, ["layerwise", "--exactness", "--polish", "1e5,1e7", "--polish-iters", "1500",
                                       "--polish-history", "1000"],
                   "the exactness sweep (layer-1 error against end-to-end error along a penalty sweep, verdicts on "
                   "held-out seeds) runs only in the full reproduce; its --quick form would add about a minute and "
                   "its rows could only be 'not comparable: not converged'"),
                  ("exactness_attention", None, ["layerwise", "--exactness", "--model", "attention"],
                   "the attention exactness sweep (head parameter error against end-to-end error, verdicts on "
                   "held-out seeds) runs only in the full reproduce; its --quick form's rows could only be 'not "
                   "comparable: not converged'"),
                  ("identifiability", None, ["layerwise", "--identifiability"],
                   "the identifiability sweep (layer-1 error / random of invariant MLPs against their near-linear "
                   "fraction over input scales x weight decays, verdicts on held-out seeds) runs only in the full "
                   "reproduce; its --quick form's rows could only be 'not comparable: not converged'"),
                  ("identifiability_matched", None, ["layerwise", "--identifiability", "--matched"],
                   "the identifiability comparison at matched end-to-end error (every net read where its "
                   "end-to-end error lands in a fixed band, verdicts on held-out seeds) runs only in the full "
                   "reproduce; its --quick form's rows could only be 'not comparable: not converged'")],
}


def add_arguments(p) -> None:
    p.add_argument("--quick", action="store_true", help="small settings: a few minutes on 2 CPU cores (longer on a busy machine)")
    p.add_argument("--out", default="results/reproduce", help="output directory")
    p.add_argument("--only", default=None, help="comma-separated subset of: readout,readout3d,schur,layerwise (default: all four)")


def _readout_section(sub: str, section):
    """Summary table, verdicts and figures of `symfast readout` from the files it wrote."""
    import pandas as pd

    from symfast.readout.claims import phi_dependence_claim, readout_claims
    from symfast.readout.readout import MODEL_AGGREGATE_LIMIT

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
    refused = _readout_figures(sub, summary)
    if refused:
        section.text.append(f"Fitted zero-level and loss figures not drawn: {refused}")
    for name in ("summary_grid.png", "heatmap.png", "sweep.png", "fields.png", "loss.png"):
        if os.path.exists(os.path.join(sub, name)):
            section.figures.append((os.path.join(sub, name), FIGURE_CAPTIONS[name]))
    section.text.append("Full per-element table: `readout.csv` (score, p-value, threshold, margin, best-lift score, "
                        "lift residual per observable).")
    section.text.append("These verdicts use the seed-ensemble readout. Single-model readouts, measured on the "
                        "calibration grid (docs: readout decisions): " + MODEL_AGGREGATE_LIMIT + ".")
    kinds = list(dict.fromkeys(table["observable"])) if "observable" in table.columns else []
    full, steps = table, _trained_steps(sub)
    if len(kinds) > 1:  # the verdicts are read on the first-layer Gram, the readout's default observable
        main = "gram" if "gram" in kinds else kinds[0]
        section.text.append(f"Verdicts are read on `{main}`; the other observables ({', '.join(kinds[1:])}) are "
                            "in the tables and in the Phi-dependence row.")
        table = table[table["observable"] == main]
    claims = readout_claims(table, steps=steps)
    if "implied" in full.columns:
        claims.append(phi_dependence_claim(full, _phi_search(), steps=steps))
    return claims


def _phi_search():
    """The structural Phi-dependence search over the calibration grid (7 shapes x 5 encodings; seconds)."""
    from symfast.readout import calibration, phi_dependence

    shapes = calibration.grid_shapes()
    return phi_dependence.search(shapes, calibration.grid_encodings(), calibration.candidates_for(shapes))


def _trained_steps(sub: str) -> int | None:
    """The fewest training steps among the ensembles `symfast readout` saved in `sub` (None if unknown).

    The files are read as data (`symfast._io.safe_load`, never unpickling code): a results folder may
    come from someone else. A file that is not a readable ensemble leaves the steps unknown."""
    from symfast._io import safe_load

    steps = []
    for path in glob.glob(os.path.join(sub, "ensemble_*.pt")):
        try:
            d = safe_load(path, "ensemble")
        except (OSError, ValueError):
            return None
        config = d.get("config") if isinstance(d, dict) else None
        step = config.get("steps") if isinstance(config, dict) else None
        if not isinstance(step, int) or isinstance(step, bool):
            return None
        steps.append(step)
    return min(steps) if steps else None


def _readout3d_section(sub: str, section):
    """Counts of the hierarchy's sets per (solid, encoding), verdicts and figures of `symfast readout --dim 3`."""
    import pandas as pd

    from symfast.readout.claims import readout3d_claims
    from symfast.readout.readout import Readout

    for name, caption in READOUT3D_CAPTIONS.items():
        if _missing_extra(name):
            section.notes.append(MISSING_FIGURES[name][1])
        elif os.path.exists(os.path.join(sub, name)):
            section.figures.append((os.path.join(sub, name), caption))
    table_path = os.path.join(sub, "readout.csv")
    if not os.path.exists(table_path):
        return []
    table = pd.read_csv(table_path)
    counts = Readout(table, pd.DataFrame()).counts()
    section.tables.append(("Sizes of the hierarchy's sets per (solid, encoding) among the 144 candidates", counts,
                           READOUT3D_GLOSSARY))
    section.text.append("Full per-element table: `readout.csv`; per-set element names: `summary.csv`.")
    return readout3d_claims(table[table["observable"] == table["observable"].iloc[0]], steps=_trained_steps(sub))


def _missing_extra(name: str) -> bool:
    """Whether the figure `name` needs an optional extra that is not installed (then it is left out with a
    line in the report, never replaced by another figure or a stale file)."""
    import importlib.util

    need = MISSING_FIGURES.get(name)
    return need is not None and importlib.util.find_spec(need[0]) is None


def _schur_section(sub: str, section) -> None:
    """Convergence and block-effect tables of `symfast schur` from its CSVs; no-op constructions in one line."""
    from symfast.report.tables import schur_tables
    from symfast.schur.targets import targets_table

    tables, notes = schur_tables(sub)
    target = targets_table(sub)
    if target is not None:  # beside the convergence table: our targets against the paper's full models
        tables.insert(1, target[:2])
        notes.append(target[2])
    for caption, df in tables:
        section.tables.append((caption, df, {k: v for k, v in SCHUR_GLOSSARY.items()
                                             if k in df.columns or k == "task / construction / H"}))
    section.notes += notes
    section.text.append("Every subset and alpha: `schur_ablation_raw.csv`, `schur_ablation_summary.csv`; the study's "
                        "printed tables: `schur/stdout.txt`.")


def _layerwise_section(sub: str, section) -> None:
    """The layerwise suite's tables (its own Markdown, rendered) and their column glossary."""
    from symfast.report.tables import layerwise_markdown

    text = layerwise_markdown(sub)
    if text:
        section.markdown.append(text)
        section.markdown.append("Columns:\n\n" + "\n".join(f"- `{k}`: {v}" for k, v in LAYERWISE_GLOSSARY.items()))
    section.text.append("Numbers behind the tables: `layerwise/results.json`; printed output: `layerwise/stdout.txt`.")


def _readout_figures(sub: str, summary) -> str:
    """The grid summary, fitted zero-level sets and loss curves, from the files `symfast readout` wrote;
    returns why the ensemble figures were not drawn ('' when they were): a damaged or foreign ensemble
    file is named in the report, never a traceback that loses it."""
    from symfast.readout import plots
    from symfast.nn.ensemble import Ensemble

    if {"G_obs", "G_lift_and_true"} <= set(summary.columns):
        plots.plot_sweep_summary(summary, os.path.join(sub, "summary_grid.png"))
    paths = [os.path.join(sub, f"ensemble_{pe}.pt") for pe in dict.fromkeys(summary.get("pe", []))]
    ensembles = []
    for path in paths:
        if os.path.exists(path):
            try:
                ensembles.append(Ensemble.load(path))
            except ValueError as e:  # Ensemble.load refuses damaged or foreign files by ValueError
                return f"{path} was refused ({e})"
    if ensembles:
        plots.plot_zero_level_sets(ensembles, os.path.join(sub, "fields.png"))
        plots.plot_loss_curves(ensembles, os.path.join(sub, "loss.png"))
    return ""


def _layerwise_claims(sub: str) -> list:
    """The layerwise suite's numbers (`results.json`) as verdict rows."""
    import json

    from symfast.layerwise.claims import layerwise_claims

    path = os.path.join(sub, "results.json")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return layerwise_claims(json.load(f))


def _schur_claims(sub: str, include_unconverged: bool) -> list:
    """The Schur study's comparison with the paper (`schur_paper_comparison.csv`) as verdict rows.

    When the run kept unconverged models in its tables (`--include-unconverged`, as --quick does) and
    any model missed its convergence target (`schur_models.csv`), no row is held or missed: each
    becomes "not comparable: not converged"."""
    import pandas as pd

    from symfast.report.claim import not_comparable
    from symfast.schur.claims import schur_claims

    path = os.path.join(sub, "schur_paper_comparison.csv")
    claims = schur_claims(path) if os.path.exists(path) else []
    models = os.path.join(sub, "schur_models.csv")
    if include_unconverged and os.path.exists(models):
        ok = pd.read_csv(models)["converged"].astype(str).str.lower() == "true"
        if not ok.all():
            claims = not_comparable(claims, "not converged", f"{int((~ok).sum())} of {len(ok)} models missed their "
                                    "convergence target and entered the tables (--include-unconverged)")
    return claims


def run(args) -> int:
    from symfast.commands import layerwise, readout, schur
    from symfast.commands.readout import _check_out
    from symfast.commands.runner import invoke
    from symfast.report.render import Section, run_details, write_report

    command = {m.NAME: m for m in (readout, schur, layerwise)}
    _check_out(args.out)
    names = [s[0] for s in STUDIES]
    only = names if not args.only else [n.strip() for n in args.only.split(",") if n.strip()]
    for n in only:
        if n not in names:
            raise UsageError(f"unknown study {n!r}; choose from {', '.join(names)}")
    sections, claims, failed, interrupted = [], [], [], None
    t_all = time.perf_counter()
    for name, quick, full in STUDIES:
        if name not in only:
            continue
        title, intro = INTROS[name]
        sub = os.path.join(args.out, name)
        argv = (quick if args.quick else full) + ["--out", sub]
        print(f"== {name}: symfast {' '.join(argv)}", file=sys.stderr)
        buf = io.StringIO()
        t = time.perf_counter()
        runs, skipped = [argv], []
        for folder, quick_argv, full_argv, why in FOLLOW_UPS.get(name, []):
            follow = quick_argv if args.quick else full_argv
            if follow is None:
                skipped.append(why)
            else:
                runs.append(follow + ["--out", os.path.join(sub, folder)])
        rc = 0
        for run_argv in runs:
            if run_argv is not argv:
                print(f"== {name}: symfast {' '.join(run_argv)}", file=sys.stderr)
            try:
                with contextlib.redirect_stdout(buf):
                    rc = invoke(command[run_argv[0]], run_argv[1:])
            except KeyboardInterrupt:  # raised outside the study's own handler
                rc = INTERRUPTED
            except Exception as e:  # a failed study must not lose the others' results
                rc, buf = 1, io.StringIO(buf.getvalue() + f"\n{type(e).__name__}: {e}\n")
            if rc != 0:
                break
        seconds = time.perf_counter() - t
        text = buf.getvalue()
        os.makedirs(sub, exist_ok=True)
        with open(os.path.join(sub, "stdout.txt"), "w") as f:
            f.write(text)
        section = Section(title, [intro], command=" ; ".join(f"symfast {' '.join(a)}" for a in runs), seconds=seconds,
                          ok=rc == 0)
        section.text += [f"Skipped at --quick: {why}." for why in skipped]
        if rc == INTERRUPTED:  # Ctrl-C: not a failure; what the study checkpointed is kept for a rerun
            interrupted = name
            section.status = "interrupted"
            section.text.append("Interrupted (Ctrl-C) before this study finished: no tables or verdicts. Rerun the "
                                "same command; the study resumes from its checkpoints.")
            sections.append(section)
            print(f"   {name}: interrupted after {seconds:.0f}s", file=sys.stderr)
            break
        if rc != 0:
            failed.append(name)
        try:
            study_claims = _gather(name, sub, section, argv, [a[-1] for a in runs[1:]])
        except KeyboardInterrupt:
            interrupted, section.status = name, "interrupted"
            sections.append(section)
            break
        claims += study_claims
        sections.append(section)
        print(f"   {name}: {'ok' if rc == 0 else 'FAILED'} in {seconds:.0f}s", file=sys.stderr)
    details = run_details(time.perf_counter() - t_all)
    details["settings"] = "--quick" if args.quick else "full"
    if interrupted:
        details["status"] = f"interrupted during {interrupted} (rerun the same command to resume)"
    md, page = write_report(args.out, f"symfast reproduce{' --quick' if args.quick else ''}", details, claims,
                            sections, preamble=[QUICK_SCOPE] if args.quick else [], glossary=GLOSSARY)
    print(f"report: {md} and {page}" + (f" (failed: {', '.join(failed)})" if failed else ""))
    if interrupted:
        print(f"symfast reproduce: interrupted during {interrupted}; rerun the same command to resume",
              file=sys.stderr)
        return INTERRUPTED
    return 1 if failed else 0


def _gather(name: str, sub: str, section, argv: list, follow_ups=()) -> list:
    """A finished study's verdict rows, tables and figures into `section`; `follow_ups`: the folders of the
    FOLLOW_UPS this run ran (their claims.csv rows join the study's; folders from earlier runs are not read)."""
    from symfast.report.claim import read_claims

    if name == "readout":
        study_claims = _readout_section(sub, section)
    elif name == "readout3d":
        study_claims = _readout3d_section(sub, section)
    elif name == "schur":
        study_claims = _schur_claims(sub, "--include-unconverged" in argv)
        _schur_section(sub, section)
    else:
        study_claims = _layerwise_claims(sub)
        _layerwise_section(sub, section)
    study_claims += read_claims(os.path.join(sub, "claims.csv"))
    for folder in follow_ups:
        study_claims += read_claims(os.path.join(folder, "claims.csv"))
    not_run = [os.path.abspath(os.path.join(sub, f)) + os.sep for f, *_ in FOLLOW_UPS.get(name, [])
               if os.path.join(sub, f) not in follow_ups]  # an earlier run's output, not this run's
    shown = {os.path.abspath(f) for f, _ in section.figures}
    order = {n: k for k, n in enumerate(FIGURE_CAPTIONS)}
    for fig in sorted(glob.glob(os.path.join(sub, "**", "*.png"), recursive=True),
                      key=lambda f: (order.get(os.path.basename(f), len(order)), f)):
        base = os.path.basename(fig)
        if any(os.path.abspath(fig).startswith(d) for d in not_run):
            continue
        if os.path.abspath(fig) not in shown and not _missing_extra(base):
            section.figures.append((fig, FIGURE_CAPTIONS.get(base, base)))
    return study_claims
