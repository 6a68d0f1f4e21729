"""``omni_rl.rundir.start``: what an output directory means for a fresh run (N11 of qa-2026-12): a run that stopped
before logging its first step (a config error a worker found at step 1) left an empty ``metrics.jsonl`` and no
checkpoint, and the corrected command was refused as "already holds a run"."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from core_toys import TOY_CONFIG

from omni_rl.config import load_config
from omni_rl.config.schema import ResolvedConfig
from omni_rl.errors import ConfigError
from omni_rl.registry import Registry
from omni_rl.rundir.start import holds_metrics, resolve_run_start, start_fresh


def _config(
    write_config: Callable[..., Path], registry: Registry, run_dir: Path, resume: str = "never"
) -> ResolvedConfig:
    return load_config(
        write_config(TOY_CONFIG), [f"run.output_dir={run_dir}", f'run.resume="{resume}"'], registry=registry
    )


def test_an_empty_metrics_file_without_checkpoints_is_a_fresh_start(
    tmp_path: Path, write_config: Callable[..., Path], toy_registry: Registry
) -> None:
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "metrics.jsonl").write_text("")  # what a run that failed in step 1 leaves
    (run_dir / "config.resolved.toml").write_text("")
    start = resolve_run_start(_config(write_config, toy_registry, run_dir))
    assert start.candidates == () and start.run_dir == run_dir.absolute()
    start_fresh(run_dir)  # the empty file goes, no empty backup beside it
    assert not (run_dir / "metrics.jsonl").exists() and not list(run_dir.glob("metrics.*.jsonl"))

    (run_dir / "metrics.jsonl").write_text("\n  \n")  # whitespace only: still nothing logged
    assert not holds_metrics(run_dir / "metrics.jsonl")
    resolve_run_start(_config(write_config, toy_registry, run_dir))


def test_a_logged_step_still_makes_the_directory_a_run(
    tmp_path: Path, write_config: Callable[..., Path], toy_registry: Registry
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "metrics.jsonl").write_text('{"step": 1}\n')
    with pytest.raises(ConfigError, match=r"already holds a run .* @ \$\.run\.output_dir"):
        resolve_run_start(_config(write_config, toy_registry, run_dir))
    start_fresh(run_dir)  # resume = "auto" without a checkpoint: the old rows are kept as a backup
    (backup,) = run_dir.glob("metrics.*.jsonl")
    assert backup.read_text() == '{"step": 1}\n' and not (run_dir / "metrics.jsonl").exists()
