"""No import cycle between accuscope's modules, counting every import: at the top, inside functions (lazy,
run only on some paths) and under `if TYPE_CHECKING:` (annotations only). A module that needs another's
names and is needed by it, even for a type, is one concept in two files: the owner of the rule and the
owner of the data import each other, and neither can be read alone (judgement.py decides, thresholds.py
is the data it decides by; expected.py and polytol.py read a CompareSpec from spec.py, not the comparison
that runs them). The modules are read with ast, never imported."""
from __future__ import annotations

import ast
from pathlib import Path

import accuscope

ROOT = Path(accuscope.__file__).parent

# Cycles allowed to remain, each a strongly connected group of modules (without the `accuscope.`
# prefix), with why it is still there. None is left: a new cycle fails; shrink this, never grow it.
ALLOWED: list[frozenset[str]] = []


def modules(root: Path, top: str) -> dict[str, Path]:
    """Dotted name -> file of every module of the package at `root` (named `top`)."""
    return {".".join((top, *p.relative_to(root).with_suffix("").parts)).removesuffix(".__init__"): p
            for p in sorted(root.rglob("*.py"))}


def imports(found: dict[str, Path], typing: bool = True) -> dict[str, set[str]]:
    """Module -> the package's modules it imports anywhere in its text (relative imports resolved; a name
    imported from a package that is a module of its own counts as that module; `typing`: imports under
    `if TYPE_CHECKING:` count too). A module's own packages are not counted (importing a module runs them)."""
    edges: dict[str, set[str]] = {}
    for name, path in found.items():
        tree = ast.parse(path.read_text(), str(path))
        typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                       and "TYPE_CHECKING" in ast.unparse(node.test) for b in node.body for n in ast.walk(b)}
        edges[name] = {t for node in ast.walk(tree) if typing or id(node) not in typing_only
                       for t in _targets(node, name, path, found)}
    return edges


def lazy_imports(found: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the package's modules it imports inside a function (resolved as `imports` does)."""
    lazy: dict[str, set[str]] = {}
    for name, path in found.items():
        tree = ast.parse(path.read_text(), str(path))
        lazy[name] = {t for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                      for node in ast.walk(f) for t in _targets(node, name, path, found)}
    return lazy


def _targets(node: ast.AST, name: str, path: Path, found: dict[str, Path]) -> set[str]:
    """The package's modules one import statement of module `name` (file `path`) imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = []
    if isinstance(node, ast.ImportFrom):
        base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
        module = ".".join(base + ([node.module] if node.module else []))
        targets += [f"{module}.{a.name}" if f"{module}.{a.name}" in found else module for a in node.names]
    elif isinstance(node, ast.Import):
        targets += [a.name for a in node.names]
    modules = set()
    for t in targets:
        while t and t not in found:
            t = t.rpartition(".")[0]
        if t and t != name and not name.startswith(t + "."):
            modules.add(t)
    return modules


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import one another round (strongly connected, two or more: Tarjan's),
    each as one route round it from its first module, e.g. [a, b, c, a]."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return [_route(edges, sorted(g)[0], g) for g in groups]


def _route(edges: dict[str, set[str]], start: str, group: set[str]) -> list[str]:
    """A shortest route from `start` back to it inside `group`."""
    todo, seen = [[start]], {start}
    while todo:
        route = todo.pop(0)
        for w in sorted(edges[route[-1]] & group):
            if w == start:
                return [*route, w]
            if w not in seen:
                seen.add(w)
                todo.append([*route, w])
    raise AssertionError(f"{start} is in no cycle")


def _short(route: list[str]) -> str:
    return " -> ".join(m.removeprefix("accuscope.") for m in route)


def test_no_module_imports_itself_back_not_even_for_a_type():
    edges = imports(modules(ROOT, "accuscope"))
    assert len(edges) > 150 and sum(map(len, edges.values())) > 500
    found = cycles(edges)
    compare = [_short(r) for r in found if any(m.startswith("accuscope.engine.compare.") for m in r)]
    assert not compare, f"{len(compare)} import cycles in engine/compare: {compare}"
    new = [_short(r) for r in found if frozenset(m.removeprefix("accuscope.") for m in r) not in ALLOWED]
    assert not new, f"{len(new)} import cycles (lazy and TYPE_CHECKING imports counted): {new}"
    stale = [sorted(g) for g in ALLOWED if g not in {frozenset(m.removeprefix("accuscope.") for m in r) for r in found}]
    assert not stale, f"gone: take them off ALLOWED: {stale}"


def test_every_kind_of_import_is_seen(tmp_path):
    """The reader sees what the package test relies on it to see: a cycle made only through a lazy
    relative import and a TYPE_CHECKING one, and none when annotations are left out."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "rules.py").write_text("def judge():\n    from .sub import data\n    return data\n")
    (package / "sub" / "data.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                             "    from pkg.rules import judge\n")
    (package / "sub" / "plain.py").write_text("import pkg.sub.data\nfrom .. import rules\n")
    found = modules(package, "pkg")
    assert cycles(imports(found)) == [["pkg.rules", "pkg.sub.data", "pkg.rules"]]
    assert cycles(imports(found, typing=False)) == []
    assert imports(found)["pkg.sub.plain"] == {"pkg.sub.data", "pkg.rules"}


LAZY_LINE = "# lazy: "


def declared(path: Path, top: str) -> tuple[set[str], list[str]]:
    """The modules a module's `# lazy: a.b, c.d` lines name (with `top.` put back), and the problems
    with where they stand: they belong to the module's head, above its first function or class."""
    lines = path.read_text().splitlines()
    tree = ast.parse("\n".join(lines), str(path))
    head = min((n.lineno for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                               ast.ClassDef))), default=len(lines) + 1)
    names, problems = set(), []
    for number, line in enumerate(lines, 1):
        if line.startswith(LAZY_LINE):
            if number > head:
                problems.append(f"{path.name}:{number}: the `# lazy:` line stands below the first def/class")
            names |= {f"{top}.{n.strip()}" for n in line.removeprefix(LAZY_LINE).split(",") if n.strip()}
    return names, problems


def undeclared(found: dict[str, Path], top: str) -> list[str]:
    """Each module whose `# lazy:` lines do not name exactly the package's modules it imports inside
    functions, and what is missing or stale."""
    wrong = []
    for name, lazy in lazy_imports(found).items():
        names, problems = declared(found[name], top)
        missing = sorted(m.removeprefix(top + ".") for m in lazy - names)
        stale = sorted(m.removeprefix(top + ".") for m in names - lazy)
        wrong += problems + ([f"{name}: {LAZY_LINE}{', '.join(sorted(m.removeprefix(top + '.') for m in lazy))}"
                              f" (undeclared: {missing}; no longer imported: {stale})"] if missing or stale else [])
    return wrong


def test_every_module_names_its_lazy_imports_at_its_top():
    """A module that imports one of the package's modules inside a function (for start-up, or for a path
    only some inputs take) says so on a `# lazy:` line in its head, so that the dependencies an import
    at the top would show stay in sight (ARCHITECTURE.md, Rules)."""
    found = modules(ROOT, "accuscope")
    wrong = undeclared(found, "accuscope")
    assert not wrong, "the `# lazy:` lines differ from the imports inside functions:\n" + "\n".join(wrong)
    lazy = {m: deps for m, deps in lazy_imports(found).items() if deps}
    assert len(lazy) > 40 and sum(map(len, lazy.values())) > 100


def test_a_lazy_line_must_name_what_is_imported_and_no_more(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "data.py").write_text("X = 1\n")
    (package / "other.py").write_text("Y = 2\n")
    (package / "rules.py").write_text('"""Rules."""\n# lazy: data\n\ndef judge():\n    from . import data\n'
                                      '    return data.X\n')
    found = modules(package, "pkg")
    assert undeclared(found, "pkg") == []
    (package / "rules.py").write_text('"""Rules."""\n# lazy: other\n\ndef judge():\n    from .data import X\n'
                                      '    return X\n')
    assert undeclared(modules(package, "pkg"), "pkg") == [
        "pkg.rules: # lazy: data (undeclared: ['data']; no longer imported: ['other'])"]
    (package / "rules.py").write_text('def judge():\n    from . import data\n    return data\n# lazy: data\n')
    assert undeclared(modules(package, "pkg"), "pkg") == [
        "rules.py:4: the `# lazy:` line stands below the first def/class"]


def private_imports(found: dict[str, Path]) -> list[str]:
    """`module: name` for each `_private` name a module imports from another of the package's modules, or
    reads off one it imported (`from x import _y`, `x._y`); a compiled module named `_x` (a file of its
    own, not a name) is no private name."""
    wrong = []
    for name, path in found.items():
        tree = ast.parse(path.read_text(), str(path))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        bound: set[str] = set()  # local names of the package's modules this module imported
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
                source = ".".join(base + ([node.module] if node.module else []))
                if source not in found or source == name:
                    continue
                for a in node.names:
                    if f"{source}.{a.name}" in found:
                        bound.add(a.asname or a.name)
                    elif a.name.startswith("_") and not a.name.startswith("__") \
                            and not any(found[source].parent.glob(f"{a.name}.*")):
                        wrong.append(f"{name}: {source}.{a.name}")
            elif isinstance(node, ast.Import):
                bound |= {a.asname for a in node.names if a.asname and a.name in found}
        wrong += [f"{name}: {node.value.id}.{node.attr}" for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound
                  and node.attr.startswith("_") and not node.attr.startswith("__")]
    return wrong


def test_no_module_imports_another_s_private_name():
    """A helper two modules share gets a public name in the module that owns it (ARCHITECTURE.md, Rules)."""
    wrong = private_imports(modules(ROOT, "accuscope"))
    assert not wrong, "private names imported from another module:\n" + "\n".join(wrong)


def test_a_private_name_imported_or_read_off_a_module_is_found(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "data.py").write_text("_X = 1\nY = 2\n")
    (package / "_compiled.c").write_text("")
    (package / "rules.py").write_text("from . import _compiled, data\nfrom .data import Y\n\nZ = data.Y + Y\n")
    assert private_imports(modules(package, "pkg")) == []
    (package / "rules.py").write_text("from . import data\nfrom .data import _X\n\nZ = data._X + _X\n")
    assert private_imports(modules(package, "pkg")) == ["pkg.rules: pkg.data._X", "pkg.rules: data._X"]
