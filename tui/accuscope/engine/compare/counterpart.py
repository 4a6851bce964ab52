"""The golden tensors one NPU tensor may be paired with by hand, best first: the app's counterpart
picker lists them, and the one picked is saved in the task's pairs.yaml (crossmap.decide:
`npu call:input:1: golden call:input:2`), which the next run reads.

Ranked in tiers, then by distance in execution order from the call the tensor is (or its call's other
tensors are) paired with, then in execution order:

- `same call`: a tensor of the golden call paired with this tensor, or with another tensor of its call
  (those alike in shape and dtype first);
- `shape+dtype`: the same shape and dtype (dtype names compared without a framework's prefix:
  `torch.float32` is `float32` is MindSpore's `Float32`);
- `shape`: the same shape;
- `size`: as many elements (a reshaped or transposed counterpart);
- the rest.

`narrowed` keeps those whose name holds every word of a filter text (case-insensitive).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from accuscope.engine.compare.pair import Pair
from accuscope.engine.sources.tensor import Tensor

SAME_CALL, SHAPE_DTYPE, SHAPE, SIZE, OTHER = "same call", "shape+dtype", "shape", "size", ""
TIERS = (SAME_CALL, SHAPE_DTYPE, SHAPE, SIZE, OTHER)


@dataclass(frozen=True)
class Candidate:
    """One golden tensor the NPU tensor may be paired with, and why it ranks where it does."""

    tensor: Tensor
    match: str  # one of TIERS
    current: bool = False  # the tensor's counterpart now

    @property
    def name(self) -> str:
        """`call:input:1`, as pairs.yaml names a golden tensor."""
        return self.tensor.name

    @property
    def shape_text(self) -> str:
        return "x".join(str(d) for d in self.tensor.shape) if self.tensor.shape else "scalar"

    @property
    def dtype_text(self) -> str:
        return dtype_of(self.tensor)


def dtype_of(t: Tensor) -> str:
    """The dtype's plain name: numpy's, else the dump's without a framework prefix, lower case (a value's
    type as written: `int`, not msprobe.dtype_name's `int32`)."""
    if t.dtype is not None:
        return str(t.dtype)
    return t.dtype_name.rsplit(".", 1)[-1].lower()


def pair_of(pairs: Sequence[Pair], tensor_name: str) -> Pair | None:
    """The pair of the NPU tensor named `call:input:1` (None when the comparison has no such tensor)."""
    for p in pairs:
        if p.npu.name == tensor_name:
            return p
    return None


def anchors(pairs: Sequence[Pair], npu: Pair) -> list[str]:
    """The golden calls `npu`'s tensor is paired with, then those its call's other tensors are, in order."""
    found: list[str] = []
    if npu.golden is not None:
        found.append(npu.golden.op)
    call = npu.npu.op
    for p in pairs:
        if p.npu.op == call and p.golden is not None and p.golden.op not in found:
            found.append(p.golden.op)
    return found


def _tier(npu: Tensor, g: Tensor, calls: dict[str, int]) -> int:
    if g.op in calls:
        return 0
    return _likeness(npu, g)


def _likeness(npu: Tensor, g: Tensor) -> int:
    """1 same shape and dtype, 2 same shape, 3 as many elements, 4 none of these."""
    if g.shape == npu.shape:
        return 1 if dtype_of(g) == dtype_of(npu) else 2
    if g.value is None and npu.value is None and math.prod(g.shape) == math.prod(npu.shape):
        return 3
    return 4


def candidates(pairs: Sequence[Pair], golden: Sequence[Tensor], tensor_name: str) -> list[Candidate]:
    """The golden tensors (`golden`: the golden side's, in execution order) ranked for the NPU tensor named
    `tensor_name` (`call:io:k`) among the comparison's `pairs` (see the module docstring); [] when no pair
    has that tensor."""
    mine = pair_of(pairs, tensor_name)
    if mine is None:
        return []
    calls = anchors(pairs, mine)
    first: dict[str, int] = {}
    for k, g in enumerate(golden):
        first.setdefault(g.op, k)
    rank = {c: k for k, c in enumerate(calls)}  # also the set of anchor calls
    home = min((first[c] for c in calls if c in first), default=None)
    current = id(mine.golden) if mine.golden is not None else None
    keyed = []
    for k, g in enumerate(golden):
        tier = _tier(mine.npu, g, rank)
        if tier == 0:  # the calls in order, each call's tensors most alike first
            key = (0, rank[g.op], _likeness(mine.npu, g), k)
        else:
            key = (tier, abs(k - home) if home is not None else 0, 0, k)
        keyed.append((key, Candidate(g, TIERS[tier], id(g) == current)))
    keyed.sort(key=lambda item: item[0])
    return [c for _, c in keyed]


def narrowed(found: Sequence[Candidate], text: str) -> list[Candidate]:
    """Those of `found` whose name (or shape, dtype) holds every word of `text`, case-insensitive; all of
    them for an empty text."""
    words = text.lower().split()
    if not words:
        return list(found)
    return [c for c in found
            if all(w in f"{c.name} {c.shape_text} {c.dtype_text}".lower() for w in words)]
