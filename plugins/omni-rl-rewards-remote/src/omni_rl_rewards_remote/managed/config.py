"""The ``server`` table of a reward whose model omni-rl serves for the run.

``server = { engine = "vllm", model = "PATH_OR_ID", gpus = 1, replicas = 1, args = [...] }`` on ``vlm_judge``:
omni-rl starts ``replicas`` servers, each a Ray actor holding ``gpus`` GPUs and ``cpus`` CPUs, waits until each
answers ``GET /v1/models``, sends the judge's requests to them and stops them when the run ends. Kept apart from
the server code so that the option records import nothing heavy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs

from omni_rl.validators import non_negative_finite, non_negative_int, positive_finite, positive_int

ENGINES: tuple[str, ...] = ("vllm", "command")
#: what ``engine = "command"`` fills in in its command line
PLACEHOLDERS: tuple[str, ...] = ("{host}", "{port}", "{model}")
#: where the per-run API key reaches the server (never on its command line, which ``ps`` shows to every user)
KEY_ENV_VARS: tuple[str, ...] = ("VLLM_API_KEY", "OMNI_RL_SERVER_API_KEY")


def _port(instance: Any, attribute: attrs.Attribute, value: int) -> None:
    if not 0 <= value <= 65535:
        raise ValueError(f"{attribute.name} must be 0 (a free port) or 1-65535, got {value}")


def _env(instance: Any, attribute: attrs.Attribute, value: Mapping[str, str]) -> None:
    for name in value:
        if name in KEY_ENV_VARS:
            raise ValueError(f"{attribute.name} may not set {name}: omni-rl sets it to the run's own API key")


@attrs.frozen(kw_only=True)
class ManagedServerConfig:
    """One reward model served for the run (see the module docstring; docs/rewards.md, "Managed servers")."""

    #: "vllm": vLLM's OpenAI-compatible server (``python -m vllm.entrypoints.openai.api_server``); "command":
    #: any OpenAI-compatible server started by ``command`` (SGLang, a test's stand-in)
    engine: Literal["vllm", "command"] = attrs.field(default="vllm", validator=attrs.validators.in_(ENGINES))
    #: the model directory or hub id the server loads (vLLM's ``--model``); the judge's requests name it
    model: str = ""
    #: GPUs of each replica (a Ray actor's ``num_gpus``; vLLM sees only these); 0 on a CPU machine
    gpus: float = attrs.field(default=1.0, converter=float, validator=non_negative_finite)
    #: CPUs of each replica's actor
    cpus: float = attrs.field(default=1.0, converter=float, validator=non_negative_finite)
    #: servers started; the judge's requests are spread over them
    replicas: int = attrs.field(default=1, validator=positive_int)
    #: further arguments of the server (``["--max-model-len", "4096", "--tensor-parallel-size", "2"]``)
    args: tuple[str, ...] = ()
    #: engine = "command": the whole command line, ``{host}``, ``{port}`` and ``{model}`` filled in; the API key is
    #: in the environment (VLLM_API_KEY and OMNI_RL_SERVER_API_KEY)
    command: tuple[str, ...] = ()
    #: engine = "vllm": the Python of the environment vLLM is installed in ("" = the run's own); vLLM's pins
    #: (torch, transformers) often differ from the training environment's, so it usually has a venv of its own
    python: str = ""
    #: the address the server binds to: loopback (the default) keeps it to this machine, and places the replicas
    #: on the node of the process that sends the requests; "0.0.0.0" lets them run on any node
    host: str = "127.0.0.1"
    #: 0 = a free port chosen at start (each replica its own); a fixed port serves one replica per node
    port: int = attrs.field(default=0, validator=_port)
    #: extra environment variables of the server (``{ VLLM_CPU_KVCACHE_SPACE = "1" }``)
    env: Mapping[str, str] = attrs.field(factory=dict, validator=_env)
    #: seconds a replica may take to answer ``GET /v1/models`` (its placement on a GPU included) before the run fails
    ready_timeout_s: float = attrs.field(default=900.0, converter=float, validator=positive_finite)
    #: how many times in a run a replica that died is started again before the reward fails
    max_restarts: int = attrs.field(default=3, validator=non_negative_int)
    #: seconds a server gets to exit after SIGTERM before it is killed
    stop_timeout_s: float = attrs.field(default=30.0, converter=float, validator=positive_finite)

    def __attrs_post_init__(self) -> None:
        if self.engine == "vllm" and not self.model:
            raise ValueError('server.model must name the model vLLM serves (a directory or a hub id) for engine "vllm"')
        if self.engine == "command" and not self.command:
            raise ValueError('server.command must be the server\'s command line for engine = "command"')
        if self.engine == "vllm" and self.command:
            raise ValueError('server.command is for engine = "command"; engine "vllm" builds its own (use server.args)')
        if self.port and self.replicas > 1 and self.host in ("127.0.0.1", "localhost", "::1"):
            raise ValueError("a fixed server.port on loopback serves one replica: set port = 0 or replicas = 1")

    @property
    def loopback(self) -> bool:
        """Whether the servers bind to this machine only (then they run on the requesting process's node)."""
        return self.host in ("127.0.0.1", "localhost", "::1")
