"""Kubernetes adapter: the only module that imports the `kubernetes` package.

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

The bot's writes are the few that kubectl makes for the same job, on raw JSON: cordon and uncordon
(strategic merge patch of `spec.unschedulable`), eviction through the `eviction` subresource (a
429 from a PodDisruptionBudget is `EvictionBlocked`, to be retried), and rollout restart (the
`kubectl.kubernetes.io/restartedAt` template annotation). `list_watch` is the informer loop the
rollout streaming needs: list, watch from the list's resourceVersion with bookmarks, resume from
the last version seen when a stream ends, and list again when the server answers 410.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import fcntl
import gc
import json
import logging
import mmap
import os
import queue
import re
import signal
import socket
import struct
import sys
import threading
import time
import types
from collections.abc import Callable, Collection, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any, Generic, TypeVar, cast, overload

import msgspec
import urllib3
import yaml

from bot.errors import (
    ClusterError,
    ClusterForbidden,
    ClusterUnreachable,
    ConfigError,
    ContinueExpired,
    EvictionBlocked,
    RolloutRefused,
    WatchExpired,
)
from bot.files import TooLarge, Unreadable, read_bounded
from bot.records import ClusterConfig


@dataclass(frozen=True)
class _Client:
    """The parts of the `kubernetes` package the adapter uses, once it is imported."""

    client: types.ModuleType
    config: types.ModuleType
    ApiException: type[Exception]
    ConfigException: type[Exception]


@cache
def _kubernetes() -> _Client:
    """`import kubernetes`, the first time a cluster is connected to or a kubeconfig read.

    Importing the package runs its __init__, which imports every API group and all 800 model
    classes: about 0.4 s of CPU and 38 MB, for a transport that uses none of them (bodies stay
    raw, see above); 2.5 s where `kubernetes_validate` (a dev tool) is installed, because the
    package's dynamic client imports it when it can. A plain import deferred to first use is what the package supports, so a
    command that never reaches a cluster (help, rules, plan validation, the Slack door before its
    first cluster command) pays nothing, and no version-specific surgery on the package's modules
    can break with a new client release. The import lock makes concurrent first calls safe.
    """
    import kubernetes.client
    import kubernetes.config
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config.config_exception import ConfigException

    return _Client(kubernetes.client, kubernetes.config, ApiException, ConfigException)


log = logging.getLogger(__name__)

#: kubectl's page size; the API server's list cost is bounded per page.
PAGE_SIZE = 500
#: What `Cluster.remembering` keeps of the lists it reads, at most (a check at 5,000 nodes: its
#: 3,500 Deployments and 900 budgets are about 20 MB of JSON).
MEMO_BYTES = 64 * 1024 * 1024

#: Told of each API request: (verb, result, seconds) — `get`/`list`… as the HTTP method
#: lower-cased (`watch` for a watch), the HTTP status or `unreachable`, time to the headers.
RequestObserver = Callable[[str, str, float], None]


#: The annotation `kubectl rollout restart` sets on the pod template.
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
STRATEGIC_MERGE = "application/strategic-merge-patch+json"
#: Where Events about Nodes (cluster-scoped) are recorded, as the kubelet does.
NODE_EVENTS_NAMESPACE = "default"
EVENT_COMPONENT = "upgrade-bot"
#: Server-side end of one watch stream; the client's read timeout is longer (see `watch`).
WATCH_SECONDS = 60
#: Inside `Cluster.within`: the monotonic time by which every request must have ended.
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("kube_deadline", default=None)
#: A kubeconfig is a few kilobytes per cluster (its certificates inline); one of hundreds of
#: clusters stays under a megabyte. A bigger file is the wrong file, and YAML-parsing it would
#: hold a worker for a minute.
MAX_KUBECONFIG_BYTES = 4 * 1024 * 1024


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
    return msgspec.json.Decoder(_ListBody[item_type])


@cache
def _event_decoder(item_type: Any) -> msgspec.json.Decoder[_Event[Any]]:
    return msgspec.json.Decoder(_Event[item_type])


_ERROR_EVENT = msgspec.json.Decoder(_ErrorEvent)
_VERSION_EVENT = msgspec.json.Decoder(_VersionEvent)


def _version_of(obj: Any) -> str | None:
    """The object's resourceVersion if its type carries it (a dict does; a struct may)."""
    if isinstance(obj, dict):
        meta = obj.get("metadata")
        return str(meta.get("resourceVersion") or "") if isinstance(meta, dict) else ""
    version = getattr(getattr(obj, "metadata", None), "resource_version", None)
    return version if isinstance(version, str) else None


class Cluster:
    """One cluster's API server, reached through the official client's transport."""

    def __init__(
        self,
        name: str,
        api_client: Any,
        *,
        timeout: float,
        context: str = "",
        observe: RequestObserver | None = None,
    ) -> None:
        self.name = name
        self.context = context
        self.api_client = api_client
        self.timeout = timeout
        #: Told of every API request (verb, result, seconds): the front door's metrics.
        self.observe = observe
        #: Inside `remembering`: whole lists read so far, (path, query, limit) → their raw pages.
        self._memo: dict[tuple[str, str, int], list[bytes]] | None = None
        self._memo_left = 0
        self._memo_paths: frozenset[str] | None = None

    @contextlib.contextmanager
    def remembering(
        self, paths: Collection[str] | None = None, *, max_bytes: int = MEMO_BYTES
    ) -> Iterator[None]:
        """Within the block a list is read from the cluster once: a second `list_pages` of the same
        path and query (another check decoding the same objects into another shape: the checks'
        workloads and the removed-API signals' managedFields) decodes the pages kept from the
        first. Only whole lists of `paths` (None: any) are kept, `max_bytes` of them at most (what
        does not fit is read again); the pages are dropped when the block ends. Not for watches or
        pods' `map_pages`."""
        self._memo, self._memo_left = {}, max_bytes
        self._memo_paths = frozenset(paths) if paths is not None else None
        try:
            yield
        finally:
            self._memo, self._memo_left, self._memo_paths = None, 0, None

    @contextlib.contextmanager
    def within(self, seconds: float) -> Iterator[None]:
        """Within the block every request (this thread's) ends `seconds` from now at the latest,
        connect retry included: a job's write checked against this replica's lease is bounded by
        the figure checked (`bot.core.tenure.GuardedCalls`), not by the read timeout of 60 s."""
        token = _DEADLINE.set(time.monotonic() + seconds)
        try:
            yield
        finally:
            _DEADLINE.reset(token)

    @classmethod
    def connect(cls, config: ClusterConfig, *, observe: RequestObserver | None = None) -> Cluster:
        """Build a client for `config` (no request is made yet); `observe` is told of every
        request it makes (verb, result, seconds to the response's headers)."""
        kube = _kubernetes()
        configuration = kube.client.Configuration()
        if not config.in_cluster:
            check_kubeconfig(str(config.kubeconfig), cluster=config.name)
        try:
            if config.in_cluster:
                kube.config.load_incluster_config(client_configuration=configuration)
            else:
                kube.config.load_kube_config(
                    config_file=str(config.kubeconfig),
                    context=config.context,
                    client_configuration=configuration,
                    persist_config=False,
                )
        except (kube.ConfigException, OSError, TypeError) as exc:
            where = (
                "in-cluster config" if config.in_cluster else f"{config.kubeconfig} context {config.context}"
            )
            raise ConfigError(f"cluster {config.name}: cannot load {where}: {exc}") from None
        # One quick retry for a reset connection; an unreachable server must fail within the timeout.
        configuration.retries = urllib3.Retry(total=1, connect=1, read=0, redirect=0, status=0)
        api_client = kube.client.ApiClient(configuration)
        context = config.context or ("in-cluster" if config.in_cluster else _current_context(config))
        return cls(config.name, api_client, timeout=config.request_timeout, context=context, observe=observe)

    @property
    def server(self) -> str:
        return str(self.api_client.configuration.host)

    def close(self) -> None:
        self.api_client.close()

    def _request(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None = None,
        *,
        read_timeout: float | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Any:
        headers = {"Accept": "application/json"}
        read = read_timeout or max(self.timeout, 60.0)
        if body is not None:
            headers["Content-Type"] = content_type
        if self.observe is None:
            return self._call(method, path, query, headers, body, read)
        verb = (
            "watch"
            if method == "GET" and str((query or {}).get("watch", "")).lower() in ("1", "true")
            else method.lower()
        )
        began, result = time.monotonic(), "unreachable"
        try:
            resp = self._call(method, path, query, headers, body, read)
            result = str(getattr(resp, "status", "") or "200")
            return resp
        except ClusterError as exc:
            if exc.status:
                result = str(exc.status)
            raise
        finally:
            self.observe(verb, result, time.monotonic() - began)

    def _call(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None,
        headers: dict[str, str],
        body: Any,
        read: float,
    ) -> Any:
        try:
            return self.api_client.call_api(
                path,
                method,
                query_params=list((query or {}).items()),
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=self._timeouts(read),
            )
        except _kubernetes().ApiException as exc:
            raise self._api_error(exc, method, path) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            log.warning("cluster %s unreachable at %s: %s", self.name, self.server, exc)
            raise ClusterUnreachable(
                f"cluster {self.describe()} {_what_happened(exc, self.timeout, read)} at {self.server}",
                cluster=self.name,
            ) from exc

    def _timeouts(self, read: float) -> tuple[float, float]:
        """(connect, read) seconds for one request: the cluster's, or inside `within` what is left
        of its time — a fifth to connect, three fifths to read, so the one connect retry of
        `connect` included the request ends in time."""
        deadline = _DEADLINE.get()
        if deadline is None:
            return (self.timeout, read)
        left = deadline - time.monotonic()
        if left <= 0:
            raise ClusterUnreachable(
                f"cluster {self.describe()}: no time left for the request inside this replica's lease",
                cluster=self.name,
            )
        return (min(self.timeout, left / 5), min(read, left * 3 / 5))

    def describe(self) -> str:
        """`prod`, `prod (context admin@prod)` or `prod (in-cluster)`: how messages name it."""
        if not self.context:
            return self.name
        if self.context == "in-cluster":
            return f"{self.name} (in-cluster)"
        return f"{self.name} (context {self.context})"

    def _api_error(self, exc: Any, method: str, path: str) -> ClusterError:
        status = int(exc.status or 0)
        reason = _status_message(exc.body) or exc.reason or "error"
        # A GET of something that is not there is an answer (checks look for optional objects), not
        # a fault worth a warning on every check.
        level = logging.INFO if status == 404 and method == "GET" else logging.WARNING
        log.log(level, "cluster %s: %s %s → %s %s", self.name, method, path, status, reason)
        if status == 403:
            return ClusterForbidden(
                f"cluster {self.name}: the bot is not allowed to {method} {path} ({reason})",
                cluster=self.name,
                status=status,
            )
        if status == 410:
            return ContinueExpired(f"cluster {self.name}: {reason}", cluster=self.name, status=status)
        if status == 429 and path.endswith("/eviction"):
            cause = _status_cause(exc.body)
            return EvictionBlocked(
                f"cluster {self.name}: {reason}" + (f" ({cause})" if cause else ""),
                cluster=self.name,
                retry_after=_retry_after(exc.headers),
            )
        return ClusterError(
            f"cluster {self.name}: {method} {path} failed: {status} {reason}",
            cluster=self.name,
            status=status,
        )

    def get_json(self, path: str, query: Mapping[str, Any] | None = None) -> dict[str, Any]:
        # Single objects and discovery documents are small: a server silent for longer than the
        # cluster's timeout (at least 10 s) is not going to answer.
        resp = self._request("GET", path, query, read_timeout=max(self.timeout, 10.0))
        try:
            data = resp.data
        finally:
            resp.release_conn()
        loaded = json.loads(data)
        return loaded if isinstance(loaded, dict) else {}

    def get_raw(self, path: str, query: Mapping[str, Any] | None = None) -> bytes:
        resp = self._request("GET", path, query)
        try:
            return bytes(resp.data)
        finally:
            resp.release_conn()

    def _get_into(self, path: str, query: Mapping[str, Any], into: memoryview) -> int | bytes:
        """`get_raw`, but a body that fits is read straight into `into` (its length is returned).

        For the list helper's shared slots: reading a 2.7 MB page into a fresh bytes object and
        copying it into the slot cost a zeroed allocation and a copy per page, 0.15 s of CPU at
        150,000 pods. Only a plain body of known length is read so (through the standard library's
        response under urllib3's, whose own `readinto` copies); anything else comes back as bytes.
        """
        resp = self._request("GET", path, query)
        try:
            length = resp.headers.get("Content-Length")
            plain = resp.headers.get("Content-Encoding", "identity") == "identity"
            fp = getattr(resp, "_fp", None)
            if not (plain and length and length.isdigit() and int(length) <= len(into) and fp is not None):
                return bytes(resp.data)
            size, got = int(length), 0
            try:
                while got < size:
                    n = fp.readinto(into[got:size])
                    if not n:
                        break
                    got += n
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                raise ClusterUnreachable(
                    f"cluster {self.describe()} {_what_happened(exc, self.timeout, self.timeout)} at {self.server}",
                    cluster=self.name,
                ) from exc
            if got != size:
                raise ClusterUnreachable(
                    f"cluster {self.describe()} dropped the connection at {self.server}", cluster=self.name
                )
            return size
        finally:
            resp.release_conn()

    def send_json(
        self,
        method: str,
        path: str,
        body: Any,
        *,
        content_type: str = "application/json",
        query: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A write (POST, PUT, PATCH) with a JSON body; returns the server's JSON answer."""
        resp = self._request(method, path, query, body=body, content_type=content_type)
        try:
            data = resp.data
        finally:
            resp.release_conn()
        loaded = json.loads(data) if data else {}
        return loaded if isinstance(loaded, dict) else {}

    # ----- the bot's writes: what kubectl does for the same job ----------------------------------

    def cordon(
        self, node: str, *, dry_run: bool = False, annotations: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        """Mark a node unschedulable (`kubectl cordon`); returns the node. Idempotent.

        `annotations` are set in the same patch (who cordoned it and why: bot.core.jobs.trail), so
        the node is never cordoned without them. `dry_run` asks the server to validate the patch
        and answer as if applied (`dryRun=All`), persisting nothing."""
        body: dict[str, Any] = {"spec": {"unschedulable": True}}
        if annotations:
            body["metadata"] = {"annotations": dict(annotations)}
        return self.send_json(
            "PATCH", f"/api/v1/nodes/{node}", body, content_type=STRATEGIC_MERGE, query=_dry(dry_run)
        )

    def uncordon(
        self, node: str, *, dry_run: bool = False, remove_annotations: Sequence[str] = ()
    ) -> dict[str, Any]:
        """Make a node schedulable again (`kubectl uncordon`); returns the node. Idempotent.

        kubectl's two-way patch removes the field (false is its zero value), so this does too;
        `remove_annotations` go in the same patch (a null removes a key)."""
        body: dict[str, Any] = {"spec": {"unschedulable": None}}
        if remove_annotations:
            body["metadata"] = {"annotations": dict.fromkeys(remove_annotations)}
        return self.send_json(
            "PATCH", f"/api/v1/nodes/{node}", body, content_type=STRATEGIC_MERGE, query=_dry(dry_run)
        )

    def label_node(
        self, node: str, labels: Mapping[str, str | None], *, dry_run: bool = False
    ) -> dict[str, Any]:
        """Set (a value) or remove (None) labels of a node in one strategic merge patch, as
        `kubectl label node NODE key=value` / `key-` do; returns the node. Idempotent."""
        body: dict[str, Any] = {"metadata": {"labels": dict(labels)}}
        return self.send_json(
            "PATCH", f"/api/v1/nodes/{node}", body, content_type=STRATEGIC_MERGE, query=_dry(dry_run)
        )

    def node_event(
        self, node: str, *, uid: str, name: str, reason: str, message: str, action: str, at: datetime
    ) -> bool:
        """Record a core/v1 Event about a Node, where `kubectl describe node` finds it: namespace
        `default` (where the kubelet records node events) and the Node's UID in involvedObject.
        True when recorded; False when an Event of that `name` exists already (the same one,
        recorded before a crash)."""
        stamp = at.astimezone(UTC)
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": NODE_EVENTS_NAMESPACE},
            "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid},
            "reason": reason,
            "message": message,
            "type": "Normal",
            "action": action,
            "source": {"component": EVENT_COMPONENT},
            "reportingComponent": EVENT_COMPONENT,
            "reportingInstance": socket.gethostname(),
            "firstTimestamp": stamp.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "lastTimestamp": stamp.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "count": 1,
        }
        if not uid:
            del body["involvedObject"]["uid"]
        try:
            self.send_json("POST", f"/api/v1/namespaces/{NODE_EVENTS_NAMESPACE}/events", body)
        except ClusterError as exc:
            if exc.status == 409:
                return False
            raise
        return True

    def evict(self, namespace: str, pod: str, *, uid: str = "", dry_run: bool = False) -> bool:
        """Evict a pod through the eviction API, which enforces its PodDisruptionBudgets.

        True when the eviction was accepted, False when the pod was already gone (404) or, with
        `uid`, is no longer that pod (409: a StatefulSet pod recreated under the same name — the
        UID precondition keeps the eviction from hitting the new one). Raises EvictionBlocked on
        429 (a budget allows no disruption now: retry later); any other refusal (500 when several
        budgets select the pod, 403) is a ClusterError. `dry_run` is the server's `dryRun=All`:
        the budgets are checked, nothing is evicted.
        """
        body: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod, "namespace": namespace},
        }
        if uid:
            body["deleteOptions"] = {"preconditions": {"uid": uid}}
        try:
            self.send_json(
                "POST", f"/api/v1/namespaces/{namespace}/pods/{pod}/eviction", body, query=_dry(dry_run)
            )
        except ClusterError as exc:
            if exc.status == 404 or (uid and exc.status == 409):
                return False
            raise
        return True

    def delete_pod(
        self, namespace: str, name: str, *, uid: str, dry_run: bool = False, grace_seconds: int | None = None
    ) -> bool:
        """Delete one pod, bypassing its PodDisruptionBudgets (only when people chose it).

        The UID precondition makes the delete hit exactly the pod that was decided on, never a
        pod recreated under the same name. `grace_seconds` 0 is `kubectl delete --grace-period=0
        --force`: the object goes at once, without the kubelet's confirmation (a pod stuck
        Terminating on a dead node); None keeps the pod's own grace period. True when the delete
        was accepted; False when the pod was already gone (404) or is another pod now (409).
        """
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "preconditions": {"uid": uid},
        }
        if grace_seconds is not None:
            body["gracePeriodSeconds"] = grace_seconds
        try:
            self.send_json("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", body, query=_dry(dry_run))
        except ClusterError as exc:
            if exc.status in (404, 409):
                return False
            raise
        return True

    def node_pods(self, node: str) -> list[dict[str, Any]]:
        """Every pod bound to `node` (raw dicts: a node holds about 110), as `kubectl drain` lists them."""
        pods: list[dict[str, Any]] = []
        for page in self.list_pages("/api/v1/pods", {"fieldSelector": f"spec.nodeName={node}"}):
            pods.extend(page.items)
        return pods

    def rollout_restart(self, namespace: str, name: str, *, at: datetime) -> dict[str, Any]:
        """`kubectl rollout restart deployment/NAME`: stamp the pod template so every pod is replaced.

        `at` is the restart time (RFC 3339 in the annotation, as kubectl writes it). A paused
        Deployment is refused, as kubectl refuses it: the restart would not start until resumed.
        Returns the patched Deployment.
        """
        return self.restart_workload("deployment", namespace, name, at=at)

    def restart_workload(
        self, kind: str, namespace: str, name: str, *, at: datetime, dry_run: bool = False
    ) -> dict[str, Any]:
        """`kubectl rollout restart KIND/NAME` for a deployment, daemonset or statefulset.

        As `rollout_restart`; `dry_run` is the server's `dryRun=All` (validated, not persisted).
        Returns the patched (or, dry, the would-be) workload.
        """
        resource = _WORKLOAD_RESOURCES.get(kind.lower())
        if resource is None:
            raise ValueError(f"rollout restart: unknown workload kind {kind!r}")
        path = f"/apis/apps/v1/namespaces/{namespace}/{resource}/{name}"
        current = self.get_json(path)
        if resource == "deployments" and (current.get("spec") or {}).get("paused"):
            raise RolloutRefused(
                f"cluster {self.name}: deployment {namespace}/{name} is paused; resume it before restarting",
                cluster=self.name,
            )
        stamp = at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        patch = {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: stamp}}}}}
        return self.send_json("PATCH", path, patch, content_type=STRATEGIC_MERGE, query=_dry(dry_run))

    def set_image(
        self, kind: str, namespace: str, name: str, *, container: str, image: str, dry_run: bool = False
    ) -> dict[str, Any]:
        """`kubectl set image KIND/NAME CONTAINER=IMAGE` for a deployment, daemonset or statefulset:
        a strategic merge patch of the one container (containers merge by name). Returns the
        patched (or, dry, the would-be) workload."""
        resource = _WORKLOAD_RESOURCES.get(kind.lower())
        if resource is None:
            raise ValueError(f"set image: unknown workload kind {kind!r}")
        path = f"/apis/apps/v1/namespaces/{namespace}/{resource}/{name}"
        patch = {"spec": {"template": {"spec": {"containers": [{"name": container, "image": image}]}}}}
        return self.send_json("PATCH", path, patch, content_type=STRATEGIC_MERGE, query=_dry(dry_run))

    # ----- reads ---------------------------------------------------------------------------------

    @overload
    def watch(
        self,
        path: str,
        query: Mapping[str, Any] | None = None,
        *,
        resource_version: str,
        timeout_seconds: int = WATCH_SECONDS,
        bookmarks: bool = True,
    ) -> Iterator[WatchEvent[Raw]]: ...

    @overload
    def watch(
        self,
        path: str,
        query: Mapping[str, Any] | None = None,
        *,
        resource_version: str,
        timeout_seconds: int = WATCH_SECONDS,
        bookmarks: bool = True,
        item_type: type[T],
    ) -> Iterator[WatchEvent[T]]: ...

    def watch(
        self,
        path: str,
        query: Mapping[str, Any] | None = None,
        *,
        resource_version: str,
        timeout_seconds: int = WATCH_SECONDS,
        bookmarks: bool = True,
        item_type: Any = Raw,
    ) -> Iterator[WatchEvent[Any]]:
        """One watch stream from `resource_version`, until the server ends it; objects as `item_type`.

        The client's own `Watch` is not used: with `deserialize=False` it crashes on ERROR events and
        does not track the resourceVersion. An ERROR event with code 410 raises WatchExpired (list
        again); any other ERROR event raises ClusterError.
        """
        params = dict(query or {})
        params.update(watch="true", resourceVersion=resource_version, timeoutSeconds=timeout_seconds)
        if bookmarks:
            params["allowWatchBookmarks"] = "true"
        decode = _event_decoder(item_type).decode
        # The read timeout outlasts the server's own end of the stream, so a quiet watch is not cut.
        resp = self._request("GET", path, params, read_timeout=timeout_seconds + max(self.timeout, 10.0))
        try:
            for line in _lines(resp):
                # One pass in the common case: the event and its object, as the caller's type. An
                # ERROR carries a Status instead, which the caller's type may not fit (or may fit
                # by accident): either way the line is read again, as an ERROR.
                misfit: Exception | None = None
                event: _Event[Any] | None = None
                try:
                    event = decode(line)
                except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                    misfit = exc
                if event is None or event.type == "ERROR":
                    try:
                        error = _ERROR_EVENT.decode(line)
                    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                        raise self._shape_error(path, exc) from exc
                    if error.type != "ERROR":
                        raise self._shape_error(path, misfit or ValueError("no object")) from misfit
                    code = int(error.object.code or 0)
                    message = str(error.object.message or error.object.reason or "watch error")
                    if code == 410:
                        raise WatchExpired(f"cluster {self.name}: {message}", cluster=self.name, status=410)
                    raise ClusterError(
                        f"cluster {self.name}: watch {path} failed: {code} {message}",
                        cluster=self.name,
                        status=code or None,
                    )
                rv = _version_of(event.object)
                if rv is None:
                    rv = _VERSION_EVENT.decode(line).object.metadata.resource_version
                yield WatchEvent(type=event.type, object=event.object, resource_version=rv)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            # A stream cut mid-way (proxy, server restart) ends this watch; the caller resumes it.
            log.info("cluster %s: watch %s ended: %s", self.name, path, exc)
        finally:
            resp.release_conn()

    @overload
    def list_watch(
        self,
        path: str,
        query: Mapping[str, Any] | None = None,
        *,
        resource_version: str = "",
        timeout_seconds: int = WATCH_SECONDS,
        stop: threading.Event | None = None,
        reduce: Callable[[Any], Any] | None = None,
    ) -> Iterator[WatchEvent[Raw]]: ...

    @overload
    def list_watch(
        self,
        path: str,
        query: Mapping[str, Any] | None = None,
        *,
        resource_version: str = "",
        timeout_seconds: int = WATCH_SECONDS,
        item_type: type[T],
        stop: threading.Event | None = None,
        reduce: Callable[[Any], Any] | None = None,
    ) -> Iterator[WatchEvent[T]]: ...

    def list_watch(
        self,
        path: str,
        query: Mapping[str, Any] | None = None,
        *,
        resource_version: str = "",
        timeout_seconds: int = WATCH_SECONDS,
        item_type: Any = Raw,
        stop: threading.Event | None = None,
        reduce: Callable[[Any], Any] | None = None,
    ) -> Iterator[WatchEvent[Any]]:
        """List, then watch for ever: the loop a live view of the cluster needs. Stop by closing it,
        or by setting `stop`: no new list or watch request is made once it is set (a stream that
        ended quietly is not opened again on a server that may be going away).

        Without `resource_version` it starts with a SYNC event (the full list); with one (say, a
        snapshot's) it watches from there. Bookmarks keep the version current, so a stream that ends
        resumes where it stopped without a list; a 410 (the version is older than the server's
        history) is answered by a new SYNC and a watch from that list's version.

        `reduce`, when given, maps each listed item and each ADDED/MODIFIED/DELETED object to what
        the caller keeps, page by page as they are decoded: a 150,000-pod list is then never held
        whole as `item_type` (each page is released once reduced).
        """
        rv = resource_version
        while stop is None or not stop.is_set():
            if not rv:
                items: list[Any] = []
                for page in self.list_pages(path, query, item_type=item_type):
                    items.extend(page.items if reduce is None else map(reduce, page.items))
                    rv = page.resource_version
                    del page
                yield WatchEvent(type="SYNC", object={"items": items}, resource_version=rv)
                del items
            try:
                for event in self.watch(
                    path, query, resource_version=rv, timeout_seconds=timeout_seconds, item_type=item_type
                ):
                    if event.resource_version:
                        rv = event.resource_version
                    if reduce is not None and event.type in ("ADDED", "MODIFIED", "DELETED"):
                        event = WatchEvent(event.type, reduce(event.object), event.resource_version)
                    yield event
            except (WatchExpired, ContinueExpired) as exc:
                # 410 comes as an ERROR event (WatchExpired) or, from some servers, as the status of
                # the watch request itself (ContinueExpired): either way the version is gone.
                log.info("%s; listing %s again", exc, path)
                rv = ""

    @overload
    def list_pages(
        self, path: str, query: Mapping[str, Any] | None = None, *, limit: int = PAGE_SIZE
    ) -> Iterator[Page[Raw]]: ...

    @overload
    def list_pages(
        self,
        path: str,
        query: Mapping[str, Any] | None = None,
        *,
        limit: int = PAGE_SIZE,
        item_type: type[T],
    ) -> Iterator[Page[T]]: ...

    def list_pages(
        self,
        path: str,
        query: Mapping[str, Any] | None = None,
        *,
        limit: int = PAGE_SIZE,
        item_type: Any = Raw,
    ) -> Iterator[Page[Any]]:
        """Yield a consistent list page by page, items as `item_type`; raises ContinueExpired if the
        token runs out.

        Pages are fetched back to back, up to `PREFETCH` ahead of the caller: the server's work and
        the network overlap with decoding and projection, which matters at 300 pages of pods. The
        first page is fetched here; if the list has more, a forked child process fetches the rest
        (`_Forked`, on Linux; a helper thread, `_Prefetch`, elsewhere). The continue token is read
        from the head of each raw page (list metadata comes before the items), so the next fetch
        waits for no decoding.
        """
        if self._memo is None or (self._memo_paths is not None and path not in self._memo_paths):
            return self._list_from(path, query, limit, item_type, "")
        key = (path, json.dumps(sorted((query or {}).items()), default=str), limit)
        kept = self._memo.get(key)
        if kept is not None:
            return self._from_memo(path, kept, item_type)
        return self._list_keeping(path, query, limit, item_type, key, self._memo)

    def _from_memo(self, path: str, kept: list[bytes], item_type: Any) -> Iterator[Page[Any]]:
        decoder = _page_decoder(item_type)
        for raw in kept:
            try:
                body = decoder.decode(raw)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                raise self._shape_error(path, exc) from exc
            yield Page(
                items=body.items or [],
                resource_version=body.metadata.resource_version,
                continue_token=body.metadata.continue_,
                remaining=body.metadata.remaining_item_count,
            )

    def _list_keeping(
        self,
        path: str,
        query: Mapping[str, Any] | None,
        limit: int,
        item_type: Any,
        key: tuple[str, str, int],
        memo: dict[tuple[str, str, int], list[bytes]],
    ) -> Iterator[Page[Any]]:
        """`_list_from`, keeping the raw pages in `memo` once the whole list was read and fits."""
        keep: list[bytes] = []
        yield from self._list_from(path, query, limit, item_type, "", keep=keep)
        size = sum(len(raw) for raw in keep)
        if memo is self._memo and size <= self._memo_left:
            memo[key] = keep
            self._memo_left -= size

    def _list_from(
        self,
        path: str,
        query: Mapping[str, Any] | None,
        limit: int,
        item_type: Any,
        token: str,
        *,
        keep: list[bytes] | None = None,
    ) -> Iterator[Page[Any]]:
        """`list_pages` from `token` on (the start of the list if empty); `keep` receives a copy of
        each raw page yielded (`remembering`)."""
        decoder = _page_decoder(item_type)
        guess = token
        ahead = _Forked if FORK_FETCH else _Prefetch
        while True:
            with ahead(self, path, query, limit, token) as fetched:
                for raw, guess in fetched:
                    try:
                        body = decoder.decode(raw)
                    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                        raise self._shape_error(path, exc) from exc
                    if keep is not None:
                        keep.append(bytes(raw))
                    del raw
                    token = body.metadata.continue_
                    yield Page(
                        items=body.items or [],
                        resource_version=body.metadata.resource_version,
                        continue_token=token,
                        remaining=body.metadata.remaining_item_count,
                    )
                    if token != guess:
                        # The head scan disagreed with the decoded body: drop what was fetched
                        # ahead on the guess and follow the body.
                        break
            if not token or token == guess:
                return

    def map_pages(
        self,
        path: str,
        query: Mapping[str, Any] | None = None,
        *,
        limit: int = PAGE_SIZE,
        item_type: type[T],
        transform: Callable[[list[T]], bytes],
    ) -> MappedList:
        """List `path` as `list_pages` does, `transform` turning each page's items into bytes, all of
        it in a helper process that starts now: the caller is free until it iterates the result.

        For the lists too large to decode in the caller's process (150,000 pods: 800 MB of JSON):
        decoding a page holds the interpreter lock for milliseconds at a time, which is what makes
        a Slack ack wait, and the caller has other lists to read meanwhile. The helper is a fork
        (`transform` and what it closes over come with it, nothing is pickled) that runs
        `list_pages` (which forks a fetcher of its own, so the server, the decoding and the caller
        each have a process) and hands back each page's bytes through an in-memory file. A
        ClusterError of the list is raised where its page would have been; if the helper cannot be
        started, or stops for any other reason, the caller's process lists the rest itself.
        Close the result (or leave its `with` block) to stop the helper if it is not iterated to the
        end.
        """
        return MappedList(self, path, query, limit, item_type, transform)

    def _shape_error(self, path: str, exc: Exception) -> ClusterError:
        """A body that is not JSON, or a field of an unexpected type: the server is not what we
        expect (a proxy's error page, a newer API); stop and say where, rather than guess."""
        log.warning("cluster %s: GET %s: unexpected body: %s", self.name, path, exc)
        return ClusterError(
            f"cluster {self.name}: GET {path} returned an unexpected body ({exc})", cluster=self.name
        )


#: Where the list metadata (and its continue token) is looked for, ahead of the items.
HEAD_BYTES = 65536
_CONTINUE = re.compile(rb'"continue"\s*:\s*"((?:[^"\\]|\\.)*)"')


#: Pages fetched ahead of the caller: enough to keep the server busy, few enough to bound memory.
PREFETCH = 2


class _Prefetch:
    """A helper thread that fetches a list's raw pages back to back, following the head tokens.

    Iterating yields `(raw page, continue token from its head)`; an error of the fetch is raised
    where the page would have been. Leaving the `with` block stops the thread and waits for it.
    """

    _END = object()

    def __init__(
        self, cluster: Cluster, path: str, query: Mapping[str, Any] | None, limit: int, token: str
    ) -> None:
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=PREFETCH)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run,
            args=(cluster, path, query, limit, token),
            name=f"kube-list-{cluster.name}",
            daemon=True,
        )

    def __enter__(self) -> Iterator[tuple[bytes, str]]:
        self._thread.start()
        return self._pages()

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        while self._thread.is_alive():
            # Unblock a producer waiting for room, then let it see the stop.
            with contextlib.suppress(queue.Empty):
                self._queue.get_nowait()
            self._thread.join(timeout=0.05)

    def _pages(self) -> Iterator[tuple[bytes, str]]:
        while True:
            item = self._queue.get()
            if item is self._END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def _put(self, item: Any) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(
        self, cluster: Cluster, path: str, query: Mapping[str, Any] | None, limit: int, token: str
    ) -> None:
        while not self._stop.is_set():
            try:
                raw = cluster.get_raw(path, _page_query(query, limit, token))
            except BaseException as exc:  # handed to the caller, raised where the page would be
                self._put(exc)
                return
            token = _continue_from_head(raw) or ""
            if not self._put((raw, token)) or not token:
                break
        self._put(self._END)


#: Lists longer than one page are fetched by a forked child process where fork is safe to use.
FORK_FETCH = sys.platform == "linux"
#: Pids of the fetching children alive now (see `fetching_ahead`).
_CHILDREN: set[int] = set()
#: A child's frame: kind (page in a shared slot, page in the pipe, error, failure, done) and
#: payload length.
_FRAME = struct.Struct("!cQ")
_SLOT, _PAGE, _ERROR, _FAILED, _DONE = b"S", b"P", b"E", b"X", b"D"
#: A slot frame's payload: which slot, how many bytes.
_SLOT_REF = struct.Struct("!IQ")
#: Pages the child may hold in shared memory at once: `PREFETCH` not yet taken, the one the parent
#: is decoding, and the one the child is filling. Pages larger than a slot go through the pipe.
SLOTS = PREFETCH + 2
SLOT_BYTES = 64 << 20
#: The errors a list request raises, rebuilt in the parent from a child's error frame by name.
_LIST_ERRORS: dict[str, type[ClusterError]] = {
    cls.__name__: cls for cls in (ClusterError, ClusterUnreachable, ClusterForbidden, ContinueExpired)
}


#: How much less CPU priority the list helper process takes than the bot (see `os.nice`).
CHILD_NICENESS = 10


def fetching_ahead() -> int:
    """How many helpers (threads or child processes) are fetching list pages ahead right now."""
    threads = sum(1 for t in threading.enumerate() if t.name.startswith("kube-list-"))
    return threads + len(_CHILDREN)


class _Forked:
    """The first page here, then a forked child process that fetches the rest back to back.

    Why a process rather than `_Prefetch`'s thread: a thread reading the socket needs the
    interpreter lock back after every read (a few hundred KB each), and the decoder holds it for
    milliseconds at a time (msgspec decodes a page in one C call), so the reader waits behind each
    page and the server stalls on a full socket. Measured on the sim's `large` scenario: 806 MB of
    pod pages took 0.8 s to fetch alone and 4 to 7 s beside a decoding thread, so the thread bought
    almost nothing over fetching and decoding in turn. A child has an interpreter of its own: it
    fetches with a client of its own (a fresh connection pool over the same configuration: TLS,
    token, timeouts) and copies each page into a slot of memory shared with the parent (an
    anonymous shared mapping made before the fork; only the pages of it touched are resident),
    which the parent decodes in place: no copy through a pipe, which cost the parent a copy of every
    byte (800 MB at 150,000 pods).

    Frames go through a pipe, `_FRAME` headers and payloads: a page in a slot; a page in the pipe
    (larger than a slot); a ClusterError of the fetch (its class,
    message and status, raised again here where the page would have been); a failure of anything
    else (the parent fetches the rest itself from that page on, so nothing is lost); the end. The
    parent returns one byte per page taken, and the child stays at most `PREFETCH` pages ahead, as
    the thread does. Leaving the `with` block kills the child and reaps it.
    """

    def __init__(
        self, cluster: Cluster, path: str, query: Mapping[str, Any] | None, limit: int, token: str
    ) -> None:
        self._cluster, self._path, self._query, self._limit, self._token = cluster, path, query, limit, token
        self._pid = 0
        self._pages_fd = self._credit_fd = -1
        # Pages that come through the pipe are read into one buffer, grown to the largest page:
        # the caller decodes a page before it asks for the next, and msgspec copies what it keeps,
        # so the buffer (or slot) is free by then. A fresh buffer per page would cost a zeroed
        # allocation and its page faults each time.
        self._buffer = bytearray()
        self._shared: mmap.mmap | None = None

    def __enter__(self) -> Iterator[tuple[bytes | memoryview, str]]:
        return self._pages()

    def __exit__(self, *_exc: object) -> None:
        for fd in (self._pages_fd, self._credit_fd):
            if fd >= 0:
                os.close(fd)
        self._pages_fd = self._credit_fd = -1
        # Not closed: the caller may still hold a view of a slot; the mapping goes with the last one.
        self._shared = None
        if self._pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)
            os.waitpid(self._pid, 0)
            _CHILDREN.discard(self._pid)
            self._pid = 0

    def _fetch(self, token: str) -> tuple[bytes, str]:
        raw = self._cluster.get_raw(self._path, _page_query(self._query, self._limit, token))
        return raw, _continue_from_head(raw) or ""

    def _pages(self) -> Iterator[tuple[bytes | memoryview, str]]:
        raw, token = self._fetch(self._token)
        if token:
            self._start(token)  # before the caller decodes this page, so the two overlap
        yield raw, token
        del raw
        while token and self._pid:
            kind, payload = self._receive()
            if kind in (_SLOT, _PAGE):
                with contextlib.suppress(OSError):  # a child that has ended needs no credit
                    os.write(self._credit_fd, b".")
                token = _continue_from_head(payload) or ""
                yield payload, token
                del payload
                continue
            if kind == _ERROR:
                raise _rebuild_error(payload, self._cluster.name)
            # The child failed outside the API (or died): fetch the rest here, from this token.
            log.warning(
                "cluster %s: the list helper for %s stopped; listing on", self._cluster.name, self._path
            )
            self.__exit__()
        while token:  # without a helper (none could be started, or it stopped): fetch them here
            raw, token = self._fetch(token)
            yield raw, token
            del raw

    def _start(self, token: str) -> None:
        try:
            self._shared = shared = mmap.mmap(-1, SLOTS * SLOT_BYTES)  # MAP_SHARED | MAP_ANONYMOUS
        except OSError as exc:  # a strict overcommit policy: the caller's process lists on
            log.warning("cluster %s: no list helper for %s: %s", self._cluster.name, self._path, exc)
            return
        pages_r, pages_w = os.pipe()
        credit_r, credit_w = os.pipe()
        with contextlib.suppress(OSError, AttributeError):
            # Fewer, larger reads of each page (Linux caps unprivileged pipes at 1 MB by default).
            fcntl.fcntl(pages_w, fcntl.F_SETPIPE_SZ, 1 << 20)
        parent = os.getpid()
        try:
            pid = os.fork()
        except OSError as exc:  # no process to spare (EAGAIN, ENOMEM): the caller's process lists on
            log.warning("cluster %s: no list helper for %s: %s", self._cluster.name, self._path, exc)
            for fd in (pages_r, pages_w, credit_r, credit_w):
                os.close(fd)
            self._shared = None
            return
        if pid == 0:  # pragma: no cover - the child; coverage does not follow a fork
            code = 1
            try:
                os.close(pages_r)
                os.close(credit_w)
                _die_with_parent(parent)
                # Below the bot's own threads: on a busy machine an ack must not wait for a page.
                with contextlib.suppress(OSError):
                    os.nice(CHILD_NICENESS)
                code = _child_fetch(
                    self._cluster, self._path, self._query, self._limit, token, pages_w, credit_r, shared
                )
            finally:
                os._exit(code)
        os.close(pages_w)
        os.close(credit_r)
        self._pid, self._pages_fd, self._credit_fd = pid, pages_r, credit_w
        _CHILDREN.add(pid)

    def _receive(self) -> tuple[bytes, memoryview]:
        """The next frame's kind and payload (a view of the buffer, valid until the next call);
        kind `_FAILED` if the child is gone mid-way."""
        head = bytearray(_FRAME.size)
        if not _read_exactly(self._pages_fd, memoryview(head)):
            return _FAILED, memoryview(b"")
        kind, size = _FRAME.unpack(head)
        if kind == _SLOT and self._shared is not None:
            ref = bytearray(size)
            if not _read_exactly(self._pages_fd, memoryview(ref)):
                return _FAILED, memoryview(b"")
            slot, length = _SLOT_REF.unpack(ref)
            return kind, memoryview(self._shared)[slot * SLOT_BYTES : slot * SLOT_BYTES + length]
        if size > len(self._buffer):
            self._buffer = bytearray(size)
        payload = memoryview(self._buffer)[:size]
        if not _read_exactly(self._pages_fd, payload):
            return _FAILED, memoryview(b"")
        return kind, payload


#: prctl(2)'s option that signals a child when the thread that forked it ends.
_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> None:  # pragma: no cover - runs in the forked child
    """A list helper ends with the bot: killed with it (SIGKILL leaves no time to stop helpers),
    it would go on holding a request to the API server and the bot's stdout and stderr."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the bot died before the call above: nothing would signal it
        os._exit(1)


def _read_exactly(fd: int, into: memoryview) -> bool:
    """Fill `into` from `fd`; False if the pipe ends first."""
    got, size = 0, len(into)
    while got < size:
        n = os.readv(fd, [into[got:]])
        if n == 0:
            return False
        got += n
    return True


def _rebuild_error(payload: memoryview, cluster: str) -> ClusterError:
    fields = json.loads(bytes(payload))
    cls = _LIST_ERRORS.get(str(fields.get("class")), ClusterError)
    return cls(str(fields.get("message", "")), cluster=cluster, status=fields.get("status"))


def _child_fetch(
    cluster: Cluster,
    path: str,
    query: Mapping[str, Any] | None,
    limit: int,
    token: str,
    out: int,
    credits: int,
    shared: mmap.mmap,
) -> int:  # pragma: no cover - runs in the forked child
    """The child's loop: fetch from `token` to the end, each page framed into `out`."""
    gc.disable()  # short-lived, and the parent's heap stays shared instead of copied on write
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)
    own = Cluster(
        cluster.name,
        _kubernetes().client.ApiClient(cluster.api_client.configuration),
        timeout=cluster.timeout,
    )

    def send(kind: bytes, payload: bytes) -> None:
        view = memoryview(_FRAME.pack(kind, len(payload)) + payload) if len(payload) < 65536 else None
        if view is None:
            _write_all(out, memoryview(_FRAME.pack(kind, len(payload))))
            view = memoryview(payload)
        _write_all(out, view)

    ahead = sent = 0
    try:
        while True:
            while ahead >= PREFETCH:
                taken = os.read(credits, 4096)
                if not taken:
                    return 0  # the parent has gone
                ahead -= len(taken)
            slot = sent % SLOTS
            try:
                raw = own._get_into(
                    path,
                    _page_query(query, limit, token),
                    memoryview(shared)[slot * SLOT_BYTES :][:SLOT_BYTES],
                )
            except ClusterError as exc:
                error = {"class": type(exc).__name__, "message": exc.user_message, "status": exc.status}
                send(_ERROR, json.dumps(error).encode())
                return 0
            if isinstance(raw, int):  # read straight into the slot
                token = _continue_from_head(shared[slot * SLOT_BYTES : slot * SLOT_BYTES + HEAD_BYTES]) or ""
                send(_SLOT, _SLOT_REF.pack(slot, raw))
            else:
                token = _continue_from_head(raw) or ""
                if len(raw) <= SLOT_BYTES:
                    shared[slot * SLOT_BYTES : slot * SLOT_BYTES + len(raw)] = raw
                    send(_SLOT, _SLOT_REF.pack(slot, len(raw)))
                else:
                    send(_PAGE, raw)
            del raw
            ahead += 1
            sent += 1
            if not token:
                send(_DONE, b"")
                return 0
    except BrokenPipeError:
        return 0  # the parent stopped reading: it has what it wanted
    except BaseException:
        with contextlib.suppress(OSError):
            send(_FAILED, token.encode())
        return 1


def _write_all(fd: int, view: memoryview) -> None:  # pragma: no cover - runs in the forked child
    while view:
        view = view[os.write(fd, view) :]


#: A mapping helper's frame for one page: its bytes are the next `length` of the in-memory file.
_MAPPED = b"M"
#: How much less CPU priority the mapping helper takes than the bot. The bot's process does no
#: decoding while it waits, so its threads answer Slack without waiting for the interpreter lock;
#: but on a machine busy with other work they still wait for a CPU behind the helpers (an ack took
#: 0.17 s with the helpers not niced, at most 0.034 s in quieter runs). A little below the bot, not
#: as far as the fetcher of a list the bot decodes itself: a helper niced to 10 lost much of its
#: share of a busy machine. Its own fetcher is not niced below it (see `_child_map`).
MAPPER_NICENESS = 5


class MappedList:
    """`Cluster.map_pages`' result: iterate it for `MappedPage`s; close it to stop its helper.

    The helper is forked at construction and works ahead on its own: it writes each page's bytes to
    an in-memory file (`memfd_create`), which has no back-pressure, so a caller busy elsewhere never
    stalls it, and a small frame per page to a pipe (`_FRAME`: a page's length, count, version
    and continue token as JSON; an error; a failure; the end). Where no helper can be had (not
    Linux, no process or memory to spare) the pages are listed and transformed in the caller's
    process when iterated.
    """

    def __init__(
        self,
        cluster: Cluster,
        path: str,
        query: Mapping[str, Any] | None,
        limit: int,
        item_type: Any,
        transform: Callable[[list[Any]], bytes],
    ) -> None:
        self._cluster, self._path, self._query, self._limit = cluster, path, query, limit
        self._item_type, self._transform = item_type, transform
        self._pid = 0
        self._frames_fd = self._data_fd = -1
        self._offset = 0
        self._finished = False  # the helper sent the last page and is ending by itself
        if FORK_FETCH:
            self._start()

    def __enter__(self) -> MappedList:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[MappedPage]:
        return self._pages()

    def close(self) -> None:
        for fd in (self._frames_fd, self._data_fd):
            if fd >= 0:
                os.close(fd)
        self._frames_fd = self._data_fd = -1
        if self._pid:
            if not self._finished:
                # SIGTERM, not SIGKILL: the helper's own fetcher is stopped and reaped on its way out.
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self._pid, signal.SIGTERM)
            os.waitpid(self._pid, 0)
            _CHILDREN.discard(self._pid)
            self._pid = 0

    def _start(self) -> None:
        try:
            data_fd = os.memfd_create("kube-map", os.MFD_CLOEXEC)
        except (OSError, AttributeError) as exc:
            log.warning("cluster %s: no list helper for %s: %s", self._cluster.name, self._path, exc)
            return
        frames_r, frames_w = os.pipe()
        parent = os.getpid()
        try:
            pid = os.fork()
        except OSError as exc:  # no process to spare: the caller's process lists when iterated
            log.warning("cluster %s: no list helper for %s: %s", self._cluster.name, self._path, exc)
            for fd in (data_fd, frames_r, frames_w):
                os.close(fd)
            return
        if pid == 0:  # pragma: no cover - the child; coverage does not follow a fork
            code = 1
            try:
                os.close(frames_r)
                _die_with_parent(parent)
                with contextlib.suppress(OSError):
                    os.nice(MAPPER_NICENESS)
                code = _child_map(self, frames_w, data_fd)
            finally:
                os._exit(code)
        os.close(frames_w)
        self._pid, self._frames_fd, self._data_fd = pid, frames_r, data_fd
        _CHILDREN.add(pid)

    def _pages(self) -> Iterator[MappedPage]:
        token, started = "", False
        try:
            while self._pid:
                kind, payload = self._receive()
                if kind == _MAPPED:
                    meta = json.loads(payload)
                    length = int(meta["length"])
                    data = os.pread(self._data_fd, length, self._offset) if length else b""
                    if len(data) != length:
                        raise OSError(f"the list helper's file ended at {self._offset + len(data)}")
                    self._offset += length
                    token, started = str(meta["token"]), True
                    self._finished = not token
                    remaining = meta.get("remaining")
                    yield MappedPage(
                        data,
                        int(meta["count"]),
                        str(meta["version"]),
                        token,
                        None if remaining is None else int(remaining),
                    )
                    if not token:
                        return
                    continue
                if kind == _ERROR:
                    self._finished = True  # its last frame: the helper is on its way out by itself
                    raise _rebuild_error(memoryview(payload), self._cluster.name)
                # The helper failed outside the API (or died): the rest is listed here.
                log.warning(
                    "cluster %s: the list helper for %s stopped; listing on", self._cluster.name, self._path
                )
                break
        finally:
            self.close()
        if started and not token:
            return
        for page in self._cluster._list_from(self._path, self._query, self._limit, self._item_type, token):
            yield MappedPage(
                self._transform(page.items),
                len(page.items),
                page.resource_version,
                page.continue_token,
                page.remaining,
            )

    def _receive(self) -> tuple[bytes, bytes]:
        head = bytearray(_FRAME.size)
        if not _read_exactly(self._frames_fd, memoryview(head)):
            return _FAILED, b""
        kind, size = _FRAME.unpack(head)
        payload = bytearray(size)
        if not _read_exactly(self._frames_fd, memoryview(payload)):
            return _FAILED, b""
        return kind, bytes(payload)


def _ignore_stop() -> None:  # pragma: no cover - runs in the fork
    """The helper's last frame goes out next: a SIGTERM from here on must not raise SystemExit in
    whatever runs then — the finalizers of its HTTP pool as it returns, say, which would print a
    traceback on the command's stderr — the helper is ending by itself anyway."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _child_map(mapped: MappedList, out: int, data: int) -> int:  # pragma: no cover - runs in the fork
    """The mapping helper: list, transform each page, its bytes to `data` and a frame to `out`."""
    gc.disable()  # short-lived: what it builds is dropped page by page, and the parent's heap stays shared
    signal.signal(signal.SIGINT, signal.SIG_DFL)

    def stop(_signum: int, _frame: Any) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    global CHILD_NICENESS  # this process's copy of the module: its fetcher is not below it
    CHILD_NICENESS = 0
    cluster = mapped._cluster
    own = Cluster(
        cluster.name,
        _kubernetes().client.ApiClient(cluster.api_client.configuration),
        timeout=cluster.timeout,
    )

    def send(kind: bytes, payload: bytes) -> None:
        _write_all(out, memoryview(_FRAME.pack(kind, len(payload)) + payload))

    try:
        listed = own.list_pages(mapped._path, mapped._query, limit=mapped._limit, item_type=mapped._item_type)
        # Closed on the way out (a SIGTERM too), which stops and reaps the fetcher it forked.
        with contextlib.closing(cast(Generator[Page[Any], None, None], listed)) as pages:
            for page in pages:
                body = mapped._transform(page.items)
                _write_all(data, memoryview(body))
                meta = {
                    "length": len(body),
                    "count": len(page.items),
                    "version": page.resource_version,
                    "token": page.continue_token,
                    "remaining": page.remaining,
                }
                last = not page.continue_token
                del page, body
                if last:
                    _ignore_stop()
                send(_MAPPED, json.dumps(meta).encode())
        return 0
    except ClusterError as exc:
        error = {"class": type(exc).__name__, "message": exc.user_message, "status": exc.status}
        _ignore_stop()
        with contextlib.suppress(OSError):
            send(_ERROR, json.dumps(error).encode())
        return 0
    except BrokenPipeError:
        return 0  # the caller stopped reading: it has what it wanted
    except SystemExit:
        return 0
    except BaseException:
        log.exception("cluster %s: the list helper for %s failed", cluster.name, mapped._path)
        with contextlib.suppress(OSError):
            send(_FAILED, b"")
        return 1


#: `restart_workload`'s kinds (as plans and kubectl write them) → their apps/v1 resource.
_WORKLOAD_RESOURCES = {
    "deployment": "deployments",
    "daemonset": "daemonsets",
    "statefulset": "statefulsets",
}


def _dry(dry_run: bool) -> dict[str, str] | None:
    """The query of a server-side dry run: admission and validation run, nothing is persisted."""
    return {"dryRun": "All"} if dry_run else None


def _page_query(query: Mapping[str, Any] | None, limit: int, token: str) -> dict[str, Any]:
    params = dict(query or {})
    params["limit"] = limit
    if token:
        params["continue"] = token
    return params


def _continue_from_head(raw: bytes | memoryview) -> str | None:
    """The list's continue token, found before `"items"` without parsing the page; None if absent.

    A wrong answer costs only speed: `list_pages` follows the decoded body when they differ."""
    start = bytes(raw[:HEAD_BYTES])
    items_at = start.find(b'"items"')
    head = start[: items_at if items_at >= 0 else 4096]
    match = _CONTINUE.search(head)
    if not match:
        return None
    return str(json.loads(b'"' + match.group(1) + b'"')) or None


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


def _retry_after(headers: Any) -> float | None:
    try:
        value = (headers or {}).get("Retry-After")
        return float(value) if value else None
    except (TypeError, ValueError, AttributeError):
        return None


def _status_cause(body: Any) -> str:
    """The first cause's message in a Status body ("The disruption budget web needs 2 healthy …")."""
    try:
        loaded = json.loads(body) if body else {}
    except (TypeError, ValueError):
        return ""
    if not isinstance(loaded, dict):
        return ""
    causes = (loaded.get("details") or {}).get("causes") or []
    return str(causes[0].get("message", "")) if causes and isinstance(causes[0], dict) else ""


def check_kubeconfig(kubeconfig: str, *, cluster: str = "") -> None:
    """Refuse, with what is wrong, a kubeconfig the client would hang on or fail on with a
    traceback: each file of the (colon-separated, as in $KUBECONFIG) list must be a regular file
    (a FIFO would block the open, /dev/zero never ends), at most MAX_KUBECONFIG_BYTES, UTF-8 YAML
    whose top level is a mapping. Files of a list that do not exist are skipped, as kubectl skips
    them; a list of none that exists is refused. The client reads the files again afterwards: a
    kubeconfig is small, and its loader resolves certificate paths relative to each file."""
    paths = [p for p in kubeconfig.split(os.pathsep) if p]
    where = f"cluster {cluster}: " if cluster else ""
    found = False
    for path in paths:
        label = f"{where}kubeconfig {path}"
        try:
            data = read_bounded(path, MAX_KUBECONFIG_BYTES)
        except FileNotFoundError:
            continue
        except TooLarge as exc:
            raise ConfigError(f"{label}: {exc.reason}; is this the right file?") from None
        except Unreadable as exc:
            raise ConfigError(f"{label}: {exc.reason}") from None
        found = True
        _check_kubeconfig_text(label, data)
    if not found:
        shown = paths[0] if len(paths) == 1 else os.pathsep.join(paths)
        raise ConfigError(f"{where}kubeconfig {shown or '(empty path)'}: no such file")


def _check_kubeconfig_text(label: str, data: bytes) -> None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{label}: not UTF-8 text at line {line} (byte {exc.start})") from None
    try:
        loaded = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.MarkedYAMLError as exc:
        # Where the construct began (an unclosed bracket's line) says more than where the parser
        # gave up (often the end of the file).
        mark = exc.context_mark or exc.problem_mark
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{label}: not valid YAML{at} ({exc.problem or exc.context})") from None
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        char: Any = exc.character  # an int, the code point YAML refuses
        code = f"#x{char:04x}" if isinstance(char, int) else repr(char)
        raise ConfigError(f"{label}: not valid YAML at line {line} (unacceptable character {code})") from None
    except yaml.YAMLError as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"{label}: not valid YAML ({first[:120]})") from None
    except RecursionError:
        raise ConfigError(f"{label}: not valid YAML (nested too deeply to read)") from None
    # An empty file is what kubectl treats as no configuration; the client says so itself.
    if loaded is not None and not isinstance(loaded, dict):
        raise ConfigError(
            f"{label}: not a kubeconfig (its top level is a {_yaml_kind(loaded)}, not a mapping)"
        )


def _yaml_kind(value: object) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__


def kubeconfig_context(kubeconfig: str, context: str | None = None) -> str:
    """The context a kubeconfig (or a colon-separated list of them, as in $KUBECONFIG, merged as
    kubectl merges them) selects: `context` if it has one by that name, else its current context.
    A list with no readable file, a context it lacks or none current is a ConfigError."""
    check_kubeconfig(kubeconfig)
    kube = _kubernetes()
    try:
        contexts, active = kube.config.list_kube_config_contexts(config_file=kubeconfig)
    except (kube.ConfigException, OSError, TypeError, ValueError) as exc:
        raise ConfigError(f"kubeconfig {kubeconfig}: {exc}") from None
    names = [str(c.get("name", "")) for c in contexts or () if isinstance(c, dict)]
    if context:
        if context not in names:
            raise ConfigError(
                f"kubeconfig {kubeconfig}: no context named {context!r} (it has: {', '.join(names) or 'none'})"
            )
        return context
    current = str(active.get("name", "")) if isinstance(active, dict) else ""
    if not current:
        raise ConfigError(f"kubeconfig {kubeconfig}: no current context (pass --context NAME)")
    return current


def _current_context(config: ClusterConfig) -> str:
    """The name of the kubeconfig's current context, which is what the bot connects with."""
    kube = _kubernetes()
    try:
        _, active = kube.config.list_kube_config_contexts(config_file=str(config.kubeconfig))
    except (kube.ConfigException, OSError, TypeError, ValueError):
        return ""
    return str(active.get("name", "")) if isinstance(active, dict) else ""


def _what_happened(exc: BaseException, connect: float, read: float) -> str:
    """Refused, dropped or silent: an operator fixes each differently, so the message says which."""
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and len(chain) < 10:
        chain.append(seen)
        seen = (
            getattr(seen, "reason", None)
            if isinstance(seen, urllib3.exceptions.MaxRetryError)
            else (seen.__cause__ or seen.__context__)
        )
    if any(isinstance(e, ConnectionRefusedError) for e in chain) or any(
        isinstance(e, urllib3.exceptions.NewConnectionError) and "refused" in str(e).lower() for e in chain
    ):
        return "refused the connection"
    if any(isinstance(e, urllib3.exceptions.NameResolutionError) for e in chain):
        return "has a name that does not resolve"
    if any(isinstance(e, urllib3.exceptions.ConnectTimeoutError) for e in chain):
        return f"did not accept a connection within {connect:g}s"
    if any(isinstance(e, (urllib3.exceptions.TimeoutError, TimeoutError)) for e in chain):
        return f"did not answer within {read:g}s"
    if any(isinstance(e, urllib3.exceptions.SSLError) for e in chain):
        return "failed the TLS handshake"
    if any(isinstance(e, (urllib3.exceptions.ProtocolError, ConnectionError)) for e in chain):
        return "dropped the connection"
    return "could not be reached"


def _status_message(body: Any) -> str:
    """The `message` of a Kubernetes Status object in an error body, if there is one."""
    if not body:
        return ""
    try:
        loaded = json.loads(body)
    except (TypeError, ValueError):
        return ""
    return str(loaded.get("message", "")) if isinstance(loaded, dict) else ""
