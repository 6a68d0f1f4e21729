"""``omni-rl eval TARGET --benchmark NAME``: sample a benchmark's prompts with a run's (or a pipeline's) model,
score them with the benchmark plugin and print its table (omni_rl.evaluation)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.text import Text

from omni_rl.cli.output import Output
from omni_rl.context import BuildContext
from omni_rl.errors import ConfigError
from omni_rl.quiet import quiet_libraries
from omni_rl.registry import Registry
from omni_rl.writable import writable_directory

#: ``--set benchmark.<option>=value`` sets the benchmark's options; every other ``--set`` the generator's config
BENCHMARK_PREFIX = "benchmark."


def add_eval_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """The ``eval`` sub-command's arguments (kept here so cli/__init__.py grows by one line)."""
    evaluate = commands.add_parser(
        "eval", parents=[common], help="score a run's checkpoint (or a pipeline) on a benchmark a plugin provides"
    )
    evaluate.add_argument("target", metavar="RUN_DIR|PIPELINE_DIR", help="a run directory or a diffusers pipeline")
    evaluate.add_argument("--benchmark", required=True, metavar="NAME", help="e.g. geneval (see omni-rl plugins)")
    evaluate.add_argument("--step", type=int, metavar="N", help="the run's checkpoint step (default: the latest)")
    evaluate.add_argument(
        "--images-per-prompt", type=int, metavar="K", help="images per prompt (default: the benchmark's, GenEval 4)"
    )
    evaluate.add_argument(
        "--out", metavar="DIR", help="where to write (default: RUN_DIR/eval/<benchmark>_step_<N>); resumes if there"
    )
    evaluate.add_argument("--limit", type=int, metavar="N", help="only N prompts, spread evenly over the set")
    evaluate.add_argument("--seed", type=int, default=0, help="image k of prompt i has seed SEED + i + 100003 k")
    evaluate.add_argument("--device", default="auto", help="'auto' (cuda when visible), 'cpu', 'cuda:1', ...")
    evaluate.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="benchmark.<option>=V sets a benchmark option (benchmark.detector=DIR); others change the run's "
        "config or a pipeline's defaults (rollout.options.eval_steps=40)",
    )
    evaluate.set_defaults(handler="eval")


def run_eval_command(args: argparse.Namespace, output: Output, registry: Registry) -> int:
    from omni_rl.config import structure_options
    from omni_rl.config.overrides import parse_override
    from omni_rl.eval_model import load_generator
    from omni_rl.evaluation import EvalSettings, run_eval

    registry.validate()
    spec = registry.get("benchmark", args.benchmark)
    benchmark_options: dict[str, Any] = {}
    generator_overrides = []
    for text in args.set or ():
        if text.startswith(BENCHMARK_PREFIX):
            override = parse_override(text[len(BENCHMARK_PREFIX) :])
            benchmark_options[".".join(override.keys)] = override.value
        else:
            generator_overrides.append(text)
    options = structure_options(spec, benchmark_options, "$.benchmark.options")
    if args.images_per_prompt is not None and args.images_per_prompt < 1:
        raise ConfigError(f"--images-per-prompt must be >= 1, got {args.images_per_prompt}")
    device = _device(args.device)
    with quiet_libraries(enabled=not output.debug):
        benchmark = spec.factory(options, BuildContext(device=device, registry=registry, section="$.benchmark"))
        generator = load_generator(
            args.target, step=args.step, overrides=generator_overrides, registry=registry, device=device
        )
        out = Path(args.out) if args.out else _default_out(Path(args.target), spec.name, generator.info)
        writable_directory(str(out), "--out")
        settings = EvalSettings(
            benchmark=spec.name,
            images_per_prompt=args.images_per_prompt or benchmark.images_per_prompt,
            seed=args.seed,
            limit=args.limit,
        )
        summary = run_eval(
            benchmark,
            generator,
            out,
            settings,
            progress=lambda done, total: output.err.print(Text(f"{spec.name}: {done}/{total} prompts scored")),
        )
    output.print(Text(summary.text))
    output.success(f"wrote {out / 'summary.json'}, summary.csv, summary.txt, results.jsonl and the images to {out}")
    return 0


def _device(option: str) -> str:
    if option != "auto":
        return option
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _default_out(target: Path, benchmark: str, info: dict[str, Any]) -> Path:
    if info.get("kind") == "run":
        return target / "eval" / f"{benchmark}_step_{info['step']}"
    return target.parent / f"{target.name}-eval" / benchmark
