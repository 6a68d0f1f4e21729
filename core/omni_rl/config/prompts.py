"""The ``[data]`` prompt sources a run will read, checked without training (``omni-rl check``).

Resolving a config never opens files (``--print-config`` and ``export`` work on another machine), so a missing
prompt file would otherwise only surface when ``omni-rl run`` starts training. Reading the sources is cheap
(small text files), and ``check`` promises the config is runnable, so it reads them here with the same
reader the trainer uses and reports every problem at once, each with its ``$.data.*`` path.
"""

from __future__ import annotations

from typing import Any

from omni_rl.config.loader import _problems_message
from omni_rl.config.schema import ResolvedConfig
from omni_rl.data import read_prompt_source
from omni_rl.errors import ConfigError

_TRAIN_HINT = 'set [data] train to a prompt file (.txt one prompt per line, .jsonl lines like {"prompt": "..."})'
_VAL_HINT = "set [data] val to a prompt file, or [run] eval_every = 0 and eval_before_training = false"


def prompt_source_problems(config: ResolvedConfig) -> tuple[list[str], list[str]]:
    """(problems, hints) of the config's prompt sources: what ``omni-rl run`` would stop on."""
    data, run = config.data, config.run
    problems: list[str] = []
    hints: list[str] = []
    takes = _condition_images(config)
    if data.train:
        _read(data.train, "$.data.train", takes, problems, hints)
    else:
        problems.append("no training prompts: [data] train is not set @ $.data.train")
        hints.append(_TRAIN_HINT)
    if data.val:
        _read(data.val, "$.data.val", takes, problems, hints)
    elif run.eval_every or run.eval_before_training:
        problems.append("validation is on but no val prompts are set @ $.data.val")
        hints.append(_VAL_HINT)
    return problems, hints


def check_prompt_sources(config: ResolvedConfig, source: str = "<config>") -> None:
    """Raise one :class:`ConfigError` listing every prompt-source problem (``source`` names the file)."""
    problems, hints = prompt_source_problems(config)
    if problems:
        raise ConfigError(_problems_message(source, problems), hint="; ".join(dict.fromkeys(hints)))


def _condition_images(config: ResolvedConfig) -> tuple[str, tuple[int, int]]:
    """(model name, (fewest, most) condition images per prompt) of the config's model (ModelSpec)."""
    model = config.components.get("model")
    if model is None:
        return "", (0, 0)
    return model.name, tuple(getattr(model.spec, "condition_images", (0, 0)))


def _read(source: str, path: str, takes: tuple[str, tuple[int, int]], problems: list[str], hints: list[str]) -> None:
    try:
        records = read_prompt_source(source, config_path=path)
    except ConfigError as exc:
        problems.append(exc.message)
        if exc.hint:
            hints.append(exc.hint)
        return
    problem = condition_count_problem(records, source, path, takes)
    if problem is not None:
        problems.append(problem[0])
        hints.append(problem[1])


def condition_count_problem(
    records: list[Any], source: str, path: str, takes: tuple[str, tuple[int, int]]
) -> tuple[str, str] | None:
    """(problem, hint) for the first row whose condition images the model does not take (too many, too few, or
    any for a text-only model); None when every row fits. ``takes``: (model name, (fewest, most))."""
    model, (fewest, most) = takes
    for number, record in enumerate(records, start=1):
        count = len(record.images)
        if fewest <= count <= most:
            continue
        name = source.rsplit(":", 1)[-1].replace("\\", "/").rsplit("/", 1)[-1]  # a package: path's file name too
        where = record.images[0].where.rsplit(" field", 1)[0] if record.images else f"{name}: row {number}"
        if most == 0:
            return (
                f"{where} has {count} condition image(s) ('image'/'images'), but model {model!r} generates from "
                f"text only @ {path}",
                "use an editing or image-to-video model (docs/editing.md), or drop the rows' image fields",
            )
        wanted = str(fewest) if fewest == most else f"{fewest} to {most}"
        return (
            f"{where} has {count} condition image(s), but model {model!r} takes {wanted} per prompt "
            f"(the row's 'image' / 'images' field) @ {path}",
            "give every row of an editing model's prompt file its source image(s) (docs/editing.md)",
        )
    return None


def check_condition_counts(config: ResolvedConfig, records: list[Any], source: str, path: str) -> None:
    """Raise a ConfigError when a row of ``records`` has condition images the config's model does not take (what
    ``omni-rl run`` checks when it reads the prompts, before anything starts)."""
    problem = condition_count_problem(records, source, path, _condition_images(config))
    if problem is not None:
        raise ConfigError(problem[0], hint=problem[1])
