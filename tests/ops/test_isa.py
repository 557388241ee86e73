"""The instruction-set cap SYMFAST_ISA: every per-ISA kernel runs the instance it names, so one
AVX-512 machine can check the generic, AVX2 and AVX-512 paths (each in a fresh process: the
variable is read once)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from symfast import _ext

pytestmark = pytest.mark.skipif(not _ext.cpp_available(), reason="needs the compiled C++ kernels")
ORDER = ("generic", "avx2", "avx512")

# In a fresh process: the default instance of each per-ISA kernel, and whether the default call of
# dense_asym gives the same bits as the instance forced by name.
PROBE = """
import torch, symfast._ext as e
from symfast.ops.gram_scores import cpu
C = e.require_cpp()
g = torch.randn(3, 12, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(0)); g = g + g.mT
u = torch.linalg.qr(torch.randn(2, 12, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(1)))[0]
same = torch.equal(cpu.dense_asym(g, u), cpu.dense_asym(g, u, isa=e.isa()))
print(e.isa(), C.fourier_mlp_isa("auto"), C.rnn_train_isa("auto"), same)
"""


def _run(env_isa: str) -> subprocess.CompletedProcess:
    import os

    env = {**os.environ, "SYMFAST_ISA": env_isa}
    # -P: the installed symfast (with its compiled kernels), never a source tree in the working directory
    return subprocess.run([sys.executable, "-P", "-c", PROBE], capture_output=True, text=True, env=env, timeout=120)


def _cpu_rank() -> int:
    return ORDER.index(_ext.require_cpp().cpu_isa())


@pytest.mark.parametrize("isa", ORDER)
def test_the_cap_picks_that_instance_in_every_kernel_or_is_refused_by_name(isa):
    proc = _run(isa)
    if ORDER.index(isa) <= _cpu_rank():
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split() == [isa, isa, isa, "True"]
    else:  # wider than this CPU runs: refused at the first kernel call, naming the variable
        assert proc.returncode != 0
        assert f"SYMFAST_ISA={isa} but this CPU and build run at most" in proc.stderr


def test_auto_is_the_widest_the_cpu_runs():
    proc = _run("auto")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == _ext.require_cpp().cpu_isa()


def test_an_unknown_name_is_refused_naming_the_variable():
    proc = _run("sse9")
    assert proc.returncode != 0
    assert "SYMFAST_ISA must be auto, generic, avx2 or avx512, got 'sse9'" in proc.stderr
