"""What a running ``omni-rl serve-reward`` and an embedded training cluster expose (issue 48, N2 and N13), checked
on the real command and a real Ray session of its own (each in a fresh process: the node address is fixed when Ray
starts, so the session's shared cluster cannot show it), with Ray's temp dir in a folder of this test:

- N2: the ``token_env`` token was written in clear to Ray's ``runtime_env_agent.log`` (passed to the replicas as
  a runtime_env variable). After a request is served, no file under Ray's temp dir or the server's folder, no Ray
  process's environment and no console line holds it;
- N13: Ray's Prometheus endpoints answered anyone on 0.0.0.0. Every socket a process of the embedded cluster
  listens on is now on loopback, but the reward's HTTP port when ``[server] host = "0.0.0.0"`` asks for it.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).parents[2]
TOKEN_ENV = "OMNI_RL_TEST_EXPOSURE_TOKEN"
MARKER = "OMNI_RL_TEST_EXPOSURE_MARKER"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def ray_tmp() -> Iterator[Path]:
    """Ray's temp dir for one command: short (Ray's socket paths must fit 107 bytes), removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="orl-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _spawn(args: list[str], log: Path, marker: str, ray_tmp: Path, **env: str) -> subprocess.Popen:
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1", "RAY_TMPDIR": str(ray_tmp), MARKER: marker}
    environment.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)  # as a user's shell: the command decides
    return subprocess.Popen(
        args,
        env={**environment, **env},
        cwd=ROOT,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _stop(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=30)


def _marked(marker: str) -> list[psutil.Process]:
    """Every process that inherited ``marker`` (the command and all that Ray started for it)."""
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if proc.environ().get(MARKER) == marker:
                found.append(proc)
    return found


def _listening(processes: list[psutil.Process]) -> list[tuple[str, int, str]]:
    """(address, port, process name) of every TCP socket these processes listen on."""
    pids = {proc.pid: proc for proc in processes}
    names = {}
    for pid, proc in pids.items():
        with contextlib.suppress(psutil.Error):
            names[pid] = " ".join(proc.cmdline())[:80]
    return [
        (conn.laddr.ip, conn.laddr.port, names.get(conn.pid, "?"))
        for conn in psutil.net_connections(kind="tcp")
        if conn.pid in pids and conn.status == psutil.CONN_LISTEN
    ]


def _loopback(address: str) -> bool:
    parsed = ipaddress.ip_address(address.split("%")[0])
    mapped = getattr(parsed, "ipv4_mapped", None)
    return (mapped or parsed).is_loopback


def _files_holding(text: bytes, *roots: Path) -> list[str]:
    hits = []
    for root in roots:
        for path in root.rglob("*"):
            with contextlib.suppress(OSError):
                if path.is_file() and not path.is_symlink() and text in path.read_bytes():
                    hits.append(str(path))
    return hits


def _non_loopback_address() -> str | None:
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family == socket.AF_INET and not ipaddress.ip_address(address.address).is_loopback:
                return address.address
    return None


def _get(url: str, token: str) -> tuple[int, dict]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _assert_refuses_without_ray_token(host: str, port: int) -> None:
    import grpc

    with grpc.insecure_channel(f"{host}:{port}") as channel:
        call = channel.unary_unary("/ray.serve.ASGIService/HandleRequest")
        with pytest.raises(grpc.RpcError) as caught:
            call(b"", timeout=10)
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED, caught.value


def _wait_for(condition, proc: subprocess.Popen, log: Path, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, log.read_text()[-4000:]
        assert time.monotonic() < deadline, log.read_text()[-4000:]
        time.sleep(0.5)


def test_serve_reward_keeps_its_token_out_of_ray_and_listens_on_loopback(tmp_path: Path, ray_tmp: Path) -> None:
    token = f"exposure-{uuid.uuid4().hex}"
    port = _free_port()
    serve = tmp_path / "serve.toml"
    serve.write_text(
        f'[server]\nhost = "0.0.0.0"\nport = {port}\ntoken_env = "{TOKEN_ENV}"\n\n'
        '[[reward]]\nname = "jpeg_compressibility"\nresources = { CPU = 0.5 }\n'
    )
    log, marker = tmp_path / "serve.log", uuid.uuid4().hex
    args = [sys.executable, "-m", "omni_rl.cli", "serve-reward", str(serve)]
    proc = _spawn(args, log, marker, ray_tmp, **{TOKEN_ENV: token + "\n"})  # as `echo` into a Secret writes it
    try:
        _wait_for(lambda: "stops the servers" in log.read_text(), proc, log)
        url = f"http://127.0.0.1:{port}/jpeg_compressibility"
        assert _get(url, "")[0] == 401
        status, described = _get(url, token)
        assert status == 200 and described["reward"] == "jpeg_compressibility"
        image = {"encoding": "raw", "dtype": "uint8", "shape": [1, 8, 8, 3], "data": "A" * 256}  # 192 zero bytes
        request = urllib.request.Request(
            url,
            data=json.dumps({"images": image, "prompts": ["p"]}).encode(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            assert response.status == 200 and len(json.loads(response.read())["scores"]) == 1
        outside = _non_loopback_address()
        if outside is not None:  # host = "0.0.0.0": the reward itself is served to the network, as configured
            assert _get(f"http://{outside}:{port}/jpeg_compressibility", token)[0] == 200

        # N2: the token is nowhere Ray keeps anything, nor in the server's folder or its console
        sessions = [p for p in ray_tmp.glob("*/session_*") if p.name != "session_latest"]
        assert sessions, f"no Ray session under {ray_tmp}: {list(ray_tmp.iterdir())}"
        assert _files_holding(token.encode(), ray_tmp, tmp_path) == []
        processes = _marked(marker)
        ray_processes = [p for p in processes if p.pid != proc.pid]
        assert len(ray_processes) >= 3, [p.name() for p in processes]
        for ray_process in ray_processes:
            with contextlib.suppress(psutil.Error):
                assert TOKEN_ENV not in ray_process.environ(), ray_process.cmdline()

        # N13: every port of the embedded cluster is on loopback (no metrics on 0.0.0.0 any more), but the reward's
        # own port (0.0.0.0, as asked) and each Serve replica's inter-deployment gRPC server, which Ray Serve binds
        # to [::] with no option to change it, and which refuses a client without Ray's token
        exposed = [entry for entry in _listening(processes) if not _loopback(entry[0])]
        replica_grpc = [bound for address, bound, name in exposed if "ServeReplica" in name and address == "::"]
        others = [(address, bound) for address, bound, name in exposed if bound not in replica_grpc]
        assert others == [("0.0.0.0", port)], exposed
        for bound in replica_grpc:
            _assert_refuses_without_ray_token(outside or "127.0.0.1", bound)
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            assert proc.wait(timeout=120) == 143, log.read_text()[-3000:]
        finally:
            _stop(proc)
    text = log.read_text()
    assert token not in text and "Traceback" not in text, text[-3000:]
    assert "warning: [server] host" not in text  # a token is set: no open-server warning


#: what `omni-rl run` does: Ray imported by ray_session, the first time
CLUSTER_PROBE = """
import sys
from omni_rl.config.schema import ClusterConfig
from omni_rl.runtime.cluster import ray_session
with ray_session(ClusterConfig(workers=1, cpus_per_worker=1)):
    import ray
    ray.get(ray.remote(lambda: 1).remote())  # a worker process too
    print("READY", flush=True)
    sys.stdin.readline()
"""


def test_an_embedded_training_cluster_listens_on_loopback_only(tmp_path: Path, ray_tmp: Path) -> None:
    log, marker = tmp_path / "cluster.log", uuid.uuid4().hex
    environment = {**os.environ, "RAY_TMPDIR": str(ray_tmp), MARKER: marker}
    environment.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)
    proc = subprocess.Popen(
        [sys.executable, "-c", CLUSTER_PROBE],
        env=environment,
        stdin=subprocess.PIPE,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        _wait_for(lambda: "READY" in log.read_text(), proc, log)
        time.sleep(2)  # the agents open their ports as they come up
        listening = _listening(_marked(marker))
        assert len(listening) >= 4, listening  # GCS, raylet, agents, the driver and a worker
        assert [entry for entry in listening if not _loopback(entry[0])] == [], listening
        assert proc.stdin is not None
        proc.stdin.write(b"\n")
        proc.stdin.flush()
        assert proc.wait(timeout=120) == 0, log.read_text()[-3000:]
    finally:
        _stop(proc)
