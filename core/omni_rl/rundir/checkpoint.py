"""Checkpoints that survive preemption: atomic directories, a ``latest`` pointer, and no pickle anywhere.

Layout of ``<run_dir>/checkpoints/step_<N>/``:

- ``pytorch_lora_weights.safetensors``: the LoRA in diffusers format (what users load), written by the model;
- ``worker_<rank>/trainable.safetensors``: every trainable parameter by name (exact resume, LoRA or full);
- ``worker_<rank>/adapters.safetensors``: the frozen LoRA weights (every ``lora_`` parameter or buffer that is
  not trainable: a loss's extra adapters, DiffusionNFT's "old", AWM's "old" and "ema"), which move during
  training without the optimizer and so are part of the state; absent in checkpoints of older versions;
- ``worker_<rank>/update_state.json``: counters of the update engine (optimizer steps taken, which drive
  DiffusionNFT's decay schedule) and the loss's ``checkpoint_state()``; absent in older checkpoints;
- ``worker_<rank>/optimizer.safetensors`` + ``optimizer.json``: optimizer tensors and the rest of its state;
- ``worker_<rank>/rng.safetensors`` + ``rng.json``: torch / numpy / python RNG states; ``scheduler.json``;
- ``trainer_state.json``: step, prompt-sampler position, skip counter (the driver's state);
- ``driver/rng.safetensors`` + ``driver/rng.json``: the driver process's own RNG states (absent in older
  checkpoints).

Under ``[cluster] strategy = "fsdp2"`` the weights and optimizer tensors are sharded across the workers: they are
gathered whole and written once, in ``worker_0/`` (``trainable``, ``adapters``, ``optimizer``), and every worker
reads them back whole and keeps its shard. The other files stay per worker. The tensor files therefore look the
same whatever the strategy.

``manifest.json``: every other file's size and SHA-256, written last (omni_rl.rundir.manifest). Loading checks each
file against it while reading; a checkpoint that fails is moved into ``checkpoints/damaged/`` by the run that
finds it (never deleted) and ``resume = "auto"`` falls back to the newest one that verifies.

A checkpoint is written into ``.tmp_step_<N>`` and renamed when complete; ``checkpoints/latest`` (a one-line
file naming the directory) is replaced last, atomically. A crash or a full disk at any point leaves the
previous checkpoint and pointer intact. Loading reads only safetensors and JSON: nothing is unpickled.

A run resumed from an older checkpoint (``resume = "<path>"``) starts a new branch: when it publishes step N,
the step directories >= N of the old branch are moved into ``checkpoints/abandoned/`` (kept, never counted as
the newest), so ``keep_last`` prunes only the live branch and never the checkpoint just written.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from omni_rl.rundir.manifest import CheckpointReader, write_manifest

LATEST = "latest"
#: where checkpoints that failed verification are moved (kept for inspection, never counted as the newest)
DAMAGED = "damaged"
#: where the checkpoints of a branch abandoned by resuming from an older step are kept
ABANDONED = "abandoned"
#: the driver's RNG states inside a checkpoint (the workers' are in ``worker_<rank>/``)
DRIVER_DIR = "driver"
STEP_DIR = re.compile(r"^step_(\d+)$")


# -- the directory protocol --------------------------------------------------------------------------------
def checkpoints_dir(run_dir: Path) -> Path:
    return run_dir / "checkpoints"


def staging_dir(run_dir: Path, step: int) -> Path:
    path = checkpoints_dir(run_dir) / f".tmp_step_{step}"
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def publish(run_dir: Path, staging: Path, step: int, keep_last: int) -> Path:
    """Rename the complete staging directory to ``step_<N>``, point ``latest`` at it, then prune.

    Step directories >= N belong to a branch this run abandoned by resuming from an older checkpoint: they are
    renamed into ``abandoned/`` first, so at every instant ``latest`` (or, while it names a moved directory, the
    highest ``step_<N>`` it falls back to) is a complete checkpoint of the live branch. ``keep_last`` then
    deletes the oldest live checkpoints, never the one just written; each is renamed aside before it is
    deleted, so a crash mid-delete leaves no half-deleted ``step_<N>`` to fall back to.
    """
    root = checkpoints_dir(run_dir)
    final = root / f"step_{step}"
    write_manifest(staging)  # hashes and fsyncs every file in one pass, then writes the manifest, last
    for stale in list_checkpoints(run_dir):
        if step_of(stale) >= step:
            _move_into(stale, root / ABANDONED)
    staging.rename(final)
    write_text_atomic(root / LATEST, final.name + "\n")
    if keep_last > 0:
        older = [p for p in list_checkpoints(run_dir) if p != final]
        for old in older[: max(0, len(older) - (keep_last - 1))]:
            _delete(old)
    for leftover in [*root.glob(".trash_*"), *(root / ABANDONED).glob(".trash_*")]:  # interrupted deletions
        shutil.rmtree(leftover, ignore_errors=True)
    return final


def step_of(path: Path) -> int:
    match = STEP_DIR.match(path.name)
    assert match is not None, path
    return int(match.group(1))


def quarantine(path: Path) -> Path:
    """Move a checkpoint that failed verification into ``checkpoints/damaged/`` (a later copy of the same step
    gets a numbered name): it is kept for inspection and never taken as the newest again."""
    folder = path.parent / DAMAGED
    folder.mkdir(exist_ok=True)
    target = folder / path.name
    n = 1
    while target.exists():
        n += 1
        target = folder / f"{path.name}.{n}"
    path.rename(target)
    return target


def _move_into(path: Path, folder: Path) -> None:
    """Rename ``path`` into ``folder``, replacing an older directory of that name (an earlier abandoned branch)."""
    folder.mkdir(exist_ok=True)
    target = folder / path.name
    if target.exists():
        _delete(target)
    path.rename(target)


def _delete(path: Path) -> None:
    """Rename aside (atomic), then delete: the name disappears at once even if the delete is interrupted."""
    trash = path.parent / f".trash_{path.name}_{os.getpid()}"
    shutil.rmtree(trash, ignore_errors=True)
    path.rename(trash)
    shutil.rmtree(trash, ignore_errors=True)


def list_checkpoints(run_dir: Path) -> list[Path]:
    """Complete checkpoint directories, oldest first (staging directories are never listed)."""
    return step_dirs(checkpoints_dir(run_dir))


def step_dirs(folder: Path) -> list[Path]:
    """The ``step_<N>`` directories in ``folder`` (``checkpoints/`` or its ``abandoned/``), oldest first."""
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if p.is_dir() and (m := STEP_DIR.match(p.name))]
    return [p for _, p in sorted(found)]


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The checkpoint ``latest`` names, or (older runs, lost pointer) the highest complete step directory."""
    pointer = checkpoints_dir(run_dir) / LATEST
    if pointer.is_file():
        candidate = checkpoints_dir(run_dir) / pointer.read_text().strip()
        if (candidate / "trainer_state.json").is_file():
            return candidate
    complete = [p for p in list_checkpoints(run_dir) if (p / "trainer_state.json").is_file()]
    return complete[-1] if complete else None


def model_files(reader: CheckpointReader) -> list[str]:
    """The files a model's ``save_lora`` wrote: every listed file but the workers', the driver's and the trainer
    state (what ``omni-rl export`` hands to the model's ``load_lora``); none for a checkpoint without manifest."""
    if reader.files is None:
        return []
    own = ("worker_", f"{DRIVER_DIR}/", "trainer_state.json")
    return [rel for rel in reader.files if not rel.startswith(own)]


def verify_model_files(directory: Path) -> CheckpointReader:
    """A reader of the checkpoint after checking every listed file's size and the hashes of the model's files
    (:func:`model_files`, which no worker reads: the driver checks them on resume, ``omni-rl export`` before
    loading them). Raises CheckpointDamaged naming the first file that fails; the reader's ``verified`` is False
    for a checkpoint of an older version (no manifest)."""
    reader = CheckpointReader(directory)
    reader.check_sizes()
    for rel in model_files(reader):
        reader.check(rel)
    return reader


def write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def write_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=1, sort_keys=True), encoding="utf-8")


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


# -- tensors without pickle --------------------------------------------------------------------------------
# Sharded (FSDP2) tensors are gathered one at a time by every worker (a collective, so every worker calls the
# save with the same module); ``path`` None means "take part in the gathers, write nothing" (ranks > 0).
def _save_tensors(tensors: dict[str, Any], path: Path | None) -> None:
    from safetensors.torch import save_file

    from omni_rl.engine.fsdp import gather_state

    gathered = gather_state(tensors, keep=path is not None)
    if gathered is not None and path is not None:
        save_file(gathered, str(path))


def save_trainable(module: Any, path: Path | None) -> None:
    _save_tensors({n: p for n, p in module.named_parameters() if p.requires_grad}, path)


def _load_file(path: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(path))


def _apply_named(targets: dict[str, Any], tensors: dict[str, Any], source: Path | str, what: str) -> None:
    """Copy ``tensors`` (read from ``source``) into ``targets`` by name; both must hold exactly the same names."""
    from omni_rl.engine.fsdp import copy_full_into

    missing = sorted(set(targets) - set(tensors))
    unexpected = sorted(set(tensors) - set(targets))
    if missing or unexpected:
        raise ValueError(
            f"checkpoint {source} does not match the model's {what} (missing {missing[:3]}, "
            f"unexpected {unexpected[:3]})"
        )
    for name, target in targets.items():
        copy_full_into(target, tensors[name])


def apply_trainable(module: Any, tensors: dict[str, Any], source: Path | str) -> None:
    targets = {n: p for n, p in module.named_parameters() if p.requires_grad}
    _apply_named(targets, tensors, source, "trainable parameters")


def frozen_lora(module: Any) -> dict[str, Any]:
    """Every parameter or buffer of a LoRA layer (peft's ``lora_`` names) that the optimizer does not train."""
    found = {n: p for n, p in module.named_parameters() if "lora_" in n and not p.requires_grad}
    found.update((n, b) for n, b in module.named_buffers() if "lora_" in n)
    return found


def save_frozen_adapters(module: Any, path: Path | None) -> None:
    """The extra (non-trainable) LoRA adapters' weights by name; an empty file when there are none."""
    _save_tensors(frozen_lora(module), path)


def load_frozen_adapters(module: Any, path: Path) -> bool:
    """Restore what :func:`save_frozen_adapters` wrote; False (nothing changed) when ``path`` does not exist,
    as in checkpoints of versions that did not save the extra adapters."""
    if not path.is_file():
        return False
    apply_frozen_adapters(module, _load_file(path), path)
    return True


def apply_frozen_adapters(module: Any, tensors: dict[str, Any], source: Path | str) -> None:
    _apply_named(frozen_lora(module), tensors, source, "extra LoRA adapters")


def save_optimizer(optimizer: Any, directory: Path | None) -> None:
    """Tensors to safetensors (``state.<param index>.<key>``), everything else to JSON; sharded state (FSDP2) is
    gathered whole (every worker calls this; ``directory`` None writes nothing)."""
    import torch

    state = optimizer.state_dict()
    tensors: dict[str, Any] = {}
    scalars: dict[str, Any] = {}
    for index, entry in state["state"].items():
        for key, value in entry.items():
            if isinstance(value, torch.Tensor):
                tensors[f"state.{index}.{key}"] = value
            else:
                scalars[f"{index}.{key}"] = value
    _save_tensors(tensors, None if directory is None else directory / "optimizer.safetensors")
    if directory is not None:
        write_json(directory / "optimizer.json", {"param_groups": state["param_groups"], "scalars": scalars})


def apply_optimizer(optimizer: Any, tensors: dict[str, Any], meta: dict[str, Any]) -> None:
    """Restore the optimizer from its tensors and JSON; whole tensors of a sharded parameter's state are cut to
    this worker's shard."""
    from omni_rl.engine.fsdp import is_sharded, shard_like

    state: dict[int, dict[str, Any]] = {}
    for name, value in tensors.items():
        _, index, key = name.split(".", 2)
        state.setdefault(int(index), {})[key] = value
    for name, value in meta["scalars"].items():
        index, key = name.split(".", 1)
        state.setdefault(int(index), {})[key] = value
    params = [p for group in optimizer.param_groups for p in group["params"]]
    for index, entry in state.items():
        param = params[index] if index < len(params) else None
        if param is not None and is_sharded(param):
            for key, value in entry.items():
                if hasattr(value, "shape") and tuple(value.shape) == tuple(param.shape):
                    entry[key] = shard_like(value, param)
    groups = meta["param_groups"]
    for group in groups:
        if "betas" in group:
            group["betas"] = tuple(group["betas"])
    optimizer.load_state_dict({"state": state, "param_groups": groups})


def seed_global_rngs(seed: int) -> None:
    """Seed this process's python, numpy and torch global RNGs, so whatever draws from them repeats per seed."""
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def save_rng(directory: Path) -> None:
    import torch
    from safetensors.torch import save_file

    np_state = np.random.get_state()
    py_version, py_state, py_gauss = random.getstate()
    tensors = {"torch": torch.get_rng_state(), "numpy_keys": torch.from_numpy(np_state[1].astype(np.int64))}
    if torch.cuda.is_available():
        tensors["cuda"] = torch.cuda.get_rng_state()
    save_file(tensors, str(directory / "rng.safetensors"))
    write_json(
        directory / "rng.json",
        {
            "numpy": {
                "algorithm": np_state[0],
                "pos": int(np_state[2]),
                "has_gauss": int(np_state[3]),
                "cached_gaussian": float(np_state[4]),
            },
            "python": {"version": py_version, "state": list(py_state), "gauss": py_gauss},
        },
    )


def load_rng(directory: Path) -> None:
    apply_rng(_load_file(directory / "rng.safetensors"), read_json(directory / "rng.json"))


def apply_rng(tensors: dict[str, Any], meta: dict[str, Any]) -> None:
    """Set this process's torch / numpy / python RNG states from what :func:`save_rng` wrote."""
    import torch

    torch.set_rng_state(tensors["torch"])
    if "cuda" in tensors and torch.cuda.is_available():
        torch.cuda.set_rng_state(tensors["cuda"])
    n = meta["numpy"]
    keys = tensors["numpy_keys"].numpy().astype(np.uint32)
    np.random.set_state((n["algorithm"], keys, n["pos"], n["has_gauss"], n["cached_gaussian"]))
    p = meta["python"]
    random.setstate((p["version"], tuple(p["state"]), p["gauss"]))
