"""`WireCluster`: the in-memory `DictCluster`, with items handed over as the kube adapter hands them.

The adapter decodes JSON bytes into the type the snapshot asks for (`item_type`), so here each
object is encoded to JSON and decoded into that type with msgspec too: the pure core tests run the
same decoding as production, on objects written as dicts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import msgspec

from bot.core.snapshots import schema
from tests.support.kube_objects import DictCluster, FakePage


def over_the_wire(obj: Any, item_type: Any) -> Any:
    return msgspec.json.decode(msgspec.json.encode(obj), type=item_type)


def as_pod(obj: Mapping[str, Any]) -> schema.Pod:
    return over_the_wire(obj, schema.Pod)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class MappedPage:
    data: bytes
    count: int
    resource_version: str
    continue_token: str


class WireCluster(DictCluster):
    def list_pages(
        self, path: str, query: Any = None, *, limit: int = 500, item_type: Any = dict[str, Any]
    ) -> Iterator[FakePage]:
        for page in super().list_pages(path, query, limit=limit):
            yield replace(page, items=[over_the_wire(item, item_type) for item in page.items])

    def map_pages(
        self,
        path: str,
        query: Any = None,
        *,
        limit: int = 500,
        item_type: Any = dict[str, Any],
        transform: Callable[[list[Any]], bytes],
    ) -> Iterator[MappedPage]:
        # In this process, as the kube adapter does where it has no helper process to fork.
        for page in self.list_pages(path, query, limit=limit, item_type=item_type):
            yield MappedPage(
                transform(page.items), len(page.items), page.resource_version, page.continue_token
            )
