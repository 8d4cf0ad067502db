"""Durable cluster jobs (issue 15): cordon, uncordon, drain, restart, wait-nodegroup."""
