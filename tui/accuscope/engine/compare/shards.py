"""A tensor- and pipeline-parallel msprobe run read as one run (`--shards`): each call's shards merged across
the ranks of its tensor-parallel (TP) group, the pipeline (PP) stages stitched into one execution order, so
that a TP=N, PP=M dump compares against a TP=1 one call by call.

Ranks: Megatron's order, the TP index varying fastest: rank = stage * TP + tp_index. TP is given in the
layout file, else the rank count divided by a given PP, else read from the ranks: the ranks from rank0 on
that make rank0's module calls (a TP group's ranks make the same ones), PP the rank count over TP. Where rank1
already makes other module calls than rank0, TP=1 and every rank is a pipeline stage, provided each module
outside the `layers` list (embedding, head) is called on one rank only (else the ranks are not the stages of
one run: a SourceError). A rank missing from 0..TP*PP-1 is a SourceError naming the folder.

What is split, and how, comes from the module holding a call (its class in msprobe's call names, or a
pattern of the layout file): `column` (Megatron's ColumnParallelLinear: weight rows and output features
split), `row` (RowParallelLinear: weight columns and input features split, the products partial sums),
`vocab` (VocabParallelEmbedding: vocabulary rows split, out-of-range ids masked). The shard size p is the
module's weight shard (column, vocab: its rows; row: its columns). For each tensor of a call, in this order:

  identical on every rank of the group   (statistics equal in dump.json; the data checked equal when read)
        -> `once`: a replicated tensor, or an output already all-reduced: taken from the first rank
  column / row, a dimension of size p    -> `concat`: along it (a weight's own dimension where its shard is
                                            square: column 0, row 1; where several have size p, the one a
                                            parallel parameter's shard of that shape splits, else the last,
                                            said as guessed)
  column / row, no dimension of size p   -> `sum`: partial products (a row-parallel matmul before its
                                            all-reduce, a column-parallel input gradient)
  vocab, the shape of the ids + hidden   -> `vocab`: each token's row from the rank owning its id (the
                                            masked partial lookups summed; ids: the module's input)
  vocab, any other                       -> not merged: per-rank bookkeeping (masks, local ids)
  outside a parallel module              -> `concat`: the shape of a parallel module's weight or bias shard
                                            along its split (an optimizer's update, a gradient: column and
                                            vocab weights dim 0, row weights dim 1), else along the last
                                            dimension, said as guessed (an elementwise op between a column-
                                            and a row-parallel layer)

A guessed dimension is settled by the other side's shape where a comparison has one (`settle`): the one
dimension along which the shards make that shape, and the row says so.

Statistics-mode dumps merge what is exact: `once` the first rank's; `concat` Max of the maxima, Min of the
minima, Mean by element counts, Norm as the root of the summed squares; `sum` the Mean (the sum of the
means), not Max, Min or Norm; `vocab` nothing. A statistic not derivable is left out (no number rather than a
wrong one) and the row's `conversion` says which; a CRC-32 of a merged tensor is never derivable.

Pipeline stages: each stage's calls split into its forward part (up to its first backward call), its
backward part and its optimizer's calls; the run is the stages' forward parts in stage order, their
backward parts in reverse, then the optimizers'. msprobe counts API calls per process (`Functional.linear.3`),
so API counters are renumbered in that order; a stage numbering its `layers` from 0 again (Megatron) has
them renumbered after the earlier stages' (the layout's `layers` names the list).

The layout file (YAML; every key optional):

    tp: 2                       # ranks per TP group (default: ranks / pp)
    pp: 2                       # pipeline stages (default 1)
    layers: layers              # the module list each stage numbers from 0
    modules:                    # module path or class (fnmatch patterns) -> column | row | vocab | replicated
      "*.linear_qkv": column
      SharedEmbedding: vocab

Every merged tensor records its rule in `conversion` (the result's column), e.g. `TP merge: concat dim 2
of rank0,rank1 (column)`; what cannot be merged keeps its row, not compared, with the reason.
"""
# lazy: engine.graphs.msprobegraph, engine.sides.registry, engine.sides.side
from __future__ import annotations

import fnmatch
import itertools
import math
import os
import re
from dataclasses import dataclass, field
from functools import partial
from typing import cast

import numpy as np

from accuscope.engine.compare.crossmap import MODULE_RECORD
from accuscope.engine.compare.statistics import MERGED, SHARDS_BY_NAMES
from accuscope.engine.graphs.graph import Graph
from accuscope.engine.sources import msprobe
from accuscope.engine.sources.golden import GoldenDump
from accuscope.engine.sources.inputfile import read_user_file
from accuscope.engine.sources.tensor import Problem, SourceError, Tensor, TensorError, replaced
from accuscope.engine.sources.yamltext import yaml_load

COLUMN, ROW, VOCAB, REPLICATED = "column", "row", "vocab", "replicated"
KINDS = (COLUMN, ROW, VOCAB, REPLICATED)
CLASSES = {"ColumnParallelLinear": COLUMN, "RowParallelLinear": ROW, "VocabParallelEmbedding": VOCAB}
ONCE, CONCAT, SUM, BY_VOCAB = "once", "concat", "sum", "vocab"
BOOKKEEPING = "per-rank vocabulary bookkeeping (masks, local ids): no value of the whole run"
LAYOUT_LIMIT = 1 << 20  # bytes of a layout file read
MISSING_NAMED = 8  # missing ranks named in the message saying so
_API = re.compile(r"(?!Module\.|Cell\.)(?P<api>.+)\.(?P<k>\d+)\.(?P<dir>forward|backward)")


@dataclass(frozen=True)
class Layout:
    """How the ranks of a parallel run are arranged and which modules split what."""

    tp: int | None = None
    pp: int = 1
    layers: str = "layers"
    modules: tuple[tuple[str, str], ...] = ()  # (pattern, kind), the file's first, Megatron's classes after
    source: str = ""  # the layout file, "" for the class names only

    def kind(self, path: str, cls: str) -> str:
        """The split of a module, by its path or class name ("" when it is not a parallel module)."""
        for pattern, kind in self.modules:
            if fnmatch.fnmatchcase(path, pattern) or fnmatch.fnmatchcase(cls, pattern):
                return "" if kind == REPLICATED else kind
        return CLASSES.get(cls, "")


def load_layout(spec: str | None) -> Layout:
    """`names` (or empty): Megatron's class names; else a layout file (see the module docstring)."""
    if not spec or spec == SHARDS_BY_NAMES:
        return Layout()
    path = os.fspath(spec)
    doc = yaml_load(read_user_file(path, "layout file", LAYOUT_LIMIT, missing=f"{path}: no such layout file (--shards "
                                   "takes `names` or a YAML file)"), path)
    if not isinstance(doc, dict):
        raise SourceError(f"{path}: expected keys tp, pp, layers, modules")
    unknown = set(doc) - {"tp", "pp", "layers", "modules"}
    if unknown:
        raise SourceError(f"{path}: unknown keys {', '.join(sorted(map(str, unknown)))} (it takes tp, pp, layers, modules)")

    def count(key: str) -> int | None:
        value = doc.get(key)
        if value is None:
            return None
        if type(value) is not int or value < 1:
            raise SourceError(f"{path}: {key}: {value!r} is not a positive whole number")
        return value
    modules = doc.get("modules") or {}
    if not isinstance(modules, dict):
        raise SourceError(f"{path}: modules: expected `pattern: {' | '.join(KINDS)}` lines")
    for pattern, kind in modules.items():
        if kind not in KINDS:
            raise SourceError(f"{path}: modules: {pattern}: {kind!r} is not one of {', '.join(KINDS)}")
    layers = doc.get("layers") or "layers"
    return Layout(count("tp"), count("pp") or 1, str(layers), tuple((str(p), str(k)) for p, k in modules.items()), path)


# ------------------------------------------------------------------ reading the ranks


@dataclass(frozen=True)
class Rank:
    number: int
    folder: str
    tensors: list[Tensor]


def rank_folders(path: str, step: str | int | None = None) -> dict[int, str]:
    """rank number -> folder of the step's ranks; SourceError for a rank folder holding no msprobe dump (its
    shards would be missing from the merge)."""
    chosen = msprobe.of_step(path, step)
    numbered: dict[int, str] = {}
    for _, label, folder in chosen:
        digits = re.fullmatch(r"rank(\d+)", label)
        if digits is None:
            raise SourceError(f"{folder}: not a rank{{N}} folder: a parallel run's ranks are numbered (torch.distributed)")
        numbered[int(digits.group(1))] = folder
    step_dir = os.path.dirname(chosen[0][2])
    try:
        beside = sorted(name for name in os.listdir(step_dir) if re.fullmatch(r"rank\d+", name)
                        and int(name[4:]) not in numbered and os.path.isdir(os.path.join(step_dir, name)))
    except OSError:
        beside = []
    if beside:
        raise SourceError(f"{os.path.join(step_dir, beside[0], msprobe.DUMP_JSON)}: not a dump.json msprobe wrote (and no "
                          f"{msprobe.DATA_DIR}/ beside it): {beside[0]} of the run cannot be read, and its shards "
                          "are needed for the merge")
    return numbered


def arrange(path: str, layout: Layout, step: str | int | None = None) -> list[tuple[int, str]]:
    """The (rank number, folder) of every rank of the step, rank0 first; SourceError for a missing one."""
    numbered = rank_folders(path, step)
    step_dir = os.path.dirname(numbered[min(numbered)])
    total = layout.tp * layout.pp if layout.tp else max(numbered) + 1  # from the file and folder names: bounded below
    absent = total - sum(n < total for n in numbered)
    if absent:  # name the first few missing, never counting to `total` (tp: 1000000000, a folder rank99999999999)
        missing = list(itertools.islice((n for n in range(total) if n not in numbered), MISSING_NAMED))
        need = f"TP={layout.tp} x PP={layout.pp} needs" if layout.tp else "the ranks run"
        raise SourceError(f"{os.path.join(step_dir, f'rank{missing[0]}')}: missing: {need} rank0..rank{total - 1}, "
                          + (f"and {', '.join(f'rank{n}' for n in missing)} {'is' if absent == 1 else 'are'} not there"
                             if absent <= MISSING_NAMED else
                             f"and {absent:,} of them are not there ({', '.join(f'rank{n}' for n in missing)}, ...): "
                             f"{step_dir} holds {len(numbered):,}")
                          + (f" ({layout.source})" if layout.source else ""))
    extra = sorted(n for n in numbered if n >= total)
    if extra:
        raise SourceError(f"{numbered[extra[0]]}: TP={layout.tp} x PP={layout.pp} makes {total} ranks; "
                          f"{', '.join(f'rank{n}' for n in extra)} lie beyond them ({layout.source})")
    return [(n, numbered[n]) for n in range(total)]


def _calls(tensors: list[Tensor]) -> tuple[str, ...]:
    """A rank's module calls, in order: the ranks of one TP group make the same ones, stages others."""
    return tuple(op for op in dict.fromkeys(t.op for t in tensors) if MODULE_RECORD.fullmatch(op))


def stages(ranks: list[Rank], layout: Layout, path: str) -> tuple[list[list[Rank]], str]:
    """The ranks as TP groups, stage by stage (rank = stage * TP + tp_index), and how TP and PP were found.
    TP and PP from the layout; else TP is the ranks from rank0 on that make rank0's module calls (the ranks of
    one TP group make the same calls), and PP the rank count over TP. Where rank1 already makes other module
    calls than rank0, no TP group holds two ranks: TP=1, every rank a pipeline stage (PP = the rank count)."""
    total = len(ranks)
    calls = [] if layout.tp else [_calls(r.tensors) for r in ranks]  # what TP is read from, and checked by
    if layout.tp:
        tp, found = layout.tp, f"tp: {layout.tp} from {layout.source}"
    elif layout.pp > 1:
        tp, found = total // layout.pp, f"pp: {layout.pp} from {layout.source}, TP the {total} ranks over it"
    else:
        tp = next((k for k in range(1, total) if calls[k] != calls[0]), total)
        if tp == 1 and total > 1:
            if not calls[0] or not calls[1]:
                empty = ranks[0] if not calls[0] else ranks[1]
                raise SourceError(f"{empty.folder}: no module calls (Module.* / Cell.*) in its dump.json, so the ranks' "
                                  "TP and PP cannot be read from them: give tp and pp in a layout file")
            _one_pipeline(ranks, layout.layers)
            found = (f"TP=1: rank1 makes other module calls than rank0 (a TP group's ranks make the same ones), "
                     f"so each of the {total} ranks is a pipeline stage")
        else:
            found = (f"TP={tp}: rank0..rank{tp - 1} make the same module calls" + (f", rank{tp} others" if tp < total
                                                                                  else ""))
    if tp < 1 or total % tp or (layout.pp > 1 and total != tp * layout.pp):
        raise SourceError(f"{path}: {total} ranks (rank0..rank{total - 1}) do not divide into TP={tp}"
                          + (f" x PP={layout.pp}" if layout.pp > 1 else "") + (f" ({layout.source})" if layout.source else
                                                                            ": give tp and pp in a layout file"))
    groups = [ranks[s * tp:(s + 1) * tp] for s in range(total // tp)]
    for s, group in enumerate(groups if calls else []):
        odd = [r for r, c in zip(group, calls[s * tp:(s + 1) * tp]) if c != calls[s * tp]]
        if odd:
            raise SourceError(f"{odd[0].folder}: its module calls differ from rank{group[0].number}'s, in the same "
                              f"TP group of {tp} (read from rank0..): give tp and pp in a layout file")
    return groups, found


@dataclass(frozen=True)
class Decision:
    """What the merge did with one tensor of a TP group (`inspect --shards` counts them)."""

    stage: int
    call: str
    tensor: str
    kind: str  # column | row | vocab, "" outside a parallel module
    how: str  # once | concat | sum | vocab, "" not merged
    dim: int
    why: str  # the rule's note, or why it is not merged
    lost: tuple[str, ...] = ()  # the statistics the shards' do not give (statistics mode)


@dataclass
class Merge:
    """A parallel run read and merged: the tensors in one order and what was done to get them."""

    path: str
    layout: Layout
    tp: int
    pp: int
    ranks: int
    found: str  # how TP and PP were found
    tensors: list[Tensor]
    problems: list[Problem]
    decisions: list[Decision]
    stitched: int  # tensors placed by stitching the stages (0 at PP=1)
    renamed: int  # of them, calls renamed (API counters, restarted layer numbers)
    stage_folders: list[str] = field(default_factory=list)  # each stage's first rank (its construct.json)
    names: dict[tuple[int, str], str] = field(default_factory=dict)  # (stage, call) -> the merged run's call
    offsets: list[int] = field(default_factory=list)  # per stage, added to its layer numbers

    def call(self, stage: int, call: str) -> str:
        """A stage's call as the merged run names it (a module call without tensors too: its layer renumbered)."""
        found = self.names.get((stage, call))
        if found is not None:
            return found
        return _layer(call, self.layout.layers, self.offsets[stage]) if stage < len(self.offsets) else call

    @property
    def how(self) -> str:
        return (f"TP={self.tp} x PP={self.pp} of rank0..rank{self.ranks - 1} by "
                + (f"the layout {self.layout.source}" if self.layout.source else "Megatron's class names"))


def merge(path: str, *, shards: str | Layout | None = None, step: str | int | None = None, stats_only: bool = False,
          **_options) -> Merge:
    """Every rank of the step read, each TP group merged, the stages stitched (see the module docstring).
    `shards`: --shards's text, or the Layout it was read as (a run reads its layout file once)."""
    layout = shards if isinstance(shards, Layout) else load_layout(shards)
    problems: list[Problem] = []
    ranks = []
    for number, folder in arrange(os.fspath(path), layout, step):
        tensors, found = msprobe.read(folder, stats_only=stats_only)
        problems += found
        ranks.append(Rank(number, folder, tensors))
    groups, how_found = stages(ranks, layout, os.fspath(path))
    decisions: list[Decision] = []
    moves: list[bool] = []
    names: dict[tuple[int, str], str] = {}
    offsets: list[int] = []
    merged = stitch([merge_group(group, layout, problems, decisions, s) for s, group in enumerate(groups)],
                    layout.layers, moves, names, offsets)
    return Merge(os.fspath(path), layout, len(groups[0]), len(groups), len(ranks), how_found, merged, problems,
                 decisions, len(moves), sum(moves), [group[0].folder for group in groups], names, offsets)


def _one_pipeline(ranks: list[Rank], layers: str) -> None:
    """TP=1 read from the module calls: the ranks must look like the stages of one model, each module outside
    the `layers` list (embedding, head) called on one stage only; else a SourceError naming the rank."""
    pattern = re.compile(rf"(?:^|\.){re.escape(layers)}\.\d+(?:\.|$)")
    owner: dict[str, int] = {}
    for r in ranks:
        for module in _modules(r.tensors):
            if pattern.search(module):
                continue
            k = owner.setdefault(module, r.number)
            if k != r.number:
                raise SourceError(f"{r.folder}: its module calls differ from rank0's, so TP=1 and each rank would be a "
                                  f"pipeline stage, but it calls {module}, which rank{k} calls too (outside "
                                  f"`{layers}`, a module lives on one stage): not the stages of one run; give tp and "
                                  "pp in a layout file")


def read(path: str, **options) -> tuple[list[Tensor], list[Problem], str]:
    """The merged tensors of a parallel run in one execution order, the problems, and a line saying how
    it was read (`TP=2 x PP=2 of rank0..rank3, merged by ...`)."""
    run = merge(path, **options)
    return run.tensors, run.problems, run.how


class MergedRun(GoldenDump):
    """A parallel run's merged tensors as a source (a Side's reader); `merged` says how it was read."""

    def __init__(self, path: str, tensors: list[Tensor], problems: list[Problem], merged: str):
        super().__init__(path, msprobe.KIND, tensors, problems)
        self.merged = merged


def open_merged(path: str, **options) -> MergedRun:
    tensors, problems, how = read(path, **options)
    if not tensors:
        raise SourceError(f"{path}: no tensors to merge")
    return MergedRun(os.fspath(path), tensors, problems, how)


def merged_line(side) -> str:
    """`merged TP=2 x PP=1 of rank0..rank1 by ...` for a side read by open_merged, else ""."""
    return f"merged {side.reader.merged}" if isinstance(side.reader, MergedRun) else ""


def merged_modules(path: str, *, shards: str | None = None, step: str | int | None = None) -> Graph:
    """The graph pane's module tree of a parallel run as one run: the calls of the merged side (the names its
    rows have, each stage's layers and API counters renumbered, shapes merged), under each stage's
    construct.json renamed alike (a TP group's ranks run the same modules: its first rank's)."""
    from accuscope.engine.graphs.msprobegraph import module_graph
    run = merge(path, shards=shards, step=step, stats_only=True)
    problems: list[Problem] = []
    parents: dict[str, str] = {}
    for stage, folder in enumerate(run.stage_folders):
        for call, parent in msprobe.construct_parents(folder, problems).items():
            parents[run.call(stage, call)] = run.call(stage, parent)
    calls: dict[str, list[tuple[str, str, tuple[int, ...]]]] = {}
    for t in run.tensors:
        if t.value is None:  # a non-tensor value: no edge of the graph
            calls.setdefault(t.op, []).append((t.tensor_name, t.io, tuple(t.shape)))
    label = f"merged TP={run.tp} x PP={run.pp}"
    graph = module_graph(f"{os.path.basename(os.path.normpath(path))} ({label})", run.stage_folders[0], calls,
                         parents, problems)
    graph.label = label
    return graph


def survey(run: Merge, examples: int = 3) -> dict:
    """What the merge did, as `inspect --shards` says it (and prints with --json): the layout and how it was
    found, per module kind the tensors by rule, the replicated ones, the PP-stitched ones, the statistics
    not derivable, and what was not merged, by reason with a few tensors each."""
    kinds = {COLUMN: "column", ROW: "row", VOCAB: "vocab", "": "outside"}
    rules = {ONCE: "replicated", CONCAT: "concat", SUM: "sum", BY_VOCAB: "vocab"}
    by_kind: dict[str, dict[str, int]] = {}
    totals = dict.fromkeys(rules.values(), 0)
    lost: dict[str, int] = {}
    unmerged: dict[str, dict] = {}
    guessed = 0
    for d in run.decisions:
        if not d.how:
            key = re.sub(r" \(.*\)$", "", d.why)  # `shard shapes differ (rank0 [..], ..)`: one reason
            entry = unmerged.setdefault(key, {"reason": key, "count": 0, "kind": kinds[d.kind], "tensors": []})
            entry["count"] += 1
            if len(entry["tensors"]) < examples:
                entry["tensors"].append(d.tensor if run.pp == 1 else f"{d.tensor} (stage {d.stage})")
            continue
        counts = by_kind.setdefault(kinds[d.kind], {})
        counts[rules[d.how]] = counts.get(rules[d.how], 0) + 1
        totals[rules[d.how]] += 1
        guessed += d.how == CONCAT and d.why.startswith(GUESSED)
        if d.lost:
            lost[", ".join(d.lost)] = lost.get(", ".join(d.lost), 0) + 1
    return {
        "path": run.path, "ranks": run.ranks, "tp": run.tp, "pp": run.pp, "found": run.found,
        "split_by": run.layout.source or SHARDS_BY_NAMES, "tensors": len(run.tensors),
        "merged": {k: by_kind[k] for k in kinds.values() if k in by_kind}, "rules": totals,
        "concat_dim_guessed": guessed,
        "stitched": {"stages": run.pp, "tensors": run.stitched, "renamed": run.renamed},
        "statistics_not_derivable": lost,
        "not_merged": sorted(unmerged.values(), key=lambda e: -e["count"]),
        "problems": [str(p) for p in run.problems],
    }


# ------------------------------------------------------------------ one TP group


def _modules(tensors: list[Tensor]) -> dict[str, str]:
    """module path -> class, from the module calls' names."""
    found: dict[str, str] = {}
    for op in dict.fromkeys(t.op for t in tensors):  # a call's tensors share its name: each matched once
        m = MODULE_RECORD.fullmatch(op)
        if m is not None:
            found.setdefault(m.group("path"), m.group("cls"))
    return found


def _weight_shapes(tensors: list[Tensor]) -> dict[str, tuple[int, ...]]:
    """module path -> the shape of its first 2-D weight (parameter or gradient) in the dump, in one pass: its
    shard size p, the rows (column, vocab) or columns (row)."""
    found: dict[str, tuple[int, ...]] = {}
    for t in tensors:
        if t.op_type and len(t.shape) == 2 and t.tensor_name.endswith(".weight"):
            found.setdefault(t.op_type, t.shape)
    return found


def _identical(shards: list[Tensor]) -> bool:
    """Equal statistics (and CRC-32) on every rank; for integer and boolean tensors (ids, masks: equal
    statistics say little) equal data too where the files are there (such tensors are small)."""
    first = shards[0]
    if first.stats is None and not first.checksum:
        return False
    if not all(s.stats == first.stats and s.checksum == first.checksum for s in shards[1:]):
        return False
    if first.dtype is None or first.dtype.kind == "f" or any(s.reader is None or s.problem for s in shards):
        return True
    try:
        data = [np.asarray(s.load()) for s in shards]
    except TensorError:
        return True  # the merged tensor's reader says what is wrong
    return all(np.array_equal(d, data[0]) for d in data[1:])


def _is_mask(t: Tensor) -> bool:
    return t.dtype_name == "bool" or (t.dtype is not None and t.dtype.kind == "b")


def merge_group(ranks: list[Rank], layout: Layout, problems: list[Problem], decisions: list[Decision] | None = None,
                stage: int = 0) -> list[Tensor]:
    """One TP group's tensors merged name by name, in the first rank's order (each one's Decision added to
    `decisions`)."""
    first = ranks[0]
    if len(ranks) == 1:
        return list(first.tensors)
    by_name = [{t.tensor_name or t.name: t for t in r.tensors} for r in ranks]
    classes = _modules(first.tensors)
    weights = _weight_shapes(first.tensors)
    sizes: dict[str, int | None] = {}
    ids: dict[str, list[Tensor | None]] = {}
    for path, cls in classes.items():
        kind = layout.kind(path, cls)
        if kind:
            shape = weights.get(path)
            sizes[path] = None if shape is None else shape[1] if kind == ROW else shape[0]
        if kind == VOCAB:
            calls = {t.op for t in first.tensors if t.op_type == path and t.op.endswith(".forward.0")
                     and MODULE_RECORD.fullmatch(t.op)}
            if len(calls) == 1:
                call = calls.pop()
                ids[path] = [m.get(f"{call}.input.0") or m.get(f"{call}:input:0") for m in by_name]
    labels = ",".join(f"rank{r.number}" for r in ranks)
    params = parameter_dims(first.tensors, layout, classes)
    # an API's backward call belongs to its forward call's module (msprobe names no parent for some)
    forward_module = {}
    for op, module in {t.op: t.op_type for t in first.tensors}.items():  # a call's tensors share its module
        m = _API.fullmatch(op)
        if m is not None and m.group("dir") == "forward" and module:
            forward_module[f"{m.group('api')}.{m.group('k')}.backward"] = module
    out = []
    seen = set()
    for t in first.tensors:
        key = t.tensor_name or t.name
        if key in seen:
            continue
        seen.add(key)
        shards = [m.get(key) for m in by_name]
        absent = [f"rank{r.number}" for r, s in zip(ranks, shards) if s is None]
        present = cast("list[Tensor]", shards)  # read where none is absent
        module = forward_module.get(t.op, t.op_type)
        kind = layout.kind(module, classes.get(module, "")) if module else ""
        if absent:
            why = f"on rank{first.number} but not on {', '.join(absent)} of its TP group ({labels})"
            how, dim = "", 0
            out.append(_unmerged(t, f"{MERGED}{why}"))
        elif len({s.shape for s in present}) > 1:
            why = f"shard shapes differ ({', '.join(f'rank{r.number} {list(s.shape)}' for r, s in zip(ranks, present))})"
            how, dim = "", 0
            out.append(_unmerged(t, f"{MERGED}{why}"))
        else:
            how, dim, why = rule(present, kind, sizes.get(module), ids.get(module), params)
            merged, lost = _merge(present, kind, sizes.get(module), ids.get(module), labels, (how, dim, why))
            out.append(merged)
            if decisions is not None:
                decisions.append(Decision(stage, t.op, key, kind, how, dim, why, tuple(lost)))
            continue
        if decisions is not None:
            decisions.append(Decision(stage, t.op, key, kind, how, dim, why))
    return out


def _unmerged(t: Tensor, why: str) -> Tensor:
    return replaced(t, dtype=None, reader=None, payload=None, stats=None, checksum="", problem=why, conversion="")


GUESSED = "dim guessed"  # how a note starts where nothing but sizes chose the concatenation's dimension


def parameter_dims(tensors: list[Tensor], layout: Layout, classes: dict[str, str]) -> dict[tuple[int, ...], set]:
    """shard shape -> {(dim, "module's parameter")}: the split dimension of every parallel module's weight and
    bias shards in a rank's dump (column: weight rows, bias; row: weight columns; vocab: table rows)."""
    found: dict[tuple[int, ...], set] = {}
    for t in tensors:
        kind = layout.kind(t.op_type, classes.get(t.op_type, "")) if t.op_type else ""
        param = t.tensor_name.rsplit(".", 1)[-1]
        if not kind or param not in ("weight", "bias") or t.value is not None:
            continue
        dim = {(COLUMN, "weight", 2): 0, (COLUMN, "bias", 1): 0, (ROW, "weight", 2): 1,
               (VOCAB, "weight", 2): 0}.get((kind, param, len(t.shape)))
        if dim is not None:
            found.setdefault(tuple(t.shape), set()).add((dim, f"{t.op_type}.{param}"))
    return found


def rule(shards: list[Tensor], kind: str, size: int | None, ids: list[Tensor | None] | None,
         params: dict[tuple[int, ...], set] | None = None) -> tuple[str, int, str]:
    """(how, dim, note) for one tensor's shards: see the module docstring. `params`: parameter_dims."""
    shape = shards[0].shape
    if shards[0].value is not None:  # a non-tensor argument (dim=1, p=0.1): the same on every rank, or not mergeable
        same = all(s.value == shards[0].value for s in shards[1:])
        if same:
            return ONCE, 0, ""
        # a vocab-parallel module's differing scalars are its per-rank vocabulary range (vocab_start_index)
        return "", 0, BOOKKEEPING if kind == VOCAB else "a non-tensor value that differs across the TP group's ranks"
    if kind == VOCAB and _is_mask(shards[0]):
        return "", 0, BOOKKEEPING
    if _identical(shards):
        return ONCE, 0, ""
    if kind in (COLUMN, ROW):
        if size is None:
            return "", 0, f"the {kind}-parallel module's weight shard is not in the dump: its shard size is unknown"
        dims = [d for d, n in enumerate(shape) if n == size]
        if not dims:
            return SUM, 0, ""
        weight = shards[0].tensor_name.endswith("weight") and len(shape) == 2
        if len(dims) == 1 or weight:
            return CONCAT, (1 if kind == ROW else 0) if weight and len(dims) > 1 else dims[-1], ""
        known = _by_parameter(shape, params)
        if known:
            return CONCAT, known[0], known[1]
        return CONCAT, dims[-1], f"{GUESSED}: dimensions {', '.join(map(str, dims))} all have the shard size {size}, the last taken"
    if kind == VOCAB:
        if size is not None and len(shape) == 2 and shape[0] == size:
            return CONCAT, 0, ""
        if shape and ids and (first := ids[0]) is not None and all(i is not None for i in ids) and \
                shape == (*first.shape, shape[-1]) and len(shape) > len(first.shape):
            if size is None:  # which rank owns a token's row follows from the shard size
                return "", 0, "the vocab-parallel embedding's weight shard is not in the dump: its shard size is unknown"
            return BY_VOCAB, 0, ""
        return "", 0, BOOKKEEPING
    if not shape:
        return "", 0, "differs across the TP group's ranks outside a parallel module, and is a scalar"
    known = _by_parameter(shape, params)
    if known:
        return CONCAT, known[0], f"outside a parallel module, {known[1]}"
    return CONCAT, len(shape) - 1, f"{GUESSED}: differs across the ranks outside a parallel module, the last taken"


def _by_parameter(shape: tuple[int, ...], params: dict[tuple[int, ...], set] | None) -> tuple[int, str] | None:
    """(dim, note) where the shape is a parallel module's parameter shard of one split dimension (an optimizer's
    update of it, a gradient), else None."""
    found = (params or {}).get(tuple(shape), set())
    if len({dim for dim, _ in found}) != 1:
        return None
    dim, name = min(found)
    return dim, f"dim {dim} as the shard of {name}" + (f" (and {len(found) - 1} more)" if len(found) > 1 else "")


_SAID = {ONCE: "identical on {labels}, taken once", CONCAT: "concat dim {dim} of {labels}",
         SUM: "sum of {labels} (partial)", BY_VOCAB: "rows by vocabulary owner of {labels}"}  # a rule in `conversion`


def _merge(shards: list[Tensor], kind: str, size: int | None, ids: list[Tensor | None] | None, labels: str,
           decided: tuple[str, int, str]) -> tuple[Tensor, list[str]]:
    """The merged tensor and the statistics the shards' do not give."""
    t = shards[0]
    how, dim, note = decided
    where = f" ({kind})" if kind else ""
    if not how:
        return _unmerged(t, f"{MERGED}not merged{where}: {note}"), []
    shape = tuple(n * len(shards) if d == dim and how == CONCAT else n for d, n in enumerate(t.shape))
    text = _SAID[how].format(labels=labels, dim=dim)
    stats, lost = _stats(how, shards, shape)
    if t.checksum and how != ONCE:
        lost.append("CRC-32")
    conversion = f"{MERGED}{text}{where}" + (f", {note}" if note else "") + \
        (f"; not derivable from the shards' statistics: {', '.join(lost)}" if lost else "")
    problem = next((s.problem for s in shards if s.problem), "")
    reader = None
    id_tensor = ids[0] if how == BY_VOCAB and ids and ids[0] is not None and ids[0].reader is not None else None
    if all(s.reader is not None for s in shards) and not problem and (how != BY_VOCAB or id_tensor is not None):
        reader = partial(load_merged, how, dim, tuple(shards), id_tensor, labels, size)
    return replaced(t, shape=shape, payload=None, reader=reader, stats=stats, conversion=conversion, problem=problem,
                   checksum=t.checksum if how == ONCE else ""), lost


STATS_LOST = ("Max", "Min", "Mean", "Norm")


def _stats(how: str, shards: list[Tensor], shape: tuple[int, ...]) -> tuple[tuple | None, list[str]]:
    """The merged Max, Min, Mean, Norm where exact (None where not), and the names of those that are not."""
    recorded = [s.stats for s in shards]
    if any(r is None for r in recorded):
        return None, []
    if how == ONCE:
        return recorded[0], []
    n = [math.prod(s.shape) for s in shards]
    elements = sum(n)
    col = list(zip(*recorded))  # Max, Min, Mean, Norm each over the shards
    known = [None not in values and not any(map(math.isnan, values)) for values in col]  # a number on every shard
    if how == CONCAT:
        mx = max(col[0]) if known[0] else None
        mn = min(col[1]) if known[1] else None
        mean = sum(m * k for m, k in zip(col[2], n)) / elements if known[2] and elements else None
        norm = math.sqrt(sum(v * v for v in col[3])) if known[3] else None
        stats = (mx, mn, mean, norm)
    elif how == SUM:
        stats = (None, None, sum(col[2]) if known[2] else None, None)
    else:
        stats = (None, None, None, None)
    lost = [name for name, v in zip(STATS_LOST, stats) if v is None]
    return (None if all(v is None for v in stats) else stats), lost


def load_merged(how: str, dim: int, shards: tuple[Tensor, ...], ids: Tensor | None, labels: str,
                size: int | None) -> np.ndarray:
    """The merged data, each shard read once: straight into its place in the output where that is one run of
    memory (concat along the first dimension that is not 1, the first shard of a sum or a replicated
    tensor), else into one scratch buffer reused across the shards (concatenated, added or compared from
    there). No shard is memory-mapped or copied whole: `bench_shards.py` (merging costs less than reading)."""
    first = shards[0]
    if how == BY_VOCAB:
        assert size is not None and ids is not None  # BY_VOCAB is decided only with both (decide, _merge)
        parts = [np.asarray(s.load()) for s in shards]
        token_ids = np.asarray(ids.load()).astype(np.int64)
        out = np.zeros_like(parts[0])
        for k, part in enumerate(parts):  # rank k owns vocabulary rows k*size .. (k+1)*size-1
            owned = (token_ids >= k * size) & (token_ids < (k + 1) * size)
            out[owned] = part[owned]
        return out
    assert first.dtype is not None  # a shard with a reader has its dtype (_merge)
    scratch = np.empty(first.shape, first.dtype)
    if how == CONCAT:
        out = np.empty(tuple(n * len(shards) if d == dim else n for d, n in enumerate(first.shape)), first.dtype)
        n = first.shape[dim]
        for k, shard in enumerate(shards):
            _place(shard, out[(slice(None),) * dim + (slice(k * n, (k + 1) * n),)], scratch)
        return out
    out = np.empty(first.shape, first.dtype)
    if how == SUM:
        _place(first, out, scratch)
        for shard in shards[1:]:
            np.add(out, _read(shard, scratch), out=out)
        return out
    out = _read(first, out)
    for k, shard in enumerate(shards[1:], 1):  # ONCE: every shard equal to the first
        part = _read(shard, scratch)
        if not (np.array_equal(part, out)  # NaN at the same places only where that fails: one pass
                or (part.dtype.kind == "f" and np.array_equal(part, out, equal_nan=True))):
            worst = float(np.max(np.abs(part.astype(np.float64) - out))) if part.size else 0.0
            raise TensorError("", "TP merge", f"identical statistics on {labels}, but shard {k} differs from the "
                                              f"first (max |diff| {worst:.3g}): not a replicated tensor")
    return out


def _read(shard: Tensor, into: np.ndarray) -> np.ndarray:
    """A shard's data, read into `into` where they lie in its file as they are (Tensor.load), else loaded."""
    return np.asarray(shard.load(into))


def _place(shard: Tensor, place: np.ndarray, scratch: np.ndarray) -> None:
    """A shard's data into `place`: read there where it is one run of memory, else through `scratch`."""
    part = _read(shard, place if place.flags.c_contiguous else scratch)
    if part is not place:
        place[...] = part


_CONCAT = re.compile(r"concat dim (?P<dim>\d+) of (?P<labels>(?:rank\d+,)*rank\d+)")


def settle(t: Tensor, other: tuple[int, ...], side: str = "golden") -> Tensor:
    """A merged tensor whose concatenation dimension was guessed (GUESSED in its conversion), against the other
    side's shape: where exactly one dimension makes that shape of the shards, concatenated along it (the
    data's reader too) and the row says so; else unchanged (the row says guessed; a shape that differs is its
    reason)."""
    note = re.search(rf"{GUESSED}[^;·]*", t.conversion)
    found = _CONCAT.search(t.conversion)
    if note is None or found is None or len(other) != len(t.shape):
        return t
    dim, n = int(found.group("dim")), found.group("labels").count("rank")
    shard = tuple(k // n if d == dim else k for d, k in enumerate(t.shape))
    dims = [d for d in range(len(shard)) if shard[d] * n == other[d]
            and all(shard[j] == other[j] for j in range(len(shard)) if j != d)]
    if len(dims) != 1:
        return t
    new = dims[0]
    said = f"dim {new} as the {side} side's shape {list(other)} says"
    conversion = t.conversion.replace(note.group(0).rstrip(), said, 1)
    if new == dim:
        return replaced(t, conversion=conversion)
    conversion = conversion.replace(found.group(0), f"concat dim {new} of {found.group('labels')}", 1)
    reader = t.reader
    if isinstance(reader, partial) and reader.func is load_merged:
        reader = partial(load_merged, reader.args[0], new, *reader.args[2:])
    return replaced(t, shape=tuple(other), conversion=conversion, reader=reader)


# ------------------------------------------------------------------ pipeline stages


def stitch(stages: list[list[Tensor]], layers: str = "layers", moves: list[bool] | None = None,
           names: dict[tuple[int, str], str] | None = None, offsets_out: list[int] | None = None) -> list[Tensor]:
    """The stages' merged tensors as one run: forward parts in stage order, backward parts in reverse, then
    the optimizers'; API counters and restarted layer numbers renumbered (see the module docstring). `moves`
    gets, per tensor placed, whether its call was renamed; `names` each (stage, call) -> its new name,
    `offsets_out` what each stage's layer numbers got added."""
    if len(stages) == 1:
        if offsets_out is not None:
            offsets_out.append(0)
        return stages[0]
    parts = []
    for s, tensors in enumerate(stages):
        first_back = next((k for k, t in enumerate(tensors) if t.op.endswith(".backward") or ".backward." in t.op
                           or msprobe.is_grads(t.op)), len(tensors))
        optimizer = [t for t in tensors if t.op_type == msprobe.OPTIMIZER]
        rest = [t for t in tensors if t.op_type != msprobe.OPTIMIZER]
        cut = sum(1 for t in tensors[:first_back] if t.op_type != msprobe.OPTIMIZER)
        parts.append((s, rest[:cut], rest[cut:], optimizer))
    offsets = _layer_offsets(stages, layers)
    if offsets_out is not None:
        offsets_out.extend(offsets)
    order = ([(s, t) for s, fwd, _, _ in parts for t in fwd] + [(s, t) for s, _, back, _ in reversed(parts) for t in back]
             + [(s, t) for s, _, _, opt in parts for t in opt])
    counters: dict[tuple[int, str, str], int] = {}
    next_k: dict[str, int] = {}
    renamed: dict[tuple[int, str], str] = {}
    out = []
    for s, t in order:
        call = renamed.get((s, t.op))
        if call is None:
            call = _layer(t.op, layers, offsets[s])
            m = _API.fullmatch(call)
            if m is not None:
                key = (s, m.group("api"), m.group("k"))
                if key not in counters:
                    counters[key] = next_k.get(m.group("api"), 0)
                    next_k[m.group("api")] = counters[key] + 1
                call = f"{m.group('api')}.{counters[key]}.{m.group('dir')}"
            renamed[(s, t.op)] = call
        name = t.tensor_name
        if name.startswith(t.op):
            name = call + name[len(t.op):]
        module = _layer(t.op_type, layers, offsets[s]) if t.op_type else t.op_type
        if moves is not None:
            moves.append(call != t.op)
        out.append(replaced(t, op=call, tensor_name=name, op_type=module,
                           conversion=t.conversion + (f" · PP stage {s}" if t.conversion else f"PP stage {s}")))
    if names is not None:
        names.update(renamed)
    return out


def _layer_offsets(stages: list[list[Tensor]], layers: str) -> list[int]:
    """Per stage, what to add to its layer numbers: the earlier stages' layer count where this stage
    numbers its layers from where an earlier one did (Megatron), else 0."""
    pattern = re.compile(rf"(?:^|\.){re.escape(layers)}\.(\d+)(?:\.|$)")
    offsets, total, highest = [], 0, -1
    for tensors in stages:
        numbers = {int(m.group(1)) for t in tensors if t.op_type for m in [pattern.search(t.op_type)] if m}
        restarts = bool(numbers) and min(numbers) <= highest
        offsets.append(total if restarts else 0)
        if numbers:
            highest = max(numbers) + (total if restarts else 0)
            total = highest + 1
    return offsets


def _layer(name: str, layers: str, offset: int) -> str:
    if not offset or not name:
        return name
    return re.sub(rf"((?:^|\.){re.escape(layers)}\.)(\d+)(?=\.|$)", lambda m: f"{m.group(1)}{int(m.group(2)) + offset}",
                  name, count=1)


# ------------------------------------------------------------------ as sides of a comparison


def parallel_sides(spec) -> dict:
    """With --shards: each msprobe side holding several ranks in its step, merged into one Side (by role:
    "npu", "golden"); the other sides open as usual. A side of one rank is a TP=1 run already."""
    if not spec.shards:
        return {}
    if spec.rank:
        raise SourceError("--shards merges every rank of a step; --rank picks one: give one or the other")
    from accuscope.engine.sides.registry import detect
    from accuscope.engine.sides.side import Side
    layout = load_layout(spec.shards)  # read once, and a bad layout file named before any dump is read
    sides = {}
    for role, path in (("npu", spec.npu), ("golden", spec.golden)):
        fmt = detect(path)
        if fmt.kind != msprobe.KIND:
            continue
        if len(rank_folders(path, spec.step)) > 1:
            dump = open_merged(path, shards=layout, step=spec.step, stats_only=spec.stats_only)
            sides[role] = Side(dump, fmt.kind, fmt.caps)
    if not sides:
        raise SourceError(f"--shards: neither {spec.npu} nor {spec.golden} is an msprobe dump holding several ranks "
                          "in one step: nothing to merge")
    return sides
