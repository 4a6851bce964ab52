"""A model file to a `Graph` by its format's loader (`load_model`), every failure one `SourceError`
naming the file.

Which format a path is, and so which loader reads it, is sides.registry's to say (`detect`: once per
path, by content; each model format's entry declares its loader and what its graphs are; its
`load_graph` is the entry point for a path): nothing here looks at a file's name or content to
choose, so a path is never classified two ways."""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from accuscope.engine.sources.inputfile import require_regular
from accuscope.engine.sources.tensor import SourceError

if TYPE_CHECKING:
    from accuscope.engine.graphs.graph import Graph

Loader = Callable[[Path], "Graph"]  # a model format's reader: the file to its Graph


def load_model(load: Loader, kind: str, path: str | os.PathLike) -> Graph:
    """The model at `path`, read by `load`, the loader of the model format (`kind`) `sides.registry.detect`
    gave.

    Raises SourceError naming the file and the reason (not parseable, damaged)."""
    p = Path(path)
    require_regular(str(p))
    try:
        return load(p)
    except SourceError:
        raise
    except (TypeError, AttributeError, KeyError, IndexError, ValueError, OverflowError, RecursionError) as e:
        # The readers check what they use; a model damaged in a way they did not foresee still
        # gets one line naming the file, never a traceback.
        raise SourceError(f"{p}: damaged {kind} model ({type(e).__name__}: {e})") from e
