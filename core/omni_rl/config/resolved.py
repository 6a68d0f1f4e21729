"""What a run directory records about its config: the resolved file and the plugin versions.

``config.resolved.toml`` has every default written out (presets, ``--set`` and component defaults applied),
so a run can be repeated with ``omni-rl run <run dir>/config.resolved.toml`` even after a plugin changes its
defaults; ``plugins.txt`` pins the distributions (``name==version``, pip's format) that produced it.
"""

from __future__ import annotations

from pathlib import Path

from omni_rl.config.schema import ResolvedConfig
from omni_rl.config.toml import dumps

RESOLVED_CONFIG = "config.resolved.toml"
PLUGIN_VERSIONS = "plugins.txt"

_HEADER = (
    "# The resolved omni-rl config of this run: presets, --set overrides and every default filled in.\n"
    "# `omni-rl run` accepts this file as it is.\n"
)


def resolved_toml(config: ResolvedConfig) -> str:
    """The resolved config as TOML text (what ``--print-config`` shows)."""
    return dumps(config.raw)


def write_resolved(config: ResolvedConfig, run_dir: str | Path) -> tuple[Path, Path]:
    """Write ``config.resolved.toml`` and ``plugins.txt`` into ``run_dir`` (created if needed)."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    config_path = run_dir / RESOLVED_CONFIG
    config_path.write_text(_HEADER + resolved_toml(config), encoding="utf-8")
    plugins_path = run_dir / PLUGIN_VERSIONS
    plugins_path.write_text("".join(f"{line}\n" for line in config.plugin_versions), encoding="utf-8")
    return config_path, plugins_path
