"""The exit codes of every accuscope command and of the app: one meaning each, so scripts can tell
"it ran" from "it found problems" from "it could not run" from "it crashed"."""
from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0  # it ran; nothing to report
    FINDINGS = 1  # it ran and found something: rows breaking thresholds, problems in the data
    UNUSABLE = 2  # unusable input or arguments: a missing path, nothing readable, a bad option
    INTERNAL = 3  # an uncaught exception: a bug in accuscope
    INTERRUPTED = 130  # Ctrl+C / SIGTERM
    PIPE_CLOSED = 141  # the reader of stdout went away (128 + SIGPIPE, as the shell reports it)
