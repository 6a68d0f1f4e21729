"""Wan image-to-video: ``WanImageToVideoPipeline``'s three layouts as omni-rl models, on :class:`WanModel`.

Everything is what ``WanImageToVideoPipeline.__call__`` (diffusers 0.42) does, layout by layout, read from the
loaded pipeline's config (the pipeline's own switches, so no option has to name the layout):

* **Channel concat** (``expand_timesteps`` false; Wan2.1 I2V, Wan2.2 I2V-A14B). The transformer takes
  ``2 z + 4`` channels: [noisy z, mask 4, condition z]. The condition is the first frame resized to the output size
  (``video_processor.preprocess``), followed by ``num_frames - 1`` black frames, VAE-encoded with the posterior's
  mode (``retrieve_latents(..., sample_mode="argmax")``) and normalised with ``latents_mean`` / ``latents_std``; the
  mask is 1 on the 4 frames the first latent frame stands for and 0 elsewhere. Both come from the pipeline's own
  ``prepare_latents``. Where the transformer has ``image_dim`` (Wan2.1) the first frame's CLIP-ViT penultimate
  hidden states (``encode_image``, the image as given, not resized) enter its cross-attention as
  ``encoder_hidden_states_image``, in both CFG halves; Wan2.2 I2V-A14B has no image encoder and routes each step to
  its high- or low-noise expert at ``boundary_ratio`` as :class:`WanModel` does for text-to-video.
* **First-frame replacement** (``expand_timesteps`` true; Wan2.2 TI2V-5B). The first frame alone is VAE-encoded
  (48 channels); at every step the transformer's input has its first latent frame replaced by it, with timestep 0
  on that frame's tokens and t on the others. A row without an image is plain text-to-video.

**When the condition is encoded.** The condition latents depend on the output size, which ``encode_conditions``
is not told (it sees prompts and images only), so ``encode_conditions`` keeps the first frame itself (uint8, with
its size and a content digest) and the CLIP embeddings in the Conditioning, and the VAE encoding happens at the
first transformer call that sees a (first frame, output size) pair, read from the latents' shape. The result is
kept on the device (``condition_cache_size`` pairs, least recently used dropped), so each pair is encoded once per
worker: the rollout's later steps and the update's recomputation reuse the identical tensor (the ratio is 1), and a
worker that did not roll out (disaggregated rollout) recomputes it with the same deterministic encoder (the
posterior's mode, no autocast). Both CFG halves get the same condition.

**TI2V's first frame and the sampler.** The pipeline never keeps the condition in its own latents: it writes it
into the transformer's input at every step and over the final latents before decoding, so the scheduler steps a
first frame nobody reads. A model cannot write into the sampler's latents, so here the velocity on a conditioned
sample's first latent frame is the exact flow velocity of a frame whose clean value is the condition c:
v = (x - c) / sigma. With it the Euler (ODE) steps carry that frame to c exactly at sigma = 0, which is the
pipeline's final replacement, so the ODE rollout reproduces the pipeline's frames; a stochastic step keeps it on
the path (1 - sigma) c + sigma eps (its x0 prediction is c); and it does not depend on the weights, so rollout and
update compute the same value (ratio 1) and it carries no gradient: its terms of the per-sample log-prob (a mean over
every latent element) are constants that cancel in the ratio, which is therefore scored on the other frames
(scaled by (F' - 1) / F'). What this cannot undo is noise added by an SDE step that ends at sigma = 0; keep the SDE
window off the last step (flow_grpo's default) and the final first frame is c.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import torch
from omni_rl_pipelines.pipeline_model import on_device

from omni_rl.batch import Conditioning
from omni_rl.context import BuildContext
from omni_rl.errors import ConfigError, RuntimeFailure
from omni_rl_wan.config import WanI2VConfig
from omni_rl_wan.experts import HIGH_NOISE
from omni_rl_wan.loading import WAN_I2V, WAN_TI2V
from omni_rl_wan.model import WanModel
from omni_rl_wan.prompts import PromptEncoder

#: the Conditioning keys of the first frame: its pixels (uint8 (H, W, 3), right-padded when joined), its (H, W)
#: ((0, 0) for a text-only row of TI2V), its content digest (the condition cache's key) and Wan2.1's CLIP tokens
PIXELS, SIZE, DIGEST, IMAGE_EMBEDS = "condition_pixels", "condition_size", "condition_digest", "image_embeds"
#: the transformer's text length its attention processor assumes when it splits off the image tokens
WAN_TEXT_TOKENS = 512


class I2VPromptEncoder(PromptEncoder):
    """UMT5 embeddings as ``WanImageToVideoPipeline.encode_prompt`` makes them, without the ftfy import it needs.

    The I2V pipeline's ``encode_prompt`` is a copy of ``WanPipeline``'s whose text cleaning calls ``ftfy.fix_text``
    unconditionally (``WanPipeline``'s only when ftfy is installed); ``WanPipeline``'s function on this pipeline's
    tokenizer and UMT5 gives the same embeddings wherever the I2V pipeline runs at all (ftfy installed, or text it
    leaves unchanged), and runs without ftfy too."""

    def _encode_one(self, prompt: str) -> torch.Tensor:
        from diffusers import WanPipeline

        embeds = WanPipeline._get_t5_prompt_embeds(
            self.pipeline, prompt=[prompt], max_sequence_length=self.max_sequence_length, device=self.device
        )
        return embeds[0].detach().cpu()


class WanI2VModel(WanModel):
    """``wan_i2v``: a Wan2.1 I2V or Wan2.2 I2V-A14B pipeline (channel concat), one first frame per prompt."""

    pipeline_kind = WAN_I2V
    prompt_encoder_class = I2VPromptEncoder
    #: (fewest, most) first frames per prompt, as the ``wan_i2v`` spec says
    condition_images: ClassVar[tuple[int, int]] = (1, 1)
    #: the layout this model loads: first-frame replacement (TI2V) or channel concat
    first_frame_layout: ClassVar[bool] = False

    config: WanI2VConfig

    def __init__(self, config: WanI2VConfig, ctx: BuildContext | None = None) -> None:
        super().__init__(config, ctx)
        #: the VAE's latent channels: the noisy part of the transformer's input, and its output
        self.latent_channels = int(self.vae.config.z_dim)
        self._check_layout()
        #: Wan2.1 I2V: the pipeline feeds CLIP image tokens to a transformer with ``image_dim``, and only then
        self.image_encoder: Any = None
        if self.experts[HIGH_NOISE].config.image_dim is not None:
            self.image_encoder = self.pipeline.image_encoder
            self.image_encoder.to("cpu" if config.offload_text_encoders else self.device)
            self.image_encoder.requires_grad_(False).eval()
        self._condition_cache: OrderedDict[tuple[int, ...], torch.Tensor] = OrderedDict()
        #: VAE encodings of condition clips so far (tests check each (frame, size) is encoded once)
        self.condition_encodes = 0

    # -- layout checks ----------------------------------------------------------------------------------------

    def _check_layout(self) -> None:
        """Refuse a pipeline this model's layout cannot run, naming the model that can."""
        z = self.latent_channels
        if bool(self.expand_timesteps) != self.first_frame_layout:
            if self.expand_timesteps:
                raise ConfigError(
                    f"{self.pipeline_path} is a Wan2.2 TI2V pipeline (expand_timesteps = true), which takes the first "
                    "frame in place rather than as channels",
                    hint='set [model] name = "wan_ti2v" for it',
                )
            raise ConfigError(
                f"{self.pipeline_path} has expand_timesteps = false, so it is no Wan2.2 TI2V pipeline",
                hint='use [model] name = "wan_i2v" for Wan2.1 I2V / Wan2.2 I2V-A14B, "wan" for text-to-video',
            )
        temporal = self.vae_scale_factor_temporal
        expected = z if self.first_frame_layout else 2 * z + temporal
        for component, expert in self.experts.items():
            channels = int(expert.config.in_channels)
            if channels != expected:
                layout = "noisy" if self.first_frame_layout else f"[noisy {z}, mask {temporal}, condition {z}]"
                hint = (
                    "a Wan2.2 TI2V transformer takes the VAE's latent channels alone"
                    if self.first_frame_layout
                    else f'a {z}-channel transformer is text-to-video: use [model] name = "wan"'
                )
                raise ConfigError(
                    f"{self.pipeline_path}: its {component} takes {channels} input channels, not the {expected} "
                    f"({layout}) of this image-to-video layout for a {z}-channel VAE",
                    hint=hint,
                )
        image_dim = self.experts[HIGH_NOISE].config.image_dim
        if image_dim is not None:
            if self.pipeline.image_encoder is None or self.pipeline.image_processor is None:
                raise ConfigError(
                    f"{self.pipeline_path}: its transformer takes CLIP image tokens (image_dim = {image_dim}) but the "
                    "pipeline has no image_encoder / image_processor",
                    hint="re-download the full Wan2.1 I2V pipeline (its image_encoder and image_processor folders)",
                )
            if self.config.max_sequence_length != WAN_TEXT_TOKENS:
                raise ConfigError(
                    f"max_sequence_length = {self.config.max_sequence_length} does not fit this Wan2.1 I2V "
                    f"transformer, whose attention splits its image tokens off {WAN_TEXT_TOKENS} text tokens",
                    hint=f"leave max_sequence_length at {WAN_TEXT_TOKENS} (the default)",
                )

    # -- protocol: conditioning -------------------------------------------------------------------------------

    def encode_conditions(
        self, prompts: Sequence[str], images: Sequence[Sequence[np.ndarray]], *, guidance_scale: float
    ) -> Conditioning:
        """``encode_prompts`` plus each prompt's first frame (uint8 (H, W, 3)): its pixels, size and digest, and
        for Wan2.1 its CLIP tokens; the VAE latents follow at the first transformer call (module docstring)."""
        if len(images) != len(prompts):
            raise RuntimeFailure(
                f"encode_conditions got {len(prompts)} prompts but {len(images)} image lists",
                hint="pass one sequence of condition images per prompt",
            )
        text = self.encode_prompts(prompts, guidance_scale=guidance_scale)
        frames = Conditioning.concat([Conditioning(self._first_frame(list(sources))) for sources in images])
        return Conditioning({**text.tensors, **frames.tensors})

    def _first_frame(self, sources: list[np.ndarray]) -> dict[str, torch.Tensor]:
        fewest, most = self.condition_images
        if not fewest <= len(sources) <= most:
            wanted = str(most) if fewest == most else f"{fewest} to {most}"
            raise RuntimeFailure(
                f"the {self.pipeline_kind.model_name} model takes {wanted} first frame(s) per prompt, got "
                f"{len(sources)}",
                hint='give each prompt row its first frame in the "image" field',
            )
        if not sources:  # TI2V's text-to-video row: no frame, marked by size (0, 0)
            return {
                PIXELS: torch.zeros((1, 1, 1, 3), dtype=torch.uint8),
                SIZE: torch.zeros((1, 2), dtype=torch.long),
                DIGEST: torch.zeros((1, 2), dtype=torch.long),
            }
        image = np.ascontiguousarray(sources[0])
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[-1] != 3:
            raise RuntimeFailure(
                f"a first frame must be uint8 (H, W, 3), got {image.dtype} {image.shape}",
                hint="pass condition images as the prompt source loads them",
            )
        row = {
            PIXELS: torch.from_numpy(image.copy())[None],
            SIZE: torch.tensor([image.shape[:2]], dtype=torch.long),
            DIGEST: _digest(image),
        }
        if self.image_encoder is not None:
            from PIL import Image

            with torch.no_grad(), on_device(self.device, self.image_encoder, enabled=self.config.offload_text_encoders):
                row[IMAGE_EMBEDS] = self.pipeline.encode_image(Image.fromarray(image), self.device).detach()
        return row

    # -- protocol: velocity -----------------------------------------------------------------------------------

    def predict_velocity(
        self, latents: torch.Tensor, sigmas: torch.Tensor, conditioning: Conditioning, guidance_scale: float
    ) -> torch.Tensor:
        """:meth:`WanModel.predict_velocity` with the first frame appended (:meth:`_transformer_inputs`); for TI2V
        the conditioned samples' first latent frame then gets the exact velocity towards the condition (module
        docstring), so Euler lands on it."""
        velocity = super().predict_velocity(latents, sigmas, conditioning, guidance_scale)
        if not self.first_frame_layout or PIXELS not in conditioning.tensors:
            return velocity
        condition, present = self._conditions(conditioning, None, latents.shape)
        sigma = self._sigmas(sigmas, latents.shape[0]).view(-1, 1, 1, 1, 1)
        first = latents[:, :, :1].to(self.device, torch.float32)
        exact = torch.where(sigma > 0, (first - condition) / sigma.clamp_min(1e-12), torch.zeros_like(first))
        head = torch.where(present.view(-1, 1, 1, 1, 1), exact, velocity[:, :, :1])
        return torch.cat([head, velocity[:, :, 1:]], dim=2)

    def _transformer_inputs(
        self, x: torch.Tensor, timestep: torch.Tensor, conditioning: Conditioning, idx: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """These rows' transformer input as the pipeline's loop builds it: [noisy, mask, condition] channels and the
        CLIP tokens, or (TI2V) the first latent frame replaced with per-token timesteps 0 there."""
        if PIXELS not in conditioning.tensors:
            if self.first_frame_layout:  # TI2V's text-to-video: the text-to-video model's input
                return x, timestep, {}
            raise RuntimeFailure(
                "this Wan image-to-video model got a conditioning without first frames",
                hint="encode prompts with encode_conditions and each prompt's first frame (the prompt rows' "
                '"image" field); omni-rl check refuses image-free rows for wan_i2v',
            )
        condition, present = self._conditions(conditioning, idx, x.shape)
        if not self.first_frame_layout:
            if not bool(present.all()):
                raise RuntimeFailure(
                    "a sample of this Wan image-to-video model has no first frame",
                    hint='every prompt row of wan_i2v needs an "image"',
                )
            extra = {}
            if self.image_encoder is not None:
                (embeds,) = self._conditioning_rows(conditioning, (IMAGE_EMBEDS,), len(x), rows=idx)
                extra["encoder_hidden_states_image"] = embeds.to(self.device, self.dtype)
            return torch.cat([x, condition.to(x.dtype)], dim=1), timestep, extra
        mask = present.view(-1, 1, 1, 1, 1)
        hidden = torch.cat([torch.where(mask, condition.to(x.dtype), x[:, :, :1]), x[:, :, 1:]], dim=2)
        _, _, frames, height, width = x.shape
        per_frame = (height // self.patch_size) * (width // self.patch_size)
        tokens = (frames // self.temporal_patch_size) * per_frame
        per_token = timestep[:, None].expand(-1, tokens)
        first = torch.arange(tokens, device=per_token.device) < per_frame
        per_token = torch.where(present[:, None] & first[None], torch.zeros_like(per_token), per_token)
        return hidden, per_token, {}

    # -- the condition latents ------------------------------------------------------------------------------

    def _conditions(
        self, conditioning: Conditioning, idx: torch.Tensor | None, shape: Sequence[int]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The rows' condition latents for latents of ``shape`` (B, C, F', h, w) and which rows have a first
        frame: (B, 4 + z, F', h, w) [mask, latents] for the channel-concat layouts, (B, z, 1, h, w) for TI2V, on
        the device (zeros for rows without one), and (B,) bool."""
        batch, _, latent_frames, h, w = (int(d) for d in shape)
        pixels, sizes, digests = self._conditioning_rows(conditioning, (PIXELS, SIZE, DIGEST), batch, rows=idx)
        output = (
            h * self.vae_scale_factor,
            w * self.vae_scale_factor,
            (latent_frames - 1) * self.vae_scale_factor_temporal + 1,
        )
        size_list, digest_list = sizes.tolist(), digests.tolist()
        rows: list[torch.Tensor | None] = []
        for k in range(batch):
            height, width = size_list[k]
            if height == 0:
                rows.append(None)
                continue
            key = (*digest_list[k], height, width, *output)
            rows.append(self._condition(key, pixels[k, :height, :width], output))
        present = torch.tensor([row is not None for row in rows], device=self.device)
        filler = next((row for row in rows if row is not None), None)
        if filler is None:
            channels, frames = (self.latent_channels, 1) if self.first_frame_layout else (0, latent_frames)
            filler = torch.zeros((channels, frames, h, w), device=self.device)
        stacked = torch.stack([torch.zeros_like(filler) if row is None else row for row in rows])
        return stacked, present

    def _condition(self, key: tuple[int, ...], pixels: torch.Tensor, output: tuple[int, int, int]) -> torch.Tensor:
        """One first frame's condition latents at ``output`` (height, width, frames), from the cache or encoded."""
        cached = self._condition_cache.get(key)
        if cached is not None:
            self._condition_cache.move_to_end(key)
            return cached
        latents = self._encode_condition(pixels, output)
        if self.config.condition_cache_size > 0:
            self._condition_cache[key] = latents
            while len(self._condition_cache) > self.config.condition_cache_size:
                self._condition_cache.popitem(last=False)
        return latents

    def _encode_condition(self, pixels: torch.Tensor, output: tuple[int, int, int]) -> torch.Tensor:
        """The pipeline's own preprocessing and ``prepare_latents`` for one first frame: (4 + z, F', h, w) [mask,
        latents] in the model's dtype (the pipeline casts the concatenated input to it), or for TI2V (z, 1, h, w) in
        float32 (its velocity needs the exact value). No autocast: the rollout's precision must not change it."""
        from PIL import Image

        height, width, frames = output
        z = self.latent_channels
        latent_frames = (frames - 1) // self.vae_scale_factor_temporal + 1
        shape = (1, z, latent_frames, height // self.vae_scale_factor, width // self.vae_scale_factor)
        image = Image.fromarray(pixels.cpu().numpy())
        autocast = torch.autocast(device_type=self.device.type, enabled=False)
        with torch.no_grad(), autocast, on_device(self.device, self.vae, enabled=self.config.offload_vae):
            frame = self.pipeline.video_processor.preprocess(image, height=height, width=width)
            frame = frame.to(self.device, dtype=torch.float32)
            placeholder = torch.zeros(shape, device=self.device)  # the pipeline's noise: unused here
            out = self.pipeline.prepare_latents(
                frame, 1, z, height, width, frames, torch.float32, self.device, None, placeholder
            )
        self.condition_encodes += 1
        condition = out[1][0].detach()
        return condition if self.first_frame_layout else condition.to(self.dtype)


class WanTI2VModel(WanI2VModel):
    """``wan_ti2v``: a Wan2.2 TI2V-5B pipeline (first-frame replacement); a prompt takes no first frame
    (text-to-video) or one (image-to-video)."""

    pipeline_kind = WAN_TI2V
    condition_images: ClassVar[tuple[int, int]] = (0, 1)
    first_frame_layout: ClassVar[bool] = True


def _digest(image: np.ndarray) -> torch.Tensor:
    """(1, 2) int64: the first 16 bytes of the SHA-1 of the image's shape and pixels (the condition cache's key)."""
    digest = hashlib.sha1(repr(image.shape).encode() + image.tobytes()).digest()[:16]
    return torch.from_numpy(np.frombuffer(digest, dtype=np.int64).copy())[None]


def build_wan_i2v_model(config: WanI2VConfig, ctx: BuildContext) -> WanI2VModel:
    """The ``wan_i2v`` factory."""
    return WanI2VModel(config, ctx)


def build_wan_ti2v_model(config: WanI2VConfig, ctx: BuildContext) -> WanTI2VModel:
    """The ``wan_ti2v`` factory."""
    return WanTI2VModel(config, ctx)
