"""FourierMLPEnsemble.train_step under torch.distributed: two local gloo processes train one
ensemble data-parallel, as a DistributedDataParallel user would; the fused step sets gradients
itself (past DDP's hooks), so it must average them across ranks like DDP's backward does."""
from __future__ import annotations

import os
import socket
import sys
import textwrap
import subprocess

import pytest
import torch

WORKER = textwrap.dedent("""
    import sys, torch, torch.distributed as dist
    import symfast as sf
    rank, world, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    torch.manual_seed(0)  # same init on every rank
    ens = sf.nn.FourierMLPEnsemble(sf.DyadicAxisPE(3), hidden=(8,), num_models=2, backend="cpu")
    ddp = torch.nn.parallel.DistributedDataParallel(ens)  # as a user wraps it (broadcasts rank 0's weights)
    g = torch.Generator().manual_seed(100 + rank)  # each rank its own data
    x = torch.rand(2, 64, 2, generator=g) * 2 - 1
    grads = {}
    for sync in ("none", "auto"):
        ddp.module.train_step(x, x.norm(dim=-1) - 0.5, grad_sync=sync)
        grads[sync] = [p.grad.clone() for p in ens.parameters()]
    torch.save(grads, out)
    dist.destroy_process_group()
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(tmp_path) -> list[dict]:
    """Per rank: {grad_sync: [gradients]} after one step with "none", then one with "auto"."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    port, outs = str(_free_port()), [tmp_path / f"grads_{r}.pt" for r in range(2)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, str(script), str(r), "2", port, str(outs[r])], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, err[-3000:]
    return [torch.load(o) for o in outs]


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch built without distributed")
def test_train_step_averages_gradients_across_ranks_as_ddp_does(tmp_path):
    import symfast as sf

    ranks = _run(tmp_path)
    synced, local = [g["auto"] for g in ranks], [g["none"] for g in ranks]
    # each rank's own gradient: what the step computes from that rank's data alone
    torch.manual_seed(0)
    ens = sf.nn.FourierMLPEnsemble(sf.DyadicAxisPE(3), hidden=(8,), num_models=2, backend="cpu")
    own = []
    for rank in range(2):
        x = torch.rand(2, 64, 2, generator=torch.Generator().manual_seed(100 + rank)) * 2 - 1
        ens.train_step(x, x.norm(dim=-1) - 0.5)
        own.append([p.grad.clone() for p in ens.parameters()])
    for r in range(2):
        for name, got, want in zip(("w0", "w1", "b0", "b1"), local[r], own[r]):
            torch.testing.assert_close(got, want, msg=f"grad_sync='none', rank {r}, {name}")
    for name, g0, g1, a, b in zip(("w0", "w1", "b0", "b1"), synced[0], synced[1], own[0], own[1]):
        assert torch.equal(g0, g1), f"{name}: ranks differ after the all-reduce"
        torch.testing.assert_close(g0, (a + b) / 2, msg=f"{name}: not the mean of the ranks' gradients")
    assert any((a - b).abs().max() > 1e-3 for a, b in zip(own[0], own[1]))  # the ranks' data differ


def test_grad_sync_is_checked():
    import symfast as sf

    ens = sf.nn.FourierMLPEnsemble(sf.DyadicAxisPE(3), hidden=(8,), num_models=1)
    x = torch.rand(1, 8, 2)
    with pytest.raises(ValueError, match="grad_sync must be 'auto' or 'none'"):
        ens.train_step(x, x[..., 0], grad_sync="sum")
