"""Shared fixtures.

Tests import the installed package (pytest's default rootdir handling keeps the
source tree off sys.path); subprocesses run from a temporary directory for the
same reason.
"""
import os
import signal
import subprocess
import sys

import pytest

from symfast import _ext

# A shell that starts pytest in the background (`cmd &`, nohup) leaves SIGINT ignored, and Python
# then installs no KeyboardInterrupt handler: the Ctrl-C tests could not deliver their signal, nor
# could the subprocesses they start (an ignored signal stays ignored across exec). Restore the
# default handler so those tests test the code, not the launcher.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def run_interpreted(tmp_path, request):
    """Run a Python script with TRITON_INTERPRET=1 in a subprocess and return its stdout.

    The variable must be set before triton is imported and must not leak into other
    tests, hence the subprocess. Skips when triton is not installed; fails with the
    script's output when it exits non-zero or does not print `expect`. The calling test's
    folder is on the script's path, so it can import helpers from its test module; the run's own
    PYTHONPATH follows it, so the script imports the same symfast as the test.
    """
    if not _ext.HAS_TRITON:
        pytest.skip("triton not installed")

    def run(script: str, expect: str = "ok", timeout: float = 300) -> str:
        env = dict(os.environ, TRITON_INTERPRET="1")
        # the test folder first; a PYTHONPATH the run was given (a source checkout) still decides which
        # symfast the script imports, as it does for the test itself
        env["PYTHONPATH"] = os.pathsep.join([str(request.path.parent)] + ([os.environ["PYTHONPATH"]]
                                                                          if os.environ.get("PYTHONPATH") else []))
        r = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=timeout)
        assert r.returncode == 0 and expect in r.stdout, r.stdout[-2000:] + r.stderr[-4000:]
        return r.stdout

    return run


@pytest.fixture
def no_backend_switch(monkeypatch):
    """Fails the test if the library tries to switch the matplotlib backend (only the CLI selects one)."""
    import matplotlib
    import matplotlib.pyplot as plt

    def refuse(*a, **k):
        raise AssertionError("a plot function switched the matplotlib backend")

    before = matplotlib.get_backend()
    monkeypatch.setattr(matplotlib, "use", refuse)
    monkeypatch.setattr(plt, "switch_backend", refuse)
    yield
    assert matplotlib.get_backend() == before
