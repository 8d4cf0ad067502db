"""Snapshots and diffs: a compact record of cluster state, and a semantic comparison of two.

projection  raw Kubernetes JSON pages → slim records, streamed in bounded memory
diff        two snapshots → regressions and expected changes, keyed by node and workload
service     take-and-store, find by id or label, export, compare
"""
