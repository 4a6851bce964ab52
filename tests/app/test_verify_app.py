"""`v` on the advisor screen verifies the headline by replaying the conversion (as `advise --verify`):
on a small model converted to fp16 by onnxconverter-common itself, whose first MatMul's weights lie
beyond fp16's range, the headline becomes that op, kept in fp32, with the output's cos before and
after on screen, and the task screen shows the verified advice when the user goes back."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from accuscope.app.advicescreen import AdviceScreen
from accuscope.app.app import AccuscopeApp
from appkit import drive, screen_text, wait_for
from support.narrow import present


@pytest.fixture(scope="module")
def fp16_task(tmp_path_factory):
    from onnxconverter_common import float16
    d = tmp_path_factory.mktemp("verify-app")
    rng = np.random.default_rng(3)
    w1 = (rng.uniform(-1.3e5, 1.3e5, (16, 16))).astype(np.float32)  # half of it beyond 65504: clamped
    w2 = (rng.standard_normal((16, 16)) * 1e-4).astype(np.float32)
    w3 = rng.standard_normal((16, 4)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h1"], name="big"),
             helper.make_node("MatMul", ["h1", "w2"], ["h2"], name="small"),
             helper.make_node("Relu", ["h2"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w3"], ["y"], name="head")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
                              [numpy_helper.from_array(w, n) for w, n in ((w1, "w1"), (w2, "w2"), (w3, "w3"))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(d / "ref.onnx"))
    onnx.save(float16.convert_float_to_float16(model, keep_io_types=True), str(d / "cand.onnx"))
    np.save(d / "x.npy", (rng.standard_normal((1, 16)) * 0.01).astype(np.float32))
    r = subprocess.run([sys.executable, "-P", "-m", "accuscope", "run", d / "ref.onnx", d / "cand.onnx", "--input",
                        f"x={d / 'x.npy'}", "--out", d / "tasks" / "fp16"], capture_output=True, text=True)
    assert r.returncode in (0, 1), r.stderr
    return d / "tasks"


def test_v_verifies_the_headline_and_the_task_screen_shows_it(fp16_task):
    async def script(pilot):
        task = pilot.app.screen
        await wait_for(pilot, lambda: task.advice is not None)
        assert "Ranking estimated" in next(f.text for f in task.advice.findings if f.rule == "introduced")
        await pilot.press("a")
        advisor = pilot.app.screen
        assert isinstance(advisor, AdviceScreen)
        await pilot.press("v")
        await wait_for(pilot, lambda: not advisor.verifying)
        await pilot.pause()
        text = screen_text(pilot.app)
        head = next(f for f in present(advisor.advice).findings if f.rule == "introduced")
        assert head.op == "big" and head.evidence["ranking"] == "verified"
        assert "big: kept in fp32, output cos" in text and "(verified)" in text
        assert "Converted to fp16 again with only big" in text
        await pilot.press("escape")
        assert pilot.app.screen is task
        assert task.advice is advisor.advice  # the task screen took the verified advice
        return head.evidence["verified"]
    verified = drive(AccuscopeApp(fp16_task, open_path=fp16_task / "fp16"), script, size=(120, 40))
    kept = {k["golden_op"]: k["output_cos"] for k in verified["kept"]}
    assert kept["big"] > 0.9999 > verified["full_cos"]  # kept in fp32, the output is right again
