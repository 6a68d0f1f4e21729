"""Weight sources (hub id or local path), device and dtype, with every loading failure as a ConfigError.

Without a network (``HF_HUB_OFFLINE=1``, or a cluster node that cannot reach the hub) transformers and
huggingface_hub fail with messages about connections and caches that do not say which option of config.toml to
change. Every load here goes through :func:`load_or_explain` or :func:`weight_file`, which name the reward,
the option, and the two fixes: download the weights first, or point the option at a local copy.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import attrs

from omni_rl.errors import ConfigError

T = TypeVar("T")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


@attrs.frozen
class Owner:
    """The reward whose weights are loaded, for errors: its component name and its section's config path (the
    build context's ``section``, e.g. ``$.eval_reward[0]``; ``$.reward[]`` when it was built outside a config)."""

    name: str
    section: str = ""

    @classmethod
    def of(cls, name: str, ctx: Any) -> Owner:
        return cls(name, getattr(ctx, "section", ""))

    def option(self, option: str) -> str:
        """The config path of one of the reward's options."""
        return f"{self.section or '$.reward[]'}.options.{option}"


def _hint(reward: Owner, option: str, source: str, filename: str | None = None) -> str:
    what = f"{source} {filename}" if filename else source
    offline = " (HF_HUB_OFFLINE is set, so nothing is fetched)" if os.environ.get("HF_HUB_OFFLINE") else ""
    return (
        f"download the weights first{offline}, e.g. `hf download {what}` on a machine with network access, or "
        f"copy them to a local directory and set {reward.option(option)} (the {reward.name!r} reward) to its path"
    )


def check_source(source: str, *, reward: Owner, option: str) -> None:
    """Fail at build time on a local-looking path that does not exist (a hub id is only checked when loaded)."""
    if Path(source).expanduser().exists() or _HUB_ID.match(source):
        return
    raise ConfigError(
        f"reward {reward.name!r}: {reward.option(option)} = {source!r} is neither an existing path nor a hub id",
        hint=f"set {reward.option(option)} to a local directory or file, or to a hub id such as 'owner/name'",
    )


def local_or_hub(source: str) -> str:
    """An existing local path (``~`` expanded) as a string, else ``source`` unchanged (a hub id)."""
    path = Path(source).expanduser()
    return str(path) if path.exists() else source


def load_or_explain(load: Callable[[str], T], source: str, *, reward: Owner, option: str, what: str) -> T:
    """``load(source)`` (a ``from_pretrained``), with OSError/ValueError turned into a ConfigError naming ``option``."""
    try:
        return load(local_or_hub(source))
    except (OSError, ValueError) as error:
        raise ConfigError(
            f"reward {reward.name!r}: cannot load the {what} from {reward.option(option)} = {source!r}: {error}",
            hint=_hint(reward, option, source),
        ) from error


def weight_file(source: str, filename: str, *, reward: Owner, option: str) -> Path:
    """The checkpoint file: ``source`` itself when it is a file, ``source/filename`` for a directory, else the
    hub repo ``source``'s ``filename`` through the hub cache (downloaded when a network is allowed)."""
    path = Path(source).expanduser()
    if path.is_file():
        return path
    if path.is_dir():
        if (path / filename).is_file():
            return path / filename
        raise ConfigError(
            f"reward {reward.name!r}: {reward.option(option)} = {source!r} is a directory without {filename!r}",
            hint=f"put {filename} there, or set {reward.option(option)} to the checkpoint file itself",
        )
    from huggingface_hub import hf_hub_download

    try:
        return Path(hf_hub_download(source, filename))
    except (OSError, ValueError) as error:  # LocalEntryNotFoundError is an OSError; a bad repo id a ValueError
        raise ConfigError(
            f"reward {reward.name!r}: cannot get {filename!r} from {reward.option(option)} = {source!r}: {error}",
            hint=_hint(reward, option, source, filename),
        ) from error


def torch_dtype(name: str) -> Any:
    """The torch dtype called ``name`` ("float32", "bfloat16", "float16")."""
    import torch

    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def pick_device(option: str, ctx_device: str) -> str:
    """The device a reward runs on: the option when set, else the context's accelerator, else cuda if visible."""
    if option != "auto":
        return option
    if ctx_device and ctx_device != "cpu":
        return ctx_device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
