"""Write the generated population calibration page, docs/results/population/calibration.md, from the
files of a `symfast population` run and its held-out population.

    python docs/results/render_population.py DATA_DIR OUT_DIR                     # the page from the data
    python docs/results/render_population.py --collect MAIN HELDOUT DATA_DIR [COMMIT]  # refresh the data

The data (docs/results/population/data for the 10,000-field run, docs/results/population-*/data for
the runs on one family, at the adaptive budget or on the solids) holds `calibration.csv` as `symfast population ... --heldout
HELDOUT` wrote it in MAIN (rates of both populations, Wilson 95% intervals) and `run.json` (both
populations' settings, the command lines, the time each spent training and reading out summed from its
timing.csv, symfast version, the commit the runs used (COMMIT, default HEAD), the date MAIN finished,
the machine). The page is never edited by hand: tests/test_docs_population.py renders it again from the
data and requires the committed page to be byte-identical. The tables and the near-symmetry figure are
drawn by the library's own `symfast.readout.sweeps.rates.markdown` and `plot_near`, as in the run's own
calibration.md and near_symmetry.png.
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from datetime import datetime, timezone

import pandas as pd

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGE = "calibration.md"
FIGURE = "near_symmetry.png"
GOAL_HALF_WIDTH = 0.02  # the half-width every overall rate's 95% interval should stay under at N = 10,000


def _command(spec: dict, out: str, heldout: str | None = None) -> str:
    cmd = (f"symfast population {spec['seed']}:{spec['size']} --seeds {spec['seeds']} "
           f"--pe {','.join(e['name'] for e in spec['encodings'])} --steps {spec['steps']} --points {spec['points']} "
           f"--out {out}" + (f" --families {','.join(spec['families'])}" if spec.get("families") else "")
           + (" --budget auto" if spec.get("budget") == "auto" else "")
           + (f" --tolerance {spec['tolerance']:g}" if spec.get("tolerance") else "")
           + (f" --max-batch {spec['max_batch']}" if spec.get("max_batch", 256) != 256 else "")
           + (" --dim 3" if spec.get("dim", 2) == 3 else ""))
    return cmd + (f" --heldout {heldout}" if heldout else "")


def _timing(run_dir: str) -> dict:
    t = pd.read_csv(os.path.join(run_dir, "timing.csv"))
    return {"batches": len(t), "fields": int(t["models"].sum()),
            "train_seconds": round(float(t["train_seconds"].sum()), 1),
            "readout_seconds": round(float(t["readout_seconds"].sum()), 1)}


def _machine() -> str:
    model, isa = platform.processor() or "unknown CPU", ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            info = f.read()
        model = next(line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name"))
        isa = next((f", {name}" for flag, name in (("avx512f", "AVX-512"), ("avx2", "AVX2")) if f" {flag}" in info),
                   "")
    except (OSError, StopIteration):
        pass
    return f"{model}{isa}, {os.cpu_count()} cores"


def collect(main: str, heldout: str, data: str, commit: str | None = None) -> None:
    """Copy calibration.csv of `main` (a run made with --heldout) and describe both runs in run.json."""
    calib = os.path.join(main, "calibration.csv")
    if "heldout_rate" not in pd.read_csv(calib, nrows=1).columns:
        raise SystemExit(f"{calib} has no held-out columns: rerun `symfast population ... --heldout {heldout}`")
    specs = {}
    for key, d in (("main", main), ("heldout", heldout)):
        with open(os.path.join(d, "spec.json"), encoding="utf-8") as f:
            specs[key] = json.load(f)["spec"]
    sys.path.insert(0, REPO)
    from symfast import __version__

    if commit is None:
        try:
            commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                    check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            commit = "?"
    batches = [e.path for e in os.scandir(os.path.join(main, "batches")) if e.name.endswith(".pt")]
    finished = datetime.fromtimestamp(max(map(os.path.getmtime, batches)), timezone.utc)  # its last batch
    run = {"main": specs["main"], "heldout": specs["heldout"],
           "commands": [_command(specs["heldout"], "HELDOUT"), _command(specs["main"], "MAIN", "HELDOUT")],
           "timing": {"main": _timing(main), "heldout": _timing(heldout)},
           "symfast": __version__, "commit": commit, "date": finished.strftime("%Y-%m-%d %H:%M"),
           "machine": _machine()}
    if os.path.isdir(data):
        shutil.rmtree(data)
    os.makedirs(data)
    shutil.copyfile(calib, os.path.join(data, "calibration.csv"))
    with open(os.path.join(data, "run.json"), "w", encoding="utf-8") as f:
        json.dump(run, f, indent=2, sort_keys=True)
        f.write("\n")


def _load(data: str) -> tuple[dict, pd.DataFrame]:
    with open(os.path.join(data, "run.json"), encoding="utf-8") as f:
        run = json.load(f)
    return run, pd.read_csv(os.path.join(data, "calibration.csv"), dtype={"n": str, "epsilon": str})


def _time_line(run: dict) -> str:
    parts = []
    for key, label in (("main", "main"), ("heldout", "held-out")):
        t = run["timing"][key]
        total = t["train_seconds"] + t["readout_seconds"]
        split = ("the adaptive rule's training and readouts are not timed apart" if run[key].get("budget") == "auto"
                 else f"training {t['train_seconds']:.0f} s, readout {t['readout_seconds']:.0f} s = "
                      f"{100 * t['readout_seconds'] / total:.1f} %")
        parts.append(f"{label} population: {t['fields']} fields in {t['batches']} batches, {total:.0f} s "
                     f"({total / 60:.1f} min; {split})")
    return ("Time (summed from each run's timing.csv: training and readout of every batch, without start-up): "
            + "; ".join(parts) + ".")


def _interval_line(calib: pd.DataFrame) -> str:
    from symfast.readout.sweeps.rates import with_keys

    calib = with_keys(calib)
    overall = calib[(calib.family == "all") & (calib.element_kind == "all") & (calib.n == "all")
                    & (calib.epsilon == "all") & (calib.encoding == "all")]
    by_shape = "ci_low_shapes" in calib.columns
    half = lambda r, by="": (getattr(r, f"ci_high{by}") - getattr(r, f"ci_low{by}")) / 2  # noqa: E731
    judged = "_shapes" if by_shape else ""  # the goal is read on the honest intervals where there are some
    rows = [f"{r.metric} ±{half(r):.3f}" + (f" / ±{half(r, judged):.3f}" if by_shape else "")
            for r in overall.itertuples(index=False)]
    wide = [r.metric for r in overall.itertuples(index=False) if half(r, judged) > GOAL_HALF_WIDTH]
    verdict = (f"all under ±{GOAL_HALF_WIDTH}" if not wide else
               f"over ±{GOAL_HALF_WIDTH}: {', '.join(wide)} (too few trials of that kind in the population)")
    if not by_shape:
        return (f"Overall 95% interval half-widths: {', '.join(rows)}; {verdict}.{_by_design_line(calib)} The "
                "per-kind, per-n and per-epsilon rows rest on fewer trials and are wider.")
    return ("Overall 95% interval half-widths, counting elements as the trials / counting shapes (one seed "
            f"ensemble decides all of a shape's elements, so the second is the honest one): {', '.join(rows)}; read "
            f"on the intervals counting shapes, {verdict}.{_by_design_line(calib)} The per-kind, per-n and "
            "per-epsilon rows rest on fewer trials and are wider.")


def _by_design_line(calib: pd.DataFrame) -> str:
    """near_FPR's half-width weighted by the design's mix of sizes, in both populations, against the goal."""
    from symfast.readout.sweeps.rates import near_by_design

    d = near_by_design(calib)
    d = d[d.encoding == "all"]
    if d.empty:
        return ""
    r = d.iloc[0]
    halves = [(r.ci_high - r.ci_low) / 2] + ([(r.heldout_ci_high - r.heldout_ci_low) / 2] if "heldout_rate" in d else [])
    held = f" (held out ±{halves[1]:.3f})" if len(halves) > 1 else ""
    under = "under" if max(halves) <= GOAL_HALF_WIDTH else "over"
    return (f" Weighted by the design's mix of perturbation sizes (the last section), near_FPR's half-width is "
            f"±{halves[0]:.3f}{held}: {under} ±{GOAL_HALF_WIDTH}.")


def _several_encodings(calib: pd.DataFrame) -> bool:
    return calib.encoding[calib.encoding != "all"].nunique() > 1


def _alpha_check(calib: pd.DataFrame, alpha: float, tolerance: float | None = None, adaptive: bool = True) -> list[str]:
    """Expected, measured, held: every rate per shape family at or below alpha, in the main and the held-out
    population (the goal of the adaptive budget; alpha was fixed before the runs). At a fixed budget the
    near-symmetries are left out: how small a perturbation it still calls a symmetry is what the curve shows.
    With several encodings the check is made per encoding (each is a reading a user may choose)."""
    from symfast.readout.sweeps.rates import with_keys

    c = with_keys(calib)
    per_encoding = _several_encodings(calib)
    encoding_rows = (c.encoding != "all") if per_encoding else (c.encoding == "all")
    rows = c[encoding_rows & (c.family != "all") & (c.element_kind == "all") & (c.n == "all")
             & (c.epsilon == "all") & (adaptive or c.metric != "near_FPR")]
    first = (lambda r: f"| {r.encoding} ") if per_encoding else (lambda r: "")
    which = ("the rates at the adaptive budget", "every rate") if adaptive else (
        "false positives and negatives at the fixed budget", "the FNR and FPR")
    lines = [f"## Expected and measured: {which[0]}", "",
             f"Expected: {which[1]} of every shape family at or below alpha = {alpha:g}, in the main and the held-out "
             "population. Held when both rates are; where an upper end of a 95% interval"
             + (" (counting shapes)" if "ci_low_shapes" in calib.columns else "")
             + " is above alpha, the note says so: too few trials, or a rate too close to alpha, to show it." +
             ("" if adaptive else " Near-symmetries are not expected below alpha at a fixed budget: the "
              "near_FPR rows and the curve below show how small a perturbation the readout still calls a symmetry."),
             "",
             ("| encoding " if per_encoding else "")
             + "| family | metric | expected | main | held out | verdict | note |",
             ("|---" if per_encoding else "") + "|---|---|---|---|---|---|---|"]
    by = "_shapes" if "ci_low_shapes" in calib.columns else ""
    for r in rows.itertuples(index=False):
        high, held_high = getattr(r, f"ci_high{by}"), getattr(r, f"heldout_ci_high{by}")
        held_out = "" if pd.isna(r.heldout_rate) else f"{r.heldout_rate:.3f} (upper {held_high:.3f})"
        verdict = ("no held-out trials" if pd.isna(r.heldout_rate) else
                   "held" if max(r.rate, r.heldout_rate) <= alpha else "missed")
        upper = max(high, held_high if not pd.isna(r.heldout_rate) else 0.0)
        shapes = (f" in {int(r.shapes)} and {int(r.heldout_shapes) if not pd.isna(r.heldout_shapes) else 0} shapes"
                  if by else "")
        note = (f"upper 95% end {upper:.3f} > alpha ({int(r.trials)} and {int(r.heldout_trials or 0)} trials{shapes})"
                if verdict == "held" and upper > alpha else "")
        if tolerance and r.metric == "near_FPR":
            note = (note + "; " if note else "") + (f"the strict reading (every near-symmetry false); the table "
                                                    f"below says which lie under the tolerance {tolerance:g}")
        lines.append(first(r) + f"| {r.family} | {r.metric} | <= {alpha:g} | {r.rate:.3f} (upper {high:.3f}) | "
                     f"{held_out} | {verdict} | {note} |")
    return lines + [""]


def _resolved(tolerance: float) -> str:
    """What an observed element means under a tolerance."""
    return (f"An observed element here is one the budget resolved: an asymmetry of {tolerance:g} or more (relative "
            "to the Gram, like the score) would have been rejected with probability at least 1 - alpha.")


def _tolerance_note(tolerance: float) -> list[str]:
    """A tolerance run without near-symmetric members: what observed and unresolved mean in its tables."""
    return [_resolved(tolerance) + " An element still above the tolerance at the caps is unresolved: no claim "
            "either way, so it is no false positive; the tables count such elements in their unresolved columns.", ""]


def _tolerance_check(calib: pd.DataFrame, tolerance: float) -> list[str]:
    """Near-symmetries per epsilon under a tolerance: reported observed (resolved below it), unresolved at the
    caps, and rejected, in both populations."""
    from symfast.readout.sweeps.rates import with_keys

    c = with_keys(calib)
    rows = c[(c.encoding == "all") & (c.metric == "near_FPR") & (c.family == "all") & (c.element_kind == "all")
             & (c.n == "all") & (c.epsilon != "all")]
    lines = [f"## Near-symmetries under the tolerance {tolerance:g}", "",
             _resolved(tolerance) + " A near-symmetry reported observed is therefore one whose asymmetry lies under the tolerance: correct at "
             "this tolerance, and a false positive under the strict reading that the near_FPR rows keep. "
             "Unresolved: still above the tolerance at the caps (no claim either way).", "",
             "| epsilon | trials | observed (rate) | unresolved | rejected | mean seeds | held out: trials, observed, "
             "unresolved, rejected |", "|---|---|---|---|---|---|---|"]
    for r in rows.sort_values("epsilon", key=lambda e: e.astype(float)).itertuples(index=False):
        held = ""
        if not pd.isna(r.heldout_trials):
            ht, he, hu = int(r.heldout_trials), int(r.heldout_errors), int(r.heldout_unresolved)
            held = f"{ht}, {he}, {hu}, {ht - he - hu}"
        t, e, u = int(r.trials), int(r.errors), int(r.unresolved)
        lines.append(f"| {r.epsilon} | {t} | {e} ({r.rate:.3f}) | {u} | {t - e - u} | {r.mean_seeds:.0f} | {held} |")
    return lines + [""]


def _budget(m: dict) -> str:
    if m.get("budget") != "auto":
        return f"{m['seeds']} seeds x {m['steps']} steps"
    from symfast.readout.sweeps.population import PopulationSpec

    seeds, steps = PopulationSpec(**m).auto_start()
    tolerance = (f", and until every observed element is resolved to an asymmetry of {m['tolerance']:g}"
                 if m.get("tolerance") else "")
    return (f"adaptive budget: from {seeds} seeds x {steps} steps per shape up to {m['seeds']} x {m['steps']} while "
            f"a decision is unsettled{tolerance} (the tables give each row's mean)")


def _members(m: dict) -> tuple[int, str]:
    """How many shapes a run trained, and how they were chosen."""
    from symfast.readout.sweeps.population import PopulationSpec

    chosen = f"population {m['seed']}:{m['size']}"
    if m.get("families"):
        chosen = f"the {', '.join(m['families'])} members of {chosen}"
    return len(PopulationSpec(**m).members()), chosen


def page(data: str) -> str:
    from symfast.readout.sweeps.rates import markdown

    run, calib = _load(data)
    m, h = run["main"], run["heldout"]
    n_main, chosen = _members(m)
    n_held, held_chosen = _members(h)
    solids = m.get("dim", 2) == 3
    if solids:
        chosen, held_chosen = (f"{c}, each member extruded into a prism" for c in (chosen, held_chosen))
    guide = ("[the 3D readout guide](../../guide/readout-3d.md#error-rates-on-a-population-of-solids)" if solids else
             "[the readout-decisions guide](../../guide/readout-decisions.md#error-rates-on-a-shape-population)")
    intro = "\n".join([
        f"Generated by `docs/results/render_population.py` from the files of one run (symfast "
        f"{run['symfast']}, commit {run['commit']}, finished {run['date']} UTC, {run['machine']}); never typed "
        "by hand.",
        "",
        f"**N = {n_main} shapes** ({chosen}) x {len(m['encodings'])} encoding(s): {run['timing']['main']['fields']} "
        f"fields trained, {_budget(m)}, {m['points']} points per step, hidden {m['hidden']}, observable "
        f"{m['observable']}, alpha {m['alpha']}; held out: {held_chosen} (N = {n_held}, another seed, the same "
        "settings).",
        "",
        _time_line(run),
        "",
        _interval_line(calib),
        "",
        *(_alpha_check(calib, m["alpha"], m.get("tolerance")) if m.get("budget") == "auto" else
          _alpha_check(calib, m["alpha"], adaptive=False) if solids or _several_encodings(calib) else []),
        *((_tolerance_check(calib, m["tolerance"]) if _has_near(calib) else _tolerance_note(m["tolerance"]))
          if m.get("tolerance") else []),
        "The commands:", "", "```bash", *run["commands"], "```", "",
        *([f"![near-symmetry curve]({FIGURE})", "",
           "The near-symmetry curve: the share of near-symmetries (a symmetric shape broken by a radial "
           "displacement of size epsilon) that the readout reports observed, main population solid, held-out "
           "dashed.", ""] if _has_near(calib) else []),
        f"What each rate counts, and how to run this on your own settings: {guide}. " + (
            "The first interval of each row counts elements as independent trials, which they are not (one seed "
            "ensemble decides all of a shape's elements); the interval counting shapes, which the checks, the "
            "curve and the held-out agreement use, allows for that." if "ci_low_shapes" in calib.columns else
            "Intervals treat the elements of one shape as independent trials, which they are not (one seed "
            "ensemble decides them all); the held-out columns are the check.")])
    what = "a population of solids" if solids else "a shape population"
    text = markdown(calib, f"Results: readout error rates on {what} (N = {n_main})", intro)
    banner = (f"<!-- Generated by docs/results/render_population.py from {os.path.relpath(data, REPO)}; "
              "do not edit by hand. -->")
    return banner + "\n\n" + text


def render(data: str, out_dir: str) -> list[str]:
    from symfast.readout.sweeps.rates import plot_near

    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, PAGE), "w", encoding="utf-8", newline="\n") as f:
        f.write(page(data))
    calib = _load(data)[1]
    if not _has_near(calib):  # no near-symmetric members: no curve
        return [PAGE]
    plot_near(calib, os.path.join(out_dir, FIGURE))
    return [PAGE, FIGURE]


def _has_near(calib: pd.DataFrame) -> bool:
    return bool((calib["metric"] == "near_FPR").any())


def main(argv: list[str]) -> int:
    if len(argv) in (4, 5) and argv[0] == "--collect":
        collect(*argv[1:])
        return 0
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    for name in render(argv[0], argv[1]):
        print(os.path.join(argv[1], name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
