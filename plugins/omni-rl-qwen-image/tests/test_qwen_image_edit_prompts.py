"""The Qwen2.5-VL side of Qwen-Image-Edit: the stand-in processor gives ``Qwen2VLProcessor``'s tensors, the tiny
tokenizer spells the edit template as the real one does, and the conditioning holds what the pipelines compute
(sizes, VAE latents, prompt embeddings), cached per (prompt, images)."""

from __future__ import annotations

import importlib.util
import inspect
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from omni_rl_qwen_image.edit import condition_size
from omni_rl_qwen_image.edit_prompts import VisionTextProcessor, vision_text_inputs
from omni_rl_qwen_image.edit_tiny import EDIT_WORDS
from PIL import Image
from qwen_image_edit_helpers import VAE_AREA, build_edit_model, source

from omni_rl.errors import RuntimeFailure

EDIT_TEXT = "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>make it blue<|im_end|>\n"
PLUS_TEXT = (
    "<|im_start|>user\nPicture 1: <|vision_start|><|image_pad|><|vision_end|>Picture 2: "
    "<|vision_start|><|image_pad|><|vision_end|>put Picture 2 on Picture 1<|im_end|>\n"
)


def _images(*shapes: tuple[int, int]) -> list[Image.Image]:
    return [Image.fromarray(source(h, w, k)) for k, (h, w) in enumerate(shapes)]


def _transformers_processor(stand_in: VisionTextProcessor):
    """transformers' own ``Qwen2VLProcessor`` holding the same image processor and tokenizer, built without its
    ``__init__``: the constructor's class checks resolve the video processor, which needs torchvision, but
    ``__call__`` (placeholder expansion, tokenising, image processing) does not."""
    from transformers import Qwen2VLProcessor

    processor = object.__new__(Qwen2VLProcessor)
    processor.tokenizer, processor.image_processor, processor.chat_template = (
        stand_in.tokenizer,
        stand_in.image_processor,
        None,
    )
    processor.image_token, processor.video_token = "<|image_pad|>", "<|video_pad|>"
    processor.image_token_id = stand_in.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    processor.video_token_id = stand_in.tokenizer.convert_tokens_to_ids("<|video_pad|>")
    return processor


CASES = [
    ([EDIT_TEXT], [(64, 96)]),
    ([PLUS_TEXT], [(64, 96), (72, 72)]),
    ([EDIT_TEXT, PLUS_TEXT], [(80, 80), (64, 64), (96, 64)]),  # a batch: padded, images in text order
]


@pytest.mark.parametrize(("texts", "shapes"), CASES, ids=["edit", "plus", "batch"])
def test_stand_in_returns_what_qwen2vl_processor_returns(tiny_edit_path: Path, texts, shapes) -> None:
    stand_in = VisionTextProcessor.from_pretrained(tiny_edit_path / "processor")
    images = _images(*shapes)
    expected = _transformers_processor(stand_in)(text=texts, images=images, padding=True, return_tensors="pt")
    got = stand_in(text=texts, images=images, padding=True, return_tensors="pt")
    assert set(got) == {"input_ids", "attention_mask", "pixel_values", "image_grid_thw"}
    for key, value in got.items():
        assert torch.equal(value, expected[key]), key
    pad = stand_in.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert int((got["input_ids"] == pad).sum()) == int(got["image_grid_thw"].prod(dim=1).sum()) // 4


@pytest.mark.skipif(importlib.util.find_spec("torchvision") is None, reason="Qwen2VLProcessor needs torchvision")
@pytest.mark.parametrize(("texts", "shapes"), CASES, ids=["edit", "plus", "batch"])
def test_stand_in_matches_the_loaded_processor_where_it_can_be_built(tiny_edit_path: Path, texts, shapes) -> None:
    """Where torchvision is installed: the real ``processor`` folder loaded by transformers gives the same ids and
    grids (and, with the same image processor backend, the same pixels)."""
    from transformers import Qwen2VLProcessor

    real = Qwen2VLProcessor.from_pretrained(tiny_edit_path / "processor")
    stand_in = VisionTextProcessor.from_pretrained(tiny_edit_path / "processor")
    images = _images(*shapes)
    expected = real(text=texts, images=images, padding=True, return_tensors="pt")
    got = stand_in(text=texts, images=images)
    for key in ("input_ids", "attention_mask", "image_grid_thw"):
        assert torch.equal(got[key], expected[key]), key
    torch.testing.assert_close(got["pixel_values"], expected["pixel_values"])


def test_placeholder_count_must_match_the_images(tiny_edit_path: Path) -> None:
    stand_in = VisionTextProcessor.from_pretrained(tiny_edit_path / "processor")
    with pytest.raises(ValueError, match=re.escape("2 <|image_pad|> placeholders for 1 images")):
        vision_text_inputs(stand_in.tokenizer, stand_in.image_processor, [PLUS_TEXT], _images((64, 64)))


def test_tiny_tokenizer_spells_the_edit_template_in_64_tokens(edit_pipe) -> None:
    """The pipelines drop 64 template tokens; the tiny vocabulary spells that prefix in exactly 64, and its vision
    tokens have the ids the text encoder's config names."""
    tokenizer = edit_pipe.processor.tokenizer
    template = edit_pipe.prompt_template_encode
    prefix = template.split("<|vision_start|>")[0]
    assert edit_pipe.prompt_template_encode_start_idx == 64
    assert len(tokenizer(prefix)["input_ids"]) == 64
    config = edit_pipe.text_encoder.config
    for token, name in (
        ("<|image_pad|>", "image_token_id"),
        ("<|vision_start|>", "vision_start_token_id"),
        ("<|vision_end|>", "vision_end_token_id"),
    ):
        assert tokenizer.convert_tokens_to_ids(token) == getattr(config, name)
    for word in EDIT_WORDS:
        assert len(tokenizer(word.replace("Ġ", " "))["input_ids"]) == 1, word
    # the processor's tokenizer and the pipeline's tokenizer folder are the same vocabulary
    assert edit_pipe.tokenizer.get_vocab() == tokenizer.get_vocab()


def test_condition_size_is_the_pipelines_calculate_dimensions() -> None:
    from diffusers.pipelines.qwenimage.pipeline_qwenimage_edit_plus import calculate_dimensions

    for area in (1024 * 1024, 384 * 384, VAE_AREA):
        for width, height in ((1024, 1024), (96, 64), (640, 480), (333, 1000), (1920, 1080)):
            assert condition_size(width, height, area) == calculate_dimensions(area, width / height)
    assert condition_size(2000, 50, 64 * 64) == (416, 32)  # the pipeline would make the height 0


def test_conditioning_holds_the_pipelines_condition(edit_model, edit_pipe) -> None:
    """The VAE copy's packed latents (the pipeline's _encode_vae_image and _pack_latents), its shape, and the
    pipeline's prompt embeddings of the same image (64 template tokens dropped: they start at <|vision_start|>)."""
    image = source(64, 96, 0)
    conditioning = edit_model.encode_conditions(["make it blue"], [(image,)], guidance_scale=4.0)
    tensors = conditioning.tensors
    assert tensors["condition_shapes"].tolist() == [[[1, 8, 12]]]  # 96 x 64 px, 4x VAE, 2x2 packing
    pil = Image.fromarray(image)
    pixels = edit_pipe.image_processor.preprocess(pil, 64, 96).unsqueeze(2)
    latents = edit_pipe._encode_vae_image(pixels, generator=None)
    packed = edit_pipe._pack_latents(latents, 1, 16, 16, 24)
    torch.testing.assert_close(tensors["condition_latents"], packed, rtol=0, atol=0)
    embeds, mask = edit_pipe.encode_prompt("make it blue", image=pil, device="cpu")
    assert mask is None
    torch.testing.assert_close(tensors["prompt_embeds"], embeds, rtol=0, atol=0)
    negative, _ = edit_pipe.encode_prompt(" ", image=pil, device="cpu")
    torch.testing.assert_close(tensors["negative_prompt_embeds"], negative, rtol=0, atol=0)
    # <|vision_start|>, 6 image tokens (a 56 x 84 VLM grid of 4 x 6 patches, merged 2 x 2), <|vision_end|>,
    # "make it blue" (3), then <|im_end|> \n <|im_start|> assistant \n
    assert tensors["prompt_embeds"].shape[1] == 1 + 6 + 1 + 3 + 5


def test_plus_prompts_get_picture_prefixes_and_a_smaller_vlm_copy(tiny_plus_path: Path, plus_pipe) -> None:
    model = build_edit_model(tiny_plus_path, plus=True, vlm_condition_max_area=None)  # the pipeline's 384 x 384
    images = (source(64, 96, 0), source(72, 72, 1))
    conditioning = model.encode_conditions(["swap them"], [images], guidance_scale=1.0)
    assert conditioning.tensors["condition_shapes"].tolist() == [[[1, 8, 12], [1, 8, 8]]]
    vlm = [
        plus_pipe.image_processor.resize(Image.fromarray(i), *condition_size(i.shape[1], i.shape[0], 384 * 384)[::-1])
        for i in images
    ]
    assert [v.size for v in vlm] == [(480, 320), (384, 384)]
    embeds, _ = plus_pipe.encode_prompt("swap them", image=vlm, device="cpu")
    torch.testing.assert_close(conditioning.tensors["prompt_embeds"], embeds, rtol=0, atol=0)
    template = plus_pipe.prompt_template_encode
    assert "{}" in template and "<|vision_start|>" not in template  # the vision blocks come with "Picture k:"
    assert re.search(r"Picture \{\}: <\|vision_start\|>", inspect.getsource(type(plus_pipe)._get_qwen_prompt_embeds))


def test_the_prompt_cache_is_keyed_by_prompt_and_images(tiny_edit_path: Path) -> None:
    model = build_edit_model(tiny_edit_path, plus=False)
    first, second = source(64, 96, 0), source(64, 96, 1)
    model.encode_conditions(["make it blue"], [(first,)], guidance_scale=4.0)
    assert model.prompts.encoded_count == 2  # the prompt and the negative prompt, each with the image
    again = model.encode_conditions(["make it blue"], [(first,)], guidance_scale=4.0)
    assert model.prompts.encoded_count == 2
    other = model.encode_conditions(["make it blue"], [(second,)], guidance_scale=4.0)
    assert model.prompts.encoded_count == 4
    assert not torch.equal(again.tensors["prompt_embeds"], other.tensors["prompt_embeds"])
    uncached = build_edit_model(tiny_edit_path, plus=False, prompt_cache_size=0)
    fresh = uncached.encode_conditions(["make it blue"], [(first,)], guidance_scale=4.0)
    for key, value in fresh.tensors.items():
        assert torch.equal(value, again.tensors[key]), key


def test_errors_say_what_to_change(edit_model, plus_model) -> None:
    with pytest.raises(RuntimeFailure, match="condition image") as error:
        edit_model.encode_prompts(["make it blue"], guidance_scale=1.0)
    assert "'image'" in error.value.hint
    with pytest.raises(RuntimeFailure, match="takes 1 to 1 condition images per prompt, got 2"):
        edit_model.encode_conditions(["x"], [(source(64, 64, 0), source(64, 64, 1))], guidance_scale=1.0)
    with pytest.raises(RuntimeFailure, match="takes 1 to 3 condition images per prompt, got 4"):
        plus_model.encode_conditions(["x"], [tuple(source(64, 64, k) for k in range(4))], guidance_scale=1.0)
    with pytest.raises(RuntimeFailure, match=r"uint8 \(H, W, 3\)"):
        edit_model.encode_conditions(["x"], [(np.zeros((64, 64), np.uint8),)], guidance_scale=1.0)
    with pytest.raises(RuntimeFailure, match="negative_prompt_embeds"):
        conditioning = edit_model.encode_conditions(["x"], [(source(64, 64, 0),)], guidance_scale=1.0)
        edit_model.predict_velocity(torch.zeros(1, 16, 8, 8), torch.ones(1), conditioning, 4.0)
