"""``QwenImageEditModel`` and ``QwenImageEditPlusModel``: Qwen-Image-Edit (``QwenImageEditPipeline``) and
Qwen-Image-Edit-2509/2511 (``QwenImageEditPlusPipeline``) as omni-rl models that take condition images.

They are :class:`~omni_rl_qwen_image.model.QwenImageModel` (schedule, decode, LoRA, export, memory and speed
options, FSDP units) with what the edit pipelines' ``__call__`` does to the condition, computed the same way:

- **Condition sizes.** Each source is resized (PIL Lanczos, the pipeline's ``image_processor.resize``) to
  ``calculate_dimensions(area, width / height)``: aspect kept, sides rounded to multiples of 32. The VAE copy's
  area is ``condition_max_area`` (the pipelines' 1024 x 1024 by default); the Qwen2.5-VL copy's is
  ``vlm_condition_max_area`` (Edit: the VAE copy itself, Plus: 384 x 384, as the pipelines do).
- **Condition latents.** The VAE posterior's mode (``retrieve_latents(..., sample_mode="argmax")``), normalised
  ``(z - latents_mean) / latents_std``, 2x2-packed; several images (Plus) are concatenated on the token axis.
- **Prompts.** The pipeline's own ``encode_prompt(prompt, image=VLM copies)`` (the edit template, "Picture k:"
  prefixes for Plus, its 64 template tokens dropped), with the Qwen2.5-VL inputs made by
  :class:`~omni_rl_qwen_image.edit_prompts.VisionTextProcessor`; the negative prompt of true CFG gets the same
  images. Cached per (prompt, images).
- **Velocity.** The condition tokens go after the target's, ``img_shapes`` = [target, condition...] per sample
  (RoPE frame index k for the k-th image), the transformer's output is cropped to the target, and true CFG
  (with Qwen-Image's per-token norm rescaling) combines the cropped halves. Qwen-Image-Edit-2511's transformer has
  ``zero_cond_t`` in its config: it then modulates the condition tokens as t = 0 itself, from ``img_shapes``; the
  pipeline passes the plain timestep, and so does this model.

Everything the update needs to rebuild the transformer's input (condition tokens, their shapes, both prompts'
embeddings and masks) is in the :class:`~omni_rl.batch.Conditioning`. ``Conditioning.concat`` right-pads it with
zeros; ``condition_shapes`` gives each sample's true condition length, and samples whose conditions differ in shape
go through separate transformer calls (the transformer takes one ``img_shapes`` layout per call), so padding never
enters attention.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
from omni_rl_pipelines.loading import PipelineKind
from omni_rl_pipelines.pipeline_model import on_device

from omni_rl.batch import Conditioning
from omni_rl.context import BuildContext
from omni_rl.errors import ConfigError, RuntimeFailure
from omni_rl_qwen_image.edit_config import PLUS_VLM_CONDITION_AREA, QwenImageEditConfig
from omni_rl_qwen_image.edit_prompts import NEGATIVE, POSITIVE, EditPromptEncoder, VisionTextProcessor
from omni_rl_qwen_image.latents import pack, true_cfg, unpack
from omni_rl_qwen_image.lora import QwenLoraAdapters
from omni_rl_qwen_image.model import QwenImageModel
from omni_rl_qwen_image.prompts import pad_stack, stack_texts, trimmed

if TYPE_CHECKING:
    from PIL import Image

#: the Conditioning keys of the condition: packed tokens (B, L_c, 4C) and each image's (1, h/2, w/2) (B, K, 3),
#: zero rows where a sample has fewer images than the longest of its batch
CONDITION_LATENTS = "condition_latents"
CONDITION_SHAPES = "condition_shapes"
#: the pipelines' processor folder and how ``model_index.json`` names it
PROCESSOR_FOLDER = "processor"
PROCESSOR_ENTRY = ["transformers", "Qwen2VLProcessor"]

_REQUIRED = ("transformer", "vae", "scheduler", "text_encoder", "tokenizer", PROCESSOR_FOLDER)
QWEN_IMAGE_EDIT = PipelineKind(
    label="Qwen-Image-Edit",
    pipeline_class="QwenImageEditPipeline",
    class_names=frozenset({"QwenImageEditPipeline"}),
    required=_REQUIRED,
    model_name="qwen_image_edit",
    example="Qwen/Qwen-Image-Edit",
    tiny_builder="omni_rl_qwen_image.edit_tiny:build_tiny_qwen_image_edit_pipeline",
)
QWEN_IMAGE_EDIT_PLUS = PipelineKind(
    label="Qwen-Image-Edit-Plus",
    pipeline_class="QwenImageEditPlusPipeline",
    class_names=frozenset({"QwenImageEditPlusPipeline"}),
    required=_REQUIRED,
    model_name="qwen_image_edit_plus",
    example="Qwen/Qwen-Image-Edit-2511",
    tiny_builder="omni_rl_qwen_image.edit_tiny:build_tiny_qwen_image_edit_plus",
)


def condition_size(width: int, height: int, area: int) -> tuple[int, int]:
    """(width, height) of a ``width`` x ``height`` image resized to about ``area`` pixels: the edit pipelines'
    ``calculate_dimensions`` (aspect kept, each side rounded to a multiple of 32), except that a side is never
    rounded down to 0 (an extreme aspect ratio the pipelines would fail on keeps one 32-pixel row)."""
    ratio = width / height
    new_width = math.sqrt(area * ratio)
    new_height = new_width / ratio
    return max(32, round(new_width / 32) * 32), max(32, round(new_height / 32) * 32)


class QwenEditLoraAdapters(QwenLoraAdapters):
    """Qwen-Image's LoRA format (the edit pipelines share ``QwenImageLoraLoaderMixin``), read and written through
    ``QwenImageEditPipeline``."""

    pipeline_class = "QwenImageEditPipeline"
    model_label = "Qwen-Image-Edit"


class QwenEditPlusLoraAdapters(QwenLoraAdapters):
    pipeline_class = "QwenImageEditPlusPipeline"
    model_label = "Qwen-Image-Edit-Plus"


class QwenImageEditModel(QwenImageModel):
    """A loaded ``QwenImageEditPipeline`` whose transformer is trained; one condition image per prompt."""

    pipeline_kind = QWEN_IMAGE_EDIT
    adapters_class: ClassVar[type[QwenLoraAdapters]] = QwenEditLoraAdapters
    #: (fewest, most) condition images per prompt, as the model spec says
    condition_images: tuple[int, int] = (1, 1)
    #: Plus pipelines take the images as a list ("Picture k:" prompts) and size the VLM copy on its own
    plus: ClassVar[bool] = False

    config: QwenImageEditConfig

    def __init__(self, config: QwenImageEditConfig, ctx: BuildContext | None = None) -> None:
        super().__init__(config, ctx)
        #: Qwen-Image-Edit-2511: the transformer modulates condition tokens as t = 0 (from img_shapes)
        self.zero_cond_t = bool(self.transformer.config.get("zero_cond_t", False))
        #: packed condition latents by (image digest, VAE size), on the CPU: a source seen again skips the VAE
        self._condition_cache: OrderedDict[str, torch.Tensor] = OrderedDict()

    # -- loading -----------------------------------------------------------------------------------------------

    def _load_pipeline(self, config: Any, source: str) -> Any:
        """Every component but the processor through diffusers; the processor folder through
        :class:`VisionTextProcessor` (``Qwen2VLProcessor`` needs torchvision, and the stand-in gives its tensors)."""
        pipeline = self.pipeline_kind.load(config, source, processor=None)
        pipeline.processor = VisionTextProcessor.from_pretrained(_processor_dir(source))
        pipeline.set_progress_bar_config(disable=True)
        return pipeline

    def _prompt_encoder(self, config: Any) -> EditPromptEncoder:
        return EditPromptEncoder(
            self.pipeline,
            image_as_list=self.plus,
            device=self.device,
            max_sequence_length=1024,  # not applied: the edit pipelines do not truncate prompts
            cache_size=config.prompt_cache_size,
            offload=config.offload_text_encoders,
        )

    # -- protocol: conditioning --------------------------------------------------------------------------------

    def encode_prompts(self, prompts: Sequence[str], *, guidance_scale: float) -> Conditioning:
        """An editing model needs each prompt's condition images (:meth:`encode_conditions`)."""
        raise RuntimeFailure(
            f"the {self.model_label} model edits images: each prompt needs its condition image(s)",
            hint="give every prompt row an 'image' (or 'images') field (docs/editing.md)",
        )

    def encode_conditions(
        self, prompts: Sequence[str], images: Sequence[Sequence[np.ndarray]], *, guidance_scale: float
    ) -> Conditioning:
        """Per (prompt, condition images): the packed condition latents and their shapes, the prompt's Qwen2.5-VL
        embeddings (with the images) and a mask, and the negative prompt's with the same images when
        ``guidance_scale > 1``. Pairs are encoded one at a time and joined with ``Conditioning.concat``."""
        if not prompts or len(prompts) != len(images):
            raise RuntimeFailure(
                f"encode_conditions got {len(prompts)} prompts and {len(images)} condition sets",
                hint="pass one tuple of condition images per prompt",
            )
        return Conditioning.concat(
            [self._encode_pair(p, list(sources), guidance_scale) for p, sources in zip(prompts, images, strict=True)]
        )

    def _encode_pair(self, prompt: str, sources: list[np.ndarray], guidance_scale: float) -> Conditioning:
        fewest, most = self.condition_images
        if not fewest <= len(sources) <= most:
            raise RuntimeFailure(
                f"the {self.model_label} model takes {fewest} to {most} condition images per prompt, "
                f"got {len(sources)}",
                hint="give each prompt row as many images as the model takes (docs/editing.md)",
            )
        originals = [_pil(image) for image in sources]
        resize = self.pipeline.image_processor.resize
        vae_sizes = [condition_size(*image.size, self.config.condition_max_area) for image in originals]
        vae_copies = [resize(image, h, w) for image, (w, h) in zip(originals, vae_sizes, strict=True)]
        vlm_area = self.config.vlm_condition_max_area or (PLUS_VLM_CONDITION_AREA if self.plus else None)
        if vlm_area is None:
            vlm_copies = vae_copies  # QwenImageEditPipeline encodes the VAE copy itself
        else:
            vlm_copies = [resize(i, h, w) for i in originals for w, h in [condition_size(*i.size, vlm_area)]]
        tokens, shapes = self._condition_tokens(vae_copies)
        tensors = {CONDITION_LATENTS: tokens[None], CONDITION_SHAPES: shapes[None]}
        embeds, mask = pad_stack(self.prompts.encode([prompt], [vlm_copies]))
        tensors[POSITIVE], tensors[f"{POSITIVE}_mask"] = embeds, mask
        if guidance_scale > 1:
            embeds, mask = pad_stack(self.prompts.encode([self.config.negative_prompt], [vlm_copies]))
            tensors[NEGATIVE], tensors[f"{NEGATIVE}_mask"] = embeds, mask
        return Conditioning({k: v.to(self.device) for k, v in tensors.items()})

    @torch.no_grad()
    def _condition_tokens(self, images: list[Image.Image]) -> tuple[torch.Tensor, torch.Tensor]:
        """The VAE copies as the pipeline's ``prepare_latents`` makes them: each encoded alone (posterior mode),
        ``(z - mean) / std``, packed, concatenated on tokens; with each one's (1, h/2, w/2). On the CPU."""
        parts, shapes = [], []
        for image in images:
            pixels = np.asarray(image)
            key = f"{pixels.shape}:{hashlib.sha1(np.ascontiguousarray(pixels).data).hexdigest()}"
            tokens = self._condition_cache.get(key)
            if tokens is None:
                tokens = self._encode_vae_copy(image)
                self._remember(key, tokens)
            else:
                self._condition_cache.move_to_end(key)
            height, width = image.size[1] // self.vae_scale_factor, image.size[0] // self.vae_scale_factor
            parts.append(tokens)
            shapes.append((1, height // 2, width // 2))
        return torch.cat(parts), torch.tensor(shapes, dtype=torch.long)

    def _encode_vae_copy(self, image: Image.Image) -> torch.Tensor:
        vae = self.vae
        width, height = image.size
        pixels = self.pipeline.image_processor.preprocess(image, height, width).unsqueeze(2)
        with on_device(self.device, vae, enabled=self.config.offload_vae):
            pixels = pixels.to(self.device, self.dtype)
            z = vae.encode(pixels).latent_dist.mode()  # retrieve_latents(..., sample_mode="argmax")
            config = vae.config
            mean = torch.tensor(config.latents_mean).view(1, config.z_dim, 1, 1, 1).to(z.device, z.dtype)
            std = torch.tensor(config.latents_std).view(1, config.z_dim, 1, 1, 1).to(z.device, z.dtype)
            z = (z - mean) / std
        return pack(z[:, :, 0])[0].cpu()

    def _remember(self, key: str, tokens: torch.Tensor) -> None:
        if self.config.prompt_cache_size == 0:
            return
        self._condition_cache[key] = tokens
        while len(self._condition_cache) > self.config.prompt_cache_size:
            self._condition_cache.popitem(last=False)

    # -- protocol: velocity ------------------------------------------------------------------------------------

    def predict_velocity(
        self, latents: torch.Tensor, sigmas: torch.Tensor, conditioning: Conditioning, guidance_scale: float
    ) -> torch.Tensor:
        """v(x, sigma) on the target latents: the condition tokens appended, one transformer call per condition
        layout in the batch (of 2B rows under true CFG), the output cropped to the target, then true CFG. Float32,
        shaped like ``latents``, differentiable w.r.t. the trained weights when called under grad."""
        batch, _, height, width = latents.shape
        tokens = pack(latents.to(self.device, self.dtype))
        sigma = self._sigmas(sigmas, batch)
        timestep = (sigma * self.num_train_timesteps).to(self.dtype) / self.num_train_timesteps
        condition, shapes = self._conditioning_rows(conditioning, (CONDITION_LATENTS, CONDITION_SHAPES), batch)
        layouts: dict[tuple[tuple[int, int, int], ...], list[int]] = {}
        for row, sample in enumerate(shapes.tolist()):
            layouts.setdefault(tuple(tuple(s) for s in sample if s[0] > 0), []).append(row)
        pieces, order = [], []
        for layout, rows in layouts.items():
            index = torch.tensor(rows, device=self.device)
            length = sum(f * h * w for f, h, w in layout)
            hidden = torch.cat([tokens[index], condition[index.to(condition.device), :length].to(tokens)], dim=1)
            img_shapes = [[(1, height // 2, width // 2), *layout]] * len(rows)
            pieces.append(self._guided(hidden, timestep[index], img_shapes, conditioning, index, guidance_scale))
            order += rows
        velocity = pieces[0] if len(pieces) == 1 else torch.cat(pieces)[torch.tensor(order).argsort()]
        return unpack(velocity, height, width)

    def _guided(
        self,
        hidden: torch.Tensor,
        timestep: torch.Tensor,
        img_shapes: list,
        conditioning: Conditioning,
        index: torch.Tensor,
        guidance_scale: float,
    ) -> torch.Tensor:
        """One condition layout's packed target velocity (float32): the positive prediction, or true CFG over the
        negative and positive predictions of one call of 2n rows (the pipeline makes two calls; the texts are
        padded to one length under the attention mask)."""
        target = hidden.shape[1] - sum(f * h * w for f, h, w in img_shapes[0][1:])
        positive = self._rows_text(conditioning, POSITIVE, index)
        if guidance_scale <= 1:
            return self._forward(hidden, timestep, img_shapes, *positive)[:, :target].float()
        embeds, mask = stack_texts([self._rows_text(conditioning, NEGATIVE, index), positive])
        both = self._forward(torch.cat([hidden, hidden]), torch.cat([timestep, timestep]), img_shapes * 2, embeds, mask)
        negative, positive_v = both[:, :target].float().chunk(2)
        return true_cfg(positive_v, negative, guidance_scale)

    def _rows_text(
        self, conditioning: Conditioning, key: str, index: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        embeds, mask = self._conditioning_rows(conditioning, (key, f"{key}_mask"), len(index), rows=index)
        return trimmed(embeds.to(self.device, self.dtype), mask.to(self.device))

    # -- export ------------------------------------------------------------------------------------------------

    def build_pipeline(self) -> Any:
        """The pipeline class sharing this model's modules (the current policy), its processor the stand-in."""
        import diffusers

        components = dict(self.pipeline.components)
        scheduler = components["scheduler"]
        components["scheduler"] = type(scheduler).from_config(scheduler.config)
        components[PROCESSOR_FOLDER] = None
        pipeline = getattr(diffusers, self.pipeline_class)(**components)
        pipeline.processor = self.pipeline.processor
        pipeline.set_progress_bar_config(disable=True)
        return pipeline

    def export_pipeline(self, directory: str | Path, *, merged: bool) -> None:
        """:meth:`PipelineModel.export_pipeline`; a merged pipeline gets the source's ``processor`` folder as it
        is (named ``Qwen2VLProcessor`` in model_index.json), so ``DiffusionPipeline.from_pretrained`` loads it
        where transformers can build that processor."""
        if not merged:
            super().export_pipeline(directory, merged=False)
            return
        pipeline = self.build_pipeline()
        pipeline.processor = None
        pipeline.transformer = self._merged_transformer()
        target = Path(directory)
        pipeline.save_pretrained(target, safe_serialization=True)
        shutil.copytree(_processor_dir(self.pipeline_path), target / PROCESSOR_FOLDER, dirs_exist_ok=True)
        index_path = target / "model_index.json"
        index = json.loads(index_path.read_text(encoding="utf-8"))
        index[PROCESSOR_FOLDER] = PROCESSOR_ENTRY
        index_path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n", encoding="utf-8")


class QwenImageEditPlusModel(QwenImageEditModel):
    """A loaded ``QwenImageEditPlusPipeline`` (Qwen-Image-Edit-2509 / -2511): one to three condition images per
    prompt, each a "Picture k:" in the prompt and the k-th RoPE frame after the target."""

    pipeline_kind = QWEN_IMAGE_EDIT_PLUS
    adapters_class = QwenEditPlusLoraAdapters
    condition_images = (1, 3)
    plus = True


def _pil(image: np.ndarray) -> Image.Image:
    from PIL import Image

    array = np.asarray(image)
    if array.dtype != np.uint8 or array.ndim != 3 or array.shape[-1] != 3:
        raise RuntimeFailure(
            f"a condition image must be uint8 (H, W, 3), got {array.dtype} {tuple(array.shape)}",
            hint="pass condition images as the prompt sources load them (omni_rl.data_images.load_condition)",
        )
    return Image.fromarray(array)


def _processor_dir(source: str) -> Path:
    """The pipeline's ``processor`` folder: under a local directory, or in the hub cache for a hub id."""
    local = Path(source).expanduser()
    if local.is_dir():
        folder = local / PROCESSOR_FOLDER
    else:
        from huggingface_hub import snapshot_download

        folder = Path(snapshot_download(source, allow_patterns=[f"{PROCESSOR_FOLDER}/*"])) / PROCESSOR_FOLDER
    if not (folder / "preprocessor_config.json").is_file():
        raise ConfigError(
            f"{folder} holds no preprocessor_config.json (the edit pipelines' Qwen2.5-VL image processor)",
            hint="re-download the full pipeline, processor folder included",
        )
    return folder


def build_qwen_image_edit_model(config: QwenImageEditConfig, ctx: BuildContext) -> QwenImageEditModel:
    """The ``qwen_image_edit`` factory."""
    return QwenImageEditModel(config, ctx)


def build_qwen_image_edit_plus_model(config: QwenImageEditConfig, ctx: BuildContext) -> QwenImageEditPlusModel:
    """The ``qwen_image_edit_plus`` factory."""
    return QwenImageEditPlusModel(config, ctx)
