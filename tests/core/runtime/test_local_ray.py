"""``omni_rl.runtime.local_ray``: an embedded Ray's node address is loopback when Ray has not read its switch yet,
and its metrics exporter is off (issue 48, N13). Each case runs in a fresh interpreter: Ray reads the switch once,
when it is imported. No cluster is started here (tests/integration/test_reward_server_exposure.py starts them)."""

from __future__ import annotations

import os
import subprocess
import sys

from omni_rl.runtime.local_ray import LOOPBACK_SWITCH, embedded_init_options

PROBE = """
import os, sys
{before}
from omni_rl.runtime.local_ray import prefer_loopback_node
loopback = prefer_loopback_node()
import ray._private.ray_constants as constants
import ray._private.services as services
print(loopback, os.environ.get("{switch}"), constants.ENABLE_RAY_CLUSTER, services.get_node_ip_address())
"""


def _probe(before: str = "", **env: str) -> list[str]:
    environment = {key: value for key, value in os.environ.items() if key != LOOPBACK_SWITCH} | env
    code = PROBE.format(before=before, switch=LOOPBACK_SWITCH)
    result = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.split()


def test_before_ray_is_imported_the_node_is_loopback() -> None:
    assert _probe() == ["True", "0", "False", "127.0.0.1"]


def test_after_ray_is_imported_nothing_is_changed() -> None:
    loopback, switch, enabled, _ = _probe(before="import ray")
    assert (loopback, switch, enabled) == ("False", "None", "True")  # no half-applied switch for Ray's children


def test_an_explicit_setting_of_the_switch_is_kept() -> None:
    loopback, switch, enabled, _ = _probe(**{LOOPBACK_SWITCH: "1"})
    assert (loopback, switch, enabled) == ("False", "1", "True")


def test_the_embedded_cluster_exports_no_metrics() -> None:
    assert embedded_init_options() == {"_system_config": {"enable_metrics_collection": False}}
