"""Prompt sources and the seeded prompt sampler.

A source is a file (``.txt``: one prompt per line; ``.jsonl``: objects with a ``prompt`` key, other keys are
passed to rewards as metadata; ``.parquet``: a ``prompt`` (or ``caption``) column, other columns are metadata, see
:mod:`omni_rl.data_parquet`) or ``package:<module>:<relative path>`` for prompt sets a plugin ships as package
data (``package:omni_rl_shapes:prompts/train.txt``). A row's ``image`` / ``images`` fields are its condition
images (editing and image-to-video models, :mod:`omni_rl.data_images`), not metadata.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import attrs

from omni_rl.data_images import ImageRef, take_image_refs
from omni_rl.data_parquet import is_parquet, read_parquet_rows
from omni_rl.errors import ConfigError
from omni_rl.package_paths import is_package_path, package_path

SOURCE_HINT = (
    "give a .txt (one prompt per line), .jsonl (one {\"prompt\": ...} object per line) or .parquet (a 'prompt' "
    "column) file path"
)
#: suffixes of structured files that are not prompt lists, though their lines would read as prompts
NOT_PROMPT_LISTS = {".toml": "TOML", ".json": "JSON", ".yaml": "YAML", ".yml": "YAML", ".ini": "INI", ".cfg": "config"}


@attrs.frozen
class PromptRecord:
    prompt: str
    metadata: dict[str, Any] = attrs.field(factory=dict)
    #: condition images (the source of an edit, an image-to-video first frame), checked when read, decoded when
    #: drawn (:func:`omni_rl.data_images.load_condition`); empty for text-only rows
    images: tuple[ImageRef, ...] = ()


def read_prompt_source(source: str, *, config_path: str) -> list[PromptRecord]:
    """Read a prompt source; ``config_path`` (e.g. ``$.data.train``) names it in errors."""
    data, name, base = _read_bytes(source, config_path)
    if is_parquet(data, name):
        rows = read_parquet_rows(data, name, config_path)
        records = [
            PromptRecord(prompt, metadata, take_image_refs(metadata, base, f"{name}: row {number}", config_path))
            for number, (prompt, metadata) in enumerate(rows, start=1)
        ]
    else:
        records = _text_records(data, source, name, base, config_path)
    if not records:
        raise ConfigError(f"prompt source {source!r} holds no prompts @ {config_path}")
    return records


def _text_records(data: bytes, source: str, name: str, base: Path | None, config_path: str) -> list[PromptRecord]:
    """A .jsonl file's objects, or any other text file's non-empty lines."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(
            f"prompt source {source!r} is neither a UTF-8 text file nor a parquet file @ {config_path}",
            hint=SOURCE_HINT,
        ) from None
    suffix = Path(name).suffix.lower()
    if suffix in NOT_PROMPT_LISTS:  # a config file passed as the prompts trained on each line of its TOML
        raise ConfigError(
            f"prompt source {source!r} is a {NOT_PROMPT_LISTS[suffix]} file, not a prompt list @ {config_path}",
            hint=f"{SOURCE_HINT} (a config file belongs on the command line: omni-rl run CONFIG)",
        )
    if not name.endswith(".jsonl"):
        return [PromptRecord(line.strip()) for line in text.splitlines() if line.strip()]
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            prompt = str(obj.pop("prompt"))
        except (json.JSONDecodeError, KeyError, AttributeError) as exc:
            raise ConfigError(
                f"{name}:{number}: not a JSON object with a 'prompt' key ({exc}) @ {config_path}",
                hint='each line of a .jsonl prompt file must look like {"prompt": "a red circle"}',
            ) from None
        records.append(PromptRecord(prompt, obj, take_image_refs(obj, base, f"{name}:{number}", config_path)))
    return records


def _read_bytes(source: str, config_path: str) -> tuple[bytes, str, Path | None]:
    """The source's bytes, its name for messages, and the folder its rows' relative image paths start from."""
    if is_package_path(source):
        try:  # found without importing the package, inside it only (omni_rl.package_paths)
            path = package_path(source, "prompt source")
            return path.read_bytes(), source.split(":", 2)[2], path.parent
        except (ConfigError, OSError) as exc:
            reason = exc.message if isinstance(exc, ConfigError) else f"cannot read prompt source {source!r} ({exc})"
            raise ConfigError(
                f"{reason} @ {config_path}",
                hint="use package:<installed package>:<path inside the package>, e.g. "
                "package:omni_rl_shapes:prompts/train.txt",
            ) from None
    path = Path(source)
    if path.exists() and not path.is_file():  # a directory, /dev/zero: there, but not a file to read
        raise ConfigError(f"prompt source {source!r} is not a regular file @ {config_path}", hint=SOURCE_HINT)
    if not path.is_file():
        raise ConfigError(
            f"prompt file {source!r} does not exist @ {config_path}",
            hint=f"{SOURCE_HINT}, relative to the working directory",
        )
    return path.read_bytes(), path.name, path.absolute().parent


class PromptSampler:
    """Draws prompts without replacement, reshuffling each epoch with a seeded RNG.

    Its whole state is (epoch, position), so a resumed run draws exactly the prompts it would have drawn.
    """

    def __init__(self, records: list[PromptRecord], seed: int) -> None:
        self.records = records
        self.seed = seed
        self.epoch = 0
        self.position = 0
        self._order = self._shuffled(0)

    def _shuffled(self, epoch: int) -> list[int]:
        order = list(range(len(self.records)))
        random.Random(self.seed * 1_000_003 + epoch).shuffle(order)
        return order

    def sample(self, count: int) -> list[PromptRecord]:
        drawn = []
        for _ in range(count):
            if self.position >= len(self._order):
                self.epoch += 1
                self.position = 0
                self._order = self._shuffled(self.epoch)
            drawn.append(self.records[self._order[self.position]])
            self.position += 1
        return drawn

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch = int(state["epoch"])
        self.position = int(state["position"])
        self._order = self._shuffled(self.epoch)
