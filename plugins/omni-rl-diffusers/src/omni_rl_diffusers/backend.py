"""The diffusers rollout backend: samples with the policy inside the worker that trains it (no weight copy).

Determinism contract: sample k's initial latents and every SDE noise draw come from a torch.Generator seeded
with that sample's seed alone, so the same prompt + seed gives the same image whatever the number of workers.
Only the float rounding of batched matmuls depends on how samples are chunked (about 1e-6 on CPU), so keep
``batch_size`` fixed when comparing runs bit for bit. Steps outside the SDE window are deterministic and are not
recorded: in training rollouts they go through the sampler's ``deterministic_solver()`` when it has one (optional
member: Euler, or MixGRPO-Flash's DPM-Solver++(2M)), one solver per batch chunk, reset after each stochastic step
so the step after the window is first order; otherwise, and always in validation, they are the Euler step of
diffusers' FlowMatchEulerDiscreteScheduler, so validation keeps equalling the diffusers pipeline's output.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from omni_rl.auto_batch import AutoBatchCache, eager_forwards, is_auto
from omni_rl.batch import Conditioning, RolloutBatch, Trajectory
from omni_rl.errors import ConfigError
from omni_rl.protocols import DiffusionModel, RolloutRequest, Sampler
from omni_rl.seeding import keyed_generator
from omni_rl_diffusers.config import DiffusersRolloutConfig
from omni_rl_diffusers.frames import rollout_latent_shape
from omni_rl_diffusers.tree import branch_noise, check_tree, leaf_positions, node_keys, unique_rows

#: keeps the shared-x_T stream apart from other (seed, step, id)-keyed streams
_SHARED_NOISE_SALT = 4_242


class DiffusersRollout:
    """Batched text-to-image sampling with per-sample seeds, CFG and an SDE window."""

    def __init__(self, config: DiffusersRolloutConfig) -> None:
        self.config = config
        self.group_size = config.group_size
        #: ``batch_size = "auto"``'s resolved sizes, per model, device and shape
        self.auto_sizes = AutoBatchCache("[rollout] batch_size")
        #: what ``"auto"`` resolved to in the last rollout (None with an explicit size); the worker reports it and
        #: the trainer logs it as ``rollout/batch_size``
        self.last_batch_size: int | None = None

    @property
    def eval_guidance_scale(self) -> float:
        return self.config.cfg if self.config.eval_cfg is None else self.config.eval_cfg

    @torch.no_grad()
    def generate(self, model: DiffusionModel, sampler: Sampler, request: RolloutRequest) -> RolloutBatch:
        cfg = self.config
        train = request.mode == "train"
        num_steps = cfg.steps if train else cfg.eval_steps
        guidance = cfg.cfg if train else self.eval_guidance_scale
        sigmas = model.sigma_schedule(num_steps, cfg.height, cfg.width).to(model.device, torch.float32)
        window = sampler.window(request.step, num_steps, request.run_seed) if train else range(0)
        stochastic = train and sampler.stochastic and len(window) > 0
        make_solver = getattr(sampler, "deterministic_solver", None) if train else None
        record = stochastic and request.record_trajectory
        conditioning = self._encode_unique(model, request, guidance)
        latent_shape = rollout_latent_shape(model, cfg.height, cfg.width, cfg.num_frames)
        precision = _precision(model, cfg.dtype if train else "model")

        finals, images, records = [], [], []
        n = len(request.prompts)
        batch_size = self._batch_size(model, conditioning, latent_shape, guidance, precision, train, n)
        self.last_batch_size = batch_size if is_auto(cfg.batch_size) else None
        # tree rollouts (docs/math.md#tree-rollouts): one x_T per group, branching at the window's steps
        branching = tuple(getattr(sampler, "tree_branching", ()) or ()) if stochastic else ()
        positions: list[int] = []
        if branching:
            check_tree(branching, window, request.group_ids)
            positions = leaf_positions(request.group_ids)
        shared = None
        if train and (cfg.shared_initial_noise or branching):  # one x_T per group, whichever batch its samples fall in
            shared = {g: _group_initial_noise(request, g, latent_shape) for g in dict.fromkeys(request.group_ids)}
        for start in range(0, n, batch_size):
            idx = list(range(start, min(start + batch_size, n)))
            generators = [torch.Generator().manual_seed(int(request.seeds[i])) for i in idx]
            if shared is not None:
                x = torch.stack([shared[request.group_ids[i]] for i in idx]).to(model.device)
            else:
                x = _per_sample_randn(generators, latent_shape).to(model.device)
            cond = conditioning.index(idx)
            chunk_record: list[tuple[torch.Tensor, ...]] = []
            solver = make_solver() if make_solver is not None else None  # keeps this chunk's previous steps
            chunk_groups = [request.group_ids[i] for i in idx]
            chunk_positions = [positions[i] for i in idx] if branching else []
            for i in range(num_steps):
                sigma = sigmas[i].expand(len(idx))
                sigma_next = sigmas[i + 1].expand(len(idx))
                if branching:  # one transformer call per distinct tree node of the chunk
                    done = sum(1 for j in window if j < i)
                    rows, inverse = unique_rows(node_keys(chunk_groups, chunk_positions, branching, done))
                    pick = torch.as_tensor(rows, dtype=torch.long, device=x.device)
                    with precision:
                        distinct = model.predict_velocity(x[pick], sigma[pick], cond.index(rows), guidance).float()
                    velocity = distinct[inverse.to(distinct.device)]
                else:
                    with precision:
                        velocity = model.predict_velocity(x, sigma, cond, guidance).float()
                if stochastic and i in window:
                    if branching:
                        depth = i - window.start
                        child = node_keys(chunk_groups, chunk_positions, branching, depth + 1)
                        noise = branch_noise(request.run_seed, request.step, child, depth, latent_shape)
                        noise = noise.to(model.device)
                    else:
                        noise = _per_sample_randn(generators, latent_shape).to(model.device)
                    out = sampler.step(
                        x, velocity, sigma, sigma_next, sigma_max=sigmas[1].expand(len(idx)), noise=noise
                    )
                    if record:
                        chunk_record.append((x, out.sample, sigma, sigma_next, out.log_prob))
                    x = out.sample
                    if solver is not None:
                        solver.reset()  # a noisy step: the next deterministic step starts over at first order
                elif solver is not None:
                    x = solver.step(x, velocity, sigma, sigma_next)
                else:
                    x = x + velocity * (sigma_next - sigma).view(-1, *([1] * (x.ndim - 1)))
            finals.append(x)
            images.append(model.decode(x).cpu())
            records.append(chunk_record)

        trajectory = None
        if record:
            trajectory = _stack_trajectory(records, window, sigmas, guidance)
        return RolloutBatch(
            prompts=list(request.prompts),
            group_ids=torch.as_tensor(request.group_ids, dtype=torch.long),
            seeds=torch.as_tensor(request.seeds, dtype=torch.long),
            images=torch.cat(images),
            final_latents=torch.cat(finals),
            conditioning=conditioning,
            trajectory=trajectory,
            metadata=list(request.metadata),
        )

    def _batch_size(
        self,
        model: DiffusionModel,
        conditioning: Conditioning,
        latent_shape: tuple[int, ...],
        guidance: float,
        precision: contextlib.AbstractContextManager[None],
        train: bool,
        n: int,
    ) -> int:
        """``batch_size``, or for ``"auto"`` the largest chunk that fits: each probe runs what one chunk of the
        rollout runs at its peak (one transformer call at the real guidance, then the VAE decode) on zero latents,
        no RNG drawn, so the rollout's images are those of the explicit size it resolves to."""
        if not is_auto(self.config.batch_size):
            return int(self.config.batch_size)

        def try_size(b: int) -> None:
            x = torch.zeros((b, *latent_shape), device=model.device)
            sigma = torch.ones(b, device=model.device)
            cond = conditioning.index(torch.zeros(b, dtype=torch.long))
            with precision, eager_forwards(model):
                velocity = model.predict_velocity(x, sigma, cond, guidance)
            del velocity
            model.decode(x)

        dtype = self.config.dtype if train else "model"
        key = (type(model).__name__, getattr(model, "pipeline_path", id(model)), latent_shape, guidance > 1, dtype)
        return self.auto_sizes.resolve(key, model.device, n, try_size)

    @staticmethod
    def _encode_unique(model: DiffusionModel, request: RolloutRequest, guidance: float) -> Conditioning:
        """Encode each distinct prompt (with its condition images, when the request has them) once, then expand:
        a group repeats its prompt group_size times.

        Prompts are encoded one at a time: a text encoder's output depends (at float rounding) on what else is in
        its batch, and a prompt's images must not depend on which other prompts share its worker. With condition
        images the key is the prompt and the images' bytes (an edit set may pair one instruction with many
        sources), and the model's ``encode_conditions`` encodes them (docs/hooks.md, "Condition images").
        """
        prompts = request.prompts
        if not request.conditions:
            keys: list[Any] = list(prompts)
            unique = list(dict.fromkeys(keys))
            parts = [model.encode_prompts([p], guidance_scale=guidance) for p in unique]
        else:
            encode = getattr(model, "encode_conditions", None)
            if encode is None:
                raise ConfigError(
                    f"model {type(model).__name__} takes no condition images, but the prompts carry some",
                    hint="use an editing or image-to-video model (docs/editing.md), or drop the rows' image fields",
                )
            keys = [_condition_key(p, images) for p, images in zip(prompts, request.conditions, strict=True)]
            first = {key: i for i, key in reversed(list(enumerate(keys)))}
            unique = list(dict.fromkeys(keys))
            parts = [
                encode([prompts[first[k]]], [request.conditions[first[k]]], guidance_scale=guidance) for k in unique
            ]
        position = {key: k for k, key in enumerate(unique)}
        encoded = Conditioning.concat(parts)  # right-pads variable-length text (Qwen-Image) with zeros
        return encoded.index(torch.as_tensor([position[key] for key in keys], dtype=torch.long))


def _condition_key(prompt: str, images: Sequence[np.ndarray]) -> tuple[str, tuple[str, ...]]:
    """A (prompt, condition images) pair by value: the prompt and each image's shape and content digest."""
    digests = tuple(f"{image.shape}:{hashlib.sha1(np.ascontiguousarray(image).data).hexdigest()}" for image in images)
    return prompt, digests


def _precision(model: DiffusionModel, dtype: str) -> contextlib.AbstractContextManager[None]:
    """The rollout's compute precision: autocast to bfloat16, or the model's own dtype (no context)."""
    if dtype == "model":
        return contextlib.nullcontext()
    device_type = torch.device(model.device).type
    return torch.autocast(device_type=device_type, dtype=torch.bfloat16)


def _group_initial_noise(request: RolloutRequest, group_id: int, shape: tuple[int, ...]) -> torch.Tensor:
    """A group's shared x_T, drawn once: a function of (run seed, step, group) alone, so it is the same on
    whichever worker holds a sample of the group."""
    generator = keyed_generator(request.run_seed, request.step + 1, group_id, _SHARED_NOISE_SALT)
    return torch.randn(shape, generator=generator, dtype=torch.float32)


def _per_sample_randn(generators: list[torch.Generator], shape: tuple[int, ...]) -> torch.Tensor:
    return torch.stack([torch.randn(shape, generator=g, dtype=torch.float32) for g in generators])


def _stack_trajectory(
    records: list[list[tuple[torch.Tensor, ...]]], window: range, sigmas: torch.Tensor, guidance: float
) -> Trajectory:
    """Chunks × window steps of (x, x', σ, σ', log p) into (N, W, ...) tensors."""

    def gather(field: int) -> torch.Tensor:
        return torch.cat([torch.stack([step[field] for step in chunk], dim=1) for chunk in records])

    log_probs = gather(4)
    n = log_probs.shape[0]
    return Trajectory(
        latents=gather(0),
        next_latents=gather(1),
        sigmas=gather(2),
        next_sigmas=gather(3),
        log_probs=log_probs,
        sigma_max=sigmas[1].expand(n).clone(),
        step_indices=torch.as_tensor(list(window), dtype=torch.long).expand(n, -1).clone(),
        guidance_scale=guidance,
    )
