"""What simulated containers do: start-up timing, faults, and the log lines they write.

A scenario (or a fault injected later) is a list of `Rule`s. A rule matches pods (namespace, name
prefix, labels, node, node group) and optionally one container by name or image, and says what
that container does: how long its image takes to pull, whether the pull fails, when it becomes
Ready or whether it never does, whether it crashes (and with which exit code), which log lines it
writes and how often, and whether its pod hangs in Terminating. Later rules override earlier ones
field by field, so a fault is just one more rule.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from bot.sim.apiserver.clock import parse_duration


@dataclass(frozen=True)
class LogRule:
    """Lines a container writes: once (`every` None) or every `every` seconds, from `after` seconds in."""

    lines: tuple[str, ...]
    every: float | None = None
    after: float = 0.0
    #: Simulated time before which the rule writes nothing (faults injected mid-run).
    since: float = 0.0

    @classmethod
    def parse(cls, spec: Any, *, since: float = 0.0) -> LogRule:
        if isinstance(spec, str):
            return cls((spec,), since=since)
        if not isinstance(spec, Mapping):
            raise ValueError(f"log rule must be a string or a mapping, not {spec!r}")
        lines = spec.get("lines", spec.get("line"))
        if isinstance(lines, str):
            lines = [lines]
        if not lines:
            raise ValueError("log rule needs `lines`")
        every = spec.get("every")
        return cls(
            tuple(str(x) for x in lines),
            every=parse_duration(every) if every is not None else None,
            after=parse_duration(spec.get("after", 0)),
            since=since,
        )


@dataclass(frozen=True)
class Behaviour:
    pull_seconds: float = 2.0
    start_seconds: float = 1.0
    ready_after: float = 2.0
    #: A pull error message ("not found", "unauthorized" …); the container cycles ErrImagePull/ImagePullBackOff.
    pull_error: str | None = None
    #: Seconds after each start at which the container exits; restarts follow with CrashLoopBackOff.
    crash_after: float | None = None
    exit_code: int = 1
    #: A readiness-probe failure message; the container runs but never becomes Ready.
    never_ready: str | None = None
    #: Seconds the container takes to stop after SIGTERM (capped by the grace period).
    stop_seconds: float = 1.0
    logs: tuple[LogRule, ...] = ()
    #: Lines written when the container exits before a restart (its last words, shown by --previous).
    crash_logs: tuple[str, ...] = ()
    #: The CNI cannot set the pod's network up (any container's rule makes the whole pod fail): the
    #: pod stays ContainerCreating with a FailedCreatePodSandBox event carrying this message.
    sandbox_error: str | None = None


@dataclass(frozen=True)
class NodeFacts:
    """What rules may match about the node a pod runs on."""

    group: str = ""
    kubelet: str = ""
    fargate: bool = False


NO_NODE = NodeFacts()


@dataclass(frozen=True)
class Match:
    namespace: str | None = None
    name_prefix: str | None = None
    labels: tuple[tuple[str, str], ...] = ()
    node: str | None = None
    node_group: str | None = None
    node_version: str | None = None  # fnmatch pattern on the node's kubeletVersion
    container: str | None = None
    image: str | None = None  # fnmatch pattern

    @classmethod
    def parse(cls, spec: Mapping[str, Any] | None) -> Match:
        spec = spec or {}
        known = {
            "namespace",
            "name_prefix",
            "labels",
            "node",
            "node_group",
            "node_version",
            "container",
            "image",
            "name",
        }
        unknown = set(spec) - known
        if unknown:
            raise ValueError(f"unknown match keys: {', '.join(sorted(unknown))}")
        return cls(
            namespace=spec.get("namespace"),
            name_prefix=spec.get("name_prefix", spec.get("name")),
            labels=tuple(sorted((str(k), str(v)) for k, v in (spec.get("labels") or {}).items())),
            node=spec.get("node"),
            node_group=spec.get("node_group"),
            node_version=spec.get("node_version"),
            container=spec.get("container"),
            image=spec.get("image"),
        )

    def pod_matches(self, pod: Mapping[str, Any], node: NodeFacts = NO_NODE) -> bool:
        m = pod.get("metadata") or {}
        if self.namespace is not None and m.get("namespace") != self.namespace:
            return False
        if self.name_prefix is not None and not str(m.get("name", "")).startswith(self.name_prefix):
            return False
        labels = m.get("labels") or {}
        if any(labels.get(k) != v for k, v in self.labels):
            return False
        node_name = (pod.get("spec") or {}).get("nodeName", "")
        if self.node is not None and node_name != self.node:
            return False
        if self.node_group is not None and node.group != self.node_group:
            return False
        return not (self.node_version is not None and not fnmatch.fnmatch(node.kubelet, self.node_version))

    def container_matches(self, container: Mapping[str, Any]) -> bool:
        if self.container is not None and container.get("name") != self.container:
            return False
        return not (
            self.image is not None and not fnmatch.fnmatch(str(container.get("image", "")), self.image)
        )


_BEHAVIOUR_KEYS = {f.name for f in fields(Behaviour)}


@dataclass(frozen=True)
class Rule:
    match: Match
    overrides: tuple[tuple[str, Any], ...] = ()
    logs: tuple[LogRule, ...] = ()
    stuck_terminating: bool = False
    #: Simulated time the rule was added (faults affect what happens after it).
    since: float = 0.0
    name: str = ""

    @classmethod
    def parse(cls, spec: Mapping[str, Any], *, since: float = 0.0, name: str = "") -> Rule:
        """A rule from scenario YAML: `match`, behaviour fields, `logs`, `stuck_terminating`."""
        overrides: list[tuple[str, Any]] = []
        for key, value in spec.items():
            if key in ("match", "logs", "stuck_terminating", "type", "name", "at"):
                continue
            if key not in _BEHAVIOUR_KEYS:
                raise ValueError(
                    f"unknown container behaviour {key!r}; known: {', '.join(sorted(_BEHAVIOUR_KEYS))}"
                )
            if key in ("pull_seconds", "start_seconds", "ready_after", "crash_after", "stop_seconds"):
                value = parse_duration(value) if value is not None else None
            if key == "crash_logs":
                value = tuple(str(x) for x in (value or []))
            overrides.append((key, value))
        logs = tuple(LogRule.parse(x, since=since) for x in spec.get("logs") or [])
        return cls(
            match=Match.parse(spec.get("match")),
            overrides=tuple(overrides),
            logs=logs,
            stuck_terminating=bool(spec.get("stuck_terminating", False)),
            since=since,
            name=name or str(spec.get("name", "")),
        )


@dataclass
class RuleBook:
    rules: list[Rule] = field(default_factory=list)

    def add(self, rule: Rule) -> None:
        self.rules.append(rule)

    def remove(self, name: str) -> int:
        before = len(self.rules)
        self.rules = [r for r in self.rules if r.name != name]
        return before - len(self.rules)

    def behaviour(
        self, pod: Mapping[str, Any], container: Mapping[str, Any], node: NodeFacts = NO_NODE
    ) -> Behaviour:
        result = Behaviour()
        logs: list[LogRule] = []
        for rule in self.rules:
            if not rule.match.pod_matches(pod, node) or not rule.match.container_matches(container):
                continue
            if rule.overrides:
                result = replace(result, **dict(rule.overrides))
            logs.extend(rule.logs)
        return replace(result, logs=tuple(logs)) if logs else result

    def stuck_terminating(self, pod: Mapping[str, Any], node: NodeFacts = NO_NODE) -> bool:
        return any(r.stuck_terminating and r.match.pod_matches(pod, node) for r in self.rules)


#: Fault types that are container behaviours (rules), with the behaviour fields each sets.
RULE_FAULTS: dict[str, dict[str, Any]] = {
    "image_pull_error": {"pull_error": "not found"},
    "crash_loop": {"crash_after": 5.0, "exit_code": 1},
    "not_ready": {"never_ready": "HTTP probe failed with statuscode: 503"},
    "logs": {},
    "stuck_terminating": {},
    "slow_start": {"ready_after": 120.0},
    # The VPC CNI has no address for the pod (ipamd's warm pool empty, the subnet full).
    "no_ip": {
        "sandbox_error": "add cmd: failed to assign an IP address to container",
    },
}
