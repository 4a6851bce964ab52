"""Custom metric plugins (msaccucmp's alg_{Name}.py convention): found only where the user says,
and a misbehaving plugin costs one cell, never the comparison."""
from __future__ import annotations

import math
import os
import textwrap

import numpy as np
import pytest

from accuscope.engine.compare import plugins
from accuscope.engine.sources.tensor import SourceError

X = np.arange(1, 7, dtype=np.float32)
Y = X + 0.5
ARGS = {"my_output_dump_file": "a.npy", "ground_truth_dump_file": "b.npy", "shape_type": [6]}


def write(folder, name, body):
    (folder / "algorithm").mkdir(exist_ok=True)
    (folder / "algorithm" / f"alg_{name}.py").write_text(textwrap.dedent(body))


@pytest.fixture
def found(tmp_path):
    write(tmp_path, "MaxDiff", """
        import numpy as np
        def compare(my_output_dump_data, ground_truth_dump_data, args):
            return f"{float(np.max(np.abs(my_output_dump_data - ground_truth_dump_data))):.6f}", ""
        """)
    write(tmp_path, "Raises", """
        def compare(my_output_dump_data, ground_truth_dump_data, args):
            raise ZeroDivisionError("boom")
        """)
    write(tmp_path, "Number", """
        def compare(my_output_dump_data, ground_truth_dump_data, args):
            return 0.5, ""
        """)
    write(tmp_path, "Hangs", """
        import time
        def compare(my_output_dump_data, ground_truth_dump_data, args):
            time.sleep(30)
        """)
    write(tmp_path, "NoCompare", "VALUE = 1\n")
    write(tmp_path, "TwoArgs", "def compare(a, b):\n    return '1', ''\n")
    write(tmp_path, "Syntax", "def compare(:\n")
    (tmp_path / "algorithm" / "helper.py").write_text("raise SystemExit('never imported')\n")
    found, problems = plugins.discover(str(tmp_path))
    return {p.name: p for p in found}, {p.path.rsplit("/", 1)[1]: p.message for p in problems}


def test_discover_loads_only_well_formed_alg_files(found):
    usable, problems = found
    assert sorted(usable) == ["Hangs", "MaxDiff", "Number", "Raises"]
    assert "defines no compare() function" in problems["alg_NoCompare.py"]
    assert "exactly three parameters" in problems["alg_TwoArgs.py"]
    assert "SyntaxError" in problems["alg_Syntax.py"]
    assert "helper.py" not in problems


def test_a_folder_without_algorithm_dir_is_unusable(tmp_path):
    with pytest.raises(SourceError, match="no 'algorithm' folder"):
        plugins.discover(str(tmp_path))


def test_good_plugin_returns_its_text(found):
    assert plugins.run(found[0]["MaxDiff"], X, Y, ARGS) == ("0.500000", "")


@pytest.mark.parametrize("name, reason", [
    ("Raises", "Raises raised ZeroDivisionError: boom"),
    ("Number", "Number returned a float result, not a string"),
])
def test_failing_plugin_gives_nan_and_a_reason(found, name, reason):
    value, why = plugins.run(found[0][name], X, Y, ARGS)
    assert math.isnan(float(value)) and why == reason


def test_hanging_plugin_times_out(found):
    value, why = plugins.run(found[0]["Hangs"], X, Y, ARGS, timeout=0.2)
    assert value == "NaN" and why == "Hangs: no answer within 0.2 s"


def test_plugin_gets_a_copy_of_args(found, tmp_path):
    write(tmp_path, "Mutates", """
        def compare(my_output_dump_data, ground_truth_dump_data, args):
            args.clear()
            return "ok", "fine"
        """)
    usable, _ = plugins.discover(str(tmp_path))
    mutates = next(p for p in usable if p.name == "Mutates")
    args = dict(ARGS)
    assert plugins.run(mutates, X, Y, args) == ("ok", "fine")
    assert args == ARGS


def test_plugins_never_run_in_accuscopes_process(tmp_path):
    """A plugin ending its interpreter, at import or in compare(), ends only the plugin host."""
    write(tmp_path, "ExitsOnImport", "import os\nos._exit(4)\n")
    write(tmp_path, "Exits", """
        import os
        def compare(my_output_dump_data, ground_truth_dump_data, args):
            if my_output_dump_data[0] > 1:
                os._exit(5)
            return str(os.getpid()), ""
        """)
    usable, problems = plugins.discover(str(tmp_path))
    assert [p.name for p in usable] == ["Exits"]
    assert problems[0].message == "not usable: ExitsOnImport ended its process (exit code 4); not computed"
    with plugins.PluginHost() as host:
        assert host.run(usable[0], X + 5, Y, ARGS) == ("NaN", "Exits ended its process (exit code 5); not computed")
        pid, _ = host.run(usable[0], X - 5, Y, ARGS)  # a new host serves the next pair
        assert int(pid) != os.getpid()


def test_the_time_budget_is_per_plugin_per_run(found):
    usable, _ = found
    with plugins.PluginHost(budget_s=0.3) as host:
        assert host.run(usable["Hangs"], X, Y, ARGS) == ("NaN", "Hangs: no answer within 0.3 s")
        disabled = ("NaN", "Hangs: disabled after using its 0.3 s time budget for this run")
        assert host.run(usable["Hangs"], X, Y, ARGS) == disabled
        assert host.run(usable["MaxDiff"], X, Y, ARGS) == ("0.500000", "")  # the others go on
        assert host.run(usable["Hangs"], X, Y, ARGS) == disabled


def test_the_budget_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv(plugins.BUDGET_ENV, "2.5")
    assert plugins.budget() == 2.5
    monkeypatch.setenv(plugins.BUDGET_ENV, "soon")
    assert plugins.budget() == plugins.TIMEOUT


def _host_in(folder: str, conn) -> None:
    try:
        found, problems = plugins.discover(folder)
        usable = {p.name: p for p in found}
        conn.send(("ok", plugins.run(usable["MaxDiff"], X, Y, ARGS)))
    except BaseException as exc:  # noqa: BLE001 - sent back to the test
        conn.send(("raised", repr(exc)))


def test_a_daemonic_process_hosts_plugins(found, tmp_path):
    """A Dask worker is a daemonic process (its nanny starts it so), which multiprocessing refuses
    children: the plugin host starts there all the same (it ends with its parent)."""
    import multiprocessing
    ctx = (multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods()
           else multiprocessing.get_context("spawn"))
    mine, theirs = ctx.Pipe()
    worker = ctx.Process(target=_host_in, args=(str(tmp_path), theirs), daemon=True)
    worker.start()
    try:
        assert mine.poll(120), "no answer from the daemonic process"
        assert mine.recv() == ("ok", ("0.500000", ""))
    finally:
        worker.join(30)
        if worker.is_alive():
            worker.kill()


def test_a_host_that_cannot_start_says_why_and_closes(monkeypatch):
    """A start that fails raises its own error: close() (on leaving the block) does not hide it."""
    from accuscope.engine.compare import lifetime

    class Refused:
        def __init__(self, ctx):
            self.ctx = ctx

        def Pipe(self):
            return self.ctx.Pipe()

        def Process(self, *args, **kwargs):
            process = self.ctx.Process(*args, **kwargs)
            process.start = lambda: (_ for _ in ()).throw(OSError("no more processes"))
            return process
    real = lifetime.process_context
    monkeypatch.setattr(lifetime, "process_context", lambda: Refused(real()))
    with pytest.raises(OSError, match="no more processes"):
        with plugins.PluginHost() as host:
            host.check(plugins.Plugin("X", "/nonexistent/alg_X.py"))
    host.close()  # and again: nothing left to close
