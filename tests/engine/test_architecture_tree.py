"""ARCHITECTURE.md's tree stays true: every module of tui/accuscope is named where the tree lists its
package, and every module the tree names there exists. The tree is read as written: a line whose first
word ends in `/` heads a package (nested by indentation); what a package's own lines say (its header's
lines and its entries', not a sub-package's) names its modules, as `name.py` / `name.c` or, in a list,
a bare `name` (`onnxgraph, omgraph, ...`); a name written with a folder (`sides/capabilities.py`) is a
path from the package root, the engine or the repository."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).parents[2]
PACKAGE = REPO / "tui" / "accuscope"
ARCHITECTURE = REPO / "ARCHITECTURE.md"
SKIPPED = {"__init__.py", "__main__.py"}  # a package's own files: named by the package
NAMED = re.compile(r"(?<![\w./-])((?:[\w]+/)*[A-Za-z_]\w*\.(?:py|c))(?![\w.])")


def tree_text(markdown: str) -> list[str]:
    """The lines of the fenced block under `## The tree`, from `tui/accuscope/` to the next top-level line."""
    block = markdown.split("## The tree", 1)[1].split("```", 2)[1].splitlines()
    start = next(i for i, line in enumerate(block) if line.startswith("tui/accuscope/"))
    end = next((i for i in range(start + 1, len(block)) if block[i][:1].strip()), len(block))
    return block[start:end]


def packages(lines: list[str]) -> dict[str, str]:
    """Package folder (relative to tui/accuscope, "" the package itself) -> the text of its own lines."""
    own: dict[str, list[str]] = {}
    open_: list[tuple[int, str]] = []  # (indent, folder) of the headers enclosing the line
    for line in lines:
        indent = len(line) - len(line.lstrip())
        first = line.split()[0] if line.strip() else ""
        while open_ and indent <= open_[-1][0] and first:
            open_.pop()
        if first.endswith("/") and re.fullmatch(r"[\w/]+/", first):
            parent = open_[-1][1] if open_ else None
            folder = "" if parent is None else f"{parent}/{first.rstrip('/')}".lstrip("/")
            open_.append((indent, folder))
            line = line.replace(first, "", 1)
        own.setdefault(open_[-1][1], []).append(line)
    return {folder: "\n".join(text) for folder, text in own.items()}


def _bare(stem: str, text: str) -> bool:
    """`stem` as an item of a list in `text`: after `(`, `,`, `;` or `:`, before `,`, `;`, `)` or ` (`."""
    return re.search(rf"[(,;:]\s*{re.escape(stem)}(?=\s*[,;)]|\s+\()", text) is not None


def missing_and_gone(markdown: str, root: Path) -> tuple[list[str], list[str]]:
    """(the modules under `root` the tree does not name in their package's lines, the names the tree
    gives that are no module)."""
    own = packages(tree_text(markdown))
    missing = []
    for path in sorted([*root.rglob("*.py"), *root.rglob("*.c")]):
        if path.name in SKIPPED or "__pycache__" in path.parts:
            continue
        rel = path.relative_to(root)
        folder = next(f for f in sorted(own, key=len, reverse=True)
                      if f == "" or rel.parts[:len(Path(f).parts)] == Path(f).parts)
        text = own[folder]
        if not re.search(rf"(?<![\w.]){re.escape(path.name)}(?![\w])", text) and not _bare(path.stem, text):
            missing.append(f"{rel} (in {folder or 'tui/accuscope'}/'s lines)")
    gone = []
    for folder, text in own.items():
        here = root / folder
        inner = [here / f for f in own if f != folder and f.startswith(f"{folder}/".lstrip("/")) and f]
        for name in NAMED.findall(text):
            if "/" in name:
                found = any((base / name).exists() for base in (root, root / "engine", root.parents[1]))
            else:
                found = any(p.name == name and not any(p.is_relative_to(i) for i in inner)
                            for p in here.rglob(name))
            if not found:
                gone.append(f"{name} (in {folder or 'tui/accuscope'}/'s lines)")
    return missing, gone


def test_every_module_is_in_architecture_md_s_tree_and_every_module_named_there_exists():
    missing, gone = missing_and_gone(ARCHITECTURE.read_text(encoding="utf-8"), PACKAGE)
    assert not missing, "modules ARCHITECTURE.md's tree does not name under their package:\n" + "\n".join(missing)
    assert not gone, "modules ARCHITECTURE.md's tree names that do not exist:\n" + "\n".join(gone)


def test_a_module_left_out_of_the_tree_or_named_but_gone_is_found(tmp_path):
    root = tmp_path / "accuscope"
    for rel in ("cli.py", "engine/progress.py", "engine/sources/tensor.py", "engine/sources/names.py",
                "engine/graphs/onnxgraph.py", "engine/graphs/graph.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("")
    tree = ("## The tree\n\n```\ntui/accuscope/\n  cli.py            the command\n"
            "  engine/           headless\n    progress.py     Progress\n"
            "    sources/        what accuscope reads\n      tensor.py       Tensor; names.py the names\n"
            "    graphs/         graph.py (Node, Graph), onnxgraph, oldgraph.py\n"
            "tests/              names.py\n```\n")
    assert missing_and_gone(tree, root) == ([], ["oldgraph.py (in engine/graphs/'s lines)"])
    (root / "engine" / "sources" / "kinds.py").write_text("")  # a module under sources the tree lacks
    (root / "engine" / "progress.py").unlink()  # named in engine's own lines, but gone
    missing, gone = missing_and_gone(tree.replace("tensor.py       Tensor; names.py", "tensor.py       Tensor"), root)
    assert missing == ["engine/sources/kinds.py (in engine/sources/'s lines)",
                       "engine/sources/names.py (in engine/sources/'s lines)"]
    assert gone == ["progress.py (in engine/'s lines)", "oldgraph.py (in engine/graphs/'s lines)"]
