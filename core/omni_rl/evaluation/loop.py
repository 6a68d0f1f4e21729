"""``omni-rl eval``'s loop: sample a benchmark's prompts with fixed seeds, save and score them, resume, report.

Images are written in GenEval's folder layout (``images/<index:05d>/metadata.jsonl`` and
``images/<index:05d>/samples/<k:04d>.png``) so the benchmark's reference scripts can rescore the same files,
and every scored image is appended to ``results.jsonl`` as soon as its prompt is done: an evaluation that was
stopped resumes at the first prompt without results instead of regenerating hours of images. Resuming with
other settings (another step, seed or image count) is refused, since the table would mix two models.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from omni_rl.benchmark import BenchmarkSummary, ImageResult
from omni_rl.data import PromptRecord
from omni_rl.data_images import records_conditions
from omni_rl.errors import ConfigError, RuntimeFailure
from omni_rl.evaluation.generator import Generator
from omni_rl.protocols import Benchmark, RolloutRequest

RESULTS = "results.jsonl"
INFO = "eval_info.json"
#: images sampled per rollout call (the rollout's own batch_size still caps what goes through the model at once)
IMAGES_PER_CALL = 16
#: failures shown in failures.png
MAX_FAILURES_SHOWN = 64


@attrs.frozen(kw_only=True)
class EvalSettings:
    """What fixes an evaluation's images: resuming with different values is refused."""

    benchmark: str
    images_per_prompt: int
    seed: int
    #: prompts evaluated (None: all); ``limit`` prompts spread evenly over the set
    limit: int | None = None


def select_prompts(records: Sequence[PromptRecord], limit: int | None) -> list[tuple[int, PromptRecord]]:
    """``(index, record)`` of the prompts to evaluate: all, or ``limit`` spread evenly over the set, so a
    benchmark ordered by category (GenEval's tags) keeps every category in a small subset."""
    if limit is None or limit >= len(records):
        return list(enumerate(records))
    if limit < 1:
        raise ConfigError(f"--limit must be >= 1, got {limit}", hint="leave --limit out to evaluate every prompt")
    indices = sorted({(k * len(records)) // limit for k in range(limit)})
    return [(i, records[i]) for i in indices]


def image_seed(seed: int, index: int, sample: int) -> int:
    """Image ``sample`` of prompt ``index``: ``seed + index + 100_003 * sample``, so an evaluation with more
    images per prompt (or a ``--limit`` subset) shares its first images with a smaller one."""
    return seed + index + 100_003 * sample


def run_eval(
    benchmark: Benchmark,
    generator: Generator,
    out: Path,
    settings: EvalSettings,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> BenchmarkSummary:
    """Evaluate ``generator`` on ``benchmark`` into ``out`` (resuming what is there) and write the report.

    Nothing is written before the settings are known to be valid (an invalid ``--limit`` used to leave an
    ``eval_info.json`` behind that refused the corrected command)."""
    selected = select_prompts(benchmark.prompts(), settings.limit)
    check_info(out, settings, generator.info)
    out.mkdir(parents=True, exist_ok=True)
    _write_info(out, settings, generator.info)
    done = _read_results(out / RESULTS)
    k = settings.images_per_prompt
    todo = [(i, r) for i, r in selected if any((i, s) not in done for s in range(k))]
    per_call = max(1, IMAGES_PER_CALL // k)
    finished = len(selected) - len(todo)
    if progress is not None:
        progress(finished, len(selected))
    with (out / RESULTS).open("a", encoding="utf-8") as results_file:
        for start in range(0, len(todo), per_call):
            chunk = todo[start : start + per_call]
            for result in _evaluate_chunk(benchmark, generator, out, settings, chunk):
                done[(result.index, result.sample)] = result
                results_file.write(json.dumps(attrs.asdict(result)) + "\n")
            results_file.flush()
            finished += len(chunk)
            if progress is not None:
                progress(finished, len(selected))
    results = [done[(i, s)] for i, _ in selected for s in range(k)]
    summary = benchmark.summarize(results)
    write_report(out, summary, results)
    return summary


def _evaluate_chunk(
    benchmark: Benchmark,
    generator: Generator,
    out: Path,
    settings: EvalSettings,
    chunk: Sequence[tuple[int, PromptRecord]],
) -> list[ImageResult]:
    k = settings.images_per_prompt
    seed_of = getattr(benchmark, "image_seed", None) or image_seed  # optional member: the benchmark's own seeds
    jobs = [(i, record, s, int(seed_of(settings.seed, i, s))) for i, record in chunk for s in range(k)]
    request = RolloutRequest(
        prompts=[record.prompt for _, record, _, _ in jobs],
        group_ids=[i for i, _, _, _ in jobs],
        seeds=[seed for *_, seed in jobs],
        step=-1,
        mode="eval",
        record_trajectory=False,
        run_seed=settings.seed,
        metadata=[dict(record.metadata) for _, record, _, _ in jobs],
        conditions=records_conditions([record for _, record, _, _ in jobs]),
    )
    batch = generator.rollout.generate(generator.model, generator.sampler, request)
    images = np.asarray(batch.images.cpu() if hasattr(batch.images, "cpu") else batch.images)
    verdicts = benchmark.score(images, [record for _, record, _, _ in jobs])
    if len(verdicts) != len(jobs):
        raise RuntimeFailure(
            f"benchmark {settings.benchmark!r} returned {len(verdicts)} verdicts for {len(jobs)} images",
            hint="a bug in the benchmark plugin: score() returns one verdict per image",
        )
    for i, record in chunk:  # GenEval's layout: the prompt's metadata object beside its samples
        folder = out / "images" / f"{i:05d}"
        (folder / "samples").mkdir(parents=True, exist_ok=True)
        line = json.dumps({**record.metadata, "prompt": record.prompt})
        (folder / "metadata.jsonl").write_text(line + "\n", encoding="utf-8")
    results = []
    for (i, record, s, seed), image, verdict in zip(jobs, images, verdicts, strict=True):
        relative = f"images/{i:05d}/samples/{s:04d}.png"
        _save_png(out / relative, image)
        results.append(
            ImageResult(
                index=i,
                sample=s,
                prompt=record.prompt,
                metadata=dict(record.metadata),
                correct=bool(verdict.correct),
                score=float(verdict.score),
                reason=verdict.reason,
                image=relative,
                seed=seed,
                details={key: float(value) for key, value in verdict.details.items()},
            )
        )
    return results


def _save_png(path: Path, image: np.ndarray) -> None:
    from PIL import Image

    Image.fromarray(np.asarray(image, dtype=np.uint8)).save(path)


def check_info(out: Path, settings: EvalSettings, generator_info: dict[str, Any]) -> None:
    """Refuse to resume into a directory evaluated with other settings (``eval_info.json``'s settings, target and
    step; ``generator_info`` needs only those two). Writes nothing, so ``omni-rl eval`` asks it of every output
    folder before it loads a model."""
    path = out / INFO
    if not path.is_file():
        return
    try:
        previous = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        previous = {}
    fixed = ("target", "step")
    before = {**previous.get("settings", {}), **{k: previous.get("generator", {}).get(k) for k in fixed}}
    now = {**attrs.asdict(settings), **{k: generator_info.get(k) for k in fixed}}
    changed = sorted(key for key in now if before.get(key) != now[key])
    if changed:
        what = ", ".join(f"{key}: {before.get(key)!r} -> {now[key]!r}" for key in changed)
        raise ConfigError(
            f"{str(out)!r} holds an evaluation with other settings ({what})",
            hint="choose another --out directory, or rerun with the same settings to resume it",
        )


def _write_info(out: Path, settings: EvalSettings, generator_info: dict[str, Any]) -> None:
    """``eval_info.json`` (once: a resumed evaluation keeps the first one's, whose settings are the same)."""
    path = out / INFO
    if not path.is_file():
        info = {"settings": attrs.asdict(settings), "generator": generator_info}
        path.write_text(json.dumps(info, indent=2, default=str) + "\n", encoding="utf-8")


def _read_results(path: Path) -> dict[tuple[int, int], ImageResult]:
    """The images already scored; a torn last line (the process was killed mid-write) is ignored."""
    done: dict[tuple[int, int], ImageResult] = {}
    if not path.is_file():
        return done
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            result = ImageResult(**json.loads(line))
        except (ValueError, TypeError):
            continue
        done[(result.index, result.sample)] = result
    return done


def write_report(out: Path, summary: BenchmarkSummary, results: Sequence[ImageResult]) -> None:
    """``summary.json``, ``summary.csv`` (one row per group, then overall), ``summary.txt`` (the benchmark's own
    layout) and ``failures.png`` (incorrect images with their reasons)."""
    (out / "summary.json").write_text(json.dumps(attrs.asdict(summary), indent=2) + "\n", encoding="utf-8")
    (out / "summary.txt").write_text(summary.text + "\n", encoding="utf-8")
    with (out / "summary.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["group", "correct", "total", "score"])
        for row in summary.rows:
            writer.writerow([row.name, row.correct, row.total, f"{row.score:.6f}"])
        writer.writerow(["overall", "", "", f"{summary.overall:.6f}"])
    failures = [r for r in results if not r.correct][:MAX_FAILURES_SHOWN]
    if failures:
        from PIL import Image

        from omni_rl.reporting.image_grids import save_grid

        images = np.stack([np.asarray(Image.open(out / r.image).convert("RGB")) for r in failures])
        captions = [f"{' '.join(r.reason.split())} | {r.prompt}" for r in failures]
        title = f"{summary.benchmark}: {len(failures)} failures shown"
        save_grid(out / "failures.png", images, captions, title=title)
