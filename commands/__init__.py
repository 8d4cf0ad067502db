"""Subcommands of `/upgrade`: one module each, registered on a registry that is passed in."""

from __future__ import annotations

from bot.core.command import Registry
from commands import (
    abort,
    action,
    announce,
    audit,
    check,
    choose,
    diagnose,
    diff,
    fleet,
    handoff,
    help,
    note,
    pause,
    plan,
    report,
    resume,
    schedule,
    skip,
    snapshot,
    snapshots,
    start,
    status,
    unwatch,
    waive,
    waivers,
    watch,
    watches,
    whoami,
)

MODULES = (
    help,
    whoami,
    snapshot,
    snapshots,
    diff,
    audit,
    report,
    plan,
    start,
    status,
    pause,
    resume,
    abort,
    skip,
    handoff,
    fleet,
    note,
    announce,
    schedule,
    check,
    diagnose,
    watch,
    watches,
    unwatch,
    action,
    choose,
    waive,
    waivers,
)


def build_registry() -> Registry:
    """The registry with every built-in subcommand."""
    registry = Registry()
    for module in MODULES:
        module.register(registry)
    return registry
