"""What a comparison is asked: `CompareSpec`, each of its options declared once, on its field.

A field's `Option` (its metadata, made by `option(...)`) is the one declaration of that option: how it is
given (flag, label, help, the kind of text it takes: compare/inputs.py renders it as `compare`/`run`'s
option and the new-task form's field, and parses and checks it), and how task.json keeps it (under the
field's own name, typed by its kind; paths absolute and relative to the task folder: tasks/taskdoc.py's
`spec_fields` and `TaskDoc.spec` derive both from the fields). Adding an option is one field here.

Light on purpose: task.json's schema reads these declarations where a task is only opened.
"""
from __future__ import annotations

from dataclasses import KW_ONLY, Field, dataclass, field, fields
from typing import Any

from accuscope.engine.compare import polytol
from accuscope.engine.compare.thresholds import Thresholds

FORMAT_OPTIONS = "{format options}"  # in a help text: the formats' options (inputs.py fills it from the registry)
PATH_KINDS = ("dump", "model", "file")  # kept in task.json absolute, and relative to the task folder
JSON_OF_KIND: dict[str, type | tuple[type, ...]] = {  # how task.json holds a value of each kind (else text)
    "names": list, "shape": list, "pick": (str, int), "count": int, "flag": bool, "options": dict,
    "tol": (float, int, dict), "errorstat": (str, dict), "quantile": (float, int, dict)}  # dict: per output
PER_OUTPUT_KINDS = tuple(polytol.PARSE_ONE)  # Polygraphy's `[OUT:]VALUE ...`: one option, several words


@dataclass(frozen=True)
class Option:
    """How one input is given: its flag, the form's label, help, kind (compare/inputs.py's KINDS: how its
    text becomes a value), the form's grey text, the CLI's metavar, where it appears (`group`: sides:
    compare and the form; judging: also run; source: also inspect and convert; path: inspect and
    convert only), whether the form shows it and whether it must be given."""

    flag: str
    label: str
    help: str
    kind: str = "text"
    placeholder: str = ""
    metavar: str | None = None
    group: str = "sides"
    form: bool = True
    required: bool = False

    @property
    def json(self) -> type | tuple[type, ...]:
        """task.json's type for a value of this option."""
        return JSON_OF_KIND.get(self.kind, str)

    @property
    def path(self) -> bool:
        """A path task.json keeps absolute and relative to the task folder."""
        return self.kind in PATH_KINDS


def option(default: Any = None, *args, **kwargs) -> Any:
    """A CompareSpec field given as an option: Option(*args, **kwargs) in its metadata."""
    return field(default=default, metadata={"option": Option(*args, **kwargs)})


@dataclass
class CompareSpec:
    """What to compare. The two sides are positional, everything else by keyword. task.json keeps every
    field declared with an option (tasks/taskdoc.py `spec_fields`; `TaskDoc.spec` reads it back, from any
    accuscope's task.json); the field order is the order `compare --help` and the form show them."""

    npu: str = field(metadata={"option": Option(
        "--npu", "NPU dump", "the side under test: any dump accuscope reads", "dump",
        "Ascend dump folder or file, npy folder, .npz, Polygraphy .json ...", required=True)})
    golden: str = field(metadata={"option": Option(
        "--golden", "golden dump", "the reference side: any dump accuscope reads", "dump",
        "npy folder, .npz, .bin or Polygraphy .json ...", required=True)})
    _: KW_ONLY
    expected: str | None = option(
        None, "--expected", "expected dump", "the third side: the reference run at the candidate's precision (any "
        "dump accuscope reads, named as the golden side: e.g. the framework at fp16 or bf16, or `accuscope dump` of "
        "the reference converted to fp16); each row gets its expected error and the excess of its own over it, and "
        "failing rows within twice the expected error are the precision's own (`accuscope run`: `auto` converts the "
        "reference as the candidate was, fp16 or dynamic int8, or simulates a statically quantized candidate in float "
        "with its own scales, and dumps it)", "dump", "optional: the reference at the candidate's precision (the "
        "precision's own noise)", group="judging")
    shards: str | None = option(
        None, "--shards", "parallel shards", "msprobe dumps of a tensor/pipeline-parallel run (several ranks in a "
        "step): merge each call's shards across its TP group and stitch the PP stages into one run, to compare against "
        "a TP=1 run; `names`: the split from Megatron's class names (ColumnParallelLinear, RowParallelLinear, "
        "VocabParallelEmbedding), or a layout YAML (tp, pp, layers, modules: pattern -> column|row|vocab|replicated); "
        "every merged row says its rule", "shards", "optional: names, or a layout .yaml (TP/PP msprobe dumps)")
    npu_options: dict[str, str] | None = option(
        None, "--npu-option", "NPU options", "a setting of the NPU side's format, NAME=VALUE (repeatable; "
        f"{FORMAT_OPTIONS}; docs/formats.md: what each means)", "options",
        "optional: NAME=VALUE ..., the NPU dump's format options")
    golden_options: dict[str, str] | None = option(
        None, "--golden-option", "golden options", "a setting of the golden side's format, NAME=VALUE (repeatable; "
        f"{FORMAT_OPTIONS})", "options", "optional: NAME=VALUE ..., the golden dump's format options")
    golden_shape: tuple[int, ...] | None = option(
        None, "--shape", "golden shape", "shape of a raw .bin golden file, e.g. 1,3,224,224", "shape",
        "a raw .bin golden only: its shape, e.g. 1,3,224,224", group="source")
    golden_dtype: str | None = option(
        None, "--dtype", "golden dtype", "dtype of a raw .bin golden file, e.g. float32", "dtype",
        "a raw .bin golden only: its dtype, e.g. float32", group="source")
    model: str | None = option(
        None, "--model", "model", "offline model JSON (atc --mode=1) of the NPU side, or the framework model (ONNX, "
        "prototxt) of the golden side, for pairing", "model", "optional: offline-model .json, .onnx or .prototxt for "
        "op mapping")
    npu_model: str | None = option(
        None, "--npu-model", "NPU model", "the NPU side's own model (an offline model JSON, or the converted ONNX)",
        "model", "optional: the NPU side's own model")
    golden_model: str | None = option(
        None, "--golden-model", "golden model", "the golden side's own model (ONNX, prototxt, offline model JSON)",
        "model", "optional: the golden side's own model")
    npu_runner: str | None = option(
        None, "--npu-runner", "NPU runner", "Polygraphy runner of the NPU side (default: the second of a two-runner "
        "file, else the first)", metavar="NAME", form=False)
    golden_runner: str | None = option(
        None, "--golden-runner", "golden runner", "Polygraphy runner of the golden side (default: the first)",
        metavar="NAME", form=False)
    iteration: int = option(0, "--iteration", "iteration", "Polygraphy iteration (default 0)", "count", form=False)
    atol: polytol.PerOutput | None = option(
        None, "--atol", "atol", "judge as Polygraphy's comparator (`polygraphy run --atol A --rtol R "
        "--check-error-stat S`, the same flags): a compared tensor fails exactly when Polygraphy fails it: elemwise, "
        "an element beyond both tolerances; max, mean, median or quantile, that statistic beyond both (Polygraphy's "
        f"defaults {polytol.ATOL:g}, {polytol.RTOL:g}, {polytol.STAT}; any of these flags turns it on). Each takes "
        "Polygraphy's per-output form too: a default and OUTPUT:VALUE for an output of its own, space-separated, "
        "e.g. --atol 1e-3 logits:1e-2", "tol", "optional: Polygraphy's --atol, e.g. 1e-3",
        metavar="[OUT:]A", group="judging")
    rtol: polytol.PerOutput | None = option(
        None, "--rtol", "rtol", "Polygraphy's relative tolerance, |npu - golden| / |golden| (see --atol)", "tol",
        "optional: Polygraphy's --rtol, e.g. 1e-3", metavar="[OUT:]R", group="judging")
    check_error_stat: polytol.PerOutput | None = option(
        None, "--check-error-stat", "error statistic", f"Polygraphy's error statistic: {', '.join(polytol.STATS)} "
        "(see --atol)", "errorstat", f"optional: {' | '.join(polytol.STATS)} (Polygraphy's --check-error-stat)", metavar="[OUT:]STAT", group="judging")
    error_quantile: polytol.PerOutput | None = option(
        None, "--error-quantile", "error quantile", "Polygraphy's quantile for --check-error-stat quantile, from 0 to "
        f"1 (its default {polytol.QUANTILE:g}; see --atol)", "quantile",
        "optional: Polygraphy's --error-quantile, e.g. 0.95", metavar="[OUT:]Q", group="judging", form=False)
    no_shape_check: bool = option(
        False, "--no-shape-check", "no shape check", "as Polygraphy's --no-shape-check: outputs whose shapes differ "
        "are compared after Polygraphy reshapes (or permutes) the golden one to the NPU one's shape, instead of "
        "failing (see --atol)", "flag", "yes or no (default no): Polygraphy's --no-shape-check", group="judging", form=False)
    mapping: str | None = option(
        None, "--mapping", "mapping file", "file pairing names no rule can know: npu_name,golden_name per line (CSV) "
        "or npu_name: golden_name (YAML), op or tensor names; or msprobe's own mapping files as written (layer -lm, "
        "API -am, cell -cm, data -dm YAML), for two msprobe dumps", "file",
        "optional: npu_name,golden_name per line, or msprobe's layer/API/cell/data mapping YAML", group="judging")
    match: str | None = option(
        None, "--match", "match", "msprobe dumps: `structure` also pairs what no name, API table or mapping file "
        "pairs, by module, call order, shapes and dtypes (each such pair marked `structure` with its confidence; the "
        "doubtful ones listed)", "match", "optional: structure (default: names only)", group="judging")
    op_range: str | None = option(
        None, "--range", "range", "start,end,step over op sequence ids (end -1 = last)", "range",
        "optional: start,end,step over op sequence ids, e.g. 1,-1,1", group="judging")
    ops: list[str] | None = option(
        None, "--ops", "ops", "comma-separated op names to compare", "names", "optional: comma-separated op names",
        group="judging")
    custom_dir: str | None = option(
        None, "--custom-algorithms", "custom algorithms", "folder with algorithm/alg_<Name>.py metric plugins",
        "plugins", "optional: folder with algorithm/alg_<Name>.py plugins", group="judging")
    algorithms: list[str] | None = option(
        None, "--algorithms", "algorithms", "comma-separated metrics (short keys, CSV names or plugin names); "
        "default: all, plugins included", "names", group="judging", form=False)
    pick: str | int = option(
        "newest", "--pick", "pick", "which dump of an op dumped several times: newest (default), oldest, or a "
        "0-based index", "pick", "optional: newest (default), oldest or an index", group="source")
    run: str | None = option(
        None, "--run", "run folder", "NPU dump run folder under PATH (time/device/model/model_id/data_index)", "text",
        "optional: the NPU dump's run folder, when it holds several", metavar="FOLDER", group="source")
    step: str | None = option(
        None, "--step", "step", "msprobe dump: the step folder (0 or step0) when it holds several", "step",
        "optional, msprobe: one step (empty with rank empty: every rank of a step/rank tree)", group="source")
    rank: str | None = option(
        None, "--rank", "rank", "msprobe dump: the rank folder (3, rank3 or proc1234) when it holds several", "rank",
        "optional, msprobe: one rank", group="source")
    stats_only: bool = option(
        False, "--stats-only", "statistics only", "msprobe dump: compare only the Max/Min/Mean/Norm (and CRC-32) its "
        "dump.json records; no tensor file is read", "flag", "yes or no (default no)", group="source")
    # what the judging inputs make (compare/inputs.py `thresholds_from`): --threshold, --tolerance, --atol ...
    thresholds: Thresholds = field(default_factory=Thresholds)


def options() -> list[tuple[Field, Option]]:
    """Every CompareSpec field declared with an option, and its Option, in declaration order."""
    return [(f, f.metadata["option"]) for f in fields(CompareSpec) if "option" in f.metadata]
