"""The shape of a config file (pass 1 of config loading): sections and their core-owned keys.

Component sections (``model``, ``sampler``, ``rollout``, ``advantage``, ``loss``, ``[[reward]]``,
``[[eval_reward]]``) all have the same shape, ``name`` + ``options``: the options are structured in pass 2 into
the chosen component's own config class, so plugin options never clash with core keys and errors get clean
``$.loss.options.x`` paths.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import attrs

from omni_rl.context import BuildContext
from omni_rl.reporting.video_formats import video_format_problem
from omni_rl.validators import (
    count_or_auto,
    each,
    finite_between,
    int_between,
    non_empty,
    non_negative_finite,
    positive_finite,
)

#: upper bounds of counts: far beyond any real run, low enough that a typo (``steps = 10**30``, a prompt count
#: pasted into the wrong key) fails at load time, not after Ray and the model started or in an endless loop
MAX_STEPS = 10_000_000
MAX_COUNT = 1_000_000
#: ``[[reward]] max_invalid_steps``' default: a reward server restarting costs a step or two, not five
DEFAULT_MAX_INVALID_STEPS = 5
#: seeds go through numpy's SeedSequence and torch.manual_seed: non-negative, and 32 bits are plenty
MAX_SEED = 2**32 - 1


def _positive(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    """> 0 and finite (NaN compares false with everything, so ``value <= 0`` alone let it through)."""
    positive_finite(instance, attribute, value)


def _non_negative(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    """>= 0 and finite."""
    non_negative_finite(instance, attribute, value)


#: a count of steps (``steps``, ``save_every``, ...), with 0 meaning "never" where allowed
_steps = int_between(1, MAX_STEPS)
_every = int_between(0, MAX_STEPS)
_count = int_between(1, MAX_COUNT)
_count0 = int_between(0, MAX_COUNT)


def _resources(instance: Any, attribute: attrs.Attribute, value: dict[str, float]) -> None:
    """Ray resource amounts: finite and >= 0 (Ray itself fails late and obscurely on NaN)."""
    for key, amount in value.items():
        non_negative_finite(instance, attribute.evolve(name=f"{attribute.name}.{key}"), amount)


@attrs.frozen(kw_only=True)
class RunConfig:
    """``[run]``: length, seed and where the run writes."""

    steps: int = attrs.field(default=10, validator=_steps)
    seed: int = attrs.field(default=0, validator=int_between(0, MAX_SEED))
    output_dir: str = attrs.field(default="runs/omni-rl", validator=non_empty)
    #: save a checkpoint every N steps (0 = only at the end)
    save_every: int = attrs.field(default=0, validator=_every)
    #: keep only the newest N checkpoints (0 = keep all)
    keep_last: int = attrs.field(default=0, validator=_every)
    #: validate (ODE sampling on the val prompts) every N steps and at the last step (0 = never)
    eval_every: int = attrs.field(default=0, validator=_every)
    #: validate once before the first step (needs val prompts)
    eval_before_training: bool = False
    #: "never": refuse an output_dir that holds a run; "auto": continue from its latest checkpoint if there is
    #: one; or the path of a checkpoint directory (``.../checkpoints/step_<N>``) to continue from
    resume: str = "never"
    #: how many updates older than the policy a training batch's weights may be: 0 samples each step's batch with
    #: the weights being trained (synchronous); 1 samples step t+1's batch while step t trains, with the weights
    #: of step t-1's update (one-step-off, needs [cluster] rollout_workers > 0; see docs/distributed.md)
    max_staleness: int = attrs.field(default=0, validator=attrs.validators.in_((0, 1)))
    #: score a training batch in the reward actors ([[reward]] resources) part by part as each worker's samples
    #: are ready, while the other parts (and, at max_staleness = 1, the next batch) still sample; false scores
    #: the whole batch once it is back. In-driver rewards always score the whole batch (docs/rewards.md)
    stream_rewards: bool = True


def _mixed_precision_supported(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if value == "no" or instance is None:
        return
    if instance.strategy != "fsdp2":
        raise ValueError(
            f'mixed_precision = "{value}" needs strategy = "fsdp2" (got strategy = "{instance.strategy}"); '
            'with "ddp" set the model\'s own dtype instead, e.g. [model] options.dtype = "bfloat16"'
        )
    if instance.gpus_per_worker <= 0:
        raise ValueError(
            f'mixed_precision = "{value}" needs GPU workers (gpus_per_worker > 0): on CPU it would only make '
            'the run slower and less exact; use mixed_precision = "no"'
        )


@attrs.frozen(kw_only=True)
class ClusterConfig:
    """``[cluster]``: where the policy workers run."""

    #: "local" starts an embedded Ray; "auto" or "ray://host:10001" or "host:6379" joins an existing cluster
    address: str = "local"
    workers: int = attrs.field(default=1, validator=int_between(1, 100_000))
    gpus_per_worker: float = attrs.field(default=0.0, validator=_non_negative)
    cpus_per_worker: float = attrs.field(default=1.0, validator=_non_negative)
    #: "ddp": every worker holds the whole model and the trainable gradients are summed with one all-reduce;
    #: "fsdp2": the transformer is sharded across the workers with ``fully_shard`` (parameters, gradients and
    #: optimizer state each split N ways; weights are all-gathered block by block in every forward)
    strategy: Literal["ddp", "fsdp2"] = "ddp"
    #: "bf16": FSDP2 computes in bfloat16 (weights all-gathered in bfloat16, gradients reduced in float32, the
    #: optimizer steps float32 shards); GPU workers with strategy = "fsdp2" only. "no": the model's own dtype
    mixed_precision: Literal["no", "bf16"] = attrs.field(default="no", validator=_mixed_precision_supported)
    #: seconds a worker waits inside a collective (all-reduce, FSDP2 all-gather) for its peers before failing.
    #: A dead worker is detected by the driver at once; this bounds a peer that is alive but stuck
    collective_timeout_s: float = attrs.field(default=1800.0, validator=_positive)
    #: Ray actors apart from the policy workers that hold a no-grad copy of the model and run the rollout backend,
    #: receiving the trained weights after every update (0: the policy workers sample themselves, colocated)
    rollout_workers: int = attrs.field(default=0, validator=int_between(0, 100_000))
    #: each rollout worker's Ray resources (None: the policy workers' cpus_per_worker / gpus_per_worker)
    rollout_cpus_per_worker: float | None = attrs.field(
        default=None, validator=attrs.validators.optional(_non_negative)
    )
    rollout_gpus_per_worker: float | None = attrs.field(
        default=None, validator=attrs.validators.optional(_non_negative)
    )


@attrs.frozen(kw_only=True)
class DataConfig:
    """``[data]``: prompt sources. A source is a file path (.txt one prompt per line, .jsonl with a ``prompt``
    key and optional metadata, .parquet with a ``prompt`` column and optional metadata columns) or
    ``package:<module>:<relative path>`` for prompt sets shipped by a plugin."""

    train: str = ""
    val: str = ""
    #: distinct prompts per training step (each is sampled ``group_size`` times)
    prompts_per_step: int = attrs.field(default=2, validator=_count)
    #: validate on the first N val prompts (0 = all)
    val_prompts: int = attrs.field(default=0, validator=_count0)
    #: images per val prompt, each from its own fixed seed (GenEval scores 4 per prompt): one image per prompt
    #: makes ``val/reward/mean`` of a few dozen prompts swing by several hundredths between evaluations
    val_images_per_prompt: int = attrs.field(default=1, validator=int_between(1, 1_000))
    #: condition images (a row's ``image`` / ``images``) larger than this many pixels are downscaled when loaded,
    #: aspect kept (omni_rl.data_images); each model then sizes its own condition copies
    condition_max_pixels: int = attrs.field(default=1024 * 1024, validator=int_between(64 * 64, 8192 * 8192))


@attrs.frozen(kw_only=True)
class AlgorithmSection:
    """``[algorithm]``: a preset name; its defaults fill the component sections the file leaves out."""

    name: str


@attrs.frozen(kw_only=True)
class ComponentSection:
    """``[model]``, ``[sampler]``, ``[rollout]``, ``[advantage]``, ``[loss]``: a component and its options."""

    name: str
    options: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class RewardSection:
    """One ``[[reward]]`` table: rewards are combined as a weighted sum; each sub-score is logged."""

    name: str
    #: its factor in the weighted sum: finite (a NaN weight would make every total NaN and train on nothing)
    weight: float = attrs.field(default=1.0, validator=finite_between(-1e6, 1e6))
    #: "raise" stops the run with a clear error when the reward fails; "zero" scores the batch 0, counts it in
    #: ``reward/<name>/failures`` and prints the reward's first error (then a reminder every 20 failing steps)
    on_error: Literal["raise", "zero"] = "raise"
    #: stop the run after this many consecutive training steps in which the reward gave no valid score (every
    #: call failed and was scored 0, or every score was NaN/inf): such steps train on nothing (0 = never stop)
    max_invalid_steps: int = attrs.field(default=DEFAULT_MAX_INVALID_STEPS, validator=_every)
    #: Ray resources for a reward that needs its own (e.g. {GPU = 0.5} for a reward model): it then runs in a
    #: Ray actor holding those resources, scoring concurrently with the other rewards; empty = in the driver
    resources: dict[str, float] = attrs.field(factory=dict, validator=_resources)
    #: videos ((N, F, H, W, 3) rollouts): how an image reward's frame scores become the video's score, "mean",
    #: "min", "first" or "last" (omni_rl.rewards.frames); ignored for images and by rewards that score videos
    aggregate: Literal["mean", "min", "first", "last"] = "mean"
    options: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class EvalRewardSection:
    """One ``[[eval_reward]]`` table: a reward scored at validation only (``val/<name>/mean`` and its sub-scores),
    never trained on, so a run trained on one reward reports others beside it (no ``weight``: it is in no sum)."""

    name: str
    #: "raise" stops the run when the reward fails at validation; "zero" scores the val batch 0 and counts it in
    #: ``val/<name>/failures``
    on_error: Literal["raise", "zero"] = "raise"
    #: Ray resources of the reward's own actor, as for ``[[reward]]``; empty = in the driver
    resources: dict[str, float] = attrs.field(factory=dict, validator=_resources)
    #: videos: how frame scores become the video's, as for ``[[reward]]``
    aggregate: Literal["mean", "min", "first", "last"] = "mean"
    options: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class OptimConfig:
    """``[optim]``: AdamW on the trainable (LoRA) parameters and how the batch is cut for the update."""

    #: finite and > 0. No upper bound: a huge lr diverges, which the non-finite-step guard reports
    #: ([optim] max_consecutive_skips) with the last good checkpoint, rather than being a config error
    lr: float = attrs.field(default=1e-4, validator=_positive)
    weight_decay: float = attrs.field(default=1e-4, validator=_non_negative)
    #: each in [0, 1): a beta of 1 never forgets the first gradient, and Adam's bias correction divides by 0
    betas: tuple[float, float] = attrs.field(
        default=(0.9, 0.999), validator=each(finite_between(0.0, 1.0, high_open=True))
    )
    eps: float = attrs.field(default=1e-8, validator=_positive)
    #: max global grad norm (0 = no clipping)
    grad_clip: float = attrs.field(default=1.0, validator=_non_negative)
    #: samples per forward/backward; "auto": the largest that fits, probed once on a GPU (omni_rl.auto_batch),
    #: the whole local batch on the CPU
    micro_batch: int | Literal["auto"] = attrs.field(default=4, validator=count_or_auto(MAX_COUNT))
    #: samples per optimizer step (gradient accumulation over micro-batches); 0 = the whole step's batch
    mini_batch: int = attrs.field(default=0, validator=_count0)
    #: passes over each step's batch
    epochs: int = attrs.field(default=1, validator=int_between(1, 10_000))
    lr_schedule: Literal["constant", "linear", "cosine"] = "constant"
    warmup_steps: int = attrs.field(default=0, validator=_every)
    #: recompute old log-probs with the pre-update weights (exact); False reuses the rollout's
    recompute_old_log_probs: bool = True
    #: stop the run after this many consecutive training steps whose optimizer steps were all skipped
    #: because the loss or gradient was not finite (0 = never stop)
    max_consecutive_skips: int = attrs.field(default=3, validator=_every)


@attrs.frozen(kw_only=True)
class RolloutCorrectionConfig:
    """``[rollout_correction]``: correct for a rollout policy that differs from the trained one (another engine or
    precision, an older weights version); docs/math.md#rollout-correction. Trajectory losses only.

    ``mode``: ``"off"`` (the old log-probs are the recompute, or the rollout's with ``[optim]
    recompute_old_log_probs = false``; the diagnostics are logged whenever both exist), ``"bypass"`` (the rollout's
    log-probs are the old ones, no recompute for them), ``"decoupled"`` (recompute with the behaviour version's
    weights and weight each loss term by the truncated IS weight)."""

    mode: Literal["off", "bypass", "decoupled"] = "off"
    #: IS weight per window step (``"step"``) or one per sample from the summed log-ratio (``"sample"``)
    is_level: Literal["step", "sample"] = "step"
    #: C of w = min(exp(δ), C)
    is_threshold: float = attrs.field(default=2.0, validator=_positive)
    #: w <- w / mean(w) over the whole step's batch
    is_batch_normalize: bool = False
    rejection: Literal["off", "step_k1", "sample_mean_k1", "sample_max_k1"] = "off"
    #: [L, U] on exp(δ) (docs/math.md#rollout-correction)
    rejection_band: tuple[float, float] = attrs.field(default=(0.5, 2.0))

    @rejection_band.validator
    def _band(self, attribute: attrs.Attribute, value: tuple[float, float]) -> None:
        if not (all(map(math.isfinite, value)) and 0 < value[0] <= 1.0 <= value[1]):
            raise ValueError(f"must be [L, U] with 0 < L <= 1 <= U, got {list(value)}")


#: [log] backends the core knows (jsonl is always on)
LOG_BACKENDS = ("console", "jsonl", "tensorboard", "wandb")


def _known_backends(instance: Any, attribute: attrs.Attribute, value: list[str]) -> None:
    unknown = [b for b in value if b not in LOG_BACKENDS]
    if unknown:
        raise ValueError(f"unknown log backend(s) {unknown}; available: {', '.join(LOG_BACKENDS)}")


def _video_format(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    problem = video_format_problem(value)
    if problem:
        raise ValueError(problem)


@attrs.frozen(kw_only=True)
class LogConfig:
    """``[log]``: where metrics and images go."""

    backends: list[str] = attrs.field(factory=lambda: ["console", "jsonl"], validator=_known_backends)
    #: save a sample image grid every N steps (0 = never)
    image_every: int = attrs.field(default=0, validator=_every)
    #: the animated sample / val grids of video models: "auto" (MP4 with PyAV, else animated WebP, else GIF),
    #: "mp4", "webp" or "gif" (omni_rl.reporting.video_grids)
    video_format: str = attrs.field(default="auto", validator=_video_format)
    #: training steps to trace with torch.profiler (rollout + update inside each policy worker), written as
    #: Chrome/Perfetto JSON to ``<output_dir>/profile/step_<N>.<worker>.json`` (omni_rl.engine.profiling)
    profile_steps: list[int] = attrs.field(factory=list, validator=each(_steps))


@attrs.frozen(kw_only=True)
class TrainConfig:
    """The whole file. Component sections left out are filled by the ``[algorithm]`` preset."""

    model: ComponentSection
    run: RunConfig = attrs.field(factory=RunConfig)
    cluster: ClusterConfig = attrs.field(factory=ClusterConfig)
    data: DataConfig = attrs.field(factory=DataConfig)
    algorithm: AlgorithmSection | None = None
    sampler: ComponentSection | None = None
    rollout: ComponentSection | None = None
    advantage: ComponentSection | None = None
    loss: ComponentSection | None = None
    reward: list[RewardSection] = attrs.field(factory=list)
    eval_reward: list[EvalRewardSection] = attrs.field(factory=list)
    optim: OptimConfig = attrs.field(factory=OptimConfig)
    rollout_correction: RolloutCorrectionConfig = attrs.field(factory=RolloutCorrectionConfig)
    log: LogConfig = attrs.field(factory=LogConfig)


#: Single-component sections, in resolution order.
COMPONENT_SECTIONS: tuple[str, ...] = ("model", "sampler", "rollout", "advantage", "loss")


@attrs.frozen(kw_only=True)
class ResolvedComponent:
    """A component section after pass 2: its spec (from the registry) and its structured options."""

    kind: str
    name: str
    spec: Any
    options: Any
    #: reward weight and failure policy (defaults for other kinds)
    weight: float = 1.0
    on_error: str = "raise"
    max_invalid_steps: int = DEFAULT_MAX_INVALID_STEPS
    resources: dict[str, float] = attrs.field(factory=dict)
    #: rewards: how frame scores become a video's score (omni_rl.rewards.frames)
    aggregate: str = "mean"
    #: where the section is in its config file, e.g. "$.reward[1]" ("" when not read from a file)
    path: str = ""
    #: the plugin that provides it, as messages name plugins ("omni-rl-flow-grpo 0.1.0"; "" when not known), so a
    #: component that misbehaves at run time is blamed on its distribution, not on the core
    plugin: str = ""

    def build(self, ctx: Any) -> Any:
        """The component; a factory finds the section's ``path`` in ``ctx.section`` (to name ``$.reward[1].options.x``
        in its errors)."""
        if self.path and isinstance(ctx, BuildContext):
            ctx = attrs.evolve(ctx, section=self.path)
        return self.spec.factory(self.options, ctx)


@attrs.frozen(kw_only=True)
class ResolvedConfig:
    """A fully validated config: the file's shape plus every component resolved and structured.

    ``raw`` is the merged TOML-shaped dict (presets and ``--set`` applied) written to the run directory.
    """

    file: TrainConfig
    components: dict[str, ResolvedComponent]
    rewards: list[ResolvedComponent]
    raw: dict[str, Any]
    #: ``name==version`` of every loaded plugin distribution
    plugin_versions: list[str] = attrs.field(factory=list)
    #: the ``[[eval_reward]]`` sections: scored at validation only
    eval_rewards: list[ResolvedComponent] = attrs.field(factory=list)

    @property
    def run(self) -> RunConfig:
        return self.file.run

    @property
    def cluster(self) -> ClusterConfig:
        return self.file.cluster

    @property
    def data(self) -> DataConfig:
        return self.file.data

    @property
    def optim(self) -> OptimConfig:
        return self.file.optim

    @property
    def log(self) -> LogConfig:
        return self.file.log

    @property
    def rollout_correction(self) -> RolloutCorrectionConfig:
        return self.file.rollout_correction
