"""Object storage with the API server's consistency model: one resourceVersion counter for the
whole cluster, consistent paged lists, watches replayed from a version, and compaction.

Each object is kept as its serialized JSON body (without `kind`/`apiVersion`, which depend on the
group-version a client asks through) plus the few fields that selectors and indexes need. The
bytes are the truth: readers get a fresh `json.loads` copy, so nothing a caller does to a dict can
corrupt the store, and a list page is a join of cached bytes — 150,000 pods never get
re-serialized to serve a list. Readers that only look (the API server comparing a write with what
it replaces, controllers judging a node) share one decoded `Entry.view()` per version instead:
decoding every version for every reader was the sim's largest cost at a rehearsal's speed, where
six clusters' kubelets renew a Lease 60 times a real second each.

History: every change is a `Record(rv, type, entry, prev)` in its kind's log. The state of a kind
as of any resourceVersion still in the window is the current state with the newer records undone,
which serves continue tokens (pages of one consistent list) and `resourceVersionMatch=Exact`.
Records older than the compaction point are dropped; asking for them is 410, like etcd after a
compaction: `Expired` for a continue token, an ERROR event with code 410 for a watch.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import functools
import json
import re
import sys
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from bot.sim.apiserver.errors import ApiError, bad_request, expired
from bot.sim.apiserver.objects import PodView
from bot.sim.apiserver.resources import KINDS, Kind, field_value
from bot.sim.apiserver.selectors import EVERYTHING, FieldSelector, LabelSelector

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace, name); cluster-scoped objects have namespace ""

T = TypeVar("T")

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"

#: How many list snapshots (state as of a resourceVersion) are kept for continue tokens per kind.
SNAPSHOTS_PER_KIND = 4


def dumps(obj: Obj) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def _rv_token(rv: int) -> bytes:
    """How `metadata.resourceVersion` reads in an entry's bytes (no other field carries the
    store's own next resourceVersion: it has not been handed out yet)."""
    return b'"resourceVersion":"%d"' % rv


def _intern_map(values: dict[str, Any] | None) -> dict[str, str]:
    if not values:
        return {}
    return {sys.intern(str(k)): sys.intern(str(v)) for k, v in values.items()}


class Entry:
    """One stored version of one object. Immutable: every write makes a new Entry."""

    __slots__ = (
        "_memo",
        "_pod",
        "_view",
        "controller",
        "fields",
        "key",
        "kind",
        "labels",
        "owners",
        "raw",
        "rv",
        "uid",
    )

    def __init__(
        self,
        kind: Kind,
        key: Key,
        uid: str,
        rv: int,
        raw: bytes,
        labels: dict[str, str],
        fields: dict[str, str],
        owners: tuple[str, ...] = (),
        controller: str = "",
    ) -> None:
        self.kind = kind
        self.key = key
        self.uid = uid
        self.rv = rv
        self.raw = raw
        self.labels = labels
        self.fields = fields
        #: UIDs of every ownerReference, and of the one marked `controller: true` ("" if none).
        self.owners = owners
        self.controller = controller
        self._pod: PodView | None = None
        self._memo: dict[str, Any] | None = None
        self._view: Obj | None = None

    @property
    def namespace(self) -> str:
        return self.key[0]

    @property
    def name(self) -> str:
        return self.key[1]

    def obj(self) -> Obj:
        """A fresh decoded copy (callers may modify it)."""
        loaded: Obj = json.loads(self.raw)
        return loaded

    def view(self) -> Obj:
        """This version decoded once and shared by every reader: callers must NOT modify it, nor
        anything in it (copy what they change: `obj()`, or `clone` of a part). Entries are
        immutable, so a view never goes stale."""
        view = self._view
        if view is None:
            view = self._view = json.loads(self.raw)
        return view

    def pod(self) -> PodView:
        """The controllers' view of this pod version, decoded on first use and kept (entries are
        immutable, so it never goes stale)."""
        view = self._pod
        if view is None:
            view = self._pod = PodView(self.obj())
        return view

    def memo(self, name: str, compute: Callable[[Obj], T]) -> T:
        """`compute(obj)` for this version, decoded and computed once (an entry never changes).
        `compute` must return something its callers will not modify, and must not modify the
        object it is given (the shared `view`)."""
        memo = self._memo
        if memo is None:
            memo = self._memo = {}
        if name not in memo:
            memo[name] = compute(self.view())
        value: T = memo[name]
        return value

    def field(self, name: str) -> str:
        if name == "metadata.name":
            return self.key[1]
        if name == "metadata.namespace":
            return self.key[0]
        return self.fields.get(name, "")

    def matches(self, labels: LabelSelector, fields: FieldSelector) -> bool:
        if not labels.empty and not labels.matches(self.labels):
            return False
        if fields.requirements:
            return all((self.field(r.field) == r.value) != r.negate for r in fields.requirements)
        return True


def make_entry(kind: Kind, obj: Obj, rv: int) -> Entry:
    """Serialize `obj` (its metadata.resourceVersion set to `rv`) into an Entry."""
    meta = obj.setdefault("metadata", {})
    meta["resourceVersion"] = str(rv)
    obj.pop("kind", None)
    obj.pop("apiVersion", None)
    key = (sys.intern(str(meta.get("namespace", ""))) if kind.namespaced else "", str(meta.get("name", "")))
    fields = {f: sys.intern(field_value(obj, f)) for f in kind.fields}
    refs = meta.get("ownerReferences") or []
    owners = tuple(sys.intern(str(r.get("uid", ""))) for r in refs if isinstance(r, dict))
    controller = next(
        (sys.intern(str(r.get("uid", ""))) for r in refs if isinstance(r, dict) and r.get("controller")), ""
    )
    raw = dumps(obj)
    return Entry(
        kind,
        key,
        str(meta.get("uid", "")),
        rv,
        raw,
        _intern_map(meta.get("labels")),
        fields,
        owners,
        controller,
    )


#: What a kubelet's periodic node status post changes (and the version it is stored at).
_HEARTBEAT = re.compile(rb'"lastHeartbeatTime":"[^"]*"|"resourceVersion":"\d+"')


@dataclass(frozen=True)
class Record:
    rv: int
    type: str
    entry: Entry
    prev: Entry | None
    at: float  # simulated time of the change

    @functools.cached_property
    def heartbeat_only(self) -> bool:
        """Whether this change moves nothing but a Node's conditions' `lastHeartbeatTime`: the
        kubelet's status post every 5 minutes, which no controller acts on. At a rehearsal's speed
        every node posts twice a real second, and each post had the DaemonSet controller re-judge
        the node, the kubelet re-sync its pods and the scheduler retry its pending pods.
        (Worked out once per change, however many controllers ask.)"""
        if self.type != MODIFIED or self.prev is None or self.entry.kind.key != "nodes":
            return False
        return _HEARTBEAT.sub(b"", self.entry.raw) == _HEARTBEAT.sub(b"", self.prev.raw)


class Watcher:
    """A watch's queue of records; filled under the store lock, drained by the serving thread."""

    def __init__(
        self, bucket: Bucket, namespace: str, labels: LabelSelector, fields: FieldSelector, max_queue: int
    ) -> None:
        self.bucket = bucket
        self.namespace = namespace
        self.labels = labels
        self.fields = fields
        self.max_queue = max_queue
        self._queue: deque[Record] = deque()
        self._cond = threading.Condition()
        self.closed = False
        self.close_reason = ""

    def push(self, record: Record) -> None:
        with self._cond:
            if self.closed:
                return
            self._queue.append(record)
            if len(self._queue) > self.max_queue:
                # A consumer this far behind is cut off, as the real watch cache does; it re-lists.
                self.closed = True
                self.close_reason = "too slow"
            self._cond.notify()

    def close(self, reason: str = "closed") -> None:
        with self._cond:
            if not self.closed:
                self.closed = True
                self.close_reason = reason
            self._cond.notify_all()

    def backlog(self) -> int:
        """Records queued and not yet taken by the serving thread (0 once closed: none will be)."""
        with self._cond:
            return 0 if self.closed else len(self._queue)

    def take(self, timeout: float) -> list[Record]:
        """Records queued so far, waiting up to `timeout` real seconds for the first one."""
        with self._cond:
            if not self._queue and not self.closed:
                self._cond.wait(timeout)
            items = list(self._queue)
            self._queue.clear()
            return items

    def event_for(self, record: Record) -> tuple[str, Entry] | None:
        """The event this watcher sees for a change, honouring selector transitions.

        An object that stops matching the selectors is a DELETED event for this watcher (carrying
        the previous state at the new resourceVersion); one that starts matching is ADDED.
        """
        if self.namespace and record.entry.namespace != self.namespace:
            return None
        now = record.entry.matches(self.labels, self.fields)
        before = record.prev is not None and record.prev.matches(self.labels, self.fields)
        if record.type == DELETED:
            return (DELETED, record.entry) if (now or before) else None
        if record.type == ADDED:
            return (ADDED, record.entry) if now else None
        if now and before:
            return (MODIFIED, record.entry)
        if now:
            return (ADDED, record.entry)
        if before and record.prev is not None:
            obj = record.prev.obj()
            return (DELETED, make_entry(record.prev.kind, obj, record.rv))
        return None


class Bucket:
    """All objects of one kind, sorted by (namespace, name) as etcd orders its keys."""

    def __init__(self, kind: Kind) -> None:
        self.kind = kind
        self.entries: dict[Key, Entry] = {}
        self.keys: list[Key] = []
        self.log: list[Record] = []
        self.last_rv = 0
        self.floor = 0  # records at or below this were dropped from this kind's log
        self.watchers: set[Watcher] = set()
        self.snapshots: OrderedDict[int, tuple[dict[Key, Entry], list[Key]]] = OrderedDict()
        # Pods are found by node on every drain and describe; index them like the watch cache does.
        self.index_field = "spec.nodeName" if "spec.nodeName" in kind.fields else ""
        self.index: dict[str, set[Key]] = {}

    def _index_add(self, entry: Entry) -> None:
        if self.index_field:
            value = entry.fields.get(self.index_field, "")
            if value:
                self.index.setdefault(value, set()).add(entry.key)

    def _index_remove(self, entry: Entry) -> None:
        if self.index_field:
            value = entry.fields.get(self.index_field, "")
            keys = self.index.get(value)
            if keys is not None:
                keys.discard(entry.key)
                if not keys:
                    del self.index[value]

    def set(self, entry: Entry) -> Entry | None:
        prev = self.entries.get(entry.key)
        if prev is None:
            bisect.insort(self.keys, entry.key)
        else:
            self._index_remove(prev)
        self.entries[entry.key] = entry
        self._index_add(entry)
        return prev

    def remove(self, key: Key) -> Entry | None:
        prev = self.entries.pop(key, None)
        if prev is not None:
            i = bisect.bisect_left(self.keys, key)
            if i < len(self.keys) and self.keys[i] == key:
                del self.keys[i]
            self._index_remove(prev)
        return prev

    def state_at(self, rv: int) -> tuple[dict[Key, Entry], list[Key]]:
        """Entries and sorted keys as of `rv` (current state with newer records undone)."""
        if self.last_rv <= rv:
            return self.entries, self.keys
        cached = self.snapshots.get(rv)
        if cached is not None:
            self.snapshots.move_to_end(rv)
            return cached
        view = dict(self.entries)
        start = bisect.bisect_right(self.log, rv, key=lambda r: r.rv)
        for record in reversed(self.log[start:]):
            if record.prev is None:
                view.pop(record.entry.key, None)
            else:
                view[record.prev.key] = record.prev
        snapshot = (view, sorted(view))
        self.snapshots[rv] = snapshot
        while len(self.snapshots) > SNAPSHOTS_PER_KIND:
            self.snapshots.popitem(last=False)
        return snapshot


@dataclass(frozen=True)
class ListResult:
    entries: list[Entry]
    resource_version: int
    continue_token: str
    remaining: int | None


@dataclass(frozen=True)
class WatchStart:
    watcher: Watcher
    initial: list[Entry]
    replay: list[Record]
    resource_version: int
    initial_events_end: bool


Listener = Callable[[Record], None]


class Store:
    """Every object of the simulated cluster. All access holds `lock` (an RLock shared with the engine)."""

    def __init__(
        self,
        *,
        now: Callable[[], float],
        first_rv: int = 1000,
        max_log: int = 200_000,
        watch_queue: int = 100_000,
    ) -> None:
        self.lock = threading.RLock()
        self.now = now
        self.rv = first_rv
        self.floor = first_rv
        self.max_log = max_log
        self.watch_queue = watch_queue
        self.buckets: dict[str, Bucket] = {k.key: Bucket(k) for k in KINDS}
        self.listeners: list[Listener] = []
        self._checkpoints: deque[tuple[float, int]] = deque()
        #: owner UID → (kind key, object key) of every object naming it in ownerReferences.
        self.dependents: dict[str, set[tuple[str, Key]]] = {}
        #: `dependents` of an owner in key order, kept until they change (a DaemonSet's thousands
        #: of pods are read on every sync, and change far less often than their status).
        self._dependents_sorted: dict[str, list[tuple[str, Key]]] = {}

    # ---- reads ------------------------------------------------------------------------------------

    def bucket(self, kind_key: str) -> Bucket:
        return self.buckets[kind_key]

    def entry(self, kind_key: str, namespace: str, name: str) -> Entry | None:
        with self.lock:
            return self.buckets[kind_key].entries.get((namespace, name))

    def get(self, kind_key: str, namespace: str, name: str) -> Obj | None:
        e = self.entry(kind_key, namespace, name)
        return e.obj() if e is not None else None

    def entries(self, kind_key: str, namespace: str | None = None) -> list[Entry]:
        with self.lock:
            b = self.buckets[kind_key]
            if namespace is None:
                return [b.entries[k] for k in b.keys]
            lo = bisect.bisect_left(b.keys, (namespace, ""))
            hi = bisect.bisect_left(b.keys, (namespace + "\x00", ""))
            return [b.entries[k] for k in b.keys[lo:hi]]

    def objects(self, kind_key: str, namespace: str | None = None) -> list[Obj]:
        return [e.obj() for e in self.entries(kind_key, namespace)]

    def by_index(self, kind_key: str, value: str) -> list[Entry]:
        """Pods bound to node `value` (the spec.nodeName index)."""
        with self.lock:
            b = self.buckets[kind_key]
            return [b.entries[k] for k in sorted(b.index.get(value, ()))]

    def dependents_of(self, uid: str, kind_key: str | None = None) -> list[Entry]:
        """Objects whose ownerReferences name `uid` (optionally only of one kind), in key order."""
        with self.lock:
            ordered = self._dependents_sorted.get(uid)
            if ordered is None:
                ordered = sorted(self.dependents.get(uid, ()))
                if ordered:
                    self._dependents_sorted[uid] = ordered
            out = []
            for kk, key in ordered:
                if kind_key is not None and kk != kind_key:
                    continue
                e = self.buckets[kk].entries.get(key)
                if e is not None:
                    out.append(e)
            return out

    def _track_owners(self, entry: Entry | None, prev: Entry | None) -> None:
        if entry is not None and prev is not None and entry.owners == prev.owners:
            return  # the usual update: same key, same owners
        if prev is not None:
            for uid in prev.owners:
                deps = self.dependents.get(uid)
                self._dependents_sorted.pop(uid, None)
                if deps is not None:
                    deps.discard((prev.kind.key, prev.key))
                    if not deps:
                        del self.dependents[uid]
        if entry is not None:
            for uid in entry.owners:
                self.dependents.setdefault(uid, set()).add((entry.kind.key, entry.key))
                self._dependents_sorted.pop(uid, None)

    def count(self, kind_key: str) -> int:
        return len(self.buckets[kind_key].entries)

    # ---- writes -----------------------------------------------------------------------------------

    def _commit(self, bucket: Bucket, rtype: str, entry: Entry, prev: Entry | None) -> Record:
        record = Record(entry.rv, rtype, entry, prev, self.now())
        bucket.last_rv = entry.rv
        bucket.log.append(record)
        if len(bucket.log) > self.max_log:
            # Keep memory bounded under heavy churn: this kind's oldest half becomes unreachable.
            drop = len(bucket.log) // 2
            bucket.floor = bucket.log[drop - 1].rv
            del bucket.log[:drop]
        for w in list(bucket.watchers):
            w.push(record)
        for listener in self.listeners:
            listener(record)
        return record

    def create(self, kind: Kind, obj: Obj) -> Entry:
        """Store a new object (the caller checked it does not exist and filled metadata)."""
        with self.lock:
            self.rv += 1
            entry = make_entry(kind, obj, self.rv)
            if kind.key == "pods":
                entry._pod = PodView(obj)
            bucket = self.buckets[kind.key]
            if entry.key in bucket.entries:
                raise ValueError(f"{kind.key} {entry.key} exists")
            bucket.set(entry)
            self._track_owners(entry, None)
            self._commit(bucket, ADDED, entry, None)
            return entry

    def update(self, kind: Kind, obj: Obj, prev: Entry, *, handover: bool = False) -> Entry:
        """Replace `prev` with `obj`; an update that changes nothing keeps the old resourceVersion.
        With `handover`, the caller gives `obj` up (it will not touch it, nor its parts, again): it
        becomes the new version's shared `view` as it is, not decoded again on first read."""
        with self.lock:
            obj.setdefault("metadata", {})["resourceVersion"] = str(prev.rv)
            obj.pop("kind", None)
            obj.pop("apiVersion", None)
            # Most controller writes change nothing (a status as it was): compared with the
            # shared decoded view first, they cost no serialization at all (serializing each only
            # to find that was a third of every write). Equal JSON is the same object to a client,
            # whatever the order of its keys. A write that differs only as Python values (a tuple
            # for a list) is still a no-op: its bytes, at the old resourceVersion, are the old ones.
            if obj == prev.view():
                return prev
            entry = make_entry(kind, obj, self.rv + 1)
            at_prev = entry.raw.replace(_rv_token(entry.rv), _rv_token(prev.rv), 1)
            if at_prev == prev.raw:
                obj["metadata"]["resourceVersion"] = str(prev.rv)
                return prev
            self.rv += 1
            if kind.key == "pods":
                entry._pod = PodView(obj)
            if handover:
                entry._view = obj
            bucket = self.buckets[kind.key]
            bucket.set(entry)
            self._track_owners(entry, prev)
            self._commit(bucket, MODIFIED, entry, prev)
            return entry

    def delete(self, kind: Kind, prev: Entry) -> Entry:
        """Remove an object; its last state is recorded at the deletion's resourceVersion."""
        with self.lock:
            self.rv += 1
            obj = prev.obj()
            entry = make_entry(kind, obj, self.rv)
            entry._pod = prev._pod
            bucket = self.buckets[kind.key]
            bucket.remove(prev.key)
            self._track_owners(None, prev)
            self._commit(bucket, DELETED, entry, prev)
            return entry

    def load(self, kind: Kind, objs: Iterable[Obj], *, views: bool = False) -> int:
        """Bulk-insert initial objects: no history, no watchers, no listeners (scenario start-up).
        With `views`, each pod's `PodView` is built from the dict at hand (its controllers are
        about to read them all) instead of decoding the pod again on first use."""
        with self.lock:
            bucket = self.buckets[kind.key]
            n = 0
            for obj in objs:
                self.rv += 1
                entry = make_entry(kind, obj, self.rv)
                if views and kind.key == "pods":
                    entry._pod = PodView(obj)
                if entry.key in bucket.entries:
                    raise ValueError(f"duplicate {kind.key} {entry.key}")
                bucket.entries[entry.key] = entry
                bucket._index_add(entry)
                self._track_owners(entry, None)
                n += 1
            bucket.keys = sorted(bucket.entries)
            bucket.last_rv = self.rv
            return n

    # ---- compaction ---------------------------------------------------------------------------------

    def compact(self, rv: int | None = None) -> int:
        """Forget history below `rv` (default: everything before now), as etcd's compaction at that
        revision does: the revision itself is kept, so a watch from `rv - 1` still starts. Returns
        the new floor."""
        with self.lock:
            target = self.rv if rv is None else min(rv, self.rv)
            if target <= self.floor:
                return self.floor
            self.floor = target
            for bucket in self.buckets.values():
                cut = bisect.bisect_left(bucket.log, target, key=lambda r: r.rv)
                if cut:
                    del bucket.log[:cut]
                for snap_rv in [r for r in bucket.snapshots if r < target]:
                    del bucket.snapshots[snap_rv]
            return self.floor

    def compact_window(self, window_seconds: float) -> int:
        """Compact what is older than `window_seconds` of simulated time (called periodically)."""
        with self.lock:
            now = self.now()
            self._checkpoints.append((now, self.rv))
            target = None
            while self._checkpoints and self._checkpoints[0][0] <= now - window_seconds:
                target = self._checkpoints.popleft()[1]
            return self.compact(target) if target is not None else self.floor

    def _floor_for(self, bucket: Bucket) -> int:
        return max(self.floor, bucket.floor)

    # ---- lists --------------------------------------------------------------------------------------

    def list_page(
        self,
        kind: Kind,
        *,
        namespace: str = "",
        labels: LabelSelector = EVERYTHING,
        fields: FieldSelector | None = None,
        limit: int = 0,
        continue_token: str = "",
        resource_version: str = "",
        resource_version_match: str = "",
    ) -> ListResult:
        fields = fields or FieldSelector()
        with self.lock:
            bucket = self.buckets[kind.key]
            start: Key | None = None
            if continue_token:
                at, start = self._decode_continue(continue_token, kind, namespace)
                if at == -1:
                    at = self.rv
                elif at < self._floor_for(bucket):
                    raise self._continue_expired(kind, namespace, start)
            elif resource_version and resource_version_match == "Exact":
                at = _parse_rv(resource_version)
                if at < self._floor_for(bucket):
                    raise expired("The resourceVersion for the provided list is too old.")
                if at > self.rv:
                    raise ApiError(504, "Timeout", f"Too large resource version: {at}, current: {self.rv}")
            else:
                at = self.rv
            entries, keys = bucket.state_at(at) if at < bucket.last_rv else (bucket.entries, bucket.keys)
            use_index = entries is bucket.entries
            candidates = self._candidates(bucket, keys, namespace, fields, start, use_index)
            out: list[Entry] = []
            last_key: Key | None = None
            more = False
            for key in candidates:
                e = entries[key]
                if not e.matches(labels, fields):
                    continue
                if limit and len(out) >= limit:
                    more = True
                    break
                out.append(e)
                last_key = key
            token = ""
            remaining: int | None = None
            if more and last_key is not None:
                token = self._encode_continue(at, kind, namespace, last_key)
                if labels.empty and not fields.requirements:
                    hi = (
                        bisect.bisect_left(keys, (namespace + "\x00", ""))
                        if (namespace and kind.namespaced)
                        else len(keys)
                    )
                    remaining = hi - bisect.bisect_right(keys, last_key)
            return ListResult(out, at, token, remaining)

    def _candidates(
        self,
        bucket: Bucket,
        keys: list[Key],
        namespace: str,
        fields: FieldSelector,
        start: Key | None,
        use_index: bool,
    ) -> Iterator[Key]:
        indexed = fields.exact(bucket.index_field) if (use_index and bucket.index_field) else None
        if indexed is not None:
            chosen = sorted(bucket.index.get(indexed, ()))
            for key in chosen:
                if namespace and key[0] != namespace:
                    continue
                if start is not None and key < start:
                    continue
                yield key
            return
        lo, hi = 0, len(keys)
        if namespace and bucket.kind.namespaced:
            lo = bisect.bisect_left(keys, (namespace, ""))
            hi = bisect.bisect_left(keys, (namespace + "\x00", ""))
        if start is not None:
            lo = max(lo, bisect.bisect_left(keys, start))
        for i in range(lo, hi):
            yield keys[i]

    @staticmethod
    def _start_string(kind: Kind, namespace: str, key: Key) -> str:
        if kind.namespaced and not namespace:
            return f"/{key[0]}/{key[1]}\x00"
        return f"{key[1]}\x00"

    def _encode_continue(self, rv: int, kind: Kind, namespace: str, last: Key) -> str:
        payload = {"v": "meta.k8s.io/v1", "rv": rv, "start": self._start_string(kind, namespace, last)}
        raw = json.dumps(payload, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def _decode_continue(self, token: str, kind: Kind, namespace: str) -> tuple[int, Key]:
        try:
            padded = token + "=" * (-len(token) % 4)
            data = json.loads(base64.urlsafe_b64decode(padded.encode()))
            if not isinstance(data, dict) or data.get("v") != "meta.k8s.io/v1":
                raise ValueError(
                    "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
                )
            rv = int(data["rv"])
            start = str(data["start"])
        except (ValueError, KeyError, TypeError, binascii.Error) as exc:
            raise bad_request(f"invalid continue token: {exc}") from None
        if rv == 0:
            raise bad_request(
                "invalid continue token: continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
            )
        start = start.rstrip("\x00")
        # The token names the last key returned; the next page starts right after it.
        if kind.namespaced and not namespace:
            _, ns, name = [*start.split("/", 2), "", ""][:3]
            return rv, (ns, name + "\x00")
        return rv, (namespace if kind.namespaced else "", start + "\x00")

    def _continue_expired(self, kind: Kind, namespace: str, start: Key) -> ApiError:
        # Like etcd after a compaction: 410 Expired, plus a token that continues at the latest
        # version (rv -1) for clients that accept an inconsistent list.
        last = (start[0], start[1].rstrip("\x00"))
        payload = {"v": "meta.k8s.io/v1", "rv": -1, "start": self._start_string(kind, namespace, last)}
        token = (
            base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode().rstrip("=")
        )
        err = expired(
            "The provided continue parameter is too old to display a consistent list result. You can start "
            "a new list without the continue parameter, or use the continue token in this response to "
            "retrieve the remainder of the results. Continuing with the provided token results in an "
            "inconsistent list - objects that were created, modified, or deleted between the time the "
            "first chunk was returned and now may show up in the list."
        )
        err.list_continue = token
        return err

    # ---- watches ------------------------------------------------------------------------------------

    def watch(
        self,
        kind: Kind,
        *,
        namespace: str = "",
        labels: LabelSelector = EVERYTHING,
        fields: FieldSelector | None = None,
        resource_version: str = "",
        send_initial_events: bool = False,
    ) -> WatchStart:
        """Register a watcher atomically with its starting point (raises ApiError 410 when too old)."""
        fields = fields or FieldSelector()
        with self.lock:
            bucket = self.buckets[kind.key]
            initial: list[Entry] = []
            replay: list[Record] = []
            rv = _parse_rv(resource_version) if resource_version else 0
            if send_initial_events or rv == 0:
                # "Get state and start at most recent": synthetic ADDED for what exists now.
                initial = [
                    bucket.entries[k]
                    for k in self._candidates(bucket, bucket.keys, namespace, fields, None, True)
                    if bucket.entries[k].matches(labels, fields)
                ]
            else:
                # A watch from rv needs every record after it: etcd keeps the compaction revision
                # itself, the kind's own log window (bucket.floor) drops at and below its floor.
                if rv < self.floor - 1 or rv < bucket.floor:
                    raise expired(f"too old resource version: {rv} ({self._floor_for(bucket)})")
                start = bisect.bisect_right(bucket.log, rv, key=lambda r: r.rv)
                replay = bucket.log[start:]
            watcher = Watcher(bucket, namespace if kind.namespaced else "", labels, fields, self.watch_queue)
            bucket.watchers.add(watcher)
            return WatchStart(watcher, initial, replay, self.rv, send_initial_events)

    def unwatch(self, watcher: Watcher) -> None:
        with self.lock:
            watcher.bucket.watchers.discard(watcher)
        watcher.close()

    def watch_backlog(self) -> int:
        """Changes committed that an open watch's serving thread has not yet taken to send (tests
        wait on 0 after a step instead of sleeping: each change is then on its way to every watch)."""
        with self.lock:
            watchers = [w for b in self.buckets.values() for w in b.watchers]
        return sum(w.backlog() for w in watchers)

    def close_watchers(self, reason: str = "closed") -> int:
        """End every open watch (the sim's transport faults and shutdown use this)."""
        with self.lock:
            watchers = [w for b in self.buckets.values() for w in b.watchers]
            for b in self.buckets.values():
                b.watchers.clear()
        for w in watchers:
            w.close(reason)
        return len(watchers)


def _parse_rv(value: str) -> int:
    try:
        rv = int(value)
    except ValueError:
        raise bad_request(f"resourceVersion: Invalid value: {value!r}: must be an integer") from None
    if rv < 0:
        raise bad_request(f"resourceVersion: Invalid value: {value!r}: must be non-negative")
    return rv
