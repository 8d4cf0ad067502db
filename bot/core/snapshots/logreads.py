"""The containers' logs a snapshot reads: chosen from the pod rows as they arrive, read at once.

A snapshot keeps the log lines the known-issue rules match (`LogProbe`, made by
`core/checks/logprobe.py`), so that a twin of the cluster replays them. Which logs: as many pods of
a workload and as many logs in all as the check reads, the first the pod list names. They are read
while the rest of the pods are still being listed, `READERS` at a time, and taken in the order
they were chosen, so what is kept is what reading them one after another keeps: a 150,000-pod
snapshot no longer waits for 200 round trips after its last page.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

import msgspec

from bot.errors import ClusterError

#: Log reads in flight at once: each is a round trip the API server answers on its own.
READERS = 4
_ROWS = msgspec.json.Decoder(list[tuple[Any, ...]])
#: The most a log read asks for: the check reads a tail of a few hundred lines.
LIMIT_BYTES = 256 * 1024


class LogProbe(Protocol):
    """Which containers' logs a snapshot reads, and what of them it keeps: the lines the rules
    that read logs match (`core/checks/logprobe.py`), so that a twin replays them."""

    @property
    def reads(self) -> int: ...

    @property
    def per_workload(self) -> int: ...

    @property
    def containers(self) -> frozenset[str]: ...

    def wanted(self, containers: Sequence[str]) -> dict[str, int]: ...

    def keep(self, container: str, tail: str) -> list[str]: ...


class LogSource(Protocol):
    def get_raw(self, path: str, query: Mapping[str, Any] | None = None) -> bytes: ...


class LogReads:
    """The logs of one pass over the pods: `page(data)` for each page of rows as it arrives, then
    `lines()` once, or `close()` to drop what is in flight (the list started again, or failed).

    `columns` names the rows' columns (`projection.P`). A page that does not name one of the probed
    containers at all is not decoded (most pages of a large cluster), and nothing is decoded once
    the budget is spent. Reads start on a pool of `READERS` threads the first time one is chosen.
    """

    def __init__(self, source: LogSource, probe: LogProbe, columns: Mapping[str, int]) -> None:
        self._source, self._probe, self._col = source, probe, columns
        self._budget = probe.reads
        self._per_workload: Counter[tuple[str, str]] = Counter()
        self._chosen: list[tuple[tuple[Any, ...], str, str, str, Future[str | ClusterError]]] = []
        self._pool: ThreadPoolExecutor | None = None
        # The first 403 (pods/log is an opt-in role): reads not yet begun are not made.
        self._forbidden: ClusterError | None = None

    def page(self, data: bytes) -> None:
        probe, col = self._probe, self._col
        if self._budget <= 0 or not any(name.encode() in data for name in probe.containers):
            return
        for row in _ROWS.decode(data):
            wanted = probe.wanted(str(row[col["containers"]] or "").split(","))
            if not wanted:
                continue
            namespace, name = str(row[col["namespace"]]), str(row[col["name"]])
            workload = (namespace, str(row[col["workload"]]) or name)
            if self._per_workload[workload] >= probe.per_workload:
                continue
            self._per_workload[workload] += 1
            for container, lines in wanted.items():
                if self._budget <= 0:
                    return
                self._budget -= 1
                self._chosen.append(
                    (row, namespace, name, container, self._read(namespace, name, container, lines))
                )

    def lines(self) -> list[dict[str, Any]]:
        """The lines the probe keeps of each log read, in the order the logs were chosen; none past
        a 403 (the check reads none either)."""
        out: list[dict[str, Any]] = []
        try:
            for row, namespace, name, container, reading in self._chosen:
                tail = reading.result()
                if isinstance(tail, ClusterError):
                    if tail.status == 403:
                        return out
                    continue
                kept = self._probe.keep(container, tail)
                if kept:
                    out.append(
                        {
                            "namespace": namespace,
                            "pod": name,
                            "workload_kind": row[self._col["workload_kind"]],
                            "workload": row[self._col["workload"]],
                            "container": container,
                            "lines": kept,
                        }
                    )
            return out
        finally:
            self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def _read(self, namespace: str, name: str, container: str, lines: int) -> Future[str | ClusterError]:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=READERS, thread_name_prefix="snapshot-logs")

        def read() -> str | ClusterError:
            if self._forbidden is not None:
                return self._forbidden
            try:
                return self._source.get_raw(
                    f"/api/v1/namespaces/{namespace}/pods/{name}/log",
                    {"container": container, "tailLines": lines, "limitBytes": LIMIT_BYTES},
                ).decode("utf-8", "replace")
            except ClusterError as exc:
                if exc.status == 403:
                    self._forbidden = exc
                return exc

        return self._pool.submit(read)
