"""What pairing leaves over, named: every call of either side that no rung of the ladder paired (none of
its tensors paired) gets one outcome, decided here once, read by every surface (the row's reason, the
unused golden tensors' reason, the compare summary, `--json`, task.json):

- FUSED, `fused N:1`: one side computes in several calls what the other computes in one, within one
  module scope: a run of consecutive left calls of one side (at most WINDOW, at least two) whose first
  call's first input and last call's first output hold the values of one left call's of the other side
  (MindSpore's Dense as MatMul + BiasAdd against PyTorch's linear: 2:1; torch_npu's npu_fusion_attention
  against matmul, softmax, matmul: 1:3). The ratio in a call's text is NPU calls : golden calls.
- ABSORBED, `absorbed 1:0`: a call whose output holds the values of its own input (a cast, contiguous, a
  permute or view, dropout at inference) or of a tensor of a paired call in its module scope on its own
  side (a chunk feeding a paired matmul): an op the other side does without or does inside another op.
- NONE, `no counterpart`: the rest; these are what a mapping file names. A tensor left in a call that is
  paired (a LayerNorm's mean and rstd outputs, an argument the other API does not take) is SLOT, a
  `no counterpart` too (on its row and the unused golden tensors; the counts are of calls).

"Holds the values" is read from what both dumps record without reading a tensor file: the element count
and msprobe's statistics (max, min, mean, norm) alike within TOLERANCE, or equal checksums. A tensor
with neither (a file-only dump) matches nothing, so its call is `no counterpart`. Each module scope is
matched on its own (a dict of scopes), in order: a run is looked for among the AHEAD calls after the last
run, at most WINDOW long, so the cost grows with the calls, not with their square. A scope is (the call's
module path, its direction); an NPU module path stands for
the golden path its paired module call has (a name_variants or layer-mapping pair of `Cell.x.Dense` and
`Module.y.Linear` says x is y), else for itself.
"""
# lazy: engine.compare.crossmap
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from accuscope.engine.compare.pair import Pair

FUSED, ABSORBED, NONE = "fused N:1", "absorbed 1:0", "no counterpart"
OUTCOMES = (FUSED, ABSORBED, NONE)
SLOT = f"{NONE}: its call is paired, this slot is not (the other call has no such tensor, or one of another shape)"
TOLERANCE = 5e-3  # relative, on each statistic: float32 against float32 of another framework differ by ~1e-6
WINDOW = 16  # calls in one fused run, at most
AHEAD = 4 * WINDOW  # left calls of one scope looked through for a run's end, after the last run
IDENTICAL = "tensor"  # mapping.py's rule for identical names: the one rung statcolumns' fast path pairs by


@dataclass
class Left:
    """One call no rung paired: its side ("npu" or "golden"), its outcome and what it says."""

    call: str
    side: str
    outcome: str
    text: str  # the outcome and what it rests on (a row's reason)
    brief: str = ""  # the outcome in words alike for alike calls (the unused golden tensors' reason, grouped)

    def __post_init__(self) -> None:
        self.brief = self.brief or self.text


@dataclass
class Account:
    """The ladder's coverage (tensor pairs per rung) and every left call's outcome."""

    rungs: dict[str, int] = field(default_factory=dict)
    left: list[Left] = field(default_factory=list)
    unmapped_apis: dict[str, int] = field(default_factory=dict)
    frameworks: tuple[str, str] = ("", "")  # dump.json's of each side, where it says

    def counts(self, side: str | None = None) -> dict[str, int]:
        """Left calls per outcome (of one side, or of both), every outcome named."""
        found = dict.fromkeys(OUTCOMES, 0)
        for x in self.left:
            if side is None or x.side == side:
                found[x.outcome] += 1
        return found

    def by_call(self, side: str) -> dict[str, Left]:
        return {x.call: x for x in self.left if x.side == side}

    def to_meta(self) -> dict:
        """`--json`'s and task.json's `pairing` object."""
        return {"rungs": dict(self.rungs), "leftovers": self.counts(),
                "sides": {s: self.counts(s) for s in ("npu", "golden")},
                "unmapped_apis": sorted(self.unmapped_apis, key=lambda k: (-self.unmapped_apis[k], k))}

    def lines(self, limit: int = 3) -> list[str]:
        """The summary's lines: the pairs each rung made, then what is left and what a mapping file does
        with it (no line for what is not there; none at all where identical names paired everything)."""
        lines = []
        if set(self.rungs) - {"tensor"} or self.left:  # identical names alone, nothing left: nothing to say
            lines.append("pairing ladder (tensor pairs per rung): "
                         + ", ".join(f"{how} {n:,}" for how, n in self.rungs.items())
                         + (" ({} against {})".format(*self.frameworks) if self.frameworks[0] != self.frameworks[1]
                            else ""))
        parts = []
        for side, what in (("npu", "NPU"), ("golden", "golden")):
            c = self.counts(side)
            total = sum(c.values())
            if total:
                parts.append(f"{total:,} {what} calls left: " + ", ".join(f"{n:,} {o}" for o, n in c.items() if n))
        if parts:
            none = [x.call for x in self.left if x.outcome == NONE]
            fused = next((x for x in self.left if x.outcome == FUSED and x.side == "npu"), None)
            hint = []
            if none:
                hint.append("name the `no counterpart` calls in a mapping file (--mapping: `npu call: golden call`, "
                            f"or msprobe's -lm layer mapping), first: {', '.join(none[:limit])}"
                            + (" …" if len(none) > limit else ""))
            if fused is not None and '": "' in fused.text:  # a line of a mapping file to copy (crossmap's runs)
                hint.append(f"a fused run pairs by its last output, a line of such a file: {fused.text.rsplit('; ', 1)[-1]}")
            lines.append("; ".join(parts) + (" — " + "; ".join(hint) if hint else "") + " (docs/pairing.md)")
        return lines


def identical(n: int) -> dict:
    """The pairing object of `n` tensor pairs all by identical names, nothing left (statcolumns' fast path)."""
    return Account({IDENTICAL: n}).to_meta() if n else {}


def merged(ladders: list[dict]) -> dict:
    """Account.to_meta() of several ranks as one: the counts summed, the unmapped APIs of any (first seen first)."""
    found: dict = {"rungs": {}, "leftovers": dict.fromkeys(OUTCOMES, 0),
                   "sides": {s: dict.fromkeys(OUTCOMES, 0) for s in ("npu", "golden")}, "unmapped_apis": []}

    def add(into: dict, counts) -> None:
        for k, n in (counts or {}).items() if isinstance(counts, dict) else ():
            if isinstance(n, int):
                into[k] = into.get(k, 0) + n
    for ladder in ladders:
        add(found["rungs"], ladder.get("rungs"))
        add(found["leftovers"], ladder.get("leftovers"))
        for side in ("npu", "golden"):
            add(found["sides"][side], (ladder.get("sides") or {}).get(side))
        found["unmapped_apis"] += [a for a in ladder.get("unmapped_apis") or [] if a not in found["unmapped_apis"]]
    return found


def _value(t) -> tuple | None:
    """What a tensor's values are known by: (elements, statistics) or (elements, checksum); None: unknown."""
    stats = getattr(t, "stats", None)
    n = math.prod(t.shape) if t.shape is not None else -1
    if stats and all(isinstance(v, (int, float)) and math.isfinite(v) for v in stats):
        return n, tuple(stats)
    checksum = getattr(t, "checksum", "")
    return (n, checksum) if checksum else None


def _alike(a: tuple | None, b: tuple | None) -> bool:
    if a is None or b is None or a[0] != b[0]:
        return False
    x, y = a[1], b[1]
    if isinstance(x, str) or isinstance(y, str):
        return x == y
    return len(x) == len(y) and all(math.isclose(p, q, rel_tol=TOLERANCE, abs_tol=1e-6) for p, q in zip(x, y))


def _first(tensors: Iterable) -> tuple | None:
    return next((v for v in map(_value, tensors) if v is not None), None)


def account(npu_ops: list, golden_ops: list, pairs: list[Pair], unmapped_apis: dict[str, int] | None = None,
            frameworks: tuple[str, str] = ("", "")) -> Account:
    """The Account of a pairing (module text): `pairs` every NPU tensor's pair (mapping.py's), the two
    sides' calls in execution order; `unmapped_apis` and `frameworks` as crossmap found them."""
    from accuscope.engine.compare.crossmap import EXPLICIT, STRUCTURE, TABLE, VARIANTS, direction, module_path
    ladder = (*EXPLICIT, IDENTICAL, VARIANTS, TABLE, STRUCTURE)  # the rungs as tried: mapping files, names ...
    matched = [p for p in pairs if p.golden is not None]
    rungs = Counter(p.how for p in matched)
    paired_npu = {id(p.op) for p in matched}
    used = {p.golden.op for p in matched if p.golden is not None}  # golden calls with a tensor paired
    scopes: dict[str, str] = {}  # NPU module path -> the golden path its paired module call has
    for p in {id(p.op): p for p in matched if p.op.op_name.startswith(("Cell.", "Module."))}.values():
        ours, theirs = module_path(p.op.op_name), module_path(p.ground_truth.split(",")[0])
        if ours is not None and theirs is not None:
            scopes.setdefault(ours, theirs)
    order = {how: k for k, how in enumerate(ladder)}
    found = Account(dict(sorted(rungs.items(), key=lambda x: (order.get(x[0], len(order)), x[0]))),
                    unmapped_apis=dict(unmapped_apis or {}), frameworks=frameworks)

    def scope(df, side: str) -> tuple[str, str]:
        module = df.tensors[0].op_type if df.tensors else ""
        return (scopes.get(module, module) if side == "npu" else module), direction(df.op_name)

    left: dict[str, dict[tuple, list]] = {"npu": {}, "golden": {}}
    paired: dict[str, list] = {"npu": [], "golden": []}
    for df in npu_ops:
        if id(df) in paired_npu:
            paired["npu"].append(df)
        elif df.inputs or df.outputs:
            left["npu"].setdefault(scope(df, "npu"), []).append(df)
    for df in golden_ops:
        if df.op_name in used:
            paired["golden"].append(df)
        elif df.inputs or df.outputs:
            left["golden"].setdefault(scope(df, "golden"), []).append(df)
    known: dict[str, dict[tuple, list]] = {"npu": {}, "golden": {}}  # values of paired calls' tensors, per scope
    for side in ("npu", "golden"):  # read only in the scopes something is left in
        for df in paired[side] if left[side] else ():
            key = scope(df, side)
            if key in left[side]:
                known[side].setdefault(key, []).extend(v for v in map(_value, df.tensors) if v is not None)
    outcome: dict[int, Left] = {}
    for key, npu_left in left["npu"].items():
        golden_left = left["golden"].get(key)
        if golden_left:
            _fuse(npu_left, golden_left, "npu", outcome)
            _fuse(golden_left, npu_left, "golden", outcome)
    for side in ("npu", "golden"):
        for key, calls in left[side].items():
            for df in calls:
                if id(df) not in outcome:
                    outcome[id(df)] = _absorbed(df, side, known[side].get(key, ()))
    for ops in (npu_ops, golden_ops):
        found.left.extend(outcome[id(df)] for df in ops if id(df) in outcome)
    return found


def _fuse(many: list, ones: list, side: str, outcome: dict[int, Left]) -> None:
    """Runs of `many` (this side's left calls in one scope) standing for one call of `ones` (the other
    side's): the run's first input and last output hold that call's first input's and first output's values."""
    other = "golden" if side == "npu" else "npu"
    heads, tails = [_first(df.inputs) for df in many], [_first(df.outputs) for df in many]
    pos = 0  # both sides run in order: a run is looked for after the last one, at most AHEAD calls on
    for one in ones:
        if id(one) in outcome:
            continue
        start, end = _first(one.inputs), _first(one.outputs)
        if start is None or end is None:
            continue
        run = None
        for j in range(pos, min(len(many), pos + AHEAD)):  # the first call that ends it, the latest that starts it
            if id(many[j]) in outcome or not _alike(tails[j], end):
                continue
            for i in range(j - 1, max(pos - 1, j - WINDOW), -1):
                if id(many[i]) in outcome:
                    break
                if _alike(heads[i], start):
                    run = many[i: j + 1]
                    break
            if run is not None:
                break
        if run is None:
            continue
        pos = many.index(run[-1]) + 1
        names = " + ".join(df.op_name for df in run)
        n, m = (len(run), 1) if side == "npu" else (1, len(run))
        ours_out, their_out = _first_name(run[-1].outputs), _first_name(one.outputs)
        pair_hint = f'"{ours_out}": "{their_out}"' if side == "npu" else f'"{their_out}": "{ours_out}"'
        ratio = f"{FUSED} ({n}:{m} NPU:golden)"
        for df in run:
            outcome[id(df)] = Left(df.op_name, side, FUSED, f"{ratio}: {names} compute {other} {one.op_name}; "
                                   f"{pair_hint}", f"{ratio}: one of {len(run)} calls that compute one {other} call")
        outcome[id(one)] = Left(one.op_name, other, FUSED, f"{ratio}: {one.op_name} is computed by {side} {names}; "
                                f"{pair_hint}", f"{ratio}: {side} computes it in {len(run)} calls")


def _first_name(tensors: list) -> str:
    return next((t.name for t in tensors if _value(t) is not None), "")  # as the table and a mapping file name it


def _absorbed(df, side: str, neighbours) -> Left:
    ins = [v for v in map(_value, df.inputs) if v is not None]
    for t in df.outputs:
        v = _value(t)
        if v is None:
            continue
        if any(_alike(v, x) for x in ins):
            return Left(df.op_name, side, ABSORBED, f"{ABSORBED}: its output holds its input's values (a cast, "
                        "view or copy the other side does without)")
        if any(_alike(v, x) for x in neighbours):
            return Left(df.op_name, side, ABSORBED, f"{ABSORBED}: its output holds the values of a paired call's "
                        "tensor in its module (the other side makes it inside that call)")
    other = "golden" if side == "npu" else "NPU"
    return Left(df.op_name, side, NONE, f"{NONE}: no {other} call pairs with it, none in its module holds its values "
                "(a mapping file names its counterpart)")
