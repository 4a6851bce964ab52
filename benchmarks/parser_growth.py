"""Every regular expression accuscope applies to file content, on the input that makes it work hardest.

Issue 43: a parser whose cost grows faster than its input hangs on a crafted file (a `.mlir` op whose
attributes hold one 200 KB word ran for minutes). Each case below is one pattern (module:NAME, or the
function that replaced it) fed the input class that works it hardest, `--scale` times the size shown
at 1, through the function that reads files with it (the pattern itself where none does); it runs in
a child of its own, killed after `--timeout` seconds. A linear parser takes about 4 times as long at
`--scale 4` as at 1; a quadratic one 16 times.

    python benchmarks/parser_growth.py [--tree /path/to/checkout] [--scale 1] [--timeout 20] [--only mlir]

`--tree` imports the package from another checkout (the code before a change) to print its times.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OP = '  %1 = "top.Relu"(%0) {A} : (tensor<1x8xf32>) -> tensor<1x8xf32> loc(#loc1)\n'
HEAD = '  %0 = "top.Input"(%arg0) : (tensor<1x8xf32>) -> tensor<1x8xf32> loc(#loc0)\n'
LOCS = '#loc0 = loc("x")\n#loc1 = loc("y_Relu")\n'


def _mlir(folder: str, body: str, locs: str = LOCS) -> str:
    path = os.path.join(folder, "m.mlir")
    with open(path, "w") as fh:
        fh.write("module {\n" + HEAD + body + "}\n" + locs)
    return path


def _graph(body: str, locs: str = LOCS) -> Callable[[str], Callable[[], object]]:
    def setup(folder: str) -> Callable[[], object]:
        from accuscope.engine.graphs.mlirgraph import load_mlir
        path = _mlir(folder, body, locs)
        return lambda: _quiet(load_mlir, path)
    return setup


def _locs(body: str, locs: str = LOCS) -> Callable[[str], Callable[[], object]]:
    def setup(folder: str) -> Callable[[], object]:
        from accuscope.engine.sources.tpumlir import load_mlir_locs
        path = _mlir(folder, body, locs)
        return lambda: _quiet(load_mlir_locs, path)
    return setup


def _quiet(fn: Callable, *args) -> object:
    """The call, its refusal (a SourceError, a ValueError) counted as an answer: only time matters here."""
    try:
        return fn(*args)
    except ValueError as exc:  # SourceError is one
        return exc


def _module(name: str) -> str:
    """`sources.names` -> accuscope.engine.sources.names; `commands.common` -> accuscope.commands.common."""
    return f"accuscope.{name}" if name.startswith("commands.") else f"accuscope.engine.{name}"


def _call(module: str, name: str, text: object) -> Callable[[str], Callable[[], object]]:
    def setup(_folder: str) -> Callable[[], object]:
        import importlib
        fn = getattr(importlib.import_module(_module(module)), name)
        return lambda: _quiet(fn, text)
    return setup


def _file(module: str, name: str, text: str, file: str = "f.txt") -> Callable[[str], Callable[[], object]]:
    def setup(folder: str) -> Callable[[], object]:
        import importlib
        fn = getattr(importlib.import_module(_module(module)), name)
        path = os.path.join(folder, file)
        with open(path, "w") as fh:
            fh.write(text)
        return lambda: _quiet(fn, path)
    return setup


def _pattern(module: str, name: str, method: str, text: str | bytes) -> Callable[[str], Callable[[], object]]:
    """A pattern used where no function of its own reads it (kept as it is: measured directly)."""
    def setup(_folder: str) -> Callable[[], object]:
        import importlib
        pattern = getattr(importlib.import_module(_module(module)), name)
        return lambda: getattr(pattern, method)(text)
    return setup


def cases(k: int) -> list[tuple[str, str, Callable[[str], Callable[[], object]]]]:
    """(pattern, input, setup), each input `k` times the size shown at k=1."""
    n = 1000 * k
    mb = f"{k} MB"
    fused4 = LOCS.replace('"y_Relu"', "fused[" + ", ".join(["#loc2"] * (n // 10)) + "]") + "".join(
        f"#loc{d} = loc(fused[" + ", ".join([f"#loc{d + 1}"] * (n // 10)) + "])\n" for d in (2, 3, 4)) + '#loc5 = loc("z")\n'
    types = OP.replace("-> tensor<1x8xf32>", "-> " + "tensor<" * (140 * n))
    return [
        ("mlirgraph:_ATTR", f"one {n // 5} KB word in an op's {{...}}", _graph(OP.replace("A", "w" * (200 * n)))),
        ("mlirgraph:_ATTR", f"{mb} of `a = ` without values", _graph(OP.replace("A", "a = " * (250 * n)))),
        ("mlirgraph:_LOC_USE", f"{3 * k} MB of repeated `loc(fused[`",
         _graph(OP.replace("loc(#loc1)", "loc(fused[" * (300 * n) + "x)"))),
        ("mlirgraph:_LOC_USE", f'{mb} of repeated `loc("a"(`', _graph(OP.replace("loc(#loc1)", 'loc("a"(' * (125 * n) + ")"))),
        ("mlirgraph:_LOC_DEF", f"{mb} of `) ` in a loc definition", _graph(OP, LOCS + "#loc9 = loc(" + ") " * (500 * n) + "x\n")),
        ("mlirgraph:_OP", f"{mb} %-word without `=`", _graph("  %" + "w" * (1000 * n) + '"top.Relu"\n')),
        ("mlirgraph:_RETURN", f"{mb} `return %a, ...` without `:`", _graph("  return " + "%a, " * (250 * n) + "\n")),
        ("mlirgraph:_VALUE", f"{mb} of operands", _graph(OP.replace("(%0)", "(" + "%0, " * (250 * n) + "%0)"))),
        ("mlirgraph:tensor<", f"{mb} of `tensor<` after `->`", _graph(types)),
        ("tpumlir:_LOC_USE", f"{3 * k} MB of repeated `loc(fused[`", _locs(OP.replace("loc(#loc1)", "loc(fused[" * (300 * n) + "x)"))),
        ("tpumlir:loc_names", f"4 locs of fused[{n // 10} x #locN] over each other", _locs(OP, fused4)),
        ("tpumlir:_QUOTED", f'{mb} loc name of `\\"`', _locs(OP, LOCS + '#loc1 = loc("' + '\\"' * (500 * n) + ")\n")),
        ("tpumlir:_LOC_ITEM", f'{mb} fused[...] of `\\"`', _locs(OP, LOCS.replace('"y_Relu"', 'fused["' + '\\"' * (500 * n) + "]"))),
        ("tpumlir:_LOC_ITEM", f'{mb} fused[...] of `"a"(`', _locs(OP.replace("loc(#loc1)", "loc(fused[" + '"a"(' * (250 * n) + "])"))),
        ("tpumlir:_OP_LINE", f"{mb} of `%a, ` without `=`", _locs("  " + "%a, " * (250 * n) + "\n")),
        ("tpumlir:_TENSOR_TYPE", f"{mb} of `tensor<` after `->`", _locs(types)),
        ("tpumlir:_OP_TYPE", f"{mb} npz key of `_Aa`", _call("sources.tpumlir", "split_op_type", "_Aa" * (330 * n) + "_")),
        ("names:_PARAMETER", f"{n // 5} KB name of `.parameters` parts, a bad last part",
         _call("sources.names", "parameter", "Module.a" + ".parameters" * (9 * n) + ".w" * (50 * n) + ".")),
        ("names:_TENSOR_NAME", f"{mb} of `a:input:`", _call("sources.names", "parse_tensor_name", "a:input:" * (125 * n) + "x")),
        ("names:natural_key", f"{mb} of `a1`", _call("sources.names", "natural_key", "a1" * (500 * n))),
        ("names:_CONTROL", f"{mb} of ESC", _call("sources.names", "printable", "\x1b" * (1000 * n))),
        ("msprobe:_GRADS_CALL", f"{mb} of `.parameters_grad`", _call("sources.msprobe", "is_grads", "a" + ".parameters_grad" * (60 * n) + ".x")),
        ("msprobe:_DATA_NAME", "a file name (255 bytes at most) of `.forward.input`",
         _pattern("sources.msprobe", "_DATA_NAME", "fullmatch", ("a" + ".forward.input" * 18)[:253] + ".x")),
        ("crossmap:_DATA_NAME", f"{mb} of `.forward.inputx`", _pattern("compare.crossmap", "_DATA_NAME", "fullmatch", "a" + ".forward.inputx" * (70 * n))),
        ("crossmap:_DIRECTION", f"{mb} of `.forwardx`", _pattern("compare.crossmap", "_DIRECTION", "search", ".forwardx" * (110 * n))),
        ("shards:_API", f"{mb} of `.1`", _pattern("compare.shards", "_API", "fullmatch", "a" + ".1" * (500 * n) + "x")),
        ("crossmap:MODULE_RECORD", f"{mb} of `.a`", _pattern("compare.crossmap", "MODULE_RECORD", "fullmatch", "Module" + ".a" * (500 * n) + ".forwardx")),
        ("csvio:_NUMBER", f"a {n // 5} KB digit cell ending in a letter", _call("tasks.csvio", "formula_safe", "-" + "1" * (200 * n) + "x")),
        ("csvio:_ANY_FORMULA", f"{mb} of `'` cells", _call("tasks.csvio", "formula_rows", ["'" * (1000 * n) + "x"])),
        ("csvio:_NEUTRALISED", f"a {mb} cell of `'`", _call("tasks.csvio", "formula_text", "'" * (1000 * n) + "x")),
        # textformat.py: one tokenizer and parser for the Caffe prototxt and GE's graph dumps, through each
        ("textformat:_TOKEN", f"caffe: a {n // 5} KB number ending in a letter", _call("graphs.caffegraph", "parse_text_format", "x: " + "1" * (200 * n) + "a")),
        ("textformat:_TOKEN", f'caffe: {mb} of `\\"` on one line', _call("graphs.caffegraph", "parse_text_format", 'name: "' + '\\"' * (500 * n))),
        ("textformat:_TOKEN", f"caffe: {mb} of spaces", _call("graphs.caffegraph", "parse_text_format", "layer {\n" + " " * (1000 * n))),
        ("textformat:_TOKEN", f"GE: {mb} of spaces", _file("graphs.gegraph", "load_ge_graph", "graph {\n" + " " * (1000 * n))),
        ("textformat:_TOKEN", f'GE: {mb} of `\\"` on one line', _file("graphs.gegraph", "load_ge_graph", 'graph { name: "' + '\\"' * (500 * n))),
        ("gegraph:sniff", "64 KB of blank lines", _file("graphs.gegraph", "sniff", "\n" * 65536 + "graph {")),
        ("gegraph:_OP_NAME", f"{mb} of blank lines", _file("graphs.gegraph", "op_names", "\n" * (1000 * n))),
        ("registry:_CAFFE_LINE", "4 KB of blank lines", _pattern("sides.registry", "_CAFFE_LINE", "search", b"\n" * 4096)),
        ("yamltext:_key", f"{mb} line of `a:`", _call("sources.yamltext", "yaml_load", "a:" * (500 * n))),
        ("common:_ESCAPE", f"{mb} of backslashes", _call("commands.common", "escape", "\\" * (1000 * n) + "x")),
        ("common:_TAGS", f"{mb} of backslashes", _pattern("commands.common", "_TAGS", "findall", "\\" * (1000 * n) + "x")),
    ]


def child(index: int, k: int) -> None:
    label, _what, setup = cases(k)[index]
    with tempfile.TemporaryDirectory() as folder:
        run = setup(folder)
        t0 = time.perf_counter()
        run()
        print(f"{time.perf_counter() - t0:.3f}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose tui/ is imported")
    p.add_argument("--scale", type=int, default=1)
    p.add_argument("--timeout", type=float, default=20.0)
    p.add_argument("--only", default="", help="cases whose pattern holds this text")
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child is not None:
        child(args.child, args.scale)
        return 0
    env = {**os.environ, "PYTHONPATH": str(args.tree.resolve() / "tui")}
    print(f"{'pattern':<22} {'input':<52} {'seconds':>8}   ({args.tree})")
    for index, (label, what, _setup) in enumerate(cases(args.scale)):
        if args.only not in label:
            continue
        cmd = [sys.executable, __file__, "--child", str(index), "--scale", str(args.scale)]
        try:
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout, check=False)
            shown = done.stdout.strip() if done.returncode == 0 else f"exit {done.returncode}: {done.stderr.strip()[-80:]}"
        except subprocess.TimeoutExpired:
            shown = f"> {args.timeout:.0f}"
        print(f"{label:<22} {what:<52} {shown:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
