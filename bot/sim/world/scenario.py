"""Scenarios: YAML files that describe a cluster and what happens to it (schema in README.md).

A scenario names the control-plane version and platform, the node groups, Fargate profiles,
namespaces, objects (ordinary Kubernetes manifests, plus three conveniences: `helm_release`, stored
as Helm 3 stores a release, and `last_applied: true`, which records the manifest in the
`kubectl.kubernetes.io/last-applied-configuration` annotation as `kubectl apply` does; and
`{test_certificate: …}` wherever a certificate goes, see `_certificates`), container
behaviours and faults, in-cluster clients that call deprecated APIs, and a scripted `upgrade`. A
`generate` section builds a cluster from numbers instead (the `large` scenario: 5,000 nodes and
150,000 pods), written straight into the store in a consistent, settled state.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import functools
import gzip
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from importlib import resources as importlib_resources
from pathlib import Path
from typing import Any

import yaml

from bot.sim.apiserver.api import Api
from bot.sim.apiserver.clock import parse_duration, rfc3339
from bot.sim.apiserver.resources import EXTENSIONS, minor_of
from bot.sim.controllers.behaviour import RULE_FAULTS, Match, Rule, RuleBook
from bot.sim.controllers.engine import Engine
from bot.sim.controllers.kubelet import Kubelets
from bot.sim.controllers.scheduler import Scheduler
from bot.sim.world.certs import certificate_pem
from bot.sim.world.cloud import Cloud, DeprecatedCaller, FargateProfile, NodeGroupSpec, Operation
from bot.sim.world.injection import Injector, Injectors
from bot.sim.world.settled import SettledBuild, is_workload

Obj = dict[str, Any]
#: Injects a fault now and returns its id: the control API's `inject_fault`, handed in so that a
#: scenario does not depend on the control API (which depends on it, to run the scripted upgrade).
FaultInjector = Callable[[Obj], str]

BASE_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
#: libyaml's safe loader when PyYAML has it: a twin of a large cluster is megabytes of YAML.
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
#: The top-level keys that hold a list.
_LISTS = (
    "node_groups",
    "fargate_profiles",
    "namespaces",
    "objects",
    "injectors",
    "containers",
    "faults",
    "callers",
)
_TOP = {
    "name",
    "description",
    "cluster",
    "timing",
    "node_groups",
    "fargate_profiles",
    "namespaces",
    "objects",
    "containers",
    "faults",
    "callers",
    "upgrade",
    "generate",
    "injectors",
    "aws",
    "azure",
    "gcp",
    "settled",
    "placements",
    "restarts",
}
_CLUSTER = {
    "version",
    "platform",
    "region",
    "deprecated_apis",
    "custom_resources",
    "age",
    "warmup",
    "lease_renew_seconds",
    "compaction_window",
    "bookmark_interval",
}
_TIMING = {
    "node_join": "join_seconds",
    "node_ready": "ready_seconds",
    "control_plane_upgrade": "control_plane_seconds",
    "drain_timeout": "drain_timeout",
    "fargate_start": "fargate_seconds",
}


class ScenarioError(ValueError):
    """A scenario file that does not follow the schema; the message names the file and the key.

    `path` is where in the document (keys and list indexes), so that `load_scenario` can name the
    line as well; `detail` is the message without the file's name."""

    def __init__(self, message: str, *, path: tuple[str | int, ...] = (), detail: str = "") -> None:
        super().__init__(message)
        self.path = path
        self.detail = detail or message


def _error(source: str, detail: str, *path: str | int) -> ScenarioError:
    return ScenarioError(f"{source}: {detail}", path=path, detail=detail)


def _refuse_unknown(source: str, body: dict[str, Any], known: set[str], *path: str) -> None:
    """Refuse the keys of `body` (the scenario, or its section at `path`) that are not `known`,
    pointing at the first of them as the file has them."""
    bad = set(body) - known
    if bad:
        first = min(bad, key=lambda k: list(body).index(k))
        where = f"{path[-1]}: " if path else ""
        raise _error(
            source,
            f"{where}unknown key(s) {', '.join(sorted(bad))}; known: {', '.join(sorted(known))}",
            *path,
            first,
        )


@dataclass
class Scenario:
    name: str
    description: str = ""
    source: str = ""
    version: str = "1.29.4"
    platform: str = "eks"
    region: str = "ap-northeast-1"
    deprecated_apis: list[str] = field(default_factory=list)
    custom_resources: list[str] = field(default_factory=list)
    age: float = 0.0
    warmup: float = 120.0
    lease_renew_seconds: float = 10.0
    compaction_window: float = 300.0
    bookmark_interval: float = 5.0
    timing: dict[str, float] = field(default_factory=dict)
    node_groups: list[NodeGroupSpec] = field(default_factory=list)
    fargate: list[FargateProfile] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)
    objects: list[Obj] = field(default_factory=list)
    injectors: list[Injector] = field(default_factory=list)
    containers: list[Obj] = field(default_factory=list)
    faults: list[Obj] = field(default_factory=list)
    callers: list[DeprecatedCaller] = field(default_factory=list)
    upgrade: Obj | None = None
    generate: Obj | None = None
    #: The AWS side of an EKS scenario (`bot/sim/world/aws.py`), served under /aws when present.
    aws: Obj | None = None
    #: The Azure side of an AKS scenario (`bot/sim/world/azure.py`), served under /azure when present.
    azure: Obj | None = None
    #: The Google side of a GKE scenario (`bot/sim/world/gke.py`), served under /gke when present.
    gcp: Obj | None = None
    #: Build the workloads in their settled state instead of playing them through the controllers
    #: during the warm-up (`bot/sim/world/settled.py`); twins are written with it.
    settled: bool = False
    #: With `settled`: `Kind/namespace/name` → the nodes its pods go to first, one pod each, when they
    #: exist and fit (a twin's pods on the nodes where the snapshot saw them); the rest are spread.
    placements: dict[str, list[str]] = field(default_factory=dict)
    #: With `settled`: `Kind/namespace/name` → node → the restart counts of its pods on that node, in
    #: turn (a twin's pods restarted as often as the snapshot saw them).
    restarts: dict[str, dict[str, list[int]]] = field(default_factory=dict)

    # ---- loading --------------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Any, source: str = "<scenario>") -> Scenario:
        if not isinstance(data, dict):
            raise _error(source, "a scenario is a mapping")
        _refuse_unknown(source, data, _TOP)
        for section in _LISTS:
            if not isinstance(data.get(section) or [], list):
                raise _error(source, f"{section}: expected a list, not {data[section]!r}", section)
        for section, known in (("cluster", _CLUSTER), ("timing", set(_TIMING))):
            body = data.get(section) or {}
            if not isinstance(body, dict):
                raise _error(source, f"{section}: expected a mapping", section)
            _refuse_unknown(source, body, known, section)
        cluster = data.get("cluster") or {}
        timing = data.get("timing") or {}
        for i, group in enumerate(data.get("node_groups") or []):
            try:
                _node_group(group, "1.0.0")
            except ScenarioError as exc:
                raise _error(source, exc.detail, "node_groups", i, *exc.path) from None
            except (KeyError, TypeError, ValueError) as exc:
                raise _error(source, f"node_groups[{i}]: {exc}", "node_groups", i) from None
        settled = data.get("settled", False)
        if not isinstance(settled, bool):
            raise _error(source, f"settled: expected true or false, not {settled!r}", "settled")
        try:
            version = str(cluster.get("version", "1.29.4")).lstrip("v")
            minor_of(version)
            sc = cls(
                name=str(data.get("name") or Path(source).stem),
                description=str(data.get("description", "")).strip(),
                source=source,
                version=version,
                platform=str(cluster.get("platform", "eks")),
                region=str(cluster.get("region", "ap-northeast-1")),
                deprecated_apis=[str(x) for x in cluster.get("deprecated_apis") or []],
                custom_resources=[str(x) for x in cluster.get("custom_resources") or []],
                age=parse_duration(cluster.get("age", 0)),
                warmup=parse_duration(cluster.get("warmup", 120)),
                lease_renew_seconds=parse_duration(cluster.get("lease_renew_seconds", 10)),
                compaction_window=parse_duration(cluster.get("compaction_window", 300)),
                bookmark_interval=parse_duration(cluster.get("bookmark_interval", 5)),
                timing={_TIMING[k]: parse_duration(v) for k, v in timing.items()},
                node_groups=[_node_group(g, version) for g in data.get("node_groups") or []],
                fargate=[
                    FargateProfile(
                        str(p["name"]),
                        str(p["namespace"]),
                        {str(k): str(v) for k, v in (p.get("labels") or {}).items()},
                    )
                    for p in data.get("fargate_profiles") or []
                ],
                namespaces=[str(n) for n in data.get("namespaces") or []],
                objects=list(data.get("objects") or []),
                injectors=[Injector.parse(i) for i in data.get("injectors") or []],
                containers=list(data.get("containers") or []),
                faults=list(data.get("faults") or []),
                callers=[_caller(c) for c in data.get("callers") or []],
                upgrade=data.get("upgrade"),
                generate=data.get("generate"),
                aws=data.get("aws"),
                azure=data.get("azure"),
                gcp=data.get("gcp"),
                settled=settled,
                placements={
                    str(k): [str(n) for n in v or []] for k, v in (data.get("placements") or {}).items()
                },
                restarts=_restarts(data.get("restarts") or {}),
            )
            for rule in sc.containers:
                Rule.parse(rule)
            for name in sc.custom_resources:
                if name not in EXTENSIONS:
                    raise _error(
                        source,
                        f"cluster.custom_resources: {name!r} is not one the sim serves ({', '.join(EXTENSIONS)})",
                        "cluster",
                        "custom_resources",
                    )
        except ScenarioError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise ScenarioError(f"{source}: {exc}") from None
        return sc

    # ---- building -------------------------------------------------------------------------------

    def build(
        self,
        *,
        api: Api,
        engine: Engine,
        cloud: Cloud,
        scheduler: Scheduler,
        kubelets: Kubelets,
        injectors: Injectors,
        rules: RuleBook,
        inject: FaultInjector,
        seed: int,
    ) -> None:
        for attr, value in self.timing.items():
            setattr(cloud, attr, value)
        names = list(dict.fromkeys([*BASE_NAMESPACES, *self.namespaces]))
        for obj in self.objects:
            ns = (obj.get("metadata") or {}).get("namespace") if isinstance(obj, dict) else None
            if ns and ns not in names:
                names.append(str(ns))
            if isinstance(obj, dict) and "helm_release" in obj:
                hns = str(obj["helm_release"].get("namespace", "default"))
                if hns not in names:
                    names.append(hns)
        api.apply_manifests(
            [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in names]
        )
        for group in self.node_groups:
            cloud.groups[group.name] = group
            for _ in range(group.count):
                cloud.add_node(group.name)
        cloud.fargate.extend(self.fargate)
        injectors.injectors.extend(self.injectors)
        for spec in self.containers:
            rules.add(Rule.parse(spec))
        if self.generate:
            generate_large(api, cloud, scheduler, seed, self.generate)
        prepared = _prepare(self.objects, api.clock.now())
        if self.settled:
            api.apply_manifests([o for o in prepared if not is_workload(o)])
            SettledBuild(
                api, scheduler, kubelets, self._rule_matches(rules), self.placements, self.restarts
            ).run([o for o in prepared if is_workload(o)])
        else:
            api.apply_manifests(prepared)
        for caller in self.callers:
            cloud.add_caller(caller)
        for spec in self.faults:
            spec = dict(spec)
            at = spec.pop("at", None)
            if at is None:
                inject(spec)
            else:
                delay = self.warmup + parse_duration(at)
                engine.after(delay, functools.partial(_inject, inject, spec))

    def _rule_matches(self, rules: RuleBook) -> list[Match]:
        """What the container behaviours, and the behaviour faults injected at once, match: pods
        they change do not start as usual, so a settled build leaves their workloads to play."""
        out = [r.match for r in rules.rules if r.overrides or r.stuck_terminating]
        for spec in self.faults:
            kind = str(spec.get("type", ""))
            if kind in RULE_FAULTS and kind != "logs" and spec.get("at") is None:
                with contextlib.suppress(ValueError):  # injecting it reports the error
                    out.append(Match.parse(spec.get("match")))
        return out

    # ---- the scripted upgrade -------------------------------------------------------------------

    def run_upgrade(self, cloud: Cloud, engine: Engine, inject_fault: FaultInjector) -> Operation:
        plan = self.upgrade
        if not plan:
            raise ValueError(f"scenario {self.name} has no `upgrade` section")
        version = str(plan.get("version") or (plan.get("control_plane") or {}).get("version", "")).lstrip("v")
        if not version:
            raise ValueError("upgrade: `version` is required")
        op = cloud._op("Upgrade", self.name, version)
        steps: list[tuple[str, str]] = []
        if plan.get("control_plane", True) is not False:
            steps.append(("control_plane", version))
        for g in plan.get("node_groups") or []:
            name, v = (g, version) if isinstance(g, str) else (str(g["name"]), str(g.get("version", version)))
            steps.append((name, v))
        faults = list(plan.get("faults") or [])
        cp_duration = (
            (plan.get("control_plane") or {}).get("duration")
            if isinstance(plan.get("control_plane"), dict)
            else None
        )

        def start(i: int) -> None:
            if i >= len(steps):
                cloud._finish(op)
                return
            target, v = steps[i]
            inject(target, "start")
            if target == "control_plane":
                sub = cloud.upgrade_control_plane(
                    v, duration=parse_duration(cp_duration) if cp_duration else None
                )
            else:
                sub = cloud.replace_node_group(target, v, force=bool(plan.get("force", False)))
            cloud._log(op, f"step {i + 1}/{len(steps)}: {sub.kind} {target} → {v} ({sub.id})")
            wait(i, sub)

        def inject(target: str, when: str) -> None:
            # A fault is tied to a step: injected when the step starts (default) or once it is done.
            for f in faults:
                if f.get("step") == target and f.get("when", "start") == when:
                    fid = inject_fault(dict(f["fault"]))
                    cloud._log(
                        op, f"fault {fid} ({f['fault'].get('type')}) injected at the {when} of step {target}"
                    )

        def wait(i: int, sub: Operation) -> None:
            if sub.state == "InProgress":
                engine.after(5.0, lambda: wait(i, sub), key=("op", op.id))
            elif sub.state == "Failed":
                cloud._finish(op, f"{sub.target}: {sub.error}")
            else:
                inject(steps[i][0], "end")
                start(i + 1)

        start(0)
        return op


def _inject(inject: FaultInjector, spec: Obj) -> None:
    inject(spec)


def _node_group(spec: Any, version: str) -> NodeGroupSpec:
    if not isinstance(spec, dict) or "name" not in spec:
        raise ScenarioError("node_groups: each needs a name")
    known = {
        "name",
        "count",
        "version",
        "instance_type",
        "capacity",
        "labels",
        "taints",
        "zones",
        "os_image",
        "kernel",
        "runtime",
        "max_unavailable",
        "ami",
    }
    bad = set(spec) - known
    if bad:
        first = min(bad, key=lambda k: list(spec).index(k))
        raise ScenarioError(
            f"node_groups.{spec['name']}: unknown key(s) {', '.join(sorted(bad))}; known: {', '.join(sorted(known))}",
            path=(first,),
        )
    g = NodeGroupSpec(
        name=str(spec["name"]),
        count=int(spec.get("count", 1)),
        version=str(spec.get("version", version)).lstrip("v"),
    )
    for key in ("instance_type", "os_image", "kernel", "runtime", "ami"):
        if key in spec:
            setattr(g, key, str(spec[key]))
    if "capacity" in spec:
        g.capacity = {**g.capacity, **{str(k): str(v) for k, v in spec["capacity"].items()}}
    g.labels = {str(k): str(v) for k, v in (spec.get("labels") or {}).items()}
    g.taints = [dict(t) for t in spec.get("taints") or []]
    if "zones" in spec:
        g.zones = [str(z) for z in spec["zones"]]
    g.max_unavailable = int(spec.get("max_unavailable", 1))
    return g


def _caller(spec: Any) -> DeprecatedCaller:
    return DeprecatedCaller(
        group_version=str(spec["api"]),
        resource=str(spec["resource"]),
        every=parse_duration(spec.get("every", 60)),
        user_agent=str(spec.get("user_agent", "helm/v3.8.2")),
        verb=str(spec.get("verb", "LIST")).upper(),
    )


_ORDER = [
    "Namespace",
    "CustomResourceDefinition",
    "ServiceAccount",
    "ConfigMap",
    "Secret",
    "PersistentVolumeClaim",
    "Service",
    "PodDisruptionBudget",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
]


def _prepare(objects: list[Obj], now: float) -> list[Obj]:
    """Expand conveniences (helm_release, last_applied) and order objects so dependencies come first."""
    out: list[Obj] = []
    for raw in objects:
        if not isinstance(raw, dict):
            raise ScenarioError(f"objects: not a mapping: {raw!r}")
        if "helm_release" in raw:
            out.append(helm_release_secret(raw["helm_release"], now))
            continue
        obj = _certificates(copy.deepcopy(raw))
        if obj.pop("last_applied", False):
            applied = copy.deepcopy(obj)
            applied.pop("status", None)
            applied.setdefault("metadata", {}).setdefault("annotations", {})
            text = json.dumps(applied, separators=(",", ":"), sort_keys=True) + "\n"
            obj.setdefault("metadata", {}).setdefault("annotations", {})[
                "kubectl.kubernetes.io/last-applied-configuration"
            ] = text
        out.append(obj)
    rank = {k: i for i, k in enumerate(_ORDER)}
    return sorted(out, key=lambda o: rank.get(str(o.get("kind")), len(_ORDER)))


def _certificates(value: Any) -> Any:
    """`{test_certificate: {common_name: CN, expires_in: 3d, encoding: base64|pem}}` anywhere in a
    manifest becomes a certificate (`bot.sim.world.certs`) whose notAfter is `expires_in` after the
    present (negative: already expired); `base64` (the default) as a `caBundle` holds it.
    `{time_from_now: 4d}` (or `-2d`) becomes that moment as RFC 3339 (a status time)."""
    if isinstance(value, list):
        return [_certificates(v) for v in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"time_from_now"}:
        # A time relative to the present (a cert-manager Certificate's status.notAfter): "4d", "-2d".
        text = str(value["time_from_now"])
        seconds = -parse_duration(text[1:]) if text.startswith("-") else parse_duration(text)
        return (datetime.now(UTC) + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
    if set(value) == {"test_certificate"}:
        spec = value["test_certificate"] or {}
        if not isinstance(spec, dict) or set(spec) - {
            "common_name",
            "organization",
            "expires_in",
            "encoding",
        }:
            raise ScenarioError(
                f"test_certificate: expected common_name, organization, expires_in, encoding: {spec!r}"
            )
        expires = str(spec.get("expires_in", "365d"))
        seconds = -parse_duration(expires[1:]) if expires.startswith("-") else parse_duration(expires)
        pem = certificate_pem(
            common_name=str(spec.get("common_name", "sim")),
            organization=str(spec.get("organization", "sim")),
            # The sim's clock jumps to the present after its warm-up: the expiry counts from there.
            not_after=datetime.now(UTC) + timedelta(seconds=seconds),
        )
        encoding = str(spec.get("encoding", "base64"))
        if encoding not in ("base64", "pem"):
            raise ScenarioError(f"test_certificate: encoding must be base64 or pem, not {encoding!r}")
        return base64.b64encode(pem.encode()).decode() if encoding == "base64" else pem
    return {k: _certificates(v) for k, v in value.items()}


def helm_release_secret(spec: Obj, now: float) -> Obj:
    """A Helm 3 release record: Secret `sh.helm.release.v1.NAME.vN`, gzip+base64 JSON in data.release."""
    name = str(spec["name"])
    ns = str(spec.get("namespace", "default"))
    revision = int(spec.get("revision", 1))
    stamp = rfc3339(now).replace("Z", ".000000000Z")
    release: Obj = {
        "name": name,
        "info": {
            "first_deployed": stamp,
            "last_deployed": stamp,
            "deleted": "",
            "description": "Install complete",
            "status": "deployed",
        },
        "chart": {
            "metadata": {
                "name": spec.get("chart", name),
                "version": str(spec.get("chart_version", "1.0.0")),
                "appVersion": str(spec.get("app_version", "1.0.0")),
                "apiVersion": "v2",
            },
            "lock": None,
            "templates": [],
            "values": {},
            "schema": None,
            "files": [],
        },
        "config": spec.get("values") or {},
        "manifest": str(spec.get("manifest", "")),
        "version": revision,
        "namespace": ns,
    }
    helm_encoded = base64.b64encode(gzip.compress(json.dumps(release).encode(), mtime=0))
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": f"sh.helm.release.v1.{name}.v{revision}",
            "namespace": ns,
            "labels": {"name": name, "owner": "helm", "status": "deployed", "version": str(revision)},
        },
        "type": "helm.sh/release.v1",
        "data": {"release": base64.b64encode(helm_encoded).decode()},
    }


# ---- scenario files -----------------------------------------------------------------------------


def builtin_dir() -> Path:
    return Path(str(importlib_resources.files("bot.sim.world") / "scenarios"))


def builtin_scenarios() -> list[tuple[str, str]]:
    """(name, first sentence of description) of every built-in scenario: a whole sentence, never
    a description's first line cut where its YAML wrapped it."""
    out = []
    for path in sorted(builtin_dir().glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        description = " ".join(str(data.get("description", "")).split())
        first, stop, _ = description.partition(". ")
        out.append((str(data.get("name", path.stem)), first + stop.strip()))
    return out


def load_scenario(name_or_path: str | Path) -> Scenario:
    path = Path(name_or_path)
    if not path.is_file():
        candidate = builtin_dir() / f"{name_or_path}.yaml"
        if not candidate.is_file():
            known = ", ".join(n for n, _ in builtin_scenarios())
            raise ScenarioError(f"no scenario {name_or_path!r}: not a file, and not a built-in ({known})")
        path = candidate
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        at = raw.count(b"\n", 0, exc.start) + 1
        raise ScenarioError(f"{path}:{at}: the scenario is not UTF-8 text (byte {exc.start})") from None
    try:
        data = yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError:
        try:  # the pure-Python parser words the error better and quotes the line
            yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ScenarioError(f"{path}: {exc}") from None
        raise
    try:
        return Scenario.from_dict(data, str(path))
    except ScenarioError as exc:
        line = _line_of(text, exc.path)
        if line is None:
            raise
        raise ScenarioError(f"{path}:{line}: {exc.detail}", path=exc.path, detail=exc.detail) from None


def _line_of(text: str, where: tuple[str | int, ...]) -> int | None:
    """The line (1-based) of the key or list item at `where` in a YAML document, as far as it goes."""
    if not where:
        return None
    node: yaml.Node | None = yaml.compose(text, Loader=yaml.SafeLoader)
    line = None
    for step in where:
        if isinstance(node, yaml.MappingNode) and isinstance(step, str):
            found = next(((k, v) for k, v in node.value if k.value == step), None)
            if found is None:
                break
            line, node = found[0].start_mark.line + 1, found[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(step, int) and step < len(node.value):
            node = node.value[step]
            line = node.start_mark.line + 1
        else:
            break
    return line


# ---- the generator (large) ----------------------------------------------------------------------


def generate_large(api: Api, cloud: Cloud, scheduler: Scheduler, seed: int, spec: Obj) -> None:
    """Build nodes, DaemonSets, Deployments, ReplicaSets, pods and PDBs from numbers, already settled."""
    from bot.sim.world.generate import Generator

    Generator(api, cloud, scheduler, seed, spec).run()


def _restarts(data: Any) -> dict[str, dict[str, list[int]]]:
    """`restarts:` — `Kind/namespace/name: {node: [count, …]}`."""
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise TypeError("restarts: a map of Kind/namespace/name to a map of node to restart counts")
    return {
        str(k): {str(node): [int(c) for c in counts or []] for node, counts in v.items()}
        for k, v in data.items()
    }
