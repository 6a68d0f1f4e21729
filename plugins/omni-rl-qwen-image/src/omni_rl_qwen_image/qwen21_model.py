"""``QwenImage21Model``: Qwen-Image 2.1 as an omni-rl :class:`~omni_rl.protocols.DiffusionModel`.

Every number is computed the way ``QwenImage21Pipeline.__call__`` computes it for one prompt: prompts through the
pipeline's own ``encode_prompt`` (:mod:`omni_rl_qwen_image.qwen21_prompts`); latents (B, C, H/16, W/16) handed to
the transformer unpatched, one token per latent pixel (the pipeline's ``_pack_latents`` is a spatial flatten);
``img_shapes`` = [(1, h, w)] and ``img_mask`` = the text's positions (no image slot) then one slot per 2x2 group of
target latents; timestep = (sigma x 1000 in the weights' dtype) / 1000; the output cropped to the target's tokens;
true CFG neg + s (pos - neg) without Qwen-Image's norm rescaling, only when s > 1; the sigma grid the pipeline uses
(the checkpoint's ``sample_sigmas``, else linspace(1, 1/n, n)) through the scheduler with
mu = calculate_shift(h x w); and the VAE's per-channel latent statistics. So an Euler loop over
:meth:`sigma_schedule` with :meth:`predict_velocity` reproduces the pipeline's output for the same seed, and
rollout and training share :meth:`predict_velocity`, which makes the first on-policy ratio 1.

Why one transformer call per prompt length: the transformer takes one token layout for the whole batch (it reads
``img_mask[0]``), and its 3-axis RoPE places the target image after the text *including* right padding, so a
prompt padded to a longer batch mate's length gets a different velocity than alone. Samples whose prompts have the
same length go through one call without padding (CFG's negatives included: 2B rows), so each sample's velocity is
the pipeline's for that prompt alone, whatever it is batched with (the conformance suite's batching check, 1 vs 2
workers). With the transformer sharded by FSDP2 every worker must run the same number of forwards, so there each
row is its own call (the workers hold the same number of samples).

The VAE is RGBA in and out (``AutoencoderKLQwenImage21``, ``in_channels = out_channels = 4``): :meth:`decode`
returns the RGB channels (the pipeline's image without its alpha), :meth:`encode_images` encodes opaque images
(alpha 1). The KV cache of the pipeline (``use_kv_cache``: the text's keys and values kept after the first step) is
a speed-up of the same function and is not used: training needs the full forward, and rollout and update must run
the same code for the ratio to be 1.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from omni_rl_pipelines.pipeline_model import PipelineModel, on_device

from omni_rl.batch import Conditioning
from omni_rl.context import BuildContext
from omni_rl.errors import ConfigError, RuntimeFailure
from omni_rl_qwen_image.qwen21_config import QwenImage21Config
from omni_rl_qwen_image.qwen21_loading import PROCESSOR_FOLDER, QWEN_IMAGE21, QwenImage21LoraAdapters
from omni_rl_qwen_image.qwen21_prompts import NEGATIVE, POSITIVE, QwenImage21Prompts, TextProcessor
from omni_rl_qwen_image.qwen21_schedule import qwen_image21_sigmas


class QwenImage21Model(PipelineModel):
    """A loaded Qwen-Image 2.1 pipeline whose transformer is trained (LoRA by default), inside one policy worker."""

    transformer_class = "QwenImage21Transformer2DModel"
    adapters_class = QwenImage21LoraAdapters
    pipeline_kind = QWEN_IMAGE21
    #: image sizes are whole 2x2 groups of latents (each VLM image slot stands for one)
    patch_size = 2

    def __init__(self, config: QwenImage21Config, ctx: BuildContext | None = None) -> None:
        ctx = self._open_pipeline(config, ctx)
        if int(self.transformer.config.patch_size) != 1:
            raise ConfigError(
                f"{self.pipeline_path} holds a Qwen-Image 2.1 transformer with patch_size "
                f"{self.transformer.config.patch_size}",
                hint="QwenImage21Pipeline feeds the transformer unpatched latents (patch_size 1); use a standard "
                "Qwen-Image 2.1 checkpoint",
            )
        self._place_components((self.pipeline.text_encoder,))
        self._prepare_transformer(ctx.seed)
        self.prompts = QwenImage21Prompts.for_config(self.pipeline, config, device=self.device)
        self.vae_scale_factor: int = self.pipeline.vae_scale_factor
        self.latent_channels: int = self.transformer.config.in_channels
        self.num_train_timesteps: int = self.pipeline.scheduler.config.num_train_timesteps
        #: transformer forwards so far (tests check one call per prompt length)
        self.transformer_calls = 0

    def _load_pipeline(self, config: QwenImage21Config, source: str) -> object:
        """Every component through diffusers but the processor: the text-only stand-in from the processor folder
        (``Qwen3VLProcessor`` needs torchvision)."""
        from pathlib import Path

        folder = Path(source) / PROCESSOR_FOLDER
        if not folder.is_dir():  # a hub id: the folder in the hub cache
            from huggingface_hub import snapshot_download

            folder = Path(snapshot_download(source, allow_patterns=[f"{PROCESSOR_FOLDER}/*"])) / PROCESSOR_FOLDER
        pipeline = self.pipeline_kind.load(config, source, processor=TextProcessor.from_pretrained(folder))
        pipeline.set_progress_bar_config(disable=True)
        return pipeline

    # -- protocol: conditioning and velocity -----------------------------------------------------------------

    def encode_prompts(self, prompts: Sequence[str], *, guidance_scale: float) -> Conditioning:
        """Qwen3-VL embeddings with a padding mask; the negative prompt's too when ``guidance_scale > 1`` (the
        pipeline's ``true_cfg_scale`` condition)."""
        if not prompts:
            raise RuntimeFailure("encode_prompts got no prompts", hint="pass at least one prompt")
        embeds, mask = self.prompts.encode(list(prompts))
        tensors = {POSITIVE: embeds, f"{POSITIVE}_mask": mask}
        if guidance_scale > 1:
            negative = self.config.negative_prompt
            neg_embeds, neg_mask = self.prompts.encode([negative] * len(prompts), keep=[negative])
            tensors[NEGATIVE], tensors[f"{NEGATIVE}_mask"] = neg_embeds, neg_mask
        return Conditioning({k: v.to(self.device) for k, v in tensors.items()})

    def predict_velocity(
        self, latents: torch.Tensor, sigmas: torch.Tensor, conditioning: Conditioning, guidance_scale: float
    ) -> torch.Tensor:
        """v(x, sigma): the positive prediction alone when ``guidance_scale <= 1``, else true CFG over the positive
        and negative predictions. Float32, shaped like ``latents``, differentiable w.r.t. the trained weights when
        called under grad."""
        batch, channels, height, width = latents.shape
        tokens = latents.to(self.device, self.dtype).flatten(2).transpose(1, 2)  # the pipeline's _pack_latents
        sigma = self._sigmas(sigmas, batch)
        timestep = (sigma * self.num_train_timesteps).to(self.dtype) / self.num_train_timesteps
        keys = [POSITIVE] if guidance_scale <= 1 else [POSITIVE, NEGATIVE]
        texts = [row for key in keys for row in self._texts(conditioning, key, batch)]
        rows = len(keys) * batch
        out = self._by_length(tokens.repeat(len(keys), 1, 1), timestep.repeat(len(keys)), texts, (height, width))
        velocity = out.float()
        if rows > batch:
            positive, negative = velocity[:batch], velocity[batch:]
            velocity = negative + guidance_scale * (positive - negative)
        return velocity.transpose(1, 2).reshape(batch, channels, height, width)

    def _by_length(
        self, tokens: torch.Tensor, timestep: torch.Tensor, texts: list[torch.Tensor], size: tuple[int, int]
    ) -> torch.Tensor:
        """The target tokens' output of every row: one transformer call per distinct text length (per row under
        FSDP2), reassembled in row order."""
        groups: dict[int, list[int]] = {}
        if self._sharded():
            groups = {row: [row] for row in range(len(texts))}
        else:
            for row, text in enumerate(texts):
                groups.setdefault(int(text.shape[0]), []).append(row)
        pieces, order = [], []
        for rows in groups.values():
            index = torch.tensor(rows, device=tokens.device)
            embeds = torch.stack([texts[r] for r in rows])
            pieces.append(self._forward(tokens[index], timestep[index], embeds, size))
            order += rows
        if len(pieces) == 1:
            return pieces[0]
        return torch.cat(pieces)[torch.tensor(order, device=tokens.device).argsort()]

    def _forward(
        self, tokens: torch.Tensor, timestep: torch.Tensor, embeds: torch.Tensor, size: tuple[int, int]
    ) -> torch.Tensor:
        height, width = size
        rows, target = tokens.shape[0], height * width
        img_mask = torch.cat(
            [
                torch.zeros(rows, embeds.shape[1], dtype=torch.bool, device=self.device),
                torch.ones(rows, target // 4, dtype=torch.bool, device=self.device),
            ],
            dim=1,
        )
        self.transformer_calls += 1
        with self.attention():
            out = self.call_transformer(
                self.transformer,
                hidden_states=tokens,
                timestep=timestep,
                encoder_hidden_states=embeds,
                encoder_hidden_states_mask=None,
                img_shapes=[[(1, height, width)]] * rows,
                img_mask=img_mask,
                return_dict=False,
            )[0]
        return out[:, -target:]

    def _texts(self, conditioning: Conditioning, key: str, batch: int) -> list[torch.Tensor]:
        """Each row's embeddings at its own length (the padding of the stored conditioning dropped)."""
        embeds, mask = self._conditioning_rows(conditioning, (key, f"{key}_mask"), batch)
        embeds = embeds.to(self.device, self.dtype)
        return [embeds[i, :n] for i, n in enumerate(mask.sum(dim=1).tolist())]

    def _sharded(self) -> bool:
        from omni_rl.engine.fsdp import is_sharded

        return is_sharded(next(self.transformer.parameters()))

    # -- protocol: schedule, images ----------------------------------------------------------------------------

    def sigma_schedule(self, num_steps: int, height: int, width: int) -> torch.Tensor:
        """The pipeline's n + 1 sigmas for this size, float32 on the model's device
        (:func:`~omni_rl_qwen_image.qwen21_schedule.qwen_image21_sigmas`)."""
        if num_steps < 1:
            raise ConfigError(f"num_steps must be >= 1, got {num_steps}", hint="set [rollout] steps >= 1")
        _, h, w = self.latent_shape(height, width)
        sample = self.pipeline.config.get("sample_sigmas")
        return qwen_image21_sigmas(self.pipeline.scheduler, num_steps, h, w, sample_sigmas=sample).to(self.device)

    def _patch_note(self) -> str:
        return "2x2 latent groups per image slot"

    @torch.no_grad()
    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """Latents -> uint8 (B, H, W, 3): the RGB channels of the pipeline's ``output_type="np"`` times 255,
        rounded."""
        vae = self.vae
        with on_device(self.device, vae, enabled=self.config.offload_vae):
            z = latents.to(self.device, vae.dtype).unsqueeze(2)
            mean, inverse_std = (t.to(z.device, z.dtype) for t in self._latent_stats())
            image = vae.decode(z / inverse_std + mean, return_dict=False)[0][:, :, 0]
            image = self.pipeline.image_processor.postprocess(image, output_type="pt")
        return self._uint8_images(image[:, :3])

    @torch.no_grad()
    def encode_images(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 RGB images (B, H, W, 3) -> float32 latents (B, C, h, w): the VAE posterior's mean of the opaque
        RGBA image, ``(z - mean) / std`` as the pipeline encodes condition images (optional protocol member)."""
        pixels = self._pixels(images)
        rgba = torch.cat([pixels, torch.ones_like(pixels[:, :1])], dim=1)
        vae = self.vae
        with on_device(self.device, vae, enabled=self.config.offload_vae):
            posterior = vae.encode(rgba.unsqueeze(2).to(vae.dtype), return_dict=False)[0]
            mean, inverse_std = (t.to(pixels.device, vae.dtype) for t in self._latent_stats())
            z = (posterior.mode() - mean) * inverse_std
        return z[:, :, 0].float()

    # -- protocol: training state (the rest is PipelineModel's) ------------------------------------------------

    def fsdp_units(self) -> list[torch.nn.Module]:
        """Optional protocol member: one FSDP2 unit per single-stream block, the transformer itself (input
        projections, the shared modulation, output layer) the root unit."""
        return list(self.transformer.transformer_blocks)

    def build_pipeline(self) -> object:
        """The pipeline sharing this model's modules (the current policy), its processor the stand-in."""
        import diffusers

        components = dict(self.pipeline.components)
        scheduler = components["scheduler"]
        components["scheduler"] = type(scheduler).from_config(scheduler.config)
        pipeline = diffusers.QwenImage21Pipeline(**components, sample_sigmas=self.pipeline.config.get("sample_sigmas"))
        pipeline.set_progress_bar_config(disable=True)
        return pipeline

    def export_pipeline(self, directory: str, *, merged: bool) -> None:
        """:meth:`PipelineModel.export_pipeline`; a merged pipeline gets the source's ``processor`` folder as it
        is (named ``Qwen3VLProcessor`` in model_index.json)."""
        if not merged:
            super().export_pipeline(directory, merged=False)
            return
        import json
        import shutil
        from pathlib import Path

        from omni_rl_qwen_image.qwen21_loading import PROCESSOR_ENTRY

        pipeline = self.build_pipeline()
        pipeline.transformer = self._merged_transformer()
        pipeline.register_modules(processor=None)
        target = Path(directory)
        pipeline.save_pretrained(target, safe_serialization=True)
        source = Path(self.pipeline_path) / PROCESSOR_FOLDER
        if source.is_dir():
            shutil.copytree(source, target / PROCESSOR_FOLDER, dirs_exist_ok=True)
        else:
            self.pipeline.processor.save_pretrained(target / PROCESSOR_FOLDER)
        index_path = target / "model_index.json"
        index = json.loads(index_path.read_text(encoding="utf-8"))
        index[PROCESSOR_FOLDER] = PROCESSOR_ENTRY
        index_path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def build_qwen_image21_model(config: QwenImage21Config, ctx: BuildContext) -> QwenImage21Model:
    """The ``qwen_image21`` factory: load ``config.path`` on ``ctx.device`` with LoRA (or full fine-tuning)."""
    return QwenImage21Model(config, ctx)
