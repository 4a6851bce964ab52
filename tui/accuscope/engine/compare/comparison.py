"""Whole-network comparison: open both sides, map tensors, compare every pair in parallel.

`plan()` does everything that can fail on bad input (opening sources, mapping, range) before any
heavy work; `execute()` compares pairs on all cores, reports progress with the rows finished so
far (the TUI shows them as they arrive), and stops early when `cancel` is set.

Cores: on the compiled kernel everything runs in this process, decided by size in one place
(`pair_threads`): a pair of at least 4M elements gets min(workers, n / 512k) threads inside the
kernel, which take its 64k-element units in turn with the GIL released and add their sums in unit
order (the same digits on any number of threads); smaller pairs run whole, `workers` at a time on
a thread pool, so that no core waits at a split pair's barriers or while Python opens the next
pair. On 64 cores 64 pairs of 1M elements run side by side and an 8M one takes 16 threads; a
network of small tensors keeps 64 threads busy until Python's per-pair work under the GIL (~tens
of microseconds a pair) is the limit. The app, and the numpy fallback, use worker processes
instead (`inline_bytes=0`, or no kernel).
"""
# lazy: engine.compare.crossmap, engine.compare.expected, engine.compare.graphmatch, engine.compare.leftovers,
# lazy: engine.compare.plugins, engine.compare.repair, engine.compare.shards, engine.graphs.oprange,
# lazy: engine.sides.registry, engine.sources.tpumlir
from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache, partial
from typing import TYPE_CHECKING, cast

from accuscope.engine.compare import faults, gcpause, judgement, polytol, runners, statistics
from accuscope.engine.compare.columns import ALGORITHMS, CSV_OF, KEY_OF
from accuscope.engine.compare.coverage import Coverage
from accuscope.engine.compare.judgement import cells_broken
from accuscope.engine.compare.mapping import map_tensors
from accuscope.engine.compare.metrics import compiled_kernel
from accuscope.engine.compare.outputs import output_checks
from accuscope.engine.compare.pair import DEVICE_ONLY, Pair, suspect
from accuscope.engine.compare.pairjob import Job
from accuscope.engine.compare.results import DEFAULT_OF, KIND, ResultTable, row_columns
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.progress import OnProgress, Progress
from accuscope.engine.sides.side import Side
from accuscope.engine.sources import kinds
from accuscope.engine.sources.ascend import crop_to
from accuscope.engine.sources.layout import in_layout_of
from accuscope.engine.sources.names import parameter
from accuscope.engine.sources.tensor import INPUT, Problem, SourceError, Tensor

if TYPE_CHECKING:  # plugins are imported only for a run that names a folder of them (--custom-dir), graphs.graph
    # with a model, repair where a pair disagrees (execute)
    from accuscope.engine.compare import plugins as plugin_mod
    from accuscope.engine.compare.crossmap import MappingFile
    from accuscope.engine.graphs.graph import Graph

INLINE_BYTES = 64 << 20  # below this, worker processes cost more than they save


@dataclass
class Plan:
    spec: CompareSpec
    npu: Side
    golden: Side
    graph: Graph | None  # the model given with --model (or the NPU side's offline model)
    pairs: list[Pair]
    rows: list[dict]
    metrics: list[str]
    plugins: list[plugin_mod.Plugin]
    problems: list[Problem]
    unmatched_golden: list[Tensor]
    coverage: Coverage  # plan() always accounts for the pairing
    across: bool = False  # the sides are two frameworks' (MindSpore against PyTorch: crossmap.framework)

    @property
    def total_bytes(self) -> int:
        return sum(p.npu.nbytes + p.golden.nbytes for p in self.pairs if p.golden is not None)

    def sides_fields(self) -> dict:
        """What task.json records of the sides: their kinds, and whether they pair call by call (the app
        decides pairs in such a task: app/taskscreen.py reads this at its first frame, not the registry)."""
        return {"sides": {"npu": self.npu.kind, "golden": self.golden.kind},
                "pairs_calls": _pairs_calls(self.npu, self.golden)}


def _unread(pairs: list[Pair], misshapen: list[str]) -> list[str]:
    """The rows an input left unjudged, `tensor: why`: a tensor of either side that could not be read
    (truncated, corrupt: its problem), a shard merged without the other side's shape. Not the calls a
    parallel run's merge leaves unmerged by its rules (statistics.MERGED: per-rank bookkeeping, said
    on their rows): they hold no value of the whole run to judge."""
    found = []
    for p in pairs:
        if p.npu.problem and not p.npu.problem.startswith(statistics.MERGED):
            found.append(f"{p.npu.name}: {p.npu.problem}")
        elif p.golden is not None and p.golden.problem and not p.golden.problem.startswith(statistics.MERGED):
            found.append(f"{p.npu.name}: golden {p.golden.problem}")
    return found + [f"{name}: merged from shards without the other side's shape" for name in misshapen]


def open_sides(spec: CompareSpec) -> tuple[Side, Side, Graph | None]:
    """Both sides of a comparison, each in whatever format it is, with the models given for them,
    and the graph of `--model` (loaded once: an offline-model JSON can take seconds)."""
    from accuscope.engine.sides.registry import open_side
    pick = spec.pick
    ranked = {"step": spec.step, "rank": spec.rank, "stats_only": spec.stats_only or None}
    merged = {}
    if spec.shards:  # shards.py (8 ms of imports) only when asked for
        from accuscope.engine.compare.shards import parallel_sides
        merged = parallel_sides(spec)
    npu = merged.get("npu") or open_side(spec.npu, pick=pick, run=spec.run, runner=spec.npu_runner,
                                         iteration=spec.iteration, options=_model_option(spec.npu, spec.npu_options,
                                                                                         spec.model), **ranked)
    golden = merged.get("golden") or open_side(spec.golden, shape=spec.golden_shape, dtype=spec.golden_dtype,
                                               pick=pick, runner=spec.golden_runner, iteration=spec.iteration,
                                               options=_model_option(spec.golden, spec.golden_options, spec.model),
                                               **ranked)
    model = _load_graph(spec.model) if spec.model else None
    for side, path in ((npu, spec.npu_model), (golden, spec.golden_model)):
        if path:
            side.use_graph(_load_graph(path))
    if model is not None and model.kind == kinds.MLIR and not spec.npu_model and npu.graph is None:
        npu.use_graph(model)  # tpu-mlir's .mlir describes the converted (NPU) side
    elif model is not None and not model.converted and not spec.golden_model and golden.graph is None:
        golden.use_graph(model)  # a framework model names the golden side's tensors
    if model is not None and model.is_device and not spec.npu_model and not npu.is_device_dump:
        raise SourceError(f"{spec.model}: an offline model describes an Ascend dump, but {spec.npu} is "
                          f"a {npu.kind} source")
    return npu, golden, model


@gcpause.paused  # opening the sides makes a few objects a tensor, which set off the collector's full walks
def plan(spec: CompareSpec, *, mapping_file: MappingFile | None = None) -> Plan:
    """`mapping_file`: spec.mapping as crossmap.load read it, where the run has read it already (its ranks'
    workers are handed it, not each reading the file again)."""
    npu, golden, graph = open_sides(spec)
    npu_graph = npu.graph if npu.graph is not None else (graph if graph is not None and graph.is_device else None)
    found, problems = _discover(spec.custom_dir) if spec.custom_dir else ([], [])
    metrics, chosen_plugins = _algorithms(spec.algorithms, found)
    user_map, cross, pairing = None, None, []
    if spec.mapping or spec.match == "structure" or _pairs_calls(npu, golden):
        user_map, cross, pairing = _cross_pairs(spec, npu, golden, mapping_file)
    mapping = map_tensors(npu, golden, npu_graph=npu_graph, golden_graph=golden.graph, user_map=user_map, cross=cross)
    account, walked = None, None
    if spec.match == "structure" and cross is None:  # two graph-carrying sides: graphmatch.py
        from accuscope.engine.compare import graphmatch, leftovers
        mapping.pairs, account, notes, walked = graphmatch.complete(npu, golden, mapping.pairs)
        used = mapping.used(mapping.pairs)
        mapping.unmatched_golden = [t for t in golden.tensors if id(t) not in used]
        left = account.by_call("npu")
        pairing = notes + account.lines()
    elif cross is not None:  # every call no rung paired, named (fused, absorbed, no counterpart): leftovers.py
        from accuscope.engine.compare import crossmap, leftovers
        account = leftovers.account(npu.ops, golden.ops, mapping.pairs, cross.unmapped_apis, cross.frameworks)
        left = account.by_call("npu")
        pairing = account.lines()[:1] + crossmap.describe(cross, counts=False) + account.lines()[1:]
    seq = _sequence_ids(npu, npu_graph)
    keep = _selection(spec, npu, seq)
    outputs = output_checks(npu, npu_graph, golden.graph)
    pairs: list[Pair] = []
    rows: list[dict] = []
    settle: Callable[..., Tensor] | None = None
    if spec.shards:  # a merged tensor's guessed concatenation dimension, settled by the other side's shape
        from accuscope.engine.compare.shards import settle
    for pair in mapping.pairs:
        if not keep(pair.op):
            continue
        if account is not None and pair.golden is None:  # its call's outcome, or its slot's in a paired call
            why = left[pair.op.op_name].text if pair.op.op_name in left else leftovers.SLOT
            pair = replace(pair, reason=f"{why}; {pair.reason}" if pair.reason else why)
        if settle is not None and pair.golden is not None:
            pair = replace(pair, npu=settle(pair.npu, pair.golden.shape), golden=settle(pair.golden, pair.npu.shape, "NPU"))
        if pair.golden is not None and (cropped := crop_to(pair.npu, pair.golden.shape)) is not pair.npu:
            pair = replace(pair, npu=cropped)
        if pair.golden is not None and (moved := in_layout_of(pair.npu, pair.golden.shape)) is not pair.npu:
            pair = replace(pair, npu=moved)  # a .tflite's NHWC against its source's NCHW, or the other way
        rows.append(_base_row(len(rows), pair, seq.get(id(pair.op), -1), outputs[0](pair)))
        pairs.append(pair)
    for check in outputs[1:]:  # the first way that names an output among the pairs
        if any(r["is_output"] for r in rows):
            break
        for p, r in zip(pairs, rows):
            r["is_output"] = check(p)
    scope = " in the chosen range/op list" if spec.op_range or spec.ops else ""
    if not pairs:
        raise SourceError(f"{spec.npu}: no tensor to compare{scope}")
    used = mapping.used(pairs)
    # a device dump's input tensors repeat its producers' outputs: as a reference, its outputs count
    reference = [t for t in golden.tensors if not (golden.is_device_dump and t.io == INPUT)]
    comparable = sum(1 for p in pairs if p.ground_truth != DEVICE_ONLY)  # device-only ops have no counterpart
    coverage = Coverage(sum(1 for p in pairs if p.golden is not None), comparable,
                        sum(1 for t in reference if id(t) in used), len(reference), sum(1 for p, r in zip(pairs, rows) if r["is_output"] and p.golden),
                        sum(1 for r in rows if r["is_output"]), len(pairs) - comparable,
                        list(dict.fromkeys(t for side in (npu, golden) for t, _ in side.unreachable)),
                        _unused_golden(reference, used, npu, npu_graph), npu.caps.step_based,
                        misshapen=[p.npu.name for p in pairs if spec.shards and p.golden is not None
                                   and statistics.shape_mismatch(p.npu, p.golden, data=False)])
    coverage.unread_are(_unread(pairs, coverage.misshapen))
    coverage.pairing = pairing
    if account is not None:
        coverage.ladder = account.to_meta() if walked is None else {**account.to_meta(), "structure": walked}
        named = account.by_call("golden")
        by_name = {t.name: t.op for t in reference}
        coverage.golden_unused = [(name, named[by_name[name]].brief if by_name.get(name) in named else leftovers.SLOT)
                                  for name, _ in coverage.golden_unused]
    if not used:
        raise SourceError(_nothing_paired(spec, npu, golden, mapping, scope))
    problems = list(npu.problems) + list(golden.problems) + problems
    for side in (npu, golden):
        if side.graph_note:
            problems.append(Problem(side.path, side.graph_note))
    across = cross is not None and cross.frameworks[0] != cross.frameworks[1] and "" not in cross.frameworks
    return Plan(spec, npu, golden, graph or npu_graph or golden.graph, pairs, rows, metrics, chosen_plugins,
                problems, mapping.unmatched_golden, coverage, across)


def _pairs_calls(npu: Side, golden: Side) -> bool:
    """Two dumps of one format that pairs call by call (msprobe's: crossmap's rules)."""
    from accuscope.engine.sides.registry import pairs_calls
    return pairs_calls(npu.kind, golden.kind)


def _cross_pairs(spec: CompareSpec, npu: Side, golden: Side, mapping_file: MappingFile | None = None):
    """(user's name map, crossmap's pairs, what the pairing says): what a mapping file (`mapping_file`, else
    spec.mapping read here), msprobe's rules or --match structure say (each rule's count, the APIs the table
    cannot map: coverage notes, not problems); crossmap (and the API table) is imported only for those inputs."""
    from accuscope.engine.compare import crossmap
    if mapping_file is None and spec.mapping:
        mapping_file = crossmap.load(spec.mapping)
    user_map = mapping_file.names if mapping_file is not None and mapping_file.kind == crossmap.ACCUSCOPE else None
    if _pairs_calls(npu, golden):
        cross = crossmap.pair(npu, golden, mapping_file, structure=spec.match == "structure")
        return user_map, cross, crossmap.describe(cross)
    if mapping_file is not None and user_map is None:
        raise SourceError(f"{spec.mapping}: {mapping_file.what} pair two msprobe dumps; {spec.npu} is a {npu.kind} source")
    if spec.match == "structure":
        from accuscope.engine.compare.graphmatch import structural_sides
        if not structural_sides(npu, golden):
            raise SourceError("--match structure pairs two msprobe dumps (module paths, call order), or two sides "
                              f"that carry their models (ONNX, LiteRT, OpenVINO dumps); {spec.npu} is a {npu.kind} "
                              f"source{'' if npu.graph is not None else ' without a model'}"
                              + ("" if golden.graph is not None else f", {spec.golden} has no model"))
    return user_map, None, []


def _model_option(path: str, options: dict[str, str] | None, model: str | None) -> dict[str, str] | None:
    """A side's format options, with `--model` as its `model` option where its format takes one (an RKNN
    snapshot's flat layers take the model's shapes) and none was given for the side itself."""
    if not model or (options and "model" in options):
        return options
    from accuscope.engine.sides.registry import detect
    if not any(o.name == "model" for o in detect(path).options):
        return options
    return {**(options or {}), "model": model}


def _load_graph(path: str) -> Graph:
    from accuscope.engine.sides.registry import load_graph  # the graph loaders are imported with the first model
    return load_graph(path)


def _unused_golden(reference: list[Tensor], used: set[int], npu: Side, npu_graph: Graph | None
                   ) -> list[tuple[str, str]]:
    """The golden tensors no NPU tensor paired with, each with the likeliest reason."""
    values: set[str] = set()
    if npu_graph is not None and not npu_graph.is_device:
        values = {v for n in npu_graph.nodes for v in n.outputs} | set(npu_graph.inputs)
        if npu_graph.kind == kinds.MLIR:  # loc names `{onnx output}_{OpType}`: the ONNX output names too
            from accuscope.engine.sources.tpumlir import normalize
            values |= {normalize(v) for v in values}
    out = []
    for t in reference:
        if id(t) in used:
            continue
        if values and t.tensor_name and t.tensor_name not in values and t.op not in values:
            why = "not in the NPU side's model: fused away or removed by its optimizer or converter"
        elif npu.is_device_dump and npu_graph is not None:
            why = "no device op records it: fused into another op, or optimized away by the compiler"
        else:
            why = "no NPU tensor pairs with it (not dumped on the NPU side, or named otherwise: --mapping)"
        out.append((t.name, why))
    return out


def _nothing_paired(spec: CompareSpec, npu: Side, golden: Side, mapping, scope: str) -> str:
    """Zero pairs: say so, show names from both sides, and list the likely causes."""
    def sample(names: list[str]) -> str:
        names = list(dict.fromkeys(names))
        return ", ".join(names[:3]) + (f" … ({len(names)} in all)" if len(names) > 3 else "")
    causes = []
    if golden.is_device_dump and not npu.is_device_dump:
        causes.append("--npu and --golden look swapped (the golden side is a device dump): "
                      f"try --npu {spec.golden} --golden {spec.npu}")
    causes.append("the two sides come from different models or runs")
    if not spec.model and not spec.npu_model and npu.is_device_dump:
        causes.append("the device renamed or fused ops: give the offline model JSON with --model "
                      "(atc --mode=1) so fusion attributes can pair them")
    elif npu.graph is None or golden.graph is None:
        causes.append("node names differ: give each side's model (--npu-model / --golden-model) so tensor "
                      "names can pair them")
    elif spec.match != "structure" and not npu.caps.pairs_calls:  # msprobe: call by call
        causes.append("the two models name their tensors each its own way (another converter): --match structure "
                      "pairs them by walking both graphs")
    causes.append("renames no rule can know: a --mapping file (npu_name,golden_name per line)")
    return (f"nothing was paired{scope}: none of {len(mapping.pairs):,} NPU tensors in {spec.npu} has a counterpart "
            f"among {len(golden.tensors):,} golden tensors in {spec.golden}. NPU side: "
            f"{sample([p.npu.name for p in mapping.pairs])}; golden side: {sample([t.name for t in golden.tensors])}. "
            "Likely causes: " + "; ".join(causes))


def _discover(folder: str) -> tuple[list[plugin_mod.Plugin], list[Problem]]:
    from accuscope.engine.compare import plugins as plugin_mod
    return plugin_mod.discover(folder)


def _algorithms(names: list[str] | None, found: list[plugin_mod.Plugin]):
    if names is None or names == ["all"]:
        return list(ALGORITHMS), list(found)
    by_name = {p.name: p for p in found}
    metrics, chosen = [], []
    for name in names:
        key = KEY_OF.get(name, name)
        if key in ALGORITHMS:
            metrics.append(key)
        elif name in by_name:
            chosen.append(by_name[name])
        else:
            valid = ", ".join(ALGORITHMS + [CSV_OF[k] for k in ALGORITHMS] + list(by_name))
            raise SourceError(f"unknown algorithm {name!r}; choose from: all, {valid}")
    return metrics, chosen


def _sequence_ids(npu: Side, graph: Graph | None) -> dict[int, int]:
    """Op sequence id per op: the offline model's op id, else the execution position."""
    seq = {}
    for k, df in enumerate(npu.ops, 1):
        node = graph.node(df.op_name) if graph is not None and graph.is_device else None
        seq[id(df)] = node.seq_id if node is not None else k
    return seq


def _selection(spec: CompareSpec, npu: Side, seq: dict[int, int]) -> Callable:
    if spec.op_range:
        from accuscope.engine.graphs.oprange import OpRange  # --op-range only
        rng = OpRange.parse(spec.op_range, len(npu.ops))
        last = max(seq.values(), default=0)
        return lambda df: rng.keeps(seq[id(df)], last)
    if spec.ops:
        wanted = set(spec.ops)
        missing = [o for o in wanted if npu.find_op(o) is None]
        if missing:
            raise SourceError(f"{spec.npu}: ops not in the dump: {', '.join(sorted(missing))}")
        chosen = {id(npu.find_op(o)) for o in wanted}
        return lambda df: id(df) in chosen
    return lambda df: True


@lru_cache(maxsize=4096)
def _shape_text(shape: tuple[int, ...]) -> str:
    """`[1,3,224,224]`: each distinct shape written once (a network repeats a few dozen)."""
    return "[" + ",".join(map(str, shape)) + "]"


def _base_row(index: int, pair: Pair, seq: int, is_output: bool) -> dict:
    t, g = pair.npu, pair.golden
    return {
        "index": index, "op_seq": seq, "type": pair.op.op_type, "npu_op": pair.op.op_name,
        "npu_dtype": t.dtype_name, "golden_op": pair.ground_truth,
        "golden_dtype": g.dtype_name if g is not None else "", "tensor": t.name, "io": t.io,
        "param": parameter(t.tensor_name),
        "shape": _shape_text(tuple(t.shape)), "conversion": t.conversion, "how": pair.how,
        "npu_file": t.source, "golden_file": g.source if g is not None else "",
        "is_npu_only": pair.ground_truth == DEVICE_ONLY,
        "is_output": is_output,
        "reason": pair.reason or t.problem,
    }


# ------------------------------------------------------------------ running a plan

OnRows = Callable[[list[tuple[int, dict]]], None]  # execute's finished rows as they come: (plan row, cells)


def execute(plan: Plan, progress: OnProgress | None = None,
            cancel: threading.Event | None = None, workers: int | None = None,
            inline_bytes: int | None = None, *, rows: OnRows | None = None) -> ResultTable | None:
    """Compare every mapped pair. Returns None when cancelled (nothing written by us).
    `rows(batch)` gets each batch of finished rows ((plan row, cells)), then `progress` counts the
    pairs done of those to compare, `what` the batch's last NPU tensor.

    Pairs of less than `inline_bytes` in all (default INLINE_BYTES) are compared in this thread.
    An interactive caller passes 0: numpy drops and retakes the GIL dozens of times per chunk,
    so a comparison thread next to a busy UI thread slows both down (measured 3x). Other callers
    run with the cyclic collector paused (gcpause): a row's objects hold no cycle, and its full
    walks over the plan's tensors took 12 us of a small pair's row (bench_compare.py --case small)."""
    with gcpause.pause(inline_bytes != 0):
        return _execute(plan, progress, cancel, workers, inline_bytes, rows)


def _execute(plan: Plan, progress: OnProgress | None, cancel: threading.Event | None, workers: int | None,
             inline_bytes: int | None, on_rows: OnRows | None) -> ResultTable | None:
    start = time.perf_counter()
    metrics = tuple(plan.metrics)
    jobs = [Job(i, p.npu, p.golden, metrics)
            for i, p in enumerate(plan.pairs) if p.golden is not None and not p.npu.problem and not p.golden.problem]
    workers = workers or os.cpu_count() or 1
    total = len(jobs)
    statistics_only = [j for j in jobs if j.npu.reader is None or j.golden.reader is None]  # no data
    jobs = [j for j in jobs if not (j.npu.reader is None or j.golden.reader is None)]
    if compiled_kernel() and inline_bytes != 0:  # threads in this process (the app asks for processes: 0)
        results = runners.run_threads(jobs, workers, cancel)
    elif workers == 1 or plan.total_bytes < (INLINE_BYTES if inline_bytes is None else inline_bytes):
        results = runners.run_inline(jobs, cancel)
    else:
        results = runners.run_pool(jobs, workers, cancel)
    if statistics_only:
        results = itertools.chain(runners.recorded(statistics_only, plan.across), results)
    done = 0
    computed: list[dict] = [{} for _ in plan.rows]  # each row's cells; {}: not compared
    with _plugin_host(plan, cancel) as host:
        for batch in results:
            if plan.plugins:
                batch = [(row, _with_plugins(host, plan, row, cells)) for row, cells in batch]
            for row, cells in batch:
                computed[row] = cells
            done += len(batch)
            if on_rows:
                on_rows(batch)
            if progress:
                progress(Progress(done, total, plan.pairs[batch[-1][0]].npu.name if batch else "",
                                  time.perf_counter() - start))
            faults.point("compare")
    if cancel is not None and cancel.is_set():
        return None
    broken = partial(cells_broken, plan.spec.thresholds)  # the verdict's own rules, the user's thresholds
    if any(suspect(p, c, broken) for p, c in zip(plan.pairs, computed)):  # repair.py only then (7M instructions)
        from accuscope.engine.compare.repair import recheck
        repairs = recheck(plan, computed, broken)
        if repairs:
            plan.coverage.repaired_after(plan.pairs, plan.golden, repairs)
    third: dict[int, dict] = {}
    if plan.spec.expected:
        found = _expected(plan, computed, workers, cancel)
        if found is None:
            return None
        third = found
    spec = plan.spec  # Polygraphy's rule, when asked: one more pass over the compared pairs
    if (rule := polytol.rule(spec.atol, spec.rtol, spec.check_error_stat, spec.error_quantile,
                              spec.no_shape_check)) is not None:
        for row, cells in polytol.pair_cells(plan.pairs, computed, rule).items():
            third.setdefault(row, {}).update(cells)
    for row, pair in enumerate(plan.pairs):  # what the dump tool reported of the row (RKNN's "single")
        if pair.npu.reported:
            third.setdefault(row, {}).update(pair.npu.reported)
    table = _table(plan, computed, third)
    judgement.apply(table, plan.spec.thresholds)
    return table


def _table(plan: Plan, computed: list[dict], third: dict[int, dict]) -> ResultTable:
    """The table of the plan's rows, each merged with its computed cells as merged_row merges them and
    then the third side's cells, made column by column: the plan's rows' columns and the cells' own,
    the reason of each row merged (merged_row's), the third side's set in place. No merged dict a row:
    from_rows of merged_row's rows took 5 us of a tiny tensor's row (bench_compare.py --case small)."""
    custom = [p.name for p in plan.plugins]
    columns, cells = row_columns(plan.rows, custom), row_columns(computed, custom)
    if set(columns) & set(cells) - {"reason"}:  # cells that replace a planned column: row by row
        return ResultTable.from_rows([{**merged_row(plan, i, c), **third.get(i, {})} for i, c in enumerate(computed)],
                                     custom=custom)
    more = cells.pop("reason", None) or [""] * len(computed)
    columns.update(cells)
    # merged_reason where there is anything to merge (the cells' own reason, a golden tensor's problem); the
    # plan's reason as it is elsewhere (a call a row less: most rows of a network of tiny tensors)
    spoilt = {i for i, p in enumerate(plan.pairs) if p.golden is not None and p.golden.problem}
    columns["reason"] = [merged_reason(plan, i, m) if m or i in spoilt else r
                         for i, (r, m) in enumerate(zip(columns["reason"], more))]
    for row, found in third.items():
        for key, value in found.items():
            if key in KIND or key in custom:
                columns.setdefault(key, [DEFAULT_OF.get(key, "")] * len(computed))[row] = value
    return ResultTable.from_columns(columns, custom)


def _expected(plan: Plan, computed: list[dict], workers: int, cancel) -> dict[int, dict] | None:
    """The third side's cells per row (compare/expected.py), its pairs compared on the same runners
    as the comparison's own; None when cancelled."""
    from accuscope.engine.compare import expected
    jobs = [Job(row, e, cast(Tensor, plan.pairs[row].golden), ("cos", "red"))  # a computed row has one
            for row, e in expected.expected_tensors(plan.spec, plan.golden, plan.npu, plan.pairs).items()
            if computed[row]]
    found: dict[int, dict] = {}
    runs = runners.run_threads(jobs, workers, cancel) if compiled_kernel() else runners.run_inline(jobs, cancel)
    for batch in runs:
        for row, cells in batch:
            found[row] = expected.excess_cells(computed[row], cells)
    if cancel is not None and cancel.is_set():
        return None
    return {row: cells for row, cells in found.items() if cells}


def merged_row(plan: Plan, index: int, cells: dict) -> dict:
    """The plan's row `index` with a pair's computed cells: the one merge of execute() and the live
    table of `compare --tui`. A golden tensor's problem and the comparison's reason join in `reason`."""
    row = {**plan.rows[index], **cells}  # one copy: cells' own reason is replaced just below
    row["reason"] = merged_reason(plan, index, cells.get("reason"))
    return row


def merged_reason(plan: Plan, index: int, more: str | None) -> str:
    """Row `index`'s reason with its computed cells' own (`more`): the plan's, or the golden tensor's
    problem, then `more`."""
    reason = plan.rows[index]["reason"]
    if not reason:
        golden = plan.pairs[index].golden
        if golden is not None and golden.problem:
            reason = f"golden {golden.problem}"
    return "; ".join(filter(None, [reason, more])) if more else reason


def _plugin_host(plan: Plan, cancel: threading.Event | None) -> contextlib.AbstractContextManager:
    """The host the plan's plugins run in (a helper process, started at their first value); none without them."""
    if not plan.plugins:
        return contextlib.nullcontext()
    from accuscope.engine.compare import plugins as plugin_mod
    return plugin_mod.PluginHost(cancel=cancel)


def _with_plugins(host: plugin_mod.PluginHost, plan: Plan, row: int, cells: dict) -> dict:
    """The pair's cells with every plugin's value (computed in the plugin host) added."""
    x, y = plan.pairs[row].npu, cast(Tensor, plan.pairs[row].golden)  # a computed row has one
    reasons = [cells.get("reason", "")]
    cells = dict(cells)
    for plugin in plan.plugins:
        value, reason = host.run(plugin, x, y, {"my_output_dump_file": x.source, "ground_truth_dump_file": y.source,
                                                "shape_type": list(x.shape)})
        cells[plugin.name] = value
        reasons.append(reason)
    cells["reason"] = "; ".join(filter(None, reasons))
    return cells
