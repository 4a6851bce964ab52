"""Judged as Polygraphy judges when asked (`--atol A --rtol R --check-error-stat S`, compare/polytol.py): on
RunResults Polygraphy itself saves, accuscope's verdict is the verdict of Polygraphy's own comparator
(SimpleCompareFunc, run here in-process on the same arrays), at the boundaries of its rule: an element
whose difference equals the tolerance passes, NaN fails, an element fails only beyond both tolerances,
and each error statistic checks its own number."""
from __future__ import annotations

import json

import numpy as np
import pytest

from support.cli import accuscope

pytest.importorskip("polygraphy")
from polygraphy.comparator import RunResults  # noqa: E402
from polygraphy.comparator.compare import SimpleCompareFunc  # noqa: E402
from polygraphy.comparator.struct import IterationResult  # noqa: E402

ONES = np.ones(4, dtype=np.float32)
CASES = {  # id: (npu, golden, atol, rtol, stat, Polygraphy's verdict)
    "abs-equal-to-atol-passes": (ONES + [0.25, 0, 0, 0], ONES, 0.25, 0.0, "elemwise", True),
    "abs-just-beyond-atol-fails": (ONES + [0.25, 0, 0, 0], ONES, 0.2499, 0.0, "elemwise", False),
    "rel-equal-to-rtol-passes": (2 * ONES + [0.5, 0, 0, 0], 2 * ONES, 0.0, 0.25, "elemwise", True),
    "beyond-atol-within-rtol-passes": (1000 * ONES + [0.5, 0, 0, 0], 1000 * ONES, 0.1, 1e-3, "elemwise", True),
    "nan-fails": (ONES + [np.nan, 0, 0, 0], ONES, 1.0, 1.0, "elemwise", False),
    "matching-infinities-fail": (ONES + [np.inf, 0, 0, 0], ONES + [np.inf, 0, 0, 0], 1.0, 1.0, "elemwise", False),
    "zero-reference-within-atol-passes": (np.array([1e-6, 1, 1, 1], np.float32), np.array([0, 1, 1, 1], np.float32), 1e-5, 1e-5,
                                          "elemwise", True),
    "max-fails-on-one-element": (ONES + [0.5, 0, 0, 0], ONES, 0.1, 0.1, "max", False),
    "mean-fails-where-median-passes": (ONES + [0.5, 0, 0, 0], ONES, 0.1, 0.1, "mean", False),
    "median-passes-where-mean-fails": (ONES + [0.5, 0, 0, 0], ONES, 0.1, 0.1, "median", True),
    "median-fails-where-mean-passes": (ONES + [0.2, 0.2, 0.2, 0], ONES, 0.16, 0.16, "median", False),
    "mean-passes-where-median-fails": (ONES + [0.2, 0.2, 0.2, 0], ONES, 0.16, 0.16, "mean", True),
    "mean-nan-fails": (ONES + [np.nan, 0, 0, 0], ONES, 1.0, 1.0, "mean", False),
}


def polygraphys(npu, golden, atol, rtol, stat) -> bool:
    """Polygraphy's own verdict on the output (its comparator: the candidate first, the reference second)."""
    compare = SimpleCompareFunc(atol=atol, rtol=rtol, check_error_stat=stat)
    found = compare(IterationResult({"out": npu}, runner_name="cand"), IterationResult({"out": golden}, runner_name="ref"))
    return bool(found["out"])


def save(path, name: str, array) -> str:
    results = RunResults()
    results.append((name, [IterationResult({"out": np.asarray(array, dtype=np.float32)}, runner_name=name)]))
    results.save(str(path))
    return str(path)


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_the_verdict_is_polygraphys_at_the_boundaries(case, tmp_path):
    npu, golden, atol, rtol, stat, passes = CASES[case]
    npu, golden = np.asarray(npu, dtype=np.float32), np.asarray(golden, dtype=np.float32)
    assert polygraphys(npu, golden, atol, rtol, stat) == passes  # the case says what Polygraphy says
    r = accuscope("compare", "--npu", save(tmp_path / "cand.json", "cand", npu),
                  "--golden", save(tmp_path / "ref.json", "ref", golden), "--atol", repr(atol), "--rtol", repr(rtol),
                  "--check-error-stat", stat, "--out", tmp_path / "t", "--json", "--fail-on-error")
    assert r.returncode == (0 if passes else 1), r.stderr
    judgement = json.loads(r.stdout)["judgement"]
    assert (judgement["outcome"], judgement["scope"]) == ("pass" if passes else "fail", "tensors")


def test_without_the_flags_msits_thresholds_judge(tmp_path):
    """Without the flags msit's thresholds judge (cos, red ...); with only --rtol given the other two are
    Polygraphy's defaults (atol 1e-5, elemwise), and task.json keeps what was given."""
    reference = np.linspace(1, 2, 64, dtype=np.float32)
    candidate = reference.copy()
    candidate[7] += 1e-4
    npu, golden = save(tmp_path / "c.json", "cand", candidate), save(tmp_path / "r.json", "ref", reference)
    r = accuscope("compare", "--npu", npu, "--golden", golden, "--out", tmp_path / "a", "--fail-on-error")
    assert r.returncode == 0, r.stdout  # msit's thresholds pass a 1e-4 in one of 64 values
    r = accuscope("compare", "--npu", npu, "--golden", golden, "--rtol", "1e-5", "--out", tmp_path / "b", "--json",
                  "--fail-on-error")
    assert r.returncode == 1 and not polygraphys(candidate, reference, 1e-5, 1e-5, "elemwise")
    doc = json.loads((tmp_path / "b" / "task.json").read_text())
    assert (doc["atol"], doc["rtol"], doc["check_error_stat"]) == (None, 1e-5, None)
    assert set(doc["thresholds"]) == {"pg_abs", "pg_rel", "pg_mismatch"}


@pytest.mark.parametrize("bad", [["--atol", "x"], ["--rtol", "-1"], ["--check-error-stat", "p99"],
                                 ["--error-quantile", "1.5"]])
def test_a_bad_flag_is_refused_by_name(bad, tmp_path):
    npu = save(tmp_path / "c.json", "cand", ONES)
    r = accuscope("compare", "--npu", npu, "--golden", npu, *bad, "--out", tmp_path / "t")
    assert r.returncode == 2 and bad[1] in r.stderr and "Traceback" not in r.stderr


TENTH = np.array([0.5] + [0] * 9, np.float32)  # one element in ten off by 0.5
QUANTILES = {  # id: (q, Polygraphy's verdict at atol = rtol = 0.1): np.quantile's linear interpolation
    "q80-passes": (0.8, True), "q90-passes": (0.9, True), "q95-fails": (0.95, False), "q99-default-fails": (None, False)}


@pytest.mark.parametrize("case", QUANTILES, ids=list(QUANTILES))
def test_the_quantile_is_polygraphys(case, tmp_path):
    """--check-error-stat quantile with --error-quantile Q (Polygraphy's default 0.99 without it): the
    verdict of Polygraphy's own comparator on the same arrays, and task.json keeps the quantile."""
    q, passes = QUANTILES[case]
    golden = np.ones(10, dtype=np.float32)
    npu = golden + TENTH
    compare = SimpleCompareFunc(atol=0.1, rtol=0.1, check_error_stat="quantile", error_quantile=q)
    theirs = bool(compare(IterationResult({"out": npu}, runner_name="cand"),
                          IterationResult({"out": golden}, runner_name="ref"))["out"])
    assert theirs == passes
    given = [] if q is None else ["--error-quantile", str(q)]
    r = accuscope("compare", "--npu", save(tmp_path / "cand.json", "cand", npu), "--golden",
                  save(tmp_path / "ref.json", "ref", golden), "--atol", "0.1", "--rtol", "0.1", "--check-error-stat",
                  "quantile", *given, "--out", tmp_path / "t", "--fail-on-error")
    assert r.returncode == (0 if passes else 1), r.stdout + r.stderr
    assert json.loads((tmp_path / "t" / "task.json").read_text())["error_quantile"] == q


VALUES = np.arange(24, dtype=np.float32).reshape(4, 6) / 7
SHAPES = {  # id: (the candidate's output of the reference VALUES, --no-shape-check)
    "flattened-fails": (VALUES.reshape(-1), False),
    "flattened-reshaped": (VALUES.reshape(-1), True),
    "squeezed-fails": (VALUES.reshape(1, 4, 6), False),
    "transposed-permuted": (VALUES.T.copy(), True),
    "transposed-fails": (VALUES.T.copy(), False),
    "cut-short-fails": (VALUES[:3], False),
}


@pytest.mark.parametrize("case", SHAPES, ids=list(SHAPES))
def test_outputs_in_other_shapes_are_judged_as_polygraphy_does(case, tmp_path):
    """Polygraphy fails an output whose shape differs from the reference's; with --no-shape-check it permutes
    or reshapes the reference to the candidate's shape and judges the values (a transposed output passes,
    its elements paired as Polygraphy pairs them). Its own comparator says which on the same arrays."""
    npu, no_check = SHAPES[case]
    compare = SimpleCompareFunc(check_shapes=not no_check)
    theirs = bool(compare(IterationResult({"out": npu}, runner_name="cand"),
                          IterationResult({"out": VALUES}, runner_name="ref"))["out"])
    assert theirs == case.endswith(("reshaped", "permuted"))
    r = accuscope("compare", "--npu", save(tmp_path / "cand.json", "cand", npu), "--golden",
                  save(tmp_path / "ref.json", "ref", VALUES), "--check-error-stat", "elemwise",
                  *(["--no-shape-check"] if no_check else []), "--out", tmp_path / "t", "--json", "--fail-on-error")
    assert r.returncode == (0 if theirs else 1), r.stdout + r.stderr
    assert json.loads(r.stdout)["judgement"]["outcome"] == ("pass" if theirs else "fail")


def test_the_columns_are_polygraphys_numbers():
    """pg_abs / pg_rel: the statistic Polygraphy checks (its 'Minimum Required Tolerance' for elemwise),
    float16 cast up as it does; pg_mismatch: the elements beyond both tolerances."""
    from accuscope.engine.compare import polytol
    rng = np.random.default_rng(0)
    golden = rng.standard_normal(1000).astype(np.float16)
    golden[:10] = 0
    npu = (golden.astype(np.float32) + rng.normal(0, 1e-3, 1000)).astype(np.float16)
    for stat in polytol.STATS:
        found = polytol.cells(npu, golden, polytol.Rule(1e-3, 1e-3, stat))
        compare = SimpleCompareFunc(atol=1e-3, rtol=1e-3, check_error_stat=stat)
        theirs = compare(IterationResult({"o": npu}, runner_name="a"), IterationResult({"o": golden}, runner_name="b"))["o"]
        checked = "max" if stat == "elemwise" else stat
        assert (found["pg_abs"], found["pg_rel"]) == (getattr(theirs, f"{checked}_absdiff"),
                                                      getattr(theirs, f"{checked}_reldiff")), stat
        assert (found["pg_mismatch"] == 0) == bool(theirs) if stat == "elemwise" else found["pg_mismatch"] > 0


def save_outputs(path, name: str, outputs: dict) -> str:
    results = RunResults()
    results.append((name, [IterationResult(outputs, runner_name=name)]))
    results.save(str(path))
    return str(path)


REF = {"logits": np.linspace(1, 2, 20, dtype=np.float32), "scores": np.linspace(-1, 1, 20, dtype=np.float32)}
RUN = {"logits": REF["logits"] + np.float32(0.05), "scores": REF["scores"] + TENTH.repeat(2) / 5}
PER_OUTPUT: dict[str, tuple[list[str], dict[str, float | dict[str, float] | dict[str, str]]]] = {  # id: (flags as polygraphy run takes them, as SimpleCompareFunc takes them)
    "own-atol-passes-the-output": (["--atol", "1e-3", "logits:0.1", "--rtol", "1e-3", "logits:0.1",
                                    "scores:0.2"], dict(atol={"": 1e-3, "logits": 0.1},
                                                       rtol={"": 1e-3, "logits": 0.1, "scores": 0.2})),
    "the-default-fails-the-rest": (["--atol", "1e-3", "logits:0.1", "--rtol", "1e-3", "logits:0.1"],
                                   dict(atol={"": 1e-3, "logits": 0.1}, rtol={"": 1e-3, "logits": 0.1})),
    "own-statistic-and-quantile": (["--atol", "0.09", "--rtol", "0.09", "--check-error-stat", "max",
                                    "scores:quantile", "--error-quantile", "scores:0.8"],
                                   dict(atol=0.09, rtol=0.09, check_error_stat={"": "max", "scores": "quantile"},
                                        error_quantile={"scores": 0.8})),
    "only-named-outputs-others-at-polygraphys-defaults": (["--atol", "scores:1"], dict(atol={"scores": 1.0})),
}


@pytest.mark.parametrize("case", PER_OUTPUT, ids=list(PER_OUTPUT))
def test_per_output_values_judge_each_output_at_its_own(case, tmp_path):
    """Polygraphy's per-output form (`--atol 1e-3 logits:0.1`: a default and OUTPUT:VALUE, space-separated in
    one option, for --atol, --rtol, --check-error-stat and --error-quantile): each output judged at its own
    values, the rest at the default (Polygraphy's when none is given); each output's verdict is its own
    comparator's, and task.json keeps the values per output."""
    flags, kwargs = PER_OUTPUT[case]
    theirs = SimpleCompareFunc(**kwargs)(IterationResult(RUN, runner_name="cand"), IterationResult(REF, runner_name="ref"))
    r = accuscope("compare", "--npu", save_outputs(tmp_path / "cand.json", "cand", RUN), "--golden",
                  save_outputs(tmp_path / "ref.json", "ref", REF), *flags, "--out", tmp_path / "t", "--json",
                  "--fail-on-error")
    assert r.returncode == (0 if all(bool(theirs[o]) for o in REF) else 1), r.stdout + r.stderr
    from accuscope.engine.compare import judgement
    from accuscope.engine.tasks.task import load_task
    table, thresholds = load_task(tmp_path / "t").result
    fails = dict(zip(table.columns["npu_op"].tolist(), judgement.evaluate(table, thresholds).fail.tolist()))
    assert {o: not fails[o] for o in REF} == {o: bool(theirs[o]) for o in REF}
    assert json.loads((tmp_path / "t" / "task.json").read_text())["atol"] == kwargs.get("atol")


def test_a_bad_per_output_value_is_refused_by_name(tmp_path):
    npu = save(tmp_path / "c.json", "cand", ONES)
    r = accuscope("compare", "--npu", npu, "--golden", npu, "--atol", "1e-3", "logits:x", "--out", tmp_path / "t")
    assert r.returncode == 2 and "'x' is not a number" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize(("key", "value", "said"), [
    ("atol", {"": 1e-3, "logits": "x"}, "field 'atol': output 'logits': 'x' is not a number"),
    ("rtol", {"logits": True}, "field 'rtol': output 'logits': True is not a number"),
    ("atol", {"": "1e-3", "logits": 0.1}, "field 'atol': '1e-3' is not a number"),
    ("check_error_stat", {"scores": 5}, "field 'check_error_stat': output 'scores': '5': use one of"),
    ("error_quantile", {"scores": 2}, "field 'error_quantile': output 'scores': '2': a quantile is a number from 0 to 1")])
def test_a_hand_edited_per_output_value_is_refused_naming_the_file_key_and_value(key, value, said, tmp_path):
    r = accuscope("compare", "--npu", save_outputs(tmp_path / "cand.json", "cand", RUN), "--golden",
                  save_outputs(tmp_path / "ref.json", "ref", REF), "--atol", "1e-3", "--out", tmp_path / "t")
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "t" / "task.json").read_text())
    (tmp_path / "t" / "task.json").write_text(json.dumps({**doc, key: value}))
    for command in (["show", tmp_path / "t"], ["report", tmp_path / "t", "--out", tmp_path / "r.html"]):
        r = accuscope(*command)
        assert r.returncode == 2, (command, r.stdout, r.stderr)
        assert f"{tmp_path / 't' / 'task.json'}: {said}" in " ".join(r.stderr.split()) and "Traceback" not in r.stderr


def test_what_a_row_breaks_is_said_alike_everywhere_at_the_outputs_own_limit(tmp_path):
    """`show`'s first failing row and the advisor's verdict say what the row breaks in one text
    (judgement.broken_texts): at the limit of the output's own (--atol logits:0.01), not the default's."""
    run = {"logits": REF["logits"] + np.float32(0.05), "scores": REF["scores"]}
    r = accuscope("compare", "--npu", save_outputs(tmp_path / "cand.json", "cand", run), "--golden",
                  save_outputs(tmp_path / "ref.json", "ref", REF), "--atol", "1e-3", "logits:0.01", "--rtol", "0",
                  "--out", tmp_path / "t")
    assert r.returncode == 0, r.stderr
    broken = json.loads(accuscope("show", tmp_path / "t").stdout)["first_failing"]["broken"]
    assert broken[0] == "pg_abs 0.05 > 0.01"
    advice = json.loads(accuscope("advise", tmp_path / "t", "--json").stdout)
    assert f"logits:output:0 ({', '.join(broken)})" in advice["verdict"]["text"]


def test_a_value_next_to_its_limit_is_said_with_the_digits_that_tell_them_apart(tmp_path):
    """cos 0.98996 breaks 0.99: said so, never `cos 0.99 < 0.99` (four digits round it onto the limit)."""
    for side, second in (("golden", 0.0), ("npu", np.sqrt(1 - 0.98996 ** 2))):
        (tmp_path / side).mkdir()
        np.save(tmp_path / side / "y.0.0.npy", np.array([0.98996 if side == "npu" else 1.0, second], np.float64))
    r = accuscope("compare", "--npu", tmp_path / "npu", "--golden", tmp_path / "golden", "--out", tmp_path / "t")
    assert r.returncode == 0, r.stderr
    broken = json.loads(accuscope("show", tmp_path / "t").stdout)["first_failing"]["broken"]
    assert broken[0] == "cos 0.98996 < 0.99"


def test_the_advisor_names_polygraphy_as_the_judge_not_npz_tool(tmp_path):
    """A comparison judged by Polygraphy's rule is said to be judged so by the advisor's verdict
    (`polygraphy run --atol .. --rtol ..`), never as tpu-mlir's npz_tool (its wording before)."""
    run = {"logits": REF["logits"] + np.float32(0.05), "scores": REF["scores"]}
    r = accuscope("compare", "--npu", save_outputs(tmp_path / "cand.json", "cand", run), "--golden",
                  save_outputs(tmp_path / "ref.json", "ref", REF), "--atol", "1e-3", "--rtol", "0",
                  "--out", tmp_path / "t")
    assert r.returncode == 0, r.stderr
    verdict = json.loads(accuscope("advise", tmp_path / "t", "--json").stdout)["verdict"]
    assert verdict["title"].startswith("fails as polygraphy run --atol 0.001 --rtol 0 judges: 1 of 2 tensors "
                                       "out of tolerance"), verdict["title"]
    assert "npz_tool" not in json.dumps(verdict)
