"""Rollout correction math (docs/math.md#rollout-correction) against hand-computed values on small tensors."""

from __future__ import annotations

import math

import pytest
import torch

from omni_rl.engine.rollout_correction import correction_weights, diagnostic_sums, merge_diagnostics

# two samples x two window steps; δ = ℓᵒ − ℓʳ = [[ln 1.9, 0], [−ln 4, ln 1.5]]
ROLLOUT = torch.tensor([[0.0, 1.0], [2.0, -1.0]])
DELTA = torch.tensor([[math.log(1.9), 0.0], [-math.log(4.0), math.log(1.5)]])
OLD = ROLLOUT + DELTA


def _weights(rollout=ROLLOUT, old=OLD, **overrides):
    options = dict(
        mode="decoupled",
        is_level="step",
        is_threshold=1.8,
        normalize=False,
        rejection="off",
        band=(0.5, 2.0),
    )
    options.update(overrides)
    return correction_weights(rollout, old, **options)


def test_step_level_is_weights_are_truncated_exp_delta() -> None:
    result = _weights()
    # exp δ = [[1.9, 1], [0.25, 1.5]], truncated at C = 1.8
    assert torch.allclose(result.weights, torch.tensor([[1.8, 1.0], [0.25, 1.5]]))


def test_sample_level_is_weight_is_exp_of_summed_delta_for_every_step() -> None:
    result = _weights(is_level="sample", is_threshold=10.0)
    # sample 0: exp(ln 1.9) = 1.9; sample 1: exp(ln(1.5/4)) = 0.375
    assert torch.allclose(result.weights, torch.tensor([[1.9, 1.9], [0.375, 0.375]]))


def test_batch_normalisation_divides_by_the_mean() -> None:
    result = _weights(normalize=True)
    mean = (1.8 + 1.0 + 0.25 + 1.5) / 4
    assert torch.allclose(result.weights, torch.tensor([[1.8, 1.0], [0.25, 1.5]]) / mean)


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        # exp δ per step [[1.9, 1], [0.25, 1.5]]: only 0.25 lies outside [0.5, 2]
        ("step_k1", [[False, False], [True, False]]),
        # exp(mean δ): sample 0 sqrt(1.9) = 1.38 in, sample 1 sqrt(0.375) = 0.61 in
        ("sample_mean_k1", [[False, False], [False, False]]),
        # any step outside: sample 1
        ("sample_max_k1", [[False, False], [True, True]]),
    ],
)
def test_rejection_masks(rule: str, expected: list[list[bool]]) -> None:
    result = _weights(rejection=rule)
    assert result.rejected.tolist() == expected
    kept = (~torch.tensor(expected)).float()
    assert torch.allclose(result.weights, torch.tensor([[1.8, 1.0], [0.25, 1.5]]) * kept)


def test_sample_mean_band_rejects_the_whole_sample() -> None:
    result = _weights(rejection="sample_mean_k1", band=(0.7, 1.2))
    # sample 0: 1.378 > 1.2 out; sample 1: 0.612 < 0.7 out
    assert result.rejected.all()


def test_bypass_weights_are_only_the_rejection_and_off_is_identity() -> None:
    assert _weights(mode="bypass").weights is None
    assert _weights(mode="off", rejection="step_k1").weights is None
    bypass = _weights(mode="bypass", rejection="step_k1")
    assert bypass.weights.tolist() == [[1.0, 1.0], [0.0, 1.0]]


def test_equal_log_probs_give_weight_one_and_reject_nothing() -> None:
    lp = torch.randn(5, 3)
    for level in ("step", "sample"):
        for rule in ("step_k1", "sample_mean_k1", "sample_max_k1"):
            result = _weights(lp, lp.clone(), is_level=level, is_threshold=2.0, normalize=True, rejection=rule)
            assert torch.equal(result.weights, torch.ones(5, 3))
            assert not result.rejected.any()
    diag = merge_diagnostics([diagnostic_sums(lp, lp.clone(), result)])
    assert diag["rollout_corr/abs_delta_max"] == 0.0 and diag["rollout_corr/kl"] == 0.0
    assert diag["rollout_corr/ess"] == 1.0 and diag["rollout_corr/rejected_sample_fraction"] == 0.0


def test_diagnostics_match_hand_computed_values() -> None:
    result = _weights(rejection="step_k1")
    steps = torch.tensor([[2, 3], [2, 3]])
    diag = merge_diagnostics([diagnostic_sums(ROLLOUT, OLD, result, steps)])
    d = [math.log(1.9), 0.0, -math.log(4.0), math.log(1.5)]
    w = [1.8, 1.0, 0.25, 1.5]
    expected = {
        "abs_delta_mean": sum(abs(x) for x in d) / 4,
        "abs_delta_max": math.log(4.0),
        "kl": -sum(d) / 4,
        "k3": sum(math.exp(x) - 1 - x for x in d) / 4,
        "is_weight_mean": sum(w) / 4,
        "is_weight_max": 1.8,
        "is_weight_min": 0.25,
        "ess": sum(w) ** 2 / (4 * sum(x * x for x in w)),
        "rejected_step_fraction": 0.25,
        "rejected_sample_fraction": 0.5,
        "abs_delta_mean/step_2": (math.log(1.9) + math.log(4.0)) / 2,
        "abs_delta_max/step_2": math.log(4.0),
        "abs_delta_mean/step_3": math.log(1.5) / 2,
        "abs_delta_max/step_3": math.log(1.5),
    }
    for key, value in expected.items():
        assert diag[f"rollout_corr/{key}"] == pytest.approx(value, rel=1e-6), key


def test_merging_two_workers_equals_the_whole_batch() -> None:
    result = _weights(rejection="sample_max_k1")
    whole = merge_diagnostics([diagnostic_sums(ROLLOUT, OLD, result)])
    parts = []
    for rows in ([0], [1]):
        sub = _weights(ROLLOUT[rows], OLD[rows], rejection="sample_max_k1")
        parts.append(diagnostic_sums(ROLLOUT[rows], OLD[rows], sub))
    merged = merge_diagnostics(parts)
    assert merged.keys() == whole.keys()
    for key in whole:
        assert merged[key] == pytest.approx(whole[key], rel=1e-9), key
