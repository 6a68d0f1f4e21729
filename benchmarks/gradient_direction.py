"""Does the Flow-GRPO policy gradient point uphill on shapes? (`nox -s gradient_direction`)

A port bug (a flipped sign, advantages paired with the wrong samples, a log-prob of the wrong step) looks like slow
learning in a training curve. This check separates the two: it averages the on-policy Flow-GRPO gradient
(the config's advantage and loss at ratio 1, over the SDE window) over many rollout batches of a few fixed
prompts, then moves the LoRA weights a fixed distance along it and along its opposite, and scores each with
many fixed-seed ODE samples. A correct gradient raises the reward one way and lowers it the other; it also tells
how much reward one well-aimed step of a given size buys, which bounds what a noisy 32-image step can do.

Uses the config's model, sampler and rollout (docs/examples/shapes_sd3.toml by default) through the same worker
code a run uses.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).parents[1]
PROMPTS = (
    "a red circle on the left",
    "two blue squares",
    "a green triangle left of a yellow circle",
    "three yellow triangles",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="docs/examples/shapes_sd3.toml")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--batches", type=int, default=16, help="rollout batches the gradient is averaged over")
    parser.add_argument("--eval-images", type=int, default=256)
    parser.add_argument("--distances", default="0.5,1,2,4", help="LoRA-weight distances (L2) to step")
    parser.add_argument("--out", default=None, help="markdown file to append the table to")
    args = parser.parse_args()

    from omni_rl.batch import TrajectoryLossInputs
    from omni_rl.config import load_config
    from omni_rl.protocols import RolloutRequest
    from omni_rl.rewards.combined import CombinedReward
    from omni_rl.runtime.worker import PolicyWorker

    config = load_config(
        ROOT / args.config, [f"run.output_dir={ROOT / 'runs' / 'gradient_direction'}", *args.overrides]
    )
    worker = PolicyWorker(config)
    rewards = CombinedReward(config.rewards, worker.ctx)
    group = worker.rollout.group_size
    advantage = config.components["advantage"].build(worker.ctx)
    params = list(worker.model.trainable_parameters())

    def score(images: object, prompts: list[str]) -> torch.Tensor:
        return torch.as_tensor(rewards(images, prompts, [{}] * len(prompts)).total, dtype=torch.float32)

    def val_reward() -> float:
        n = args.eval_images
        prompts = [PROMPTS[i % len(PROMPTS)] for i in range(n)]
        seeds = list(range(10**6, 10**6 + n))
        request = RolloutRequest(
            prompts=prompts, group_ids=list(range(n)), seeds=seeds, step=-1, mode="eval", record_trajectory=False
        )
        images = worker.rollout.generate(worker.model, worker.sampler, request).images.numpy()
        return float(score(images, prompts).mean())

    start = time.perf_counter()
    total = [torch.zeros_like(p) for p in params]
    for k in range(args.batches):
        prompts = [p for p in PROMPTS for _ in range(group)]
        gids = [i // group for i in range(len(prompts))]
        seeds = list(range(1000 * k, 1000 * k + len(prompts)))
        request = RolloutRequest(
            prompts=prompts, group_ids=gids, seeds=seeds, step=k, mode="train", run_seed=config.run.seed
        )
        batch = worker.rollout.generate(worker.model, worker.sampler, request)
        adv = advantage(score(batch.images.numpy(), prompts), torch.as_tensor(gids))
        assert batch.trajectory is not None
        window = batch.trajectory.log_probs.shape[1]
        for p in params:
            p.grad = None
        for j in range(window):
            # the run's own loss at ratio 1: the old log-prob is the current one, detached
            current = worker.update_engine._step(batch, torch.arange(len(prompts)), j, grad=True)
            inputs = TrajectoryLossInputs(current=current, old_log_prob=current.log_prob.detach(), advantages=adv)
            (worker.loss(inputs).loss / window).backward()
        for acc, p in zip(total, params, strict=True):
            acc += p.grad
    norm = torch.sqrt(sum((g**2).sum() for g in total))
    origin = [p.detach().clone() for p in params]

    rows = [("0 (base)", val_reward())]
    for distance in (float(d) for d in args.distances.split(",")):
        for sign, label in ((-1.0, "downhill loss = uphill reward"), (1.0, "opposite")):
            with torch.no_grad():
                for p, o, g in zip(params, origin, total, strict=True):
                    p.copy_(o + sign * distance * g / norm)
            rows.append((f"{distance:g} ({label})", val_reward()))
    elapsed = time.perf_counter() - start

    lines = [
        f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, torch {torch.__version__}, {elapsed:.0f} s: "
        f"`{args.config}` {' '.join(args.overrides)}; gradient averaged over {args.batches} batches of "
        f"{len(PROMPTS)} prompts x {group}; reward of {args.eval_images} fixed-seed ODE images of the same prompts.",
        "",
        "| LoRA step (L2 distance, direction) | reward |",
        "|---|---|",
        *[f"| {label} | {value:.3f} |" for label, value in rows],
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "a") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
