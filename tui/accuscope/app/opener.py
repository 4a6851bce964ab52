"""What a screen asks of the app it runs in: open a task in its screen (by its path: the app opens it,
AccuscopeApp.open_task), re-run one as its task.json says.
The screens that do (browser, task, precision) reach the app through `opener(self)`, typed by this
protocol, so that none of them imports app.py, which imports them."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, cast

if TYPE_CHECKING:
    from pathlib import Path

    from textual.dom import DOMNode

    from ..engine.compare.spec import CompareSpec
    from ..engine.tasks.task import TaskFolder


class Opener(Protocol):
    def open_task(self, path: Path) -> bool: ...

    def rerun_spec(self, task: TaskFolder, then: Callable[[CompareSpec], object]) -> None: ...


def opener(node: DOMNode) -> Opener:
    """The app `node` runs in, as the Opener it is (AccuscopeApp); TypeError in another app."""
    app = node.app
    if not (callable(getattr(app, "open_task", None)) and callable(getattr(app, "rerun_spec", None))):
        raise TypeError(f"{type(node).__name__} runs in an app that opens no task ({type(app).__name__})")
    return cast("Opener", app)
