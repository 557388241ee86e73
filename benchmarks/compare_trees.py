"""Compare the asv `track_*` ratios of two source trees on one machine, in alternating subprocesses.

    python benchmarks/compare_trees.py BEFORE_TREE AFTER_TREE [--rounds 2] [--modules bench_matching,...]
        [--skip GramScoresRatio] [--out results.json]

Each tree must hold a built extension (symfast/_C*.so) and its own benchmarks/benchmarks/. Per round
and module, the two trees run one after the other in fresh processes (the order alternates between
rounds), so drift on a shared machine hits both alike; each process imports only its own tree.
`setup_cache` is honoured as asv does (once per class). Results are written after every module, so an
interrupted run keeps what it measured; the table gives the median over rounds and after / before.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

MODULES = ["bench_fourier_mlp", "bench_fourier_features", "bench_matching", "bench_schur", "bench_gram_scores"]

RUNNER = r'''
import importlib, inspect, itertools, json, sys
sys.path.insert(0, sys.argv[1] + "/benchmarks/benchmarks")
mod = importlib.import_module(sys.argv[2])
skip = set(filter(None, sys.argv[3].split(",")))
out = {}
for cname, cls in inspect.getmembers(mod, inspect.isclass):
    if cls.__module__ != mod.__name__ or cname in skip:
        continue
    tracks = [m for m in dir(cls) if m.startswith("track_")]
    if not tracks:
        continue
    params = getattr(cls, "params", [])
    if params and not isinstance(params[0], (list, tuple)):
        params = [params]
    cache = (cls().setup_cache(),) if hasattr(cls, "setup_cache") else ()
    for combo in (itertools.product(*params) if params else [()]):
        obj = cls()
        try:
            if hasattr(obj, "setup"):
                obj.setup(*cache, *combo)
        except NotImplementedError:
            continue
        for t in tracks:
            try:
                out[f"{cname}.{t}{list(combo) if combo else ''}"] = float(getattr(obj, t)(*cache, *combo))
            except NotImplementedError:
                pass
print("JSON" + json.dumps(out))
'''


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", help="source tree measured as 'before'")
    ap.add_argument("after", help="source tree measured as 'after'")
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds (default 2)")
    ap.add_argument("--modules", default=",".join(MODULES), help="benchmark modules, comma separated")
    ap.add_argument("--skip", default="", help="benchmark classes to leave out, comma separated")
    ap.add_argument("--out", default="compare_trees.json", help="results file (JSON), rewritten after each module")
    args = ap.parse_args(argv)
    trees = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}
    for name, path in trees.items():
        if not os.path.isdir(os.path.join(path, "benchmarks", "benchmarks")):
            ap.error(f"{name} tree {path} has no benchmarks/benchmarks directory")
    res = {k: {} for k in trees}
    for r in range(args.rounds):
        order = list(trees) if r % 2 == 0 else list(trees)[::-1]
        for mod in filter(None, args.modules.split(",")):
            for tree in order:
                env = dict(os.environ, PYTHONPATH=trees[tree])
                p = subprocess.run([sys.executable, "-c", RUNNER, trees[tree], mod, args.skip], capture_output=True,
                                   text=True, env=env, cwd=os.path.dirname(trees[tree]))
                line = [x for x in p.stdout.splitlines() if x.startswith("JSON")]
                if not line:
                    print(f"round {r} {mod} {tree}: FAILED\n{p.stderr[-800:]}", flush=True)
                    continue
                for k, v in json.loads(line[0][4:]).items():
                    res[tree].setdefault(k, []).append(v)
                print(f"round {r} {mod} {tree} done (load average {os.getloadavg()[0]:.2f})", flush=True)
                with open(args.out, "w") as f:
                    json.dump(res, f, indent=1)
    print(f"{'benchmark':70s} {'before':>9s} {'after':>9s} {'after/before':>12s}")
    for k in sorted(set(res["before"]) & set(res["after"])):
        b, a = statistics.median(res["before"][k]), statistics.median(res["after"][k])
        print(f"{k:70s} {b:9.3g} {a:9.3g} {a / b if b else float('nan'):12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
