"""The contract between a cluster job's logic and the driver that runs it (issue 15).

A job (cordon, uncordon, drain, restart, wait-nodegroup) is a resumable state machine whose whole
state is a JSON-able `progress` dict stored in the database. The driver (`bot.frontdoor.acting`,
on the triggers front door, leader only, fenced like the watches) claims the job's row, calls
`tick` again and again, and after each tick stores in ONE transaction the new progress, the thread
posts the tick owes (an outbox keyed by `Post.key`, so a post is never made twice) and its audit
facts; then it edits the run card's live section and posts the thread lines.

Never twice, never lost — the rule every job keeps:
- a tick may read the cluster freely;
- a tick performs a write (cordon, evict, delete, restart stamp) only for work that a PREVIOUS,
  already stored, progress marked as pending, and each write's effect is observable in the cluster
  (the node is unschedulable; the pod is gone, its UID changed, or it has a deletionTimestamp; the
  template's restartedAt equals the stamp stored in progress);
- so a tick that runs again after a crash first observes, and only re-issues a write whose effect
  is absent.
`kill -9` mid-job leaves the step interrupted (as for any action); `resume` re-opens the step's
gate and the SAME job row continues from its stored progress.

A job that needs people (a drain past its per-node timeout) returns a `Choice`; the driver posts
it in the thread with buttons gated by the option's roles, stores the answer, and the next tick
gets it as `decision`. A job never forces anything by itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

#: A job's persisted state: JSON-able (str keys; str, int, float, bool, None, lists, dicts).
Progress = dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class Post:
    """A line the job owes the run's thread; `key` is deterministic (never the text), e.g.
    `pdb-blocked:payments/api-pdb:ip-10-0-1-7` — the same key is posted once, ever. `text` is
    plain text (mrkdwn emphasis at most, never `<…>` markup): the driver makes it inert, but for
    the mentions `<@ID>` of the `people` it names (who answered the job's question)."""

    key: str
    text: str
    broadcast: bool = False
    #: The people the line names as `<@ID>`: shown as mentions; any other `<…>` in it (a pod's
    #: name, a person's reason) stays inert text.
    people: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class ChoiceOption:
    """One answer people can give: `id` (what `decision` carries), a button label, the plan roles
    allowed to pick it, whether a reason must be typed (deleting a pod instead of evicting), and
    who may not pick it (the person whose request it confirms: a second person must)."""

    id: str
    label: str
    roles: tuple[str, ...] = ("primary", "shadow")
    needs_reason: bool = False
    #: People who may not pick it: who asked for what it confirms (four eyes on a forced update).
    not_by: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Choice:
    """The job stopped and asks people: a question with options; `key` makes the post once."""

    key: str
    question: str
    options: tuple[ChoiceOption, ...]


@dataclass(frozen=True, kw_only=True)
class Decision:
    """People's answer to the job's open `Choice`."""

    choice_key: str
    option: str
    by: str
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class Tick:
    """What one tick did and what the job wants next."""

    progress: Progress
    posts: tuple[Post, ...] = ()
    #: Audit facts of this tick: (what, detail) — every mutation's before and after.
    audit: tuple[tuple[str, str], ...] = ()
    #: The live section's lines for the run card (short: counts, a progress bar, a few names).
    card: tuple[str, ...] = ()
    done: bool = False
    ok: bool = True
    #: One line for the step when done (as `ActionResult.detail`).
    detail: str = ""
    #: When done and ok: what the job left for people, in a few words ("1 node skipped, still
    #: cordoned: ip-10-0-3-7"); the step's `left_behind`, kept in full on the card and the ending.
    left_behind: str = ""
    #: Set when the job waits for people; the driver stops ticking until a decision arrives.
    choice: Choice | None = None
    #: Seconds until the next tick (the driver may tick earlier on a watch event).
    wait: float = 1.0
    #: What this tick did, counted for telemetry once its progress is stored: (what, how many),
    #: e.g. ("eviction:evicted", 3), ("node:drained", 1).
    counts: tuple[tuple[str, int], ...] = ()


class Job(Protocol):
    """One kind of cluster job. `cluster` is the kube adapter (`bot.adapters.kube.Cluster`)."""

    kind: str

    def plan(self, cluster: Any, args: Mapping[str, str], *, now: datetime) -> Progress:
        """The initial progress: exactly what will be done (nodes, pods, workloads), read now."""
        ...

    def dry_run(self, cluster: Any, progress: Progress) -> list[str]:
        """Lines listing exactly what would happen (server-side dry run where the API has one);
        changes nothing."""
        ...

    def tick(
        self, cluster: Any, progress: Progress, *, now: datetime, decision: Decision | None = None
    ) -> Tick:
        """Advance the job a little, keeping the rule of the module docstring."""
        ...


@dataclass(frozen=True, kw_only=True)
class JobRegistry:
    """Jobs by kind (the action names plans use)."""

    jobs: Mapping[str, Job] = field(default_factory=dict)

    def get(self, kind: str) -> Job | None:
        return self.jobs.get(kind)
