"""The API server's write semantics over the store: create, update, patch, delete, scale, bind.

This layer is shared by the HTTP handler and the simulated controllers, so a ReplicaSet
controller creating a pod goes through the same defaulting and admission as `kubectl create`, and
the node-group pipeline evicts through the same code as `kubectl drain`. What it implements:

- metadata bookkeeping: uid, creationTimestamp, generation bumped on spec changes, name/namespace
  checks, optimistic concurrency (409 Conflict on a stale resourceVersion);
- spec and status written separately for kinds with a status subresource;
- graceful deletion of pods (deletionTimestamp = now + grace; the kubelet finishes it), finalizers,
  and the propagation policies (Background, Foreground, Orphan) that the garbage collector honours;
- namespaces: creation refused in a missing (404) or terminating (403) namespace.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from bot.sim.apiserver.clock import SimClock, rfc3339
from bot.sim.apiserver.defaults import apply_defaults
from bot.sim.apiserver.errors import ApiError, already_exists, bad_request, conflict, invalid, not_found
from bot.sim.apiserver.objects import Ids, clone, meta
from bot.sim.apiserver.patch import PatchError, json_patch, merge_patch, strategic_merge_patch
from bot.sim.apiserver.resources import KINDS_BY_KEY, Catalog, Kind
from bot.sim.apiserver.selectors import SelectorError, selector_from_object
from bot.sim.apiserver.store import Entry, Obj, Store, make_entry

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_LABEL_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_WORKLOADS = ("Deployment", "ReplicaSet", "DaemonSet", "StatefulSet")

STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"


@dataclass(frozen=True)
class DeleteOptions:
    grace_period: int | None = None
    propagation: str = ""  # Background | Foreground | Orphan | "" (default)
    uid: str = ""
    resource_version: str = ""
    dry_run: bool = False

    @classmethod
    def parse(cls, body: Any, query: dict[str, str]) -> DeleteOptions:
        body = body if isinstance(body, dict) else {}
        grace: Any = body.get("gracePeriodSeconds", query.get("gracePeriodSeconds"))
        propagation = str(body.get("propagationPolicy") or query.get("propagationPolicy") or "")
        orphan = body.get("orphanDependents", query.get("orphanDependents"))
        if not propagation and orphan in (True, "true"):
            propagation = "Orphan"
        if propagation and propagation not in ("Background", "Foreground", "Orphan"):
            raise bad_request(f"propagationPolicy: Unsupported value: {propagation!r}")
        pre = body.get("preconditions") or {}
        dry = body.get("dryRun") or ([query["dryRun"]] if query.get("dryRun") else [])
        try:
            grace_int = None if grace in (None, "") else int(grace)
        except (TypeError, ValueError):
            raise bad_request(f"gracePeriodSeconds: Invalid value: {grace!r}") from None
        return cls(
            grace_period=grace_int,
            propagation=propagation,
            uid=str(pre.get("uid") or ""),
            resource_version=str(pre.get("resourceVersion") or ""),
            dry_run="All" in dry,
        )


def decode_body(raw: bytes, content_type: str = "application/json") -> Any:
    if not raw:
        return None
    if "protobuf" in content_type or "cbor" in content_type:
        # kubectl's typed clients (e.g. `kubectl create deployment`) send protobuf; only JSON and YAML
        # are understood here, and the API server's answer to an unknown body format is a 415.
        raise ApiError(
            415,
            "UnsupportedMediaType",
            f"the body of the request was in an unknown format - accepted media types include: "
            f"application/json, application/yaml (got {content_type})",
        )
    try:
        if "yaml" in content_type:
            return yaml.safe_load(raw)
        return json.loads(raw)
    except (ValueError, yaml.YAMLError) as exc:
        raise bad_request(f"the object provided is unrecognized: {exc}") from None


class Api:
    """Kubernetes REST semantics over a Store. Callers hold no lock; each method takes the store's."""

    def __init__(self, store: Store, catalog: Catalog, clock: SimClock, ids: Ids) -> None:
        self.store = store
        self.catalog = catalog
        self.clock = clock
        self.ids = ids
        #: Called with (kind, entry) when a pod's graceful deletion starts (the kubelet reacts).
        self.on_graceful_delete: list[Callable[[Kind, Entry], None]] = []
        #: Mutating admission (e.g. the Fargate profile webhook), called on every new object.
        self.admission: list[Callable[[Kind, Obj], None]] = []
        #: Every eviction the API accepted (namespace, name, uid, time): what a test counts to show
        #: that a drain evicted each pod once (`GET /sim/evictions`).
        self.evictions: list[dict[str, Any]] = []

    # ---- reads ----------------------------------------------------------------------------------

    def entry(self, kind: Kind, namespace: str, name: str) -> Entry:
        e = self.store.entry(kind.key, namespace if kind.namespaced else "", name)
        if e is None:
            raise not_found(kind.resource, name, kind.group)
        return e

    def get(self, kind_key: str, namespace: str, name: str) -> Obj | None:
        return self.store.get(kind_key, namespace, name)

    # ---- create ---------------------------------------------------------------------------------

    def apply_manifests(self, manifests: list[Obj]) -> list[str]:
        """Create or update objects from manifests (what the scenario's `objects` and /sim/apply do);
        returns `kind/name` for each."""
        out = []
        for manifest in manifests:
            served = self.catalog.by_kind(str(manifest.get("apiVersion", "")), str(manifest.get("kind", "")))
            if served is None:
                raise ApiError(
                    400,
                    "BadRequest",
                    f"{manifest.get('apiVersion')} {manifest.get('kind')} is not served by this cluster "
                    f"(version {self.catalog.version})",
                )
            m = manifest.get("metadata") or {}
            ns = str(m.get("namespace") or ("default" if served.kind.namespaced else ""))
            name = str(m.get("name", ""))
            existing = (
                self.store.entry(served.kind.key, ns if served.kind.namespaced else "", name)
                if name
                else None
            )
            if existing is None:
                entry = self.create(served.kind, ns, manifest)
                if (served.kind.kind == "CustomResourceDefinition" or served.kind.extension) and manifest.get(
                    "status"
                ) is not None:
                    # A scenario states a CRD's history (storedVersions from versions it once had), or
                    # what an extension's controller wrote (a Certificate's notAfter and renewalTime).
                    fresh = entry.obj()
                    fresh["status"] = {**fresh.get("status", {}), **manifest["status"]}
                    entry = self.update(served.kind, ns, name, fresh, subresource="status")
            else:
                body = dict(manifest)
                body["metadata"] = {**m, "resourceVersion": str(existing.rv)}
                entry = self.update(served.kind, ns, name, body)
                if served.kind.has_status and manifest.get("status") is not None:
                    fresh = entry.obj()
                    fresh["status"] = manifest["status"]
                    entry = self.update(served.kind, ns, name, fresh, subresource="status")
            out.append(f"{served.kind.kind.lower()}/{entry.name}")
        return out

    def create(self, kind: Kind, namespace: str, obj: Any, *, dry_run: bool = False) -> Entry:
        if not isinstance(obj, dict):
            raise bad_request("the body of the request was in an unknown format")
        obj = clone(obj)
        m = meta(obj)
        with self.store.lock:
            if kind.namespaced:
                body_ns = m.get("namespace")
                if body_ns and namespace and body_ns != namespace:
                    raise bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request"
                    )
                namespace = namespace or body_ns or ""
                if not namespace:
                    raise bad_request("the server could not find the requested resource (namespace missing)")
                self._check_namespace(namespace, kind)
                m["namespace"] = namespace
            else:
                m.pop("namespace", None)
            if not m.get("name"):
                prefix = m.get("generateName")
                if not prefix:
                    raise invalid(
                        kind.kind,
                        "",
                        kind.group,
                        [
                            (
                                "metadata.name",
                                "FieldValueRequired",
                                "Required value: name or generateName is required",
                            )
                        ],
                    )
                m["name"] = f"{prefix}{self.ids.suffix(5)}"
            name = str(m["name"])
            if self.store.entry(kind.key, namespace if kind.namespaced else "", name) is not None:
                raise already_exists(kind.resource, name, kind.group)
            for field in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
                m.pop(field, None)
            if not _managed_fields(m):
                m.pop("managedFields", None)
            m["uid"] = self.ids.uid()
            m["creationTimestamp"] = rfc3339(self.clock.now())
            if kind.generation:
                m["generation"] = 1
            if kind.has_status and kind.kind not in ("Node", "PersistentVolume"):
                obj.pop("status", None)
            apply_defaults(kind.kind, obj, self.ids, creating=True)
            for admit in self.admission:
                admit(kind, obj)
            if self.admission and kind.kind == "Pod":
                # What a mutating webhook adds is defaulted too (the API server defaults after admission).
                apply_defaults(kind.kind, obj, self.ids, creating=False)
            self._validate(kind, obj, None)
            obj = _ordered(obj)
            if dry_run:
                return make_entry(kind, obj, self.store.rv)
            return self.store.create(kind, obj)

    def _check_namespace(self, namespace: str, kind: Kind) -> None:
        ns = self.store.get("namespaces", "", namespace)
        if ns is None:
            raise not_found("namespaces", namespace)
        if ns.get("metadata", {}).get("deletionTimestamp") and kind.kind != "Event":
            raise ApiError(
                403,
                "Forbidden",
                f'{kind.resource} "" is forbidden: unable to create new content in namespace {namespace} '
                "because it is being terminated",
                {
                    "kind": kind.resource,
                    "causes": [
                        {
                            "reason": "NamespaceTerminating",
                            "message": f"namespace {namespace} is being terminated",
                            "field": "metadata.namespace",
                        }
                    ],
                },
            )

    # ---- update / patch -------------------------------------------------------------------------

    def update(
        self, kind: Kind, namespace: str, name: str, obj: Any, *, subresource: str = "", dry_run: bool = False
    ) -> Entry:
        if not isinstance(obj, dict):
            raise bad_request("the body of the request was in an unknown format")
        m = obj.get("metadata") or {}
        if m.get("name") and m["name"] != name:
            raise bad_request(
                f"the name of the object ({m['name']}) does not match the name on the URL ({name})"
            )
        if kind.namespaced and m.get("namespace") and m["namespace"] != namespace:
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        with self.store.lock:
            current = self.entry(kind, namespace, name)
            return self._apply(
                kind, current, clone(obj), subresource=subresource, check_rv=True, dry_run=dry_run
            )

    def patch(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        content_type: str,
        body: bytes,
        *,
        subresource: str = "",
        dry_run: bool = False,
    ) -> Entry:
        ctype = content_type.split(";")[0].strip()
        patch = decode_body(body, ctype)
        with self.store.lock:
            current_entry = self.store.entry(kind.key, namespace if kind.namespaced else "", name)
            if current_entry is None:
                if ctype == APPLY and isinstance(patch, dict):
                    # Server-side apply creates what does not exist yet.
                    return self.create(kind, namespace, patch, dry_run=dry_run)
                raise not_found(kind.resource, name, kind.group)
            current = current_entry.obj()
            try:
                if ctype == STRATEGIC:
                    patched = strategic_merge_patch(current, patch)
                elif ctype == MERGE:
                    patched = merge_patch(current, patch)
                elif ctype == JSON_PATCH:
                    patched = json_patch(current, patch)
                elif ctype == APPLY:
                    # Approximation: field ownership is not tracked; the applied config is merged in.
                    if isinstance(patch, dict):
                        patch = {k: v for k, v in patch.items() if k not in ("apiVersion", "kind")}
                    patched = strategic_merge_patch(current, patch)
                else:
                    raise ApiError(
                        415,
                        "UnsupportedMediaType",
                        f"the body of the request was in an unknown format - accepted media types include: "
                        f"{JSON_PATCH}, {MERGE}, {APPLY}, {STRATEGIC}",
                    )
            except PatchError as exc:
                if exc.status == 400:
                    raise bad_request(str(exc)) from None
                raise ApiError(422, "Invalid", str(exc)) from None
            if not isinstance(patched, dict):
                raise bad_request("patch produced a value that is not an object")
            # A patch is checked against the current version only if it carries a resourceVersion.
            pm = patched.get("metadata") or {}
            if pm.get("name") not in (None, name):
                raise bad_request(
                    f"the name of the object ({pm.get('name')}) does not match the name on the URL ({name})"
                )
            check = str(pm.get("resourceVersion", "")) != str(current_entry.rv)
            return self._apply(
                kind, current_entry, patched, subresource=subresource, check_rv=check, dry_run=dry_run
            )

    def _apply(
        self, kind: Kind, current: Entry, new: Obj, *, subresource: str, check_rv: bool, dry_run: bool
    ) -> Entry:
        old = current.view()  # shared: read, and cloned where it goes into `new`
        nm = new.setdefault("metadata", {})
        if not isinstance(nm, dict):
            raise bad_request("metadata must be an object")
        wanted_rv = str(nm.get("resourceVersion") or "")
        if check_rv and wanted_rv and wanted_rv != str(current.rv):
            raise conflict(kind.resource, current.name, kind.group)
        om = old["metadata"]
        if subresource == "status":
            merged = clone(old)
            merged["status"] = new.get("status", {})
            new = merged
        elif subresource in ("", "finalize"):
            if kind.has_status and kind.kind != "Namespace":
                if "status" in old:
                    new["status"] = clone(old["status"])
                else:
                    new.pop("status", None)
            if kind.kind == "Namespace" and subresource == "":
                new["status"] = clone(old.get("status", {}))
            if kind.kind == "Namespace" and subresource == "finalize":
                merged = clone(old)
                merged.setdefault("spec", {})["finalizers"] = (new.get("spec") or {}).get("finalizers") or []
                new = merged
        nm = new.setdefault("metadata", {})
        for field in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "namespace",
            "name",
        ):
            if field in om:
                nm[field] = om[field]
            else:
                nm.pop(field, None)
        # As the real server does: managedFields a client sends replace the old ones; a write
        # without them keeps what the object had (field ownership itself is not tracked).
        if not _managed_fields(nm):
            nm.pop("managedFields", None)
            if _managed_fields(om):
                nm["managedFields"] = clone(om["managedFields"])
        apply_defaults(kind.kind, new, self.ids, creating=False)
        self._validate(kind, new, old)
        if kind.generation and new.get("spec") != old.get("spec"):
            nm["generation"] = int(om.get("generation", 1)) + 1
        new = _ordered(new)
        if dry_run:
            return make_entry(kind, new, current.rv)
        if om.get("deletionTimestamp") and not nm.get("finalizers") and self._deletion_complete(kind, new):
            self.store.update(kind, new, current)
            latest = self.store.entry(kind.key, current.namespace, current.name)
            assert latest is not None
            return self.store.delete(kind, latest)
        return self.store.update(kind, new, current)

    @staticmethod
    def _deletion_complete(kind: Kind, obj: Obj) -> bool:
        if kind.kind == "Namespace":
            return not (obj.get("spec") or {}).get("finalizers")
        if kind.kind == "Pod":
            # A gracefully deleted pod disappears when the kubelet says so, not when finalizers clear.
            return int(obj["metadata"].get("deletionGracePeriodSeconds") or 0) == 0
        return True

    def write(self, kind_key: str, obj: Obj, *, status: bool = False) -> Entry:
        """Controllers' update: no resourceVersion check beyond the current one, status or spec."""
        kind = KINDS_BY_KEY[kind_key]
        m = obj["metadata"]
        with self.store.lock:
            current = self.entry(kind, m.get("namespace", ""), m["name"])
            return self._apply(
                kind, current, obj, subresource="status" if status else "", check_rv=False, dry_run=False
            )

    def write_full(self, kind_key: str, obj: Obj) -> Entry:
        """Update spec, metadata and status together (the simulator's own bookkeeping)."""
        kind = KINDS_BY_KEY[kind_key]
        m = obj["metadata"]
        with self.store.lock:
            current = self.entry(kind, m.get("namespace", ""), m["name"])
            status = obj.get("status")
            entry = self._apply(kind, current, clone(obj), subresource="", check_rv=False, dry_run=False)
            if kind.has_status and status is not None and self.store.entry(kind.key, *entry.key) is not None:
                fresh = entry.obj()
                fresh["status"] = status
                entry = self.store.update(kind, fresh, entry)
            return entry

    # ---- delete ---------------------------------------------------------------------------------

    def delete(
        self, kind: Kind, namespace: str, name: str, opts: DeleteOptions | None = None
    ) -> tuple[Entry, bool]:
        """Delete an object. Returns (its latest state, whether it is gone now)."""
        opts = opts or DeleteOptions()
        with self.store.lock:
            current = self.entry(kind, namespace, name)
            obj = current.obj()
            m = obj["metadata"]
            if opts.uid and opts.uid != current.uid:
                raise conflict(
                    kind.resource,
                    name,
                    kind.group,
                    f"Precondition failed: UID in precondition: {opts.uid}, UID in object meta: {current.uid}",
                )
            if opts.resource_version and opts.resource_version != str(current.rv):
                raise conflict(
                    kind.resource,
                    name,
                    kind.group,
                    f"Precondition failed: ResourceVersion in precondition: {opts.resource_version}, "
                    f"ResourceVersion in object meta: {current.rv}",
                )
            now = self.clock.now()
            finalizers = list(m.get("finalizers") or [])
            if kind.kind == "Namespace":
                if not m.get("deletionTimestamp"):
                    m["deletionTimestamp"] = rfc3339(now)
                    m["deletionGracePeriodSeconds"] = 0
                    obj["status"] = {"phase": "Terminating"}
                    if opts.dry_run:
                        return make_entry(kind, obj, current.rv), False
                    return self.store.update(kind, obj, current), False
                return current, False
            if kind.kind == "Pod":
                return self._delete_pod(kind, current, obj, opts, now)
            policy = opts.propagation
            if policy == "Orphan" and "orphan" not in finalizers:
                finalizers.append("orphan")
            if policy == "Foreground" and "foregroundDeletion" not in finalizers:
                finalizers.append("foregroundDeletion")
            if finalizers:
                if opts.dry_run:
                    return current, False
                changed = not m.get("deletionTimestamp") or finalizers != list(m.get("finalizers") or [])
                if changed:
                    m.setdefault("deletionTimestamp", rfc3339(now))
                    m.setdefault("deletionGracePeriodSeconds", 0)
                    m["finalizers"] = finalizers
                    if kind.generation:
                        m["generation"] = int(m.get("generation", 1)) + 1
                    current = self.store.update(kind, obj, current)
                return current, False
            if opts.dry_run:
                return current, True
            return self.store.delete(kind, current), True

    def _delete_pod(
        self, kind: Kind, current: Entry, obj: Obj, opts: DeleteOptions, now: float
    ) -> tuple[Entry, bool]:
        m, spec = obj["metadata"], obj.get("spec") or {}
        grace = opts.grace_period
        if grace is None:
            grace = int(spec.get("terminationGracePeriodSeconds", 30))
        phase = (obj.get("status") or {}).get("phase")
        # Never scheduled, or already finished: nothing runs, so there is nothing to wait for.
        if not spec.get("nodeName") or phase in ("Succeeded", "Failed"):
            grace = 0
        grace = max(grace, 0)
        finalizers = list(m.get("finalizers") or [])
        if opts.propagation == "Orphan" and "orphan" not in finalizers:
            finalizers.append("orphan")
        if grace == 0 and not finalizers:
            if opts.dry_run:
                return current, True
            return self.store.delete(kind, current), True
        if opts.dry_run:
            return current, False
        existing = m.get("deletionGracePeriodSeconds")
        if m.get("deletionTimestamp") and existing is not None and int(existing) <= grace:
            return current, False
        m["deletionTimestamp"] = rfc3339(now + grace)
        m["deletionGracePeriodSeconds"] = grace
        m["finalizers"] = finalizers or None
        if not finalizers:
            m.pop("finalizers")
        m["generation"] = int(m.get("generation", 1)) + 1
        entry = self.store.update(kind, obj, current)
        for hook in self.on_graceful_delete:
            hook(kind, entry)
        return entry, False

    def remove_now(self, kind_key: str, namespace: str, name: str) -> Entry | None:
        """Remove an object at once (the kubelet confirming a pod is gone, the GC after finalizers)."""
        kind = KINDS_BY_KEY[kind_key]
        with self.store.lock:
            current = self.store.entry(kind_key, namespace if kind.namespaced else "", name)
            if current is None:
                return None
            return self.store.delete(kind, current)

    # ---- validation -----------------------------------------------------------------------------

    def _validate(self, kind: Kind, obj: Obj, old: Obj | None) -> None:
        name = str(obj["metadata"].get("name", ""))
        causes: list[tuple[str, str, str]] = []
        if kind.kind not in ("Event",) and (len(name) > 253 or not _NAME.match(name)):
            causes.append(
                (
                    "metadata.name",
                    "FieldValueInvalid",
                    f"Invalid value: {name!r}: a lowercase RFC 1123 subdomain must consist of lower case "
                    "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
                )
            )
        if kind.kind == "Namespace" and not _LABEL_NAME.match(name):
            causes.append(
                ("metadata.name", "FieldValueInvalid", f"Invalid value: {name!r}: a lowercase RFC 1123 label")
            )
        spec = obj.get("spec") or {}
        if kind.kind == "Pod":
            if not spec.get("containers"):
                causes.append(("spec.containers", "FieldValueRequired", "Required value"))
            if old is not None:
                causes.extend(_pod_update_causes(old, obj))
        if kind.kind in _WORKLOADS:
            template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
            try:
                sel = selector_from_object(spec.get("selector"))
            except SelectorError as exc:
                causes.append(("spec.selector", "FieldValueInvalid", str(exc)))
            else:
                if sel.nothing or sel.empty:
                    causes.append(("spec.selector", "FieldValueRequired", "Required value"))
                elif not sel.matches(template_labels):
                    causes.append(
                        (
                            "spec.template.metadata.labels",
                            "FieldValueInvalid",
                            f"Invalid value: {template_labels!r}: `selector` does not match template `labels`",
                        )
                    )
            if old is not None and (old.get("spec") or {}).get("selector") != spec.get("selector"):
                causes.append(("spec.selector", "FieldValueInvalid", "field is immutable"))
            if not ((spec.get("template") or {}).get("spec") or {}).get("containers"):
                causes.append(("spec.template.spec.containers", "FieldValueRequired", "Required value"))
            if int(spec.get("replicas", 0) or 0) < 0:
                causes.append(("spec.replicas", "FieldValueInvalid", "must be greater than or equal to 0"))
        if (
            kind.kind == "PodDisruptionBudget"
            and spec.get("minAvailable") is not None
            and spec.get("maxUnavailable") is not None
        ):
            causes.append(("spec", "FieldValueInvalid", "minAvailable and maxUnavailable cannot be both set"))
        if causes:
            raise invalid(kind.kind, name, kind.group, causes)


def _pod_update_causes(old: Obj, new: Obj) -> list[tuple[str, str, str]]:
    """Pod specs are immutable apart from images, activeDeadlineSeconds and added tolerations."""

    def masked(spec: Obj) -> Obj:
        s: Obj = clone(spec)
        for group in ("containers", "initContainers"):
            for c in s.get(group) or []:
                c.pop("image", None)
        s.pop("activeDeadlineSeconds", None)
        s.pop("tolerations", None)
        s.pop("terminationGracePeriodSeconds", None)
        return s

    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if old_spec == new_spec:  # a status write, mostly: nothing to mask
        return []
    if masked(old_spec) == masked(new_spec):
        old_tol = old_spec.get("tolerations") or []
        if all(t in (new_spec.get("tolerations") or []) for t in old_tol):
            return []
    return [
        (
            "spec",
            "FieldValueForbidden",
            "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
            "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions "
            "to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
            "previously negative)",
        )
    ]


_ORDER = ("metadata", "spec", "data", "stringData", "binaryData", "type", "status")


def _managed_fields(meta: Obj) -> bool:
    """Whether metadata carries a usable managedFields list (entries that are objects)."""
    entries = meta.get("managedFields")
    return isinstance(entries, list) and bool(entries) and all(isinstance(e, dict) for e in entries)


def _ordered(obj: Obj) -> Obj:
    """metadata, spec, …, status — the order real objects serialize in (readers look for it)."""
    out = {k: obj[k] for k in _ORDER if k in obj}
    for k, v in obj.items():
        if k not in out:
            out[k] = v
    if "status" in out:
        out["status"] = out.pop("status")
    return out
