"""The remaining control-plane loops: garbage collection, namespace deletion, Endpoints, and
PodDisruptionBudget status.

- Garbage collector: when an owner is deleted its dependents are deleted (background), or freed of
  the ownerReference (`orphan` finalizer), or deleted before the owner goes (`foregroundDeletion`).
- Namespace controller: a namespace being deleted has all its content deleted, then its
  `kubernetes` finalizer removed, then disappears.
- ServiceAccount controller: every active namespace gets its `default` ServiceAccount (the API
  refuses pods until it exists, so clients wait for it after creating a namespace).
- Endpoints controller: a Service with a selector gets Endpoints listing its ready and not-ready
  pod addresses.
- Disruption controller: PDB status from `disruption.compute_status`, recomputed when matching pods,
  their controllers or the PDB change.
"""

from __future__ import annotations

import abc
import copy
from typing import Any

from bot.sim.apiserver.api import DeleteOptions
from bot.sim.apiserver.eviction import PDB
from bot.sim.apiserver.resources import KINDS, KINDS_BY_KEY
from bot.sim.apiserver.selectors import LabelSelector, SelectorError, selector_from_map, selector_from_object
from bot.sim.apiserver.store import DELETED, Entry, Record
from bot.sim.controllers.disruption import DELETION_TIMEOUT, compute_status
from bot.sim.controllers.engine import Engine

Obj = dict[str, Any]


class _Loop(abc.ABC):
    """One of these loops: registered with the engine when made, which hands it every change
    (`on_change`) and calls its `sync` for each key it enqueued."""

    name = ""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.api = engine.api
        engine.add(self)

    @abc.abstractmethod
    def on_change(self, record: Record) -> None: ...

    @abc.abstractmethod
    def sync(self, key: Any) -> None: ...


class GarbageCollector(_Loop):
    name = "garbage-collector"

    def __init__(self, engine: Engine) -> None:
        #: Owners in foreground deletion: uid → (kind key, namespace, name).
        self._waiting: dict[str, tuple[str, str, str]] = {}
        super().__init__(engine)

    def on_change(self, record: Record) -> None:
        e = record.entry
        if record.type == DELETED:
            self._waiting.pop(e.uid, None)
            if e.uid in self.engine.store.dependents:
                self.engine.enqueue(self.name, ("gone", e.uid))
            # A dependent that goes away may unblock an owner waiting in foreground deletion.
            for uid in e.owners:
                waiting = self._waiting.get(uid)
                if waiting is not None:
                    self.engine.enqueue(self.name, ("finalize", *waiting))
        elif b'"deletionTimestamp"' in e.raw and (b'"orphan"' in e.raw or b'"foregroundDeletion"' in e.raw):
            if b'"foregroundDeletion"' in e.raw:
                self._waiting[e.uid] = (e.kind.key, e.namespace, e.name)
            self.engine.enqueue(self.name, ("finalize", e.kind.key, e.namespace, e.name))

    def sync(self, key: tuple[str, ...]) -> None:
        if key[0] == "gone":
            for dep in self.engine.store.dependents_of(key[1]):
                obj = dep.obj()
                refs = obj["metadata"].get("ownerReferences") or []
                others = [r for r in refs if r.get("uid") != key[1]]
                if others and any(self._owner_exists(dep.namespace, r) for r in others):
                    obj["metadata"]["ownerReferences"] = others
                    self.api.write(dep.kind.key, obj)
                    continue
                if not obj["metadata"].get("deletionTimestamp"):
                    self.api.delete(
                        dep.kind, dep.namespace, dep.name, DeleteOptions(propagation="Background")
                    )
        elif key[0] == "finalize":
            self._finalize(key[1], key[2], key[3])

    def _owner_exists(self, namespace: str, ref: Obj) -> bool:
        for kind in KINDS:
            if kind.kind == ref.get("kind"):
                e = self.engine.store.entry(
                    kind.key, namespace if kind.namespaced else "", str(ref.get("name"))
                )
                return e is not None and e.uid == ref.get("uid")
        return False

    def _finalize(self, kind_key: str, namespace: str, name: str) -> None:
        entry = self.engine.store.entry(kind_key, namespace, name)
        if entry is None:
            return
        obj = entry.obj()
        finalizers = list(obj["metadata"].get("finalizers") or [])
        if not obj["metadata"].get("deletionTimestamp"):
            return
        deps = self.engine.store.dependents_of(entry.uid)
        if "orphan" in finalizers:
            for dep in deps:
                d = dep.obj()
                d["metadata"]["ownerReferences"] = [
                    r for r in d["metadata"].get("ownerReferences") or [] if r.get("uid") != entry.uid
                ]
                if not d["metadata"]["ownerReferences"]:
                    del d["metadata"]["ownerReferences"]
                self.api.write(dep.kind.key, d)
            finalizers.remove("orphan")
        elif "foregroundDeletion" in finalizers:
            pending = False
            for dep in deps:
                pending = True
                if b'"deletionTimestamp"' not in dep.raw:
                    self.api.delete(
                        dep.kind, dep.namespace, dep.name, DeleteOptions(propagation="Foreground")
                    )
            if pending:
                return
            finalizers.remove("foregroundDeletion")
        else:
            return
        obj["metadata"]["finalizers"] = finalizers
        if not finalizers:
            del obj["metadata"]["finalizers"]
        self.api.write(kind_key, obj)


class Namespaces(_Loop):
    name = "namespace"

    def on_change(self, record: Record) -> None:
        e = record.entry
        if e.kind.key == "namespaces" and record.type != DELETED and b'"deletionTimestamp"' in e.raw:
            self.engine.enqueue(self.name, e.name)
        elif record.type == DELETED and e.kind.namespaced:
            ns = self.api.store.entry("namespaces", "", e.namespace)
            if ns is not None and b'"deletionTimestamp"' in ns.raw:
                self.engine.enqueue(self.name, e.namespace)

    def sync(self, name: str) -> None:
        entry = self.api.store.entry("namespaces", "", name)
        if entry is None:
            return
        remaining = 0
        for kind in KINDS:
            if not kind.namespaced:
                continue
            for e in self.api.store.entries(kind.key, name):
                remaining += 1
                if b'"deletionTimestamp"' not in e.raw:
                    self.api.delete(kind, name, e.name, DeleteOptions(propagation="Background"))
        if remaining:
            return
        ns = entry.obj()
        ns.setdefault("spec", {})["finalizers"] = []
        self.api.update(KINDS_BY_KEY["namespaces"], "", name, ns, subresource="finalize")


class ServiceAccounts(_Loop):
    name = "serviceaccount"

    def on_change(self, record: Record) -> None:
        e = record.entry
        if record.type == DELETED:
            if e.kind.key == "serviceaccounts" and e.name == "default":
                self.engine.enqueue(self.name, e.namespace)  # recreated, as the real controller does
        elif e.kind.key == "namespaces" and b'"deletionTimestamp"' not in e.raw:
            self.engine.enqueue(self.name, e.name)

    def sync(self, namespace: str) -> None:
        ns = self.api.store.entry("namespaces", "", namespace)
        if ns is None or b'"deletionTimestamp"' in ns.raw:
            return
        if self.api.store.entry("serviceaccounts", namespace, "default") is None:
            self.api.create(KINDS_BY_KEY["serviceaccounts"], namespace, {"metadata": {"name": "default"}})


class EndpointsController(_Loop):
    name = "endpoints"

    def on_change(self, record: Record) -> None:
        e = record.entry
        if e.kind.key == "services":
            self.engine.enqueue(self.name, e.key)
        elif e.kind.key == "pods":
            for svc in self.api.store.entries("services", e.namespace):
                self.engine.enqueue(self.name, svc.key)

    def sync(self, key: tuple[str, str]) -> None:
        svc = self.api.store.get("services", *key)
        existing = self.api.store.get("endpoints", *key)
        if svc is None:
            if existing is not None:
                self.api.remove_now("endpoints", *key)
            return
        selector = (svc.get("spec") or {}).get("selector")
        if not selector:
            return
        sel = selector_from_map(selector)
        ready: list[Obj] = []
        not_ready: list[Obj] = []
        for e in self.api.store.entries("pods", key[0]):
            if (
                not sel.matches(e.labels)
                or not e.fields.get("status.podIP")
                or b'"deletionTimestamp"' in e.raw
            ):
                continue
            pod = e.obj()
            address = {
                "ip": e.fields["status.podIP"],
                "nodeName": e.fields.get("spec.nodeName", ""),
                "targetRef": {"kind": "Pod", "namespace": key[0], "name": e.name, "uid": e.uid},
            }
            ok = any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (pod.get("status") or {}).get("conditions") or []
            )
            (ready if ok else not_ready).append(address)
        ports = [
            {
                "name": p.get("name", ""),
                "port": p.get("targetPort", p.get("port")),
                "protocol": p.get("protocol", "TCP"),
            }
            for p in (svc.get("spec") or {}).get("ports") or []
        ]
        for p in ports:
            if not p["name"]:
                del p["name"]
            if not isinstance(p["port"], int):
                p["port"] = 8080
        subsets: list[Obj] = []
        if ready or not_ready:
            subset: Obj = {}
            if ready:
                subset["addresses"] = ready
            if not_ready:
                subset["notReadyAddresses"] = not_ready
            subset["ports"] = ports
            subsets.append(subset)
        body: Obj = {
            "metadata": {
                "name": key[1],
                "namespace": key[0],
                "labels": dict(svc["metadata"].get("labels") or {}),
            }
        }
        if subsets:
            body["subsets"] = subsets
        if existing is None:
            self.api.create(KINDS_BY_KEY["endpoints"], key[0], body)
        else:
            existing.pop("subsets", None)
            existing.update({k: v for k, v in body.items() if k != "metadata"})
            existing["metadata"]["labels"] = body["metadata"]["labels"]
            self.api.write("endpoints", existing)


class Disruption(_Loop):
    name = "disruption"

    def __init__(self, engine: Engine) -> None:
        #: PDB key → (resourceVersion, its parsed selector or None if invalid): a pod change is
        #: matched against its namespace's PDBs without decoding them.
        self._selectors: dict[tuple[str, str], tuple[int, LabelSelector | None]] = {}
        super().__init__(engine)

    def on_change(self, record: Record) -> None:
        e = record.entry
        if e.kind.key == PDB:
            if record.type != DELETED:
                self.engine.enqueue(self.name, e.key)
            else:
                self._selectors.pop(e.key, None)
        elif e.kind.key in ("pods", "deployments.apps", "statefulsets.apps", "replicasets.apps"):
            for pdb in self.api.store.entries(PDB, e.namespace):
                if e.kind.key != "pods" or self._selects(
                    pdb, e.labels, record.prev.labels if record.prev else None
                ):
                    self.engine.enqueue(self.name, pdb.key)

    def _selects(self, pdb: Entry, labels: dict[str, str], old: dict[str, str] | None) -> bool:
        cached = self._selectors.get(pdb.key)
        if cached is None or cached[0] != pdb.rv:
            try:
                sel: LabelSelector | None = selector_from_object(
                    (pdb.obj().get("spec") or {}).get("selector")
                )
            except SelectorError:
                sel = None
            cached = (pdb.rv, sel)
            self._selectors[pdb.key] = cached
        sel = cached[1]
        if sel is None:
            return False
        return sel.matches(labels) or (old is not None and sel.matches(old))

    def sync(self, key: tuple[str, str]) -> None:
        pdb = self.api.store.get(PDB, *key)
        if pdb is None:
            return
        status = compute_status(self.api, pdb, self.engine.clock.now())
        if status.get("disruptedPods"):
            # An evicted pod that never goes away stops counting as disrupted after the timeout.
            self.engine.after(
                DELETION_TIMEOUT, lambda: self.engine.enqueue(self.name, key), key=(self.name, key)
            )
        if status != pdb.get("status"):
            pdb["status"] = copy.deepcopy(status)
            self.api.write(PDB, pdb, status=True)
