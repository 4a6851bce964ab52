"""Faults during `accuscope compare`, injected into the real entry point: kill -9 while comparing and
while saving, SIGTERM, a full disk, a read-only folder, a second run into the same folder, helper
processes after their parent is killed, plugins that end their process or never return, and
internal errors. After each, the task's state is true and the previous result intact.

The kill points are reached through $ACCUSCOPE_FAULT (engine/faults.py): the run pauses there and
creates a marker file, and the test kills it then; nothing depends on timing."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.tasks.task import load_task
from accuscope.engine.tasks.tasklist import list_tasks
from support.cli import ENV, accuscope
from support.data import cls_with_planted_fault

FAULTY = "Relu@4"


@pytest.fixture(scope="module")
def case(cls_model, tmp_path_factory):
    root = tmp_path_factory.mktemp("faults")
    sim = cls_with_planted_fault(cls_model, root, FAULTY, lambda a: a * 3)
    return root, sim


def compare_args(case, out, *extra):
    root, sim = case
    return ["compare", "--npu", root / "npu" / "dump", "--golden", root / "golden", "--model", sim.model_json,
            "--out", out, *extra]


@pytest.fixture(scope="module")
def first(case, tmp_path_factory):
    """A finished task, copied fresh for each test that re-runs into it."""
    out = tmp_path_factory.mktemp("first") / "task"
    r = accuscope(*compare_args(case, out))
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture
def task(first, tmp_path):
    import shutil
    shutil.copytree(first, tmp_path / "task")
    return tmp_path / "task"


def wait_until(condition, what: str, limit: float = 120.0):
    """Poll until condition() holds; the limit only keeps a broken run from hanging the suite."""
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.05)


def start_paused(args, point: str, marker: Path, **env) -> subprocess.Popen:
    """Start a command that pauses at `point` (engine/faults.py); return once it is there."""
    proc = subprocess.Popen([sys.executable, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**ENV, "ACCUSCOPE_FAULT": f"pause {point} {marker}", **env})
    wait_until(lambda: marker.exists() or proc.poll() is not None, f"the run to reach {point}")
    if not marker.exists():
        pytest.fail(f"the run ended before {point}: {proc.communicate()}")
    return proc


def snapshot(folder: Path) -> tuple:
    t = load_task(folder)
    assert t.table is not None
    return t.doc.generation, t.doc.spec().op_range, t.table.columns["cos"].copy()


def same_result(folder: Path, before: tuple) -> None:
    gen, rng, cos = before
    t = load_task(folder)
    assert t.doc.generation == gen and t.doc.spec().op_range == rng
    assert t.table is not None
    np.testing.assert_allclose(t.table.columns["cos"], cos, rtol=0, atol=1e-6)  # the CSV has 6 decimals


# ---- kills ---------------------------------------------------------------------------------------


def test_kill_9_while_comparing_keeps_the_previous_result_and_reads_interrupted(case, task, tmp_path):
    before = snapshot(task)
    proc = start_paused(["-m", "accuscope", *compare_args(case, task, "--range", "1,10,1")], "compare",
                        tmp_path / "paused")
    assert load_task(task).doc.state == "running"  # its process is alive
    proc.kill()
    proc.wait()
    same_result(task, before)
    t = load_task(task)
    assert t.doc.attempt is not None
    assert t.doc.state == "interrupted" and t.doc.attempt["op_range"] == "1,10,1"
    assert t.warnings == []
    assert [e.state for e in list_tasks(task.parent) if e.path == task] == ["interrupted"]
    r = accuscope(*compare_args(case, task, "--range", "1,10,1"))  # it can be re-run at once
    assert r.returncode == 0, r.stderr
    t = load_task(task)
    assert t.doc.state == "done" and t.doc.spec().op_range == "1,10,1" and "attempt" not in t.doc
    assert len(list(task.glob("result_*.csv"))) == 1


@pytest.mark.parametrize("point", ["staged", "commit"])
def test_kill_9_while_saving_keeps_a_consistent_result(case, task, tmp_path, point):
    """staged: every new file written under a temporary name; commit: result.npz already renamed,
    task.json not yet: the table then comes from the CSV task.json names, with a warning."""
    before = snapshot(task)
    proc = start_paused(["-m", "accuscope", *compare_args(case, task, "--range", "1,10,1")], point,
                        tmp_path / "paused")
    proc.kill()
    proc.wait()
    same_result(task, before)
    t = load_task(task)
    assert t.doc.state == "interrupted"
    if point == "commit":
        assert len(t.warnings) == 1 and "result.npz is from another run than task.json" in t.warnings[0]
    else:
        assert t.warnings == [] and list(task.glob(".*.partial"))
    r = accuscope(*compare_args(case, task, "--range", "1,10,1"))
    assert r.returncode == 0, r.stderr
    assert load_task(task).warnings == []
    assert len(list(task.glob("result_*.csv"))) == 1 and not list(task.glob(".*.partial"))


def test_sigterm_cancels_like_ctrl_c(case, task, tmp_path):
    before = snapshot(task)
    proc = start_paused(["-m", "accuscope", *compare_args(case, task, "--range", "1,10,1")], "compare",
                        tmp_path / "paused")
    proc.terminate()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "cancelled: the previous result in the task folder, if any, is untouched" in out
    same_result(task, before)
    assert load_task(task).doc.state == "cancelled"


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state letter) of every process, from /proc."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            out[int(entry)] = (int(fields[1]), fields[0])
    return out


def _descendants(pid: int) -> set[int]:
    procs, found, todo = _processes(), set(), [pid]
    while todo:
        parent = todo.pop()
        for child, (ppid, _) in procs.items():
            if ppid == parent and child not in found:
                found.add(child)
                todo.append(child)
    return found


def _alive(pids: set[int]) -> set[int]:
    procs = _processes()
    return {p for p in pids if p in procs and procs[p][1] not in "ZX"}


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_helper_processes_die_with_a_killed_parent(case, tmp_path):
    """Workers and the plugin host, as the app runs them (pool always, inline_bytes=0)."""
    root, sim = case
    (tmp_path / "plugins" / "algorithm").mkdir(parents=True)
    (tmp_path / "plugins" / "algorithm" / "alg_Max.py").write_text(
        "import numpy as np\ndef compare(a, b, args):\n    return f'{float(np.abs(a - b).max()):.3f}', ''\n")
    script = textwrap.dedent(f"""
        from accuscope.engine.compare import comparison as engine
        from accuscope.engine.compare.spec import CompareSpec
        from accuscope.engine.tasks.taskrun import run_task
        spec = CompareSpec({str(root / "npu" / "dump")!r}, {str(root / "golden")!r}, model={sim.model_json!r},
                                  custom_dir={str(tmp_path / "plugins")!r})
        run_task(spec, {str(tmp_path / "task")!r}, workers=2, inline_bytes=0)
        """)
    proc = start_paused(["-c", script], "compare", tmp_path / "paused")
    helpers = _descendants(proc.pid)
    assert len(helpers) >= 3  # fork server, resource tracker, workers, plugin host
    proc.kill()
    proc.wait()
    wait_until(lambda: not _alive(helpers), "the helper processes to end")
    assert load_task(tmp_path / "task").doc.state == "interrupted"


def test_a_worker_that_dies_costs_only_its_own_row(case, tmp_path):
    """A worker ending mid-pair (as the OOM killer would) breaks the process pool: the pairs it had
    in flight are retried one by one, so only the culprit's row says so; the rest are compared."""
    root, sim = case
    script = textwrap.dedent(f"""
        import json
        from accuscope.engine.compare import comparison as engine
        from accuscope.engine.compare.runners import WORKER_DIED
        from accuscope.engine.compare.spec import CompareSpec
        plan = engine.plan(CompareSpec({str(root / "npu" / "dump")!r}, {str(root / "golden")!r},
                                              model={sim.model_json!r}))
        table = engine.execute(plan, workers=2, inline_bytes=0)
        died = [table.columns["tensor"][i] for i in range(len(table)) if WORKER_DIED in table.columns["reason"][i]]
        compared = int((table.columns["cos"] == table.columns["cos"]).sum())
        print(json.dumps({{"died": died, "compared": compared,
                           "pairs": sum(p.golden is not None for p in plan.pairs)}}))
        """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                       env={**ENV, "ACCUSCOPE_FAULT": f"exit pair {FAULTY}:output"})
    assert r.returncode == 0, r.stderr
    import json
    found = json.loads(r.stdout.splitlines()[-1])
    assert found["died"] and all(FAULTY in name for name in found["died"])
    assert found["compared"] + len(found["died"]) == found["pairs"]


# ---- the place ----------------------------------------------------------------------------------


@pytest.fixture
def small_fs(tmp_path):
    """A 64 KiB tmpfs (root only)."""
    mount = tmp_path / "small"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                                           capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_is_exit_2_naming_the_place(case, small_fs):
    r = accuscope(*compare_args(case, small_fs / "task"))
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "No space left on device" in r.stderr and str(small_fs) in r.stderr
    t = load_task(small_fs / "task")  # what fits says what happened
    assert t.table is not None
    assert t.doc.state in ("failed", "interrupted") and len(t.table) == 0


def test_a_file_size_limit_is_exit_2(case, tmp_path):
    import resource

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (16384, 16384))
    r = subprocess.run([sys.executable, "-m", "accuscope", *map(str, compare_args(case, tmp_path / "task"))],
                       capture_output=True, text=True, env=ENV, timeout=120, preexec_fn=limit)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "File too large" in r.stderr


def test_a_read_only_task_folder_is_exit_2_and_keeps_its_result(case, task, tmp_path):
    before = snapshot(task)
    if os.geteuid() == 0:
        ro = tmp_path / "ro"
        ro.mkdir()
        if subprocess.run(["mount", "--bind", str(task), str(ro)], capture_output=True).returncode or \
                subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], capture_output=True).returncode:
            pytest.skip("cannot make a read-only bind mount here")
        target = ro
    else:
        task.chmod(0o555)
        target = task
    try:
        r = accuscope(*compare_args(case, target, "--range", "1,10,1"))
    finally:
        if target != task:
            subprocess.run(["umount", str(target)], check=False)
        task.chmod(0o755)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and str(target) in r.stderr
    assert "Read-only file system" in r.stderr or "Permission denied" in r.stderr
    same_result(task, before)


def _file(p: Path) -> None:
    p.write_text("x")


def _foreign_folder(p: Path) -> None:
    p.mkdir()
    (p / "notes.txt").write_text("mine")


@pytest.mark.parametrize("name, make, message", [
    ("out", _file, "exists and is not a folder"),
    ("out", _foreign_folder, "is not empty and holds no task.json"),
    ("x" * 300, None, "File name too long"),
])
def test_an_out_that_cannot_hold_a_task_is_exit_2_and_untouched(case, tmp_path, name, make, message):
    out = tmp_path / name
    if make:
        make(out)
    before = sorted(p.name for p in tmp_path.iterdir())
    r = accuscope(*compare_args(case, out))
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    if make is _foreign_folder:
        assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_unusable_input_leaves_no_task_folder(case, tmp_path):
    root, _ = case
    r = accuscope("compare", "--npu", tmp_path / "missing", "--golden", root / "golden", "--out", tmp_path / "new")
    assert r.returncode == 2 and "no such file or folder" in r.stderr
    assert not (tmp_path / "new").exists()


def test_a_second_run_into_a_running_task_is_refused(case, task, tmp_path):
    before = snapshot(task)
    proc = start_paused(["-m", "accuscope", *compare_args(case, task)], "compare", tmp_path / "paused")
    try:
        r = accuscope(*compare_args(case, task, "--range", "1,10,1"))
        assert r.returncode == 2, r.stderr
        assert f"the task is running (pid {proc.pid} on " in r.stderr
    finally:
        proc.kill()
        proc.wait()
    same_result(task, before)


# ---- plugins and bugs ---------------------------------------------------------------------------


def _plugin(tmp_path: Path, name: str, body: str) -> Path:
    (tmp_path / "plugins" / "algorithm").mkdir(parents=True, exist_ok=True)
    (tmp_path / "plugins" / "algorithm" / f"alg_{name}.py").write_text(textwrap.dedent(body))
    return tmp_path / "plugins"


def test_a_plugin_calling_os_exit_costs_its_row_not_the_run(case, tmp_path):
    plugins = _plugin(tmp_path, "Exits", f"""
        import os
        def compare(my_output_dump_data, ground_truth_dump_data, args):
            if "{FAULTY}" in args["my_output_dump_file"]:
                os._exit(9)
            return "1.0", ""
        """)
    r = accuscope(*compare_args(case, tmp_path / "task", "--custom-algorithms", plugins))
    assert r.returncode == 0, r.stderr
    t = load_task(tmp_path / "task")
    assert t.doc.state == "done"
    assert t.table is not None
    c = t.table.columns
    died = [i for i in range(len(t.table)) if "Exits ended its process (exit code 9)" in c["reason"][i]]
    assert died and all(FAULTY in c["npu_op"][i] for i in died)
    assert sum(v == "1.0" for v in c["Exits"]) > 100  # every other pair got its value


def test_a_plugin_that_never_returns_is_disabled_after_its_budget(case, tmp_path):
    plugins = _plugin(tmp_path, "Hangs", """
        import time
        def compare(my_output_dump_data, ground_truth_dump_data, args):
            time.sleep(600)
        """)
    r = accuscope(*compare_args(case, tmp_path / "task", "--custom-algorithms", plugins, "--ops",
                                "Conv@0BatchNormalization@0,Conv@7Relu@4"), ACCUSCOPE_PLUGIN_BUDGET="0.5")
    assert r.returncode == 0, r.stderr
    t = load_task(tmp_path / "task")
    assert t.table is not None
    reasons = [r for r in t.table.columns["reason"] if "Hangs" in r]
    assert t.doc.state == "done" and len(reasons) >= 2
    assert "Hangs: no answer within 0.5 s" in reasons[0]  # the first call uses up the budget
    assert all("Hangs: disabled after using its 0.5 s time budget for this run" in r for r in reasons[1:])
    assert all(v == "NaN" for v in t.table.columns["Hangs"])


def test_an_internal_error_is_exit_3_with_one_line(case, tmp_path):
    r = accuscope(*compare_args(case, tmp_path / "task"), ACCUSCOPE_FAULT="raise compare")
    assert r.returncode == 3
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert "RuntimeError: fault injected at compare" in lines[0] and "bug in accuscope" in lines[0]
    assert "--debug" in lines[0]
    assert load_task(tmp_path / "task").doc.state == "failed"
    r = accuscope("--debug", *compare_args(case, tmp_path / "task"), ACCUSCOPE_FAULT="raise compare")
    assert r.returncode == 3 and "Traceback" in r.stderr and "faults.py" in r.stderr


def test_unusable_input_leaves_an_existing_task_as_it_was(case, task, tmp_path):
    before, doc = snapshot(task), (task / "task.json").read_bytes()
    r = accuscope("compare", "--npu", tmp_path / "missing", "--golden", case[0] / "golden", "--out", task)
    assert r.returncode == 2 and "no such file or folder" in r.stderr
    same_result(task, before)
    assert (task / "task.json").read_bytes() == doc


def test_a_task_made_ready_by_its_caller_records_why_its_input_was_unusable(tmp_path):
    from accuscope.engine.sources.tensor import SourceError
    from accuscope.engine.tasks.taskdoc import mark_state
    from accuscope.engine.tasks.taskrun import run_task
    mark_state(tmp_path / "retest", "running", kind="retest")  # as the re-test of an export does
    with pytest.raises(SourceError, match="no such file or folder"):
        run_task(CompareSpec(str(tmp_path / "missing"), str(tmp_path / "also-missing")), tmp_path / "retest")
    t = load_task(tmp_path / "retest")
    assert t.doc.state == "failed" and "no such file or folder" in t.doc.error and t.doc.kind == "retest"
