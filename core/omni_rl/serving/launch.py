"""Start (and stop) the reward servers of a serve config on Ray Serve.

``start_servers`` returns once every reward answers, so a test or a notebook can use the URLs at once;
``omni-rl serve-reward`` then waits for Ctrl-C. Both join the Ray this process already joined, if any.
"""

from __future__ import annotations

import logging
import os
from types import ModuleType

from omni_rl.errors import RuntimeFailure
from omni_rl.rewards.combined import actor_resources, ray_actor_options
from omni_rl.runtime.local_ray import embedded_init_options, prefer_loopback_node
from omni_rl.runtime.ray_auth import prepare_auth, protect_token_file
from omni_rl.runtime.worker_logs import plain_prefixes
from omni_rl.serving.config import ServeConfig
from omni_rl.serving.token import TokenDigest, read_token_digest


def _ray_serve() -> ModuleType:
    """``ray.serve``, or a RuntimeFailure saying what to install."""
    try:
        from ray import serve
    except ImportError as exc:
        raise RuntimeFailure(
            f"serving rewards needs Ray Serve, which failed to import: {exc}",
            hint="pip install 'omni-rl[serve]' (or omni-rl-rewards-remote, which depends on ray[serve])",
        ) from exc
    return serve


def connect(config: ServeConfig) -> bool:
    """Join or start Ray as ``[server] address`` says; True when this call started it (so it shuts it down)."""
    if config.server.address == "local":
        prefer_loopback_node()  # before Ray is imported: an embedded cluster listens on 127.0.0.1 (local_ray)
    plain_prefixes()  # no ANSI colour around Ray's forwarded line prefixes under NO_COLOR or into a log file
    import ray

    if ray.is_initialized():
        return False
    prepare_auth(config.server.address)
    kwargs = {"include_dashboard": False, "logging_level": logging.WARNING}
    address = config.server.address
    try:
        if address == "local":
            need = sum(actor_resources(r.section.resources)["CPU"] * r.section.replicas for r in config.rewards)
            cpus = max(int(need + 0.999), os.cpu_count() or 1)
            ray.init(address="local", num_cpus=cpus, **kwargs, **embedded_init_options())
        else:
            ray.init(address=address, **kwargs)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise RuntimeFailure(
            f"cannot connect to the Ray cluster at {address!r}: {exc}",
            hint='fix $.server.address: "local" for an embedded Ray, or the address `ray start --head` printed',
        ) from exc
    protect_token_file()  # Ray wrote it 0644: anyone who reads it can run code in the cluster
    return True


def start_servers(config: ServeConfig, token: TokenDigest | None = None) -> list[str]:
    """Deploy every reward of ``config`` (Ray must be initialised) and return their URLs, in config order.
    ``token``: the digest of ``[server] token_env``'s token, read here from the environment when not given
    (``serve-reward`` takes it before Ray starts: :func:`omni_rl.serving.token.take_token_digest`)."""
    serve = _ray_serve()
    from omni_rl.serving.replica import RewardReplica

    # the token stays in this process: the replicas get its salted digest, which no Ray log can give away
    try:
        limits = config.server.limits(token or read_token_digest(config.server.token_env))
    except ValueError as exc:
        raise RuntimeFailure(f"{exc} @ $.server.token_env", hint="export the token alone, on one line") from None
    serve.start(http_options={"host": config.server.host, "port": config.server.port})
    urls = []
    for reward in config.rewards:
        app = RewardReplica.options(
            name=reward.route,
            num_replicas=reward.section.replicas,
            ray_actor_options=ray_actor_options(reward.section.resources),
        ).bind(reward.component, reward.section.max_batch_size, reward.section.batch_wait_timeout_s, limits)
        try:
            serve.run(app, name=reward.route, route_prefix=f"/{reward.route}")
        except Exception as exc:
            raise RuntimeFailure(
                f"reward {reward.component.name!r} could not be served at /{reward.route}: {type(exc).__name__}: {exc}",
                hint="check that the cluster has its resources ($.reward[*].resources, replicas) and that the "
                "reward builds (omni-rl check runs the same options in a training config)",
            ) from exc
        urls.append(config.url(reward))
    return urls


def stop_servers(config: ServeConfig) -> None:
    """Remove this config's applications (other applications on the same Ray Serve are left alone)."""
    serve = _ray_serve()
    for reward in config.rewards:
        serve.delete(reward.route)
