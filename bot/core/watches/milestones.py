"""Milestones: the thread's lines, derived from two Summaries (the last published one and now).

State-based, never event-based: whatever changed between the summary the thread last reflected and
the present one comes out, once. After a restart the driver lists again and calls this with the
persisted summary, so transitions that happened while the bot was down come out exactly once too.
Each milestone's key is built from names, uids, episode numbers and generations, never from
generated text, so the delivery layer can deduplicate on it.

The first summary of a watch (`before is None`) is a baseline: nodes that are already there, Ready
or cordoned, are not news; workloads already in a class the runbook watches (CrashLoopBackOff,
ImagePullBackOff/ErrImagePull, Error, Init stuck) are (their episode is announced), and so is a
verdict that is already final.

Known issues: each (rule, workload, episode) that opened since `before` comes out once, keyed
`rule:<id>:<workload>:<episode>`, its text the rule's title, explanation, remediation and links
(from `rules`, by id) — long, so the service posts each as a reply of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bot.core.kube.objects import KUBE_SYSTEM
from bot.core.rendering import slack_escape
from bot.core.rules import Rule, RuleFix
from bot.core.rules.known import known_issue_text
from bot.core.watches.spec import WatchSpec
from bot.core.watches.summary import NodeView, Summary
from bot.core.watches.verdict import FINAL, STOPPED, TARGET_OPEN, TARGET_REACHED, TIMED_OUT, verdict

NODE_READY = "node-ready"
NODE_CORDONED = "node-cordoned"
NODE_REMOVED = "node-removed"
CRASHLOOP = "crashloop"
IMAGEPULL = "imagepull"
ERROR = "error"
INIT_STUCK = "init"
#: The classes the runbook watches: a workload entering one is a thread post, once per episode
#: (the key's kind is the episode's kind; "crashloop:<workload>:<n>" as it always was).
EPISODE_WORDS = {
    CRASHLOOP: "entered CrashLoopBackOff",
    IMAGEPULL: "cannot pull its image (ImagePullBackOff/ErrImagePull)",
    ERROR: "has pods in Error",
    INIT_STUCK: "is stuck in Init",
}
_EPISODE_ICONS = {
    CRASHLOOP: ":rotating_light:",
    IMAGEPULL: ":rotating_light:",
    ERROR: ":x:",
    INIT_STUCK: ":hourglass:",
}
ROLLOUT_COMPLETE = "rollout-complete"
TARGET = "target-reached"
TARGET_WITH_FINDINGS = "target-reached-open-findings"
STOPPED_KIND = "stopped"
KNOWN_ISSUE = "rule"
_NO_RULES: Mapping[str, Rule] = {}


@dataclass(frozen=True, kw_only=True)
class Milestone:
    key: str  # deterministic, never generated text
    kind: str
    text: str  # one Slack mrkdwn line


def _code(text: object) -> str:
    return f"`{slack_escape(text)}`"


def milestones(
    before: Summary | None, after: Summary, spec: WatchSpec, rules: Mapping[str, Rule] = _NO_RULES
) -> list[Milestone]:
    out: list[Milestone] = []
    if before is not None:
        out.extend(_node_milestones(before, after))
    out.extend(_episode_milestones(before, after))
    out.extend(_rule_milestones(before, after, rules))
    if before is not None:
        done_before = {(c.key, c.generation) for c in before.completed}
        for c in after.completed:
            if (c.key, c.generation) in done_before:
                continue
            namespace, kind, name = c.key.split("/", 2)
            out.append(
                Milestone(
                    key=f"{ROLLOUT_COMPLETE}:{c.key}:{c.generation}",
                    kind=ROLLOUT_COMPLETE,
                    text=f":white_check_mark: Rollout complete: {kind} {_code(f'{namespace}/{name}')}"
                    f" (generation {c.generation})",
                )
            )
    out.extend(_verdict_milestones(before, after, spec))
    return out


def _by_group(nodes: tuple[NodeView, ...]) -> tuple[NodeView, ...] | list[NodeView]:
    """`nodes` by (group, name): a summary's are already (`WatchState.summary`), so on every
    publish of a 5,000-node watch this is one pass, not a sort of both summaries' nodes."""
    keys = [(n.group, n.name) for n in nodes]
    if keys == sorted(keys):  # a run already in order: one pass in C
        return nodes
    return sorted(nodes, key=lambda n: (n.group, n.name))


def _node_milestone(kind: str, node: NodeView, icon: str, what: str, *, kubelet: bool = True) -> Milestone:
    """A node's milestone, keyed by its name and uid: "<icon> Node `name` <what> (group, kubelet v)"."""
    about = slack_escape(node.group) + (f", kubelet {slack_escape(node.kubelet or '?')}" if kubelet else "")
    return Milestone(
        key=f"{kind}:{node.name}:{node.uid}",
        kind=kind,
        text=f"{icon} Node {_code(node.name)} {what} ({about})",
    )


def _node_milestones(before: Summary, after: Summary) -> list[Milestone]:
    out: list[Milestone] = []
    old = {n.uid or n.name: n for n in before.nodes}
    new = {n.uid or n.name: n for n in after.nodes}
    for node in _by_group(after.nodes):
        key = node.uid or node.name
        if new[key] is not node:
            continue  # a name listed twice: the last one, as the dict holds it
        was = old.get(key)
        if node.ready and (was is None or not was.was_ready):
            out.append(_node_milestone(NODE_READY, node, ":large_green_circle:", "joined and is Ready"))
        if node.cordoned and (was is None or not was.cordoned):
            out.append(_node_milestone(NODE_CORDONED, node, ":construction:", "cordoned"))
    for node in _by_group(before.nodes):
        key = node.uid or node.name
        if key not in new and old[key] is node:
            out.append(_node_milestone(NODE_REMOVED, node, ":wave:", "drained and removed", kubelet=False))
    return out


def _episode_milestones(before: Summary | None, after: Summary) -> list[Milestone]:
    """A workload entering a class the runbook watches (CrashLoopBackOff, ImagePullBackOff/
    ErrImagePull, Error, Init stuck): one post per workload, kind and episode.

    An episode new since `before` is announced even if it has closed again: a crash loop's pod
    spends seconds in CrashLoopBackOff and then runs Ready until its next crash, so a publish can
    fall between a crash and the next one (the driver drained part of a burst of events). The
    episode reopened after it is the same one (`EPISODE_REOPEN`) and is already in `before`, so
    announced only then it would never be."""
    # An episode in `before`, open or closed, was announced (a state seeded after a restart keeps
    # the ones its last published summary had, each announced by then).
    seen = {(e.workload, e.kind, e.number) for e in before.episodes} if before is not None else set()
    episodes = [
        e for e in after.episodes if e.kind in EPISODE_WORDS and (e.workload, e.kind, e.number) not in seen
    ]
    episodes.sort(key=lambda e: (not e.workload.startswith(KUBE_SYSTEM + "/"), e.since, e.kind, e.workload))
    out = []
    for e in episodes:
        namespace, kind, name = e.workload.split("/", 2)
        again = f" (episode {e.number})" if e.number > 1 else ""
        pods = f"{e.pods} pod{'s' if e.pods != 1 else ''}" if e.open else "no pod in it right now"
        out.append(
            Milestone(
                key=f"{e.kind}:{e.workload}:{e.number}",
                kind=e.kind,
                text=f"{_EPISODE_ICONS[e.kind]} {kind} {_code(f'{namespace}/{name}')} {EPISODE_WORDS[e.kind]}"
                f"{again}: {pods}",
            )
        )
    return out


def _rule_milestones(before: Summary | None, after: Summary, rules: Mapping[str, Rule]) -> list[Milestone]:
    seen = {(e.rule, e.workload, e.number) for e in before.rule_episodes} if before is not None else set()
    fresh = [e for e in after.rule_episodes if e.open and (e.rule, e.workload, e.number) not in seen]
    fresh.sort(key=lambda e: (not e.workload.startswith(KUBE_SYSTEM + "/"), e.since, e.rule, e.workload))
    out = []
    for e in fresh:
        out.append(
            Milestone(
                key=f"{KNOWN_ISSUE}:{e.rule}:{e.workload}:{e.number}",
                kind=KNOWN_ISSUE,
                text=known_issue_text(
                    e.rule, rules.get(e.rule), e.workload, pods=e.pods, evidence=e.evidence, remedy=e.remedy
                ),
            )
        )
    return out


#: Slack's limit on a button's value; the Fix button's names the watch and the finding's key.
MAX_BUTTON_VALUE = 2000


@dataclass(frozen=True, kw_only=True)
class FindingFix:
    """What a known issue's Fix button starts: the rule's action with its arguments filled."""

    rule_id: str
    workload: str  # the watch's key, "ns/Kind/name"
    action: str
    args: Mapping[str, str]

    @property
    def command(self) -> str:
        """The `/upgrade action` words it amounts to (shown under the button and at the gate)."""
        return " ".join([self.action, *(f"{k}={v}" for k, v in self.args.items())])


def finding_fix(rule: Rule | None, workload: str) -> FindingFix | None:
    """The fix a finding of `rule` about `workload` ("ns/Kind/name") offers, if any."""
    fix: RuleFix | None = rule.fix if rule is not None else None
    if rule is None or fix is None:
        return None
    namespace, kind, name = workload.split("/", 2)
    args = fix.args_for(kind=kind, namespace=namespace, name=name)
    if args is None:
        return None
    return FindingFix(rule_id=rule.id, workload=workload, action=fix.action, args=args)


def _ascii_number(text: str) -> bool:
    # `str.isdigit` also takes "١" and "²": a forged button value is not a key the bot wrote.
    return text.isascii() and text.isdigit() and len(text) <= 18


def parse_finding_key(key: str) -> tuple[str, str] | None:
    """A known issue's milestone key "rule:<id>:<ns/Kind/name>:<episode>" → (rule id, workload)."""
    kind, _, rest = key.partition(":")
    rule_id, _, rest = rest.partition(":")
    workload, _, episode = rest.rpartition(":")
    if kind != KNOWN_ISSUE or not rule_id or workload.count("/") < 2 or not _ascii_number(episode):
        return None
    return rule_id, workload


def _verdict_milestones(before: Summary | None, after: Summary, spec: WatchSpec) -> list[Milestone]:
    now_verdict = verdict(after, spec, after.at)
    if now_verdict.state not in FINAL:
        return []
    if before is not None:
        then = verdict(before, spec, before.at)
        if then.state == now_verdict.state and then.code == now_verdict.code:
            return []
    key = kind = STOPPED_KIND
    if now_verdict.state == TARGET_OPEN:
        key = kind = TARGET_WITH_FINDINGS
        head = ":warning: Target reached with open findings —"
    elif now_verdict.state == TARGET_REACHED:
        key = kind = TARGET
        head = ":tada: Target reached —"
    else:
        key = f"{STOPPED_KIND}:{now_verdict.code}"
        icon = ":octagonal_sign:" if now_verdict.state == STOPPED else ":hourglass:"
        word = "Ended" if now_verdict.state == TIMED_OUT else "Stopped"
        head = f"{icon} {word}:"
    return [Milestone(key=key, kind=kind, text=f"{head} {slack_escape(now_verdict.reason)}")]
