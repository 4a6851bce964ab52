"""A small transformer computed in numpy, dumped as msprobe writes a training step (tensor mode).

    ROOT/step{s}/rank{r}/dump.json            every call (inputs, outputs, parameters, statistics)
                        /stack.json               each call's Python stack: this module's lines
                                                  that made it, as msprobe records them
                        /construct.json           each call's parent module
                        /dump_tensor_data/{call}.{input|output|parameters}.{k}.npy

Two pre-norm blocks (LayerNorm, single-head attention, residual; LayerNorm, GELU MLP, residual), the
weights the same on every rank, each rank's batch its own (data parallel), as MindSpore's msprobe
names calls (`Functional.linear.3.forward`, `Cell.layers.0.attn.Attention.forward.0`). The side
under test (`fault_rank` given) rounds every call's output to bfloat16, as mixed precision does
(small differences everywhere, all within thresholds), and on `fault_rank` the attention scores of
the second block miss their 1/sqrt(d) scale (a fused-attention kernel variant picked on one device
only): inputs agree there, outputs do not (4x: statistics alone show it), and every later call of
that rank inherits the difference.
"""
from __future__ import annotations

import json
import linecache
import os
import sys
from collections.abc import Callable
from functools import partial
from types import FrameType
from typing import Any

import numpy as np

SEQ, HIDDEN, FFN, LAYERS = 8, 16, 32, 2
FAULT_CALL = "Mint.matmul.2.forward"  # the second block's attention scores q @ k^T / sqrt(d)


def _bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 (nearest even) and back."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


class _Writer:
    """One rank's dump of one step: calls in execution order, tensors as npy files."""

    def __init__(self, folder: str, rounding: Callable[[np.ndarray], np.ndarray] | None):
        self.folder = folder
        os.makedirs(os.path.join(folder, "dump_tensor_data"), exist_ok=True)
        self.data: dict[str, dict] = {}
        self.parents: dict[str, str | None] = {}
        self.stack: list[str] = []  # the module calls we are inside
        self.counters: dict[str, int] = {}
        self.stacks: dict[tuple[str, ...], list[str]] = {}  # a Python stack -> the calls made from it
        self.rounding = rounding

    def _entry(self, name: str, x: np.ndarray) -> dict:
        x = np.ascontiguousarray(x, dtype=np.float32)
        np.save(os.path.join(self.folder, "dump_tensor_data", name + ".npy"), x, allow_pickle=False)
        return {"type": "mindspore.Tensor", "dtype": "Float32", "shape": list(x.shape), "Max": float(x.max()),
                "Min": float(x.min()), "Mean": float(x.mean()), "Norm": float(np.linalg.norm(x)),
                "data_name": name + ".npy"}

    def _name(self, api: str) -> str:
        n = self.counters.get(api, 0)
        self.counters[api] = n + 1
        prefix, _, short = api.partition(".")
        return f"{prefix}.{short}.{n}.forward"

    def call(self, api: str, fn: Callable[..., np.ndarray], inputs: list[np.ndarray],
             params: dict[str, np.ndarray] | None = None, fault: Callable[..., np.ndarray] | None = None) -> np.ndarray:
        call = self._name(api)
        self.stacks.setdefault(_python_stack(), []).append(call)
        out = (fault or fn)(*inputs, *(params or {}).values())
        if self.rounding is not None:
            out = self.rounding(out)
        entry: dict[str, Any] = {"input_args": [self._entry(f"{call}.input.{i}", x) for i, x in enumerate(inputs)],
                 "input_kwargs": {}}
        if params:
            entry["input_args"] += [self._entry(f"{call}.input.{len(inputs) + k}", p)
                                    for k, p in enumerate(params.values())]
        entry["output"] = [self._entry(f"{call}.output.0", out)]
        self.data[call] = entry
        self.parents[call] = self.stack[-1] if self.stack else None
        return out

    def module(self, path: str, cls: str, fn: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
        call = f"Cell.{path}.{cls}.forward.0"
        self.stacks.setdefault(_python_stack(), []).append(call)
        self.parents[call] = self.stack[-1] if self.stack else None
        self.stack.append(call)
        out = fn(x)
        self.stack.pop()
        # a module's hook fires when it returns: its entry follows its APIs'
        self.data[call] = {"input_args": [self._entry(f"{call}.input.0", x)], "input_kwargs": {},
                           "output": [self._entry(f"{call}.output.0", out)]}
        return out

    def close(self) -> None:
        doc = {"task": "tensor", "level": "mix", "framework": "mindspore", "dump_data_dir": "dump_tensor_data",
               "data": self.data}
        stacks = {str(i): [calls, list(lines)] for i, (lines, calls) in enumerate(self.stacks.items())}
        for name, value in (("dump.json", doc), ("construct.json", self.parents), ("stack.json", stacks)):
            with open(os.path.join(self.folder, name), "w", encoding="utf-8") as fh:
                json.dump(value, fh, indent=1)


_WRITER = {_Writer.call.__code__, _Writer.module.__code__}


def _python_stack() -> tuple[str, ...]:
    """The stack of the call being dumped as msprobe's dumper records it: innermost first, one
    `File {path}, line {n}, in {function}, \n {source line}` per frame with a source line, the
    dumper's own frames (here the writer's) left out. Only this module's frames, the model's code
    up to `write`: what called `write` is not the model."""
    lines: list[str] = []
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == __file__:
        code = frame.f_code
        source = linecache.getline(code.co_filename, frame.f_lineno).strip()
        if code not in _WRITER and source:
            lines.append(f"File {code.co_filename}, line {frame.f_lineno}, in {code.co_name}, \n {source}")
        frame = frame.f_back
    return tuple(lines)


def _weights(seed: int, hidden: int, ffn: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    w: dict[str, np.ndarray] = {}
    for i in range(LAYERS):
        for name, shape in (("q", (hidden, hidden)), ("k", (hidden, hidden)), ("v", (hidden, hidden)),
                            ("o", (hidden, hidden)), ("up", (ffn, hidden)), ("down", (hidden, ffn))):
            w[f"{i}.{name}.weight"] = (rng.standard_normal(shape) / np.sqrt(shape[1])).astype(np.float32)
            w[f"{i}.{name}.bias"] = (0.02 * rng.standard_normal(shape[0])).astype(np.float32)
        for ln in ("ln1", "ln2"):
            w[f"{i}.{ln}.weight"] = (1 + 0.1 * rng.standard_normal(hidden)).astype(np.float32)
            w[f"{i}.{ln}.bias"] = (0.1 * rng.standard_normal(hidden)).astype(np.float32)
    return w


def _layer_norm(x, g, b):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * g + b


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _gelu(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


def _linear(x, w, b):
    return x @ w.T + b


def run_rank(folder: str, w: dict[str, np.ndarray], x: np.ndarray, *, under_test: bool, faulty: bool) -> None:
    """One step of one rank, dumped into `folder`."""
    d = _Writer(folder, _bf16 if under_test else None)

    def attention(i: int, h: np.ndarray) -> np.ndarray:
        q = d.call("Functional.linear", _linear, [h], {"weight": w[f"{i}.q.weight"], "bias": w[f"{i}.q.bias"]})
        k = d.call("Functional.linear", _linear, [h], {"weight": w[f"{i}.k.weight"], "bias": w[f"{i}.k.bias"]})
        v = d.call("Functional.linear", _linear, [h], {"weight": w[f"{i}.v.weight"], "bias": w[f"{i}.v.bias"]})
        kt = d.call("Tensor.transpose", lambda t: t.T.copy(), [k])
        unscaled = (lambda a, b: a @ b) if faulty and i == 1 else None
        scores = d.call("Mint.matmul", lambda a, b: a @ b / np.sqrt(a.shape[-1]), [q, kt], fault=unscaled)
        p = d.call("Functional.softmax", _softmax, [scores])
        ctx = d.call("Mint.matmul", lambda a, b: a @ b, [p, v])
        return d.call("Functional.linear", _linear, [ctx], {"weight": w[f"{i}.o.weight"], "bias": w[f"{i}.o.bias"]})

    def mlp(i: int, h: np.ndarray) -> np.ndarray:
        up = d.call("Functional.linear", _linear, [h], {"weight": w[f"{i}.up.weight"], "bias": w[f"{i}.up.bias"]})
        act = d.call("Functional.gelu", _gelu, [up])
        return d.call("Functional.linear", _linear, [act], {"weight": w[f"{i}.down.weight"],
                                                             "bias": w[f"{i}.down.bias"]})

    def block(i: int, h: np.ndarray) -> np.ndarray:
        n1 = d.call("Functional.layer_norm", _layer_norm, [h], {"weight": w[f"{i}.ln1.weight"],
                                                                 "bias": w[f"{i}.ln1.bias"]})
        a = d.module(f"layers.{i}.attn", "Attention", lambda t: attention(i, t), n1)
        h = d.call("Tensor.add", lambda s, t: s + t, [h, a])
        n2 = d.call("Functional.layer_norm", _layer_norm, [h], {"weight": w[f"{i}.ln2.weight"],
                                                                 "bias": w[f"{i}.ln2.bias"]})
        m = d.module(f"layers.{i}.mlp", "MLP", lambda t: mlp(i, t), n2)
        return d.call("Tensor.add", lambda s, t: s + t, [h, m])

    h = x
    for i in range(LAYERS):
        h = d.module(f"layers.{i}", "Block", partial(block, i), h)
    d.close()


def write(root: str, *, ranks: int = 4, steps: int = 2, seed: int = 2026, fault_rank: int | None = None,
          seq: int = SEQ, hidden: int = HIDDEN, ffn: int = FFN) -> None:
    """Every step of every rank under `root` (step{s}/rank{r}/); the side under test when
    `fault_rank` is given (bfloat16 outputs everywhere, the attention fault on that rank). Larger
    `seq`, `hidden`, `ffn` make a dump for benchmarks."""
    w = _weights(seed, hidden, ffn)
    for step in range(steps):
        for rank in range(ranks):
            x = np.random.default_rng([seed, step, rank]).standard_normal((seq, hidden)).astype(np.float32)
            run_rank(os.path.join(root, f"step{step}", f"rank{rank}"), w, x, under_test=fault_rank is not None,
                     faulty=rank == fault_rank)
