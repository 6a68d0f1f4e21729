"""The policy worker: model + LoRA + optimizer + sampler + rollout backend, as one Ray actor per device.

The worker samples with the same weights it trains (no weight copy), keeps its shard of the rollout (latents,
trajectory, conditioning) in memory, and sends the driver only what rewards need (uint8 images). The driver
answers with advantages, and the worker runs the update on the batch it kept.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from omni_rl.config.schema import ResolvedConfig
from omni_rl.context import BuildContext
from omni_rl.engine import placement_guard
from omni_rl.protocols import RolloutOutcome, RolloutRequest
from omni_rl.runtime.policy_sync import PolicySync

if TYPE_CHECKING:
    from omni_rl.engine.stepping import UpdateStats


def pick_device(gpus_per_worker: float) -> str:
    import torch

    return "cuda" if gpus_per_worker > 0 and torch.cuda.is_available() else "cpu"


def limit_torch_threads() -> None:
    """``OMNI_RL_TORCH_THREADS``: the torch threads of a worker process (tests and benchmarks share few cores)."""
    import torch

    if os.environ.get("OMNI_RL_TORCH_THREADS"):
        torch.set_num_threads(int(os.environ["OMNI_RL_TORCH_THREADS"]))


def build_sampling_parts(config: ResolvedConfig, ctx: BuildContext) -> tuple[Any, Any, Any, Any]:
    """(model, sampler, rollout backend, loss) as every worker that samples builds them: the loss's optional
    ``setup(model)`` adds its adapters (DiffusionNFT's "old", which samples; AWM's EMA anchor)."""
    parts = config.components
    model = parts["model"].build(ctx)
    sampler = parts["sampler"].build(ctx)
    rollout = parts["rollout"].build(ctx)
    loss = parts["loss"].build(ctx)
    setup = getattr(loss, "setup", None)
    if setup is not None:
        setup(model)
    return model, sampler, rollout, loss


def sample(model: Any, sampler: Any, rollout: Any, rollout_view: str, request: RolloutRequest) -> tuple[Any, list[int]]:
    """The rollout backend's batch for ``request`` with the loss's rollout view for training ("current" for
    validation), and its SDE window: the schedule step indices of the recorded window (the same for every sample
    and worker, logged by the trainer), empty when none was recorded."""
    from omni_rl.engine.forward_update import view_context
    from omni_rl.engine.placement import to_host

    view = rollout_view if request.mode == "train" else "current"
    with view_context(model, view):
        batch = rollout.generate(model, sampler, request)
    batch = to_host(batch)  # the one boundary: rollout outputs wait on the host (docs/placement.md)
    trajectory = batch.trajectory
    window = [] if trajectory is None else [int(j) for j in trajectory.step_indices[0].tolist()]
    return batch, window


def process_info(device: str) -> dict[str, Any]:
    """Where a worker runs, for the console and the errors."""
    import socket

    return {"device": device, "pid": os.getpid(), "node": socket.gethostname()}


class PolicyWorker(PolicySync):
    """Holds the trained policy. Methods are called by the driver through Ray (or directly in tests)."""

    #: ``[cluster] strategy = "fsdp2"``: the transformer is sharded across the worker group
    sharded: bool = False

    def __init__(self, config: ResolvedConfig, rank: int = 0, world_size: int = 1) -> None:
        import torch

        self.config = config
        self.rank = rank
        self.world_size = world_size
        # FSDP2: the transformer is sharded in :meth:`init_distributed`, and the optimizer built after that
        self.sharded = config.cluster.strategy == "fsdp2"
        seed = config.run.seed
        random.seed(seed + rank)
        np.random.seed((seed + rank) % 2**32)
        torch.manual_seed(seed + rank)
        limit_torch_threads()
        self.ctx = BuildContext(
            device=pick_device(config.cluster.gpus_per_worker),
            seed=seed,
            run_dir=Path(config.run.output_dir),
            rank=rank,
            world_size=world_size,
        )
        self.model, self.sampler, self.rollout, self.loss = build_sampling_parts(config, self.ctx)
        placement_guard.mark_module(self.model)  # OMNI_RL_PLACEMENT_GUARD: the weights are on the device
        self.requirements = self.loss.requirements
        self._batch: Any = None
        from omni_rl.engine.profiling import StepProfiler

        #: [log] profile_steps: traces from the step's training rollout to the end of its update
        self.profiler = StepProfiler(config.log.profile_steps, Path(config.run.output_dir), f"rank{rank}")
        self.trainable_count = sum(p.numel() for p in self.model.trainable_parameters())
        if self.sharded and self.ctx.device == "cpu" and config.cluster.mixed_precision != "no":
            from omni_rl.errors import RuntimeFailure

            raise RuntimeFailure(
                f'[cluster] mixed_precision = "{config.cluster.mixed_precision}" needs a GPU, but this worker runs '
                "on the CPU (no CUDA device visible)",
                hint='set [cluster] mixed_precision = "no", or run the workers on GPUs',
            )
        if not self.sharded:
            self._build_training()

    def _build_training(self) -> None:
        """Optimizer, schedule and update engine over the trainable parameters (the shards, under FSDP2)."""
        from omni_rl.engine.forward_update import ForwardUpdate
        from omni_rl.engine.optim import build_optimizer, build_scheduler
        from omni_rl.engine.trajectory_update import TrajectoryUpdate

        config = self.config
        params = list(self.model.trainable_parameters())
        self.optimizer = build_optimizer(params, config.optim)
        self.scheduler = build_scheduler(self.optimizer, config.optim, config.run.steps)
        # FSDP2 reduce-scatters the gradients itself (summed: see runtime.fsdp); DDP sums them here
        sync = self._all_reduce_grads if (self.world_size > 1 and not self.sharded) else None
        lockstep = self._lockstep if self.sharded else None
        if self.requirements.inputs == "trajectory":
            self.update_engine: Any = TrajectoryUpdate(
                self.model,
                self.sampler,
                self.loss,
                self.optimizer,
                config.optim,
                grad_sync=sync,
                lockstep=lockstep,
                correction=config.rollout_correction,
                sum_across=self._all_reduce_sum if self.world_size > 1 else None,
            )
        else:
            self.update_engine = ForwardUpdate(
                self.model, self.loss, self.optimizer, config.optim, config.run.seed, grad_sync=sync, lockstep=lockstep
            )

    def ready(self) -> dict[str, Any]:
        return {**process_info(self.ctx.device), "trainable_parameters": self.trainable_count}

    @placement_guard.guard_method
    def rollout_shard(self, request: RolloutRequest, keep: int | None = None) -> RolloutOutcome:
        """Sample a shard; keep it for the update and return what the driver needs (images as uint8 numpy, and for a
        training rollout ``window``: the schedule step indices of its recorded SDE window, empty when none).

        ``keep``: only the first ``keep`` samples are real; the rest pad the shard so that every FSDP2 worker runs
        the same number of (collective) forwards, and are dropped here. Validation rollouts only."""
        from omni_rl.engine.trajectory import keep_trained_steps

        if request.mode == "train":
            self.profiler.start(request.step)
        batch, window = sample(self.model, self.sampler, self.rollout, self.requirements.rollout_view, request)
        n = len(request.prompts) if keep is None else keep
        resolved = getattr(self.rollout, "last_batch_size", None)  # a rollout batch_size = "auto" resolved to
        out = RolloutOutcome(
            images=batch.images[:n].numpy(),
            prompts=batch.prompts[:n],
            group_ids=batch.group_ids[:n].numpy(),
            batch_size=None if resolved is None else int(resolved),
        )
        if request.mode == "train":
            if n != len(request.prompts):
                raise RuntimeError("a training rollout cannot be padded: its samples are kept for the update")
            out.window = list(window)
            # DanceGRPO's timestep_fraction: the update trains only each sample's drawn subset of the window
            self._batch = keep_trained_steps(batch, self.sampler, request.step, request.run_seed)
        return out

    @placement_guard.guard_method
    def update(
        self,
        advantages: np.ndarray,
        extras: dict[str, np.ndarray],
        step: int,
        rewards: np.ndarray,
        sample_ids: list[int],
        global_group_ids: list[int],
    ) -> UpdateStats:
        """Update on the kept rollout; returns this worker's UpdateStats (summed across workers by the driver)."""
        import torch

        from omni_rl.engine.sharding import Shard

        if self._batch is None:
            raise RuntimeError("update called before a training rollout")
        generator = torch.Generator().manual_seed(self.config.run.seed * 7919 + step)
        shard = Shard(sample_ids, global_group_ids)
        adv = torch.as_tensor(np.array(advantages), dtype=torch.float32)
        tensors = {k: torch.as_tensor(np.array(v)) for k, v in extras.items()}
        behaviour = self.behaviour_weights()  # a stale batch's old log-probs: the weights that sampled it
        if self.requirements.inputs == "trajectory":
            stats = self.update_engine.run(
                self._batch, adv, tensors, generator=generator, shard=shard, behaviour=behaviour
            )
        else:
            reward_t = torch.as_tensor(np.array(rewards), dtype=torch.float32)
            stats = self.update_engine.run(
                self._batch, reward_t, adv, tensors, step=step, generator=generator, shard=shard
            )
        stats.lr = float(self.optimizer.param_groups[0]["lr"])
        self.scheduler.step()
        self._batch = None
        self.profiler.stop(step)
        return stats

    # -- torch.distributed ----------------------------------------------------------------------------------
    def dist_endpoint(self) -> str:
        """tcp://ip:port for the process group (called on rank 0 before the others join)."""
        import socket

        import ray

        with socket.socket() as sock:
            sock.bind(("", 0))
            port = sock.getsockname()[1]
        return f"tcp://{ray.util.get_node_ip_address()}:{port}"

    def init_distributed(self, init_method: str) -> None:
        """Join the worker group's process group: gloo on CPU, nccl on GPU. Under FSDP2, then shard the
        transformer and build the optimizer over the shards."""
        import datetime

        import torch.distributed as dist

        backend = "nccl" if self.ctx.device.startswith("cuda") else "gloo"
        dist.init_process_group(
            backend,
            init_method=init_method,
            rank=self.rank,
            world_size=self.world_size,
            # how long a collective waits for a peer that is alive but stuck; a dead peer is found by the driver
            timeout=datetime.timedelta(seconds=self.config.cluster.collective_timeout_s),
        )
        if self.sharded:
            from omni_rl.engine.fsdp import shard_transformer

            shard_transformer(
                self.model,
                device=self.ctx.device,
                world_size=self.world_size,
                mixed_precision=self.config.cluster.mixed_precision,
            )
            self._build_training()

    def _lockstep(self, counts: list[int]) -> list[int]:
        """FSDP2: how many micro-batch passes every worker runs (the most any worker needs; see runtime.fsdp)."""
        from omni_rl.engine.fsdp import max_across_workers

        return max_across_workers(counts, self.ctx.device)

    def _all_reduce_sum(self, tensor: Any) -> Any:
        """``tensor`` summed over the worker group (the rollout correction's batch normalisation)."""
        import torch.distributed as dist

        # nccl reduces device tensors only: the host statistics cross to the device and back
        out = tensor.to(self.ctx.device, copy=True)
        dist.all_reduce(out)
        return out.to(tensor.device)

    def _all_reduce_grads(self, params: list[Any]) -> None:
        """Sum every trainable gradient across workers in one flat buffer (the DDP reduction, done once per
        optimizer step; each worker already weighted its samples by the global mini-batch size)."""
        import torch
        import torch.distributed as dist

        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        dist.all_reduce(flat)
        offset = 0
        for p in params:
            count = p.numel()
            p.grad.copy_(flat[offset : offset + count].view_as(p))
            offset += count

    def save_lora(self, directory: str) -> str:
        """The user-facing LoRA (or transformer). Under FSDP2 a collective: call it on every worker."""
        self.model.save_lora(directory)
        return directory

    def save_state(self, directory: str) -> None:
        """Everything this worker needs for an exact resume, plus the user-facing LoRA (rank 0 only).

        Under FSDP2 every save below gathers the shards (a collective on every worker) and rank 0 writes the
        whole tensors, once, in ``worker_0/``; each worker still writes its own RNG, schedule and counters."""
        from omni_rl.rundir import checkpoint

        root = Path(directory)
        own = root / f"worker_{self.rank}"
        own.mkdir(parents=True, exist_ok=True)
        if self.sharded or self.rank == 0:
            self.model.save_lora(root)  # sharded: every worker gathers, the model writes on rank 0
        tensors = own if (self.rank == 0 or not self.sharded) else None
        transformer = self.model.transformer
        checkpoint.save_trainable(transformer, tensors / "trainable.safetensors" if tensors else None)
        checkpoint.save_frozen_adapters(transformer, tensors / "adapters.safetensors" if tensors else None)
        checkpoint.save_optimizer(self.optimizer, tensors)
        checkpoint.write_json(own / "scheduler.json", self.scheduler.state_dict())
        checkpoint.write_json(own / "update_state.json", self._update_state())
        checkpoint.save_rng(own)

    def load_state(self, directory: str) -> bool:
        """Restore what :meth:`save_state` wrote. Every file is read and checked against the checkpoint's manifest
        before anything changes, so a damaged checkpoint (CheckpointDamaged, naming the file) leaves this worker
        as it was for the driver to try an older one. Returns whether the files could be verified (False: a
        checkpoint of an older version, without a manifest)."""
        from omni_rl.rundir import checkpoint
        from omni_rl.rundir.manifest import CheckpointReader

        reader = CheckpointReader(Path(directory))
        own = f"worker_{self.rank}"
        # the weights and optimizer tensors are whole in every DDP worker's directory, and (once) in worker_0's
        # under FSDP2: either strategy resumes from either layout (with the same number of workers)
        tensors = own if reader.has(f"{own}/trainable.safetensors") else "worker_0"
        trainable = reader.load_tensors(f"{tensors}/trainable.safetensors")
        # older checkpoints lack the adapters and update state: the extra adapters then keep their setup copy and
        # the counters start at zero, as before they were saved
        adapters = (
            reader.load_tensors(f"{tensors}/adapters.safetensors")
            if reader.has(f"{tensors}/adapters.safetensors")
            else None
        )
        optimizer = (
            reader.load_tensors(f"{tensors}/optimizer.safetensors"),
            reader.read_json(f"{tensors}/optimizer.json"),
        )
        scheduler = reader.read_json(f"{own}/scheduler.json")
        update = reader.read_json(f"{own}/update_state.json") if reader.has(f"{own}/update_state.json") else None
        rng = (reader.load_tensors(f"{own}/rng.safetensors"), reader.read_json(f"{own}/rng.json"))

        transformer = self.model.transformer
        checkpoint.apply_trainable(transformer, trainable, Path(directory) / tensors / "trainable.safetensors")
        if adapters is not None:
            checkpoint.apply_frozen_adapters(transformer, adapters, Path(directory) / tensors / "adapters.safetensors")
        checkpoint.apply_optimizer(self.optimizer, *optimizer)
        self.scheduler.load_state_dict(scheduler)
        if update is not None:
            self._load_update_state(update)
        checkpoint.apply_rng(*rng)
        return reader.verified

    def _update_state(self) -> dict[str, Any]:
        """The update engine's counters and the loss's own state (optional ``checkpoint_state`` hook), as JSON."""
        state: dict[str, Any] = {}
        engine_state = getattr(self.update_engine, "state_dict", None)
        if engine_state is not None:
            state["engine"] = engine_state()
        loss_state = getattr(self.loss, "checkpoint_state", None)
        if loss_state is not None:
            state["loss"] = loss_state()
        return state

    def _load_update_state(self, state: dict[str, Any]) -> None:
        load_engine = getattr(self.update_engine, "load_state_dict", None)
        if load_engine is not None and "engine" in state:
            load_engine(state["engine"])
        load_loss = getattr(self.loss, "load_checkpoint_state", None)
        if load_loss is not None and "loss" in state:
            load_loss(state["loss"])

    def shutdown(self) -> None:
        """Leave the process group cleanly; the driver then kills the actor (no orphaned ranks)."""
        self._batch = None
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
