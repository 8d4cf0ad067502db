"""The literal lines operators saw in real upgrades (`tests/data/seed_lines/`, a copy of
`../shared/docs/SEED_LINES.md`), and which built-in rule claims which line: shared by the rules
engine's tests and the `rules test` command's."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COPY = ROOT / "tests" / "data" / "seed_lines" / "SEED_LINES.md"
#: Where CI puts the shared folder: read-only, beside the clone.
SHARED = ROOT.parent / "shared" / "docs" / "SEED_LINES.md"


@dataclass(frozen=True)
class Seed:
    section: str  # the start of its `## ` heading
    signal: str  # "log": the section's code block(s); "event": its first `code` span
    container: str | None = None
    reason: str | None = None


#: The rules that read logs or events, and the seed section whose line each must match.
CLAIMS = {
    "KI001": Seed("Istio: istio-proxy cannot start", "log", container="istio-proxy"),
    "KI002": Seed("Istio 1.13 → 1.14 (Istio Operator)", "log", container="istio-proxy"),
    "KI003": Seed("Istio Operator: HPA field not declared in schema", "log", container="istio-operator"),
    "KI006": Seed("EKS runbook: disruption budget", "event"),
    "KI007": Seed("HPE CSM: worker node down", "event", reason="FailedAttachVolume"),
}
#: Rules that match pod state, with no line to match: the seed section each stands for.
STATE_ONLY = {
    "KI004": "EKS runbook: vault-injected pods",  # vault-agent not ready
    "KI005": "EKS runbook: kube-proxy broken",  # ImagePullBackOff
    "KI008": "HPE CSM: worker node down",  # Terminating on a dead node
    "KI009": "",  # not from the seed notes: tolerations (public issues in its links)
    "KI010": "",  # Knative's safe-to-evict annotation
    "KI011": "",  # KServe's grace period
}
#: A rule with a pattern whose line the seed does not give literally, and the line it is held to.
NO_SEED_LINE = {
    # The seed's out-of-IP section names the CNI's settings, not its event: this is the VPC CNI's
    # FailedCreatePodSandBox message, as the sim (bot/sim/controllers/behaviour.py) plays it.
    "CNI002": Seed("", "event", reason="FailedCreatePodSandBox"),
    # The seed's Istio section is the agent's inotify failure (KI001); Envoy's own "accept failure:
    # Too many open files" is the open-files limit a node image lowers (amazon-eks-ami#1551), as the
    # sim's eks-nodegroups scenario plays it on the new ng-shared nodes.
    "KI012": Seed("", "log", container="istio-proxy"),
}
KI012_LINE = (
    "2026-11-29T14:02:11.000Z\twarning\tenvoy main\texternal/envoy/source/server/server.cc:873\t"
    "listener accept failure: Too many open files\tthread=21"
)
CNI002_LINE = (
    'Failed to create pod sandbox: rpc error: code = Unknown desc = failed to set up sandbox container "3f2a" '
    'network for pod "reports-api-7d9c": networkPlugin cni failed to set up pod network: add cmd: failed to '
    "assign an IP address to container"
)


def sections() -> dict[str, str]:
    text = COPY.read_text(encoding="utf-8")
    parts = re.split(r"^## ", text, flags=re.MULTILINE)[1:]
    return {p.split("\n", 1)[0]: p.split("\n", 1)[1] for p in parts}


def section(start: str) -> str:
    (body,) = [b for title, b in sections().items() if title.startswith(start)]
    return body


def seed_text(seed: Seed) -> str:
    """The literal line(s) of a seed section: its code blocks (a log), or its first code span."""
    body = section(seed.section)
    if seed.signal == "log":
        blocks = re.findall(r"^```\n(.*?)^```", body, flags=re.MULTILINE | re.DOTALL)
        assert blocks, seed.section
        return "".join(blocks)
    spans = re.findall(r"`([^`\n]+)`", body)
    assert spans, seed.section
    return spans[0]
