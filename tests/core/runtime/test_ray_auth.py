"""``omni_rl.runtime.ray_auth``: Ray's token authentication is never turned off, and turning it off is warned about."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from omni_rl.runtime import ray_auth


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No Ray auth variables, and a HOME without a token: the home directory is returned."""
    for key in (ray_auth.AUTH_MODE, ray_auth.AUTH_TOKEN, ray_auth.AUTH_TOKEN_PATH):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    # Ray's own switch re-reads Ray's config in this process; the integration probe exercises it
    monkeypatch.setattr(ray_auth, "_enable_token_mode", lambda: monkeypatch.setenv(ray_auth.AUTH_MODE, "token"))
    return tmp_path


def test_an_embedded_cluster_starts_with_token_auth(env: Path) -> None:
    ray_auth.prepare_auth("local")
    assert ray_auth.os.environ[ray_auth.AUTH_MODE] == "token"


def test_joining_by_address_uses_a_token_at_hand(env: Path) -> None:
    ray_auth.prepare_auth("10.0.0.1:6379")
    assert ray_auth.AUTH_MODE not in ray_auth.os.environ  # no token: the cluster decides (Ray's own error)
    (env / ".ray").mkdir()
    (env / ".ray" / "auth_token").write_text("0123456789abcdef\n")
    ray_auth.prepare_auth("10.0.0.1:6379")
    assert ray_auth.os.environ[ray_auth.AUTH_MODE] == "token"


def test_token_sources_in_rays_order(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert not ray_auth.token_available()
    monkeypatch.setenv(ray_auth.AUTH_TOKEN_PATH, str(env / "missing"))
    assert not ray_auth.token_available()
    (env / "token").write_text("secret")
    monkeypatch.setenv(ray_auth.AUTH_TOKEN_PATH, str(env / "token"))
    assert ray_auth.token_available()
    monkeypatch.delenv(ray_auth.AUTH_TOKEN_PATH)
    monkeypatch.setenv(ray_auth.AUTH_TOKEN, "secret")
    assert ray_auth.token_available()


def test_a_user_disabling_auth_gets_one_warning_line(
    env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(ray_auth.AUTH_MODE, "disabled")
    ray_auth.prepare_auth("local")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("warning: RAY_AUTH_MODE is 'disabled'")
    assert ray_auth.os.environ[ray_auth.AUTH_MODE] == "disabled"  # the user's choice, warned about, not overridden


def _project_files(root: Path) -> list[Path]:
    """The repository's tracked and untracked-but-not-ignored files (not virtual environments or build output)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):  # not a git checkout (an sdist): walk it, skipping dot folders
        return [p for p in root.rglob("*") if not any(part.startswith(".") for part in p.relative_to(root).parts)]
    return [root / name for name in listed]


def test_nothing_in_the_project_disables_auth() -> None:
    """The repository never writes the opt-out (README, docs, CI, noxfile, tests, plugins, benchmarks)."""
    root = Path(__file__).parents[3]
    var, value = '"RAY_AUTH_MODE"', '"disabled"'
    needles = ("RAY_AUTH_MODE" + "=disabled", f"{var}, {value}", f"{var}: {value}")
    offenders = []
    for path in _project_files(root):
        if path.suffix not in {".py", ".md", ".toml", ".txt", ".cfg", ".yaml", ".yml", ".sh", ""} or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if any(needle in text for needle in needles):
            offenders.append(str(path.relative_to(root)))
    assert offenders == []


def test_the_token_file_is_made_readable_by_its_owner_only(tmp_path: Path) -> None:
    """QA's D1 residual: Ray writes ~/.ray/auth_token 0644; after a start omni-rl leaves it 0600."""
    from omni_rl.runtime.ray_auth import protect_token_file

    token = tmp_path / ".ray" / "auth_token"
    token.parent.mkdir()
    token.write_text("secret-token\n")
    token.chmod(0o644)
    protect_token_file({"HOME": str(tmp_path)})
    assert token.stat().st_mode & 0o777 == 0o600
    named = tmp_path / "elsewhere"
    named.write_text("t")
    named.chmod(0o640)
    protect_token_file({"HOME": str(tmp_path), "RAY_AUTH_TOKEN_PATH": str(named)})
    assert named.stat().st_mode & 0o777 == 0o600
    protect_token_file({"HOME": str(tmp_path / "nobody")})  # no file: nothing to do, no error
