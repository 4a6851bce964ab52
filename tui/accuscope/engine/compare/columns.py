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
]
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
}
# The ladder's words, best first (tpu-mlir spells the last one NOT_SIMLIAR; we do not).
TPU_VERDICTS = ("EQUAL", "CLOSE", "SIMILAR", "NOT_SIMILAR")
