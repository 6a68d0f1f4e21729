"""TOML reading (syntax errors located and shown) and ``--set`` overrides (typed like the file)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from omni_rl.config import apply_overrides, parse_override, parse_toml, parse_value
from omni_rl.errors import ConfigError


def test_syntax_error_shows_file_line_column_and_the_line(write_config: Callable[..., Path]) -> None:
    path = write_config('[run]\nsteps = 3\n\n[loss]\nname = "x"\nclip_ratio 1e-4\n')
    with pytest.raises(ConfigError) as caught:
        parse_toml(path)
    assert caught.value.message == (
        f"{path}:6:12: invalid TOML: Expected '=' after a key in a key/value pair\n"
        "  6 | clip_ratio 1e-4\n"
        "    |            ^"
    )
    assert caught.value.exit_code == 2


def test_syntax_error_in_a_value(write_config: Callable[..., Path]) -> None:
    path = write_config("[optim]\nlr = 1e-\n")
    with pytest.raises(ConfigError, match=r":2:\d+: invalid TOML: ") as caught:
        parse_toml(path)
    assert "  2 | lr = 1e-\n" in caught.value.message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"config file not found: .*nope\.toml"):
        parse_toml(tmp_path / "nope.toml")


def test_a_directory_is_not_a_config(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config path is not a file"):
        parse_toml(tmp_path)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1e-4", 1e-4),
        ("3", 3),
        ("true", True),
        ("[1, 2]", [1, 2]),
        ('"007"', "007"),
        ("{ a = 1 }", {"a": 1}),
        ("/data/sd3", "/data/sd3"),
        ("flow_grpo", "flow_grpo"),
        ("acme.my_loss", "acme.my_loss"),
        ("", ""),
        ("1\nother = 2", "1\nother = 2"),
    ],
)
def test_override_values_are_toml_values_or_bare_strings(text: str, value: Any) -> None:
    assert parse_value(text) == value


def test_overrides_set_nested_keys_and_index_arrays() -> None:
    raw = {"loss": {"name": "x"}, "reward": [{"name": "a"}, {"name": "b"}]}
    result = apply_overrides(
        raw,
        [
            "loss.options.clip_ratio=1e-3",
            "reward.1.weight=2",
            "reward.2.name=c",
            "optim.lr=3e-4",
            'model.options."odd.key"=1',
        ],
    )
    assert result == {
        "loss": {"name": "x", "options": {"clip_ratio": 1e-3}},
        "reward": [{"name": "a"}, {"name": "b", "weight": 2}, {"name": "c"}],
        "optim": {"lr": 3e-4},
        "model": {"options": {"odd.key": 1}},
    }
    assert raw == {"loss": {"name": "x"}, "reward": [{"name": "a"}, {"name": "b"}]}, "the input is not changed"


def test_malformed_overrides_are_all_reported() -> None:
    raw = {"run": {"steps": 3}, "reward": [{"name": "a"}]}
    with pytest.raises(ConfigError) as caught:
        apply_overrides(raw, ["run", "run.steps.x=1", "reward.weight=2", "reward.5.weight=2", "a..b=1"])
    assert caught.value.message.splitlines() == [
        "--set 'run': expected section.key=value",
        "--set 'run.steps.x=1': run.steps is an integer, not a table",
        "--set 'reward.weight=2': reward is an array; index it with a number (reward.0.weight)",
        "--set 'reward.5.weight=2': reward.5 is out of range (1 entry; 1 appends one)",
        "--set 'a..b=1': 'a..b' is not a TOML key",
    ]


def test_an_out_of_range_index_counts_the_entries_in_plural() -> None:
    raw = {"reward": [{"name": "a"}, {"name": "b"}]}
    with pytest.raises(ConfigError) as caught:
        apply_overrides(raw, ["reward.3.weight=2"])
    assert caught.value.message == "--set 'reward.3.weight=2': reward.3 is out of range (2 entries; 2 appends one)"


def test_parse_override_keeps_the_text() -> None:
    override = parse_override("reward.0.weight = 2.5")
    assert (override.keys, override.value) == (("reward", "0", "weight"), 2.5)
