"""upgrade-bot: a Slack ChatOps bot that runs Kubernetes cluster upgrades with a team."""

__version__ = "0.2.0"
