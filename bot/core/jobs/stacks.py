"""CloudFormation as evidence on a node-group step (issue 43 item 3): eksctl builds each node group
as a stack (`eksctl-<cluster>-nodegroup-<group>`), and when its new nodes never come, the reason
is in the stack's events, not in the cluster. `wait-nodegroup` reads the stack through the EKS
provider (DescribeStacks, DescribeStackEvents, nothing else) and shows its status, and the events
that failed in its last operation, on the card and once in the thread.

It is evidence, never a verdict: the wait goes on (a re-run of the pipeline updates the stack
again, and the nodes may still come); people read the failing event and decide. A cluster without
an EKS provider, or a group whose stack does not exist (Terraform's, the console's), shows nothing.

Progress (JSON, under the job's `stack` key):

    {"name": "eksctl-prod-nodegroup-istio", "read": "2026-11-24T07:00:00Z",
     "status": "UPDATE_ROLLBACK_COMPLETE", "reason": "",
     "failures": [{"id": "…", "at": "…", "resource": "ManagedNodeGroup",
                   "type": "AWS::EKS::Nodegroup", "status": "UPDATE_FAILED", "reason": "…"}]}
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, Protocol

from bot.core.jobs.base import Post
from bot.core.jobs.common import iso
from bot.core.kube.objects import parse_iso
from bot.errors import ProviderError, UserError, clip

log = logging.getLogger(__name__)

Obj = dict[str, Any]

#: How often a wait reads the stack (CloudFormation's describe calls are throttled per account).
READ_EVERY = timedelta(seconds=30)
#: The failing events a card and a thread line name (the newest first; the report has no more).
SHOWN_FAILURES = 2
#: How much of AWS's reason a line keeps (eksctl's reasons carry the handler's whole message).
REASON_CHARS = 300


class StackReads(Protocol):
    """What the evidence reads of the cloud (`bot.adapters.providers.eks.Eks` answers it)."""

    name: str

    def stack(self, name: str) -> Obj | None: ...
    def stack_events(self, name: str) -> list[Obj]: ...


def nodegroup_stack(cluster: str, group: str) -> str:
    """eksctl's name for a node group's stack."""
    return f"eksctl-{cluster}-nodegroup-{group}"


def failed_status(status: str) -> bool:
    """A stack status that says its last operation failed (rolled back, or could not)."""
    return "FAILED" in status or "ROLLBACK" in status


def _stamp(value: Any) -> str:
    return iso(value) if isinstance(value, datetime) else str(value or "")


def last_failures(events: list[Obj]) -> list[Obj]:
    """The resource events that failed in the stack's last operation (newest first): those newer
    than the last "User Initiated" event of the stack itself."""
    failed: list[Obj] = []
    for event in events:
        resource = str(event.get("LogicalResourceId", ""))
        status = str(event.get("ResourceStatus", ""))
        if resource == event.get("StackName") and event.get("ResourceStatusReason") == "User Initiated":
            break
        if status.endswith("_FAILED"):
            failed.append(
                {
                    "id": str(event.get("EventId", "")),
                    "at": _stamp(event.get("Timestamp")),
                    "resource": resource,
                    "type": str(event.get("ResourceType", "")),
                    "status": status,
                    "reason": str(event.get("ResourceStatusReason", "")),
                }
            )
    return failed


def read_stack(
    access: Callable[[str], Any] | None,
    cluster: str,
    group: str,
    named: str,
    seen: Mapping[str, Any] | None,
    *,
    now: datetime,
) -> Obj | None:
    """The stack's evidence now, or `seen` again while it is fresh; None without an EKS provider,
    `absent` when there is no such stack. A failed read is said on the card and tried again later."""
    if access is None:
        return None
    last = parse_iso(str(seen.get("read") or "")) if seen else None
    if seen and last is not None and now - last < READ_EVERY:
        return dict(seen)
    try:
        eks: StackReads = access(cluster)
    except UserError:
        # No EKS provider for this cluster (or no boto3): no stack to show, nothing to say.
        return None
    name = named or nodegroup_stack(eks.name, group)
    try:
        stack = eks.stack(name)
        if stack is None:
            # Remembered, so a group without a stack is not asked about on every tick either.
            return {"name": name, "read": iso(now), "absent": True}
        status = str(stack.get("StackStatus", ""))
        failures = last_failures(eks.stack_events(name)) if failed_status(status) else []
    except ProviderError as exc:
        log.warning("stack %s of %s not read: %s", name, cluster, exc)
        return {"name": name, "read": iso(now), "error": clip(str(exc), 200)}
    return {
        "name": name,
        "read": iso(now),
        "status": status,
        "reason": str(stack.get("StackStatusReason", "")),
        "failures": failures[:SHOWN_FAILURES],
    }


def _failure_text(failure: Mapping[str, Any]) -> str:
    return (
        f"{failure['resource']} ({failure['type']}) {failure['status']}: "
        f"{clip(str(failure['reason']) or 'no reason given', REASON_CHARS)}"
    )


def stack_card(evidence: Mapping[str, Any] | None) -> list[str]:
    """The card's lines for the stack: its status, and the failing events when it failed."""
    if not evidence or evidence.get("absent"):
        return []
    if evidence.get("error"):
        return [f"CloudFormation {evidence['name']}: not read ({evidence['error']})"]
    status = str(evidence.get("status", ""))
    if not failed_status(status):
        return [f"CloudFormation {evidence['name']}: {status}"]
    lines = [f":x: CloudFormation {evidence['name']}: {status}"]
    lines += [f"failing event: {_failure_text(f)}" for f in evidence.get("failures") or []]
    return lines


def stack_posts(evidence: Mapping[str, Any] | None, group: str) -> tuple[Post, ...]:
    """One thread line per failing event (its key makes it once, across restarts)."""
    if not evidence or evidence.get("absent") or not failed_status(str(evidence.get("status", ""))):
        return ()
    return tuple(
        Post(
            key=f"stack-failed:{evidence['name']}:{f['id']}",
            text=(
                f"node group {group}: its CloudFormation stack {evidence['name']} is "
                f"{evidence['status']} — {_failure_text(f)} (at {f['at']})"
            ),
        )
        for f in evidence.get("failures") or []
    )
