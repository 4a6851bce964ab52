"""The registry of what accuscope reads: every dump format and model format, detected by content.

Every command and screen that takes a path asks here (`detect`, `open_side`, `open_source`), so a
format is added in one place: one `Format` entry with a `sniff` that looks at the path's content,
its reader module (`reader`, a `sources.reader.Reader`: every dump format has one; a model format
names its `loader` instead, returning its Graph), what it does that the rest of the code asks about
(a dump format's `caps`, sides/capabilities.py; what a model format's graphs are, `model`,
graphs/capabilities.py, carried by each Graph), and the `options` a user can set for it (each an
`Option`: `compare --npu-option/--golden-option NAME=VALUE`, `inspect`/`convert --option`, the
new-task form's option fields; all rendered from these declarations). Dump formats may stand on
either side of a comparison (`open_side`); model formats are graphs (`load_graph`).

Detection runs once per path: `detect` keeps each answer under the path's resolved name and its
mtime (and size), so the commands, the comparison and the form that each ask about one path read
its content once (tests/cli/test_formatoptions.py counts the sniffs of a compare; a path changed within
a clock tick of its sniff is sniffed again).

Every path is sniffed by the formats before its own, so a format's module is imported only where its
path is: one found after the npy folder in FORMATS (tpu-mlir's npz, Polygraphy's, the model graphs)
when its sniff or reader runs, one before it (Ascend, msprobe, MindSpore, ATB dumps) when its reader
runs, its sniff reading names and headers without it (sources/sniffs.py; names.find_runs). `compare` on
two npy folders loads none of them (~20M instructions of its start-up; benchmarks/bench_startup.py).
A format's kind is its entry's (`Format.kind`: a source's `.kind`, task.json's `sides`); the names the
code compares against are spelled in `sources.kinds` and the entries of those formats use them, while a
format no code names (one that behaves by what it declares) spells its kind on its entry alone. Each reader
module is typed `Reader` here, so mypy holds it to the protocol.
"""
# lazy: engine.graphs.caffegraph, engine.graphs.gegraph, engine.graphs.irgraph, engine.graphs.mlirgraph,
# lazy: engine.graphs.modelfile, engine.graphs.msprobegraph, engine.graphs.omgraph, engine.graphs.onnxgraph,
# lazy: engine.graphs.tflitegraph, engine.sources.atb, engine.sources.mindspore, engine.sources.msprobe,
# lazy: engine.sources.npudump, engine.sources.npyfolder, engine.sources.npzfile, engine.sources.polygraphy,
# lazy: engine.sources.ptfolder, engine.sources.rawfile, engine.sources.rknn, engine.sources.tpumlir
from __future__ import annotations

import os
import re
import stat
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import TYPE_CHECKING, Any

from accuscope.engine.graphs.capabilities import ModelCapabilities
from accuscope.engine.sides.capabilities import NO_CAPABILITIES, Capabilities
from accuscope.engine.sides.side import Side, own_model
from accuscope.engine.sources import kinds, sniffs
from accuscope.engine.sources.golden import PICKS, PT_SUFFIXES, GoldenDump
from accuscope.engine.sources.inputfile import require_regular, shared_listings, user_path
from accuscope.engine.sources.rawfile import SUFFIXES as RAW_SUFFIXES
from accuscope.engine.sources.tensor import SourceError

if TYPE_CHECKING:  # graphs.graph comes with the first model (the model formats' loaders), npudump with the first
    # Ascend dump (`_ascend`)
    from accuscope.engine.graphs.graph import Graph
    from accuscope.engine.graphs.modelfile import Loader
    from accuscope.engine.sources.npudump import NpuDump
    from accuscope.engine.sources.reader import Reader  # the protocol, for mypy only

    Source = NpuDump | GoldenDump | Graph


@dataclass(frozen=True)
class Option:
    """One setting of one format, passed to its reader as the keyword `name` (atb.read(round=...)).
    `parse` turns the user's text into the value (ValueError saying what is wrong)."""

    name: str
    help: str
    parse: Callable[[str], Any] = str
    metavar: str = "VALUE"
    path: bool = False  # a file name: kept absolute in task.json (`absolute_options`)


@dataclass(frozen=True)
class Format:
    """One format. A dump format names its reader module (`reader`: imported when called) and is opened
    through it (`_dialect`: a GoldenDump of what `read` returns) unless it gives its own `open` (Ascend's
    op records, RKNN's model shapes); a model format names its loader (`loader`: imported when called)
    and declares what its graphs are (`model`), and is opened to a Graph carrying that (`_graph_opener`)."""

    kind: str  # its name: a source's kind, task.json's; from sources.kinds where code compares against it
    what: str  # how a user would name it, for messages
    sniff: Callable[[str], bool]
    open: Callable[..., Any] = None  # type: ignore[assignment]  # set from `reader` or `loader` when not given
    reader: Callable[[], Reader] | None = None  # the format's reader module (imported when called); every dump format's
    options: tuple[Option, ...] = ()  # what a user may set for this format
    empty_ok: bool = False  # a source of no tensors is one (a Polygraphy iteration without outputs), not a SourceError
    caps: Capabilities = NO_CAPABILITIES  # what the rest of the code asks of a dump format
    loader: Callable[[], Loader] | None = None  # a model format's loader (imported when called): path -> Graph
    model: ModelCapabilities | None = None  # a model format's: what its graphs are (Graph.caps); None: dumped tensors

    def __post_init__(self):
        if (self.loader is None) != (self.model is None):
            raise TypeError(f"format {self.kind}: a model format gives its loader and what its graphs are (model=)")
        if self.open is None:
            if self.loader is not None and self.model is not None:
                object.__setattr__(self, "open", _graph_opener(self.kind, self.loader, self.model))
            elif self.reader is None:
                raise TypeError(f"format {self.kind}: give its reader (a dump format) or its loader (a model)")
            else:
                object.__setattr__(self, "open", _dialect(self.kind, self.reader, self.empty_ok))

    @property
    def is_model(self) -> bool:
        """A model format (a graph), not dumped tensors."""
        return self.model is not None

    def option(self, name: str) -> Option:
        found = next((o for o in self.options if o.name == name), None)
        if found is None:
            takes = (f"its options: {', '.join(o.name for o in self.options)}" if self.options
                     else "it takes none")
            raise SourceError(f"{self.kind} has no option {name!r} ({takes})")
        return found


def _suffix(*suffixes: str) -> Callable[[str], bool]:
    return lambda path: os.path.isfile(path) and path.lower().endswith(suffixes)


def _npudump() -> Reader:
    from accuscope.engine.sources import npudump
    return npudump


def _npyfolder() -> Reader:
    from accuscope.engine.sources import npyfolder
    return npyfolder


def _ptfolder() -> Reader:
    from accuscope.engine.sources import ptfolder
    return ptfolder


def _npzfile() -> Reader:
    from accuscope.engine.sources import npzfile
    return npzfile


def _rawfile() -> Reader:
    from accuscope.engine.sources import rawfile
    return rawfile


def _msprobe() -> Reader:
    from accuscope.engine.sources import msprobe
    return msprobe


def _mindspore() -> Reader:
    from accuscope.engine.sources import mindspore
    return mindspore


def _atb() -> Reader:
    from accuscope.engine.sources import atb
    return atb


def _tpumlir() -> Reader:
    from accuscope.engine.sources import tpumlir
    return tpumlir


def _rknn() -> Reader:
    from accuscope.engine.sources import rknn
    return rknn


def _rknn_open(path: str, model: str | None = None, **o) -> GoldenDump:
    """An RKNN snapshot side; `model`: its layers read flat from .txt take the model's tensor shapes (read
    here: the graphs sit above the sources)."""
    if model:
        st = os.stat(model)
        o["shapes"] = _static_shapes(os.path.realpath(model), st.st_mtime_ns, st.st_size)
    return _dialect(kinds.RKNN, _rknn)(path, model=model, **o)


@lru_cache(maxsize=4)
def _static_shapes(model: str, _mtime_ns: int, _size: int) -> dict[str, tuple[int, ...]]:
    """A model's tensors (its inputs included) whose shapes are known to the last dimension (each side of a
    comparison asks: read once)."""
    graph = load_graph(model)
    pairs = [p for node in graph.nodes for p in (*zip(node.inputs, node.input_shapes), *zip(node.outputs, node.output_shapes))]
    return {tensor: tuple(shape) for tensor, shape in pairs
            if shape is not None and all(isinstance(d, int) and d >= 0 for d in shape)}


def _polygraphy() -> Reader:
    from accuscope.engine.sources import polygraphy
    return polygraphy


def _polygraphy_runners(path: str) -> list[str]:
    from accuscope.engine.sources import polygraphy
    return [name for name, _ in polygraphy.runners(path)]


def _tpu_outputs(names: list[str]) -> set[str]:
    from accuscope.engine.sources import tpumlir
    return tpumlir.network_outputs(names)


def _msprobe_modules(path: str, step=None, rank=None) -> Graph:
    from accuscope.engine.graphs.msprobegraph import load_msprobe
    return load_msprobe(path, step, rank)


def _is_run_results(path: str) -> bool:
    return _polygraphy().sniff(path)


def _gegraph():
    from accuscope.engine.graphs import gegraph
    return gegraph


def _mlirgraph():
    from accuscope.engine.graphs import mlirgraph
    return mlirgraph


def _onnx() -> Loader:
    from accuscope.engine.graphs.onnxgraph import load_onnx
    return load_onnx


def _om() -> Loader:
    from accuscope.engine.graphs.omgraph import load_om_json
    return load_om_json


def _ge_graph() -> Loader:
    return _gegraph().load_ge_graph


def _mlir() -> Loader:
    return _mlirgraph().load_mlir


def _caffe() -> Loader:
    from accuscope.engine.graphs.caffegraph import load_prototxt
    return load_prototxt


def _openvino_ir() -> Loader:
    from accuscope.engine.graphs.irgraph import load_ir
    return load_ir


def _tflite() -> Loader:
    from accuscope.engine.graphs.tflitegraph import load_tflite
    return load_tflite


def _graph_opener(kind: str, loader: Callable[[], Loader], caps: ModelCapabilities) -> Callable[..., Graph]:
    """A model format's opener: its loader (imported on its first model, `loader()`), the graph carrying
    what the format declares it is (`Graph.caps`). Options meant for dumps (pick, run, shape ...) do not apply."""
    def open_(path: str, **_dump_options) -> Graph:
        from accuscope.engine.graphs.modelfile import load_model
        graph = load_model(loader(), kind, path)
        graph.caps = caps
        return graph
    return open_


_NOT_READER_OPTIONS = ("pick", "runner", "run")  # the source's (which version, which run) and `side`'s


def reader_keywords(o: Mapping[str, Any]) -> dict[str, Any]:
    """What a reader's `read` and `describe` are given of a side's settings: the format's own options
    and the selectors the user set (msprobe's step, rank, stats_only; a raw file's shape, dtype; a
    Polygraphy iteration ...), `runner` as `side` (the part of a file holding one of several runs: a
    Polygraphy runner, tpu-mlir's actual/desired); not which version or run folder the source keeps
    (pick, run), and nothing left unset."""
    keywords = {k: v for k, v in o.items() if v is not None and k not in _NOT_READER_OPTIONS}
    if o.get("runner"):
        keywords["side"] = o["runner"]
    return keywords


def _dialect(kind: str, load: Callable[[], Reader], empty_ok: bool = False) -> Callable[..., GoldenDump]:
    """A reader (module.read -> tensors in execution order, problems) as a source of `kind` (its entry's), its
    module from `load()` when a path is opened; `pick` chooses among several versions of a tensor (newest, oldest)."""
    def open_(path: str, **o) -> GoldenDump:
        entries, problems = load().read(path, **reader_keywords(o))
        if not entries and not empty_ok:
            raise SourceError(f"{path}: no tensors in this {kind} source"
                              + (f" ({problems[0].message})" if problems else ""))
        pick = o.get("pick")
        return GoldenDump(path, kind, entries, problems, pick if pick in PICKS else "newest")
    return open_


def _ascend(path: str, **o) -> NpuDump:
    """An Ascend side: its op records as the dump files hold them (`NpuDump`), of the run and version chosen."""
    from accuscope.engine.sources.npudump import open_npu_dump
    return open_npu_dump(path, pick=o.get("pick", "newest"), run=o.get("run"))


# names that say what a file is: a file named otherwise may still be a model, known by its content
_NAMED = (".onnx", ".xml", ".tflite", ".json", ".prototxt", ".pbtxt", ".mlir", ".om", ".npy", ".npz", ".pt", ".pth", *RAW_SUFFIXES)
# a line's own leading blanks: `^\s*` ran on over the blank lines after it, from each of them (4 KB: 0.2 s)
_CAFFE_LINE = re.compile(rb"^[^\S\n]*(layers?|input)\s*[{:]", re.MULTILINE)


def _unnamed_head(path: str) -> bytes | None:
    """The first 4 KiB of a file whose name says nothing of its format (`model_json`, `deploy.txt`), for
    a model format to know it by; None for a folder or a file named as a format names its files."""
    if not os.path.isfile(path) or path.lower().endswith(_NAMED):
        return None
    with open(path, "rb") as fh:
        return fh.read(4096)


def _is_om_json(path: str) -> bool:
    """An offline-model JSON: a .json file that is no Polygraphy RunResults, or an unnamed file of JSON."""
    if _suffix(".json")(path):
        return not _is_run_results(path)
    head = _unnamed_head(path)
    return head is not None and head.lstrip().startswith(b"{") and not _is_run_results(path)


def _is_openvino_ir(path: str) -> bool:
    """An OpenVINO IR: a .xml file whose root element is <net>."""
    if not _suffix(".xml")(path):
        return False
    from accuscope.engine.graphs.irgraph import sniff
    with open(path, "rb") as fh:
        return sniff(fh.read(4096))


def _is_tflite(path: str) -> bool:
    """A TFLite / LiteRT flatbuffer: a .tflite file (its reader says what is wrong with one that is none),
    or an unnamed file with `TFL3` at byte 4."""
    if _suffix(".tflite")(path):
        return True
    from accuscope.engine.graphs.tflitegraph import sniff
    head = _unnamed_head(path)
    return head is not None and sniff(head)


def _is_prototxt(path: str) -> bool:
    """A Caffe net: a .prototxt/.pbtxt file, or an unnamed text file with `layer {` or `input:` lines."""
    if _suffix(".prototxt", ".pbtxt")(path):
        return True
    head = _unnamed_head(path)
    return head is not None and bool(_CAFFE_LINE.search(head))


def _choice(*words: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in words:
            raise ValueError(f"{text!r}: use {' or '.join(words)}")
        return text
    return parse


def _yes_no(text: str) -> bool:
    word = text.strip().lower()
    if word in ("yes", "y", "true", "1", "on"):
        return True
    if word in ("no", "n", "false", "0", "off"):
        return False
    raise ValueError(f"{text!r}: answer yes or no")


def _file(text: str) -> str:
    return user_path(os.path.expanduser(text), "file")  # a SourceError is the ValueError an option's parse raises


ATB_OPTIONS = (
    Option("round", "the round (token) folder to read, as `inspect` lists them (default: the first)",
           metavar="NAME"),
    Option("when", "after (default): tensors as each op ended; before: as it started", _choice(*sniffs.ATB_WHEN),
           metavar="after|before"),
)
TPU_MLIR_OPTIONS = (
    Option("mlir", "the run's top/tpu .mlir: op types, bf16-ness and result shapes of the npz keys", _file,
           metavar="FILE.mlir", path=True),
    Option("bf16", "yes: every uint16 array is bfloat16 (default: those named _bf16 or typed bf16 in the .mlir)",
           _yes_no, metavar="yes|no"),
)
RKNN_OPTIONS = (
    Option("model", "the model of fixed input shape (ONNX ...; `--model` gives it too): the layers read flat from "
           ".txt take its tensors' shapes", _file, metavar="FILE.onnx", path=True),
)

# Order matters only where two formats could claim one path: the first whose sniff accepts wins.
DEVICE_GRAPH = ModelCapabilities(device_graph=True, converted=True)  # atc's JSON, a GE graph dump: fused on the device

FORMATS: list[Format] = [
    Format(kinds.ASCEND, "Ascend dump (file or any level of the {time}/{device}/{model}/{id}/{index} tree)",
           sniffs.ascend, _ascend, reader=_npudump, caps=Capabilities(device_dump=True)),
    Format(kinds.MSPROBE, "msprobe dump (step{N}/rank{M}/dump.json, dump_tensor_data/*.pt|npy; --step/--rank)",
           sniffs.msprobe, reader=_msprobe,
           caps=Capabilities(step_based=True, pairs_calls=True, own_dump_json=True, modules=_msprobe_modules)),
    Format(kinds.MINDSPORE, "MindSpore kernel dump (rank_{i}/{time}/step_{k}/...{io}.{idx}.{format}.{dtype}.npy)",
           sniffs.mindspore, reader=_mindspore),
    Format(kinds.ATB, "ATB dump ({device}_{pid}/{round}/{id}_{Layer}/.../{in|out}tensorK.bin)", sniffs.atb,
           reader=_atb, options=ATB_OPTIONS),
    Format(kinds.NPY, "npy folder (MindStudio/msit naming, `accuscope dump`, msaccucmp convert; .pt files beside "
           "them read too)", lambda p: _npyfolder().sniff(p), reader=_npyfolder,
           caps=Capabilities(ordered_by_timestamp=True)),
    Format(kinds.PT, "PyTorch tensor folder (torch.save(tensor, 'name.pt'), one file a tensor, named as npy files are; "
           "a dict, list or tuple of tensors as name.key; read without torch)", lambda p: _ptfolder().sniff(p),
           reader=_ptfolder, caps=Capabilities(ordered_by_timestamp=True)),
    Format(kinds.TPU_MLIR_NPZ, "tpu-mlir .npz (model_transform, model_deploy, model_runner, npz_tool: "
           "{tensor}_{OpType} keys, cast suffixes _f32/_f16/_si8..., {name}_actual/_desired)",
           lambda p: _tpumlir().sniff(p), reader=_tpumlir, options=TPU_MLIR_OPTIONS,
           caps=Capabilities(both_sides=("actual", "desired"), network_outputs=_tpu_outputs)),
    Format(kinds.RKNN, "RKNN-Toolkit2 accuracy_analysis snapshot (the folder: golden/, simulator/[, runtime/], "
           "map_name_to_file.txt, error_analysis.txt; or one of its side folders)", lambda p: _rknn().sniff(p),
           _rknn_open, reader=_rknn, options=RKNN_OPTIONS,
           caps=Capabilities(both_sides=(None, "golden"))),
    Format(kinds.NPZ, ".npz archive (tensor name per member)", lambda p: _npzfile().sniff(p), reader=_npzfile,
           empty_ok=True),
    Format(kinds.POLYGRAPHY, "Polygraphy RunResults .json or per-iteration folder (`polygraphy run --save-outputs`)",
           _is_run_results, reader=_polygraphy, empty_ok=True, caps=Capabilities(runs=_polygraphy_runners)),
    Format(kinds.BIN, "raw .bin/.bmrt/.dat with --shape and --dtype", lambda p: _rawfile().sniff(p), reader=_rawfile),
    Format(kinds.ONNX, "ONNX model", _suffix(".onnx"), loader=_onnx,
           model=ModelCapabilities(cuttable=True, runnable=True)),
    Format(kinds.OM, "Ascend offline model as JSON (atc --mode=1)", _is_om_json, loader=_om, model=DEVICE_GRAPH),
    Format(kinds.GE_GRAPH, "GE graph dump (ge_proto_*.txt, or ge_onnx_*.pbtxt: its ONNX text form, read first of the "
           ".pbtxt; DUMP_GE_GRAPH)", lambda p: _gegraph().sniff(p), loader=_ge_graph, model=DEVICE_GRAPH),
    Format(kinds.MLIR, "tpu-mlir .mlir (origin, top or tpu dialect: model_transform, model_deploy)",
           lambda p: _mlirgraph().sniff(p), loader=_mlir, model=ModelCapabilities(converted=True)),
    Format(kinds.CAFFE, "Caffe .prototxt/.pbtxt", _is_prototxt, loader=_caffe, model=ModelCapabilities(cuttable=True)),
    Format(kinds.OPENVINO_IR, "OpenVINO IR .xml (its .bin beside it; ov.save_model, ovc)", _is_openvino_ir,
           loader=_openvino_ir, model=ModelCapabilities(converted=True)),
    Format(kinds.TFLITE, "TFLite / LiteRT .tflite (TFLiteConverter, ai-edge-quantizer, litert-torch)", _is_tflite,
           loader=_tflite, model=ModelCapabilities(converted=True)),
]
DUMP_FORMATS = [f for f in FORMATS if not f.is_model]
BY_KIND = {f.kind: f for f in FORMATS}


def capabilities(kind: str) -> Capabilities:
    """What the format of `kind` declares (none for a kind no format has: "ranks", a task's unknown side)."""
    fmt = BY_KIND.get(kind)
    return fmt.caps if fmt is not None else NO_CAPABILITIES


def pairs_calls(npu_kind: str, golden_kind: str) -> bool:
    """Two sides of these kinds pair call by call: both of one format that declares it (`Capabilities.pairs_calls`:
    two msprobe dumps, crossmap's rules). task.json records it (`pairs_calls`), for the app to read without this."""
    return npu_kind == golden_kind and capabilities(npu_kind).pairs_calls


def open_golden(path: str | os.PathLike, *, shape: Sequence[int] | int | None = None, dtype=None,
                pick: str = "newest", runner: str | None = None, iteration: int = 0) -> GoldenDump:
    """Open a golden dump whose kind its name says (a folder: npy or Polygraphy; .npz, .bin/.bmrt/.dat,
    .json), by that format's reader, not detected by content: for callers that know they hold
    framework data (a re-run's outputs, the demo's values). Any other path goes through `open_source`.

    `shape`/`dtype` are needed (only) for raw .bin/.bmrt/.dat files; `runner`/`iteration` select a
    Polygraphy run (default: first runner, iteration 0); `pick` chooses among several timestamps."""
    path = os.fspath(path)
    if pick not in PICKS:
        raise ValueError(f"pick must be one of {PICKS}, not {pick!r}")
    if not os.path.exists(path):
        raise SourceError(f"{path}: no such file or folder")
    lower = path.lower()
    if os.path.isdir(path):
        kind = kinds.POLYGRAPHY if _is_run_results(path) else kinds.NPY
    elif lower.endswith(".npz"):
        kind = kinds.NPZ
    elif lower.endswith(RAW_SUFFIXES):
        kind = kinds.BIN
    elif lower.endswith(".json"):
        kind = kinds.POLYGRAPHY
    else:
        hint = "; open the folder that holds it" if lower.endswith(".npy") else ""
        raise SourceError(f"{path}: unknown golden file type (expected a folder of .npy files, .npz, "
                          f".bin/.bmrt/.dat, or Polygraphy RunResults .json){hint}")
    if not os.path.isdir(path):
        require_regular(path)
    return BY_KIND[kind].open(path, shape=shape, dtype=dtype, pick=pick, runner=runner, iteration=iteration)


def describe(source: GoldenDump, *, options: Mapping[str, str] | None = None, **common) -> list[str]:
    """Lines a platform dialect adds to `inspect` (the run, rank or round chosen, bf16 kept raw ...),
    for the source opened with these options (as `open_source` takes them)."""
    fmt = BY_KIND.get(getattr(source, "kind", ""))
    if fmt is None or fmt.reader is None:
        return []
    return fmt.reader().describe(source.path, source.tensors, **reader_keywords({**common, **format_options(fmt, options)}))


def accepted(models: bool = True) -> str:
    return "; ".join(f.what for f in FORMATS if models or not f.is_model)


def options_help() -> str:
    """Every format's options, for a flag's help: `atb: round=NAME, when=after|before; ...`."""
    return "; ".join(f"{f.kind}: {', '.join(f'{o.name}={o.metavar}' for o in f.options)}" for f in FORMATS if f.options)


def option_texts(texts: str | Iterable[str] | None) -> dict[str, str]:
    """`NAME=VALUE` texts (the form's one field, separated by spaces, or a repeated flag's values) as
    {name: text}; ValueError on a part without `=`."""
    found: dict[str, str] = {}
    for text in [texts] if isinstance(texts, str) else texts or ():
        for part in text.split() if isinstance(texts, str) else [text]:
            name, sep, value = part.partition("=")
            if not sep or not name.strip():
                raise ValueError(f"{part!r}: expected NAME=VALUE (format options: {options_help()})")
            found[name.strip()] = value.strip()
    return found


def format_options(fmt: Format, texts: Mapping[str, str] | None, path: str = "") -> dict[str, Any]:
    """The reader keywords of the options given for `path` of format `fmt` (text by name), parsed by
    their declarations; SourceError naming an option the format does not have or a bad value."""
    values = {}
    at = f"{path}: " if path else ""
    for name, text in (texts or {}).items():
        try:
            option = fmt.option(name)
        except SourceError as exc:
            raise SourceError(f"{at}{exc}") from None
        try:
            values[name] = option.parse(text)
        except ValueError as exc:
            raise SourceError(f"{at}{fmt.kind} option {name}: {exc}") from None
    return values


def absolute_options(path: str | None, texts: Mapping[str, str] | None) -> dict[str, str] | None:
    """`texts` with the file names among them (Option.path) made absolute, as task.json keeps them:
    a task re-run from another folder finds them. Left as they are where `path` cannot be detected
    (the comparison names that problem)."""
    if not texts or not path:
        return dict(texts) if texts else None
    try:
        fmt = detect(path)
    except SourceError:
        return dict(texts)
    paths = {o.name for o in fmt.options if o.path}
    return {k: os.path.abspath(os.path.expanduser(v)) if k in paths and v else v for k, v in texts.items()}


_DETECTED: dict[tuple[str, int, int], tuple[Format, int]] = {}  # key -> (format, when it was sniffed)
_DETECTED_MAX = 4096
_DETECTED_LOCK = threading.Lock()
RACY_NS = 20_000_000  # file times tick in jiffies (up to 10 ms): a path changed this close to its sniff may change unseen


def detect(path: str | os.PathLike) -> Format:
    """The format of `path`, from its content; SourceError saying what it looks like otherwise.
    Asked again about a path whose resolved name, mtime and size are unchanged, it answers from
    memory without reading the path again; unless the path was modified within RACY_NS of that
    sniff (as git's "racily clean" entries: a change in the same clock tick keeps the mtime)."""
    path = os.fspath(path)
    try:
        st = os.stat(path)
    except OSError:
        raise SourceError(f"{path}: no such file or folder") from None
    if not stat.S_ISDIR(st.st_mode):
        require_regular(path)  # a FIFO named like a dump would block the first sniff forever
    key = (os.path.realpath(path), st.st_mtime_ns, st.st_size)
    known = _DETECTED.get(key)
    if known is not None and st.st_mtime_ns + RACY_NS < known[1]:
        return known[0]
    sniffed_at = time.time_ns()
    found = sniff_format(path)
    with _DETECTED_LOCK:
        if len(_DETECTED) >= _DETECTED_MAX:
            _DETECTED.clear()
        _DETECTED[key] = (found, sniffed_at)
    return found


def sniff_format(path: str) -> Format:
    """The first format whose sniff accepts `path` (reading its content): what `detect` remembers.
    The sniffs share each folder's listing (`shared_listings`): a folder is listed once, not by each."""
    with shared_listings():
        for fmt in FORMATS:
            try:
                if fmt.sniff(path):
                    return fmt
            except OSError as exc:
                raise SourceError(f"{path}: cannot read ({exc.strerror or exc})") from None
    raise SourceError(f"{path}: not a dump, golden data or model file accuscope knows ({_looks_like(path)}); "
                      f"it reads: {accepted()}")


def _looks_like(path: str) -> str:
    if os.path.isdir(path):
        try:
            names = os.listdir(path)
        except OSError as exc:
            return f"folder that cannot be listed ({exc.strerror})"
        if not names:
            return "an empty folder"
        subdirs = [n for n in names if os.path.isdir(os.path.join(path, n))]
        if "task.json" in names:
            return "a task folder (open it with `accuscope open`), not a dump"
        pt = sum(n.lower().endswith(PT_SUFFIXES) for n in names)
        if pt and sniffs.is_msprobe_tensor_folder(path):
            parent = os.path.dirname(os.path.normpath(path))
            if os.path.isfile(os.path.join(parent, "dump.json")):
                return (f"the tensor files of an msprobe dump ({pt} .pt files); give the folder with its dump.json: "
                        f"{parent}")
            return f"the tensor files of an msprobe dump ({pt} .pt files); give its rank folder: {parent}"
        if pt:
            return f"a folder of {pt} .pt files, none of them a regular file"
        return (f"a folder of {len(names)} entries ({len(subdirs)} folders) with no .npy or .pt file and no Ascend "
                f"dump file directly inside")
    name = os.path.basename(path).lower()
    if name.endswith(".npy"):
        return "a single .npy file; give the folder that holds it"
    if name.endswith(".om"):
        return f"a binary offline model; convert it first: atc --mode=1 --om={path} --json=model.json"
    if name.endswith(".json"):
        return "a JSON file that is neither a Polygraphy RunResults nor an offline-model JSON"
    return "a file of unknown kind"


def load_graph(path: str | os.PathLike) -> Graph:
    """The model at `path` as a Graph, read by the loader of the model format `detect` finds (the one
    classification of a path: `inspect`, the form's checks and the comparison agree on it).

    Raises SourceError naming the file and the reason (missing, a folder, a binary offline model, not
    a model, not parseable)."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise SourceError(f"{path}: no such file")
    if os.path.isdir(path):
        raise SourceError(f"{path}: is a directory, not a model file")
    if path.lower().endswith(".om"):
        raise SourceError(f"{path}: binary offline model; convert it first: atc --mode=1 --om={path} "
                          "--json=model.json")
    fmt = detect(path)
    if not fmt.is_model:
        raise SourceError(f"{path}: is dumped tensors ({fmt.what}), not a model file; models: {_models()}")
    return fmt.open(path)


def _models() -> str:
    return "; ".join(f.what for f in FORMATS if f.is_model)


def open_source(path: str | os.PathLike, *, options: Mapping[str, str] | None = None, **common) -> Source:
    """Open `path` as what it is: a dump format's reader, or a model graph.
    common: shape/dtype for raw .bin, pick/run for Ascend dumps, runner/iteration for Polygraphy,
    step/rank/stats_only for msprobe; `options`: the format's own (`Format.options`), as text by name."""
    path = os.fspath(path)
    fmt = detect(path)
    return fmt.open(path, **common, **format_options(fmt, options, path))


def open_side(path: str | os.PathLike, *, options: Mapping[str, str] | None = None, **common) -> Side:
    """Open `path` as one side of a comparison, whatever format it is in (`common` and `options` as
    for `open_source`)."""
    path = os.fspath(path)
    fmt = detect(path)
    if fmt.is_model:
        raise SourceError(f"{path}: is a model ({fmt.what}), not dumped tensors: give it as --model, or "
                          f"dump it first (`accuscope dump {path} --out DIR`, or `accuscope run REF CAND`)")
    model = own_model(path)
    loader = (lambda: load_graph(model)) if model else None
    source = fmt.open(path, **common, **format_options(fmt, options, path))
    return Side(source, fmt.kind, fmt.caps, graph_loader=loader, modules_loader=modules_loader(path, fmt.kind, **common))


def modules_loader(path: str, kind: str, step=None, rank=None, **_options) -> Callable[[], Graph] | None:
    """How to load a dump's module hierarchy (Side.modules) where its format has one (`Capabilities.modules`:
    msprobe's construct.json, of the --step/--rank chosen, else of the dump's first step/rank folder: ranks
    run the same modules); None for other formats."""
    load = capabilities(kind).modules
    return partial(load, path, step, rank) if load is not None else None
