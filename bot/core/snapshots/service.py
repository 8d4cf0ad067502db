"""Snapshots as the user handles them: take-and-store, find by id or label, export, compare.

The snapshot body is JSON compressed with zlib; the store keeps it in one row written in one
transaction, with a small summary beside it so listings never decompress bodies.
"""

from __future__ import annotations

import json
import threading
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import msgspec

from bot.core.clusters import DEFAULT_NODE_GROUP_LABELS
from bot.core.durations import kubectl_age
from bot.core.providers import Provider
from bot.core.snapshots.collector import collector_paused
from bot.core.snapshots.labels import clean_label
from bot.core.snapshots.logreads import LogProbe
from bot.core.snapshots.projection import (
    ClusterReader,
    Progress,
    pods_as_dicts,
    take_snapshot,
    to_json,
)
from bot.errors import UserError, clip
from bot.records import ClusterConfig, SnapshotMeta

if TYPE_CHECKING:
    from bot.adapters.store import Store
    from bot.core.snapshots.diff import DiffReport

#: zlib's fastest level: at 150,000 pods it compresses the 50 MB of JSON in a quarter of a second
#: (level 6 took 0.6 s, a tenth of the whole snapshot) into 6.8 MB instead of 5.9 MB.
COMPRESSION = 1
#: Bodies at least this large are compressed in two halves at once (see `compress`).
SPLIT_AT = 4 << 20
#: The zlib header `zlib.compress` writes at level 1 (deflate, 32 KB window, "fastest").
_ZLIB_HEADER = b"\x78\x01"


def encode(snap: Mapping[str, Any]) -> bytes:
    # See `to_json` for the encoding.
    return compress(to_json(snap))


def compress(data: bytes) -> bytes:
    """A zlib stream of `data` (what `zlib.compress` makes, read back by `zlib.decompress`).

    A large body is deflated in two halves at once, the second on a helper thread (zlib releases
    the interpreter lock): the first half ends with a sync flush (byte-aligned, not final), the
    second is a fresh deflate stream that ends the whole, and the checksum covers all of it, as
    pigz does. Back-references do not cross the cut, which costs a few bytes; the time halves on two
    cores. Small bodies are compressed in one go.
    """
    if len(data) < SPLIT_AT:
        return zlib.compress(data, COMPRESSION)
    view = memoryview(data)
    cut = len(data) // 2
    tail: list[bytes] = []

    def deflate_second() -> None:
        second = zlib.compressobj(COMPRESSION, zlib.DEFLATED, -15)
        tail.append(second.compress(view[cut:]) + second.flush(zlib.Z_FINISH))

    helper = threading.Thread(target=deflate_second, name="snapshot-compress")
    helper.start()
    first = zlib.compressobj(COMPRESSION, zlib.DEFLATED, -15)
    head = first.compress(view[:cut]) + first.flush(zlib.Z_SYNC_FLUSH)
    checksum = zlib.adler32(view[cut:], zlib.adler32(view[:cut]))
    helper.join()
    return _ZLIB_HEADER + head + tail[0] + checksum.to_bytes(4, "big")


class StreamedBody:
    """The stored body (`encode`'s JSON, as a zlib stream), compressed while the pods arrive.

    A `RowsSink` for `take_snapshot`: the sections before the pods are written when it begins
    them, each page of rows as it comes (zlib releases the interpreter lock, and the bot's process
    has little else to do while the list's helper process works), the sections after them by
    `finish`. At 150,000 pods this takes the 0.3 s of compressing 50 MB of JSON off the end of the
    snapshot, and the JSON is never whole in memory.
    """

    def __init__(self) -> None:
        self._deflate = zlib.compressobj(COMPRESSION)
        self._parts: list[bytes] = []
        self._first = True

    def begin(self, snap: Mapping[str, Any]) -> None:
        self._deflate = zlib.compressobj(COMPRESSION)
        self._parts = []
        self._first = True
        keys = list(snap)
        head = to_json({key: snap[key] for key in keys[: keys.index("pods")]})
        self._write(head[:-1] + (b"," if len(head) > 2 else b"") + b'"pods":[')

    def rows(self, data: bytes) -> None:
        if not data:
            return
        if not self._first:
            self._write(b",")
        self._first = False
        self._write(data)

    def finish(self, snap: Mapping[str, Any]) -> bytes:
        keys = list(snap)
        tail = to_json({key: snap[key] for key in keys[keys.index("pods") + 1 :]})
        self._write(b"]" + (b"," + tail[1:] if len(tail) > 2 else b"}"))
        self._parts.append(self._deflate.flush())
        return b"".join(self._parts)

    def _write(self, data: bytes) -> None:
        self._parts.append(self._deflate.compress(data))


def decode(body: bytes) -> dict[str, Any]:
    with collector_paused():
        loaded = msgspec.json.decode(zlib.decompress(body))
    return loaded if isinstance(loaded, dict) else {}


def summary_of(snap: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "version": (snap.get("version") or {}).get("gitVersion", ""),
        "counts": snap.get("counts", {}),
        "gaps": snap.get("gaps", []),
    }


@dataclass(frozen=True, kw_only=True)
class Stored:
    meta: SnapshotMeta
    snap: dict[str, Any]


def take_and_store(
    store: Store | Callable[[], Store],
    reader: ClusterReader,
    *,
    label: str,
    taken_by: str,
    now: datetime,
    node_group_labels: Sequence[str] = DEFAULT_NODE_GROUP_LABELS,
    events_since: timedelta = timedelta(hours=1),
    progress: Progress | None = None,
    logs: LogProbe | None = None,
    provider: Callable[[], Provider] | None = None,
    beside: Callable[[], None] | None = None,
) -> Stored:
    """Take a snapshot and store it. `store` may be a function that opens it, called at the end;
    `beside` is `take_snapshot`'s (the command line starts opening the store there)."""
    label = clean_label(label)
    snap = take_snapshot(
        reader,
        label=label,
        taken_by=taken_by,
        now=now,
        node_group_labels=node_group_labels,
        events_since=events_since,
        progress=progress,
        pods_to=(streamed := StreamedBody()),
        logs=logs,
        provider=provider,
        beside=beside,
    )
    body = streamed.finish(snap)
    # The rows went into the body only: the snapshot handed back says so rather than that none exist.
    del snap["pods"]
    if callable(store):  # opened while the snapshot was taken (the command line: `cli._snapshot`)
        store = store()
    snapshot_id = store.save_snapshot(
        cluster=reader.name,
        label=label,
        taken_at=now,
        taken_by=taken_by,
        summary=json.dumps(summary_of(snap)),
        body=body,
    )
    snap["id"] = snapshot_id
    meta = SnapshotMeta(
        id=snapshot_id,
        cluster=reader.name,
        label=label,
        taken_at=now,
        taken_by=taken_by,
        summary=json.dumps(summary_of(snap)),
        size=len(body),
    )
    return Stored(meta=meta, snap=snap)


def _recent(store: Store, cluster: str | None) -> str:
    recent = store.snapshots(cluster=cluster, limit=5)
    if not recent:
        return "there are no snapshots yet (take one with `/upgrade snapshot pre`)"
    listed = ", ".join(f"#{m.id} `{m.label}`" for m in recent)
    return f"recent snapshots: {listed}"


def resolve(store: Store, ref: str, *, cluster: str | None) -> Stored:
    """`12`, `#12` or a label (the latest snapshot with that label on the cluster)."""
    text = ref.strip().lstrip("#")
    # ASCII digits, bounded: "²" passes `isdigit` and 5,000 digits pass it too; `int()` takes neither.
    if text.isascii() and text.isdigit() and len(text) <= 40:
        found = store.snapshot_body(int(text))
        if found is None:
            raise UserError(f"no snapshot #{clip(text)}; {_recent(store, cluster)}")
        meta, body = found
    else:
        metas = store.snapshots(cluster=cluster, label=text, limit=1)
        if not metas:
            where = f" on {cluster}" if cluster else ""
            raise UserError(f"no snapshot labelled `{clip(text)}`{where}; {_recent(store, cluster)}")
        found = store.snapshot_body(metas[0].id)
        assert found is not None
        meta, body = found
    snap = decode(body)
    snap["id"] = meta.id
    return Stored(meta=meta, snap=snap)


def compare(
    store: Store,
    first: str | None,
    second: str | None,
    *,
    cluster: ClusterConfig,
    live: Callable[[], dict[str, Any]],
    restart_threshold: int = 3,
    replaces: Mapping[str, str] | None = None,
) -> DiffReport:
    """Defaults: latest `pre` vs latest `post`; else the latest snapshot vs the live cluster.
    `replaces`: new node group → the old one it replaces (a plan's diff step says so)."""
    # Imported here: taking a snapshot (this module's other use) needs none of the diff, whose
    # import was a twentieth of the `snapshot` command's start-up.
    from bot.core.snapshots.diff import diff

    if first is None:
        pre = store.snapshots(cluster=cluster.name, label="pre", limit=1)
        post = store.snapshots(cluster=cluster.name, label="post", limit=1)
        if pre and post:
            return diff(
                resolve(store, str(pre[0].id), cluster=None).snap,
                resolve(store, str(post[0].id), cluster=None).snap,
                restart_threshold=restart_threshold,
                replaces=replaces,
            )
        latest = store.snapshots(cluster=cluster.name, limit=1)
        if not latest:
            raise UserError(f"nothing to compare: {_recent(store, cluster.name)}")
        return diff(
            resolve(store, str(latest[0].id), cluster=None).snap,
            live(),
            restart_threshold=restart_threshold,
            replaces=replaces,
        )
    before = _of_cluster(resolve(store, first, cluster=cluster.name), cluster.name)
    if second is None:
        return diff(before.snap, live(), restart_threshold=restart_threshold, replaces=replaces)
    after = _of_cluster(resolve(store, second, cluster=cluster.name), cluster.name)
    if after.meta.id == before.meta.id:
        raise UserError(
            f"`{clip(first, 40)}` and `{clip(second, 40)}` are the same snapshot (#{before.meta.id}): "
            "nothing to compare; name the one taken before and the one taken after"
        )
    return diff(before.snap, after.snap, restart_threshold=restart_threshold, replaces=replaces)


def _of_cluster(stored: Stored, cluster: str) -> Stored:
    """A snapshot named by its id may be another cluster's: a diff compares one cluster's before
    and after, so that is refused, naming both."""
    if stored.meta.cluster != cluster:
        raise UserError(
            f"snapshot #{stored.meta.id} `{clip(stored.meta.label, 40)}` is of cluster {stored.meta.cluster}, "
            f"not {cluster}: a diff compares one cluster's snapshots (`--cluster {stored.meta.cluster}` for that one)"
        )
    return stored


# ---------------------------------------------------------------------------------------------
# kubectl-style export


def human_age(created: str, at: datetime) -> str:
    """kubectl's AGE column for an object created at `created` (RFC 3339)."""
    try:
        start = datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError:
        return "<unknown>"
    return kubectl_age(at - start)


def _table(rows: list[list[str]]) -> str:
    """Columns padded like kubectl's tabwriter: three spaces between columns."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for r in rows:
        cells = [c.ljust(widths[i] + 3) for i, c in enumerate(r[:-1])] + [r[-1]]
        out.append("".join(cells).rstrip())
    return "\n".join(out) + "\n"


def export_kubectl_wide(snap: Mapping[str, Any]) -> str:
    """`kubectl get nodes -o wide` and `kubectl get pods -A -o wide`, as of the snapshot."""
    at = datetime.fromisoformat(str(snap["taken_at"])).astimezone(UTC)
    nodes = [
        [
            "NAME",
            "STATUS",
            "ROLES",
            "AGE",
            "VERSION",
            "INTERNAL-IP",
            "EXTERNAL-IP",
            "OS-IMAGE",
            "KERNEL-VERSION",
            "CONTAINER-RUNTIME",
        ]
    ]
    for n in sorted(snap.get("nodes") or [], key=lambda n: n["name"]):
        status = "Ready" if n["ready"] == "True" else "NotReady"
        if n["unschedulable"]:
            status += ",SchedulingDisabled"
        nodes.append(
            [
                n["name"],
                status,
                ",".join(n["roles"]) or "<none>",
                human_age(n["created"], at),
                n["kubelet"],
                n["internal_ip"] or "<none>",
                n["external_ip"] or "<none>",
                n["os_image"],
                n["kernel"],
                n["runtime"],
            ]
        )
    pods = [
        [
            "NAMESPACE",
            "NAME",
            "READY",
            "STATUS",
            "RESTARTS",
            "AGE",
            "IP",
            "NODE",
            "NOMINATED NODE",
            "READINESS GATES",
        ]
    ]
    for p in sorted(pods_as_dicts(snap), key=lambda p: (p["namespace"], p["name"])):
        pods.append(
            [
                p["namespace"],
                p["name"],
                f"{p['ready']}/{p['total']}",
                p["status"],
                str(p["restarts"]),
                human_age(p["created"], at),
                p["ip"] or "<none>",
                p["node"] or "<none>",
                "<none>",
                "<none>",
            ]
        )
    header = f"# snapshot #{snap.get('id', '?')} `{snap.get('label')}` of {snap.get('cluster')} at {snap.get('taken_at')}\n"
    # A list the snapshot could not read is said where its table stands: an empty table is not "none".
    gaps = {str(g.get("resource")): str(g.get("reason", "")) for g in snap.get("gaps") or []}

    def unread(resource: str) -> str:
        return (
            f"# NOT READ: {resource}: {gaps[resource]} (the table below is empty for that reason)\n"
            if resource in gaps
            else ""
        )

    return (
        header
        + "\n$ kubectl get nodes -o wide\n"
        + unread("nodes")
        + _table(nodes)
        + "\n$ kubectl get pods -A -o wide\n"
        + unread("pods")
        + _table(pods)
    )
