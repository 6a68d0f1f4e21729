"""The old and EMA adapters: creation, refresh at each step, the EMA decay schedule, and its errors."""

from __future__ import annotations

import json

import pytest
from awm_toys import FakeAdapters
from omni_rl_awm.anchors import PolicyAnchors, ema_decay
from omni_rl_awm.config import AWMLossConfig

from omni_rl.errors import RuntimeFailure


def test_decay_schedules_by_hand() -> None:
    linear = AWMLossConfig(ema_decay=0.3, ema_decay_schedule="linear", ema_decay_ramp=0.001)
    assert [ema_decay(linear, n) for n in (0, 1, 150, 300, 1000)] == pytest.approx([0.0, 0.001, 0.15, 0.3, 0.3])
    constant = AWMLossConfig(ema_decay=0.9, ema_decay_schedule="constant")
    assert ema_decay(constant, 0) == ema_decay(constant, 500) == 0.9


def test_setup_adds_copies_of_the_trained_adapter() -> None:
    model = FakeAdapters(trained=2.0)
    PolicyAnchors(AWMLossConfig()).setup(model)
    assert model.log == [("add", "old", "default")]
    model = FakeAdapters(trained=2.0)
    PolicyAnchors(AWMLossConfig(ema_coef=1.0)).setup(model)
    assert model.log == [("add", "old", "default"), ("add", "ema", "default")]
    assert model.weights == {"default": 2.0, "old": 2.0, "ema": 2.0}


def test_old_is_refreshed_each_step_and_ema_trails_once_per_step() -> None:
    """ema ← d·ema + (1 − d)·θ with d = min(0.3, 0.1 · completed steps), as blends at each step's start."""
    anchors = PolicyAnchors(AWMLossConfig(ema_coef=1.0, ema_decay=0.3, ema_decay_ramp=0.1))
    model = FakeAdapters(trained=0.0)
    anchors.setup(model)

    anchors.before_update(model, 1)  # first update of the process: ema ← θ (a no-op on a fresh run)
    assert anchors.old_is_current and model.weights["ema"] == 0.0
    model.weights["default"] = 1.0  # the step's optimizer step
    anchors.after_optimizer_step(model, 1)
    assert not anchors.old_is_current
    assert model.weights["old"] == 0.0  # still the rollout policy of step 1

    anchors.before_update(model, 2)  # 1 completed step: d = 0.1
    assert model.weights["old"] == 1.0 and anchors.old_is_current
    assert model.weights["ema"] == pytest.approx(0.1 * 0.0 + 0.9 * 1.0)
    anchors.before_update(model, 2)  # a repeated call for the same step does not blend twice
    assert model.weights["ema"] == pytest.approx(0.9)

    model.weights["default"] = 3.0
    anchors.before_update(model, 3)  # 2 completed steps: d = 0.2
    assert model.weights["ema"] == pytest.approx(0.2 * 0.9 + 0.8 * 3.0)
    model.weights["default"] = 5.0
    anchors.before_update(model, 4)  # d = min(0.3, 0.3)
    assert model.weights["ema"] == pytest.approx(0.3 * (0.2 * 0.9 + 0.8 * 3.0) + 0.7 * 5.0)


def test_a_resumed_process_goes_on_blending_the_checkpointed_anchor() -> None:
    """The checkpoint holds the ema adapter's weights (the core) and the step of its last blend (this hook)."""
    config = AWMLossConfig(ema_coef=1.0, ema_decay=0.3, ema_decay_ramp=0.1)
    anchors = PolicyAnchors(config)
    model = FakeAdapters(trained=0.0)
    anchors.setup(model)
    for step, trained in ((1, 1.0), (2, 3.0)):
        anchors.before_update(model, step)
        model.weights["default"] = trained
    state = json.loads(json.dumps(anchors.checkpoint_state()))  # what the worker writes and reads
    assert state == {"ema_step": 2}

    resumed = PolicyAnchors(config)
    new_model = FakeAdapters(trained=0.0)
    resumed.setup(new_model)
    new_model.weights.update(default=3.0, ema=model.weights["ema"])  # the core restores the adapters
    resumed.load_checkpoint_state(state)
    anchors.before_update(model, 3)
    resumed.before_update(new_model, 3)
    assert new_model.weights == pytest.approx(model.weights)
    assert new_model.weights["ema"] == pytest.approx(0.2 * 0.9 + 0.8 * 3.0)


def test_a_resumed_process_restarts_the_anchor_from_the_resumed_policy() -> None:
    """A checkpoint of a version that did not save the anchor: it restarts from the resumed policy."""
    anchors = PolicyAnchors(AWMLossConfig(ema_coef=1.0))
    model = FakeAdapters(trained=0.0)
    anchors.setup(model)  # before the checkpoint is loaded: ema is the initial LoRA
    model.weights["default"] = 4.0  # the checkpoint's weights
    anchors.before_update(model, 51)
    assert model.weights["ema"] == 4.0 and model.weights["old"] == 4.0


def test_no_ema_adapter_without_the_ema_term() -> None:
    anchors = PolicyAnchors(AWMLossConfig(ema_coef=0.0))
    model = FakeAdapters()
    anchors.setup(model)
    anchors.before_update(model, 1)
    assert "ema" not in model.weights
    assert [entry[1] for entry in model.log] == ["old", "old"]


def test_a_model_without_named_adapters_is_a_clear_error() -> None:
    with pytest.raises(RuntimeFailure, match="named LoRA adapters") as info:
        PolicyAnchors(AWMLossConfig()).setup(object())
    assert "lora_rank" in (info.value.hint or "")
