"""Watches: rollout status streamed into a card and a thread (issue 13) — the pure core.

`schema` declares the fields the adapter decodes; `model` folds list/watch events into a
`WatchState` and publishes a compact `Summary`; `milestones` derives the thread's lines from two
summaries; `verdict` says whether the watch runs on, reached its target, stopped or timed out;
`card` builds the context of `templates/watch_card.txt.j2`. No I/O, no clock, no threads: the
driver (store, streams, Slack) lives around it.
"""
