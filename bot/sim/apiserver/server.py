"""The HTTP front of the simulator: Kubernetes REST paths, discovery, /metrics, and extra routes.

Plain JSON over HTTP/1.1 (keep-alive; watches and `logs -f` stream with chunked encoding) on a
`ThreadingHTTPServer` bound to 127.0.0.1. Each request is routed to the discovery documents, the
store (get, list, watch) or the write semantics (`Api`), and errors come back as Kubernetes
`Status` objects. Requests through a deprecated group-version carry the `Warning: 299` header and
are counted in `apiserver_requested_deprecated_apis`. Transport faults from the control API
(error rates, latency, dropped watches) apply here, to Kubernetes paths only.

The server is given the parts it serves (the `Api` with its store, catalog and clock, the metrics,
the transport faults) and callables for the three answers that belong to layers above it: the
version (the cloud's), pod binding (the scheduler's) and pod logs (the kubelets'). Anything else is
an extra route: `add_route(prefix, handler)` hands every request under `prefix` to `handler`, which
answers JSON (or a `Raw` body: the AWS facade's XML). The world layer registers the control API on
`/sim` and the AWS facade on `/aws` that way, so this module never imports them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import socket
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from bot.sim.apiserver import bookmarks as bookmark_shapes
from bot.sim.apiserver import discovery, eviction, tables
from bot.sim.apiserver.api import Api, DeleteOptions, decode_body
from bot.sim.apiserver.clock import parse_time
from bot.sim.apiserver.errors import ApiError, bad_request, method_not_allowed, not_found
from bot.sim.apiserver.metrics import Metrics
from bot.sim.apiserver.patch import json_patch, merge_patch, strategic_merge_patch
from bot.sim.apiserver.resources import Served
from bot.sim.apiserver.selectors import (
    SelectorError,
    parse_field_selector,
    parse_label_selector,
    selector_to_string,
)
from bot.sim.apiserver.store import Entry, WatchStart, dumps
from bot.sim.apiserver.transport import TransportFaults

log = logging.getLogger(__name__)

Obj = dict[str, Any]
JSON = "application/json"


_TRUE = ("1", "t", "T", "TRUE", "true", "True")


def _flag(query: dict[str, str], name: str) -> bool:
    """A boolean query parameter, parsed as Go's strconv.ParseBool does (clients send `True`, `true`, `1`)."""
    return query.get(name) in _TRUE


def _watch_options(query: dict[str, str]) -> tuple[bool, bool, float]:
    """A watch's `sendInitialEvents`, `allowWatchBookmarks` and timeout, refused as the API server
    refuses them (initial events only with `resourceVersionMatch=NotOlderThan`)."""
    send_initial = _flag(query, "sendInitialEvents")
    if send_initial and query.get("resourceVersionMatch") != "NotOlderThan":
        raise ApiError(
            422,
            "Invalid",
            'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            {
                "group": "meta.k8s.io",
                "kind": "ListOptions",
                "causes": [
                    {
                        "reason": "FieldValueForbidden",
                        "field": "resourceVersionMatch",
                        "message": "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                    }
                ],
            },
        )
    bookmarks = _flag(query, "allowWatchBookmarks")
    try:
        timeout = (
            float(query["timeoutSeconds"]) if query.get("timeoutSeconds") else 1800.0 * (1 + random.random())
        )
    except ValueError:
        raise bad_request(f"timeoutSeconds: Invalid value: {query.get('timeoutSeconds')!r}") from None
    return send_initial, bookmarks, timeout


class _Request:
    """A parsed Kubernetes resource path."""

    def __init__(self, served: Served, namespace: str, name: str, subresource: str) -> None:
        self.served = served
        self.namespace = namespace
        self.name = name
        self.subresource = subresource

    @property
    def kind(self) -> Any:
        return self.served.kind


#: An extra route: (method, path, query, body) → (HTTP status, JSON-able payload).
RouteHandler = Callable[[str, str, dict[str, str], bytes], tuple[int, Any]]


@dataclass(frozen=True)
class Raw:
    """What an extra route answers when it is not JSON (the AWS query APIs answer XML): the body
    as it is, its content type and any headers of its own."""

    body: bytes
    content_type: str
    headers: dict[str, str] = field(default_factory=dict)


class PodLogs(Protocol):
    """Where a pod's container logs come from (the kubelets)."""

    def __call__(
        self,
        pod: Obj,
        container: str,
        *,
        previous: bool,
        since_seconds: int | None,
        tail_lines: int | None,
        timestamps: bool,
    ) -> list[str]: ...


class SimHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # Handler threads are daemons, but stop() still closes every open connection and joins them.
    block_on_close = False
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        *,
        api: Api,
        metrics: Metrics,
        transport: TransportFaults,
        version: Callable[[], Obj],
        bind: Callable[[str, str, str], None],
        logs: PodLogs,
        bookmark_interval: float,
    ) -> None:
        self.api = api
        self.store = api.store
        self.catalog = api.catalog
        self.clock = api.clock
        self.metrics = metrics
        self.transport = transport
        self.version = version
        self.bind = bind
        self.logs = logs
        self.bookmark_interval = bookmark_interval
        #: Set when the cluster stops, so that streams which only wait (`logs -f`) end too.
        self.stopping = False
        self.routes: dict[str, RouteHandler] = {}
        self.connections: set[socket.socket] = set()
        self.threads: set[threading.Thread] = set()
        self.conn_lock = threading.Lock()
        super().__init__(address, Handler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def add_route(self, prefix: str, handler: RouteHandler) -> None:
        """Serve every path that starts with `prefix` (e.g. "/sim") with `handler` instead of the
        Kubernetes routes; transport faults never apply to it."""
        self.routes[prefix] = handler

    def route_for(self, path: str) -> RouteHandler | None:
        return next((h for prefix, h in self.routes.items() if path.startswith(prefix)), None)

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self._serve, args=(request, client_address), daemon=True, name="sim-http"
        )
        with self.conn_lock:
            self.connections.add(request)
            self.threads.add(thread)
        thread.start()

    def _serve(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:  # pragma: no cover - a broken client connection
            log.debug("connection from %s ended with an error", client_address, exc_info=True)
        finally:
            self.shutdown_request(request)
            with self.conn_lock:
                self.connections.discard(request)
                self.threads.discard(threading.current_thread())

    def close_connections(self) -> None:
        self.stopping = True
        with self.conn_lock:
            conns = list(self.connections)
            threads = list(self.threads)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for t in threads:
            t.join(timeout=5)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: SimHTTPServer
    # kubectl's discovery and large list pages: Nagle would add 40 ms stalls per response.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    # ---- plumbing -------------------------------------------------------------------------------

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(
        self, status: int, body: bytes, content_type: str = JSON, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Audit-Id", str(uuid.uuid4()))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(obj, separators=(",", ":")).encode(), JSON, headers)

    def _error(self, err: ApiError, headers: dict[str, str] | None = None) -> None:
        hdrs = dict(headers or {})
        if err.retry_after:
            hdrs["Retry-After"] = str(err.retry_after)
        body = err.status()
        if not err.reason:
            body.pop("reason", None)
        self._send(err.code, json.dumps(body, separators=(",", ":")).encode(), JSON, hdrs)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_HEAD(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        url = urllib.parse.urlsplit(self.path)
        path = url.path.rstrip("/") or "/"
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        body = self._body()
        faults = self.server.transport
        extra = self.server.route_for(path)
        try:
            if extra is None and faults.applies(path):
                if faults.latency:
                    time.sleep(faults.latency)
                if faults.roll():
                    status = faults.error_status
                    reason = "TooManyRequests" if status == 429 else "InternalError"
                    message = (
                        "the server has received too many requests and has asked us to try again later"
                        if status == 429
                        else "Internal error occurred: injected by the simulator"
                    )
                    err = ApiError(status, reason, message)
                    if status == 429:
                        err.retry_after = faults.retry_after
                    self._error(err)
                    return
            if extra is not None:
                # The raw query string too, under "?" (never a parameter's name): the evidence
                # facades read repeated parameters (Alertmanager's `filter`); and the request's
                # Authorization under "?authorization" (the GitHub facade checks an App's JWT).
                status, payload = extra(
                    method,
                    path,
                    {**query, "?": url.query, "?authorization": self.headers.get("Authorization", "")},
                    body,
                )
                if isinstance(payload, Raw):
                    self._send(status, payload.body, payload.content_type, payload.headers)
                else:
                    self._json(status, payload)
                return
            self._route(method, path, query, body)
        except ApiError as err:
            self._error(err)
        except (BrokenPipeError, ConnectionResetError):
            raise
        except Exception as exc:  # a simulator bug: answer like an API server would, and log it
            log.exception("%s %s failed", method, self.path)
            self._error(ApiError(500, "InternalError", f"Internal error occurred: {exc!r}"))

    # ---- routing ------------------------------------------------------------------------------

    def _route(self, method: str, path: str, query: dict[str, str], body: bytes) -> None:
        server = self.server
        if path in ("/healthz", "/livez", "/readyz"):
            self._send(200, b"ok", "text/plain; charset=utf-8")
            return
        if path == "/version":
            self._json(200, server.version())
            return
        if path == "/metrics":
            self._send(200, server.metrics.render().encode(), "text/plain; version=0.0.4; charset=utf-8")
            return
        accept = self.headers.get("Accept", "")
        parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/")]
        if parts[:2] == ["openapi", "v3"]:
            self._openapi(parts[2:])
            return
        if parts[0] == "api":
            if len(parts) == 1:
                self._discovery_root(
                    accept, core=True, plain=lambda: discovery.api_versions(f"127.0.0.1:{server.port}")
                )
                return
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis":
            if len(parts) == 1:
                self._discovery_root(accept, core=False, plain=lambda: discovery.group_list(server.catalog))
                return
            if len(parts) == 2:
                doc = discovery.group(server.catalog, parts[1])
                if doc is None:
                    raise not_found("", "")
                self._json(200, doc)
                return
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            self._json(
                404,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Failure",
                    "message": "the server could not find the requested resource",
                    "reason": "NotFound",
                    "details": {},
                    "code": 404,
                },
            )
            return
        if not rest:
            doc = discovery.resource_list(server.catalog, group, version)
            if doc is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
            self._json(200, doc)
            return
        watch_path = False
        if rest[0] == "watch":
            watch_path, rest = True, rest[1:]
        req = self._resource(group, version, rest)
        self._resource_request(method, req, query, body, accept, watch_path)

    def _discovery_root(self, accept: str, *, core: bool, plain: Callable[[], Obj]) -> None:
        """`/api` (`core`) or `/apis`: the aggregated discovery document when the client asks for
        it, as kubectl does, in the version it asks for (v2 or v2beta1); else the plain one."""
        version = discovery.negotiate(accept)
        if version is None:
            self._json(200, plain())
            return
        body = json.dumps(discovery.aggregated(self.server.catalog, core=core, version=version)).encode()
        self._send(200, body, discovery.aggregated_media_type(version), {"Vary": "Accept"})

    def _openapi(self, rest: list[str]) -> None:
        catalog = self.server.catalog
        if not rest:
            self._json(200, discovery.openapi_v3_root(catalog))
            return
        if rest[0] == "api" and len(rest) == 2:
            doc = discovery.openapi_v3_group_version(catalog, "", rest[1])
        elif rest[0] == "apis" and len(rest) == 3:
            doc = discovery.openapi_v3_group_version(catalog, rest[1], rest[2])
        else:
            doc = None
        if doc is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        self._json(200, doc)

    def _resource(self, group: str, version: str, rest: list[str]) -> _Request:
        catalog = self.server.catalog
        namespace = ""
        if rest[0] == "namespaces" and len(rest) >= 3 and catalog.lookup(group, version, rest[2]) is not None:
            served = catalog.lookup(group, version, rest[2])
            if served is not None and served.kind.namespaced:
                namespace, rest = rest[1], rest[2:]
        served = catalog.lookup(group, version, rest[0])
        if served is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if len(rest) > 3 or (sub and sub not in served.kind.subresources):
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        if served.kind.namespaced is False and namespace:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        return _Request(served, namespace, name, sub)

    # ---- resources ----------------------------------------------------------------------------

    def _resource_request(
        self, method: str, req: _Request, query: dict[str, str], body: bytes, accept: str, watch_path: bool
    ) -> None:
        server = self.server
        served = req.served
        kind = served.kind
        is_watch = watch_path or _flag(query, "watch")
        if method == "GET" and not req.name:
            verb = "WATCH" if is_watch else "LIST"
        else:
            verb = {"GET": "GET", "POST": "POST", "PUT": "PUT", "PATCH": "PATCH", "DELETE": "DELETE"}[method]
        headers: dict[str, str] = {}
        warning = served.warning()
        if warning is not None:
            headers["Warning"] = f'299 - "{warning}"'
            assert served.deprecation is not None
            server.metrics.deprecated_call(
                group=kind.group,
                version=served.version,
                resource=kind.resource,
                subresource=req.subresource,
                removed=served.deprecation.removed_in,
            )
        scope = "resource" if req.name else ("namespace" if req.namespace else "cluster")
        code = 200
        try:
            code = self._resource_inner(method, verb, req, query, body, accept, headers, is_watch)
        except ApiError as err:
            code = err.code
            self._error(err, headers)
        finally:
            server.metrics.request(
                verb=verb,
                group=kind.group,
                version=served.version,
                resource=kind.resource,
                subresource=req.subresource,
                scope=scope,
                code=code,
            )

    def _dry_run(self, query: dict[str, str]) -> bool:
        return query.get("dryRun") == "All"

    def _resource_inner(
        self,
        method: str,
        verb: str,
        req: _Request,
        query: dict[str, str],
        body: bytes,
        accept: str,
        headers: dict[str, str],
        is_watch: bool,
    ) -> int:
        server = self.server
        served, kind = req.served, req.kind
        ctype = self.headers.get("Content-Type", JSON)
        if method == "GET" and not req.name:
            if is_watch:
                self._watch(req, query, accept, headers)
                return 200
            self._list(req, query, accept, headers)
            return 200
        if method == "GET":
            if req.subresource == "log":
                return self._logs(req, query, headers)
            entry = server.api.entry(kind, req.namespace, req.name)
            if req.subresource == "scale":
                self._json(200, self._scale(served, entry), headers)
                return 200
            if "as=Table" in accept:
                self._json(200, self._table(served, [entry], entry.rv, "", query), headers)
                return 200
            self._send(200, served.type_prefix + entry.raw[1:], JSON, headers)
            return 200
        if method == "POST":
            if req.subresource == "eviction":
                eviction.evict(
                    server.api,
                    req.namespace,
                    req.name,
                    decode_body(body, ctype),
                    dry_run=self._dry_run(query),
                )
                self._json(
                    201,
                    {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201},
                    headers,
                )
                return 201
            if req.subresource == "binding":
                target = ((decode_body(body, ctype) or {}).get("target") or {}).get("name", "")
                server.bind(req.namespace, req.name, str(target))
                self._json(
                    201,
                    {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201},
                    headers,
                )
                return 201
            if req.name:
                raise method_not_allowed()
            obj = decode_body(body, ctype)
            self._check_type(served, obj)
            entry = server.api.create(kind, req.namespace, obj, dry_run=self._dry_run(query))
            self._send(201, served.type_prefix + entry.raw[1:], JSON, headers)
            return 201
        if method == "PUT":
            if not req.name:
                raise method_not_allowed()
            obj = decode_body(body, ctype)
            if req.subresource == "scale":
                entry = self._set_scale(req, obj)
                self._json(200, self._scale(served, entry), headers)
                return 200
            self._check_type(served, obj)
            entry = server.api.update(
                kind, req.namespace, req.name, obj, subresource=req.subresource, dry_run=self._dry_run(query)
            )
            self._send(200, served.type_prefix + entry.raw[1:], JSON, headers)
            return 200
        if method == "PATCH":
            if not req.name:
                raise method_not_allowed()
            if req.subresource == "scale":
                current = self._scale(served, server.api.entry(kind, req.namespace, req.name))
                patched = _patch_plain(current, ctype, body)
                entry = self._set_scale(req, patched)
                self._json(200, self._scale(served, entry), headers)
                return 200
            entry = server.api.patch(
                kind,
                req.namespace,
                req.name,
                ctype,
                body,
                subresource=req.subresource,
                dry_run=self._dry_run(query),
            )
            self._send(200, served.type_prefix + entry.raw[1:], JSON, headers)
            return 200
        if method == "DELETE":
            opts = DeleteOptions.parse(decode_body(body, ctype) if body else None, query)
            if not req.name:
                return self._delete_collection(req, query, opts, headers)
            entry, _gone = server.api.delete(kind, req.namespace, req.name, opts)
            self._send(200, served.type_prefix + entry.raw[1:], JSON, headers)
            return 200
        raise method_not_allowed()

    @staticmethod
    def _check_type(served: Served, obj: Any) -> None:
        if not isinstance(obj, dict):
            raise bad_request("the body of the request was in an unknown format")
        kind, api_version = obj.get("kind"), obj.get("apiVersion")
        if kind and kind != served.kind.kind:
            raise bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({served.group_version})"
                if api_version != served.group_version
                else f"the kind in the data ({kind}) does not match the expected kind ({served.kind.kind})"
            )

    def _selectors(self, req: _Request, query: dict[str, str]) -> tuple[Any, Any]:
        try:
            labels = parse_label_selector(query.get("labelSelector"))
            fields = parse_field_selector(query.get("fieldSelector"), req.kind.selectable)
        except SelectorError as exc:
            raise bad_request(str(exc)) from None
        if req.namespace:
            # A namespaced request is the same as a metadata.namespace field selector.
            other = fields.exact("metadata.namespace")
            if other is not None and other != req.namespace:
                return labels, parse_field_selector("metadata.name=\x00impossible", req.kind.selectable)
        elif fields.exact("metadata.namespace") is not None and req.kind.namespaced:
            req.namespace = str(fields.exact("metadata.namespace"))
        return labels, fields

    def _list(self, req: _Request, query: dict[str, str], accept: str, headers: dict[str, str]) -> None:
        server = self.server
        labels, fields = self._selectors(req, query)
        try:
            limit = int(query.get("limit") or 0)
        except ValueError:
            raise bad_request(f"limit: Invalid value: {query.get('limit')!r}") from None
        result = server.store.list_page(
            req.kind,
            namespace=req.namespace,
            labels=labels,
            fields=fields,
            limit=max(limit, 0),
            continue_token=query.get("continue", ""),
            resource_version=query.get("resourceVersion", ""),
            resource_version_match=query.get("resourceVersionMatch", ""),
        )
        if "as=Table" in accept:
            self._json(
                200,
                self._table(
                    req.served,
                    result.entries,
                    result.resource_version,
                    result.continue_token,
                    query,
                    remaining=result.remaining,
                ),
                headers,
            )
            return
        meta: Obj = {"resourceVersion": str(result.resource_version)}
        if result.continue_token:
            meta["continue"] = result.continue_token
        if result.remaining is not None:
            meta["remainingItemCount"] = result.remaining
        served = req.served
        head = f'{{"kind":"{served.kind.kind}List","apiVersion":"{served.group_version}","metadata":'.encode()
        body = b"".join([head, dumps(meta), b',"items":[', b",".join(e.raw for e in result.entries), b"]}"])
        self._send(200, body, JSON, headers)

    def _table(
        self,
        served: Served,
        entries: list[Entry],
        rv: int,
        token: str,
        query: dict[str, str],
        *,
        remaining: int | None = None,
        headers_included: bool = True,
    ) -> Obj:
        objects = [e.obj() for e in entries]
        prefix = {"kind": served.kind.kind, "apiVersion": served.group_version}
        include = query.get("includeObject", "Metadata")
        meta: Obj = {"resourceVersion": str(rv)}
        if token:
            meta["continue"] = token
        if remaining is not None:
            meta["remainingItemCount"] = remaining
        return {
            "kind": "Table",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": meta,
            "columnDefinitions": tables.column_definitions(served.kind.kind) if headers_included else None,
            "rows": tables.rows(
                served.kind.kind, objects, self.server.clock.now(), include, lambda o: {**prefix, **o}
            ),
        }

    def _delete_collection(
        self, req: _Request, query: dict[str, str], opts: DeleteOptions, headers: dict[str, str]
    ) -> int:
        server = self.server
        labels, fields = self._selectors(req, query)
        result = server.store.list_page(req.kind, namespace=req.namespace, labels=labels, fields=fields)
        deleted: list[bytes] = []
        for e in result.entries:
            try:
                entry, _ = server.api.delete(req.kind, e.namespace, e.name, opts)
            except ApiError as err:
                if err.code == 404:
                    continue
                raise
            deleted.append(entry.raw)
        served = req.served
        head = f'{{"kind":"{served.kind.kind}List","apiVersion":"{served.group_version}","metadata":'.encode()
        body = b"".join(
            [head, dumps({"resourceVersion": str(server.store.rv)}), b',"items":[', b",".join(deleted), b"]}"]
        )
        self._send(200, body, JSON, headers)
        return 200

    # ---- scale ----------------------------------------------------------------------------------

    def _scale(self, served: Served, entry: Entry) -> Obj:
        obj = entry.obj()
        m = obj["metadata"]
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                "name": m["name"],
                "namespace": m.get("namespace", ""),
                "uid": m.get("uid"),
                "resourceVersion": m.get("resourceVersion"),
                "creationTimestamp": m.get("creationTimestamp"),
            },
            "spec": {"replicas": int((obj.get("spec") or {}).get("replicas", 1))},
            "status": {
                "replicas": int((obj.get("status") or {}).get("replicas", 0)),
                "selector": selector_to_string((obj.get("spec") or {}).get("selector")).replace("<none>", ""),
            },
        }

    def _set_scale(self, req: _Request, scale: Any) -> Entry:
        if not isinstance(scale, dict):
            raise bad_request("not a Scale object")
        replicas = (scale.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or replicas < 0:
            raise ApiError(
                422,
                "Invalid",
                f'Scale.autoscaling "{req.name}" is invalid: spec.replicas: Invalid value: {replicas!r}',
            )
        rv = str((scale.get("metadata") or {}).get("resourceVersion") or "")
        patch: Obj = {"spec": {"replicas": replicas}}
        if rv:
            patch["metadata"] = {"resourceVersion": rv}
        return self.server.api.patch(
            req.kind, req.namespace, req.name, "application/merge-patch+json", json.dumps(patch).encode()
        )

    # ---- watch ------------------------------------------------------------------------------------

    def _start_stream(self, content_type: str, headers: dict[str, str]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _end_stream(self) -> None:
        try:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            pass

    def _watch(self, req: _Request, query: dict[str, str], accept: str, headers: dict[str, str]) -> None:
        server = self.server
        labels, fields = self._selectors(req, query)
        send_initial, bookmarks, timeout = _watch_options(query)
        served = req.served
        # The connection is closed when the watch ends: say so, or a client's pool would reuse it
        # for its next request and meet "Remote end closed connection without response".
        self._start_stream(JSON, {**headers, "Connection": "close"})
        encode = self._watch_encoder(served, query, "as=Table" in accept)
        try:
            start = server.store.watch(
                req.kind,
                namespace=req.namespace,
                labels=labels,
                fields=fields,
                resource_version=query.get("resourceVersion", ""),
                send_initial_events=send_initial,
            )
        except ApiError as err:
            status = err.status()
            if err.code == 410 and served.kind.kind in bookmark_shapes.UNCACHED:
                status["message"] = bookmark_shapes.UNCACHED_TOO_OLD
            self._chunk(b'{"type":"ERROR","object":' + dumps(status) + b"}\n")
            self._end_stream()
            return
        try:
            self._stream_watch(start, served, query, encode, timeout, bookmarks)
            self._end_stream()
        except OSError:
            pass
        finally:
            server.store.unwatch(start.watcher)
            self.close_connection = True

    def _watch_encoder(self, served: Served, query: dict[str, str], table: bool) -> Callable[..., bytes]:
        """The line of one watch event: the object as stored, or as a Table (the first one with its
        column headers); a bookmark (`raw` None) as the kind's bookmark shape or an empty Table."""
        server = self.server
        first_table = [True]

        def encode(kind: str, raw: bytes | None, rv: int, annotations: Obj | None = None) -> bytes:
            if table and raw is not None:
                obj = json.loads(raw)
                t = self._table(served, [], rv, "", query, headers_included=first_table[0])
                t["metadata"] = {"resourceVersion": str(rv)}
                t["rows"] = tables.rows(
                    served.kind.kind,
                    [obj],
                    server.clock.now(),
                    query.get("includeObject", "Metadata"),
                    lambda o: {"kind": served.kind.kind, "apiVersion": served.group_version, **o},
                )
                first_table[0] = False
                return b'{"type":"' + kind.encode() + b'","object":' + dumps(t) + b"}\n"
            if raw is None:
                meta: Obj = {"resourceVersion": str(rv)}
                if annotations:
                    meta["annotations"] = annotations
                if table:
                    body = dumps(
                        {
                            "kind": "Table",
                            "apiVersion": "meta.k8s.io/v1",
                            "metadata": meta,
                            "columnDefinitions": None,
                            "rows": [],
                        }
                    )
                else:
                    body = (
                        served.type_prefix
                        + dumps(bookmark_shapes.body(served.kind.kind, rv, annotations))[1:]
                    )
                return b'{"type":"' + kind.encode() + b'","object":' + body + b"}\n"
            return b'{"type":"' + kind.encode() + b'","object":' + served.type_prefix + raw[1:] + b"}\n"

        return encode

    def _stream_watch(
        self,
        start: WatchStart,
        served: Served,
        query: dict[str, str],
        encode: Callable[..., bytes],
        timeout: float,
        bookmarks: bool,
    ) -> None:
        """Send a started watch: its initial events, its replay, then what comes until its deadline,
        with the watch cache's bookmarks."""
        server = self.server
        watcher = start.watcher
        started = time.monotonic()
        deadline = started + timeout
        drop_after = server.transport.watch_drop_after
        if drop_after:
            deadline = min(deadline, started + drop_after)
        # As the API server's watch cache: a bookmark every `interval` and one 2 s before the
        # watch's timeout, each only if the version moved past the last one this watch was sent;
        # none for kinds served without the cache (Events).
        bookmarks = bookmarks and served.kind.kind not in bookmark_shapes.UNCACHED
        pre_timeout = started + timeout - 2.0
        last_bookmark = started
        interval = server.bookmark_interval
        requested = query.get("resourceVersion", "")
        sent_rv = int(requested) if requested.isdigit() and int(requested) > 0 else start.resource_version

        def send(record: Any) -> int:
            ev = watcher.event_for(record)
            if ev is None:
                return 0
            self._chunk(encode(ev[0], ev[1].raw, ev[1].rv))
            return int(ev[1].rv)

        for e in start.initial:
            self._chunk(encode("ADDED", e.raw, e.rv))
        if start.initial_events_end:
            self._chunk(
                encode("BOOKMARK", None, start.resource_version, {"k8s.io/initial-events-end": "true"})
            )
        for record in start.replay:
            sent_rv = max(sent_rv, send(record))
        while True:
            now = time.monotonic()
            if now >= deadline:
                break
            wait = deadline - now
            if bookmarks:
                due = last_bookmark + interval
                if now < pre_timeout:
                    due = min(due, pre_timeout)
                wait = min(wait, max(0.05, due - now))
            for record in watcher.take(wait):
                sent_rv = max(sent_rv, send(record))
            if watcher.closed:
                break
            now = time.monotonic()
            at_pre_timeout = last_bookmark < pre_timeout <= now
            if bookmarks and (now - last_bookmark >= interval or at_pre_timeout):
                # Drain under the store lock, so the bookmark's version covers everything sent.
                with server.store.lock:
                    late = watcher.take(0)
                    rv = server.store.rv
                for record in late:
                    sent_rv = max(sent_rv, send(record))
                if rv > sent_rv:
                    self._chunk(encode("BOOKMARK", None, rv))
                    sent_rv = rv
                last_bookmark = now

    # ---- logs ---------------------------------------------------------------------------------

    def _logs(self, req: _Request, query: dict[str, str], headers: dict[str, str]) -> int:
        server = self.server

        def number(name: str) -> int | None:
            value = query.get(name)
            if value in (None, ""):
                return None
            try:
                return int(value)
            except ValueError:
                raise bad_request(f"{name}: Invalid value: {value!r}") from None

        since = number("sinceSeconds")
        if query.get("sinceTime"):
            t = parse_time(query["sinceTime"])
            if t is not None:
                since = max(0, int(server.clock.now() - t))
        tail = number("tailLines")
        limit_bytes = number("limitBytes")
        container = query.get("container", "")
        timestamps = _flag(query, "timestamps")
        previous = _flag(query, "previous")

        def read() -> list[str]:
            with server.store.lock:
                pod = server.api.entry(req.kind, req.namespace, req.name).obj()
                return server.logs(
                    pod,
                    container,
                    previous=previous,
                    since_seconds=since,
                    tail_lines=tail,
                    timestamps=timestamps,
                )

        lines = read()
        if not _flag(query, "follow"):
            text = "".join(line + "\n" for line in lines).encode()
            if limit_bytes is not None:
                text = text[:limit_bytes]
            self._send(200, text, "text/plain", headers)
            return 200
        self._start_stream("text/plain", headers)
        sent = len(lines)
        try:
            if lines:
                self._chunk("".join(line + "\n" for line in lines).encode())
            for _ in self._follow_ticks():
                try:
                    current = read()
                except ApiError:
                    break
                if len(current) > sent:
                    self._chunk("".join(line + "\n" for line in current[sent:]).encode())
                sent = len(current)
            self._end_stream()
        except OSError:
            pass
        finally:
            self.close_connection = True
        return 200

    def _follow_ticks(self) -> Iterator[None]:
        while not self.server.stopping:
            time.sleep(0.25)
            yield None


def _patch_plain(current: Obj, ctype: str, body: bytes) -> Obj:
    patch = decode_body(body, ctype)
    c = ctype.split(";")[0]
    if c == "application/json-patch+json":
        out = json_patch(current, patch)
    elif c == "application/strategic-merge-patch+json":
        out = strategic_merge_patch(current, patch)
    else:
        out = merge_patch(current, patch)
    if not isinstance(out, dict):
        raise bad_request("patch produced a value that is not an object")
    return out
