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


#: The newest Kubernetes minor the bot's shipped API data describes (bot/core/checks/
#: served_kinds.json; a test holds the two equal), and how many minors past it a target may be:
#: Kubernetes ships three a year, so a year of releases the data does not know yet (the check's
#: report says so in a note). Beyond that a version does not exist.
NEWEST_KNOWN_MINOR = 37
MINORS_AHEAD = 3
_TARGET = re.compile(r"v?1\.(0|[1-9][0-9]*)(?:\.(0|[1-9][0-9]?))?(?:[-+][0-9A-Za-z.-]{1,60})?", re.ASCII)


def target_version_problem(text: str) -> str | None:
    """Why `text` is not a Kubernetes version one could upgrade to, or None: `1.N` or `1.N.P`
    (ASCII digits; a `v` and a build suffix such as `-eks-1` allowed), N from 0 to the newest the
    bot knows plus MINORS_AHEAD, P below 100."""
    newest = NEWEST_KNOWN_MINOR + MINORS_AHEAD
    match = _TARGET.fullmatch(text.strip()) if len(text) <= 100 else None
    if match is None:
        return (
            f"is not a Kubernetes version (like 1.{NEWEST_KNOWN_MINOR} or 1.{NEWEST_KNOWN_MINOR}.2; "
            f"this bot knows 1.0 to 1.{newest})"
        )
    if len(match[1]) > 3 or int(match[1]) > newest:
        return f"does not exist: this bot knows Kubernetes 1.0 to 1.{newest}"
    return None


def older_minor(current: str, target: str, *, or_same: bool = False) -> bool:
    """Is `target`'s minor below `current`'s (with `or_same`, not above it)? False when either is
    not a version: what cannot be read is not refused for it."""
    now, to = parse_version(current), parse_version(target)
    if now is None or to is None or len(now) < 2 or len(to) < 2:
        return False
    return (to[0], to[1]) <= (now[0], now[1]) if or_same else (to[0], to[1]) < (now[0], now[1])


def minor(version: str) -> str:
    """`v1.25.16-eks-abc` or `1.25` → "1.25" ("" when it is not a version)."""
    m = re.match(r"^v?([0-9]+)\.([0-9]+)", version.strip())
    return f"{m.group(1)}.{m.group(2)}" if m else ""


def minor_version(kubelet: str) -> str:
    """`v1.29.4-eks-abc` → "v1.29" (what a node group's line counts by); "?" when unknown."""
    parsed = parse_version(kubelet)
    return f"v{parsed[0]}.{parsed[1]}" if parsed is not None else (kubelet or "?")


def version_order(label: str) -> tuple[int, tuple[int, ...], str]:
    """A sort key: versions in numeric order (1.9 before 1.10), then what is not a version."""
    parsed = parse_version(label)
    return (0, parsed, label) if parsed is not None else (1, (), label)


def reports(seen: str, target: tuple[int, ...] | None) -> bool:
    """Does an API server's /version say the target (equal on as many parts as the target names)?
    Not "at or above", as a kubelet may be: a control plane updated to 1.25 reports 1.25, and one
    that reports 1.29 is another cluster than the one the provider updated."""
    if target is None:
        return True
    mine = parse_version(seen)
    return mine is not None and mine[: len(target)] == target


def on_version(kubelet: str, target: tuple[int, ...] | None) -> bool:
    """Is the kubelet at or above the target (compared on as many parts as the target names)?"""
    if target is None:
        return True
    mine = parse_version(kubelet)
    return mine is not None and mine[: len(target)] >= target
