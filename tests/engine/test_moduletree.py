"""The module hierarchy a folding graph pane reads (ModuleTree over load_msprobe's nodes): rows shown
with modules folded (nested ones fold with their holder), which modules hold a call, which module a
row stands for; on a real msprobe dump (the demo's simulated transformer: construct.json)."""
from __future__ import annotations

import pytest

from accuscope.engine.demo import msprobesim
from accuscope.engine.graphs.moduletree import ModuleTree
from accuscope.engine.graphs.msprobegraph import load_msprobe


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("modules")
    msprobesim.write(str(root / "npu"), ranks=1, steps=1)
    graph = load_msprobe(str(root / "npu"))
    return ModuleTree(graph.nodes)


def at(tree: ModuleTree, name: str) -> int:
    return next(p for p, n in enumerate(tree.nodes) if n.name == name or n.attrs.get("module") == name)


def test_nothing_folded_shows_every_call_and_each_module_holds_its_calls(tree):
    n = len(tree.nodes)
    assert tree.shown(()) == list(range(n))
    block, attn = at(tree, "layers.1"), at(tree, "layers.1.attn")
    fault = at(tree, msprobesim.FAULT_CALL)
    assert tree.holders(fault) == [block, attn] and tree.holders(block) == []
    assert tree.module_of(fault) == attn and tree.module_of(attn) == attn
    assert tree.headers[0] == at(tree, "layers.0") and attn in tree.headers


def test_a_folded_module_shows_as_its_header_alone_and_nested_modules_fold_with_it(tree):
    block, attn = at(tree, "layers.1"), at(tree, "layers.1.attn")
    fault = at(tree, msprobesim.FAULT_CALL)
    n = len(tree.nodes)
    rows = tree.shown({attn})
    assert attn in rows and fault not in rows and len(rows) == n - tree.span[attn]
    assert rows[rows.index(attn) + 1] == attn + tree.span[attn] + 1  # the call after the module follows it
    outer = tree.shown({block, attn})  # the outer fold hides the inner header too
    assert attn not in outer and len(outer) == n - tree.span[block]
    assert tree.visible(fault, {block, attn}) == block and tree.visible(fault, {attn}) == attn
    assert tree.visible(fault, ()) == fault
    everything = tree.shown(tree.headers)  # fold all: the top-level modules and calls outside them
    assert all(tree.holders(p) == [] for p in everything) and block in everything
