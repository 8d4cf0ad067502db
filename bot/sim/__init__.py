"""The simulated cluster: a Kubernetes API server on 127.0.0.1 with scenarios that play out upgrades.

The bot never imports this package; tests, benchmarks and rehearsals start it (`SimCluster`, or
`upgrade-bot sim serve`) and point a kubeconfig at it. See README.md in this directory.
"""

from bot.sim.cluster import Sim, SimCluster
from bot.sim.world.control import Control
from bot.sim.world.scenario import Scenario, ScenarioError, builtin_scenarios, load_scenario

__all__ = ["Control", "Scenario", "ScenarioError", "Sim", "SimCluster", "builtin_scenarios", "load_scenario"]
