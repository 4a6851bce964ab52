"""Structures nested past the interpreter's stack are a reader's error, never a RecursionError (the CLI's
exit 3): JSON nested a few thousand deep (a few KB of brackets) in task.json, construct.json, dump.json,
stack.json and the other JSON accuscope reads; folder trees a thousand deep under a dump path; module
chains thousands deep in construct.json (the graph pane's walks). Each site turns it into its own
error: a SourceError naming the file, or a problem on it."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from accuscope.engine.graphs.lanes import layout
from accuscope.engine.graphs.moduletree import ModuleTree
from accuscope.engine.graphs.msprobegraph import load_msprobe
from accuscope.engine.precision.trials import TrialLog
from accuscope.engine.sides import registry
from accuscope.engine.sources import atb, inputfile, msprobe
from accuscope.engine.sources.tensor import SourceError
from accuscope.engine.tasks import columnstore
from accuscope.engine.tasks.task import read_task_doc
from accuscope.engine.tasks.tasklist import list_tasks

DEEP = 3000
NESTED = "[" * DEEP + "]" * DEEP
TENSOR = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0, "Mean": 0.5,
          "Norm": 1.0}


def rank_folder(root: Path, dump: str | None = None, construct: str | None = None, stack: str | None = None) -> Path:
    """step0/rank0 of an msprobe statistics dump: dump.json as given, else one call."""
    folder = root / "step0" / "rank0"
    folder.mkdir(parents=True)
    doc = {"task": "statistics", "level": "L1", "framework": "pytorch", "dump_data_dir": None,
           "data": {"Functional.relu.0.forward": {"input_args": [TENSOR], "output": [TENSOR]}}}
    (folder / "dump.json").write_text(dump if dump is not None else json.dumps(doc))
    for name, text in (("construct.json", construct), ("stack.json", stack)):
        if text is not None:
            (folder / name).write_text(text)
    return folder


# ---- JSON nested past the stack --------------------------------------------------------------------
def test_json_loads_turns_deep_nesting_into_a_value_error():
    with pytest.raises(ValueError, match="nested too deeply"):
        inputfile.json_loads(NESTED)
    with pytest.raises(ValueError):  # an integer past Python's digit limit: a ValueError, not a JSONDecodeError
        inputfile.json_loads("9" * 5000)
    assert inputfile.json_loads('{"a": [1]}') == {"a": [1]}


def test_a_task_json_nested_3000_deep_is_a_source_error_naming_it_and_a_broken_entry(tmp_path):
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "task.json").write_text(NESTED)
    (tmp_path / "digits").mkdir()
    (tmp_path / "digits" / "task.json").write_text('{"rows": ' + "9" * 5000 + "}")
    for name in ("bad", "digits"):
        with pytest.raises(SourceError, match=f"{name}/task.json: unreadable"):
            read_task_doc(tmp_path / name)
    listed = {s.name: s for s in list_tasks(tmp_path)}
    assert "nested too deeply" in listed["bad"].problem and listed["digits"].problem


def test_the_other_json_files_a_task_keeps_nested_too_deeply(tmp_path):
    (tmp_path / "columns").mkdir()
    (tmp_path / "columns" / "meta.json").write_text(NESTED)
    with pytest.raises(ValueError, match="nested too deeply"):  # load_ranks: a warning, the rank files merged
        columnstore.read_columns(tmp_path)
    log = TrialLog(tmp_path)
    log.path.write_text(NESTED + "\n")
    with pytest.raises(SourceError, match="not a trial log"):
        log.open({})


def test_a_deep_construct_json_is_a_problem_naming_it(tmp_path):
    folder = rank_folder(tmp_path, construct=NESTED)
    tensors, problems = msprobe.read(str(tmp_path))
    assert len(tensors) == 2
    assert [(Path(p.path).name, "nested too deeply" in p.message) for p in problems] == [("construct.json", True)]
    graph = load_msprobe(str(tmp_path))
    assert [n.name for n in graph.nodes] == ["Functional.relu.0.forward"] and "construct.json" in graph.notes[0]
    assert msprobe.recorded(str(folder), stats_only=True) is None  # a problem: `read` says it


def test_a_deep_dump_json_is_a_source_error_naming_it(tmp_path):
    doc = '{"task": "statistics", "level": "L1", "dump_data_dir": null, "data": ' + NESTED + "}"
    folder = rank_folder(tmp_path, dump=doc)
    with pytest.raises(SourceError, match=r"rank0/dump\.json: nested too deeply"):
        msprobe.read(str(tmp_path))
    assert msprobe.recorded(str(tmp_path), stats_only=True) is None
    with pytest.raises(SourceError, match=r"dump\.json"):
        registry.open_side(str(folder), stats_only=True)


def test_a_deep_dump_json_beside_tensor_files_reads_their_names(tmp_path):
    folder = rank_folder(tmp_path, dump='{"task": "tensor", "level": "L1", "data": {"A.0.forward": ' + NESTED + "}}")
    (folder / "dump_tensor_data").mkdir()
    np.save(folder / "dump_tensor_data" / "Functional.relu.0.forward.output.0.npy", np.ones(2, np.float32))
    tensors, problems = msprobe.read(str(tmp_path))
    assert [t.op for t in tensors] == ["Functional.relu.0.forward"]
    assert "nested too deeply" in problems[0].message and "file names" in problems[0].message


def test_arguments_nested_a_thousand_deep_are_walked_without_recursion(tmp_path):
    depth = 1000  # orjson reads up to 1,024; msprobe._walk recursed once per level
    nested: object = TENSOR
    for _ in range(depth):
        nested = [nested]
    assert list(msprobe._walk(nested, "input_args")) == [(".0" * depth, TENSOR, False)]
    rank_folder(tmp_path, dump='{"task": "statistics", "level": "L1", "dump_data_dir": null, "data": '
                               '{"Functional.cat.0.forward": {"input_args": ' + "[" * depth + json.dumps(TENSOR)
                               + "]" * depth + "}}}")
    try:
        tensors, _problems = msprobe.read(str(tmp_path))
    except SourceError as exc:  # the json module (no orjson) may run out of stack first: then it says so
        assert msprobe._orjson() is None and "nested too deeply" in str(exc)
    else:
        assert [t.tensor_name for t in tensors] == ["Functional.cat.0.forward.input" + ".0" * depth]


def test_a_deep_stack_json_is_a_message(tmp_path):
    rank_folder(tmp_path, stack=NESTED)
    calls, why = msprobe.stacks(str(tmp_path))
    assert calls == {} and "stack.json" in why and "nested too deeply" in why


def test_a_deep_dump_json_in_an_npy_folder_lists_nothing_unreachable(tmp_path):
    np.save(tmp_path / "x.npy", np.ones(2, np.float32))
    (tmp_path / "dump.json").write_text('{"skipped": ' + NESTED + "}")
    side = registry.open_side(str(tmp_path))
    assert side.kind == "npy" and side.unreachable == []


def test_an_msprobe_side_does_not_parse_its_dump_json_again(tmp_path, monkeypatch):
    folder = rank_folder(tmp_path)
    side = registry.open_side(str(folder), stats_only=True)
    side.ops  # noqa: B018 - the reader's parse done

    def parse(*_args):
        raise AssertionError("dump.json parsed a second time")
    monkeypatch.setattr("accuscope.engine.sides.side.json_loads", parse)
    assert side.unreachable == []


# ---- folder trees a thousand deep -------------------------------------------------------------------
def deep_tree(root: Path, depth: int, leaf: tuple[str, bytes] | None = None) -> None:
    """root/d/d/.../d, `depth` folders (os.makedirs recurses per level), `leaf` file at the bottom."""
    root.mkdir()
    fd = os.open(root, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            below = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = below
        if leaf is not None:
            out = os.open(leaf[0], os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
            os.write(out, leaf[1])
            os.close(out)
    finally:
        os.close(fd)


def remove_tree(root: Path, depth: int) -> None:
    """deep_tree undone bottom up (shutil.rmtree recurses per level too, as pytest's cleanup does)."""
    fds = [os.open(root, os.O_RDONLY)]
    for _ in range(depth):
        fds.append(os.open("d", os.O_RDONLY, dir_fd=fds[-1]))
    for k in range(depth, -1, -1):
        for name in os.listdir(fds[k]):
            if name != "d":
                os.unlink(name, dir_fd=fds[k])
        if k < depth:
            os.rmdir("d", dir_fd=fds[k])
        os.close(fds[k])
    os.rmdir(root)


@pytest.fixture
def tree(tmp_path):
    root, depth = tmp_path / "tree", 1100
    deep_tree(root, depth, ("outtensor0.bin", b"$Version=1.0\ndtype=0\ndims=1\n$End=1\n\0\0\0\0"))
    yield root
    remove_tree(root, depth)


def test_a_folder_tree_1100_deep_is_no_dump_not_a_recursion_error(tree):
    assert atb.sniff(str(tree)) is False  # the tensor file lies below the depth a walk goes
    assert atb.rounds(str(tree)) == []
    with pytest.raises(SourceError, match="not a dump"):
        registry.detect(str(tree))
    with pytest.raises(SourceError):
        atb.read(str(tree))
    assert list_tasks(tree) == []


def test_walk_is_os_walk_as_a_loop_bounded_in_depth(tmp_path):
    for folder in ("a/b/c", "a/x", "b", "c/d/e/f/g"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "f.txt").write_text("")
    (tmp_path / "link").symlink_to(tmp_path / "c")
    assert list(inputfile.walk(tmp_path)) == list(os.walk(tmp_path))
    pruned = []
    for folder, dirs, _files in inputfile.walk(tmp_path):
        dirs[:] = sorted(d for d in dirs if d != "x")
        pruned.append(os.path.relpath(folder, tmp_path))
    assert pruned == [".", "a", "a/b", "a/b/c", "b", "c", "c/d", "c/d/e", "c/d/e/f", "c/d/e/f/g"]  # the link not followed
    assert max(os.path.relpath(f, tmp_path).count(os.sep) + 1 for f, _, _ in inputfile.walk(tmp_path, 2)) == 2


# ---- a module chain thousands deep -------------------------------------------------------------------
def chain(root: Path, n: int) -> Path:
    """A dump whose n modules each run inside the previous one, a call inside the innermost."""
    calls = [f"Module.m{k}.Linear.forward.0" for k in range(n)]
    construct = {c: calls[k - 1] if k else None for k, c in enumerate(calls)}
    construct["Functional.relu.0.forward"] = calls[-1]
    data = {"Functional.relu.0.forward": {"input_args": [TENSOR], "output": [TENSOR]}}
    data.update({c: {"input_args": [TENSOR], "output": [TENSOR]} for c in reversed(calls)})
    doc = {"task": "statistics", "level": "L0", "framework": "pytorch", "dump_data_dir": None, "data": data}
    return rank_folder(root, dump=json.dumps(doc), construct=json.dumps(construct))


def test_a_module_chain_5000_deep_is_a_graph_of_nested_modules(tmp_path):
    n = 5000
    chain(tmp_path, n)
    graph = load_msprobe(str(tmp_path))
    nodes = graph.nodes
    assert [x.name for x in nodes[:2]] == ["Module.m0.Linear.forward.0", "Module.m1.Linear.forward.0"]
    assert nodes[-1].name == "Functional.relu.0.forward" and nodes[-1].attrs["depth"] == n
    assert [x.attrs.get("span") for x in (nodes[0], nodes[n - 1], nodes[n])] == [n, 1, None]
    tree = ModuleTree(nodes)
    assert tree.holders(n) == list(range(n)) and tree.shown({0}) == [0] and tree.visible(n, {7}) == 7
    assert len(layout(graph)) == n + 1


def test_a_cycle_in_construct_json_is_not_followed(tmp_path):
    construct = {"Module.a.A.forward.0": "Module.b.B.forward.0", "Module.b.B.forward.0": "Module.a.A.forward.0",
                 "Functional.relu.0.forward": "Module.a.A.forward.0"}
    data = {name: {"output": [TENSOR]} for name in ("Functional.relu.0.forward", "Module.a.A.forward.0")}
    rank_folder(tmp_path, dump=json.dumps({"task": "statistics", "level": "L1", "data": data}),
                construct=json.dumps(construct))
    names = [x.name for x in load_msprobe(str(tmp_path)).nodes]
    assert names == ["Module.b.B.forward.0", "Module.a.A.forward.0", "Functional.relu.0.forward"]
