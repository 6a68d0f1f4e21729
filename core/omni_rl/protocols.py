"""The protocol each component kind implements (see docs/hooks.md).

These are structural types: a plugin's component does not inherit from them, it only has these members.
The conformance suites in :mod:`omni_rl.testing` check them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import attrs
import numpy as np

from omni_rl.batch import (
    Conditioning,
    ForwardLossInputs,
    LossOutput,
    RewardResult,
    RolloutBatch,
    SamplerStep,
    Tensor,
    TrajectoryLossInputs,
)

if TYPE_CHECKING:
    from omni_rl.benchmark import BenchmarkSummary, ImageResult, ImageVerdict
    from omni_rl.data import PromptRecord

#: the policies a loss can ask the update to evaluate (``LossRequirements.views``): "old" and "ema" are named
#: LoRA adapters the loss adds in ``setup``, "reference" is the model with its adapters off
View = Literal["current", "old", "reference", "ema"]

#: Optional members of each kind's component, used when present: not part of the structural check, so
#: components written before them still conform. docs/hooks.md documents each one (a meta-test checks both).
OPTIONAL_MEMBERS: dict[str, tuple[str, ...]] = {
    "model": (
        "export_pipeline",
        "encode_images",
        "keep_reference_copy",
        "fsdp_units",
        "add_adapter",
        "use_adapter",
        "blend_adapter",
        "eager_forwards",
        "encode_conditions",
    ),
    "sampler": ("trained_positions", "deterministic_solver"),
    "rollout": ("load_weights",),
    "advantage": ("reward_aggregation",),
    "benchmark": ("image_seed", "pipeline_overrides"),
    "loss": (
        "setup",
        "before_update",
        "after_optimizer_step",
        "after_update",
        "checkpoint_state",
        "load_checkpoint_state",
    ),
}


@runtime_checkable
class DiffusionModel(Protocol):
    """A text-to-image flow-matching model inside a policy worker, with its trainable (LoRA) weights.

    Optional member (not part of the structural check, so older plugins still conform): ``export_pipeline(
    directory, *, merged: bool) -> None`` writes the current policy for use without omni-rl: with ``merged =
    False`` the LoRA in the architecture's diffusers format (``pipe.load_lora_weights(directory)``), with ``merged
    = True`` the whole pipeline with the LoRA fused into plain weights (``DiffusionPipeline.from_pretrained(
    directory)``). ``omni-rl export`` calls it after :meth:`load_lora`; a model without it cannot be exported.

    Optional members for forward-process losses on given images (the ``dpo`` plugin's offline preference data):
    ``encode_images(images) -> Tensor`` turns uint8 images (B, H, W, 3) into the float32 latents (B, C, h, w) that
    :meth:`decode` would turn back into them (deterministic: the VAE posterior's mean); ``keep_reference_copy()
    -> None`` makes :meth:`disable_adapters` usable under full fine-tuning by keeping a frozen copy of the
    transformer as it is now (a no-op with LoRA, where adapters off is the reference).

    Optional members for losses with an ``"old"`` or ``"ema"`` view (DiffusionNFT, AWM), named LoRA adapters:
    ``add_adapter(name, *, copy_from="default")``, ``use_adapter(name)`` (a context in which that adapter is
    active) and ``blend_adapter(target, source="default", *, decay)`` (``target ← decay·target + (1 − decay)·
    source``).

    Optional member for editing and image-to-video models: ``encode_conditions(prompts, images, *,
    guidance_scale) -> Conditioning``, :meth:`encode_prompts` with each prompt's condition images (uint8 (H, W, 3)
    host arrays); the condition's latents and ids go into the conditioning, and :meth:`predict_velocity` appends
    them to the transformer's input and crops its output back to the target (docs/hooks.md, "Condition images").

    Optional member ``eager_forwards()``: a context in which the model's forwards run eagerly, bypassing what
    it captured for speed (CUDA graphs); the ``"auto"`` batch probes run in it, so a try measures the forward's
    own memory and leaves nothing of a probe size behind.

    Under ``[cluster] strategy = "fsdp2"`` the worker shards :attr:`transformer` with ``fully_shard`` (optional
    member ``fsdp_units() -> list[Module]`` names the modules sharded one by one; by default the entries of the
    transformer's ``*blocks`` module lists), so :meth:`trainable_parameters` must look the parameters up when
    called, and :meth:`save_lora` is then called on every worker: it gathers the sharded weights whole
    (``omni_rl.engine.fsdp.gather_state``, a collective) and writes on rank 0 only.
    """

    #: the denoiser being trained (peft-wrapped when LoRA is on)
    transformer: Any
    device: Any
    dtype: Any

    def encode_prompts(self, prompts: Sequence[str], *, guidance_scale: float) -> Conditioning:
        """Encode prompts (and the negative prompt when guidance_scale > 1) once per rollout.

        Conditionings of single prompts are joined with ``Conditioning.concat`` (zero right-padding of tensors that
        differ in size after the first dimension), so variable-length conditioning carries a mask with 0 = padding,
        and a sample's velocity must not depend on the padding or on the other samples of its batch."""

    def predict_velocity(
        self, latents: Tensor, sigmas: Tensor, conditioning: Conditioning, guidance_scale: float
    ) -> Tensor:
        """v(x_t, sigma) with CFG applied by the model's own formula; sigmas has shape (B,). Returns float32."""

    def sigma_schedule(self, num_steps: int, height: int, width: int) -> Tensor:
        """num_steps + 1 float32 sigmas from 1 down to 0 with the model's shift applied."""

    def latent_shape(self, height: int, width: int) -> tuple[int, int, int]:
        """(C, h, w) of the latents for an image of this size."""

    def decode(self, latents: Tensor) -> Tensor:
        """Latents to uint8 images of shape (B, H, W, 3)."""

    def trainable_parameters(self) -> list[Any]:
        """Parameters the optimizer updates (the LoRA weights, or all transformer weights)."""

    def disable_adapters(self) -> AbstractContextManager[None]:
        """Context in which the model is the reference policy (LoRA off)."""

    def save_lora(self, directory: str | Path) -> None:
        """Write the trained LoRA in diffusers format (``pytorch_lora_weights.safetensors``)."""

    def load_lora(self, directory: str | Path) -> None:
        """Load LoRA weights written by :meth:`save_lora` into the trained adapter."""


@runtime_checkable
class Sampler(Protocol):
    """One reverse step from sigma to sigma_next, with the log-prob of the next sample (docs/math.md#samplers).

    Optional member ``deterministic_solver()``: a fresh solver for the deterministic steps outside the SDE window
    of a training rollout (``step(x, velocity, sigma, sigma_next) -> Tensor`` and ``reset()``, called after each
    stochastic step); the rollout backend makes one per batch chunk, and takes Euler steps without it (MixGRPO-Flash
    uses DPM-Solver++(2M) there).

    Optional member ``trained_positions(window_len, step, run_seed, sample_seed) -> list[int]``: the positions
    (ascending, in ``range(window_len)``) of the recorded window steps one sample trains (DanceGRPO's
    ``timestep_fraction``); the same count for every sample seed, and a function of its arguments alone so every
    worker agrees. The policy worker keeps only those columns of the trajectory; without it every window step is
    trained.
    """

    #: True for samplers that draw noise and score their steps (flow_sde, cps); False for ode
    stochastic: bool

    def step(
        self,
        x: Tensor,
        velocity: Tensor,
        sigma: Tensor,
        sigma_next: Tensor,
        *,
        sigma_max: Tensor | None = None,
        noise: Tensor | None = None,
        prev_sample: Tensor | None = None,
    ) -> SamplerStep:
        """Draw x' = mean + std * noise, or re-score the given ``prev_sample`` (detached). All float32."""

    def window(self, step: int, num_steps: int, seed: int) -> range:
        """Which schedule steps are stochastic (and trained) at training step ``step``."""


@attrs.frozen(kw_only=True)
class RolloutRequest:
    """A shard of one step's rollout: N prompts (already repeated group-size times) with their seeds."""

    prompts: list[str]
    group_ids: list[int]
    seeds: list[int]
    #: training step (drives the SDE window); -1 for validation
    step: int
    #: "train" samples with the sampler and records the window; "eval" uses the ODE with eval steps
    mode: Literal["train", "eval"] = "train"
    #: record the per-step trajectory (the loss needs log-probs)
    record_trajectory: bool = True
    #: run seed, combined with ``step`` to draw the window start identically on every worker
    run_seed: int = 0
    metadata: list[dict[str, Any]] = attrs.field(factory=list)
    #: per sample, its condition images (uint8 (H, W, 3) on the host; the same for every sample of a group): the
    #: source of an edit, an image-to-video first frame. Empty for text-only requests
    conditions: list[tuple[np.ndarray, ...]] = attrs.field(factory=list)

    def select(self, positions: Sequence[int]) -> RolloutRequest:
        """The sub-request of the samples at ``positions`` (in that order): one worker's shard of a step."""
        return attrs.evolve(
            self,
            prompts=[self.prompts[i] for i in positions],
            group_ids=[self.group_ids[i] for i in positions],
            seeds=[self.seeds[i] for i in positions],
            metadata=[self.metadata[i] for i in positions] if self.metadata else [],
            conditions=[self.conditions[i] for i in positions] if self.conditions else [],
        )


@attrs.define(kw_only=True, eq=False)
class RolloutOutcome:
    """What a rollout hands the driver (the samples themselves stay in the worker that drew them, for the update).

    One worker produces one for its shard; a worker group joins its workers' outcomes in the request's order
    (:meth:`join`), and the trainer reads the joined one. Images are uint8 on the host: (N, H, W, 3), or (N, F, H,
    W, 3) for video.
    """

    images: np.ndarray
    prompts: list[str]
    group_ids: np.ndarray
    #: a training rollout's recorded SDE window (schedule step indices); empty when none was recorded
    window: list[int] = attrs.field(factory=list)
    #: what a rollout ``batch_size = "auto"`` resolved to (the smallest over the joined workers); None otherwise
    batch_size: int | None = None
    #: the weights version that sampled it (rollout workers, ``[cluster] rollout_workers > 0``); None when colocated
    version: int | None = None
    #: the reward actors' scores of the shards streamed to them while sampling went on; None when not streamed
    streamed: Any = None

    @classmethod
    def join(cls, parts: Sequence[RolloutOutcome]) -> RolloutOutcome:
        """Concatenate shards in order. Every worker must have drawn the same SDE window and (rollout workers)
        sampled with the same weights version: a disagreement is a bug in the draw, raised as an AssertionError."""
        windows = {tuple(p.window) for p in parts}
        versions = {p.version for p in parts}
        if len(windows) > 1 or len(versions) > 1:
            raise AssertionError(
                f"workers disagree: SDE windows {sorted(windows)}, weights versions {sorted(versions, key=str)}: "
                "the draw must agree"
            )
        sizes = [p.batch_size for p in parts if p.batch_size is not None]
        return cls(
            images=np.concatenate([p.images for p in parts]),
            prompts=[q for p in parts for q in p.prompts],
            group_ids=np.concatenate([p.group_ids for p in parts]),
            window=list(windows.pop()),
            batch_size=min(sizes) if sizes else None,
            version=versions.pop(),
        )


@runtime_checkable
class RolloutBackend(Protocol):
    """Turns prompts into images with the current policy.

    Optional member ``load_weights(state, version) -> None``: in a rollout worker (``[cluster] rollout_workers >
    0``), called with every new weights version (:class:`omni_rl.runtime.weights.WeightsState`: the trainable and
    extra-adapter tensors by name, on the CPU) before the rollouts that follow; a backend serving the model from
    its own engine (vLLM-Omni: push the LoRA tensors to the server) implements it and keeps recording per-step
    log-probs in the trajectory. Without it the worker copies the state into the model it hands ``generate``.
    """

    #: samples per prompt (the GRPO group)
    group_size: int

    def generate(self, model: DiffusionModel, sampler: Sampler, request: RolloutRequest) -> RolloutBatch: ...


@runtime_checkable
class RewardModel(Protocol):
    """Scores images against their prompts: one float per sample (higher is better)."""

    def __call__(
        self, images: np.ndarray, prompts: Sequence[str], metadata: Sequence[Mapping[str, Any]]
    ) -> RewardResult | np.ndarray: ...


@runtime_checkable
class AdvantageEstimator(Protocol):
    """Rewards and group ids of the whole batch to one advantage per sample.

    Optional member ``reward_aggregation() -> str``: with several ``[[reward]]`` sections, ``"reward"`` (the
    default without it) gives the estimator the weighted sum Σ_k w_k r_k; ``"advantage"`` makes the trainer call it
    on each reward's scores alone and use Σ_k w_k A_k (docs/math.md#multi-reward-aggregation).
    """

    def __call__(self, rewards: Tensor, group_ids: Tensor) -> Tensor: ...


@attrs.frozen(kw_only=True)
class LossRequirements:
    """What a loss needs, so the rollout and the update do only that work.

    ``inputs = "trajectory"``: per-step log-probs of the SDE window (Flow-GRPO family).
    ``inputs = "forward"``: clean x0 re-noised at sampled timesteps (DPO, DiffusionNFT, AWM).
    ``views``: which policies the update evaluates besides ``current`` (``old``, ``reference``, ``ema``).
    ``timesteps``: forward losses only: timestep draws per sample and update (one backward each).
    ``batch_unit``: ``"group"`` keeps each prompt's samples in one micro-batch (pairwise losses such as DPO).
    ``rollout_view``: the policy that samples: ``"current"``, or ``"old"`` (DiffusionNFT samples with the old
    adapter).
    ``sample_weights``: trajectory losses only: the loss multiplies each sample's term by
    ``TrajectoryLossInputs.weights`` when given (rollout correction's IS weights and rejection; the mean's
    denominator unchanged); ``[rollout_correction]`` modes that weight the loss refuse a loss without it.
    """

    inputs: Literal["trajectory", "forward"] = "trajectory"
    views: frozenset[str] = frozenset({"current"})
    timesteps: int = 1
    batch_unit: Literal["sample", "group"] = "sample"
    rollout_view: Literal["current", "old"] = "current"
    sample_weights: bool = False


@runtime_checkable
class Loss(Protocol):
    """Computes a scalar loss and metrics from the views it asked for."""

    requirements: LossRequirements

    def prepare(self, rewards: Tensor, advantages: Tensor, group_ids: Tensor) -> dict[str, Tensor]:
        """Per-sample fields computed once on the whole batch (pairing, reward probabilities); may be empty."""

    def __call__(self, inputs: TrajectoryLossInputs | ForwardLossInputs) -> LossOutput: ...

    # Optional hooks, called in the policy worker when present:
    #   setup(model) -> None: once, after the model is built (e.g. add the "old" or "ema" LoRA adapter);
    #   before_update(model, step: int) -> None: forward losses, at the start of each step's update;
    #   after_optimizer_step(model, update_index: int) -> None: after every optimizer step (refresh "old");
    #   after_update(model, update_index: int) -> None: forward losses, once after each step's whole update
    #   (all its optimizer steps); update_index counts the optimizer steps taken so far in the run (resumes
    #   continue the count);
    #   checkpoint_state() -> dict / load_checkpoint_state(state: dict) -> None: JSON-serialisable state the loss
    #   keeps across steps (counters), saved in every checkpoint and restored on resume. The extra adapters'
    #   weights need no hook: the checkpoint holds every frozen LoRA weight of the model.


@runtime_checkable
class Benchmark(Protocol):
    """An evaluation benchmark, built by its ``BenchmarkSpec.factory(options, ctx)``.

    Optional members (looked up with ``getattr``, so a benchmark without them keeps the core's behaviour):

    - ``image_seed(seed, index, sample) -> int``: the seed of image ``sample`` of prompt ``index`` (default
      :func:`omni_rl.evaluation.loop.image_seed`), for a benchmark whose reference numbers were measured with its own
      seeds (shapes: its pipelines' recorded val reward), so the same images are drawn again.
    - ``pipeline_overrides(directory) -> list[str]``: ``--set``-style overrides applied before the user's when the
      target is a pipeline directory (a run is always sampled as its validation was), for pipelines that carry
      their own sampling settings (shapes: resolution, steps, CFG and text length of the pretraining record).
    """

    #: images per prompt the published numbers use (GenEval: 4); ``--images-per-prompt`` overrides it
    images_per_prompt: int

    def prompts(self) -> list[PromptRecord]:
        """The benchmark's full prompt set, in its published order, with each prompt's metadata."""

    def score(self, images: np.ndarray, records: Sequence[PromptRecord]) -> list[ImageVerdict]:
        """One verdict per uint8 (N, H, W, 3) image, ``records[i]`` being image i's prompt."""

    def summarize(self, results: Sequence[ImageResult]) -> BenchmarkSummary:
        """The benchmark's table from every image's result (all prompts, or the ``--limit`` subset)."""


def iter_protocols() -> Iterator[tuple[str, type]]:
    """(kind, protocol) pairs, for docs and the conformance suites."""
    yield from (
        ("model", DiffusionModel),
        ("sampler", Sampler),
        ("rollout", RolloutBackend),
        ("reward", RewardModel),
        ("advantage", AdvantageEstimator),
        ("loss", Loss),
        ("benchmark", Benchmark),
    )
