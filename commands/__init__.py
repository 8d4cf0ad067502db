"""Subcommands of `/upgrade`: one module each, registered on a registry that is passed in."""

from __future__ import annotations

from bot.core.command import Registry
from commands import audit, diff, help, snapshot, snapshots, whoami

MODULES = (help, whoami, snapshot, snapshots, diff, audit)


def build_registry() -> Registry:
    """The registry with every built-in subcommand."""
    registry = Registry()
    for module in MODULES:
        module.register(registry)
    return registry
