"""What a comparison compares: the two sides and every option, as the user gave them (CompareSpec).

Its own module, below comparison.py: the modules the comparison runs (expected.py, polytol.py) read
a spec without importing the comparison back."""
from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field

from accuscope.engine.compare.thresholds import Thresholds


@dataclass
class CompareSpec:
    """What to compare. The two sides are positional, everything else by keyword. task.json keeps
    it as `tasks.taskdoc.spec_fields` writes it; `TaskDoc.spec` reads that back (from any
    accuscope's task.json)."""

    npu: str  # the side under test: any source accuscope reads (sources.FORMATS)
    golden: str  # the reference side: any source too
    _: KW_ONLY
    model: str | None = None  # an offline model (for the NPU side) or a framework model (golden side)
    algorithms: list[str] | None = None  # short keys, CSV names or plugin names; None = all
    op_range: str | None = None
    ops: list[str] | None = None
    custom_dir: str | None = None
    thresholds: Thresholds = field(default_factory=Thresholds)
    pick: str | int = "newest"
    run: str | None = None
    golden_shape: tuple[int, ...] | None = None  # a raw .bin golden file's shape and dtype
    golden_dtype: str | None = None
    npu_model: str | None = None  # each side's own model, when both are given
    golden_model: str | None = None
    mapping: str | None = None  # the user's npu_name,golden_name file
    npu_runner: str | None = None  # Polygraphy runners and iteration
    golden_runner: str | None = None
    iteration: int = 0
    step: str | None = None  # msprobe step and rank folders (one each; several: an error listing them)
    rank: str | None = None
    stats_only: bool = False  # compare the statistics dump.json records, never the tensor files
    match: str | None = None  # "structure": pair what no name or mapping file pairs by module, order, shapes
    shards: str | None = None  # shards.SHARDS_BY_NAMES or a layout file: merge a parallel run's ranks into one (compare/shards.py)
    expected: str | None = None  # the third side: the reference at the candidate's precision (compare/expected.py)
    npu_options: dict[str, str] | None = None  # each side's format options, text by name (sides.registry.Option)
    golden_options: dict[str, str] | None = None
    atol: float | None = None  # Polygraphy's rule (compare/polytol.py): its tolerances and error statistic
    rtol: float | None = None
    check_error_stat: str | None = None
