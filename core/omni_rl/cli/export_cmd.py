"""``omni-rl export``: write a run's checkpoint as a diffusers LoRA or a merged pipeline (omni_rl.rundir.export)."""

from __future__ import annotations

import argparse

from rich.text import Text

from omni_rl.cli.output import Output
from omni_rl.cli.quiet import quiet_libraries
from omni_rl.errors import RuntimeFailure
from omni_rl.registry import Registry
from omni_rl.rundir.writable import writable_directory

#: Packages whose absence means "the training extra (or the model plugin's dependencies) is not installed".
_EXPORT_DEPENDENCIES = ("torch", "diffusers", "transformers", "peft", "safetensors")


def export_command(args: argparse.Namespace, output: Output, registry: Registry) -> int:
    from omni_rl.rundir.export import export_run

    output.plugin_warnings(registry)
    writable_directory(args.out, "--out")  # a file or a read-only place: exit 2 now, not an OSError after loading
    try:
        with quiet_libraries(enabled=not output.debug):  # one result line, not the libraries' warnings and bars
            result = export_run(
                args.run_dir, args.out, step=args.step, merged=args.merged, overrides=args.set or (), registry=registry
            )
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in _EXPORT_DEPENDENCIES:
            raise
        raise RuntimeFailure(
            f"export needs {exc.name!r}, which is not importable ({exc})",
            hint="install the training extra and the run's model plugin, e.g. pip install 'omni-rl[train]' omni-rl-sd3",
        ) from exc
    if not result.verified:
        output.warning(
            f"checkpoint {result.checkpoint} has no manifest (written by an older omni-rl): its files "
            "could not be verified"
        )
    what = "merged pipeline" if result.merged else "LoRA"
    output.success(f"exported the {what} of step {result.step} ({result.checkpoint}) to {result.directory}")
    if result.merged:
        usage = f"DiffusionPipeline.from_pretrained({str(result.directory)!r})"
    else:
        usage = f"pipe.load_lora_weights({str(result.directory)!r})  # pipe: the base pipeline"
    output.print(Text(f"load it with: {usage}"))
    return 0
