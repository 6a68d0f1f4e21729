"""The config file of ``omni-rl serve-reward``: where to listen and which rewards to serve, how.

Its ``[[reward]]`` tables name installed reward components with their ``options`` exactly as a training
config does, plus how each is served (URL route, replicas, per-replica resources, dynamic batching). Loaded
in the same two passes as a training config, with every problem reported at once by ``$.path``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs

from omni_rl.config.component_preflight import served_preflight_problems
from omni_rl.config.converter import shared_converter, structure
from omni_rl.config.loader import resolve_components
from omni_rl.config.overrides import Override, apply_overrides
from omni_rl.config.schema import ResolvedComponent, _non_negative, _positive
from omni_rl.config.toml import parse_toml
from omni_rl.errors import ConfigError
from omni_rl.registry import Registry
from omni_rl.rewards.protocol import PixelLimits
from omni_rl.serving.limits import ServeLimits
from omni_rl.serving.token import TokenDigest
from omni_rl.validators import int_between

_ROUTE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]{0,63}$")


def _port(instance: Any, attribute: attrs.Attribute, value: int) -> None:
    if not 1 <= value <= 65535:
        raise ValueError(f"must be a TCP port between 1 and 65535, got {value!r}")


def _env_name(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    # never echo the value: a user who pasted the token itself here must not see it printed in the error
    if value and not _ENV_NAME.match(value):
        raise ValueError(
            "must be the NAME of an environment variable holding the token (upper case, digits and '_', e.g. "
            '"OMNI_RL_REWARD_TOKEN"), never the token itself'
        )


def _route(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if value and not _ROUTE.match(value):
        raise ValueError(f"must be one URL path segment of a-z, 0-9, '_', '.', '-' (no '/'), got {value!r}")


@attrs.frozen(kw_only=True)
class ServerSection:
    """``[server]``: the Ray cluster to run on and where the HTTP endpoint listens."""

    #: "local" starts an embedded Ray; "auto", "host:6379" or "ray://host:10001" joins a cluster
    address: str = "local"
    #: "127.0.0.1" serves this machine only; "0.0.0.0" serves the network (runs on other machines)
    host: str = "127.0.0.1"
    port: int = attrs.field(default=8000, validator=_port)
    #: the largest request body read, in bytes (answered 413 beyond it, before the rest is read)
    max_body_bytes: int = attrs.field(default=64 * 2**20, validator=int_between(1024, 2**40))
    #: the most pixels one image may declare (4096 x 4096), and all images of one request together (64 images
    #: of 1024 x 1024): checked from the image headers before decoding, answered 400 beyond them
    max_image_pixels: int = attrs.field(default=4096 * 4096, validator=int_between(1, 2**40))
    max_request_pixels: int = attrs.field(default=64 * 1024 * 1024, validator=int_between(1, 2**40))
    #: the most images (every video frame counted) one request may hold, whatever their size: each costs a decoder
    #: call (a 64 MiB body holds 700,000 one-pixel PNGs)
    max_request_images: int = attrs.field(default=4096, validator=int_between(1, 2**31))
    #: the NAME of an environment variable holding a bearer token ("" = no token): every request must then send
    #: ``Authorization: Bearer <token>`` (the http reward's options.api_key_env names the variable on its side)
    token_env: str = attrs.field(default="", validator=_env_name)

    def limits(self, token: TokenDigest | None = None) -> ServeLimits:
        """What a replica enforces on each request; ``token``: the digest of ``token_env``'s token, which
        ``serve-reward`` reads (:func:`omni_rl.serving.token.read_token_digest`)."""
        return ServeLimits(
            max_body_bytes=self.max_body_bytes,
            pixels=PixelLimits(
                per_image=self.max_image_pixels, per_request=self.max_request_pixels, images=self.max_request_images
            ),
            token=token,
        )


@attrs.frozen(kw_only=True)
class ServedRewardSection:
    """One ``[[reward]]`` of a serve config: a reward component and how it is served."""

    name: str
    #: URL path segment: the reward is served at ``http://host:port/<route>`` ("" = the reward's name)
    route: str = attrs.field(default="", validator=_route)
    #: copies of the model, each in its own Ray actor; requests are spread over them
    replicas: int = attrs.field(default=1, validator=_positive)
    #: Ray resources of each replica, e.g. {GPU = 1} (a replica given GPUs builds its model on cuda)
    resources: dict[str, float] = attrs.field(factory=dict)
    #: requests merged into one call of the reward (Ray Serve's dynamic batching; 1 = no merging)
    max_batch_size: int = attrs.field(default=8, validator=_positive)
    #: how long a replica waits for more requests to merge before scoring what it has
    batch_wait_timeout_s: float = attrs.field(default=0.01, validator=_non_negative)
    options: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ServeFile:
    """The whole file (pass 1)."""

    reward: list[ServedRewardSection]
    server: ServerSection = attrs.field(factory=ServerSection)


@attrs.frozen(kw_only=True)
class ServedReward:
    """A served reward after pass 2: the section, its built-to-order component and its route."""

    section: ServedRewardSection
    component: ResolvedComponent
    route: str


@attrs.frozen(kw_only=True)
class ServeConfig:
    server: ServerSection
    rewards: list[ServedReward]

    def url(self, reward: ServedReward, host: str | None = None) -> str:
        """The URL a client posts to (``host`` replaces a wildcard listen address such as 0.0.0.0)."""
        shown = host or ("127.0.0.1" if self.server.host in ("0.0.0.0", "::") else self.server.host)
        return f"http://{shown}:{self.server.port}/{reward.route}"


def load_serve_config(path: str | Path, overrides: Iterable[str | Override], registry: Registry) -> ServeConfig:
    """Read and validate a serve config; every problem raises one ConfigError listing all of them.

    As for training configs, each reward's name and options are checked even when another part of the file
    is wrong, so one round of fixes is enough.
    """
    raw = apply_overrides(parse_toml(path), overrides)
    registry.validate()
    conv = shared_converter()
    file, problems = structure(conv, raw, ServeFile, "$")
    if not raw.get("reward"):
        problems.append("missing section [[reward]]: name at least one reward to serve @ $.reward")
    # each reward's name and options, resolved exactly as a training config's [[reward]] tables
    chosen, component_problems = resolve_components({"reward": raw.get("reward")}, registry, conv, {})
    problems += component_problems
    if file is not None:
        problems += _route_problems(file)
    if problems or file is None:
        lines = "\n".join(f"  - {problem}" for problem in problems)
        raise ConfigError(
            f"invalid serve config {path} ({len(problems)} problem{'s' if len(problems) != 1 else ''}):\n{lines}",
            hint="docs/rewards.md (Serving a reward) lists every key; `omni-rl plugins --components` the rewards",
        )
    rewards = []
    for i, section in enumerate(file.reward):
        component, options = chosen[f"reward[{i}]"]
        resolved = ResolvedComponent(
            kind="reward",
            name=component.name,
            spec=component.spec,
            options=options,
            resources=dict(section.resources),
            path=f"$.reward[{i}]",
        )
        rewards.append(ServedReward(section=section, component=resolved, route=_route_of(section)))
    if file.server.address == "local":  # the replicas build on this machine: what would fail there fails now
        _raise_preflight(path, served_preflight_problems(reward.component for reward in rewards))
    return ServeConfig(server=file.server, rewards=rewards)


def _raise_preflight(path: str | Path, problems: list[str]) -> None:
    """Each served reward's ``spec.preflight`` problems (a model the hub-less machine cannot load), before Ray."""
    if problems:
        lines = "\n".join(f"  - {problem}" for problem in problems)
        raise ConfigError(
            f"serve config {path} is valid, but serving would fail ({len(problems)} problem"
            f"{'s' if len(problems) != 1 else ''}):\n{lines}",
            hint="fix each line (found without loading a model or starting Ray)",
        )


def _route_of(section: ServedRewardSection) -> str:
    return section.route or section.name.replace(".", "_")


def _route_problems(file: ServeFile) -> list[str]:
    seen: dict[str, int] = {}
    problems = []
    for i, section in enumerate(file.reward):
        route = _route_of(section)
        if route in seen:
            problems.append(
                f"invalid value: route {route!r} is already served by reward[{seen[route]}]; give one of them its "
                f"own route @ $.reward[{i}].route"
            )
        seen.setdefault(route, i)
    return problems
