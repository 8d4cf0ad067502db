"""The simulated cluster, assembled: `Sim` (store, API semantics, controllers, cloud, control) and
`SimCluster`, the public handle that serves it on 127.0.0.1.

    with SimCluster("small", speed=50, seed=1) as sim:
        kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
        sim.control.replace_node_group("ng-shared", "1.30.2")
        sim.wait_for(lambda: …, timeout=30)

Start-up: the scenario is loaded on a frozen clock (speed 0) starting `age` before now; its warm-up
is played out at once (`advance`), then the clock jumps to the present and starts running at the
requested speed, and only then does the server accept connections — so the first `kubectl get
pods` already sees a settled cluster.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from bot.sim.apiserver.api import Api
from bot.sim.apiserver.clock import SimClock
from bot.sim.apiserver.metrics import Metrics
from bot.sim.apiserver.objects import Ids
from bot.sim.apiserver.resources import Catalog
from bot.sim.apiserver.server import SimHTTPServer
from bot.sim.apiserver.store import Store
from bot.sim.apiserver.transport import TransportFaults
from bot.sim.controllers.behaviour import RuleBook
from bot.sim.controllers.engine import Engine
from bot.sim.controllers.events import Recorder
from bot.sim.controllers.housekeeping import (
    Disruption,
    EndpointsController,
    GarbageCollector,
    Namespaces,
    ServiceAccounts,
)
from bot.sim.controllers.kubelet import Kubelets
from bot.sim.controllers.nodes import NodeLifecycle
from bot.sim.controllers.scheduler import Scheduler
from bot.sim.controllers.workloads import DaemonSets, Deployments, ReplicaSets, StatefulSets
from bot.sim.world import aws as aws_world
from bot.sim.world import control_http
from bot.sim.world import evidence as evidence_world
from bot.sim.world import github as github_world
from bot.sim.world import providers as provider_facades
from bot.sim.world import registry as registry_world
from bot.sim.world.cloud import Cloud
from bot.sim.world.control import Control
from bot.sim.world.injection import Injectors
from bot.sim.world.scenario import Scenario, ScenarioError, load_scenario

log = logging.getLogger(__name__)

Obj = dict[str, Any]

HOUSEKEEPING_SECONDS = 10.0


class Sim:
    """Everything but the socket, wired together: each part is given the parts it uses. Tests that
    want no HTTP at all can drive this directly."""

    def __init__(
        self,
        scenario: Scenario,
        *,
        seed: int = 0,
        compaction_window: float | None = None,
        bookmark_interval: float | None = None,
    ) -> None:
        self.scenario = scenario
        self.scenario_name = scenario.name
        self.seed = seed
        self.port = 0
        self.bookmark_interval = (
            bookmark_interval if bookmark_interval is not None else scenario.bookmark_interval
        )
        self.compaction_window = (
            compaction_window if compaction_window is not None else scenario.compaction_window
        )
        start = time.time() - scenario.age - scenario.warmup
        self.clock = SimClock(speed=0.0, epoch=start)
        self.ids = Ids(seed)
        self.catalog = Catalog(
            scenario.version, tuple(scenario.deprecated_apis), custom=tuple(scenario.custom_resources)
        )
        self.store = Store(now=self.clock.now)
        self.api = Api(self.store, self.catalog, self.clock, self.ids)
        self.engine = Engine(self.store, self.api, self.clock, self.ids)
        self.events = Recorder(self.api)
        self.metrics = Metrics(now=self.clock.now)
        self.rules = RuleBook()
        self.lifecycle = NodeLifecycle(self.engine, self.events, lease_seconds=scenario.lease_renew_seconds)
        self.scheduler = Scheduler(self.engine, self.events)
        self.kubelets = Kubelets(
            self.engine,
            self.events,
            self.rules,
            self.lifecycle.alive,
            self.lifecycle.facts,
            self.lifecycle.node_ip,
        )
        ReplicaSets(self.engine, self.events)
        Deployments(self.engine, self.events)
        DaemonSets(self.engine, self.events)
        StatefulSets(self.engine, self.events)
        GarbageCollector(self.engine)
        Namespaces(self.engine)
        ServiceAccounts(self.engine)
        EndpointsController(self.engine)
        Disruption(self.engine)
        self.cloud = Cloud(
            self.engine,
            self.events,
            self.lifecycle,
            self.scheduler,
            self.catalog,
            self.metrics,
            platform=scenario.platform,
            region=scenario.region,
            cluster=str((scenario.gcp or scenario.azure or {}).get("cluster_name") or scenario.name),
        )
        # The HTTP server's transport faults; the control API sets them, the server applies them.
        self.transport = TransportFaults()
        self.transport.seed(seed)
        self.control = Control(
            scenario=scenario,
            api=self.api,
            engine=self.engine,
            cloud=self.cloud,
            lifecycle=self.lifecycle,
            kubelets=self.kubelets,
            rules=self.rules,
            events=self.events,
            metrics=self.metrics,
            transport=self.transport,
        )
        self.injectors = Injectors(self.api, [])
        with self.store.lock:
            scenario.build(
                api=self.api,
                engine=self.engine,
                cloud=self.cloud,
                scheduler=self.scheduler,
                kubelets=self.kubelets,
                injectors=self.injectors,
                rules=self.rules,
                inject=self.control.inject_fault,
                seed=seed,
            )
            self.lifecycle.warming = True
            self.engine.advance(scenario.warmup)
            self.lifecycle.warming = False
            self.injectors.finish_building()
            # Old history is not interesting to anyone: start with a clean, compacted log.
            self.clock.jump_to(max(self.clock.now(), time.time()))
            self.engine.run_due()
            self.store.compact()
            self.engine.every(HOUSEKEEPING_SECONDS, self._housekeeping, key="housekeeping")
            #: What the Alertmanager and Prometheus facades answer (/alertmanager, /prometheus).
            self.evidence = evidence_world.Evidence(now=self.clock.now)
            #: The OCI registry facade (/v2): every image the built scenario runs (IMG001's answers).
            self.registry = registry_world.Registry.from_store(self.store)
            #: The GitHub REST facade (/github): the PRs plan steps name (issue 43).
            self.github = github_world.GitHub()
            #: The clouds' API facades the scenario names (`bot.sim.world.providers`), by provider.
            self.providers: dict[str, Any] = {}
            for facade in provider_facades.FACADES:
                spec = getattr(scenario, facade.section, None)
                if spec is None:
                    continue
                try:
                    self.providers[facade.provider] = facade.build(
                        self.cloud, self.engine, spec, scenario.name
                    )
                except (KeyError, TypeError, ValueError) as exc:
                    raise ScenarioError(f"{scenario.source}: {facade.section}: {exc}") from None
            #: The AWS APIs of an EKS scenario (served under /aws), None for a scenario without them.
            self.aws: aws_world.AwsWorld | None = self.providers.get("eks")

    def _housekeeping(self) -> None:
        self.store.compact_window(self.compaction_window)
        self.events.expire()

    def close(self) -> None:
        self.engine.stop()
        self.store.close_watchers("server shutting down")


class SimCluster:
    """A simulated cluster served on 127.0.0.1; a context manager for tests."""

    def __init__(
        self,
        scenario: str | Path | Scenario = "small",
        *,
        port: int = 0,
        speed: float = 1.0,
        seed: int = 0,
        host: str = "127.0.0.1",
        compaction_window: float | None = None,
        bookmark_interval: float | None = None,
    ) -> None:
        self.scenario = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
        self.host = host
        self.requested_port = port
        self.speed = speed
        self.seed = seed
        self._compaction_window = compaction_window
        self._bookmark_interval = bookmark_interval
        self.sim: Sim | None = None
        self._server: SimHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> SimCluster:
        self.sim = Sim(
            self.scenario,
            seed=self.seed,
            compaction_window=self._compaction_window,
            bookmark_interval=self._bookmark_interval,
        )
        sim = self.sim
        self._server = SimHTTPServer(
            (self.host, self.requested_port),
            api=sim.api,
            metrics=sim.metrics,
            transport=sim.transport,
            version=sim.cloud.version_info,
            bind=sim.scheduler.bind_by_name,
            logs=sim.kubelets.logs,
            bookmark_interval=sim.bookmark_interval,
        )
        control_http.register(self._server, sim.control)
        evidence_world.register(self._server, sim.evidence)
        registry_world.register(self._server, sim.registry)
        github_world.register(self._server, sim.github)
        for provider, world in sim.providers.items():
            provider_facades.BY_PROVIDER[provider].register(self._server, world)
        self.sim.port = self._server.port
        self.sim.clock.set_speed(self.speed)
        self.sim.engine.start()
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="sim-server", daemon=True
        )
        self._thread.start()
        log.info("sim %s serving %s", self.scenario.name, self.url)
        return self

    def stop(self) -> None:
        if self.sim is not None:
            self.sim.close()
        if self._server is not None:
            self._server.shutdown()
            self._server.close_connections()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> SimCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def core(self) -> Sim:
        if self.sim is None:
            raise RuntimeError("the sim is not started")
        return self.sim

    @property
    def port(self) -> int:
        return self.core.port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def provider_url(self, provider: str) -> str | None:
        """The endpoint URL of the scenario's facade for `provider` (`eks`), None without one."""
        if provider not in self.core.providers:
            return None
        return f"{self.url}{provider_facades.BY_PROVIDER[provider].prefix}"

    @property
    def aws_url(self) -> str | None:
        """The endpoint URL of the scenario's AWS APIs (EKS, EC2, Auto Scaling), None without them."""
        return self.provider_url("eks")

    @property
    def control(self) -> Control:
        return self.core.control

    def wait_for(self, predicate: Any, timeout: float = 10.0) -> Any:
        """Wait until `predicate()` is truthy (checked after each change in the cluster); returns its value."""
        return self.core.engine.wait_for(predicate, timeout)

    def kubeconfig(self, context: str = "sim") -> Obj:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": {"server": self.url}}],
            "users": [{"name": context, "user": {"token": "sim-token"}}],
            "contexts": [
                {"name": context, "context": {"cluster": context, "user": context, "namespace": "default"}}
            ],
            "current-context": context,
        }

    def write_kubeconfig(self, path: str | Path, context: str = "sim") -> Path:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(yaml.safe_dump(self.kubeconfig(context), sort_keys=False), encoding="utf-8")
        target.chmod(0o600)
        return target
