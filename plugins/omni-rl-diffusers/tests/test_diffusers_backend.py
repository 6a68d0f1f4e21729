"""The diffusers rollout backend's own promises, beyond the conformance suite: per-sample seeding whatever the
chunking, a trajectory of exactly the window steps that re-scores to its recorded log-probs, the eval path,
and the config validators.

It runs the ``sd3`` model on a tiny random pipeline (built once for the module, 32x32 px images) with
Flow-GRPO's ``flow_sde`` sampler, wrapped in spies that record what the backend asks of them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import attrs
import pytest
import torch
from omni_rl_diffusers import hooks
from omni_rl_diffusers.backend import DiffusersRollout
from omni_rl_diffusers.config import DiffusersRolloutConfig

from omni_rl.batch import Conditioning, RolloutBatch, SamplerStep
from omni_rl.config import structure_options
from omni_rl.context import BuildContext
from omni_rl.errors import ConfigError
from omni_rl.protocols import DiffusionModel, RolloutRequest, Sampler

# Set before diffusers is first imported (inside the fixtures): the tiny pipeline is local, never fetch.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

SIZE = 32
#: 4 steps with the window fixed on steps 1 and 2, so the first and last steps are plain Euler steps
WINDOW = range(1, 3)
BASE_OPTIONS: dict[str, Any] = {
    "group_size": 2,
    "steps": 4,
    "eval_steps": 2,
    "height": SIZE,
    "width": SIZE,
    "cfg": 4.5,
    "batch_size": 4,
}


def _build(hooks_module: str, hook: str, name: str, options: dict[str, Any]) -> Any:
    """Component ``name`` of another first-party plugin, built as a run builds it; skips when that plugin is
    not installed (this plugin does not depend on it)."""
    module = pytest.importorskip(hooks_module)
    (spec,) = [record for record in getattr(module, hook)() if record.name == name]
    return spec.factory(structure_options(spec, options), BuildContext(device="cpu"))


def _rollout(**changes: Any) -> DiffusersRollout:
    """The backend through its spec, with ``BASE_OPTIONS`` updated by ``changes``."""
    (spec,) = hooks.omni_rl_rollout_backends()
    return spec.factory(structure_options(spec, {**BASE_OPTIONS, **changes}), BuildContext())


def _request(prompts: list[str], seeds: list[int], **changes: Any) -> RolloutRequest:
    """One group per distinct prompt, in order of first appearance."""
    groups = {prompt: k for k, prompt in enumerate(dict.fromkeys(prompts))}
    request = RolloutRequest(prompts=prompts, group_ids=[groups[p] for p in prompts], seeds=seeds, step=0)
    return attrs.evolve(request, **changes)


#: 2 prompts x group_size 2, as the trainer repeats them
PROMPTS = ["a red square", "a red square", "a blue circle", "a blue circle"]
SEEDS = [11, 12, 13, 14]


class SpyModel:
    """Delegates to a model and records the schedule lengths, velocity inputs and guidance it is asked for."""

    def __init__(self, model: DiffusionModel) -> None:
        self.model = model
        self.schedules: list[int] = []
        self.velocity_inputs: list[tuple[torch.Tensor, torch.Tensor, float]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    def sigma_schedule(self, num_steps: int, height: int, width: int) -> torch.Tensor:
        self.schedules.append(num_steps)
        return self.model.sigma_schedule(num_steps, height, width)

    def predict_velocity(
        self, latents: torch.Tensor, sigmas: torch.Tensor, conditioning: Conditioning, guidance_scale: float
    ) -> torch.Tensor:
        self.velocity_inputs.append((latents.clone(), sigmas.clone(), guidance_scale))
        return self.model.predict_velocity(latents, sigmas, conditioning, guidance_scale)


class SpySampler:
    """Delegates to a sampler and records the sigma of every step it is asked to take."""

    def __init__(self, sampler: Sampler) -> None:
        self.sampler = sampler
        self.stochastic = sampler.stochastic
        self.step_sigmas: list[torch.Tensor] = []

    def window(self, step: int, num_steps: int, seed: int) -> range:
        return self.sampler.window(step, num_steps, seed)

    def step(self, x: torch.Tensor, velocity: torch.Tensor, sigma: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        self.step_sigmas.append(sigma.clone())
        return self.sampler.step(x, velocity, sigma, *args, **kwargs)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> DiffusionModel:
    """The ``sd3`` model on a tiny random pipeline, built once for the module (the rollout only reads it)."""
    sd3_tiny = pytest.importorskip("omni_rl_sd3.tiny")
    path: Path = sd3_tiny.build_tiny_sd3_pipeline(tmp_path_factory.mktemp("sd3") / "tiny", seed=0)
    return _build("omni_rl_sd3.hooks", "omni_rl_models", "sd3", {"path": str(path), "lora_rank": 4})


@pytest.fixture(scope="module")
def flow_sde() -> Sampler:
    options = {"noise_level": 0.7, "window_size": len(WINDOW), "window_range": [WINDOW.start, WINDOW.stop]}
    return _build("omni_rl_flow_grpo.hooks", "omni_rl_samplers", "flow_sde", {**options, "window_mode": "fixed"})


def _generate(rollout: DiffusersRollout, model: Any, sampler: Any, request: RolloutRequest) -> RolloutBatch:
    """``rollout.generate``, typed to take the spies as well as the real components."""
    return rollout.generate(model, sampler, request)


def test_sampler_window_is_the_fixed_one(flow_sde: Sampler) -> None:
    """The tests below rely on the window being steps 1 and 2 of 4 at every training step."""
    assert [flow_sde.window(step, BASE_OPTIONS["steps"], 0) for step in range(3)] == [WINDOW] * 3


def test_same_prompt_and_seed_whatever_the_batch_size(tiny_model: DiffusionModel, flow_sde: Sampler) -> None:
    """Noise is drawn per sample from its own seed, so chunking must not change a sample.

    The initial noise is bit-identical across chunkings. The images are not guaranteed to be: CPU matmuls
    give results that depend on the batch size in the last bits (a plain (8, 64) @ (64, 64) product differs
    from its row-by-row products by ~1e-5), which moves the final latents by a few 1e-6 and can flip the
    rounding of a pixel. So latents and log-probs are compared to 1e-5 and images to one grey level.
    """
    request = _request(PROMPTS, SEEDS)
    batches: dict[int, RolloutBatch] = {}
    initial: dict[int, torch.Tensor] = {}
    for batch_size in (1, 4):
        model, sampler = SpyModel(tiny_model), SpySampler(flow_sde)
        batches[batch_size] = _generate(_rollout(batch_size=batch_size), model, sampler, request)
        steps = BASE_OPTIONS["steps"]
        # the first velocity call of each chunk sees that chunk's initial noise
        initial[batch_size] = torch.cat([x for x, _, _ in model.velocity_inputs[::steps]])
    one, four = batches[1], batches[4]
    assert torch.equal(initial[1], initial[4])
    torch.testing.assert_close(four.final_latents, one.final_latents, rtol=0, atol=1e-5)
    assert one.trajectory is not None and four.trajectory is not None
    torch.testing.assert_close(four.trajectory.log_probs, one.trajectory.log_probs, rtol=0, atol=1e-5)
    torch.testing.assert_close(four.trajectory.latents, one.trajectory.latents, rtol=0, atol=1e-5)
    assert (four.images.int() - one.images.int()).abs().max() <= 1


def test_trajectory_holds_exactly_the_window_steps(tiny_model: DiffusionModel, flow_sde: Sampler) -> None:
    rollout = _rollout(batch_size=3)  # 2 chunks (3 + 1): the trajectory is stitched across chunks
    model, sampler = SpyModel(tiny_model), SpySampler(flow_sde)
    batch = _generate(rollout, model, sampler, _request(PROMPTS, SEEDS))
    trajectory = batch.trajectory
    assert trajectory is not None
    n, w = len(PROMPTS), len(WINDOW)
    latent = tiny_model.latent_shape(SIZE, SIZE)
    assert tuple(trajectory.latents.shape) == (n, w, *latent)
    assert tuple(trajectory.next_latents.shape) == (n, w, *latent)
    for name in ("sigmas", "next_sigmas", "log_probs", "step_indices"):
        assert tuple(getattr(trajectory, name).shape) == (n, w), name
    assert trajectory.step_indices.tolist() == [list(WINDOW)] * n

    # the recorded sigmas are the schedule's at the window steps, and only those steps went to the sampler
    schedule = tiny_model.sigma_schedule(BASE_OPTIONS["steps"], SIZE, SIZE)
    torch.testing.assert_close(trajectory.sigmas, schedule[WINDOW.start : WINDOW.stop].expand(n, w))
    torch.testing.assert_close(trajectory.next_sigmas, schedule[WINDOW.start + 1 : WINDOW.stop + 1].expand(n, w))
    torch.testing.assert_close(trajectory.sigma_max, schedule[1].expand(n))
    chunks = 2
    assert len(sampler.step_sigmas) == w * chunks
    assert {round(float(s[0]), 6) for s in sampler.step_sigmas} == {round(float(schedule[j]), 6) for j in WINDOW}
    assert len(model.velocity_inputs) == BASE_OPTIONS["steps"] * chunks
    # consecutive window steps chain: x' of one step is x of the next
    assert torch.equal(trajectory.latents[:, 1:], trajectory.next_latents[:, :-1])
    assert trajectory.guidance_scale == BASE_OPTIONS["cfg"]


def test_recorded_log_probs_rescore_to_themselves(tiny_model: DiffusionModel, flow_sde: Sampler) -> None:
    """The update re-scores (x, x') with the same model and sampler: the ratio must start at 1."""
    batch = _generate(_rollout(), tiny_model, flow_sde, _request(PROMPTS, SEEDS))
    trajectory = batch.trajectory
    assert trajectory is not None
    for k in range(len(WINDOW)):
        with torch.no_grad():
            velocity = tiny_model.predict_velocity(
                trajectory.latents[:, k], trajectory.sigmas[:, k], batch.conditioning, trajectory.guidance_scale
            )
        step: SamplerStep = flow_sde.step(
            trajectory.latents[:, k],
            velocity,
            trajectory.sigmas[:, k],
            trajectory.next_sigmas[:, k],
            sigma_max=trajectory.sigma_max,
            prev_sample=trajectory.next_latents[:, k],
        )
        assert step.log_prob is not None
        torch.testing.assert_close(step.log_prob, trajectory.log_probs[:, k], rtol=0, atol=1e-5)


def test_eval_mode_uses_eval_steps_and_records_nothing(tiny_model: DiffusionModel, flow_sde: Sampler) -> None:
    rollout = _rollout(eval_cfg=2.0, batch_size=4)
    model, sampler = SpyModel(tiny_model), SpySampler(flow_sde)
    # record_trajectory stays True: eval mode must ignore it
    request = _request(PROMPTS, SEEDS, mode="eval", step=-1)
    batch = _generate(rollout, model, sampler, request)
    assert batch.trajectory is None
    assert len(batch) == len(PROMPTS) and tuple(batch.images.shape) == (len(PROMPTS), SIZE, SIZE, 3)
    assert model.schedules == [BASE_OPTIONS["eval_steps"]]
    assert len(model.velocity_inputs) == BASE_OPTIONS["eval_steps"]
    assert {guidance for _, _, guidance in model.velocity_inputs} == {2.0}
    assert sampler.step_sigmas == [], "eval is the deterministic ODE: the sampler takes no step"


def test_eval_guidance_defaults_to_cfg() -> None:
    assert _rollout(cfg=3.0).eval_guidance_scale == 3.0
    assert _rollout(cfg=3.0, eval_cfg=1.0).eval_guidance_scale == 1.0


def test_distinct_seeds_give_distinct_images(tiny_model: DiffusionModel, flow_sde: Sampler) -> None:
    prompt = "a red square"
    batch = _generate(_rollout(), tiny_model, flow_sde, _request([prompt] * 3, [5, 6, 5]))
    assert not torch.equal(batch.images[0], batch.images[1])
    assert not torch.allclose(batch.final_latents[0], batch.final_latents[1], atol=1e-3)
    # the repeated seed gives the same sample (to matmul rounding: its rows sit elsewhere in the batch)
    torch.testing.assert_close(batch.final_latents[2], batch.final_latents[0], rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"height": 36}, "height"),
        ({"width": 100}, "width"),
        ({"height": 0}, "height"),
        ({"group_size": 0}, "group_size"),
        ({"steps": 0}, "steps"),
        ({"eval_steps": -1}, "eval_steps"),
        ({"batch_size": 0}, "batch_size"),
        ({"cfg": -1.0}, "cfg"),
    ],
)
def test_config_rejects_bad_values(changes: dict[str, Any], field: str) -> None:
    (spec,) = hooks.omni_rl_rollout_backends()
    with pytest.raises(ConfigError, match=field):
        structure_options(spec, {**BASE_OPTIONS, **changes})


def test_sizes_must_be_multiples_of_8() -> None:
    with pytest.raises(ValueError, match="multiple of 8"):
        DiffusersRolloutConfig(height=36)
    assert DiffusersRolloutConfig(height=8, width=1024).height == 8


def test_shared_initial_noise_starts_a_group_from_one_x_t(tiny_model: DiffusionModel, flow_sde: Sampler) -> None:
    """DanceGRPO's shared x_T: a group's samples start alike and differ only by the window's SDE noise."""
    spy = SpyModel(tiny_model)
    _generate(_rollout(shared_initial_noise=True), spy, flow_sde, _request(PROMPTS, SEEDS))
    x_t = spy.velocity_inputs[0][0]  # the first transformer call sees the initial latents
    torch.testing.assert_close(x_t[1], x_t[0], rtol=0, atol=0)
    torch.testing.assert_close(x_t[3], x_t[2], rtol=0, atol=0)
    assert not torch.allclose(x_t[0], x_t[2])
    shared = _generate(_rollout(shared_initial_noise=True), tiny_model, flow_sde, _request(PROMPTS, SEEDS))
    assert not torch.allclose(shared.final_latents[0], shared.final_latents[1], atol=1e-3)  # the window's noise


def test_shared_initial_noise_is_the_same_on_any_worker(tiny_model: DiffusionModel, flow_sde: Sampler) -> None:
    """x_T comes from (run seed, step, group), so a shard holding half a group gets the group's x_T."""
    whole = _generate(_rollout(shared_initial_noise=True), tiny_model, flow_sde, _request(PROMPTS, SEEDS))
    shard = attrs.evolve(_request(PROMPTS, SEEDS), prompts=PROMPTS[1:3], group_ids=[0, 1], seeds=SEEDS[1:3])
    half = _generate(_rollout(shared_initial_noise=True), tiny_model, flow_sde, shard)
    torch.testing.assert_close(half.final_latents, whole.final_latents[1:3], rtol=0, atol=1e-5)
    later = _generate(
        _rollout(shared_initial_noise=True), tiny_model, flow_sde, attrs.evolve(_request(PROMPTS, SEEDS), step=1)
    )
    assert not torch.allclose(later.final_latents[0], whole.final_latents[0], atol=1e-3)  # a new x_T each step


def test_shared_initial_noise_leaves_validation_alone(tiny_model: DiffusionModel, flow_sde: Sampler) -> None:
    request = attrs.evolve(_request(PROMPTS, SEEDS), mode="eval", record_trajectory=False)
    plain = _generate(_rollout(), tiny_model, flow_sde, request)
    shared = _generate(_rollout(shared_initial_noise=True), tiny_model, flow_sde, request)
    torch.testing.assert_close(shared.final_latents, plain.final_latents, rtol=0, atol=0)


class SolverSpy:
    """Delegates to a sampler that has ``deterministic_solver`` and logs every solver made, step and reset."""

    def __init__(self, sampler: Any) -> None:
        self.sampler = sampler
        self.stochastic = sampler.stochastic
        self.calls: list[list[Any]] = []  # one list per solver made: ("step", sigma) or "reset"

    def window(self, step: int, num_steps: int, seed: int) -> range:
        return self.sampler.window(step, num_steps, seed)

    def step(self, *args: Any, **kwargs: Any) -> Any:
        return self.sampler.step(*args, **kwargs)

    def deterministic_solver(self) -> Any:
        inner, log = self.sampler.deterministic_solver(), []
        self.calls.append(log)

        class Logged:
            def step(self, x: torch.Tensor, velocity: torch.Tensor, sigma: torch.Tensor, nxt: torch.Tensor) -> Any:
                log.append(("step", round(float(sigma[0]), 6)))
                return inner.step(x, velocity, sigma, nxt)

            def reset(self) -> None:
                log.append("reset")
                inner.reset()

        return Logged()


def test_the_default_euler_solver_changes_no_bit(tiny_model: DiffusionModel, flow_sde: Sampler) -> None:
    """flow_sde's ``deterministic_solver()`` (ode_solver = "euler") gives the rollout the backend's inline Euler
    step gives a sampler without the optional member (SpySampler has none)."""
    assert callable(getattr(flow_sde, "deterministic_solver", None))
    assert getattr(SpySampler(flow_sde), "deterministic_solver", None) is None
    with_solver = _generate(_rollout(batch_size=3), tiny_model, flow_sde, _request(PROMPTS, SEEDS))
    inline = _generate(_rollout(batch_size=3), tiny_model, SpySampler(flow_sde), _request(PROMPTS, SEEDS))
    assert torch.equal(with_solver.final_latents, inline.final_latents)
    assert with_solver.trajectory is not None and inline.trajectory is not None
    assert torch.equal(with_solver.trajectory.latents, inline.trajectory.latents)
    assert torch.equal(with_solver.trajectory.log_probs, inline.trajectory.log_probs)


def test_steps_outside_the_window_go_through_one_solver_per_chunk(tiny_model: DiffusionModel) -> None:
    """6 steps, window on steps 1 and 2, DPM-Solver++(2M): per chunk a fresh solver takes step 0, is reset after
    each stochastic step, then takes steps 3-5; validation makes no solver (plain Euler)."""
    options = {"noise_level": 0.7, "window_size": 2, "window_range": [1, 3], "window_mode": "fixed"}
    flash = _build(
        "omni_rl_flow_grpo.hooks", "omni_rl_samplers", "flow_sde", {**options, "ode_solver": "dpm_solver_2m"}
    )
    euler = _build("omni_rl_flow_grpo.hooks", "omni_rl_samplers", "flow_sde", options)
    spy = SolverSpy(flash)
    rollout = _rollout(steps=6, batch_size=3)  # 2 chunks (3 + 1)
    batch = _generate(rollout, tiny_model, spy, _request(PROMPTS, SEEDS))
    schedule = [round(float(s), 6) for s in tiny_model.sigma_schedule(6, SIZE, SIZE)]
    expected = [("step", schedule[0]), "reset", "reset", *[("step", schedule[j]) for j in (3, 4, 5)]]
    assert spy.calls == [expected, expected]
    # the window's input is reached by one first-order step (= Euler up to rounding); step 4 is second order
    plain = _generate(rollout, tiny_model, euler, _request(PROMPTS, SEEDS))
    assert batch.trajectory is not None and plain.trajectory is not None
    torch.testing.assert_close(batch.trajectory.latents[:, 0], plain.trajectory.latents[:, 0], rtol=0, atol=1e-5)
    assert not torch.allclose(batch.final_latents, plain.final_latents, atol=1e-4)

    spy.calls.clear()
    evaluated = _generate(rollout, tiny_model, spy, _request(PROMPTS, SEEDS, mode="eval", step=-1))
    assert spy.calls == []
    reference = _generate(rollout, tiny_model, euler, _request(PROMPTS, SEEDS, mode="eval", step=-1))
    assert torch.equal(evaluated.final_latents, reference.final_latents)


class ConditionedSpy(SpyModel):
    """The model as an editing model: ``encode_conditions`` adds each prompt's source (a mean colour) to the text
    conditioning, and records what it is asked to encode."""

    def __init__(self, model: DiffusionModel) -> None:
        super().__init__(model)
        self.encoded: list[tuple[str, tuple[int, ...]]] = []

    def encode_conditions(self, prompts: list[str], images: list[list[Any]], *, guidance_scale: float) -> Conditioning:
        (prompt,), (sources,) = prompts, images  # one (prompt, sources) pair per call
        self.encoded.append((prompt, tuple(int(source[0, 0, 0]) for source in sources)))
        conditioning = self.model.encode_prompts([prompt], guidance_scale=guidance_scale)
        colour = torch.tensor([[float(source.mean()) for source in sources]])
        return Conditioning({**conditioning.tensors, "source_colour": colour})


def test_condition_images_are_encoded_once_per_group_and_kept_with_the_batch(
    tiny_model: DiffusionModel, flow_sde: Sampler
) -> None:
    """One ``encode_conditions`` call per distinct (prompt, sources) pair, even when two groups share a prompt
    with different sources, and the conditioning the batch keeps (for the update) holds each sample's source."""
    import numpy as np

    red, blue = (np.full((8, 8, 3), value, dtype=np.uint8) for value in (10, 200))
    prompts = ["make it green"] * 4
    request = RolloutRequest(
        prompts=prompts, group_ids=[0, 0, 1, 1], seeds=SEEDS, step=0, conditions=[(red,), (red,), (blue,), (blue,)]
    )
    model = ConditionedSpy(tiny_model)
    batch = _generate(_rollout(), model, SpySampler(flow_sde), request)
    assert model.encoded == [("make it green", (10,)), ("make it green", (200,))]
    assert batch.conditioning.tensors["source_colour"][:, 0].tolist() == [10.0, 10.0, 200.0, 200.0]
    sub = request.select([2, 3])
    assert [c[0][0, 0, 0] for c in sub.conditions] == [200, 200] and sub.prompts == prompts[2:]


def test_a_model_without_encode_conditions_refuses_condition_images(
    tiny_model: DiffusionModel, flow_sde: Sampler
) -> None:
    import numpy as np

    source = (np.zeros((8, 8, 3), dtype=np.uint8),)
    request = attrs.evolve(_request(PROMPTS, SEEDS), conditions=[source] * 4)
    with pytest.raises(ConfigError, match="takes no condition images"):
        _generate(_rollout(), SpyModel(tiny_model), flow_sde, request)
