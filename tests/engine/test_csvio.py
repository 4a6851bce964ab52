"""Result CSV: the MindStudio/msaccucmp/msit layout written exactly, and every variant read back."""
from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from accuscope.engine.compare.results import ResultTable
from accuscope.engine.sources.tensor import SourceError
from accuscope.engine.tasks import csvio
from accuscope.engine.tasks.csvio import read_result_csv, write_result_csv
from support.bounded import ends

nan, inf = math.nan, math.inf
METRIC_HEADER = ("CosineSimilarity,MaxAbsoluteError,AccumulatedRelativeError,RelativeEuclideanDistance,"
                 "KullbackLeiblerDivergence,StandardDeviation,MeanAbsoluteError,RootMeanSquareError,"
                 "MaxRelativeError,MeanRelativeError")


def _write(tmp_path, text: str, name="result_20250101120000.csv", encoding="utf-8", newline="\n"):
    path = tmp_path / name
    path.write_bytes(text.replace("\n", newline).encode(encoding))
    return path


def _full_table() -> ResultTable:
    rows = [
        dict(op_seq=1, type="Data", npu_op="data", npu_dtype="float16", npu_address="0x1000",
             golden_op="data", golden_dtype="float32", golden_address="NaN", tensor="data:output:0",
             shape="[1,3,224,224]", overflow="NO", cos=1.0, max_abs=0.000488, acc_rel=0.52411,
             red=0.000205, kl=0.0, std="(0.412;0.287),(0.412;0.287)", mean_abs=0.000122,
             rmse=0.000178, max_rel=0.003906, mean_rel=3e-06, **{"rel_0.1%": 0.0, "rel_0.5%": 0.0},
             npu_nonfinite=0, golden_nonfinite=0, is_output=False, Ratio="0.125",
             conversion="NC1HWC0->NCHW", how="name", npu_file="/d/Data.data.1.1700000000000001",
             golden_file="/g/data.0.1700000000.npy"),
        dict(op_seq=2, type="Conv2D", npu_op="conv1conv1_relu", npu_dtype="float16", golden_op="conv1,conv1_relu",
             golden_dtype="float32", tensor="conv1conv1_relu:output:0", shape="[1,64,112,112]",
             overflow="YES", cos=0.912345678, max_abs=12.3456789, acc_rel=inf, red=nan, kl=0.0123455,
             std="(1.000;2.000),(1.100;2.000)", mean_abs=1.5, rmse=2.25, max_rel=1e9, mean_rel=0.5,
             **{"rel_0.1%": 0.75, "rel_0.5%": 0.5}, npu_nonfinite=3, golden_nonfinite=-1,
             reason='NaN in "npu", see log', is_output=True, Ratio="bad"),
        dict(op_seq=3, type="TransData", npu_op="trans_TransData_5", golden_op="*", golden_dtype="*",
             tensor="trans_TransData_5:output:0", shape="[1,4,56,56,16]",
             reason="The GroundTruth is *, no golden data"),
    ]
    t = ResultTable.from_rows(rows, custom=["Ratio"])
    t.columns["fail"] = np.array([False, True, False])
    return t


# ---- writing --------------------------------------------------------------------------------------
def test_written_header_follows_msaccucmp_then_msit_then_ours(tmp_path):
    path = write_result_csv(_full_table(), tmp_path / "r.csv", with_op_sequence=True, with_overflow=True)
    header = path.read_text().splitlines()[0].split(",")
    assert header == (["Index", "OpSequence", "OpType", "NPUDump", "DataType", "Address", "GroundTruth",
                       "DataType", "Address", "TensorIndex", "Shape", "OverFlow"] + METRIC_HEADER.split(",")
                      + ["Ratio", "CompareFailReason", "IsNpuOps", "IsOutputNode", "IsPrecisionError",
                         "RelErrRatio0.1%", "RelErrRatio0.5%", "NPUNonFinite", "GoldenNonFinite",
                         "Conversion", "MappedBy", "NPUFile", "GoldenFile"])
    lines = list(csv.reader(path.open()))
    row = dict(zip(header[12:], lines[2][12:]))  # msit reads by name
    assert row["CosineSimilarity"] == "0.912346" and row["MaxAbsoluteError"] == "12.345679"
    assert row["AccumulatedRelativeError"] == "inf" and row["RelativeEuclideanDistance"] == "NaN"
    assert row["StandardDeviation"] == "(1.000;2.000),(1.100;2.000)" and row["IsPrecisionError"] == "YES"
    assert lines[2][6] == "conv1,conv1_relu" and lines[3][header.index("IsNpuOps")] == "YES"


@pytest.mark.parametrize("options, absent", [
    (dict(), ["OpSequence", "OverFlow"]),
    (dict(npu_is_npy=True, golden_is_npy=True), ["Address"]),
    (dict(msit_columns=False), ["IsNpuOps", "IsOutputNode", "IsPrecisionError"]),
])
def test_optional_columns_are_left_out(tmp_path, options, absent):
    header = write_result_csv(_full_table(), tmp_path / "r.csv", **options).read_text().splitlines()[0]
    for name in absent:
        assert name not in header.split(",")
    assert "NPUDump,DataType" in header and "TensorIndex,Shape" in header


def test_golden_npy_drops_only_the_golden_address(tmp_path):
    header = write_result_csv(_full_table(), tmp_path / "r.csv", golden_is_npy=True).read_text().split("\n")[0]
    assert "NPUDump,DataType,Address,GroundTruth,DataType,TensorIndex" in header


def test_round_trip_keeps_every_column_to_six_decimals(tmp_path):
    table = _full_table()
    path = write_result_csv(table, tmp_path / "r.csv", with_op_sequence=True, with_overflow=True)
    back, warnings = read_result_csv(path)
    assert warnings == [] and len(back) == 3 and back.custom == ["Ratio"]
    assert back.present == table.present
    for key, col in table.columns.items():
        got = back.columns[key]
        if col.dtype.kind == "f":
            assert np.array_equal(got, np.round(col, 6), equal_nan=True), key
        else:
            assert got.tolist() == col.tolist(), key


def test_a_failed_write_leaves_the_previous_file(tmp_path, monkeypatch):
    path = write_result_csv(_full_table(), tmp_path / "r.csv")
    before = path.read_bytes()
    real_writer = csv.writer

    class HalfWriter:
        def __init__(self, f, **kw):
            self.inner = real_writer(f, **kw)

        def writerow(self, row):
            self.inner.writerow(row)

        def writerows(self, rows):
            self.inner.writerow(next(iter(rows)))
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(csvio.csv, "writer", HalfWriter)
    with pytest.raises(OSError, match="No space left"):
        write_result_csv(ResultTable.from_rows([dict(npu_op="x", tensor="x:output:0", cos=0.1)] * 3), path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["r.csv"]


# ---- reading foreign files ------------------------------------------------------------------------
MSACCUCMP = (
    "Index,OpType,NPUDump,DataType,Address,GroundTruth,DataType,Address,TensorIndex,Shape,"
    + METRIC_HEADER + ",CompareFailReason\n"
    '0,Data,data,float16,NaN,data,float32,NaN,data:output:0,"[1,3,224,224]",1.000000,0.000488,0.524110,'
    '0.000205,0.000000,"(0.412;0.287),(0.412;0.287)",0.000122,0.000178,0.003906,0.000003,\n'
    '1,Conv2D,conv1conv1_relu,float16,NaN,"conv1,conv1_relu",float32,NaN,conv1conv1_relu:input:0,'
    '"[1,3,224,224]",0.999876,0.012000,12.421875,0.004929,0.000012,"(0.412;0.287),(0.412;0.288)",0.000977,'
    '0.001307,0.250000,0.000082,\n'
    '2,Conv2D,conv1conv1_relu,float16,NaN,"conv1,conv1_relu",float32,NaN,conv1conv1_relu:output:0,'
    '"[1,64,112,112]",0.981230,0.531250,1843.500000,0.193457,0.006521,"(0.231;0.402),(0.233;0.398)",0.031250,'
    '0.072114,9.250000,0.002296,\n'
    '3,TransData,trans_TransData_5,float16,NaN,*,*,NaN,trans_TransData_5:output:0,"[1,4,56,56,16]",NaN,NaN,'
    'NaN,NaN,NaN,NaN,NaN,NaN,NaN,NaN,"There is no ground truth data for this tensor, skip it."\n'
)


def test_msaccucmp_csv(tmp_path):
    table, warnings = read_result_csv(_write(tmp_path, MSACCUCMP))
    assert warnings == [] and len(table) == 4
    assert table.columns["index"].tolist() == [0, 1, 2, 3]
    assert table.columns["golden_op"][1] == "conv1,conv1_relu"
    assert table.columns["npu_dtype"][1] == "float16" and table.columns["golden_dtype"][1] == "float32"
    assert table.columns["io"].tolist() == ["output", "input", "output", "output"]
    assert table.columns["cos"][2] == pytest.approx(0.98123) and table.columns["acc_rel"][2] == 1843.5
    assert table.columns["is_npu_only"].tolist() == [False, False, False, True]
    assert "ground truth data" in table.columns["reason"][3] and math.isnan(table.columns["kl"][3])
    assert table.columns["std"][0] == "(0.412;0.287),(0.412;0.287)"
    assert table.metric_keys == ["cos", "max_abs", "acc_rel", "red", "kl", "mean_abs", "rmse", "max_rel",
                                 "mean_rel"]
    assert table.columns["op_seq"].tolist() == [-1] * 4 and table.columns["overflow"].tolist() == [""] * 4


def test_mindstudio_with_range_overflow_and_npy_golden(tmp_path):
    text = (
        "Index,OpSequence,OpType,NPUDump,DataType,Address,GroundTruth,DataType,TensorIndex,Shape,OverFlow,"
        + METRIC_HEADER + ",CompareFailReason\n"
        '0,5,Relu,relu5,float16,0x12c0a2000,relu5,float32,relu5:output:0,"[1,256,14,14]",NO,0.999912,0.003906,'
        '3.812500,0.002211,0.000003,"(0.102;0.220),(0.102;0.220)",0.000244,0.000487,0.031250,0.000078,\n'
        '1,10,Add,add10,float16,0x12c0b4000,add10,float32,add10:output:0,"[1,256,14,14]",YES,0.731902,65504.000000,'
        'inf,0.998113,2.301775,"(inf;nan),(0.031;1.001)",inf,inf,inf,inf,overflow\n'
    )
    table, warnings = read_result_csv(_write(tmp_path, text))
    assert warnings == []
    assert table.columns["op_seq"].tolist() == [5, 10]
    assert table.columns["npu_address"].tolist() == ["0x12c0a2000", "0x12c0b4000"]
    assert table.columns["golden_address"].tolist() == ["NaN", "NaN"]  # no golden Address column
    assert table.columns["golden_dtype"].tolist() == ["float32", "float32"]
    assert table.columns["overflow"].tolist() == ["NO", "YES"]
    assert table.columns["acc_rel"][1] == inf and table.columns["max_abs"][1] == 65504.0


def test_msit_csv_with_yes_no_columns_and_rows_msit_left_short(tmp_path):
    text = (
        "Index,OpType,NPUDump,DataType,Address,GroundTruth,DataType,TensorIndex,Shape," + METRIC_HEADER
        + ",CompareFailReason,IsNpuOps,IsOutputNode,IsPrecisionError\n"
        '0,Conv2D,/backbone/conv1/Conv,float16,NaN,/backbone/conv1/Conv,float32,/backbone/conv1/Conv:output:0,'
        '"[1,32,320,320]",0.998213,0.093750,1521.250000,0.060337,0.000421,"(0.011;0.514),(0.011;0.513)",0.007813,'
        '0.031005,157.000000,0.004651,,NO,NO,NO\n'
        '1,Sigmoid,/head/Sigmoid,float16,NaN,/head/Sigmoid,float32,/head/Sigmoid:output:0,"[1,3,80,80]",0.921445,'
        '0.411133,611.375000,0.312115,0.041221,"(0.420;0.301),(0.433;0.287)",0.081241,0.121137,12.210938,'
        '0.031452,,NO,YES,YES\n'
        '2,MemSet,memset_2,float16,NaN,*,*,memset_2:output:0,"[1]",,,,,,,,,,,'
        '"all the data is zero in NPUDump",YES\n'
    )
    table, warnings = read_result_csv(_write(tmp_path, text))
    assert warnings == [] and len(table) == 3
    assert table.columns["is_output"].tolist() == [False, True, False]
    assert table.columns["fail"].tolist() == [False, True, False]
    assert table.columns["is_npu_only"].tolist() == [False, False, True]
    assert np.isnan(table.columns["cos"][2]) and table.columns["reason"][2].startswith("all the data")


def test_subset_of_algorithms_and_custom_columns(tmp_path):
    text = (
        "Index,OpType,NPUDump,DataType,Address,GroundTruth,DataType,Address,TensorIndex,Shape,"
        "CosineSimilarity,MaxAbsoluteError,CustomCos,Top1Match,CompareFailReason\n"
        '0,MatMul,fc1,float16,NaN,fc1,float32,NaN,fc1:output:0,"[1,1000]",0.999001,0.015625,0.999000,YES,\n'
        '1,Softmax,prob,float16,NaN,prob,float32,NaN,prob:output:0,"[1,1000]",0.990100,0.001953,NaN,NO,'
        '"CustomCos: division by zero"\n'
    )
    table, warnings = read_result_csv(_write(tmp_path, text))
    assert warnings == []
    assert table.custom == ["CustomCos", "Top1Match"] and table.metric_keys == ["cos", "max_abs"]
    assert table.columns["CustomCos"].tolist() == ["0.999000", "NaN"]
    assert table.filter_mask("CustomCos > 0.9").tolist() == [True, False]
    assert table.filter_mask('Top1Match == "yes"').tolist() == [True, False]
    assert table.sort_order("CustomCos", descending=True).tolist() == [0, 1]
    assert np.isnan(table.columns["red"]).all()  # not chosen: all NaN, not in metric_keys


def test_a_name_of_digits_that_is_no_number_is_neutralised_at_once():
    """`\\d+\\.?\\d*` split a name's 200,000 digits each possible way before its letter (minutes, issue 43)."""
    name = "-" + "1" * 200_000 + "x"
    assert ends(csvio.formula_safe, name) == "'" + name
    assert [csvio.formula_safe(t) for t in ("-1.5e3", "+12.", "-.5", "-1e", "-1.2.3", "-")] == [
        "-1.5e3", "+12.", "-.5", "'-1e", "'-1.2.3", "'-"]


def test_bom_crlf_quotes_and_odd_cells(tmp_path):
    text = (
        "Index,OpType,NPUDump,DataType,Address,GroundTruth,DataType,Address,TensorIndex,Shape,"
        "CosineSimilarity,MaxAbsoluteError,KullbackLeiblerDivergence,CompareFailReason\n"
        '0,Add,"add,1",float16,NaN,"a,b",float32,NaN,"add,1:output:0","[2,3]",0.5,-,inf,"reason, with comma"\n'
        '1,Add,add2,float16,NaN,add2,float32,NaN,add2:output:0,"[2,3]",,-inf, 1e-3 ,\n'
        "\n"
        '2,Add,add3,float16,NaN,add3,float32,NaN,add3:output:0,"[2,3]",NAN,N/A,None,,\n'
    )
    path = _write(tmp_path, "\ufeff" + text, newline="\r\n")
    table, warnings = read_result_csv(path)
    assert warnings == [] and len(table) == 3
    assert table.columns["npu_op"][0] == "add,1" and table.columns["golden_op"][0] == "a,b"
    assert table.columns["reason"][0] == "reason, with comma" and table.columns["reason"][1] == ""
    assert np.isnan(table.columns["max_abs"][0]) and table.columns["kl"][0] == inf
    assert np.isnan(table.columns["cos"][1]) and table.columns["max_abs"][1] == -inf
    assert table.columns["kl"][1] == 0.001 and np.isnan(table.columns["cos"][2])


def test_malformed_rows_become_warnings_with_line_numbers(tmp_path):
    text = (
        "Index,OpType,NPUDump,DataType,Address,GroundTruth,DataType,Address,TensorIndex,Shape,"
        "CosineSimilarity,MaxAbsoluteError,CompareFailReason\n"
        '0,Add,a,float16,NaN,a,float32,NaN,a:output:0,"[2]",0.9,0.1,"a reason\n'
        'over two lines"\n'
        '1,Add,b,float16,NaN,b,float32,NaN,b:output:0\n'
        '2,Add,c,float16,NaN,c,float32,NaN,c:output:0,"[2]",abc,0.1,,surplus,cells\n'
        '3,Add,d,float16,NaN,d,float32,NaN,d:output:0,"[2]",high,0.2,\n'
        '4,Add,e,float16,NaN,e,float32,NaN,e:output:0,"[2]",0.7,0.3,\n'
    )
    table, warnings = read_result_csv(_write(tmp_path, text))
    assert table.columns["npu_op"].tolist() == ["a", "d", "e"]
    assert table.columns["reason"][0] == "a reason\nover two lines"
    assert warnings == ["line 4: 9 fields where the header has 13; row skipped",
                        "line 5: 15 fields where the header has 13; row skipped",
                        "CosineSimilarity: not a number at line 6 'high'; read as NaN"]
    assert np.isnan(table.columns["cos"][1]) and table.columns["cos"][2] == 0.7


def test_unknown_trailing_column_is_ignored_with_a_warning(tmp_path):
    text = ("Index,OpType,NPUDump,DataType,GroundTruth,DataType,TensorIndex,Shape,CosineSimilarity,"
            "CompareFailReason,Remark\n0,Add,a,float16,a,float32,a:output:0,[2],0.9,,checked\n")
    table, warnings = read_result_csv(_write(tmp_path, text))
    assert len(table) == 1 and table.custom == []
    assert warnings == ["column 11 'Remark' is not known; ignored"]


def test_header_only_gives_an_empty_table(tmp_path):
    table, warnings = read_result_csv(_write(tmp_path, MSACCUCMP.splitlines()[0] + "\n"))
    assert len(table) == 0 and warnings == [] and "cos" in table.metric_keys


def test_non_utf8_file_is_read_with_a_warning(tmp_path):
    text = MSACCUCMP.replace("skip it.", "跳过")
    table, warnings = read_result_csv(_write(tmp_path, text, encoding="gb18030"))
    assert table.columns["reason"][3].endswith("跳过") and "not UTF-8" in warnings[0]


@pytest.mark.parametrize("content, message", [
    ("name,value\nconv1,0.5\n", "no header with NPUDump, GroundTruth, TensorIndex (first line: 'name,value')"),
    ("Index,OpType,NPUDump,GroundTruth,CosineSimilarity\n0,Add,a,a,0.9\n", "the header lacks TensorIndex"),
    ("", "no header with NPUDump"),
    ("\x00\x01\x02PK binary", "binary data"),
])
def test_files_that_are_not_result_csvs_raise_source_error(tmp_path, content, message):
    path = _write(tmp_path, content, name="other.csv")
    with pytest.raises(SourceError, match="other.csv: not a comparison result CSV") as info:
        read_result_csv(path)
    assert message in str(info.value)


def test_missing_file_raises_source_error(tmp_path):
    with pytest.raises(SourceError, match="nope.csv: cannot read"):
        read_result_csv(tmp_path / "nope.csv")


def test_fifty_thousand_rows_round_trip(tmp_path):
    rng = np.random.default_rng(1)
    n = 50_000
    cos = rng.random(n)
    cos[::11] = nan
    table = ResultTable.from_columns({"npu_op": [f"op{i}" for i in range(n)], "golden_op": ["g"] * n,
                                      "tensor": [f"op{i}:output:0" for i in range(n)], "cos": cos})
    back, warnings = read_result_csv(write_result_csv(table, tmp_path / "big.csv"))
    assert warnings == [] and len(back) == n
    assert np.array_equal(back.columns["cos"], np.round(cos, 6), equal_nan=True)
    assert back.columns["npu_op"][n - 1] == f"op{n - 1}"


def test_rows_written_column_by_column_are_the_bytes_the_csv_module_writes():
    """write_columns (the result CSV's rows, made column by column) against csv.writer row by row
    (write_rows): cells with commas, quotes, CR, LF, formula starts, None and numbers."""
    import io
    import random
    rng = random.Random(3)
    pieces = ["a", "op/1", ",", '"', "\r", "\n", "=1+1", "-x", "+", "@", "'=", " ", "0.5", "-0.5", "", "名"]
    for _ in range(30):
        rows = rng.randint(0, 40)
        columns: list[list] = []
        for _ in range(rng.randint(1, 6)):
            if rng.random() < 0.1:
                columns.append([rng.choice([None, 1.5, 7, True, "x"]) for _ in range(rows)])
            elif rng.random() < 0.5:
                columns.append([f"{rng.random():.6f}" for _ in range(rows)])
            else:
                columns.append(["".join(rng.choice(pieces) for _ in range(rng.randint(0, 4))) for _ in range(rows)])
        unsafe: dict[int, set[int]] = {}
        for pos, column in enumerate(columns):
            for r in csvio.formula_rows(column):
                unsafe.setdefault(r, set()).add(pos)
        by_rows, by_columns = io.StringIO(), io.StringIO()
        csvio.write_rows(by_rows, csv.writer(by_rows, lineterminator="\n"), zip(*columns), unsafe)
        csvio.write_columns(by_columns, columns, unsafe)
        assert by_columns.getvalue() == by_rows.getvalue()
