"""What a metric is: one frozen record per metric, and every list of metrics derived from them.

A record says everything the rest of accuscope needs to know about one result column: its short key
(what users type in filters and thresholds), its MindStudio/msaccucmp CSV name, its label in the op
table and its 4-cell name on the graph badge, the direction in which it gets worse, msit's default
threshold (and tpu-mlir's tolerance), its help, and where it shows. The ten msaccucmp metrics come
first, in msaccucmp's CSV column order; our extras follow. Adding a metric is its sums in metrics.py
(and _kernel.c) plus one record here: the CSV, filters, thresholds, op table, graph badge, op re-run
and help read these lists.
"""
from __future__ import annotations

from dataclasses import dataclass

STATS = ("max", "min", "mean", "norm")  # what msprobe's dump.json records of every tensor


@dataclass(frozen=True)
class Metric:
    key: str  # short key: filter expressions, thresholds, task.json, --algorithms
    csv: str  # column name in the result CSV (msaccucmp's for its ten)
    help: str
    origin: str = "msaccucmp"  # msaccucmp (its ten, selectable with --algorithms), msprobe, ours, tpu-mlir,
    # polygraphy
    kind: str = "float"  # float; int (counts, -1 unknown); text (std's "mean;std" pairs, the verdict)
    label: str = ""  # op table header; default: the key
    short: str = ""  # the graph badge's 4-cell name; default: the key cut to 4
    lower_is_worse: bool = False  # similarities fail when low, error measures when high
    msit_threshold: float | None = None  # msit's default threshold (a row fails beyond it)
    tpu_threshold: float | None = None  # tpu-mlir's npz_tool --tolerance default
    place: int | None = None  # position among the op table's metric columns; None: after the plugin columns
    width: int = 9  # op table cells (for text: at most, sized to the content)
    brief: bool = False  # in the short listing (`accuscope show`'s default columns; a recorded one: of a
    # comparison of recorded statistics)
    isolated: bool = False  # recomputed for an op's re-run on its own inputs (advisor)
    recorded: bool = False  # from what the dump recorded (statistics, checksums), not from tensor data
    third: bool = False  # from the third side (--expected, compare/expected.py): NaN without it
    reported: bool = False  # the dump tool's own figure for the row (Tensor.reported: RKNN's error_analysis.txt),
    # NaN without it
    polygraphy: bool = False  # from Polygraphy's rule (--atol/--rtol/--check-error-stat, compare/polytol.py):
    # NaN without it
    msprobe: str = ""  # its column in msprobe's compare result (the .xlsx export's layout)

    @property
    def title(self) -> str:
        return self.label or self.key

    @property
    def badge(self) -> str:
        return (self.short or self.key)[:4]

    @property
    def numeric(self) -> bool:
        return self.kind in ("float", "int")

    @property
    def apart(self) -> bool:
        """Made by a pass of its own after the pairs' (the third side's, Polygraphy's rule, a tool's own figures),
        only when asked (or given)."""
        return self.third or self.polygraphy or self.reported


METRIC_TABLE: tuple[Metric, ...] = (
    Metric("cos", "CosineSimilarity",
           "cosine similarity of the flattened tensors (1 = same direction; ignores scale)",
           lower_is_worse=True, msit_threshold=0.99, tpu_threshold=0.99, place=0, brief=True, isolated=True,
           msprobe="Cosine"),
    Metric("max_abs", "MaxAbsoluteError", "largest |npu - golden|",
           short="xabs", place=3, brief=True, isolated=True, msprobe="MaxAbsErr"),
    Metric("acc_rel", "AccumulatedRelativeError",
           "sum of |npu/golden - 1| over elements whose golden value is not zero",
           short="arel", place=8, isolated=True),
    Metric("red", "RelativeEuclideanDistance", "relative Euclidean distance ||npu - golden|| / ||golden||",
           msit_threshold=0.05, place=1, brief=True, isolated=True),
    Metric("kl", "KullbackLeiblerDivergence",
           "KL divergence of the min-max scaled value distributions; blind to scale and offset "
           "(npu = 2*golden + 5 gives 0)", msit_threshold=0.005, place=2, brief=True, isolated=True),
    Metric("std", "StandardDeviation", "(mean;std) of npu, then of golden", kind="text", place=9, width=28),
    Metric("mean_abs", "MeanAbsoluteError", "mean |npu - golden|", short="mabs", place=4, isolated=True),
    Metric("rmse", "RootMeanSquareError", "root mean square of npu - golden",
           msit_threshold=1.0, place=5, isolated=True),
    Metric("max_rel", "MaxRelativeError", "largest |npu/golden - 1| (golden zeros count as 0)",
           short="xrel", place=6, isolated=True, msprobe="MaxRelativeErr"),
    Metric("mean_rel", "MeanRelativeError",
           "mean |npu/golden - 1| over all elements (golden zeros count as 0)",
           short="mrel", msit_threshold=1.0, place=7, brief=True, isolated=True),
    # Ours, beside the compatible ones: share of elements whose relative error exceeds 0.1% / 0.5%
    # (msprobe's "one thousandth / five thousandths" ratios) and NaN/inf counts per side.
    Metric("rel_0.1%", "RelErrRatio0.1%", "share of elements whose relative error exceeds 0.1%",
           origin="msprobe", short="r.1%", place=10, isolated=True, msprobe="One Thousandth Err Ratio"),
    Metric("rel_0.5%", "RelErrRatio0.5%", "share of elements whose relative error exceeds 0.5%",
           origin="msprobe", short="r.5%", place=11, isolated=True, msprobe="Five Thousandths Err Ratio"),
    Metric("npu_nonfinite", "NPUNonFinite", "NaN/inf count in the NPU tensor",
           origin="ours", kind="int", label="npu_nf", short="inf", width=len("npu_nf")),
    Metric("golden_nonfinite", "GoldenNonFinite", "NaN/inf count in the golden tensor",
           origin="ours", kind="int", label="gold_nf", short="gnf", width=len("gold_nf")),
    # Sophon tpu-mlir's (npz_tool compare): its euclidean similarity, SQNR and verdict ladder.
    Metric("euclid_sim", "EuclideanSimilarity",
           "tpu-mlir's euclidean similarity 1 - ||npu - golden|| / (||(npu + golden)/2|| + 1e-7)",
           origin="tpu-mlir", label="euclid", lower_is_worse=True, tpu_threshold=0.90, place=12),
    Metric("sqnr", "SQNR", "signal to quantization noise ratio in dB, 10 log10(var(golden) / var(golden - npu)); "
           "inf when a variance is 0", origin="tpu-mlir", lower_is_worse=True, place=13),
    Metric("tpu_verdict", "TpuVerdict",
           "tpu-mlir's ladder: EQUAL (identical), CLOSE (allclose at rtol 1e-3, atol 1e-8), "
           "SIMILAR (cos and euclid_sim above their tolerances), NOT_SIMILAR",
           origin="tpu-mlir", kind="text", label="verdict", place=14, width=len("NOT_SIMILAR")),
    # Rockchip RKNN-Toolkit2's (accuracy_analysis, error_analysis.txt): its euclidean distance, computed here
    # ("entire": the row's own cos and euc), and its "single" figures as RKNN reported them (the layer alone on
    # golden inputs: what the layer itself adds)
    Metric("euc", "EuclideanDistance", "euclidean distance ||npu - golden|| (RKNN's euc)", origin="rknn",
           place=14),
    Metric("rknn_single_cos", "RknnSingleCos", "RKNN's own cos of the layer alone on golden inputs (error_analysis.txt "
           "'single'): low, the layer adds the error; high under a failing cos, it inherits it", origin="rknn",
           label="sgl_cos", short="scos", lower_is_worse=True, place=14, reported=True),
    Metric("rknn_single_euc", "RknnSingleEuc", "RKNN's own euclidean distance of the layer alone on golden inputs "
           "(error_analysis.txt 'single')", origin="rknn", label="sgl_euc", short="seuc", place=14, reported=True),
    # msprobe's statistics compare (no tensor data: Max/Min/Mean/L2 norm as its dump.json records
    # them), its md5 mode's checksums, and our stat_mag (its "double check" rule as a number).
    *(Metric(f"{s}_diff", f"{s.title() if s != 'norm' else 'L2norm'} diff",
             f"msprobe's {s.replace('norm', 'L2 norm')} of npu minus that of golden (from dump.json)",
             origin="msprobe", short=f"{s[:3]}d", place=16 + k, recorded=True, brief=True) for k, s in enumerate(STATS)),
    *(Metric(f"{s}_relerr", f"{s.title()}RelativeErr",
             f"|{s}_diff / golden {s}| in percent (inf when the golden one is 0)",
             origin="msprobe", label=f"{s}_rel%", short=f"{s[:3]}%", place=20 + k, recorded=True, brief=s == "norm")
      for k, s in enumerate(STATS)),
    Metric("stat_mag", "StatMagnitude", "largest |diff| / max(|npu|, |golden|) over the four statistics; msprobe "
           "asks for a double check above 0.5 (a row fails above it unless a stat_mag threshold says otherwise)",
           origin="msprobe", short="smag", place=15, recorded=True, brief=True),
    Metric("npu_md5", "NPU MD5", "the NPU tensor's CRC-32 (msprobe md5 mode)", origin="msprobe", kind="text",
           label="npu crc", short="crc", place=24, width=10, recorded=True, brief=True),
    Metric("golden_md5", "BENCH MD5", "the golden tensor's CRC-32 (msprobe md5 mode); a row fails when they differ",
           origin="msprobe", kind="text", label="gold crc", short="gcrc", place=25, width=10, recorded=True, brief=True),
    # a non-tensor argument or output (msprobe's dump.json: dim=1, p=0.1, training=True, None): compared as a
    # value, equal or not (msprobe's scalar-parameter check), never by a metric; shown beside the first
    # metrics so the row carries both values where it is seen
    Metric("npu_value", "NPU Value", "the NPU side's non-tensor argument or output (msprobe: an int, float, bool, "
           "str, None) as dump.json records it", origin="msprobe", kind="text", label="npu value", short="val",
           place=2, width=12, recorded=True),
    Metric("golden_value", "Bench Value", "the golden side's non-tensor argument or output; a row fails when the "
           "two values differ", origin="msprobe", kind="text", label="gold value", short="gval", place=2, width=12,
           recorded=True),
    # the precision's own noise (--expected: the reference run at the candidate's precision)
    Metric("exp_err", "ExpectedError", "the expected side's error against golden, max(1 - cos, red): what the "
           "precision itself gives (--expected: the reference run at the candidate's precision)", origin="ours",
           label="exp.err", short="xerr", place=2, third=True),
    Metric("excess", "Excess", "the row's error, max(1 - cos, red), over the expected error: at most 2, the "
           "precision itself (keep the op in higher precision); above, the implementation", origin="ours",
           short="exc", place=2, third=True),
    # Polygraphy's own rule, when asked (--atol, --rtol, --check-error-stat: compare/polytol.py)
    Metric("pg_abs", "PolygraphyAbsDiff", "Polygraphy's checked statistic (--check-error-stat: max for elemwise, "
           "mean, median) of |npu - golden|", origin="polygraphy", short="pgab", polygraphy=True),
    Metric("pg_rel", "PolygraphyRelDiff", "the same of |npu - golden| / |golden| (golden zeros raised by 2.2e-16)",
           origin="polygraphy", short="pgre", polygraphy=True),
    Metric("pg_mismatch", "PolygraphyMismatches", "elements beyond both --atol and --rtol (NaN beyond), counted at "
           "the comparison's tolerances: elemwise fails a tensor holding one", origin="polygraphy", kind="int",
           label="pg_mism", short="pgmm", polygraphy=True),
    Metric("pg_atol", "PolygraphyAtol", "the output's own --atol (Polygraphy's OUT:A), when given one: the row is "
           "judged at it, the others at the pg_abs threshold", origin="polygraphy", short="pgat", polygraphy=True),
    Metric("pg_rtol", "PolygraphyRtol", "the output's own --rtol (OUT:R), when given one (see pg_atol)",
           origin="polygraphy", short="pgrt", polygraphy=True),
    Metric("pg_stat", "PolygraphyErrorStat", "the output's own --check-error-stat (OUT:S) when it was given values of "
           "its own (see pg_atol)", origin="polygraphy", kind="text", short="pgst", width=9, polygraphy=True),
)
METRIC = {m.key: m for m in METRIC_TABLE}

# ---- derived lists (nothing below names a metric) -------------------------------------------------
# (CSV column, short key): msaccucmp's ten in its column order, then ours
METRICS: list[tuple[str, str]] = [(m.csv, m.key) for m in METRIC_TABLE if m.origin == "msaccucmp"]
EXTRAS: list[tuple[str, str]] = [(m.csv, m.key) for m in METRIC_TABLE if m.origin != "msaccucmp"]
KEY_OF = {m.csv: m.key for m in METRIC_TABLE}
CSV_OF = {m.key: m.csv for m in METRIC_TABLE}
# msaccucmp's numeric metrics (the ten without std): what --algorithms selects besides std
NUMERIC_METRICS = [key for _, key in METRICS if METRIC[key].kind == "float"]
# what --algorithms may choose (msaccucmp's ten): the numeric ones, then the rest (std's text)
ALGORITHMS = NUMERIC_METRICS + [key for _, key in METRICS if key not in NUMERIC_METRICS]
FLOAT_METRICS = [m.key for m in METRIC_TABLE if m.kind == "float"]  # every float metric, NaN when not computed
COMPUTED_FLOATS = [m.key for m in METRIC_TABLE if m.kind == "float" and not m.recorded and not m.apart]  # from tensor data
THRESHOLD_KEYS = [m.key for m in METRIC_TABLE if m.numeric]  # keys a threshold may name
LOWER_IS_WORSE = {m.key for m in METRIC_TABLE if m.lower_is_worse}
MSIT_DEFAULTS = {m.key: m.msit_threshold for m in METRIC_TABLE if m.msit_threshold is not None}
TPU_DEFAULTS = {m.key: m.tpu_threshold for m in METRIC_TABLE if m.tpu_threshold is not None}
# The op table's metric columns in display order: the thresholded ones first, so an 80-column
# terminal shows them without scrolling; the rest (the non-finite counts) follow the plugin columns.
TABLE_ORDER = [m.key for m in sorted((m for m in METRIC_TABLE if m.place is not None), key=lambda m: m.place or 0)]
TABLE_TAIL = [m.key for m in METRIC_TABLE if m.place is None]
BRIEF = [m.key for m in sorted((m for m in METRIC_TABLE if m.brief and not m.recorded), key=lambda m: m.place or 0)]
BRIEF_RECORDED = [m.key for m in METRIC_TABLE if m.brief and m.recorded]  # a statistics comparison's, table order
ISOLATED = [m.key for m in METRIC_TABLE if m.isolated]
REPORTED = [m.key for m in METRIC_TABLE if m.reported]  # a dump tool's own figures (Tensor.reported)
REPORTED_BESIDE = {"rknn": ["euc"]}  # what to show beside them: the same tool's measure computed here
HELP = {m.key: m.help for m in METRIC_TABLE}
# The ladder's words, best first (tpu-mlir spells the last one NOT_SIMLIAR; we do not).
TPU_VERDICTS = ("EQUAL", "CLOSE", "SIMILAR", "NOT_SIMILAR")
