"""Pairing across implementations: two msprobe dumps of programs that are not the same program
(MindSpore against PyTorch, a renamed layer, a new framework version).

Rules, each recorded on the pair it makes (`Pair.how`), strongest first:

- `data_mapping`: msprobe's `-dm` file, `{npu tensor}: {bench tensor}` (data names:
  `Functional.flash_attention_score.4.forward.input.0: NPU.npu_fusion_attention.4.forward.input.0`);
- `layer_mapping`: msprobe's `-lm` file, `{Layer class}: {npu child: bench child}` under `TopLayer`
  (old files: `Cell`); each call's scope (construct.json's module, the call's API name) is rewritten
  through it and the call takes the bench call at that scope, direction and position, as msprobe's
  layer mapping does (its stack.json frame scope included where stack.json is msprobe's older,
  call-keyed form, which is the one msprobe's layer mapping reads);
- `api_mapping`: msprobe's `-am` file, a list of `{ms_api, pt_api, ms_args, pt_args, ms_outputs,
  pt_outputs, ...}`: the API renamed, its arguments and outputs paired position by position (a slot
  the entry leaves out is not compared, as msprobe abandons it);
- `cell_mapping`: msprobe's `-cm` file, `{cell path.Class}: {module path.Class}` on module calls;
- identical data names (the `tensor` rule of mapping.py);
- `name_variants`: the frameworks differ and no file names the pairs: a module call pairs with the
  golden module call whose path is the same once each part is read through a table of the names
  frameworks and model families give one layer (`attention` / `self_attention` / `self_attn`, `qkv` /
  `query_key_value`, `input_norm` / `input_layernorm`, `mlp` / `ffn` ...), the class dropped (`Dense` /
  `Linear`), the same direction and call count, slot for slot where the shapes agree;
- `api_table`: the two dumps' frameworks differ (dump.json's "framework"): MindSpore calls through
  accuscope's MindSpore -> PyTorch table (apitable.py); calls it cannot map are listed by name;
- `structure` (opt-in, `--match structure`): what is left, paired within one module and direction in
  call order, scored on the API, tensor counts, shapes and dtypes; every pair carries its confidence,
  and the doubtful ones (below DOUBTFUL) are listed.

accuscope's own mapping file (`npu_name,golden_name` CSV, or flat `npu_name: golden_name` YAML) still
works as before (mapping.py's `mapping` rule), calls and single tensors (`call:input:1`, an empty golden
name rejecting one: the app's pairs.yaml) first of all; a flat YAML whose keys are msprobe data names is msprobe's
data mapping, one whose keys and values are `path.Class` module names (no direction) its cell mapping.
"""
# lazy: engine.sources.outputfile
from __future__ import annotations

import csv
import json
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache

from accuscope.engine.compare import apitable, gcpause
from accuscope.engine.compare.pair import Pair
from accuscope.engine.sources import msprobe
from accuscope.engine.sources.inputfile import read_user_file
from accuscope.engine.sources.names import parse_tensor_name
from accuscope.engine.sources.tensor import SourceError, Tensor
from accuscope.engine.sources.yamltext import yaml_load

ACCUSCOPE, DATA, LAYER, API, CELL = "accuscope", "data_mapping", "layer_mapping", "api_mapping", "cell_mapping"
TABLE, STRUCTURE, NAMES = "api_table", "structure", "mapping"  # NAMES: mapping.py's rule for the user's own file
VARIANTS = "name_variants"
EXPLICIT = (NAMES, DATA, LAYER, API, CELL)  # rules from a mapping file: msprobe's count rule does not apply to them
RULES = (*EXPLICIT, VARIANTS, TABLE, STRUCTURE)
INFERRED = (VARIANTS, STRUCTURE)  # pairs inferred from names and structure: the user accepts or rejects them (the app's + / -)  # every rule here: pairs that say themselves which slots pair
DOUBTFUL = 0.8  # a structural pair below this confidence is listed as doubtful
MIN_CONFIDENCE = 0.5  # below it, no structural pair is made
WINDOW = 16  # golden calls looked ahead of the last structural pair, per module
TOP_LAYER = "TopLayer"
NO_COUNTERPART = "N/A"  # a data mapping's value for a slot without counterpart (as msprobe's layer mapping writes it)
_DATA_NAME = re.compile(r".+\.(forward|backward)(\.\d+)?\.(input|output|parameters)(\..+)?|.+\.parameters_grad(\.\d+)?\..+")
_DIRECTION = re.compile(r"\.(forward|backward)(\.|$)")


# ------------------------------------------------------------------ YAML (the subset mapping files use)


# ------------------------------------------------------------------ mapping files


@dataclass
class MappingFile:
    """A mapping file as written: accuscope's own names, or one of msprobe's four kinds."""

    kind: str  # ACCUSCOPE, DATA, LAYER, API, CELL
    path: str
    names: dict[str, str] = field(default_factory=dict)  # accuscope, data and cell mappings
    layers: dict = field(default_factory=dict)  # layer mapping, as msprobe nests it
    apis: list[dict] = field(default_factory=list)  # API mapping entries

    def __len__(self) -> int:
        return len(self.names) or sum(len(v) for v in self.layers.values() if isinstance(v, dict)) or len(self.apis)

    @property
    def what(self) -> str:
        return {ACCUSCOPE: "pairs", DATA: "msprobe data-mapping pairs", LAYER: "msprobe layer-mapping rules",
                API: "msprobe API-mapping entries", CELL: "msprobe cell-mapping pairs"}[self.kind]


MAPPING_LIMIT = 1 << 26  # bytes of a mapping file: msprobe's data mapping of 100,000 tensors is 8 MB


def load(path: str) -> MappingFile:
    """The mapping file at `path`, its kind told by its content (SourceError naming the line otherwise).
    Read through the checked opener (a regular file of at most MAPPING_LIMIT bytes, UTF-8): a run reads it
    once and hands what it holds to its rank workers (compare/multirank.py)."""
    text = read_user_file(path, "mapping file", MAPPING_LIMIT)
    if not path.lower().endswith((".yaml", ".yml")):
        return MappingFile(ACCUSCOPE, path, _csv(text, path))
    doc = yaml_load(text, path)
    if isinstance(doc, list):
        entries = [e for e in doc if isinstance(e, dict)]
        if not entries or not all("ms_api" in e and "pt_api" in e for e in entries):
            raise SourceError(f"{path}: a list, but not msprobe's API mapping (each item needs ms_api and pt_api)")
        for e in entries:
            for a, b in (("ms_args", "pt_args"), ("ms_outputs", "pt_outputs"), ("ms_parameters", "pt_parameters"),
                         ("ms_parameters_grad", "pt_parameters_grad")):
                if len(e.get(a) or []) != len(e.get(b) or []):
                    raise SourceError(f"{path}: {e['ms_api']}: {a} and {b} differ in length")
        return MappingFile(API, path, apis=entries)
    if not isinstance(doc, dict):
        raise SourceError(f"{path}: expected a mapping (`npu_name: golden_name`, or msprobe's layer, API, cell or "
                          "data mapping)")
    if doc and all(isinstance(v, dict) or v is None for v in doc.values()):
        layers = {(TOP_LAYER if k == "Cell" else str(k)): {str(a): str(b) for a, b in (v or {}).items()}
                  for k, v in doc.items()}
        return MappingFile(LAYER, path, layers=layers)
    bad = [k for k, v in doc.items() if not isinstance(v, (str, int)) or isinstance(v, bool)]
    if bad:
        raise SourceError(f"{path}: {bad[0]}: expected `npu_name: golden_name` (or msprobe's layer mapping: "
                          "`Class:` over `npu_child: bench_child` lines)")
    names = {str(k): str(v) for k, v in doc.items()}
    if names and all(_DATA_NAME.fullmatch(k) for k in names):
        return MappingFile(DATA, path, names)
    if names and all("." in k and "." in v and not _DIRECTION.search(k) and not _DIRECTION.search(v)
                     and ":" not in k for k, v in names.items()) and all(_is_cell(k) for k in names):
        return MappingFile(CELL, path, names)
    return MappingFile(ACCUSCOPE, path, names)


def _is_cell(name: str) -> bool:
    """`fc1.Dense`, `layers.0.attention.ParallelAttention`: a module path ending in a class name."""
    return name.rsplit(".", 1)[-1][:1].isupper()


def _csv(text: str, path: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for k, row in enumerate(_csv_rows(text, path), 1):
        if not row or (len(row) == 1 and not row[0].strip()) or row[0].lstrip().startswith("#"):
            continue
        if len(row) != 2:
            raise SourceError(f"{path}:{k}: expected `npu_name,golden_name`, got {len(row)} fields")
        key, value = row[0].strip(), row[1].strip()
        if k == 1 and key.lower() in ("npu", "npu_name", "npu_op") and value.lower().startswith("golden"):
            continue  # a header line
        found[key] = value
    return found


def _csv_rows(text: str, path: str) -> Iterator[list[str]]:
    """csv.reader's rows of `text`; what it cannot read (a field past its 128 KB limit) a SourceError naming the line."""
    rows = csv.reader(text.splitlines())
    try:
        yield from rows
    except csv.Error as exc:
        raise SourceError(f"{path}:{rows.line_num}: not a CSV line of `npu_name,golden_name` ({exc})") from None


# ------------------------------------------------------------------ pairing


def _paired(t: Tensor, df, g: Tensor, how: str, confidence: float = 1.0, reason: str = "") -> Pair:
    return Pair(t, g, df, g.op, how, reason, confidence)


def _unpaired(t: Tensor, df, reason: str) -> Pair:
    return Pair(t, None, df, df.op_name, "", reason)


@dataclass
class CrossPairs:
    """What the rules above decided, per NPU tensor (by id); tensors absent are left to mapping.py."""

    by_tensor: dict[int, Pair] = field(default_factory=dict)  # the pairs as mapping.py takes them
    frameworks: tuple[str, str] = ("", "")
    unmapped_apis: dict[str, int] = field(default_factory=dict)  # MindSpore API -> calls the table cannot map
    doubtful: list[tuple[str, str, float]] = field(default_factory=list)  # (npu call, golden call, confidence)
    notes: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for m in self.by_tensor.values():
            if m.golden is not None:
                found[m.how] = found.get(m.how, 0) + 1
        return found


def framework(side) -> str:
    """dump.json's "framework" of an msprobe side ("pytorch", "mindspore", "mindtorch"), else as the
    tensor types tell ("" when nothing does)."""
    folder = rank_folder(side)
    if folder is None:
        return ""
    try:
        with open(os.path.join(folder, msprobe.DUMP_JSON), "rb") as fh:
            head = fh.read(msprobe.SNIFF_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""
    m = re.search(r'"framework"\s*:\s*"(\w+)"', head)
    if m:
        return m.group(1)
    m = re.search(r'"type"\s*:\s*"(mindspore|torch)', head)
    return {"mindspore": "mindspore", "torch": "pytorch"}.get(m.group(1), "") if m else ""


def rank_folder(side) -> str | None:
    for df in side.ops:
        for t in df.tensors:
            folder = os.path.dirname(t.source)
            if os.path.basename(folder) == msprobe.DATA_DIR:
                folder = os.path.dirname(folder)
            return folder
    return None


@gcpause.paused
def pair(npu, golden, mapping: MappingFile | None = None, *, structure: bool = False) -> CrossPairs:
    """The cross-implementation pairs of two msprobe sides (see the module docstring)."""
    found = CrossPairs(frameworks=(framework(npu), framework(golden)))
    by_name = {t.tensor_name: t for t in golden.tensors if t.tensor_name}
    decided = found.by_tensor
    if mapping is None:
        mapping = MappingFile("", "")  # no file: kind ""
    kind = mapping.kind
    pinned: set[int] = set()  # NPU tensors decided one by one in accuscope's own file
    if kind == ACCUSCOPE:
        _by_names(npu, golden, mapping, by_name, decided, pinned)
    if kind == DATA:
        for df in npu.ops:
            for t in df.tensors:
                target = mapping.names.get(t.tensor_name)
                if target is not None:
                    g = by_name.get(target)
                    decided[id(t)] = _paired(t, df, g, DATA) if g is not None else \
                        _unpaired(t, df, f"data mapping: {target} (no counterpart)" if target == NO_COUNTERPART
                                  else f"data mapping: no golden {target}")
    elif kind == LAYER:
        calls = layer_mapping(rank_folder(npu), rank_folder(golden), mapping.layers,
                              [df.op_name for df in npu.ops], [df.op_name for df in golden.ops], found.frameworks)
        for df in npu.ops:
            op = df.op_name
            target = calls.get(op)
            if not target:
                reason = f"layer mapping: no golden call at {op}'s scope"
                for t in df.inputs + df.outputs:
                    decided[id(t)] = Pair(t, None, df, op, "", reason)
                continue
            cut = len(op)
            for t in df.inputs + df.outputs:
                suffix = t.tensor_name[cut:]
                g = by_name.get(target + suffix)
                decided[id(t)] = Pair(t, g, df, g.op, LAYER) if g is not None else \
                    Pair(t, None, df, op, "", f"layer mapping: {target} has no {suffix.lstrip('.')}")
    elif kind == API:
        _api_mapping(npu, mapping.apis, by_name, decided)
    elif kind == CELL:
        for df in npu.ops:
            target = cell_rename(df.op_name, mapping.names)
            if target != df.op_name or df.op_name.startswith("Cell."):
                for t in df.tensors:
                    g = by_name.get(target + t.tensor_name[len(df.op_name):])
                    if g is not None:
                        decided[id(t)] = _paired(t, df, g, CELL)
    cross = found.frameworks[0] != found.frameworks[1] and "" not in found.frameworks
    modules = _module_map(npu, golden, cross) if structure or cross and kind in ("", ACCUSCOPE, CELL, API) else {}
    if cross and kind in ("", ACCUSCOPE, CELL, API):
        _by_variants(npu, golden, by_name, decided, pinned)
        _by_table(npu, by_name, decided, found.unmapped_apis, modules)
    if structure:
        _by_structure(npu, golden, decided, found, cross, modules, pinned)
    return found


# one layer's names across frameworks and model families (MindSpore / MindFormers, Megatron, Hugging Face,
# GPT-2 style): each a canonical word; a module path part not listed stands for itself
LAYER_NAMES = {
    "attn": ("attention", "self_attention", "self_attn", "attn", "selfattention"),
    "qkv": ("qkv", "query_key_value", "qkv_proj", "c_attn", "w_qkv", "wqkv"),
    "attn_out": ("proj", "dense", "o_proj", "out_proj", "wo", "attn_out"),
    "norm1": ("input_norm", "input_layernorm", "ln_1", "attention_norm", "norm1", "ln1"),
    "norm2": ("post_attention_norm", "post_attention_layernorm", "ln_2", "ffn_norm", "norm2", "ln2"),
    "final_norm": ("final_norm", "final_layernorm", "norm_f", "ln_f", "final_layer_norm"),
    "head": ("head", "output_layer", "lm_head"),
    "mlp": ("mlp", "ffn", "feed_forward", "feedforward"),
    "up": ("fc1", "dense_h_to_4h", "w1", "up_proj", "c_fc", "linear_fc1"),
    "down": ("fc2", "dense_4h_to_h", "w2", "down_proj", "linear_fc2"),
    "gate": ("gate_proj", "w3", "gate"),
    "layers": ("layers", "layer", "h", "blocks", "block"),
    "embed": ("embedding", "embed_tokens", "wte", "word_embeddings", "tok_embeddings"),
}
_CANONICAL = {name: word for word, names in LAYER_NAMES.items() for name in names}
# a parameter's name in MindSpore -> in PyTorch (a LayerNorm's gamma and beta, an embedding's table)
PARAMETER_NAMES = {"gamma": "weight", "beta": "bias", "embedding_table": "weight", "moving_mean": "running_mean",
                   "moving_variance": "running_var"}
# msprobe's name of a module's record (fullmatch): a call, `Module.layers.0.mlp.Linear.forward.0` (`Cell.` in
# MindSpore), or its weights' gradients, `Module.layers.0.mlp.Linear.parameters_grad` (shards.py reads both)
MODULE_RECORD = re.compile(r"(?:Cell|Module)\.(?P<path>.+)\.(?P<cls>[^.]+)\.(?P<dir>forward|backward|parameters_grad)"
                           r"(?:\.(?P<n>\d+))?")


def module_call(name: str) -> re.Match[str] | None:
    """MODULE_RECORD's match of a module call (forward or backward, with its count); None for anything else."""
    m = MODULE_RECORD.fullmatch(name)
    return m if m is not None and m.group("n") is not None and m.group("dir") != "parameters_grad" else None


def module_path(call: str) -> str | None:
    """`Cell.layers.0.attention.qkv.Dense.forward.0` -> `layers.0.attention.qkv`; None for an API call."""
    m = module_call(call)
    return m.group("path") if m else None


def variant_key(call: str) -> tuple[str, ...] | None:
    """A module call's name as LAYER_NAMES reads it: (canonical path parts ..., direction, count), the
    framework's prefix and the class dropped; None for what is no module call."""
    m = module_call(call)
    if m is None:
        return None
    return (*(_CANONICAL.get(part, part) for part in m.group("path").split(".")), m.group("dir"), m.group("n"))


def _by_variants(npu, golden, by_name: dict[str, Tensor], decided: dict[int, Pair], pinned: set[int]) -> None:
    """The name_variants rule (see the module's text): module calls whose variant_key is one golden
    module call's alone, slot for slot (the same data name after the call's), where the shapes agree."""
    theirs: dict[tuple, list[str]] = {}
    for df in golden.ops:
        key = variant_key(df.op_name)
        if key is not None:
            theirs.setdefault(key, []).append(df.op_name)
    for df in npu.ops:
        key = variant_key(df.op_name)
        found = theirs.get(key) if key is not None else None
        if not found or len(found) != 1:
            continue
        for t in df.tensors:
            if id(t) in decided or id(t) in pinned:
                continue
            slot = t.tensor_name[len(df.op_name):]
            head, _, last = slot.rpartition(".")
            g = by_name.get(found[0] + slot) or (by_name.get(f"{found[0]}{head}.{PARAMETER_NAMES[last]}")
                                                 if head.endswith(".parameters") and last in PARAMETER_NAMES else None)
            if g is not None and tuple(g.shape) == tuple(t.shape):
                decided[id(t)] = _paired(t, df, g, VARIANTS)


def _by_names(npu, golden, mapping: MappingFile, by_name: dict[str, Tensor], decided: dict[int, Pair],
              pinned: set[int]) -> None:
    """accuscope's own file on two msprobe dumps, first of all: a call named there pairs with the golden
    call named (slot for slot); a tensor named there, by its data name or as the table names it
    (`call:input:1`), pairs with the golden tensor named (`call:input:2`, a data name, or a golden call:
    the same slot); an empty golden name leaves the call (or the tensor) unpaired: a pair rejected in
    the app (`decide`). A tensor's own line wins over its call's; the tensors decided one by one are
    `pinned` (the structural rule still pairs the rest of their call)."""
    names = mapping.names
    for df in npu.ops:
        call = names.get(df.op_name)
        for t in df.tensors:
            target, whole = names.get(t.tensor_name), False
            if target is None:
                target = names.get(t.name)
            if target is None:
                target, whole = call, True
                if target is None:
                    continue
            if not whole:
                pinned.add(id(t))
            if target == "":
                decided[id(t)] = _unpaired(t, df, f"no counterpart: rejected in {mapping.path}")
                continue
            named = None if whole else parse_tensor_name(target)
            if named is not None:
                g = golden.find(*named)
            else:
                g = by_name.get(target + t.tensor_name[len(df.op_name):] if whole else target)
                if g is None:  # a golden call: the same slot
                    g = golden.find(target, t.io, t.index)
            decided[id(t)] = _paired(t, df, g, NAMES) if g is not None else \
                _unpaired(t, df, f"{mapping.path}: no golden {target}" + (f" {t.io} {t.index}" if named is None else ""))


def _api_mapping(npu, apis: list[dict], by_name: dict[str, Tensor], decided: dict[int, Pair]) -> None:
    """msprobe's user API mapping: the API renamed, slot k of each listed kind to the entry's slot."""
    slots = {"input": ("ms_args", "pt_args"), "output": ("ms_outputs", "pt_outputs"),
             "parameters": ("ms_parameters", "pt_parameters")}
    entries = {str(e["ms_api"]): e for e in apis}
    for df in npu.ops:
        api = ".".join(df.op_name.split(".")[:2])
        e = entries.get(api)
        if e is None:
            continue
        call = df.op_name.replace(api, str(e["pt_api"]), 1)
        for t in df.tensors:
            parts = t.tensor_name[len(df.op_name):].lstrip(".").split(".", 2)
            slot, position = parts[0], parts[1] if len(parts) > 1 else ""
            ours, theirs = (e.get(k) or [] for k in slots.get(slot, ("", "")))
            target = next((str(b) for a, b in zip(ours, theirs) if str(a) == position), None)
            if target is None:
                decided[id(t)] = _unpaired(t, df, f"API mapping: {e['ms_api']} lists no {slot} {position} "
                                                  "(not compared, as msprobe abandons it)")
                continue
            name = ".".join([call, slot, target, *parts[2:]])
            g = by_name.get(name)
            decided[id(t)] = _paired(t, df, g, API) if g is not None else _unpaired(t, df, f"API mapping: no golden {name}")


def cell_rename(call: str, cells: dict[str, str]) -> str:
    """msprobe's cell mapping on one call name: `Cell.fc1.Dense.forward.0` -> `Module.fc1.Linear.forward.0`
    (the whole `path.Class` looked up, else each entry replaced where it occurs); API calls unchanged."""
    if not re.search(r"\.(forward|backward|parameters_grad)(\.|$)", call) or not call.startswith(("Cell.", "Module.")):
        return call
    renamed = call.replace("Cell", "Module", 1)
    cell = re.split(r"\.(?:forward|backward|parameters_grad)(?:\.|$)", renamed.split(".", 1)[-1])[0]
    new = cells.get(cell)
    if new is None:
        new = cell
        for a, b in cells.items():
            if a in new:
                new = new.replace(a, b, 1)
    return renamed.replace(cell, new, 1) if new != cell else renamed


def translate(call: str) -> tuple[str, ...]:
    """A MindSpore call name as the PyTorch call names it may be, likeliest first (() where the table has
    none): `Mint.matmul.3.forward` -> (`Torch.matmul.3.forward`, ...); `Cell.fc1.Dense.forward.0` ->
    (`Module.fc1.Linear.forward.0`,)."""
    head, _, tail = call.partition(".")
    if head not in ("Cell", "Primitive"):  # `Type.name.rest`: no split of the whole name
        name, _, rest = tail.partition(".")
        return tuple(f"{n}.{rest}" for n in apitable.targets(f"{head}.{name}")) if rest else ()
    parts = call.split(".")
    if parts[0] == "Cell" and len(parts) >= 4:
        k = -3 if parts[-2] in ("forward", "backward") else -2
        parts[k] = apitable.cell_class(parts[k])
        return (".".join(["Module", *parts[1:]]),)
    api, rest = _api(parts)
    return tuple(f"{name}.{rest}" for name in apitable.targets(api)) if rest else ()


def _api(parts: list[str]) -> tuple[str, str]:
    """(`Type.name`, the rest) of an API call's name parts; a Primitive is named by its class
    (`Primitive.matmul.MatMul.0.forward`: `Primitive.MatMul`, `0.forward`)."""
    if parts[0] == "Primitive" and len(parts) >= 5 and parts[2][:1].isupper():
        return f"Primitive.{parts[2]}", ".".join(parts[3:])
    return ".".join(parts[:2]), ".".join(parts[2:])


def _by_table(npu, by_name: dict[str, Tensor], decided: dict[int, Pair], unmapped: dict[str, int],
              modules: dict[str, str]) -> None:
    """The table's names, where the golden call of that name ran in the same module (through the module
    map) with the same shapes: counters count per API on each side, and a MindSpore primitive inside a
    layer (Dense's MatMul) is no call of the PyTorch script's own of the same name."""
    for df in npu.ops:
        tensors = [t for t in df.inputs + df.outputs if id(t) not in decided and t.tensor_name not in by_name]
        if not tensors:
            continue
        op = df.op_name
        names = translate(op)
        if not names:
            if not op.startswith(("Cell.", "Module.")) and not msprobe.is_grads(op):
                api = _api(op.split("."))[0]
                unmapped[api] = unmapped.get(api, 0) + 1
            continue
        module = None  # the golden module this call's module stands for, found on the first hit
        cell, cut = op.startswith("Cell."), len(op)
        for t in tensors:
            suffix = t.tensor_name[cut:]
            for n in names:
                g = by_name.get(n + suffix)
                if g is not None:
                    if module is None:
                        module = _module_of(df)
                        module = modules.get(module, module)
                    if (cell or g.op_type == module) and tuple(g.shape) == tuple(t.shape):
                        decided[id(t)] = Pair(t, g, df, g.op, TABLE)
                    break


def _kind(call: str, translate_it: bool) -> str:
    """What a call is, without where or when: `Torch.matmul`, or a module's class `Linear`."""
    parts = call.split(".")
    if parts[0] in ("Cell", "Module") and len(parts) >= 4:
        cls = parts[-3] if parts[-2] in ("forward", "backward") else parts[-2]
        return apitable.cell_class(cls) if parts[0] == "Cell" else cls
    api = _api(parts)[0]
    if translate_it:
        names = apitable.targets(api)
        return names[0] if names else api
    return api


def direction(call: str) -> str:
    """`forward`, `backward` or `parameters_grad` of a call's name ("" for none)."""
    m = _DIRECTION.search(call)
    return m.group(1) if m else ("parameters_grad" if msprobe.is_grads(call) else "")


def _by_structure(npu, golden, decided: dict[int, Pair], found: CrossPairs, cross: bool,
                  modules: dict[str, str], pinned: set[int]) -> None:
    """The calls no other rule paired, paired in order within their module and direction; a call with
    tensors decided one by one (`pinned`) too, those tensors keeping their decision."""
    used = {id(m.golden) for k, m in decided.items() if m.golden is not None and k not in pinned}
    by_name = {t.tensor_name for t in golden.tensors}
    free_golden: dict[tuple[str, str], list] = {}
    for df in golden.ops:
        if not any(id(t) in used for t in df.tensors):
            free_golden.setdefault((_module_of(df), direction(df.op_name)), []).append(df)
    pointer: dict[tuple[str, str], int] = {}
    npu_kind_cache: dict[str, str] = {}
    for df in npu.ops:
        if any(id(t) in decided and id(t) not in pinned or t.tensor_name in by_name for t in df.tensors):
            continue  # paired (or decided) by a stronger rule
        module = _module_of(df)
        key = (modules.get(module, module), direction(df.op_name))
        candidates = free_golden.get(key)
        if not candidates:
            continue
        start = pointer.get(key, 0)
        kind = npu_kind_cache.setdefault(df.op_name, _kind(df.op_name, cross))
        best, best_score, best_why = -1, 0.0, ""
        for j in range(start, min(len(candidates), start + WINDOW)):
            score, why = _score(df, candidates[j], kind)
            if score > best_score + 1e-9:
                best, best_score, best_why = j, score, why
            if score >= 0.999:
                break
        if best < 0 or best_score < MIN_CONFIDENCE:
            continue
        g_df = candidates[best]
        pointer[key] = best + 1
        confidence = round(best_score, 2)
        if confidence < DOUBTFUL:
            found.doubtful.append((df.op_name, g_df.op_name, confidence))
        theirs = {(t.io, t.index): t for t in g_df.tensors}
        reason = f"structural pair (confidence {confidence:.2f}: {best_why})"
        for t in df.tensors:
            g = theirs.get((t.io, t.index))
            if g is not None and id(t) not in pinned:
                decided[id(t)] = _paired(t, df, g, STRUCTURE, confidence, reason)


def _modules(side, cross: bool) -> list[tuple[str, str]]:
    """(module path, class) of every module a side's forward calls ran, in order of their first call."""
    found: dict[str, str] = {}
    for df in side.ops:
        if not df.op_name.startswith(("Cell.", "Module.")):
            continue
        parts = df.op_name.split(".")
        if len(parts) >= 5 and parts[-2] == "forward":
            path = ".".join(parts[1:-3])
            if path not in found:
                found[path] = _kind(df.op_name, cross)
    return list(found.items())


def _module_map(npu, golden, cross: bool) -> dict[str, str]:
    """NPU module path -> golden module path: the same path where both have it, else the modules of the
    same class and depth in the same order (renamed layers: `attention.qkv` ~ `self_attention.query_key_value`)."""
    ours, theirs = _modules(npu, cross), _modules(golden, False)
    paths = {p for p, _ in theirs}
    found = {p: p for p, _ in ours if p in paths}
    taken = set(found.values())
    free = [(p, c) for p, c in theirs if p not in taken]
    j = 0
    for path, cls in ours:
        if path in found:
            continue
        depth = path.count(".")
        for k in range(j, min(len(free), j + WINDOW)):
            other, other_cls = free[k]
            if other_cls == cls and other.count(".") == depth:
                found[path], j = other, k + 1
                break
    return found


def _module_of(df) -> str:
    return df.tensors[0].op_type if df.tensors else ""


def _score(df, other, kind: str) -> tuple[float, str]:
    """How alike two calls are: the same API (0.5), as many inputs and outputs (0.2), the same shapes
    (0.2) and dtypes (0.1), tensor by tensor."""
    why, score = [], 0.0
    if _kind(other.op_name, False) == kind:
        score += 0.5
        why.append("same API")
    ours, theirs = _signature(df), _signature(other)
    if [k for k, _, _ in ours] == [k for k, _, _ in theirs]:
        score += 0.2
        why.append("as many tensors")
    common = {k: v for k, *v in theirs}
    n = max(len(ours), len(theirs), 1)
    shapes = sum(1 for k, s, _ in ours if k in common and common[k][0] == s) / n
    dtypes = sum(1 for k, _, d in ours if k in common and common[k][1] == d) / n
    score += 0.2 * shapes + 0.1 * dtypes
    why.append(f"shapes {shapes:.0%}, dtypes {dtypes:.0%} alike")
    if shapes < 1 and math.isclose(score, 0.7):
        why.append("shapes differ")
    return score, ", ".join(why)


def _signature(df) -> list[tuple[tuple[str, int], tuple, str]]:
    return [((t.io, t.index), tuple(t.shape), t.dtype_name) for t in df.tensors]


def describe(found: CrossPairs, limit: int = 12, *, counts: bool = True) -> list[str]:
    """The lines a comparison reports about the cross pairs: the rules' counts (unless `counts` is False: the
    comparison counts every rung, leftovers.py), the calls the table cannot map (by name), the doubtful
    structural pairs."""
    lines = []
    a, b = found.frameworks
    rules = found.counts() if counts else {}
    if rules:
        lines.append("paired across implementations: " + ", ".join(f"{how} {n:,}" for how, n in sorted(rules.items()))
                     + (f" ({a} against {b})" if a != b else ""))
    if found.unmapped_apis:
        names = sorted(found.unmapped_apis.items(), key=lambda x: (-x[1], x[0]))
        lines.append(f"{len(names):,} {a} APIs accuscope's {a}-to-{b} table cannot map (a --mapping file, or "
                     "--match structure): " + ", ".join(f"{k} ({n})" for k, n in names[:limit])
                     + (" …" if len(names) > limit else ""))
    if found.doubtful:
        lines.append(f"{len(found.doubtful):,} doubtful structural pairs (confidence < {DOUBTFUL}): " + ", ".join(
            f"{x} ~ {y} ({c:.2f})" for x, y, c in found.doubtful[:limit]) + (" …" if len(found.doubtful) > limit else ""))
    return lines + found.notes


# ------------------------------------------------------------------ msprobe's layer mapping


@dataclass(slots=True)
class _Item:
    name: str
    type_name: str
    state: str  # forward, backward, parameters_grad
    full_scope: str  # the layer path, the framework function (stack.json's frame) and the API
    index: int = -1  # its place among its trie node's calls of its state


_NO_FRAME = ("Cell", "Module", "Primitive", "Jit")


def _item(name: str, parent: str | None, stack: list | None, framework_name: str,
          parent_scopes: dict[str, str]) -> _Item | None:
    """msprobe's layer-mapping view of one call; `parent_scopes` remembers each parent module's scope
    (the calls of one module share it)."""
    parts = name.split(".")
    if len(parts) < 4:
        return None
    head, state, last = parts[0], parts[-2], parts[-1]
    if last == "parameters_grad" or state == "parameters_grad" and last.isdigit():
        k = -2 if last == "parameters_grad" else -3
        type_name, api_name, state, head = parts[k], parts[k - 1], "parameters_grad", "parameters_grad"
        layer = ".".join(parts[:-3])
    elif head in ("Cell", "Module"):
        type_name, api_name = parts[-3], parts[-4]
        layer = ".".join(parts[:-4])
    else:
        type_name = api_name = parts[-3]
        state = last
        if parent:
            scope = parent_scopes.get(parent)
            if scope is None:
                scope = parent_scopes[parent] = ".".join(parent.split(".")[:-3])
            layer = scope
        else:
            layer = TOP_LAYER
    frame = ""
    if head not in _NO_FRAME and isinstance(stack, list) and stack:
        frame = _frame_scope(tuple(str(s) for s in stack), framework_name)
    return _Item(name, type_name, state, ".".join([p for p in (layer, frame, api_name) if p]))


_FRAME_FILES = ("site-packages/torch", "package/torch", "site-packages/mindspore", "package/mindspore")


@lru_cache(maxsize=4096)  # a layer's calls repeat their stacks layer after layer
def _frame_scope(lines: tuple[str, ...], framework_name: str) -> str:
    """The framework function an API was called from (msprobe's frame scope)."""
    ends = ("construct",) if framework_name == "mindspore" else ("in forward,", "in backward,")
    start, end = -1, len(lines)
    for k, line in enumerate(lines):
        if "Template" in line:
            start = k
        elif start >= 0 and any(e in line for e in ends):
            end = k
            break
    frame, entered = None, False
    for line in lines[start + 1:end]:
        if any(f in line.split(",")[0] for f in _FRAME_FILES) and not entered:
            frame = line
        else:
            entered = True
    if not frame:
        return ""
    fields = frame.split(",")
    if len(fields) < 3 or any(s in fields[0] for s in ("msprobe", "MindSpeed")) or \
            any(s in fields[2] for s in ("construct", "__call__")):
        return ""
    words = fields[2].split()
    return words[1] if len(words) > 1 else ""


_PIPELINED = "ParallelTransformer"


def _renumber(items: list[_Item], type_name: str = _PIPELINED, suffix: str = "layers") -> None:
    """msprobe's pass for pipeline stages: a ParallelTransformer's layers numbered from 0 on each side."""
    prefixes = {f"{it.full_scope}.{suffix}" for it in items if it.type_name == type_name}
    for prefix in prefixes:
        pattern = re.compile(rf"^{re.escape(prefix)}\.(\S+?)(?:\.|$)")

        def number(scope: str, pattern=pattern):
            m = pattern.search(scope)
            digits = re.findall(r"\d+", m.group(1)) if m else []
            return int(digits[-1]) if digits else math.inf
        low = min((number(it.full_scope) for it in items), default=math.inf)
        for it in items:
            index = number(it.full_scope) - low
            m = pattern.search(it.full_scope)
            if m and not math.isinf(index):
                it.full_scope = re.sub(rf"^{re.escape(prefix)}\.{re.escape(m.group(1))}", f"{prefix}.{index}",
                                       it.full_scope, count=1)


class _Trie:
    __slots__ = ("type_name", "items", "children")

    def __init__(self, type_name: str):
        self.type_name = type_name
        self.items: dict[str, list[str]] = {}
        self.children: dict[str, _Trie] = {}


def _tree(folder: str | None, calls: list[str] | None = None, fw: str = "") -> tuple[_Trie, list[_Item]]:
    """msprobe's layer tree of one rank folder: `calls` are dump.json's calls in order (read from it
    when not given), `fw` its framework."""
    root = _Trie(TOP_LAYER)
    if folder is None:
        return root, []
    if calls is None:
        doc = _json(os.path.join(folder, msprobe.DUMP_JSON))
        data = doc.get("data") if isinstance(doc, dict) else None
        calls, fw = (list(data), doc.get("framework") or "") if isinstance(data, dict) else ([], "")
    construct = _json(os.path.join(folder, msprobe.CONSTRUCT_JSON))
    stack = _json(os.path.join(folder, msprobe.STACK_JSON))
    if not calls or not construct or not stack:
        return root, []  # msprobe's layer mapping needs both files
    items, named = [], {}
    parent_scopes: dict[str, str] = {}
    backward = pipelined = False
    for name in calls:
        parent = construct.get(name)
        item = _item(name, parent if isinstance(parent, str) else None, stack.get(name), fw, parent_scopes)
        if item is not None:
            items.append(item)
            named[name] = item
            backward = backward or item.state == "backward" or "backward" in name
            pipelined = pipelined or item.type_name == _PIPELINED
    for item in items if backward else ():  # a backward call takes its forward call's scope
        if "backward" not in item.name:
            continue
        parts = item.name.split(".")
        if "backward" in parts[-2:]:
            forward = named.get(".".join(parts[:-2] + [p.replace("backward", "forward") for p in parts[-2:]]))
            if forward is not None:
                item.full_scope = forward.full_scope
    if pipelined:
        _renumber(items)
    nodes: dict[str, _Trie] = {}  # full scope -> its node: a layer's calls share scopes
    for item in items:
        node = nodes.get(item.full_scope)
        if node is None:
            node = root
            for part in item.full_scope.split(".")[1:]:
                child = node.children.get(part)
                if child is None:
                    child = node.children[part] = _Trie(part)
                node = child
            nodes[item.full_scope] = node
        names = node.items.get(item.state)
        if names is None:
            names = node.items[item.state] = []
        item.index = len(names)  # call names are unique: msprobe's last index of the name is this one
        names.append(item.name)
        node.type_name = item.type_name
    return root, items


def _json(path: str):
    try:
        with open(path, "rb") as fh:
            found = msprobe.loads(fh.read())  # orjson where installed
    except (OSError, ValueError, RecursionError):
        return {}
    return found if isinstance(found, dict) else {}


def _rules(layers: dict) -> dict[str, dict[str, list[tuple[str, str, int]]]]:
    """{Class: {npu child: bench child}} as {Class: {first part: [(npu path, bench child, parts)]}},
    longest paths first."""
    rules: dict[str, dict[str, list]] = {}
    for type_name, names in layers.items():
        table = rules.setdefault(type_name, {})
        for key, value in names.items():
            parts = key.split(".")
            table.setdefault(parts[0], []).append((key, value.split("(")[0], len(parts)))
        for entries in table.values():
            entries.sort(key=lambda e: -e[2])
    return rules


def _convert(root: _Trie, full_scope: str, rules) -> str:
    """An NPU call's scope as the bench side names it: each part, walking the NPU tree, renamed by the
    rule of its parent's class where one matches (the longest first; a rule may span several parts)."""
    scope = [TOP_LAYER]
    parts = full_scope.split(".")
    node, i, n = root, 1, len(parts)
    while i < n:
        child = parts[i]
        target, step = child, 1
        table = rules.get(node.type_name)
        if table:
            for origin, renamed, level in table.get(child, ()):
                if level == 1 or ".".join(parts[i: i + level]) == origin:
                    target, step = renamed, level
                    break
        scope.append(target)
        for _ in range(step):
            node = node.children[parts[i]]
            i += 1
    return ".".join(scope)


def _query(root: _Trie, scope: str) -> _Trie | None:
    node = root
    for part in scope.split(".")[1:]:
        child = node.children.get(part)
        if child is None:
            return None
        node = child
    return node


def layer_mapping(npu_folder: str | None, golden_folder: str | None, layers: dict, npu_calls: list[str] | None = None,
                  golden_calls: list[str] | None = None, frameworks: tuple[str, str] = ("", "")) -> dict[str, str]:
    """npu call -> golden call, as msprobe's layer mapping pairs them (calls it cannot place: absent); the
    calls of each side in dump.json's order where the caller has them (else dump.json is read). Each scope
    is converted and looked up once (a dict of them): 100k calls hold far fewer scopes."""
    npu_root, items = _tree(npu_folder, npu_calls, frameworks[0])
    golden_root, _ = _tree(golden_folder, golden_calls, frameworks[1])
    rules = _rules(layers)
    found = {}
    targets: dict[str, _Trie | None] = {}
    for item in items:
        if item.full_scope in targets:
            node = targets[item.full_scope]
        else:
            node = targets[item.full_scope] = _query(golden_root, _convert(npu_root, item.full_scope, rules))
        if node is not None:
            names = node.items.get(item.state)
            if names is not None and item.index < len(names):
                found[item.name] = names[item.index]
    return found


DECISIONS = "pairs.yaml"  # in a task folder: the pairs accepted or rejected in the app


def decide(folder: str | os.PathLike, current: str | None, npu_name: str, golden_name: str | None) -> str:
    """Record one decision in `folder`/pairs.yaml, accuscope's own mapping file: a call's
    (`npu call: golden call`) or one tensor's (`npu call:input:1: golden call:input:1`, the table's tensor
    names); an empty golden name: rejected, no counterpart. The decisions before it and the names of the
    accuscope mapping file the task used (`current`) are kept; the path written. msprobe's mapping files
    are not rewritten: SourceError saying so."""
    from accuscope.engine.sources.outputfile import not_a_link, write_text
    path = os.path.join(not_a_link(folder, "task folder"), DECISIONS)
    names: dict[str, str] = {}
    if current and os.path.exists(current):
        found = load(current)
        if found.kind != ACCUSCOPE:
            raise SourceError(f"{current}: {found.what}: this task pairs by it, and accuscope does not rewrite "
                              f"msprobe's files; add `{npu_name}` to it, or compare with --match structure alone")
        names = dict(found.names)
    names[npu_name] = golden_name or ""
    carried = f"# with the names of {current}\n" if current and os.path.abspath(current) != os.path.abspath(path) \
        else ""
    write_text(path, "# accuscope mapping: pairs decided in the app (+ accept, - reject a call's structural pair;\n"
                     "# = accept, _ reject one tensor's pair); the task's next run reads it (R, or accuscope compare\n"
                     "# --mapping pairs.yaml). `npu call: golden call`, or one tensor: `npu call:input:1: golden\n"
                     "# call:input:2`; an empty golden name (\"\") leaves the call or the tensor unpaired.\n" + carried
               + "".join(f"{json.dumps(k)}: {json.dumps(v)}\n" for k, v in names.items()))
    return path
