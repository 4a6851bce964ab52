"""The trial log: one JSON line per trial, appended (and synced) as each finishes, after a header
line with the search's settings, so an interrupted search resumes without redoing a trial. The
ranking, made only when the full conversion misses the target, is a line of its own, and so is the
end of a search that ran to its end: `{"final": {"met", "keep", "reason", "files"}}`, the list it
found and the files that say it in each toolchain's words (a resumed search drops it and writes its own).

A trial's line: n, phase, keep (the ops kept in float32), values (each target metric's worst output
value, null for NaN), passed, check (the --check command's exit status), error, seconds (its
conversion and measure), at (when it finished, UTC ISO 8601)."""
from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from accuscope.engine.sources.inputfile import json_loads
from accuscope.engine.sources.outputfile import open_append, write_text
from accuscope.engine.sources.tensor import SourceError

LOG = "trials.jsonl"


@dataclass
class Trial:
    n: int  # 1, 2, ... in the order they ran
    phase: str  # full, greedy, all, bisect, prune
    keep: list[str]  # ops kept in fp32
    values: dict[str, float] = field(default_factory=dict)  # each target metric's worst output value
    passed: bool = False
    check: int | None = None  # the --check command's exit status
    error: str = ""  # why the candidate could not be made or run
    seconds: float = 0.0
    at: str = ""  # when it finished, UTC ISO 8601 (a log written before it: "")

    @property
    def key(self) -> frozenset:
        return frozenset(self.keep)

    def to_json(self) -> str:
        d = asdict(self)
        d["values"] = {k: (None if math.isnan(v) else v) for k, v in self.values.items()}
        return json.dumps(d, ensure_ascii=False)

    @classmethod
    def from_dict(cls, d: dict) -> Trial:
        values = {str(k): math.nan if v is None else float(v) for k, v in (d.get("values") or {}).items()}
        return cls(int(d["n"]), str(d["phase"]), [str(k) for k in d["keep"]], values, bool(d["passed"]),
                   d.get("check"), str(d.get("error") or ""), float(d.get("seconds") or 0.0), str(d.get("at") or ""))


class TrialLog:
    """`DIR/trials.jsonl`: `open(settings)` starts it or, when it was made with the same settings,
    returns the trials it holds (a torn last line, from a kill mid-write, is dropped)."""

    def __init__(self, folder: str | os.PathLike):
        self.path = Path(folder) / LOG

    def open(self, settings: dict) -> tuple[dict, list[Trial], dict | None]:
        """(header, trials so far, the ranking record if made). SourceError when the log belongs to
        a search with other settings."""
        if not self.path.exists():
            return {}, [], None
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise SourceError(f"{self.path}: cannot read the trial log ({exc})") from None
        try:
            header = json_loads(lines[0]) if lines else {}
        except ValueError:
            raise SourceError(f"{self.path}: not a trial log (its first line is not JSON)") from None
        if not isinstance(header, dict) or header.get("kind") != "accuscope-precision":
            raise SourceError(f"{self.path}: not an accuscope precision trial log")
        changed = [k for k, v in settings.items() if header.get(k) != v]
        if changed:
            raise SourceError(f"{self.path}: made by a search with other settings ({', '.join(changed)}); "
                              "use another --out folder or delete it")
        trials, ranking = [], None
        for line in lines[1:]:
            try:
                record = json_loads(line)
                if isinstance(record, dict) and "final" in record and "n" not in record:
                    continue  # the end of an earlier run: the resumed search writes its own
                if isinstance(record, dict) and "ranked" in record and "n" not in record:
                    ranking = {"ranked": [str(r) for r in record["ranked"]], "notes": list(record.get("notes") or [])}
                else:
                    trials.append(Trial.from_dict(record))
            except (KeyError, TypeError, ValueError):
                break  # a line torn by a kill: that trial runs again
        return header, trials, ranking

    def start(self, header: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_text(self.path, json.dumps({"kind": "accuscope-precision", **header}, ensure_ascii=False) + "\n")

    def rewrite(self, header: dict, trials: list[Trial], ranking: dict | None) -> None:
        """The log without a torn tail, so appends start on a fresh line."""
        self.start(header)
        if ranking is not None:
            self.append_ranking(ranking["ranked"], ranking["notes"])
        for t in trials:
            self.append(t)

    def append_ranking(self, ranked: list[str], notes: list[str]) -> None:
        self._append(json.dumps({"ranked": ranked, "notes": notes}, ensure_ascii=False))

    def append(self, trial: Trial) -> None:
        if not trial.at:
            trial.at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self._append(trial.to_json())

    def append_final(self, met: bool, keep: list[str], reason: str, files: dict[str, str]) -> None:
        """The search's end: whether it met the target, the ops it keeps, why it stopped short, the result
        files by key (relative to the log's folder)."""
        self._append(json.dumps({"final": {"met": met, "keep": list(keep), "reason": reason, "files": files}},
                                ensure_ascii=False))

    def _append(self, line: str) -> None:
        with open_append(self.path) as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())
