"""Find and load a diffusers pipeline by path (or hub id), turning every way that fails into a ConfigError.

A wrong ``path`` is the most common first-run mistake, and diffusers' own errors for it (a missing
``model_index.json``, a hub lookup of a local-looking string, a missing subfolder) do not say what to change in
config.toml. :class:`PipelineKind` checks the directory first and says exactly that; each model plugin describes
its pipeline with one (``omni_rl_sd3.loading.SD3``, ``omni_rl_flux.loading.FLUX``, ...).
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from omni_rl.errors import ConfigError
from omni_rl.package_paths import is_package_path, package_path
from omni_rl_pipelines.compat import dtype_kwargs

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


@attrs.frozen(kw_only=True)
class PipelineKind:
    """One architecture's diffusers pipeline: how its directory is recognised, named in messages and loaded."""

    #: how messages name the architecture ("SD3")
    label: str
    #: the diffusers class that loads it ("StableDiffusion3Pipeline")
    pipeline_class: str
    #: the ``model_index.json`` class names accepted (the text-to-image class and its img2img/inpaint siblings,
    #: which save the same components)
    class_names: frozenset[str]
    #: the components ``model_index.json`` must name
    required: tuple[str, ...]
    #: the model plugin's name in config ("sd3")
    model_name: str
    #: a hub id to give as an example ("stabilityai/stable-diffusion-3.5-medium")
    example: str
    #: whether its hub repositories are gated (the hint then says to accept the license)
    gated: bool = False
    #: ``"module:function"`` of the plugin's tiny-pipeline builder, called as ``function(path, exist_ok=True)`` for
    #: ``build_tiny_if_missing``; imported only then
    tiny_builder: str | None = None

    @property
    def path_hint(self) -> str:
        return (
            f"set [model] options.path to a diffusers {self.pipeline_class} directory (the folder holding "
            f"model_index.json, e.g. a local copy of {self.example}), or set build_tiny_if_missing = true to write "
            "a tiny random pipeline there for a smoke test"
        )

    def resolve(self, config: Any, build_tiny: Callable[[Path], object] | None = None) -> str:
        """The local directory (checked) or hub id to load; ``build_tiny(path)`` (by default :attr:`tiny_builder`)
        writes the tiny pipeline first when ``config.build_tiny_if_missing`` and the path does not exist.

        ``package:<module>:<relative path>`` names a pipeline shipped as package data by an installed plugin (the
        shapes benchmark's pretrained model: ``package:omni_rl_shapes:pretrained``)."""
        if is_package_path(config.path):
            directory = package_path(config.path, f"{self.label} pipeline")
            self.check_dir(directory)
            return str(directory)
        local = Path(config.path).expanduser()
        if not local.exists():
            if config.build_tiny_if_missing:
                (build_tiny or self.build_tiny)(local)  # must tolerate other workers racing to build the same path
                return str(local)
            if _HUB_ID.match(config.path):
                return config.path  # a hub id; from_pretrained resolves (or refuses) it
            raise ConfigError(f"{self.label} pipeline path {config.path!r} does not exist", hint=self.path_hint)
        self.check_dir(local)
        return str(local)

    def build_tiny(self, path: Path) -> None:
        """Write this kind's tiny random pipeline to ``path`` (kept if another worker already wrote it)."""
        if self.tiny_builder is None:
            raise ConfigError(
                f"the {self.model_name} model has no tiny {self.label} pipeline to build",
                hint="set build_tiny_if_missing = false and point path at a pipeline directory",
            )
        module, function = self.tiny_builder.split(":")
        getattr(importlib.import_module(module), function)(path, exist_ok=True)

    def check_dir(self, directory: Path) -> None:
        """Raise ConfigError unless ``directory`` looks like a saved pipeline of this kind."""
        index_path = directory / "model_index.json"
        if not index_path.is_file():
            raise ConfigError(
                f"{directory} is not a diffusers pipeline directory (no model_index.json)", hint=self.path_hint
            )
        try:
            index = json.loads(index_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise ConfigError(f"cannot read {index_path}: {error}", hint=self.path_hint) from error
        class_name = index.get("_class_name")
        if class_name not in self.class_names:
            raise ConfigError(
                f"{directory} holds a {class_name}, not a {self.pipeline_class}",
                hint=f"the {self.model_name} model loads {self.label} text-to-image pipelines; pick the model plugin "
                "for this architecture",
            )
        missing = [name for name in self.required if not _present(index.get(name))]
        if missing:
            raise ConfigError(
                f"{directory} lacks the {self.label} components {', '.join(missing)}",
                hint="re-download the full pipeline (all subfolders), not only the transformer weights",
            )

    def load(self, config: Any, source: str, **components: Any) -> Any:
        """Load the pipeline from ``source`` (what :meth:`resolve` returned) in ``config.dtype`` on the CPU;
        ``components`` go to ``from_pretrained`` (e.g. ``text_encoder_3=None`` to skip reading one)."""
        import diffusers
        import torch
        from diffusers.utils import logging as diffusers_logging

        # Per-component loading bars from every worker would drown the trainer's own progress bar.
        diffusers_logging.disable_progress_bar()
        dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[config.dtype]
        try:
            return getattr(diffusers, self.pipeline_class).from_pretrained(source, **dtype_kwargs(dtype), **components)
        except (OSError, ValueError, KeyError) as error:
            hint = self.path_hint
            if source == config.path and not Path(source).exists():
                reasons, license = "offline or misspelt", ""
                if self.gated:
                    reasons = "offline, gated or misspelt"
                    license = f", after accepting the license on the hub for gated {self.label} repositories"
                hint = (
                    f"{source!r} is not a local directory ({Path(source).resolve()} does not exist), so it was read "
                    f"as a hub id, which could not be fetched ({reasons}); download it (`hf download {source} "
                    f"--local-dir DIR`{license}) and set path = DIR"
                )
            raise ConfigError(f"could not load a {self.pipeline_class} from {source!r}: {error}", hint=hint) from error


def _present(entry: object) -> bool:
    return isinstance(entry, list) and len(entry) == 2 and entry[0] is not None
