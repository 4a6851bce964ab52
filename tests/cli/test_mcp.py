"""`accuscope mcp`: the commands as MCP tools, through the SDK's own clients. In process (the SDK's
in-memory client over the real server: tools, paths confined to the workspace, resources, progress),
and as the program an agent's client starts (stdio), and without the SDK (exit 2 naming the install)."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP SDK (accuscope[mcp]) is not installed")

import anyio
from mcp import Client, StdioServerParameters

from accuscope.commands.mcptools import build_server
from support.cli import ENV, accuscope

TPU = Path(__file__).parents[1] / "fixtures" / "tpumlir"
SIDES = {"npu": "cls_bm1684x_f16_tpu_outputs.npz", "golden": "cls_top_outputs.npz",
         "model": "cls_bm1684x_f16_tpu.mlir", "tolerance": "0.99,0.90"}


@pytest.fixture
def workspace(tmp_path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    for name in ("cls_bm1684x_f16_tpu_outputs.npz", "cls_top_outputs.npz", "cls_bm1684x_f16_tpu.mlir"):
        shutil.copy(TPU / name, ws / name)
    return ws


def session(workspace: Path, test) -> None:
    """`test(client)` against the real server over `workspace`, through the SDK's in-memory client."""
    async def main():
        async with Client(build_server(workspace)) as client:
            await test(client)
    anyio.run(main)


def test_the_tools_are_the_commands_with_their_options(workspace):
    async def test(client):
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {"compare", "run", "advise", "show", "op", "sensitivity", "precision", "list_tasks"}
        compare = tools["compare"].input_schema
        assert {"npu", "golden", "out", "threshold", "tolerance", "mapping", "step", "rank", "advisor"} <= \
            set(compare["properties"])
        assert compare["required"] == ["out"]  # or one `source` holding both sides
        assert compare["properties"]["threshold"]["anyOf"][0]["type"] == "array"  # repeatable, as on the CLI
        assert compare["properties"]["npu"]["description"].startswith("--npu: ")
        left_out = {"json", "tui", "fail_on_error", "cluster", "custom_dir"}  # a terminal's, or code from a folder
        assert not left_out & set(compare["properties"])
        assert "check" not in tools["precision"].input_schema["properties"]  # runs a command: not for an agent
        assert tools["op"].input_schema["properties"]["by"]["enum"] == ["abs", "rel"]
        assert tools["op"].input_schema["properties"]["top"]["type"] == "integer"  # its converter's type
        assert tools["precision"].input_schema["properties"]["max_trials"]["anyOf"][0]["type"] == "integer"
        assert {"offset", "limit"} <= set(tools["show"].input_schema["properties"])
        read_only = {name for name, t in tools.items() if t.annotations.read_only_hint}
        assert read_only == {"show", "list_tasks"}  # advise writes advice.json, op its detail files
        assert tools["advise"].annotations.idempotent_hint and not tools["advise"].annotations.destructive_hint
    session(workspace, test)


def test_compare_then_show_op_advise_list_and_resources(workspace):
    async def test(client):
        progress = []

        async def on_progress(done, total, message):
            progress.append((done, total, message))
        r = await client.call_tool("compare", {**SIDES, "out": "tpu"}, progress_callback=on_progress)
        assert not r.is_error, r.content
        done = r.structured_content
        assert done["task"] == str(workspace / "tpu") and done["sides"]["npu"] == "tpu-mlir-npz"
        assert done["judgement"]["outcome"] == "pass" and done["rows"] == 190 and done["failing"] == 0
        assert done["coverage"]["npu_paired"] == 149 and done["first_failing"] is None
        assert progress and progress[-1][0] == progress[-1][1] == 149  # the engine's pairs, to the last

        page = (await client.call_tool("show", {"task": "tpu", "limit": 2, "offset": 1})).structured_content
        assert page["rows"] == 190 and page["selected"] == 190 and len(page["data"]) == 2
        assert page["offset"] == 1 and page["next_offset"] == 3 and page["judgement"] == done["judgement"]
        last = (await client.call_tool("show", {"task": "tpu", "offset": 189})).structured_content
        assert len(last["data"]) == 1 and last["next_offset"] is None
        failing = (await client.call_tool("show", {"task": "tpu", "failing": True})).structured_content
        assert failing["selected"] == 0 and failing["data"] == []
        bad = await client.call_tool("show", {"task": "tpu", "columns": "cos,nonsense"})
        assert bad.is_error and "no column nonsense" in bad.content[0].text
        bad = await client.call_tool("op", {"task": "tpu", "op": "x", "top": 0})
        assert bad.is_error and "--top 0: TopN must be within 1.." in bad.content[0].text  # the CLI's check

        compared = (await client.call_tool("show", {"task": "tpu", "columns": "npu_op,cos", "limit": 60}))
        op_name = next(op for op, cos in compared.structured_content["data"] if cos is not None)
        r = await client.call_tool("op", {"task": "tpu", "op": op_name, "top": 3})
        assert not r.is_error, r.content
        detail = r.structured_content
        assert detail["npu_op"] == op_name and len(detail["top"]) <= 3 and detail["elements"] > 0
        assert {"npu", "golden"} == set(detail["stats"]) and all(Path(f).is_file() for f in detail["files"])
        assert all(Path(f).is_relative_to(workspace / "tpu") for f in detail["files"])

        advice = (await client.call_tool("advise", {"task": "tpu"})).structured_content
        assert advice["judgement"] == done["judgement"] and advice["rows"] == 190
        assert advice["findings"] and advice["verdict"]["rule"] == "verdict"
        assert (workspace / "tpu" / "advice.json").is_file()

        tasks = (await client.call_tool("list_tasks", {})).structured_content
        assert tasks["workspace"] == str(workspace)
        assert [(t["name"], t["verdict"], t["rows"]) for t in tasks["tasks"]] == [("tpu", "pass", 190)]

        resources = (await client.list_resources()).resources
        assert [str(r.uri) for r in resources] == ["accuscope://task/tpu"]
        text = (await client.read_resource("accuscope://task/tpu")).contents[0].text
        assert '"outcome": "pass"' in text and "task.json" in text
    session(workspace, test)


def test_a_path_outside_the_workspace_is_refused(workspace, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(TPU / "cls_top_outputs.npz", outside / "golden.npz")
    (workspace / "link").symlink_to(outside)  # inside by name, outside once resolved

    async def test(client):
        for call, what in ((dict(SIDES, golden=str(outside / "golden.npz"), out="a"), "--golden"),
                           (dict(SIDES, golden="link/golden.npz", out="b"), "--golden"),
                           (dict(SIDES, out="../escaped"), "--out"),
                           (dict(SIDES, out="c", mapping="/etc/hostname"), "--mapping")):
            r = await client.call_tool("compare", call)
            assert r.is_error and f"{what} " in r.content[0].text and "outside the workspace" in r.content[0].text
        r = await client.call_tool("compare", {"npu": SIDES["npu"], "out": "d"})
        assert r.is_error and "give both sides" in r.content[0].text  # the CLI's message
        r = await client.call_tool("show", {"task": str(outside)})
        assert r.is_error and "outside the workspace" in r.content[0].text
        r = await client.call_tool("op", {"task": "tpu", "op": "x", "out": str(outside / "detail")})
        assert r.is_error and "outside the workspace" in r.content[0].text
    session(workspace, test)
    assert not (tmp_path / "escaped").exists() and sorted(p.name for p in outside.iterdir()) == ["golden.npz"]
    assert not any((workspace / name).exists() for name in ("a", "b", "c", "d"))


def test_accuscope_mcp_as_a_program_compares_and_advises(workspace):
    """What an agent's MCP client does: start `accuscope mcp --workspace DIR` and talk over its stdio;
    every line it writes on stdout is the protocol's (a stray line would reach the handler as an error)."""
    stray = []

    async def on_message(message):
        if isinstance(message, Exception):
            stray.append(message)

    async def main():
        server = StdioServerParameters(command=sys.executable, args=["-m", "accuscope", "mcp", "--workspace",
                                                                     str(workspace)], env=ENV, cwd=os.getcwd())
        async with Client(server, message_handler=on_message, read_timeout_seconds=600) as client:
            done = (await client.call_tool("compare", {**SIDES, "out": "tpu"})).structured_content
            assert done["judgement"]["outcome"] == "pass" and done["task"] == str(workspace / "tpu")
            advice = await client.call_tool("advise", {"task": "tpu"})
            assert not advice.is_error, advice.content
            assert advice.structured_content["verdict"]["rule"] == "verdict"
    anyio.run(main)
    assert stray == []


def test_without_the_sdk_it_names_the_install(tmp_path):
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "mcp.py").write_text("raise ImportError('No module named mcp (blocked by the test)')\n")
    path = os.pathsep.join(p for p in (str(shim), os.environ.get("PYTHONPATH", "")) if p)
    r = accuscope("mcp", "--workspace", tmp_path / "ws", PYTHONPATH=path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "pip install 'accuscope[mcp]'" in r.stderr and r.stdout == ""
    assert "Traceback" not in r.stderr


def test_run_dumps_both_models_and_compares_them(workspace, cls_model):
    shutil.copy(cls_model, workspace / "cls.onnx")

    async def test(client):
        stages = set()

        async def on_progress(done, total, message):
            stages.add((message or "").split(":")[0])
        r = await client.call_tool("run", {"reference": "cls.onnx", "candidate": "cls.onnx", "random_inputs": True,
                                           "out": "self"}, progress_callback=on_progress)
        assert not r.is_error, r.content
        done = r.structured_content
        assert done["task"] == str(workspace / "self") and done["judgement"]["outcome"] == "pass"
        assert done["failing"] == 0 and done["rows"] > 100
        assert len(list((workspace / "self" / "dumps").iterdir())) == 1  # this run's dumps, inside the task
        assert "running the reference" in stages or "comparing" in stages
        r = await client.call_tool("run", {"reference": "cls.onnx", "candidate": "cls.onnx", "random_inputs": True,
                                           "input": ["x=/etc/hostname"], "out": "self"})
        assert r.is_error and "--input x= /etc/hostname: outside the workspace" in r.content[0].text
    session(workspace, test)


def test_the_tools_parameters_are_read_through_argparse_public_calls_only():
    """The tools' parameters come from what each command's `register` declares, as argparse's public calls
    return it (mcptools.Declared), never from argparse's private fields (`_actions`, `_StoreTrueAction` ...);
    every declared option, an exclusive group's too, is a parameter with its kind."""
    import argparse
    import ast

    from accuscope.commands import mcptools
    private = {n for n in (*dir(argparse), *dir(argparse.ArgumentParser()), *vars(argparse.ArgumentParser()))
               if n.startswith("_") and not n.startswith("__")}
    tree = ast.parse(Path(mcptools.__file__).read_text(encoding="utf-8"))
    assert {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)} & private == set()
    op = mcptools._cli_parser("op")
    assert [[a.dest for a in group] for group in op.exclusive] == [["input", "output"]]
    compare = mcptools._cli_parser("compare")
    assert compare.kinds["advisor"] == "store_true" and compare.kinds["threshold"] == "append"
    assert {a.dest for a in mcptools._actions("op", op)} == {"task", "op", "input", "output", "top", "by", "above",
                                                              "out"}
