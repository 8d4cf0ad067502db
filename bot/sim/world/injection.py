"""Sidecar injection: the mutating webhooks of Istio and Vault, played by the API server.

An injector matches new pods by their namespace's labels (`istio-injection: enabled`) or by a pod
annotation (`vault.hashicorp.com/agent-inject: "true"`) or, in a twin of a cluster, by the workload
that owns them (`owners: [Deployment/payments/payments-worker]`: what the snapshot saw injected into
that workload's pods, whatever webhook did it), honours an opt-out annotation, and adds
its init containers, sidecars, volumes and status annotation. While the scenario is being built it
injects `build_image` instead of `image`: pods that already ran before istiod was upgraded keep the
old proxy, and only a restart (`kubectl rollout restart`) brings the new one — as in real life.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from bot.sim.apiserver.api import Api
from bot.sim.apiserver.resources import Kind

Obj = dict[str, Any]


@dataclass
class Injector:
    name: str
    namespace_labels: dict[str, str] = field(default_factory=dict)
    pod_annotations: dict[str, str] = field(default_factory=dict)
    #: `Kind/namespace/name` of the workloads whose pods it injects (a Deployment through its ReplicaSets).
    owners: frozenset[str] = frozenset()
    opt_out: dict[str, str] = field(default_factory=dict)
    containers: list[Obj] = field(default_factory=list)
    init_containers: list[Obj] = field(default_factory=list)
    volumes: list[Obj] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    #: Image substitutions used while the scenario is being built (old sidecar versions).
    build_images: dict[str, str] = field(default_factory=dict)
    building: bool = True

    @classmethod
    def parse(cls, spec: Obj) -> Injector:
        known = {"name", "namespace_labels", "pod_annotations", "owners", "opt_out", "containers", "init_containers", "volumes",
                 "annotations", "labels", "build_images"}  # fmt: skip
        unknown = set(spec) - known
        if unknown:
            raise ValueError(f"injectors.{spec.get('name')}: unknown key(s) {', '.join(sorted(unknown))}")
        return cls(
            name=str(spec["name"]),
            namespace_labels={str(k): str(v) for k, v in (spec.get("namespace_labels") or {}).items()},
            pod_annotations={str(k): str(v) for k, v in (spec.get("pod_annotations") or {}).items()},
            owners=frozenset(str(o) for o in spec.get("owners") or []),
            opt_out={str(k): str(v) for k, v in (spec.get("opt_out") or {}).items()},
            containers=list(spec.get("containers") or []),
            init_containers=list(spec.get("init_containers") or []),
            volumes=list(spec.get("volumes") or []),
            annotations={str(k): str(v) for k, v in (spec.get("annotations") or {}).items()},
            labels={str(k): str(v) for k, v in (spec.get("labels") or {}).items()},
            build_images={str(k): str(v) for k, v in (spec.get("build_images") or {}).items()},
        )

    def wants(self, api: Api, pod: Obj) -> bool:
        m = pod.get("metadata") or {}
        annotations = m.get("annotations") or {}
        if any(annotations.get(k) == v for k, v in self.opt_out.items()):
            return False
        if self.owners and _owner(m) in self.owners:
            return True
        if self.pod_annotations and all(annotations.get(k) == v for k, v in self.pod_annotations.items()):
            return True
        if self.namespace_labels:
            ns = api.store.entry("namespaces", "", str(m.get("namespace", "")))
            labels = ns.labels if ns is not None else {}
            return all(labels.get(k) == v for k, v in self.namespace_labels.items())
        return False

    def inject(self, pod: Obj) -> None:
        spec = pod.setdefault("spec", {})
        names = {c.get("name") for c in spec.get("containers") or []} | {
            c.get("name") for c in spec.get("initContainers") or []
        }

        def image(c: Obj) -> Obj:
            c = copy.deepcopy(c)
            if self.building and c.get("image") in self.build_images:
                c["image"] = self.build_images[c["image"]]
            return c

        spec["initContainers"] = [*(spec.get("initContainers") or []),
                                  *(image(c) for c in self.init_containers if c.get("name") not in names)]  # fmt: skip
        if not spec["initContainers"]:
            del spec["initContainers"]
        spec["containers"] = [
            *(spec.get("containers") or []),
            *(image(c) for c in self.containers if c.get("name") not in names),
        ]
        vol_names = {v.get("name") for v in spec.get("volumes") or []}
        spec["volumes"] = [
            *(spec.get("volumes") or []),
            *(copy.deepcopy(v) for v in self.volumes if v.get("name") not in vol_names),
        ]
        if not spec["volumes"]:
            del spec["volumes"]
        m = pod.setdefault("metadata", {})
        if self.annotations:
            m["annotations"] = {**(m.get("annotations") or {}), **self.annotations}
        if self.labels:
            m["labels"] = {**(m.get("labels") or {}), **self.labels}


def _owner(meta: Obj) -> str:
    """`Kind/namespace/name` of the workload that owns a pod (a ReplicaSet's Deployment)."""
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller"):
            kind, name = str(ref.get("kind", "")), str(ref.get("name", ""))
            if kind == "ReplicaSet" and "-" in name:
                kind, name = "Deployment", name.rsplit("-", 1)[0]
            return f"{kind}/{meta.get('namespace', '')}/{name}"
    return ""


class Injectors:
    """The admission hook that runs every injector on new pods."""

    def __init__(self, api: Api, injectors: list[Injector]) -> None:
        self.api = api
        self.injectors = injectors
        api.admission.append(self.admit)

    def admit(self, kind: Kind, obj: Obj) -> None:
        if kind.kind != "Pod":
            return
        for injector in self.injectors:
            if injector.wants(self.api, obj):
                injector.inject(obj)

    def finish_building(self) -> None:
        for injector in self.injectors:
            injector.building = False
