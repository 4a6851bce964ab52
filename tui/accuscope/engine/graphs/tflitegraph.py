"""A TFLite / LiteRT flatbuffer (`.tflite`) -> Graph, read without LiteRT: no ai-edge-litert needed to show,
inspect or pair it (running it does: runs/litertrun.py).

The file is a flatbuffer (schema.fbs, identifier `TFL3` at byte 4): a Model holds operator codes,
subgraphs and buffers; subgraph 0 is the network (the others are control-flow bodies, not shown).
Each of its tensors has a name, a type, a shape and, when quantized, its grid: `scale` and `zero_point`
(one each per tensor, or one per slice along `quantized_dimension`: per-axis), the real value being
`(q - zero_point) * scale`. Ops have no names in TFLite: an op is named by its type (the builtin
operator's name, `CONV_2D`, or a custom op's code) and its place among the ops of that type
(`CONV_2D_0`, `CONV_2D_1`, ... as TFLite's own analyzer counts them); its tensors keep the converter's
names, which its post-training quantizer keeps too (a float model and its int8 version name their
tensors alike: the pairing goes by them). Naming ops by an output tensor would give an int8 model's
closing DEQUANTIZE the float model's SOFTMAX name, and pair their inputs.
Tensors no op produces and no input is are weights (constants), and so are the outputs of ops computed
from weights alone (the DEQUANTIZE of fp16 weights): those ops are left out, as their tensors are
from a dump.

Every read is bounds-checked: a truncated or foreign file is a SourceError naming the byte.
"""
from __future__ import annotations

import struct
from pathlib import Path
from typing import NamedTuple

import numpy as np

from accuscope.engine.graphs.graph import Graph, Node, stable_topo_order, unique_names
from accuscope.engine.sources import kinds
from accuscope.engine.sources.tensor import SourceError

IDENTIFIER = b"TFL3"
# schema.fbs's BuiltinOperator, by value (LiteRT 2.3)
BUILTIN_OPS = """
    ADD AVERAGE_POOL_2D CONCATENATION CONV_2D DEPTHWISE_CONV_2D DEPTH_TO_SPACE DEQUANTIZE EMBEDDING_LOOKUP FLOOR
    FULLY_CONNECTED HASHTABLE_LOOKUP L2_NORMALIZATION L2_POOL_2D LOCAL_RESPONSE_NORMALIZATION LOGISTIC
    LSH_PROJECTION LSTM MAX_POOL_2D MUL RELU RELU_N1_TO_1 RELU6 RESHAPE RESIZE_BILINEAR RNN SOFTMAX SPACE_TO_DEPTH
    SVDF TANH CONCAT_EMBEDDINGS SKIP_GRAM CALL CUSTOM EMBEDDING_LOOKUP_SPARSE PAD UNIDIRECTIONAL_SEQUENCE_RNN
    GATHER BATCH_TO_SPACE_ND SPACE_TO_BATCH_ND TRANSPOSE MEAN SUB DIV SQUEEZE UNIDIRECTIONAL_SEQUENCE_LSTM
    STRIDED_SLICE BIDIRECTIONAL_SEQUENCE_RNN EXP TOPK_V2 SPLIT LOG_SOFTMAX DELEGATE BIDIRECTIONAL_SEQUENCE_LSTM
    CAST PRELU MAXIMUM ARG_MAX MINIMUM LESS NEG PADV2 GREATER GREATER_EQUAL LESS_EQUAL SELECT SLICE SIN
    TRANSPOSE_CONV SPARSE_TO_DENSE TILE EXPAND_DIMS EQUAL NOT_EQUAL LOG SUM SQRT RSQRT SHAPE POW ARG_MIN
    FAKE_QUANT REDUCE_PROD REDUCE_MAX PACK LOGICAL_OR ONE_HOT LOGICAL_AND LOGICAL_NOT UNPACK REDUCE_MIN FLOOR_DIV
    REDUCE_ANY SQUARE ZEROS_LIKE FILL FLOOR_MOD RANGE RESIZE_NEAREST_NEIGHBOR LEAKY_RELU SQUARED_DIFFERENCE
    MIRROR_PAD ABS SPLIT_V UNIQUE CEIL REVERSE_V2 ADD_N GATHER_ND COS WHERE RANK ELU REVERSE_SEQUENCE MATRIX_DIAG
    QUANTIZE MATRIX_SET_DIAG ROUND HARD_SWISH IF WHILE NON_MAX_SUPPRESSION_V4 NON_MAX_SUPPRESSION_V5 SCATTER_ND
    SELECT_V2 DENSIFY SEGMENT_SUM BATCH_MATMUL PLACEHOLDER_FOR_GREATER_OP_CODES CUMSUM CALL_ONCE BROADCAST_TO
    RFFT2D CONV_3D IMAG REAL COMPLEX_ABS HASHTABLE HASHTABLE_FIND HASHTABLE_IMPORT HASHTABLE_SIZE REDUCE_ALL
    CONV_3D_TRANSPOSE VAR_HANDLE READ_VARIABLE ASSIGN_VARIABLE BROADCAST_ARGS RANDOM_STANDARD_NORMAL BUCKETIZE
    RANDOM_UNIFORM MULTINOMIAL GELU DYNAMIC_UPDATE_SLICE RELU_0_TO_1 UNSORTED_SEGMENT_PROD UNSORTED_SEGMENT_MAX
    UNSORTED_SEGMENT_SUM ATAN2 UNSORTED_SEGMENT_MIN SIGN BITCAST BITWISE_XOR RIGHT_SHIFT STABLEHLO_LOGISTIC
    STABLEHLO_ADD STABLEHLO_DIVIDE STABLEHLO_MULTIPLY STABLEHLO_MAXIMUM STABLEHLO_RESHAPE STABLEHLO_CLAMP
    STABLEHLO_CONCATENATE STABLEHLO_BROADCAST_IN_DIM STABLEHLO_CONVOLUTION STABLEHLO_SLICE STABLEHLO_CUSTOM_CALL
    STABLEHLO_REDUCE STABLEHLO_ABS STABLEHLO_AND STABLEHLO_COSINE STABLEHLO_EXPONENTIAL STABLEHLO_FLOOR
    STABLEHLO_LOG STABLEHLO_MINIMUM STABLEHLO_NEGATE STABLEHLO_OR STABLEHLO_POWER STABLEHLO_REMAINDER
    STABLEHLO_RSQRT STABLEHLO_SELECT STABLEHLO_SUBTRACT STABLEHLO_TANH STABLEHLO_SCATTER STABLEHLO_COMPARE
    STABLEHLO_CONVERT STABLEHLO_DYNAMIC_SLICE STABLEHLO_DYNAMIC_UPDATE_SLICE STABLEHLO_PAD STABLEHLO_IOTA
    STABLEHLO_DOT_GENERAL STABLEHLO_REDUCE_WINDOW STABLEHLO_SORT STABLEHLO_WHILE STABLEHLO_GATHER
    STABLEHLO_TRANSPOSE DILATE STABLEHLO_RNG_BIT_GENERATOR REDUCE_WINDOW STABLEHLO_COMPOSITE STABLEHLO_SHIFT_LEFT
    STABLEHLO_CBRT STABLEHLO_CASE
""".split()
_CUSTOM = BUILTIN_OPS.index("CUSTOM")
# schema.fbs's TensorType, by value: the numpy dtype a tensor holds (None: none numpy holds as such)
TENSOR_TYPES = ("float32", "float16", "int32", "uint8", "int64", None, "bool", "int16", "complex64", "int8",
                "float64", "complex128", "uint64", None, None, "uint32", "uint16", "int4", "bfloat16", "int2",
                "uint4", "float8_e4m3fn", "float8_e5m2")


# schema.fbs: where an op's options table holds `fused_activation_function` (by op type), and its values
FUSED_ACTIVATION_FIELD = {"CONV_2D": 3, "DEPTHWISE_CONV_2D": 4, "TRANSPOSE_CONV": 3, "FULLY_CONNECTED": 0,
                          "AVERAGE_POOL_2D": 5, "MAX_POOL_2D": 5, "ADD": 0, "SUB": 0, "MUL": 0, "DIV": 0,
                          "CONCATENATION": 1}
ACTIVATIONS = (None, "RELU", "RELU_N1_TO_1", "RELU6", "TANH", "SIGN_BIT")
FUSED_ACTIVATION = "fused activation"  # the attribute naming it (a Node's attrs), where the op holds one


class Quantization(NamedTuple):
    """A tensor's grid: its real value is `(q - zero_point) * scale`, one (scale, zero point) for the
    tensor (`axis` None) or one per slice along `axis` (per-axis)."""

    scale: tuple[float, ...]
    zero_point: tuple[int, ...]
    axis: int | None

    def dequantize(self, q: np.ndarray) -> np.ndarray:
        """`q` read on this grid, as float32: the exact product rounded once, as LiteRT's reference
        DEQUANTIZE computes it (in double). For 8- and 16-bit integers float32 gives that value itself
        (q - zero_point is exact in float32 and the product of two float32 numbers is rounded once), at
        less than half float64's time (MobileNetV2 int8's 66 activations, 7M values: 19 -> 8 ms); wider ones go
        by float64."""
        narrow = q.dtype.itemsize <= 2
        scale: np.ndarray = np.asarray(self.scale, np.float32 if narrow else np.float64)
        zero: np.ndarray = np.asarray(self.zero_point, np.float32 if narrow else np.int64)
        if self.axis is not None:
            if not 0 <= self.axis < q.ndim or q.shape[self.axis] != scale.size:
                raise ValueError(f"{scale.size} scales along axis {self.axis} of a tensor shaped {list(q.shape)}")
            where = [1] * q.ndim
            where[self.axis] = scale.size
            scale, zero = scale.reshape(where), zero.reshape(where)
        if narrow:
            return (q.astype(np.float32) - zero) * scale
        return ((q.astype(np.int64) - zero) * scale).astype(np.float32)

    def quantize(self, x: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """Real values `x` put on this (per-tensor) grid as `dtype`, as LiteRT's reference QUANTIZE does:
        x / scale in float32, rounded half away from zero, plus the zero point, clamped to the type."""
        if self.axis is not None:
            raise ValueError(f"a per-axis grid (axis {self.axis}) quantizes no input")
        v = np.asarray(x, np.float32) / np.float32(self.scale[0])
        bits = np.iinfo(dtype)
        q = np.sign(v) * np.floor(np.abs(v) + np.float32(0.5)) + self.zero_point[0]
        return np.clip(q, bits.min, bits.max).astype(dtype)

    def describe(self) -> str:
        if self.axis is None:
            return f"scale {self.scale[0]:.6g} zero point {self.zero_point[0]}"
        return f"per-axis (axis {self.axis}, {len(self.scale)} scales)"

    def as_json(self) -> dict:
        return {"scale": list(self.scale), "zero_point": list(self.zero_point), "axis": self.axis}


class TensorInfo(NamedTuple):
    """One tensor of subgraph 0: its number (the interpreter's tensor index), id in the Graph, dtype,
    shape, grid."""

    number: int
    name: str
    dtype: str | None
    shape: tuple
    quantization: Quantization | None


class TFLite(NamedTuple):
    """A .tflite read: its Graph and subgraph 0's tensors by index (what runs/litertrun dumps)."""

    graph: Graph
    tensors: list[TensorInfo]


def sniff(head: bytes) -> bool:
    """The first bytes of a file: a flatbuffer whose identifier is TFLite's `TFL3`."""
    return len(head) >= 8 and head[4:8] == IDENTIFIER


class _Buffer:
    """A flatbuffer's tables, vectors and strings, every read checked against the file's bounds."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, fmt: str, at: int):
        """One value at byte `at` (struct format `fmt`), IndexError(at) outside the file."""
        if not 0 <= at <= len(self.data) - struct.calcsize("<" + fmt):
            raise IndexError(at)
        return struct.unpack_from("<" + fmt, self.data, at)[0]

    def u32(self, at: int) -> int:
        return self.read("I", at)

    def field(self, table: int, k: int) -> int:
        """The position of field `k` of the table at `table`, 0 where absent."""
        vtable = table - self.read("i", table)
        if 4 + 2 * k >= self.read("H", vtable):
            return 0
        off = self.read("H", vtable + 4 + 2 * k)
        return table + off if off else 0

    def scalar(self, table: int, k: int, fmt: str, default=0):
        at = self.field(table, k)
        return self.read(fmt, at) if at else default

    def ref(self, table: int, k: int) -> int:
        """Where an offset field (a table, vector or string) points, 0 where absent."""
        at = self.field(table, k)
        return at + self.u32(at) if at else 0

    def vector(self, table: int, k: int, fmt: str) -> tuple:
        at = self.ref(table, k)
        if not at:
            return ()
        n = self.u32(at)
        size = struct.calcsize("<" + fmt)
        if at + 4 + n * size > len(self.data):
            raise IndexError(at)
        return struct.unpack_from(f"<{n}{fmt}", self.data, at + 4)

    def tables(self, table: int, k: int) -> list[int]:
        at = self.ref(table, k)
        if not at:
            return []
        return [at + 4 + 4 * i + self.u32(at + 4 + 4 * i) for i in range(len(self.vector(table, k, "I")))]

    def string(self, table: int, k: int) -> str:
        at = self.ref(table, k)
        if not at:
            return ""
        n = self.u32(at)
        if at + 4 + n > len(self.data):
            raise IndexError(at)
        return self.data[at + 4:at + 4 + n].decode("utf-8", "replace")


def _op_type(fb: _Buffer, code: int) -> str:
    """An OperatorCode's name: the builtin operator (the larger of its two code fields: schema 3a
    moved builtin codes past 127 to `builtin_code`), or a custom op's own code."""
    builtin = max(fb.scalar(code, 0, "b"), fb.scalar(code, 3, "i"))
    if builtin == _CUSTOM:
        return fb.string(code, 1) or "CUSTOM"
    return BUILTIN_OPS[builtin] if 0 <= builtin < len(BUILTIN_OPS) else f"BUILTIN_{builtin}"


def _quantization(fb: _Buffer, tensor: int) -> Quantization | None:
    q = fb.ref(tensor, 4)
    if not q:
        return None
    scale, zero = fb.vector(q, 2, "f"), fb.vector(q, 3, "q")
    if not scale:
        return None
    zero = zero or (0,) * len(scale)
    axis = fb.scalar(q, 6, "i") if len(scale) > 1 else None
    return Quantization(scale, zero, axis)


def load_tflite(path: str | Path) -> Graph:
    return read_tflite(path).graph


def read_tflite(path: str | Path) -> TFLite:
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise SourceError(f"{p}: cannot read ({e.strerror or e})") from None
    if not sniff(data[:8]):
        raise SourceError(f"{p}: not a TFLite model (no {IDENTIFIER.decode()} identifier at byte 4)")
    try:
        return _read(_Buffer(data), p)
    except IndexError as exc:  # _Buffer.read: a position outside the file
        raise SourceError(f"{p}: not a TFLite model (truncated or corrupt: byte {exc.args[0]} is outside the file)"
                          ) from None


def _read(fb: _Buffer, p: Path) -> TFLite:
    model = fb.u32(0)
    codes = [_op_type(fb, c) for c in fb.tables(model, 1)]
    subgraphs = fb.tables(model, 2)
    if not subgraphs:
        raise SourceError(f"{p}: not a TFLite model (no subgraph)")
    sub = subgraphs[0]
    raw = fb.tables(sub, 0)
    names = unique_names((fb.string(t, 3) for t in raw), (f"tensor_{i}" for i in range(len(raw))))
    infos = []
    for i, (t, name) in enumerate(zip(raw, names)):
        kind = fb.scalar(t, 1, "b")
        signature = fb.vector(t, 7, "i") or fb.vector(t, 0, "i")
        infos.append(TensorInfo(i, name, TENSOR_TYPES[kind] if 0 <= kind < len(TENSOR_TYPES) else None,
                                tuple(d if d >= 0 else None for d in signature), _quantization(fb, t)))

    def tensor(k: int) -> str:
        return names[k] if 0 <= k < len(names) else ""

    ops = fb.tables(sub, 3)
    op_types = []
    for op in ops:
        code = fb.scalar(op, 0, "I")
        if code >= len(codes):
            raise SourceError(f"{p}: an operator names operator code {code} of {len(codes)}")
        op_types.append(codes[code])
    op_outs = [list(fb.vector(op, 2, "i")) for op in ops]
    seen: dict[str, int] = {}
    counted = []
    for kind in op_types:
        counted.append(f"{kind}_{seen.get(kind, 0)}")
        seen[kind] = seen.get(kind, 0) + 1
    op_names = unique_names(counted, counted)
    nodes = []
    for k, (op, kind, outs, name) in enumerate(zip(ops, op_types, op_outs, op_names)):
        ins = list(fb.vector(op, 1, "i"))
        attrs = {f"output {j} quantization": infos[o].quantization.describe()
                 for j, o in enumerate(outs) if 0 <= o < len(infos) and infos[o].quantization}
        if kind in FUSED_ACTIVATION_FIELD and (options := fb.ref(op, 4)):  # builtin_options
            activation = fb.scalar(options, FUSED_ACTIVATION_FIELD[kind], "b")
            if 0 < activation < len(ACTIVATIONS):
                attrs[FUSED_ACTIVATION] = ACTIVATIONS[activation]
        nodes.append(Node(
            name=name, type=kind, index=k, seq_id=k, inputs=[tensor(i) for i in ins],
            outputs=[tensor(o) for o in outs], attrs=attrs,
            output_shapes=[infos[o].shape if 0 <= o < len(infos) else None for o in outs],
            output_dtypes=[infos[o].dtype if 0 <= o < len(infos) else None for o in outs],
            input_shapes=[infos[i].shape if 0 <= i < len(infos) else None for i in ins],
            input_dtypes=[infos[i].dtype if 0 <= i < len(infos) else None for i in ins]))
    inputs = [tensor(i) for i in fb.vector(sub, 1, "i")]
    produced = {t for node in nodes for t in node.outputs}
    weights = {t for node in nodes for t in node.inputs if t and t not in produced and t not in inputs}
    nodes, _ = stable_topo_order(nodes, {*inputs, *weights})
    computed = []  # ops computing from weights alone (fp16 weights' DEQUANTIZE): their outputs are weights
    for node in nodes:
        if node.inputs and all(not t or t in weights for t in node.inputs):
            weights.update(node.outputs)
        else:
            computed.append(node)
    nodes = computed
    for k, node in enumerate(nodes):
        node.index = node.seq_id = k
    notes = []
    quantized = [t for t in infos if t.quantization and t.name not in weights]
    if quantized:
        per_axis = sum(1 for t in infos if t.quantization and t.quantization.axis is not None)
        notes.append(f"{len(quantized)} quantized activations ({', '.join(sorted({str(t.dtype) for t in quantized}))}), "
                     f"{per_axis} per-axis weights: read as (q - zero_point) * scale")
    if len(subgraphs) > 1:
        notes.append(f"{len(subgraphs) - 1} more subgraphs (control-flow bodies): not shown, not dumped")
    return TFLite(Graph(name=fb.string(sub, 4) or p.stem, kind=kinds.TFLITE, path=str(p), nodes=nodes,
                        inputs=inputs, outputs=[tensor(o) for o in fb.vector(sub, 2, "i")], weights=weights,
                        notes=notes), infos)
