"""The documentation cannot drift from the program: every fenced block marked runnable in README.md and
docs/**/*.md runs through the real `accuscope` entry point, and every relative link in them resolves.

The convention (docs/development.md, "Examples that run"): a line `<!-- runnable -->` right before a
```sh fence. Each block runs on its own, as written, with bash (`set -euo pipefail`), in a fresh folder
that holds what the repository's root holds for a reader who followed the README: `tests/` (the
committed fixtures) and `demo/` (`accuscope demo --no-tui --workspace demo`). So a recipe copied alone
runs, and the blocks spread over the test workers. `accuscope` and `python` there are this interpreter (`python -m accuscope`, the real entry point, as tests/support/cli.py runs it).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.cli import ENV, accuscope

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
MARK = "<!-- runnable -->"
FENCE = re.compile(r"^(```|~~~)")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CODE_SPAN = re.compile(r"(`+).*?\1")


def runnable_blocks(page: Path) -> list[tuple[int, str]]:
    """(line number of the fence, the block's text) of each block marked runnable."""
    lines = page.read_text(encoding="utf-8").split("\n")
    blocks, fenced = [], False
    for i, line in enumerate(lines):
        if FENCE.match(line.lstrip()):
            fenced = not fenced
        if fenced or line.strip() != MARK:  # (a mark shown inside a block is an example of the mark)
            continue
        fence = lines[i + 1] if i + 1 < len(lines) else ""
        assert fence.startswith("```"), f"{page.relative_to(REPO)}:{i + 1}: {MARK} must stand right before a ``` fence"
        end = next(j for j in range(i + 2, len(lines)) if lines[j].startswith("```"))
        blocks.append((i + 2, "\n".join(lines[i + 2:end])))
    return blocks


def prose(page: Path) -> list[tuple[int, str]]:
    """(line number, line) of the page outside fenced blocks, with inline code taken out."""
    out, fenced = [], False
    for n, line in enumerate(page.read_text(encoding="utf-8").split("\n"), 1):
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            out.append((n, CODE_SPAN.sub("", line)))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces as `-`."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of the page's headings (a repeated heading's get -1, -2 ...)."""
    found, fenced, seen = set(), False, dict[str, int]()
    for line in page.read_text(encoding="utf-8").split("\n"):
        if FENCE.match(line.lstrip()):
            fenced = not fenced
        elif not fenced and (m := re.match(r"^#{1,6} (.*)", line)):
            base = slug(m.group(1))
            k = seen.get(base, 0)
            seen[base] = k + 1
            found.add(base if k == 0 else f"{base}-{k}")
    return found


def test_every_relative_link_resolves_to_a_file_and_heading_in_the_tree():
    broken = []
    for page in PAGES:
        for n, line in prose(page):
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                    continue
                path, _, anchor = target.partition("#")
                dest = (page.parent / path).resolve() if path else page
                where = f"{page.relative_to(REPO)}:{n}: {target}"
                if not dest.exists():
                    broken.append(f"{where} (no such file)")
                elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                    broken.append(f"{where} (no heading #{anchor} in {dest.relative_to(REPO)})")
    assert not broken, "broken links:\n" + "\n".join(broken)


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    """The demo workspace, as the README's recipes expect it under `demo/`."""
    root = tmp_path_factory.mktemp("docs") / "demo"
    r = accuscope("demo", "--no-tui", "--workspace", root, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return root


def _link(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _shims(folder: Path) -> Path:
    """`accuscope` and `python` as this interpreter runs them: the entry point the tests run."""
    folder.mkdir()
    for name, command in (("accuscope", f'"{sys.executable}" -m accuscope'), ("python", f'"{sys.executable}"')):
        shim = folder / name
        shim.write_text(f'#!/bin/sh\nexec {command} "$@"\n')
        shim.chmod(0o755)
    return folder


EXAMPLES = [(page, line, block) for page in PAGES for line, block in runnable_blocks(page)]


def test_the_readme_and_the_command_pages_have_examples_that_run():
    pages = {page.relative_to(REPO).as_posix() for page, _, _ in EXAMPLES}
    assert "README.md" in pages and {"docs/commands/compare.md", "docs/commands/run.md"} <= pages


@pytest.mark.parametrize(("page", "line", "block"), EXAMPLES,
                         ids=[f"{p.relative_to(REPO).as_posix()}:{n}" for p, n, _ in EXAMPLES])
def test_runnable_example_runs(page, line, block, demo, tmp_path):
    work = tmp_path / "repo"
    work.mkdir()
    (work / "tests").symlink_to(REPO / "tests")
    shutil.copytree(demo, work / "demo", copy_function=_link)  # (23 MB: linked, a command's writes replace files)
    env = {**ENV, "PATH": f"{_shims(tmp_path / 'bin')}{os.pathsep}{ENV.get('PATH', '')}",
           "ACCUSCOPE_WORKSPACE": str(work / "demo")}  # (nothing written to the user's workspace)
    r = subprocess.run(["bash", "-c", "set -euo pipefail\n" + block], cwd=work, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (f"{page.relative_to(REPO)}:{line}: the block exits {r.returncode}\n"
                               f"{block}\n--- stdout\n{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-3000:]}")


def test_the_readme_exit_codes_are_the_programs():
    """One table in the README, one row per code accuscope exits with (exitcode.ExitCode), no other."""
    from accuscope.exitcode import ExitCode
    text = (REPO / "README.md").read_text(encoding="utf-8").split("\n## Exit codes\n", 1)[1].split("\n## ", 1)[0]
    assert [int(c) for c in re.findall(r"^\| (\d+) \|", text, re.M)] == sorted(int(c) for c in ExitCode)
