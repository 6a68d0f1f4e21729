"""``omni-rl serve-reward CONFIG``: serve installed reward components over HTTP (Ray Serve) until Ctrl-C.

The core builds the rewards through the registry like any other component, so any installed reward can be
served, and imports no plugin. docs/rewards.md describes the config and the JSON protocol.
"""

from __future__ import annotations

import argparse
import time

from rich.text import Text

from omni_rl.cli.output import Output
from omni_rl.registry import Registry
from omni_rl.runtime.ray_session_dir import embedded_session_dir, remove_session_dir
from omni_rl.serving.preflight import check_listen, require_token, server_warnings
from omni_rl.serving.stop_signal import StopOnSigterm
from omni_rl.serving.token import take_token_digest

__all__ = ["require_token", "serve_reward_command"]


def serve_reward_command(args: argparse.Namespace, output: Output, registry: Registry) -> int:
    from omni_rl.serving import load_serve_config
    from omni_rl.serving.launch import connect, start_servers, stop_servers

    output.plugin_warnings(registry)
    config = load_serve_config(args.config, args.set or (), registry)
    require_token(config.server.token_env)
    if config.server.address == "local":  # this machine runs the HTTP proxy: a port in use is found before Ray
        check_listen(config.server.host, config.server.port)
    for warning in server_warnings(config.server):
        output.warning(warning)
    token = take_token_digest(config.server.token_env)  # before Ray starts: none of its processes inherits it
    started = connect(config)
    session = embedded_session_dir() if started and config.server.address == "local" else None
    with StopOnSigterm():  # after connect: Ray's core installs its own SIGTERM handler (a crash dump) when it starts
        try:
            urls = start_servers(config, token)
            for reward, url in zip(config.rewards, urls, strict=True):
                output.success(f"serving reward {reward.component.name!r} at {url}")
            if config.server.host in ("0.0.0.0", "::"):
                output.print(
                    Text(
                        f"listening on every interface ({config.server.host}): other machines use this machine's "
                        f"address, port {config.server.port}"
                    )
                )
            output.print(Text(f'use it in a run: [[reward]] name = "http", options = {{ url = "{urls[0]}" }}'))
            output.print(Text("Ctrl-C (or SIGTERM) stops the servers"))
            while True:
                time.sleep(3600)
        finally:
            try:
                stop_servers(config)
            finally:
                if started:
                    import ray

                    ray.shutdown()
                if session is not None:
                    remove_session_dir(session)
