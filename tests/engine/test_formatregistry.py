"""The format registry's declarations hold: every dialect's reader is its kind's module, every
declared option is a keyword its reader takes, kind names are spelled once (sources/kinds.py, or a
format's entry alone where no code names it)."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

from accuscope.engine.graphs.capabilities import ModelCapabilities
from accuscope.engine.graphs.graph import Graph
from accuscope.engine.sides import registry
from accuscope.engine.sources import kinds
from support.models import relu_sigmoid
from support.narrow import present

SOURCES = Path(registry.__file__).resolve().parents[1] / "sources"


def test_every_kinds_name_is_a_formats_and_every_reader_its_module():
    """Every name in kinds.py is a format's kind (a new format's entry may spell its own: the recipe's), each
    format's kind is unique, and a reader that names its kind names its entry's."""
    names = {v for k, v in vars(kinds).items() if k.isupper()}
    assert [f.kind for f in registry.FORMATS] == list(dict.fromkeys(f.kind for f in registry.FORMATS))  # unique
    assert names <= {f.kind for f in registry.FORMATS}
    for fmt in registry.FORMATS:
        if fmt.reader is not None:
            module = fmt.reader()
            assert getattr(module, "KIND", fmt.kind) == fmt.kind
            assert all(callable(getattr(module, name)) for name in ("sniff", "read", "describe"))


def test_every_declared_option_is_a_keyword_of_its_readers_read_and_describe():
    for fmt in registry.FORMATS:
        assert not fmt.options or fmt.reader is not None, fmt.kind
        for option in fmt.options:
            module = present(fmt.reader)()
            assert option.name in inspect.signature(module.read).parameters, f"{fmt.kind}.read takes no {option.name}="
            described = inspect.signature(module.describe).parameters.values()
            assert any(p.name == option.name or p.kind is p.VAR_KEYWORD for p in described)


def test_reader_modules_spell_their_kind_through_kinds():
    for path in SOURCES.glob("*.py"):
        for line in path.read_text().splitlines():
            assert not re.match(r'KIND\s*=\s*"', line), f"{path.name}: {line}"


def test_every_dump_format_is_read_by_a_reader_module():
    for fmt in registry.DUMP_FORMATS:
        assert fmt.reader is not None, f"{fmt.kind}: a dump format without a Reader"


PACKAGE = SOURCES.parent.parent
DUMP_KIND = re.compile(r"kinds\.(" + "|".join(k for k, v in vars(kinds).items() if k.isupper()
                                               and v in {f.kind for f in registry.DUMP_FORMATS}) + r")\b")
# where code outside the readers and the registry names a dump format, and why that is about the format
# itself rather than a behaviour some other format could have (a behaviour is a Capabilities field (sides/capabilities.py))
NAMED = {
    ("commands/inspect.py", "NPY"): "an `accuscope dump` folder's record (dump.json): accuscope's own npy folder",
    ("commands/inspect.py", "MSPROBE"): "--shards merges the ranks of an msprobe run (compare/shards reads msprobe's layout)",
    ("engine/diagnose/rules/method.py", "MINDSPORE"): "which framework's msprobe pre-check (run_ut) the advice names",
    ("engine/tasks/taskrun.py", "NPY"): "msaccucmp's CSV form for a golden npy folder (golden_is_npy)",
    ("engine/tasks/taskrun.py", "PT"): "msaccucmp's CSV form for a golden npy folder (golden_is_npy)",
    ("engine/demo/workspace.py", "NPY"): "msaccucmp's CSV form for a golden npy folder (golden_is_npy)",
    ("engine/compare/mapping.py", "ASCEND"): "a bare NpuDump given as a side: its kind's name",
    ("engine/tasks/task.py", "MSPROBE"): "--shards merges the ranks of an msprobe run (its modules: the merged tree)",
    ("engine/tasks/taskdoc.py", "MSPROBE"): "a version 3 task.json recorded no pairs_calls: its two msprobe sides said it",
}
IMPORTED = re.compile(r"kinds import ([\w, ]+)")


def test_a_behaviour_is_read_from_capabilities_not_from_a_dump_formats_name():
    found = set()
    for path in PACKAGE.rglob("*.py"):
        where = path.relative_to(PACKAGE).as_posix()
        if where.startswith("engine/sources/") or where == "engine/sides/registry.py":
            continue
        text = path.read_text()
        found |= {(where, m.group(1)) for m in DUMP_KIND.finditer(text)}
        found |= {(where, name.strip()) for m in IMPORTED.finditer(text) for name in m.group(1).split(",")
                  if DUMP_KIND.fullmatch(f"kinds.{name.strip()}")}
    assert found <= set(NAMED), f"decided by a format's name, not its capabilities: {sorted(found - set(NAMED))}"


def test_every_model_format_declares_its_loader_and_what_its_graphs_are():
    """A model format's loader and what its graphs are (a device graph, converted, cuttable, runnable) sit on
    its registry entry, as a dump format's capabilities do: no table of loaders by kind beside it."""
    for fmt in registry.FORMATS:
        assert fmt.is_model == (fmt.loader is not None) == (fmt.model is not None), fmt.kind
        if fmt.is_model:
            assert callable(present(fmt.loader)()), fmt.kind
    declared = {f.kind: present(f.model) for f in registry.FORMATS if f.is_model}
    assert declared[kinds.OM] == declared[kinds.GE_GRAPH] == ModelCapabilities(device_graph=True, converted=True)
    assert {k for k, caps in declared.items() if caps.runnable} == {kinds.ONNX}
    assert {k for k, caps in declared.items() if caps.cuttable} == {kinds.ONNX, kinds.CAFFE}
    assert {k for k, caps in declared.items() if caps.converted} == {kinds.OM, kinds.GE_GRAPH, kinds.MLIR,
                                                                      kinds.OPENVINO_IR, kinds.TFLITE}


def test_a_graph_is_what_its_format_declares_not_what_its_kind_is_named(tmp_path):
    """Graph's properties read the capabilities its format's entry gave it (Graph.caps), never its kind's name:
    a graph of a made-up kind declared cuttable is cuttable; one named onnx but declared nothing is nothing."""
    made_up = Graph("g", "made-up", "", [], [], [], caps=ModelCapabilities(cuttable=True, runnable=True))
    assert made_up.cuttable and made_up.runnable and not made_up.converted and not made_up.is_device
    named = Graph("g", kinds.ONNX, "", [], [], [])
    assert not (named.cuttable or named.runnable or named.converted or named.is_device)
    model = tmp_path / "m.onnx"
    relu_sigmoid(model)
    assert registry.load_graph(model).caps == registry.detect(model).model


MODEL_KIND = re.compile(r"kinds\.(" + "|".join(k for k, v in vars(kinds).items() if k.isupper()
                                               and v in {f.kind for f in registry.FORMATS if f.is_model}) + r")\b")
# where code outside the registry and the model formats' loaders names a model format, and why that is about
# the format itself (its op types, its naming, the library that reads it) rather than what its graphs are
# (a device graph, converted, cuttable, runnable: graphs/capabilities.py)
NAMED_MODELS = {
    ("engine/graphs/subgraph.py", "CAFFE"): "Caffe's input layers by their op types (Input, *Data)",
    ("engine/compare/folds.py", "ONNX"): "the op types of a folded BatchNormalization in ONNX",
    ("engine/compare/folds.py", "OPENVINO_IR"): "the op types of a folded BatchNormalization in OpenVINO",
    ("engine/compare/mapping.py", "ONNX"): "an OpenVINO IR's folds, against an ONNX reference (folds.py)",
    ("engine/compare/mapping.py", "OPENVINO_IR"): "an OpenVINO IR's folds (folds.py: OpenVINO's op types)",
    ("engine/compare/comparison.py", "MLIR"): "tpu-mlir's loc names (`{onnx output}_{OpType}`) name the npz's keys",
    ("engine/export/retest.py", "ONNX"): "an export's submodel is re-run with onnxruntime: an ONNX file",
    ("engine/diagnose/rules/introduced.py", "ONNX"): "modeldiff reads both models with the onnx library",
    ("commands/run.py", "ONNX"): "--expected auto converts the ONNX reference as the ONNX candidate was (onnx)",
    ("commands/dump.py", "ONNX"): "the runtimes that run a model kind (RUNS_ON: ARCHITECTURE.md's runtime recipe)",
    ("commands/dump.py", "OPENVINO_IR"): "the runtimes that run a model kind (RUNS_ON)",
    ("commands/dump.py", "TFLITE"): "the runtimes that run a model kind (RUNS_ON)",
}


def test_what_a_model_is_is_read_from_its_graph_not_from_its_kinds_name():
    loaders = {present(f.loader)().__module__ for f in registry.FORMATS if f.is_model}
    found = set()
    for path in PACKAGE.rglob("*.py"):
        where = path.relative_to(PACKAGE).as_posix()
        if where == "engine/sides/registry.py" or "accuscope." + where[:-3].replace("/", ".") in loaders:
            continue
        found |= {(where, m.group(1)) for m in MODEL_KIND.finditer(path.read_text())}
    assert found <= set(NAMED_MODELS), f"decided by a model format's name: {sorted(found - set(NAMED_MODELS))}"
