"""A policy worker or reward actor whose constructor raises: one line with the cause, its exit code, no Ray noise.

Each run is a real ``omni-rl run`` process with ``NO_COLOR`` (as a user's terminal or a CI log sees it): the
plugin's ConfigError arrives as ``error: policy worker 0 failed while starting: <its message>`` and its hint, exit 2,
without ANSI codes, Ray's creation-task traceback (``^^^``) or a memory / resume hint for a run that never
started. ``omni-rl check`` finds the same mistakes without starting anything.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from omni_rl.cli import main

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "sd3_tiny_jpeg.toml"
UNSET_KEY = "OMNI_RL_TEST_UNSET_API_KEY"


def _run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != UNSET_KEY}
    env.update(HF_HUB_OFFLINE="1", NO_COLOR="1", OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, "-m", "omni_rl.cli", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=400
    )


def _assert_one_clean_error(done: subprocess.CompletedProcess[str], cause: str) -> None:
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and cause in errors[0], output
    assert "\x1b[" not in output and "^^^" not in output and "Traceback" not in output, output
    assert "resume" not in output.split("Ray: ")[-1] and "memory" not in output, output


def _sets(out: Path, *extra: str) -> list[str]:
    sets = [f"run.output_dir={out}", "cluster.cpus_per_worker=1", "log.image_every=0", *extra]
    return [a for s in sets for a in ("--set", s)]


@pytest.mark.parametrize("kind", ["missing", "empty"])
def test_a_wrong_model_path_is_one_line_and_exit_2(tmp_path: Path, kind: str) -> None:
    model = tmp_path / "model"
    if kind == "empty":
        model.mkdir()
    args = ["run", str(EXAMPLE), *_sets(tmp_path / "run", f"model.options.path={model}")]
    done = _run([*args, "--set", "model.options.build_tiny_if_missing=false"], tmp_path)
    cause = "does not exist" if kind == "missing" else "no model_index.json"
    _assert_one_clean_error(done, "policy worker 0 failed while starting: ")
    assert cause in done.stderr


def test_a_reward_actor_without_its_api_key_is_one_line_and_exit_2(tmp_path: Path, tiny_sd3: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        EXAMPLE.read_text()
        + "\n[[reward]]\n"
        + 'name = "vlm_judge"\n'
        + "resources = { CPU = 1 }\n"
        + f'options = {{ base_url = "http://127.0.0.1:9/v1", model = "judge", api_key_env = "{UNSET_KEY}" }}\n'
    )
    done = _run(["run", str(config), *_sets(tmp_path / "run", f"model.options.path={tiny_sd3}")], tmp_path)
    _assert_one_clean_error(done, "reward actor 'vlm_judge' failed while starting: ")
    assert UNSET_KEY in done.stderr


def test_check_finds_them_without_starting_anything(
    tmp_path: Path, tiny_sd3: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv(UNSET_KEY, raising=False)
    config = tmp_path / "config.toml"
    config.write_text(
        EXAMPLE.read_text()
        + '\n[[reward]]\nname = "vlm_judge"\n'
        + f'options = {{ base_url = "http://127.0.0.1:9/v1", model = "judge", api_key_env = "{UNSET_KEY}" }}\n'
    )
    (tmp_path / "a_file").write_text("")
    good = [f"model.options.path={tiny_sd3}", f"run.output_dir={tmp_path / 'run'}"]
    assert main(["check", str(EXAMPLE), *[a for s in good for a in ("--set", s)]]) == 0
    capsys.readouterr()
    bad = [
        f"model.options.path={tmp_path / 'nowhere'}",
        "model.options.build_tiny_if_missing=false",
        f"run.output_dir={tmp_path / 'a_file' / 'run'}",
    ]
    assert main(["check", str(config), *[a for s in bad for a in ("--set", s)]]) == 2
    err = capsys.readouterr().err
    assert "(3 problems)" in err, err
    assert "@ $.model.options.path" in err and "@ $.run.output_dir" in err
    assert f"{UNSET_KEY}, which is not set @ $.reward[1].options.api_key_env" in err
