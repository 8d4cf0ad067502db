"""Evidence at the gates: the alerts, metrics and app health a step is judged by alongside the
people (docs/evidence-gate.md). Ports to Alertmanager and Prometheus live in `ports`; the adapters
in bot/adapters/alertmanager.py and bot/adapters/prometheus.py implement them."""
