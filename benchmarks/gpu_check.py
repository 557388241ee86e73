"""One-shot GPU check of the Triton fused PE+MLP kernels (fits a few minutes of device time).

1. Correctness on the GPU: forward, dx, every dW/db and the fused MSE step vs the reference.
2. Speed: training step (forward + loss + backward + Adam) at B = 1024, N = 8192,
   DyadicAxisPE d = 48, 48 -> 64 -> 64 -> 1 ReLU, fp32: Triton vs eager reference vs
   torch.compile of the reference, on the same GPU, best of 5 with CUDA syncs.
3. The same with TF32 allowed in the Triton kernels (symfast.ops.fourier_mlp.triton.ALLOW_TF32).
4. Second order on CUDA, the Triton jet kernels (symfast/ops/fourier_mlp/triton_jet.py) vs the
   reference: `fourier_mlp_jet` (f, g and every gradient of a loss on both), the eikonal step (terms,
   dW, db; with and without normals) and the users' autograd.grad(create_graph=True) loop; then the
   eikonal step's time at B = 1024, N = 8192 on Triton and on the reference op.

Usage: python benchmarks/gpu_check.py   (prints a table; exits non-zero on a mismatch)
"""
from __future__ import annotations

import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import symfast as sf  # noqa: E402
from symfast.ops.fourier_mlp import (fourier_mlp, fourier_mlp_eikonal_step, fourier_mlp_jet,  # noqa: E402
                                     fourier_mlp_train_step, reference)
from symfast.ops.fourier_mlp import triton as tri  # noqa: E402
from symfast.testing import assert_close  # noqa: E402


def problem(B, N, H=64, depth=2, seed=0, dev="cuda"):
    g = torch.Generator().manual_seed(seed)
    pe = sf.DyadicAxisPE(12)
    dims = [pe.dim] + [H] * depth + [1]
    ws = [((torch.rand(B, a, b, generator=g) * 2 - 1) / a ** 0.5).to(dev) for a, b in zip(dims[:-1], dims[1:])]
    bs = [((torch.rand(B, b, generator=g) * 2 - 1) / a ** 0.5).to(dev) for a, b in zip(dims[:-1], dims[1:])]
    x = (torch.rand(B, N, 2, generator=g) * 2 - 1).to(dev)
    return pe.frequencies.float().to(dev), pe.phases.float().to(dev), x, x.norm(dim=-1) - 0.5, ws, bs


def check_correctness():
    for B, N, H, depth, act in [(3, 1000, 64, 2, "relu"), (2, 777, 32, 3, "tanh"), (1, 4096, 128, 1, "silu")]:
        f, p, x, t, ws, bs = problem(B, N, H, depth)
        cot = torch.randn(B, N, device="cuda")
        res = {}
        for be in ("reference", "triton"):
            xx = x.clone().requires_grad_()
            w = [q.clone().requires_grad_() for q in ws]
            b = [q.clone().requires_grad_() for q in bs]
            y = fourier_mlp(xx, f, p, w, b, act, backend=be)
            res[be] = [y] + list(torch.autograd.grad(y, [xx, *w, *b], cot))
        names = ["y", "dx"] + [f"dW{l}" for l in range(depth + 1)] + [f"db{l}" for l in range(depth + 1)]
        for n, r, q in zip(names, res["reference"], res["triton"]):
            assert_close(f"{n} (B={B} N={N} H={H} {act})", r, q, rms=n != "y")
        ref = reference.fourier_mlp_train_step(x, t, f, p, ws, bs, act)
        fast = fourier_mlp_train_step(x, t, f, p, ws, bs, act, backend="triton")
        assert_close("step loss", ref[0], fast[0])
        for l in range(depth + 1):
            assert_close(f"step dW{l}", ref[1][l], fast[1][l], rms=True)
    print("correctness: OK (forward, dx, dW, db, fused step vs reference on GPU)")


def timed(fn, repeat=5):
    fn()
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(repeat):
        torch.cuda.synchronize()
        s = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - s)
    return best


def steps(B=1024, N=8192):
    f, p, x, t, ws, bs = problem(B, N)
    params = [q.requires_grad_() for q in ws + bs]
    L = len(ws)
    opt = torch.optim.Adam(params, lr=1e-3, fused=True)  # the same optimizer for every implementation

    def loss_fn(x, t, *ps):
        return reference.mse_loss(reference.fourier_mlp(x, f, p, list(ps[:L]), list(ps[L:]), "relu"), t).sum()

    compiled = torch.compile(loss_fn)

    def ref_step(fn):
        def run():
            opt.zero_grad(set_to_none=True)
            fn(x, t, *params).backward()
            opt.step()
        return run

    def tri_step():
        loss, gw, gb = fourier_mlp_train_step(x, t, f, p, ws, bs, "relu", backend="triton")
        for q, g in zip(params, gw + gb):
            q.grad = g
        opt.step()

    out = {"eager reference": timed(ref_step(loss_fn)), "torch.compile reference": timed(ref_step(compiled)),
           "symfast triton (fp32 ieee)": timed(tri_step)}
    tri.ALLOW_TF32 = True
    out["symfast triton (tf32)"] = timed(tri_step)
    tri.ALLOW_TF32 = False
    flops = 3 * 2 * (48 * 64 + 64 * 64 + 64) * B * N
    print(f"training step B={B} N={N} 48->64->64->1 ReLU fp32 on {torch.cuda.get_device_name()}:")
    for k, v in out.items():
        print(f"  {k:28s} {v * 1e3:8.2f} ms  {flops / v / 1e12:6.2f} TFLOP/s  "
              f"{out['eager reference'] / v:5.2f}x vs eager  {out['torch.compile reference'] / v:5.2f}x vs compile")


def second_order(B=1024, N=8192):
    f, p, x, t, ws, bs = problem(3, 500, 32, 2)
    cf, cg = torch.randn(3, 500, device="cuda"), torch.randn(3, 500, 2, device="cuda")
    res = {}
    for be in ("reference", "triton"):
        xx = x.clone().requires_grad_()
        w = [q.clone().requires_grad_() for q in ws]
        b = [q.clone().requires_grad_() for q in bs]
        fj, gj = fourier_mlp_jet(xx, f, p, w, b, "tanh", backend=be)
        res[be] = [fj, gj] + list(torch.autograd.grad((fj, gj), [xx, *w, *b], (cf, cg)))
    names = ["f", "g", "dx"] + [f"dW{l}" for l in range(len(ws))] + [f"db{l}" for l in range(len(bs))]
    for n, r, q in zip(names, res["reference"], res["triton"]):
        assert_close(f"jet {n}", r, q, rms=n not in ("f", "g"))
    normals = torch.nn.functional.normalize(torch.randn(3, 500, 2, device="cuda"), dim=-1)
    for nrm, wn in ((None, 0.0), (normals, 0.5)):
        ref = reference.eikonal_train_step(x, t, f, p, ws, bs, "tanh", 0.1, nrm, wn)
        fast = fourier_mlp_eikonal_step(x, t, f, p, ws, bs, "tanh", eikonal=0.1, normals=nrm, normal=wn,
                                        backend="triton")
        assert_close(f"eikonal terms (normal={wn})", ref[0], fast[1])
        for l in range(len(ws)):
            assert_close(f"eikonal dW{l} (normal={wn})", ref[1][l], fast[2][l], rms=True)
            assert_close(f"eikonal db{l} (normal={wn})", ref[2][l], fast[3][l], rms=True)
    out = {}
    for be in ("reference", "triton"):
        w = [q.clone().requires_grad_() for q in ws]
        xx = x.clone().requires_grad_()
        y = fourier_mlp(xx, f, p, w, bs, "tanh", backend=be)
        g, = torch.autograd.grad(y.sum(), xx, create_graph=True)
        out[be] = torch.autograd.grad((g.norm(dim=-1) - 1).pow(2).mean(), w)
    for l, (a, b) in enumerate(zip(out["reference"], out["triton"])):
        assert_close(f"user eikonal loop dW{l}", a, b, rms=True)
    print("second order on CUDA: OK (triton jet + its gradients, users' autograd loop, eikonal step vs reference)")
    f, p, x, t, ws, bs = problem(B, N)
    ops = torch.ops.symfast
    dt = {be: timed(lambda: ops.fourier_mlp_eikonal_step(x, t, None, f, p, ws, bs, "relu", 0.1, 0.0, be))
          for be in ("reference", "triton")}
    print(f"eikonal step (no Adam) B={B} N={N} 48->64->64->1 ReLU fp32 on {torch.cuda.get_device_name()}: "
          f"reference op {dt['reference'] * 1e3:.2f} ms, triton {dt['triton'] * 1e3:.2f} ms "
          f"({dt['reference'] / dt['triton']:.2f}x)")


if __name__ == "__main__":
    if not torch.cuda.is_available() or tri.triton is None:
        raise SystemExit("needs CUDA and triton")
    check_correctness()
    steps()
    second_order()
