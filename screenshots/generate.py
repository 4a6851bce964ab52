"""Regenerate the README's screenshots: the real app on a freshly built demo workspace.

    python screenshots/generate.py
"""
from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
from pathlib import Path

from accuscope.app.app import AccuscopeApp
from accuscope.engine.demo.workspace import MAIN, MSPROBE, build_workspace

HERE = Path(__file__).parent


async def shoot(app: AccuscopeApp, name: str, size: tuple[int, int], keys: list[str]) -> None:
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        while getattr(app.screen, "advising", False):
            await pilot.pause(0.05)
        for key in keys:
            await pilot.press(key)
            await pilot.pause(0.05)
        await pilot.pause(1.0)  # workers of the screen just opened (op detail, graph)
        (HERE / f"{name}.svg").write_text(app.export_screenshot(title=f"accuscope: {name}"))
        print(HERE / f"{name}.svg")


def report(task: Path) -> None:
    """`accuscope report`'s HTML as Chromium renders it (the top of the page: verdict, findings, charts)."""
    from accuscope.engine.diagnose.advisor import current_advice
    from accuscope.engine.report.document import build_report, write_report
    from accuscope.engine.tasks.task import load_task
    browser = shutil.which("chromium")
    if browser is None:
        print("report.png: no chromium (apt-get install chromium), kept as it is")
        return
    page = task.parent / "report.html"
    opened = load_task(task)
    write_report(build_report(opened, current_advice(opened)), page)
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--screenshot={HERE / 'report.png'}", "--window-size=820,1360", page.as_uri()],
                   check=True, capture_output=True)
    print(HERE / "report.png")


CLS = Path.home() / ".cache" / "accuscope-tests" / "rapidocr-models" / "ch_ppocr_mobile_v2.0_cls_infer.onnx"


def fp16_cliff(root: Path) -> Path | None:
    """An `accuscope run` task of PP-OCR cls (cached by the tests from the rapidocr-onnxruntime wheel)
    whose BatchNormalization #12 holds a variance beyond float16, against its fp16 conversion."""
    if not CLS.is_file():
        print("precision.svg: no cached PP-OCR cls model (run the tests once), kept as it is")
        return None
    import sys
    import warnings

    import numpy as np
    import onnx
    from onnx import numpy_helper
    from onnxconverter_common import float16

    from accuscope.engine.runs.onnxedit import constants_as_initializers
    m = constants_as_initializers(onnx.load(str(CLS)))
    inits = {t.name: t for t in m.graph.initializer}
    bn = [n for n in m.graph.node if n.op_type == "BatchNormalization"][12]
    for name, f in ((bn.input[4], lambda v: (v + 1e-5) * 1e8 - 1e-5), (bn.input[1], lambda s: s * 1e4)):
        a = numpy_helper.to_array(inits[name])
        inits[name].CopyFrom(numpy_helper.from_array(f(a).astype(a.dtype), name))
    onnx.save(m, str(root / "ref.onnx"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        onnx.save(float16.convert_float_to_float16(m, keep_io_types=True), str(root / "fp16.onnx"))
    np.save(root / "x.npy", np.random.default_rng(5).standard_normal((1, 3, 48, 192)).astype(np.float32))
    task = root / "cls-fp16"
    subprocess.run([sys.executable, "-m", "accuscope", "run", str(root / "ref.onnx"), str(root / "fp16.onnx"),
                    "--input", f"x={root / 'x.npy'}", "--out", str(task)], check=True, capture_output=True)
    return task


async def precision(root: Path) -> None:
    """The mixed-precision search (`p` on the advisor) on an fp16 conversion that fails, once it is done."""
    task = fp16_cliff(root)
    if task is None:
        return
    app = AccuscopeApp(root, open_path=task)
    async with app.run_test(size=(120, 34)) as pilot:
        await pilot.pause()
        await pilot.press("a")
        while getattr(app.screen, "advice", None) is None:
            await pilot.pause(0.1)
        await pilot.press("p")
        while getattr(app.screen, "result", None) is None and not getattr(app.screen, "error", ""):
            await pilot.pause(0.2)
        await pilot.pause(0.5)
        (HERE / "precision.svg").write_text(app.export_screenshot(title="accuscope: precision"))
        print(HERE / "precision.svg")


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "demo"
        build_workspace(ws)
        task = ws / MAIN.name
        report(task)
        await shoot(AccuscopeApp(ws), "browser", (100, 20), [])
        await shoot(AccuscopeApp(ws, open_path=task), "task", (160, 50), ["!"])
        await shoot(AccuscopeApp(ws, open_path=task), "task-80x24", (80, 24), ["!"])
        await shoot(AccuscopeApp(ws, open_path=task), "filter", (160, 50),
                    ["f", *'cos < 0.99 and type == "Conv2D"', "enter"])
        await shoot(AccuscopeApp(ws, open_path=task), "help", (120, 40), ["question_mark"])
        await shoot(AccuscopeApp(ws, open_path=task), "advisor", (120, 30), ["a"])
        await shoot(AccuscopeApp(ws, open_path=task), "op-detail", (160, 50), ["exclamation_mark", "enter"])
        await shoot(AccuscopeApp(ws, open_path=task), "graph", (160, 50),
                    ["exclamation_mark", "g", "s", "o", "o", "e"])
        await shoot(AccuscopeApp(ws, open_path=ws / MSPROBE.name), "graph-msprobe", (120, 42),
                    ["exclamation_mark", "g"])
        await precision(Path(tmp))


if __name__ == "__main__":
    asyncio.run(main())
