"""The card: progress per node group, unhealthy pods by class, rollouts, a date token; always bounded."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

from slack_sdk.models.blocks import Block

from bot.core.rendering import Renderer
from bot.core.watches.card import card_context, progress_bar
from bot.core.watches.milestones import milestones
from bot.core.watches.model import WatchState
from bot.core.watches.spec import WatchSpec
from bot.core.watches.verdict import verdict
from bot.resources import BUILTIN_TEMPLATES
from tests.support.watch_objects import at, crashing, deployment, node, pod, spec, stamp, target_spec


def render(state: WatchState, spec: WatchSpec, minutes: float) -> str:
    summary = state.summary(at(minutes))
    context = card_context(summary, spec, verdict(summary, spec, at(minutes)), at(minutes))
    return Renderer([BUILTIN_TEMPLATES]).render("watch_card", context).text


def render_blocks(state: WatchState, spec: WatchSpec, minutes: float, *, stop: bool = True) -> list[Any]:
    summary = state.summary(at(minutes))
    context = card_context(summary, spec, verdict(summary, spec, at(minutes)), at(minutes))
    if stop:
        context["stop"] = {"value": "7"}
    rendered = Renderer([BUILTIN_TEMPLATES]).render("watch_card", context)
    assert rendered.blocks is not None
    return rendered.blocks


def test_progress_bars_are_full_only_when_every_node_is_done() -> None:
    assert progress_bar(0, 4) == "░░░░░░░░░░"
    assert progress_bar(3, 4) == "▓▓▓▓▓▓▓░░░"
    assert progress_bar(99, 100) == "▓▓▓▓▓▓▓▓▓░"
    assert progress_bar(4, 4) == "▓▓▓▓▓▓▓▓▓▓"
    assert progress_bar(0, 0) == "░░░░░░░░░░"


def test_the_card_shows_groups_unhealthy_pods_rollouts_and_a_date_token() -> None:
    spec = target_spec(groups=("ng-a", "ng-c"))
    state = WatchState(spec)
    state.set_control_plane("v1.30.2-eks-1")
    state.sync(
        "node",
        [
            node("o1", cordoned=True),
            node("o2"),
            node("n1", kubelet="v1.30.2"),
            node("b1", "ng-b", ready=False),
        ],
        at(0),
    )
    state.sync(
        "pod",
        [crashing("a", deployment="payments-api"), crashing("d", "kube-system", deployment="coredns")],
        at(0),
    )
    state.sync("deployment", [deployment("payments-api", generation=4, updated=1)], at(0))
    text = render(state, spec, 2)
    assert "Control plane v1.30.2-eks-1" in text
    assert "`▓▓▓░░░░░░░` *ng-a* 1/3 on v1.30.2 · old cordoned 1 · old remaining 1 · NotReady 0" in text
    assert "*ng-b* 0/1 on v1.30.2 · old cordoned 0 · old remaining 1 · NotReady 1" in text
    assert "*ng-c* no node yet" in text
    assert "*CrashLoopBackOff*: 2 pods (1 in kube-system) — :warning: kube-system/coredns ×1" in text
    assert "• Deployment shop/payments-api: 1 of 3 new replicas have been updated" in text
    assert re.search(r"Updated at <!date\^\d+\^\{date_short_pretty\} \{time\}\|2026-11-23 12:02 UTC>", text)


def test_thousands_of_unhealthy_pods_make_counts_and_a_top_list_never_pod_names() -> None:
    spec = target_spec()
    state = WatchState(spec)
    state.sync("node", [node(f"n{i}", f"ng-{i:03d}") for i in range(150)], at(0))
    pods = [crashing(f"crash-pod-{i}", f"ns{i % 40}", deployment=f"svc-{i % 700}") for i in range(3000)]
    pods += [
        pod(f"pull-pod-{i}", ready=False, waiting="ImagePullBackOff", deployment=f"img-{i}")
        for i in range(1000)
    ]
    pods += [pod(f"pend-pod-{i}", phase="Pending", ready=False, unschedulable=True) for i in range(1000)]
    state.sync("pod", pods, at(0))
    state.sync("deployment", [deployment(f"svc-{i}", generation=2, updated=1) for i in range(500)], at(0))
    text = render(state, spec, 10)
    # The message text (the notification fallback) stays short; each Block Kit section is within
    # Slack's 3,000 characters.
    assert len(text) < 3500
    summary = state.summary(at(10))
    blocks = render_blocks(state, spec, 10)
    assert [b["type"] for b in blocks] == ["section", "section", "section", "section", "actions", "context"]
    for block in blocks:
        if block["type"] == "section":
            assert 0 < len(block["text"]["text"]) <= 3000
    assert summary.unhealthy_pods == 5000
    assert "crash-pod-" not in text
    assert "pull-pod-" not in text
    assert "*CrashLoopBackOff*: 3000 pods" in text
    assert "+1395 more workloads" in text
    assert "*Pending/unschedulable stuck*: 1000 pods" in text
    assert "…and 138 more node groups" in text
    assert "…and 492 more workloads mid-rollout" in text


def test_the_thread_template_joins_milestones_one_per_line() -> None:
    spec = target_spec(settle=timedelta(0))
    state = WatchState(spec)
    state.sync("node", [node("o1")], at(0))
    before = state.summary(at(0))
    state.apply("node", "ADDED", node("n<1>", kubelet="v1.30.2"), at(1))
    found = milestones(before, state.summary(at(1)), spec)
    text = Renderer([BUILTIN_TEMPLATES]).render("watch_thread", {"milestones": found}).text
    assert text.splitlines() == [m.text for m in found]
    assert "`n&lt;1&gt;`" in text  # escaped once, not twice


def test_each_node_group_line_shows_the_kubelet_versions_present() -> None:
    nodes = [node(f"o{i}", kubelet="v1.29.8") for i in range(3)] + [
        node(f"n{i}", kubelet="v1.30.2") for i in range(2)
    ]
    with_target = target_spec()
    state = WatchState(with_target)
    state.sync("node", nodes, at(0))
    assert (
        "*ng-a* 2/5 on v1.30.2 · old cordoned 0 · old remaining 3 · NotReady 0 · kubelet v1.29 ×3, v1.30 ×2"
        in (render(state, with_target, 1))
    )
    # Without a target, the versions are the only way to see how far the group got.
    plain = WatchState(spec())
    plain.sync("node", nodes, at(0))
    plain.apply("node", "DELETED", node("o0", kubelet="v1.29.8"), at(1))
    assert (
        "*ng-a* 4/4 Ready · old cordoned 0 · old remaining 0 · NotReady 0 · kubelet v1.29 ×2, v1.30 ×2"
        in (render(plain, spec(), 1))
    )


def test_the_card_has_a_stop_button_with_a_confirmation_and_none_once_final() -> None:
    sp = target_spec()
    state = WatchState(sp)
    state.sync("node", [node("n1")], at(0))
    state.sync("pod", [], at(0))
    *_, actions, _context = render_blocks(state, sp, 1)
    [button] = actions["elements"]
    assert (button["action_id"], button["value"], button["style"]) == ("watch_stop", "7", "danger")
    assert set(button["confirm"]) == {"title", "text", "confirm", "deny", "style"}
    assert "ends now with a final summary" in button["confirm"]["text"]["text"]
    assert "actions" not in [b["type"] for b in render_blocks(state, sp, 1, stop=False)]


def _valid_block_kit(blocks: list[Any]) -> None:
    """Slack's own models check every block (sizes, the button's confirm dialog, the section limit)."""
    parsed = Block.parse_all(blocks)
    assert len(parsed) == len(blocks)
    for block in parsed:
        block.validate_json()
    assert len(blocks) <= 50


def test_the_cards_block_kit_passes_slacks_own_models_and_so_does_the_docs_example() -> None:
    spec_ = target_spec(groups=("ng-a", "ng-c"))
    state = WatchState(spec_)
    state.sync("node", [node(f"n{i}", f"ng-{i:03d}") for i in range(150)], at(0))
    state.sync(
        "pod", [crashing(f"c{i}", f"ns{i % 40}", deployment=f"svc-{i % 700}") for i in range(3000)], at(0)
    )
    _valid_block_kit(render_blocks(state, spec_, 10))
    text = (Path(__file__).resolve().parents[3] / "docs" / "watch-card.md").read_text()
    example = json.loads(text.split("```json\n", 1)[1].split("\n```", 1)[0])
    _valid_block_kit(example["blocks"])
    assert [b["type"] for b in example["blocks"]] == ["section"] * 4 + ["actions", "context"]


def test_the_card_names_the_workloads_whose_readiness_flaps() -> None:
    """Pods in and out of Ready too briefly to be unhealthy (`WatchState._note_flap`): the card
    has a line for them by workload, kube-system first, in the text and in the Block Kit."""
    spec = target_spec()
    state = WatchState(spec)
    state.sync("node", [node("n1", kubelet="v1.30.2")], at(0))
    state.sync("pod", [], at(0))
    for name, namespace in (("c", "kube-system"), ("w1", "shop"), ("w2", "shop")):
        for minute in (1, 2, 3):
            for ready, went in ((False, minute), (True, minute + 0.5)):
                p = pod(
                    name,
                    namespace,
                    deployment="coredns" if namespace == "kube-system" else "web",
                    ready=ready,
                )
                p["status"]["conditions"] = [
                    {"type": "Initialized", "status": "True", "lastTransitionTime": stamp(at(0))},
                    {"type": "Ready", "status": str(ready), "lastTransitionTime": stamp(at(went))},
                ]
                state.apply("pod", "MODIFIED", p, at(went))
    text = render(state, spec, 4)
    line = (
        ":repeat: *Readiness flapping*: 3 pods not Ready again and again (3+ times in 10m) — "
        ":warning: kube-system/coredns ×1 (3 times), shop/web ×2 (6 times)"
    )
    assert line in text
    blocks = render_blocks(state, spec, 4)
    assert any(line in json.dumps(b, ensure_ascii=False) for b in blocks)
    _valid_block_kit(blocks)
