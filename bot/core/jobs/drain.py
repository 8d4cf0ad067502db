"""The `drain` job: cordon the selected nodes, then evict their pods node by node, as kubectl drain
does — but never silently, never for ever, and never forcing anything by itself.

How it goes, its progress record, the known issues it names and how it never evicts twice:
`docs/drain-job.md`.
"""

from __future__ import annotations

import contextvars
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.core.jobs import trail as tr
from bot.core.jobs.base import Choice, ChoiceOption, Decision, Post, Progress, Tick
from bot.core.jobs.common import (
    DEPOOL_LABEL,
    DEPOOL_VALUE,
    JobCluster,
    bar,
    disruptions_allowed,
    duration_arg,
    few,
    flag,
    int_arg,
    iso,
    namespace_pdbs,
    node_name,
    pdb_named,
    pdb_ref,
    select_nodes,
    selector_matches,
    timer_start,
    unschedulable,
)
from bot.core.jobs.explain import explain, named, typed_pods
from bot.core.kube.objects import EPISODE_REOPEN, parse_iso, workload_of
from bot.core.kube.owners import action
from bot.core.kube.wire import WPod
from bot.core.rules import EventRecord, Rule, RuleHit, match_rules
from bot.core.rules.known import RuleNeeds, known_issue_text, pod_view, watch_key
from bot.decoders import convert
from bot.errors import ClusterError, ClusterForbidden, ClusterUnreachable, EvictionBlocked, UserError, clip

DEFAULT_TIMEOUT = timedelta(minutes=15)
DEFAULT_PARALLEL = 5
#: kubectl drain retries an eviction refused by a PodDisruptionBudget every 5 s.
PDB_RETRY = timedelta(seconds=5)
#: Other refusals (500: several budgets select the pod; a 5xx) back off up to a minute.
MAX_BACKOFF = timedelta(seconds=60)
MIRROR = "kubernetes.io/config.mirror"
#: A node still blocked by a budget this long is said once (the rule's "longer than 5 minutes").
DRAIN_SLOW = timedelta(minutes=5)

#: The eviction API's words (a 500) for a pod that several PodDisruptionBudgets select.
_SEVERAL_BUDGETS = "more than one PodDisruptionBudget"
#: Pod states that still need the pod to go away.
_LEFT = frozenset({"pending", "evicting", "evicted", "blocked", "deleting", "forcing", "refused"})
#: Pod states whose write the next tick issues (the intent is stored).
_INTENT = frozenset({"evicting", "blocked"})

WAIT = ChoiceOption(id="wait", label="Wait 15 more minutes")
DELETE = ChoiceOption(
    id="delete", label="Delete the pods instead of evicting", roles=("coordinator",), needs_reason=True
)
#: A node skipped stays cordoned and undrained: who leaves it so says why, as for a delete.
SKIP = ChoiceOption(id="skip", label="Skip this node", needs_reason=True)
#: Offered only for pods stuck Terminating on a NotReady node (KI008): `kubectl delete
#: --grace-period=0 --force`, the object removed without the kubelet's word.
FORCE = ChoiceOption(
    id="force", label="Force-delete the Terminating pods", roles=("coordinator",), needs_reason=True
)
#: How many budgets and workloads a delete would take down the question names (Slack's limits).
RISKS_SAID = 4
#: Pod states a "delete" decision turns into deletes (a pod already Terminating is not one).
_DELETABLE = frozenset({"pending", "evicting", "blocked", "refused"})

#: Local data that a pod's deletion (or eviction) loses for good.
LOCAL_VOLUMES = (("emptyDir", "emptyDir"), ("hostPath", "hostPath"))


def depool_arg(args: Mapping[str, str]) -> str:
    """`depool`: "" (no), "true" (label, then remove once drained) or "keep" (label and leave it)."""
    text = str(args.get("depool", "")).strip().lower()
    if text in ("", "false", "no", "0", "off"):
        return ""
    if text in ("true", "yes", "1", "on"):
        return "true"
    if text == "keep":
        return "keep"
    raise UserError(f"depool: {text[:20]!r} is not true, false or keep")


def local_storage(pod: Mapping[str, Any]) -> list[str]:
    """The kinds of local volume a pod keeps data on ("emptyDir", "hostPath"), each once."""
    volumes = (pod.get("spec") or {}).get("volumes") or []
    return [label for key, label in LOCAL_VOLUMES if any(key in v for v in volumes)]


def pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def triage(pod: Mapping[str, Any], *, allow_local_storage: bool, allow_unmanaged: bool) -> tuple[str, str]:
    """What drain does with a pod, kubectl's filters in kubectl's order: ("skip", "DaemonSet"),
    ("skip", "mirror"), ("refuse", why) or ("evict", "")."""
    meta = pod.get("metadata") or {}
    controller = next((r for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
    if controller is not None and controller.get("kind") == "DaemonSet":
        return "skip", "DaemonSet"
    if MIRROR in (meta.get("annotations") or {}):
        return "skip", "mirror"
    finished = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
    volumes = (pod.get("spec") or {}).get("volumes") or []
    if not allow_local_storage and not finished and any("emptyDir" in v for v in volumes):
        return "refuse", "emptyDir (local data would be lost; allow_local_storage: true to evict)"
    if controller is None and not allow_unmanaged and not finished:
        return "refuse", "no controller (it would not come back; allow_unmanaged: true to evict)"
    return "evict", ""


def blocking_pdbs(
    pdbs: Sequence[Mapping[str, Any]], labels: Mapping[str, str] | None
) -> list[Mapping[str, Any]]:
    """The PodDisruptionBudgets of a namespace that select a pod with these labels."""
    return [p for p in pdbs if selector_matches((p.get("spec") or {}).get("selector"), labels)]


class DrainJob:
    """`drain`: see the module docstring."""

    kind = "drain"

    def __init__(self, node_group_labels: Sequence[str] = (), rules: Sequence[Rule] = ()) -> None:
        self.node_group_labels = tuple(node_group_labels)
        self.rules = tuple(rules)
        self.needs = RuleNeeds.of(rules)
        self.rules_by_id = {r.id: r for r in self.rules}

    # ----- plan and dry run --------------------------------------------------------------------

    def plan(self, cluster: JobCluster, args: Mapping[str, str], *, now: datetime) -> Progress:
        timeout = duration_arg(args, "timeout", DEFAULT_TIMEOUT)
        parallel = int_arg(args, "parallel", DEFAULT_PARALLEL, high=50)
        depool = depool_arg(args)
        depool_wait = (
            duration_arg(args, "depool_wait", timedelta(seconds=1)) if args.get("depool_wait") else None
        )
        if depool_wait is not None and not depool:
            raise UserError("depool_wait: only with depool: true (or keep)")
        nodes = select_nodes(cluster, args, self.node_group_labels)
        order = [node_name(n) for n in nodes]
        return {
            "timeout": timeout.total_seconds(),
            "parallel": parallel,
            "allow_local_storage": flag(args, "allow_local_storage"),
            "allow_unmanaged": flag(args, "allow_unmanaged"),
            "depool": depool,
            "depool_wait": depool_wait.total_seconds() if depool_wait is not None else 0.0,
            "order": order,
            "cordoned": [],
            # Nodes this job labelled out of the load balancers and has not put back yet.
            "depooled": [],
            "nodes": {
                node_name(n): {
                    "was": unschedulable(n),
                    "state": "pending",
                    "started": None,
                    "round": 0,
                    "choice": None,
                    "skipped": {"daemonset": 0, "mirror": 0},
                    "pdbs": {},
                    "forced": None,
                    "counts": {},
                    "pods": {},
                    # Labelled out of the load balancers before the job: "was", never touched.
                    "depool": (
                        (
                            "was"
                            if DEPOOL_LABEL in ((n.get("metadata") or {}).get("labels") or {})
                            else "pending"
                        )
                        if depool
                        else None
                    ),
                }
                for n in nodes
            },
        }

    def dry_run(self, cluster: JobCluster, progress: Progress) -> list[str]:
        lines: list[str] = []
        allow = {
            "allow_local_storage": progress["allow_local_storage"],
            "allow_unmanaged": progress["allow_unmanaged"],
        }
        for name in progress["order"]:
            node = cluster.get_json(f"/api/v1/nodes/{name}")
            if unschedulable(node):
                lines.append(f"node {name} is already cordoned: left as it is")
            else:
                annotations = tr.cordon_annotations(progress.get(tr.TRAIL), datetime.now(UTC))
                cluster.cordon(name, dry_run=True, annotations=annotations)
                lines.append(f"would cordon node {name} (schedulable → unschedulable)")
            if progress.get("depool"):
                labels = (node.get("metadata") or {}).get("labels") or {}
                if DEPOOL_LABEL in labels:
                    lines.append(
                        f"node {name} is already out of the load balancers ({DEPOOL_LABEL}): left as it is"
                    )
                else:
                    cluster.label_node(name, {DEPOOL_LABEL: DEPOOL_VALUE}, dry_run=True)
                    after = (
                        "kept (an uncordon removes it)"
                        if progress["depool"] == "keep"
                        else "removed once the node is drained"
                    )
                    lines.append(
                        f"would label node {name} {DEPOOL_LABEL}={DEPOOL_VALUE} before evicting"
                        f" (out of the cloud load balancers; {after})"
                    )
            pdb_cache: dict[str, list[Mapping[str, Any]]] = {}
            for pod in sorted(cluster.node_pods(name), key=pod_key):
                key = pod_key(pod)
                meta = pod.get("metadata") or {}
                what, why = triage(pod, **allow)
                if what == "skip":
                    lines.append(f"{name}: would leave {key} on the node ({why} pod)")
                elif what == "refuse":
                    lines.append(f"{name}: would REFUSE to evict {key}: {why}; people would be asked")
                    if local_storage(pod):
                        lines.append(
                            f"{name}: deleting {key} instead would lose its {' and '.join(local_storage(pod))} data"
                        )
                elif meta.get("deletionTimestamp"):
                    lines.append(f"{name}: would wait for {key} (already terminating)")
                else:
                    try:
                        cluster.evict(
                            str(meta.get("namespace")),
                            str(meta.get("name")),
                            uid=str(meta.get("uid", "")),
                            dry_run=True,
                        )
                    except EvictionBlocked:
                        names = self._pdb_names(cluster, pod, pdb_cache)
                        lines.append(f"{name}: would try to evict {key}, but it is blocked now by {names}")
                    except ClusterError as exc:
                        if exc.status in (401, 403):
                            raise
                        lines.append(
                            f"{name}: would try to evict {key}, but the API refuses now: {exc.user_message}"
                        )
                    else:
                        lines.append(f"{name}: would evict {key}")
        return lines

    # ----- ticks -------------------------------------------------------------------------------

    def tick(
        self, cluster: JobCluster, progress: Progress, *, now: datetime, decision: Decision | None = None
    ) -> Tick:
        run = _Run(self, cluster, progress, now)
        return run.tick(decision)

    def _pdb_names(
        self, cluster: JobCluster, pod: Mapping[str, Any], cache: dict[str, list[Mapping[str, Any]]]
    ) -> str:
        found = _pdbs_for(cluster, pod, cache)
        if not found:
            return "a PodDisruptionBudget"
        return ", ".join(pdb_named(p) for p in found)


def _pdbs_for(
    cluster: JobCluster, pod: Mapping[str, Any], cache: dict[str, list[Mapping[str, Any]]]
) -> list[Mapping[str, Any]]:
    meta = pod.get("metadata") or {}
    return blocking_pdbs(namespace_pdbs(cluster, str(meta.get("namespace", "")), cache), meta.get("labels"))


def _controller(pod: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """(kind, namespace, name) of the pod's controller, None for a pod without one."""
    meta = pod.get("metadata") or {}
    owner = next((r for r in meta.get("ownerReferences") or () if r.get("controller")), None)
    if owner is None:
        return None
    return str(owner.get("kind", "")), str(meta.get("namespace", "")), str(owner.get("name", ""))


def _pod_ready(pod: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )


class _Run:
    """One tick's work on a copy of the progress."""

    def __init__(self, job: DrainJob, cluster: JobCluster, progress: Progress, now: datetime) -> None:
        self.job = job
        self.cluster = cluster
        # A deep enough copy: the input progress is what was stored and must stay as it was.
        self.p: Progress = {
            **progress,
            "cordoned": list(progress.get("cordoned") or []),
            "depooled": list(progress.get("depooled") or []),
            # "<rule id> <workload key>" → {"n": episode, "open": bool, "ended": ISO | None}
            "issues": {k: dict(v) for k, v in (progress.get("issues") or {}).items()},
            "nodes": {
                k: {**v, "pods": {pk: dict(pv) for pk, pv in (v.get("pods") or {}).items()},
                    "pdbs": dict(v.get("pdbs") or {}), "skipped": dict(v.get("skipped") or {}),
                    "counts": dict(v.get("counts") or {})}
                for k, v in progress["nodes"].items()
            },
        }  # fmt: skip
        self.now = now
        self.posts: list[Post] = []
        self.audit: list[tuple[str, str]] = []
        #: Telemetry of this tick (`Tick.counts`): eviction requests by result, nodes drained.
        self.counts: Counter[str] = Counter()
        self.timeout = timedelta(seconds=float(progress["timeout"]))

    def result(self, *, choice: Choice | None = None, wait: float = 1.0) -> Tick:
        order = self.p["order"]
        nodes = self.p["nodes"]
        finished = [n for n in order if nodes[n]["state"] in ("done", "skipped")]
        done = len(finished) == len(order)
        detail = left_behind = ""
        if done:
            drained = [n for n in order if nodes[n]["state"] == "done" and not nodes[n].get("gone")]
            gone = [n for n in order if nodes[n]["state"] == "done" and nodes[n].get("gone")]
            skipped = [n for n in order if nodes[n]["state"] == "skipped"]
            detail = f"drained {len(drained)} node(s)"
            if gone:
                detail += f"; {len(gone)} removed outside the bot, not drained by it: {few(gone)}"
            if skipped:
                detail += f"; skipped {len(skipped)} (left cordoned): {few(skipped)}"
                left_behind = f"{len(skipped)} node(s) skipped, still cordoned: {self.skipped_why(skipped)}"
        return Tick(
            progress=self.p,
            posts=tuple(self.posts),
            audit=tuple(self.audit),
            card=tuple(self.card()),
            counts=tuple(sorted(self.counts.items())),
            done=done,
            ok=True,
            detail=detail,
            left_behind=left_behind,
            choice=choice,
            wait=0.0 if done else wait,
        )

    def card(self) -> list[str]:
        order = self.p["order"]
        nodes = self.p["nodes"]
        drained = sum(1 for n in order if nodes[n]["state"] == "done")
        lines = [bar(drained, len(order), "nodes drained")]
        skipped = [n for n in order if nodes[n]["state"] == "skipped"]
        if skipped:
            lines.append(f"skipped (still cordoned): {self.skipped_why(skipped)}")
        active = self.active()
        if active is not None:
            node = nodes[active]
            pods = node["pods"].values()
            left = sum(1 for p in pods if p["state"] in _LEFT)
            blocked = sum(1 for p in pods if p["state"] == "blocked")
            refused = sum(1 for p in pods if p["state"] == "refused")
            text = f"{active}: {left} pod(s) left"
            if blocked:
                text += f", {blocked} blocked"
            if refused:
                text += f", {refused} refused"
            lines.append(text)
            if node["pdbs"]:
                lines.append("blocked by PDB: " + few(sorted(node["pdbs"])))
            if node["choice"]:
                lines.append(f"{active}: waiting for a decision (wait, delete or skip)")
        return lines

    def skipped_why(self, skipped: Sequence[str]) -> str:
        """The skipped nodes (a few) each with the reason people gave: "n1 (why: the budget is
        the team's; they move it after the window), n2 (…) +3 more"."""
        shown = []
        for name in skipped[:3]:
            why = str((self.p["nodes"][name].get("skip") or {}).get("reason") or "")
            shown.append(f"{name} (why: {clip(why, 60)})" if why else name)
        return ", ".join(shown) + (f" +{len(skipped) - 3} more" if len(skipped) > 3 else "")

    def active(self) -> str | None:
        for name in self.p["order"]:
            if self.p["nodes"][name]["state"] in ("cordoned", "draining"):
                return str(name)
        return None

    # ----- the steps -------------------------------------------------------------------------

    def tick(self, decision: Decision | None) -> Tick:
        nodes = self.p["nodes"]
        if any(nodes[n]["state"] == "pending" for n in self.p["order"]):
            self.cordon_all()
            return self.result(wait=0.0)
        name = self.active()
        if name is None:
            return self.result()
        node = nodes[name]
        if node["choice"]:
            if decision is None or decision.choice_key != node["choice"]:
                # Waiting for people: nothing else happens, not even a read.
                return self.result(choice=self.choice(name), wait=5.0)
            return self.decide(name, decision)
        if node["state"] == "cordoned":
            self.start(name)
            return self.result(wait=0.0)
        return self.drain(name)

    def cordon_all(self) -> None:
        for name in self.p["order"]:
            node = self.p["nodes"][name]
            if node["state"] != "pending":
                continue
            try:
                live = self.cluster.get_json(f"/api/v1/nodes/{name}")
            except ClusterError as exc:
                if exc.status != 404:
                    raise
                node["state"] = "done"
                node["gone"] = True
                node["counts"] = {"evicted": 0, "deleted": 0, "gone": 0}
                self.posts.append(
                    Post(
                        key=f"drain-node-gone:{name}", text=f"node {name} no longer exists: nothing to drain"
                    )
                )
                node["ended"] = iso(self.now)
                continue
            trail = self.p.get(tr.TRAIL)
            if not unschedulable(live):
                live = self.cluster.cordon(name, annotations=tr.cordon_annotations(trail, self.now))
                self.audit.append(("cordon", f"node {name}: schedulable → unschedulable"))
            # Unschedulable now: by this tick, by an earlier run of it (crash), or before the job.
            if not node["was"]:
                if name not in self.p["cordoned"]:
                    self.p["cordoned"].append(name)
                # Again after a crash between the patch and the Event: the same name, not a second.
                tr.leave_event(
                    self.cluster, live, reason=tr.DRAIN_REASON, verb="cordoned for a drain", trail=trail,
                    now=self.now,
                )  # fmt: skip
                self.posts.append(Post(key=f"drain-cordoned:{name}", text=f"node {name} cordoned"))
            node["state"] = "cordoned"
            node.setdefault("cordoned_at", iso(self.now))

    def start(self, name: str) -> None:
        """List the node's pods: the pods to evict get their intent now, the writes come next tick.
        With depool, the node is labelled out of the load balancers first (an idempotent patch: a
        tick re-run after a crash labels it again, to the same effect)."""
        node = self.p["nodes"][name]
        if node.get("depool") == "pending":
            self.cluster.label_node(name, {DEPOOL_LABEL: DEPOOL_VALUE})
            node["depool"] = "labelled"
            node["depooled_at"] = iso(self.now)
            if name not in self.p["depooled"]:
                self.p["depooled"].append(name)
            self.audit.append(("depool", f"node {name}: label {DEPOOL_LABEL}={DEPOOL_VALUE} set"))
            wait = float(self.p.get("depool_wait") or 0)
            self.posts.append(
                Post(
                    key=f"drain-depooled:{name}",
                    text=f"node {name} taken out of the cloud load balancers ({DEPOOL_LABEL})"
                    + (f"; evicting in {int(wait)} s, once they have let go of it" if wait else ""),
                )
            )
        node["state"] = "draining"
        node["started"] = iso(self.now)
        node.setdefault("began", node["started"])
        node["round"] = 1
        self.observe(name, self.cluster.node_pods(name))
        self.promote(node)

    def observe(self, name: str, live_pods: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """Fold the node's live pods into the progress; returns them by key."""
        node = self.p["nodes"][name]
        live = {pod_key(p): p for p in live_pods}
        allow = {
            "allow_local_storage": self.p["allow_local_storage"],
            "allow_unmanaged": self.p["allow_unmanaged"],
        }
        skipped = {"daemonset": 0, "mirror": 0}
        for key, pod in live.items():
            meta = pod.get("metadata") or {}
            what, why = triage(pod, **allow)
            if what == "skip":
                skipped["daemonset" if why == "DaemonSet" else "mirror"] += 1
                continue
            known = node["pods"].get(key)
            if known is not None and (known["uid"] == meta.get("uid") or known["state"] in _LEFT):
                continue
            # New on the node (or a new pod under a name that already went): track it.
            entry: dict[str, Any] = {
                "uid": str(meta.get("uid", "")),
                "state": "pending",
                "attempts": 0,
                "next": None,
            }
            if meta.get("deletionTimestamp"):
                entry["state"] = "evicted"  # already going: wait for it, write nothing
            elif what == "refuse":
                entry["state"] = "refused"
                entry["why"] = why
                self.posts.append(
                    Post(key=f"drain-refused:{key}:{name}", text=f"{name}: not evicting pod {key}: {why}")
                )
            node["pods"][key] = entry
        node["skipped"] = skipped
        for key, entry in node["pods"].items():
            if entry["state"] not in _LEFT:
                continue
            current = live.get(key)
            if current is None or (current.get("metadata") or {}).get("uid") != entry["uid"]:
                entry["by"] = {
                    "deleting": "delete",
                    "forcing": "force",
                    "evicted": "evict",
                    "evicting": "evict",
                }.get(entry["state"], "")
                entry["state"] = "gone"
            elif (current.get("metadata") or {}).get("deletionTimestamp") and entry["state"] in _INTENT | {
                "pending"
            }:
                entry["state"] = "evicted"  # the eviction took (maybe by a run that crashed before storing)
        return live

    def promote(self, node: dict[str, Any]) -> None:
        """Pending pods take free eviction slots: their intent is stored, the write is next tick's."""
        in_flight = sum(1 for p in node["pods"].values() if p["state"] in _INTENT)
        free = int(self.p["parallel"]) - in_flight
        for entry in node["pods"].values():
            if free <= 0:
                break
            if entry["state"] == "pending":
                entry["state"] = "evicting"
                free -= 1

    def drain(self, name: str) -> Tick:
        node = self.p["nodes"][name]
        if not self.still_cordoned(name):
            return self.node_removed(name)
        stored = {k: v["state"] for k, v in node["pods"].items()}
        live = self.observe(name, self.cluster.node_pods(name))
        # Writes only for intents a stored progress holds, whose pod is still there as it was.
        due = [
            key
            for key, entry in node["pods"].items()
            if stored.get(key) in _INTENT and entry["state"] in _INTENT and self._due(entry)
        ]
        deletes = [
            key
            for key, entry in node["pods"].items()
            if stored.get(key) == "deleting"
            and entry["state"] == "deleting"
            and not (live[key].get("metadata") or {}).get("deletionTimestamp")
        ]
        forces = [
            key
            for key, entry in node["pods"].items()
            if stored.get(key) == "forcing" and entry["state"] == "forcing" and not entry.get("sent")
        ]
        if due and not self._depooling(node) and not node.get("uncordoned"):
            self.evict(name, due, live)
        for key in deletes:
            self.delete(name, key)
        for key in forces:
            self.delete(name, key, force=True)
        self.promote(node)
        left = [e for e in node["pods"].values() if e["state"] in _LEFT]
        if not left:
            return self.finish(name)
        started = timer_start(self.p, node["started"], self.now)
        if not node.get("slow_said"):
            said = len(self.posts)
            self.slow(name, started)
            node["slow_said"] = len(self.posts) > said
        only_refused = all(e["state"] == "refused" for e in left)
        # Only refused pods left: they never go by themselves, so people are asked at once — the
        # first time; after "wait" the timer decides again.
        if self.now - started >= self.timeout or (only_refused and node["round"] == 1):
            return self.ask(name, only_refused=only_refused, live=live)
        return self.result(wait=self._wait(left))

    def still_cordoned(self, name: str) -> bool:
        """Read the node being drained: False when it is gone (deleted outside the bot). Made
        schedulable again (uncordoned by someone) it is not evicted from — its pods would be
        scheduled straight back onto it, evicted again, without end — until it is cordoned again;
        the thread says both, once each time."""
        node = self.p["nodes"][name]
        try:
            live = self.cluster.get_json(f"/api/v1/nodes/{name}")
        except ClusterError as exc:
            if exc.status == 404:
                return False
            raise
        if not unschedulable(live):
            if not node.get("uncordoned"):
                node["uncordoned"] = iso(self.now)
                node["uncordons"] = int(node.get("uncordons", 0)) + 1
                self.posts.append(
                    Post(
                        key=f"drain-uncordoned:{name}:{node['uncordons']}",
                        text=f":warning: node {name} is schedulable again (uncordoned outside the bot) while it "
                        "is drained: evicting from it would send its pods straight back to it, so nothing is "
                        f"evicted until it is cordoned again (`kubectl cordon {name}`); the job's question "
                        "after its timeout can skip it",
                    )
                )
        elif node.get("uncordoned"):
            node.pop("uncordoned")
            self.posts.append(
                Post(
                    key=f"drain-recordoned:{name}:{node.get('uncordons', 0)}",
                    text=f"node {name} is cordoned again: its drain goes on",
                )
            )
        return True

    def _wait(self, left: list[dict[str, Any]]) -> float:
        """1 s while something moves; else until the soonest retry (a blocked pod's 5 s)."""
        if any(e["state"] in ("pending", "evicting", "evicted", "deleting", "forcing") for e in left):
            return 1.0
        retries = [parse_iso(e.get("next")) for e in left if e["state"] == "blocked"]
        soonest = min((r for r in retries if r is not None), default=None)
        if soonest is None:
            return 5.0
        return min(max((soonest - self.now).total_seconds(), 0.5), 5.0)

    def _depooling(self, node: Mapping[str, Any]) -> bool:
        """Whether the load balancers are still being given `depool_wait` to let go of the node."""
        since = parse_iso(node.get("depooled_at"))
        wait = timedelta(seconds=float(self.p.get("depool_wait") or 0))
        return since is not None and node.get("depool") == "labelled" and self.now - since < wait

    def repool(self, name: str) -> None:
        """Put a node this job labelled back into the load balancers (`depool: true`), once."""
        node = self.p["nodes"][name]
        if node.get("depool") != "labelled" or self.p.get("depool") == "keep":
            return
        try:
            self.cluster.label_node(name, {DEPOOL_LABEL: None})
        except ClusterError as exc:
            if exc.status != 404:  # a node already deleted has no label to remove
                raise
        node["depool"] = "restored"
        if name in self.p["depooled"]:
            self.p["depooled"].remove(name)
        self.audit.append(("repool", f"node {name}: label {DEPOOL_LABEL} removed"))
        self.posts.append(
            Post(key=f"drain-repooled:{name}", text=f"node {name} back in the cloud load balancers")
        )

    def _due(self, entry: Mapping[str, Any]) -> bool:
        when = parse_iso(entry.get("next"))
        return when is None or when <= self.now

    def evict(self, name: str, keys: list[str], live: Mapping[str, Mapping[str, Any]]) -> None:
        node = self.p["nodes"][name]

        def one(key: str) -> tuple[str, bool | BaseException]:
            namespace, pod = key.split("/", 1)
            try:
                return key, self.cluster.evict(namespace, pod, uid=node["pods"][key]["uid"])
            except ClusterError as exc:
                return key, exc

        workers = max(1, min(int(self.p["parallel"]), len(keys)))
        if workers == 1:
            results = [one(k) for k in keys]
        else:
            # Each call in a copy of this thread's context: the pool's threads would otherwise log
            # without the run, step and job the driver bound (bot.logsetup.log_context).
            calls = [(contextvars.copy_context(), key) for key in keys]
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="evict") as pool:
                results = list(pool.map(lambda call: call[0].run(one, call[1]), calls))
        unanswered = [o for _, o in results if isinstance(o, ClusterUnreachable)]
        if unanswered and len(unanswered) == len(results):
            # No answer at all: the job service says so on the card and the thread, and the
            # intents stay stored for the next tick (a write that did land is then seen, not redone).
            raise unanswered[0]
        pdb_cache: dict[str, list[Mapping[str, Any]]] = {}
        refused: list[tuple[str, dict[str, Any], Mapping[str, Any], EvictionBlocked]] = []
        for key, outcome in results:
            entry = node["pods"][key]
            entry["attempts"] = int(entry.get("attempts", 0)) + 1
            self.counts[f"eviction:{_eviction_result(outcome)}"] += 1
            if outcome is True:
                entry["state"] = "evicted"
                entry["next"] = None
                self.audit.append(
                    ("evict", f"pod {key} (uid {entry['uid']}) on node {name}: running → evicted")
                )
            elif outcome is False:
                entry["state"] = "gone"
                entry["by"] = ""
            elif isinstance(outcome, EvictionBlocked):
                node.setdefault("blocked_at", iso(self.now))
                entry["state"] = "blocked"
                entry["next"] = iso(self.now + PDB_RETRY)
                self.blocked(name, key, live[key], pdb_cache)
                refused.append((key, entry, live[key], outcome))
            elif isinstance(outcome, ClusterError) and outcome.status not in (403, 401):
                backoff = min(PDB_RETRY * (2 ** min(entry["attempts"] - 1, 6)), MAX_BACKOFF)
                entry["state"] = "blocked"
                entry["next"] = iso(self.now + backoff)
                if not entry.get("error"):  # said once per pod; the card keeps counting it
                    self.posts.append(
                        Post(
                            key=f"drain-evict-error:{key}:{name}",
                            text=self._refusal(name, key, outcome, live, pdb_cache),
                        )
                    )
                entry["error"] = outcome.status or 0
            elif isinstance(outcome, ClusterError) and outcome.status == 403:
                # The eviction API is the act role's: the job ends saying so, and which nodes it
                # leaves cordoned (they stay so until someone uncordons them or the step is retried).
                cordoned = list(self.p.get("cordoned") or [])
                back = action(f"uncordon node={','.join(cordoned)}", cluster=outcome.cluster)
                left = (
                    f"; left cordoned by this job: {few(cordoned, 5)} ({back} returns them)"
                    if cordoned
                    else ""
                )
                raise ClusterForbidden(
                    f"{outcome.user_message} — evicting a pod needs `create pods/eviction`, which the "
                    "`upgrade-bot-act` role grants (deploy/rbac.yaml; the Helm chart binds it unless "
                    f"`readOnly: true`): it is not bound{left}",
                    cluster=outcome.cluster,
                    status=403,
                ) from outcome
            elif isinstance(outcome, BaseException):
                raise outcome
        if refused:
            self.known_issues(refused)
        self.settle_issues(node)

    def _refusal(
        self,
        name: str,
        key: str,
        refused: ClusterError,
        live: Mapping[str, Mapping[str, Any]],
        cache: dict[str, list[Mapping[str, Any]]],
    ) -> str:
        """The thread's line for an eviction refused otherwise than by a budget's 429. A pod that
        several budgets select is refused (500) by the eviction API for as long as they do: the
        line names them, and they are kept for the question (`choice`), where waiting is no help."""
        if _SEVERAL_BUDGETS not in refused.user_message:
            return f"{name}: evicting {key} refused: {refused.user_message}; retrying"
        names = [pdb_ref(p) for p in _pdbs_for(self.cluster, live[key], cache)]
        node = self.p["nodes"][name]
        node.setdefault("overlaps", {})[key] = names
        for ref in names:
            node["pdbs"].setdefault(ref, 0)
        budgets = (
            f"{len(names)} PodDisruptionBudgets ({', '.join(names)})"
            if names
            else "several PodDisruptionBudgets"
        )
        return (
            f":warning: {name}: {key} is selected by {budgets}: the eviction API refuses a pod that several "
            "budgets select, so no retry evicts it until all but one of them are removed (or the pod is "
            "deleted); retrying meanwhile"
        )

    def known_issues(
        self, refused: list[tuple[str, dict[str, Any], Mapping[str, Any], EvictionBlocked]]
    ) -> None:
        """Match the API's refusals (and their pods) against the rules; post each new episode once."""
        job = self.job
        if job.needs is None:
            return
        states, events = [], []
        entries: dict[tuple[str, str], dict[str, Any]] = {}
        for key, entry, pod, refusal in refused:
            wpod = convert(pod, WPod)
            kind, wname = workload_of(wpod)
            namespace, pod_name = key.split("/", 1)
            prefix = f"cluster {refusal.cluster}: " if refusal.cluster else ""
            events.append(
                EventRecord(
                    namespace=namespace,
                    kind="Pod",
                    name=pod_name,
                    reason="TooManyRequests",  # the eviction API's Status reason for a 429
                    message=str(refusal).removeprefix(prefix),
                    type="Warning",
                )
            )
            states.append(pod_view(wpod, f"{kind} {namespace}/{wname}", job.needs))
            entries[(namespace, pod_name)] = entry
            entry["issues"] = []
        for hit in match_rules(job.rules, states, events):
            workload = watch_key(hit.workload)
            issue = f"{hit.rule.id} {workload}"
            for pod_name in hit.pods:
                entries[(hit.namespace, pod_name)]["issues"].append(issue)
            known = self.p["issues"].get(issue)
            if known is not None and known.get("open"):
                continue
            ended = parse_iso(known.get("ended")) if known is not None else None
            if known is not None and ended is not None and self.now - ended < EPISODE_REOPEN:
                known.update(open=True, ended=None)  # back soon after: the same episode
                continue
            number = int(known["n"]) + 1 if known is not None else 1
            self.p["issues"][issue] = {"n": number, "open": True, "ended": None}
            self.posts.append(
                Post(
                    key=f"rule:{hit.rule.id}:{workload}:{number}",
                    text=known_issue_text(
                        hit.rule.id, hit.rule, workload, pods=len(hit.pods), evidence=hit.evidence
                    ),
                )
            )

    def stall_rules(
        self, name: str, node: Mapping[str, Any], live: Mapping[str, Mapping[str, Any]]
    ) -> list[RuleHit]:
        """The known-issue findings that explain a stalled node: the rules its refusals matched
        (the budget), then those the pods left on it match as they are (a sidecar not ready) —
        each with the pod it concerns, so its remedy names it."""
        job = self.job
        if not job.rules:
            return []
        left = [k for k, e in node["pods"].items() if e["state"] in _LEFT]
        out = [
            RuleHit(
                rule=job.rules_by_id[i.split(" ", 1)[0]],
                workload=f"Pod {k}",
                namespace=k.partition("/")[0],
                pods=(k.partition("/")[2],),
                evidence="",
            )
            for k in left
            for i in node["pods"][k].get("issues", ())
            if i.split(" ", 1)[0] in job.rules_by_id
        ]
        down = [name] if node.get("dead") else []  # its pods stuck Terminating are KI008's
        out += explain(job.rules, typed_pods(live[k] for k in left if k in live), not_ready_nodes=down)
        return out

    def settle_issues(self, node: Mapping[str, Any]) -> None:
        """An episode ends when no pod of its workload is blocked any more (one node drains at a
        time, so the node's pods are all the blocked ones)."""
        issues = self.p["issues"]
        if not issues:
            return
        blocked = {i for e in node["pods"].values() if e["state"] == "blocked" for i in e.get("issues", ())}
        for issue, known in issues.items():
            if known.get("open") and issue not in blocked:
                known.update(open=False, ended=iso(self.now))

    def slow(self, name: str, started: datetime) -> None:
        """A node still blocked by a budget after DRAIN_SLOW is said once."""
        node = self.p["nodes"][name]
        if not node["pdbs"] or self.now - started < DRAIN_SLOW:
            return
        blocked = [k for k, e in node["pods"].items() if e["state"] == "blocked"]
        if not blocked:
            return
        issues = sorted({i.split(" ", 1)[0] for k in blocked for i in node["pods"][k].get("issues", ())})
        minutes = int((self.now - started).total_seconds() // 60)
        text = (
            f"{name}: draining for {minutes} minutes; {len(blocked)} pod(s) still refused by "
            f"{few(sorted(node['pdbs']))}"
        )
        if issues:
            text += f" — known issue {', '.join(issues)} (above)"
        self.posts.append(Post(key=f"drain-slow:{name}", text=text))

    def blocked(
        self, name: str, key: str, pod: Mapping[str, Any], cache: dict[str, list[Mapping[str, Any]]]
    ) -> None:
        node = self.p["nodes"][name]
        for pdb in _pdbs_for(self.cluster, pod, cache):
            ref = pdb_ref(pdb)
            allowed = disruptions_allowed(pdb)
            first = ref not in node["pdbs"]
            node["pdbs"][ref] = allowed
            if first:
                status = pdb.get("status") or {}
                self.posts.append(
                    Post(
                        key=f"pdb-blocked:{ref}:{name}",
                        text=(
                            f"{name}: PodDisruptionBudget {ref} blocks evicting {key} — disruptionsAllowed "
                            f"{allowed} (healthy {status.get('currentHealthy', '?')} of "
                            f"{status.get('desiredHealthy', '?')} needed); retrying every 5 s"
                        ),
                    )
                )

    def delete(self, name: str, key: str, *, force: bool = False) -> None:
        """Delete a pod people chose to delete; `force`: with grace 0, for a pod stuck
        Terminating on a NotReady node (the object goes without the kubelet's word)."""
        node = self.p["nodes"][name]
        entry = node["pods"][key]
        namespace, pod = key.split("/", 1)
        entry["attempts"] = int(entry.get("attempts", 0)) + 1
        forced = node.get("forced") or {}
        if force:
            entry["sent"] = True
        try:
            deleted = self.cluster.delete_pod(
                namespace, pod, uid=entry["uid"], grace_seconds=0 if force else None
            )
        except ClusterError as exc:
            if exc.status != 403:
                raise
            # `delete pods` is an opt-in role: the job ends saying which one (the service ends a
            # job on 403 with this message), the node stays cordoned.
            raise ClusterForbidden(
                f"{exc.user_message} — deleting a pod needs the optional `upgrade-bot-pod-delete` role"
                " (deploy/rbac.yaml; Helm value `podDelete: true`), which is not bound",
                cluster=exc.cluster,
                status=403,
            ) from exc
        if deleted:
            self.audit.append(
                (
                    "delete-pod",
                    f"pod {key} (uid {entry['uid']}) on node {name}: "
                    + (
                        "Terminating → force-deleted (grace 0), its node NotReady, "
                        if force
                        else "running → deleted instead of evicted, "
                    )
                    + f"decided by {forced.get('by', '?')}: {forced.get('reason', '')}",
                )
            )
        else:
            entry["state"] = "gone"
            entry["by"] = ""

    def node_removed(self, name: str) -> Tick:
        """The node was deleted while it was drained (its group's replacement ends each node once it
        is empty; or someone, by hand). Its pods went with it: those the bot had evicted (or was
        told to delete) by the bot, the others without it — `finish` says how many."""
        unasked = 0
        for entry in self.p["nodes"][name]["pods"].values():
            if entry["state"] not in _LEFT:
                continue
            by = {"evicted": "evict", "deleting": "delete", "forcing": "force"}.get(entry["state"], "")
            unasked += not by
            entry["by"], entry["state"] = by, "gone"
        return self.finish(name, gone=unasked)

    def finish(self, name: str, *, gone: int = 0) -> Tick:
        """The node's drain ended: what the bot evicted or deleted, and what went without it; `gone`:
        pods the bot had not evicted that went with the node when it was deleted mid-drain."""
        node = self.p["nodes"][name]
        pods = node["pods"].values()
        counts = {
            "evicted": sum(1 for p in pods if p.get("by") == "evict"),
            "deleted": sum(1 for p in pods if p.get("by") == "delete"),
            "forced": sum(1 for p in pods if p.get("by") == "force"),
            "gone": sum(1 for p in pods if not p.get("by")),
        }
        node["counts"] = counts
        node["pods"] = {}
        self.repool(name)
        node["state"] = "done"
        node["ended"] = iso(self.now)
        node["choice"] = None
        node["uncordoned"] = None
        skipped = node.get("skipped") or {}
        if gone:
            node["gone"] = True
            text = (
                f":warning: node {name} was deleted while it was being drained, not by the bot: {gone} pod(s) "
                "the bot had not evicted went with it, their disruption budgets not asked by the bot"
                + (f"; {counts['evicted']} pod(s) it had evicted before" if counts["evicted"] else "")
            )
            self.posts.append(Post(key=f"drained:{name}", text=text))
            self.counts["node:gone"] += 1
            return self.result(wait=0.0)
        text = f"node {name} drained: {counts['evicted']} pod(s) evicted"
        if not any(counts.values()):
            text = f"node {name} drained: no pod on it to evict when its turn came"
        if counts["deleted"]:
            text += f", {counts['deleted']} deleted"
        if counts["forced"]:
            text += f", {counts['forced']} force-deleted (grace 0)"
        if counts["gone"]:
            text += f", {counts['gone']} went by themselves"
        left = skipped.get("daemonset", 0) + skipped.get("mirror", 0)
        if left:
            text += f"; {left} DaemonSet/mirror pod(s) left on the node"
        self.posts.append(Post(key=f"drained:{name}", text=text))
        self.counts["node:drained"] += 1
        return self.result(wait=0.0)

    # ----- people ----------------------------------------------------------------------------

    def choice(self, name: str) -> Choice:
        node = self.p["nodes"][name]
        left = [k for k, e in node["pods"].items() if e["state"] in _LEFT]
        refused = [k for k, e in node["pods"].items() if e["state"] == "refused"]
        if refused and len(refused) == len(left):
            why = f"{len(refused)} pod(s) cannot be evicted ({few(refused)})"
        else:
            minutes = int(self.timeout.total_seconds() // 60) or 1
            why = f"still {len(left)} pod(s) on it after {minutes} min ({few(left)})"
            if node["pdbs"]:
                why += f"; blocked by {few(sorted(node['pdbs']))}"
        lost = [p for p in node.get("data_loss") or [] if p.split(" ", 1)[0] in left]
        delete = DELETE
        question = f"Drain of node {name}: {why}. What now?"
        if lost:
            question += (
                f"\n:warning: Deleting loses the local data of {len(lost)} pod(s) for good: {few(lost)}."
                " Evicting loses it too; skipping the node keeps it while the node lives."
            )
            delete = replace(DELETE, label=f"Delete the pods (loses the local data of {len(lost)})")
        if node.get("risks"):
            # A delete asks no budget: say what it takes down before anyone picks it.
            risks = node["risks"]
            more = f"; and {len(risks) - RISKS_SAID} more" if len(risks) > RISKS_SAID else ""
            question += "\n:warning: Deleting them " + "; ".join(risks[:RISKS_SAID]) + more + "."
        overlaps = {k: v for k, v in (node.get("overlaps") or {}).items() if k in left}
        if overlaps:
            question += (
                f"\n:warning: {len(overlaps)} pod(s) are each selected by several PodDisruptionBudgets ("
                + "; ".join(f"{k}: {', '.join(v)}" for k, v in list(overlaps.items())[:RISKS_SAID])
                + "): the eviction API refuses them until all but one budget is removed — waiting alone does not help."
            )
        stuck = [k for k in node.get("stuck") or () if k in left]
        deletable = [k for k in left if node["pods"][k]["state"] in _DELETABLE]
        options = [WAIT, delete, SKIP] if deletable else [WAIT, SKIP]
        if stuck and node.get("dead"):
            question += (
                f"\n:rotating_light: Node {name} is NotReady ({node['dead']}): {len(stuck)} pod(s) on it are "
                f"Terminating and cannot finish without its kubelet ({few(stuck)}) — waiting or deleting "
                "them again changes nothing (known issue KI008). Force-deleting removes them from the API "
                "at once (grace 0) so their replacements can start: only if the node is really gone, since "
                "a node that comes back still runs them (a StatefulSet's new pod would run beside the old)."
            )
            options.insert(
                len(options) - 1, replace(FORCE, label=f"Force-delete {len(stuck)} Terminating pod(s)")
            )
        return Choice(key=str(node["choice"]), question=question, options=tuple(options))

    def node_down(self, name: str) -> str:
        """Why the node is NotReady ("NotReady since 14:02 UTC: Kubelet stopped posting node
        status"), "" when it is Ready, or gone, or cannot be read."""
        try:
            got = self.cluster.get_json(f"/api/v1/nodes/{name}")
        except ClusterError:
            return ""
        ready = next(
            (c for c in (got.get("status") or {}).get("conditions") or () if c.get("type") == "Ready"), None
        )
        if ready is None or ready.get("status") == "True":
            return ""
        since = parse_iso(ready.get("lastTransitionTime"))
        when = f" since {since:%H:%M} UTC" if since is not None else ""
        message = str(ready.get("message") or ready.get("reason") or "")
        return f"NotReady{when}" + (f": {clip(message, 120)}" if message else "")

    def risks(self, node: Mapping[str, Any], live: Mapping[str, Mapping[str, Any]]) -> list[str]:
        """What deleting the pods a delete would take does to their workloads, which a delete
        does not ask: each budget it goes past ("go past PodDisruptionBudget shop/web (0
        disruptions allowed now)") and each workload it leaves with no Ready pod ("leave
        Deployment shop/web with no Ready pod: its 2 Ready pods are all here"). A few GETs, once
        per question."""
        pods = [live[k] for k, e in sorted(node["pods"].items()) if e["state"] in _DELETABLE and k in live]
        out: list[str] = []
        cache: dict[str, list[Mapping[str, Any]]] = {}
        past: dict[str, int] = {}
        for pod in pods:
            try:
                found = _pdbs_for(self.cluster, pod, cache)
            except ClusterError:
                continue
            for pdb in found:
                if disruptions_allowed(pdb) == 0:
                    past[pdb_ref(pdb)] = past.get(pdb_ref(pdb), 0) + 1
        for ref, n in sorted(past.items()):
            out.append(
                f"would go past PodDisruptionBudget {ref} (0 disruptions allowed now; {n} of its pods here)"
            )
        ready_here: dict[tuple[str, str, str], int] = {}
        for pod in pods:
            owner = _controller(pod)
            if owner is not None and _pod_ready(pod):
                ready_here[owner] = ready_here.get(owner, 0) + 1
        for (kind, namespace, owner_name), here in sorted(ready_here.items()):
            ready, shown = self._ready_replicas(kind, namespace, owner_name)
            if ready is not None and ready - here <= 0:
                out.append(
                    f"would leave {shown} with no Ready pod: its {here} Ready pod(s) are all on this node"
                )
        return out

    def _ready_replicas(self, kind: str, namespace: str, name: str) -> tuple[int | None, str]:
        """A ReplicaSet's or StatefulSet's Ready replicas and how people call it (a ReplicaSet by
        its Deployment); (None, …) when it cannot be read."""
        plural = {"ReplicaSet": "replicasets", "StatefulSet": "statefulsets"}.get(kind)
        shown = f"{kind} {namespace}/{name}"
        if plural is None:
            return None, shown
        try:
            got = self.cluster.get_json(f"/apis/apps/v1/namespaces/{namespace}/{plural}/{name}")
        except ClusterError:
            return None, shown
        top = next(
            (r for r in (got.get("metadata") or {}).get("ownerReferences") or () if r.get("controller")), None
        )
        if top is not None and top.get("kind") == "Deployment":
            shown = f"Deployment {namespace}/{top.get('name')}"
        return int((got.get("status") or {}).get("readyReplicas") or 0), shown

    def data_loss(self, node: Mapping[str, Any], live: Mapping[str, Mapping[str, Any]]) -> list[str]:
        """The pods left on the node whose data a delete loses: "ns/pod (emptyDir; the only
        replica)". Their owners are read (a few GETs, once per question) to tell a workload's only
        replica; an owner that cannot be read is said so rather than guessed."""
        out = []
        for key, entry in sorted(node["pods"].items()):
            pod = live.get(key)
            if entry["state"] not in _LEFT or pod is None:
                continue
            kinds = local_storage(pod)
            if not kinds:
                continue
            out.append(f"{key} ({', '.join(kinds)}{self._replicas(pod)})")
        return out

    def _replicas(self, pod: Mapping[str, Any]) -> str:
        meta = pod.get("metadata") or {}
        owner = next((r for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
        if owner is None:
            return "; no controller: nothing recreates it"
        plural = {"ReplicaSet": "replicasets", "StatefulSet": "statefulsets"}.get(str(owner.get("kind")))
        if plural is None:
            return ""
        try:
            got = self.cluster.get_json(
                f"/apis/apps/v1/namespaces/{meta.get('namespace')}/{plural}/{owner.get('name')}"
            )
        except ClusterError:
            return "; replicas unknown"
        replicas = (got.get("spec") or {}).get("replicas", 1)
        return "; the only replica" if replicas == 1 else ""

    def ask(self, name: str, *, only_refused: bool, live: Mapping[str, Mapping[str, Any]]) -> Tick:
        node = self.p["nodes"][name]
        node["choice"] = f"drain-timeout:{name}:{node['round']}"
        node["data_loss"] = self.data_loss(node, live)
        node["risks"] = self.risks(node, live)
        node["stuck"] = [
            k
            for k, e in sorted(node["pods"].items())
            if e["state"] in _LEFT and ((live.get(k) or {}).get("metadata") or {}).get("deletionTimestamp")
        ]
        node["dead"] = self.node_down(name) if node["stuck"] else ""
        left = sum(1 for e in node["pods"].values() if e["state"] in _LEFT)
        what = "only refused pods are left" if only_refused else f"timeout reached with {left} pod(s) left"
        self.posts.append(
            Post(
                key=f"drain-stalled:{name}:{node['round']}",
                text=f"node {name}: {what}{named(self.stall_rules(name, node, live))}; asking what to do",
            )
        )
        return self.result(choice=self.choice(name), wait=5.0)

    def _intend(self, node: dict[str, Any], keys: Sequence[str], state: str, decision: Decision) -> int:
        """Store `state` (a delete's intent, written at the next tick) for the pods `keys` of
        `node`, with who decided and why; the node's timer starts again. How many."""
        for key in keys:
            node["pods"][key].update(state=state, next=None)
        node["forced"] = {"by": decision.by, "reason": decision.reason}
        node["started"] = iso(self.now)
        return len(keys)

    def decide(self, name: str, decision: Decision) -> Tick:
        node = self.p["nodes"][name]
        round_ = node["round"]
        why = f" ({decision.reason})" if decision.reason else ""
        who, audited = f"<@{decision.by}>{why}", f"{decision.by}{why}"  # the thread's mention, the audit's id
        if decision.option == WAIT.id:
            node["started"] = iso(self.now)
            text = f"node {name}: {who} chose to wait 15 more minutes"
        elif decision.option == DELETE.id:
            # Pods already terminating are not deleted again: it would not make them go sooner.
            deletable = [k for k, e in node["pods"].items() if e["state"] in _DELETABLE]
            deleting = self._intend(node, deletable, "deleting", decision)
            text = f"node {name}: {who} chose to delete the remaining pods instead of evicting them"
            terminating = (
                sum(1 for e in node["pods"].values() if e["state"] in ("evicted", "deleting")) - deleting
            )
            if terminating:
                text += (
                    f" ({deleting} deleted; {terminating} already Terminating, which a delete does not hurry)"
                )
        elif decision.option == FORCE.id and node.get("stuck"):
            stuck = [k for k in node["stuck"] if node["pods"].get(k, {}).get("state") in _LEFT]
            forcing = self._intend(node, stuck, "forcing", decision)
            text = f"node {name}: {who} chose to force-delete {forcing} pod(s) stuck Terminating (grace 0)"
        elif decision.option == SKIP.id:
            self.repool(name)
            node["state"] = "skipped"
            node["ended"] = iso(self.now)
            node["pods"] = {}
            # Who left it cordoned and why: the card, the step's ending and the report say it.
            node["skip"] = {"by": decision.by, "reason": decision.reason}
            text = f"node {name}: {who} chose to skip it; it stays cordoned"
        else:
            return self.result(choice=self.choice(name), wait=5.0)
        node["choice"] = None
        node["round"] = round_ + 1
        self.posts.append(Post(key=f"drain-decision:{name}:{round_}", text=text, people=(decision.by,)))
        self.audit.append(("drain-decision", f"node {name}, round {round_}: {decision.option} by {audited}"))
        return self.result(wait=0.0)


def _eviction_result(outcome: bool | BaseException) -> str:
    """An eviction request's result, as telemetry counts it."""
    if outcome is True:
        return "evicted"
    if outcome is False:
        return "gone"
    return "blocked" if isinstance(outcome, EvictionBlocked) else "error"
