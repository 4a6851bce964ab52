"""The comparison's inputs are declared once (engine.compare.inputs): `compare` and `run` take them as
options, the app's new-task form as fields, and both build the same CompareSpec from them."""
from __future__ import annotations

import argparse

import pytest

from accuscope.app.app import AccuscopeApp
from accuscope.app.newtask import NewTaskScreen
from accuscope.commands import compare, convert, inspect, run
from accuscope.engine.compare.inputs import INPUTS, build_spec, check, inputs
from accuscope.engine.compare.thresholds import Thresholds
from accuscope.engine.demo.workspace import MAIN
from accuscope.engine.tasks.task import load_task
from appkit import drive, screen_text
from support.narrow import present


def _parser(module) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    module.register(parser)
    return parser


def _flags(parser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings}


def test_every_input_is_an_option_of_compare_and_the_judging_ones_of_run():
    assert {i.flag for i in INPUTS if i.group != "path"} <= _flags(_parser(compare))
    assert {i.flag for i in inputs("judging")} <= _flags(_parser(run))
    assert {i.flag for i in inputs("source", "path")} <= _flags(_parser(inspect)) & _flags(_parser(convert))
    assert "--option" not in _flags(_parser(compare))  # compare takes a format's options per side


def test_every_form_input_is_a_field_of_the_new_task_form(ws):
    async def script(pilot):
        await pilot.press("n")
        form = pilot.app.screen
        assert isinstance(form, NewTaskScreen)
        text = screen_text(pilot.app)
        for item in INPUTS:
            if item.form:
                assert form.query_one(f"#{item.name}") is not None
        assert "NPU dump" in text and "golden dump" in text
    drive(AccuscopeApp(ws), script, size=(100, 60))


def test_the_cli_and_the_form_build_the_same_spec_from_the_same_text(ws):
    """The same words typed as options or into the form's fields give one CompareSpec."""
    meta = load_task(ws / MAIN.name).doc.raw
    words = {"npu": meta["npu"], "golden": meta["golden"], "model": meta["model"], "out": str(ws / "x"),
             "op_range": "1,-1,1", "threshold": "cos=0.98 kl=off", "tolerance": "0.99,0.9", "pick": "oldest"}
    args = _parser(compare).parse_args(
        ["--npu", words["npu"], "--golden", words["golden"], "--model", words["model"], "--out", words["out"],
         "--range", "1,-1,1", "--threshold", "cos=0.98", "--threshold", "kl=off", "--tolerance", "0.99,0.9",
         "--pick", "oldest"])
    from_cli = compare.spec_of(args)
    by_name = {i.name: i for i in INPUTS}
    from_form = build_spec({k: by_name[k].parse(v) for k, v in words.items()})
    assert from_cli == from_form
    assert from_cli.thresholds.get("kl") is None and present(from_cli.thresholds.get("cos")).value == 0.98
    assert present(from_cli.thresholds.get("euclid_sim")).value == 0.9 and from_cli.pick == "oldest"


@pytest.mark.parametrize(("name", "text", "says"), [
    ("op_range", "1,x", "integers"),
    ("threshold", "coss=0.9", "did you mean cos?"),
    ("tolerance", "0.99", "expected two numbers"),
    ("golden_shape", "1,a", "not a shape"),
    ("pick", "latest", "newest, oldest"),
])
def test_bad_text_is_refused_the_same_way_by_the_option_and_the_field(name, text, says, capsys):
    item = next(i for i in INPUTS if i.name == name)
    message, ok = check(item, text)
    assert not ok and says in message
    argv = ["--npu", "a", "--golden", "b", "--out", "c", item.flag, text]
    with pytest.raises(SystemExit) as exited:
        _parser(compare).parse_args(argv)
    assert exited.value.code == 2 and says in capsys.readouterr().err


def test_a_mapping_file_is_checked_in_the_form(tmp_path):
    mapping = tmp_path / "map.csv"
    mapping.write_text("conv1,Conv_0\nrelu1,Relu_1\n")
    item = next(i for i in INPUTS if i.name == "mapping")
    assert check(item, str(mapping)) == ("✓ 2 pairs", True)
    assert not check(item, str(tmp_path / "none.csv"))[1]


def test_rerunning_a_task_fills_the_form_with_its_inputs(ws):
    task = load_task(ws / MAIN.name)
    spec = task.doc.spec(task.thresholds)
    spec.thresholds.set("kl", None)
    spec.thresholds.set("cos", 0.95)

    async def script(pilot):
        pilot.app.push_screen(NewTaskScreen(ws, spec))
        await pilot.pause()
        form = pilot.app.screen
        assert form.query_one("#npu").value == spec.npu and form.query_one("#golden").value == spec.golden
        edit = form.query_one("#threshold").value
        again = Thresholds()
        again.edit(edit)
        assert again.to_dict() == spec.thresholds.to_dict() and "kl=off" in edit
    drive(AccuscopeApp(ws), script)
