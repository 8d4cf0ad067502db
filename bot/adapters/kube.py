"""Kubernetes adapter: the only module that imports the `kubernetes` package.

Bulk reads stay raw: `_preload_content=False` and `json.loads` per page, never the client's model
objects (about ten times slower and fifty times heavier per pod). Every call carries a
`(connect, read)` timeout, because without one a dead connection hangs forever. Client failures
are translated into the bot's error tree: unreachable servers, 403s (the bot's role does not allow
it) and 410s (an expired continue token) are distinct, so callers can record a named gap instead
of crashing.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from bot.errors import ClusterError, ClusterUnreachable, ConfigError
from bot.settings import ClusterConfig

log = logging.getLogger(__name__)

#: kubectl's page size; the API server's list cost is bounded per page.
PAGE_SIZE = 500


class ClusterForbidden(ClusterError):
    """403: the bot's ServiceAccount may not do this (by design, or RBAC is missing a rule)."""


class ContinueExpired(ClusterError):
    """410 Expired on a continue token: the list took longer than the server keeps its snapshot."""


@dataclass(frozen=True)
class Page:
    items: list[dict[str, Any]]
    resource_version: str
    continue_token: str


class Cluster:
    """One cluster's API server, reached through the official client's transport."""

    def __init__(self, name: str, api_client: Any, *, timeout: float, context: str = "") -> None:
        self.name = name
        self.context = context
        self.api_client = api_client
        self.timeout = timeout

    @classmethod
    def connect(cls, config: ClusterConfig) -> Cluster:
        """Build a client for `config` (no request is made yet)."""
        configuration = k8s_client.Configuration()
        try:
            if config.in_cluster:
                k8s_config.load_incluster_config(client_configuration=configuration)
            else:
                k8s_config.load_kube_config(
                    config_file=str(config.kubeconfig),
                    context=config.context,
                    client_configuration=configuration,
                    persist_config=False,
                )
        except (ConfigException, OSError, TypeError) as exc:
            where = (
                "in-cluster config" if config.in_cluster else f"{config.kubeconfig} context {config.context}"
            )
            raise ConfigError(f"cluster {config.name}: cannot load {where}: {exc}") from None
        # One quick retry for a reset connection; an unreachable server must fail within the timeout.
        configuration.retries = urllib3.Retry(total=1, connect=1, read=0, redirect=0, status=0)
        api_client = k8s_client.ApiClient(configuration)
        context = config.context or ("in-cluster" if config.in_cluster else "current context")
        return cls(config.name, api_client, timeout=config.request_timeout, context=context)

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
    ) -> Any:
        try:
            return self.api_client.call_api(
                path,
                method,
                query_params=list((query or {}).items()),
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=(self.timeout, read_timeout or max(self.timeout, 60.0)),
            )
        except ApiException as exc:
            raise self._api_error(exc, method, path) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            log.warning("cluster %s unreachable at %s: %s", self.name, self.server, exc)
            raise ClusterUnreachable(
                f"cluster {self.name} (context {self.context}) did not answer at {self.server} "
                f"within {self.timeout:g}s",
                cluster=self.name,
            ) from exc

    def _api_error(self, exc: ApiException, method: str, path: str) -> ClusterError:
        status = int(exc.status or 0)
        reason = _status_message(exc.body) or exc.reason or "error"
        log.warning("cluster %s: %s %s → %s %s", self.name, method, path, status, reason)
        if status == 403:
            return ClusterForbidden(
                f"cluster {self.name}: the bot is not allowed to {method} {path} ({reason})",
                cluster=self.name,
                status=status,
            )
        if status == 410:
            return ContinueExpired(f"cluster {self.name}: {reason}", cluster=self.name, status=status)
        return ClusterError(
            f"cluster {self.name}: {method} {path} failed: {status} {reason}",
            cluster=self.name,
            status=status,
        )

    def get_json(self, path: str, query: Mapping[str, Any] | None = None) -> dict[str, Any]:
        resp = self._request("GET", path, query)
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

    def list_pages(
        self, path: str, query: Mapping[str, Any] | None = None, *, limit: int = PAGE_SIZE
    ) -> Iterator[Page]:
        """Yield a consistent list page by page; raises ContinueExpired if the token runs out.

        The next page is fetched on a helper thread while the caller works on this one: the
        network wait and the server's work overlap with parsing and projection, which matters at
        300 pages of pods. The continue token is read from the head of the raw page (list metadata
        comes before the items) so the fetch need not wait for the full parse.
        """
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"kube-list-{self.name}")
        try:
            pending: Future[bytes] | None = pool.submit(self.get_raw, path, _page_query(query, limit, ""))
            while pending is not None:
                raw = pending.result()
                guess = _continue_from_head(raw) or ""
                pending = pool.submit(self.get_raw, path, _page_query(query, limit, guess)) if guess else None
                body = json.loads(raw)
                del raw
                meta = body.get("metadata") or {}
                token = str(meta.get("continue") or "")
                if token != guess:
                    # The head scan disagreed with the parsed body: drop the guess, follow the body.
                    if pending is not None:
                        pending.cancel()
                    pending = (
                        pool.submit(self.get_raw, path, _page_query(query, limit, token)) if token else None
                    )
                yield Page(
                    items=body.get("items") or [],
                    resource_version=str(meta.get("resourceVersion", "")),
                    continue_token=token,
                )
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


_CONTINUE = re.compile(rb'"continue"\s*:\s*"((?:[^"\\]|\\.)*)"')


def _page_query(query: Mapping[str, Any] | None, limit: int, token: str) -> dict[str, Any]:
    params = dict(query or {})
    params["limit"] = limit
    if token:
        params["continue"] = token
    return params


def _continue_from_head(raw: bytes) -> str | None:
    """The list's continue token, found before `"items"` without parsing the page; None if absent."""
    items_at = raw.find(b'"items"')
    head = raw[: items_at if items_at >= 0 else 4096]
    match = _CONTINUE.search(head)
    if not match:
        return None
    return str(json.loads(b'"' + match.group(1) + b'"')) or None


def _status_message(body: Any) -> str:
    """The `message` of a Kubernetes Status object in an error body, if there is one."""
    if not body:
        return ""
    try:
        loaded = json.loads(body)
    except (TypeError, ValueError):
        return ""
    return str(loaded.get("message", "")) if isinstance(loaded, dict) else ""
