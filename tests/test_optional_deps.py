"""The core install (torch, numpy, SciPy, tqdm) runs the ops and the neural fields; the studies'
tables (pandas, `analysis`), figures (matplotlib, `plot`) and the bundled digits (scikit-learn) are
extras. Without one, `import symfast` and the ops still work and the call that needs it raises one
line naming the extra. Each case runs in a fresh interpreter with the module made unimportable."""
import subprocess
import sys

import pytest

COMMON = """
import sys
for name in {missing!r}:
    sys.modules[name] = None  # unimportable, as if not installed
import torch
import symfast as sf
x = torch.rand(16, 2)
m = sf.nn.FourierMLP(sf.DyadicAxisPE(3), hidden=(8,))
loss = m.train_step(x, torch.rand(16))
y = sf.fourier_mlp(x, m.pe.frequencies.float(), m.pe.phases.float(), list(m.weights), list(m.biases), "relu")
eye = torch.eye(3, dtype=torch.float64)[None]
assert torch.ops.symfast.gram_scores(eye, eye, True, "reference").shape == (1, 1)
assert sf.ordered_schur(torch.randn(6, 6, dtype=torch.float64)).T.shape == (6, 6)
ens = sf.Ensemble.from_modules([m.to_sequential()] * 3, ["square"] * 3)
print("ops ok", bool(torch.isfinite(loss)), tuple(y.shape))


def one_line(call):
    try:
        call()
    except ImportError as e:
        msg = str(e)
        assert "\\n" not in msg and e.__cause__ is None and e.__suppress_context__, repr(msg)
        print(msg)
    else:
        print("no error")
"""

CASES = {
    "matplotlib": ("""
import warnings
warnings.simplefilter("ignore")  # the tiny budget's warning
r = sf.readout(ens, sweep=0, num_null=4)
one_line(r.plot_heatmap)
one_line(lambda: __import__("symfast.readout.plots"))
""", ['plotting needs matplotlib, which is not installed: pip install "symfast[plot]"'] * 2),
    "pandas": ("""
one_line(lambda: sf.readout(ens, sweep=0))
one_line(lambda: ens.members)
import numpy as np
acts = sf.recover_latent_actions([(np.eye(4), np.zeros(4)), (np.ones((1, 4)), np.zeros(1))], np.eye(4))
print("layerwise core ok", acts.errors.shape)
from symfast.cli import main
print("exit", main(["readout", "--shapes", "square"]))
""", ['the readout study (its tables) needs pandas, which is not installed: pip install "symfast[analysis]"',
      'Ensemble.members needs pandas, which is not installed: pip install "symfast[analysis]"',
      "layerwise core ok (2,)", "exit 2"]),
    "sklearn": ("""
from symfast.layerwise.data import load_digits
one_line(load_digits)
""", ['loading the bundled 8x8 digits needs scikit-learn, which is not installed: pip install "symfast[analysis]"']),
}


@pytest.mark.parametrize("missing", sorted(CASES))
def test_without_an_extra_the_ops_work_and_the_call_that_needs_it_says_which(missing):
    script, want = CASES[missing]
    code = COMMON.format(missing=[missing]) + script
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=300)
    lines = out.stdout.splitlines()
    assert lines and lines[0] == "ops ok True (1, 16)", out.stdout + out.stderr[-3000:]
    assert lines[1:] == want, out.stdout + out.stderr[-3000:]
    if missing == "pandas":  # the command line: one line on stderr, exit 2
        assert out.stderr.strip().splitlines()[-1] == ('symfast: error: the symfast command line needs pandas, which '
                                                       'is not installed: pip install "symfast[analysis]"'), out.stderr
