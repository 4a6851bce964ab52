"""What a dump format does that the rest of the code asks about (`Capabilities`), declared on the format's
entry in `sides.registry` (`Format.caps`) and read through `registry.capabilities(kind)` or `Side.caps`. The
comparison, the advisor and the commands decide a behaviour by these, never by a format's name: a new
format that behaves as an existing one declares the same, and nothing else changes."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Capabilities:
    """What the rest of the code asks of a dump format (each False or None where it does not)."""

    step_based: bool = False  # a training step's calls (msprobe): its last call is an optimizer update, not the
    # network's output; the diagnosis's next step re-runs an API (run_ut), there is no model to re-run
    pairs_calls: bool = False  # two dumps of it pair call by call (crossmap: API names, module paths, call order;
    # a mapping file, --match structure); a golden of it is a framework run: no converter inserted a tensor
    ordered_by_timestamp: bool = False  # its execution order comes from timestamps in file names: without them
    # the files stand in name order, and the last is no network output
    device_dump: bool = False  # written by an accelerator's dump tool: the side under test, not a reference
    own_dump_json: bool = False  # a dump.json in it is its data, read by its reader (not `accuscope dump`'s record)
    modules: Callable[..., Any] | None = None  # its module hierarchy (path, step, rank) -> a Graph: Side.modules
    both_sides: tuple[str | None, str | None] | None = None  # a file holding both sides' runs: the parts
    # (npu, golden) a comparison of the file against itself takes unless told (tpu-mlir: actual, desired)
    runs: Callable[[str], list[str]] | None = None  # the named runs a file holds (Polygraphy's runners): given
    # on both sides, the second against the first
    network_outputs: Callable[[list[str]], set[str]] | None = None  # its network outputs among its ops' names
    # in execution order, where the last op alone is not (tpu-mlir's output casts); None: the last op


NO_CAPABILITIES = Capabilities()
