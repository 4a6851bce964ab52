"""The comparison's inputs: `compare`/`run`'s options and the new-task form's fields.

Each is declared once: an option of the comparison on its CompareSpec field (compare/spec.py), the few
that are not one field here (`OTHERS`: the task folder, the thresholds and tolerance that make
`CompareSpec.thresholds`, a path's own options). Its kind says how text becomes a value (`parse`) and
how the form checks it as the user types (`check`). `commands.compare` renders the inputs as argparse
options and the app's new-task form renders them as fields, and both build the spec with `build_spec`:
an option added to CompareSpec appears in both, parsed and checked the same way, and task.json keeps it.
"""
# lazy: engine.compare.crossmap, engine.compare.shards, engine.compare.spec, engine.graphs.oprange,
# lazy: engine.sources.ranks
from __future__ import annotations

import os
import re
from dataclasses import MISSING, dataclass, fields, replace
from pathlib import Path

import numpy as np

from accuscope.engine.compare import polytol
from accuscope.engine.compare.spec import FORMAT_OPTIONS, PER_OUTPUT_KINDS, Option, options
from accuscope.engine.compare.thresholds import TPU_DEFAULTS, Thresholds, parse_assignments, parse_tolerance
from accuscope.engine.sides.registry import absolute_options, detect, format_options, option_texts, options_help
from accuscope.engine.sources.rawfile import SUFFIXES as RAW_SUFFIXES
from accuscope.engine.sources.tensor import SourceError


@dataclass(frozen=True)
class Input(Option):
    """An input: an Option (compare/spec.py) under its name (argparse dest, the CompareSpec field where it
    is one) with its default."""

    name: str = ""
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
    "tol": polytol.parse_tolerance, "errorstat": polytol.parse_stat, "quantile": polytol.parse_quantile,
}

METAVARS = {"dump": "PATH", "model": "MODEL", "file": "FILE", "plugins": "DIR", "out": "TASK_DIR",
            "names": "A,B,...", "count": "N", "range": "START,END,STEP", "shape": "N,C,H,W", "dtype": "DTYPE",
            "pick": "newest|oldest|K", "step": "N", "rank": "M",
            "match": "name|structure", "shards": "names|LAYOUT.yaml", "options": "NAME=VALUE"}

OTHERS: dict[str, tuple[Input, ...]] = {  # inputs that are no one CompareSpec field, by the field they come before
    "golden_shape": (
        Input("--option", "options", f"a setting of this path's format, NAME=VALUE (repeatable; {FORMAT_OPTIONS})",
              "options", group="path", form=False, name="options"),),
    "atol": (
        Input("--out", "task folder", "task folder to write: new, empty, or a task folder (its result is replaced "
              "only once the new one is complete)", "out", "where the task is written", group="judging",
              required=True, name="out"),
        Input("--threshold", "thresholds", "override thresholds, e.g. cos=0.98 (repeatable; off removes one)",
              "thresholds", "NAME=VALUE ..., e.g. cos=0.99 red=0.05 (empty: msit defaults)", metavar="NAME=VALUE",
              group="judging", name="threshold"),
        Input("--tolerance", "tolerance", "judge as tpu-mlir's npz_tool: a row also fails when cos < COS or "
              f"euclid_sim < EUCLID (tpu-mlir's default {','.join(f'{v:.2f}' for v in TPU_DEFAULTS.values())}); "
              "the same pair decides tpu_verdict", "tolerance", "optional: COS,EUCLID as tpu-mlir, e.g. 0.99,0.90",
              metavar="COS,EUCLID", group="judging", name="tolerance")),
}


def _input(name: str, default: object, declared: Option) -> Input:
    """The input of a CompareSpec field declared with `declared`."""
    given = {f.name: getattr(declared, f.name) for f in fields(Option)}
    return _filled(Input(**given, name=name, default=None if default is MISSING else default))


def _filled(item: Input) -> Input:
    """`item` with the formats' options named where its help says FORMAT_OPTIONS."""
    return replace(item, help=item.help.replace(FORMAT_OPTIONS, options_help()))


INPUTS: tuple[Input, ...] = tuple(
    item for f, declared in options()
    for item in (*map(_filled, OTHERS.get(f.name, ())), _input(f.name, f.default, declared)))
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
    from accuscope.engine.compare.spec import CompareSpec
    get = lambda name: values.get(name, BY_NAME[name].default)
    given = {f.name: _spec_value(declared.kind, get(f.name), get(f.name.removesuffix("_options")))
             for f, declared in options()}
    if given["npu"] == given["golden"] and not (given["npu_runner"] and given["golden_runner"]):
        given["npu_runner"], given["golden_runner"] = two_runners(given["npu"], given["npu_runner"],
                                                                  given["golden_runner"])
    thresholds = thresholds_from(get("threshold"), get("tolerance"),
                                 polytol.rule(get("atol"), get("rtol"), get("check_error_stat"),
                                              get("error_quantile"), get("no_shape_check")))
    return CompareSpec(**given, thresholds=thresholds)


def _spec_value(kind: str, value, side: str | None):
    """A parsed value as its CompareSpec field holds it: a dtype by name, a flag true or false, a side's
    format options checked against its format with their paths absolute (`side`: that side's path)."""
    if kind == "dtype":
        return None if value is None else str(value)
    if kind == "flag":
        return bool(value)
    if kind == "options":
        return absolute_options(side, option_texts(value))
    return value


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
    texts = {i.name: polytol.per_output_text(value) if i.kind in PER_OUTPUT_KINDS and value is not None else text(value)
             for i in INPUTS if i.name not in ("out", "threshold", "tolerance")
             for value in [getattr(spec, i.name, None)]}
    texts["threshold"] = spec.thresholds.as_edit()
    return texts


def two_runners(path: str, npu_runner: str | None, golden_runner: str | None) -> tuple[str | None, str | None]:
    """One file on both sides: a Polygraphy file with several runners, the second against the first;
    tpu-mlir's actual against desired; an RKNN snapshot's runtime or simulator against golden (any other source against itself is a plain self-check)."""
    caps = detect(path).caps
    if caps.both_sides is not None:  # (tpu-mlir's actual and desired; an RKNN snapshot's golden)
        return npu_runner or caps.both_sides[0], golden_runner or caps.both_sides[1]
    if caps.runs is None:
        return npu_runner, golden_runner
    names = caps.runs(path)
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
            if fmt.is_model != (item.kind == "model"):
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
