"""The wire shapes the adapter reads: list pages and watch events decoded with `msgspec` into the
caller's `item_type` (plain dicts by default), and the page and event records handed back."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any, Generic, TypeVar

import msgspec

from bot.decoders import decoder

T = TypeVar("T")
Raw = dict[str, Any]


@dataclass(frozen=True)
class Page(Generic[T]):
    """One list page: its items decoded as the caller asked (plain dicts by default)."""

    items: list[T]
    resource_version: str
    continue_token: str
    #: The server's `remainingItemCount`: items after this page (None when it does not say).
    remaining: int | None = None


@dataclass(frozen=True)
class MappedPage:
    """One list page as `Cluster.map_pages`' transform made it: its bytes, and how many items it had."""

    data: bytes
    count: int
    resource_version: str
    continue_token: str
    #: The server's `remainingItemCount`: items after this page (None when it does not say).
    remaining: int | None = None


@dataclass(frozen=True)
class WatchEvent(Generic[T]):
    """One event of `watch`/`list_watch`, its object decoded as the caller asked (a dict by default).

    `type` is the server's ADDED, MODIFIED, DELETED or BOOKMARK (whose object carries only
    `metadata.resourceVersion`), or `SYNC` from `list_watch`: a full list (`object["items"]`) that
    replaces whatever the consumer knew, sent first and again after every 410.
    """

    type: str
    object: Any
    resource_version: str


# The wire shapes the adapter itself reads; the items' shapes are the caller's.
class _ListMeta(msgspec.Struct):
    resource_version: str = msgspec.field(default="", name="resourceVersion")
    continue_: str = msgspec.field(default="", name="continue")
    remaining_item_count: int | None = msgspec.field(default=None, name="remainingItemCount")


class _ListBody(msgspec.Struct, Generic[T]):
    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    items: list[T] | None = None


class _ObjectHead(msgspec.Struct):
    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)


class _Event(msgspec.Struct, Generic[T]):
    """A watch line, its object decoded as the caller's type in the same pass."""

    type: str = ""
    object: T | None = None


class _Status(msgspec.Struct):
    code: int | None = None
    message: str | None = None
    reason: str | None = None


class _ErrorEvent(msgspec.Struct):
    """An ERROR line: its object is a Status, whatever the watched kind."""

    type: str = ""
    object: _Status = msgspec.field(default_factory=_Status)


class _VersionEvent(msgspec.Struct):
    """Only the object's resourceVersion, for types that do not declare it."""

    object: _ObjectHead = msgspec.field(default_factory=_ObjectHead)


@cache
def _page_decoder(item_type: Any) -> msgspec.json.Decoder[_ListBody[Any]]:
    # Decoders are built once per type: building one walks the whole schema.
    return decoder(_ListBody[item_type])


@cache
def _event_decoder(item_type: Any) -> msgspec.json.Decoder[_Event[Any]]:
    return decoder(_Event[item_type])


_ERROR_EVENT = msgspec.json.Decoder(_ErrorEvent)
_VERSION_EVENT = msgspec.json.Decoder(_VersionEvent)


def _version_of(obj: Any) -> str | None:
    """The object's resourceVersion if its type carries it (a dict does; a struct may)."""
    if isinstance(obj, dict):
        meta = obj.get("metadata")
        return str(meta.get("resourceVersion") or "") if isinstance(meta, dict) else ""
    version = getattr(getattr(obj, "metadata", None), "resource_version", None)
    return version if isinstance(version, str) else None


def _lines(resp: Any) -> Iterator[bytes]:
    """Complete lines of a streamed response (one watch event each), however the chunks fall."""
    pending = b""
    for chunk in resp.stream(amt=None, decode_content=False):
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            if line.strip():
                yield line
    if pending.strip():
        yield pending
