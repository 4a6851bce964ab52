"""What an export folder is, shared by the export that writes one (folder.py) and the re-test that
reads it back (retest.py): the manifest's name and format (`read_manifest`), how long a dump file's
name may be, the re-test's verdicts, and the cancel convention of both (their progress: engine/progress.py)."""
from __future__ import annotations

import os
import threading
from pathlib import Path

from accuscope.engine.sources.inputfile import read_json_object
from accuscope.engine.sources.tensor import SourceError

MANIFEST = "manifest.json"
FORMAT = 1
LONG_NAME = 200  # dump file names longer than this are written under a numeric name + mapping.csv
INSIDE, UPSTREAM, NO_ERROR, UNKNOWN = "inside", "upstream", "none", "unknown"  # where a re-test puts the error

def read_manifest(export_dir: str | os.PathLike) -> dict:
    path = Path(export_dir) / MANIFEST
    doc = read_json_object(path, f"{export_dir}: not an accuscope export (no {MANIFEST})")
    if doc.get("format") != FORMAT:
        raise SourceError(f"{path}: not a manifest of format {FORMAT}")
    return doc


def cancelled(cancel: threading.Event | None) -> bool:
    return cancel is not None and cancel.is_set()
