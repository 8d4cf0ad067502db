"""The sim's top layer: the world outside the cluster — the cloud (node groups, the control plane's
version), mutating webhooks, scenarios and their YAML files, the large-cluster generator, and the
control API (`/sim/…`) that tests and rehearsals use to make things happen.
"""
