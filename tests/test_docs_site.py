"""The docs site: generated references match a fresh generation, the site builds with
`mkdocs build --strict`, and the development page's layout tree names every package of bot/."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parent.parent
GEN_DOCS = REPO / "scripts" / "gen_docs.py"


def _gen_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_docs", GEN_DOCS)
    assert spec
    assert spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_references_and_schemas_match_a_fresh_generation() -> None:
    result = subprocess.run(
        [sys.executable, str(GEN_DOCS), "--check"], capture_output=True, text=True, timeout=300, cwd=REPO
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr


def test_the_check_names_a_stale_file_with_its_diff(tmp_path: Path) -> None:
    gen_docs = _gen_docs()
    for name in gen_docs.FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, tmp_path / name)
    assert gen_docs.stale(tmp_path) == []
    page = tmp_path / "docs" / "reference" / "configuration.md"
    page.write_text(
        page.read_text(encoding="utf-8").replace("| `workers` |", "| `worker` |"), encoding="utf-8"
    )
    (diff,) = gen_docs.stale(tmp_path)
    assert "docs/reference/configuration.md (checked in)" in diff
    assert "-| `worker` |" in diff
    assert "+| `workers` |" in diff


def test_the_site_builds_with_mkdocs_strict(tmp_path: Path) -> None:
    """Strict: a broken link or anchor, or a page left out of the nav, fails the build."""
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert (tmp_path / "site" / "reference" / "configuration" / "index.html").is_file()
    assert (tmp_path / "site" / "concepts" / "index.html").is_file()


def _layout_paths() -> set[str]:
    """The directories the development page's layout tree names, as paths (`bot/core/runs/`)."""
    text = (REPO / "docs" / "development.md").read_text(encoding="utf-8")
    block = re.search(r"^## Layout\n\n```\n(.*?)\n```", text, re.S | re.M)
    assert block, "docs/development.md has no layout tree under ## Layout"
    stack: list[tuple[int, str]] = []
    paths = set()
    for line in block.group(1).splitlines():
        match = re.match(r"^( *)(\S+/)(\s|$)", line)
        if not match:
            continue
        indent, name = len(match.group(1)), match.group(2)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = "".join(n for _, n in stack) + name
        stack.append((indent, name))
        paths.add(path)
    return paths


def test_the_layout_tree_names_every_package_of_bot_and_every_top_level_directory() -> None:
    named = _layout_paths()
    packages = {f"{p.parent.relative_to(REPO).as_posix()}/" for p in (REPO / "bot").rglob("__init__.py")}
    assert packages - named == set(), "docs/development.md's layout tree misses these packages"
    directories = {f"{d.name}/" for d in (REPO / "bot").iterdir() if d.is_dir() and d.name != "__pycache__"}
    assert {f"bot/{d}" for d in directories} - named == set()
    tracked = subprocess.run(["git", "ls-files"], capture_output=True, text=True, cwd=REPO, check=True)
    top = {f"{line.split('/')[0]}/" for line in tracked.stdout.splitlines() if "/" in line}
    assert top - named - {".ci/"} == set(), "docs/development.md's layout tree misses these directories"
