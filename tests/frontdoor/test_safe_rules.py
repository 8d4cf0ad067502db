"""A rules file cannot freeze the bot (issue 25): in a real `upgrade-bot run --http` on the sim, a
team rule with the pattern `(a+)+$` — catastrophic for a backtracking engine — meets an event
message of 34 a's and a "!". `/upgrade diagnose payments` answers, and 20 signed `/upgrade help`
sent meanwhile are each acknowledged well within Slack's 3 s (the figures are in the assertions'
messages; `benchmarks/bench_rules.py` prints them, with heavier rules and events)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.bot_process import PRIMARY, BotProcess
from tests.support.secrets import SIGNING_SECRET
from tests.support.signing import post, signed_headers, slash_command_body
from tests.support.slack_stub import SlackStub

EVIL = "a" * 34 + "!"

RULES = """\
rules:
  - id: TEAM001
    title: A message of a's
    match:
      events: {message: "(a+)+$"}
    explanation: The workload writes only a's.
    remediation: kubectl -n {namespace} describe {kind} {name}
    links: [https://github.com/google/re2/wiki/Syntax]
"""


def _event(sim: Any, name: str, message: str) -> None:
    sim.control.inject_fault(
        {
            "type": "event",
            "object": {"kind": "Pod", "namespace": "payments", "name": name},
            "event_type": "Warning",
            "reason": "Spelling",
            "component": "workload",
            "message": message,
        }
    )


def _reply(stub: SlackStub, marker: str) -> str | None:
    texts = [str(r.get("text", "")) for r in stub.responses]
    texts += [str(c.params.get("text", "")) for c in stub.calls_to("chat.postMessage")]
    return next((t for t in texts if marker in t), None)


def test_a_backtracking_pattern_neither_hangs_diagnose_nor_delays_acks(
    write_config: Callable[..., Path],
    slack_stub: SlackStub,
    bot_env: dict[str, str],
    sim_eks: Any,
    sim_kubeconfig: Callable[[Any], Path],
    kubectl: Callable[..., subprocess.CompletedProcess[str]],
    tmp_path: Path,
) -> None:
    rules = tmp_path / "team-rules.yaml"
    rules.write_text(RULES)
    # The evil message about a payments-worker pod, and one the rule does match about a
    # payments-api pod, so the reply proves the rule ran.
    pods = kubectl(sim_eks, "-n", "payments", "get", "pods", "-o", "jsonpath={.items[*].metadata.name}")
    names = pods.stdout.split()
    worker = next(n for n in names if n.startswith("payments-worker-"))
    api = next(n for n in names if n.startswith("payments-api-"))
    _event(sim_eks, worker, EVIL)
    _event(sim_eks, api, "aaaa")
    config = write_config(
        f"channels: {{operations: C0OPS}}\nrules_files: [{rules}]\n"
        f"clusters:\n  prod: {{kubeconfig: {sim_kubeconfig(sim_eks)}, context: sim}}\n"
    )
    slack_stub.users[PRIMARY] = {"id": PRIMARY}
    bot = BotProcess(config=config, env=bot_env, stub=slack_stub)
    bot.start()
    try:

        def send(text: str, n: int) -> float:
            body = slash_command_body(
                text, user=PRIMARY, response_url=slack_stub.response_url(f"r{n}"), trigger_id=f"t-{n}"
            )
            result = post(f"{bot.url}/slack/events", body, signed_headers(body, SIGNING_SECRET))
            assert result.status == 200
            return result.seconds

        started = time.monotonic()
        diagnose_ack = send("diagnose payments", 0)
        acks = [send("help", i) for i in range(1, 21)]
        reply = slack_stub.wait_for(lambda: _reply(slack_stub, "TEAM001"), timeout=60)
        answered = time.monotonic() - started
        helps = slack_stub.wait_for(
            lambda: sum(1 for r in slack_stub.responses if "/upgrade help" in str(r.get("text"))) >= 20,
            timeout=30,
        )
        assert helps
    finally:
        err = bot.stop()
    figures = (
        f"diagnose acked in {diagnose_ack:.3f} s, answered in {answered:.2f} s; "
        f"20 help acks: max {max(acks):.3f} s, median {sorted(acks)[10]:.3f} s"
    )
    # The rule matched the message it should, about the workload of the pod the event is about…
    assert "`TEAM001` A message of a's* — Deployment payments/payments-api (1 pod)" in reply
    assert "payments-worker (" not in reply.split("TEAM001", 1)[1]
    # …with its remedy filled in from the finding.
    assert "kubectl -n payments describe deployment payments-api" in reply
    # Slack's limit is 3 s; the aim is 0.1 s (met on a quiet machine, see bench_rules.py):
    # 1 s still tells a frozen bot (no ack at all) from a busy machine.
    assert diagnose_ack < 1.0, figures
    assert max(acks) < 1.0, figures
    assert answered < 30, figures
    # Nothing of the bot's own failed (waitress may log its trigger's closed descriptor on exit).
    assert " ERROR bot." not in err, err
