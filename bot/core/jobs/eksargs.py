"""The EKS actions' arguments, read one way by their jobs (`bot.core.jobs.eks`) and by the
registry's checks of a plan (`bot.core.jobs.registry`): a Kubernetes minor as EKS takes it, an
add-on's name and version, and its conflict policy."""

from __future__ import annotations

from collections.abc import Mapping

from bot.core.jobs.common import label_value
from bot.core.kube.versions import parse_version
from bot.errors import UserError, clip

#: EKS's conflict policies for an add-on update (`resolveConflicts`), and what each means.
CONFLICT_POLICIES = {
    "NONE": "EKS changes nothing you changed on the add-on's objects; a conflict fails the update",
    "OVERWRITE": "EKS overwrites what you changed on the add-on's objects with its defaults",
    "PRESERVE": "EKS keeps what you changed on the add-on's objects (it may then not apply the version's own changes)",
}


def minor(version: str) -> str:
    parsed = parse_version(version)
    return f"{parsed[0]}.{parsed[1]}" if parsed is not None and len(parsed) >= 2 else version


def minor_arg(args: Mapping[str, str], *, required: bool) -> str:
    """`version`: a Kubernetes minor as EKS takes it (`1.25`; `v1.25` and `1.25.16` are read as 1.25)."""
    text = str(args.get("version", "")).strip()
    if not text:
        if required:
            raise UserError("version: required (the Kubernetes version, like 1.25)")
        return ""
    parsed = parse_version(text)
    if parsed is None or len(parsed) < 2:
        raise UserError(f"version: {clip(text, 20)!r} is not a Kubernetes version like 1.25")
    return f"{parsed[0]}.{parsed[1]}"


def addon_arg(args: Mapping[str, str]) -> str:
    name = str(args.get("addon", "")).strip()
    if not name:
        raise UserError("addon: required (the add-on's name, like coredns)")
    return label_value("addon", name)


def addon_version_arg(args: Mapping[str, str]) -> str:
    text = str(args.get("version", "")).strip()
    if not text:
        raise UserError("version: required (the add-on's version, like v1.9.3-eksbuild.11)")
    if len(text) > 100 or not all(c.isascii() and (c.isalnum() or c in ".-_+") for c in text):
        raise UserError(f"version: {clip(text, 40)!r} is not an add-on version like v1.9.3-eksbuild.11")
    return text


def conflicts_arg(args: Mapping[str, str]) -> str:
    text = str(args.get("resolve_conflicts", "") or "NONE").strip().upper()
    if text not in CONFLICT_POLICIES:
        raise UserError(f"resolve_conflicts: {clip(text, 20)!r} is not one of {', '.join(CONFLICT_POLICIES)}")
    return text
