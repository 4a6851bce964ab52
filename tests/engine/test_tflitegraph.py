"""graphs/tflitegraph: a .tflite read as a flatbuffer (no LiteRT), on the models TensorFlow's converter wrote
(tests/fixtures/litert, make_fixtures.py)."""
from __future__ import annotations

import numpy as np
import pytest

from accuscope.engine.graphs.tflitegraph import Quantization, read_tflite
from accuscope.engine.sides.registry import detect, load_graph
from accuscope.engine.sources import kinds
from accuscope.engine.sources.tensor import SourceError
from support.data import FIXTURES
from support.narrow import present

HERE = FIXTURES / "litert"
INT8, FP16 = HERE / "cnn_int8.tflite", HERE / "cnn_fp16.tflite"


def test_the_int8_model_as_a_graph(tmp_path):
    unnamed = tmp_path / "model"  # known by its content, not its name
    unnamed.write_bytes(INT8.read_bytes())
    for path in (INT8, unnamed):
        assert detect(path).kind == kinds.TFLITE
    g = load_graph(INT8)
    assert g.converted and not g.runnable and not g.cuttable
    assert g.inputs == ["serving_default_keras_tensor:0"] and g.outputs == ["StatefulPartitionedCall_1:0"]
    assert [n.name for n in g.nodes][:3] == ["QUANTIZE_0", "CONV_2D_0", "DEPTHWISE_CONV_2D_0"]
    assert [n.type for n in g.nodes][-2:] == ["SOFTMAX", "DEQUANTIZE"]
    conv = g.node("CONV_2D_1")
    assert conv is not None and conv.outputs == ["functional_1/conv2d_1_2/convolution1"]
    assert conv.output_dtypes == ["int8"] and conv.output_shapes == [(None, 14, 14, 8)]
    assert "scale" in conv.attrs["output 0 quantization"]
    assert conv.inputs[1] in g.weights and present(g.producer(conv.inputs[0]))[0].type == "DEPTHWISE_CONV_2D"
    assert any("quantized activations (int8)" in note for note in g.notes)


def test_fp16_weights_dequantized_in_the_model_are_weights():
    g = load_graph(FP16)
    assert "DEQUANTIZE" not in {n.type for n in g.nodes}
    conv = g.node("CONV_2D_0")
    assert conv is not None and conv.inputs[1] in g.weights and conv.output_dtypes == ["float32"]


def test_quantization_grids():
    per_tensor = Quantization((0.5,), (-3,), None)
    assert per_tensor.dequantize(np.array([-3, -1, 5], np.int8)).tolist() == [0.0, 1.0, 4.0]
    per_axis = Quantization((1.0, 0.25), (0, 2), 1)
    got = per_axis.dequantize(np.array([[4, 6], [-4, 2]], np.int8))
    assert got.dtype == np.float32 and got.tolist() == [[4.0, 1.0], [-4.0, 0.0]]
    with pytest.raises(ValueError, match="2 scales along axis 0"):
        per_axis._replace(axis=0).dequantize(np.zeros((3, 2), np.int8))
    rng = np.random.default_rng(0)  # 8 and 16 bits in float32: the float64 formula's values, bit for bit
    for dtype in (np.int8, np.uint8, np.int16, np.uint16):
        bits = np.iinfo(dtype)
        q = rng.integers(bits.min, bits.max + 1, (3, 5, 7), dtype=dtype)
        for scale in rng.uniform(1e-6, 10, 50).astype(np.float32):
            grid = Quantization((float(scale),), (int(rng.integers(bits.min, bits.max)),), None)
            want = ((q.astype(np.int64) - grid.zero_point[0]) * grid.scale[0]).astype(np.float32)
            assert np.array_equal(grid.dequantize(q), want)
    axes = {t.name: t.quantization.axis for t in read_tflite(INT8).tensors if t.quantization}
    assert axes["functional_1/conv2d_1/convolution"] == 0 and axes["functional_1/depthwise_conv2d_1/depthwise"] == 3


def test_every_truncation_is_a_source_error(tmp_path):
    """A .tflite cut short anywhere, or with a byte flipped in its tables, is refused with the file named
    (or, where the damage misses what is read, read), never an exception of another kind."""
    data = INT8.read_bytes()
    bad = tmp_path / "bad.tflite"
    for n in [*range(0, 64), *range(64, len(data), 97)]:
        bad.write_bytes(data[:n])
        with pytest.raises(SourceError, match="bad.tflite: not a TFLite model"):
            read_tflite(bad)
    rng = np.random.default_rng(0)
    for at in rng.integers(8, 2048, 200):
        damaged = bytearray(data)
        damaged[at] ^= 0xFF
        bad.write_bytes(bytes(damaged))
        try:
            read_tflite(bad)
        except SourceError as exc:
            assert "bad.tflite" in str(exc)
