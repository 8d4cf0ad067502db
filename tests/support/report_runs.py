"""A finished run in a real store, as the run machinery and the drain jobs leave it, for the report.

`stored_run(store, nodes=…)` writes the built-in EKS plan's run through the store's own API: every
step's gate opened, approved (by the roster, after a wait), run and finished, with the audit rows
the run service writes (`bot.core.runs.service`), the approvals, and a drain job per node group
whose progress has the per-node times the drain job stores (`bot.core.jobs.drain`). `checks` fails
and is skipped after a review; one node per group has a blocked eviction; a watch posts a
CrashLoopBackOff episode and a drain a known issue (KI006) in the thread. With `watch` (the default)
a watch of the run sampled its unhealthy pods by class through the drains (`watch_samples`): pods
not Ready and Pending during each drain, a CrashLoopBackOff spike during the third, when the watch
posted a known issue (KI003) in its own thread. The numbers of nodes are the caller's (150 for the
benchmark), so the report can be measured and looked at without a cluster.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from bot.adapters.store import Store
from bot.core.audit import audit_entry
from bot.core.runs.plans import Plan, parse_plan
from bot.records import Approval, AuditEntry, JobRow, RunRow, StepRun, StepState, WatchRow
from bot.resources import BUILTIN_PLANS

GROUPS = ("control-plane", "istio", "ng-shared", "others", "logging")
ROSTER = {"primary": ("U0PRIMARY",), "shadow": ("U0SHADOW",), "coordinator": ("U0COORD",)}


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


#: The check step's failure line (bot.core.actions.check), before it was skipped.
CHECK_FAILED = (
    "pre-flight check for 1.25 FAILED: 2 Required — API001 (HorizontalPodAutoscaler shop/web), "
    "KI005 (DaemonSet kube-system/kube-proxy); 3 Recommended — the full report is attached"
)


def approver_of(index: int) -> str:
    """Who approved the start of the plan's step at `index` in `stored_run`: they take turns."""
    return "U0SHADOW" if index % 2 else "U0PRIMARY"


@functools.cache
def _builtin_plan() -> tuple[str, Plan]:
    """The eks-nodegroups plan's text and the (frozen) plan, parsed once: ~70 ms a parse, and the
    report's tests write a run or look a step up several times each."""
    text = (BUILTIN_PLANS / "eks-nodegroups.yaml").read_text()
    return text, parse_plan(text, source="eks-nodegroups.yaml")


def step_index(step_id: str) -> int:
    """Where step `step_id` is in the eks-nodegroups plan `stored_run` writes."""
    return [s.id for s in _builtin_plan()[1].steps].index(step_id)


def stored_run(
    store: Store,
    *,
    run_id: str = "RREPORT1",
    nodes: Mapping[str, int] | None = None,
    start: datetime = datetime(2026, 11, 28, 13, 0, tzinfo=UTC),
    watch: bool = True,
    watch_posts: bool = True,
    pace: float = 1.0,
) -> str:
    """Write a completed run of the eks-nodegroups plan; its id. `watch`: a watch of the run sampled
    its pods; `watch_posts`: a watch posted in the run's thread (without both, no watch ran);
    `pace`: every wait and every piece of work that long times over (1/60: the five hours of the
    run in five minutes, as a rehearsal on the sim's clock goes)."""
    nodes = dict(nodes or dict.fromkeys(GROUPS, 2))
    text, plan = _builtin_plan()
    plan_id = store.save_plan(name=plan.name, text=text, loaded_by="U0PRIMARY", loaded_at=start)
    audit: list[AuditEntry] = []
    approvals: list[Approval] = []
    steps: list[StepRun] = []
    jobs: list[JobRow] = []

    def event(at: datetime, kind: str, step: str, detail: str = "", user: str = "bot") -> None:
        audit.append(
            audit_entry(at=at, kind="run", subcommand=kind, arguments=step, detail=detail, user_id=user,
                        source="terminal", channel_id="C0OPS", run_id=run_id)
        )  # fmt: skip

    t = start
    for i, step in enumerate(plan.steps):
        opened = t
        wait = timedelta(minutes=2 + (i * 7) % 11) * pace
        started = opened + wait
        approver = approver_of(i)
        event(opened, "gate_opened", step.id, "start")
        event(started, "approved", step.id, "start roles=primary", approver)
        approvals.append(
            Approval(step_id=step.id, phase="start", epoch=1, user_id=approver, roles=("primary",),
                     decision="approve", at=started)
        )  # fmt: skip
        event(started, "step_running", step.id, "", approver)
        drain = next((a for a in step.actions if a.name == "drain"), None)
        group = str(drain.args.get("nodegroup", "")) if drain is not None else ""
        count = nodes.get(group, 0)
        work = (
            timedelta(minutes=3 + 6 * count) if drain is not None else timedelta(minutes=4 + i % 5)
        ) * pace
        finished = started + work
        state, note = StepState.SUCCEEDED, ""
        if step.id == "checks":
            failed = started + work
            # As the run service writes them: the event's detail, then the plan's local time.
            event(failed, "step_failed", step.id, f"{CHECK_FAILED} [2026-11-28 22:00 Asia/Tokyo]")
            finished = failed + timedelta(minutes=6) * pace
            state, note = StepState.SKIPPED, "skipped by U0PRIMARY: the findings were reviewed"
            event(finished, "step_skipped", step.id, "the findings were reviewed", "U0PRIMARY")
        else:
            event(finished, "step_succeeded", step.id)
        steps.append(
            StepRun(step_id=step.id, state=state, epoch=1, started_by=approver, opened_at=opened,
                    started_at=started, finished_at=finished, note=note)
        )  # fmt: skip
        if drain is not None:
            jobs.append(_drain_job(run_id, step.id, group, count, started, work, pace))
        t = finished
    run = RunRow(
        id=run_id, plan_id=plan_id, plan_name=plan.name, cluster=plan.cluster, state="completed",
        version=1, roster=ROSTER, reason="", created_by="U0PRIMARY", created_at=start, updated_at=t,
    )  # fmt: skip
    store.create_run(run, steps, audit=audit)
    store.commit_run(
        run_id=run_id, expected_version=1, state="completed", roster=ROSTER, reason="", updated_at=t,
        new_approvals=approvals,
        outbox=[
            *([("watch:1:crashloop:payments/payments-worker:1",
                json.dumps({"text": "payments-worker entered CrashLoopBackOff"}))] if watch_posts else []),
            ("job:3:rule:KI006:payments/api:1", json.dumps({"text": "Known issue KI006"})),
        ],
    )  # fmt: skip
    for job in jobs:
        store.create_job(job)
    if watch:
        _watch_samples(store, run_id, [(j.started_at, j.ended_at or j.started_at) for j in jobs])
    return run_id


#: The known issue the watch posts at the crash loop's start (a watch's key: `rule:<id>:<workload>:<n>`).
WATCH_KNOWN_ISSUE = ("KI003", "payments/Deployment/payments-worker")


def _watch_samples(store: Store, run_id: str, drains: list[tuple[datetime, datetime]]) -> None:
    """A watch over the drains, sampling as the watch service does: when the counts change."""
    first, last = drains[0][0], drains[-1][1]
    watch_id = store.create_watch(
        WatchRow(id=0, cluster="prod", channel="C0OPS", run_id=run_id, step_id="watch-rollout",
                 started_by="U0PRIMARY", started_at=first)
    )  # fmt: skip
    assert store.claim_watch(watch_id, owner="p1", now=first, stale_before=first)
    assert store.add_watch_sample(watch_id, owner="p1", at=first, counts={})
    for n, (began, ended) in enumerate(drains):
        took = ended - began
        for k in range(1, 6):
            at = began + took * k / 6
            counts = {"Not ready": 2 + (k * 3 + n) % 7, "Pending/unschedulable stuck": (k + n) % 3}
            if n == 2 and 2 <= k <= 4:
                counts["CrashLoopBackOff"] = 4 * k
                if k == 2:
                    rule, workload = WATCH_KNOWN_ISSUE
                    key = f"rule:{rule}:{workload}:1"
                    assert store.publish_watch(
                        watch_id, owner="p1", summary="{}", at=at,
                        outbox=[(key, json.dumps({"text": f"Known issue {rule}"}))],
                    )  # fmt: skip
            assert store.add_watch_sample(watch_id, owner="p1", at=at, counts=counts)
        assert store.add_watch_sample(watch_id, owner="p1", at=ended, counts={})
    assert store.publish_watch(watch_id, owner="p1", summary="{}", at=last, end_reason="target_reached: done")


def _drain_job(
    run_id: str, step_id: str, group: str, count: int, start: datetime, work: timedelta, pace: float = 1.0
) -> JobRow:
    names = [
        f"ip-10-0-{GROUPS.index(group) if group in GROUPS else 9}-{n}.ec2.internal" for n in range(count)
    ]
    per = (work - timedelta(minutes=2) * pace) / max(count, 1)
    cordoned = start + timedelta(minutes=1) * pace
    progress: dict[str, object] = {"order": names, "cordoned": names, "nodes": {}}
    for n, name in enumerate(names):
        began = cordoned + per * n
        node: dict[str, object] = {
            "state": "done", "was": False, "cordoned_at": _iso(cordoned), "began": _iso(began),
            "started": _iso(began), "ended": _iso(began + per * 0.9), "counts": {"evicted": 4},
        }  # fmt: skip
        if n == 0:
            node["blocked_at"] = _iso(began + per * 0.3)
        progress["nodes"][name] = node  # type: ignore[index]
    return JobRow(
        id=0, run_id=run_id, step_id=step_id, epoch=1, kind="drain", cluster="prod",
        args=json.dumps({"nodegroup": group, "version": "1.25.16"}), state="done", ok=True,
        detail=f"drained {count} node(s)", progress=json.dumps(progress), started_by="U0PRIMARY",
        started_at=start, ended_at=start + work,
    )  # fmt: skip
