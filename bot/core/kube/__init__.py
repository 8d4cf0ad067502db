"""What the bot knows of Kubernetes itself, shared by the features: below jobs, watches, checks and
snapshots, importing none of them.

- `wire`: the msgspec leaves every wire schema is built of (`Wire`, `Pruned`, conditions, container
  states, tolerations, rollout strategies, …) and the pod, node and event structs the watches and
  the jobs both read;
- `objects`: what a pod is doing (its health class, `classify`), whose it is (`workload_of`), which
  node group a node is in, Kubernetes timestamps;
- `versions`: kubelet and Kubernetes version strings.
"""
