"""The tiny Wan motion model's architecture for :mod:`pretrain` (``--arch wan``): a WanPipeline of short clips.

The pipeline is :func:`omni_rl_wan.tiny.build_tiny_wan_pipeline`'s (UMT5 text encoder and T5 tokenizer built
offline, shift-3 flow-matching scheduler) with its transformer and VAE resized for 32 px clips on one CPU core:

- an ``AutoencoderKLWan`` with 2x spatial and no temporal compression (the image models' VAE ratio), started from
  the shipped Qwen-Image shapes model's VAE: ``AutoencoderKLQwenImage`` is Wan 2.1's VAE module for module, and
  that one already reconstructs shapes scenes (val 1.0). Its past-frame taps (the first two of every causal
  3-frame kernel, never trained on still images) are zeroed, so it codes each frame on its own and reconstructs
  clips as well as images without a VAE stage. Training a Wan VAE on clips from random weights is what does not fit
  one core: measured, 400-500 steps (10-14 minutes) of a 4x spatial (4x or no temporal) one reconstruct val clips
  that the verifier scores 0.17-0.33. The real model's 8x / 4x is what a 14B model on 480p needs; at 32 px it
  leaves a 4x4 latent per frame;
- a ``WanTransformer3DModel`` with Wan's own (1, 2, 2) patches: a 5-frame clip's 5 latent frames of 16x16 are
  5 x 64 = 320 video tokens of 4x4 px. The clips travel 0.4-0.55 of the side (:data:`TRAVEL`), 3.2-4.4 px a frame:
  about one token, the offset relative attention copies across. Measured: (1, 4, 4) patches (80 tokens of 8x8 px,
  4x cheaper a step) still drew every object in one place after 1200-3100 steps, at either travel.

Motion is decided at the highest noise levels: a Wan transformer knows where a token sits in time only through
3-D RoPE, which is relative, and this VAE codes each frame alone, so from i.i.d. noise the one absolute-time cue
is where the sequence ends. Measured on a 882-step clean model: sampled from pure noise its clips stand still
(motion 0.145), but started from val clips noised to sigma 0.86 it moves every object the asked way (motion
1.000). ``--logit-mean 1.5`` (most training noise levels above 0.86) teaches the axis from noise, but not the way
along it: the model then reads the way off the noise (reversing the noise's frames turns its clips around). A token
of two frames holds their order in its channels, so a continued stage re-patches the transformer to (2, 2, 2)
(:func:`inflate_patch`, ``--patch 2 2 2 --frames 6``: 192 tokens of 6-frame clips) and, at ``--logit-mean 2.0``,
learns the way too (val motion 0.47 to 0.87; the plugin README has the stages).

The handle is omni-rl's ``wan`` model (full fine-tuning, float32, CPU), so pretraining encodes prompts, predicts
velocities and samples val clips through the code RL runs.

Latents are standardised per channel (``latents_mean`` / ``latents_std`` in the VAE config, as the real Wan VAE
ships them); val clips are scored by the ``shapes_motion`` verifier.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from omni_rl_shapes.evaluate import SamplingSettings, sample_model, save_grid
from omni_rl_shapes.pretraining.vae import to_tensor
from omni_rl_shapes.pretraining.world import MotionWorld

#: frames per clip: the verifier needs a few (each step moves the object 0.1-0.14 of the side, under its
#: max_jump of 0.15); 5 = 1 + 4k also fits the real Wan VAE's temporal compression
FRAMES = 5
#: the transformer's (frames, height, width) patch (``--patch``): Wan's own
PATCH = (1, 2, 2)
#: the range a training clip's travel is drawn from (``--travel``, fractions of the side): about one 4 px token
#: a frame with :data:`PATCH`
TRAVEL = (0.4, 0.55)
#: ``AutoencoderKLWan.encode`` reads a clip's first frame, then this many frames at a time
WAN_VAE_CHUNK = 4
#: the RL example's text length; the pretraining saw this many UMT5 tokens per prompt
MAX_SEQUENCE_LENGTH = 32


@attrs.frozen(kw_only=True)
class WanVaeShape:
    """``AutoencoderKLWan`` arguments of the motion model's VAE: one downsampling stage, spatial only; the shipped
    Qwen-Image VAE's shape, so its weights load (:func:`image_vae_weights`)."""

    base_dim: int = 16
    dim_mult: tuple[int, ...] = (1, 2)
    num_res_blocks: int = 1
    temperal_downsample: tuple[bool, ...] = (False,)

    @property
    def spatial(self) -> int:
        return 2 ** len(self.temperal_downsample)

    @property
    def temporal(self) -> int:
        return 2 ** sum(self.temperal_downsample)


def wan_motion_shape() -> Any:
    """4 Wan blocks of width 128 (4 heads x 32: RoPE splits each head 12 / 10 / 10 over frame, height, width),
    FFN 512, and a 2-layer UMT5 of width 32: ~1.2M transformer weights, 2.5 MB in float16. Measured with (1, 4, 4)
    patches (256 numbers a token), width 64 (0.35M weights) plateaued near val 0.02 after 1200 steps, with
    blob-shaped objects."""
    from omni_rl_wan.tiny import TinyWanShape

    return TinyWanShape(
        num_layers=4,
        num_attention_heads=4,
        attention_head_dim=32,
        ffn_dim=512,
        latent_channels=16,
        text_hidden_size=32,
        text_layers=2,
        text_heads=4,
    )


def _build_transformer(shape: Any, seed: int, patch: tuple[int, int, int]) -> Any:
    """The tiny builder's transformer with (frames, height, width) patches ``patch`` (same seed rule)."""
    import torch
    from omni_rl_wan.tiny import tiny_transformer

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed * 8 + 0)
        return tiny_transformer(shape, patch_size=patch)


def inflation_problem(before: Sequence[int], patch: Sequence[int]) -> str | None:
    """Why a transformer of patch ``before`` cannot be inflated to ``patch`` (None: it can, or they are equal)."""
    if tuple(patch[1:]) != tuple(before[1:]) or patch[0] % before[0]:
        return f"cannot inflate patch {list(before)} to {list(patch)}: only the frame size grows, by a whole factor"
    return None


def inflate_patch(directory: Path, patch: tuple[int, int, int]) -> tuple[int, int, int]:
    """Re-patch the saved ``WanTransformer3DModel`` in ``directory`` to ``patch`` frames per token, in place (not
    touched when it has that patch already); returns the patch it had.

    Inflation, as I3D inflates 2-D kernels into time: a token of ``p_t`` frames is embedded as the mean of the old
    per-frame embeddings (each frame's kernel slice is the old kernel / ``p_t``) and the output head predicts the
    old token's velocity for each of its frames, so every block, the text path and the time embedding carry over.
    Only time is inflated (the spatial patch stays) and the new size must be a multiple of the old one. Why: with
    one frame a token and a VAE that codes each frame alone, nothing in a token says which way time runs (RoPE is
    relative), so the model reads the way of travel off the noise; a token of two frames holds their order in its
    channels."""
    import torch
    from diffusers import WanTransformer3DModel

    old = WanTransformer3DModel.from_pretrained(directory, torch_dtype=torch.float32)
    before = tuple(old.config.patch_size)
    if (problem := inflation_problem(before, patch)) is not None:
        raise ValueError(problem)
    if tuple(patch) == before:
        return before
    factor = patch[0] // before[0]
    new = WanTransformer3DModel.from_config({**old.config, "patch_size": tuple(patch)})
    state = old.state_dict()
    kernel = state["patch_embedding.weight"]  # (inner, in, t, h, w)
    state["patch_embedding.weight"] = kernel.repeat_interleave(factor, dim=2) / factor
    # proj_out's rows are laid out (p_t, p_h, p_w, C) (the transformer's unpatchify): one copy per new frame
    state["proj_out.weight"] = state["proj_out.weight"].repeat(factor, 1)
    state["proj_out.bias"] = state["proj_out.bias"].repeat(factor)
    new.load_state_dict(state)
    shutil.rmtree(directory)
    new.save_pretrained(directory, safe_serialization=True)
    return before


def image_vae_weights(directory: Path) -> dict[str, Any]:
    """The state dict of an image shapes model's ``AutoencoderKLQwenImage`` with every causal convolution's
    past-frame taps set to 0: loaded into an ``AutoencoderKLWan`` of the same shape, each frame of a clip is then
    encoded and decoded exactly as that image VAE codes a still image (a one-frame input pads the past with
    zeros, which is what it was trained on)."""
    import torch
    from diffusers import AutoencoderKLQwenImage

    image_vae = AutoencoderKLQwenImage.from_pretrained(directory, torch_dtype=torch.float32)
    with torch.no_grad():
        for past in _past_taps(image_vae):
            past.zero_()
    return image_vae.state_dict()


def _past_taps(module: Any) -> list[Any]:
    """The past-frame taps of every causal convolution in ``module`` (views of the weights: (out, in, t - 1, h, w);
    the last tap of a kernel is the current frame)."""
    return [
        m.weight[:, :, :-1]
        for m in module.modules()
        if type(m).__name__.endswith("CausalConv3d")
        and getattr(m, "weight", None) is not None
        and m.weight.shape[2] > 1
    ]


def codes_frames_alone(vae: Any) -> bool:
    """Whether the VAE's encoder reads no past frame (every past-frame tap 0, as :func:`image_vae_weights` makes
    them), so encoding a clip frame by frame equals encoding it whole."""
    return all(not bool(past.any()) for past in _past_taps(vae.encoder))


def _build_vae(shape: WanVaeShape, latent_channels: int, seed: int, init: Path | None = None) -> Any:
    """A Wan VAE of ``shape``: random (seeded), or with ``init`` the per-frame weights of that image VAE."""
    import torch
    from diffusers import AutoencoderKLWan

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed * 8 + 1)  # the tiny builder's VAE seed
        vae = AutoencoderKLWan(
            base_dim=shape.base_dim,
            z_dim=latent_channels,
            dim_mult=list(shape.dim_mult),
            num_res_blocks=shape.num_res_blocks,
            temperal_downsample=list(shape.temperal_downsample),
            latents_mean=[0.0] * latent_channels,
            latents_std=[1.0] * latent_channels,
            scale_factor_spatial=shape.spatial,
            scale_factor_temporal=shape.temporal,
        ).eval()
    if init is not None:
        vae.load_state_dict(image_vae_weights(init))
    return vae


@attrs.frozen
class WanArchitecture:
    """``WanPipeline`` layout, 32 px 5-frame clips of the motion world; the handle is omni-rl's ``WanModel``."""

    shape: Any = attrs.field(factory=wan_motion_shape)
    vae_shape: WanVaeShape = WanVaeShape()
    #: the image VAE the motion VAE starts from (None: random, trained by the VAE stage)
    vae_init: str | None = "qwen_image"
    image_size: int = 32
    world: MotionWorld = attrs.field(factory=lambda: MotionWorld(frames=FRAMES, travel=TRAVEL))
    #: the transformer's (frames, height, width) patch (``--patch``)
    patch: tuple[int, int, int] = PATCH
    name: str = "wan"
    pipeline_class: str = "WanPipeline"

    def sampling_overrides(self) -> dict[str, Any]:
        """10 Euler steps with true CFG 4.5 against the empty prompt (WanPipeline's default negative), as the
        defaults; 5-frame clips, 8 per val prompt (12 val prompts: 96 clips)."""
        return {"images_per_prompt": 8, "num_frames": self.world.frames, "max_sequence_length": MAX_SEQUENCE_LENGTH}

    def shape_record(self) -> dict[str, Any]:
        return attrs.asdict(self.shape) | {
            "vae": attrs.asdict(self.vae_shape),
            "patch_size": list(self.patch),
            "travel": list(self.world.travel),
            "vae_init": None if self.vae_init is None else f"package:omni_rl_shapes:{self.vae_init} vae, past taps 0",
            "num_frames": self.world.frames,
        }

    def build(self, directory: Path, seed: int) -> Path:
        """The tiny builder's pipeline with its transformer and VAE replaced by :attr:`patch`-patch and
        :class:`WanVaeShape` ones."""
        from omni_rl_pipelines.tiny import TINY_MARKER
        from omni_rl_wan.tiny import build_tiny_wan_pipeline

        built = build_tiny_wan_pipeline(directory, seed=seed, shape=self.shape)
        for name, module in (
            ("transformer", _build_transformer(self.shape, seed, self.patch)),
            ("vae", _build_vae(self.vae_shape, self.shape.latent_channels, seed, self._vae_init_dir())),
        ):
            shutil.rmtree(built / name)
            module.save_pretrained(built / name, safe_serialization=True)
        marker_path = built / TINY_MARKER
        marker = json.loads(marker_path.read_text(encoding="utf-8"))
        marker["vae_shape"] = attrs.asdict(self.vae_shape)
        marker["vae_init"] = self.vae_init
        marker["patch_size"] = list(self.patch)
        marker_path.write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
        return built

    def inflate(self, directory: Path, patch: tuple[int, int, int]) -> None:
        """A continued run's ``--patch``: :func:`inflate_patch` on the pipeline's transformer (a no-op when it has
        that patch already), with the builder's marker updated."""
        from omni_rl_pipelines.tiny import TINY_MARKER

        if inflate_patch(directory / "transformer", patch) == tuple(patch):
            return
        marker_path = directory / TINY_MARKER
        if marker_path.is_file():
            marker = json.loads(marker_path.read_text(encoding="utf-8"))
            marker["patch_size"] = list(patch)
            marker_path.write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")

    def _vae_init_dir(self) -> Path | None:
        from omni_rl_shapes import pretrained_path

        return None if self.vae_init is None else pretrained_path(self.vae_init) / "vae"

    def load(self, directory: Path, sampling: SamplingSettings) -> Any:
        """The ``wan`` model built by name from the registry, as a run's config builds it."""
        import omni_rl
        from omni_rl.context import BuildContext

        options = {"path": str(directory), "lora_rank": 0, "max_sequence_length": sampling.max_sequence_length}
        return omni_rl.build("model", "wan", options, BuildContext(device="cpu"))

    def vae(self, handle: Any) -> Any:
        """The video VAE itself: it takes (B, 3, F, H, W) clips, which :func:`.vae.to_tensor` makes."""
        return handle.vae

    def calibrate(self, handle: Any, clips: np.ndarray) -> dict[str, Any]:
        """Per-channel ``latents_mean`` / ``latents_std`` of the posterior means of ``clips``."""
        z = encode_frames(handle.vae, clips)
        mean = z.mean(dim=(0, 2, 3, 4)).tolist()
        std = z.std(dim=(0, 2, 3, 4)).tolist()
        handle.vae.register_to_config(latents_mean=mean, latents_std=std)
        return {"latents_mean": mean, "latents_std": std}

    def encode_images(self, handle: Any, clips: np.ndarray, batch_size: int = 32) -> Any:
        """Model-space latents (N, C, F', h, w): posterior means standardised as :meth:`WanModel.decode` undoes."""
        import torch

        config = handle.vae.config
        mean = torch.tensor(config.latents_mean).view(1, -1, 1, 1, 1)
        std = torch.tensor(config.latents_std).view(1, -1, 1, 1, 1)
        parts = [
            encode_frames(handle.vae, clips[start : start + batch_size]) for start in range(0, len(clips), batch_size)
        ]
        return (torch.cat(parts) - mean) / std

    def transformer(self, handle: Any) -> Any:
        return handle.transformer

    def velocity(self, handle: Any, prompts: Sequence[str], sampling: SamplingSettings) -> Any:
        """Rows: the prompts, then the negative prompt (""), through the model's UMT5 encoder; the prediction is
        the model's ``predict_velocity`` without CFG, the call RL's loss makes."""
        from omni_rl_wan.prompts import POSITIVE

        from omni_rl.batch import Conditioning

        embeds = handle.prompts.encode([*prompts, handle.config.negative_prompt])

        def velocity(x_t: Any, sigma: Any, ids: Any) -> Any:
            return handle.predict_velocity(x_t, sigma, Conditioning({POSITIVE: embeds[ids]}), 1.0)

        return velocity

    def shift(self, handle: Any) -> float:
        """Wan's constant flow shift (3), the scheduler's."""
        return float(handle.pipeline.scheduler.config.shift)

    def val_reward(
        self, handle: Any, prompts: Sequence[str], sampling: SamplingSettings, grid_path: Path | None
    ) -> dict[str, float]:
        return clip_val_reward(handle, prompts, sampling, grid_path=grid_path)


def encode_frames(vae: Any, clips: np.ndarray) -> Any:
    """Posterior means (N, C, F', h, w), on the CPU where pretraining keeps its data, of uint8 clips (N, F, H, W, 3).

    ``AutoencoderKLWan.encode`` reads a clip as its first frame, then chunks of :data:`WAN_VAE_CHUNK` frames, and
    drops what is left over (6 frames come back as 5 latent frames). Clips of 1 + 4k frames are encoded whole;
    others frame by frame, which is the same thing for a VAE that codes each frame alone (its past-frame taps 0,
    :func:`image_vae_weights`) and is refused with a ValueError for one that does not."""
    import torch

    n, frames = clips.shape[:2]
    device = next(vae.parameters()).device
    with torch.no_grad():
        if (frames - 1) % WAN_VAE_CHUNK == 0:
            return vae.encode(to_tensor(clips).to(device)).latent_dist.mean.cpu()
        if not codes_frames_alone(vae):
            raise ValueError(
                f"clips of {frames} frames: this VAE reads past frames, so it encodes whole clips only, and "
                f"AutoencoderKLWan takes 1 + {WAN_VAE_CHUNK}k frames; use such a clip length"
            )
        single = to_tensor(clips.reshape(n * frames, 1, *clips.shape[2:])).to(device)
        z = vae.encode(single).latent_dist.mean.cpu()  # (N * F, C, 1, h, w)
    return z.squeeze(2).unflatten(0, (n, frames)).transpose(1, 2)


def clip_val_reward(
    model: Any, prompts: Sequence[str], settings: SamplingSettings, grid_path: str | Path | None = None
) -> dict[str, float]:
    """Mean ``shapes_motion`` reward and sub-scores of clips sampled from an omni-rl video model; with
    ``grid_path`` also a PNG, one clip per cell with its frames side by side."""
    from omni_rl_shapes.motion.reward import ShapesMotionReward

    clip_prompts, clips = sample_model(model, prompts, settings)
    result = ShapesMotionReward()(clips, clip_prompts)
    if grid_path is not None:
        n, frames, height, width, _ = clips.shape
        strips = clips.transpose(0, 2, 1, 3, 4).reshape(n, height, frames * width, 3)
        save_grid(strips, columns=4, path=grid_path)
    return {"score": float(result.scores.mean())} | {k: float(v.mean()) for k, v in result.details.items()}
