"""Write tiny random Qwen-Image-Edit pipelines (``QwenImageEditPipeline``, ``QwenImageEditPlusPipeline``) offline.

The directory is what the hub's Qwen-Image-Edit repositories hold, with random weights: ``transformer`` (with
``zero_cond_t`` for a 2511-like Plus pipeline), ``vae``, ``text_encoder`` (``Qwen2_5_VLForConditionalGeneration``
with a two-block vision tower, patch 14, merge 2), ``tokenizer``, ``scheduler`` and a ``processor`` folder (a
``Qwen2VLImageProcessor`` config and the tokenizer files, named ``Qwen2VLProcessor`` in ``model_index.json``).

What has to be synthesised because the hub's files cannot be fetched: a byte-level BPE whose vision special
tokens (``<|vision_start|>``, ``<|image_pad|>``, ``<|vision_end|>``) have the ids the text encoder's config names,
and whose vocabulary spells the edit template's system prompt in exactly the 64 tokens the pipelines drop
(``prompt_template_encode_start_idx``), as the real Qwen2.5-VL vocabulary does (the same construction as the
text-to-image tiny tokenizer's 34, :mod:`omni_rl_qwen_image.tiny_tokenizer`). The image processor keeps VLM
images small (at most 112 x 112 pixels, 16 image tokens); condition images should be at least 56 x 56 (4 tokens).

``QwenImageEditPipeline.from_pretrained`` reads the ``processor`` folder with ``Qwen2VLProcessor``, which needs
torchvision; the ``qwen_image_edit`` models load it with :class:`~omni_rl_qwen_image.edit_prompts.VisionTextProcessor`
instead, and on a machine with torchvision diffusers loads the whole directory itself.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import attrs
from omni_rl_pipelines.tiny import seeded_components, write_tiny_pipeline

from omni_rl_qwen_image.tiny import QWEN_IMAGE_SCHEDULER, TinyQwenImageShape, _text_encoder, _transformer, _vae
from omni_rl_qwen_image.tiny_tokenizer import TEXT_TO_IMAGE_WORDS, write_qwen2_tokenizer

__all__ = ["EDIT_WORDS", "VLM_MAX_PIXELS", "build_tiny_qwen_image_edit_pipeline", "build_tiny_qwen_image_edit_plus"]

#: the pieces of the edit template's 64 dropped tokens (Qwen2's pre-tokenizer split; "Ġ" = a leading space) and a
#: few instruction words. Words with a leading space come first: BPE applies merges by rank, and "user"'s chain
#: ranked before "Ġuser"'s would split " user" into two tokens.
_EDIT_PIECES = (
    "system", "Describe", "Ġthe", "Ġkey", "Ġfeatures", "Ġof", "Ġinput", "Ġimage", "Ġ(", "color", "Ġshape", "Ġsize",
    "Ġtexture", "Ġobjects", "Ġbackground", "),", "Ġthen", "Ġexplain", "Ġhow", "Ġuser", "'s", "Ġtext",
    "Ġinstruction", "Ġshould", "Ġalter", "Ġor", "Ġmodify", "ĠGenerate", "Ġa", "Ġnew", "Ġthat", "Ġmeets",
    "Ġrequirements", "Ġwhile", "Ġmaintaining", "Ġconsistency", "Ġwith", "Ġoriginal", "Ġwhere", "Ġappropriate",
    "user", "assistant", "Picture", "make", "Ġmake", "Ġit", "Ġturn", "Ġinto", "Ġadd", "Ġremove",
)  # fmt: skip
EDIT_WORDS: tuple[str, ...] = tuple(
    sorted(dict.fromkeys((*_EDIT_PIECES, *TEXT_TO_IMAGE_WORDS)), key=lambda word: not word.startswith("Ġ"))
)
#: the tiny image processor's pixel bounds: 56 x 56 (2 x 2 merged patches, 4 tokens) to 112 x 112 (16 tokens)
VLM_MIN_PIXELS = 56 * 56
VLM_MAX_PIXELS = 112 * 112
#: Qwen2.5-VL's image normalisation (OpenAI CLIP's mean and std), as the real preprocessor_config.json holds
_CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
_CLIP_STD = [0.26862954, 0.26130258, 0.27577711]


def build_tiny_qwen_image_edit_pipeline(
    path: str | os.PathLike[str],
    *,
    plus: bool = False,
    zero_cond_t: bool | None = None,
    seed: int = 0,
    shape: TinyQwenImageShape | None = None,
    overwrite: bool = False,
    exist_ok: bool = False,
) -> Path:
    """Write a random ``QwenImageEditPipeline`` (``plus``: ``QwenImageEditPlusPipeline``) to ``path``.

    ``zero_cond_t`` defaults to ``plus`` (a 2511-like Plus pipeline, a 2509-like one with ``zero_cond_t=False``).
    Weights depend only on ``seed`` and ``shape``; the directory appears atomically, and an existing ``path`` is an
    error unless ``overwrite`` or ``exist_ok`` (as :func:`~omni_rl_qwen_image.tiny.build_tiny_qwen_image_pipeline`).
    """
    shape = shape or TinyQwenImageShape()
    shape.check()
    zero_cond_t = plus if zero_cond_t is None else zero_cond_t

    def write(out: Path, scratch: Path) -> None:
        pipeline = random_edit_pipeline(shape, seed=seed, plus=plus, zero_cond_t=zero_cond_t, scratch=scratch)
        pipeline.save_pretrained(out, safe_serialization=True)
        write_qwen2_tokenizer(out / "tokenizer", EDIT_WORDS)
        write_processor(out / "processor")
        index_path = out / "model_index.json"
        index = json.loads(index_path.read_text(encoding="utf-8"))
        index["processor"] = ["transformers", "Qwen2VLProcessor"]
        index_path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n", encoding="utf-8")

    marker = {
        "builder": "omni_rl_qwen_image.edit_tiny.build_tiny_qwen_image_edit_pipeline",
        "plus": plus,
        "zero_cond_t": zero_cond_t,
        "seed": seed,
        "shape": attrs.asdict(shape),
        "random_weights": True,
    }
    label = "Qwen-Image-Edit-Plus" if plus else "Qwen-Image-Edit"
    return write_tiny_pipeline(path, write, label=label, marker=marker, overwrite=overwrite, exist_ok=exist_ok)


def build_tiny_qwen_image_edit_plus(path: str | os.PathLike[str], **options: Any) -> Path:
    """:func:`build_tiny_qwen_image_edit_pipeline` with ``plus=True`` (and ``zero_cond_t`` on): the
    ``qwen_image_edit_plus`` model's ``build_tiny_if_missing`` builder."""
    return build_tiny_qwen_image_edit_pipeline(path, plus=True, **options)


def write_processor(directory: Path) -> None:
    """The ``processor`` folder: ``preprocessor_config.json`` (Qwen2VLImageProcessor) and the tokenizer files."""
    write_qwen2_tokenizer(directory, EDIT_WORDS)
    config = {
        "image_processor_type": "Qwen2VLImageProcessor",
        "processor_class": "Qwen2VLProcessor",
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": _CLIP_MEAN,
        "image_std": _CLIP_STD,
        "rescale_factor": 1 / 255,
        "resample": 3,
        "min_pixels": VLM_MIN_PIXELS,
        "max_pixels": VLM_MAX_PIXELS,
        "patch_size": 14,
        "temporal_patch_size": 2,
        "merge_size": 2,
    }
    (directory / "preprocessor_config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


def random_edit_pipeline(shape: TinyQwenImageShape, *, seed: int, plus: bool, zero_cond_t: bool, scratch: Path) -> Any:
    """Every component with seeded random weights, in a pipeline object without a processor (it is written
    separately, :func:`write_processor`); the caller's global RNG is left alone."""
    import diffusers
    from diffusers import FlowMatchEulerDiscreteScheduler
    from transformers import Qwen2Tokenizer

    write_qwen2_tokenizer(scratch / "tokenizer", EDIT_WORDS)
    tokenizer = Qwen2Tokenizer.from_pretrained(scratch / "tokenizer")
    transformer, vae, text_encoder = seeded_components(
        seed,
        lambda: _transformer(shape, zero_cond_t=zero_cond_t),
        lambda: _vae(shape),
        lambda: _text_encoder(shape, words=EDIT_WORDS, vision_depth=2),
    )
    pipeline_class = getattr(diffusers, "QwenImageEditPlusPipeline" if plus else "QwenImageEditPipeline")
    return pipeline_class(
        transformer=transformer,
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=tokenizer,
        processor=None,
        scheduler=FlowMatchEulerDiscreteScheduler.from_config(QWEN_IMAGE_SCHEDULER),
    )
