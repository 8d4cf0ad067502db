"""`/sim/…`: the control API over HTTP (JSON in, JSON out), for rehearsals and other processes.

GET    /sim/status                         what the simulator is doing
POST   /sim/advance         {"seconds": 600}
POST   /sim/speed           {"speed": 100}
POST   /sim/control-plane/upgrade  {"version": "1.25.16", "duration": "15m"}
POST   /sim/nodegroups/NAME/replace {"version": "1.25.16", "force": false, "drain": "cloud"}
                                           drain "external": the cloud leaves cordon + drain to
                                           others and ends each old node once it is empty
POST   /sim/upgrade                        the scenario's scripted upgrade
GET    /sim/operations[/ID]   (?wait=SECONDS waits for an operation to finish; with
                               &until=PHASE, until it reaches that phase or finishes)
GET    /sim/evictions                      every eviction the API accepted (namespace, name, uid, at)
GET    /sim/faults; POST /sim/faults {fault}; DELETE /sim/faults/ID
POST   /sim/compact; POST /sim/watches/drop
POST   /sim/transport {"error_rate": 0.1, "error_status": 500, "latency": 0.2, "watch_drop_after": 5}
POST   /sim/apply {manifest} or [manifests]

`register(server, control)` mounts these on the API server's `/sim` route, so that the server (a
lower layer) never imports the control API; transport faults never apply to them.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from bot.sim.apiserver.errors import ApiError
from bot.sim.apiserver.server import SimHTTPServer
from bot.sim.world.control import Control

PREFIX = "/sim"


def register(server: SimHTTPServer, control: Control) -> None:
    server.add_route(PREFIX, functools.partial(handle, control))


def handle(control: Control, method: str, path: str, query: dict[str, str], body: bytes) -> tuple[int, Any]:
    parts = path.strip("/").split("/")[1:]
    try:
        data = json.loads(body) if body else {}
    except ValueError:
        return 400, {"error": "body is not JSON"}
    if not isinstance(data, dict | list):
        return 400, {"error": "body must be a JSON object"}
    args: dict[str, Any] = data if isinstance(data, dict) else {}
    try:
        route = (method, *parts)
        match route:
            case ("GET", "status") | ("GET",):
                return 200, control.status()
            case ("POST", "advance"):
                return 200, {"time": control.advance(args.get("seconds", 0))}
            case ("POST", "speed"):
                return 200, {"speed": control.set_speed(float(args.get("speed", 1)))}
            case ("POST", "control-plane", "upgrade"):
                return 202, control.upgrade_control_plane(str(args["version"]), args.get("duration"))
            case ("POST", "nodegroups", name, "replace"):
                return 202, control.replace_node_group(
                    name,
                    str(args["version"]),
                    force=bool(args.get("force", False)),
                    max_unavailable=args.get("max_unavailable"),
                    drain_timeout=args.get("drain_timeout"),
                    drain=str(args.get("drain", "cloud")),
                )
            case ("POST", "upgrade"):
                return 202, control.run_upgrade()
            case ("GET", "evictions"):
                return 200, control.evictions()
            case ("GET", "operations"):
                return 200, control.operations()
            case ("GET", "operations", op_id):
                if query.get("wait"):
                    until = query.get("until") or "finished"
                    return 200, control.wait_operation(op_id, float(query["wait"]), until=until)
                if query.get("until"):
                    return 400, {"error": "until=PHASE needs wait=SECONDS"}
                return 200, control.operation(op_id)
            case ("GET", "faults"):
                return 200, control.list_faults()
            case ("POST", "faults"):
                return 201, {"id": control.inject_fault(args)}
            case ("DELETE", "faults", fid):
                return (
                    (200, {"cleared": fid})
                    if control.clear_fault(fid)
                    else (404, {"error": f"no fault {fid}"})
                )
            case ("POST", "compact"):
                return 200, {"compactedResourceVersion": str(control.compact())}
            case ("POST", "watches", "drop"):
                return 200, {"dropped": control.drop_watches()}
            case ("POST", "transport"):
                return 200, control.set_transport(**args)
            case ("POST", "apply"):
                return 200, {"applied": control.apply(data if isinstance(data, list) else args)}
    except KeyError as exc:
        return 400, {"error": f"missing or unknown {exc}"}
    except (TypeError, ValueError) as exc:
        return 400, {"error": str(exc)}
    except ApiError as exc:
        return exc.code, exc.status()
    return 404, {"error": f"no control endpoint {method} {path}"}
