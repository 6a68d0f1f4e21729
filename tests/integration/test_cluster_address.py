"""`[cluster] address` joins a Ray cluster started separately with `ray start --head`."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "sd3_tiny_jpeg.toml"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_run_joins_a_separately_started_cluster(tmp_path: Path, tiny_sd3: Path) -> None:
    port = _free_port()
    address = f"127.0.0.1:{port}"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"}
    ray_bin = Path(sys.executable).parent / "ray"
    head = subprocess.Popen(
        [
            str(ray_bin),
            "start",
            "--head",
            f"--port={port}",
            "--node-ip-address=127.0.0.1",
            "--num-cpus=2",
            "--include-dashboard=false",
            "--disable-usage-stats",
            "--block",
        ],
        env=env,
        stdout=(tmp_path / "head.log").open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while subprocess.run([str(ray_bin), "status", "--address", address], env=env, capture_output=True).returncode:
            assert head.poll() is None, (tmp_path / "head.log").read_text()
            assert time.monotonic() < deadline, "ray start --head did not come up in 90 s"
            time.sleep(1)
        out = tmp_path / "run"
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "omni_rl.cli",
                "run",
                str(EXAMPLE),
                "--set",
                f"cluster.address={address}",
                "--set",
                "run.steps=2",
                "--set",
                "run.save_every=0",
                "--set",
                f"run.output_dir={out}",
                "--set",
                f"model.options.path={tiny_sd3}",
                "--set",
                "rollout.options.height=32",
                "--set",
                "rollout.options.width=32",
                "--set",
                "rollout.options.group_size=4",
                "--set",
                "log.image_every=0",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"joined the Ray cluster at {address}" in result.stdout
        rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        assert [row["step"] for row in rows] == [1, 2]
        assert (out / "checkpoints" / "step_2" / "pytorch_lora_weights.safetensors").exists()
    finally:
        head.terminate()
        head.wait(timeout=60)
