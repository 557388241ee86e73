"""One `progress` convention across the public API: False by default, True for bars and log
records, a callable for progress lines (symfast._progress)."""
import contextlib
import importlib
import inspect
import logging
import pkgutil

import pytest
import torch

import symfast as sf
from symfast._progress import reporter

TINY = dict(seeds=1, hidden=(4,), steps=20, points=8, backend="reference")


@contextlib.contextmanager
def records(logger: str):
    """The messages logged on `logger` (a handler on the logger itself: the CLI tests may have
    turned propagation of the symfast loggers off)."""
    got, log = [], logging.getLogger(logger)

    class Collect(logging.Handler):
        def emit(self, record):
            got.append(record.getMessage())

    h, old = Collect(), log.level
    log.addHandler(h)
    log.setLevel(logging.INFO)
    try:
        yield got
    finally:
        log.removeHandler(h)
        log.setLevel(old)


def _public_functions_with_progress():
    out = []
    for pkg in ("symfast.readout", "symfast.layerwise", "symfast.schur"):
        root = importlib.import_module(pkg)
        for info in pkgutil.walk_packages(root.__path__, pkg + "."):
            mod = importlib.import_module(info.name)
            for name, obj in vars(mod).items():
                if name.startswith("_") or not inspect.isfunction(obj) or obj.__module__ != mod.__name__:
                    continue
                p = inspect.signature(obj).parameters.get("progress")
                if p is not None:
                    out.append((f"{mod.__name__}.{name}", p))
    return out


def test_every_public_progress_argument_defaults_to_off():
    found = _public_functions_with_progress()
    names = {n for n, _ in found}
    assert {"symfast.readout.training.fit_sdf", "symfast.schur.rnn.train.train", "symfast.schur.rnn.train.train_many",
            "symfast.layerwise.suite.run_suite", "symfast.layerwise.exactness.exactness_sweep",
            "symfast.layerwise.patches.patch_study", "symfast.readout.readout.readout"} <= names
    wrong = [n for n, p in found if p.default is not False and p.default is not inspect.Parameter.empty]
    assert not wrong, f"progress must default to False (on by default only in the CLI): {wrong}"


def test_reporter_false_true_callable_and_refusals(capsys):
    with records("symfast.layerwise") as got:
        reporter(False)("silent")
        reporter(None)("silent")
        reporter(True, "symfast.layerwise")("stage one")
    assert got == ["stage one"]
    capsys.readouterr()
    got = []
    rep = reporter(got.append)
    rep("stage two")
    bar = rep.bar(20, desc="loop")
    for _ in range(20):
        bar.set_postfix(loss="1e-3")
        bar.update(1)
    bar.close()
    assert got[0] == "stage two" and got[-1] == "loop: 20/20 (loss=1e-3)" and len(got) == 11
    quiet = reporter(False).bar(5)
    quiet.update(5)
    quiet.close()
    assert capsys.readouterr().err == ""
    for bad in (1, "yes", 0.5):
        with pytest.raises(TypeError, match="progress must be True, False or a callable"):
            reporter(bad)


def test_fit_sdf_progress_forms(capsys):
    sf.fit_sdf(["square"], sf.DyadicAxisPE(2), **TINY)  # default: silent
    assert capsys.readouterr().err == ""
    lines = []
    sf.fit_sdf(["square"], sf.DyadicAxisPE(2), progress=lines.append, **TINY)
    assert lines[-1].startswith("fit_sdf ") and ": 20/20 (loss=" in lines[-1] and len(lines) == 10
    sf.fit_sdf(["square"], sf.DyadicAxisPE(2), progress=True, **TINY)
    assert "fit_sdf dyadic B=1" in capsys.readouterr().err  # the tqdm bar
    with pytest.raises(TypeError, match="progress"):
        sf.fit_sdf(["square"], sf.DyadicAxisPE(2), progress="yes", **TINY)


def test_layerwise_and_schur_take_the_same_forms():
    from symfast.layerwise.data import ImageData
    from symfast.layerwise.experiments import run_variants
    from symfast.schur import rnn
    from symfast.schur.rnn.train import fit

    data = ImageData(torch.zeros(8, 4).numpy(), torch.zeros(8, dtype=torch.long).numpy(), (1, 2, 2), "toy")
    args = (data, 1.0, (0,), False)
    fns = (lambda train, w, seed: None, lambda net, test, label, seed: label)
    lines = []
    run_variants(*args, lines.append, "toy", 3, *fns)
    assert lines == ["training toy equivariant seed 0: 3 steps"]
    with records("symfast.layerwise") as got:
        run_variants(*args, True, "toy", 3, *fns)
        run_variants(*args, False, "toy", 3, *fns)
    assert got == lines

    task = rnn.Copy(n_symbols=3, length=2, replay=3, scored=2)
    cfg = rnn.TrainConfig(epochs=1, batches_per_epoch=4, batch=4)
    lines = []
    fit(rnn.TanhRNN(task.n_in, 4, task.n_out, generator=torch.Generator().manual_seed(0)), task, 0, cfg,
        progress=lines.append, desc="copy")
    assert lines[-1].startswith("copy: 4/4 (loss=")


@pytest.mark.filterwarnings("ignore::UserWarning")  # the tiny budget warns
def test_run_sweep_takes_progress_and_the_old_quiet_still_works(tmp_path):
    from symfast.readout.sweeps import SweepSpec, run_sweep

    spec = SweepSpec(shapes=["square"], encodings=["dyadic"], hidden=[[4]], steps=[2], points=[8], seeds=1)
    lines = []
    run_sweep(spec, str(tmp_path / "a"), progress=lines.append)
    assert lines and lines[-1].startswith("sweep: 1/1")
    with pytest.warns(DeprecationWarning, match="quiet"):
        run_sweep(spec, str(tmp_path / "b"), quiet=True)


def test_readout_reports_its_cells():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # small budget
        ens = sf.fit_sdf(["triangle", "square"], sf.TriAxisPE(2), seeds=3, steps=2, points=16, hidden=(4,))
        lines = []
        sf.readout(ens, sweep=0, num_null=8, observable=["gram", "prefix1"], progress=lines.append)
    assert lines == [f"readout: {k}/4" for k in range(1, 5)]  # 2 shapes x 2 observables
