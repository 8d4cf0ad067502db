"""The `/metrics` endpoint: request counters and the deprecated-API gauge, in Prometheus text format.

`apiserver_request_total` counts every request by verb, group, version, resource, subresource,
scope and code; `apiserver_requested_deprecated_apis` is 1 for each deprecated group-version-
resource that has been requested, labelled with its removal release — the two series upgrade
checks read to find clients still calling an API the next version removes. Calls that scenario
"callers" make (an old Helm client, a forgotten CronJob) are counted as if they came over HTTP.

As in a real apiserver, the counts belong to one process: `process_start_time_seconds` says when
it started, and `restart()` (a control-plane upgrade replaces the apiserver) starts them afresh.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable


class Metrics:
    def __init__(self, now: Callable[[], float] | None = None) -> None:
        self._lock = threading.Lock()
        self._now = now
        self.started = now() if now is not None else None
        self.requests: Counter[tuple[str, str, str, str, str, str, str]] = Counter()
        self.deprecated: dict[tuple[str, str, str, str, str], int] = {}

    def restart(self) -> None:
        """A new apiserver process: every count starts again from nothing."""
        with self._lock:
            self.requests.clear()
            self.deprecated.clear()
            if self._now is not None:
                self.started = self._now()

    def request(
        self, *, verb: str, group: str, version: str, resource: str, subresource: str, scope: str, code: int
    ) -> None:
        with self._lock:
            self.requests[(verb, group, version, resource, subresource, scope, str(code))] += 1

    def deprecated_call(
        self, *, group: str, version: str, resource: str, subresource: str, removed: str
    ) -> None:
        with self._lock:
            self.deprecated[(group, version, resource, subresource, removed)] = 1

    def count(self, *, group: str, version: str, resource: str) -> int:
        """Requests so far to one group-version-resource (tests and the control endpoint read it)."""
        with self._lock:
            return sum(
                n for k, n in self.requests.items() if k[1] == group and k[2] == version and k[3] == resource
            )

    def render(self) -> str:
        with self._lock:
            lines = [
                "# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb, "
                "dry run value, group, version, resource, scope, component, and HTTP response code.",
                "# TYPE apiserver_request_total counter",
            ]
            for (verb, group, version, resource, sub, scope, code), n in sorted(self.requests.items()):
                lines.append(
                    f'apiserver_request_total{{code="{code}",component="apiserver",dry_run="",group="{group}",'
                    f'resource="{resource}",scope="{scope}",subresource="{sub}",verb="{verb}",version="{version}"}} {n}'
                )
            lines += [
                "# HELP apiserver_requested_deprecated_apis [STABLE] Gauge of deprecated APIs that have been "
                "requested, broken out by API group, version, resource, subresource, and removed_release.",
                "# TYPE apiserver_requested_deprecated_apis gauge",
            ]
            for (group, version, resource, sub, removed), v in sorted(self.deprecated.items()):
                lines.append(
                    f'apiserver_requested_deprecated_apis{{group="{group}",removed_release="{removed}",'
                    f'resource="{resource}",subresource="{sub}",version="{version}"}} {v}'
                )
            if self.started is not None:
                lines += [
                    "# HELP process_start_time_seconds [ALPHA] Start time of the process since unix epoch in seconds.",
                    "# TYPE process_start_time_seconds gauge",
                    f"process_start_time_seconds {self.started:.2f}",
                ]
            return "\n".join(lines) + "\n"
