"""The serve config of ``omni-rl serve-reward`` (no Ray needed to load it): rewards resolved through the registry,
every problem listed by path, routes unique."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from omni_rl.errors import ConfigError
from omni_rl.registry import Registry
from omni_rl.serving import load_serve_config

WriteConfig = Callable[..., Path]


def test_a_served_reward_is_built_to_order(write_config: WriteConfig, toy_registry: Registry) -> None:
    path = write_config(
        '[server]\nhost = "0.0.0.0"\nport = 8100\n\n[[reward]]\nname = "toy_brightness"\nreplicas = 2\n'
        "resources = { GPU = 1 }\nmax_batch_size = 16\n"
    )
    config = load_serve_config(path, ["reward.0.route=bright"], toy_registry)
    (reward,) = config.rewards
    assert (reward.route, reward.section.replicas, reward.section.max_batch_size) == ("bright", 2, 16)
    assert reward.component.resources == {"GPU": 1.0} and reward.component.name == "toy_brightness"
    assert reward.component.path == "$.reward[0]"  # its factory names its options by this path in errors
    assert config.url(reward) == "http://127.0.0.1:8100/bright"  # a wildcard listen address is shown as local


def test_every_problem_is_listed_by_path(write_config: WriteConfig, toy_registry: Registry) -> None:
    path = write_config(
        '[server]\nport = 70000\n\n[[reward]]\nname = "toy_brightnes"\n\n[[reward]]\nname = "toy_brightness"\n'
        'route = "a/b"\noptions = { nope = 1 }\n'
    )
    with pytest.raises(ConfigError) as caught:
        load_serve_config(path, [], toy_registry)
    message = caught.value.message
    assert "@ $.server.port" in message
    assert "did you mean 'toy_brightness'" in message and "@ $.reward[0].name" in message
    assert "@ $.reward[1].route" in message and "@ $.reward[1].options" in message


def test_two_rewards_on_one_route_are_refused(write_config: WriteConfig, toy_registry: Registry) -> None:
    path = write_config('[[reward]]\nname = "toy_brightness"\n\n[[reward]]\nname = "toy_brightness"\n')
    with pytest.raises(ConfigError, match=r"already served by reward\[0\].*@ \$\.reward\[1\]\.route"):
        load_serve_config(path, [], toy_registry)
    with pytest.raises(ConfigError, match=r"missing section \[\[reward\]\]"):
        load_serve_config(write_config("[server]\nport = 8000\n", "empty.toml"), [], toy_registry)


def test_the_server_section_sets_every_request_limit(write_config: WriteConfig, toy_registry: Registry) -> None:
    path = write_config('[server]\nmax_request_images = 16\n\n[[reward]]\nname = "toy_brightness"\n')
    limits = load_serve_config(path, [], toy_registry).server.limits()
    assert (limits.pixels.images, limits.pixels.per_image, limits.pixels.per_request) == (16, 4096**2, 64 * 1024**2)
    assert limits.token is None
    with pytest.raises(ConfigError, match=r"@ \$\.server\.max_request_images"):
        load_serve_config(path, ["server.max_request_images=0"], toy_registry)
