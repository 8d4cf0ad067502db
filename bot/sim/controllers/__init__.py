"""The sim's middle layer: the control loops that react to the API — the engine (work queues and
timers on the simulated clock), scheduler, kubelets, node lifecycle, workload controllers,
disruption-budget status and housekeeping. It is given the API layer's parts and imports nothing
from `world`.
"""
