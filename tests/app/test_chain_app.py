"""A chain task in the app (docs/chain.md): its summary names the stage and the op where the error enters,
the op table's `entered` column the stage where each row's error entered, and `s` lists the stages and steps, opening the one chosen as a task of its own. On tpu-mlir's own files:
the tiny transformer's top -> tpu -> bmodel at INT8 (the conformance corpus)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from accuscope.app.app import AccuscopeApp
from accuscope.app.dialogs import ChooseDialog
from accuscope.app.taskscreen import TaskScreen
from appkit import drive, screen_text, wait_for
from support.data import FIXTURES

TPUMLIR = FIXTURES / "conformance" / "tpumlir"


@pytest.fixture(scope="module")
def chain_task(tmp_path_factory):
    d = tmp_path_factory.mktemp("chain-app")
    int8 = TPUMLIR / "tfm-int8"
    r = subprocess.run([sys.executable, "-P", "-m", "accuscope", "compare", "--golden", TPUMLIR / "tfm" / "tfm_onnx_all.npz",
                        "--npu", f"top={TPUMLIR / 'tfm' / 'tfm_top_outputs.npz'}",
                        "--npu", f"tpu={int8 / 'tfm_bm1684x_int8_sym_tpu_outputs.npz'}",
                        "--npu", f"bmodel={int8 / 'tfm_bm1684x_int8_sym_model_outputs.npz'}",
                        "--out", d / "tasks" / "chain"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return d / "tasks"


def test_a_chain_task_names_where_the_error_enters_and_s_opens_a_stage(chain_task):
    async def script(pilot):
        task = pilot.app.screen
        await wait_for(pilot, lambda: isinstance(task, TaskScreen) and task.opened is not None
                       and "chain" in screen_text(pilot.app))
        text = screen_text(pilot.app)
        assert "chain ✗ fail enters at tpu: blocks.1.attn.proj/Add_Add" in text
        # the op table's `entered`: the bmodel's output row's error entered at tpu (its logits Gemm)
        await wait_for(pilot, lambda: "entered" in task.table_widget.extra)
        assert list(task.table_widget.extra["entered"]) == ["tpu"]
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, ChooseDialog))
        text = screen_text(pilot.app)
        assert "top: pass against the reference" in text and "tpu: step against the stage before" in text
        await pilot.press("down", "enter")  # the second choice: tpu against the reference
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, TaskScreen) and pilot.app.screen is not task)
        opened = pilot.app.screen
        await wait_for(pilot, lambda: opened.opened is not None)
        return opened.folder
    folder = drive(AccuscopeApp(chain_task, open_path=chain_task / "chain"), script, size=(120, 30))
    assert folder == chain_task / "chain" / "stages" / "tpu"


# ---- the per-stage views (docs/chain.md, "In the app"): a stage group in the op table, a curve per stage in
# the chart, the op at every stage in the row detail, the graph's ops marked by the stage of entry


@pytest.fixture(scope="module")
def onnx_chain(cls_model, tmp_path_factory):
    """fp32 -> ORT-optimised -> fp16 of PP-OCR's direction classifier (tests/support/chains.py), a quarter of
    a Conv's channels negated in the optimised model: the error enters at opt (Conv@26), fp16 inherits it.
    Every stage has every node: the op table's rows have each stage's cos; the model gives the graph."""
    import numpy as np

    from support.chains import optimised_fp16_chain
    d = tmp_path_factory.mktemp("onnx-chain")
    stages, planted = optimised_fp16_chain(cls_model, d / "models", "opt")
    np.save(d / "x.npy", np.random.default_rng(11).standard_normal((1, 3, 48, 192)).astype(np.float32))
    r = subprocess.run([sys.executable, "-P", "-m", "accuscope", "run", cls_model,
                        *(f"{k}={v}" for k, v in stages.items()), "--input", f"x={d / 'x.npy'}",
                        "--out", d / "tasks" / "chain"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert planted == "Conv@26"
    return d / "tasks"


async def opened_chain(pilot) -> TaskScreen:
    """The task screen once the chain's per-stage views are in (its worker judged the stages)."""
    task = pilot.app.screen
    await wait_for(pilot, lambda: isinstance(task, TaskScreen) and task.chain_view is not None
                   and "entered" in task.table_widget.extra and not task.advising)
    await pilot.pause()
    return task


def lines_with(text: str, word: str) -> list[str]:
    return [line for line in text.splitlines() if word in line]


def test_the_op_table_shows_each_stages_cos_first_beside_entered_at_80x24(onnx_chain):
    from accuscope.engine.tasks.task import load_task
    opt = load_task(onnx_chain / "chain" / "stages" / "opt").result[0]
    want = float(opt.numbers("cos")[list(opt.columns["tensor"]).index("Conv@26:output:0")])

    async def script(pilot):
        task = await opened_chain(pilot)
        (header,) = lines_with(screen_text(pilot.app), "NPU op")
        assert header.split("│")[1].split()[:3] == ["entered", "cos@opt", "cos@fp16"]  # right of the divider
        # filtered by a stage's cos (its spelling as a name): the planted Conv and what follows it
        await pilot.press("f", *'cos_opt < 0.6 and io == "output"', "enter")
        await pilot.pause()
        text = screen_text(pilot.app)
        (row,) = [line for line in lines_with(text, "Conv@26") if "│" in line]
        assert task.chain_view is not None
        fp16 = float(task.chain_view.columns()["fp16"][task.table_widget.cursor_row])
        assert row.split("│")[1].split()[:3] == ["opt", f"{want:.6f}", f"{fp16:.6f}"]
        assert 'filter cos_opt < 0.6 and io == "output"' in text
        return task.table_widget.columns[:4]
    assert drive(AccuscopeApp(onnx_chain, open_path=onnx_chain / "chain"), script) == \
        ["index", "npu_op", "entered", "cos@opt"]


def test_the_chart_draws_a_curve_per_stage_with_its_legend(onnx_chain):
    from accuscope.app.stageviews import ChainChart

    async def script(pilot):
        task = await opened_chain(pilot)
        chart = task.query_one(ChainChart)
        assert "CosineSimilarity vs the reference: • opt  + fp16" in screen_text(pilot.app)
        assert chart.chain is not None
        curves = chart.chain.curves("cos")
        # each stage's curve along the same ops: the fault's Conv at one x, its cos there per stage
        row = list(chart.chain.table.columns["tensor"]).index("Conv@26:output:0")
        at = curves.keys.index(chart.chain.key(row))
        assert curves.series["opt"][at] < 0.6 and curves.series["fp16"][at] < 0.6
        assert curves.series["opt"][0] == pytest.approx(1.0)
        await pilot.press("c")  # the next metric: every stage's curve of it
        await pilot.pause()
        assert "vs the reference: • opt  + fp16" in screen_text(pilot.app)
        return chart.metric
    assert drive(AccuscopeApp(onnx_chain, open_path=onnx_chain / "chain"), script) != "cos"


def chart_marks(text: str) -> int:
    """The points the maximised chart draws (each stage's marker, • or +) inside its frame."""
    lines = text.splitlines()
    top = next(i for i, line in enumerate(lines) if line.lstrip().startswith("┌"))
    bottom = next(i for i, line in enumerate(lines) if line.lstrip().startswith("└"))
    frame = lines[top].index("┌")
    return sum(line[frame + 1:].count(m) for line in lines[top + 1:bottom] for m in "•+")


def test_the_chart_draws_the_stages_of_the_filtered_rows_only(onnx_chain):
    """Filtered to one row, the chart draws its op at each stage: no other op's points (the stages'
    whole tables were drawn whatever the filter)."""
    async def script(pilot):
        task = await opened_chain(pilot)
        await pilot.press("tab", "z")
        await pilot.pause()
        every = chart_marks(screen_text(pilot.app))
        await pilot.press("z", "shift+tab", "f", *'tensor == "Conv@26:output:0"', "enter")
        await pilot.pause()
        assert len(task.table_widget.view) == 1
        await pilot.press("tab", "z")
        await pilot.pause()
        text = screen_text(pilot.app)
        assert "vs the reference: • opt  + fp16" in text
        return every, chart_marks(text)
    every, filtered = drive(AccuscopeApp(onnx_chain, open_path=onnx_chain / "chain"), script)
    assert every > 50 and 1 <= filtered <= 2  # the Conv at opt and at fp16 (one mark where they overlap)


def test_the_row_detail_shows_the_op_at_every_stage_and_where_it_entered(chain_task):
    async def script(pilot):
        await opened_chain(pilot)
        await pilot.press("D")
        await pilot.pause()
        return screen_text(pilot.app)
    text = drive(AccuscopeApp(chain_task, open_path=chain_task / "chain"), script)
    assert "at every stage (step: against the stage before)" in text
    inside = [line.split("█")[1].split() for line in text.splitlines() if line.count("█") >= 2]  # the dialog's
    top, tpu, bmodel = (next(words for words in inside if words[:1] == [label]) for label in ("top", "tpu", "bmodel"))
    assert top == ["top", "1.000000", "2.54e-07", "✓", "reference", "1.000000", "2.54e-07"]
    # the bmodel's logits carry tpu's error: against the reference 0.9978, against tpu 0.9996
    assert tpu == ["tpu", "0.998248", "0.0667", "✗", "top", "0.998248", "0.0667", "◀", "entered"]
    assert bmodel == ["bmodel", "0.997831", "0.0684", "✗", "tpu", "0.999612", "0.0302"]


def test_the_operator_detail_shows_the_op_at_every_stage(chain_task):
    async def script(pilot):
        await opened_chain(pilot)
        await pilot.press("enter")
        await wait_for(pilot, lambda: not getattr(pilot.app.screen, "computing", True))
        await pilot.pause()
        return screen_text(pilot.app)
    text = drive(AccuscopeApp(chain_task, open_path=chain_task / "chain"), script)
    assert "cos by stage: top 1.000000 · tpu 0.998248 ✗ ◀ entered · bmodel 0.997831 ✗" in text


def test_the_graph_marks_each_op_by_the_stage_its_error_entered_at(onnx_chain):
    from accuscope.app.graphscreen import GraphScreen

    async def script(pilot):
        await opened_chain(pilot)
        await pilot.press("f", *'npu_op == "Conv@26"', "enter", "g")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, GraphScreen) and pilot.app.screen.graph is not None)
        await pilot.pause()
        return screen_text(pilot.app)
    text = drive(AccuscopeApp(onnx_chain, open_path=onnx_chain / "chain"), script)
    assert "entered at: 1 opt · 2 fp16" in text
    (conv,) = lines_with(text, " Conv@26 ")
    assert conv.split()[:3] in (["1", "✗", "0.50088"], ["│", "1", "✗"])  # its node drawn as stage 1's mark
    clean = [line for line in lines_with(text, " Mul@10 ")]  # the op before it: no error, its node as ever
    assert clean and "●" in clean[0]


def test_a_shows_the_advice_from_the_stage_where_the_error_enters_and_jumps_to_its_op(onnx_chain):
    """`a` on a chain task: the advisor's first finding names the stage and the op where the error enters
    (opt's Conv@26, advised on opt against the reference, not on fp16's inherited error), and enter on it
    moves the op table to that op's row of the chain's own table."""
    from accuscope.app.advicescreen import AdviceScreen
    from accuscope.app.optable import OperatorTable

    async def script(pilot):
        task = await opened_chain(pilot)
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, AdviceScreen)
                       and pilot.app.screen.advice is not None)
        screen = pilot.app.screen
        assert isinstance(screen, AdviceScreen) and screen.advice is not None
        head, text = screen.advice.cause, screen_text(pilot.app)
        assert head is not None and (head.rule, head.op, screen.advice.stage) == ("chain", "Conv@26", "opt")
        assert "the error enters at opt: Conv@26" in text
        await pilot.press("enter")
        await pilot.pause()
        assert pilot.app.screen is task
        table = task.query_one(OperatorTable)
        return str(table.table.columns["npu_op"][table.cursor_row]), head.row, table.cursor_row
    op, row, cursor = drive(AccuscopeApp(onnx_chain, open_path=onnx_chain / "chain"), script)
    assert op == "Conv@26" and row == cursor


def test_a_threshold_edit_judges_the_chain_again(chain_task, tmp_path):
    """The summary's chain line and the `entered` column follow thresholds edited in the app (they were the
    saved answer: the chain's line stayed "enters at tpu" under thresholds that no stage breaks)."""
    import shutil
    shutil.copytree(chain_task, tmp_path / "tasks")
    tasks = tmp_path / "tasks"

    async def script(pilot):
        task = await opened_chain(pilot)
        assert "chain ✗ fail enters at tpu" in screen_text(pilot.app)
        view = task.chain_view
        await pilot.press("t", *"cos=0.5 red=off kl=off rmse=off mean_rel=off", "enter")
        await wait_for(pilot, lambda: task.chain_view is not view and not task.saving)
        await pilot.pause()
        return screen_text(pilot.app), list(task.table_widget.extra["entered"])
    text, entered = drive(AccuscopeApp(tasks, open_path=tasks / "chain"), script, size=(120, 30))
    assert "chain ✓ pass all 3 stages meet the thresholds; no error enters" in text
    assert "enters at tpu" not in text
    assert entered == [""]


@pytest.fixture(scope="module")
def snap_chain():
    """The tiny transformer's INT8 chain (top -> tpu -> bmodel) from copies of its files in a folder whose
    path has the same length every run (the row detail shows the files; normalized() hides its random part)."""
    import shutil
    import tempfile
    from pathlib import Path
    root = Path(tempfile.mkdtemp(prefix="accuscope-snap-", dir="/tmp"))
    int8 = TPUMLIR / "tfm-int8"
    files = [TPUMLIR / "tfm" / "tfm_onnx_all.npz", TPUMLIR / "tfm" / "tfm_top_outputs.npz",
             int8 / "tfm_bm1684x_int8_sym_tpu_outputs.npz", int8 / "tfm_bm1684x_int8_sym_model_outputs.npz"]
    for f in files:  # under their own names: tpu-mlir's names say what each file is
        shutil.copy(f, root / f.name)
    golden, *stages = (root / f.name for f in files)
    r = subprocess.run([sys.executable, "-P", "-m", "accuscope", "compare", "--golden", golden,
                        *(a for label, f in zip(("top", "tpu", "bmodel"), stages) for a in ("--npu", f"{label}={f}")),
                        "--out", root / "chain"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    yield root / "chain"
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("name, size, keys", [
    ("chain-task-80x24", (80, 24), []),
    ("chain-task-160x50", (160, 50), []),
    ("chain-chart-80x24", (80, 24), ["tab", "z"]),  # the chart alone: every stage's curve, the legend
    ("chain-row-80x24", (80, 24), ["D"]),  # the op at every stage
    ("chain-row-160x50", (160, 50), ["D"]),
    # the operator detail: its op's cos at every stage (at 80 columns its timing line is cut before the
    # " s" normalized() hides: test_the_operator_detail_shows_the_op_at_every_stage reads it there)
    ("chain-op-160x50", (160, 50), ["enter"]),
])
def test_chain_snapshot(snap_chain, name, size, keys):
    from appkit import check_snapshot

    async def script(pilot):
        await opened_chain(pilot)
        for key in keys:
            await pilot.press(key)
        await wait_for(pilot, lambda: not getattr(pilot.app.screen, "computing", False))
        await pilot.pause()
        await pilot.pause()
        return pilot.app.export_screenshot(title="accuscope")
    check_snapshot(name, drive(AccuscopeApp(snap_chain.parent, open_path=snap_chain), script, size=size))
