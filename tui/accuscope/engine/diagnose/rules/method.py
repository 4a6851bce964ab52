"""The method rule: origins judged by the weaker input/output method (no re-run), said once, with what
would make them re-runs."""
from __future__ import annotations

from accuscope.engine.diagnose.advice import Finding
from accuscope.engine.diagnose.rules.context import Context
from accuscope.engine.diagnose.rules.rule import Rule

METHOD = "method"


def method_note(run: Context) -> list[Finding]:
    if run.method != "input-output" or not run.origins:
        return []
    fw_path = run.fw_found
    why = ("the dumps could not be opened" if run.fw is not None else
           "the framework model could not be read" if fw_path else "no framework ONNX model was found")
    return [Finding(METHOD, "info", "origins judged by the weaker input/output method",
                    f"Ops were not re-run ({why}): an op is blamed when its output error is much larger than its "
                    "inputs', which misjudges ops that amplify errors (Softmax, normalization, division by small "
                    "values). Give the framework model with --framework-model FILE.onnx (or framework_model in "
                    "task.json) for a re-run of each failing op on the NPU's inputs.",
                    evidence={"framework_model": str(fw_path) if fw_path else None})]


RULE = Rule(METHOD, method_note, reads=("method", "origins", "fw"))
