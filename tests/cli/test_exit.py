"""The program's exit: once the command has returned, the cyclic collector walks nothing (cli.main
freezes it) - in the program only, never in a caller of main(argv)."""
from __future__ import annotations

import subprocess
import sys

import numpy as np

PROBE = """
import atexit, gc, sys
atexit.register(lambda: print("frozen", gc.get_freeze_count() > 0))
from accuscope.cli import main
sys.argv = ["accuscope", *sys.argv[2:]] if sys.argv[1] == "program" else sys.argv
rc = main() if sys.argv[0] == "accuscope" else main(sys.argv[2:])
sys.exit(rc)
"""


def test_the_program_freezes_the_collector_before_the_interpreter_exits_and_main_argv_does_not(tmp_path):
    for side in ("npu", "golden"):
        (tmp_path / side).mkdir()
        np.save(tmp_path / side / "op.0.1700000000000000.npy", np.arange(8, dtype=np.float32))
    args = ["compare", "--npu", str(tmp_path / "npu"), "--golden", str(tmp_path / "golden")]
    for how, frozen in (("program", True), ("argv", False)):
        r = subprocess.run([sys.executable, "-c", PROBE, how, *args, "--out", str(tmp_path / how)],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines()[-1] == f"frozen {frozen}"
        assert (tmp_path / how / "task.json").exists()
