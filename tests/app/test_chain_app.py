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
