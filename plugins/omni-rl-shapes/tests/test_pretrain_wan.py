"""`pretrain --arch wan`: the motion world's data and options, and the recipe end to end on a very small Wan."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from omni_rl_shapes.evaluate import RECORD_FILE, SamplingSettings
from omni_rl_shapes.motion import prompts as motion_prompts
from omni_rl_shapes.motion.render import render_clip
from omni_rl_shapes.motion.verify import verify_clip
from omni_rl_shapes.pretraining import pretrain
from omni_rl_shapes.pretraining.world import MotionWorld


def test_the_shipped_motion_prompts_are_the_split() -> None:
    assert motion_prompts.main(["--check"]) == 0
    train, val = motion_prompts.split()
    assert len(train) == 36 and len(val) == 12 and not set(train) & set(val)
    # every object appears in both: val holds out object-direction pairs, not objects
    objects = {p.split(" moving ")[0] for p in val}
    assert objects == {p.split(" moving ")[0] for p in train}


def test_the_flaw_rate_flaws_that_share_of_clips_and_keeps_their_layout() -> None:
    world = MotionWorld(frames=5)
    prompt = "a red circle moving to the right"
    clean = SimpleNamespace(flaw=None, flaw_rate=0.0)
    always = SimpleNamespace(flaw="reverse", flaw_rate=1.0)
    assert np.array_equal(world.render_train(prompt, 32, 3, clean), render_clip(prompt, 32, 5, 3))
    assert np.array_equal(world.render_train(prompt, 32, 3, always), render_clip(prompt, 32, 5, 3, flaw="reverse"))
    half = SimpleNamespace(flaw="reverse", flaw_rate=0.5)
    motions = [verify_clip(world.render_train(prompt, 32, s, half), prompt).motion for s in range(200)]
    assert 0.4 < np.mean(motions) < 0.6


def test_the_image_vae_codes_every_frame_of_a_clip_as_a_still_image() -> None:
    """The motion VAE starts from the shipped Qwen-Image VAE with its past-frame taps zeroed: a frame's latent is
    the one the image VAE gives that frame alone, and the verifier scores the round trips of val clips 1."""
    pytest.importorskip("omni_rl_wan")
    import torch
    from omni_rl_shapes import pretrained_path
    from omni_rl_shapes.pretraining.vae import from_tensor, to_tensor
    from omni_rl_shapes.pretraining.wan import WanVaeShape, _build_vae

    vae = _build_vae(WanVaeShape(), 16, 0, pretrained_path("qwen_image") / "vae")
    world = MotionWorld(frames=5)
    prompts = world.prompts("val")[:3]
    clips = np.stack([world.render(p, 32, 7_000 + i) for i, p in enumerate(prompts)])
    with torch.no_grad():
        latents = vae.encode(to_tensor(clips)).latent_dist.mean
        alone = vae.encode(to_tensor(clips[:, 3:4])).latent_dist.mean
        decoded = from_tensor(vae.decode(latents).sample)
    assert latents.shape == (3, 16, 5, 16, 16)
    assert torch.allclose(latents[:, :, 3:4], alone, atol=1e-5)
    assert [verify_clip(c, p).score for c, p in zip(decoded, prompts, strict=True)] == [1.0] * 3


def test_motion_and_image_flaw_options_do_not_mix(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        pretrain.parse_args(["--flaw", "reverse", "--flaw-rate", "0.5"])
    assert "--arch wan" in capsys.readouterr().err
    pytest.importorskip("omni_rl_wan")
    with pytest.raises(SystemExit):
        pretrain.parse_args(["--arch", "wan", "--stray-rate", "0.5"])
    with pytest.raises(SystemExit):
        pretrain.parse_args(["--arch", "wan", "--flaw", "reverse", "--flaw-rate", "2"])


@pytest.mark.parametrize("travel", [(0.2, 0.3), (0.4, 0.55)])
def test_a_world_s_clips_travel_a_distance_from_its_range(travel: tuple[float, float]) -> None:
    """The first-to-last travel of rendered clips (read back by the verifier's segmentation) lies in the range."""
    from omni_rl_shapes.segment import components

    world = MotionWorld(frames=5, travel=travel)
    prompt = "a blue square moving down"
    for seed in range(12):
        clip = world.render(prompt, 64, seed)
        found = (components(f, threshold=110.0, min_area=8) for f in (clip[0], clip[-1]))
        first, last = (max(c, key=lambda c: c.area) for c in found)
        (x0, y0), (x1, y1) = first.centre(), last.centre()
        assert abs(x1 - x0) < 1.0
        assert travel[0] - 0.03 <= (y1 - y0) / 64 <= travel[1] + 0.03
        assert verify_clip(clip, prompt).score == 1.0  # every frame right, moving down, no jumps


def test_the_travel_and_patch_options_are_checked(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        pretrain.parse_args(["--travel", "0.3", "0.4"])
    assert "--arch wan" in capsys.readouterr().err
    with pytest.raises(ValueError, match="travel must satisfy"):
        render_clip("a red circle moving up", travel=(0.5, 0.7))
    pytest.importorskip("omni_rl_wan")
    with pytest.raises(SystemExit):
        pretrain.parse_args(["--arch", "wan", "--travel", "0.5", "0.4"])
    assert "LOW <= HIGH <= 0.6" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        pretrain.parse_args(["--arch", "wan", "--patch", "1", "0", "2"])
    args = pretrain.parse_args(["--arch", "wan", "--travel", "0.4", "0.55", "--patch", "1", "2", "2"])
    arch = pretrain.configured(pretrain.architecture("wan"), args)
    assert arch.world.travel == (0.4, 0.55) and arch.patch == (1, 2, 2)
    assert arch.shape_record()["travel"] == [0.4, 0.55] and arch.shape_record()["patch_size"] == [1, 2, 2]


@pytest.mark.slow
def test_a_tiny_wan_run_writes_a_loadable_motion_pipeline(tmp_path: Path) -> None:
    """Two VAE steps and two transformer steps of a 1-layer Wan: the directory, its record and its calibrated VAE."""
    pytest.importorskip("omni_rl_wan")
    import torch
    from omni_rl_shapes.pretraining.wan import WanArchitecture, WanVaeShape
    from omni_rl_wan.tiny import TinyWanShape

    small = TinyWanShape(num_layers=1, num_attention_heads=2, attention_head_dim=12, ffn_dim=32)
    arch = WanArchitecture(shape=small, vae_shape=WanVaeShape(base_dim=4), vae_init=None)  # a random VAE, trained
    out = tmp_path / "stage"
    argv = ["--arch", "wan", "--out", str(out), "--steps", "2", "--vae-steps", "2", "--vae-batch-size", "2"]
    argv += ["--images-per-prompt", "1", "--eval-from", "2", "--eval-every", "2", "--target-low", "0"]
    argv += ["--target-high", "1", "--flaw", "reverse", "--flaw-rate", "0.5", "--travel", "0.4", "0.5"]
    argv += ["--patch", "1", "2", "2", "--guidance-scale", "3"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.setattr(pretrain, "architecture", lambda name: arch)  # configured() applies --travel and --patch
        patch.setattr(pretrain, "SamplingSettings", functools.partial(SamplingSettings, num_inference_steps=2))
        threads = torch.get_num_threads()
        try:
            assert pretrain.main(argv) == 0
        finally:
            torch.set_num_threads(threads)
    record = json.loads((out / RECORD_FILE).read_text())
    assert record["arch"] == "wan" and record["world"] == "motion" and record["flaw_rate"] == 0.5
    assert record["sampling"]["num_frames"] == 5 and 0.0 <= record["val"]["score"] <= 1.0
    assert record["sampling"]["guidance_scale"] == 3.0  # --guidance-scale: the val sampling the model is kept by
    vae = json.loads((out / "vae" / "config.json").read_text())
    assert vae["scale_factor_spatial"] == 2 and vae["scale_factor_temporal"] == 1
    assert vae["latents_std"] == pytest.approx(record["vae"]["latents_std"])
    model = arch.load(out, SamplingSettings(**record["sampling"]))
    assert model.latent_shape(32, 32, 5) == (16, 5, 16, 16)
    assert tuple(model.transformer.config.patch_size) == (1, 2, 2)  # --patch: 320 video tokens per clip
    assert record["model"]["travel"] == [0.4, 0.5] and record["model"]["patch_size"] == [1, 2, 2]


def test_logit_mean_moves_the_noise_level_draw_up() -> None:
    """``--logit-mean`` reaches the trainer's sigma draw: at 1.5 most training noise levels sit above 0.86, the
    level from which a clip's direction of travel is already visible to the motion model."""
    import torch
    from omni_rl_shapes.pretraining.flow_matching import sample_sigmas

    settings = pretrain.flow_settings(pretrain.parse_args(["--logit-mean", "1.5"]))
    assert settings.logit_mean == 1.5
    high = sample_sigmas(20_000, settings, 3.0, torch.Generator().manual_seed(0))
    default = sample_sigmas(
        20_000, pretrain.flow_settings(pretrain.parse_args([])), 3.0, torch.Generator().manual_seed(0)
    )
    assert (high > 0.86).float().mean() > 0.6 > 0.3 > (default > 0.86).float().mean()


def test_a_continued_run_keeps_its_model_s_patch_and_travel(tmp_path: Path) -> None:
    """--init-from: the transformer's patch and the record's travel, unless --travel says otherwise."""
    pytest.importorskip("omni_rl_wan")
    init = tmp_path / "stage"
    (init / "transformer").mkdir(parents=True)
    (init / "model_index.json").write_text(json.dumps({"_class_name": "WanPipeline"}))
    (init / "transformer" / "config.json").write_text(json.dumps({"patch_size": [1, 4, 4]}))
    (init / RECORD_FILE).write_text(json.dumps({"model": {"travel": [0.2, 0.3]}}))

    def arch_for(*extra: str) -> object:
        args = pretrain.parse_args(["--arch", "wan", "--init-from", str(init), *extra])
        return pretrain.configured(pretrain.architecture("wan"), args)

    kept = arch_for()
    assert kept.patch == (1, 4, 4) and kept.world.travel == (0.2, 0.3)
    assert arch_for("--travel", "0.3", "0.4").world.travel == (0.3, 0.4)
    assert kept.world.frames == 5  # the arch's: the record names none


def test_a_continued_run_takes_its_clip_length_and_a_new_patch(tmp_path: Path) -> None:
    """--init-from keeps the record's clip length; --frames and --patch change them, and a clip must be a whole
    number of tokens in time."""
    pytest.importorskip("omni_rl_wan")
    init = tmp_path / "stage"
    (init / "transformer").mkdir(parents=True)
    (init / "model_index.json").write_text(json.dumps({"_class_name": "WanPipeline"}))
    (init / "transformer" / "config.json").write_text(json.dumps({"patch_size": [2, 2, 2]}))
    (init / RECORD_FILE).write_text(json.dumps({"model": {"num_frames": 6}}))

    def arch_for(*extra: str) -> object:
        args = pretrain.parse_args(["--arch", "wan", "--init-from", str(init), *extra])
        return pretrain.configured(pretrain.architecture("wan"), args)

    kept = arch_for()
    assert kept.world.frames == 6 and kept.patch == (2, 2, 2)
    assert kept.sampling_overrides()["num_frames"] == 6 and kept.shape_record()["num_frames"] == 6
    assert arch_for("--frames", "8").world.frames == 8
    with pytest.raises(SystemExit, match="not a whole number of the patch's 2-frame tokens"):
        arch_for("--frames", "5")
    assert arch_for("--frames", "8", "--patch", "4", "2", "2").patch == (4, 2, 2)  # inflated further
    with pytest.raises(SystemExit, match="only the frame size grows"):  # a patch is never shrunk
        arch_for("--frames", "5", "--patch", "1", "2", "2")
    with pytest.raises(SystemExit):
        pretrain.parse_args(["--frames", "6"])  # the image models' clips are one frame
    with pytest.raises(SystemExit):
        pretrain.parse_args(["--arch", "wan", "--frames", "1"])
    with pytest.raises(SystemExit, match="only the frame size grows"):  # said before any weights are read
        arch_for("--patch", "2", "4", "4")
    with pytest.raises(SystemExit, match=r"1 \+ 4k frames"):  # built here: its VAE stage encodes whole clips
        args = pretrain.parse_args(["--arch", "wan", "--patch", "2", "2", "2", "--frames", "6"])
        pretrain.configured(pretrain.architecture("wan"), args)


def test_inflating_the_patch_in_time_keeps_the_model_on_clips_of_repeated_frames(tmp_path: Path) -> None:
    """A (1, 2, 2) transformer inflated to (2, 2, 2) predicts, for a clip whose frames come in equal pairs, the old
    model's velocity of the clip without the repeats, on both frames of each pair; spatial changes are refused."""
    pytest.importorskip("omni_rl_wan")
    import torch
    from diffusers import WanTransformer3DModel
    from omni_rl_shapes.pretraining.wan import inflate_patch

    torch.manual_seed(0)
    old = WanTransformer3DModel(
        patch_size=(1, 2, 2),
        num_attention_heads=2,
        attention_head_dim=12,
        in_channels=4,
        out_channels=4,
        text_dim=8,
        freq_dim=16,
        ffn_dim=32,
        num_layers=1,
        rope_max_seq_len=32,
    )
    for parameter in old.parameters():  # away from the zero-initialised heads, so the check sees every weight
        parameter.data.add_(0.05 * torch.randn_like(parameter))
    old.save_pretrained(tmp_path / "transformer")
    assert inflate_patch(tmp_path / "transformer", (2, 2, 2)) == (1, 2, 2)
    new = WanTransformer3DModel.from_pretrained(tmp_path / "transformer")
    assert tuple(new.config.patch_size) == (2, 2, 2)
    x, t, text = torch.randn(2, 4, 3, 8, 8), torch.tensor([300.0, 900.0]), torch.randn(2, 5, 8)
    with torch.no_grad():
        before = old(x, t, text, return_dict=False)[0]
        after = new(x.repeat_interleave(2, dim=2), t, text, return_dict=False)[0]
    assert after.shape == (2, 4, 6, 8, 8)
    assert torch.allclose(after, before.repeat_interleave(2, dim=2), atol=1e-5)
    assert not torch.allclose(after[:, :, 0], after[:, :, 2], atol=1e-3)
    with pytest.raises(ValueError, match="only the frame size grows"):
        inflate_patch(tmp_path / "transformer", (2, 4, 4))
    with pytest.raises(ValueError, match="only the frame size grows"):
        inflate_patch(tmp_path / "transformer", (3, 2, 2))


def test_frames_are_encoded_alone_so_any_clip_length_keeps_every_frame() -> None:
    """encode_frames equals the VAE's whole-clip encoding where that one takes the clip (1 + 4k frames), and keeps
    all 6 frames of a 6-frame clip, which AutoencoderKLWan.encode cuts to 5."""
    pytest.importorskip("omni_rl_wan")
    import torch
    from omni_rl_shapes import pretrained_path
    from omni_rl_shapes.pretraining.vae import to_tensor
    from omni_rl_shapes.pretraining.wan import WanVaeShape, _build_vae, encode_frames

    vae = _build_vae(WanVaeShape(), 16, 0, pretrained_path("qwen_image") / "vae")
    prompts = MotionWorld().prompts("val")[:2]
    five = np.stack([MotionWorld(frames=5).render(p, 32, i) for i, p in enumerate(prompts)])
    six = np.stack([MotionWorld(frames=6).render(p, 32, i) for i, p in enumerate(prompts)])
    with torch.no_grad():
        whole = vae.encode(to_tensor(five)).latent_dist.mean
        cut = vae.encode(to_tensor(six)).latent_dist.mean
    assert torch.allclose(encode_frames(vae, five), whole, atol=1e-5)
    latents = encode_frames(vae, six)
    assert cut.shape[2] == 5 and latents.shape == (2, 16, 6, 16, 16)
    assert torch.allclose(latents[:, :, :5], cut, atol=1e-5)  # frame by frame: the whole-clip latents
    with torch.no_grad():
        last = vae.encode(to_tensor(six[:, 5:6])).latent_dist.mean
    assert torch.allclose(latents[:, :, 5:6], last, atol=1e-5)
    # a VAE that reads past frames cannot be encoded frame by frame: refused, not silently changed
    with torch.no_grad():
        next(m for m in vae.encoder.modules() if type(m).__name__.endswith("CausalConv3d")).weight[:, :, 0] += 0.01
    with pytest.raises(ValueError, match="reads past frames"):
        encode_frames(vae, six)
