"""Multi-rank trees: `ROOT/[step{N}/]rank{M}[/proc{P}]`, each leaf any source accuscope reads.

Training and LLM runs dump one folder per rank (msprobe: `dump_path/step{N}/rank{M}/`, `rank`
alone on a single card, `proc{P}` below a rank when one rank ran several processes). `ranks(root)`
finds the leaves in (step, rank, proc) order; a comparison pairs the two sides' leaves by their
path below the root.

On a cluster a rank's files live on the host that wrote them, at the same path on every host (a
local disk mounted at the same place). Where a host mounts the dump elsewhere, its workers are
started with ACCUSCOPE_ROOT_MAP="SHARED=LOCAL[;SHARED=LOCAL]": a path under SHARED is read under
LOCAL on that host (`local_path`).
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import NamedTuple

from accuscope.engine.sources.inputfile import listing, shared_listings
from accuscope.engine.sources.tensor import SourceError

ROOT_MAP = "ACCUSCOPE_ROOT_MAP"
_STEP, _RANK, _PROC = re.compile(r"step(\d+)$"), re.compile(r"rank(\d*)$"), re.compile(r"proc(\d+)$")


class Rank(NamedTuple):
    """One leaf: frozen, compared and ordered field by field. A NamedTuple: every compare imports this
    module (taskrun.ranked: are the sides rank trees?), and a frozen ordered dataclass took 2 ms to make."""

    step: int  # -1: no step folder
    rank: int
    proc: int  # -1: no proc folder
    rel: str  # the leaf's path below the root, "/"-separated: step0/rank3

    @property
    def key(self) -> str:
        """A file name for this leaf's results: step0_rank3."""
        return self.rel.replace("/", "_")

    @property
    def label(self) -> str:
        return " ".join(f"{name} {n}" for name, n in (("step", self.step), ("rank", self.rank), ("proc", self.proc))
                        if n >= 0)


def _children(folder: Path, pattern: re.Pattern) -> list[tuple[int, str]]:
    try:
        names = listing(os.fspath(folder))[0]
    except OSError:
        return []
    found = []
    for name in names:
        m = pattern.match(name)
        if m:
            found.append((int(m.group(1) or 0), name))
    return sorted(found)


def ranks(root: str | os.PathLike) -> list[Rank]:
    """The rank leaves under `root` (step*/rank*[/proc*] or rank*[/proc*]); [] when root is not a
    multi-rank tree (a folder named rank* itself is one source, not a tree)."""
    root = Path(local_path(os.fspath(root)))
    with shared_listings():  # the root is listed once for its step and its rank folders
        steps = _children(root, _STEP) or [(-1, "")]
        out = []
        for step, step_name in steps:
            base = root / step_name if step_name else root
            for rank, rank_name in _children(base, _RANK):
                rel = f"{step_name}/{rank_name}" if step_name else rank_name
                procs = _children(base / rank_name, _PROC)
                out += [Rank(step, rank, proc, f"{rel}/{name}") for proc, name in procs] or [Rank(step, rank, -1, rel)]
    return out


def pair_ranks(npu: str, golden: str) -> tuple[list[Rank], list[str]]:
    """The rank leaves found on both sides, and one problem line per leaf on one side only;
    ([], []) when neither side is a multi-rank tree."""
    ours, theirs = ranks(npu), ranks(golden)
    if not ours and not theirs:
        return [], []
    by_rel = {r.rel: r for r in theirs}
    both = [r for r in ours if r.rel in by_rel]
    problems = [f"{os.path.join(npu, r.rel)}: {r.label} has no folder on the golden side ({golden})"
                for r in ours if r.rel not in by_rel]
    mine = {r.rel for r in ours}
    problems += [f"{os.path.join(golden, r.rel)}: {r.label} has no folder on the NPU side ({npu})"
                 for r in theirs if r.rel not in mine]
    return both, problems


def numbers(text: str | int | None) -> list[int] | None:
    """--rank/--step (3, rank3, step1, "0,2") as the numbers `pick` takes; None: all. SourceError for
    what names no number."""
    if text is None or text == "":
        return None
    try:
        return [int(t.strip().removeprefix("rank").removeprefix("step")) for t in str(text).split(",") if t.strip()]
    except ValueError:
        raise SourceError(f"{text!r}: give rank and step numbers (3 or rank3)") from None


def pick(found: list[Rank], rank: list[int] | None = None, step: list[int] | None = None) -> list[Rank]:
    """The leaves of the chosen ranks and steps (None: all)."""
    return [r for r in found if (rank is None or r.rank in rank) and (step is None or r.step in step)]


def local_path(path: str) -> str:
    """`path` as this host reads it (ACCUSCOPE_ROOT_MAP; unchanged without it)."""
    for item in filter(None, os.environ.get(ROOT_MAP, "").split(";")):
        shared, _, local = item.partition("=")
        shared = shared.rstrip("/")
        if shared and local and (path == shared or path.startswith(shared + "/")):
            return local.rstrip("/") + path[len(shared):]
    return path
