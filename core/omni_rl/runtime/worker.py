"""The policy worker: model + LoRA + optimizer + sampler + rollout backend, as one Ray actor per device.

The worker samples with the same weights it trains (no weight copy), keeps its shard of the rollout (latents,
trajectory, conditioning) in memory, and sends the driver only what rewards need (uint8 images). The driver
answers with advantages, and the worker runs the update on the batch it kept.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np

from omni_rl.context import BuildContext
from omni_rl.protocols import RolloutRequest
from omni_rl.schema import ResolvedConfig


def pick_device(gpus_per_worker: float) -> str:
    import torch

    return "cuda" if gpus_per_worker > 0 and torch.cuda.is_available() else "cpu"


class PolicyWorker:
    """Holds the trained policy. Methods are called by the driver through Ray (or directly in tests)."""

    def __init__(self, config: ResolvedConfig, rank: int = 0, world_size: int = 1) -> None:
        import torch

        from omni_rl.runtime.forward_update import ForwardUpdate
        from omni_rl.runtime.optim import build_optimizer, build_scheduler
        from omni_rl.runtime.update import TrajectoryUpdate

        self.config = config
        self.rank = rank
        seed = config.run.seed
        random.seed(seed + rank)
        np.random.seed((seed + rank) % 2**32)
        torch.manual_seed(seed + rank)
        if os.environ.get("OMNI_RL_TORCH_THREADS"):
            torch.set_num_threads(int(os.environ["OMNI_RL_TORCH_THREADS"]))
        self.ctx = BuildContext(
            device=pick_device(config.cluster.gpus_per_worker),
            seed=seed,
            run_dir=Path(config.run.output_dir),
            rank=rank,
            world_size=world_size,
        )
        parts = config.components
        self.model = parts["model"].build(self.ctx)
        self.sampler = parts["sampler"].build(self.ctx)
        self.rollout = parts["rollout"].build(self.ctx)
        self.loss = parts["loss"].build(self.ctx)
        setup = getattr(self.loss, "setup", None)
        if setup is not None:
            setup(self.model)  # e.g. DiffusionNFT's "old" adapter, AWM's EMA anchor
        params = list(self.model.trainable_parameters())
        self.optimizer = build_optimizer(params, config.optim)
        self.scheduler = build_scheduler(self.optimizer, config.optim, config.run.steps)
        self.requirements = self.loss.requirements
        self.world_size = world_size
        sync = self._all_reduce_grads if world_size > 1 else None
        if self.requirements.inputs == "trajectory":
            self.update_engine: Any = TrajectoryUpdate(
                self.model, self.sampler, self.loss, self.optimizer, config.optim, grad_sync=sync
            )
        else:
            self.update_engine = ForwardUpdate(
                self.model, self.loss, self.optimizer, config.optim, seed, grad_sync=sync
            )
        self._batch: Any = None
        self.trainable_count = sum(p.numel() for p in params)

    def ready(self) -> dict[str, Any]:
        return {"device": self.ctx.device, "trainable_parameters": self.trainable_count, "pid": os.getpid()}

    def rollout_shard(self, request: RolloutRequest) -> dict[str, Any]:
        """Sample a shard; keep it for the update and return what the driver needs (images as uint8 numpy)."""
        from omni_rl.runtime.forward_update import view_context

        view = self.requirements.rollout_view if request.mode == "train" else "current"
        with view_context(self.model, view):
            batch = self.rollout.generate(self.model, self.sampler, request)
        if request.mode == "train":
            self._batch = batch
        return {
            "images": batch.images.numpy(),
            "prompts": batch.prompts,
            "group_ids": batch.group_ids.numpy(),
        }

    def update(
        self,
        advantages: np.ndarray,
        extras: dict[str, np.ndarray],
        step: int,
        rewards: np.ndarray,
        sample_ids: list[int],
        global_group_ids: list[int],
    ) -> dict[str, Any]:
        """Update on the kept rollout; returns this worker's UpdateStats (summed across workers by the driver)."""
        import torch

        from omni_rl.runtime.sharding import Shard

        if self._batch is None:
            raise RuntimeError("update called before a training rollout")
        generator = torch.Generator().manual_seed(self.config.run.seed * 7919 + step)
        shard = Shard(sample_ids, global_group_ids)
        adv = torch.as_tensor(np.array(advantages), dtype=torch.float32)
        tensors = {k: torch.as_tensor(np.array(v)) for k, v in extras.items()}
        if self.requirements.inputs == "trajectory":
            stats = self.update_engine.run(self._batch, adv, tensors, generator=generator, shard=shard)
        else:
            reward_t = torch.as_tensor(np.array(rewards), dtype=torch.float32)
            stats = self.update_engine.run(
                self._batch, reward_t, adv, tensors, step=step, generator=generator, shard=shard
            )
        stats["lr"] = self.optimizer.param_groups[0]["lr"]
        self.scheduler.step()
        self._batch = None
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
        """Join the worker group's process group: gloo on CPU, nccl on GPU."""
        import datetime

        import torch.distributed as dist

        backend = "nccl" if self.ctx.device.startswith("cuda") else "gloo"
        dist.init_process_group(
            backend,
            init_method=init_method,
            rank=self.rank,
            world_size=self.world_size,
            timeout=datetime.timedelta(minutes=30),
        )

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
        self.model.save_lora(directory)
        return directory

    def save_state(self, directory: str) -> None:
        """Everything this worker needs for an exact resume, plus the user-facing LoRA (rank 0 only)."""
        from omni_rl import checkpoint

        root = Path(directory)
        own = root / f"worker_{self.rank}"
        own.mkdir(parents=True, exist_ok=True)
        if self.rank == 0:
            self.model.save_lora(root)
        checkpoint.save_trainable(self.model.transformer, own / "trainable.safetensors")
        checkpoint.save_frozen_adapters(self.model.transformer, own / "adapters.safetensors")
        checkpoint.save_optimizer(self.optimizer, own)
        checkpoint.write_json(own / "scheduler.json", self.scheduler.state_dict())
        checkpoint.write_json(own / "update_state.json", self._update_state())
        checkpoint.save_rng(own)

    def load_state(self, directory: str) -> None:
        from omni_rl import checkpoint

        own = Path(directory) / f"worker_{self.rank}"
        checkpoint.load_trainable(self.model.transformer, own / "trainable.safetensors")
        # older checkpoints lack the next two files: the extra adapters then keep their setup copy and the
        # counters start at zero, as before they were saved
        checkpoint.load_frozen_adapters(self.model.transformer, own / "adapters.safetensors")
        checkpoint.load_optimizer(self.optimizer, own)
        self.scheduler.load_state_dict(checkpoint.read_json(own / "scheduler.json"))
        if (own / "update_state.json").is_file():
            self._load_update_state(checkpoint.read_json(own / "update_state.json"))
        checkpoint.load_rng(own)

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
        if self.world_size > 1:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
