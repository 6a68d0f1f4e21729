"""GPU runs that need more than ``omni-rl run`` alone: a reward actor holding part of the GPU, ``serve-reward``
with a GPU replica, a resume after SIGKILL on the GPU, and the export of a GPU run loading into diffusers."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from gpu_checks import check_rows, on_this_machine, rehearsal, report
from test_gpu_runs import EXAMPLES, SMALL, STEPS, run

CLIP_TINY = Path(__file__).parents[2] / "plugins" / "omni-rl-rewards-clip" / "tests" / "clip_tiny_models.py"


def _tiny_clip(directory: Path) -> Path:
    """A tiny random CLIP (omni-rl-rewards-clip's test builder) for pickscore."""
    spec = importlib.util.spec_from_file_location("clip_tiny_models", CLIP_TINY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.save_tiny_clip(directory)


def _share() -> float:
    return 0.0 if rehearsal() else 0.25


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_reward_actor_with_a_gpu_share(tmp_path: Path, gpu_ray: None, tiny_models: dict[str, Path]) -> None:
    """pickscore in its own Ray actor with GPU = 0.25 (built on cuda), beside the policy worker's 0.5."""
    clip = _tiny_clip(tmp_path / "clip")
    config = tmp_path / "gpu_reward.toml"
    config.write_text(
        (EXAMPLES / "sd3_tiny_jpeg.toml").read_text()
        + f'\n[[reward]]\nname = "pickscore"\nweight = 0.1\nresources = {{ GPU = {_share()}, CPU = 1 }}\n'
        f'options = {{ model = "{clip}", processor = "{clip}" }}\n'
    )
    sets = (f"model.options.path={tiny_models['sd3']}", *SMALL, "cluster.gpus_per_worker=0.5")
    rows = run(config, tmp_path / "run", (*sets, "optim.recompute_old_log_probs=true"))
    assert all("reward/pickscore/mean" in row for row in rows)
    report("reward_actor_gpu", check_rows(rows, STEPS))


def test_serve_reward_with_a_gpu_replica(tmp_path: Path, gpu_ray: None, tiny_models: dict[str, Path]) -> None:
    """``serve-reward`` with one pickscore replica on GPU = 0.25; a training run scores through the ``http``
    reward."""
    from ray import serve

    from omni_rl import get_registry
    from omni_rl.serving import load_serve_config
    from omni_rl.serving.launch import start_servers

    clip = _tiny_clip(tmp_path / "clip")
    serve_toml = tmp_path / "serve.toml"
    serve_toml.write_text(
        f'[server]\nport = {_free_port()}\n\n[[reward]]\nname = "pickscore"\nreplicas = 1\n'
        f'resources = {{ GPU = {_share()} }}\noptions = {{ model = "{clip}", processor = "{clip}" }}\n'
    )
    try:
        (url,) = start_servers(load_serve_config(serve_toml, [], get_registry()))
        sets = (
            f"model.options.path={tiny_models['sd3']}",
            *SMALL,
            "cluster.gpus_per_worker=0.5",
            'reward.0.name="http"',
            f'reward.0.options={{url = "{url}"}}',
            "optim.recompute_old_log_probs=true",
        )
        rows = run(EXAMPLES / "sd3_tiny_jpeg.toml", tmp_path / "run", sets)
    finally:
        serve.shutdown()
    assert all("reward/http/mean" in row for row in rows)
    report("serve_reward_gpu", check_rows(rows, STEPS))


def test_resume_after_sigkill_then_export_loads_in_diffusers(tmp_path: Path, tiny_models: dict[str, Path]) -> None:
    """A GPU run killed (SIGKILL, with its embedded Ray) after its second checkpoint resumes to the end; its
    LoRA export loads into StableDiffusion3Pipeline on cuda and changes the images."""
    import torch
    from diffusers import StableDiffusion3Pipeline

    from omni_rl.cli import main

    out = tmp_path / "run"
    sets = [
        f"run.output_dir={out}",
        f"model.options.path={tiny_models['sd3']}",
        *SMALL,
        "run.steps=4",
        "run.save_every=1",
        "log.image_every=0",
        "cluster.gpus_per_worker=1",
        "cluster.cpus_per_worker=1",
    ]
    argv = ["run", str(EXAMPLES / "sd3_tiny_jpeg.toml"), *[a for s in on_this_machine(sets) for a in ("--set", s)]]
    log = tmp_path / "first.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "omni_rl.cli", *argv],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    pointer = out / "checkpoints" / "latest"
    deadline = time.monotonic() + 240
    try:
        while not (pointer.exists() and pointer.read_text().strip() == "step_2"):
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "timed out waiting for the step-2 checkpoint"
            time.sleep(0.05)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert main(["run", str(out / "config.resolved.toml"), "--set", "run.resume=auto"]) == 0
    import json

    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert sorted({r["step"] for r in rows}) == [1, 2, 3, 4]
    last = {r["step"]: r for r in rows}
    report("resume_after_kill", check_rows([last[s] for s in (1, 2, 3, 4)], 4))

    export = tmp_path / "export"
    assert main(["export", str(out), "--out", str(export)]) == 0
    device = "cpu" if rehearsal() else "cuda"
    pipe = StableDiffusion3Pipeline.from_pretrained(tiny_models["sd3"], torch_dtype=torch.float32).to(device)
    kwargs = {"prompt": "a red circle", "num_inference_steps": 2, "height": 32, "width": 32, "output_type": "pt"}
    base = pipe(**kwargs, generator=torch.Generator(device).manual_seed(0)).images
    pipe.load_lora_weights(export)
    tuned = pipe(**kwargs, generator=torch.Generator(device).manual_seed(0)).images
    assert torch.isfinite(tuned).all() and not torch.equal(base, tuned)
