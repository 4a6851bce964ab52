"""How much of each side a comparison saw (`Coverage`), and its task.json form: never call a run that
paired nothing a pass. Made by comparison.plan, counted again after execute's re-pairings, read back
by every surface from task.json (`from_meta`; its `basis` is what the verdict rests on)."""
# lazy: engine.compare.repair
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from accuscope.engine.compare.judgement import Basis
from accuscope.engine.compare.mapping import FEW
from accuscope.engine.sources.tensor import INPUT

if TYPE_CHECKING:
    from accuscope.engine.compare.pair import Pair
    from accuscope.engine.compare.repair import Repair
    from accuscope.engine.sides.side import Side


@dataclass
class Coverage:
    """How much of each side the comparison saw: never call a run that paired nothing a pass."""

    npu_paired: int
    npu_total: int
    golden_used: int
    golden_total: int
    outputs_paired: int
    outputs_total: int
    npu_only: int = 0  # tensors of device-only ops / ops a converter inserted: no counterpart can exist
    unreachable: list[str] = field(default_factory=list)  # tensors a side's run could not fetch (If/Loop bodies)
    golden_unused: list[tuple[str, str]] = field(default_factory=list)  # (golden tensor, why no NPU tensor pairs it)
    step: bool = False  # the sides are the calls of a training / inference step (msprobe): no network output
    repaired: list[Repair] = field(default_factory=list)  # pairs by identity re-paired by their values (repair.py)
    misshapen: list[str] = field(default_factory=list)  # tensors merged from shards without the other side's shape
    unread: list[str] = field(default_factory=list)  # rows left unjudged by an input: `tensor: why` (never a pass)
    unread_count: int = 0  # all of them (unread keeps the first 1000)
    pairing: list[str] = field(default_factory=list)  # what pairing across implementations says (crossmap.describe)
    ladder: dict = field(default_factory=dict)  # its counts: leftovers.Account.to_meta() (rungs, leftovers, unmapped APIs)

    @property
    def warnings(self) -> list[str]:
        found = []  # NPU tensors beyond the reference's (a converter's own, device-only) never warn on their own
        if self.golden_total and self.golden_used < FEW * self.golden_total:
            found.append(f"only {self.golden_used:,} of {self.golden_total:,} golden tensors were used")
        if self.outputs_paired == 0 and not self.step:
            found.append("no network output was compared" if self.outputs_total else
                         "the network outputs are unknown (no model names them)")
        if self.misshapen:  # a merge along a wrong dimension keeps the element count: never a pass
            found.append(f"{len(self.misshapen):,} tensors merged from shards do not have the other side's shape, so "
                         f"were not compared (first: {self.misshapen[0]}): the split is wrong for them (--shards)")
        return found

    @property
    def notes(self) -> list[str]:
        """What was not compared for a known reason, and how pairing across implementations went (each
        rule's count, the APIs a table cannot map: what to put in a mapping file); never a warning on its own."""
        found = list(self.pairing)
        if self.unreachable:
            found.append(f"{len(self.unreachable):,} tensors inside If/Loop bodies could not be dumped, so were not "
                         f"compared (first: {self.unreachable[0]})")
        return found

    def unread_are(self, found: list[str]) -> None:
        self.unread, self.unread_count = found[:1000], len(found)

    @property
    def basis(self) -> Basis:
        """What the verdict rests on besides the table (judgement.Basis): what Basis.from_coverage reads back
        from task.json's copy of this coverage."""
        return Basis(self.step, self.unread_count, self.unread[0] if self.unread else "")

    def line(self, ops: int) -> str:
        """`paired 64 of 64 NPU tensors (30 ops) · used 30 of 37 golden tensors · network outputs ...`"""
        only = f", {self.npu_only:,} more only on the NPU side" if self.npu_only else ""
        outputs = ("the calls of a step (judged on every call)" if self.step else
                   f"network outputs compared {self.outputs_paired} of {self.outputs_total}")
        fused = f" · re-paired {len(self.repaired):,} in fused chains" if self.repaired else ""
        return (f"paired {self.npu_paired:,} of {self.npu_total:,} NPU tensors ({ops:,} ops{only}) · used "
                f"{self.golden_used:,} of {self.golden_total:,} golden tensors · {outputs}{fused}")

    def repaired_after(self, pairs: list[Pair], golden: Side, repairs: list[Repair]) -> None:
        """Count the re-pairings of execute(): golden tensors used and unused change with them."""
        self.repaired = list(repairs)
        used = {p.golden.name for p in pairs if p.golden is not None}
        self.golden_used = len(used & {t.name for t in golden.tensors if not (golden.is_device_dump and t.io == INPUT)})
        kept = [(name, why) for name, why in self.golden_unused if name not in used]
        for r in repairs:
            if r.was not in used and r.was not in {name for name, _ in kept}:  # a value's rows (output, inputs): once
                kept.append((r.was, "paired by identity, but the NPU op holds a fused chain's output: re-paired"))
        self.golden_unused = kept

    @classmethod
    def from_meta(cls, doc: dict) -> Coverage:
        """The coverage as task.json keeps it (to_meta); missing counts are 0."""
        from accuscope.engine.compare.repair import Repair

        def count(key: str) -> int:
            v = doc.get(key)
            return v if isinstance(v, int) else 0
        return cls(count("npu_paired"), count("npu_total"), count("golden_used"), count("golden_total"),
                   count("outputs_paired"), count("outputs_total"), count("npu_only"),
                   [str(u) for u in doc.get("unreachable") or []],
                   [(str(u[0]), str(u[1])) for u in doc.get("golden_unused") or [] if isinstance(u, list) and len(u) == 2],
                   doc.get("step") is True,
                   [Repair.from_meta(r) for r in doc.get("repaired") or [] if isinstance(r, dict)],
                   unread=[str(u) for u in doc.get("unread") or []], unread_count=count("unread_count"),
                   pairing=[str(u) for u in doc.get("pairing") or []],
                   ladder=doc["ladder"] if isinstance(doc.get("ladder"), dict) else {})

    def to_meta(self) -> dict:
        return {"npu_paired": self.npu_paired, "npu_total": self.npu_total, "golden_used": self.golden_used,
                "golden_total": self.golden_total, "outputs_paired": self.outputs_paired,
                "outputs_total": self.outputs_total, "npu_only": self.npu_only,
                "unreachable": self.unreachable[:1000], "warnings": self.warnings, "notes": self.notes,
                "golden_unused": [list(u) for u in self.golden_unused[:1000]], **({"step": True} if self.step else {}),
                "repaired": [r.to_meta() for r in self.repaired],
                **({"unread": self.unread, "unread_count": self.unread_count} if self.unread_count else {}),
                **({"pairing": self.pairing} if self.pairing else {}), **({"ladder": self.ladder} if self.ladder else {})}
