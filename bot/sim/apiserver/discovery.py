"""Discovery documents: /api, /apis (legacy, aggregated v2 and v2beta1), /apis/<group>, /<group-version>.

kubectl asks for the aggregated form (`Accept: application/json;g=apidiscovery.k8s.io;v=v2;
as=APIGroupDiscoveryList`; kubectl before 1.30 asks for `v=v2beta1` only, the same document under
another apiVersion) and falls back to per-group-version documents; both are built from the
catalog of what is served right now, so a group-version removed by a control-plane upgrade
disappears from discovery as it does from the API. `pods/eviction` is advertised as policy/v1
Eviction, which is how `kubectl drain` decides the eviction API is available.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from bot.sim.apiserver.resources import Catalog, Served

Obj = dict[str, Any]

#: The aggregated discovery versions served (API servers serve v2beta1 from 1.26, v2 from 1.30).
AGGREGATED_VERSIONS = ("v2", "v2beta1")
_PLAIN = ("application/json", "application/*", "*/*")


def aggregated_media_type(version: str) -> str:
    return f"application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"


def negotiate(accept: str) -> str | None:
    """The aggregated discovery version to answer an `Accept` header with, or None for the plain
    document: the first media type the client lists that the sim serves, as the API server picks.

    A client that cannot read the answer's type reads it as the plain document: kubectl 1.29 given
    a v2 aggregated list sees no groups and says "the server doesn't have a resource type".
    """
    for media in accept.split(","):
        kind, *params = (p.strip() for p in media.split(";"))
        options = dict(p.split("=", 1) for p in params if "=" in p)
        if options.get("as") == "APIGroupDiscoveryList":
            version = options.get("v", "")
            if (
                kind == "application/json"
                and options.get("g") == "apidiscovery.k8s.io"
                and version in AGGREGATED_VERSIONS
            ):
                return version
        elif kind in _PLAIN and "as" not in options:
            return None
    return None


_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
_SUB = {
    "status": ("", "", None, ["get", "patch", "update"]),
    "log": ("", "", "Pod", ["get"]),
    "eviction": ("policy", "v1", "Eviction", ["create"]),
    "binding": ("", "", "Binding", ["create"]),
    "scale": ("autoscaling", "v1", "Scale", ["get", "patch", "update"]),
    "finalize": ("", "", None, ["update"]),
}


def _verbs(s: Served) -> list[str]:
    if s.kind.resource == "namespaces":
        return [v for v in _VERBS if v != "deletecollection"]
    return list(_VERBS)


def _hash(s: Served) -> str:
    return base64.b64encode(hashlib.sha256(f"{s.kind.key}/{s.version}".encode()).digest()[:8]).decode()


def _aliases(s: Served) -> Obj:
    """A resource's short names and categories where it has any, as both discovery documents list
    them (after its verbs)."""
    aliases: Obj = {}
    if s.kind.short_names:
        aliases["shortNames"] = list(s.kind.short_names)
    if s.kind.categories:
        aliases["categories"] = list(s.kind.categories)
    return aliases


def resource_list(catalog: Catalog, group: str, version: str) -> Obj | None:
    served = catalog.in_group_version(group, version)
    if not served:
        return None
    resources: list[Obj] = []
    for s in sorted(served, key=lambda s: s.kind.resource):
        r: Obj = {
            "name": s.kind.resource,
            "singularName": s.kind.singular,
            "namespaced": s.kind.namespaced,
            "kind": s.kind.kind,
            "verbs": _verbs(s),
            **_aliases(s),
            "storageVersionHash": _hash(s),
        }
        resources.append(r)
        for sub in s.kind.subresources:
            g, v, kind, verbs = _SUB[sub]
            entry: Obj = {
                "name": f"{s.kind.resource}/{sub}",
                "singularName": "",
                "namespaced": s.kind.namespaced,
            }
            if g:
                entry["group"] = g
                entry["version"] = v
            entry["kind"] = kind or s.kind.kind
            entry["verbs"] = verbs
            resources.append(entry)
    resources.sort(key=lambda r: r["name"])
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}


def api_versions(server_address: str) -> Obj:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group(name: str, versions: list[str]) -> Obj:
    gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": gvs, "preferredVersion": gvs[0]}


def group_list(catalog: Catalog) -> Obj:
    groups = [_group(g, vs) for g, vs in catalog.group_versions().items() if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def group(catalog: Catalog, name: str) -> Obj | None:
    versions = catalog.group_versions().get(name)
    if not versions or not name:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name, versions)}


def aggregated(catalog: Catalog, *, core: bool, version: str = "v2") -> Obj:
    items = []
    for g, versions in catalog.group_versions().items():
        if bool(g) == core:
            continue
        vs = []
        for v in versions:
            resources = []
            for s in sorted(catalog.in_group_version(g, v), key=lambda s: s.kind.resource):
                r: Obj = {
                    "resource": s.kind.resource,
                    "responseKind": {"group": "", "version": "", "kind": s.kind.kind},
                    "scope": "Namespaced" if s.kind.namespaced else "Cluster",
                    "singularResource": s.kind.singular,
                    "verbs": _verbs(s),
                    **_aliases(s),
                }
                subs = []
                for sub in s.kind.subresources:
                    sg, sv, kind, verbs = _SUB[sub]
                    subs.append(
                        {
                            "subresource": sub,
                            "responseKind": {"group": sg, "version": sv, "kind": kind or s.kind.kind},
                            "verbs": verbs,
                        }
                    )
                if subs:
                    r["subresources"] = subs
                resources.append(r)
            vs.append({"version": v, "resources": resources, "freshness": "Current"})
        items.append({"metadata": {"name": g} if g else {}, "versions": vs})
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": f"apidiscovery.k8s.io/{version}",
        "metadata": {},
        "items": items,
    }


def openapi_v3_root(catalog: Catalog) -> Obj:
    """/openapi/v3: one entry per served group-version, as kubectl's OpenAPI v3 client expects."""
    paths: Obj = {}
    for group, versions in catalog.group_versions().items():
        for version in versions:
            key = f"apis/{group}/{version}" if group else f"api/{version}"
            digest = hashlib.sha256(f"{catalog.version}/{key}".encode()).hexdigest().upper()
            paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}
    return {"paths": paths}


def openapi_v3_group_version(catalog: Catalog, group: str, version: str) -> Obj | None:
    """A minimal OpenAPI v3 document: each resource's PATCH operation with its GVK and `fieldValidation`.

    That is what kubectl checks before it trusts the server to validate (`apply`, `create -f`);
    without it kubectl falls back to client-side validation and needs full schemas. Component
    schemas are left out, so kubectl computes apply patches from its built-in types.
    """
    served = catalog.in_group_version(group, version)
    if not served:
        return None
    prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
    paths: Obj = {}
    for s in served:
        gvk = {"group": group, "version": version, "kind": s.kind.kind}
        base = (
            f"{prefix}/namespaces/{{namespace}}/{s.kind.resource}"
            if s.kind.namespaced
            else f"{prefix}/{s.kind.resource}"
        )
        params = [{"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
                  for n in ("dryRun", "fieldManager", "fieldValidation")]  # fmt: skip
        paths[f"{base}/{{name}}"] = {
            "patch": {"operationId": f"patch{s.kind.kind}", "x-kubernetes-action": "patch",
                      "x-kubernetes-group-version-kind": gvk, "parameters": [*params, {"name": "force", "in": "query"}]},
            "put": {"operationId": f"replace{s.kind.kind}", "x-kubernetes-action": "put",
                    "x-kubernetes-group-version-kind": gvk, "parameters": params},
        }  # fmt: skip
        paths[base] = {
            "post": {"operationId": f"create{s.kind.kind}", "x-kubernetes-action": "post",
                     "x-kubernetes-group-version-kind": gvk, "parameters": params},
        }  # fmt: skip
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": catalog.version}, "paths": paths,
            "components": {"schemas": {}}}  # fmt: skip
