"""An embedded Ray (``address = "local"``) listens on loopback only and exports no Prometheus metrics.

Ray binds its metrics servers (the dashboard agent's Prometheus exporter, the autoscaler monitor's and the
dashboard's metrics ports) to 0.0.0.0 unless the node's IP address is a loopback address, and answers them
without authentication: session name, node address, actor and application names to anyone on the network
(issue 48, N13). An embedded cluster is this machine's alone, so:

- its node IP is 127.0.0.1: ``ray.init`` turns a loopback ``_node_ip_address`` back into the machine's address,
  and the one switch Ray reads instead is ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` (false: the node IP is
  loopback, as Ray does on macOS and Windows). Ray reads it once, when it is first imported, so it is set only
  while Ray is not imported yet (the CLI imports Ray only to start it), and then kept for the life of the process:
  the processes Ray starts inherit it and agree with this one. Then every Ray process, the agents' gRPC servers
  and the metrics servers included, binds 127.0.0.1;
- its metrics collection is off (``enable_metrics_collection``), so the dashboard agent starts no exporter even
  where Ray was imported before (a notebook, the test suite) and the node IP stayed the machine's.

A cluster joined by address is left as its operator configured it; a serve-reward server's HTTP port is its
``[server] host``, which these settings do not touch.
"""

from __future__ import annotations

import os
import sys
from typing import Any

#: Ray's switch for a loopback node IP ("0": the node IP is 127.0.0.1)
LOOPBACK_SWITCH = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def prefer_loopback_node() -> bool:
    """Before ``import ray``, for an embedded cluster: make its node IP 127.0.0.1 when Ray will read that (see the
    module docstring). True when the node will be on loopback; an explicit setting of the switch is kept."""
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None:  # Ray was imported: it has already read the switch, whatever it says now
        return getattr(constants, "ENABLE_RAY_CLUSTER", True) is False
    os.environ.setdefault(LOOPBACK_SWITCH, "0")
    return os.environ[LOOPBACK_SWITCH].lower() not in ("true", "1")  # as Ray parses it


def embedded_init_options() -> dict[str, Any]:
    """Keyword arguments of ``ray.init`` that start an embedded cluster without a Prometheus exporter."""
    return {"_system_config": {"enable_metrics_collection": False}}
