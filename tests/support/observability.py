"""The real Prometheus and Alertmanager for the evidence gate's tests, on loopback ports.

The binaries are built by `scripts/observability/build` into
`.cache/observability/<hash of pins.env>/bin`; `bin_dir()` finds them by the same hash. Without
them the `observability` fixture skips locally with the reason, and fails under CI (`CI=true`),
where missing binaries are a defect (scripts/test builds them).

`observability(scrape=URL, rules=TEXT)` starts both for one test: Prometheus scrapes `scrape`
(a simulator's /metrics) every second, evaluates `rules` every second and sends what fires to the
Alertmanager, whose one receiver drops every notification. Each server gets its own temp dir;
both stop at the end of the test, and a server that does not come up fails the fixture with the
tail of its log.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PINS = REPO / "scripts" / "observability" / "pins.env"
BINARIES = ("prometheus", "alertmanager")
# Generous for a loaded 2-core machine; each starts in a second or two when idle.
START_TIMEOUT = 60.0

ALERTMANAGER_CONFIG = """\
route:
  receiver: drop
  group_wait: 0s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: drop
"""


def bin_dir(repo: Path = REPO) -> Path:
    """Where scripts/observability/build puts the binaries (same hash as the script)."""
    digest = hashlib.sha256(PINS.read_bytes()).hexdigest()[:12]
    return repo / ".cache" / "observability" / digest / "bin"


def missing_binaries(directory: Path | None = None) -> list[str]:
    directory = directory or bin_dir()
    return [name for name in BINARIES if not os.access(directory / name, os.X_OK)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    name: str
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 30) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            text = []
        return f"--- {self.name} ({self.log}) ---\n" + "\n".join(text)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


@dataclass
class Observability:
    alertmanager: Server
    prometheus: Server
    workdir: Path
    servers: list[Server] = field(default_factory=list)

    def stop_prometheus(self) -> None:
        """Take Prometheus away mid-test (the Inconclusive acceptance test)."""
        self.prometheus.stop()


def _wait_ready(server: Server) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"{server.name} exited with {server.process.returncode}\n{server.tail()}")
        try:
            with urllib.request.urlopen(f"{server.url}/-/ready", timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{server.name} was not ready within {START_TIMEOUT:.0f}s\n{server.tail()}")


def _start(name: str, argv: list[str], workdir: Path, port: int) -> Server:
    log = workdir / f"{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=workdir)
    return Server(name=name, url=f"http://127.0.0.1:{port}", process=process, log=log)


def start_observability(workdir: Path, *, scrape: str | None, rules: str) -> Observability:
    directory = bin_dir()
    am_port, prom_port = _free_port(), _free_port()
    (workdir / "alertmanager.yml").write_text(ALERTMANAGER_CONFIG)
    am = _start(
        "alertmanager",
        [
            str(directory / "alertmanager"),
            f"--config.file={workdir / 'alertmanager.yml'}",
            f"--storage.path={workdir / 'am-data'}",
            f"--web.listen-address=127.0.0.1:{am_port}",
            # An empty address turns off the gossip cluster (it would bind 0.0.0.0:9094).
            "--cluster.listen-address=",
        ],
        workdir,
        am_port,
    )
    targets = ""
    if scrape is not None:
        url = scrape.removeprefix("http://")
        host, _, path = url.partition("/")
        targets = (
            "scrape_configs:\n"
            "  - job_name: sim\n"
            f"    metrics_path: /{path or 'metrics'}\n"
            f"    static_configs: [{{targets: ['{host}']}}]\n"
        )
    (workdir / "rules.yml").write_text(rules)
    (workdir / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "rule_files: [rules.yml]\n"
        f"alerting: {{alertmanagers: [{{static_configs: [{{targets: ['127.0.0.1:{am_port}']}}]}}]}}\n"
        + targets
    )
    prom = _start(
        "prometheus",
        [
            str(directory / "prometheus"),
            f"--config.file={workdir / 'prometheus.yml'}",
            f"--storage.tsdb.path={workdir / 'prom-data'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
            "--web.enable-lifecycle",
            # Alerts are re-sent to Alertmanager every second rather than every minute, and a
            # resolved one leaves Alertmanager quickly, so a test sees both within a poll or two.
            "--rules.alert.resend-delay=1s",
        ],
        workdir,
        prom_port,
    )
    obs = Observability(alertmanager=am, prometheus=prom, workdir=workdir, servers=[am, prom])
    try:
        _wait_ready(am)
        _wait_ready(prom)
    except Exception:
        for s in obs.servers:
            s.stop()
        raise
    return obs


@pytest.fixture
def observability() -> Iterator[Callable[..., Observability]]:
    """A factory: `observability(scrape=sim.url + "/metrics", rules=RULES)`."""
    missing = missing_binaries()
    if missing:
        reason = (
            f"the real Prometheus and Alertmanager are not built ({', '.join(missing)} missing in "
            f"{bin_dir()}): run scripts/observability/build"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    started: list[Observability] = []

    def start(*, scrape: str | None = None, rules: str = "groups: []\n") -> Observability:
        workdir = Path(tempfile.mkdtemp(prefix="upgrade-bot-observability-"))
        try:
            obs = start_observability(workdir, scrape=scrape, rules=rules)
        except RuntimeError as exc:
            pytest.fail(f"the observability servers did not start: {exc}", pytrace=False)
        started.append(obs)
        return obs

    yield start
    for obs in started:
        for s in obs.servers:
            s.stop()
        shutil.rmtree(obs.workdir, ignore_errors=True)
