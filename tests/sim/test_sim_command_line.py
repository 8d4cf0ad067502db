"""`upgrade-bot sim serve|scenarios` from a terminal."""

from __future__ import annotations

import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml

from bot.sim.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_scenarios_lists_every_built_in_scenario_on_one_line_each(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scenarios"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == [
        "aks-nodepools",
        "eks-nodegroups",
        "gitops",
        "gke-nodepools",
        "known-issues-2",
        "large",
        "small",
    ]
    # Each a whole first sentence, not the description's first line cut where its YAML wrapped it.
    assert all(line.endswith(".") for line in lines), lines
    assert "one already Degraded), a plain Helm release and the EKS-managed kube-proxy add-on." in lines[2]
    assert all(len(line.split(maxsplit=1)) == 2 for line in lines)


def test_an_unknown_scenario_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--scenario", "no-such-scenario"]) == 2
    assert "no scenario 'no-such-scenario'" in capsys.readouterr().err


def test_serve_prints_the_url_and_kubeconfig_then_exits_zero_on_sigterm(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bot.sim.cli",
            "serve",
            "--scenario",
            "small",
            "--port",
            "0",
            "--kubeconfig",
            str(kubeconfig),
            "--speed",
            "5",
            "--seed",
            "3",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    assert proc.stderr is not None
    try:
        url_line = proc.stdout.readline().strip()
        config_line = proc.stdout.readline().strip()
        assert url_line.startswith("url: http://127.0.0.1:")
        assert config_line == f"kubeconfig: {kubeconfig}"
        url = url_line.split(": ", 1)[1]
        config = yaml.safe_load(kubeconfig.read_text())
        assert config["current-context"] == "sim"
        assert config["clusters"][0]["cluster"]["server"] == url
        with urllib.request.urlopen(f"{url}/healthz", timeout=10) as response:
            assert response.read() == b"ok"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def test_serve_prints_the_aws_endpoint_for_a_scenario_with_a_cloud(tmp_path: Path) -> None:
    import boto3

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bot.sim.cli",
            "serve",
            "--scenario",
            "eks-nodegroups",
            "--speed",
            "0",
            "--kubeconfig",
            str(tmp_path / "kc"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    assert proc.stderr is not None
    try:
        lines = [proc.stdout.readline().strip() for _ in range(3)]
        assert lines[0].startswith("url: http://127.0.0.1:")
        url = lines[0].split(": ", 1)[1]
        assert lines[2] == f"aws: {url}/aws"
        eks = boto3.client(
            "eks",
            region_name="ap-northeast-1",
            endpoint_url=lines[2].split(": ", 1)[1],
            aws_access_key_id="sim",
            aws_secret_access_key="sim",
        )
        assert eks.describe_cluster(name="runbook-prod")["cluster"]["version"] == "1.24"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
