"""Ascend dump files: the independent fixtures, our writer, layouts, broken files, fuzzing."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accuscope.engine.compare import comparison as engine
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.sources import layout
from accuscope.engine.sources.ascend import (
    DumpTensor,
    build_header,
    crop_to,
    read_dump_file,
    write_dump_file,
    write_raw,
)
from accuscope.engine.sources.tensor import TensorError
from support.data import ASCEND_FIXTURES
from support.narrow import present

GOOD = {
    "Conv2D.block1_conv_bn_relu.17.1763812800000123": ("block1/conv_bn_relu", 2, 1),
    "MatMulV2.attn_qk.18.1763812800000456": ("attn/qk", 2, 1),
    "Mul.mask_mul.19.1763812800000789": ("mask_mul", 2, 1),
}


@pytest.mark.parametrize("fname", sorted(GOOD))
def test_independent_fixtures_decode_to_expected_tensors(fname):
    df = read_dump_file(ASCEND_FIXTURES / fname)
    op_name, n_in, n_out = GOOD[fname]
    assert df.problem == ""
    assert df.op_name == op_name and (len(df.inputs), len(df.outputs)) == (n_in, n_out)
    for t in df.tensors:
        expected = np.load(ASCEND_FIXTURES / f"expected.{df.op_type}.{t.io}.{t.index}.npy", allow_pickle=False)
        got = t.load()
        assert got.dtype == expected.dtype and got.shape == expected.shape == t.shape
        assert np.array_equal(got, expected)


def test_fixture_metadata_formats_and_original_op():
    conv = read_dump_file(ASCEND_FIXTURES / "Conv2D.block1_conv_bn_relu.17.1763812800000123")
    weight, out = conv.inputs[1], conv.outputs[0]
    assert (weight.format, weight.storage_shape, weight.conversion) == ("FRACTAL_Z", (9, 2, 16, 16), "FRACTAL_Z->NCHW")
    assert (out.format, out.storage_shape, out.shape) == ("NC1HWC0", (2, 3, 6, 7, 16), (2, 37, 6, 7))
    assert out.original_op == ("block1/relu", 0) and out.dtype_name == "float16"
    assert conv.name is not None
    assert conv.name.task_id == 17 and conv.timestamp == 1763812800000123
    mm = read_dump_file(ASCEND_FIXTURES / "MatMulV2.attn_qk.18.1763812800000456")
    assert mm.outputs[0].conversion == "FRACTAL_NZ->ND" and mm.outputs[0].original_op == ("attn/MatMul", 0)


@pytest.mark.parametrize("fname, words", [
    ("Relu.truncated_payload.20.1763812800000999", ["truncated", "19096", "18996"]),
    ("Relu.header_too_long.21.1763812800001000", ["header length 1000000000", "200 bytes"]),
    ("Add.garbage.22.1763812800001001", ["exceeds the file size"]),
])
def test_broken_fixtures_give_a_reason_not_a_traceback(fname, words):
    df = read_dump_file(ASCEND_FIXTURES / fname)
    assert df.tensors == [] and all(w in df.problem for w in words), df.problem


def test_nd_tensor_loads_read_only_mapped_when_large_read_once_when_small(tmp_path):
    from accuscope.engine.sources.tensor import SMALL_PAYLOAD
    path = tmp_path / "Add.a.1.1700000000000001"
    big = np.arange(SMALL_PAYLOAD // 4 + 1024, dtype=np.float32).reshape(-1, 4)
    write_dump_file(path, "a", [DumpTensor(np.arange(12, dtype=np.float32).reshape(3, 4)), DumpTensor(big)])
    small, large = (t.load() for t in read_dump_file(path).inputs)
    assert not _mapped(small) and not small.flags.writeable  # one pread: mapping costs more
    assert np.array_equal(small, np.arange(12, dtype=np.float32).reshape(3, 4))
    assert _mapped(large) and not large.flags.writeable and np.array_equal(large, big) and large.shape == big.shape


def test_a_mapped_payload_cut_short_is_a_value_error_and_a_vanished_one_an_os_error(tmp_path):
    from accuscope.engine.sources.tensor import SMALL_PAYLOAD, read_payload
    path = tmp_path / "Add.a.1.1700000000000001"
    write_dump_file(path, "a", [DumpTensor(np.ones(SMALL_PAYLOAD, dtype=np.float32))])
    payload = read_dump_file(path).inputs[0].payload
    with open(path, "r+b") as fh:
        assert payload is not None
        fh.truncate(payload.offset + payload.nbytes - 4)
    with pytest.raises(ValueError, match="file ends before the tensor's last byte"):
        read_payload(payload)
    path.unlink()
    with pytest.raises(OSError):
        read_payload(payload)


def _mapped(a: object) -> bool:
    import mmap
    while isinstance(a, np.ndarray):
        a = a.base
    return isinstance(a.obj if isinstance(a, memoryview) else a, mmap.mmap)


def test_header_read_does_not_touch_payload_of_a_huge_sparse_file(tmp_path):
    """A 12 GB dump (sparse on disk) opens instantly; only the asked slice is paged in."""
    path = tmp_path / "Cast.big.1.1700000000000001"
    n = 3 * 2**30
    msg, _ = build_header("big", [], [DumpTensor(np.zeros(1, np.float32))])
    msg.output[0].shape.dim[:] = [n]
    msg.output[0].original_shape.dim[:] = [n]
    msg.output[0].size = 4 * n
    write_raw(path, msg, [])
    with open(path, "r+b") as fh:
        fh.truncate(os.path.getsize(path) + 4 * n)
    t = read_dump_file(path).outputs[0]
    assert t.payload is not None
    assert t.shape == (n,) and t.payload.nbytes == 4 * n
    assert float(t.load()[-3:].sum()) == 0.0


DTYPES = [np.float32, np.float16, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.int64,
          np.uint32, np.uint64, np.bool_, np.float64]


@pytest.mark.parametrize("dtype", DTYPES)
def test_writer_round_trips_every_decodable_dtype(tmp_path, dtype):
    rng = np.random.default_rng(1)
    data = (rng.standard_normal((2, 3, 5)) * 50).astype(dtype)
    path = tmp_path / "Op.x.1.1700000000000001"
    write_dump_file(path, "x", outputs=[DumpTensor(data, original_op=("fw/x", 2))])
    t = read_dump_file(path).outputs[0]
    assert t.dtype == np.dtype(dtype) and t.original_op == ("fw/x", 2)
    assert np.array_equal(t.load(), data)


def test_bf16_decodes_to_the_upper_half_of_float32(tmp_path):
    data = np.array([1.0, -2.5, 3.140625, 65280.0, 1e-3], dtype=np.float32)
    path = tmp_path / "Op.x.1.1700000000000001"
    write_dump_file(path, "x", outputs=[DumpTensor(data, bf16=True)])
    t = read_dump_file(path).outputs[0]
    expected = (data.view(np.uint32) & 0xFFFF0000).view(np.float32)
    assert t.dtype_name == "bfloat16" and t.dtype == np.float32
    assert np.array_equal(t.load(), expected)


@pytest.mark.parametrize("fmt, shape, c0", [
    ("NC1HWC0", (2, 37, 6, 7), 16), ("NC1HWC0", (1, 64, 3, 3), 16), ("NC1HWC0", (1, 3, 5, 5), 32),
    ("FRACTAL_Z", (21, 5, 3, 3), 16), ("FRACTAL_Z", (32, 16, 1, 1), 16), ("FRACTAL_Z", (5, 40, 3, 2), 32),
    ("FRACTAL_NZ", (3, 40, 24), 16), ("FRACTAL_NZ", (7, 9), 16), ("FRACTAL_NZ", (2, 2, 17, 33), 16),
])
def test_storage_layouts_round_trip_with_padding_cropped(tmp_path, fmt, shape, c0):
    data = np.random.default_rng(2).standard_normal(shape).astype(np.float16)
    path = tmp_path / "Op.x.1.1700000000000001"
    write_dump_file(path, "x", outputs=[DumpTensor(data, format=fmt, c0=c0)])
    t = read_dump_file(path).outputs[0]
    assert t.format == fmt and t.shape == shape and t.conversion.startswith(fmt)
    assert t.storage_shape is not None
    assert np.prod(t.storage_shape) >= data.size
    assert np.array_equal(t.load(), data)


def test_layout_conversion_matches_the_spec_recipe():
    """NC1HWC0 -> NCHW: transpose to (N, C1, C0, H, W), merge C1*C0, crop (formats.md, section 1)."""
    storage = np.random.default_rng(3).standard_normal((2, 3, 4, 5, 16)).astype(np.float32)
    recipe = storage.transpose(0, 1, 4, 2, 3).reshape(2, 48, 4, 5)[:, :40]
    assert np.array_equal(layout.to_logical(storage, "NC1HWC0", (2, 40, 4, 5)), recipe)
    w = np.random.default_rng(4).standard_normal((2 * 3 * 3, 2, 16, 16)).astype(np.float32)
    recipe = w.reshape(2, 3, 3, 2, 16, 16).transpose(3, 4, 0, 5, 1, 2).reshape(32, 32, 3, 3)[:20, :17]
    assert np.array_equal(layout.to_logical(w, "FRACTAL_Z", (20, 17, 3, 3)), recipe)
    nz = np.random.default_rng(5).standard_normal((4, 2, 3, 16, 16)).astype(np.float32)
    recipe = nz.transpose(0, 2, 3, 1, 4).reshape(4, 48, 32)[:, :45, :30]
    assert np.array_equal(layout.to_logical(nz, "FRACTAL_NZ", (4, 45, 30)), recipe)


def test_missing_original_shape_keeps_padding_and_says_so(tmp_path):
    path = tmp_path / "Op.x.1.1700000000000001"
    msg, payloads = build_header("x", [], [DumpTensor(np.ones((1, 20, 2, 2), np.float16), format="NC1HWC0")])
    msg.output[0].ClearField("original_shape")  # type: ignore[attr-defined]  # protobuf's own, outside dumpproto's Protocol
    write_raw(path, msg, payloads)
    t = read_dump_file(path).outputs[0]
    assert t.shape == (1, 32, 2, 2) and "uncropped" in t.conversion
    assert t.load()[:, :20].min() == 1 and t.load()[:, 20:].max() == 0


def test_without_original_shape_a_pair_is_cropped_to_its_golden_shape(tmp_path):
    """The padding is the only difference: the golden tensor's shape is the original shape, when
    the storage can hold it."""
    act = np.random.default_rng(6).standard_normal((1, 20, 3, 2)).astype(np.float16)
    npu, golden = tmp_path / "npu", tmp_path / "golden"
    npu.mkdir(), golden.mkdir()
    msg, payloads = build_header("conv1", [], [DumpTensor(act, format="NC1HWC0")])
    msg.output[0].ClearField("original_shape")  # type: ignore[attr-defined]  # protobuf's own, outside dumpproto's Protocol
    write_raw(npu / "Conv2D.conv1.1.1700000000000001", msg, payloads)
    np.save(golden / "conv1.0.1.npy", act.astype(np.float32))
    t = read_dump_file(npu / "Conv2D.conv1.1.1700000000000001").outputs[0]
    assert crop_to(t, (1, 20, 4, 2)) is t and crop_to(t, (1, 40, 3, 2)) is t  # does not fit: unchanged
    table = engine.execute(engine.plan(CompareSpec(str(npu), str(golden))), workers=1)
    assert table is not None
    row = table.row(0)
    assert row["shape"] == "[1,20,3,2]" and "cropped to the golden shape" in row["conversion"]
    assert row["cos"] == 1.0 and row["max_abs"] == 0.0 and row["reason"] == ""


def test_a_bad_tensor_does_not_spoil_its_siblings(tmp_path):
    path = tmp_path / "Op.x.1.1700000000000001"
    good = np.arange(6, dtype=np.float32)
    msg, payloads = build_header("x", [DumpTensor(good), DumpTensor(good), DumpTensor(good)],
                                 [DumpTensor(np.ones((1, 20, 2, 2), np.float16), format="NC1HWC0")])
    msg.input[1].data_type = 33  # HIFLOAT8: known, not decodable
    msg.input[2].shape.dim[:] = [7]  # 6 elements stored, 7 declared
    msg.output[0].original_shape.dim[:] = [1, 40, 2, 2]  # does not fit C1=2, C0=16
    write_raw(path, msg, payloads)
    df = read_dump_file(path)
    assert df.problem == "" and np.array_equal(df.inputs[0].load(), good)
    assert df.inputs[1].problem == "unsupported dtype HIFLOAT8"
    assert "does not match shape [7]" in df.inputs[2].problem
    assert "does not fit logical shape [1, 40, 2, 2]" in df.outputs[0].problem
    with pytest.raises(TensorError, match="HIFLOAT8"):
        df.inputs[1].load()


def test_legacy_inline_payload_is_reported(tmp_path):
    path = tmp_path / "Op.x.1.1700000000000001"
    msg, _ = build_header("x", [], [DumpTensor(np.ones(4, np.float32))])
    msg.output[0].data = np.ones(4, np.float32).tobytes()
    msg.output[0].size = 0
    write_raw(path, msg, [])
    assert "legacy" in read_dump_file(path).problem


def test_writer_is_deterministic_and_preserves_foreign_payload_bytes(tmp_path):
    src = ASCEND_FIXTURES / "Conv2D.block1_conv_bn_relu.17.1763812800000123"
    df = read_dump_file(src)
    arrays = [DumpTensor(t.load(), format=t.format if t.format != "NCHW" else "ND", original_op=t.original_op)
              for t in df.tensors]
    a, b = tmp_path / "a", tmp_path / "b"
    for p in (a, b):
        write_dump_file(p, df.op_name, arrays[:2], arrays[2:], dump_time=df.dump_time)
    assert a.read_bytes() == b.read_bytes()
    raw = src.read_bytes()
    assert raw[-sum(present(t.payload).nbytes for t in df.tensors):] == a.read_bytes()[-sum(
        present(t.payload).nbytes for t in df.tensors):]
    again = read_dump_file(a)
    for t0, t1 in zip(df.tensors, again.tensors):
        assert np.array_equal(t0.load(), t1.load()) and t0.storage_shape == t1.storage_shape


def _never_raises(path):
    df = read_dump_file(path)
    for t in df.tensors:
        try:
            t.load()
        except TensorError:
            pass
    return df


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=600))
def test_fuzz_random_bytes_never_raise(tmp_path, data):
    path = tmp_path / "Add.fuzz.1.1700000000000001"
    path.write_bytes(data)
    df = _never_raises(path)
    assert df.problem or len(data) >= 8


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(0, 19095), flips=st.lists(st.tuples(st.integers(0, 19095), st.integers(0, 255)), max_size=6))
def test_fuzz_mutated_real_dump_never_raises(tmp_path, cut, flips):
    raw = bytearray((ASCEND_FIXTURES / "Conv2D.block1_conv_bn_relu.17.1763812800000123").read_bytes())
    for pos, value in flips:
        raw[pos % len(raw)] = value
    path = tmp_path / "Conv2D.fuzz.1.1700000000000001"
    path.write_bytes(bytes(raw[: max(cut, len(raw) - 300)]) if cut % 2 else bytes(raw))
    _never_raises(path)
