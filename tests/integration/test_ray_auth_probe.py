"""The remote-code probe: a run's Ray does not run code for a client without the cluster's token.

The cluster is started as a run starts it (``ray_session`` with ``address = "local"``) in its own process, with
its own HOME (so its token is its own). A second process, as an attacker on the network would, joins the GCS
address with no token at hand (RAY_AUTH_* unset, an empty HOME) and asks for a remote function; it must fail. The
same probe with the token succeeds, so the failure is the authentication's, not the network's. Every wait has a
timeout: the test cannot hang.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
from pathlib import Path

SERVER = """
import sys
import ray
from omni_rl.runtime.cluster import ray_session
from omni_rl.config.schema import ClusterConfig

with ray_session(ClusterConfig()):
    print("GCS", ray.get_runtime_context().gcs_address, flush=True)
    sys.stdin.readline()  # until the test closes stdin
"""

PROBE = """
import sys
import ray
ray.init(address=sys.argv[1], include_dashboard=False)

@ray.remote
def probe():
    return "REMOTE-RAN"

print(ray.get(probe.remote(), timeout=30), flush=True)
"""


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_AUTH", "RAY_ADDRESS"))}
    home.mkdir(parents=True, exist_ok=True)
    return {**env, "HOME": str(home), "HF_HUB_OFFLINE": "1", "NO_COLOR": "1", **extra}


def _probe(address: str, env: dict[str, str]) -> str:
    """The probe's stdout and stderr; a probe still trying after the timeout counts as refused."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", PROBE, address], env=env, capture_output=True, text=True, timeout=120
        )
    except subprocess.TimeoutExpired as exc:
        return f"timed out: {exc.stdout!r}"
    return f"rc={done.returncode}\n{done.stdout}\n{done.stderr}"


def test_a_client_without_the_token_cannot_run_code(tmp_path: Path) -> None:
    server_home = tmp_path / "server-home"
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER],
        env=_env(server_home),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=(tmp_path / "server.log").open("w"),
        text=True,
        start_new_session=True,
    )
    try:
        ready, _, _ = select.select([server.stdout], [], [], 120)
        assert ready, f"the cluster did not start in 120 s: {(tmp_path / 'server.log').read_text()}"
        line = server.stdout.readline()
        assert line.startswith("GCS "), line + (tmp_path / "server.log").read_text()
        address = line.split()[1]
        token = (server_home / ".ray" / "auth_token").read_text().strip()
        assert token, "ray.init() started the cluster without writing a token"

        refused = _probe(address, _env(tmp_path / "attacker-home"))
        assert "REMOTE-RAN" not in refused, refused

        allowed = _probe(address, _env(tmp_path / "user-home", RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token))
        assert "REMOTE-RAN" in allowed, allowed
    finally:
        server.stdin.close()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, 9)
            server.wait(timeout=30)
