"""Pretrain the tiny shapes edit model (``python -m omni_rl_shapes.pretraining.edit``): a QwenImageEditPipeline.

Why Qwen-Image-Edit: the shapes text-to-image model that ships (``pretrained_qwen_image``) is a QwenImagePipeline,
and QwenImageEditPipeline is that pipeline plus a condition: the same ``QwenImageTransformer2DModel`` (the source's
VAE tokens are appended to the target's, RoPE frame 1, the output cropped back), the same ``AutoencoderKLQwenImage``
and the same Qwen2.5-VL text encoder, which now also sees the source through its vision tower. So the edit model
starts from the shapes model's trained transformer and VAE unchanged and only has to learn to read the condition
tokens; FLUX.1-Kontext would have to start from random weights (no shipped Flux shapes model).

1. Build (no ``--init-from``): the tiny ``QwenImageEditPipeline`` builder's directory (edit tokenizer, a two-block
   vision tower, the processor folder) with the text-to-image model's sizes (``arch.qwen_image_shape``); then the
   shipped shapes model's transformer, VAE and scheduler copied in, and its text encoder's weights loaded into the
   new one (every text layer, and the embedding of every token the two tokenizers share, by token string; the
   vision tower stays random and frozen, as the text encoder is).
2. Train the transformer (all weights) with the rectified-flow objective (:mod:`.flow_matching`) on (source,
   instruction, target) triples of the *train* split (:mod:`.edit_data`: the 300 shipped tasks plus ``--extra-tasks``
   drawn from the same split), the source as the model's condition, exactly as RL feeds it: the prompt embeddings
   and condition tokens come from the ``qwen_image_edit`` model's own ``encode_conditions``; the unconditional
   input of CFG dropout is the negative prompt " " with the same source.
3. Every ``--eval-every`` steps evaluate the EMA weights with ``omni-rl eval``'s loop on the ``shapes_edit``
   benchmark (val split, 96 images) under the RL example's eval settings; stop by :func:`.pretrain.choose_checkpoint`
   on ``--target-low``/``--target-high`` (a clean stage aims high, the flaw stage at the shipped band).
4. ``--init-from`` continues an edit pipeline (a fresh optimizer), with ``--flaw disturb --flaw-rate R``: a share
   of the training targets move an object the instruction does not touch (the flaw RL removes).
5. Save the pipeline (transformer in ``--save-dtype``) and its record (``omni_rl_shapes_pretrain.json``: command,
   seeds, timings, evaluations, the val re-measured from disk, and the ``omni-rl eval`` command that reproduces it).

Deterministic for a seed and thread count (one thread by default).
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from omni_rl_shapes.evaluate import RECORD_FILE
from omni_rl_shapes.pretraining.edit_data import EDIT_FLAWS, rows_for, training_samples
from omni_rl_shapes.pretraining.flow_matching import FlowMatchingTrainer, FlowTraining
from omni_rl_shapes.pretraining.pretrain import choose_checkpoint, closest_to_band

MODULE = "omni_rl_shapes.pretraining.edit"
SIZE = 32
#: val tasks of the record's quick subset score (``omni-rl eval --limit 6``: one task of each kind or so)
SUBSET_LIMIT = 6


@attrs.frozen(kw_only=True)
class EditEval:
    """How val is measured: ``omni-rl eval --benchmark shapes_edit`` with the RL example's eval rollout."""

    steps: int = 10
    cfg: float = 4.5
    images_per_prompt: int = 2
    seed: int = 0
    condition_max_area: int = SIZE * SIZE
    #: prompts evaluated during training (None: all 48; ``omni-rl eval --limit``): a quick test's evaluations
    limit: int | None = None

    def model_options(self, path: str) -> dict[str, Any]:
        return {"path": path, "lora_rank": 0, "condition_max_area": self.condition_max_area}

    def rollout_options(self) -> dict[str, Any]:
        return {"eval_steps": self.steps, "height": SIZE, "width": SIZE, "cfg": self.cfg, "batch_size": 48}

    def command(self, path: str) -> str:
        sets = ["model.name=qwen_image_edit", f"model.options.condition_max_area={self.condition_max_area}"]
        sets += [f"rollout.options.{k}={v}" for k, v in self.rollout_options().items()]
        flags = " ".join(f"--set {s}" for s in sets)
        return f"omni-rl eval {path} --benchmark shapes_edit --images-per-prompt {self.images_per_prompt} {flags}"


def text_to_image_dir() -> Path:
    from omni_rl_shapes import pretrained_path

    return pretrained_path("qwen_image")


def build(directory: Path, seed: int, source: Path) -> Path:
    """The tiny edit pipeline with the text-to-image shapes model ``source``'s weights (see the module docstring)."""
    import torch
    from omni_rl_qwen_image.edit_tiny import EDIT_WORDS, build_tiny_qwen_image_edit_pipeline
    from omni_rl_qwen_image.tiny_tokenizer import TEXT_TO_IMAGE_WORDS, vocab_and_merges
    from safetensors.torch import load_file, save_file

    from omni_rl_shapes.pretraining.arch import qwen_image_shape

    built = build_tiny_qwen_image_edit_pipeline(directory, seed=seed, shape=qwen_image_shape())
    for name in ("transformer", "vae", "scheduler"):
        shutil.rmtree(built / name)
        shutil.copytree(source / name, built / name)
    weights_file = built / "text_encoder" / "model.safetensors"
    mine, theirs = load_file(weights_file), load_file(source / "text_encoder" / "model.safetensors")
    old_vocab, new_vocab = vocab_and_merges(TEXT_TO_IMAGE_WORDS)[0], vocab_and_merges(EDIT_WORDS)[0]
    for key, value in theirs.items():
        if "visual" in key or key not in mine:
            continue
        if mine[key].shape == value.shape:
            mine[key] = value.to(mine[key].dtype)
        elif key.endswith("embed_tokens.weight") or key.startswith("lm_head"):
            rows = [(new_vocab[t], i) for t, i in old_vocab.items() if t in new_vocab]
            new, old = torch.tensor([r[0] for r in rows]), torch.tensor([r[1] for r in rows])
            mine[key] = mine[key].clone()
            mine[key][new] = value[old].to(mine[key].dtype)
    save_file(mine, weights_file, metadata={"format": "pt"})
    return built


def load(directory: Path, evaluation: EditEval) -> Any:
    """The ``qwen_image_edit`` model by path, as an RL run builds it."""
    import omni_rl
    from omni_rl.context import BuildContext

    options = evaluation.model_options(str(directory))
    return omni_rl.build("model", "qwen_image_edit", options, BuildContext(device="cpu"))


def encode(model: Any, samples: Sequence[Any], guidance: float) -> tuple[Any, Any]:
    """(target latents (N, C, h, w), conditioning of 2N rows): rows i < N the instruction with its source, row
    N + i the negative prompt with the same source (in the positive keys), what CFG dropout trains against."""
    import torch
    from omni_rl_qwen_image.edit_prompts import NEGATIVE, POSITIVE

    from omni_rl.batch import Conditioning

    targets = torch.from_numpy(np.stack([s.target for s in samples]))
    latents = torch.cat([model.encode_images(targets[i : i + 64]) for i in range(0, len(samples), 64)])
    with torch.no_grad():
        both = model.encode_conditions(
            [s.prompt for s in samples], [[s.source] for s in samples], guidance_scale=guidance
        )
    tensors = dict(both.tensors)
    negatives = {k: v for k, v in tensors.items() if not k.startswith(NEGATIVE)}
    negatives[POSITIVE], negatives[f"{POSITIVE}_mask"] = tensors[NEGATIVE], tensors[f"{NEGATIVE}_mask"]
    positives = {k: v for k, v in tensors.items() if not k.startswith(NEGATIVE)}
    return latents, Conditioning.concat([Conditioning(positives), Conditioning(negatives)])


def val_score(
    model: Any, evaluation: EditEval, samples_dir: Path | None = None, limit: int | None = None
) -> dict[str, float]:
    """``omni-rl eval --benchmark shapes_edit [--limit N]`` on ``model`` (its current weights), in-process."""
    import omni_rl
    from omni_rl.context import BuildContext
    from omni_rl.evaluation.generator import Generator
    from omni_rl.evaluation.loop import EvalSettings, run_eval
    from omni_rl_shapes.edit.benchmark import ShapesEditBenchmark

    ctx = BuildContext(device="cpu")
    sampler = omni_rl.build("sampler", "ode", {}, ctx)
    rollout = omni_rl.build("rollout", "diffusers", evaluation.rollout_options(), ctx)
    generator = Generator(model=model, sampler=sampler, rollout=rollout, info={"target": "pretrain", "kind": "model"})
    settings = EvalSettings(
        benchmark="shapes_edit", images_per_prompt=evaluation.images_per_prompt, seed=evaluation.seed, limit=limit
    )
    with tempfile.TemporaryDirectory() as out:
        summary = run_eval(ShapesEditBenchmark(), generator, Path(out), settings)
        if samples_dir is not None:
            samples_dir.mkdir(parents=True, exist_ok=True)
            for name in ("failures.png", "report.md"):
                if (Path(out) / name).is_file():
                    shutil.copy(Path(out) / name, samples_dir / name)
    return {"score": summary.overall, "strict": summary.correct_images} | {r.name: r.score for r in summary.rows}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    defaults = FlowTraining()
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="pipeline directory to (re)write")
    parser.add_argument("--init-from", type=Path, default=None, help="continue this QwenImageEditPipeline")
    parser.add_argument(
        "--text-to-image",
        type=Path,
        default=None,
        help="without --init-from: the QwenImagePipeline to start from (default: the shipped shapes model)",
    )
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--cosine-decay", action="store_true")
    parser.add_argument("--ema-decay", type=float, default=defaults.ema_decay)
    parser.add_argument("--warmup-steps", type=int, default=defaults.warmup_steps)
    parser.add_argument("--extra-tasks", type=int, default=1500, help="train-split tasks drawn beyond the 300 shipped")
    parser.add_argument("--flaw", choices=EDIT_FLAWS, default=None)
    parser.add_argument("--flaw-rate", type=float, default=0.0)
    parser.add_argument("--eval-from", type=int, default=200)
    parser.add_argument("--eval-every", type=int, default=200)
    parser.add_argument("--target-low", type=float, default=0.35)
    parser.add_argument("--target-high", type=float, default=0.55)
    parser.add_argument("--max-minutes", type=float, default=60.0)
    parser.add_argument("--save-dtype", choices=("float32", "float16"), default="float16")
    parser.add_argument("--samples-dir", type=Path, default=None)
    parser.add_argument(
        "--val-limit", type=int, default=None, help="evaluate this many val tasks during training (default all 48)"
    )
    args = parser.parse_args(argv)
    if not 0.0 <= args.flaw_rate <= 1.0:
        parser.error(f"--flaw-rate must be between 0 and 1, got {args.flaw_rate}")
    if args.flaw_rate and args.flaw is None:
        parser.error("--flaw-rate needs --flaw")
    if args.init_from is not None and args.text_to_image is not None:
        parser.error("--text-to-image starts a new model; --init-from continues one: give one of them")
    for path in (args.init_from, args.text_to_image):
        if path is not None and not (path / "model_index.json").is_file():
            parser.error(f"{path} is not a pipeline directory (no model_index.json)")
    return args


def _log(started: float, message: str) -> None:
    print(f"[{time.monotonic() - started:7.1f}s] {message}", flush=True)


def _init_record(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    record_file = path / RECORD_FILE
    return {"path": str(path)} | (json.loads(record_file.read_text(encoding="utf-8")) if record_file.is_file() else {})


def _mark_pretrained(built: Path) -> None:
    """The tiny builder's marker file says the weights are trained now, and by what."""
    from omni_rl_pipelines.tiny import TINY_MARKER

    marker_path = built / TINY_MARKER
    marker = json.loads(marker_path.read_text(encoding="utf-8"))
    marker |= {"random_weights": False, "pretrained_by": MODULE, "record": RECORD_FILE}
    marker_path.write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    import diffusers
    import torch

    from omni_rl_shapes.pretraining.arch import QwenImageArchitecture, save_trained

    args = parse_args(argv)
    started = time.monotonic()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    evaluation = EditEval(limit=args.val_limit)
    flow = FlowTraining(
        batch_size=args.batch_size,
        lr=args.lr,
        ema_decay=args.ema_decay,
        warmup_steps=args.warmup_steps,
        cosine_decay_steps=args.steps if args.cosine_decay else 0,
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{args.out.name}.", dir=args.out.parent))
    try:
        if args.init_from is None:
            source = args.text_to_image or text_to_image_dir()
            built = build(staging / "pipeline", args.seed, source)
            start_from = {"text_to_image": str(source), "record": _init_record(source)}
        else:
            built = Path(shutil.copytree(args.init_from, staging / "pipeline"))
            (built / RECORD_FILE).unlink(missing_ok=True)
            start_from = _init_record(args.init_from)
        model = load(built, evaluation)
        rows = rows_for(args.extra_tasks, SIZE)
        samples, flawed = training_samples(rows, SIZE, args.flaw, args.flaw_rate, args.seed)
        latents, conditioning = encode(model, samples, evaluation.cfg)
        n = len(samples)
        _log(started, f"data: {n} train tasks, {flawed} flawed ({args.flaw}), latents {tuple(latents.shape[1:])}")

        def velocity(x_t: Any, sigma: Any, ids: Any) -> Any:
            return model.predict_velocity(x_t, sigma, conditioning.index(ids), 1.0)

        trainer = FlowMatchingTrainer(
            model.transformer,
            latents,
            torch.arange(n),
            velocity,
            lambda ids: ids + n,  # the negative prompt with the sample's own source
            shift=QwenImageArchitecture().shift(model),
            settings=flow,
            seed=args.seed,
        )
        evals: list[dict[str, Any]] = []
        snapshots: list[dict[str, Any]] = []
        losses: list[float] = []
        chosen: int | None = None
        while trainer.steps_done < args.steps:
            losses.append(trainer.step())
            step = trainer.steps_done
            out_of_time = (time.monotonic() - started) / 60 > args.max_minutes
            if step % 50 == 0:
                _log(started, f"step {step:5d}  loss {np.mean(losses[-50:]):.4f}")
            due = step >= args.eval_from and step % args.eval_every == 0
            if not due and step < args.steps and not out_of_time:
                continue
            samples_dir = args.samples_dir / f"step{step:05d}" if args.samples_dir else None
            with trainer.averaged_weights():
                metrics = val_score(model, evaluation, samples_dir, evaluation.limit)
                snapshots.append(copy.deepcopy(model.transformer.state_dict()))
            evals.append({"step": step, "loss": float(np.mean(losses[-args.eval_every :]))} | metrics)
            _log(started, f"step {step:5d}  val " + json.dumps({k: round(v, 4) for k, v in metrics.items()}))
            chosen = choose_checkpoint([e["score"] for e in evals], args.target_low, args.target_high)
            if chosen is not None or out_of_time:
                break
        if chosen is None:
            chosen = closest_to_band([e["score"] for e in evals], args.target_low, args.target_high)
        model.transformer.load_state_dict(snapshots[chosen])
        save_trained(model.transformer, model.vae, built, getattr(torch, args.save_dtype))
        shipped = load(built, evaluation)
        val = val_score(shipped, evaluation)
        #: a quick check of the shipped weights (`omni-rl eval --limit`), what a fast test re-measures
        val_subset = {"limit": SUBSET_LIMIT, "score": val_score(shipped, evaluation, limit=SUBSET_LIMIT)["score"]}
        _log(started, f"kept step {evals[chosen]['step']}; reloaded from disk, val {val['score']:.4f}")
        command = f"python -m {MODULE} " + " ".join(argv if argv is not None else sys.argv[1:])
        record = {
            "command": command.strip(),
            "seed": args.seed,
            "threads": args.threads,
            "arch": "qwen_image_edit",
            "image_size": SIZE,
            "transformer": attrs.asdict(flow)
            | {
                "max_steps": args.steps,
                "steps": evals[chosen]["step"],
                "train_tasks": n,
                "extra_tasks": args.extra_tasks,
            },
            "flaw": args.flaw,
            "flaw_rate": args.flaw_rate,
            "flawed_tasks": flawed,
            "save_dtype": args.save_dtype,
            "init_from": start_from,
            "target_band": [args.target_low, args.target_high],
            "evals": evals,
            "evaluation": attrs.asdict(evaluation) | {"command": evaluation.command("PIPELINE_DIR")},
            "val": val,
            "val_subset": val_subset,
            "wall_time_s": round(time.monotonic() - started, 1),
            "versions": {"torch": torch.__version__, "diffusers": diffusers.__version__},
            "machine": platform.processor() or platform.machine(),
        }
        (built / RECORD_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        _mark_pretrained(built)
        if args.out.exists():
            args.out.rename(staging / "previous")
        built.rename(args.out)
        _log(started, f"wrote {args.out}")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
