"""A chain's stages seen op by op: what the app's per-stage views show (the op table's stage columns,
the chart's curve per stage, an op at every stage). Built from the stages' tables (chain.StageTables)
and their judgement under the thresholds shown; nothing here judges again (chain.py does).

A row stands for the same thing in every stage's table by its key (chain.row_key: the reference's op
and the tensor's place on it), whatever each stage calls its own op.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from accuscope.engine.compare.chain import ChainJudgement, StageTables, entered_rows, row_key_of, row_keys, row_state
from accuscope.engine.compare.results import ResultTable
from accuscope.engine.compare.thresholds import Thresholds


@dataclass(frozen=True)
class StageAt:
    """One op at one stage: its metrics against the reference, and against the stage before (`step_*`,
    NaN where no step compared it; `before` "" for the first stage, whose step is the reference)."""

    label: str
    before: str
    found: bool  # the stage has the op (a stage that fused it away has none)
    cos: float
    red: float
    failing: bool  # against the reference, under the thresholds shown
    step_cos: float
    step_red: float
    entered: bool  # the error of this op entered here (its own step adds it: chain.py)


@dataclass(frozen=True)
class Curves:
    """One metric along the chain's ops, one series per stage (NaN where a stage has no such op): the
    x axis is the ops of every stage merged in execution order (`keys`)."""

    metric: str
    keys: list[str]
    series: dict[str, np.ndarray]
    position: dict[str, int]  # key -> its x
    rows: np.ndarray  # per row of the shown table, its x (-1: a row not paired with the reference)

    def visible(self, rows: np.ndarray) -> np.ndarray:
        """Which x the shown table's `rows` (the op table's filtered view) stand at, as a mask over `keys`."""
        mask = np.zeros(len(self.keys), dtype=bool)
        xs = self.rows[np.asarray(rows, dtype=np.int64)]
        mask[xs[xs >= 0]] = True
        return mask


@dataclass
class ChainView:
    """The chain task's stages (in chain order), their judgement, and which of them is the table shown
    (`own`: the chain folder's own stage)."""

    stages: list[StageTables]
    judgement: ChainJudgement
    own: int
    thresholds: Thresholds
    _keyed: list[dict[str, int]] = field(default_factory=list, repr=False)
    _fail: list[np.ndarray] = field(default_factory=list, repr=False)
    _first: dict[str, str] | None = field(default=None, repr=False)
    _curves: dict[str, Curves] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._keyed = [row_keys(s.table) for s in self.stages]
        self._fail = [row_state(s.table, self.thresholds).fail for s in self.stages]

    @property
    def labels(self) -> list[str]:
        return [s.label for s in self.stages]

    @property
    def table(self) -> ResultTable:
        """The table shown: the own stage's against the reference."""
        return self.stages[self.own].table

    def key(self, row: int) -> str:
        """The key of the shown table's row."""
        return row_key_of(self.table, row)

    def own_row(self, stage: int, tensor: str) -> int | None:
        """The shown table's row holding what the tensor `tensor` of stage `stage` (its own name) holds: the
        same op by the reference's name (row_key); None where the shown stage has no such row."""
        c = self.stages[stage].table.columns
        hits = np.flatnonzero(np.asarray(c["tensor"][:]) == tensor)
        if not len(hits):
            return None
        r = int(hits[0])
        return r if stage == self.own else self._keyed[self.own].get(row_key_of(self.stages[stage].table, r))

    def entered(self) -> list[str]:
        """Per row of the shown table: the stage where its error entered ("" where none did)."""
        return entered_rows(self.stages, self.judgement, self.own)

    def entered_at(self, key: str) -> str:
        """The stage whose own step adds the error of the op `key` ("": none)."""
        if self._first is None:
            first: dict[str, str] = {}
            for s, sj in zip(self.stages, self.judgement.stages):
                for r in sj.own:
                    first.setdefault(row_key_of(s.table, r), s.label)
            self._first = first
        return self._first.get(key, "")

    def columns(self, metric: str = "cos") -> dict[str, np.ndarray]:
        """Per stage label: `metric` against the reference of each row of the shown table (its op at that
        stage; NaN where the stage has none)."""
        table = self.table
        keys = [row_key_of(table, r) for r in range(len(table))]
        out = {}
        for s, keyed in zip(self.stages, self._keyed):
            values = s.table.numbers(metric) if metric in s.table.columns else None
            col = np.full(len(table), np.nan)
            if values is not None:
                for r, k in enumerate(keys):
                    at = keyed.get(k)
                    if at is not None:
                        col[r] = float(values[at])
            out[s.label] = col
        return out

    def at(self, row: int) -> list[StageAt]:
        """The shown table's row's op at every stage, in chain order."""
        key = self.key(row)
        entered = self.entered_at(key)
        out = []
        for s, keyed, fails in zip(self.stages, self._keyed, self._fail):
            r = keyed.get(key)
            if r is None:
                out.append(StageAt(s.label, s.before, False, np.nan, np.nan, False, np.nan, np.nan, False))
                continue
            cos, red = float(s.table.numbers("cos")[r]), float(s.table.numbers("red")[r])
            fail = bool(fails[r])
            step_cos = step_red = np.nan
            if not s.before:
                step_cos, step_red = cos, red  # the first stage's step is its comparison with the reference
            elif s.step is not None:
                hits = np.flatnonzero(np.asarray(s.step.columns["tensor"][:]) == s.table.columns["tensor"][r])
                if len(hits):
                    step_cos = float(s.step.numbers("cos")[hits[0]])
                    step_red = float(s.step.numbers("red")[hits[0]])
            out.append(StageAt(s.label, s.before, True, cos, red, fail, step_cos, step_red, entered == s.label))
        return out

    def curves(self, metric: str) -> Curves:
        """`metric` against the reference along the ops of every stage (see Curves): each stage's ops in
        its execution order, an op no earlier stage has placed after the op it follows there. Kept: a
        worker makes the chart's first (a million rows take seconds)."""
        if metric not in self._curves:
            self._curves[metric] = self._merged(metric)
        return self._curves[metric]

    def _merged(self, metric: str) -> Curves:
        after: dict[str | None, list[str]] = {}
        known: set[str] = set()
        own: dict[int, str] = {}  # the shown table's row -> its key
        for at, s in enumerate(self.stages):
            c = s.table.columns
            anchor: str | None = None
            for r in np.argsort(np.asarray(c["index"][:]), kind="stable").tolist():
                g = str(c["golden_op"][r])
                if not g or g == "*":
                    continue
                k = row_key_of(s.table, r)
                if at == self.own:
                    own[r] = k
                if k not in known:  # right after the op it follows here, before what follows that op elsewhere
                    known.add(k)
                    after.setdefault(anchor, []).insert(0, k)
                anchor = k
        keys: list[str] = []
        stack = list(reversed(after.get(None, [])))
        while stack:
            k = stack.pop()
            keys.append(k)
            stack.extend(reversed(after.get(k, [])))
        position = {k: i for i, k in enumerate(keys)}
        series = {}
        for s, keyed in zip(self.stages, self._keyed):
            ys = np.full(len(keys), np.nan)
            if metric in s.table.columns:
                values = s.table.numbers(metric)
                for k, r in keyed.items():
                    ys[position[k]] = float(values[r])
            series[s.label] = ys
        rows = np.full(len(self.table), -1, dtype=np.int64)
        for r, k in own.items():
            rows[r] = position[k]
        return Curves(metric, keys, series, position, rows)
