"""Pieces of the pretraining recipe that can be checked by hand: the sigma distribution and the stop rule."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from omni_rl_shapes.evaluate import RECORD_FILE
from omni_rl_shapes.pretraining.pretrain import _guidance, _init_record, choose_checkpoint, parse_args


def test_sigmas_follow_sd3s_shifted_logit_normal() -> None:
    torch = pytest.importorskip("torch")
    from omni_rl_shapes.pretraining.flow_matching import FlowTraining, sample_sigmas

    sigmas = sample_sigmas(200_000, FlowTraining(), 3.0, torch.Generator().manual_seed(0))
    assert ((sigmas > 0) & (sigmas < 1)).all()
    # t = sigmoid(N(0, 1)) has median 0.5; shift 3 maps it to 3 * 0.5 / (1 + 2 * 0.5) = 0.75
    assert float(sigmas.median()) == pytest.approx(0.75, abs=0.005)
    # and u = 1 (the 84th percentile) to t = sigmoid(1) = 0.7311, sigma = 3t / (1 + 2t) = 0.8907
    assert float(sigmas.quantile(0.8413)) == pytest.approx(0.8907, abs=0.005)


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ([], None),
        ([0.0, 0.1, 0.2], None),  # below the band: train on
        ([0.1, 0.4], 1),  # first score in the band
        ([0.1, 0.31, 0.57], 2),  # jumped past 0.55 but inside the required band: closest to 0.45 wins
        ([0.1, 0.33, 0.7], 1),  # jumped past the required band: fall back to the closest inside it
        ([0.1, 0.2, 0.9], 1),  # nothing inside: closest to the middle overall
        ([0.7], None),  # above the band from the start (a stray-object stage): train on while it falls
        ([0.7, 0.62], None),
        ([0.7, 0.62, 0.5], 2),  # fell into the band
        ([0.7, 0.58, 0.2], 1),  # fell past it: closest to 0.45 inside the required band
    ],
)
def test_stop_rule(scores: list[float], expected: int | None) -> None:
    assert choose_checkpoint(scores, 0.35, 0.55) == expected


def test_bad_stray_rate_and_init_dir_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:

    with pytest.raises(SystemExit) as exit_info:
        parse_args(["--stray-rate", "1.5"])
    assert exit_info.value.code == 2
    assert "--stray-rate must be between 0 and 1, got 1.5" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args(["--init-from", str(tmp_path)])
    assert f"--init-from {tmp_path} is not a pipeline directory (no model_index.json)" in capsys.readouterr().err
    assert parse_args(["--stray-rate", "0.4"]).stray_rate == 0.4
    with pytest.raises(SystemExit):
        parse_args(["--stray-rate", "1.0", "--strays", "0"])
    assert "--strays must be at least 1, got 0" in capsys.readouterr().err
    assert parse_args(["--stray-rate", "1.0", "--strays", "2"]).strays == 2
    with pytest.raises(SystemExit):
        parse_args(["--guidance-scale", "0.5"])
    assert "--guidance-scale must be at least 1 (1: no guidance), got 0.5" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args(["--guidance-scale", "nan"])
    assert "--guidance-scale must be at least 1" in capsys.readouterr().err
    assert parse_args(["--guidance-scale", "3"]).guidance_scale == 3.0
    assert parse_args([]).guidance_scale is None  # SamplingSettings' default, 4.5


def test_a_continued_run_is_evaluated_at_its_models_guidance_scale(tmp_path: Path) -> None:
    """A stage continued from a model sampled at CFG 2.5 is evaluated (and kept) at 2.5 unless told otherwise."""
    (tmp_path / RECORD_FILE).write_text(json.dumps({"sampling": {"guidance_scale": 2.5}}))
    given, unset = argparse.Namespace(guidance_scale=3.0), argparse.Namespace(guidance_scale=None)
    assert _guidance(unset, _init_record(tmp_path)) == {"guidance_scale": 2.5}
    assert _guidance(given, _init_record(tmp_path)) == {"guidance_scale": 3.0}
    assert _guidance(unset, _init_record(None)) == {}
    (tmp_path / RECORD_FILE).unlink()  # a directory without a record: SamplingSettings' default
    assert _guidance(unset, _init_record(tmp_path)) == {}


def test_learning_rate_warms_up_then_follows_the_cosine_to_zero() -> None:
    from omni_rl_shapes.pretraining.flow_matching import FlowTraining, lr_factor

    constant = FlowTraining(warmup_steps=10)
    assert [lr_factor(s, constant) for s in (0, 4, 9, 500)] == pytest.approx([0.1, 0.5, 1.0, 1.0])
    annealed = FlowTraining(warmup_steps=10, cosine_decay_steps=100)
    # step 4: warmup 0.5 x cos factor (1 + cos(pi 0.04)) / 2 = 0.99606; step 50: halfway; step 100 and on: 0
    assert lr_factor(4, annealed) == pytest.approx(0.5 * 0.996057, rel=1e-5)
    assert lr_factor(50, annealed) == pytest.approx(0.5)
    assert lr_factor(75, annealed) == pytest.approx(0.146447, rel=1e-5)
    assert lr_factor(100, annealed) == 0.0
    assert lr_factor(120, annealed) == 0.0


def test_cosine_decay_flag_spans_the_run() -> None:
    from omni_rl_shapes.pretraining.pretrain import flow_settings

    assert flow_settings(parse_args(["--steps", "1500", "--cosine-decay"])).cosine_decay_steps == 1500
    assert flow_settings(parse_args(["--steps", "1500"])).cosine_decay_steps == 0


def test_a_run_that_ends_on_one_side_of_the_band_keeps_the_closest() -> None:
    from omni_rl_shapes.pretraining.pretrain import closest_to_band

    assert closest_to_band([0.41, 0.52, 0.49], 0.95, 1.0) == 1  # a clean stage aiming past reach: its best
    assert closest_to_band([0.62, 0.61, 0.65], 0.30, 0.36) == 1  # a stray stage still above: its lowest
    # a clean stage that climbs past the required band keeps its best, not the last evaluation inside [0.3, 0.6]
    assert closest_to_band([0.54, 0.66, 0.69, 0.68], 0.95, 1.0) == 2
    # a stage that makes the shipped model still prefers an evaluation inside the required band
    assert closest_to_band([0.54, 0.66, 0.69], 0.0, 1.0) == 0
