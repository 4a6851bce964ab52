"""Ctrl+C (SIGINT) and SIGTERM end a command with exit 130 and the line `interrupted`, never a
traceback, from the first line of accuscope's code on: in the imports that take most of a command's
first half second too. Through the installed `accuscope` script, as a user runs it.

Two ways of sending them: deterministically, by a stand-in for `json` or `numpy` (on PYTHONPATH)
that signals its own process while the command imports it; and at fixed delays after the start, as
a user would. The delays are only when the signal goes: whether accuscope had taken the signals by
then is read from the process (/proc/PID/status SigCgt: only accuscope catches SIGTERM, and it takes
both at once); a signal that came earlier, while the interpreter itself was starting, ends it as it
ends any Python program, but never inside accuscope's code."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from accuscope.engine.demo.ranktree import write_rank_tree

SCRIPT = Path(sys.executable).parent / "accuscope"
pytestmark = pytest.mark.skipif(not SCRIPT.exists() or not sys.platform.startswith("linux"),
                                reason="the installed accuscope script on Linux (/proc)")
INTERRUPTED = 130
DELAYS = (0, 0.05, 0.1, 0.2, 0.4)
ACCUSCOPE_FRAME = re.compile(r'File "[^"]*[/\\]accuscope[/\\][^"]*\.py"')
STANDIN = '''
import importlib, os, signal, sys
os.kill(os.getpid(), signal.{sig})
_here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
del sys.modules[__name__]
sys.modules[__name__] = importlib.import_module(__name__)
'''


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> tuple[Path, Path]:
    return write_rank_tree(tmp_path_factory.mktemp("tree"), ranks=2, tensors=2)


def as_from_a_terminal() -> None:
    """In the child before exec: Ctrl+C's default disposition, as a program started from a shell prompt has
    it. A test run started in the background by a script (`cmd &` without job control) ignores SIGINT, and
    a child inherits that: accuscope rightly leaves an ignored SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def compare(tree, out: Path, **popen) -> subprocess.Popen:
    npu, golden = tree
    return subprocess.Popen([str(SCRIPT), "compare", "--npu", str(npu), "--golden", str(golden), "--out", str(out),
                             "--workers", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=as_from_a_terminal, **popen)


def assert_interrupted(tree, tmp_path: Path, module: str, standin_text: str) -> None:
    """`compare` with `module` replaced by a stand-in (its text) put first on PYTHONPATH: exit 130 and the
    one line `interrupted`, nothing else."""
    standin = tmp_path / "standin" / module
    standin.mkdir(parents=True)
    (standin / "__init__.py").write_text(standin_text)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(standin.parent),
                                                                      os.environ.get("PYTHONPATH")]))}
    proc = compare(tree, tmp_path / "t", env=env)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == INTERRUPTED, (proc.returncode, err)
    assert err.strip() == "interrupted" and out == ""


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("module", ["json", "numpy"])  # the command's own module; the command's engine
def test_a_signal_during_the_imports_is_exit_130_without_a_traceback(tree, tmp_path, module, sig):
    assert_interrupted(tree, tmp_path, module, STANDIN.format(sig=sig))


# numpy's C extension imports datetime through PyCapsule_Import, which turns a KeyboardInterrupt landing there
# into an ImportError; numpy then stays unimportable in that process (seen once in ~20 runs of the test below)
CONVERTED = '''
import os, signal, sys, time
if getattr(sys, "standin_failed", False):
    raise ImportError("cannot load module more than once per process")
sys.standin_failed = True
try:
    os.kill(os.getpid(), signal.{sig})
    time.sleep(5)
except KeyboardInterrupt:
    raise ImportError('PyCapsule_Import could not import module "datetime"') from None
'''


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_that_c_code_turns_into_another_error_is_still_an_interruption(tree, tmp_path, sig):
    assert_interrupted(tree, tmp_path, "numpy", CONVERTED.format(sig=sig))


# a signal whose handler runs where Python cannot raise (here a __del__; in the wild the import system's
# weakref callbacks): Python prints "Exception ignored" and goes on, so accuscope delivers it again
IN_DEL = '''
import importlib, os, signal, sys, time


class Lands:
    def __del__(self):
        os.kill(os.getpid(), signal.{sig})
        time.sleep(5)  # the handler runs here; its KeyboardInterrupt cannot leave __del__


Lands()
_here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
del sys.modules[__name__]
sys.modules[__name__] = importlib.import_module(__name__)
'''


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_where_python_cannot_raise_is_delivered_again(tree, tmp_path, sig):
    assert_interrupted(tree, tmp_path, "json", IN_DEL.format(sig=sig))


def caught(pid: int, sig: int) -> bool:
    """Whether process `pid` has a handler for `sig` now (False once it has ended)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            mask = next(int(line.split()[1], 16) for line in f if line.startswith("SigCgt:"))
    except (OSError, StopIteration):
        return False
    return bool(mask >> (sig - 1) & 1)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("delay", DELAYS)
def test_a_signal_at_any_moment_of_compare(tree, tmp_path, delay, sig):
    proc = compare(tree, tmp_path / "t")
    try:
        time.sleep(delay)
        taken = caught(proc.pid, signal.SIGTERM)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not ACCUSCOPE_FRAME.search(err), err  # never a traceback through accuscope's code
    if taken:  # accuscope had the signals: 130 (or 0: it had finished)
        assert proc.returncode in (INTERRUPTED, 0), (proc.returncode, err)
        assert "Traceback" not in err
        if proc.returncode == INTERRUPTED and err:
            assert err.strip().splitlines()[-1] == "interrupted", err
    else:  # the interpreter was still starting: Python's own ending for that signal
        assert proc.returncode in (INTERRUPTED, 0, 1, -sig), (proc.returncode, err)
