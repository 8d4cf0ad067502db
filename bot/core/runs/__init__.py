"""Runs, gates and plans: the upgrade runbook as a state machine, and the service that moves it.

plans      the YAML runbook parsed and validated into frozen dataclasses
gates      who must confirm a step: pure decisions over votes
machine    one run as a state machine over plain data, time passed in
pipelines  CI builds reported on a run's steps: checked, shown, and what a failed one does
library    the one way to find a stored plan, and to load a run whole
service    load → transition → commit with optimistic concurrency → publish
cards      the run's card (its step rows: `summary_rows`), thread and gate messages in Slack
"""
