"""What the cloud checks of `check` share (EKS: `bot.core.checks.eks`; AKS and GKE:
`bot.core.checks.aks`, `bot.core.checks.gke`): the extra that connects to the cluster's provider
and turns a missing SDK or an unanswered call into a note, and the kubelet-skew reading of a
cloud's node pools.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

from bot.core.checks.findings import Finding, cloud_not_completed, cloud_skipped
from bot.core.checks.preflight import kubelet_skew_allowed, minor_of
from bot.core.providers import Provider, ProviderConfig, ProviderError, ProviderUnavailable
from bot.core.providers import reading as connect_provider
from bot.core.snapshots.projection import ClusterReader

log = logging.getLogger(__name__)

#: A cloud's checks as `check` runs them: (the cluster's reader, the target, the report's notes).
Extra = Callable[[ClusterReader, str, list[str]], Sequence[Finding]]
#: The checks themselves, given the connected provider.
Run = Callable[[Provider, ClusterReader, str, list[str]], list[Finding]]


def cloud_extra(
    cloud: str,
    provider: ProviderConfig | None,
    run: Run,
    *,
    connect: Callable[[ProviderConfig], Provider] | None = None,
    unnamed: str = "",
) -> Extra:
    """`run` as a `check` extra for the cluster's `provider` of `cloud` (`EKS`, `AKS`, `GKE`):
    without a provider, a note says the checks were skipped because `unnamed` (when given); without
    the SDK, or when the cloud does not answer, a note says they were skipped or not completed, and
    why (`cloud_skipped`, `cloud_not_completed`: what a check step's line reads them by)."""

    def extra(reader: ClusterReader, target: str, notes: list[str]) -> Sequence[Finding]:
        if provider is None:
            if unnamed:
                notes.append(cloud_skipped(cloud, unnamed))
            return []
        try:
            # `--to v1.26.6` as kubectl prints versions: the clouds list theirs without the `v`.
            return run(
                (connect or connect_provider)(provider), reader, target.strip().removeprefix("v"), notes
            )
        except ProviderUnavailable as exc:
            notes.append(cloud_skipped(cloud, str(exc)))
        except ProviderError as exc:
            log.warning("the %s checks of %s failed: %s", cloud, provider.name, exc)
            notes.append(cloud_not_completed(cloud, str(exc)))
        return []

    return extra


def control_plane_not_ready(*, not_ready: str, offered: str, target_offered: bool, target: str) -> str:
    """Why a managed control plane is not ready for `target`, or "" if it is: its cloud says it is
    not settled (`not_ready` says how), or it is neither on the target nor offering it (`offered`
    says what it offers, from what). The check module builds its own finding from it, so that its
    id stands in its own source (`tests/core/checks/test_finding_ids.py` reads it there)."""
    reasons = [not_ready] if not_ready else []
    if not target_offered:
        reasons.append(f"{offered}, not {target}")
    return "; ".join(reasons)


def pools_not_ready(pools: Iterable[tuple[str, str, str]], target: str, *, ready: str) -> list[str]:
    """The pools, as (name, version, state), whose state is not `ready` or whose version is further
    behind `target` than Kubernetes' kubelet skew allows (2 minors, 3 from 1.28): "name (why)"."""
    bad = []
    want = minor_of(target)
    for name, version, state in pools:
        have = minor_of(version)
        behind = want[1] - have[1] if have is not None and want is not None else 0
        if state != ready:
            bad.append(f"{name} ({state})")
        elif want is not None and behind > kubelet_skew_allowed(want[1]):
            bad.append(f"{name} ({version}, {behind} minors behind {target})")
    return bad
