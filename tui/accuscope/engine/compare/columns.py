"""Names of the comparison result's columns: MindStudio/msaccucmp CSV names and our short keys.

The ten metrics keep msaccucmp's CSV names and order. Short keys are what users type in filter
expressions (`cos < 0.99 and type == "Conv2D"`) and what the TUI shows in narrow terminals.
"""
from __future__ import annotations

# (CSV column, short key) in msaccucmp's column order
METRICS: list[tuple[str, str]] = [
    ("CosineSimilarity", "cos"),
    ("MaxAbsoluteError", "max_abs"),
    ("AccumulatedRelativeError", "acc_rel"),
    ("RelativeEuclideanDistance", "red"),
    ("KullbackLeiblerDivergence", "kl"),
    ("StandardDeviation", "std"),
    ("MeanAbsoluteError", "mean_abs"),
    ("RootMeanSquareError", "rmse"),
    ("MaxRelativeError", "max_rel"),
    ("MeanRelativeError", "mean_rel"),
]
# Ours, beside the compatible ones: share of elements whose relative error exceeds 0.1% / 0.5%
# (msprobe's "one thousandth / five thousandths" ratios) and NaN/inf counts per side.
EXTRAS: list[tuple[str, str]] = [
    ("RelErrRatio0.1%", "rel_0.1%"),
    ("RelErrRatio0.5%", "rel_0.5%"),
    ("NPUNonFinite", "npu_nonfinite"),
    ("GoldenNonFinite", "golden_nonfinite"),
    # Sophon tpu-mlir's (npz_tool compare): its euclidean similarity, SQNR and verdict ladder.
    ("EuclideanSimilarity", "euclid_sim"),
    ("SQNR", "sqnr"),
    ("TpuVerdict", "tpu_verdict"),
    # msprobe's statistics compare (no tensor data: Max/Min/Mean/L2 norm as its dump.json records
    # them), its md5 mode's checksums, and our stat_mag (its "double check" rule as a number).
    ("Max diff", "max_diff"),
    ("Min diff", "min_diff"),
    ("Mean diff", "mean_diff"),
    ("L2norm diff", "norm_diff"),
    ("MaxRelativeErr", "max_relerr"),
    ("MinRelativeErr", "min_relerr"),
    ("MeanRelativeErr", "mean_relerr"),
    ("NormRelativeErr", "norm_relerr"),
    ("StatMagnitude", "stat_mag"),
    ("NPU MD5", "npu_md5"),
    ("BENCH MD5", "golden_md5"),
]
TEXT_EXTRAS = {"tpu_verdict", "npu_md5", "golden_md5"}  # extras holding words, not numbers
KEY_OF = {csv: key for csv, key in METRICS + EXTRAS}
CSV_OF = {key: csv for csv, key in METRICS + EXTRAS}
NUMERIC_METRICS = [key for _, key in METRICS if key != "std"]

# Help text shown next to the columns (TUI help, CLI --help).
HELP = {
    "cos": "cosine similarity of the flattened tensors (1 = same direction; ignores scale)",
    "max_abs": "largest |npu - golden|",
    "acc_rel": "sum of |npu/golden - 1| over elements whose golden value is not zero",
    "red": "relative Euclidean distance ||npu - golden|| / ||golden||",
    "kl": "KL divergence of the min-max scaled value distributions; blind to scale and offset "
          "(npu = 2*golden + 5 gives 0)",
    "std": "(mean;std) of npu, then of golden",
    "mean_abs": "mean |npu - golden|",
    "rmse": "root mean square of npu - golden",
    "max_rel": "largest |npu/golden - 1| (golden zeros count as 0)",
    "mean_rel": "mean |npu/golden - 1| over all elements (golden zeros count as 0)",
    "rel_0.1%": "share of elements whose relative error exceeds 0.1%",
    "rel_0.5%": "share of elements whose relative error exceeds 0.5%",
    "npu_nonfinite": "NaN/inf count in the NPU tensor",
    "golden_nonfinite": "NaN/inf count in the golden tensor",
    "euclid_sim": "tpu-mlir's euclidean similarity 1 - ||npu - golden|| / (||(npu + golden)/2|| + 1e-7)",
    "sqnr": "signal to quantization noise ratio in dB, 10 log10(var(golden) / var(golden - npu)); "
            "inf when a variance is 0",
    "tpu_verdict": "tpu-mlir's ladder: EQUAL (identical), CLOSE (allclose at rtol 1e-3, atol 1e-8), "
                   "SIMILAR (cos and euclid_sim above their tolerances), NOT_SIMILAR",
    **{f"{s}_diff": f"msprobe's {s.replace('norm', 'L2 norm')} of npu minus that of golden (from dump.json)"
       for s in ("max", "min", "mean", "norm")},
    **{f"{s}_relerr": f"|{s}_diff / golden {s}| in percent (inf when the golden one is 0)"
       for s in ("max", "min", "mean", "norm")},
    "stat_mag": "largest |diff| / max(|npu|, |golden|) over the four statistics; msprobe asks for a double "
                "check above 0.5",
    "npu_md5": "the NPU tensor's CRC-32 (msprobe md5 mode)",
    "golden_md5": "the golden tensor's CRC-32 (msprobe md5 mode); a row fails when they differ",
}
# The ladder's words, best first (tpu-mlir spells the last one NOT_SIMLIAR; we do not).
TPU_VERDICTS = ("EQUAL", "CLOSE", "SIMILAR", "NOT_SIMILAR")
