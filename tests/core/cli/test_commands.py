"""The omni-rl command: exit codes, messages without tracebacks, and the plugin listing.

In-process tests call ``main()`` with an isolated registry; subprocess tests run the real command against
fake installed distributions on PYTHONPATH (OMNI_RL_LOAD_PLUGINS keeps first-party plugins out of them).
"""

from __future__ import annotations

import json
import re
import types
from collections.abc import Callable
from pathlib import Path

import pytest
from core_fake_dists import BROKEN_HOOKS, CONFLICTING_HOOKS, LIGHT_CONFIG, LIGHT_HOOKS, run_cli, with_prompts
from core_toys import TOY_CONFIG

from omni_rl.cli import main
from omni_rl.config.schema import ResolvedConfig
from omni_rl.errors import RuntimeFailure
from omni_rl.registry import Registry
from omni_rl.testing import write_fake_distribution

WriteConfig = Callable[..., Path]
JSON_KEYS = ["distribution", "version", "entry_point", "status", "error", "components"]


@pytest.fixture
def toys(use_registry: Callable[[Registry], Registry], toy_registry: Registry) -> Registry:
    return use_registry(toy_registry)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """Fake installed distributions: a good one, one that conflicts with it, one that does not import."""
    site = tmp_path / "site"
    write_fake_distribution(
        site, "acme-toys", "1.0", entry_points={"toys": "acme_toys.hooks"}, modules={"acme_toys.hooks": LIGHT_HOOKS}
    )
    write_fake_distribution(
        site,
        "acme-fork",
        "2.0",
        entry_points={"fork": "acme_fork.hooks"},
        modules={"acme_fork.hooks": CONFLICTING_HOOKS},
    )
    write_fake_distribution(
        site,
        "acme-broken",
        "0.1",
        entry_points={"broken": "acme_broken.hooks"},
        modules={"acme_broken.hooks": BROKEN_HOOKS},
    )
    return site


# -- in process ------------------------------------------------------------------------------------------


def test_check_a_valid_config(
    toys: Registry, write_config: WriteConfig, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(with_prompts(TOY_CONFIG, tmp_path))
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"{path}: config is valid" in out
    assert "toy_ppo" in out and "omni-rl-toys 0.3" in out


def test_check_reads_the_prompt_sources_run_would_read(
    toys: Registry, write_config: WriteConfig, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train, val = tmp_path / "missing_train.txt", tmp_path / "missing_val.jsonl"
    path = write_config(TOY_CONFIG + f'\n[data]\ntrain = "{train.as_posix()}"\nval = "{val.as_posix()}"\n')
    assert main(["check", str(path)]) == 2
    captured = capsys.readouterr()
    assert "config is valid" not in captured.out
    assert captured.err.splitlines()[:3] == [
        f"error: invalid config {path} (2 problems):",
        f"  - prompt file '{train.as_posix()}' does not exist @ $.data.train",
        f"  - prompt file '{val.as_posix()}' does not exist @ $.data.val",
    ]
    assert captured.err.splitlines()[3].startswith("hint: give a .txt (one prompt per line)")

    val.write_text('{"prompt": "a red circle"}\n{"caption": "no prompt key"}\n')
    assert main(["check", str(path), "--set", f"data.train={val.as_posix()}", "--set", "data.val="]) == 2
    assert capsys.readouterr().err.splitlines()[:2] == [
        f"error: invalid config {path} (1 problem):",
        "  - missing_val.jsonl:2: not a JSON object with a 'prompt' key ('prompt') @ $.data.train",
    ]


def test_check_wants_training_prompts_and_val_prompts_when_validation_is_on(
    toys: Registry, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(TOY_CONFIG)
    assert main(["check", str(path), "--set", "run.eval_every=2"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[:3] == [
        f"error: invalid config {path} (2 problems):",
        "  - no training prompts: [data] train is not set @ $.data.train",
        "  - validation is on but no val prompts are set @ $.data.val",
    ]
    assert err[3] == (
        'hint: set [data] train to a prompt file (.txt one prompt per line, .jsonl lines like {"prompt": "..."}); '
        "set [data] val to a prompt file, or [run] eval_every = 0 and eval_before_training = false"
    )


def test_check_reports_config_problems_with_exit_2(
    toys: Registry, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(TOY_CONFIG)
    assert main(["check", str(path), "--set", "run.steps=0", "--set", "loss.options.clip_ratio=big"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[:3] == [
        f"error: invalid config {path} (2 problems):",
        "  - invalid value: steps must be an integer between 1 and 10,000,000, got 0 @ $.run.steps",
        "  - invalid value for type, expected float @ $.loss.options.clip_ratio",
    ]
    assert err.splitlines()[3].startswith("hint: ")
    assert "Traceback" not in err


def test_run_print_config_prints_the_resolved_toml(
    toys: Registry, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", str(write_config(TOY_CONFIG)), "--print-config", "--set", "optim.lr=1e-3"]) == 0
    out = capsys.readouterr().out
    assert "[loss.options]\nclip_ratio = 0.1\nkl_coef = 0.04\n" in out
    assert "lr = 0.001\n" in out


def _fake_trainer(monkeypatch: pytest.MonkeyPatch, train: Callable[[ResolvedConfig], Path]) -> None:
    module = types.ModuleType("omni_rl.train.trainer")
    module.train = train  # type: ignore[attr-defined]
    monkeypatch.setitem(__import__("sys").modules, "omni_rl.train.trainer", module)


def test_run_trains_with_the_resolved_config(
    toys: Registry,
    write_config: WriteConfig,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    seen: list[ResolvedConfig] = []

    def train(config: ResolvedConfig) -> Path:
        seen.append(config)
        return tmp_path / "runs" / "1"

    _fake_trainer(monkeypatch, train)
    assert main(["run", str(write_config(TOY_CONFIG)), "--set", "run.steps=5"]) == 0
    assert seen[0].run.steps == 5
    assert f"run finished: {tmp_path / 'runs' / '1'}" in capsys.readouterr().out


def test_a_runtime_failure_exits_1_with_its_hint(
    toys: Registry, write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def train(config: ResolvedConfig) -> Path:
        raise RuntimeFailure("reward 'ocr' failed on step 3", hint='set on_error = "zero"')

    _fake_trainer(monkeypatch, train)
    assert main(["run", str(write_config(TOY_CONFIG))]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "error: reward 'ocr' failed on step 3",
        'hint: set on_error = "zero"',
    ]


def test_an_unexpected_exception_is_one_line_and_debug_shows_the_traceback(
    toys: Registry, write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def train(config: ResolvedConfig) -> Path:
        raise ZeroDivisionError("division by zero")

    _fake_trainer(monkeypatch, train)
    path = str(write_config(TOY_CONFIG))
    assert main(["run", path]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "error: ZeroDivisionError: division by zero",
        "hint: rerun with --debug for the traceback",
    ]
    assert main(["--debug", "run", path]) == 1
    assert "Traceback (most recent call last)" in capsys.readouterr().err
    assert main(["run", path, "--debug"]) == 1
    assert "Traceback (most recent call last)" in capsys.readouterr().err


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run"]) == 2
    assert main(["frobnicate"]) == 2
    assert main([]) == 2
    assert main(["--help"]) == 0


def test_plugins_json_has_exactly_the_documented_keys(toys: Registry, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins", "--json"]) == 0
    (plugin,) = json.loads(capsys.readouterr().out)
    assert list(plugin) == JSON_KEYS
    assert plugin["entry_point"] == "toys = ToyPlugin"
    assert plugin["status"] == "active" and plugin["error"] is None
    assert {"kind": "loss", "name": "toy_ppo", "summary": "toy PPO"} in plugin["components"]
    assert all(list(c) == ["kind", "name", "summary"] for c in plugin["components"])


def test_plugins_table(toys: Registry, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["plugins", "--components"]) == 0
    out = capsys.readouterr().out
    assert "omni-rl-toys" in out and "active" in out
    assert "toy_brightness" in out and "brightness" in out


# -- subprocess, against fake installed distributions ----------------------------------------------------


def test_conflicting_distributions_stop_check_and_run_but_not_plugins(site: Path, write_config: WriteConfig) -> None:
    config = str(write_config(LIGHT_CONFIG))
    load = "acme-toys,acme-fork"
    conflict = "loss 'toy_ppo' is provided by both acme-fork 2.0 and acme-toys 1.0"
    for command in (["check", config], ["run", config]):
        result = run_cli(command, pythonpath=[site], load=load)
        assert result.returncode == 2, result.stderr
        assert result.stderr.splitlines()[:3] == [
            "error: conflicting plugins:",
            "  - sampler 'toy_sde' is provided by both acme-fork 2.0 (alias of 'other_sde') and acme-toys 1.0",
            f"  - {conflict}",
        ]
        assert "Traceback" not in result.stderr

    listing = run_cli(["plugins", "--json"], pythonpath=[site], load=load)
    assert listing.returncode == 0, listing.stderr
    rows = {row["distribution"]: row for row in json.loads(listing.stdout)}
    assert rows["acme-toys"]["status"] == rows["acme-fork"]["status"] == "active"
    assert {"kind": "loss", "name": "toy_ppo", "summary": "another toy loss"} in rows["acme-fork"]["components"]

    table = run_cli(["plugins", "--components"], pythonpath=[site], load=load)
    assert table.returncode == 0, table.stderr
    assert "toy_ppo (conflict)" in table.stdout
    assert f"  - {conflict}" in table.stdout


def test_a_broken_plugin_is_listed_with_its_error_and_the_others_work(site: Path, write_config: WriteConfig) -> None:
    load = "acme-toys,acme-broken"
    listing = run_cli(["plugins", "--json"], pythonpath=[site], load=load)
    assert listing.returncode == 0, listing.stderr
    rows = {row["distribution"]: row for row in json.loads(listing.stdout)}
    assert rows["acme-broken"] == {
        "distribution": "acme-broken",
        "version": "0.1",
        "entry_point": "broken = acme_broken.hooks",
        "status": "error",
        "error": "ModuleNotFoundError: No module named 'omni_rl_missing_dependency'",
        "components": [],
    }
    assert rows["acme-toys"]["status"] == "active"

    check = run_cli(["check", str(write_config(with_prompts(LIGHT_CONFIG, site)))], pythonpath=[site], load=load)
    assert check.returncode == 0, check.stderr
    assert check.stderr.splitlines() == [
        "warning: plugin acme-broken 0.1 (broken = acme_broken.hooks) failed to load: "
        "ModuleNotFoundError: No module named 'omni_rl_missing_dependency'"
    ]


def test_plugin_errors_are_full_lines_under_the_table_at_80_columns(site: Path) -> None:
    result = run_cli(["plugins"], pythonpath=[site], load="acme-toys,acme-broken", env={"COLUMNS": "80"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any(line.split()[:3] == ["acme-broken", "0.1", "error"] for line in lines), result.stdout
    start = lines.index("plugins that failed to load (the others work):")
    assert lines[start + 1 :] == [
        "  - acme-broken 0.1 (broken = acme_broken.hooks): ModuleNotFoundError: No module named "
        "'omni_rl_missing_dependency'"
    ]
    assert all(len(line) <= 80 for line in lines[:start]), "the table fits the terminal"


def test_a_kind_nobody_provides_says_what_to_install(site: Path, write_config: WriteConfig) -> None:
    text = '[algorithm]\nname = "flow_grpo"\n\n[model]\nname = "sd3"\n\n[[reward]]\nname = "toy_brightness"\n'
    result = run_cli(["check", str(write_config(text))], pythonpath=[site], load="acme-fork")
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert (
        "  - unknown algorithm 'flow_grpo': no installed plugin provides an algorithm (install a plugin that "
        "provides one, e.g. pip install omni-rl-flow-grpo) @ $.algorithm.name"
    ) in lines
    assert (
        "  - unknown model 'sd3': no installed plugin provides a model (install a plugin that provides one, "
        "e.g. pip install omni-rl-sd3) @ $.model.name"
    ) in lines
    assert "Traceback" not in result.stderr


def test_an_unknown_component_mentions_the_broken_plugin(site: Path, write_config: WriteConfig) -> None:
    text = LIGHT_CONFIG.replace('name = "toy"', 'name = "acme.big_model"')
    result = run_cli(["check", str(write_config(text))], pythonpath=[site], load="acme-toys,acme-broken")
    assert result.returncode == 2
    assert (
        "  - unknown model 'acme.big_model'; available: toy; plugins that failed to load: acme-broken 0.1 "
        "(ModuleNotFoundError: No module named 'omni_rl_missing_dependency') @ $.model.name"
    ) in result.stderr.splitlines()


def test_a_config_with_problems_in_three_sections_exits_2_listing_all(site: Path, write_config: WriteConfig) -> None:
    text = LIGHT_CONFIG.replace("steps = 3", "steps = -3").replace("size = 8", "size = 8, colour = 1")
    text += '\n[optim]\nlr = "fast"\n'
    path = write_config(text)
    result = run_cli(["run", str(path)], pythonpath=[site], load="acme-toys")
    assert result.returncode == 2
    assert result.stderr.splitlines()[:4] == [
        f"error: invalid config {path} (3 problems):",
        "  - invalid value: steps must be an integer between 1 and 10,000,000, got -3 @ $.run.steps",
        "  - unknown key 'colour' @ $.model.options",
        "  - invalid value for type, expected float @ $.optim.lr",
    ]
    assert "Traceback" not in result.stderr


def test_a_toml_syntax_error_exits_2_showing_the_line(site: Path, write_config: WriteConfig) -> None:
    path = write_config("[run]\nsteps = = 3\n")
    result = run_cli(["check", str(path)], pythonpath=[site], load="acme-toys")
    assert result.returncode == 2
    assert result.stderr.splitlines()[:3] == [
        f"error: {path}:2:9: invalid TOML: Invalid value",
        "  2 | steps = = 3",
        "    |         ^",
    ]


def test_no_color_is_honoured(site: Path, write_config: WriteConfig) -> None:
    path = str(write_config("[run\n"))
    colored = run_cli(["check", path], pythonpath=[site], load="acme-toys", env={"FORCE_COLOR": "1", "NO_COLOR": ""})
    assert "\x1b[1;31merror: \x1b[0m" in colored.stderr
    plain = run_cli(["check", path], pythonpath=[site], load="acme-toys", env={"FORCE_COLOR": "1", "NO_COLOR": "1"})
    assert plain.returncode == colored.returncode == 2
    assert not re.search(r"\x1b\[[0-9;]*3[0-9]m", plain.stderr), plain.stderr
