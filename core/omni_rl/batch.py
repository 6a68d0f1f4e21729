"""Data contracts between components: what a rollout produces, what a reward returns, what a loss receives.

Tensors are torch tensors on the worker's device inside workers and on CPU when they cross process
boundaries. Shapes use N = samples (prompts × group size), W = trained (SDE-window) steps, C/h/w = latent dims.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

try:  # torch is a runtime dependency of training, not of the plugin listing.
    import torch
    from torch import Tensor
except ImportError:  # pragma: no cover - only the light core tests run without torch
    torch = None  # type: ignore[assignment]
    Tensor = Any  # type: ignore[misc,assignment]


@attrs.define
class Conditioning:
    """Model-specific prompt conditioning (e.g. SD3: ``prompt_embeds``, ``pooled``, and negatives for CFG).

    Kept generic so the rollout backend and the update can slice and move it without knowing the model.
    Every tensor's first dimension is the sample dimension.
    """

    tensors: dict[str, Tensor]

    def index(self, idx: Tensor | slice | Sequence[int]) -> Conditioning:
        return Conditioning({k: v[idx] for k, v in self.tensors.items()})

    def to(self, device: Any) -> Conditioning:
        return Conditioning({k: v.to(device) for k, v in self.tensors.items()})

    @classmethod
    def concat(cls, parts: Sequence[Conditioning]) -> Conditioning:
        """The samples of ``parts`` in order, one tensor per key.

        Tensors of one key may differ in size along the dimensions after the first (Qwen-Image's text has as many
        tokens as each prompt has): each is right-padded with zeros to the largest, so a model whose conditioning
        varies in length carries a mask in which 0 means padding (and pads the same way itself)."""
        if not parts:
            raise ValueError("Conditioning.concat needs at least one part")
        out = {}
        for key in parts[0].tensors:
            tensors = [p.tensors[key] for p in parts]
            sizes = [max(int(t.shape[d]) for t in tensors) for d in range(1, tensors[0].ndim)]
            padded = []
            for t in tensors:
                pad: list[int] = []
                for d in reversed(range(1, t.ndim)):
                    pad += [0, sizes[d - 1] - int(t.shape[d])]
                padded.append(torch.nn.functional.pad(t, pad) if any(pad) else t)
            out[key] = torch.cat(padded)
        return cls(out)

    def __len__(self) -> int:
        return len(next(iter(self.tensors.values()))) if self.tensors else 0


@attrs.define
class SamplerStep:
    """One reverse step: the next sample and, for stochastic samplers, its log-prob.

    ``std_dev_t`` is the sampler's noise scale *without* the sqrt(-dt) factor (what the KL term uses);
    ``log_prob`` is the per-sample mean over non-batch dims (shape (B,)), None for deterministic samplers.
    """

    sample: Tensor
    mean: Tensor
    std_dev_t: Tensor
    log_prob: Tensor | None
    #: the std of x' given x (B,): s·sqrt(-dt) for flow_sde, s for cps and dance_sde; None when the sampler does
    #: not say (losses that need a true Gaussian KL between two means, such as flow_dppo, then refuse it)
    scale: Tensor | None = None


@attrs.define
class Trajectory:
    """The stochastic (SDE-window) steps of a rollout, recorded for the policy-gradient update."""

    #: x_j, shape (N, W, C, h, w)
    latents: Tensor
    #: x_{j+1}, shape (N, W, C, h, w)
    next_latents: Tensor
    #: sigma_j and sigma_{j+1}, shape (N, W)
    sigmas: Tensor
    next_sigmas: Tensor
    #: log p(x_{j+1} | x_j) under the rollout policy, shape (N, W)
    log_probs: Tensor
    #: first sigma below 1 of the schedule (flow_sde uses it in place of sigma at sigma = 1), shape (N,)
    sigma_max: Tensor
    #: schedule step index of each window step, shape (N, W)
    step_indices: Tensor
    #: CFG scale the rollout used: the update must apply the identical formula or the ratio is not 1
    guidance_scale: float = 1.0


@attrs.define
class RolloutBatch:
    """What a rollout backend returns for N samples."""

    prompts: list[str]
    #: prompt index of each sample (samples of one prompt share a group), shape (N,)
    group_ids: Tensor
    #: per-sample seed (same prompt + seed = same image), shape (N,)
    seeds: Tensor
    #: decoded images, uint8, shape (N, H, W, 3); a video model's frames (N, F, H, W, 3) (docs/hooks.md, "Video":
    #: rewards get frames one by one unless they declare ``scores_video``)
    images: Tensor
    #: final clean latents x0, shape (N, C, h, w) (a video model's (N, C, F', h, w): every shape here is per sample)
    final_latents: Tensor
    #: prompt conditioning used (needed to re-score steps in the update)
    conditioning: Conditioning
    #: present when the loss needs per-step log-probs
    trajectory: Trajectory | None = None
    metadata: list[dict[str, Any]] = attrs.field(factory=list)

    def __len__(self) -> int:
        return len(self.prompts)


@attrs.define
class RewardResult:
    """A reward model's output: one score per sample and optional named sub-scores (logged)."""

    scores: np.ndarray
    details: dict[str, np.ndarray] = attrs.field(factory=dict)
    #: samples the reward scored 0 because scoring them failed (a remote judge that timed out, say) while the rest
    #: of the batch scored normally; added to ``reward/<name>/failures`` so the zeros are not mistaken for verdicts
    failures: int = 0

    @classmethod
    def coerce(cls, value: RewardResult | np.ndarray | Sequence[float]) -> RewardResult:
        if isinstance(value, RewardResult):
            return value
        return cls(scores=np.asarray(value, dtype=np.float64))


def check_reward_images(images: Any, prompts: Sequence[str], *, videos: bool = False) -> np.ndarray:
    """What a reward receives (:class:`omni_rl.protocols.RewardModel`): ``images`` as a uint8 (N, H, W, 3) numpy
    array (a CPU tensor of that layout converts) with N == len(prompts), or ValueError. ``videos``: a reward that
    scores whole videos (``scores_video``) also takes (N, F, H, W, 3) with at least one frame.

    Another dtype or layout is a bug in the component that produced the images (rewards score decoded uint8 RGB,
    never latents or [0, 1] floats), so this raises rather than guessing a range to rescale from.
    """
    array = np.asarray(images)
    if videos and array.ndim == 5 and array.shape[-1] == 3:
        if array.shape[1] == 0:
            raise ValueError(f"videos must have at least one frame, got shape {array.shape}")
    elif array.ndim != 4 or array.shape[-1] != 3:
        also = " or videos (N, F, H, W, 3)" if videos else ""
        raise ValueError(f"images must have shape (N, H, W, 3){also} (RGB, channels last), got {array.shape}")
    if array.dtype != np.uint8:
        raise ValueError(f"images must be uint8 in [0, 255], got dtype {array.dtype}")
    if len(prompts) != len(array):
        raise ValueError(f"got {len(array)} images but {len(prompts)} prompts; they must pair up")
    return array


@attrs.define
class TrajectoryLossInputs:
    """What a trajectory (per-step log-prob) loss receives for one micro-batch at one window step.

    ``current`` has gradients; ``old`` and ``reference`` are computed without gradients and are None unless
    the loss asked for them in :class:`LossRequirements.views`. ``old_log_prob`` is always present: the old
    policy's log-prob of the stored step (recomputed before the update, or the rollout's).
    """

    current: SamplerStep
    old_log_prob: Tensor
    advantages: Tensor
    old: SamplerStep | None = None
    reference: SamplerStep | None = None
    #: sigma_j and sigma_{j+1} of these samples, shape (B,)
    sigmas: Tensor | None = None
    next_sigmas: Tensor | None = None
    #: per-sample fields the loss's ``prepare`` added
    extras: Mapping[str, Tensor] = attrs.field(factory=dict)
    #: the schedule step j of each sample at this window column, shape (B,): a column may mix steps across
    #: samples (DanceGRPO's timestep_fraction), so per-timestep metrics group by this, not by the column
    step_indices: Tensor | None = None
    #: detached per-sample weights (B,) of the rollout correction (IS weight × not rejected) that multiply each
    #: sample's loss term before the mean; None = every weight 1 (losses declaring
    #: ``LossRequirements.sample_weights`` honour it)
    weights: Tensor | None = None
    #: which column of the stored window (0 … W − 1) this call is: a tree rollout's depth (step-level advantages)
    window_position: int | None = None


@attrs.define
class ForwardLossInputs:
    """What a forward-process loss (DPO, DiffusionNFT, AWM) receives for one micro-batch at one timestep draw.

    The loss draws its own timesteps and noise (shared per pair for DPO, per sample otherwise) from the
    per-sample ``generators``, which the update seeds from (run seed, step, epoch, sample id, timestep index), so
    draws do not depend on micro-batching or on the number of workers. ``velocity(view, x_t, sigma)`` evaluates a
    policy view on these samples: ``"current"`` with gradients, ``"old"`` / ``"ema"`` (named LoRA adapters) and
    ``"reference"`` (adapters disabled) without. ``sigma`` has shape (B,) and is the flow time t in [0, 1].
    ``velocity(view, x_t, sigma, samples)`` evaluates only some of the samples (or repeats some): ``samples`` is
    a (B',) index into this micro-batch saying whose conditioning each row of ``x_t`` (B', ...) uses, so a pairwise
    loss forwards just its pairs rather than every member of a group.
    """

    #: clean latents x0 of the samples, shape (B, C, h, w)
    x0: Tensor
    advantages: Tensor
    rewards: Tensor
    #: prompt group of each sample, shape (B,)
    group_ids: Tensor
    #: one generator per sample for the loss's t and noise draws
    generators: list[Any]
    velocity: Any
    #: which of ``requirements.timesteps`` draws this call is
    timestep_index: int = 0
    extras: Mapping[str, Tensor] = attrs.field(factory=dict)
    #: one generator per sample seeded by (run seed, step, epoch, sample id) only and made afresh for every call,
    #: so it gives the same draws at every ``timestep_index`` of an epoch: a loss draws one permutation of
    #: timesteps per sample and epoch from it and takes entry ``timestep_index`` (draws without replacement)
    epoch_generators: list[Any] = attrs.field(factory=list)
    #: ``sigma_schedule(num_steps)``: the model's sampling sigmas (num_steps + 1 values from 1 to 0, its shift
    #: applied) at these samples' image size, for losses that train on the sampling schedule's timesteps
    sigma_schedule: Any = None


@attrs.define
class LossOutput:
    """A scalar loss to backpropagate and metrics (floats or 0-d tensors) averaged over micro-batches.

    The driver averages each metric over every call weighted by the samples it covers: all of the call's samples,
    unless ``metric_counts`` names fewer. A metric of a subset (a per-timestep mean such as
    ``ratio_mean/step_3`` covers only the samples at step 3) gives its sample count there, so the merged value is
    the mean over exactly those samples; a count of 0 leaves the call out of that metric's mean.
    """

    loss: Tensor
    metrics: dict[str, Any] = attrs.field(factory=dict)
    #: samples a metric averages, for metrics that cover fewer than all of the call's samples
    metric_counts: dict[str, int] = attrs.field(factory=dict)
