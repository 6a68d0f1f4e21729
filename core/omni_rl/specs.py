"""Typed records yielded by the hooks: one class per component kind.

A plugin's hook returns a list of these. They are frozen so the registry can hand the same record to every
caller, and they carry everything the registry needs to validate, list and build a component without
importing the component's heavy code: ``factory`` is called only when the component is built.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

import attrs

#: Component names are lower_snake; third-party plugins may use a dotted prefix (``acme.my_loss``).
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$")


@attrs.frozen
class NoOptions:
    """Config class for components that take no options."""


def _check_name(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if not isinstance(value, str) or not NAME_PATTERN.match(value):
        raise ValueError(
            f"component name {value!r} is not lower_snake (dotted prefixes like 'acme.my_loss' are allowed)"
        )


def _check_aliases(instance: Any, attribute: attrs.Attribute, value: tuple[str, ...]) -> None:
    for alias in value:
        _check_name(instance, attribute, alias)


def _check_config(instance: Any, attribute: attrs.Attribute, value: type) -> None:
    if not (isinstance(value, type) and attrs.has(value)):
        raise TypeError(f"config of component {instance.name!r} must be an attrs class, got {value!r}")


@attrs.frozen(kw_only=True)
class ComponentSpec:
    """What every component kind shares.

    ``factory(config, ctx)`` builds the component from an instance of ``config`` (an attrs class, the
    component's options) and a :class:`omni_rl.context.BuildContext`.
    """

    kind: ClassVar[str] = "component"
    #: The hook that yields records of this kind.
    hook: ClassVar[str] = ""

    name: str = attrs.field(validator=_check_name)
    factory: Callable[[Any, Any], Any]
    config: type = attrs.field(default=NoOptions, validator=_check_config)
    summary: str = ""
    aliases: tuple[str, ...] = attrs.field(default=(), converter=tuple, validator=_check_aliases)
    #: ``check(components) -> problems``: what this component's options alone cannot validate because it
    #: depends on other sections (e.g. a loss option that only some samplers can serve). ``components`` maps
    #: each section whose options are valid (``model``, ``sampler``, ``rollout``, ``loss``, ``reward[0]``, ...)
    #: to its :class:`~omni_rl.config.schema.ResolvedComponent`; each problem is a ``"what and the fix @ $.path"``
    #: line reported with the config's other problems (``omni-rl check`` and ``run``, before anything starts).
    check: Callable[[Mapping[str, Any]], Iterable[str]] | None = None
    #: ``preflight(component, prompts) -> problems``: what ``omni-rl check`` (and ``serve-reward``, before it starts
    #: a local Ray) verifies about this component on this machine, without loading a weight: weights it could not
    #: load here (the hub off and not in the local cache), prompt metadata it needs. ``component`` is its
    #: :class:`~omni_rl.config.schema.ResolvedComponent`; ``prompts`` maps each prompt source it will see
    #: (``"$.data.train"``, ``"$.data.val"``; none for a served reward) to that source's ``PromptRecord`` list. Unlike
    #: ``check``, it is not run when a config is only loaded (``export``, ``eval`` of a run): those never build it.
    preflight: Callable[[Any, Mapping[str, Sequence[Any]]], Iterable[str]] | None = None


@attrs.frozen(kw_only=True)
class ModelSpec(ComponentSpec):
    """A model architecture adapter (implements :class:`omni_rl.protocols.DiffusionModel`).

    ``modality`` repeats, for ``omni-rl check``, what the built model's ``modality`` attribute says, so that a
    config asking an image model for frames is refused before anything starts rather than in step 1 (the
    ``diffusers`` rollout's check reads it; the model conformance suite checks that the two agree)."""

    kind: ClassVar[str] = "model"
    hook: ClassVar[str] = "omni_rl_models"

    #: "image", or "video" for a model whose ``latent_shape`` takes ``num_frames`` (as the model's ``modality``)
    modality: str = attrs.field(default="image", validator=attrs.validators.in_(("image", "video")))
    #: (fewest, most) condition images per prompt the model takes, as the model's ``condition_images``: (0, 0) for
    #: text-to-image and text-to-video, (1, 1) for an edit or image-to-video model; a prompt row outside the range is
    #: refused by ``omni-rl check`` and before training (docs/hooks.md, "Condition images")
    condition_images: tuple[int, int] = attrs.field(default=(0, 0), converter=tuple)

    @condition_images.validator
    def _check_condition_images(self, attribute: Any, value: tuple[int, ...]) -> None:
        if len(value) != 2 or not all(isinstance(v, int) and v >= 0 for v in value) or value[0] > value[1]:
            raise ValueError(f"condition_images must be (fewest, most) with 0 <= fewest <= most, got {value!r}")


@attrs.frozen(kw_only=True)
class SamplerSpec(ComponentSpec):
    """A reverse-step sampler with log-probs (implements :class:`omni_rl.protocols.Sampler`)."""

    kind: ClassVar[str] = "sampler"
    hook: ClassVar[str] = "omni_rl_samplers"


@attrs.frozen(kw_only=True)
class RolloutSpec(ComponentSpec):
    """A rollout backend (implements :class:`omni_rl.protocols.RolloutBackend`)."""

    kind: ClassVar[str] = "rollout"
    hook: ClassVar[str] = "omni_rl_rollout_backends"


@attrs.frozen(kw_only=True)
class RewardSpec(ComponentSpec):
    """A reward model (implements :class:`omni_rl.protocols.RewardModel`)."""

    kind: ClassVar[str] = "reward"
    hook: ClassVar[str] = "omni_rl_reward_models"


@attrs.frozen(kw_only=True)
class AdvantageSpec(ComponentSpec):
    """An advantage estimator (implements :class:`omni_rl.protocols.AdvantageEstimator`)."""

    kind: ClassVar[str] = "advantage"
    hook: ClassVar[str] = "omni_rl_advantage_estimators"


@attrs.frozen(kw_only=True)
class LossSpec(ComponentSpec):
    """A policy loss (implements :class:`omni_rl.protocols.Loss`)."""

    kind: ClassVar[str] = "loss"
    hook: ClassVar[str] = "omni_rl_losses"


def _no_factory(config: Any, ctx: Any) -> None:
    raise TypeError("algorithm presets are not built; their defaults fill the other sections")


@attrs.frozen(kw_only=True)
class AlgorithmSpec(ComponentSpec):
    """A named preset that fills defaults for the other sections.

    ``defaults`` maps a section (``sampler``, ``rollout``, ``advantage``, ``loss``, ``optim``) to a TOML-shaped
    table, e.g. ``{"loss": {"name": "flow_grpo", "options": {"clip_ratio": 1e-4}}}``. A user's section with
    the same component name is merged over the preset's options; a different name replaces it.
    """

    kind: ClassVar[str] = "algorithm"
    hook: ClassVar[str] = "omni_rl_algorithms"

    factory: Callable[[Any, Any], Any] = _no_factory
    defaults: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class BenchmarkSpec(ComponentSpec):
    """An evaluation benchmark for ``omni-rl eval --benchmark NAME`` (implements
    :class:`omni_rl.benchmark.Benchmark`): its prompt set, its per-image verdicts and its report."""

    kind: ClassVar[str] = "benchmark"
    hook: ClassVar[str] = "omni_rl_benchmarks"


#: Every spec class, in the order the CLI lists kinds.
SPEC_CLASSES: tuple[type[ComponentSpec], ...] = (
    AlgorithmSpec,
    ModelSpec,
    SamplerSpec,
    RolloutSpec,
    RewardSpec,
    AdvantageSpec,
    LossSpec,
    BenchmarkSpec,
)
KINDS: tuple[str, ...] = tuple(cls.kind for cls in SPEC_CLASSES)
SPEC_BY_KIND: dict[str, type[ComponentSpec]] = {cls.kind: cls for cls in SPEC_CLASSES}
SPEC_BY_HOOK: dict[str, type[ComponentSpec]] = {cls.hook: cls for cls in SPEC_CLASSES}
