"""A known-issue rule's hit as a check reports it: the one place a `Finding` is built from a rule's
data (its id is the rule's own), so the rules (`bot.core.rules`) need know nothing of the checks."""

from __future__ import annotations

from bot.core.checks.findings import Finding
from bot.core.rules.model import RuleHit, shown_source


def rule_finding(hit: RuleHit, *, version: str = "") -> Finding:
    """`hit` as a finding: the workload and its first pods, the remediation filled from the hit,
    the versions that fixed it and the public evidence; `version` is the target (`check` knows it)."""
    r = hit.rule
    objects = (hit.workload, *(f"Pod {hit.namespace}/{p}" for p in hit.pods[:5]))
    if len(hit.pods) > 5:
        objects = (*objects, f"… and {len(hit.pods) - 5} more pods")
    fix = hit.remedy(version=version)
    if r.fixed_in:
        fix += "\nFixed in: " + ", ".join(r.fixed_in)
    if r.links:
        fix += "\nEvidence: " + " ".join(r.links)
    return Finding(
        id=r.id,
        severity=r.severity,
        title=r.title,
        objects=objects,
        why=r.explanation.strip() + (f"\nSeen: {hit.evidence}" if hit.evidence else ""),
        fix=fix,
        source=f"known-issue rule {r.id} ({shown_source(r.source)})"
        if r.source
        else f"known-issue rule {r.id}",
    )
