"""`ServiceDuty`: what the kinds of long duty the bot drives (jobs, `acting.JobDuty`; watches,
`watching.WatchDuty`) share — a service that keeps the rows and their heartbeats, a `connect` to the
cluster a driver works on, the scan period and the options each driver is built with."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, Generic, Protocol, TypeVar

#: How often the duty engine looks for rows to take over, by default.
SCAN_SECONDS = 5.0


class HeartbeatService(Protocol):
    def heartbeat(self, row_id: int) -> bool: ...


S = TypeVar("S", bound=HeartbeatService)
C = TypeVar("C")


class ServiceDuty(Generic[S, C]):
    """A kind of long duty (`bot.core.duties.DutyKind`) whose rows `service` keeps; the scan hooks
    do nothing unless a kind has something to do around a scan."""

    name: str
    scan_seconds = SCAN_SECONDS

    def __init__(
        self,
        service: S,
        connect: Callable[[str], C],
        *,
        scan_seconds: float = SCAN_SECONDS,
        **driver_options: Any,
    ) -> None:
        self.scan_seconds = scan_seconds
        self.service = service
        self.connect = connect
        self.driver_options = driver_options

    def heartbeat(self, row_id: int) -> bool:
        return self.service.heartbeat(row_id)

    def before_scan(self) -> None:
        pass

    def after_scan(self, driving: Collection[int]) -> None:
        pass
