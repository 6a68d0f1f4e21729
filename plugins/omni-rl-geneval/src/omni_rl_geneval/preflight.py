"""What the ``geneval`` reward needs that its options cannot show, found without loading a weight.

The detector and CLIP are loaded at the first scoring call (in the process that scores), and the prompts' GenEval
metadata is read there too, so a model that cannot be loaded offline or a prompt file without metadata used to
surface only after Ray's start-up and a first rollout. Both are cheap to see up front:

- a model option (``detector``, ``clip_model``) that names an existing path must be a directory saved with
  ``save_pretrained`` (``config.json``, a weights file and the processor's config); a hub id must, when the hub is
  off (``HF_HUB_OFFLINE``), have those files in the local Hugging Face cache (online, it is downloaded when loaded);
- every prompt the reward will score must carry GenEval metadata (``tag``, ``include``, ...).

``omni-rl check`` runs this through the reward's ``RewardSpec.preflight`` (and ``serve-reward`` before it starts a
local Ray); the scorer runs the model part again when it is built, in the process that will load the models.
Each problem is one line naming the config path and the fix. Torch-free; huggingface_hub is imported only to
look into its cache.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from omni_rl_rewards_clip.loading import Owner

from omni_rl.errors import ConfigError
from omni_rl_geneval.metadata import check_metadata

#: what ``from_pretrained`` reads from a model directory: the config, one weights layout, the processor's config
_CONFIG = ("config.json",)
_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
_PROCESSOR = ("preprocessor_config.json", "processor_config.json")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_MODELS = {"detector": "detector (Mask2Former)", "clip_model": "CLIP model"}
_MAKE_PROMPTS = (
    "train on a .jsonl with GenEval metadata (package:omni_rl_geneval:prompts/train.jsonl, or python -m "
    "omni_rl_geneval.make_prompts --out FILE.jsonl; validate on package:omni_rl_geneval:data/evaluation_metadata.jsonl)"
)


def hub_offline() -> bool:
    """Whether the hub is off for the loaders: huggingface_hub's setting (from HF_HUB_OFFLINE or
    TRANSFORMERS_OFFLINE when it was imported), which transformers follows."""
    import huggingface_hub.constants as constants

    return bool(constants.HF_HUB_OFFLINE)


def model_problems(config: Any, owner: Owner) -> list[str]:
    """One line per model option of ``config`` (a GenEvalConfig) that cannot be loaded here."""
    problems = []
    for option in _MODELS:
        problem = source_problem(getattr(config, option), owner, option)
        if problem is not None:
            problems.append(problem)
    return problems


def raise_model_problems(config: Any, owner: Owner) -> None:
    """:func:`model_problems` as a ConfigError: the scorer's check when built, in the process that will load."""
    problems = model_problems(config, owner)
    if problems:
        message = problems[0] if len(problems) == 1 else "\n".join([f"{len(problems)} problems:", *problems])
        raise ConfigError(message, hint="`omni-rl check` finds this on the machine it runs on, before a run starts")


def source_problem(source: str, owner: Owner, option: str) -> str | None:
    """Why ``source`` (a hub id or a local path) cannot be loaded on this machine, or None."""
    where, what = owner.option(option), _MODELS.get(option, option)
    start = f"reward {owner.name!r}: {where} = {source!r}"
    path = Path(source).expanduser()
    if path.exists():
        if not path.is_dir():
            return (
                f"{start} is a file, not a model directory; set it to the directory the {what} was saved to "
                f"(save_pretrained or hf download --local-dir) @ {where}"
            )
        missing = _missing(lambda name: (path / name).is_file())
        if missing:
            return f"{start} is not a saved {what}: it has no {missing}; point it at a whole model directory @ {where}"
        return None
    if not _HUB_ID.match(source):
        return f"{start} is neither an existing path nor a hub id; set it to a directory or an 'owner/name' @ {where}"
    if not hub_offline():
        return None  # downloaded when the scorer loads it
    import huggingface_hub.constants as constants
    from huggingface_hub import try_to_load_from_cache

    try:
        missing = _missing(lambda name: isinstance(try_to_load_from_cache(source, name), str))
    except ValueError as exc:  # huggingface_hub's stricter repo-id rules ("a..b", "a--b")
        return f"{start} is neither an existing path nor a valid hub id ({exc}); set it to a directory @ {where}"
    if not missing:
        return None
    return (
        f"{start} cannot be loaded: HF_HUB_OFFLINE is set and the Hugging Face cache ({constants.HF_HUB_CACHE}) has "
        f"no {missing} of it; run `hf download {source}` where the hub is reachable, or set {where} to a local "
        f"directory @ {where}"
    )


def _missing(has: Callable[[str], bool]) -> str:
    """The first of config / weights / processor files that ``has`` does not find, as words ("" when all are)."""
    for names in (_CONFIG, _WEIGHTS, _PROCESSOR):
        if not any(has(name) for name in names):
            return " or ".join(names)
    return ""


def metadata_problems(prompts: Mapping[str, Sequence[Any]], owner: Owner) -> list[str]:
    """One line per prompt source (``{"$.data.train": records}``) with a prompt lacking GenEval metadata."""
    problems = []
    for path, records in prompts.items():
        bad = [(i, problem) for i, r in enumerate(records) if (problem := _metadata_problem(r.metadata)) is not None]
        if not bad:
            continue
        first, problem = bad[0]
        prompt = str(records[first].prompt)
        shown = prompt if len(prompt) <= 60 else prompt[:57] + "..."
        counted = f"all {len(records)}" if len(bad) == len(records) else f"{len(bad)} of the {len(records)}"
        problems.append(
            f"reward {owner.name!r} ({owner.section or '$.reward[]'}) scores each prompt against its GenEval metadata, "
            f"but {counted} prompts of {path} have none that fits (prompt {first + 1}, "
            f"{shown!r}: {problem}); {_MAKE_PROMPTS} @ {path}"
        )
    return problems


def _metadata_problem(metadata: Mapping[str, Any] | None) -> str | None:
    if not metadata:
        return "no metadata: a plain-text prompt"
    return check_metadata(metadata)


def geneval_preflight(component: Any, prompts: Mapping[str, Sequence[Any]]) -> list[str]:
    """``RewardSpec.preflight`` of ``geneval``: its models on this machine and the metadata of ``prompts``."""
    owner = Owner(component.name, component.path)
    return model_problems(component.options, owner) + metadata_problems(prompts, owner)
