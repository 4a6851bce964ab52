"""msaccucmp-compatible files of one op's detail: `{op}_{io}_{k}_summary.txt` and the TopN CSVs
by absolute and relative error (what `msaccucmp -op NAME -n TopN` writes, plus our counts)."""
from __future__ import annotations

import csv
import math
from pathlib import Path

from accuscope.engine.diagnose.opdetail import METRICS, WORDS, OpDetail, PairInfo, TopN
from accuscope.engine.sources.outputfile import atomic_file, write_text

HEADER = ("Index", "{layout}", "NPUDump", "GroundTruth", "AbsoluteError", "RelativeError")
_MAX_NAME = 255


def file_prefix(info: PairInfo) -> str:
    """`{op}_{input|output}_{k}` with `/` and `\\` replaced by `_` (msaccucmp's file prefix); an
    op name too long for a file name keeps its head and gets a hash of the whole."""
    op = info.npu_op.replace("/", "_").replace("\\", "_").replace("\x00", "_") or "tensor"
    prefix = f"{op}_{info.io}_{info.index}"
    if len(prefix.encode("utf-8")) + len("_relative_error_topn.csv") > _MAX_NAME:
        import hashlib
        digest = hashlib.sha1(prefix.encode("utf-8")).hexdigest()[:12]
        head = op.encode("utf-8")[:150].decode("utf-8", "ignore")
        prefix = f"{head}_{digest}_{info.io}_{info.index}"
    return prefix


def _num(v: float) -> str:
    return f"{v:.6f}" if math.isfinite(v) else "-"


def topn_rows(top: TopN, layout: str) -> list[list[str]]:
    """Rows of a TopN CSV (header first): Index, coordinates, NPU, golden, abs, rel."""
    rows = [[h.format(layout=layout) for h in HEADER]]
    for i in range(len(top)):
        rows.append([str(int(top.index[i])), top.coord_text(i), _num(top.npu[i]), _num(top.golden[i]),
                     _num(top.abs_err[i]), _num(top.rel_err[i])])
    return rows


def summary_text(d: OpDetail) -> str:
    """msaccucmp's `_summary.txt` keys first, then ours (NaN/inf counts, files, statistics)."""
    i = d.info
    lines = [f"TotalCount:{d.n}", f"NPUDump:{i.npu_op}", f"GroundTruth:{i.golden_op.replace(',', ' ')}",
             f"Format:{d.layout}",
             f"MinAbsoluteError:{_num(d.abs.min)}", f"MaxAbsoluteError:{_num(d.abs.max)}",
             f"MinRelativeError:{_num(d.rel.min)}", f"MaxRelativeError:{_num(d.rel.max)}",
             f"NPUDumpFile:{i.npu_file}", f"GroundTruthFile:{i.golden_file}",
             f"Shape:{' '.join(map(str, d.shape))}",
             f"CosineSimilarity:{_num(d.cosine)}", f"MeanAbsoluteError:{_num(d.mean_abs)}",
             f"NonFiniteMismatch:{d.abs.nonfinite}", f"NonFiniteSame:{d.abs.undefined}",
             f"RelativeErrorUndefined:{d.rel.undefined - d.abs.undefined}"]
    for side, s in (("NPU", d.npu_stats), ("GroundTruth", d.golden_stats)):
        lines.append(f"{side}Stats:min {_num(s.min)} max {_num(s.max)} mean {_num(s.mean)} std {_num(s.std)} "
                     f"nan {s.nan} inf {s.inf}")
    return "\n".join(lines) + "\n"


def write_detail(d: OpDetail, out_dir, prefix: str | None = None) -> list[Path]:
    """Write `{prefix}_summary.txt`, `{prefix}_absolute_error_topn.csv` and
    `{prefix}_relative_error_topn.csv` into out_dir (created); each file appears complete or not
    at all. Returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    prefix = prefix or file_prefix(d.info)
    paths = []
    summary = out / f"{prefix}_summary.txt"
    write_text(summary, summary_text(d))
    paths.append(summary)
    for m in METRICS:
        path = out / f"{prefix}_{WORDS[m]}_error_topn.csv"
        with atomic_file(path, newline="") as fh:
            csv.writer(fh, lineterminator="\n").writerows(topn_rows(d.top(m), d.layout))
        paths.append(path)
    return paths
