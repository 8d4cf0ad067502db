"""The AWS side of the sim for tests: dummy credentials, the sim's call counts, an EKS scenario
whose node groups all match the control plane (so EKS accepts a control-plane update at once).

    env = {**bot_env, **aws_env(tmp_path)}     # a bot process whose boto3 finds only these
    aws_calls(sim)["UpdateClusterVersion"]     # how often the sim's AWS APIs were called
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

from bot.sim.world.scenario import Scenario, load_scenario

EKS_NAME = "runbook-prod"
REGION = "ap-northeast-1"


def aws_env(tmp_path: Path) -> dict[str, str]:
    """Dummy credentials from the environment, and no shared files or instance metadata to find."""
    return {
        "AWS_ACCESS_KEY_ID": "sim",
        "AWS_SECRET_ACCESS_KEY": "sim",
        "AWS_CONFIG_FILE": str(tmp_path / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-aws-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def aws_calls(sim: Any) -> dict[str, int]:
    with urllib.request.urlopen(f"{sim.aws_url}/sim/calls", timeout=10) as response:
        return dict(json.load(response))


def provider_yaml(sim: Any) -> str:
    """A cluster's `provider:` for the sim's EKS cluster (inline YAML)."""
    return f"{{eks: {{name: {EKS_NAME}, region: {REGION}, endpoint_url: '{sim.aws_url}'}}}}"


def eks_scenario_in_step(**aws: Any) -> Scenario:
    """`eks-nodegroups` with its `others` group on 1.24 like the rest (the scenario plants it on
    1.22, and EKS refuses a control-plane update while a group is behind), `aws` keys overridden."""
    scenario = load_scenario("eks-nodegroups")
    for group in scenario.node_groups:
        if group.name == "others":
            group.version = "1.24.17"
    assert scenario.aws is not None
    scenario.aws = {**scenario.aws, **aws}
    return scenario
