"""One model size's framework-vs-bare comparison: the same compute with and without omni-rl around it.

- rollout: the diffusers backend's ``generate`` (Flow-GRPO train mode: SDE window, trajectory recorded) against a
  bare loop with no framework: the pipeline's own ``encode_prompt`` (unique prompts in one batch), the same
  transformer calls (same chunks, negative and positive batched for CFG), per-sample noise drawn from per-sample
  generators as the backend draws it, the ``flow_sde`` sampler's own ``step`` inside the window (its arithmetic
  and log-prob, called directly) and Euler steps outside it, and the VAE decode to uint8.
- update: ``TrajectoryUpdate.run`` against bare forward + backward over the same micro-batches x window steps:
  the sampler's ``step`` re-scoring the stored x_{j+1}, the loss's own ``clipped_policy_loss`` (advantages
  clipped as the loss clips them), the same weights, grad clipping and AdamW step. What the bare side leaves
  out is the framework: batch slicing, loss metrics, statistics and their host syncs.

Old log-probs are reused from the rollout unless ``Setting.recompute_old_log_probs``; when recomputed, both sides
run the extra no-grad pass. The bare loop matches the framework's numbers (latents and gradient norm; a test
checks it), so the ratio compares like with like.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from omni_rl_flow_grpo.ppo import clipped_policy_loss
from overhead_report import Timing

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class Setting:
    """What one comparison runs: the rollout, the update and where (device, dtype)."""

    prompts: tuple[str, ...] = ("a red circle", "two blue squares")
    group_size: int = 4
    steps: int = 6
    #: SDE window size (trained steps), fixed at the start of the schedule
    window: int = 2
    cfg: float = 4.5
    height: int = 64
    #: samples per transformer call in the rollout (CFG doubles the batch the transformer sees); "auto" for the
    #: framework side only (benchmarks/speed_options.py)
    batch_size: int | str = 8
    micro_batch: int | str = 4
    lora_rank: int = 16
    lora_alpha: float | None = None
    device: str = "cpu"
    dtype: str = "float32"
    #: extra ``[model] options`` (the speed options: benchmarks/speed_options.py), as (key, value) pairs
    model_options: tuple[tuple[str, object], ...] = ()
    recompute_old_log_probs: bool = False

    @property
    def images(self) -> int:
        return len(self.prompts) * self.group_size

    def describe(self) -> str:
        """The sentence the report prints under its heading."""
        old = (
            "old log-probs recomputed with a no-grad pass before it (both sides)"
            if self.recompute_old_log_probs
            else "old log-probs reused from the rollout, not recomputed"
        )
        return (
            f"Flow-GRPO train rollout ({self.images} images: {len(self.prompts)} prompts x {self.group_size}, "
            f"{self.steps} steps, SDE window of {self.window} (flow_sde), CFG {self.cfg}, {self.height} px, "
            f"{self.batch_size} samples per transformer call) and one update over it (micro-batches of "
            f"{self.micro_batch}, LoRA rank {self.lora_rank}, {self.dtype}; {old})."
        )


class OverheadCase:
    """A loaded model with its framework components, and the bare equivalents of rollout and update."""

    def __init__(self, pipeline_path: Path, setting: Setting) -> None:
        from omni_rl import build
        from omni_rl.config.schema import OptimConfig
        from omni_rl.context import BuildContext
        from omni_rl.engine.trajectory_update import TrajectoryUpdate
        from omni_rl.protocols import RolloutRequest

        s = self.setting = setting
        self.device = torch.device(s.device)
        self.dtype = DTYPES[s.dtype]
        options: dict[str, object] = {"path": str(pipeline_path), "lora_rank": s.lora_rank, "dtype": s.dtype}
        if s.lora_alpha is not None:
            options["lora_alpha"] = s.lora_alpha
        options.update(dict(s.model_options))
        self.model = build("model", "sd3", options, ctx=BuildContext(device=s.device))
        self.sampler = build(
            "sampler", "flow_sde", {"window_size": s.window, "window_range": [0, s.window], "window_mode": "fixed"}
        )
        self.backend = build(
            "rollout",
            "diffusers",
            {
                "group_size": s.group_size,
                "steps": s.steps,
                "height": s.height,
                "width": s.height,
                "cfg": s.cfg,
                "batch_size": s.batch_size,
            },
        )
        self.prompts = [p for p in s.prompts for _ in range(s.group_size)]
        self.seeds = list(range(len(self.prompts)))
        groups = [k for k in range(len(s.prompts)) for _ in range(s.group_size)]
        self.request = RolloutRequest(prompts=self.prompts, group_ids=groups, seeds=self.seeds, step=1, run_seed=0)
        self.pipe = self.model.pipeline
        self.loss = build("loss", "flow_grpo", {})
        self.params = self.model.trainable_parameters()
        self.optimizer = torch.optim.AdamW(self.params, lr=1e-5)
        optim = OptimConfig(micro_batch=s.micro_batch, recompute_old_log_probs=s.recompute_old_log_probs)
        self.grad_clip = optim.grad_clip
        self.engine = TrajectoryUpdate(self.model, self.sampler, self.loss, self.optimizer, optim)
        self.advantages = torch.randn(len(self.prompts), generator=torch.Generator().manual_seed(0))
        #: the batch both updates train on (the framework's rollout, so both re-score the same trajectory)
        started = time.perf_counter()
        self.batch = self.framework_rollout()
        self.sync()
        #: the first rollout's seconds: with it, one-time costs (compiling blocks, capturing CUDA graphs)
        self.first_rollout_s = time.perf_counter() - started

    def sync(self) -> None:
        """Wait for queued GPU work, so a timer measures the work and not its launch."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    # -- rollout ---------------------------------------------------------------------------------------------

    @torch.no_grad()
    def diffusers_rollout(self) -> object:
        """What users would otherwise run: the diffusers pipeline's own call on the same model (the same LoRA'd
        transformer, dtype, prompts, steps, CFG and size), every image of every prompt in one call."""
        s = self.setting
        return self.pipe(
            prompt=list(s.prompts),
            num_images_per_prompt=s.group_size,
            num_inference_steps=s.steps,
            guidance_scale=s.cfg,
            height=s.height,
            width=s.height,
            generator=torch.Generator().manual_seed(0),
        )

    def flops(self) -> tuple[float, float]:
        """Transformer FLOPs of one rollout and of one update (benchmarks/flops.py)."""
        from flops import sd3_forward_flops

        s = self.setting
        params = sum(p.numel() for n, p in self.model.transformer.named_parameters() if "lora_" not in n)
        text_tokens = int(self.batch.conditioning.tensors["prompt_embeds"].shape[1])
        forward = sd3_forward_flops(self.model.transformer.config, params, s.height, text_tokens)
        rows = s.images * (2 if s.cfg > 1 else 1)
        update_passes = 3 + (1 if s.recompute_old_log_probs else 0)
        return forward * rows * s.steps, forward * rows * update_passes * s.window

    def framework_rollout(self) -> object:
        return self.backend.generate(self.model, self.sampler, self.request)

    @torch.no_grad()
    def bare_rollout(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(final latents, uint8 images on CPU) of the same rollout without the framework."""
        s, pipe, device = self.setting, self.pipe, self.device
        unique = list(dict.fromkeys(self.prompts))
        embeds, neg, pooled, neg_pooled = pipe.encode_prompt(
            prompt=unique,
            prompt_2=None,
            prompt_3=None,
            device=device,
            do_classifier_free_guidance=True,
            max_sequence_length=self.model.config.max_sequence_length,
        )
        where = torch.as_tensor([unique.index(p) for p in self.prompts], device=device)
        embeds, neg, pooled, neg_pooled = (t[where].to(self.dtype) for t in (embeds, neg, pooled, neg_pooled))
        sigmas = self.model.sigma_schedule(s.steps, s.height, s.height).to(device, torch.float32)
        shape = self.model.latent_shape(s.height, s.height)
        finals, images = [], []
        for start in range(0, len(self.prompts), s.batch_size):
            idx = slice(start, min(start + s.batch_size, len(self.prompts)))
            gens = [torch.Generator().manual_seed(seed) for seed in self.seeds[idx]]
            b = len(gens)
            x = _randn(gens, shape).to(device)
            context = torch.cat([neg[idx], embeds[idx]])
            pooled_both = torch.cat([neg_pooled[idx], pooled[idx]])
            for i in range(s.steps):
                sigma, sigma_next = sigmas[i].expand(b), sigmas[i + 1].expand(b)
                v = self._velocity(x, sigma, context, pooled_both)
                if i < s.window:
                    noise = _randn(gens, shape).to(device)
                    x = self.sampler.step(x, v, sigma, sigma_next, sigma_max=sigmas[1].expand(b), noise=noise).sample
                else:
                    x = x + v * (sigma_next - sigma).view(-1, 1, 1, 1)
            finals.append(x)
            vae = pipe.vae
            z = x.to(vae.dtype) / vae.config.scaling_factor + (vae.config.shift_factor or 0.0)
            image = vae.decode(z, return_dict=False)[0]
            pixels = (image / 2 + 0.5).clamp(0, 1).permute(0, 2, 3, 1).float()
            images.append((pixels * 255).round().to(torch.uint8).cpu())
        return torch.cat(finals), torch.cat(images)

    def _velocity(
        self, x: torch.Tensor, sigma: torch.Tensor, context: torch.Tensor, pooled: torch.Tensor
    ) -> torch.Tensor:
        """The CFG velocity from one transformer call of batch 2B (negatives first), in float32."""
        xin = x.to(self.dtype)
        t = sigma * self.model.num_train_timesteps
        out = self.pipe.transformer(
            hidden_states=torch.cat([xin, xin]),
            timestep=torch.cat([t, t]),
            encoder_hidden_states=context,
            pooled_projections=pooled,
            return_dict=False,
        )[0]
        uncond, text = out.chunk(2)
        return (uncond + self.setting.cfg * (text - uncond)).float()

    # -- update ----------------------------------------------------------------------------------------------

    def framework_update(self) -> float:
        """The engine's update over ``self.batch``; returns the pre-clip gradient norm."""
        stats = self.engine.run(self.batch, self.advantages, {}, generator=torch.Generator().manual_seed(0))
        return stats.grad_norms[0]

    def bare_update(self) -> float:
        """The same update as plain forward + backward + AdamW; returns the pre-clip gradient norm."""
        traj = self.batch.trajectory
        n, w = traj.log_probs.shape
        old = self._bare_old_log_probs() if self.setting.recompute_old_log_probs else traj.log_probs
        config = self.loss.config
        advantages = self.advantages.to(self.device).clamp(-config.adv_clip_max, config.adv_clip_max)
        self.optimizer.zero_grad(set_to_none=True)
        for start in range(0, n, self.setting.micro_batch):
            idx = torch.arange(start, min(start + self.setting.micro_batch, n))
            for j in range(w):
                step = self._bare_step(idx, j)
                loss, _ = clipped_policy_loss(
                    step.log_prob, old[idx, j].to(self.device), advantages[idx], config.clip_ratio
                )
                (loss * (len(idx) / (n * w))).backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, self.grad_clip)
        self.optimizer.step()
        return float(grad_norm)

    @torch.no_grad()
    def _bare_old_log_probs(self) -> torch.Tensor:
        traj = self.batch.trajectory
        n, w = traj.log_probs.shape
        old = torch.empty(n, w, dtype=torch.float32, device=self.device)
        for start in range(0, n, self.setting.micro_batch):
            idx = torch.arange(start, min(start + self.setting.micro_batch, n))
            for j in range(w):
                old[idx, j] = self._bare_step(idx, j).log_prob
        return old

    def _bare_step(self, idx: torch.Tensor, j: int) -> object:
        """The sampler's step re-scoring the stored x_{j+1} under the current weights (grad when enabled)."""
        traj, cond, device = self.batch.trajectory, self.batch.conditioning.tensors, self.device
        x = traj.latents[idx, j].to(device)
        sigma, sigma_next = traj.sigmas[idx, j].to(device), traj.next_sigmas[idx, j].to(device)
        context = torch.cat([cond["negative_prompt_embeds"][idx], cond["prompt_embeds"][idx]]).to(device, self.dtype)
        pooled = torch.cat([cond["negative_pooled_prompt_embeds"][idx], cond["pooled_prompt_embeds"][idx]])
        v = self._velocity(x, sigma, context, pooled.to(device, self.dtype))
        return self.sampler.step(
            x,
            v,
            sigma,
            sigma_next,
            sigma_max=traj.sigma_max[idx].to(device),
            prev_sample=traj.next_latents[idx, j].to(device),
        )


def _randn(generators: list[torch.Generator], shape: tuple[int, ...]) -> torch.Tensor:
    """One standard normal draw per sample from its own generator, on CPU, as the rollout backend draws it."""
    return torch.stack([torch.randn(shape, generator=g, dtype=torch.float32) for g in generators])


def timed(case: OverheadCase, fn: Callable[[], object]) -> float:
    """Seconds ``fn`` takes, GPU work included (synchronised before and after)."""
    case.sync()
    start = time.perf_counter()
    fn()
    case.sync()
    return time.perf_counter() - start


def measure(case: OverheadCase, label: str, repeats: int) -> Timing:
    """Medians of ``repeats`` alternating framework / bare runs after one warm-up of each (GPU-synchronised)."""
    case.bare_rollout(), case.framework_update(), case.bare_update()  # warm-up (the framework rollout ran in init)
    case.diffusers_rollout()  # diffusers' pipeline call: the number users compare with
    if case.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(case.device)
    fr, br, fu, bu, dr = [], [], [], [], []
    for _ in range(repeats):
        fr.append(timed(case, case.framework_rollout))
        br.append(timed(case, case.bare_rollout))
        dr.append(timed(case, case.diffusers_rollout))
        fu.append(timed(case, case.framework_update))
        bu.append(timed(case, case.bare_update))
    rollout_flops, update_flops = case.flops()
    peak = torch.cuda.max_memory_allocated(case.device) / 2**30 if case.device.type == "cuda" else None
    med = statistics.median
    return Timing(
        label=label,
        images=case.setting.images,
        trained_steps=case.setting.window,
        rollout_framework_s=med(fr),
        rollout_bare_s=med(br),
        update_framework_s=med(fu),
        update_bare_s=med(bu),
        peak_memory_gib=peak,
        diffusers_rollout_s=med(dr),
        rollout_flops=rollout_flops,
        update_flops=update_flops,
    )
