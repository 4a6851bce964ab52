"""A task's pairing as msprobe's own mapping files, so that `msprobe compare` pairs what accuscope paired.

  data_mapping.yaml   msprobe's `-dm` file, `{npu data name}: {bench data name}`: every pair accuscope
                      made whose two names differ, by whatever rule made it (a mapping file, the app's
                      decisions in the task's pairs.yaml, name_variants, the MindSpore-PyTorch table,
                      --match structure); and `N/A` (msprobe's own word for a slot without counterpart,
                      as its layer mapping writes it) for a tensor accuscope left unpaired although the
                      bench side holds one of the same name (a pair rejected in the app), which msprobe
                      would otherwise pair by name. Tensors paired with their namesake are not listed:
                      msprobe pairs a name its file does not list with itself.
  cell_mapping.yaml   msprobe's `-cm` file, `{cell path.Class}: {module path.Class}`: the module calls
                      accuscope paired whose paths differ (`layers.0.attention.qkv.Dense:
                      layers.0.self_attention.query_key_value.Linear`); coarser than the data mapping
                      (msprobe pairs the renamed call slot for slot by the same names: a MindSpore
                      LayerNorm's gamma is no PyTorch weight there), for msprobe's cell-mapping users.

msprobe takes one of -cm and -dm at a time (its comparison reads the cell mapping first); the data
mapping is the whole pairing. The pairs are the task's plan (the pairing by identity and by the rules
above, rank by rank for a multi-rank task, the names of every rank merged), not the value check's
re-pairs (compare/repair.py) that only a run makes. crossmap.load reads both files back (its DATA and
CELL kinds): tests/cli/test_msprobemap.py holds the round trip, and tests/fixtures/msprobe/cross/
check_mapping.py runs the real msprobe on the data mapping (export/*/msprobe_pairs.json, its pairs).
"""
# lazy: engine.compare.comparison, engine.compare.multirank, engine.sources.ranks, engine.tasks.task
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from accuscope.engine.compare import crossmap
from accuscope.engine.sources.outputfile import not_a_link, write_text
from accuscope.engine.sources.tensor import SourceError

DATA_FILE, CELL_FILE = "data_mapping.yaml", "cell_mapping.yaml"
UNPAIRED = "unpaired"  # MsprobeMapping.rules' key for the N/A lines


@dataclass
class MsprobeMapping:
    """What the files hold: data names and cell paths, npu -> bench, in the NPU side's order."""

    data: dict[str, str] = field(default_factory=dict)
    cells: dict[str, str] = field(default_factory=dict)
    rules: dict[str, int] = field(default_factory=dict)  # the listed data pairs by the rule that made them
    same: int = 0  # pairs of namesakes (not listed: msprobe pairs them itself)
    conflicts: list[str] = field(default_factory=list)  # a name two ranks pair otherwise (the first kept)

    def add(self, plan) -> None:
        """The pairs of one comparison's plan (crossmap's rules recorded on each pair's `how`)."""
        bench = {t.tensor_name for t in plan.golden.tensors if t.tensor_name}
        for p in plan.pairs:
            name = p.npu.tensor_name
            if not name:
                continue
            if p.golden is None:
                if name in bench:  # left unpaired (rejected in the app): msprobe would pair it by name
                    self._put(self.data, name, crossmap.NO_COUNTERPART, UNPAIRED)
                continue
            target = p.golden.tensor_name
            if target == name:
                self.same += 1
                continue
            self._put(self.data, name, target, p.how or "?")
            ours, theirs = module_path(p.op.op_name), module_path(p.golden.op)
            if ours is not None and theirs is not None and ours != theirs:
                self._put(self.cells, ours, theirs)

    def _put(self, table: dict[str, str], key: str, value: str, how: str = "") -> None:
        """`key: value` in `table`, counted under `how` when new; a key already given another value (by
        another rank) keeps the first, and the conflict is listed."""
        found = table.get(key)
        if found is None:
            table[key] = value
            if how:
                self.rules[how] = self.rules.get(how, 0) + 1
        elif found != value:
            self.conflicts.append(f"{key}: {found} (kept) or {value}")

    def texts(self) -> dict[str, str]:
        """{file name: its text}: YAML whose keys and values are JSON strings (msprobe's yaml.safe_load
        and crossmap's reader take them; a name holding `:` or `#` stays one scalar). A file with nothing
        to say is not written: msprobe pairs namesakes without one."""
        head = "# msprobe {kind} written by accuscope (`accuscope pairs`): msprobe compare {flag} {name}\n"
        return {name: head.format(kind=kind, flag=flag, name=name)
                + "".join(f"{json.dumps(k, ensure_ascii=False)}: {json.dumps(v, ensure_ascii=False)}\n"
                          for k, v in table.items())
                for name, kind, flag, table in ((DATA_FILE, "data mapping", "-dm", self.data),
                                                (CELL_FILE, "cell mapping", "-cm", self.cells)) if table}


def module_path(call: str) -> str | None:
    """`Cell.layers.0.attention.qkv.Dense.forward.0` -> `layers.0.attention.qkv.Dense`: the cell path
    and class msprobe's cell mapping names; None for what is no module call."""
    m = crossmap.module_call(call)
    return f"{m.group('path')}.{m.group('cls')}" if m else None


def task_mapping(folder: str | os.PathLike) -> MsprobeMapping:
    """The pairing of the task in `folder` (its pairs.yaml, when the app recorded decisions, in place of
    the mapping file task.json names: pairs.yaml carries that file's names). SourceError when the task
    compares no msprobe dumps."""
    from accuscope.engine.compare.comparison import plan
    from accuscope.engine.compare.multirank import rank_spec
    from accuscope.engine.sources.ranks import numbers, pair_ranks, pick
    from accuscope.engine.tasks.task import load_task
    task = load_task(folder)
    if not task.doc.names_dumps:
        raise SourceError(f"{folder}: the task does not name its NPU and golden dumps (task.json npu/golden)")
    spec = task.spec(algorithms=None, op_range=None, ops=None, custom_dir=None)
    decisions = Path(folder) / crossmap.DECISIONS
    if decisions.is_file():
        spec = replace(spec, mapping=str(decisions))
    leaves = pick(pair_ranks(spec.npu, spec.golden)[0], numbers(spec.rank), numbers(spec.step))
    specs = [rank_spec(spec, leaf) for leaf in leaves] or [spec]
    found = MsprobeMapping()
    for one in specs:
        made = plan(one)
        if not (made.npu.kind == made.golden.kind and made.npu.caps.pairs_calls):
            raise SourceError(f"{folder}: compares {made.npu.kind} against {made.golden.kind}; msprobe's mapping "
                              "files name the calls of two msprobe dumps")
        found.add(made)
    return found


def output_folder(out: str | os.PathLike) -> Path:
    """`out` as the folder the files go into: SourceError naming it when it is a symbolic link or something
    other than a folder (checked before a task is planned, and again when written)."""
    root = not_a_link(out, "output folder")
    if root.exists() and not root.is_dir():
        raise SourceError(f"{root}: exists and is not a folder")
    return root


def write_mapping(found: MsprobeMapping, out: str | os.PathLike) -> list[Path]:
    """data_mapping.yaml and cell_mapping.yaml in the folder `out` (made if missing; never through a
    symbolic link, each file replaced whole), those with something to say: the paths written."""
    root = output_folder(out)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SourceError(f"{root}: cannot create the folder ({exc.strerror})") from None
    written = []
    for name, text in found.texts().items():
        write_text(root / name, text)
        written.append(root / name)
    return written
