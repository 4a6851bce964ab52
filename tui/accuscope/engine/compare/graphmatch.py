"""Structural pairing of two sides that carry their models (`--match structure` on an ONNX, LiteRT or
OpenVINO IR dump against another): where a conversion renamed every tensor (the TFLite converter against
tf2onnx, onnx2tf), the two graphs are walked together from their inputs in execution order and each op
pairs with the one of the other graph that computes the same kind of op from the same (already paired)
inputs.

- The ops are read through a small cross-runtime table (KINDS): `Conv` / `CONV_2D` / `DEPTHWISE_CONV_2D`
  / `Convolution` / `GroupConvolution` are one `conv`, `MatMul` / `Gemm` / `FULLY_CONNECTED` / `MatMul`
  one `matmul`, `Relu` / `RELU` / `ReLU` one `relu`, ... Ops that only move values (`Transpose` a converter
  inserts for NHWC against NCHW, `Reshape` / `RESHAPE` / `Flatten`, a QUANTIZE / DEQUANTIZE or Cast) are
  walked through (PASS); ops computing a shape (`SHAPE`, `STRIDED_SLICE` of a shape, integer tensors)
  carry no activation.
- An activation a TFLite op holds (`fused_activation_function`, tflitegraph's FUSED_ACTIVATION: a
  `CONV_2D` with RELU) is two ops here: the op itself (its output is never observed) and the activation
  (the op's real output). The reference's separate `Conv` then pairs with the first (its output is named
  `fused N:1`) and its `Relu` with the second, and the next op's input is the `Relu`'s output.
- A candidate must have the same kind, the same paired inputs and the same elements (shape up to layout).
  Where one op has several candidates (two branches alike), values decide: the candidate whose values
  agree (cosine at AGREE, after the layout move) is taken and one whose values disagree is not; a single
  candidate is taken on structure alone, without reading a tensor (a fault in that op must stay paired to
  be found, and it is what the verdict then judges).
  Where no value can be read (a fused op's own part against another), the first in execution order.
- What one converter folded and the other kept is walked over, either way: a BatchNormalization left as a
  Mul / Add of weights after a convolution (FOLDED: the convolution's output is the Mul's), a Pad before
  one (PADS: done inside it). Any other op of the candidate without counterpart hands its first input's
  pairing on to its users, so one extra op does not end the walk.

What is left is named as leftovers.py names it: `absorbed 1:0` (an op that only moves values or computes a
shape), `fused N:1` (an op the other side fused or folded, as above), `no counterpart`.
"""
# lazy: engine.compare.repair, engine.graphs.modulescope, engine.sources.layout
from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING

from accuscope.engine.compare.leftovers import ABSORBED, FUSED, NONE, Account, Left
from accuscope.engine.compare.pair import AGREE, Pair
from accuscope.engine.graphs.optypes import op_kind
from accuscope.engine.graphs.tflitegraph import FUSED_ACTIVATION
from accuscope.engine.sources.tensor import OUTPUT, Tensor, TensorError

if TYPE_CHECKING:
    from accuscope.engine.graphs.graph import Graph, Node
    from accuscope.engine.graphs.modulescope import ModuleOutputs
    from accuscope.engine.sides.side import Side
    from accuscope.engine.sources.oprecord import OpRecord

STRUCTURE = "structure"  # the rung's name, as crossmap's
PRE = "#before-activation"  # the key of a fused op's own output (never observed)
CHAIN = 4  # pass-through ops walked from a paired tensor to one of the same shape
WINDOW = 8  # reference ops looked through, and candidates read, for an op no op of its kind matches
_TABLE = {
    "conv": "Conv CONV_2D DEPTHWISE_CONV_2D Convolution GroupConvolution CONV_3D",
    "deconv": "ConvTranspose TRANSPOSE_CONV ConvolutionBackpropData GroupConvolutionBackpropData",
    "matmul": "MatMul Gemm FULLY_CONNECTED BATCH_MATMUL FullyConnected",
    "relu": "Relu RELU ReLU", "clip": "Clip RELU6 RELU_N1_TO_1 Clamp Relu6", "tanh": "Tanh TANH",
    "sigmoid": "Sigmoid LOGISTIC", "leakyrelu": "LeakyRelu LEAKY_RELU", "prelu": "PRelu PRELU",
    "hardswish": "HardSwish HARD_SWISH HSwish", "hardsigmoid": "HardSigmoid", "gelu": "Gelu GELU", "elu": "Elu ELU",
    "add": "Add ADD Sum ADD_N", "sub": "Sub SUB Subtract", "mul": "Mul MUL Multiply", "div": "Div DIV Divide",
    "max": "Max MAXIMUM Maximum", "min": "Min MINIMUM Minimum", "pow": "Pow POW Power",
    "sqrt": "Sqrt SQRT", "rsqrt": "RSQRT", "exp": "Exp EXP", "log": "Log LOG", "abs": "Abs ABS", "neg": "Neg NEG",
    "softmax": "Softmax SOFTMAX SoftMax", "logsoftmax": "LogSoftmax LOG_SOFTMAX",
    "avgpool": "AveragePool AVERAGE_POOL_2D AvgPool", "maxpool": "MaxPool MAX_POOL_2D",
    "mean": "GlobalAveragePool ReduceMean MEAN", "sum": "ReduceSum SUM", "reducemax": "ReduceMax REDUCE_MAX",
    "concat": "Concat CONCATENATION", "pad": "Pad PAD PADV2 MIRROR_PAD",
    "resize": "Resize RESIZE_BILINEAR RESIZE_NEAREST_NEIGHBOR Interpolate Upsample",
    "batchnorm": "BatchNormalization", "layernorm": "LayerNormalization MVN",
    "slice": "Slice SLICE STRIDED_SLICE StridedSlice", "split": "Split SPLIT SPLIT_V VariadicSplit",
    "gather": "Gather GATHER", "where": "Where SELECT SELECT_V2 Select",
}
KINDS = {t: kind for kind, types in _TABLE.items() for t in types.split()}
# ops that only move values (or put them on a grid and back): walked through, never paired on their own
PASS = frozenset("""Transpose Reshape Flatten Squeeze Unsqueeze Identity Dropout Cast QuantizeLinear DequantizeLinear
    TRANSPOSE RESHAPE SQUEEZE EXPAND_DIMS QUANTIZE DEQUANTIZE CAST Convert FakeQuantize ConvertLike Result""".split())
SHAPE_OPS = frozenset("Shape SHAPE ShapeOf PACK Range RANGE ConstantOfShape".split())
FOLDED = frozenset({"mul", "add", "sub", "div", "batchnorm"})  # of one activation and weights: folded by converters
PADS = frozenset({"pad"})  # done inside the convolution or pooling after them
ACTIVATION_KIND = {"RELU": "relu", "RELU6": "clip", "RELU_N1_TO_1": "clip", "TANH": "tanh"}
_INTEGERS = ("int", "uint", "bool")


def kind_of(op_type: str) -> str:
    """The op's kind across runtimes (KINDS), else its own type without a dialect prefix."""
    own = op_kind(op_type)
    return KINDS.get(own, own)


@dataclass(eq=False)
class _Op:
    """One op of a graph's skeleton: a compute op (or a fused op's own part), its activation inputs as
    anchors (the tensor of the compute op or graph input each value comes from) and the tensor it makes."""

    kind: str
    node: Node
    key: str  # its output's anchor: the tensor name, or `{tensor}#before-activation`
    inputs: list[str]
    shape: tuple | None
    taken: bool = False


@dataclass
class _Skeleton:
    ops: list[_Op]
    source: dict[str, str]  # a tensor -> its anchor (itself, or through pass-through ops)
    graph: Graph
    by_inputs: dict[tuple[str, ...], list[_Op]] = field(default_factory=dict)
    users: dict[str, list[_Op]] = field(default_factory=dict)  # an anchor -> the ops taking it
    by_key: dict[str, _Op] = field(default_factory=dict)

    def anchor(self, tensor: str) -> str | None:
        return self.source.get(tensor)


def _is_meta(node: Node, graph: Graph, meta: set[str]) -> bool:
    """A node computing a shape (SHAPE, its STRIDED_SLICE, PACK): integer outputs, or inputs all shapes."""
    if op_kind(node.type) in SHAPE_OPS:
        return True
    live = [t for t in node.inputs if t and t not in graph.weights]
    if live and all(t in meta for t in live):
        return True
    if op_kind(node.type) in PASS or any(key.endswith(" quantization") for key in node.attrs):
        return False  # a quantized activation (an int8 .tflite's, tflitegraph's attrs) or put on its grid
    dtypes = [d for d in node.output_dtypes if d]
    return bool(dtypes) and all(d.startswith(_INTEGERS) for d in dtypes)


def skeleton(graph: Graph) -> _Skeleton:
    """The graph's compute ops in execution order, each with its activation inputs' anchors."""
    source = {t: t for t in graph.inputs}
    meta: set[str] = set()
    ops: list[_Op] = []
    for node in graph.nodes:
        if _is_meta(node, graph, meta):
            meta.update(node.outputs)
            continue
        live = [source[t] for t in node.inputs if t in source and t not in meta]
        own = op_kind(node.type)
        if own in PASS:
            if live and node.outputs:
                source[node.outputs[0]] = live[0]
            continue
        kind = kind_of(node.type)
        activation = ACTIVATION_KIND.get(str(node.attrs.get(FUSED_ACTIVATION, "")))
        shape = node.output_shapes[0] if node.output_shapes else None
        source.update((out, out) for out in node.outputs)
        if not node.outputs:
            continue
        if activation is not None:  # the op, then its activation: two ops of the other graph
            pre = node.outputs[0] + PRE
            ops.append(_Op(kind, node, pre, live, shape))
            ops.append(_Op(activation, node, node.outputs[0], [pre], shape))
        else:
            ops.append(_Op(kind, node, node.outputs[0], live, shape))
            for j, out in enumerate(node.outputs[1:], 1):  # a Split's further outputs: by position
                ops.append(_Op(f"{kind}:{j}", node, out, live, node.output_shapes[j] if j < len(node.output_shapes) else None))
    found = _Skeleton(ops, source, graph)
    for op in ops:
        found.by_inputs.setdefault(tuple(sorted(op.inputs)), []).append(op)
        found.by_key[op.key] = op
        for a in dict.fromkeys(op.inputs):
            found.users.setdefault(a, []).append(op)
    return found


def _elements(shape: tuple | None) -> tuple | None:
    """A shape up to layout: its dims above 1, sorted; None where a dim is unknown."""
    if shape is None or any(d is None for d in shape[1:]):
        return None
    return tuple(sorted(d for d in shape[1:] if d != 1))


def _alike(a: tuple | None, b: tuple | None) -> bool:
    ea, eb = _elements(a), _elements(b)
    return ea is None or eb is None or ea == eb


@dataclass
class Matched:
    """What the walk found: npu anchor -> golden anchor (real pairs), the op pairs, and the golden ops
    paired with a fused op's own part (fused into the candidate's op)."""

    image: dict[str, str] = field(default_factory=dict)
    ops: list[tuple[_Op, _Op]] = field(default_factory=list)
    # golden node -> (the candidate's node it is fused into, how: its activation fused, folded, padding inside)
    fused: dict[str, tuple[str, str]] = field(default_factory=dict)
    fused_npu: dict[str, tuple[str, str]] = field(default_factory=dict)  # the candidate's node -> the golden node's
    by_values: int = 0  # op pairs chosen among several candidates by their values
    by_order: int = 0  # ... by their execution order, where no value could be read
    rejected: list[tuple[str, str, float]] = field(default_factory=list)  # (npu op, golden op, cos) not taken


def match(npu: _Skeleton, golden: _Skeleton, agree: Callable[[str, str], float] | None = None) -> Matched:
    """Walk both skeletons from the graph inputs (paired by position) in the candidate's execution order."""
    found = Matched()
    activation_of = {o.inputs[0]: o for o in npu.ops if len(o.inputs) == 1 and o.inputs[0].endswith(PRE)}

    def _observed(op: _Op, g: _Op) -> tuple[str, str] | None:
        """The tensors whose values say whether `g` is `op`'s counterpart: their outputs; for the candidate's
        fused op's own part (never observed), its activation's output and that of `g`'s activation."""
        if g.key.endswith(PRE):
            return None
        if not op.key.endswith(PRE):
            return op.key, g.key
        act = activation_of.get(op.key)
        after = [h for h in golden.by_inputs.get((g.key,), ()) if act is not None and h.kind == act.kind]
        return (act.key, after[0].key) if act is not None and len(after) == 1 else None

    seen: dict[str, str] = {}  # every npu anchor's golden anchor, a skipped op's its first input's
    ins_n = [t for t in npu.graph.inputs if t not in npu.graph.weights]
    ins_g = [t for t in golden.graph.inputs if t not in golden.graph.weights]
    if len(ins_n) == len(ins_g):
        for a, b in zip(ins_n, ins_g):
            seen[a] = found.image[a] = b
    producer = {o.key: o.node.name for o in npu.ops}
    golden_name = {o.key: o.node.name for o in golden.ops}

    def candidates(op: _Op, want: list[str]) -> list[_Op]:
        return [g for g in golden.by_inputs.get(tuple(sorted(want)), ()) if not g.taken and g.kind == op.kind
                and _alike(op.shape, g.shape)]

    def ahead(w: str) -> list[tuple[str, list[_Op], str]]:
        """`w`, then each tensor the reference makes of it by ops the candidate folded into the op before them
        (a BatchNormalization's Mul and Add of weights) or does inside the op after them (a Pad): (tensor, the
        ops that made it, the tensor the op before stands for)."""
        out: list[tuple[str, list[_Op], str]] = [(w, [], w)]
        for _ in range(CHAIN):
            nxt = [g for g in golden.by_inputs.get((w,), ()) if not g.taken and g.kind in FOLDED | PADS]
            if len(nxt) != 1:
                break
            w = nxt[0].key
            out.append((w, out[-1][1] + nxt, out[-1][2] if nxt[0].kind in PADS else w))
            if nxt[0].kind in PADS:  # done inside the op after it: the chain ends there
                break
        return out

    for op in npu.ops:
        wanted = [seen.get(a) for a in op.inputs]
        if not wanted or any(w is None for w in wanted):
            continue
        want = [w for w in wanted if w is not None]
        options = candidates(op, want)
        advanced: tuple[tuple[str, list[_Op], str], ...] | None = None
        if not options and len(want) <= 3:  # the reference computes with more ops: a folded BatchNormalization
            for combo in itertools.product(*(ahead(w) for w in want)):
                if any(passed for _, passed, _ in combo) and (options := candidates(op, [a for a, _, _ in combo])):
                    advanced = combo
                    break
        chosen = options[0] if len(options) == 1 else None
        if len(options) > 1 and agree is not None:
            scored = [(agree(*keys), -k, g) for k, g in enumerate(options) if (keys := _observed(op, g)) is not None]
            scored = [s for s in scored if s[0] == s[0]]
            best = max(scored, default=None, key=lambda s: (s[0], s[1]))
            for cos, _, g in scored:
                if cos < AGREE:
                    found.rejected.append((op.node.name, g.node.name, cos))
            if best is not None and best[0] >= AGREE:
                chosen = best[2]
                found.by_values += 1
            elif not scored:  # no value to read on either side (a fused op's part against another): the order
                chosen = options[0]
                found.by_order += 1
        elif len(options) > 1:
            chosen = options[0]
        if chosen is None and agree is not None and not op.key.endswith(PRE) and len(want) == 1:
            chosen, advanced = _by_values(op, want[0], golden, agree, ahead)
            if chosen is not None:
                found.by_values += 1
                a = op.inputs[0]  # the op before: its pair disagrees where this one agrees: it holds part of this
                if a in found.image and not advanced and agree(a, found.image[a]) < AGREE:
                    # the reference's ops of weights after it, one of whose values its own are (onnx2tf folds a
                    # MobileOne block's scale and shift into the depthwise conv): it stands for that one
                    later = next((st for st in ahead(found.image[a])[1:] if agree(a, st[0]) >= AGREE), None)
                    if later is not None:
                        found.fused[golden_name.get(found.image[a], "?")] = (
                            producer.get(a, a), "folded the ops after it into its weights (its output is theirs)")
                        for g in later[1]:
                            g.taken = True
                            found.fused[g.node.name] = (producer.get(a, a), "folded it into its weights")
                        found.image[a] = seen[a] = later[0]
                        chosen, _ = _by_values(op, later[0], golden, agree, ahead)  # from there on
                        want = [later[0]]
                if chosen is not None and a in found.image and not advanced and agree(a, found.image[a]) < AGREE:
                    was = golden_name.get(found.image.pop(a), "?")
                    found.fused_npu[producer.get(a, a)] = (was, "and the next one share it (the candidate folded part "
                                                                "of the next op into its weights: no tensor of the "
                                                                "reference's holds its output)")
                    found.fused[was] = (producer.get(a, a), "holds it and part of the next op (folded into its weights)")
        if chosen is None:
            seen[op.key] = want[0]  # the walk goes on through it
            if op.kind in FOLDED | PADS and len(op.inputs) == 1:  # one the reference folded or does inside an op
                _folded_by_reference(found, op, producer, golden_name.get(want[0], want[0]))
            continue
        for a, (_, passed, stands) in zip(op.inputs, advanced or ()):
            if passed:  # the candidate's op before holds the folded ones (its output is theirs), this op the Pad
                seen[a] = stands
                if a in found.image and found.image[a] != stands:
                    found.fused[golden_name.get(found.image[a], "?")] = (
                        producer.get(a, a), "folded the ops after it into its weights (its output is theirs)")
                    found.image[a] = stands
                for g in passed:
                    g.taken = True
                    found.fused[g.node.name] = (op.node.name, "does it inside (its padding)") if g.kind in PADS \
                        else (producer.get(a, a), "folded it into its weights")
        for g in _between(chosen, advanced[0][0] if advanced else want[0], golden) if chosen.kind != op.kind else ():
            g.taken = True  # the ops the candidate's one op computes (a HardSwish as Add, Clip, Mul, Div)
            found.fused[g.node.name] = (op.node.name, "computes it inside one op")
        chosen.taken = True
        seen[op.key] = chosen.key
        found.ops.append((op, chosen))
        if agree is not None and not op.key.endswith(PRE) and not chosen.key.endswith(PRE):
            _inside_after(found, op, chosen, ahead(chosen.key)[1:], agree, seen)
        if op.key.endswith(PRE) or chosen.key.endswith(PRE):
            if not chosen.key.endswith(PRE):
                found.fused[chosen.node.name] = (op.node.name, "runs it with its activation fused")
            elif not op.key.endswith(PRE):
                found.fused_npu[op.node.name] = (chosen.node.name, "runs it with its activation fused")
            continue
        found.image[op.key] = seen[op.key]  # chosen, or the op after it whose work it does inside
    return found


def _inside_after(found: Matched, op: _Op, chosen: _Op, after: list[tuple[str, list[_Op], str]],
                  agree: Callable[[str, str], float], seen: dict[str, str]) -> None:
    """The candidate's op folded into its weights the reference's ops of weights after its counterpart (a
    TFLite FULLY_CONNECTED its bias, which OpenVINO's Gemm leaves to an Add after a MatMul; onnx2tf a
    block's scale and shift): where its output disagrees with the counterpart's and agrees with one of
    those ops', it stands for that one and the ops up to it are named fused, as where the op after it
    tells (match). Values are read only where such ops follow (`after` empty: nothing read)."""
    if not after or agree(op.key, chosen.key) >= AGREE:
        return
    later = next((st for st in after if agree(op.key, st[0]) >= AGREE), None)
    if later is None:
        return
    found.fused[chosen.node.name] = (op.node.name, "folded the ops after it into its weights (its output is theirs)")
    for g in later[1]:
        g.taken = True
        found.fused[g.node.name] = (op.node.name, "folded it into its weights")
    seen[op.key] = later[0]


def _by_values(op: _Op, want: str, golden: _Skeleton, agree: Callable[[str, str], float],
               ahead: Callable[[str], list[tuple[str, list[_Op], str]]]
               ) -> tuple[_Op | None, tuple[tuple[str, list[_Op], str], ...] | None]:
    """An op no reference op of its kind matches (a HARD_SWISH the reference computes as Add, Clip, Mul, Div):
    the reference op downstream of its input, at most WINDOW ops on, of its shape, whose values agree (the
    best at AGREE), after the BatchNormalizations the op before folded. (that op, the input's advance)"""
    steps = [st for st in ahead(want) if all(g.kind == "batchnorm" for g in st[1])]
    start, found = steps[-1][0], []
    frontier, seen = [start], {start}
    for _ in range(WINDOW):
        nxt = []
        for a in frontier:
            for g in golden.users.get(a, ()):
                if g.taken or g.key in seen or g.key.endswith(PRE):
                    continue
                seen.add(g.key)
                nxt.append(g.key)
                if _alike(op.shape, g.shape) and _elements(g.shape) is not None:
                    found.append(g)
        frontier = nxt
    scored = [(cos, -k, g) for k, g in enumerate(found[:WINDOW]) if (cos := agree(op.key, g.key)) == cos]
    best = max(scored, default=None, key=lambda s: (s[0], s[1]))
    if best is None or best[0] < AGREE:
        return None, None
    return best[2], (steps[-1],) if steps[-1][1] else None


def _between(chosen: _Op, start: str, golden: _Skeleton) -> list[_Op]:
    """The untaken reference ops on the paths from `start` to `chosen` (chosen excluded)."""
    out, stack, seen = [], list(chosen.inputs), set()
    while stack:
        a = stack.pop()
        if a == start or a in seen:
            continue
        seen.add(a)
        g = golden.by_key.get(a)
        if g is None or g.taken:
            continue
        out.append(g)
        stack.extend(g.inputs)
    return out


def _folded_by_reference(found: Matched, op: _Op, producer: dict[str, str], golden_op: str) -> None:
    """A Mul / Add of weights (or a Pad) of the candidate's that the reference does inside its op: the
    reference op's output is this one's (what the op before it made is fused N:1), a Pad's the op after's."""
    a = op.inputs[0]
    if op.kind in PADS:
        found.fused_npu[op.node.name] = ("op after it", "does it inside (its padding)")
        return
    if a in found.image:  # the op before it was paired: its output stands for this one's now
        found.image[op.key] = found.image.pop(a)
        found.fused_npu[producer.get(a, a)] = (golden_op, f"folded its {op.node.type} into its weights")
    else:
        found.fused_npu[op.node.name] = (golden_op, "folded it into its weights")


# ------------------------------------------------------------------ pairing the dumps' tensors


def complete(npu: Side, golden: Side, pairs: list[Pair]) -> tuple[list[Pair], Account, list[str], dict]:
    """The tensors of `pairs` no rule paired, paired structurally (how `structure`); every op left named.
    (pairs, the ladder's account, the summary's notes, `--json`'s `pairing.structure`: the op coverage)"""
    from accuscope.engine.sources.layout import in_layout_of
    if npu.graph is None or golden.graph is None:
        raise ValueError("both sides need their models")
    sk_n, sk_g = skeleton(npu.graph), skeleton(golden.graph)
    for side, sk in ((npu, sk_n), (golden, sk_g)):  # shapes a dynamic model leaves open, as the dump holds them
        for op in sk.ops:
            if _elements(op.shape) is None and not op.key.endswith(PRE) and (t := side.find_tensor(op.key)) is not None:
                op.shape = t.shape

    def tensor_of(side: Side, name: str) -> Tensor | None:
        return side.find_tensor(name)

    def agree(n_key: str, g_key: str) -> float:
        from accuscope.engine.compare.repair import similarity
        a, b = tensor_of(npu, n_key), tensor_of(golden, g_key)
        if a is None or b is None:
            return float("nan")
        try:  # the cosine and the euclidean similarity (a scale apart: a HardSwish's Mul before its Div by 6)
            return min(similarity(in_layout_of(a, b.shape).load(), b.load()))
        except (TensorError, OSError, ValueError):  # an unreadable tensor tells nothing: its row will say why
            return float("nan")

    found = match(sk_n, sk_g, agree)
    out: list[Pair] = []
    for p in pairs:
        if p.golden is None:
            name = _value(p, npu.graph)
            g = _counterpart(name, found, sk_n, sk_g, golden, p.npu) if name else None
            if g is not None:
                p = Pair(p.npu, g, p.op, g.op, STRUCTURE)
        out.append(p)
    account = _account(out, npu, golden, found)
    computed = {node.name for p in out if p.golden is not None and p.npu.io == OUTPUT
                and (node := _node(p.op, npu.graph)) is not None}  # (a hooked module: its scope's node)
    nodes = npu.graph.nodes
    moving = sum(1 for x in account.left if x.side == "npu" and x.outcome == ABSORBED)
    meta = {"ops_paired": sum(1 for n in nodes if n.name in computed), "ops": len(nodes), "op_pairs": len(found.ops),
            "fused": account.counts()[FUSED], "by_values": found.by_values, "by_order": found.by_order,
            "not_taken": [{"npu": a, "golden": b, "cos": round(c, 6)} for a, b, c in found.rejected]}
    notes = [f"structure: paired {meta['ops_paired']} of {len(nodes)} candidate ops by "
             f"their outputs ({len(found.ops)} op pairs walked from the inputs"
             + (f", {fused_g} reference ops fused into the candidate's" if (fused_g := account.counts("golden")[FUSED])
                else "")
             + (f", {fused_n} candidate ops fused into the reference's" if (fused_n := account.counts("npu")[FUSED])
                else "")
             + (f", {found.by_values} found by their values (among alike candidates, or where no op of the kind "
                "matched)" if found.by_values else "")
             + (f", {found.by_order} by execution order (no value to read)" if found.by_order else "")
             + (f"; {moving} only move values or compute shapes" if moving else "") + ")"
             + ("; not taken, values disagree: " + ", ".join(f"{a}~{b} (cos {c:.3f})" for a, b, c in found.rejected[:3])
                if found.rejected else "")]
    for side, who in ((npu, "candidate"), (golden, "reference")):
        modules = _modules(side.ops, side.graph)  # type: ignore[arg-type]  # both carry graphs here
        if modules is None:
            continue
        names = [op.op_name for op in side.ops if op.op_name not in side.graph.inputs]  # type: ignore[union-attr]
        used = {p.op.op_name for p in out if p.golden is not None and p.npu.io == OUTPUT} if side is npu else \
            {p.golden.op for p in out if p.golden is not None and p.golden.io == OUTPUT}  # (a module: its output)
        paired = [n for n in names if n in used]
        meta[f"{'npu' if side is npu else 'golden'}_modules"] = {
            "paired": len(paired), "modules": len(names), "folded": sorted(modules.folded), "same": sorted(modules.same)}
        notes.append(f"modules: paired {len(paired)} of the {who}'s {len(names)} hooked modules through its "
                     f"export's module paths (of those left, {len(modules.folded)} folded by the export into the module "
                     f"after them, {len(modules.same)} holding a submodule's output, the other "
                     f"{len(names) - len(paired) - len(modules.folded) - len(modules.same)} named below)")
    return out, account, notes, meta


def _value(p: Pair, graph: Graph) -> str:
    """The candidate tensor's graph tensor name."""
    if p.npu.tensor_name:
        return p.npu.tensor_name
    node = graph.node(p.op.op_name)
    if node is None:
        return p.op.op_name if p.op.op_name in graph.inputs else ""
    names = node.outputs if p.npu.io == OUTPUT else node.inputs
    return names[p.npu.index] if p.npu.index < len(names) else ""


def _counterpart(name: str, found: Matched, sk_n: _Skeleton, sk_g: _Skeleton, golden: Side,
                 t: Tensor) -> Tensor | None:
    from accuscope.engine.sources.layout import in_layout_of
    """The golden tensor of a candidate graph tensor: its anchor's image, through pass-through ops where
    the candidate's tensor is a moved one (a RESHAPE's output: the golden tensor of the same shape
    downstream of the image, through the golden side's own pass-through ops)."""
    anchor = sk_n.anchor(name)
    image = found.image.get(anchor) if anchor is not None else None
    if image is None:
        return None
    if anchor == name:
        return golden.find_tensor(image)
    want = _elements(t.shape)
    if t.shape is not None and want is not None:  # the image itself, or a Transpose of it (NHWC to NCHW)
        g = golden.find_tensor(image)
        if g is not None and g.shape is not None and (tuple(g.shape) == tuple(t.shape) or len(g.shape) == len(
                t.shape) == 4 and _elements(g.shape) == want and in_layout_of(t, g.shape) is not t):
            return g  # a QUANTIZE, DEQUANTIZE or Cast of it, or a Transpose and back: the same values
    frontier = [image]
    for _ in range(CHAIN):
        nxt = []
        for tensor in frontier:
            for node, _i in sk_g.graph.consumers(tensor):
                if op_kind(node.type) in PASS and node.outputs:
                    out = node.outputs[0]
                    g = golden.find_tensor(out)
                    if g is not None and want is not None and _elements(g.shape) == want \
                            and tuple(g.shape) == tuple(t.shape):
                        return g
                    nxt.append(out)
        frontier = nxt
    return None


def _account(pairs: list[Pair], npu: Side, golden: Side, found: Matched) -> Account:
    """The rungs' counts and every op left on either side, named."""
    rungs: dict[str, int] = {}
    for p in pairs:
        if p.golden is not None:
            rungs[p.how] = rungs.get(p.how, 0) + 1
    left: list[Left] = []
    paired = {p.op.op_name for p in pairs if p.golden is not None}
    assert npu.graph is not None and golden.graph is not None
    for side, graph, ops, who in (("npu", npu.graph, npu.ops, "candidate"), ("golden", golden.graph, golden.ops,
                                                                              "reference")):
        used = paired if side == "npu" else {p.golden.op for p in pairs if p.golden is not None}
        modules = _modules(ops, graph)
        for df in ops:
            name = df.op_name
            node = _node(df, graph)
            if name in used and not (side == "npu" and node is not None and node.name in found.fused_npu):
                continue  # (a fused op's: its output is the fused one's)
            if node is None and modules is not None and (after := modules.folded.get(name)):
                left.append(Left(name, side, FUSED, f"{FUSED} ({'1:2' if side == 'golden' else '2:1'} NPU:golden): "
                                 f"the export folds module {after} into module {name}: no tensor of it holds {name}'s "
                                 "own output", f"{FUSED}: the export folds the next module into it"))
                continue
            if node is None and modules is not None and (last := modules.same.get(name)):
                left.append(Left(name, side, ABSORBED, f"{ABSORBED}: module {name} holds the output of module {last} "
                                 "(its scope's last node)", f"{ABSORBED}: a module whose output is a submodule's"))
                continue
            if node is None:
                continue  # a network input: not an op
            own = op_kind(node.type)
            fused = (found.fused if side == "golden" else found.fused_npu).get(node.name)
            if fused is not None:
                other, (into, how) = "candidate" if side == "golden" else "reference", fused
                text = (f"{FUSED} ({'1:2' if side == 'golden' else '2:1'} NPU:golden): the {other}'s {into} {how}, "
                        f"{node.type} {name} included")
                left.append(Left(name, side, FUSED, text, f"{FUSED}: the {other}'s op {how}"))
            elif own in PASS or own in SHAPE_OPS or all((d or "").startswith(_INTEGERS) for d in node.output_dtypes):
                why = "computes a shape" if own in SHAPE_OPS or own not in PASS else "only moves values"
                left.append(Left(name, side, ABSORBED, f"{ABSORBED}: {node.type} {name} {why} (the {who}'s own)",
                                 f"{ABSORBED}: an op that {why}"))
            else:
                left.append(Left(name, side, NONE, f"{NONE}: no op of the other graph computes {node.type} {name}'s "
                                                   "kind from the same paired inputs", f"{NONE} (structure)"))
    return Account(rungs, left)


_CALLED = attrgetter("timestamp")


def _node(op: OpRecord, graph: Graph) -> Node | None:
    """The op's node: by name, or (a module of a folder of forward hooks, read through the model's export:
    modulescope.py) the producer of its output."""
    node = graph.node(op.op_name)
    if node is None and op.outputs and op.outputs[0].tensor_name:
        hit = graph.producer(op.outputs[0].tensor_name)
        node = hit[0] if hit is not None else None
    return node


def _modules(ops: list[OpRecord], graph: Graph) -> ModuleOutputs | None:
    """How a side's ops named by module path read through its graph (a torch.onnx export's scopes:
    modulescope.py), None where every op is a node or an input of the graph."""
    from accuscope.engine.graphs.modulescope import module_outputs
    names = [op.op_name for op in sorted(ops, key=_CALLED)  # in call order: a side lists its graph's nodes first
             if graph.node(op.op_name) is None and op.op_name not in graph.inputs]
    found = module_outputs(graph, names) if names else None
    return found if found is not None and (found.tensor or found.folded or found.same) else None


def structural_sides(npu: Side, golden: Side) -> bool:
    """Both sides carry a model this pairing reads (an ONNX, LiteRT or OpenVINO dump's own, a --model)."""
    return npu.graph is not None and golden.graph is not None and not npu.graph.is_device \
        and not golden.graph.is_device
