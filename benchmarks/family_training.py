"""Per model-step time of the GRU / LSTM / SSM training paths in one run: one model after another
(`symfast.schur.rnn.train.fit`, the reference) against the batched ensemble
(`symfast.schur.families.ensemble.fit_ensemble`), 5 seeds, H = 64, batch 64, flip-flop (T = 100),
one torch thread, the two paths alternating per family. Also prints the largest difference of
per-step losses and final weights between the two paths.

    PYTHONPATH=. python benchmarks/family_training.py [steps per model, default 8]
"""
import sys
import time

import torch

from symfast.schur.families import make_model
from symfast.schur.families.ensemble import fit_ensemble
from symfast.schur.rnn import TrainConfig, make_task
from symfast.schur.rnn.train import fit


def main(steps: int = 8) -> None:
    torch.set_num_threads(1)
    task, seeds = make_task("flipflop"), [0, 1, 2, 3, 4]
    cfg = TrainConfig(epochs=1, batches_per_epoch=steps, lr=1e-3, clip=1.0)
    for family, cons in [("gru", "bias"), ("lstm", "bias"), ("ssm", "dense"), ("ssm", "diagonal")]:
        def build():
            return [make_model(family, cons, task.n_in, 64, task.n_out, generator=torch.Generator().manual_seed(s))
                    for s in seeds]
        ref, ref_losses = build(), []
        t0 = time.perf_counter()
        for m, s in zip(ref, seeds):
            ref_losses.append([])
            fit(m, task, s, cfg, losses=ref_losses[-1])
        t1 = time.perf_counter()
        ens, ens_losses = build(), []
        fit_ensemble(ens, task, seeds, cfg, losses=ens_losses)
        t2 = time.perf_counter()
        n = len(seeds) * steps
        dl = max(abs(a - b) for la, lb in zip(ref_losses, ens_losses) for a, b in zip(la, lb))
        dw = max(float((p - q).detach().abs().max()) for a, b in zip(ref, ens)
                 for p, q in zip(a.parameters(), b.parameters()))
        print(f"{family} {cons}: one at a time {1e3 * (t1 - t0) / n:.1f} ms per model-step, ensemble "
              f"{1e3 * (t2 - t1) / n:.1f}; max |d loss| {dl:.1e}, max |d weight| {dw:.1e}", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8)
