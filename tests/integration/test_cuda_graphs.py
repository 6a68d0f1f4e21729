"""``[model] options.cuda_graphs`` (omni_rl_pipelines.cuda_graphs) on the CPU: refused there with the reason, and
refused where the old log-probs would not be recomputed or the weights are FSDP2-sharded; its plumbing (static
inputs, one graph per shape and LoRA view, cloned outputs, in-place weight updates seen, calls under gradients
left eager, the least recently used graph dropped) through a stand-in backend with a CUDA graph's data flow
(omni_rl_pipelines.testing.ReplayingGraphBackend), on the tiny SD3, FLUX, Qwen-Image and Wan pipelines. The capture
itself needs CUDA: tests/gpu/test_gpu_cuda_graphs.py."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
import torch
from omni_rl_pipelines.cuda_graphs import GraphedCalls, lora_view
from omni_rl_pipelines.testing import ReplayingGraphBackend, first_update_ratio

from omni_rl import build, load_config
from omni_rl.errors import ConfigError, RuntimeFailure
from omni_rl.protocols import RolloutRequest

PROMPTS = ["a red circle", "a red circle", "two blue squares", "two blue squares"]
EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "sd3_tiny_jpeg.toml"


def _rollout(cfg: float, batch_size: int = 3, size: int = 32):
    options = {"group_size": 2, "steps": 3, "height": size, "width": size, "cfg": cfg, "batch_size": batch_size}
    return build("rollout", "diffusers", options)


def _request() -> RolloutRequest:
    return RolloutRequest(prompts=PROMPTS, group_ids=[0, 0, 1, 1], seeds=[3, 4, 5, 6], step=1, mode="train")


@pytest.fixture(scope="module")
def sampler():
    return build("sampler", "flow_sde", {"window_size": 2, "window_range": [0, 2], "window_mode": "fixed"})


def _model(name: str, path: Path, **options: object):
    return build("model", name, {"path": str(path), "lora_rank": 4, **options})


def _graphed(model) -> ReplayingGraphBackend:
    """Serve ``model``'s no-grad transformer calls through the stand-in backend (``cuda_graphs`` itself is refused
    on the CPU) and make the model report the option on, as a model built with it on a GPU does."""
    backend = ReplayingGraphBackend()
    model.graphs = GraphedCalls(backend)
    model.config = attrs.evolve(model.config, cuda_graphs=True)
    return backend


def _randomise_lora(model, seed: int = 0) -> None:
    """LoRA B starts at zero (adapters on = off); random B makes the adapters change the velocity."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.trainable_parameters():
            param.copy_(torch.randn(param.shape, generator=generator) * 0.05)


def test_cuda_graphs_is_refused_on_the_cpu(tiny_sd3: Path) -> None:
    with pytest.raises(ConfigError, match="cuda_graphs = true needs a CUDA GPU") as error:
        _model("sd3", tiny_sd3, cuda_graphs=True)
    assert "cuda_graphs = false" in (error.value.hint or "")


def test_cuda_graphs_off_by_default(tiny_sd3: Path) -> None:
    model = _model("sd3", tiny_sd3)
    assert model.graphs is None and not model.config.cuda_graphs and not model.old_log_probs_with_grad


@pytest.mark.parametrize(
    "sets",
    [["optim.recompute_old_log_probs=false"], ['rollout_correction.mode="bypass"']],
    ids=["reuse", "bypass"],
)
def test_cuda_graphs_without_a_recompute_is_refused(tiny_sd3: Path, sets: list[str]) -> None:
    with pytest.raises(ConfigError, match=r"recomputed through the trained forward.*@ \$\.model\.options\.cuda_graphs"):
        load_config(EXAMPLE, [f"model.options.path={tiny_sd3}", "model.options.cuda_graphs=true", *sets])


def test_cuda_graphs_with_fsdp2_is_refused(tiny_sd3: Path) -> None:
    sets = [
        f"model.options.path={tiny_sd3}",
        "model.options.cuda_graphs=true",
        "optim.recompute_old_log_probs=true",
        'cluster.strategy="fsdp2"',
    ]
    with pytest.raises(ConfigError, match=r'cuda_graphs does not work with \[cluster\] strategy = "fsdp2"'):
        load_config(EXAMPLE, sets)


@pytest.mark.parametrize(
    ("name", "fixture", "cfg", "calls_per_step"),
    [
        ("sd3", "tiny_sd3", 4.5, 1),  # negative and positive in one call of 2B rows
        ("sd3", "tiny_sd3", 1.0, 1),
        ("flux", "tiny_flux", 1.0, 1),  # guidance-distilled: one call
        ("qwen_image", "tiny_qwen_image", 4.0, 1),  # true CFG: both halves in one call, texts padded under a mask
    ],
)
def test_graphed_rollout_equals_the_eager_one(
    name: str, fixture: str, cfg: float, calls_per_step: int, sampler, request: pytest.FixtureRequest
) -> None:
    """Chunks of 3 and 1 samples: one graph per chunk shape, every later call a replay on new latents, timesteps
    and prompts; the images, latents and log-probs are those of the same model without graphs, bit for bit."""
    path = request.getfixturevalue(fixture)
    eager, graphed = _model(name, path), _model(name, path)
    _randomise_lora(eager)
    _randomise_lora(graphed)
    backend = _graphed(graphed)
    a = _rollout(cfg).generate(eager, sampler, _request())
    b = _rollout(cfg).generate(graphed, sampler, _request())
    assert torch.equal(a.images, b.images)
    assert torch.equal(a.final_latents, b.final_latents)
    assert torch.equal(a.trajectory.log_probs, b.trajectory.log_probs)
    # the 3-sample chunk and the last 1-sample chunk
    assert backend.captured == graphed.graphs.captures == 2 * calls_per_step
    assert graphed.graphs.replays == 2 * 3 * calls_per_step  # two chunks x three steps, every call a replay


def test_graphed_wan_rollout_equals_the_eager_one(sampler, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The video model calls its transformer through the same path (positive and negative prompts apart)."""
    from omni_rl_wan.tiny import build_tiny_wan_pipeline

    path = Path(build_tiny_wan_pipeline(tmp_path_factory.mktemp("wan") / "tiny", seed=0))
    eager, graphed = _model("wan", path), _model("wan", path)
    backend = _graphed(graphed)
    options = {"group_size": 2, "steps": 2, "height": 32, "width": 32, "num_frames": 5, "cfg": 2.0, "batch_size": 4}
    a = build("rollout", "diffusers", options).generate(eager, sampler, _request())
    b = build("rollout", "diffusers", options).generate(graphed, sampler, _request())
    assert torch.equal(a.final_latents, b.final_latents)
    assert torch.equal(a.trajectory.log_probs, b.trajectory.log_probs)
    assert backend.captured == 1  # the negative prompt's call has the positive's shapes: one graph serves both


def test_lora_views_get_their_own_graphs_and_in_place_updates_are_seen(tiny_sd3: Path) -> None:
    """A graph runs the adapters it was captured with, so the reference view (adapters off) and another adapter
    are captured apart; a weight changed in place (an optimizer step) is read by the next replay."""
    eager, graphed = _model("sd3", tiny_sd3), _model("sd3", tiny_sd3)
    for model in (eager, graphed):
        _randomise_lora(model)
        model.add_adapter("old")
    _graphed(graphed)
    x = torch.randn(2, *eager.latent_shape(32, 32), generator=torch.Generator().manual_seed(1))
    conditioning = eager.encode_prompts(["a red circle", "two blue squares"], guidance_scale=1.0)

    def velocities(model) -> list[torch.Tensor]:
        with torch.no_grad():
            policy = model.predict_velocity(x, torch.tensor(0.7), conditioning, 1.0)
            with model.disable_adapters():
                reference = model.predict_velocity(x, torch.tensor(0.7), conditioning, 1.0)
            with model.use_adapter("old"):
                old = model.predict_velocity(x, torch.tensor(0.7), conditioning, 1.0)
        return [policy, reference, old]

    expected, got = velocities(eager), velocities(graphed)
    assert not torch.equal(expected[0], expected[1])  # the adapters matter
    for want, have in zip(expected, got, strict=True):
        assert torch.equal(want, have)
    assert graphed.graphs.captures == 3
    with torch.no_grad():
        for model in (eager, graphed):
            for param in model.trainable_parameters():
                param.mul_(-2.0)
    expected, got = velocities(eager), velocities(graphed)
    for want, have in zip(expected, got, strict=True):
        assert torch.equal(want, have)
    assert graphed.graphs.captures == 3  # replays only: the same tensors, new values


def test_calls_under_gradients_stay_eager(tiny_sd3: Path) -> None:
    model = _model("sd3", tiny_sd3)
    _graphed(model)
    x = torch.randn(2, *model.latent_shape(32, 32))
    conditioning = model.encode_prompts(["a", "b"], guidance_scale=1.0)
    velocity = model.predict_velocity(x, torch.tensor(0.5), conditioning, 1.0)
    assert velocity.requires_grad and model.graphs.captures == 0 and model.graphs.replays == 0


def test_the_first_ratio_is_one_with_graphs(tiny_sd3: Path, sampler) -> None:
    """The graphed rollout's log-probs are not what the update compares against: the old log-probs are
    recomputed through the trained forward, so exp(new - old) is exactly 1 before any optimizer step."""
    model = _model("sd3", tiny_sd3)
    _graphed(model)
    assert model.old_log_probs_with_grad
    batch = _rollout(4.5, batch_size=4).generate(model, sampler, _request())
    ratio, old = first_update_ratio(model, sampler, batch)
    assert ratio == 1.0
    torch.testing.assert_close(old, batch.trajectory.log_probs.float(), atol=1e-4, rtol=0)


def test_least_recently_used_graph_is_dropped(caplog: pytest.LogCaptureFixture) -> None:
    calls = GraphedCalls(ReplayingGraphBackend(), max_graphs=2)
    linear = torch.nn.Linear(3, 2)
    with torch.no_grad(), caplog.at_level("WARNING", logger="omni_rl_pipelines.cuda_graphs"):
        for rows in (1, 2, 1, 3, 2):
            x = torch.randn(rows, 3)
            assert torch.equal(calls(linear, input=x), linear(x))
    # 1 and 2 captured, 1 replayed (most recent), 3 evicts 2, so 2 is captured again
    assert calls.captures == 4 and len(calls) == 2
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "more than 2 distinct transformer call shapes" in warnings[0]  # said once


def test_outputs_are_copies_not_the_static_buffers() -> None:
    calls = GraphedCalls(ReplayingGraphBackend())
    linear = torch.nn.Linear(3, 2)
    with torch.no_grad():
        first = calls(linear, input=torch.ones(1, 3))
        kept = first.clone()
        calls(linear, input=torch.zeros(1, 3))
    assert torch.equal(first, kept)


def test_an_argument_it_cannot_key_and_a_failed_capture_say_what_to_do() -> None:
    calls = GraphedCalls(ReplayingGraphBackend())
    with torch.no_grad(), pytest.raises(RuntimeFailure, match="type object") as error:
        calls(torch.nn.Identity(), input=object())
    assert "cuda_graphs = false" in (error.value.hint or "")

    class Failing:
        def capture(self, run):  # type: ignore[no-untyped-def]
            raise RuntimeError("operation not permitted when stream is capturing")

    with torch.no_grad(), pytest.raises(RuntimeFailure, match="capturing the Linear forward failed") as error:
        GraphedCalls(Failing())(torch.nn.Linear(3, 2), input=torch.ones(1, 3))
    assert "cuda_graphs = false" in (error.value.hint or "")


def test_lora_view_reads_the_adapter_state(tiny_sd3: Path) -> None:
    model = _model("sd3", tiny_sd3)
    assert lora_view(torch.nn.Linear(2, 2)) is None
    on = lora_view(model.transformer)
    with model.disable_adapters():
        off = lora_view(model.transformer)
    assert on != off and lora_view(model.transformer) == on


def test_auto_batch_probes_run_eagerly(tiny_sd3: Path) -> None:
    """A probe's try must not capture a graph of its size (it would keep that memory and skew later tries)."""
    model = _model("sd3", tiny_sd3)
    _graphed(model)
    x = torch.randn(2, *model.latent_shape(32, 32))
    conditioning = model.encode_prompts(["a", "b"], guidance_scale=1.0)
    with torch.no_grad():
        with model.eager_forwards():
            inside = model.predict_velocity(x, torch.tensor(0.5), conditioning, 1.0)
        assert model.graphs.captures == 0 and model.graphs.replays == 0
        assert torch.equal(model.predict_velocity(x, torch.tensor(0.5), conditioning, 1.0), inside)
    assert model.graphs.captures == 1


def test_an_out_of_memory_capture_stays_an_out_of_memory_error() -> None:
    class OutOfMemory:
        def capture(self, run):  # type: ignore[no-untyped-def]
            raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    with torch.no_grad(), pytest.raises(torch.cuda.OutOfMemoryError):
        GraphedCalls(OutOfMemory())(torch.nn.Linear(3, 2), input=torch.ones(1, 3))


def test_inference_mode_calls_get_their_own_graph() -> None:
    """Static inputs made under inference mode cannot be written outside it (and the reverse needs care), so the
    two modes never share a graph."""
    calls = GraphedCalls(ReplayingGraphBackend())
    linear = torch.nn.Linear(3, 2)
    x = torch.randn(2, 3)
    with torch.inference_mode():
        first = calls(linear, input=x)
    with torch.no_grad():
        second = calls(linear, input=x)
    assert torch.equal(first, second) and calls.captures == 2
