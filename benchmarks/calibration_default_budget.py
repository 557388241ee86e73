"""Readout decision error rates at the default budget on the whole calibration grid: fixed vs adaptive.

Per encoding of `symfast.readout.calibration.grid_encodings()`, one run trains the 7 grid shapes
x 32 seeds x 1500 steps x 2048 points (the fixed default budget), read at 500, 1000 and 1500
steps (`train_snapshots`: the shorter ones are prefixes of the same run, so they cost nothing).
Then, on those models:
- fixed: FPR / FNR at 8, 16 and 32 seeds x 500, 1000 and 1500 steps (the first seeds of the pool);
- adaptive: `adaptive_readout` with its default policy, members replayed from the pool, so both
  sides see the same models; compute in model-steps relative to the fixed 32 x 1500;
- held-out (--heldout): the default adaptive policy training for real on fresh seeds 1000+,
  with its wall time.

About 45 min on 2 cores (--jobs 2: encodings in parallel processes, one thread each); a rerun
reuses the pool under --out. Prints the tables; writes scored rows to --out/*.csv.

    python benchmarks/calibration_default_budget.py --out calib [--jobs 2] [--heldout] [--first-seed 1000]

--aggregate model calibrates the per-model readout (`readout(..., aggregate="model")`: the mean of the
models' own scores against the pair null) instead, at per-model budgets: per encoding, one run of the
7 shapes x --seeds (4) models per points count in --model-budgets (default 1024x3000,4096x300: 1024 points
up to 3000 steps, 4096 to 300), read at the step counts of MODEL_STEPS up to that maximum (snapshots
of the same run). Each cell (shape, encoding) is read from its --seeds models; the seed-ensemble readout
of the same models is printed beside it, and how well each model's own scores rank true below false
elements with no null (`model_separation`). Prints FPR / FNR per budget and per cell; writes
scored_model.csv and separation.csv.

    python benchmarks/calibration_default_budget.py --out calib_model --aggregate model --jobs 2
"""
import argparse
import os
import time
from concurrent.futures import ProcessPoolExecutor

import pandas as pd

STEPS, SEEDS, POINTS = (500, 1000, 1500), (8, 16, 32), 2048
MODEL_STEPS = (300, 1000, 3000)


def _one_model(name: str, out: str, budgets: list, seeds: int, first_seed: int) -> list:
    """Per-model calibration of one encoding: [scored rows] for aggregate "model" and "ensemble"."""
    import torch

    from symfast.readout import calibration as c

    torch.set_num_threads(1)
    pe = {p.name: p for p in c.grid_encodings()}[name]
    shapes = c.grid_shapes()
    rows, seps = [], []
    for points, max_steps in budgets:
        t = time.perf_counter()
        snaps = c.train_snapshots(shapes, pe, seeds=list(range(first_seed, first_seed + seeds)),
                                  steps=[n for n in MODEL_STEPS if n <= max_steps], points=points,
                                  directory=os.path.join(out, f"pool_{first_seed}_{points}"))
        train_s = time.perf_counter() - t
        for ens in snaps.values():
            for aggregate in ("model", "ensemble"):
                rows.append(c.score_pool(ens, shapes, [seeds], aggregate=aggregate).assign(pool_train_s=train_s))
            seps.append(c.model_separation(ens, shapes))
    return [r.assign(pe=name) for r in rows], seps


def _main_model(args):
    from symfast.readout import calibration as c

    budgets = [tuple(int(v) for v in b.split("x")) for b in args.model_budgets.split(",")]
    names = [p.name for p in c.grid_encodings()]
    t = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as ex:
        n = len(names)
        parts = list(ex.map(_one_model, names, [args.out] * n, [budgets] * n, [args.seeds] * n,
                            [args.first_seed] * n))
    scored = pd.concat([r for rows, _ in parts for r in rows], ignore_index=True)
    scored.to_csv(os.path.join(args.out, "scored_model.csv"), index=False)
    sep = pd.concat([r for _, seps in parts for r in seps], ignore_index=True)
    sep.to_csv(os.path.join(args.out, "separation.csv"), index=False)
    by = ("aggregate", "seeds", "points", "steps")
    print(f"Per budget, all encodings ({time.perf_counter() - t:.0f} s):\n")
    print(c.rates(scored, by=by).sort_values(list(by)).round(3).to_string(index=False))
    model = scored[scored["aggregate"] == "model"]
    cells = c.rates(model, by=("pe", "shape", "points", "steps"))
    print("\nPer cell, aggregate model (FPR / FNR):\n")
    print(cells.pivot_table(index=["pe", "shape"], columns=["points", "steps"], values=["FPR", "FNR"])
          .round(2).to_string())
    print("\nEach model's own scores, no null (model_separation): AUC true < false, share of models separated:\n")
    print(sep.groupby(["pe", "points", "steps"])[["auc", "separated"]].mean().unstack(["points", "steps"])
          .round(2).to_string())
    print(sep.groupby(["points", "steps"])[["auc", "separated"]].mean().round(3).to_string())
    print("\npool s per encoding (training; a few seconds when a rerun loads it):",
          scored.groupby(["pe", "points"]).pool_train_s.first().groupby("pe").sum().round().to_dict())


def _one(name: str, out: str, heldout: bool, first_seed: int) -> list:
    import torch

    from symfast.readout import budget, calibration as c

    torch.set_num_threads(1)
    pe = {p.name: p for p in c.grid_encodings()}[name]
    shapes, cands = c.grid_shapes(), c.candidates_for(c.grid_shapes())
    t = time.perf_counter()
    seeds = list(range(first_seed, first_seed + max(SEEDS)))
    snaps = c.train_snapshots(shapes, pe, seeds=seeds, steps=STEPS, points=POINTS,
                              directory=os.path.join(out, f"pool_{first_seed}"))
    train_s = time.perf_counter() - t
    rows = [c.score_pool(snaps[n], shapes, SEEDS).assign(kind="fixed") for n in STEPS]
    runs = [("adaptive", dict(first_seed=first_seed, train=c.replay_trainer(snaps)))]
    if heldout:
        runs.append(("heldout", dict(first_seed=1000, directory=os.path.join(out, f"heldout_{name}"))))
    for kind, kw in runs:
        t = time.perf_counter()
        res = budget.adaptive_readout(shapes, pe, steps=max(STEPS), max_seeds=max(SEEDS), points=POINTS,
                                      candidates=cands, **kw)
        last = res.history.groupby("shape", sort=False).last()
        sc = c.score_table(res.readout.table, shapes)
        rows.append(sc.assign(kind=kind, seeds="auto", steps="auto", points=POINTS,
                              model_steps=sc["shape"].map(last["model_steps"]),
                              wall_s=time.perf_counter() - t))
    return [r.assign(pe=name, pool_train_s=train_s) for r in rows]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="directory for the pool and the tables")
    ap.add_argument("--jobs", type=int, default=1, help="encodings trained in parallel (one thread each)")
    ap.add_argument("--heldout", action="store_true", help="also run the adaptive policy on fresh seeds 1000+")
    ap.add_argument("--first-seed", type=int, default=0, help="the pool's first seed (another replicate)")
    ap.add_argument("--aggregate", choices=["ensemble", "model"], default="ensemble",
                    help="ensemble: the default-budget tables; model: per-model budgets, aggregate='model'")
    ap.add_argument("--seeds", type=int, default=4, help="--aggregate model: models per cell")
    ap.add_argument("--model-budgets", default="1024x3000,4096x300",
                    help="--aggregate model: POINTSxMAX_STEPS,... (read at MODEL_STEPS up to MAX_STEPS)")
    args = ap.parse_args()
    if args.aggregate == "model":
        return _main_model(args)
    from symfast.readout import calibration as c

    names = [p.name for p in c.grid_encodings()]
    with ProcessPoolExecutor(args.jobs) as ex:
        n = len(names)
        parts = list(ex.map(_one, names, [args.out] * n, [args.heldout] * n, [args.first_seed] * n))
    scored = pd.concat([r for rows in parts for r in rows], ignore_index=True)
    scored.to_csv(os.path.join(args.out, "scored.csv"), index=False)
    full = max(SEEDS) * max(STEPS)
    print("Fixed budgets, all encodings:\n")
    print(c.rates(scored[scored.kind == "fixed"]).sort_values(["steps", "seeds"]).round(3).to_string(index=False))
    for kind in ("adaptive", "heldout"):
        t = scored[scored.kind == kind]
        if t.empty:
            continue
        r = c.rates(t, by=("pe",)).set_index("pe")
        per_cell = t.groupby(["pe", "shape"]).model_steps.first()
        r["compute / fixed"] = per_cell.groupby("pe").sum() / (full * per_cell.groupby("pe").size())
        r["wall_s"] = t.groupby("pe").wall_s.first()
        print(f"\n{kind} (default policy); all: compute / fixed = {per_cell.sum() / (full * len(per_cell)):.3f}\n")
        print(r.round(3).to_string())
    pool_s = scored.groupby("pe").pool_train_s.first().round().to_dict()
    print("\npool s per encoding (training; a few seconds when a rerun loads it):", pool_s)


if __name__ == "__main__":
    main()
