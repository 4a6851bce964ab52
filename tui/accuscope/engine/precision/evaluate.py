"""One trial's measure: the candidate model's network outputs against the reference's, computed
once, by the comparison's own metrics; or a user's `--check` command's exit status."""
from __future__ import annotations

import math
import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from accuscope.engine.compare.columns import LOWER_IS_WORSE, NUMERIC_METRICS
from accuscope.engine.compare.metrics import compare_arrays
from accuscope.engine.sources.outputfile import atomic_path, write_text
from accuscope.engine.sources.tensor import SourceError


@dataclass(frozen=True)
class Target:
    metric: str  # a comparison metric key (cos, red, max_abs, ...)
    bound: float

    @property
    def higher(self) -> bool:
        return self.metric in LOWER_IS_WORSE  # the metric table's direction

    def met(self, value: float) -> bool:
        return not math.isnan(value) and (value >= self.bound if self.higher else value <= self.bound)

    def worst(self, values: list[float]) -> float:
        """The outputs' worst value (NaN when any output could not be measured)."""
        if not values or any(math.isnan(v) for v in values):
            return math.nan
        return min(values) if self.higher else max(values)

    def __str__(self) -> str:
        return f"{self.metric}{'>=' if self.higher else '<='}{self.bound:g}"


def parse_target(text: str) -> Target:
    """`cos=0.99`, `red=0.01`, ...: SourceError naming the problem otherwise."""
    metric, sep, value = text.partition("=")
    known = NUMERIC_METRICS + ["euclid_sim", "sqnr"]
    if not sep or metric not in known:
        raise SourceError(f"--target {text}: expected METRIC=VALUE with METRIC one of {', '.join(known)}")
    try:
        bound = float(value)
    except ValueError:
        raise SourceError(f"--target {text}: {value!r} is not a number") from None
    if math.isnan(bound):
        raise SourceError(f"--target {text}: the bound is not a number")
    return Target(metric, bound)


def session(model, threads: int = 0):
    """An onnxruntime CPU session of a ModelProto (quiet; `threads` intra-op threads, 0: onnxruntime's
    default, one per core)."""
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = threads
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def run_outputs(model, feeds: dict[str, np.ndarray], threads: int = 0) -> list[np.ndarray]:
    """The model's network outputs on `feeds` (SourceError-free: onnxruntime's errors propagate)."""
    return [np.asarray(a) for a in session(model, threads).run(None, feeds)]


class Evaluator:
    """Measures candidates against the reference outputs (computed once, by the caller)."""

    def __init__(self, reference: list[np.ndarray], feeds: dict[str, np.ndarray], targets: list[Target],
                 check: str | None = None, workdir: str | os.PathLike | None = None):
        self.reference, self.feeds, self.targets = reference, feeds, targets
        self.check = shlex.split(check) if check else None
        if check is not None and not self.check:
            raise SourceError("--check: the command is empty")
        self.workdir = Path(workdir) if workdir else None

    def measure(self, model) -> dict[str, float]:
        """Each target metric's worst value over the network outputs."""
        outputs = run_outputs(model, self.feeds)
        per = [compare_arrays(o, g, kl="kl" in {t.metric for t in self.targets}).values
               for o, g in zip(outputs, self.reference)]
        return {t.metric: t.worst([p.get(t.metric, math.nan) for p in per]) for t in self.targets}

    def passes(self, values: dict[str, float]) -> bool:
        return all(t.met(values.get(t.metric, math.nan)) for t in self.targets)

    def run_check(self, model, keep: list[str]) -> int:
        """The --check command's exit status: it gets the op list (one name a line) as its last
        argument and in ACCUSCOPE_OPS_FILE, the converted ONNX in ACCUSCOPE_MODEL."""
        import onnx
        assert self.check and self.workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        ops, path = self.workdir / "ops.txt", self.workdir / "candidate.onnx"
        write_text(ops, "".join(f"{k}\n" for k in keep))
        with atomic_path(path) as tmp:
            onnx.save(model, str(tmp))
        env = {**os.environ, "ACCUSCOPE_OPS_FILE": str(ops), "ACCUSCOPE_MODEL": str(path)}
        try:
            return subprocess.run([*self.check, str(ops)], env=env, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False).returncode
        except OSError as exc:
            raise SourceError(f"--check {shlex.join(self.check)}: cannot run it ({exc.strerror})") from None
