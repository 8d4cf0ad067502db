"""Fleet plans: which clusters upgrade in which order, and what lets the fleet move on.

A fleet plan (`templates/fleets/*.yaml`) names ordered `stages`; the first is the canary. Each
stage takes its clusters by name or by a label selector over `clusters.NAME.labels` in the
configuration, runs at most `max_concurrency` of them at a time (a count or a percentage), then
soaks: watched time (`soak`) with its `evidence` passing all along. A stage's `before` and `after`
gates are written like a step's gate and decided by the same code (`bot.core.runs.gates`).

    name: example
    roster: {primary: [U0PRIMARY], shadow: [U0SHADOW]}
    plan: eks-nodegroups                      # the runbook every cluster runs …
    overrides:                                # … with per-cluster version, window, roster
      lab-east: {target_version: "1.25.16"}
    stages:
      - name: canary
        clusters: [ci]
        soak: 1h
        evidence: [alerts]
        after: {approve: [primary, shadow]}   # four eyes before the rest of the fleet
      - name: lab
        selector: {env: lab}
        max_concurrency: 50%
        failure_budget: 1

`plans: {CLUSTER: PLAN}` instead of `plan:` gives each cluster its own runbook. Parsing is pure
and reports every problem with its line (the plan validator's walker); `resolve` then matches the
stages against the configured clusters, which only the settings know.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

import yaml

from bot.configschema import LABEL_KEY, LABEL_VALUE
from bot.core.runs.plans import (
    Gate,
    Window,
    _document,
    _gate,
    _PlanValidator,
    _roster,
    _version,
    _window,
)
from bot.core.validation import NAME_PATTERN, Home
from bot.errors import PlanInvalid, UserError

#: Evidence a soak may watch: `alerts` (Alertmanager). A soak has no source for `analysis` and
#: `app-health` yet, and one asking for them could never pass: they are refused with the way to
#: get them (a step of the cluster's plan), not accepted to pause the fleet hours later.
EVIDENCE = ("alerts",)
#: Evidence a plan's steps judge but a soak does not (yet): said so when a fleet asks for it.
STEP_EVIDENCE = ("analysis", "app-health")
TOP_KEYS = {
    "name",
    "description",
    "roster",
    "plan",
    "plans",
    "overrides",
    "failure_budget",
    "skip_unreachable",
    "stages",
}
STAGE_KEYS = {
    "name",
    "clusters",
    "selector",
    "max_concurrency",
    "soak",
    "evidence",
    "before",
    "after",
    "failure_budget",
}
OVERRIDE_KEYS = {"target_version", "window", "roster"}
#: The fleet plan's sections by the keys under them (as a plan's `HOMES`).
HOMES = {
    "stages": Home(frozenset(STAGE_KEYS), entry="stage"),
    "overrides": Home(frozenset(OVERRIDE_KEYS), entry="cluster's override"),
}
#: Azure Fleet Manager's limit per stage; a bigger stage is a fleet that forgot to stage.
MAX_STAGE_CLUSTERS = 50
MAX_STAGES = 20
MAX_CONCURRENCY = 50
#: GKE rollout sequencing soaks at most 30 days.
MAX_SOAK = timedelta(days=30)
PERCENT = re.compile(r"^([1-9][0-9]?|100)%$")


class Labelled(Protocol):
    """A configured cluster as the fleet sees it (`bot.records.ClusterConfig`)."""

    @property
    def name(self) -> str: ...

    @property
    def labels(self) -> Mapping[str, str]: ...


@dataclass(frozen=True, kw_only=True)
class Concurrency:
    """`max_concurrency`: a count, or a percentage of the stage's clusters (rounded up, at least 1)."""

    count: int | None = None
    percent: int | None = None

    def limit(self, clusters: int) -> int:
        if self.percent is not None:
            return max(1, math.ceil(clusters * self.percent / 100))
        return max(1, self.count or 1)

    def describe(self) -> str:
        return f"{self.percent}%" if self.percent is not None else str(self.count or 1)


@dataclass(frozen=True, kw_only=True)
class Stage:
    name: str
    #: By name (in this order) …
    clusters: tuple[str, ...] = ()
    #: … or every configured cluster whose labels include all of these (by name).
    selector: Mapping[str, str] = field(default_factory=dict)
    #: One cluster at a time unless the plan says more: the safe default for a production fleet.
    max_concurrency: Concurrency = field(default_factory=lambda: Concurrency(count=1))
    soak: timedelta = timedelta(0)
    evidence: tuple[str, ...] = ()
    before: Gate | None = None
    after: Gate | None = None
    #: Clusters of this stage that may fail before the fleet pauses.
    failure_budget: int = 0
    line: int = 0


@dataclass(frozen=True, kw_only=True)
class Override:
    """What one cluster's run changes of the shared plan."""

    target_version: str | None = None
    window: Window | None = None
    roster: Mapping[str, tuple[str, ...]] | None = None


@dataclass(frozen=True, kw_only=True)
class FleetPlan:
    name: str
    description: str = ""
    roster: Mapping[str, tuple[str, ...]]
    #: The plan every cluster runs (by its loaded or built-in name) …
    plan: str | None = None
    #: … or one plan per cluster.
    plans: Mapping[str, str] = field(default_factory=dict)
    overrides: Mapping[str, Override] = field(default_factory=dict)
    skip_unreachable: bool = False
    stages: tuple[Stage, ...]

    def plan_for(self, cluster: str) -> str:
        return self.plans.get(cluster) or self.plan or ""


@dataclass(frozen=True, kw_only=True)
class ResolvedStage:
    """A stage with its clusters decided against the configuration."""

    stage: Stage
    clusters: tuple[str, ...]

    @property
    def concurrency(self) -> int:
        return self.stage.max_concurrency.limit(len(self.clusters))


# ---------------------------------------------------------------------------------------------
# Parsing


def parse_fleet(text: str, *, source: str = "<fleet>") -> FleetPlan:
    """Parse and validate a fleet plan; raise PlanInvalid listing every problem with its line."""
    v, node, top, name = _document(text, source, "fleet plan", TOP_KEYS, ("name", "roster", "stages"), HOMES)
    description = (v.string(top["description"], "description") or "") if "description" in top else ""
    roster, _ = _roster(v, top.get("roster"))
    roles = set(roster)

    plan = _plan_name(v, top.get("plan"), "plan") if "plan" in top else None
    plans: dict[str, str] = {}
    if "plans" in top:
        for cluster, pnode in v.mapping(top["plans"], "plans", None).items():
            if (p := _plan_name(v, pnode, f"plans.{cluster}")) is not None:
                plans[cluster] = p
    if (plan is None) == (not plans) and ("plan" in top) == ("plans" in top):
        v.error(node, "plan", "name the runbook: `plan: NAME` for every cluster, or `plans: {CLUSTER: NAME}`")

    overrides: dict[str, Override] = {}
    if "overrides" in top:
        for cluster, onode in v.mapping(top["overrides"], "overrides", None).items():
            overrides[cluster] = _override(v, onode, f"overrides.{cluster}")

    budget = 0
    if "failure_budget" in top:
        budget = v.integer(top["failure_budget"], "failure_budget", low=0, high=MAX_STAGE_CLUSTERS) or 0
    skip = (
        bool(v.boolean(top["skip_unreachable"], "skip_unreachable")) if "skip_unreachable" in top else False
    )

    stages: list[Stage] = []
    snode = top.get("stages")
    if snode is not None:
        if not isinstance(snode, yaml.SequenceNode) or not snode.value:
            v.error(snode, "stages", "expected a list of stages (the first is the canary)")
        elif len(snode.value) > MAX_STAGES:
            v.error(snode, "stages", f"at most {MAX_STAGES} stages")
        else:
            seen: set[str] = set()
            for i, item in enumerate(snode.value):
                stage = _stage(v, item, f"stages[{i}]", roles, budget)
                if stage is None:
                    continue
                if stage.name in seen:
                    v.error(item, f"stages[{i}].name", f"stage {stage.name!r} is named twice")
                seen.add(stage.name)
                stages.append(stage)
    if v.errors:
        raise PlanInvalid(v.errors)
    return FleetPlan(
        name=name,
        description=description,
        roster=roster,
        plan=plan,
        plans=plans,
        overrides=overrides,
        skip_unreachable=skip,
        stages=tuple(stages),
    )


def _plan_name(v: _PlanValidator, node: yaml.Node | None, key: str) -> str | None:
    value = v.string(node, key)
    if value is not None and not NAME_PATTERN.match(value):
        v.error(node, key, f"{value!r} is not a plan name")
        return None
    return value


def _override(v: _PlanValidator, node: yaml.Node, key: str) -> Override:
    o = v.mapping(node, key, OVERRIDE_KEYS)
    target = (
        _version(v, {f"{key}.target_version": o["target_version"]}, f"{key}.target_version")
        if "target_version" in o
        else None
    )
    window = _window(v, o["window"], None) if "window" in o else None
    roster = None
    if "roster" in o:
        roster, _ = _roster(v, o["roster"])
    return Override(target_version=target, window=window, roster=roster)


def _stage(v: _PlanValidator, node: yaml.Node, key: str, roles: set[str], budget: int) -> Stage | None:
    s = v.mapping(node, key, STAGE_KEYS)
    if not s:
        return None
    ok = v.required(s, node, key, "name")
    name = v.string(s.get("name"), f"{key}.name") or ""
    if name and not NAME_PATTERN.match(name):
        v.error(s["name"], f"{key}.name", "stage names are lower-case letters, digits, '.', '-' and '_'")
    clusters: tuple[str, ...] = ()
    selector: dict[str, str] = {}
    if ("clusters" in s) == ("selector" in s):
        v.error(
            node,
            key,
            "a stage takes its clusters by name (`clusters: [a, b]`) or by `selector: {label: value}`, one of the two",
        )
        ok = False
    if "clusters" in s:
        clusters = v.strings(s["clusters"], f"{key}.clusters")
        if not clusters and not v.errors:
            v.error(s["clusters"], f"{key}.clusters", "a stage needs at least one cluster")
        if len(clusters) > MAX_STAGE_CLUSTERS:
            v.error(s["clusters"], f"{key}.clusters", f"at most {MAX_STAGE_CLUSTERS} clusters in a stage")
        for dup in sorted({c for c in clusters if clusters.count(c) > 1}):
            v.error(s["clusters"], f"{key}.clusters", f"cluster {dup!r} is listed twice")
    if "selector" in s:
        labels = v.mapping(s["selector"], f"{key}.selector", None)
        if not labels:
            v.error(s["selector"], f"{key}.selector", "a selector needs at least one label")
        for label, lnode in labels.items():
            value = v._scalar(lnode, f"{key}.selector.{label}", "a label value")
            text = "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
            if not LABEL_KEY.match(label):
                v.error(lnode, f"{key}.selector.{label}", "not a Kubernetes label key")
            elif not LABEL_VALUE.match(text):
                v.error(lnode, f"{key}.selector.{label}", f"{text!r} is not a label value")
            selector[label] = text
    concurrency = Concurrency(count=1)
    if "max_concurrency" in s:
        concurrency = _concurrency(v, s["max_concurrency"], f"{key}.max_concurrency") or concurrency
    soak = timedelta(0)
    if "soak" in s:
        soak = v.duration(s["soak"], f"{key}.soak") or timedelta(0)
        if soak > MAX_SOAK:
            v.error(s["soak"], f"{key}.soak", "at most 30 days")
    evidence: tuple[str, ...] = ()
    if "evidence" in s:
        evidence = v.strings(s["evidence"], f"{key}.evidence")
        for e in evidence:
            if e in STEP_EVIDENCE:
                v.error(
                    s["evidence"],
                    f"{key}.evidence",
                    f"a soak does not watch `{e}` yet, so it could never pass: put an `{e}` step (or a "
                    f"drain's `background: [{e}]`) in the clusters' plan; a soak watches `alerts`",
                )
            elif e not in EVIDENCE:
                v.error(
                    s["evidence"],
                    f"{key}.evidence",
                    f"unknown evidence {e!r} (one of: {', '.join(EVIDENCE)})",
                )
        if evidence and "soak" not in s:
            v.error(
                s["evidence"],
                f"{key}.evidence",
                "evidence is watched during the soak: give the stage a `soak`",
            )
    before = _gate(v, s["before"], f"{key}.before", roles) if "before" in s else None
    after = _gate(v, s["after"], f"{key}.after", roles) if "after" in s else None
    stage_budget = budget
    if "failure_budget" in s:
        stage_budget = (
            v.integer(s["failure_budget"], f"{key}.failure_budget", low=0, high=MAX_STAGE_CLUSTERS) or 0
        )
    if not ok:
        return None
    return Stage(
        name=name,
        clusters=clusters,
        selector=selector,
        max_concurrency=concurrency,
        soak=soak,
        evidence=tuple(dict.fromkeys(evidence)),
        before=before,
        after=after,
        failure_budget=stage_budget,
        line=node.start_mark.line + 1,
    )


def _concurrency(v: _PlanValidator, node: yaml.Node, key: str) -> Concurrency | None:
    value = v._scalar(node, key, "a count or a percentage")
    if value is None:
        return None
    if isinstance(value, str) and (m := PERCENT.match(value.strip())):
        return Concurrency(percent=int(m.group(1)))
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_CONCURRENCY:
        return Concurrency(count=value)
    v.error(node, key, f"expected a count from 1 to {MAX_CONCURRENCY} or a percentage like 50%")
    return None


# ---------------------------------------------------------------------------------------------
# Against the configuration


def selects(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    """matchLabels: every label of the selector, with the same value."""
    return all(labels.get(k) == val for k, val in selector.items())


def resolve(fleet: FleetPlan, clusters: Mapping[str, Labelled]) -> tuple[ResolvedStage, ...]:
    """Each stage's clusters, from the configured clusters; PlanInvalid listing every problem.

    A cluster belongs to one stage only: the first that names or selects it would upgrade it,
    and a later stage would then run it a second time."""
    problems: list[str] = []
    out: list[ResolvedStage] = []
    owner: dict[str, str] = {}
    for stage in fleet.stages:
        if stage.selector:
            picked = tuple(sorted(n for n, c in clusters.items() if selects(stage.selector, c.labels)))
            if not picked:
                wanted = ", ".join(f"{k}={v}" for k, v in stage.selector.items())
                problems.append(f"stage {stage.name}: no configured cluster has the labels {wanted}")
        else:
            picked = stage.clusters
            for name in picked:
                if name not in clusters:
                    problems.append(f"stage {stage.name}: no cluster {name!r} in the configuration")
        if len(picked) > MAX_STAGE_CLUSTERS:
            problems.append(f"stage {stage.name}: {len(picked)} clusters, at most {MAX_STAGE_CLUSTERS}")
        for name in picked:
            if name in owner:
                problems.append(f"cluster {name} is in stage {owner[name]} and in stage {stage.name}")
            owner.setdefault(name, stage.name)
        out.append(ResolvedStage(stage=stage, clusters=picked))
    for name in sorted(set(fleet.overrides) - set(owner)):
        problems.append(f"overrides.{name}: {name} is in no stage of the fleet")
    for name in sorted(set(fleet.plans) - set(owner)):
        problems.append(f"plans.{name}: {name} is in no stage of the fleet")
    if fleet.plans and not fleet.plan:
        for name in sorted(set(owner) - set(fleet.plans)):
            problems.append(f"plans: no plan for cluster {name} (stage {owner[name]})")
    if problems:
        raise PlanInvalid([f"fleet {fleet.name}: {p}" for p in problems])
    return tuple(out)


def child_plan_text(fleet: FleetPlan, base_text: str, cluster: str) -> str:
    """The plan one cluster runs: the shared plan aimed at `cluster`, with its overrides.

    The text is stored with the fleet run when it starts, so a retry runs the same pinned target
    version even if the shared plan is reloaded meanwhile."""
    doc: dict[str, Any] = yaml.safe_load(base_text)
    doc["cluster"] = cluster
    doc["name"] = f"{doc.get('name', 'plan')}.{cluster}"[:63]
    override = fleet.overrides.get(cluster)
    if override is not None:
        if override.target_version is not None:
            doc = _retargeted(doc, override.target_version, cluster)
        if override.window is not None:
            doc["window"] = {
                "start": override.window.start.isoformat(),
                "end": override.window.end.isoformat(),
                "timezone": override.window.timezone,
            }
        if override.roster is not None:
            doc["roster"] = {role: list(people) for role, people in override.roster.items()}
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


def _minor(version: str) -> str:
    """ "1.25" of "1.25.16" (or of "v1.25.16-eks-abc"): the part a Kubernetes upgrade is about."""
    return ".".join(version.lstrip("v").split(".")[:2])


def _retargeted(doc: dict[str, Any], target: str, cluster: str) -> dict[str, Any]:
    """The plan `doc` aimed at `target` instead of its own target version: the header, and every
    argument of a step's actions, background checks and rehearsal stand-ins equal to the old version
    (`version: "1.25.16"`), so the steps do what the card says; their titles and descriptions too.

    Only a patch version may differ: the steps of a runbook for another minor (its checks' `to`,
    the add-on versions, its pull requests) are not the same steps, so that is refused."""
    old = str(doc.get("target_version", ""))
    if not old or old == target:
        return {**doc, "target_version": target}
    if _minor(old) != _minor(target):
        raise UserError(
            f"overrides.{cluster}.target_version: {target} is not a {_minor(old)} version like the plan's "
            f"{old}; a cluster that goes to another minor version needs a plan of its own (`plans:`)"
        )
    token = re.compile(rf"(?<![\w.]){re.escape(old)}(?![\w.])")

    def swap(value: Any, *, text: bool) -> Any:
        if isinstance(value, dict):
            return {k: swap(v, text=text) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v, text=text) for v in value]
        if isinstance(value, str):
            return token.sub(target, value) if text else (target if value == old else value)
        return value

    steps = []
    for step in doc.get("steps") or []:
        if isinstance(step, dict):
            step = {
                k: swap(v, text=k in ("title", "description")) if k in _RETARGETED else v
                for k, v in step.items()
            }
        steps.append(step)
    return {**doc, "target_version": target, "steps": steps}


#: The keys of a step whose values carry the target version: its actions', background checks' and
#: rehearsal stand-ins' arguments (whole values), its title and description (as words).
_RETARGETED = frozenset({"actions", "background", "rehearsal", "title", "description"})
