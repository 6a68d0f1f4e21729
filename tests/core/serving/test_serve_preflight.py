"""What ``serve-reward`` checks before Ray starts (issue 48): a warning for a server on the network without a token
(N13) or with a short one, and a port in use or a host that is no address here as one ``$.server.*`` line (exit 2)
instead of Ray's proxy tracebacks."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from omni_rl.errors import ConfigError
from omni_rl.serving.config import ServerSection
from omni_rl.serving.preflight import check_listen, is_loopback, server_warnings

TOKEN_ENV = "OMNI_RL_TEST_PREFLIGHT_TOKEN"


def test_an_open_server_on_the_network_is_warned_about(monkeypatch: pytest.MonkeyPatch) -> None:
    (warning,) = server_warnings(ServerSection(host="0.0.0.0", port=8123))
    assert "serves the network and no token_env is set" in warning and "port 8123" in warning
    assert server_warnings(ServerSection(host="127.0.0.1")) == []  # this machine only: no warning
    assert server_warnings(ServerSection(host="::1")) == [] and server_warnings(ServerSection(host="localhost")) == []
    monkeypatch.setenv(TOKEN_ENV, "f" * 64)
    assert server_warnings(ServerSection(host="0.0.0.0", token_env=TOKEN_ENV)) == []
    monkeypatch.setenv(TOKEN_ENV, "Zq8vX\n")
    (warning,) = server_warnings(ServerSection(host="0.0.0.0", token_env=TOKEN_ENV))
    assert "fewer than 16 characters" in warning and "Zq8vX" not in warning


def test_loopback_addresses() -> None:
    assert all(is_loopback(host) for host in ("127.0.0.1", "127.1.2.3", "::1", "localhost"))
    assert not any(is_loopback(host) for host in ("0.0.0.0", "::", "192.0.2.7", "example.org"))


def test_a_port_in_use_is_one_line_naming_the_port() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(ConfigError) as caught:
            check_listen("127.0.0.1", port)
    assert caught.value.message.startswith(f"cannot listen on 127.0.0.1:{port}: ")
    assert caught.value.message.endswith("@ $.server.port") and caught.value.exit_code == 2
    check_listen("127.0.0.1", port)  # free again


@pytest.mark.parametrize("host", ["999.1.1.1", "not a host", "192.0.2.254"])
def test_a_host_that_is_no_address_of_this_machine_names_the_host(host: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_listen(host, 8000)
    assert caught.value.message.endswith("@ $.server.host"), caught.value.message


def _serve_until_ray(
    config: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> tuple[int, str]:
    """``omni-rl serve-reward`` up to the moment it would start Ray (stopped there as by Ctrl-C): (rc, stderr)."""
    from omni_rl.cli import main
    from omni_rl.serving import launch

    def no_ray(*args: Any, **kwargs: Any) -> bool:
        raise KeyboardInterrupt

    monkeypatch.setattr(launch, "connect", no_ray)
    path = tmp_path / "serve.toml"
    path.write_text(config)
    rc = main(["serve-reward", str(path)])
    return rc, capsys.readouterr().err


def test_serve_reward_warns_at_start_when_open_to_the_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    port = _free_port()
    rc, err = _serve_until_ray(
        f'[server]\nhost = "0.0.0.0"\nport = {port}\n\n[[reward]]\nname = "jpeg_compressibility"\n',
        tmp_path,
        monkeypatch,
        capsys,
    )
    assert rc == 130 and "warning: [server] host = '0.0.0.0' serves the network and no token_env is set" in err


def test_serve_reward_refuses_a_port_in_use_before_ray(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        rc, err = _serve_until_ray(
            f'[server]\nport = {port}\n\n[[reward]]\nname = "jpeg_compressibility"\n', tmp_path, monkeypatch, capsys
        )
    assert rc == 2 and f"error: cannot listen on 127.0.0.1:{port}" in err and "@ $.server.port" in err
    assert "Traceback" not in err


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
