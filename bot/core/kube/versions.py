"""Kubernetes and kubelet version strings: `v1.29.4-eks-abc`, "1.29", compared by their numbers."""

from __future__ import annotations

import re


def parse_version(text: str) -> tuple[int, ...] | None:
    """`v1.29.4-eks-abc` → (1, 29, 4); None if it does not start like a version."""
    core = text.strip().removeprefix("v").split("-", 1)[0].split("+", 1)[0]
    # ASCII digits only: `int()` also reads "١.٢٥" (Arabic-Indic digits) as 1.25.
    if not _VERSION.fullmatch(core):
        return None
    return tuple(int(p) for p in core.split("."))


_VERSION = re.compile(r"[0-9]{1,9}\.[0-9]{1,9}(\.[0-9]{1,9})?", re.ASCII)


def minor_version(kubelet: str) -> str:
    """`v1.29.4-eks-abc` → "v1.29" (what a node group's line counts by); "?" when unknown."""
    parsed = parse_version(kubelet)
    return f"v{parsed[0]}.{parsed[1]}" if parsed is not None else (kubelet or "?")


def version_order(label: str) -> tuple[int, tuple[int, ...], str]:
    """A sort key: versions in numeric order (1.9 before 1.10), then what is not a version."""
    parsed = parse_version(label)
    return (0, parsed, label) if parsed is not None else (1, (), label)


def on_version(kubelet: str, target: tuple[int, ...] | None) -> bool:
    """Is the kubelet at or above the target (compared on as many parts as the target names)?"""
    if target is None:
        return True
    mine = parse_version(kubelet)
    return mine is not None and mine[: len(target)] >= target
