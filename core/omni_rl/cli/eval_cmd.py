"""``omni-rl eval TARGET --benchmark NAME``: sample a benchmark's prompts with a run's (or a pipeline's) model,
score them with the benchmark plugin and print its table (omni_rl.evaluation.loop)."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rich.text import Text

from omni_rl.cli.eval_plan import EvalJob, check_numbers, comparison_out, parse_device, plan_jobs, resume_command
from omni_rl.cli.output import Output
from omni_rl.cli.quiet import quiet_libraries
from omni_rl.context import BuildContext
from omni_rl.errors import ConfigError
from omni_rl.evaluation.interrupts import StopOnSignal
from omni_rl.registry import Registry
from omni_rl.rundir.lock import RunLock
from omni_rl.rundir.writable import writable_directory

#: ``--set benchmark.<option>=value`` sets the benchmark's options; every other ``--set`` the generator's config
BENCHMARK_PREFIX = "benchmark."


def add_eval_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """The ``eval`` sub-command's arguments (kept here so cli/__init__.py grows by one line)."""
    evaluate = commands.add_parser(
        "eval", parents=[common], help="score a run's checkpoint (or a pipeline) on a benchmark a plugin provides"
    )
    evaluate.add_argument("target", metavar="RUN_DIR|PIPELINE_DIR", help="a run directory or a diffusers pipeline")
    evaluate.add_argument("--benchmark", required=True, metavar="NAME", help="e.g. geneval (see omni-rl plugins)")
    steps = evaluate.add_mutually_exclusive_group()
    steps.add_argument("--step", type=int, metavar="N", help="the run's checkpoint step (default: the latest)")
    steps.add_argument(
        "--compare",
        type=int,
        nargs=2,
        metavar=("STEP_A", "STEP_B"),
        help="evaluate two checkpoints of a run and write their reports side by side with the difference",
    )
    evaluate.add_argument(
        "--images-per-prompt", type=int, metavar="K", help="images per prompt (default: the benchmark's, GenEval 4)"
    )
    evaluate.add_argument(
        "--out",
        metavar="DIR",
        help="where to write (default: RUN_DIR/eval/<benchmark>_step_<N>); resumes if there. With --compare: "
        "each step in DIR/step_<N>, the comparison in DIR (default RUN_DIR/eval/<benchmark>_step_<A>_vs_<B>)",
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


def eval_command(args: argparse.Namespace, output: Output, registry: Registry) -> int:
    """Everything that can be refused is refused before anything is written or loaded (omni_rl.cli.eval_plan);
    then each output folder is locked (one evaluation per folder) and the models are evaluated in turn."""
    from omni_rl.config import structure_options
    from omni_rl.evaluation.generator import check_generator_config, target_kind
    from omni_rl.evaluation.loop import EvalSettings, check_info

    registry.validate()
    spec = registry.get("benchmark", args.benchmark)
    benchmark_options, generator_overrides = _split_sets(args.set or ())
    options = structure_options(spec, benchmark_options, "$.benchmark.options")
    check_numbers(args)
    device = parse_device(args.device)
    target = _target(args.target)
    if args.compare is not None:
        _check_compare(target, args.compare)
    kind = target_kind(target, args.step)
    jobs = plan_jobs(args, spec.name, target, kind)
    compared = comparison_out(args, spec.name, target) if args.compare is not None else None
    outs = [job.out for job in jobs] + ([compared] if compared is not None else [])
    for out in outs:
        writable_directory(str(out), "--out")
    with quiet_libraries(enabled=not output.debug):
        benchmark = spec.factory(options, BuildContext(device=device, registry=registry, section="$.benchmark"))
        defaults = getattr(benchmark, "pipeline_overrides", None)  # optional member: a pipeline's own settings
        pipeline_defaults = list(defaults(target)) if defaults is not None and kind == "pipeline" else []
        check_generator_config(target, generator_overrides, registry, pipeline_defaults)
        settings = EvalSettings(
            benchmark=spec.name,
            images_per_prompt=args.images_per_prompt or benchmark.images_per_prompt,
            seed=args.seed,
            limit=args.limit,
        )
        for job in jobs:  # another evaluation's folder: refused now, not after the first model was sampled
            check_info(job.out, settings, {"target": str(target.resolve()), "step": job.step})
        with contextlib.ExitStack() as held:
            for out in outs:
                held.enter_context(RunLock(out, where="--out", what="omni-rl process", hint=_LOCK_HINT))
            held.enter_context(StopOnSignal(output.err, lambda: resume_command(args, jobs)))
            summaries = []
            for job in jobs:
                summary = _evaluate(
                    output, registry, benchmark, settings, target, job, generator_overrides, pipeline_defaults, device
                )
                if compared is None:
                    output.print(Text(summary.text))
                    output.success(
                        f"wrote {job.out / 'summary.json'}, summary.csv, summary.txt, results.jsonl and the images"
                    )
                    return 0
                output.print(Text(f"step {job.step} ({job.out}):\n{summary.text}\n"))
                summaries.append(summary)
            return _write_comparison(args, output, spec.name, compared, summaries)


#: what a second ``omni-rl eval`` into a folder in use is told
_LOCK_HINT = (
    "wait for that command to end or stop it (what it scored is kept), or choose another --out directory; nothing "
    "was changed"
)


def _split_sets(texts: Iterable[str]) -> tuple[dict[str, Any], list[str]]:
    """``--set benchmark.<option>=V`` into the benchmark's options; every other ``--set`` for the generator."""
    from omni_rl.config.overrides import parse_override

    benchmark_options: dict[str, Any] = {}
    generator_overrides = []
    for text in texts:
        if text.startswith(BENCHMARK_PREFIX):
            override = parse_override(text[len(BENCHMARK_PREFIX) :])
            benchmark_options[".".join(override.keys)] = override.value
        else:
            generator_overrides.append(text)
    return benchmark_options, generator_overrides


def _evaluate(
    output: Output,
    registry: Registry,
    benchmark: Any,
    settings: Any,
    target: Path,
    job: EvalJob,
    overrides: list[str],
    pipeline_defaults: list[str],
    device: str,
) -> Any:
    """Sample and score one model (a run's checkpoint ``job.step``, or the pipeline) into ``job.out``."""
    import gc

    from omni_rl.evaluation.generator import load_generator
    from omni_rl.evaluation.loop import run_eval

    generator = load_generator(
        target,
        step=job.step,
        overrides=overrides,
        registry=registry,
        device=device,
        pipeline_defaults=pipeline_defaults,
    )
    name = settings.benchmark
    summary = run_eval(
        benchmark,
        generator,
        job.out,
        settings,
        progress=lambda done, total: output.err.print(Text(f"{name}: {done}/{total} prompts scored")),
    )
    del generator
    gc.collect()  # the next --compare step loads its own model: free this one first
    return summary


def _write_comparison(args: argparse.Namespace, output: Output, name: str, out: Path, summaries: list[Any]) -> int:
    from omni_rl.evaluation.compare import write_comparison

    first, second = args.compare
    text = write_comparison(out, name, (f"step {first}", f"step {second}"), summaries[0], summaries[1])
    output.print(Text(text))
    output.success(f"wrote {out / 'comparison.txt'}, comparison.json and comparison.csv")
    return 0


def _target(text: str) -> Path:
    """The target directory; ``package:<module>:<path>`` names a pipeline shipped in a plugin (the shapes ones)."""
    from omni_rl.package_paths import is_package_path, package_path

    return package_path(text, "RUN_DIR|PIPELINE_DIR") if is_package_path(text) else Path(text)


def _check_compare(target: Path, steps: list[int]) -> None:
    from omni_rl.config import RESOLVED_CONFIG

    if not (target / RESOLVED_CONFIG).is_file():
        raise ConfigError(
            f"--compare compares two checkpoints of one run; {str(target)!r} is not a run directory",
            hint="pass the run directory (its [run] output_dir); to compare two pipelines, evaluate each and "
            "read their summary.csv",
        )
    if steps[0] == steps[1]:
        raise ConfigError(f"--compare needs two different steps, got {steps[0]} twice")
