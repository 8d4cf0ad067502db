"""upgrade-bot: a Slack ChatOps bot that runs Kubernetes cluster upgrades with a team."""

__version__ = "0.1.0"
