"""The export and re-test of a submodel, as the graph screen runs it (`x`): the question of the
folder, the worker that exports (engine.export.folder) and re-tests it, its progress and its
result, kept as `last_export`. `SubmodelExport` is the graph screen's base: the screen sets `folder`
and `selection` (the ops between its start and end marks) and draws the status line and the panel,
where the progress, the verdict and the last export's lines show.
"""
# lazy: engine.export.folder
from __future__ import annotations

import threading
from pathlib import Path

from textual import on, work
from textual.screen import Screen

from ..engine.graphs.subgraph import Selection
from ..engine.progress import Progress
from .dialogs import AskDialog
from .formatting import shown
from .messages import ExportDone, Exported, ExportProgress, deliver, error_text

VERDICT_WORDS = {
    "inside": "error stays: it lives inside the submodel",
    "upstream": "error gone: it came from upstream",
    "none": "no error at the submodel's outputs",
    "unknown": "no verdict",
}


class SubmodelExport(Screen):
    """A screen that exports the submodel it has selected and re-tests it (the graph screen's base)."""

    folder: Path  # the task's folder
    selection: Selection | None  # the submodel chosen, None until both ends are marked

    def __init__(self) -> None:
        super().__init__()
        self.last_export: dict | None = None
        self.cancel = threading.Event()
        self.exporting = False
        self._progress = ""

    def _say(self, message: str, **kwargs) -> None:
        """A notification of plain text (op names and paths may hold markup characters)."""
        self.notify(message, markup=False, **kwargs)

    @property
    def running(self) -> bool:
        """An export is running (the app asks before quitting and sets `cancel`)."""
        return self.exporting

    def update_status(self) -> None:
        """The status line: the export's progress, the last re-test's verdict (the screen draws it)."""

    def update_panel(self) -> None:
        """The details panel: the last export's lines (the screen draws it)."""

    def _show_progress(self) -> None:
        if self.exporting:
            self.update_status()

    def action_export(self) -> None:
        if self.selection is None:
            self._say("mark the start (s) and the end (e) of the submodel first", timeout=4)
            return
        if self.exporting:
            self._say("an export is running", timeout=3)
            return
        from ..engine.export.folder import default_out_dir
        selection = self.selection
        default = str(default_out_dir(self.folder, selection))

        def check(text: str) -> str:
            if not text.strip():
                return "give a folder"
            out = Path(text.strip()).expanduser()
            try:
                if out.exists() and not out.is_dir():
                    return f"{out} exists and is not a folder"
                if out.is_dir() and any(out.iterdir()) and not (out / "manifest.json").is_file():
                    return f"{out} is not empty and is not an accuscope export: choose another folder"
            except OSError as exc:
                return f"{out}: {exc.strerror or exc}"
            return ""

        def answer(text: str | None) -> None:
            if text is None:
                return
            out = Path(text.strip()).expanduser()
            self.exporting = True
            self.cancel.clear()
            self._progress = "exporting…"
            self._say(f"exporting {len(selection.ops)} ops to {out} and re-testing…", title="export", timeout=5)
            self.update_status()
            self.export_worker(self.folder, selection, out)

        described = selection.describe()
        if len(described) > 12:
            described = described[:11] + [f"  … {len(described) - 11} more lines in the details panel"]
        title = "\n".join(shown(line) for line in described)
        self.app.push_screen(AskDialog(f"{title}\n\nExport this submodel with its data and re-test it, into the "
                                       "folder:", default, check, path=True), answer)

    @work(thread=True, exclusive=True, group="export", exit_on_error=False)
    def export_worker(self, folder: Path, selection: Selection, out: Path) -> None:
        from ..engine.export.folder import export

        def progress(p: Progress) -> None:
            self.post_message(ExportProgress(f"export: {p.what} ({p.done}/{p.total})"))

        def run():
            result = export(folder, selection, out, retest=True, progress=progress, cancel=self.cancel)
            return Exported(result, sum(1 for p in out.rglob("*") if p.is_file()) if result is not None else 0)
        deliver(self, ExportDone, run)

    @on(ExportProgress)
    def export_progress(self, message: ExportProgress) -> None:
        if self.exporting:  # (the status line shows it on the next tick)
            self._progress = message.text

    @on(ExportDone)
    def export_done(self, message: ExportDone) -> None:
        self.exporting = False
        self._progress = ""
        if message.result is not None:
            self._export_done(message.result.result, message.result.files)
        else:
            self._say(error_text(message.error), title="export failed", severity="error", timeout=15)
        self.update_status()

    def _export_done(self, result, files: int) -> None:
        if result is None:
            self._say("export cancelled: nothing written", timeout=5)
            return
        lines = [f"{files} files in {result.out_dir}", f"model {result.model.name}, "
                 f"{len(result.selection.ops)} framework ops, {result.seconds:.1f} s"]
        retest = result.retest
        severity = "information"
        if retest is not None:
            lines.append(f"re-test: {VERDICT_WORDS.get(retest.verdict, retest.verdict)}")
            lines.append(retest.message)
            lines += retest.notes
            if retest.task_dir is not None:
                lines.append(f"re-test task: {retest.task_dir}")
            severity = "warning" if retest.verdict == "unknown" else "information"
        lines += [f"note: {n}" for n in result.notes[:5]]
        self.last_export = {"out": result.out_dir, "files": files, "lines": lines,
                            "verdict": retest.verdict if retest is not None else None}
        # a short toast, the verdict (its lines, long paths wrapped, covered the graph for 20 s): the details
        # panel keeps them all, the status line the verdict
        self._say(f"re-test: {VERDICT_WORDS.get(retest.verdict, retest.verdict)}" if retest is not None
                  else f"{files} files", title="export written", severity=severity)
        self.update_panel()
        self.update_status()
