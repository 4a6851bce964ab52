"""The method rule: origins judged by the weaker input/output method (no re-run), said once, with what
would make them re-runs."""
from __future__ import annotations

import os

from accuscope.engine.diagnose.advice import Finding
from accuscope.engine.diagnose.rules.context import Context, is_step_based
from accuscope.engine.diagnose.rules.rule import Rule
from accuscope.engine.sources import kinds

METHOD = "method"


def method_note(run: Context) -> list[Finding]:
    if run.method != "input-output" or not run.origins:
        return []
    if is_step_based(run):
        return [_msprobe_next_step(run)]
    fw_path = run.fw_found
    why = ("the dumps could not be opened" if run.fw is not None else
           "the framework model could not be read" if fw_path else "no framework ONNX model was found")
    return [Finding(METHOD, "info", "origins judged by the weaker input/output method",
                    f"Ops were not re-run ({why}): an op is blamed when its output error is much larger than its "
                    "inputs', which misjudges ops that amplify errors (Softmax, normalization, division by small "
                    "values). Give the framework model with --framework-model FILE.onnx (or framework_model in "
                    "task.json) for a re-run of each failing op on the NPU's inputs.",
                    evidence={"framework_model": str(fw_path) if fw_path else None})]


def _msprobe_next_step(run: Context) -> Finding:
    """A training step's calls have no ONNX model to re-run: msprobe's own pre-check re-runs an API on
    its dumped inputs against a CPU reference (run_ut), so that is the step after this one."""
    framework = "mindspore" if run.task.doc.sides.get("golden") == kinds.MINDSPORE or \
        run.task.doc.sides.get("npu") == kinds.MINDSPORE else "pytorch"
    npu = str(run.task.path("npu") or ".")
    dump = os.path.join(npu, "dump.json") if os.path.isfile(os.path.join(npu, "dump.json")) else \
        os.path.join(npu, "stepN", "rankM", "dump.json")
    return Finding(METHOD, "info", "origins judged by each call's inputs and outputs",
                   "A call is blamed when its output error is much larger than its inputs' (a training step's "
                   "dump has no model accuscope re-runs). To re-run a failing API on the dumped inputs against "
                   f"a CPU reference, use msprobe's own pre-check: `msprobe -f {framework} run_ut -api_info "
                   f"{dump}` (with the dump in tensor mode, level L1).",
                   evidence={"framework": framework})


RULE = Rule(METHOD, method_note, reads=("method", "origins", "fw", "task"))
