"""`accuscope dump` writes file names every system takes: an op or input name holding a character Windows
refuses (`x:0` from TensorFlow and LiteRT models, `<>"|?*`), or a reserved device name (CON, AUX, ...), lands
under its safe form, its real name kept in the dump's mapping.csv, so the dump reads back, and pairs, by the
names the model gives."""
from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pytest

from support.cli import accuscope

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402

WINDOWS_ILLEGAL = set('<>:"/\\|?*') | {chr(i) for i in range(32)}
RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"{d}{k}" for d in ("COM", "LPT") for k in range(1, 10))}


def windows_refuses(name: str) -> str:
    """Why Windows refuses the file name `name`, else ""."""
    if WINDOWS_ILLEGAL & set(name):
        return f"{sorted(WINDOWS_ILLEGAL & set(name))} in it"
    if name.endswith((".", " ")):
        return "a trailing dot or space"
    if name.split(".", 1)[0].rstrip(" ").upper() in RESERVED:
        return "a reserved device name"
    return ""


def test_dump_file_names_are_windows_safe_and_the_names_read_back(tmp_path):
    names = ["relu:0", "CON", "aux", "q?<x>|\"y*"]
    nodes = [h.make_node("Relu", ["keras_tensor:0"], ["t0"], name=names[0]),
             h.make_node("Neg", ["t0"], ["t1"], name=names[1]),
             h.make_node("Abs", ["t1"], ["t2"], name=names[2]),
             h.make_node("Sigmoid", ["t2"], ["y"], name=names[3])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("keras_tensor:0", T.FLOAT, [2, 3])],
                         [h.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    model = tmp_path / "m.onnx"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), str(model))
    np.save(tmp_path / "x.npy", np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
    r = accuscope("dump", model, "--out", tmp_path / "d", "--input", f"keras_tensor:0={tmp_path / 'x.npy'}")
    assert r.returncode == 0, r.stderr
    written = sorted(p.name for p in (tmp_path / "d").iterdir())
    assert len(written) >= 5 and "mapping.csv" in written
    assert {n: why for n in written if (why := windows_refuses(n))} == {}
    from accuscope.engine.sides.registry import open_side
    side = open_side(tmp_path / "d")
    assert {t.op for t in side.tensors} >= {"keras_tensor:0", *names}
    # pairing by name unchanged: the dump against itself pairs every tensor by its own name
    r = accuscope("compare", "--npu", tmp_path / "d", "--golden", tmp_path / "d", "--out", tmp_path / "t")
    assert r.returncode == 0, r.stderr
    r = accuscope("show", tmp_path / "t", "--format", "csv", "--columns", "npu_op,tensor,golden_op")
    assert r.returncode == 0, r.stderr
    rows = [(row["npu_op"], row["golden_op"]) for row in csv.DictReader(io.StringIO(r.stdout))
            if ":output:" in row["tensor"]]
    assert {a for a, _ in rows} == {"keras_tensor:0", *names}
    assert all(a == b for a, b in rows), rows


def test_no_committed_path_is_one_windows_refuses():
    import subprocess
    root = Path(__file__).resolve().parents[2]
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, timeout=60, check=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    refused = {path: why for path in listed.stdout.decode().split("\0") if path
               for part in path.split("/") if (why := windows_refuses(part))}
    assert refused == {}
