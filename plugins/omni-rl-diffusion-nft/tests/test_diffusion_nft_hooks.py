"""Discovery: the entry point, light imports, and the preset's options against the components' configs."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

from omni_rl_diffusion_nft import hooks
from omni_rl_diffusion_nft.presets import diffusion_nft_defaults

from omni_rl.config.converter import make_converter
from omni_rl.config.schema import OptimConfig


def test_entry_point_points_at_hooks() -> None:
    eps = importlib.metadata.entry_points(group="omni_rl")
    assert "omni_rl_diffusion_nft.hooks" in {ep.value for ep in eps}


def test_hooks_import_without_torch_or_numpy() -> None:
    code = (
        "import sys, omni_rl_diffusion_nft.hooks as h; h.omni_rl_losses(); h.omni_rl_algorithms();"
        "print(sorted(m for m in ('torch', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_preset_options_structure_strictly() -> None:
    """Every option the preset writes is a real field (unknown keys are errors, as in the config loader)."""
    strict = make_converter()  # the config loader's own (unknown keys forbidden, `int | "auto"` fields)
    defaults = diffusion_nft_defaults()
    (loss_spec,) = hooks.omni_rl_losses()
    loss = strict.structure(defaults["loss"]["options"], loss_spec.config)
    assert loss.train_timesteps == 9
    optim = strict.structure(defaults["optim"], OptimConfig)
    assert (optim.lr, optim.weight_decay, optim.grad_clip, optim.mini_batch) == (3e-4, 1e-4, 1.0, 0)
    assert defaults["sampler"] == {"name": "ode", "options": {}}
    assert defaults["rollout"]["options"]["cfg"] == 1.0
    assert defaults["rollout"]["options"]["steps"] == defaults["loss"]["options"]["num_steps"]


def test_defaults_are_fresh_copies() -> None:
    first = diffusion_nft_defaults()
    first["loss"]["options"]["beta"] = 99.0
    assert diffusion_nft_defaults()["loss"]["options"]["beta"] == 1.0
