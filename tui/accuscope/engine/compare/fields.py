"""What a result column that is not a metric is: one frozen record per column (columns.py holds the
metrics'), and every list of them derived from the records.

A record says what the rest of accuscope needs to know about one identity, judgement or detail
column: its key (filters, sort, the engine's table), its kind, its name in the result CSV (msit's
for the columns msit writes, ours for the others; "" for a column the CSV does not carry), its
label where a screen names it, which part of the CSV it belongs to, and whether -1 means unknown.
The table keeps the result table's display order; the metrics sit between the identity columns
and the rest. Adding a column is one record here (and its values where a comparison makes them).
"""
from __future__ import annotations

from dataclasses import dataclass

# where a column sits in the result CSV (tasks/csvio.py writes them in this order around the metrics)
HEAD = "head"  # before the metrics: msit's identity columns
REASON = "reason"  # after the metrics and any plugin columns
MSIT = "msit"  # msit's judgement columns after the reason
DETAIL = "detail"  # ours: what the detail view needs to reopen the tensors (written where any row has one)
RANKS = "ranks"  # a multi-rank task's rows (written where any row has one)


@dataclass(frozen=True)
class Field:
    key: str
    kind: str  # int, text or bool
    csv: str = ""  # its result-CSV column name; "" where the CSV does not carry it
    label: str = ""  # what the row detail calls it; default: the key
    part: str = ""  # where the CSV has it (HEAD, REASON, MSIT, DETAIL, RANKS)
    after_metrics: bool = False  # in the table after the metrics (else before them)
    unknown_is_minus_one: bool = False  # an int column whose -1 means unknown: sorts last, never matches
    default: object = None  # the value of a row that has none; default: the kind's (NaN, -1, False, "")
    msprobe: str = ""  # its column in msprobe's compare result (the .xlsx export's layout)

    @property
    def title(self) -> str:
        return self.label or self.key


FIELD_TABLE: tuple[Field, ...] = (
    Field("index", "int", "Index", "Index", HEAD),
    Field("op_seq", "int", "OpSequence", "OpSequence", HEAD, unknown_is_minus_one=True),
    Field("type", "text", "OpType", "OpType", HEAD),
    Field("npu_op", "text", "NPUDump", "NPU op", HEAD),
    Field("npu_dtype", "text", "DataType", "NPU dtype", HEAD, msprobe="NPU Dtype"),
    Field("npu_address", "text", "Address", part=HEAD, default="NaN"),
    Field("golden_op", "text", "GroundTruth", "golden op", HEAD, msprobe="Bench Name"),
    Field("golden_dtype", "text", "DataType", "golden dtype", HEAD, msprobe="Bench Dtype"),
    Field("golden_address", "text", "Address", part=HEAD, default="NaN"),
    Field("tensor", "text", "TensorIndex", "tensor", HEAD, msprobe="NPU Name"),
    Field("io", "text"),  # input, output, or a parameter's role: from the tensor name
    Field("param", "text", "Parameter", part=DETAIL),
    Field("shape", "text", "Shape", "shape", HEAD, msprobe="NPU Tensor Shape"),
    Field("overflow", "text", "OverFlow", part=HEAD),
    Field("reason", "text", "CompareFailReason", part=REASON, after_metrics=True),
    Field("is_npu_only", "bool", "IsNpuOps", part=MSIT, after_metrics=True),
    Field("is_output", "bool", "IsOutputNode", part=MSIT, after_metrics=True),
    Field("fail", "bool", "IsPrecisionError", part=MSIT, after_metrics=True),
    Field("conversion", "text", "Conversion", "layout conversion", DETAIL, after_metrics=True),
    Field("how", "text", "MappedBy", "mapped by", DETAIL, after_metrics=True),
    Field("npu_file", "text", "NPUFile", "NPU file", DETAIL, after_metrics=True),
    Field("golden_file", "text", "GoldenFile", "golden file", DETAIL, after_metrics=True),
    Field("step", "int", "Step", part=RANKS, after_metrics=True, unknown_is_minus_one=True),
    Field("rank", "int", "Rank", part=RANKS, after_metrics=True, unknown_is_minus_one=True),
)
FIELD = {f.key: f for f in FIELD_TABLE}

# ---- derived lists (nothing below names a column) -------------------------------------------------
# result-CSV name -> key, where the name is one column's (DataType and Address are each side's)
_CSV = [f.csv for f in FIELD_TABLE if f.csv]
CSV_NAMES = {f.csv: f.key for f in FIELD_TABLE if f.csv and _CSV.count(f.csv) == 1}
CSV_PART = {part: [(f.csv, f.key) for f in FIELD_TABLE if f.part == part] for part in (HEAD, MSIT, DETAIL, RANKS)}
