"""Snapshot and diff refuse bad input with a reason the user can act on; nothing half-stored."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.frontdoor.assemble import assemble
from bot.router import CommandRequest
from bot.settings import load_settings
from tests.support.kubeconfigs import refusing_kubeconfig, write_kubeconfig


@pytest.fixture
def config_with_dead_cluster(write_config: Callable[..., Path], tmp_path: Path) -> Path:
    kubeconfig = refusing_kubeconfig(tmp_path / "kubeconfig", context="dead-ctx")
    return write_config(f"""clusters:
  prod:
    kubeconfig: {kubeconfig}
    context: dead-ctx
    request_timeout: 2
  staging:
    kubeconfig: {kubeconfig}
""")


def handle(config: Path, text: str) -> tuple[bool, str, list[int]]:
    services = assemble(load_settings(config, {}), with_slack=False)
    try:
        outcome = services.router.handle(CommandRequest(text=text, user_id="U0PRIMARY", source="terminal"))
        return outcome.ok, outcome.rendered.text, [m.id for m in services.store.snapshots()]
    finally:
        services.close()


def test_an_unreachable_cluster_is_named_with_its_context_within_the_timeout(
    config_with_dead_cluster: Path,
) -> None:
    started = time.monotonic()
    ok, text, stored = handle(config_with_dead_cluster, "snapshot pre --cluster prod")
    assert time.monotonic() - started < 10
    assert not ok
    assert "cluster prod (context dead-ctx) refused the connection at http://127.0.0.1:" in text
    assert stored == []


class _Listener:
    """A loopback server that accepts connections and then either drops them or says nothing."""

    def __init__(self, *, drop_after: float | None) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = int(self.sock.getsockname()[1])
        self.drop_after = drop_after
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        held = []
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            held.append(conn)
            if self.drop_after is not None:
                self.stop.wait(self.drop_after)
                conn.close()
        for conn in held:
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        self.sock.close()


@pytest.mark.parametrize(
    ("drop_after", "expected"),
    [
        (0.5, "dropped the connection"),
        # the default read timeout is waited out whole
        pytest.param(None, "did not answer within 10s", marks=pytest.mark.slow),
    ],
)
def test_a_dropped_connection_is_not_reported_as_a_timeout(
    write_config: Callable[..., Path], tmp_path: Path, drop_after: float | None, expected: str
) -> None:
    listener = _Listener(drop_after=drop_after)
    try:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{listener.port}")
        config = write_config(f"clusters:\n  prod: {{kubeconfig: {kubeconfig}, request_timeout: 2}}\n")
        ok, text, _ = handle(config, "snapshot pre")
        assert not ok
        assert f"cluster prod (context ctx) {expected} at http://127.0.0.1:{listener.port}" in text
    finally:
        listener.close()


def test_an_unknown_cluster_lists_the_configured_ones(config_with_dead_cluster: Path) -> None:
    ok, text, _ = handle(config_with_dead_cluster, "snapshot pre --cluster prd")
    assert not ok
    assert "configured clusters: prod, staging" in text


def test_a_cluster_must_be_named_when_several_are_configured(config_with_dead_cluster: Path) -> None:
    ok, text, _ = handle(config_with_dead_cluster, "snapshot pre")
    assert not ok
    assert "use --cluster with one of: prod, staging" in text


def test_an_unknown_snapshot_says_there_are_none_yet(config_with_dead_cluster: Path) -> None:
    ok, text, _ = handle(config_with_dead_cluster, "diff 41 42 --cluster prod")
    assert not ok
    assert "no snapshot #41" in text
    assert "there are no snapshots yet" in text
