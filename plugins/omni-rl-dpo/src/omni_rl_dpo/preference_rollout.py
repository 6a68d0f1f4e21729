"""``preference_pairs``: a rollout backend that replays offline preference pairs instead of sampling.

Offline DPO needs, per step, what an online rollout gives a forward loss: clean latents x₀, the prompts'
conditioning and the images (for the reward metrics and sample grids). Reading them from a preference file
through a rollout backend lets the training loop stay as it is: ``[data] train`` is the preference ``.jsonl`` or
``.parquet`` file (the prompt sampler draws, shuffles per epoch and resumes exactly as for prompts), each drawn
record is one group of ``group_size = 2`` samples, and this backend fills the group with the record's chosen image
then its rejected image (:mod:`omni_rl_dpo.preference_images` says which fields hold them). The ``dpo`` loss with
``pairing = "offline"`` pairs them in that order.

Latents are the VAE posterior mean of each image (``model.encode_images``), computed once per image and cached
with the image (``cache_latents``). The Diffusion-DPO reference instead draws a fresh posterior sample per step;
the mean makes the latents a function of the file, so caching and multi-worker runs are exact.

Validation (``mode = "eval"``) has no pairs to replay: it samples the val prompts with the current policy
through the ``diffusers`` backend's ODE rollout, at this backend's size, ``eval_steps`` and ``eval_cfg``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from omni_rl.batch import Conditioning, RolloutBatch
from omni_rl.errors import ConfigError, RuntimeFailure
from omni_rl.protocols import DiffusionModel, RolloutRequest, Sampler
from omni_rl_dpo.config import PreferencePairsConfig
from omni_rl_dpo.preference_images import ROLES, ImageSource, image_source, load_image

#: one preference line = one group: its chosen image, then its rejected image
GROUP_SIZE = 2


class PreferencePairsRollout:
    """Loads (chosen, rejected) image pairs named in each prompt record's metadata and encodes them once."""

    group_size: int = GROUP_SIZE

    def __init__(self, config: PreferencePairsConfig) -> None:
        self.config = config
        #: image key (resolved path, or digest of its bytes) -> (uint8 image (H, W, 3), latents (C, h, w) on CPU)
        self._cache: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}

    def generate(self, model: DiffusionModel, sampler: Sampler, request: RolloutRequest) -> RolloutBatch:
        if request.mode == "eval":
            return self._validation_rollout(model, sampler, request)
        if request.record_trajectory:
            raise ConfigError(
                "the preference_pairs rollout replays clean images and has no sampling trajectory, but the loss "
                "needs per-step log-probs @ $.rollout.name",
                hint='use it with a forward-process loss ([loss] name = "dpo"), or a sampling backend such as '
                '"diffusers" for trajectory losses',
            )
        sources = self._pair_sources(request)
        images, latents = self._images_and_latents(model, sources)
        return RolloutBatch(
            prompts=list(request.prompts),
            group_ids=torch.as_tensor(request.group_ids, dtype=torch.long),
            seeds=torch.as_tensor(request.seeds, dtype=torch.long),
            images=images,
            final_latents=latents,
            conditioning=_encode_unique(model, request.prompts),
            metadata=list(request.metadata),
        )

    def _pair_sources(self, request: RolloutRequest) -> list[ImageSource]:
        """The image (file or bytes) of every sample: the first sample of each group shows the chosen image, the second
        the rejected one (the order ``pairing = "offline"`` relies on)."""
        if len(request.metadata) != len(request.prompts):
            raise RuntimeFailure(
                f"preference_pairs got {len(request.prompts)} prompts but {len(request.metadata)} metadata records",
                hint="the preference file's records carry the images: set [data] train to that .jsonl or .parquet file",
            )
        seen: dict[int, int] = {}
        sources = []
        for prompt, gid, metadata in zip(request.prompts, request.group_ids, request.metadata, strict=True):
            slot = seen.get(int(gid), 0)
            if slot >= GROUP_SIZE:
                raise RuntimeFailure(
                    f"preference_pairs got more than {GROUP_SIZE} samples of group {gid}",
                    hint="each preference line is one group of 2 (chosen, rejected); do not override group_size",
                )
            seen[int(gid)] = slot + 1
            sources.append(image_source(metadata, ROLES[slot], prompt, self.config.image_root))
        incomplete = sorted(gid for gid, count in seen.items() if count != GROUP_SIZE)
        if incomplete:
            raise RuntimeFailure(
                f"preference_pairs got groups {incomplete} with a single sample",
                hint="each preference line is one group of 2 (chosen, rejected)",
            )
        return sources

    def _images_and_latents(
        self, model: DiffusionModel, sources: Sequence[ImageSource]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """uint8 images (N, H, W, 3) and float32 latents (N, C, h, w) on the model's device; each distinct image
        (file, or bytes by digest) is read and encoded once per call (and once per run with ``cache_latents``)."""
        encode = getattr(model, "encode_images", None)
        if encode is None:
            raise ConfigError(
                f"offline preference data needs a model that encodes images, and {type(model).__name__} has no "
                "encode_images @ $.model.name",
                hint='use a model plugin with encode_images (e.g. "sd3")',
            )
        cfg = self.config
        keys = [source.key for source in sources]
        by_key = dict(zip(keys, sources, strict=True))
        found = dict(self._cache) if cfg.cache_latents else {}
        missing = list(dict.fromkeys(k for k in keys if k not in found))
        for start in range(0, len(missing), cfg.batch_size):
            chunk = missing[start : start + cfg.batch_size]
            pixels = torch.from_numpy(np.stack([load_image(by_key[k], cfg.height, cfg.width) for k in chunk]))
            encoded = encode(pixels).float().cpu()
            for key, image, latent in zip(chunk, pixels, encoded, strict=True):
                found[key] = (image, latent)
        if cfg.cache_latents:
            self._cache = found
        images = torch.stack([found[k][0] for k in keys])
        latents = torch.stack([found[k][1] for k in keys]).to(model.device)
        return images, latents

    def _validation_rollout(self, model: DiffusionModel, sampler: Sampler, request: RolloutRequest) -> RolloutBatch:
        from omni_rl_diffusers.backend import DiffusersRollout
        from omni_rl_diffusers.config import DiffusersRolloutConfig

        cfg = self.config
        sampling = DiffusersRolloutConfig(
            group_size=1,
            steps=cfg.eval_steps,
            eval_steps=cfg.eval_steps,
            height=cfg.height,
            width=cfg.width,
            cfg=cfg.eval_cfg,
            batch_size=cfg.batch_size,
        )
        return DiffusersRollout(sampling).generate(model, sampler, request)


def _encode_unique(model: Any, prompts: Sequence[str]) -> Conditioning:
    """Encode each distinct prompt once without CFG (the update evaluates velocities at guidance 1), expand."""
    unique = list(dict.fromkeys(prompts))
    position = {p: k for k, p in enumerate(unique)}
    encoded = model.encode_prompts(unique, guidance_scale=1.0)
    return encoded.index(torch.as_tensor([position[p] for p in prompts], dtype=torch.long))
