"""The conformance corpus: files the real tools wrote, with each tool's own verdict recorded, and what
accuscope concludes on the same files held against it (benchmarks/conformance.py prints the whole
account; tests/cli/test_conformance.py asserts it on the committed cases).

Layout (one folder a tool, written by that folder's make_corpus.py in the tool's own venv):
`tests/fixtures/conformance/<tool>/cases.json` (committed: the small cases' files beside it) and the same
under `~/.cache/accuscope-tests/conformance/<tool>/` (every case, large ones too; the cache's manifest
replaces the committed one for that tool when present). A case:

    {"id", "what", "tool_command", "accuscope": {"npu", "golden"} or {"source"}, "options": [...]},
     "verdict": "pass" | "fail", "verdict_text", "rows": {tool's name: {"pass": bool, "label": str}},
     "planted": null | {"what", "op"}, "cached": bool}

Each case runs through the real entry point (`accuscope compare ... --json`); its rows are matched by
the tool's own names (tpu-mlir: the op, as npz_tool names an npz member; msprobe: the data name,
`{call}.{io}.{k}`; Polygraphy: the output; OpenVINO, which prints no verdict of its own: the IR's network
output, judged by Polygraphy's comparator at OpenVINO's own tests' tolerances, see
fixtures/conformance/openvino/make_corpus.py; LiteRT, likewise: a .tflite's network output at TFLite's own
test driver's tolerances, fixtures/conformance/litert/make_corpus.py; RKNN: the layer, as map_name_to_file.txt names it). Where
accuscope departs from the tool on purpose the row says why, and the departure counts as explained:
- `re-paired`: the tool compared a fused op's tensor by name with the tensor before the fused ops;
  accuscope re-paired it by its values to the chain's output (the row's `how`: `fused: ...`);
- `noise`: the row breaks only relative-error metrics while the tensor as a whole agrees
  (judgement.NOISY): a relative error on values near zero;
- `noise floor`: reference values zero in exact arithmetic (a key projection's bias gradient), the error
  within rounding at the scale of its operands (compare/noisefloor.py);
- `names`: across frameworks, a value that names (a process group) is shown, not judged;
- msprobe only, whose per-row Result judges whether an API *made* an error, by per-API rules, rather
  than whether its values agree: `dtype` (it marks any dtype difference an error: bf16 autocast against
  fp32), `API-level` (an API's worst row marks all its rows), `inherited` (accuscope fails a value that
  differs because the call was fed differing values, an input failing or off by 1% in red (INHERITED_RED);
  msprobe passes the API that did not add to it),
  `double-check` (a statistic that moved by more than half: msprobe warns "Need double check", accuscope
  fails it, having no values to clear it: in statistics mode this catches the planted bugs msprobe misses),
  `kl` (msit's KL divergence threshold alone breaks: msprobe's rules have none);
- `by position` (Polygraphy): a tensor the reference lacks (an int8 model's weight dequantized), which
  Polygraphy's comparator paired with the reference's tensor at its index and failed; accuscope pairs by
  identity and leaves it uncompared;
- `q_zero` (RKNN): a layer whose int8 values are all zero, which RKNN prints as `q_zero` in red with no
  figure (the PP-OCR det's sigmoid output on an input with no text: golden values of a few 1e-6); accuscope
  compares the values, which agree;
- `planted`: the row is the planted bug's own op (or its backward), which the tool's rules miss.
Every other difference is a disagreement: a bug in accuscope or a departure not yet explained.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

COMMITTED = Path(__file__).resolve().parents[1] / "fixtures" / "conformance"
CACHE = Path(os.path.expanduser("~/.cache/accuscope-tests/conformance"))
OUTCOMES = ("pass", "fail")
INHERITED_RED = 0.01  # an input off by this much (a fifth of msit's red threshold) was fed values that differ


@dataclass
class Case:
    tool: str
    id: str
    root: Path  # the folder of its cases.json: the case's paths are relative to it
    what: str
    args: list[str]  # `accuscope compare` arguments (paths made absolute), --out and --json not included
    verdict: str  # the tool's own: "pass" or "fail"
    rows: dict[str, dict]  # the tool's name -> {"pass": bool, "label": its word}
    planted: dict | None = None
    verdict_text: str = ""

    @property
    def key(self) -> str:
        return f"{self.tool}/{self.id}"


@dataclass
class Outcome:
    """What accuscope concluded on a case, held against the tool's verdict."""

    case: Case
    exit_code: int
    verdict: str  # accuscope's: pass, fail or unknown
    rows_agree: int = 0
    rows_total: int = 0
    departures: list[str] = field(default_factory=list)  # explained differences, one line each
    disagreements: list[str] = field(default_factory=list)  # unexplained: bugs

    @property
    def verdict_agrees(self) -> bool:
        """The tool's verdict, and the exit code under --fail-on-error that says it (0 pass, 1 fail)."""
        return self.verdict == self.case.verdict and self.exit_code == (0 if self.verdict == "pass" else 1)

    @property
    def verdict_explained(self) -> bool:
        """The verdicts differ and every row behind the difference is an explained departure."""
        return not self.verdict_agrees and bool(self.departures) and not self.disagreements \
            and self.verdict in OUTCOMES


def manifests() -> dict[str, tuple[Path, dict]]:
    """tool -> (folder, manifest): the cache's where it has one, else the committed one."""
    found: dict[str, tuple[Path, dict]] = {}
    for base in (COMMITTED, CACHE):
        for path in sorted(base.glob("*/cases.json")) if base.is_dir() else []:
            found[path.parent.name] = (path.parent, json.loads(path.read_text()))
    return found


def load_cases(committed_only: bool = False) -> list[Case]:
    """Every case whose files are here (the committed ones only: what CI has)."""
    cases = []
    for folder, doc in manifests().values() if not committed_only else _committed():
        for c in doc["cases"]:
            if c.get("cached") and folder.is_relative_to(COMMITTED):
                continue  # its files are in the cache only
            cases.append(_case(doc["tool"], folder, c))
    return [c for c in cases if all(Path(a).exists() for a in _paths(c))]


def _committed():
    for path in sorted(COMMITTED.glob("*/cases.json")) if COMMITTED.is_dir() else []:
        yield path.parent, json.loads(path.read_text())


def _case(tool: str, folder: Path, c: dict) -> Case:
    spec = c["accuscope"]
    args: list[str] = []
    for side in ("npu", "golden"):
        if spec.get(side):
            args += [f"--{side}", str(folder / spec[side])]
    if spec.get("source"):
        args.append(str(folder / spec["source"]))
    options = list(spec.get("options", []))
    for i, a in enumerate(options):  # a path among the options (a mapping file): relative to the manifest
        if i and options[i - 1] in ("--mapping", "--model", "--npu-model", "--golden-model", "--expected"):
            options[i] = str(folder / a)
    return Case(tool, c["id"], folder, c.get("what", ""), args + options, c["verdict"], c.get("rows") or {},
                c.get("planted"), c.get("verdict_text", ""))


def _paths(case: Case) -> list[str]:
    return [a for a in case.args if a.startswith(str(case.root))]


def run(case: Case, out: Path, timeout: float = 600) -> Outcome:
    """accuscope on the case through its real entry point, its verdict and rows held against the tool's."""
    r = subprocess.run([sys.executable, "-m", "accuscope", "compare", *case.args, "--out", str(out), "--json",
                        "--fail-on-error"], capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"})
    if r.returncode not in (0, 1):
        said = (r.stderr or r.stdout).strip().splitlines()
        return Outcome(case, r.returncode, "error",
                       disagreements=[f"accuscope exited {r.returncode}: {said[-1] if said else ''}"])
    doc = json.loads(r.stdout)
    outcome = Outcome(case, r.returncode, doc["judgement"]["outcome"] if doc.get("judgement") else "unknown")
    _rows(outcome, out)
    if not outcome.verdict_agrees and not outcome.departures and not outcome.disagreements:
        why = doc["judgement"].get("why", "") if doc.get("judgement") else ""
        outcome.disagreements.append(f"verdict {outcome.verdict} against the tool's {case.verdict}"
                                     + (f" ({why})" if why else ""))
    return outcome


def _rows(outcome: Outcome, folder: Path) -> None:
    """Each row the tool judged, matched to accuscope's by the tool's own name, pass against pass."""
    from accuscope.engine.compare import judgement
    from accuscope.engine.tasks.task import load_task
    case = outcome.case
    if not case.rows:
        return
    task = load_task(folder)
    table, thresholds = task.result
    state = judgement.evaluate(table, thresholds)
    c = table.columns
    by_name = _row_names(case, task)
    for name, theirs in case.rows.items():
        rows = by_name.get(name)
        if not rows:
            outcome.disagreements.append(f"{name}: the tool judged it, accuscope has no row of that name")
            continue
        outcome.rows_total += 1
        fails = any(bool(state.fail[r]) for r in rows)
        if fails == (not theirs["pass"]):
            outcome.rows_agree += 1
            continue
        r = rows[0]
        why = _departure(case, state, c, r, fails, theirs)
        line = (f"{name}: the tool says {theirs.get('label') or ('pass' if theirs['pass'] else 'fail')}, "
                f"accuscope {'fails' if fails else 'passes'} it")
        if why:
            outcome.departures.append(f"{line} ({why})")
        else:
            outcome.disagreements.append(line + (f" ({'; '.join(judgement.broken_texts(table, thresholds, r))})" if fails
                                                  else ""))


def _departure(case: Case, state, c, r: int, fails: bool, theirs: dict) -> str:
    """Why accuscope departs from the tool on row r, where that is on purpose; "" where it is not."""
    if not fails:  # the tool fails the row, accuscope passes it
        if str(c["how"][r]).startswith("fused:"):
            return f"re-paired: {c['how'][r]}"
        if getattr(state, "floor", None) is not None and state.floor[r]:
            return "noise floor: reference values zero in exact arithmetic, the error within rounding of its operands"
        if state.noisy[r]:
            return "noise: only relative errors on values near zero break, the tensor agrees"
        if "not judged" in str(c["reason"][r]):
            return f"names: {c['reason'][r]}"
        if case.tool == "rknn" and str(theirs.get("label", "")).startswith("q_zero"):
            return (f"q_zero: RKNN prints q_zero for a layer whose int8 values are all zero (no cos to give); the "
                    f"golden values lie within {float(c['max_abs'][r]):.3g} of them, and accuscope judges by value")
        if case.tool == "polygraphy" and state.not_compared[r]:
            return ("by position: the reference holds no tensor of this name; Polygraphy compared the one at its index "
                    "instead, accuscope pairs by identity")
        if case.tool == "msprobe" and c["npu_dtype"][r] != c["golden_dtype"][r]:
            return (f"dtype: msprobe marks an API whose dtypes differ ({c['npu_dtype'][r]} against "
                    f"{c['golden_dtype'][r]}) an error whatever its values; accuscope judges the values")
        if case.tool == "msprobe" and _call_rows(c, r, lambda k: bool(state.fail[k]) or
                                                 c["npu_dtype"][k] != c["golden_dtype"][k]):
            return "API-level: msprobe marks every row of an API by its worst row; accuscope judges each tensor"
        if case.tool == "msprobe" and "One Thousandth" in str(theirs.get("err", "")):
            return ("one-thousandth: msprobe's rule on the share of elements within 0.1% (inputs > 0.9, output < "
                    "0.6) is finer than the thresholds accuscope judges by; `--threshold rel_0.1%=...` judges so too")
        return ""
    planted = case.planted.get("op", "\0") if case.planted else "\0"
    if case.planted and str(c["npu_op"][r]).startswith((planted, planted.replace(".forward", ".backward"))):  # it passes
        return f"planted: the bug planted here ({case.planted.get('what', '')}) or its backward, which the tool's rules miss"
    if case.tool == "msprobe" and set(state.broken_keys(r)) == {"stat_mag"}:
        return ("double-check: a statistic moved by more than half (msprobe's own 'Need double check' rule, "
                "which only warns or, by its per-API rules, passes); accuscope, seeing no values to clear it, fails it")
    if case.tool == "msprobe":  # the tool passes the row, accuscope fails it
        def differs(k: int) -> bool:  # failing, or off by a fifth of msit's red threshold
            return bool(state.fail[k]) or float(c["red"][k]) >= INHERITED_RED
        if c["io"][r] != "output" or _call_rows(c, r, lambda k: c["io"][k] != "output" and differs(k)) \
                or _call_rows(c, r, differs, related=True):
            return ("inherited: msprobe's Result says whether an API made an error (its outputs worse than its "
                    "inputs); this row's call was fed values that already differ, and accuscope judges values")
        if set(state.broken_keys(r)) == {"kl"}:
            return ("kl: only msit's KL divergence threshold breaks (cos and red pass); msprobe's rules have no KL "
                    "divergence (`--threshold kl=off` judges as msprobe does)")
    return ""


def _call_rows(c, r: int, test, related: bool = False) -> bool:
    """Whether another row of row r's call (same op, step and rank) passes `test`; `related`: a row of the
    call's other half instead (a backward's forward call, a parameter gradient's module calls), whose
    values a backward computes with."""
    op = str(c["npu_op"][r])
    ops = {op.replace(".backward", ".forward"), op.replace(".parameters_grad", ".forward"),
           op.replace(".parameters_grad", ".backward")} - {op} if related else {op}
    same = [k for k in range(len(c["npu_op"])) if k != r and c["npu_op"][k] in ops
            and ("step" not in c or (c["step"][k] == c["step"][r] and c["rank"][k] == c["rank"][r]))]
    return any(test(k) for k in same)


def _row_names(case: Case, task) -> dict[str, list[int]]:
    """The tool's row name -> accuscope's rows: tpu-mlir names an npz member (accuscope's op), msprobe a
    data name ({call}.{io}.{k}, the tensor's name in its source), Polygraphy an output (the op), OpenVINO its
    IR's network output (the op: an `accuscope dump` of the IR names the output's op by the tensor), LiteRT
    a .tflite's network output (the tensor: the golden side's op, LiteRT's float outputs as Polygraphy
    RunResults), RKNN a layer (the op)."""
    c = task.table.columns
    names: dict[str, list[int]] = {}
    if case.tool != "msprobe":
        for r, op in enumerate(c["npu_op"].tolist()):
            names.setdefault(str(op), []).append(r)
        if case.tool == "litert":  # an `accuscope dump` names a .tflite's ops by kind (SOFTMAX_0): the output
            for r, op in enumerate(c["golden_op"].tolist()):  # is named by its tensor, as the golden side names it
                if op and str(op) != str(c["npu_op"][r]):
                    names.setdefault(str(op), []).append(r)
        return names
    from accuscope.engine.sides.registry import open_side
    side = open_side(case.args[case.args.index("--npu") + 1], **_selectors(case.args))
    data = {t.name: t.tensor_name for t in side.tensors}
    for r, tensor in enumerate(c["tensor"].tolist()):
        names.setdefault(data.get(str(tensor), str(tensor)), []).append(r)
    return names


def _selectors(args: list[str]) -> dict:
    found = {}
    for key in ("step", "rank"):
        if f"--{key}" in args:
            found[key] = args[args.index(f"--{key}") + 1]
    return found


def account(outcomes: list[Outcome]) -> str:
    """`conformance: verdicts A/N · rows B/M · departures explained C/D · tools K`: verdicts that agree or
    depart explained (A) of N cases, rows that agree (B) of M, explained departures (C) of all
    differences (D), K tools."""
    n = len(outcomes)
    agree = sum(1 for o in outcomes if o.verdict_agrees or o.verdict_explained)
    rows = sum(o.rows_agree for o in outcomes)
    total = sum(o.rows_total for o in outcomes)
    explained = sum(len(o.departures) for o in outcomes)
    differences = explained + sum(len(o.disagreements) for o in outcomes)
    tools = len({o.case.tool for o in outcomes})
    return (f"conformance: verdicts {agree}/{n} · rows {rows}/{total} · departures explained "
            f"{explained}/{differences} · tools {tools}")
