"""The layers stay visible: imports point down only, and each library has one home."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def modules() -> dict[str, list[str]]:
    """Module name → every module it imports (absolute names), for bot/ and commands/."""
    found: dict[str, list[str]] = {}
    for package in ("bot", "commands"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            name = ".".join(rel.parts).removesuffix(".__init__")
            imports: list[str] = []
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.Import):
                    imports.extend(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    imports.append(node.module)
            found[name] = imports
    return found


def _in(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


LIBRARY_HOMES = {
    "kubernetes": ("bot.adapters.kube",),
    "sqlalchemy": ("bot.adapters.store",),
    "apscheduler": ("bot.frontdoor.triggers",),
    "slack_sdk": ("bot.adapters.slack", "bot.frontdoor"),
    "slack_bolt": ("bot.frontdoor",),
}


@pytest.mark.parametrize("library", sorted(LIBRARY_HOMES))
def test_each_library_is_imported_only_by_its_adapter(library: str) -> None:
    homes = LIBRARY_HOMES[library]
    offenders = [
        module
        for module, imports in modules().items()
        if any(_in(i, library) for i in imports) and not any(_in(module, h) for h in homes)
    ]
    assert offenders == []


# A module in the left layer may not import anything in the right-hand layers (which sit above it).
FORBIDDEN = {
    "bot.adapters": ("bot.core", "bot.router", "commands", "bot.frontdoor", "bot.sim"),
    "bot.core": ("bot.router", "commands", "bot.frontdoor", "bot.sim"),
    "commands": ("bot.router", "bot.frontdoor", "bot.sim"),
    "bot.router": ("bot.frontdoor", "bot.sim"),
}


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_imports_point_down_only(layer: str) -> None:
    offenders = [
        (module, i)
        for module, imports in modules().items()
        if _in(module, layer)
        for i in imports
        if any(_in(i, above) for above in FORBIDDEN[layer])
    ]
    assert offenders == []


def test_only_the_terminal_front_door_reaches_the_simulator() -> None:
    offenders = [
        (module, i)
        for module, imports in modules().items()
        if not _in(module, "bot.sim") and module != "bot.frontdoor.cli"
        for i in imports
        if _in(i, "bot.sim")
    ]
    assert offenders == []


def test_the_simulator_imports_nothing_of_the_bot() -> None:
    offenders = [
        (module, i)
        for module, imports in modules().items()
        if _in(module, "bot.sim")
        for i in imports
        if (_in(i, "bot") and not _in(i, "bot.sim")) or _in(i, "commands")
    ]
    assert offenders == []


def test_every_module_opens_with_a_docstring() -> None:
    missing = []
    for package in ("bot", "commands"):
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text())
            if ast.get_docstring(tree) is None and path.stat().st_size > 0:
                missing.append(str(path.relative_to(ROOT)))
    assert missing == []
