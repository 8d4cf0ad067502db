"""Kubernetes adapter: the only package that imports the `kubernetes` package.

Bulk reads stay raw: `_preload_content=False`, never the client's model objects (about ten times
slower and fifty times heavier per pod). List pages and watch events are decoded with `msgspec`,
straight into the type the caller names (`item_type`): the snapshot passes the structs of
`bot/core/snapshots/schema.py`, which declare only the fields it keeps, so the decoder skips the
rest of each 5 KB pod in C instead of building it as `json.loads` would (about ten times faster, and
it holds the interpreter lock for that much less: see that module for the choice). Without an
`item_type` items come back as plain dicts. `map_pages` does all of that in a helper process and
hands back what the caller's transform made of each page (the snapshot's JSON rows), so a large
list costs the caller's interpreter nothing. Every call carries a
`(connect, read)` timeout, because without one a dead connection hangs forever. Client failures
are translated into the bot's error tree: unreachable servers, 403s (the bot's role does not allow
it) and 410s (an expired continue token) are distinct, so callers can record a named gap instead
of crashing.

The bot's writes are the few that kubectl makes for the same job, on raw JSON (`writes`).
`list_watch` is the informer loop the rollout streaming needs: list, watch from the list's
resourceVersion with bookmarks, resume from the last version seen when a stream ends, and list
again when the server answers 410.

The modules, each built on the ones before it:

    lean        the `kubernetes` import, deferred to first use
    kubeconfig  kubeconfig files checked before the client reads them
    errors      the client's failures, read for the bot's error tree
    decoding    list pages and watch events as the caller's type
    transport   `Transport`: requests, timeouts, errors, the list memo
    prefetch    pages fetched ahead by a thread or a forked child
    pages       `Lists`: paged lists; `MappedList`, a list decoded and transformed in a
                helper process (`map_pages`)
    watch       `Watches`: watch streams and `list_watch`
    writes      `Writes`: cordon, evict, restart …
    client      `Cluster`: all of it, and `connect`

Callers import from here (`from bot.adapters.kube import Cluster`).
"""

from __future__ import annotations

from bot.adapters.kube.client import Cluster
from bot.adapters.kube.decoding import MappedPage, Page, Raw, WatchEvent
from bot.adapters.kube.kubeconfig import MAX_KUBECONFIG_BYTES, check_kubeconfig, kubeconfig_context
from bot.adapters.kube.lean import preload
from bot.adapters.kube.pages import PAGE_SIZE, MappedList
from bot.adapters.kube.prefetch import fetching_ahead
from bot.adapters.kube.transport import MEMO_BYTES, RequestObserver
from bot.adapters.kube.watch import WATCH_SECONDS
from bot.adapters.kube.writes import EVENT_COMPONENT, NODE_EVENTS_NAMESPACE, RESTARTED_AT

__all__ = [
    "EVENT_COMPONENT",
    "MAX_KUBECONFIG_BYTES",
    "MEMO_BYTES",
    "NODE_EVENTS_NAMESPACE",
    "PAGE_SIZE",
    "RESTARTED_AT",
    "WATCH_SECONDS",
    "Cluster",
    "MappedList",
    "MappedPage",
    "Page",
    "Raw",
    "RequestObserver",
    "WatchEvent",
    "check_kubeconfig",
    "fetching_ahead",
    "kubeconfig_context",
    "preload",
]
