"""Structural pairs decided in the task screen (+ accept, - reject) on the real cross-framework msprobe
fixture (tests/fixtures/msprobe/cross: a MindSpore and a PyTorch step), saved as the task's pairs.yaml and
read by its re-run (R)."""
from __future__ import annotations

from pathlib import Path

from accuscope.app.app import AccuscopeApp
from accuscope.engine.compare import crossmap
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.tasks.task import load_task
from accuscope.engine.tasks.taskrun import run_task
from appkit import drive, screen_text, task_screen, wait_for
from support.narrow import present

CROSS = Path(__file__).parents[1] / "fixtures" / "msprobe" / "cross"
QKV = "Cell.layers.0.attention.qkv.Dense.forward.0"
PROJ = "Cell.layers.0.attention.proj.Dense.forward.0"


def cross_task(root: Path) -> Path:
    run_task(CompareSpec(str(CROSS / "ms"), str(CROSS / "pt"), match="structure"), root / "cross")
    return root / "cross"


def calls(table, how: str) -> dict[str, str]:
    rows = [table.row(i) for i in range(len(table))]
    return {r["npu_op"]: r["golden_op"] for r in rows if r["how"] == how}


def test_plus_accepts_minus_rejects_and_the_rerun_reads_them(tmp_path):
    folder = cross_task(tmp_path)
    app = AccuscopeApp(tmp_path, open_path=folder)

    async def script(pilot):
        await wait_for(pilot, lambda: not task_screen(app).advising)
        screen = task_screen(app)
        await pilot.press("f", *f'npu_op == "{QKV}"', "enter")
        await pilot.press("plus")
        await pilot.pause()
        accepted = screen_text(app)
        await pilot.press("f", *f'npu_op == "{PROJ}"', "enter")
        await pilot.press("minus")
        await pilot.pause()
        rejected = screen_text(app)
        await pilot.press("f", *'how == "api_table"', "enter", "plus")
        await pilot.pause()
        refused = " ".join(n.message for n in app._notifications)
        await pilot.press("R")
        await wait_for(pilot, lambda: not screen.running and screen.opened is not None)
        await pilot.press("f", *'how == "mapping"', "enter")
        await pilot.pause()
        return accepted, rejected, refused, screen_text(app)

    accepted, rejected, refused, after = drive(app, script, size=(160, 50))
    assert "pairs +1 -0 (R re-runs with them)" in accepted
    assert "pairs +1 -1 (R re-runs with them)" in rejected
    assert "is not an inferred pair (how: api_table)" in refused and f"rejected: {PROJ}" in refused
    assert "rows 4/237" in after and QKV in after and "pairs +" not in after  # paired by the file now
    task = load_task(folder)
    assert Path(present(task.doc.path("mapping", folder))).name == crossmap.DECISIONS
    assert task.doc.spec().match == "structure"
    assert list(calls(task.table, "mapping")) == [QKV]
    for how in crossmap.INFERRED:
        assert QKV not in calls(task.table, how) and PROJ not in calls(task.table, how)
    assert task.table is not None
    rows = [task.table.row(i) for i in range(len(task.table))]
    assert all(r["how"] == "" and "rejected in" in r["reason"] for r in rows if r["npu_op"] == PROJ)


def test_equals_accepts_underscore_rejects_one_tensor_and_the_file_says_it(tmp_path):
    folder = cross_task(tmp_path)
    app = AccuscopeApp(tmp_path, open_path=folder)
    weight, output = f"{PROJ}:input:1", f"{QKV}:output:0"

    async def script(pilot):
        await wait_for(pilot, lambda: not task_screen(app).advising)
        screen = task_screen(app)
        await pilot.press("f", *f'tensor == "{weight}"', "enter", "underscore")
        await pilot.pause()
        rejected = screen_text(app)
        notices = " ".join(n.message for n in app._notifications)
        await pilot.press("f", *f'tensor == "{output}"', "enter", "equals_sign")
        await pilot.pause()
        accepted = screen_text(app)
        notices += " ".join(n.message for n in app._notifications)
        await pilot.press("R")
        await wait_for(pilot, lambda: not screen.running and screen.opened is not None)
        return rejected, accepted, notices

    rejected, accepted, notices = drive(app, script, size=(160, 50))
    assert "pairs +0 -1 (R re-runs with them)" in rejected
    assert "pairs +1 -1 (R re-runs with them)" in accepted
    assert f"tensor rejected: {weight} ~ " in notices and "(saved in pairs.yaml)" in notices
    assert f"tensor accepted: {output} ~ Module.layers.0.self_attention.query_key_value.Linear.forward.0:output:0" \
        in notices
    text = (folder / crossmap.DECISIONS).read_text()
    assert f'"{weight}": ""' in text
    assert f'"{output}": "Module.layers.0.self_attention.query_key_value.Linear.forward.0:output:0"' in text
    rows = {r["tensor"]: r for r in (present(load_task(folder).table).row(i) for i in range(len(present(load_task(folder).table))))}
    assert rows[weight]["how"] == "" and "rejected in" in rows[weight]["reason"]
    assert rows[output]["how"] == "mapping"
    assert rows[f"{PROJ}:input:0"]["how"] == rows[f"{QKV}:input:0"]["how"] == crossmap.VARIANTS  # the rest as before


NORM = "Primitive.layer_norm.LayerNorm.0.forward"  # its weight (input:1) is left unpaired by the run
NORM_PT = "Functional.layer_norm.0.forward"


def test_p_picks_a_golden_counterpart_and_the_rerun_pairs_with_it(tmp_path):
    folder = cross_task(tmp_path)
    app = AccuscopeApp(tmp_path, open_path=folder)
    weight = f"{NORM}:input:1"

    async def script(pilot):
        from accuscope.app.pairpicker import PairPicker
        await wait_for(pilot, lambda: not task_screen(app).advising)
        screen = task_screen(app)
        await pilot.press("f", *f'tensor == "{weight}"', "enter", "p")
        picker = app.screen
        assert isinstance(picker, PairPicker)
        await wait_for(pilot, lambda: not picker.computing)
        listed = screen_text(app)
        await pilot.press(*"input:2 8")  # filtered by name and shape
        await pilot.pause()
        filtered = screen_text(app)
        await pilot.press("escape")  # cancelled: nothing saved
        await pilot.pause()
        cancelled = app.screen is screen and not (folder / crossmap.DECISIONS).exists()
        await pilot.press("p")
        await wait_for(pilot, lambda: isinstance(app.screen, PairPicker) and not app.screen.computing)
        await pilot.press(*"input:2 8", "enter")
        await pilot.pause()
        notices = " ".join(n.message for n in app._notifications)
        status = screen_text(app)
        await pilot.press("R")
        await wait_for(pilot, lambda: not screen.running and screen.opened is not None)
        await pilot.press("f", *f'tensor == "{weight}" and how == "mapping"', "enter")
        await pilot.pause()
        return listed, filtered, cancelled, notices, status, screen_text(app)

    listed, filtered, cancelled, notices, status, after = drive(app, script, size=(160, 50))
    assert f"golden counterpart of {weight}" in listed
    assert listed.index(f"{NORM_PT}:input:0") < listed.index("Module.layers.0.input_layernorm")  # same call first
    assert "same call" in listed and "shape+dtype" in listed
    assert f"{NORM_PT}:input:2" in filtered and f"{NORM_PT}:input:0" not in filtered
    assert cancelled
    assert f"tensor picked: {weight} ~ {NORM_PT}:input:2 (saved in pairs.yaml); R re-runs with it" in notices
    assert "pairs +1 -0 (R re-runs with them)" in status
    assert f'"{weight}": "{NORM_PT}:input:2"' in (folder / crossmap.DECISIONS).read_text()
    assert "rows 1/237" in after  # paired now, by the file
    task = load_task(folder)
    paired = next(p for p in task.plan.pairs if p.npu.name == weight)
    assert paired.how == "mapping" and paired.golden is not None and paired.golden.name == f"{NORM_PT}:input:2"


def test_row_details_of_a_left_call_name_its_outcome(tmp_path):
    """D on the row of a call no rung paired: its outcome (compare/leftovers.py) is the reason shown."""
    run_task(CompareSpec(str(CROSS / "ms"), str(CROSS / "pt")), tmp_path / "plain")
    app = AccuscopeApp(tmp_path, open_path=tmp_path / "plain")

    async def script(pilot):
        await wait_for(pilot, lambda: not task_screen(app).advising)
        table = task_screen(app).table_widget
        await wait_for(pilot, lambda: not table.waiting())
        if not table.show_invalid:  # a step's rows not compared start hidden: x shows them
            table.focus()
            await pilot.press("x")
        assert table.show_invalid
        await pilot.press("f", *'tensor == "Primitive.matmul.MatMul.0.forward:output:0"', "enter", "D")
        await pilot.pause()
        return " ".join(screen_text(app).split())

    shown = drive(app, script, size=(160, 50))
    assert "reason fused N:1 (2:1 NPU:golden): Primitive.matmul.MatMul.0.forward + Primitive.bias_add.BiasAdd.0" \
           in shown and "Functional.linear.0.forward" in shown  # (wrapped: the golden call on the next line)
