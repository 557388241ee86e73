"""The pilot that fixed the tolerance run's settings (no verdict is read from it): how the readout's resolution
falls with the seeds on trained fields, and what asymmetry near-symmetries of each size leave.

    python docs/results/population-tolerance-near/pilot.py OUT_DIR     # about 30 min on 2 cores

Population seed 2 (used by no other run): its first near-symmetric members of epsilon 0.005, 0.01, 0.02 (two
each) and 0.05 (one); 256 seeds x 1500 steps x 2048 points, TriAxisPE, read out on nested subsets of 8 to 256
seeds. Writes OUT_DIR/pilot.csv (one row per subset and decided element, with its class: true, near or false)
and prints the median resolution per subset and each near-symmetry's rows. Checkpoints in OUT_DIR: a rerun
resumes.
"""
import os
import sys
import warnings

import numpy as np
import pandas as pd

import symfast as sf
from symfast.readout.budget import concat
from symfast.readout.readout import default_candidates
from symfast.shapes.population import draw, population_shape

SEED, SIZES, SUBSETS = 2, {0.005: 2, 0.01: 2, 0.02: 2, 0.05: 1}, (8, 16, 32, 64, 96, 128, 192, 256)


def members() -> list[int]:
    want, picked = dict(SIZES), []
    for i in range(1000):
        d = draw(SEED, i)
        if d.kind == "near" and want.get(d.epsilon, 0) > 0:
            want[d.epsilon] -= 1
            picked.append(i)
        if not any(want.values()):
            return picked
    raise RuntimeError("population too small for the pilot's members")


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    picked = members()
    shapes = [population_shape(SEED, i) for i in picked]
    draws = {s.name: draw(SEED, i) for s, i in zip(shapes, picked)}
    ens = concat([sf.fit_sdf(shapes, sf.TriAxisPE(), seeds=list(range(64 * c, 64 * c + 64)), steps=1500,
                             points=2048, checkpoint=os.path.join(out, f"chunk{c}.ckpt")) for c in range(4)])
    cands = {g.name: g for g in default_candidates(2)}
    parts = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in SUBSETS:
            t = sf.readout(ens.subset([i for i, sd in enumerate(ens.seeds) if sd < n]), sweep=0).table
            parts.append(t.assign(seeds=n))
    d = pd.concat(parts)
    d = d[d["liftable"] & (d["element"] != "r0")].copy()
    d["epsilon"] = d["shape"].map({k: v.epsilon for k, v in draws.items()})
    near = [not t and cands[e] in draws[s].base_group for s, e, t in zip(d["shape"], d["element"], d["true_symmetry"])]
    d["class"] = np.where(d["true_symmetry"], "true", np.where(near, "near", "false"))
    d["asymmetry"] = np.sqrt(np.clip(d["score"] ** 2 - d["noise_floor"] ** 2, 0, None))  # score^2 - noise^2
    d.to_csv(os.path.join(out, "pilot.csv"), index=False)
    pd.set_option("display.width", 200)
    print(d.groupby(["class", "seeds"]).agg(elements=("score", "size"), resolution=("resolution", "median"),
                                            observed=("observed", "mean")).to_string())
    print(d[d["class"] == "near"][["shape", "epsilon", "element", "seeds", "resolution", "asymmetry", "p_adjusted",
                                   "observed"]].sort_values(["epsilon", "shape", "element", "seeds"]).to_string())


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
