"""``FluxKontextModel``: FLUX.1-Kontext (instruction editing) as an omni-rl
:class:`~omni_rl.protocols.DiffusionModel` with condition images (docs/hooks.md, "Condition images").

Kontext is FLUX.1-dev's architecture trained to read a source image: ``FluxKontextPipeline.__call__`` VAE-encodes
the source once, appends its packed tokens after the noisy target tokens on every transformer call (position ids
with coordinate 0 = 1), and crops the output back to the target. Everything else (CLIP + T5 prompts, the distilled
guidance embedding, true CFG with a negative prompt, the sigma schedule with mu from the *target's* token count,
the VAE decode, LoRA and its file format, merged export, memory and speed options, FSDP2 units, the prompt cache)
is FLUX.1's, so this is :class:`~omni_rl_flux.model.FluxModel` with the condition added:

* :meth:`encode_conditions` encodes each prompt's text (FluxModel's cached encoder) and its source image
  (:mod:`omni_rl_flux.kontext_condition`) into one :class:`~omni_rl.batch.Conditioning`: ``condition_latents``
  (B, N_c, 64) packed tokens and ``condition_size`` (B, 2), the condition's latent height and width. The rollout
  keeps it with the trajectory, so the update rebuilds the exact transformer input.
* :meth:`predict_velocity` appends the condition's tokens and ids and crops (``FluxModel._transformer_input``); both
  CFG branches get the same condition, as in the pipeline. ``Conditioning.concat`` right-pads ``condition_latents``
  of sources of different sizes with zeros: each call takes only its samples' ``condition_size`` worth of tokens,
  and samples whose conditions differ in size go through separate transformer calls (the transformer takes one
  set of position ids per call), so padding never takes part in attention and a sample's velocity does not
  depend on what else is in its batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from omni_rl_pipelines.pipeline_model import on_device

from omni_rl.batch import Conditioning
from omni_rl.context import BuildContext
from omni_rl.errors import RuntimeFailure
from omni_rl_flux.kontext_condition import check_source, condition_ids, condition_size, encode_condition
from omni_rl_flux.kontext_config import FluxKontextConfig
from omni_rl_flux.loading import FLUX_KONTEXT
from omni_rl_flux.lora import FluxLoraAdapters
from omni_rl_flux.model import FluxModel

#: the Conditioning keys of the source image: packed latent tokens (right-padded by Conditioning.concat) and the
#: condition's (height, width) in latent pixels, which says how many of those tokens are real
CONDITION_LATENTS = "condition_latents"
CONDITION_SIZE = "condition_size"


class FluxKontextLoraAdapters(FluxLoraAdapters):
    """FLUX's LoRA bookkeeping, with files written and read by ``FluxKontextPipeline`` (the same FLUX format:
    ``FluxKontextPipeline.load_lora_weights`` loads them, alpha included)."""

    pipeline_class = "FluxKontextPipeline"
    model_label = "FLUX.1-Kontext"


class FluxKontextModel(FluxModel):
    """A loaded FLUX.1-Kontext pipeline whose transformer is trained (LoRA by default), inside one policy worker."""

    pipeline_kind = FLUX_KONTEXT
    adapters_class = FluxKontextLoraAdapters
    #: one source image per prompt, as the pipeline takes (the ModelSpec says the same)
    condition_images: tuple[int, int] = (1, 1)

    config: FluxKontextConfig

    def __init__(self, config: FluxKontextConfig, ctx: BuildContext | None = None) -> None:
        super().__init__(config, ctx)
        #: what a condition's sides are multiples of: 2 x the VAE factor (the image processor's), as the pipeline
        self.condition_multiple: int = self.vae_scale_factor * 2

    # -- protocol: conditioning ------------------------------------------------------------------------------

    def condition_size(self, height: int, width: int) -> tuple[int, int]:
        """(height, width) in pixels at which a ``height`` x ``width`` source is VAE-encoded
        (``condition_max_area`` / ``condition_resize``, :func:`omni_rl_flux.kontext_condition.condition_size`)."""
        return condition_size(
            height,
            width,
            max_area=self.config.condition_max_area,
            multiple=self.condition_multiple,
            resize=self.config.condition_resize,
        )

    def encode_conditions(
        self, prompts: Sequence[str], images: Sequence[Sequence[np.ndarray]], *, guidance_scale: float
    ) -> Conditioning:
        """Each prompt's text (``encode_prompts``: T5 + CLIP pooled, the negative prompt's too when
        ``guidance_scale > 1``) and its one source image, sized by the options, VAE-encoded (the posterior's mode)
        and packed as the pipeline does, in one Conditioning (first dimension = prompt)."""
        if len(prompts) != len(images):
            raise RuntimeFailure(
                f"encode_conditions got {len(prompts)} prompts but {len(images)} sets of condition images",
                hint="pass one tuple of condition images per prompt",
            )
        parts = []
        for k, (prompt, sources) in enumerate(zip(prompts, images, strict=True)):
            if len(sources) != 1:
                raise RuntimeFailure(
                    f"FLUX.1-Kontext takes exactly one condition image per prompt; prompt {k} ({prompt[:60]!r}) "
                    f"has {len(sources)}",
                    hint="give each prompt row one source image in its 'image' field",
                )
            parts.append(self._encode_source(check_source(sources[0], f"prompt {k} ({prompt[:60]!r})")))
        text = self.encode_prompts(prompts, guidance_scale=guidance_scale)
        return Conditioning({**text.tensors, **Conditioning.concat(parts).tensors})

    def _encode_source(self, image: np.ndarray) -> Conditioning:
        height, width = self.condition_size(int(image.shape[0]), int(image.shape[1]))
        with on_device(self.device, self.vae, enabled=self.config.offload_vae):
            tokens = encode_condition(self.pipeline, self.vae, image, (height, width), device=self.device)
        size = torch.tensor([[height // self.vae_scale_factor, width // self.vae_scale_factor]], dtype=torch.long)
        return Conditioning({CONDITION_LATENTS: tokens, CONDITION_SIZE: size.to(self.device)})

    # -- protocol: velocity ----------------------------------------------------------------------------------

    def predict_velocity(
        self, latents: torch.Tensor, sigmas: torch.Tensor, conditioning: Conditioning, guidance_scale: float
    ) -> torch.Tensor:
        """v(x, sigma) of the target latents given the prompt and its source: FluxModel's velocity (distilled
        guidance embedding; true CFG ``neg + s (pos - neg)`` when ``guidance_scale > 1``, both with the same
        condition) with the condition's tokens appended and the output cropped to the target. Samples whose
        conditions differ in size are evaluated in separate calls, each with its own position ids.
        Float32, shaped like ``latents``, differentiable w.r.t. the trained weights when called under grad."""
        batch = latents.shape[0]
        sizes = self._condition_sizes(conditioning, batch)
        groups: dict[tuple[int, int], list[int]] = {}
        for row, size in enumerate(sizes):
            groups.setdefault(size, []).append(row)
        if len(groups) == 1:
            return super().predict_velocity(latents, sigmas, conditioning, guidance_scale)
        sigma = self._sigmas(sigmas, batch)
        order, parts = [], []
        for rows in groups.values():
            index = torch.as_tensor(rows, dtype=torch.long)
            on_latents = index.to(latents.device)
            parts.append(
                super().predict_velocity(
                    latents[on_latents], sigma[index.to(sigma.device)], conditioning.index(rows), guidance_scale
                )
            )
            order.extend(rows)
        inverse = torch.empty(batch, dtype=torch.long)
        inverse[torch.as_tensor(order, dtype=torch.long)] = torch.arange(batch)
        joined = torch.cat(parts)
        return joined[inverse.to(joined.device)]

    def _transformer_input(
        self, latents: torch.Tensor, conditioning: Conditioning
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The packed target tokens then the condition's (its real tokens only: padding is cut off), with the
        target's position ids then the condition's (coordinate 0 = 1), as ``FluxKontextPipeline`` concatenates
        them. Every sample of the call has a condition of one size (:meth:`predict_velocity` groups them)."""
        tokens, positions = super()._transformer_input(latents, conditioning)
        batch = latents.shape[0]
        (height, width), *others = set(self._condition_sizes(conditioning, batch))
        if others:
            raise RuntimeFailure(
                "one FLUX.1-Kontext transformer call got conditions of different sizes",
                hint="call predict_velocity, which evaluates each condition size separately",
            )
        (condition,) = self._conditioning_rows(conditioning, (CONDITION_LATENTS,), batch)
        count = (height // 2) * (width // 2)
        condition = condition[:, :count].to(self.device, self.dtype)
        ids = condition_ids(height, width, device=self.device, dtype=self.dtype)
        return torch.cat([tokens, condition], dim=1), torch.cat([positions, ids], dim=0)

    def _condition_sizes(self, conditioning: Conditioning, batch: int) -> list[tuple[int, int]]:
        """Each sample's condition (height, width) in latent pixels; a RuntimeFailure for a conditioning without a
        source image (made by ``encode_prompts`` alone)."""
        if CONDITION_SIZE not in conditioning.tensors or CONDITION_LATENTS not in conditioning.tensors:
            raise RuntimeFailure(
                "FLUX.1-Kontext conditioning lacks the source image (no 'condition_latents')",
                hint="give every prompt row a source image ('image' field) so the rollout encodes it with "
                "encode_conditions; encode_prompts alone makes text-only conditioning",
            )
        sizes = conditioning.tensors[CONDITION_SIZE]
        if sizes.shape[0] != batch:
            raise RuntimeFailure(
                f"conditioning has {sizes.shape[0]} samples but the latents have {batch}",
                hint="index the Conditioning with the same samples as the latents",
            )
        return [(int(h), int(w)) for h, w in sizes.tolist()]


def build_flux_kontext_model(config: FluxKontextConfig, ctx: BuildContext) -> FluxKontextModel:
    """The ``flux_kontext`` factory: load ``config.path`` on ``ctx.device`` with LoRA (or full fine-tuning)."""
    return FluxKontextModel(config, ctx)
