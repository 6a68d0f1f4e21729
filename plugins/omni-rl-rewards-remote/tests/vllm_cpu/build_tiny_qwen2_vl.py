"""A tiny random Qwen2-VL judge directory, built offline, that vLLM's CPU build loads and serves (``nox -s vllm``).

``python build_tiny_qwen2_vl.py OUT_DIR`` (with the vLLM venv's python: saved by the transformers vLLM pins).
What vLLM needs of it: ``Qwen2VLForConditionalGeneration`` (~0.7 M parameters: text width 128 with head size 64,
which vLLM's CPU attention accepts, 2 layers; a 2-layer vision tower of width 64), a byte-level BPE tokenizer
trained here with ``tokenizers`` on a few sentences plus Qwen's special tokens and a chat template with image
parts, and an image processor limited to 56x56-112x112 pixels (a 64x64 image is 4 image tokens). The weights are
random (seeded) but for one edit that makes the judge answer yes or no (:func:`favour_yes_no`), so that both
``score = "parse"`` and ``score = "yes_prob"`` have something to read; the same on every start, log-probs included.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SPECIALS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] in ['image', 'image_url'] %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CORPUS = [
    "Does this image show the prompt? Answer yes or no.",
    "Yes. No. yes no Yes No YES NO",
    "You are given a text caption and a generated image based on that caption.",
    "Final Score: 1 2 3 4 5. Rate the alignment of the image with the caption from 1 to 5.",
    "a red circle above a blue square, two green triangles, the quick brown fox jumps over the lazy dog",
]


def build_tokenizer(out: Path) -> int:
    """Train the byte-level BPE tokenizer and save it; its vocabulary size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(CORPUS * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>", unk_token=None
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    return tokenizer.get_vocab_size()


def favour_yes_no(model, tokenizer) -> list[int]:
    """Make "yes"/"no" tokens the likeliest answers whatever the input, their balance still the random weights':
    every token embedding gets a constant +10 in hidden dimension 0, no layer writes to dimension 0 (row 0 of every
    attention output and MLP down projection zeroed), so the last position's normed hidden state is positive
    there; the output rows of the yes/no tokens get +0.5 in dimension 0, every other row 0. Returns their ids."""
    import torch

    words = {"yes", "no"}
    ids = [i for token, i in tokenizer.get_vocab().items() if token.strip().strip("\u0120\u2581").lower() in words]
    language = model.model.language_model
    with torch.no_grad():
        language.embed_tokens.weight[:, 0] = 10.0
        for layer in language.layers:
            layer.self_attn.o_proj.weight[0, :] = 0.0
            layer.mlp.down_proj.weight[0, :] = 0.0
        model.lm_head.weight[:, 0] = 0.0
        model.lm_head.weight[ids, 0] = 0.5
    return ids


def build(out: Path, seed: int = 0) -> Path:
    import torch
    from transformers import (
        AutoTokenizer,
        Qwen2VLConfig,
        Qwen2VLForConditionalGeneration,
        Qwen2VLImageProcessor,
        Qwen2VLProcessor,
    )

    out.mkdir(parents=True, exist_ok=True)
    vocab = build_tokenizer(out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in SPECIALS}
    config = Qwen2VLConfig(
        text_config={
            "vocab_size": vocab,
            "hidden_size": 128,
            "intermediate_size": 256,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "max_position_embeddings": 1024,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [8, 12, 12]},
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"],
            "pad_token_id": ids["<|endoftext|>"],
        },
        vision_config={
            "depth": 2,
            "embed_dim": 64,
            "hidden_size": 128,
            "num_heads": 1,
            "mlp_ratio": 2,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
        },
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )
    torch.manual_seed(seed)
    model = Qwen2VLForConditionalGeneration(config).to(torch.float32).eval()
    answers = favour_yes_no(model, tokenizer)
    model.save_pretrained(out)
    image_processor = Qwen2VLImageProcessor(min_pixels=56 * 56, max_pixels=112 * 112)
    try:
        processor = Qwen2VLProcessor(image_processor=image_processor, tokenizer=tokenizer, chat_template=CHAT_TEMPLATE)
    except TypeError:  # transformers that require a video processor
        from transformers import Qwen2VLVideoProcessor

        processor = Qwen2VLProcessor(
            image_processor=image_processor,
            tokenizer=tokenizer,
            video_processor=Qwen2VLVideoProcessor(),
            chat_template=CHAT_TEMPLATE,
        )
    processor.save_pretrained(out)
    (out / "omni_rl_tiny.json").write_text(
        json.dumps({"seed": seed, "parameters": model.num_parameters(), "yes_no_ids": answers})
    )
    return out


if __name__ == "__main__":
    print(build(Path(sys.argv[1])))
