"""LoRA Flow-GRPO at the real model sizes on one GPU (`nox -s bench_real_sizes`): SD3.5-Large, FLUX.1-dev, Qwen-Image.

Each transformer is built with its published dimensions (benchmarks/real_size_specs.py) and random weights in
seconds (benchmarks/meta_build.py: meta-device init, weights filled on the GPU), in bfloat16 with gradient
checkpointing and peft LoRA at the recipe's rank on the attention projections. One training step is timed as
Flow-GRPO runs it: the rollout (``steps`` transformer calls per image, CFG rows batched when ``cfg > 1``, no
grad) and the update (forward + backward over the SDE window of 2 steps, one micro-batch at a time, AdamW on the
LoRA weights). Prompt embeddings are random tensors of the real text length and width: with the prompt cache and
the text encoder offloaded (the options each row names) the encoder runs once per distinct prompt, not per step,
so it is timed and measured separately (T5-XXL for SD3.5 and FLUX, Qwen2.5-VL-7B's language model for Qwen-Image,
built the same way, one encode of a batch of prompts). The VAE decode is not included. MFU counts transformer
FLOPs only (benchmarks/flops.py). Writes its section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from meta_build import build_on_device, parameter_count
from real_size_specs import QWEN25_VL_7B_TEXT, SIZES, T5_XXL, RealSize, transformer_factory

SECTION = "## Real sizes on one GPU (`nox -s bench_real_sizes`)"
WINDOW = 2
LORA_TARGETS = ["to_q", "to_k", "to_v", "to_out.0", "add_q_proj", "add_k_proj", "add_v_proj", "to_add_out"]


def cuda_unavailable_reason() -> str | None:
    """Why the table cannot be measured here, or None when a CUDA device is usable."""
    if torch.cuda.is_available():
        return None
    return (
        f"no CUDA device (torch {torch.__version__}): the real sizes need one GPU with 80 GB; run "
        "`nox -s bench_real_sizes` on a GPU machine"
    )


@dataclass
class Row:
    label: str
    params_b: float
    options: str
    fits: bool
    peak_gib: float = float("nan")
    images_per_s: float = float("nan")
    step_s: float = float("nan")
    mfu: float = float("nan")
    encoder: str = ""
    note: str = ""

    def cells(self) -> list[str]:
        if not self.fits:
            return [self.label, f"{self.params_b:.2f}", self.options, "no", "—", "—", "—", "—", self.encoder]
        return [
            self.label,
            f"{self.params_b:.2f}",
            self.options,
            "yes",
            f"{self.peak_gib:.1f}",
            f"{self.images_per_s:.2f}",
            f"{self.step_s:.1f}",
            f"{self.mfu:.0%}",
            self.encoder,
        ]


def text_tokens(size: RealSize) -> int:
    return {"sd3": 77 + 256, "flux": 512, "qwen_image": 512}[size.model]


def model_inputs(size: RealSize, transformer: Any, batch: int, height: int, device: Any) -> dict[str, Any]:
    """Random inputs of one transformer call for ``batch`` rows at ``height`` px, shaped as the pipeline makes
    them (SD3: latents + pooled; FLUX: 2x2-packed tokens, ids and the guidance embedding; Qwen-Image: packed
    tokens, a text mask and the image shapes)."""
    config = transformer.config
    dtype = next(transformer.parameters()).dtype
    latent = height // 8
    tokens = text_tokens(size)
    t = torch.full((batch,), 500.0, device=device)
    text = torch.randn(batch, tokens, config.joint_attention_dim, device=device, dtype=dtype)
    if size.model == "sd3":
        return dict(
            hidden_states=torch.randn(batch, config.in_channels, latent, latent, device=device, dtype=dtype),
            timestep=t,
            encoder_hidden_states=text,
            pooled_projections=torch.randn(batch, config.pooled_projection_dim, device=device, dtype=dtype),
        )
    image = (latent // 2) ** 2
    hidden = torch.randn(batch, image, config.in_channels, device=device, dtype=dtype)
    if size.model == "flux":
        side = torch.arange(latent // 2, device=device, dtype=dtype)
        img_ids = torch.stack(
            [
                torch.zeros(image, device=device, dtype=dtype),
                side.repeat_interleave(latent // 2),
                side.repeat(latent // 2),
            ],
            dim=1,
        )
        return dict(
            hidden_states=hidden,
            timestep=t / 1000,
            guidance=torch.full((batch,), 3.5, device=device),
            pooled_projections=torch.randn(batch, config.pooled_projection_dim, device=device, dtype=dtype),
            encoder_hidden_states=text,
            txt_ids=torch.zeros(tokens, 3, device=device, dtype=dtype),
            img_ids=img_ids,
        )
    return dict(
        hidden_states=hidden,
        timestep=t / 1000,
        encoder_hidden_states=text,
        encoder_hidden_states_mask=torch.ones(batch, tokens, device=device, dtype=torch.long),
        img_shapes=[[(1, latent // 2, latent // 2)]] * batch,
    )


def prepare(transformer: Any, size: RealSize) -> list[torch.nn.Parameter]:
    """LoRA at the recipe's rank (float32 weights) and gradient checkpointing; returns the trained weights."""
    from peft import LoraConfig

    transformer.add_adapter(
        LoraConfig(
            r=size.lora_rank, lora_alpha=size.lora_alpha, init_lora_weights="gaussian", target_modules=LORA_TARGETS
        )
    )
    params = [p for n, p in transformer.named_parameters() if "lora_" in n]
    for p in params:
        p.data = p.data.float()
        p.requires_grad_(True)
    if size.memory_options.get("gradient_checkpointing"):
        transformer.enable_gradient_checkpointing()
    return params


def train_step(
    size: RealSize, transformer: Any, optimizer: Any, images: int, chunk: int, micro: int, device: Any
) -> None:
    """One Flow-GRPO step's transformer work: the rollout's calls, then the update's forward + backward."""
    rows = 2 if size.cfg > 1 else 1
    with torch.no_grad():
        for _ in range(0, images, chunk):
            inputs = model_inputs(size, transformer, min(chunk, images) * rows, size.height, device)
            for _ in range(size.steps):
                transformer(**inputs, return_dict=False)
    optimizer.zero_grad(set_to_none=True)
    for _ in range(0, images, micro):
        for _ in range(WINDOW):
            inputs = model_inputs(size, transformer, min(micro, images) * rows, size.height, device)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda"):
                out = transformer(**inputs, return_dict=False)[0]
            out.float().square().mean().backward()
    optimizer.step()


def encoder_line(size: RealSize, device: Any) -> str:
    """Build the real text encoder (meta init, weights on the GPU), encode one batch of 8 prompts, free it."""
    import transformers

    if size.model == "qwen_image":
        config = transformers.Qwen2Config(**QWEN25_VL_7B_TEXT)
        factory, name = (lambda: transformers.Qwen2Model(config)), "Qwen2.5-VL-7B text"
        ids = torch.randint(0, 1000, (8, 512), device=device)
    else:
        config = transformers.T5Config(**T5_XXL)
        factory, name = (lambda: transformers.T5EncoderModel(config)), "T5-XXL"
        ids = torch.randint(0, 1000, (8, 512 if size.model == "flux" else 256), device=device)
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    encoder = build_on_device(factory, device)
    built = time.perf_counter() - start
    with torch.no_grad():
        encoder(input_ids=ids)
        torch.cuda.synchronize()
        start = time.perf_counter()
        encoder(input_ids=ids)
        torch.cuda.synchronize()
    encode = time.perf_counter() - start
    params = parameter_count(encoder) / 1e9
    del encoder
    torch.cuda.empty_cache()
    peak = torch.cuda.max_memory_allocated() / 2**30
    return f"{name} {params:.1f} B: built in {built:.1f} s, 8 prompts in {encode:.2f} s, peak {peak:.0f} GiB"


def measure(size: RealSize, repeats: int, chunk: int, micro: int) -> Row:
    from flops import forward_flops, peak_flops

    device = torch.device("cuda")
    options = ", ".join(f"{k}={v}" for k, v in size.memory_options.items() if v is not False)
    encoder = encoder_line(size, device)
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    transformer = build_on_device(transformer_factory(size), device)
    built = time.perf_counter() - start
    params = parameter_count(transformer)
    row = Row(size.label, params / 1e9, options, fits=True, encoder=encoder, note=f"built in {built:.1f} s")
    trained = prepare(transformer, size)
    optimizer = torch.optim.AdamW(trained, lr=1e-5)
    images = size.group_size * 2
    try:
        train_step(size, transformer, optimizer, images, chunk, micro, device)  # warm-up
        times = []
        for _ in range(repeats):
            torch.cuda.synchronize()
            start = time.perf_counter()
            train_step(size, transformer, optimizer, images, chunk, micro, device)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
    except torch.cuda.OutOfMemoryError:
        row.fits = False
        return row
    step = statistics.median(times)
    config = transformer.config
    width = config.num_attention_heads * config.attention_head_dim
    layers = config.num_layers + getattr(config, "num_single_layers", 0)
    image_tokens = (size.height // 16) ** 2
    forward = forward_flops(params, layers, width, image_tokens, text_tokens(size))
    rows = images * (2 if size.cfg > 1 else 1)
    flops = forward * rows * (size.steps + 3 * WINDOW)
    peak = peak_flops(torch.cuda.get_device_name())
    row.peak_gib = torch.cuda.max_memory_allocated() / 2**30
    row.step_s = step
    row.images_per_s = images / step
    row.mfu = flops / step / peak if peak else float("nan")
    del transformer, optimizer
    torch.cuda.empty_cache()
    return row


def section(rows: list[Row], chunk: int, micro: int, repeats: int) -> str:
    head = (
        "| model | transformer B params | memory options | fits | peak GiB | images/s | s per step | MFU "
        "| text encoder |"
    )
    lines = [
        SECTION,
        "",
        f"Measured {time.strftime('%Y-%m-%d')} on {torch.cuda.get_device_name()}, torch {torch.__version__}; median "
        f"of {repeats} steps after a warm-up. LoRA Flow-GRPO: 2 prompts x group size, recipe resolution, 10 steps, "
        f"window {WINDOW}, {chunk} samples per rollout call, micro-batch {micro}, bf16, transformer only "
        "(benchmarks/real_sizes.py says what is left out).",
        "",
        head,
        "|" + "---|" * 9,
        *("| " + " | ".join(row.cells()) + " |" for row in rows),
    ]
    return "\n".join(lines) + "\n"


def write_section(path: Path, text: str) -> None:
    """Replace this script's section of docs/benchmarks.md (up to the next ``## ``), or append it."""
    doc = path.read_text(encoding="utf-8")
    if SECTION in doc:
        start = doc.index(SECTION)
        end = doc.find("\n## ", start + len(SECTION))
        doc = doc[:start] + text + (doc[end + 1 :] if end != -1 else "")
    else:
        doc = doc.rstrip("\n") + "\n\n" + text
    path.write_text(doc, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", choices=sorted(SIZES), default=sorted(SIZES))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--chunk", type=int, default=8, help="samples per rollout transformer call")
    parser.add_argument("--micro-batch", type=int, default=2)
    parser.add_argument("--out", default="docs/benchmarks.md")
    args = parser.parse_args(argv)
    if reason := cuda_unavailable_reason():
        print(f"bench_real_sizes skipped: {reason}")
        return 0
    rows: list[Row] = []
    for key in args.sizes:  # written after every size: a run stopped at its time limit keeps what it measured
        rows.append(measure(SIZES[key], args.repeats, args.chunk, args.micro_batch))
        print(rows[-1], flush=True)
        write_section(Path(args.out), section(rows, args.chunk, args.micro_batch, args.repeats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
