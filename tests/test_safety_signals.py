"""A Ctrl-C is never lost: wherever it lands (training, a finaliser, a non-daemon thread's end, an atexit
callback, the last moments of shutdown), the command ends with exit 130 and one line."""
from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import textwrap

import pytest

from symfast import _interrupt
from symfast._progress import reporter
from symfast.commands.runner import execute


class _CtrlCInFinaliser:
    """An object whose finaliser receives the Ctrl-C: Python prints "Exception ignored" and goes on."""

    def __del__(self):
        signal.raise_signal(signal.SIGINT)


def _command(steps: list, progress):
    def run(args):
        obj = _CtrlCInFinaliser()
        del obj  # the KeyboardInterrupt is raised inside __del__ and swallowed there
        bar = reporter(progress).bar(5, desc="training")
        for _ in range(5):
            steps.append(1)
            bar.update(1)
        bar.close()
        return 0
    return argparse.Namespace(_run=run, quiet=True)


@pytest.mark.parametrize("progress", [True, False, lambda line: None])
def test_ctrl_c_swallowed_by_a_finaliser_stops_the_run_with_130(capsys, progress):
    steps: list = []
    assert execute(_command(steps, progress), "demo") == 130
    # stopped at the first progress update after the swallowed interrupt, not trained on to the end
    assert len(steps) == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == "symfast demo: interrupted" and "Traceback" not in err


def test_ctrl_c_swallowed_without_progress_still_ends_in_130(capsys):
    def run(args):
        try:  # a broad handler that drops the interrupt (as some library code does)
            signal.raise_signal(signal.SIGINT)
        except BaseException:
            pass
        return 0
    assert execute(argparse.Namespace(_run=run, quiet=True), "demo") == 130
    assert capsys.readouterr().err.strip() == "symfast demo: interrupted"
    assert not _interrupt.take()  # reported once, then forgotten: the next command starts clean


def test_a_command_run_in_process_restores_the_sigint_handler():
    before, hook = signal.getsignal(signal.SIGINT), sys.unraisablehook
    assert execute(argparse.Namespace(_run=lambda a: 0, quiet=True), "demo") == 0
    assert signal.getsignal(signal.SIGINT) is before and sys.unraisablehook is hook


def _run_program(tail: str, tmp_path):
    """`symfast schur --out DIR` as the installed program runs it (symfast.cli.run) with the command
    replaced by `tail` (the code run in place of the study, given `args`)."""
    body = textwrap.indent(textwrap.dedent(tail).strip(), "    ")
    script = (f"import sys\nimport symfast.cli as cli\n\ndef fake_execute(args, command):\n{body}\n    return 0\n\n"
              f"cli.execute = fake_execute\nsys.argv = ['symfast', 'schur', '--out', {str(tmp_path)!r}]\ncli.run()\n")
    return subprocess.run([sys.executable, "-P", "-c", script], capture_output=True, text=True, timeout=300)


SHUTDOWN_POINTS = {
    "atexit callback": """
        import atexit, os, signal, time
        def late():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(2)
            print("atexit callback ran on")
        atexit.register(late)
    """,
    "non-daemon thread's end": """
        import os, signal, threading, time
        threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    """,
    "finaliser at exit": """
        import gc, os, signal
        class Late:
            def __del__(self):
                os.kill(os.getpid(), signal.SIGINT)
        sys.modules["symfast_late"] = Late()  # finalised (if ever) only while the interpreter shuts down
        import atexit
        atexit.register(lambda: sys.modules.pop("symfast_late") and gc.collect())
    """,
}


@pytest.mark.parametrize("point", SHUTDOWN_POINTS)
def test_ctrl_c_during_shutdown_exits_130_with_one_line(tmp_path, point):
    p = _run_program(SHUTDOWN_POINTS[point], tmp_path)
    assert p.returncode == 130, (p.returncode, p.stderr[-2000:])
    assert p.stderr.strip() == "symfast schur: interrupted", p.stderr[-2000:]
    assert "ran on" not in p.stdout


def test_a_finished_program_exits_with_its_status(tmp_path):
    p = _run_program("print('done')", tmp_path)
    assert (p.returncode, p.stdout.strip(), p.stderr.strip()) == (0, "done", "")
    p = _run_program("return 2", tmp_path)
    assert p.returncode == 2
