"""The owner's path end to end (issue 40 item 7), through the HTTP front door, the real slack_sdk
client and the Slack stub (which validates every Block Kit payload), on the `gitops` sim:
`/upgrade action flux-suspend object=kustomization/flux-system/apps` opens a gate of two people
whose dry run says what the patch is; approved, the job suspends the Kustomization once and the
manifest it had before the change is uploaded into the run's thread as a YAML file, and again with
the run's report."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from bot.sim import SimCluster
from tests.support.awaited import Bot
from tests.support.fix_buttons import approve_and_complete, fix_bot, scanned_by_hand, wait_for
from tests.support.slack_stub import SlackStub


@pytest.fixture
def sim(sim_factory: Callable[..., SimCluster]) -> SimCluster:
    return sim_factory("gitops", speed=0.0, seed=1)


@pytest.fixture
def bot(
    write_config: Callable[..., Path], slack_stub: SlackStub, sim: SimCluster, tmp_path: Path
) -> Iterator[tuple[Bot, Path]]:
    with fix_bot(write_config, slack_stub, sim, tmp_path) as started:
        yield started


def _gate_post(bot: Bot, step: str) -> dict[str, Any]:
    value = bot.gate(step)
    return next(p for p in reversed(bot.posts()) if value in json.dumps(p.get("blocks") or []))


def test_flux_suspend_is_gated_shows_its_patch_and_uploads_the_manifest_it_changed(
    bot: tuple[Bot, Path], sim: SimCluster, slack_stub: SlackStub
) -> None:
    front, kubeconfig = bot
    objects = client.CustomObjectsApi(
        config.new_client_from_config(config_file=str(kubeconfig), persist_config=False)
    )
    duties, _, runner = scanned_by_hand(front)
    try:
        front.command(
            "action flux-suspend object=kustomization/flux-system/apps --reason fix aws-node by hand"
        )
        run_id = str(front.services.store.runs()[0].id)
        gate = _gate_post(front, "flux-suspend")
        shown = json.dumps(gate["blocks"], ensure_ascii=False)
        assert "*flux-suspend* `object=kustomization/flux-system/apps`" in shown
        # Who asked is named as a person, not as a raw Slack id ("Asked by U0PRIMARY: …").
        assert "Asked by <@U0PRIMARY>: fix aws-node by hand" in gate["text"]
        assert "Asked by <@U0PRIMARY>: fix aws-node by hand" in shown
        assert '(JSON merge patch {\\"spec\\": {\\"suspend\\": true}}) so it is suspended' in shown
        before = len(slack_stub.uploads)
        approve_and_complete(
            front, front.gate("flux-suspend"), "flux-suspend", run_id=run_id, runner=runner, sim=sim
        )
    finally:
        duties.stop_all()
    ks = objects.get_namespaced_custom_object(
        "kustomize.toolkit.fluxcd.io", "v1", "flux-system", "kustomizations", "apps"
    )
    assert ks["spec"]["suspend"] is True

    # Once with the step's line in the thread, once among the run report's attachments when the
    # run ended (after its picture, HTML and Markdown).
    def kept() -> list[Any]:
        files = list(slack_stub.uploads.values())[before:]
        return [yaml.safe_load(f) for f in files if b"kind: Kustomization" in f]

    backups = wait_for(lambda: kept() if len(kept()) == 2 else None, what="the manifest, twice")
    assert backups[0] == backups[1]
    assert backups[0]["metadata"]["name"] == "apps"
    assert backups[0]["spec"].get("suspend") is None  # as it was before the change
    assert "managedFields" not in backups[0]["metadata"]
