"""`symfast reproduce [--quick]`: the three studies at small scale, and a Markdown report.

Runs `symfast readout`, `symfast schur` and `symfast layerwise` into subdirectories of
--out, keeps each command's printed tables, and writes report.md with those tables
and links to every figure. A study that fails is reported as failed (the others
still run) and the command exits non-zero.
"""
from __future__ import annotations

import contextlib
import glob
import io
import os
import sys
import time

NAME = "reproduce"
HELP = "run the three studies (readout, Schur ablations, layerwise actions) and write report.md"

# (study, title, argv for --quick, argv for the full run); --out is appended.
STUDIES = [
    ("readout", "Symmetry readout from neural-field weights (arXiv 2607.03108)",
     ["readout", "--shapes", "triangle,square", "--pe", "dyadic,triaxis,rff", "--seeds", "16", "--steps", "400",
      "--points", "1024", "--sweep", "72", "--quiet"],
     ["readout", "--quiet"]),
    ("schur", "Schur ablations of recurrent weights (arXiv 2606.18457)",
     ["schur", "--task", "all", "--seeds", "3", "--no-progress"],
     ["schur", "--task", "all", "--seeds", "5", "--no-progress"]),
    ("layerwise", "Layerwise equivariance (Shahverdi et al.)",
     ["layerwise", "--model", "classifier", "--activation", "tanh"],
     ["layerwise", "--model", "classifier", "--activation", "tanh", "--seeds", "2"]),
]


def add_arguments(p) -> None:
    p.add_argument("--quick", action="store_true", help="small settings: 2-4 minutes on 2 quiet CPU cores")
    p.add_argument("--out", default="results/reproduce", help="output directory")
    p.add_argument("--only", default=None, help="comma-separated subset of: readout,schur,layerwise")


def run(args) -> int:
    from symfast.cli import main as cli_main
    from symfast.commands.readout import _check_out

    _check_out(args.out)
    names = [s[0] for s in STUDIES]
    only = names if not args.only else [n.strip() for n in args.only.split(",") if n.strip()]
    for n in only:
        if n not in names:
            raise ValueError(f"unknown study {n!r}; choose from {', '.join(names)}")
    sections, failed = [], []
    for name, title, quick, full in STUDIES:
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
        figures = sorted(glob.glob(os.path.join(sub, "**", "*.png"), recursive=True))
        body = [f"## {title}", "", f"`symfast {' '.join(argv)}` — {'ok' if rc == 0 else f'FAILED (exit {rc})'}, "
                f"{seconds:.0f} s", "", "```", text.strip()[-12000:], "```", ""]
        body += [f"![{os.path.basename(p)}]({os.path.relpath(p, args.out)})" for p in figures]
        sections.append("\n".join(body))
        print(f"   {name}: {'ok' if rc == 0 else 'FAILED'} in {seconds:.0f}s", file=sys.stderr)
    report = os.path.join(args.out, "report.md")
    with open(report, "w") as f:
        f.write(f"# symfast reproduce{' --quick' if args.quick else ''}\n\n" + "\n\n".join(sections) + "\n")
    print(f"report: {report}" + (f" (failed: {', '.join(failed)})" if failed else ""))
    return 1 if failed else 0
