"""Helper processes run no code from the folder accuscope was started in: `python -c` / `-m` put that
folder first on sys.path, so a `struct.py` or `numpy.py` lying there would run in the fork server,
its resource tracker and the workers. `plant` lays such traps; each records the command line of the
process that imported it, then hands over the real module (so a run that falls for a trap still
works and the test names the process)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from accuscope.engine.compare import lifetime
from support.lifetime import plant, sprung


def test_the_traps_catch_a_plain_python_c(tmp_path):
    cwd, markers = plant(tmp_path)
    r = subprocess.run([sys.executable, "-c", "import struct, socket; print(struct.calcsize('i'))"], cwd=cwd,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "4", r.stderr
    assert {line.split(":")[0] for line in sprung(markers)} == {"struct", "socket"}


def test_fork_server_resource_tracker_and_pool_of_a_threaded_process_run_nothing_from_the_cwd(tmp_path):
    """The app's path: another thread runs, so process_context picks the fork server; a pool job
    and a plugin host go through it. A fresh process: the fork server is one per process."""
    cwd, markers = plant(tmp_path)
    (tmp_path / "plugins" / "algorithm").mkdir(parents=True)
    (tmp_path / "plugins" / "algorithm" / "alg_Diff.py").write_text(textwrap.dedent("""
        import numpy as np
        def compare(my_output_dump_data, ground_truth_dump_data, args):
            return f"{float(np.max(np.abs(my_output_dump_data - ground_truth_dump_data))):.3f}", ""
        """))
    driver = tmp_path / "driver.py"  # a script outside the trap folder: its own folder is sys.path[0]
    driver.write_text(textwrap.dedent(f"""
        import os, threading
        from concurrent.futures import ProcessPoolExecutor
        import numpy as np
        from accuscope.engine.compare import plugins
        from accuscope.engine.compare.lifetime import process_context
        if __name__ == "__main__":  # the workers import this file again
            stop = threading.Event()
            threading.Thread(target=stop.wait, daemon=True).start()  # as the app's threads
            ctx = process_context()
            assert ctx.get_start_method() == "forkserver", ctx.get_start_method()
            with ProcessPoolExecutor(2, mp_context=ctx) as pool:
                assert pool.submit(os.getpid).result(timeout=120) != os.getpid()
            found, problems = plugins.discover({str(tmp_path / "plugins")!r})
            assert [p.name for p in found] == ["Diff"] and not problems, (found, problems)
            x = np.arange(4, dtype=np.float32)
            print(plugins.run(found[0], x, x + 0.5, {{}}))
            stop.set()
        """))
    r = subprocess.run([sys.executable, str(driver)], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "('0.500', '')" in r.stdout
    assert sprung(markers) == []


def test_the_python_3_10_route_drops_the_cwd_and_keeps_pythonpath(tmp_path):
    """3.10 has no -P: a first `-c` drops sys.path[0] then runs multiprocessing's `-c CMD args`;
    it works on any version, so it is checked here on this one."""
    cwd, markers = plant(tmp_path)
    extra = tmp_path / "extra"  # an install through PYTHONPATH stays importable
    extra.mkdir()
    (extra / "probe_mod.py").write_text("import struct, socket, sys\nprint('probe', struct.__file__, sys.argv)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(extra), os.environ.get("PYTHONPATH")]))}
    flags = lifetime.safe_flags(["-B"], version=(3, 10))
    cmd = "import struct, socket, sys, probe_mod; print('cmd', sys.argv, struct.__file__)"
    r = subprocess.run([sys.executable, *flags, "-c", cmd, "--multiprocessing-fork"], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "cmd ['-c', '--multiprocessing-fork']" in r.stdout  # the argv `python -c CMD ARG` gives
    assert str(cwd) not in r.stdout
    r = subprocess.run(lifetime.module_command("probe_mod", "a", "b", version=(3, 10)), cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert f"'{extra / 'probe_mod.py'}', 'a', 'b']" in r.stdout and str(cwd) not in r.stdout
    assert sprung(markers) == []


def test_safe_flags_add_dash_p_once_from_3_11():
    assert lifetime.safe_flags(["-B"], version=(3, 11)) == ["-B", "-P"]
    assert lifetime.safe_flags(["-P"], version=(3, 12)) == ["-P"]
    assert lifetime.safe_flags(["-I"], version=(3, 12)) == ["-I"]
    assert lifetime.module_command("accuscope", "x", version=(3, 11))[1:] == ["-P", "-m", "accuscope", "x"]


def test_safe_helpers_change_only_what_multiprocessing_starts(monkeypatch):
    """The environment stays as it was: commands of the user's accuscope runs see theirs."""
    from multiprocessing import util
    monkeypatch.setattr(util, "_args_from_interpreter_flags", util._args_from_interpreter_flags)  # type: ignore[attr-defined]  # CPython's private helper, not in typeshed  # type: ignore[attr-defined]  # CPython's private helper, not in typeshed
    before = dict(os.environ)
    lifetime.safe_helpers()
    lifetime.safe_helpers()
    flags = util._args_from_interpreter_flags()  # type: ignore[attr-defined]  # CPython's private helper, not in typeshed
    assert flags == lifetime.safe_flags(subprocess._args_from_interpreter_flags())  # type: ignore[attr-defined]  # CPython's private helper, not in typeshed  # type: ignore[attr-defined]  # CPython's private helper, not in typeshed
    assert dict(os.environ) == before


def test_a_temporary_folder_too_long_for_the_fork_servers_socket_is_said_not_a_bug(tmp_path):
    """The fork server listens on TMPDIR/pymp-XXXXXXXX/listener-XXXXXXXX: past AF_UNIX's 108 bytes for a
    TMPDIR over ~75 characters. That is the environment's limit, said as such (SourceError: exit 2)."""
    long = tmp_path / ("t" * (99 - len(str(tmp_path))))  # with its separator: 100 characters
    long.mkdir()
    code = textwrap.dedent("""
        import threading, time
        threading.Thread(target=time.sleep, args=(3,), daemon=True).start()  # a thread: the fork server's path
        from accuscope.engine.compare.lifetime import process_context
        from accuscope.engine.sources.tensor import SourceError
        try:
            process_context()
        except SourceError as exc:
            print(exc)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "TMPDIR": str(long)})
    assert f"the temporary folder {long} (100 characters) is too long" in r.stdout, r.stdout + r.stderr
