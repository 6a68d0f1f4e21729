"""The single-controller training loop, one loop for every algorithm family (docs/design.md#one-training-step).

The driver samples prompts, sends each worker its shard (whole groups, per-sample seeds), scores the images
with the rewards, computes advantages on the whole batch, lets the loss prepare per-sample fields, and sends
the advantages back for the update. Workers keep their rollout in memory; only images and scalars travel.
"""

from __future__ import annotations

import shlex
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from rich.console import Console

from omni_rl.config.prompts import check_condition_counts
from omni_rl.config.schema import ResolvedConfig
from omni_rl.context import BuildContext
from omni_rl.data import PromptRecord, PromptSampler, read_prompt_source
from omni_rl.data_images import records_conditions
from omni_rl.errors import ConfigError, Interrupted, RuntimeFailure, describe_exception
from omni_rl.protocols import RolloutRequest
from omni_rl.reporting.console_width import print_whole
from omni_rl.reporting.metrics_logger import MetricsLogger
from omni_rl.reporting.reward_curve import plot_reward_curve
from omni_rl.reporting.video_grids import DEFAULT_FPS
from omni_rl.rewards.combined import CombinedReward, ScoredBatch, StreamedScores
from omni_rl.rewards.health import RewardHealth
from omni_rl.rundir import checkpoint
from omni_rl.rundir import start as rundir
from omni_rl.rundir.checkpoint import latest_checkpoint
from omni_rl.rundir.lock import RunLock
from omni_rl.rundir.manifest import FORMAT, CheckpointReader
from omni_rl.rundir.resume import resume
from omni_rl.rundir.resume_guard import check_fixed_options
from omni_rl.rundir.start import resolve_run_start
from omni_rl.runtime.group import StreamParts, WorkerGroup
from omni_rl.runtime.rollout_pipeline import ColocatedRollouts, DisaggregatedRollouts
from omni_rl.train.advantage_checks import CheckedEstimator
from omni_rl.train.advantages import compute_advantages, neutral_nonfinite, reward_aggregation
from omni_rl.train.interrupts import FINISH_THE_STEP, STOP_AFTER_RAY_STARTS, InterruptGuard
from omni_rl.train.staleness import check_asynchrony
from omni_rl.train.step_report import GridWriter, StepTimes, step_metrics

if TYPE_CHECKING:
    from omni_rl.runtime.rollout_group import RolloutGroup

#: what CombinedReward.metrics adds for the weighted total, left out of the eval rewards' metrics
_TOTALS = ("val/mean", "val/std")


def sample_seeds(run_seed: int, tag: int, count: int) -> list[int]:
    """Per-sample seeds for one step (tag = step) or for validation (tag = -1): fixed given the run seed."""
    state = np.random.SeedSequence([run_seed, tag + 1_000_000]).generate_state(count)
    return [int(s) & 0x7FFFFFFF for s in state]


class Trainer:
    """Owns the driver side of a run: data, rewards, advantage, loss.prepare, logging, checkpoints."""

    def __init__(self, config: ResolvedConfig, console: Console | None = None) -> None:
        self.config = config
        self.console = console or Console()
        # the driver's own draws (a reward's, an advantage's) repeat per seed; a resume restores the saved state
        checkpoint.seed_global_rngs(config.run.seed)
        components = config.components
        if components["loss"].spec is None:  # pragma: no cover - config validation guarantees it
            raise ConfigError("no loss configured @ $.loss")
        self.ctx = BuildContext(device="cpu", seed=config.run.seed, run_dir=Path(config.run.output_dir))
        self.train_records = (
            read_prompt_source(config.data.train, config_path="$.data.train") if (config.data.train) else None
        )
        if self.train_records is None:
            raise ConfigError("no training prompts @ $.data.train", hint="set [data] train to a prompt file")
        check_condition_counts(config, self.train_records, config.data.train, "$.data.train")
        val = read_prompt_source(config.data.val, config_path="$.data.val") if config.data.val else []
        check_condition_counts(config, val, config.data.val, "$.data.val")
        self.val_records: list[PromptRecord] = val[: config.data.val_prompts] if config.data.val_prompts else val
        if (config.run.eval_every or config.run.eval_before_training) and not self.val_records:
            raise ConfigError(
                "validation is on but no val prompts are set @ $.data.val",
                hint="set [data] val to a prompt file, or [run] eval_every = 0 and eval_before_training = false",
            )
        self.prompts = PromptSampler(self.train_records, config.run.seed)
        self.consecutive_skips = 0
        #: the "auto" batch sizes whose resolved value was printed (once per run)
        self._auto_said: set[str] = set()
        self.rewards = CombinedReward(config.rewards, self.ctx)
        # [[eval_reward]]: scored on the val images only, reported beside the trained reward, never trained on
        self.eval_rewards = CombinedReward(config.eval_rewards, self.ctx)
        # each reward's failures printed, and a reward with no valid score for max_invalid_steps steps stops the run
        self.reward_health = RewardHealth(self.rewards.sections, self.rewards.names)
        self.eval_health = RewardHealth(self.eval_rewards.sections, self.eval_rewards.names, stops=False)
        # every call checked: a plugin's raise or wrong output stops the run naming $.advantage and the plugin
        self.advantage = CheckedEstimator(components["advantage"].build(self.ctx), components["advantage"])
        reward_aggregation(self.advantage)  # a bad value fails here, before the first rollout
        self.loss = components["loss"].build(self.ctx)
        self.group_size = int(components["rollout"].build(self.ctx).group_size)
        #: video rollouts: the frame rate of the sample and val videos (the rollout's ``fps`` option)
        self.video_fps = int(getattr(components["rollout"].options, "fps", DEFAULT_FPS))
        self.grids = GridWriter(fps=self.video_fps, video_format=config.log.video_format)
        check_asynchrony(config, self.loss)  # [cluster] rollout_workers, [run] max_staleness, [rollout_correction]
        #: where training batches come from; set by :meth:`run` (None: the policy workers, colocated)
        self.source: ColocatedRollouts | DisaggregatedRollouts | None = None
        self.rollout_group: RolloutGroup | None = None
        #: whether the training loop began (errors before it carry no resume command)
        self.training_started = False

    # -- one step -----------------------------------------------------------------------------------------
    def _score(
        self,
        images: np.ndarray,
        records: list[PromptRecord],
        prompts: list[str],
        run_dir: Path | None = None,
        rewards: CombinedReward | None = None,
        streamed: StreamedScores | None = None,
        conditions: list[tuple[np.ndarray, ...]] | None = None,
    ) -> ScoredBatch:
        """Score with ``rewards`` (the trained ones by default; ``streamed``: their actors' calls already submitted
        part by part, see :meth:`_reward_stream`). A reward that stops the run (a reward server that went away,
        say) gets the resume command added to its hint: the last checkpoint is intact."""
        metadata = [rec.metadata for rec in records]
        try:
            return (rewards or self.rewards)(images, prompts, metadata, streamed, conditions)
        except RuntimeFailure as exc:
            if run_dir is None:
                raise
            resume = f"then resume with: {self.resume_command(run_dir)}"
            raise RuntimeFailure(exc.message, hint=f"{exc.hint}; {resume}" if exc.hint else resume) from exc

    def _say(self, logger: MetricsLogger | None, lines: list[str]) -> None:
        """Print ``lines`` (plain text: rich markup in an error message is not interpreted) above the progress bar."""
        from rich.markup import escape

        for line in lines:
            message = f"[yellow]{escape(line)}[/]"
            if logger is not None:
                logger.print(message)
            else:
                self.console.print(message)

    def _say_auto_sizes(self, logger: MetricsLogger | None, metrics: dict[str, float]) -> None:
        """Print once per run what each ``"auto"`` batch size resolved to (they stay in every step's metrics)."""
        said = self._auto_said
        names = {"rollout/batch_size": "[rollout] batch_size", "actor/micro_batch": "[optim] micro_batch"}
        for key, option in names.items():
            if key in metrics and key not in said:
                said.add(key)
                self._say(logger, [f'{option} = "auto" resolved to {int(metrics[key])} ({key} in metrics.jsonl)'])

    def validate(
        self, group: WorkerGroup, step: int, run_dir: Path, logger: MetricsLogger | None = None
    ) -> dict[str, float]:
        repeats = self.config.data.val_images_per_prompt
        records = [r for r in self.val_records for _ in range(repeats)]
        prompts = [r.prompt for r in records]
        # image r of prompt k takes seed r·n + k: each prompt's first image is the one a single-image validation
        # draws, so runs with different val_images_per_prompt share those samples
        n = len(self.val_records)
        pool = sample_seeds(self.config.run.seed, -1, n * repeats)
        seeds = [pool[r * n + k] for k in range(n) for r in range(repeats)]
        request = RolloutRequest(
            prompts=prompts,
            group_ids=list(range(len(prompts))),
            seeds=seeds,
            step=-1,
            mode="eval",
            record_trajectory=False,
            run_seed=self.config.run.seed,
            metadata=[r.metadata for r in records],
            conditions=records_conditions(records, self.config.data.condition_max_pixels),
        )
        out = group.rollout(request)
        scored = self._score(out.images, records, prompts, run_dir, conditions=request.conditions)
        # the grid shows each prompt's first image; the metrics average all of them
        title = f"val step {step}: {len(prompts) // repeats} prompts, val seeds of run.seed {self.config.run.seed}"
        path = run_dir / f"val_step_{step}.png"
        self.grids.write(path, "val", step, out.images, request, scored.total, title, logger, every=repeats)
        metrics = scored.metrics(prefix="val/reward")
        if self.eval_rewards.sections:
            evaluated = self._score(
                out.images, records, prompts, run_dir, self.eval_rewards, conditions=request.conditions
            )
            self._say(logger, self.eval_health.observe(step, evaluated))
            # val/<name>/mean and its sub-scores; not val/mean: the eval rewards are not summed into one score
            metrics.update({k: v for k, v in evaluated.metrics(prefix="val").items() if k not in _TOTALS})
        return metrics

    def _train_request(self, step: int) -> tuple[list[PromptRecord], RolloutRequest]:
        """Draw step ``step``'s prompts and build its rollout request (each prompt repeated group-size times)."""
        records = self.prompts.sample(self.config.data.prompts_per_step)
        g = self.group_size
        sample_records = [rec for rec in records for _ in range(g)]
        prompts = [rec.prompt for rec in sample_records]
        request = RolloutRequest(
            prompts=prompts,
            group_ids=[k for k in range(len(records)) for _ in range(g)],
            seeds=sample_seeds(self.config.run.seed, step, len(prompts)),
            step=step,
            mode="train",
            record_trajectory=self.loss.requirements.inputs == "trajectory",
            run_seed=self.config.run.seed,
            metadata=[rec.metadata for rec in sample_records],
            conditions=records_conditions(sample_records, self.config.data.condition_max_pixels),
        )
        return records, request

    def train_step(
        self, group: WorkerGroup, step: int, run_dir: Path, logger: MetricsLogger | None = None
    ) -> dict[str, float]:
        import torch

        t_start = time.perf_counter()
        source = self.source if self.source is not None else ColocatedRollouts(group)
        records, request, out = source.take(step, self._train_request)
        g = self.group_size
        sample_records = [rec for rec in records for _ in range(g)]
        prompts = list(request.prompts)
        group_ids = list(request.group_ids)
        t_rollout = time.perf_counter()

        scored = self._score(
            out.images, sample_records, prompts, run_dir, streamed=out.streamed, conditions=request.conditions
        )
        self._say(logger, self.reward_health.observe(step, scored, self.resume_command(run_dir)))
        # a NaN/inf score (reward/<name>/nonfinite) has advantage 0 and, as the loss sees it, its group's mean
        rewards = torch.as_tensor(neutral_nonfinite(scored.total, group_ids), dtype=torch.float32)
        gids = torch.as_tensor(group_ids, dtype=torch.long)
        step_advantages = compute_advantages(self.advantage, scored, gids)  # [advantage] may sum per-reward A_k
        advantages = step_advantages.total
        extras = self.loss.prepare(rewards, advantages, gids) or {}
        t_reward = time.perf_counter()

        parts = group.update(
            advantages.numpy(), {k: v.numpy() for k, v in extras.items()}, step, rewards.numpy(), group_ids
        )
        sync = source.after_update(step, self._train_request, self.config.run.steps)
        times = StepTimes(start=t_start, rollout=t_rollout, reward=t_reward, end=time.perf_counter())
        metrics = step_metrics(
            step=step,
            scored=scored,
            advantages=step_advantages,
            parts=parts,
            out=out,
            sync=sync,
            max_staleness=self.config.run.max_staleness,
            times=times,
        )
        self._say_auto_sizes(logger, metrics)
        image_every = self.config.log.image_every
        if image_every and (step % image_every == 0 or step == 1 or step == self.config.run.steps):
            title = f"train step {step}: {len(prompts) // g} prompts x {g} images, run.seed {self.config.run.seed}"
            path = run_dir / f"samples_step_{step}.png"
            self.grids.write(path, "train", step, out.images, request, scored.total, title, logger, columns=g)
        return metrics

    # -- the run ------------------------------------------------------------------------------------------
    def run(self) -> Path:
        """Train, holding the output directory's lock throughout: one run per directory (omni_rl.rundir.lock)."""
        run_dir = Path(self.config.run.output_dir).expanduser().absolute()
        rundir.prepare(run_dir)  # a file or a read-only place: exit 2 before the lock file is made
        with RunLock(run_dir):
            return self._run()

    def _run(self) -> Path:
        from omni_rl.config import write_resolved
        from omni_rl.runtime.cluster import ray_session

        config = self.config
        start = resolve_run_start(config)
        run_dir = start.run_dir
        if start.candidates:  # a config changing what the checkpoint fixes (lora_rank...): exit 2, nothing written
            check_fixed_options(config.raw, start.candidates[0])
        self.console.print(f"[bold]omni-rl[/]: run directory [cyan]{run_dir}[/]")
        if not start.fallback and start.candidates:  # a named checkpoint with a missing or cut file: refused now
            CheckpointReader(start.candidates[0]).check_sizes()
        reward_actors = self.rewards.actor_resources() + self.eval_rewards.actor_resources()
        guard = InterruptGuard(self.console, lambda: self._saved_line(run_dir), doing=STOP_AFTER_RAY_STARTS)
        # the guard first: a signal while Ray starts is the run's to handle (omni_rl.runtime.ray_signals)
        with guard as interrupt, ray_session(config.cluster, reward_actors) as ray_description:
            self.console.print(f"Ray: {ray_description}")
            if interrupt.requested:  # during Ray's start-up: nothing was built or trained
                raise interrupt.stopped_before_training()
            interrupt.doing = FINISH_THE_STEP
            group = WorkerGroup(config, lambda: self._failure_hint(run_dir))
            try:
                self.rewards.start()  # before the first rollout: a reward actor that cannot be placed fails now
                self.eval_rewards.start()
                info = group.infos[0]
                self.console.print(
                    f"{group.size} policy worker(s) on {info['device']}: {info['trainable_parameters']:,} trainable "
                    "parameters"
                )
                loaded = resume(group, start, self.console)
                # only once the checkpoint loaded: a resume that fails leaves the run's own config (and with it the
                # resume command and `omni-rl export`) as they were
                write_resolved(config, run_dir)
                first_step = loaded.step + 1
                if loaded.checkpoint is not None:
                    self.prompts.load_state_dict(loaded.state["prompt_sampler"])
                    self.consecutive_skips = int(loaded.state.get("consecutive_skips", 0))
                    self.console.print(f"resuming from [cyan]{loaded.checkpoint}[/] at step {first_step}")
                self._reset_driver_rng(loaded.driver_rng)
                rollout_group = self._start_rollout_workers(group, run_dir)
                if rollout_group is not None:
                    self.source.start(loaded.step, loaded.checkpoint, self._train_request, config.run.steps)
                resumed = loaded.checkpoint is not None
                last_saved = self._train_loop(group, run_dir, first_step, resumed, interrupt)
            finally:
                # on success and on errors alike: no orphaned workers holding the cluster's resources
                if self.rollout_group is not None:
                    self.rollout_group.shutdown()
                group.shutdown()
                self.rewards.close()
                self.eval_rewards.close()
        if interrupt.requested:
            error = Interrupted(
                f"interrupted ({interrupt.name}) after step {last_saved}; "
                f"checkpoint saved in {run_dir / 'checkpoints'}",
                hint=f"resume with: {self.resume_command(run_dir)}",
            )
            error.exit_code = interrupt.exit_code  # 130 for Ctrl-C, 143 for SIGTERM
            raise error
        plot_reward_curve(run_dir / "metrics.jsonl", run_dir / "reward_curve.png")
        self._print_summary(run_dir)
        return run_dir

    def _start_rollout_workers(self, group: WorkerGroup, run_dir: Path) -> RolloutGroup | None:
        """``[cluster] rollout_workers > 0``: start them (shut down with the policy group) and sample with them."""
        from omni_rl.runtime.rollout_group import RolloutGroup

        config = self.config
        if not config.cluster.rollout_workers:
            self.source = ColocatedRollouts(group, self._reward_stream())
            return None
        self.rollout_group = RolloutGroup(config, lambda: self._failure_hint(run_dir))
        self.source = DisaggregatedRollouts(
            group, self.rollout_group, config.run.max_staleness, self.prompts, self._reward_stream()
        )
        self.console.print(
            f"{self.rollout_group.size} rollout worker(s) on {self.rollout_group.infos[0]['device']}, "
            f"max_staleness = {config.run.max_staleness}"
        )
        return self.rollout_group

    def _reward_stream(self) -> StreamParts | None:
        """``[run] stream_rewards`` with reward actors: the reward actors get each worker's part of a training batch
        the moment it is submitted and score it as soon as it is sampled, so scoring overlaps the rest of the
        rollout (and, one-step-off, the previous step's update). None: score the whole batch once it is back,
        also when every reward runs in the driver, which has nothing to overlap while it waits for the rollout."""
        if not (self.config.run.stream_rewards and self.rewards.has_actors):
            return None
        rewards = self.rewards

        def stream(request: RolloutRequest, parts: Any) -> StreamedScores:
            given = (request.conditions,) if request.conditions else ()  # text-only batches: the call as before
            return rewards.submit_parts(parts, request.metadata, *given)

        return stream

    def _print_summary(self, run_dir: Path) -> None:
        """The run at a glance, read back from what it wrote (as ``omni-rl compare`` prints it): base, best and
        final val reward and each sub-score, train seconds, images/s, and where the curve, the grids and the last
        checkpoint are, with the export command."""
        from rich.markup import escape

        from omni_rl.reporting.run_summary import summarize_run, summary_paths, summary_table

        self.console.print(f"[green]done[/]: metrics in {escape(str(run_dir / 'metrics.jsonl'))}")
        summary = summarize_run(run_dir)
        print_whole(self.console, summary_table([summary]))  # off a terminal: no cell or command split mid-word
        grids = sorted(run_dir.glob("samples_step_*.png"), key=lambda p: int(p.stem.rsplit("_", 1)[1]))
        if grids:
            print_whole(self.console, f"sample grids: {escape(str(grids[0]))} ... {escape(str(grids[-1]))}")
        for name, where in summary_paths(summary):
            print_whole(self.console, f"{name}: {escape(where)}")

    def _train_loop(
        self, group: WorkerGroup, run_dir: Path, first_step: int, resumed: bool, interrupt: InterruptGuard
    ) -> int:
        """Steps ``first_step``..``steps`` with validation, logging and checkpoints; returns the last saved step.
        Stops after the step in which an interrupt was requested (that step is checkpointed)."""
        config = self.config
        self.training_started = True
        last_saved = first_step - 1
        # the first step logged: a fresh run may log step 0 (validation before training), a resumed one first_step
        first_logged = first_step if resumed else 0
        with MetricsLogger(
            run_dir, config.log.backends, config.run.steps, self.console, config=config.raw, first_step=first_logged
        ) as logger:
            logger.progress.update(logger.task, completed=first_step - 1)
            if config.run.eval_before_training and not resumed:
                logger.log(0, self.validate(group, 0, run_dir, logger), advance=False)
            for step in range(first_step, config.run.steps + 1):
                metrics = self.train_step(group, step, run_dir, logger)
                if self._validates_at(step):
                    metrics.update(self.validate(group, step, run_dir, logger))
                logger.log(step, metrics)
                healthy = self._track_skips(metrics, step, run_dir)
                due = (config.run.save_every and step % config.run.save_every == 0) or step == config.run.steps
                if healthy and (due or interrupt.requested):
                    logger.print(f"checkpoint: {self.save_checkpoint(group, run_dir, step)}")
                    last_saved = step
                if interrupt.requested:
                    break
        return last_saved

    def _validates_at(self, step: int) -> bool:
        """Every ``eval_every`` steps and at the last step: a run whose length ``eval_every`` does not divide
        still reports where it ended (its final val reward), not only where it last happened to validate."""
        every, steps = self.config.run.eval_every, self.config.run.steps
        return bool(every) and (step % every == 0 or step == steps)

    def _reset_driver_rng(self, saved: tuple[dict[str, Any], dict[str, Any]] | None) -> None:
        """Right before the first step (after Ray's start-up, which may draw from them), the driver's global RNGs
        take the state saved with the checkpoint resumed from (``saved``: its tensors and JSON), or the run
        seed's: a resumed run draws what the uninterrupted one drew."""
        if saved is not None:  # absent in checkpoints of older versions
            checkpoint.apply_rng(*saved)
        else:
            checkpoint.seed_global_rngs(self.config.run.seed)

    def _failure_hint(self, run_dir: Path) -> str:
        """What to do after a worker died: the resume command only once training began (a run that never
        started has nothing to resume; its own command starts it again)."""
        if not self.training_started:
            return "check memory and the worker log above"
        return f"check memory and the worker log above; resume with: {self.resume_command(run_dir)}"

    @staticmethod
    def resume_command(run_dir: Path) -> str:
        """The command that continues the run, quoted for a POSIX shell (a run directory may hold spaces)."""
        return f"omni-rl run {shlex.quote(str(run_dir / 'config.resolved.toml'))} --set run.resume=auto"

    def _saved_line(self, run_dir: Path) -> str | None:
        """Where the last complete checkpoint is and how to resume (printed when a second signal exits at once)."""
        last = latest_checkpoint(run_dir)
        if last is None:
            return None
        return f"checkpoint saved in {last}; resume with: {self.resume_command(run_dir)}"

    def _track_skips(self, metrics: dict[str, float], step: int, run_dir: Path) -> bool:
        """Count steps whose every optimizer step was skipped (non-finite loss/grad); stop after too many."""
        skipped_all = metrics.get("actor/skipped_steps", 0) > 0 and metrics.get("actor/optimizer_steps", 1) == 0
        self.consecutive_skips = self.consecutive_skips + 1 if skipped_all else 0
        limit = self.config.optim.max_consecutive_skips
        if limit and self.consecutive_skips >= limit:
            last = latest_checkpoint(run_dir)
            raise RuntimeFailure(
                f"stopped at step {step}: {self.consecutive_skips} consecutive steps had a non-finite loss or "
                f"gradient, so every optimizer step was skipped; the last good checkpoint is {last}",
                hint="lower [optim] lr, check the rewards for NaN/inf, or raise [optim] max_consecutive_skips; "
                f"then resume with: {self.resume_command(run_dir)}",
            )
        return not skipped_all

    def save_checkpoint(self, group: WorkerGroup, run_dir: Path, step: int) -> Path:
        """Staging directory, then the manifest, then rename, then the ``latest`` pointer: a crash never leaves a
        torn checkpoint, and a failed write (a worker's included: the group reports it as a RuntimeFailure)
        removes the staging directory and names the intact previous checkpoint."""
        staging = checkpoint.staging_dir(run_dir, step)
        try:
            group.call("save_state", str(staging))
            in_flight = self.source.in_flight_versions(step) if self.source is not None else []
            if in_flight:  # one-step-off: the weights that sampled the in-flight batch, to re-sample it on resume
                group.call("save_versions", str(staging), in_flight)
            prompt_state = self.source.prompt_state() if self.source is not None else None
            checkpoint.write_json(
                staging / "trainer_state.json",
                {
                    "step": step,
                    "format": FORMAT,
                    # before the in-flight batch's draw, which a resumed run draws again
                    "prompt_sampler": prompt_state or self.prompts.state_dict(),
                    "consecutive_skips": self.consecutive_skips,
                },
            )
            (staging / checkpoint.DRIVER_DIR).mkdir()
            checkpoint.save_rng(staging / checkpoint.DRIVER_DIR)
            return checkpoint.publish(run_dir, staging, step, self.config.run.keep_last)
        except (OSError, RuntimeFailure) as exc:
            shutil.rmtree(staging, ignore_errors=True)
            previous = latest_checkpoint(run_dir)
            reason = exc.message if isinstance(exc, RuntimeFailure) else describe_exception(exc)
            raise RuntimeFailure(
                f"could not write the checkpoint of step {step}: {reason}",
                hint=f"free disk space in {run_dir}; the previous checkpoint ({previous}) is intact; "
                f"resume with: {self.resume_command(run_dir)}",
            ) from exc


def train(config: ResolvedConfig, console: Console | None = None) -> Path:
    """Run training as configured; returns the run directory."""
    return Trainer(config, console).run()
