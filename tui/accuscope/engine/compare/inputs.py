"""The comparison's inputs, declared once: `compare`/`run`'s options and the new-task form's fields.

Each `Input` says what one input is (the CompareSpec field it fills, its flag, label, help, kind);
its kind says how text becomes a value (`parse`) and how the form checks it as the user types
(`check`). `commands.compare` renders the declarations as argparse options and the app's new-task
form renders them as fields, and both build the spec with `build_spec`: an option added here
appears in both, parsed and checked the same way.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from accuscope.engine.compare import polytol
from accuscope.engine.compare.thresholds import TPU_DEFAULTS, Thresholds, parse_assignments, parse_tolerance
from accuscope.engine.sides.registry import absolute_options, detect, format_options, option_texts, options_help
from accuscope.engine.sources import kinds
from accuscope.engine.sources.golden import RAW_SUFFIXES
from accuscope.engine.sources.tensor import SourceError


@dataclass(frozen=True)
class Input:
    name: str  # the value's key (argparse dest, CompareSpec field where it is one)
    flag: str  # --npu
    label: str  # the form's label
    help: str
    kind: str = "text"  # see KINDS
    placeholder: str = ""  # the form's grey text
    metavar: str | None = None
    group: str = "sides"  # sides (compare only), judging (compare and run), source (also inspect, convert),
    # path (inspect and convert only)
    form: bool = True  # a field of the new-task form
    required: bool = False
    default: object = None

    @property
    def cli_metavar(self) -> str:
        return self.metavar or METAVARS.get(self.kind) or self.name.upper()

    def parse(self, text: str):
        """The value of this input's text; ValueError naming what is wrong."""
        return KINDS[self.kind](text.strip())


def _names(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise ValueError("expected comma-separated names")
    return names


def _shape(text: str) -> tuple[int, ...]:
    parts = [p.strip() for p in text.replace("x", ",").split(",") if p.strip()]
    if not parts or not all(p.isdigit() for p in parts):
        raise ValueError(f"'{text}' is not a shape like 1,3,224,224")
    return tuple(int(p) for p in parts)


def _dtype(text: str) -> np.dtype:
    try:
        return np.dtype(text)
    except TypeError:
        raise ValueError(f"'{text}' is not a numpy dtype name (float32, float16, int8 ...)") from None


def _pick(text: str) -> str | int:
    if text in ("newest", "oldest"):
        return text
    if text.isdigit():
        return int(text)
    raise ValueError("use newest, oldest or a 0-based index")


def _count(text: str) -> int:
    if not text.isdigit():
        raise ValueError(f"'{text}' is not a whole number (0, 1, ...)")
    return int(text)


def _range(text: str) -> str:
    from accuscope.engine.graphs.oprange import OpRange  # a given --op-range only
    OpRange.parse(text)
    return text


def _assignments(text: str) -> str:
    parse_assignments(text)  # raises on a bad part
    return text


def _yes_no(text: str) -> bool:
    word = text.strip().lower()
    if word in ("yes", "y", "true", "1", "on"):
        return True
    if word in ("", "no", "n", "false", "0", "off"):
        return False
    raise ValueError(f"'{text}': answer yes or no")


def _options(text: str) -> str:
    option_texts(text)  # raises on a part that is not NAME=VALUE; the names are checked against the format
    return text


def _match(text: str) -> str | None:
    word = text.strip().lower()
    if word in ("", "name", "names"):
        return None
    if word == "structure":
        return word
    raise ValueError(f"'{text}': use structure (or name, the default)")


def _shards(text: str) -> str | None:
    """`names` (Megatron's class names say the split) or a layout file; empty: no merge."""
    if not text:
        return None
    return "names" if text.lower() == "names" else os.path.expanduser(text)


def _folder_number(prefix: str):
    """A step or rank folder's number (3, rank3, proc1234 for a rank); a comma list for --cluster."""
    def parse(text: str) -> str:
        for part in text.split(","):
            number = re.sub(r"^(rank|proc)" if prefix == "rank" else r"^step", "", part.strip())
            if not number.isdigit():
                raise ValueError(f"'{part.strip()}' is not a {prefix} number (1 or {prefix}1)")
        return text
    return parse


def _tree_has(item_kind: str, text: str, npu: str) -> tuple[str, bool]:
    """Whether the NPU dump holds a step/rank folder of that number (msprobe's step*/rank*/ tree)."""
    from accuscope.engine.sources.ranks import ranks
    found = ranks(os.path.expanduser(npu)) if npu.strip() else []
    if not found:
        return f"the NPU dump holds no step*/rank*/ folders: leave {item_kind} empty", False
    numbers = {int(re.sub(r"^\D+", "", part.strip())) for part in text.split(",")}
    have = sorted({getattr(r, item_kind) for r in found} - {-1})
    if numbers - set(have):
        return (f"no {item_kind} {', '.join(map(str, sorted(numbers - set(have))))} under the NPU dump (it has "
                f"{', '.join(map(str, have[:12]))})"), False
    return f"✓ {sum(1 for r in found if getattr(r, item_kind) in numbers)} folders", True


KINDS = {  # kind -> text to value (ValueError on bad text)
    "dump": os.path.expanduser, "model": os.path.expanduser, "file": os.path.expanduser,
    "plugins": os.path.expanduser, "out": os.path.expanduser, "text": str, "names": _names,
    "shape": _shape, "dtype": _dtype, "pick": _pick, "count": _count, "range": _range,
    "tolerance": parse_tolerance, "thresholds": _assignments, "flag": _yes_no, "step": _folder_number("step"),
    "rank": _folder_number("rank"), "match": _match, "shards": _shards, "options": _options,
    "tol": polytol.parse_tolerance, "errorstat": polytol.parse_stat,
}

METAVARS = {"dump": "PATH", "model": "MODEL", "file": "FILE", "plugins": "DIR", "out": "TASK_DIR",
            "names": "A,B,...", "count": "N", "range": "START,END,STEP", "shape": "N,C,H,W", "dtype": "DTYPE",
            "pick": "newest|oldest|K", "step": "N", "rank": "M",
            "match": "name|structure", "shards": "names|LAYOUT.yaml", "options": "NAME=VALUE"}

INPUTS: tuple[Input, ...] = (
    Input("npu", "--npu", "NPU dump", "the side under test: any dump accuscope reads", "dump",
          "Ascend dump folder or file, npy folder, .npz, Polygraphy .json ...", required=True),
    Input("golden", "--golden", "golden dump", "the reference side: any dump accuscope reads", "dump",
          "npy folder, .npz, .bin or Polygraphy .json ...", required=True),
    Input("expected", "--expected", "expected dump", "the third side: the reference run at the candidate's "
          "precision (any dump accuscope reads, named as the golden side: e.g. the framework at fp16 or bf16, or "
          "`accuscope dump` of the reference converted to fp16); each row gets its expected error and the excess "
          "of its own over it, and failing rows within twice the expected error are the precision's own (`accuscope "
          "run`: `auto` converts the reference as the candidate was, fp16 or dynamic int8, or simulates a statically quantized candidate in float with its own scales, and dumps it)",
          "dump", "optional: the reference at the candidate's precision (the precision's own noise)", group="judging"),
    Input("shards", "--shards", "parallel shards", "msprobe dumps of a tensor/pipeline-parallel run (several ranks "
          "in a step): merge each call's shards across its TP group and stitch the PP stages into one run, to compare "
          "against a TP=1 run; `names`: the split from Megatron's class names (ColumnParallelLinear, "
          "RowParallelLinear, VocabParallelEmbedding), or a layout YAML (tp, pp, layers, modules: pattern -> "
          "column|row|vocab|replicated); every merged row says its rule", "shards",
          "optional: names, or a layout .yaml (TP/PP msprobe dumps)"),
    Input("npu_options", "--npu-option", "NPU options", "a setting of the NPU side's format, NAME=VALUE "
          f"(repeatable; {options_help()}; README, What it reads: what each means)", "options",
          "optional: NAME=VALUE ..., the NPU dump's format options"),
    Input("golden_options", "--golden-option", "golden options", "a setting of the golden side's format, "
          f"NAME=VALUE (repeatable; {options_help()})", "options",
          "optional: NAME=VALUE ..., the golden dump's format options"),
    Input("options", "--option", "options", "a setting of this path's format, NAME=VALUE (repeatable; "
          f"{options_help()})", "options", group="path", form=False),
    Input("shape", "--shape", "golden shape", "shape of a raw .bin golden file, e.g. 1,3,224,224", "shape",
          "a raw .bin golden only: its shape, e.g. 1,3,224,224", group="source"),
    Input("dtype", "--dtype", "golden dtype", "dtype of a raw .bin golden file, e.g. float32", "dtype",
          "a raw .bin golden only: its dtype, e.g. float32", group="source"),
    Input("model", "--model", "model", "offline model JSON (atc --mode=1) of the NPU side, or the framework "
          "model (ONNX, prototxt) of the golden side, for pairing", "model",
          "optional: offline-model .json, .onnx or .prototxt for op mapping"),
    Input("npu_model", "--npu-model", "NPU model", "the NPU side's own model (an offline model JSON, or the "
          "converted ONNX)", "model", "optional: the NPU side's own model"),
    Input("golden_model", "--golden-model", "golden model", "the golden side's own model (ONNX, prototxt, "
          "offline model JSON)", "model", "optional: the golden side's own model"),
    Input("npu_runner", "--npu-runner", "NPU runner", "Polygraphy runner of the NPU side (default: the second "
          "of a two-runner file, else the first)", metavar="NAME", form=False),
    Input("golden_runner", "--golden-runner", "golden runner", "Polygraphy runner of the golden side "
          "(default: the first)", metavar="NAME", form=False),
    Input("iteration", "--iteration", "iteration", "Polygraphy iteration (default 0)", "count", form=False,
          default=0),
    Input("out", "--out", "task folder", "task folder to write: new, empty, or a task folder (its result is "
          "replaced only once the new one is complete)", "out", "where the task is written", group="judging",
          required=True),
    Input("threshold", "--threshold", "thresholds", "override thresholds, e.g. cos=0.98 (repeatable; off "
          "removes one)", "thresholds", "NAME=VALUE ..., e.g. cos=0.99 red=0.05 (empty: msit defaults)",
          metavar="NAME=VALUE", group="judging"),
    Input("tolerance", "--tolerance", "tolerance", "judge as tpu-mlir's npz_tool: a row also fails when cos < "
          f"COS or euclid_sim < EUCLID (tpu-mlir's default {','.join(f'{v:.2f}' for v in TPU_DEFAULTS.values())}); "
          "the same pair decides tpu_verdict",
          "tolerance", "optional: COS,EUCLID as tpu-mlir, e.g. 0.99,0.90", metavar="COS,EUCLID",
          group="judging"),
    Input("atol", "--atol", "atol", "judge as Polygraphy's comparator (`polygraphy run --atol A --rtol R "
          "--check-error-stat S`, the same flags): a compared tensor fails exactly when Polygraphy fails it: "
          "elemwise, an element beyond both tolerances; max, mean or median, that statistic beyond both "
          f"(Polygraphy's defaults {polytol.ATOL:g}, {polytol.RTOL:g}, {polytol.STAT}; any of the three turns it on)",
          "tol", "optional: Polygraphy's --atol, e.g. 1e-3", metavar="A", group="judging"),
    Input("rtol", "--rtol", "rtol", "Polygraphy's relative tolerance, |npu - golden| / |golden| (see --atol)",
          "tol", "optional: Polygraphy's --rtol, e.g. 1e-3", metavar="R", group="judging"),
    Input("check_error_stat", "--check-error-stat", "error statistic", "Polygraphy's error statistic: "
          f"{', '.join(polytol.STATS)} (see --atol)", "errorstat",
          f"optional: {' | '.join(polytol.STATS)} (Polygraphy's --check-error-stat)", metavar="|".join(polytol.STATS),
          group="judging"),
    Input("mapping", "--mapping", "mapping file", "file pairing names no rule can know: npu_name,golden_name "
          "per line (CSV) or npu_name: golden_name (YAML), op or tensor names; or msprobe's own mapping files "
          "as written (layer -lm, API -am, cell -cm, data -dm YAML), for two msprobe dumps", "file",
          "optional: npu_name,golden_name per line, or msprobe's layer/API/cell/data mapping YAML",
          group="judging"),
    Input("match", "--match", "match", "msprobe dumps: `structure` also pairs what no name, API table or "
          "mapping file pairs, by module, call order, shapes and dtypes (each such pair marked `structure` "
          "with its confidence; the doubtful ones listed)", "match", "optional: structure (default: names only)",
          group="judging"),
    Input("op_range", "--range", "range", "start,end,step over op sequence ids (end -1 = last)", "range",
          "optional: start,end,step over op sequence ids, e.g. 1,-1,1", group="judging"),
    Input("ops", "--ops", "ops", "comma-separated op names to compare", "names",
          "optional: comma-separated op names", group="judging"),
    Input("custom_dir", "--custom-algorithms", "custom algorithms", "folder with algorithm/alg_<Name>.py metric "
          "plugins", "plugins", "optional: folder with algorithm/alg_<Name>.py plugins", group="judging"),
    Input("algorithms", "--algorithms", "algorithms", "comma-separated metrics (short keys, CSV names or "
          "plugin names); default: all, plugins included", "names", group="judging", form=False),
    Input("pick", "--pick", "pick", "which dump of an op dumped several times: newest (default), oldest, or a "
          "0-based index", "pick", "optional: newest (default), oldest or an index", group="source",
          default="newest"),
    Input("run", "--run", "run folder", "NPU dump run folder under PATH (time/device/model/model_id/data_index)",
          "text", "optional: the NPU dump's run folder, when it holds several", metavar="FOLDER", group="source"),
    Input("step", "--step", "step", "msprobe dump: the step folder (0 or step0) when it holds several", "step",
          "optional, msprobe: one step (empty with rank empty: every rank of a step/rank tree)", group="source"),
    Input("rank", "--rank", "rank", "msprobe dump: the rank folder (3, rank3 or proc1234) when it holds several",
          "rank", "optional, msprobe: one rank", group="source"),
    Input("stats_only", "--stats-only", "statistics only", "msprobe dump: compare only the Max/Min/Mean/Norm "
          "(and CRC-32) its dump.json records; no tensor file is read", "flag", "yes or no (default no)",
          group="source", default=False),
)
BY_NAME = {i.name: i for i in INPUTS}


def inputs(*groups: str) -> list[Input]:
    return [i for i in INPUTS if i.group in groups]


def thresholds_from(assignments, tolerance: tuple[float, float] | None,
                    polygraphy: polytol.Rule | None = None) -> Thresholds:
    """msit's defaults, tpu-mlir's tolerance or Polygraphy's rule when given, then the NAME=VALUE texts
    (the form's one field or the CLI's repeated option; ValueError on a bad one)."""
    thresholds = Thresholds()
    if tolerance is not None:
        thresholds.set_tolerance(*tolerance)
    if polygraphy is not None:
        thresholds.set_polygraphy(polygraphy)
    for text in [assignments] if isinstance(assignments, str) else assignments or ():
        thresholds.edit(text)
    return thresholds


def build_spec(values: dict):
    """The CompareSpec of parsed values by input name (absent = default). One file on both sides (a
    Polygraphy JSON with two runners, a tpu-mlir npz) compares its second runner against its first."""
    from accuscope.engine.compare.comparison import CompareSpec
    get = lambda name: values.get(name, BY_NAME[name].default)
    npu, golden = get("npu"), get("golden")
    npu_runner, golden_runner = get("npu_runner"), get("golden_runner")
    if npu == golden and not (npu_runner and golden_runner):
        npu_runner, golden_runner = two_runners(npu, npu_runner, golden_runner)
    dtype = get("dtype")
    return CompareSpec(
        npu=npu, golden=golden, model=get("model"), algorithms=get("algorithms"), op_range=get("op_range"),
        ops=get("ops"), custom_dir=get("custom_dir"), thresholds=thresholds_from(
            get("threshold"), get("tolerance"), polytol.rule(get("atol"), get("rtol"), get("check_error_stat"))),
        pick=get("pick"), run=get("run"), golden_shape=get("shape"), golden_dtype=None if dtype is None else str(dtype),
        npu_model=get("npu_model"), golden_model=get("golden_model"), mapping=get("mapping"),
        npu_runner=npu_runner, golden_runner=golden_runner, iteration=get("iteration"), step=get("step"),
        rank=get("rank"), stats_only=bool(get("stats_only")), match=get("match"), shards=get("shards"),
        expected=get("expected"), npu_options=absolute_options(npu, option_texts(get("npu_options"))),
        golden_options=absolute_options(golden, option_texts(get("golden_options"))), atol=get("atol"),
        rtol=get("rtol"), check_error_stat=get("check_error_stat"))


SPEC_FIELD = {"shape": "golden_shape", "dtype": "golden_dtype"}  # input name -> CompareSpec field, where they differ


def texts_of(spec) -> dict[str, str]:
    """The form's text of each input a spec holds (the inverse of build_spec, for `R` on a task):
    thresholds and tolerance as the edits that make the defaults into the spec's thresholds."""
    def text(value) -> str:
        if value is None:
            return ""
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, (list, tuple)):
            return ",".join(str(v) for v in value)
        if isinstance(value, dict):
            return " ".join(f"{k}={v}" for k, v in value.items())
        return str(value)
    texts = {i.name: text(getattr(spec, SPEC_FIELD.get(i.name, i.name), None)) for i in INPUTS
             if i.name not in ("out", "threshold", "tolerance")}
    texts["threshold"] = spec.thresholds.as_edit()
    return texts


def two_runners(path: str, npu_runner: str | None, golden_runner: str | None) -> tuple[str | None, str | None]:
    """One file on both sides: a Polygraphy file with several runners, the second against the first;
    tpu-mlir's actual against desired; an RKNN snapshot's runtime or simulator against golden (any other source against itself is a plain self-check)."""
    kind = detect(path).kind
    if kind == kinds.TPU_MLIR_NPZ:
        return npu_runner or "actual", golden_runner or "desired"
    if kind == kinds.RKNN:  # the snapshot: the board's run (or the simulator's) against golden
        return npu_runner, golden_runner or "golden"
    if kind != kinds.POLYGRAPHY:
        return npu_runner, golden_runner
    from accuscope.engine.sources import polygraphy
    names = [name for name, _ in polygraphy.runners(path)]
    if len(names) < 2:
        raise SourceError(f"{path}: holds one runner ({', '.join(names)}); give --npu and --golden separately")
    golden_runner = golden_runner or next(n for n in names if n != npu_runner)
    npu_runner = npu_runner or next(n for n in names if n != golden_runner)
    return npu_runner, golden_runner


def _options_on_offer(path: str) -> str:
    """What the form shows under an empty options field: the options the side's format takes, if any."""
    try:
        fmt = detect(os.path.expanduser(path.strip())) if path.strip() else None
    except SourceError:
        return ""
    if fmt is None or not fmt.options:
        return ""
    return f"{fmt.kind} takes: " + " · ".join(f"{o.name}={o.metavar} ({o.help})" for o in fmt.options)


def check(item: Input, text: str, golden: str = "", npu: str = "") -> tuple[str, bool]:
    """(message, ok) for the form, as the user types: what the text is, or what is wrong with it.
    `golden` is the golden field's text (a raw .bin golden needs its shape and dtype), `npu` the NPU
    field's (a step or rank must be one of its folders)."""
    text = text.strip()
    if item.kind in ("shape", "dtype") and not text and golden.strip().lower().endswith(RAW_SUFFIXES):
        return "a raw binary golden file needs its shape and dtype", False
    if item.kind == "options" and not text:
        return _options_on_offer(npu if item.name == "npu_options" else golden), True
    if not text:
        return ("required", False) if item.required else ("", True)
    try:
        value = item.parse(text)
        if item.kind in ("dump", "model"):
            fmt = detect(value)
            if fmt.model != (item.kind == "model"):
                return f"this is {fmt.what}, not {'a model' if item.kind == 'model' else 'dumped tensors'}", False
            return f"✓ {fmt.kind}", True
        if item.kind == "out":
            p = Path(value)
            if p.exists() and not p.is_dir():
                return "a file, not a folder", False
            if p.exists() and not (p / "task.json").exists() and any(p.iterdir()):
                return "exists and is not a task folder", False
            return ("✓ replaces the result of that task" if p.exists() else "✓ new folder"), True
        if item.kind == "file":
            from accuscope.engine.compare.crossmap import load
            found = load(value)
            return f"✓ {len(found):,} {found.what}", True
        if item.kind == "plugins" and not os.path.isdir(os.path.join(value, "algorithm")):
            return "no algorithm/ folder inside", False
        if item.kind == "dtype":
            return f"✓ {value}", True
        if item.kind == "options":
            side = npu if item.name == "npu_options" else golden
            if not side.strip():
                return "give the dump first: its format says which options there are", False
            fmt = detect(os.path.expanduser(side.strip()))
            format_options(fmt, option_texts(value))
            return f"✓ {fmt.kind}: {' '.join(f'{k}={v}' for k, v in option_texts(value).items())}", True
        if item.kind in ("step", "rank"):
            return _tree_has(item.kind, value, npu)
        if item.kind == "flag":
            return ("✓ yes" if value else "✓ no"), True
        if item.kind == "shards":
            from accuscope.engine.compare.shards import load_layout
            layout = load_layout(value)
            return ("✓ Megatron's class names" if not layout.source else
                    f"✓ layout: TP={layout.tp or 'ranks/PP'}, PP={layout.pp}, {len(layout.modules)} module patterns"), True
    except (SourceError, ValueError, TypeError, OSError) as exc:
        return str(exc), False
    return "✓", True
